/**
 * The SQLite {@link SqlExecutor}: one file, WAL mode, foreign keys on, `synchronous = FULL`, a busy timeout for
 * concurrent connections, and versioned migrations (`src/store/migrations.ts`) by `PRAGMA user_version`
 * (docs/design/architecture.md "Store").
 *
 * Threads: better-sqlite3 is synchronous, and with `synchronous = FULL` every commit waits for an fsync. So the
 * connection does not live on the event loop's thread (which acks Slack within its 3 s and answers `/readyz`): the
 * process's executors share one worker thread (`sqlite-worker.ts`, found by {@link sqliteWorkerEntry}; started by the
 * first open, ended when the last executor closes), in which each executor has its own connection that it opens,
 * checks and migrates there and then runs the statements this side posts to it (`sqlite-protocol.ts`). What stays
 * here is the queue and the transaction bookkeeping; rows cross the thread boundary by structured clone. One thread
 * for all connections keeps the order of a single thread: of two connections, the one that asks first goes first.
 * `:memory:` works the same way (a private database of that connection).
 *
 * Durability: `synchronous = FULL`, so a committed transaction survives a crash or power loss (a poll is one
 * transaction; exactly-once alert posting and one action per target rest on it). `close()` finishes what is queued,
 * checkpoints the WAL, closes the connection and ends the thread.
 *
 * Concurrency: one connection per executor, so callers wait in a FIFO queue: while a transaction is open (across its
 * `await`s), statements and transactions of other callers wait for it to end and never join it. Every write
 * transaction is `BEGIN IMMEDIATE` (the write lock up front, so two connections never deadlock upgrading a read
 * lock); while another connection holds the lock, the worker retries it — and any statement outside a transaction
 * that finds the lock held — without blocking, up to `busyTimeoutMs`, then fails with SQLITE_BUSY. A nested `tx.transaction` is a savepoint; `lock()` is a no-op inside a transaction
 * (`BEGIN IMMEDIATE` already serialises every writer).
 *
 * Round trips: every statement is one message each way (~0.05–0.2 ms of latency, little CPU here). Loops of one
 * statement over many rows use {@link SqlExecutor.runMany}: one message for all the rows.
 *
 * Failures: a statement's error is a `SqliteStoreError` (a StoreError with SQLite's `code`) naming the file and the
 * statement's first words, never its parameters. If the worker thread dies, every pending and later call fails with
 * a `SqliteWorkerStoppedError` (`isStoreUnavailable` true; `/readyz` says `store-unavailable`) instead of waiting.
 *
 * Sources: SQLite docs `wal.html`, `pragma.html#pragma_synchronous`, `lang_transaction.html`, `lang_savepoint.html`;
 * better-sqlite3 `docs/api.md`; Node.js `worker_threads` (https://nodejs.org/api/worker_threads.html).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { StoreError } from './errors.js';
import type { SqlExecutor, SqlParams, SqlRow, SqlRunResult } from './sql.js';
import {
  type OpenRequest,
  SQLITE_WORKER_FLAG,
  type SqliteReply,
  type SqliteRequest,
  type SqliteWorkerData,
  SqliteWorkerStoppedError,
  firstWords,
  fromWire,
} from './sqlite-protocol.js';

/** Options of {@link openSqliteExecutor}. */
export interface SqliteOptions {
  /** How long a statement waits for another connection's write lock before failing with SQLITE_BUSY, ms. Default 5000. */
  busyTimeoutMs?: number;
  /** Migration steps to apply (default: all of `MIGRATIONS`); tests use a prefix to build old databases. */
  migrations?: readonly string[];
}

/** The names a bundle gives the worker's entry point beside its own chunks (`.js` in dist/, `.mjs` in test bundles). */
const WORKER_FILES = ['sqlite-worker.js', 'sqlite-worker.mjs'];

