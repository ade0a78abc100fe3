/**
 * The PostgreSQL migrations (src/store/migrations-postgres.ts) against the run's real server: one step for each SQLite
 * step, making the same tables, columns and indexes (read back from sqlite_master / pragma and from
 * information_schema / pg_indexes after every step); applied once by replicas that migrate together; a failed step
 * leaves the previous version; a newer schema is accepted unless a step this binary does not know is breaking.
 */
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StoreError } from '../../src/store/errors.js';
import { MIGRATIONS } from '../../src/store/migrations.js';
import { migratePostgres, POSTGRES_MIGRATIONS } from '../../src/store/migrations-postgres.js';
import { openPostgres, type PostgresExecutor } from '../../src/store/postgres.js';
import { createTestDatabase, postgresServer, type TestDatabase } from '../support/postgres.js';

type Schema = Record<string, { columns: string[]; indexes: string[] }>;

function sqliteSchema(steps: number): Schema {
  const db = new Database(':memory:');
  try {
    for (const step of MIGRATIONS.slice(0, steps)) db.exec(step);
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all() as { name: string }[];
    const schema: Schema = {};
    for (const { name } of tables) {
      const columns = (db.prepare(`SELECT name FROM pragma_table_info(?)`).all(name) as { name: string }[]).map((c) => c.name).sort();
      const indexes = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL").all(name) as { name: string }[]).map((i) => i.name).sort();
      schema[name] = { columns, indexes };
    }
    return schema;
  } finally {
    db.close();
  }
}

async function postgresSchema(ex: PostgresExecutor): Promise<Schema> {
  const cols = await ex.all<{ t: string; c: string }>(
    "SELECT table_name AS t, column_name AS c FROM information_schema.columns WHERE table_schema = 'public' AND table_name <> 'schema_migrations' ORDER BY table_name, column_name",
  );
  // Indexes made by CREATE INDEX (not those behind a primary key or unique constraint).
  const idx = await ex.all<{ t: string; i: string }>(
    `SELECT i.tablename AS t, i.indexname AS i FROM pg_indexes i
      WHERE i.schemaname = 'public' AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname) ORDER BY i.indexname`,
  );
  const schema: Schema = {};
  for (const { t, c } of cols) (schema[t] ??= { columns: [], indexes: [] }).columns.push(c);
  for (const { t, i } of idx) schema[t]?.indexes.push(i);
  return schema;
}

const pgServer = postgresServer();

describe('migration lists', () => {
  it('has one PostgreSQL step for each SQLite step', () => {
    expect(POSTGRES_MIGRATIONS).toHaveLength(MIGRATIONS.length);
    expect(new Set(POSTGRES_MIGRATIONS.map((s) => s.name)).size).toBe(MIGRATIONS.length);
  });
});

describe.skipIf(!pgServer.available)('PostgreSQL migrations', () => {
  let db: TestDatabase;
  let ex: PostgresExecutor;
  beforeEach(async () => {
    db = await createTestDatabase();
    ex = openPostgres(db.options);
  });
  afterEach(async () => {
    await ex?.close();
    await db?.drop();
  });

  it('makes the same tables, columns and indexes as SQLite after every step', async () => {
    for (let k = 1; k <= MIGRATIONS.length; k++) {
      const result = await migratePostgres(ex, POSTGRES_MIGRATIONS.slice(0, k));
      expect(result).toEqual({ version: k, known: k, applied: 1 });
      expect(await postgresSchema(ex), `after step ${k} (${POSTGRES_MIGRATIONS[k - 1]!.name})`).toEqual(sqliteSchema(k));
    }
  });

  it('records each step with its time, and applies nothing the second time', async () => {
    let t = 1_764_633_600_000;
    expect(await migratePostgres(ex, POSTGRES_MIGRATIONS, () => t++)).toEqual({ version: MIGRATIONS.length, known: MIGRATIONS.length, applied: MIGRATIONS.length });
    const rows = await ex.all<{ version: number; name: string; breaking: number; applied_at: number }>('SELECT version, name, breaking, applied_at FROM schema_migrations ORDER BY version');
    expect(rows).toEqual(POSTGRES_MIGRATIONS.map((s, i) => ({ version: i + 1, name: s.name, breaking: 0, applied_at: 1_764_633_600_000 + i })));
    expect(await migratePostgres(ex)).toEqual({ version: MIGRATIONS.length, known: MIGRATIONS.length, applied: 0 });
  });

  it('applies every step once when three replicas migrate at the same time', async () => {
    const others = [openPostgres(db.options), openPostgres(db.options)];
    try {
      const results = await Promise.all([ex, ...others].map((e) => migratePostgres(e)));
      expect(results.map((r) => r.version)).toEqual([MIGRATIONS.length, MIGRATIONS.length, MIGRATIONS.length]);
      expect(results.reduce((n, r) => n + r.applied, 0)).toBe(MIGRATIONS.length);
      expect((await ex.get<{ n: number }>('SELECT count(*) AS n FROM schema_migrations'))!.n).toBe(MIGRATIONS.length);
    } finally {
      await Promise.all(others.map((e) => e.close()));
    }
  });

  it('a step that takes longer than the statement timeout still applies (an index over millions of rows)', async () => {
    const short = openPostgres({ ...db.options, statementTimeoutMs: 100, queryTimeoutMs: 10_000 });
    try {
      await expect(short.run('SELECT pg_sleep(0.5)')).rejects.toThrow(/statement timeout/);
      const steps = [...POSTGRES_MIGRATIONS.slice(0, 1), { name: 'slow', sql: 'SELECT pg_sleep(0.5)' }];
      expect(await migratePostgres(short, steps)).toEqual({ version: 2, known: 2, applied: 2 });
      // The limit is back for the store's own statements once the step's transaction has ended.
      await expect(short.run('SELECT pg_sleep(0.5)')).rejects.toThrow(/statement timeout/);
    } finally {
      await short.close();
    }
  });

  it('leaves the schema at the last good step when a step fails, naming the step', async () => {
    const steps = [...POSTGRES_MIGRATIONS.slice(0, 2), { name: 'broken step', sql: 'CREATE TABLE half_done (a TEXT); SELECT no_such_function();' }];
    const err = await migratePostgres(ex, steps).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect((err as Error).message).toMatch(/PostgreSQL schema migration 3 \(broken step\) failed: .*no_such_function/);
    expect((await ex.get<{ v: number }>('SELECT max(version) AS v FROM schema_migrations'))!.v).toBe(2);
    expect(await ex.get("SELECT 1 AS one FROM information_schema.tables WHERE table_name = 'half_done'")).toBeUndefined();
  });

  it('runs on a newer schema that only added things, and refuses one with a breaking step it does not know', async () => {
    const older = POSTGRES_MIGRATIONS.slice(0, -1);
    const newer = [...POSTGRES_MIGRATIONS, { name: 'adds a column', sql: 'ALTER TABLE findings ADD COLUMN note TEXT' }];
    await migratePostgres(ex, newer);
    expect(await migratePostgres(ex, older)).toEqual({ version: newer.length, known: older.length, applied: 0 });
    await migratePostgres(ex, [...newer, { name: 'drops a column', sql: 'ALTER TABLE findings DROP COLUMN note', breaking: true }]);
    await expect(migratePostgres(ex, older)).rejects.toThrow(
      new RegExp(`schema version ${newer.length + 1}, newer than this tokenwatch knows \\(${older.length}\\), with breaking step ${newer.length + 1} \\(drops a column\\)`),
    );
  });
});
