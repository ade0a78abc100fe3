/**
 * Opens the store the config names: the embedded SQLite file (`store.path`), or PostgreSQL (`store.postgres`: a
 * `pg` pool, src/store/postgres.ts, with its migrations applied under an advisory lock, src/store/migrations-postgres.ts).
 * Both behind the same {@link Store} facade over the repositories.
 */
import type { Config } from '../config/types.js';
import { openStore, RepositoryStore } from './db.js';
import { migratePostgres } from './migrations-postgres.js';
import { describePostgres, openPostgres, postgresOptionsOf } from './postgres.js';
import type { Store } from './types.js';

/**
 * The configured store. PostgreSQL: `path` is `postgres://user@host:port/database` (no password), for messages.
 * @throws {StoreError} when the SQLite file is unusable, or PostgreSQL cannot be reached, refuses the credentials or
 *   has a schema this build cannot run on (a breaking step it does not know)
 */
export async function openConfiguredStore(store: Config['store']): Promise<Store> {
  if (store.postgres === undefined) return openStore(store.path);
  const options = postgresOptionsOf(store.postgres);
  const sql = openPostgres(options);
  try {
    const { version } = await migratePostgres(sql);
    return new RepositoryStore(sql, describePostgres(options), version);
  } catch (err) {
    await sql.close().catch(() => undefined);
    throw err;
  }
}