/**
 * The module the SQLite worker thread starts from, for this module at `moduleUrl`:
 * - from the TypeScript sources (`.ts`): `sqlite-worker-tsx.mjs` beside it, which registers tsx in the thread;
 * - from a bundle: the worker's own entry point beside this module's chunk — `sqlite-worker.js` in `dist/cli/`
 *   (scripts/build.mjs), `sqlite-worker.mjs` in the tests' bundles. A bundle must build `src/store/sqlite-worker.ts`
 *   as an entry point of its own.
 * @throws {StoreError} when a bundle has no worker entry beside it
 */
export function sqliteWorkerEntry(moduleUrl: string = import.meta.url): URL {
  if (moduleUrl.endsWith('.ts')) return new URL('./sqlite-worker-tsx.mjs', moduleUrl);
  for (const name of WORKER_FILES) {
    const beside = new URL(`./${name}`, moduleUrl);
    if (existsSync(fileURLToPath(beside))) return beside;
  }
  throw new StoreError(
    `cannot start the SQLite store's worker thread: no ${WORKER_FILES.join(' or ')} beside ${fileURLToPath(moduleUrl)}; ` +
      'a bundle of tokenwatch must build src/store/sqlite-worker.ts as an entry point of its own (scripts/build.mjs)',
  );
}

/** A FIFO mutex: `acquire` resolves in call order; `release` hands the lock to the next waiter. */
class Fifo {
  private held = false;
  private readonly waiters: (() => void)[] = [];

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

type Value = Extract<SqliteReply, { ok: true }>['value'];
type Pending = { resolve: (v: Value) => void; reject: (e: Error) => void };
/** A request as an executor sends it (the thread adds `id`, the link `conn`). */
type Request = SqliteRequest extends infer R ? (R extends SqliteRequest ? Omit<R, 'id' | 'conn'> : never) : never;

/**
 * The process's SQLite worker thread and the requests it has not answered. One for all executors (normally one store
 * per process), started by the first open and ended when the last executor closes. It keeps the process alive only
 * while something waits for it, as a socket would. If it stops, every pending request fails, and so does every later
 * one of the executors it served (a new open starts a new thread).
 */
class SqliteThread {
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private nextConn = 1;
  private connections = 0;
  private ending = false;
  /** Why the thread cannot answer any more; set once. */
  failure: SqliteWorkerStoppedError | undefined;

  private static current: SqliteThread | undefined;

  /** The running thread, started if there is none (or the last one stopped). */
  static get(): SqliteThread {
    const t = SqliteThread.current;
    if (t !== undefined && t.failure === undefined && !t.ending) return t;
    SqliteThread.current = new SqliteThread(sqliteWorkerEntry());
    return SqliteThread.current;
  }

  private constructor(entry: URL) {
    this.worker = new Worker(entry, { workerData: { [SQLITE_WORKER_FLAG]: true } satisfies SqliteWorkerData });
    this.worker.unref();
    this.worker.on('message', (m: SqliteReply) => {
      const p = this.pending.get(m.id);
      if (p === undefined) return;
      this.pending.delete(m.id);
      this.refresh();
      if (m.ok) p.resolve(m.value);
      else p.reject(fromWire(m.error));
    });
    this.worker.on('error', (err) => this.fail(`its worker thread failed (${err.message})`));
    this.worker.on('messageerror', (err) => this.fail(`a message from its worker thread could not be read (${err.message})`));
    this.worker.on('exit', (code) => {
      if (!this.ending) this.fail(`its worker thread stopped (exit code ${code})`);
    });
  }

  /** Fails every pending request and every later one. */
  private fail(why: string): void {
    if (this.failure !== undefined) return;
    this.failure = new SqliteWorkerStoppedError(`SQLite store: ${why}; restart tokenwatch`);
    const pending = [...this.pending.values()];
    this.pending.clear();
    this.refresh();
    for (const p of pending) p.reject(this.failure);
  }

  /** Keeps the process alive while a request waits for the thread. */
  private refresh(): void {
    if (this.pending.size > 0) this.worker.ref();
    else this.worker.unref();
  }

  /** A new connection's id (its `open` must be its first request). */
  attach(): number {
    this.connections++;
    return this.nextConn++;
  }

