/**
 * A SqlExecutor over the store's SQLite file for the repository tests (migrations applied by `openStore`); the
 * store's own executor replaces it once the store runs on one.
 */
import Database from 'better-sqlite3';
import { openStore } from '../../src/store/index.js';
import type { SqlExecutor, SqlParams, SqlRow } from '../../src/store/sql.js';

/** Opens `path` (migrated to the current schema) as a {@link SqlExecutor}. */
export async function openStoreExecutor(path: string): Promise<SqlExecutor> {
  openStore(path).close();
  const db = new Database(path);
  const exec = (d: Database.Database): SqlExecutor => ({
    dialect: 'sqlite',
    all: async <T extends SqlRow>(sql: string, params: SqlParams = []) => d.prepare(sql).all(...params) as T[],
    get: async <T extends SqlRow>(sql: string, params: SqlParams = []) => d.prepare(sql).get(...params) as T | undefined,
    run: async (sql: string, params: SqlParams = []) => ({ changes: d.prepare(sql).run(...params).changes }),
    transaction: async (fn) => {
      d.exec('BEGIN IMMEDIATE');
      try {
        const out = await fn(exec(d));
        d.exec('COMMIT');
        return out;
      } catch (err) {
        d.exec('ROLLBACK');
        throw err;
      }
    },
    lock: async () => undefined,
    close: async () => {
      if (d.open) d.close();
    },
  });
  return exec(db);
}
