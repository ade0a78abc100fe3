/** The store's error and the backend-neutral tests of a backend error's kind (SQLite and PostgreSQL codes). */
import { ErrorCode, TokenwatchError } from '../errors.js';

/** Error of the store with a clear message: unusable file, unknown schema version, broken reference. */
export class StoreError extends TokenwatchError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCode.StoreFailed, message, options);
    this.name = 'StoreError';
  }
}

/**
 * The backend's code of an error: the SQLite result code of a `SqliteStoreError` (`sqliteCode`; better-sqlite3's
 * own errors: `code`), or the SQLSTATE of a `PostgresStoreError` (`sqlState`).
 */
function codeOf(err: unknown): unknown {
  if (typeof err !== 'object' || err === null) return undefined;
  const e = err as { code?: unknown; sqlState?: unknown; sqliteCode?: unknown };
  return e.sqlState ?? e.sqliteCode ?? e.code;
}

/**
 * Whether `err` is a backend's primary-key or unique-constraint violation: SQLite `SQLITE_CONSTRAINT_PRIMARYKEY` /
 * `SQLITE_CONSTRAINT_UNIQUE` (https://sqlite.org/rescode.html), PostgreSQL SQLSTATE `23505` (unique_violation,
 * https://www.postgresql.org/docs/current/errcodes-appendix.html).
 */
export function isUniqueViolation(err: unknown): boolean {
  const code = codeOf(err);
  return code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === '23505';
}

/** Whether `err` is a foreign-key violation: SQLite `SQLITE_CONSTRAINT_FOREIGNKEY`, PostgreSQL SQLSTATE `23503`. */
export function isForeignKeyViolation(err: unknown): boolean {
  const code = codeOf(err);
  return code === 'SQLITE_CONSTRAINT_FOREIGNKEY' || code === '23503';
}