  /** A connection is closed (or its open failed): the last one ends the thread. */
  async detach(): Promise<void> {
    if (--this.connections > 0 || this.failure !== undefined) return;
    this.ending = true;
    await this.worker.terminate();
  }

  /** Posts a request; resolves with its reply's value. @throws {StoreError} the statement's, or the thread's failure */
  call(req: Request & { conn: number }): Promise<Value> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    const id = this.nextId++;
    return new Promise<Value>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.refresh();
      this.worker.postMessage({ ...req, id });
    });
  }
}

/** One executor's connection in the {@link SqliteThread}. */
class WorkerLink {
  private readonly thread = SqliteThread.get();
  private readonly conn = this.thread.attach();
  private openFailure: StoreError | undefined;
  private detached = false;
  /** The schema version once the worker opened the file; rejects with the open's StoreError. */
  readonly opened: Promise<number>;

  constructor(open: OpenRequest) {
    this.opened = this.call({ op: 'open', ...open }).then(
      (v) => v as number,
      async (err: StoreError) => {
        this.openFailure = err;
        await this.detach();
        throw err;
      },
    );
    this.opened.catch(() => undefined); // the failure is also every call's; an executor nobody awaits must not crash
  }

  /** Why no request can be answered any more (the open failed, the thread stopped), or undefined. */
  get failure(): StoreError | undefined {
    return this.openFailure ?? this.thread.failure;
  }

  call(req: Request): Promise<Value> {
    const failed = this.failure;
    if (failed !== undefined) return Promise.reject(failed);
    return this.thread.call({ ...req, conn: this.conn });
  }

  /** Gives the connection back to the thread (after `close`, or after a failed open). Idempotent. */
  async detach(): Promise<void> {
    if (this.detached) return;
    this.detached = true;
    await this.thread.detach();
  }
}

/** The open transaction a piece of async code runs in (to refuse an outer statement that would wait for itself). */
const currentTx = new AsyncLocalStorage<SqliteTransaction>();

/** The executor of one SQLite connection, in its worker thread. Create it with {@link openSqliteExecutor}. */
export class SqliteExecutor implements SqlExecutor {
  readonly dialect = 'sqlite' as const;
  private readonly queue = new Fifo();
  private closed = false;
  private version: number | undefined;

  /** @param path the database file (`:memory:` for an in-memory one) */
  constructor(
    readonly path: string,
    /** @internal the worker thread */
    readonly link: WorkerLink,
  ) {
    link.opened.then((v) => (this.version = v)).catch(() => undefined);
  }

  /**
   * `PRAGMA user_version` after migrations, once the worker has opened the file (after {@link SqliteExecutor.ready}).
   * @throws {StoreError} before that
   */
  get schemaVersion(): number {
    if (this.version === undefined) throw new StoreError(`store ${this.path} is not open yet (await ready() first)`);
    return this.version;
  }

  /**
   * Resolves with the schema version once the file is open, checked and migrated.
   * @throws {StoreError} why it could not be opened (the same error every statement then fails with)
   */
  ready(): Promise<number> {
    return this.link.opened;
  }

