/**
 * `tokenwatch store copy` (src/store/copy.ts, src/cli/commands/store.ts) and `store migrate` against the run's real
 * PostgreSQL server: every row of a SQLite store copied in batches in one transaction, counts verified, identity
 * sequences moved on, an older SQLite schema brought up to date in the backup only, a non-empty target refused unless
 * --force, a failure leaving the target empty; and the CLI's output and exit codes.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, beforeEach, afterEach, describe, expect, it } from 'vitest';
import { copySqliteToPostgres } from '../../src/store/copy.js';
import { StoreError } from '../../src/store/errors.js';
import { MIGRATIONS } from '../../src/store/migrations.js';
import { openPostgres, type PostgresExecutor } from '../../src/store/postgres.js';
import { runCli } from '../cli/run-cli.js';
import { createTestDatabase, postgresServer, type TestDatabase } from '../support/postgres.js';

const T0 = 1_764_633_600_000;
const POLL_RUNS = 2345;

/** A SQLite store at `steps` schema steps with rows in most tables. */
function makeSqliteStore(path: string, steps = MIGRATIONS.length): void {
  const db = new Database(path);
  for (let v = 0; v < steps; v++) db.exec(MIGRATIONS[v]!);
  db.pragma(`user_version = ${steps}`);
  const finding = JSON.stringify({ id: 'f1', cluster: 'prod', requests: 3, lastSeen: '2025-12-02T00:00:00.000Z' });
  db.prepare("INSERT INTO cursors (source_id, cursor) VALUES ('prod', '{\"t\":1}')").run();
  // Before the portable-keys step, watchedSince was keyed with NUL bytes (which PostgreSQL text cannot hold).
  if (steps < 10) db.prepare('INSERT INTO cursors (source_id, cursor) VALUES (?, ?)').run('\0watched-since\0prod', String(T0));
  const seen = db.prepare('INSERT INTO seen (cluster, audit_id, seen_at) VALUES (?, ?, ?)');
  for (let i = 0; i < 50; i++) seen.run('prod', `audit-${i}`, T0 + i);
  db.prepare(
    "INSERT INTO findings (id, cluster, namespace, service_account, kind, severity, status, last_seen, created_at, updated_at, finding) VALUES ('f1', 'prod', 'ns', 'sa', 'stale-token', 'critical', 'open', ?, ?, ?, ?)",
  ).run(T0, T0, T0, finding);
  const run = db.prepare("INSERT INTO poll_runs (cluster, source, started_at, ended_at, events, stats) VALUES ('prod', 'file', ?, ?, ?, '{}')");
  db.transaction(() => {
    for (let i = 0; i < POLL_RUNS; i++) run.run(T0 + i * 1000, T0 + i * 1000 + 5, i);
  })();
  db.prepare("INSERT INTO message_refs (finding_id, channel, ts, severity, hash) VALUES ('f1', 'C1', '1.2', 'critical', 'h')").run();
  db.prepare(
    "INSERT INTO approvals (id, cluster, finding_id, action, target, requester, state, required_approvals, created_at, expires_at, updated_at) VALUES ('a1', 'prod', 'f1', 'restart', '{\"kind\":\"Deployment\",\"namespace\":\"ns\",\"name\":\"web\"}', 'U1', 'approved', 1, ?, ?, ?)",
  ).run(T0, T0 + 1_800_000, T0);
  db.prepare(`INSERT INTO votes (approval_id, "user", vote, at, reason, seq) VALUES ('a1', 'U2', 'approve', ?, 'ok ''quoted''', 1)`).run(T0);
  const log = db.prepare("INSERT INTO action_log (id, at, cluster, action, target, result) VALUES (?, ?, 'prod', 'restart', 'ns/web', ?)");
  log.run(1, T0, 'ok');
  log.run(7, T0 + 1, 'ok');
  if (steps >= 7) db.prepare("INSERT INTO poller_lock (id, holder, host, pid, acquired_at, heartbeat_at) VALUES (1, 'h', 'host', 42, ?, ?)").run(T0, T0);
  const hasOwners = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'cluster_owners'").get() !== undefined;
  if (hasOwners) {
    // A doctored file: an owner valid until the year 9999 would leave the cluster unpolled in PostgreSQL.
    db.prepare("INSERT INTO replicas (id, host, started_at, heartbeat_at) VALUES ('r-old', 'host', ?, ?)").run(T0, T0);
    db.prepare("INSERT INTO cluster_owners (cluster, owner, epoch, expires_at, changed_at) VALUES ('prod', 'r-old', 3, 253402300799000, ?)").run(T0);
  }
  db.close();
}

