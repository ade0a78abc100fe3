/**
 * The messages between the SQLite executor (`sqlite.ts`, on the event loop's thread) and its worker thread
 * (`sqlite-worker.ts`, which owns the better-sqlite3 connection), and the errors they carry
 * (docs/design/architecture.md "Store"). No better-sqlite3 here: the event loop's thread never loads the addon.
 */
import { StoreError } from './errors.js';
import type { SqlParams, SqlRow } from './sql.js';

/** The `workerData` key that tells a module loaded in a worker thread to serve as the SQLite worker. */
export const SQLITE_WORKER_FLAG = 'tokenwatchSqliteWorker';

/** `workerData` of the SQLite worker thread. */
export interface SqliteWorkerData {
  [SQLITE_WORKER_FLAG]: true;
}

/** What opening a connection needs. */
export interface OpenRequest {
  /** The database file, or `:memory:`. */
  path: string;
  /** How long a statement waits for another connection's write lock, ms. */
  busyTimeoutMs: number;
  /** Migration steps to apply instead of all of them (tests build old databases). */
  migrations?: readonly string[];
}

/**
 * One request to the worker: `id` pairs it with its reply, `conn` names the connection (one per executor; the
 * process's executors share one thread). A connection's requests run one at a time in posting order; `open` comes
 * first, `close` last.
 */
export type SqliteRequest = { id: number; conn: number } & (
  | ({ op: 'open' } & OpenRequest)
  | { op: 'all' | 'get' | 'run'; sql: string; params: SqlParams }
  | { op: 'runMany'; sql: string; rows: readonly SqlParams[] }
  | { op: 'begin' | 'commit' | 'rollback' | 'close' }
);

/** An error as it crosses the thread boundary (structured clone keeps no class). */
export interface WireError {
  name: string;
  message: string;
  /** SQLite's result code (`SQLITE_…`), when the error has one. */
  sqliteCode?: string;
}

/** A reply: the value (rows, a row, changes, per-row changes, the schema version after `open`), or the error. */
export type SqliteReply = { id: number; ok: true; value: SqlRow[] | SqlRow | number | number[] | undefined } | { id: number; ok: false; error: WireError };

/** An error thrown in the worker, for the wire. */
export function toWire(err: unknown): WireError {
  const e = err as { name?: unknown; message?: unknown; sqliteCode?: unknown };
  return {
    name: typeof e.name === 'string' ? e.name : 'Error',
    message: typeof e.message === 'string' ? e.message : String(err),
    ...(typeof e.sqliteCode === 'string' ? { sqliteCode: e.sqliteCode } : {}),
  };
}

/**
 * A failed statement of the SQLite store: names the store's file and the statement's first words, with SQLite's
 * message and result code (`sqliteCode`, e.g. `SQLITE_CONSTRAINT_UNIQUE`, which `isUniqueViolation` reads); never the
 * statement's parameters.
 */
export class SqliteStoreError extends StoreError {
  constructor(
    message: string,
    /** SQLite's extended result code (https://sqlite.org/rescode.html), when it gave one. */
    readonly sqliteCode: string | undefined,
  ) {
    super(message);
    this.name = 'SqliteStoreError';
  }
}

/**
 * The SQLite store cannot run statements any more: its worker thread stopped (crashed, ran out of memory, was
 * terminated). Every pending and later call fails with it; `isStoreUnavailable` says true, `/readyz` says
 * `store-unavailable`. Restarting the process opens the file again (what was committed is there).
 */
export class SqliteWorkerStoppedError extends StoreError {
  constructor(message: string) {
    super(message);
    this.name = 'SqliteWorkerStoppedError';
  }
}

/** A {@link WireError} as the error class it was: StoreError, SqliteStoreError or SqliteWorkerStoppedError. */
export function fromWire(e: WireError): StoreError {
  if (e.name === 'SqliteWorkerStoppedError') return new SqliteWorkerStoppedError(e.message);
  if (e.name === 'StoreError') return new StoreError(e.message);
  return new SqliteStoreError(e.message, e.sqliteCode);
}

/** The first words of a statement, for messages (never its parameters). */
export function firstWords(sql: string): string {
  return sql.trim().split(/\s+/).slice(0, 3).join(' ');
}

/** `err` (thrown by better-sqlite3 for `sql`) as a {@link SqliteStoreError}; a StoreError is returned as it is. */
export function statementError(err: unknown, path: string, sql: string): StoreError {
  if (err instanceof StoreError) return err;
  const e = err as { code?: unknown; message?: unknown };
  const code = typeof e.code === 'string' ? e.code : undefined;
  const message = typeof e.message === 'string' ? e.message : String(err);
  return new SqliteStoreError(`SQLite store ${path}: ${firstWords(sql)}: ${message}${code ? ` (${code})` : ''}`, code);
}
