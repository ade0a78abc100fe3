/**
 * The better-sqlite3 side of the SQLite store: one connection, opened, checked and migrated, with a statement cache
 * and `BEGIN IMMEDIATE` retried while another connection holds the write lock. It runs inside the SQLite worker
 * thread (`sqlite-worker.ts`); the event loop's side, the {@link SqlExecutor} with its queue and transaction handles,
 * is `sqlite.ts` (docs/design/architecture.md "Store").
 *
 * Durability: WAL mode with `synchronous = FULL`, so a committed transaction survives a crash or power loss; that
 * costs one fsync per commit, which this thread waits for, not the event loop.
 * Sources: SQLite docs `wal.html`, `pragma.html#pragma_synchronous`, `pragma.html#pragma_wal_checkpoint`,
 * `lang_transaction.html`; better-sqlite3 `docs/api.md`.
 */
import { mkdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { StoreError } from './errors.js';
import { MIGRATIONS } from './migrations.js';
import type { SqlParams, SqlRow } from './sql.js';
import type { OpenRequest } from './sqlite-protocol.js';

/** How many distinct statement texts a connection keeps prepared (dynamic `IN (?, …)` lists make new texts). */
const STATEMENT_CACHE_SIZE = 256;

function isBusy(err: unknown): boolean {
  return err instanceof Database.SqliteError && (err.code === 'SQLITE_BUSY' || err.code === 'SQLITE_BUSY_SNAPSHOT');
}

/** One open better-sqlite3 connection, configured and migrated. Create it with {@link openConnection}. */
export class SqliteConnection {
  private readonly statements = new Map<string, Database.Statement>();

  constructor(
    private readonly db: Database.Database,
    readonly path: string,
    readonly schemaVersion: number,
    private readonly busyTimeoutMs: number,
  ) {}

  /** The prepared statement of `sql` (prepared on first use, kept in a bounded cache keyed by the text). */
  private statement(sql: string): Database.Statement {
    let stmt = this.statements.get(sql);
    if (stmt === undefined) {
      stmt = this.db.prepare(sql);
      if (this.statements.size >= STATEMENT_CACHE_SIZE) {
        const oldest = this.statements.keys().next().value;
        if (oldest !== undefined) this.statements.delete(oldest);
      }
      this.statements.set(sql, stmt);
    }
    return stmt;
  }

  all(sql: string, params: SqlParams): SqlRow[] {
    return this.statement(sql).all(...params) as SqlRow[];
  }

  get(sql: string, params: SqlParams): SqlRow | undefined {
    return this.statement(sql).get(...params) as SqlRow | undefined;
  }

  run(sql: string, params: SqlParams): number {
    return this.statement(sql).run(...params).changes;
  }

  /** Runs `sql` once per parameter row, in order; the rows each changed. Stops at the first failure (which is thrown). */
  runMany(sql: string, rows: readonly SqlParams[]): number[] {
    const stmt = this.statement(sql);
    return rows.map((params) => stmt.run(...params).changes);
  }

  /**
   * Runs `fn` (one statement); outside a transaction, retried without blocking this thread while another connection
   * holds the write lock (SQLITE_BUSY), up to the busy timeout. The connection's own busy timeout is 0 after the
   * open: a statement that waited inside SQLite would block this thread, and with it the other connections of the
   * process — among them, maybe, the one holding the lock, whose commit could then never come.
   */
  async whenFree<T>(fn: () => T): Promise<T> {
    if (this.db.inTransaction) return fn();
    const deadline = performance.now() + this.busyTimeoutMs;
    let delayMs = 1;
    for (;;) {
      try {
        return fn();
      } catch (err) {
        if (!isBusy(err) || performance.now() >= deadline) throw err;
      }
      await sleep(delayMs);
      delayMs = Math.min(delayMs * 2, 50);
    }
  }

  /** `BEGIN IMMEDIATE` (the write lock up front), retried as {@link SqliteConnection.whenFree} says. */
  begin(): Promise<void> {
    return this.whenFree(() => void this.statement('BEGIN IMMEDIATE').run());
  }

  /** `COMMIT`; when it fails, the transaction is rolled back (if still open) and the failure thrown. */
  commit(): void {
    try {
      this.statement('COMMIT').run();
    } catch (err) {
      this.rollback();
      throw err;
    }
  }

  /** `ROLLBACK` of the open transaction, if one is open. */
  rollback(): void {
    if (this.db.inTransaction) this.statement('ROLLBACK').run();
  }

  /**
   * Closes the connection: an open transaction is rolled back, the WAL is checkpointed into the database file
   * (`PRAGMA wal_checkpoint(PASSIVE)`: what no other connection is reading; SQLite also checkpoints when the last
   * connection closes) and the connection closed. Idempotent.
   */
  close(): void {
    if (!this.db.open) return;
    try {
      this.rollback();
      if (this.path !== ':memory:') this.db.pragma('wal_checkpoint(PASSIVE)');
    } finally {
      this.db.close();
    }
  }
}

/**
 * Opens (creating if needed) the SQLite database at `path`, configures it and migrates it to the current schema.
 * The file's directory is created. `:memory:` gives a private in-memory database (tests).
 * @throws {StoreError} when the path is a directory or cannot be created, the file is not a SQLite database, fails
 *   SQLite's integrity check (`PRAGMA quick_check`), or its schema version is newer than this build knows
 */
export function openConnection(opts: OpenRequest): SqliteConnection {
  const { path, busyTimeoutMs } = opts;
  const memory = path === ':memory:';
  if (!memory) {
    if (statSync(path, { throwIfNoEntry: false })?.isDirectory()) {
      throw new StoreError(`cannot open store ${path}: it is a directory; point store.path at the database file inside it (e.g. ${join(path, 'tokenwatch.db')})`);
    }
    try {
      mkdirSync(dirname(path), { recursive: true });
    } catch (err) {
      throw new StoreError(`cannot open store ${path}: cannot create its directory ${dirname(path)} (${(err as Error).message})${accessHint()}`, { cause: err });
    }
  }
  let db: Database.Database;
  try {
    db = new Database(path, { timeout: busyTimeoutMs });
  } catch (err) {
    throw new StoreError(`cannot open store ${path}: ${explainSqliteError(err)}${accessHint()}`, { cause: err });
  }
  try {
    if (!memory) db.pragma('journal_mode = WAL');
    db.pragma('foreign_keys = ON');
    db.pragma('synchronous = FULL');
    if (!memory) checkIntegrity(db, path);
    const version = migrate(db, path, opts.migrations ?? MIGRATIONS);
    // From here on busy waits are retries in this thread's event loop (SqliteConnection.whenFree), not inside SQLite.
    db.pragma('busy_timeout = 0');
    return new SqliteConnection(db, path, version, busyTimeoutMs);
  } catch (err) {
    db.close();
    if (err instanceof StoreError) throw err;
    if (err instanceof Database.SqliteError && (err.code === 'SQLITE_NOTADB' || err.code === 'SQLITE_CORRUPT')) {
      throw new StoreError(`cannot open store ${path}: not a tokenwatch SQLite database (${err.message})`, { cause: err });
    }
    if (err instanceof Database.SqliteError) {
      throw new StoreError(`cannot open store ${path}: ${explainSqliteError(err)}${accessHint()}`, { cause: err });
    }
    throw err;
  }
}

/** Why SQLite could not open or write the store, in words (the SQLite message and code kept in parentheses). */
function explainSqliteError(err: unknown): string {
  const e = err as { code?: string; message?: string };
  const raw = `${e.message ?? String(err)}${e.code ? `, ${e.code}` : ''}`;
  if (e.code?.startsWith('SQLITE_READONLY')) {
    return `the file or its directory is read-only (${raw}); tokenwatch writes the file and its -wal and -shm files next to it, so both must be writable and the volume not mounted read-only`;
  }
  if (e.code?.startsWith('SQLITE_CANTOPEN')) return `SQLite cannot open or create the file (${raw}); check that the directory exists and is writable`;
  if (e.code === 'SQLITE_FULL') return `the disk is full (${raw})`;
  if (e.code === 'SQLITE_BUSY') return `the file is locked by another process (${raw})`;
  if (e.code === 'SQLITE_PERM' || e.code === 'SQLITE_AUTH') return `permission denied (${raw})`;
  if (e.code?.startsWith('SQLITE_IOERR')) return `an I/O error (${raw})`;
  return raw;
}

/** ` (running as uid N, gid M)` on POSIX: who needs the permissions. */
function accessHint(): string {
  return typeof process.getuid === 'function' ? ` (tokenwatch runs as uid ${process.getuid()}, gid ${process.getgid?.() ?? '?'})` : '';
}

/** How many of `PRAGMA quick_check`'s problem lines a refusal quotes. */
const INTEGRITY_LINES_SHOWN = 3;

/**
 * Refuses a damaged store before anything reads or writes it: `PRAGMA quick_check` (every page and index entry
 * is well formed; O(N) in the file's size, no index-content comparison; https://sqlite.org/pragma.html#pragma_quick_check).
 * Without it, a torn file (e.g. pages zeroed by a failed disk or a copy taken mid-write) opens, reports ready, and
 * fails every poll.
 * @throws {StoreError} naming the file and quoting the first problems SQLite reports
 */
function checkIntegrity(db: Database.Database, path: string): void {
  let problems: string[];
  try {
    const rows = db.pragma(`quick_check(${INTEGRITY_LINES_SHOWN})`) as Record<string, unknown>[];
    problems = rows.map((row) => String(Object.values(row)[0])).filter((line) => line !== 'ok');
  } catch (err) {
    if (!(err instanceof Database.SqliteError) || (err.code !== 'SQLITE_CORRUPT' && err.code !== 'SQLITE_NOTADB')) throw err;
    problems = [err.message];
  }
  if (problems.length === 0) return;
  throw new StoreError(
    `store ${path} is damaged: SQLite's integrity check (PRAGMA quick_check) failed: ${problems.join('; ')}. ` +
      'tokenwatch will not start on it: restore the file from a backup, or move it aside to start with an empty store',
  );
}

/** Applies the missing steps, each in its own immediate transaction with the version bump; returns the version. */
function migrate(db: Database.Database, path: string, steps: readonly string[]): number {
  const known = steps.length;
  const current = (): number => db.pragma('user_version', { simple: true }) as number;
  const found = current();
  if (found > known) {
    throw new StoreError(
      `store ${path} has schema version ${found}, newer than this tokenwatch supports (${known}); ` +
        'upgrade tokenwatch or point store.path at another file',
    );
  }
  for (let v = found; v < known; v++) {
    db.transaction(() => {
      // Another process may have migrated meanwhile: re-check under the write lock.
      if (current() !== v) return;
      db.exec(steps[v]!);
      db.pragma(`user_version = ${v + 1}`);
    }).immediate();
  }
  return current();
}