const pgServer = postgresServer();

describe.skipIf(!pgServer.available)('store copy', () => {
  let dir: string;
  let db: TestDatabase;
  let pg: PostgresExecutor;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'tw-copy-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  beforeEach(async () => {
    db = await createTestDatabase();
    pg = openPostgres(db.options);
  });
  afterEach(async () => {
    await pg?.close();
    await db?.drop();
  });

  const count = async (table: string) => (await pg.get<{ n: number }>(`SELECT count(*) AS n FROM ${table}`))!.n;

  it('copies every table in batches, the same rows, and moves identity sequences past the copied ids', async () => {
    const file = join(dir, 'full.db');
    makeSqliteStore(file);
    const lines: string[] = [];
    const r = await copySqliteToPostgres(file, pg, { batchRows: 500, progress: (l) => lines.push(l) });
    expect(r.schemaVersion).toBe(MIGRATIONS.length);
    expect(Object.fromEntries(r.tables.map((t) => [t.name, t.rows]))).toMatchObject({ cursors: 1, seen: 50, findings: 1, poll_runs: POLL_RUNS, message_refs: 1, approvals: 1, votes: 1, action_log: 2 });
    expect(r.tables.map((t) => t.name)).not.toContain('poller_lock');
    expect(r.tables.map((t) => t.name)).not.toContain('cluster_owners');
    expect(await count('cluster_owners')).toBe(0);
    expect(await count('replicas')).toBe(0);
    expect(await count('poll_runs')).toBe(POLL_RUNS);
    expect(await count('poller_lock')).toBe(0);
    expect(lines).toContain(`poll_runs: 500/${POLL_RUNS} rows`);
    expect(lines).toContain(`poll_runs: ${POLL_RUNS}/${POLL_RUNS} rows`);
    expect(await pg.get(`SELECT "user", vote, at, reason FROM votes`)).toEqual({ user: 'U2', vote: 'approve', at: T0, reason: "ok 'quoted'" });
    expect(await pg.get("SELECT finding, last_seen FROM findings WHERE id = 'f1'")).toEqual({ finding: expect.stringContaining('"requests":3'), last_seen: T0 });
    const next = await pg.get<{ id: number }>("INSERT INTO action_log (at, cluster, action, target, result) VALUES (1, 'prod', 'restart', 'x', 'ok') RETURNING id");
    expect(next!.id).toBe(8);
    const nextRun = await pg.get<{ id: number }>("INSERT INTO poll_runs (cluster, source, started_at) VALUES ('prod', 'file', 1) RETURNING id");
    expect(nextRun!.id).toBe(POLL_RUNS + 1);
  });

  it('brings an older SQLite schema up to date in the backup only, leaving the source file as it was', async () => {
    const file = join(dir, 'old.db');
    makeSqliteStore(file, 5);
    const r = await copySqliteToPostgres(file, pg);
    expect(r.schemaVersion).toBe(MIGRATIONS.length);
    expect(await count('approvals')).toBe(1);
    expect(await pg.all('SELECT source_id, cursor FROM cursors ORDER BY source_id')).toEqual([
      { source_id: 'prod', cursor: '{"t":1}' },
      { source_id: 'watched-since:prod', cursor: String(T0) },
    ]);
    // The SQLite store itself, opened by this version, renames the key too.
    const { openStore } = await import('../../src/store/db.js');
    const copy = join(dir, 'old-opened.db');
    makeSqliteStore(copy, 8);
    const store = await openStore(copy);
    try {
      expect(await store.polls.watchedSince('prod')).toBe(T0);
    } finally {
      await store.close();
    }
    const src = new Database(file, { readonly: true });
    try {
      expect(src.pragma('user_version', { simple: true })).toBe(5);
    } finally {
      src.close();
    }
  });

  it('refuses a non-empty target, naming its tables, and replaces its rows with force', async () => {
    const file = join(dir, 'twice.db');
    makeSqliteStore(file);
    await copySqliteToPostgres(file, pg);
    await pg.run("INSERT INTO cursors (source_id, cursor) VALUES ('extra', 'c')");
    const err = await copySqliteToPostgres(file, pg).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect((err as Error).message).toMatch(/not empty \(rows in cursors, seen, .*\); copy into an empty database, or pass --force/);
    expect(await count('cursors')).toBe(2);
    await copySqliteToPostgres(file, pg, { force: true });
    expect(await count('cursors')).toBe(1);
    expect(await count('poll_runs')).toBe(POLL_RUNS);
  });

  it('leaves the target empty when a row fails part-way (one transaction)', async () => {
    const file = join(dir, 'fails.db');
    makeSqliteStore(file);
    const { migratePostgres } = await import('../../src/store/migrations-postgres.js');
    await migratePostgres(pg);
    // action_log is copied after poll_runs and the other big tables: its second row breaks this constraint.
    await pg.run("ALTER TABLE action_log ADD CONSTRAINT no_seven CHECK (id <> 7)");
    await expect(copySqliteToPostgres(file, pg)).rejects.toThrow(/PostgreSQL store .* in "INSERT INTO "action_log".*no_seven/);
    for (const t of ['cursors', 'seen', 'findings', 'poll_runs', 'approvals', 'action_log']) expect(await count(t), t).toBe(0);
  });

  it('refuses a file that is not a tokenwatch store', async () => {
    const file = join(dir, 'empty.db');
    new Database(file).close();
    await expect(copySqliteToPostgres(file, pg)).rejects.toThrow(/not a tokenwatch store/);
    await expect(copySqliteToPostgres(join(dir, 'missing.db'), pg)).rejects.toThrow(/cannot open the SQLite store .*missing\.db/);
  });

  describe('CLI', { timeout: 120_000 }, () => {
    it('store copy: progress on stderr, summary on stdout, exit 1 with one line for a non-empty target', async () => {
      if (!pgServer.available) return;
      const file = join(dir, 'cli.db');
      makeSqliteStore(file);
      const to = `postgres://${pgServer.superuser}@127.0.0.1:${pgServer.port}/${db.name}`;
      const first = await runCli(['store', 'copy', '--from', `sqlite:${file}`, '--to', to, '--sslmode', 'disable']);
      expect(first.stderr).toContain('store copy: backing up');
      expect(first.stderr).toContain(`store copy: poll_runs: ${POLL_RUNS}/${POLL_RUNS} rows`);
      expect(first.stdout).toMatch(new RegExp(`^copied ${POLL_RUNS + 57} rows \\(cursors 1, seen 50, .*\\) from sqlite:.*cli\\.db to postgres postgres@127\\.0\\.0\\.1:\\d+/${db.name}, schema version ${MIGRATIONS.length}\\n$`));
      expect(first.code).toBe(0);
      const again = await runCli(['store', 'copy', '--from', `sqlite:${file}`, '--to', to, '--sslmode', 'disable']);
      expect(again.code).toBe(1);
      expect(again.stderr).toMatch(/^store copy: backing up.*\ntokenwatch: store copy: the PostgreSQL store is not empty/s);
      expect(again.stdout).toBe('');
    });

    it('store copy refuses a password in the URL without echoing it (exit 2)', async () => {
      const r = await runCli(['store', 'copy', '--from', 'sqlite:x.db', '--to', 'postgres://u:hunter2-in-argv@127.0.0.1/db']);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('use --password-file or --password-env');
      expect(r.stderr).not.toContain('hunter2-in-argv');
    });

    it('store migrate: migrates the configured PostgreSQL store and prints its version, then nothing to apply', async () => {
      if (!pgServer.available) return;
      const config = join(dir, 'tokenwatch.yaml');
      writeFileSync(
        config,
        `store:\n  postgres:\n    host: 127.0.0.1\n    port: ${pgServer.port}\n    database: ${db.name}\n    user: ${pgServer.superuser}\n    sslmode: disable\nclusters:\n  - name: dev\n    audit: { file: { path: /var/log/audit.log } }\n`,
      );
      const first = await runCli(['store', 'migrate', '--config', config]);
      expect(first.stdout).toBe(`PostgreSQL store postgres@127.0.0.1:${pgServer.port}/${db.name}: schema version ${MIGRATIONS.length} (${MIGRATIONS.length} steps applied now; this tokenwatch knows ${MIGRATIONS.length})\n`);
      expect(first.code).toBe(0);
      const again = await runCli(['store', 'migrate', '--config', config]);
      expect(again.stdout).toContain('(0 steps applied now;');
    });

    it('store migrate: the SQLite store by default', async () => {
      const config = join(dir, 'sqlite.yaml');
      const path = join(dir, 'migrated.db');
      writeFileSync(config, `store:\n  path: ${path}\nclusters:\n  - name: dev\n    audit: { file: { path: /var/log/audit.log } }\n`);
      const r = await runCli(['store', 'migrate', '--config', config]);
      expect(r.stdout).toBe(`SQLite store ${path}: schema version ${MIGRATIONS.length}\n`);
      expect(r.code).toBe(0);
    });
  });
});