  /** Runs one request of a caller outside any transaction: at once when the queue is free, else in turn. */
  private async outside(sql: string, req: Request): Promise<Value> {
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
      return await this.link.call(req);
    } finally {
      this.queue.release();
    }
  }

  async all<T extends SqlRow = SqlRow>(sql: string, params: SqlParams = []): Promise<T[]> {
    return (await this.outside(sql, { op: 'all', sql, params })) as T[];
  }

  async get<T extends SqlRow = SqlRow>(sql: string, params: SqlParams = []): Promise<T | undefined> {
    return (await this.outside(sql, { op: 'get', sql, params })) as T | undefined;
  }

  async run(sql: string, params: SqlParams = []): Promise<SqlRunResult> {
    return { changes: (await this.outside(sql, { op: 'run', sql, params })) as number };
  }

  async runMany(sql: string, rows: readonly SqlParams[]): Promise<number[]> {
    if (rows.length === 0) return [];
    // All rows or none: in one transaction of their own.
    return this.transaction((tx) => tx.runMany(sql, rows));
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
      await this.link.call({ op: 'begin' });
      const tx = new SqliteTransaction(this);
      let result: T;
      try {
        result = await currentTx.run(tx, () => fn(tx));
      } catch (err) {
        tx.active = false;
        // A failed rollback (the thread stopped) must not hide why the transaction failed.
        await this.link.call({ op: 'rollback' }).catch(() => undefined);
        throw err;
      }
      tx.active = false;
      await this.link.call({ op: 'commit' });
      return result;
    } finally {
      this.queue.release();
    }
  }

  async lock(_key: string): Promise<void> {
    const tx = currentTx.getStore();
    if (tx === undefined || tx.owner !== this || !tx.active) {
      throw new StoreError('lock() is only possible inside a transaction (call it on the transaction handle)');
    }
  }

  /** Finishes the queued statements, checkpoints the WAL, closes the connection and ends the thread (idempotent). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const wait = this.queue.acquire();
    if (wait !== undefined) await wait;
    try {
      if (this.link.failure === undefined) await this.link.call({ op: 'close' });
    } catch (err) {
      // The thread stopped meanwhile: nothing is left to close.
      if (this.link.failure === undefined) throw err;
    } finally {
      await this.link.detach();
      this.queue.release();
    }
  }

  /** Why this executor can no longer run statements (its worker thread stopped, the open failed), or undefined. */
  failure(): StoreError | undefined {
    return this.link.failure;
  }
}

/** The handle of one open transaction: statements go out at once (the transaction holds the queue); nesting = savepoints. */
class SqliteTransaction implements SqlExecutor {
  readonly dialect = 'sqlite' as const;
  active = true;
  private depth = 0;

  constructor(readonly owner: SqliteExecutor) {}

  private send(sql: string, req: Request): Promise<Value> {
    if (!this.active) return Promise.reject(new StoreError(`statement ${firstWords(sql)} was sent to a transaction that has ended`));
    return this.owner.link.call(req);
  }

  async all<T extends SqlRow = SqlRow>(sql: string, params: SqlParams = []): Promise<T[]> {
    return (await this.send(sql, { op: 'all', sql, params })) as T[];
  }

  async get<T extends SqlRow = SqlRow>(sql: string, params: SqlParams = []): Promise<T | undefined> {
    return (await this.send(sql, { op: 'get', sql, params })) as T | undefined;
  }

  async run(sql: string, params: SqlParams = []): Promise<SqlRunResult> {
    return { changes: (await this.send(sql, { op: 'run', sql, params })) as number };
  }

  async runMany(sql: string, rows: readonly SqlParams[]): Promise<number[]> {
    if (rows.length === 0) return [];
    return (await this.send(sql, { op: 'runMany', sql, rows })) as number[];
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
          await this.run(`ROLLBACK TO ${name}`);
          await this.run(`RELEASE ${name}`);
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

/**
 * Starts opening (creating if needed) the SQLite database at `path` in a worker thread of its own, which configures
 * it and migrates it to the current schema; returns the executor at once. Statements queue behind the open;
 * `await executor.ready()` for the schema version or the open's error. The file's directory is created. `:memory:`
 * gives a private in-memory database (tests).
 * The open fails (`ready()` and every statement reject) with a {@link StoreError} when the path is a directory or
 * cannot be created, the file is not a SQLite database, fails SQLite's integrity check (`PRAGMA quick_check`), or its
 * schema version is newer than this build knows.
 */
export function openSqliteExecutor(path: string, opts: SqliteOptions = {}): SqliteExecutor {
  const open: OpenRequest = {
    path,
    busyTimeoutMs: opts.busyTimeoutMs ?? 5000,
    ...(opts.migrations !== undefined ? { migrations: [...opts.migrations] } : {}),
  };
  return new SqliteExecutor(path, new WorkerLink(open));
}
