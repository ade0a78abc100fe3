/**
 * The store backends a shared suite runs against: the embedded SQLite store and, where the run's PostgreSQL server is
 * up (test/support/postgres.ts), the PostgreSQL store. Use
 * `describe.each(storeBackends())('… (%s)', (_name, backend) => { afterEach(backend.cleanup); afterAll(backend.dispose); … })`.
 *
 * PostgreSQL: one database per backend (per test file), emptied (`TRUNCATE … RESTART IDENTITY`) by each open, so tests
 * stay independent without paying a `CREATE DATABASE` each.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openPostgresStore, openStore } from '../../src/store/db.js';
import { openPostgres } from '../../src/store/postgres.js';
import type { Store } from '../../src/store/types.js';
import { createTestDatabase, postgresServer, type TestDatabase } from '../support/postgres.js';

/** One backend: opens fresh stores and removes what they left. */
export interface StoreBackend {
  name: 'sqlite' | 'postgres';
  /** A fresh, empty, migrated store (SQLite: in memory, so it has no peers). */
  open: () => Promise<Store>;
  /** A fresh, empty, migrated store that {@link StoreBackend.peer} can share (SQLite: a file). */
  openShared: () => Promise<Store>;
  /**
   * Another store on the data of the last {@link StoreBackend.openShared}, as a second replica: its own connection
   * (SQLite, to the same file) or its own pool (PostgreSQL).
   */
  peer: () => Promise<Store>;
  /** Closes the stores opened since the last cleanup (afterEach). */
  cleanup: () => Promise<void>;
  /** Removes the backend's files or database (afterAll). */
  dispose: () => Promise<void>;
}

function sqlite(): StoreBackend {
  const opened: Store[] = [];
  let dir: string | undefined;
  let n = 0;
  let last: string | undefined;
  const track = (s: Store) => {
    opened.push(s);
    return s;
  };
  return {
    name: 'sqlite',
    open: async () => track(await openStore(':memory:')),
    openShared: async () => {
      dir ??= mkdtempSync(join(tmpdir(), 'tw-store-backend-'));
      last = join(dir, `s${++n}.db`);
      return track(await openStore(last));
    },
    peer: async () => {
      if (last === undefined) throw new Error('peer() before openShared()');
      return track(await openStore(last));
    },
    cleanup: async () => {
      for (const s of opened.splice(0).reverse()) await s.close();
    },
    dispose: async () => {
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    },
  };
}

function postgres(): StoreBackend {
  const opened: Store[] = [];
  let db: TestDatabase | undefined;
  const track = (s: Store) => {
    opened.push(s);
    return s;
  };
  const open = async (): Promise<Store> => {
    if (db === undefined) db = await createTestDatabase();
    else {
      const sql = openPostgres(db.options);
      try {
        const tables = await sql.all<{ t: string }>("SELECT tablename AS t FROM pg_tables WHERE schemaname = current_schema() AND tablename <> 'schema_migrations'");
        if (tables.length > 0) await sql.run(`TRUNCATE ${tables.map((r) => `"${r.t}"`).join(', ')} RESTART IDENTITY CASCADE`);
      } finally {
        await sql.close();
      }
    }
    return track(await openPostgresStore(db.options));
  };
  return {
    name: 'postgres',
    open,
    openShared: open,
    peer: async () => {
      if (db === undefined) throw new Error('peer() before openShared()');
      return track(await openPostgresStore(db.options));
    },
    cleanup: async () => {
      for (const s of opened.splice(0)) await s.close();
    },
    dispose: async () => {
      await db?.drop();
      db = undefined;
    },
  };
}

/** `[name, backend]` pairs for `describe.each`: SQLite always, PostgreSQL when the run's server is available. */
export function storeBackends(): [string, StoreBackend][] {
  const list: [string, StoreBackend][] = [['sqlite', sqlite()]];
  if (postgresServer().available) list.push(['postgres', postgres()]);
  return list;
}
