/**
 * `tokenwatch store migrate` and `tokenwatch store copy` (docs/store.md):
 * - `store migrate [--config FILE]`: applies the schema migrations to the configured store (SQLite `store.path` or
 *   `store.postgres`) and prints its schema version; what `serve` does at start, run ahead of an upgrade (e.g. as a
 *   Helm hook or a Job) so replicas start on a migrated schema.
 * - `store copy --from sqlite:PATH --to postgres://USER@HOST[:PORT]/DATABASE [--force]` (or `--to config`: the
 *   configured `store.postgres`): online backup of the SQLite store, then every table copied into PostgreSQL in one
 *   transaction, row counts verified (src/store/copy.ts). Progress on stderr, the summary on stdout.
 *
 * Exit codes: 0 done; 1 the store refused or failed (one line `tokenwatch: store …: why` on stderr); 2 bad arguments
 * or an invalid configuration.
 */
import { type Command, Option } from 'commander';
import { UsageError } from '../program.js';

/** Options for {@link register}, for tests. */
export interface StoreCommandDeps {
  /** Environment for `TOKENWATCH_CONFIG` and password variables (default `process.env`). */
  env?: NodeJS.ProcessEnv;
}

const SSL_MODES = ['disable', 'require', 'verify-ca', 'verify-full'];

/** Adds the `store` command group to `program`. */
export function register(program: Command, deps: StoreCommandDeps = {}): void {
  const group = program.command('store').description('migrate the store, or copy a SQLite store into PostgreSQL');
  group
    .command('migrate')
    .description('apply the schema migrations to the configured store and print its schema version')
    .option('--config <file>', 'config file (default: env TOKENWATCH_CONFIG)')
    .action(async (_opts: unknown, cmd: Command) => {
      const env = deps.env ?? process.env;
      const { loadConfig, resolveConfigPath } = await import('../../config/load.js');
      const config = loadConfig(resolveConfigPath(cmd.optsWithGlobals<{ config?: string }>().config, env), env);
      await reportStoreErrors('store migrate', async () => {
        const out = (s: string) => process.stdout.write(s);
        if (config.store.postgres !== undefined) {
          const { openPostgres, postgresOptionsOf, describePostgres } = await import('../../store/postgres.js');
          const { migratePostgres } = await import('../../store/migrations-postgres.js');
          const options = postgresOptionsOf(config.store.postgres);
          const sql = openPostgres({ ...options, poolSize: 1 });
          try {
            const r = await migratePostgres(sql);
            out(`PostgreSQL store ${describePostgres(options)}: schema version ${r.version} (${r.applied} step${r.applied === 1 ? '' : 's'} applied now; this tokenwatch knows ${r.known})\n`);
          } finally {
            await sql.close();
          }
        } else {
          const { openStore } = await import('../../store/index.js');
          const store = await openStore(config.store.path);
          try {
            out(`SQLite store ${config.store.path}: schema version ${store.schemaVersion}\n`);
          } finally {
            await store.close();
          }
        }
      });
    });

  group
    .command('copy')
    .description('copy a SQLite store into an empty PostgreSQL store (online backup first; one transaction; row counts verified)')
    .requiredOption('--from <sqlite:PATH>', 'the SQLite store file, as sqlite:PATH')
    .requiredOption('--to <postgres://USER@HOST[:PORT]/DATABASE|config>', 'the PostgreSQL store (no password in the URL), or "config" for store.postgres of --config')
    .option('--config <file>', 'config file for --to config (default: env TOKENWATCH_CONFIG)')
    .option('--password-file <file>', 'file holding the PostgreSQL password (with a URL)')
    .option('--password-env <name>', 'environment variable holding the PostgreSQL password (with a URL)')
    .addOption(new Option('--sslmode <mode>', 'TLS mode (with a URL)').choices(SSL_MODES).default('verify-full'))
    .option('--ca-file <file>', 'CA certificates of the server (with a URL; verify-ca, verify-full)')
    .option('--force', 'replace the rows of a non-empty target instead of refusing', false)
    .action(async (opts: { from: string; to: string; config?: string; passwordFile?: string; passwordEnv?: string; sslmode: string; caFile?: string; force: boolean }) => {
      const env = deps.env ?? process.env;
      if (!opts.from.startsWith('sqlite:') || opts.from.length === 'sqlite:'.length) throw new UsageError(`--from: expected sqlite:PATH, got ${JSON.stringify(opts.from)}`);
      const sqlitePath = opts.from.slice('sqlite:'.length);
      const { openPostgres, postgresOptionsOf, describePostgres } = await import('../../store/postgres.js');
      type Options = Parameters<typeof openPostgres>[0];
      let options: Options;
      if (opts.to === 'config') {
        const { loadConfig, resolveConfigPath } = await import('../../config/load.js');
        const config = loadConfig(resolveConfigPath(opts.config, env), env);
        if (config.store.postgres === undefined) throw new UsageError('--to config: the config has no store.postgres');
        options = postgresOptionsOf(config.store.postgres);
      } else {
        const { parsePostgresUrl } = await import('../../config/schema.js');
        const at = parsePostgresUrl(opts.to);
        if ('problems' in at) {
          const problems = at.problems.map((p) => p.replace('use store.postgres.passwordFrom', 'use --password-file or --password-env (a password in an argument shows in the process list)').replace(/give TLS and pool settings as store\.postgres fields.*$/, 'use --sslmode and --ca-file'));
          throw new UsageError(`--to: ${problems.join('; ')}`);
        }
        if (opts.passwordFile !== undefined && opts.passwordEnv !== undefined) throw new UsageError('--password-file and --password-env are exclusive');
        if (opts.passwordEnv !== undefined && (env[opts.passwordEnv] ?? '') === '') throw new UsageError(`--password-env: ${opts.passwordEnv} is not set`);
        options = {
          ...at,
          sslmode: opts.sslmode as Options['sslmode'] & string,
          ...(opts.caFile !== undefined ? { caFile: opts.caFile } : {}),
          ...(opts.passwordFile !== undefined ? { passwordFrom: { file: opts.passwordFile } } : {}),
          ...(opts.passwordEnv !== undefined ? { passwordFrom: { env: opts.passwordEnv } } : {}),
        };
      }
      await reportStoreErrors('store copy', async () => {
        const { copySqliteToPostgres } = await import('../../store/copy.js');
        const sql = openPostgres({ ...options, poolSize: 1, statementTimeoutMs: 0 });
        try {
          const r = await copySqliteToPostgres(sqlitePath, sql, { force: opts.force, progress: (line) => process.stderr.write(`store copy: ${line}\n`) });
          process.stdout.write(`copied ${r.rows} rows (${r.tables.map((t) => `${t.name} ${t.rows}`).join(', ')}) from sqlite:${sqlitePath} to postgres ${describePostgres(options)}, schema version ${r.schemaVersion}\n`);
        } finally {
          await sql.close();
        }
      });
    });
}

/** Runs `fn`; a StoreError becomes one line on stderr and exit code 1 (anything else propagates). */
async function reportStoreErrors(what: string, fn: () => Promise<void>): Promise<void> {
  const { StoreError } = await import('../../store/errors.js');
  try {
    await fn();
  } catch (err) {
    if (!(err instanceof StoreError)) throw err;
    const { printError } = await import('../program.js');
    printError(err.message.startsWith(`${what}:`) ? err.message : `${what}: ${err.message}`);
    process.exitCode = 1;
  }
}
