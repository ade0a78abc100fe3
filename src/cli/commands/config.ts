/**
 * `tokenwatch config check [--config FILE] [--runtime]`: validates the configuration (file + environment) and prints
 * the effective config as YAML with secrets masked (exit 0), or every problem on stderr (exit 2). `--runtime` also
 * checks what `serve` needs where it runs: every referenced file exists and is readable, every named environment
 * variable is set (src/config/runtime-check.ts); without it the check works on a workstation against a pod's config.
 */
import { CommanderError, type Command } from 'commander';

/** Options for {@link register}, for tests. */
export interface ConfigCommandDeps {
  /** Environment to read `TOKENWATCH_CONFIG` and the Slack secrets from (default `process.env`). */
  env?: NodeJS.ProcessEnv;
}

/** Commander error code used for an invalid configuration (exit code 2). */
export const CONFIG_INVALID_CODE = 'tokenwatch.configInvalid';

/**
 * Adds the `config` command group (`config check`) to `program`.
 *
 * Output goes through commander's output configuration (`writeOut`, `writeErr`; commander copies it to
 * subcommands when they are created, so call `register` after `program.configureOutput(...)`). An invalid
 * configuration writes `tokenwatch: invalid configuration … (N problems):` and one `✖ problem / → at path` pair
 * per problem to `writeErr`, then throws `CommanderError(2, 'tokenwatch.configInvalid')` out of `parseAsync`
 * (main's `runCli` maps it to exit code 2).
 */
export function register(program: Command, deps: ConfigCommandDeps = {}): void {
  const group = program.command('config').description('inspect the tokenwatch serve configuration');
  group
    .command('check')
    .description('validate the config file and environment, print the effective config (secrets masked)')
    .option('--config <file>', 'config file (default: env TOKENWATCH_CONFIG)')
    .option('--runtime', 'also check, as serve does at start, that every referenced file (kubeconfig, webhook certFile/keyFile/tokenFile, store.postgres.passwordFrom.file, …) is readable and every named environment variable (tokenEnv, …) is set here')
    .action(async (_opts: unknown, cmd: Command) => {
      // Loaded on use: other commands should not pay for zod schemas, YAML and cron at start-up.
      const { ConfigError } = await import('../../config/schema.js');
      const { loadConfig, resolveConfigPath } = await import('../../config/load.js');
      const { renderEffectiveConfig } = await import('../../config/render.js');
      const env = deps.env ?? process.env;
      const { config: flag, runtime } = cmd.optsWithGlobals<{ config?: string; runtime?: boolean }>();
      try {
        const config = loadConfig(resolveConfigPath(flag, env), env, { runtime: runtime === true });
        const out = cmd.configureOutput().writeOut ?? ((s: string) => process.stdout.write(s));
        out(renderEffectiveConfig(config));
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        // Written as it is (one problem per line), not through `outputError`, which main.ts folds into one line.
        const writeErr = cmd.configureOutput().writeErr ?? ((s: string) => process.stderr.write(s));
        writeErr(`tokenwatch: ${err.message}\n`);
        throw new CommanderError(err.exitCode, CONFIG_INVALID_CODE, err.message);
      }
    });
}
