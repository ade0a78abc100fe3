/**
 * The SQLite {@link SqlExecutor} (better-sqlite3 13): one file, WAL mode, foreign keys on, a busy timeout for
 * concurrent connections, and versioned migrations (`src/store/migrations.ts`) by `PRAGMA user_version`.
 *
 * Durability: `synchronous = FULL`, so a committed poll survives a crash or power loss; with WAL that costs
 * one fsync per transaction (a poll is one transaction).
 * Concurrency: better-sqlite3 is synchronous and this process has one connection, so the executor puts callers in a
 * FIFO queue: while a transaction is open (across its `await`s), statements and transactions of other callers wait
 * for it to end and never join it. Every write transaction is `BEGIN IMMEDIATE` (takes the write lock up front, so
 * two connections never deadlock upgrading a read lock); while another connection holds the lock, the executor
 * retries `BEGIN IMMEDIATE` without blocking the event loop, up to `busyTimeoutMs`, then fails with SQLITE_BUSY.
 * Sources: SQLite docs `wal.html`, `pragma.html#pragma_synchronous`, `lang_transaction.html`, `lang_savepoint.html`;
 * better-sqlite3 `docs/api.md`.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { mkdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { StoreError } from './errors.js';
import { MIGRATIONS } from './migrations.js';
import type { SqlExecutor, SqlParams, SqlRow, SqlRunResult } from './sql.js';

/** Options of {@link openSqliteExecutor}. */
export interface SqliteOptions {
  /** How long a statement waits for another connection's write lock before failing with SQLITE_BUSY, ms. Default 5000. */
  busyTimeoutMs?: number;
  /** Migration steps to apply (default: all of {@link MIGRATIONS}); tests use a prefix to build old databases. */
  migrations?: readonly string[];
}

/** How many distinct statement texts an executor keeps prepared (dynamic `IN (?, …)` lists make new texts). */
const STATEMENT_CACHE_SIZE = 256;

/** A FIFO mutex: `acquire` resolves in call order; `release` hands the lock to the next waiter. */
class Fifo {
  private held = false;
  private readonly waiters: (() => void)[] = [];

  /** Whether someone holds the lock. */
  get busy(): boolean {
    return this.held;
  }

  /** Takes the lock: undefined when it was free (taken synchronously), else a promise resolved when it is ours. */
  acquire(): Promise<void> | undefined {
    if (!this.held) {
      this.held = true;
      return undefined;
    }
    return new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  release(): void {
    const next = this.waiters.shift();
    if (next !== undefined) next();
    else this.held = false;
  }
}

/** The open transaction a piece of async code runs in (to refuse an outer statement that would wait for itself). */
const currentTx = new AsyncLocalStorage<SqliteTransaction>();

function isBusy(err: unknown): boolean {
  return err instanceof Database.SqliteError && (err.code === 'SQLITE_BUSY' || err.code === 'SQLITE_BUSY_SNAPSHOT');
}

/** The executor of one SQLite connection. Create it with {@link openSqliteExecutor}. */
export class SqliteExecutor implements SqlExecutor {
  readonly dialect = 'sqlite' as const;
  private readonly statements = new Map<string, Database.Statement>();
  private readonly queue = new Fifo();
  private closed = false;

  /**
   * @param db an open better-sqlite3 connection, already configured and migrated
   * @param path the database file (`:memory:` for an in-memory one)
   * @param schemaVersion `PRAGMA user_version` after migrations
   * @param busyTimeoutMs how long `BEGIN IMMEDIATE` retries while another connection holds the write lock, ms
   */
  constructor(
    private readonly db: Database.Database,
    readonly path: string,
    readonly schemaVersion: number,
    private readonly busyTimeoutMs: number,
  ) {}

