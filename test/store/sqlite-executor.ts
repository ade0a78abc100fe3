/**
 * A minimal SqlExecutor over better-sqlite3 for the cluster-ownership repository's tests, until the store's own
 * SQLite executor is in place: one connection per executor, transactions serialised by a promise chain and
 * `BEGIN IMMEDIATE` (so two executors on one file are two processes' worth of writers).
 */
import Database from 'better-sqlite3';
import { MIGRATIONS } from '../../src/store/migrations.js';
import type { SqlExecutor, SqlParams, SqlRow } from '../../src/store/sql.js';

export function openTestExecutor(path: string, opts: { migrate?: boolean } = {}): SqlExecutor {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('busy_timeout = 5000');
  if (opts.migrate ?? true) {
    const at = db.pragma('user_version', { simple: true }) as number;
    for (let i = at; i < MIGRATIONS.length; i++) {
      db.exec('BEGIN IMMEDIATE');
      db.exec(MIGRATIONS[i]!);
      db.pragma(`user_version = ${i + 1}`);
      db.exec('COMMIT');
    }
  }
  let queue: Promise<unknown> = Promise.resolve();
  let inTx = false;
  const base = (txOnly: boolean): SqlExecutor => ({
    dialect: 'sqlite',
    all: async <T extends SqlRow>(sql: string, params: SqlParams = []) => db.prepare(sql).all(...params) as T[],
    get: async <T extends SqlRow>(sql: string, params: SqlParams = []) => db.prepare(sql).get(...params) as T | undefined,
    run: async (sql: string, params: SqlParams = []) => ({ changes: db.prepare(sql).run(...params).changes }),
    transaction: async <T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> => {
      const go = async (): Promise<T> => {
        db.exec('BEGIN IMMEDIATE');
        inTx = true;
        try {
          const out = await fn(base(true));
          db.exec('COMMIT');
          return out;
        } catch (err) {
          db.exec('ROLLBACK');
          throw err;
        } finally {
          inTx = false;
        }
      };
      const p = queue.then(go, go);
      queue = p.catch(() => undefined);
      return p;
    },
    lock: async () => {
      if (!txOnly || !inTx) throw new Error('lock() outside a transaction');
    },
    close: async () => void db.close(),
  });
  return base(false);
}
