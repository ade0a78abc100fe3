/**
 * The one query layer under the store's repositories: an asynchronous SQL executor with one implementation per
 * backend (embedded SQLite through better-sqlite3; PostgreSQL through `pg`). Repositories are written once, in the
 * SQL both backends accept, against this interface (docs/design/architecture.md "Store").
 *
 * SQL rules for repository code (so one text runs on both backends):
 * - parameters are positional `?`; the PostgreSQL executor numbers them (`$1`, `$2`, …) outside quoted text;
 * - times are integer epoch ms UTC (`INTEGER` in SQLite, `BIGINT` in PostgreSQL, which the PostgreSQL executor
 *   returns as a JavaScript number); booleans are integers 0/1; JSON documents are text;
 * - `INSERT … ON CONFLICT (…) DO UPDATE SET x = excluded.x` and `ON CONFLICT DO NOTHING` (never `INSERT OR …`),
 *   `RETURNING`, `COALESCE` (never `IFNULL`); `GREATEST`/`LEAST`, `FOR UPDATE` only behind {@link SqlExecutor.dialect};
 * - no backend-specific functions (`json_…`, `datetime()`, `PRAGMA`) outside the executor and the migrations.
 */

/** Which backend an executor talks to. */
export type SqlDialect = 'sqlite' | 'postgres';

/** A row as the backend returns it: column name → value (string, number, null). */
export type SqlRow = Record<string, unknown>;

/** Parameters of one statement, bound to its `?` placeholders in order. */
export type SqlParams = readonly unknown[];

/** What a write statement did. */
export interface SqlRunResult {
  /** Rows inserted, updated or deleted. */
  changes: number;
}

/**
 * An open database handle. Every method may throw a `StoreError` (src/store/errors.ts) naming the backend and the
 * statement's first words; the caller's data is never part of the message.
 */
export interface SqlExecutor {
  readonly dialect: SqlDialect;
  /** All rows of a query, in the order the query gives. */
  all<T extends SqlRow = SqlRow>(sql: string, params?: SqlParams): Promise<T[]>;
  /** The first row of a query, or undefined. */
  get<T extends SqlRow = SqlRow>(sql: string, params?: SqlParams): Promise<T | undefined>;
  /** Runs a write statement. */
  run(sql: string, params?: SqlParams): Promise<SqlRunResult>;
  /**
   * Runs one write statement once per parameter row, in order, as one request to the backend (SQLite: one message
   * to its worker thread; PostgreSQL: one round trip), and returns how many rows each run changed, in row order.
   * Outside a transaction the rows run in one transaction of their own (all or none). The first failing row fails
   * the call (inside a transaction, the caller's transaction then rolls back as for any failed statement).
   * For the hot loops of the store (token records, findings), where one message per row would add up.
   */
  runMany(sql: string, rows: readonly SqlParams[]): Promise<number[]>;
  /**
   * Runs `fn` in one write transaction on one connection and returns its result; statements inside must go
   * through the `tx` executor it is given (the outer executor waits until the transaction ends). If `fn` throws,
   * everything it wrote is rolled back and the error is rethrown. A nested `tx.transaction` is a savepoint.
   * SQLite: `BEGIN IMMEDIATE` (the write lock up front). PostgreSQL: `BEGIN` at READ COMMITTED; code that must
   * not lose a race calls {@link SqlExecutor.lock} first or relies on a unique constraint.
   */
  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T>;
  /**
   * Inside a transaction: takes an exclusive lock on `key` (e.g. `approval-target:<key>`) held until the
   * transaction ends, so of concurrent transactions that lock one key exactly one proceeds at a time.
   * SQLite: nothing to do (`BEGIN IMMEDIATE` already serialises every writer). PostgreSQL:
   * `pg_advisory_xact_lock(hashtextextended(key, 0))`. @throws outside a transaction.
   */
  lock(key: string): Promise<void>;
  /** Closes the handle (idempotent); pending statements finish first. */
  close(): Promise<void>;
  /**
   * Why this handle can run no statement any more, or undefined while it can. SQLite: its worker thread stopped
   * (a `SqliteWorkerStoppedError`, for `/readyz`). PostgreSQL has none (a lost server is retried per statement).
   */
  failure?(): Error | undefined;
}