  /** The prepared statement of `sql` (prepared on first use, kept in a bounded cache keyed by the text). */
  statement(sql: string): Database.Statement {
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

  /** Runs one statement of a caller outside any transaction: at once when the queue is free, else in turn. */
  private async outside<T>(sql: string, run: () => T): Promise<T> {
    if (this.closed) throw new StoreError(`store ${this.path} is closed (statement ${firstWords(sql)})`);
    const tx = currentTx.getStore();
    if (tx !== undefined && tx.owner === this && tx.active) {
      throw new StoreError(
        `statement ${firstWords(sql)} was sent to the store from inside its own open transaction; ` +
          'statements inside store.transaction(fn) must go through the transaction handle fn receives',
      );
    }
    const wait = this.queue.acquire();
    if (wait !== undefined) await wait;
    try {
      return run();
    } finally {
      this.queue.release();
    }
  }

  all<T extends SqlRow = SqlRow>(sql: string, params: SqlParams = []): Promise<T[]> {
    return this.outside(sql, () => this.statement(sql).all(...params) as T[]);
  }

  get<T extends SqlRow = SqlRow>(sql: string, params: SqlParams = []): Promise<T | undefined> {
    return this.outside(sql, () => this.statement(sql).get(...params) as T | undefined);
  }

  run(sql: string, params: SqlParams = []): Promise<SqlRunResult> {
    return this.outside(sql, () => ({ changes: this.statement(sql).run(...params).changes }));
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    if (this.closed) throw new StoreError(`store ${this.path} is closed (transaction)`);
    const outer = currentTx.getStore();
    if (outer !== undefined && outer.owner === this && outer.active) {
      throw new StoreError('store.transaction was called on the store from inside its own open transaction; nest it on the transaction handle instead');
    }
    const wait = this.queue.acquire();
    if (wait !== undefined) await wait;
    try {
      await this.begin();
      const tx = new SqliteTransaction(this);
      let result: T;
      try {
        result = await currentTx.run(tx, () => fn(tx));
      } catch (err) {
        tx.active = false;
        if (this.db.inTransaction) this.statement('ROLLBACK').run();
        throw err;
      }
      tx.active = false;
      try {
        this.statement('COMMIT').run();
      } catch (err) {
        if (this.db.inTransaction) this.statement('ROLLBACK').run();
        throw err;
      }
      return result;
    } finally {
      this.queue.release();
    }
  }

  /** `BEGIN IMMEDIATE`, retried (without blocking the event loop) while another connection holds the write lock. */
  private async begin(): Promise<void> {
    const deadline = performance.now() + this.busyTimeoutMs;
    let delayMs = 1;
    this.db.pragma('busy_timeout = 0');
    try {
      for (;;) {
        try {
          this.statement('BEGIN IMMEDIATE').run();
          return;
        } catch (err) {
          if (!isBusy(err) || performance.now() >= deadline) throw err;
        }
        await sleep(delayMs);
        delayMs = Math.min(delayMs * 2, 50);
      }
    } finally {
      this.db.pragma(`busy_timeout = ${this.busyTimeoutMs}`);
    }
  }

  async lock(_key: string): Promise<void> {
    const tx = currentTx.getStore();
    if (tx === undefined || tx.owner !== this || !tx.active) {
      throw new StoreError('lock() is only possible inside a transaction (call it on the transaction handle)');
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const wait = this.queue.acquire();
    if (wait !== undefined) await wait;
    try {
      if (this.db.open) this.db.close();
    } finally {
      this.queue.release();
    }
  }
}

/** The handle of one open transaction: statements run at once (the transaction holds the queue); nesting = savepoints. */
class SqliteTransaction implements SqlExecutor {
  readonly dialect = 'sqlite' as const;
  active = true;
  private depth = 0;

  constructor(readonly owner: SqliteExecutor) {}

  private check(sql: string): Database.Statement {
    if (!this.active) throw new StoreError(`statement ${firstWords(sql)} was sent to a transaction that has ended`);
    return this.owner.statement(sql);
  }

  async all<T extends SqlRow = SqlRow>(sql: string, params: SqlParams = []): Promise<T[]> {
    return this.check(sql).all(...params) as T[];
  }

  async get<T extends SqlRow = SqlRow>(sql: string, params: SqlParams = []): Promise<T | undefined> {
    return this.check(sql).get(...params) as T | undefined;
  }

  async run(sql: string, params: SqlParams = []): Promise<SqlRunResult> {
    return { changes: this.check(sql).run(...params).changes };
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    // Savepoints nest (a nested step inside a nested step); run nested steps one after another, not concurrently.
    const name = `sp${++this.depth}`;
    try {
      await this.run(`SAVEPOINT ${name}`);
      let result: T;
      try {
        result = await fn(this);
      } catch (err) {
        if (this.active) {
          this.owner.statement(`ROLLBACK TO ${name}`).run();
          this.owner.statement(`RELEASE ${name}`).run();
        }
        throw err;
      }
      await this.run(`RELEASE ${name}`);
      return result;
    } finally {
      this.depth--;
    }
  }

  async lock(_key: string): Promise<void> {
    if (!this.active) throw new StoreError('lock() on a transaction that has ended');
    // Nothing to do: BEGIN IMMEDIATE already serialises every writer of the file.
  }

  async close(): Promise<void> {
    throw new StoreError('close() on a transaction handle: close the store instead');
  }
}

/** The first words of a statement, for messages (never its parameters). */
function firstWords(sql: string): string {
  return sql.trim().split(/\s+/).slice(0, 3).join(' ');
}

/**
 * Opens (creating if needed) the SQLite database at `path`, configures it and migrates it to the current schema.
 * The file's directory is created. `:memory:` gives a private in-memory database (tests).
 * @throws {StoreError} when the path is a directory or cannot be created, the file is not a SQLite database, fails
 *   SQLite's integrity check (`PRAGMA quick_check`), or its schema version is newer than this build knows
 */
export function openSqliteExecutor(path: string, opts: SqliteOptions = {}): SqliteExecutor {
  const memory = path === ':memory:';
  const busyTimeoutMs = opts.busyTimeoutMs ?? 5000;
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
    return new SqliteExecutor(db, path, version, busyTimeoutMs);
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

