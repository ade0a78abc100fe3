/**
 * `tokenwatch store copy`: moves an embedded SQLite store into a PostgreSQL store without losing history
 * (docs/store.md; docs/install.md "Moving to PostgreSQL").
 *
 * 1. An online backup of the SQLite file (better-sqlite3 `db.backup()`, SQLite's backup API: a consistent snapshot
 *    even while `serve` writes the file; https://sqlite.org/backup.html) into a temporary file, checked with
 *    `PRAGMA quick_check` and brought to this binary's schema version (the source file itself is never written).
 * 2. The PostgreSQL schema migrated to the same version (src/store/migrations-postgres.ts).
 * 3. Refused when any target table has rows, unless `force` (then every table is emptied first, in the same
 *    transaction).
 * 4. Every table copied in batches (multi-row `INSERT`, at most {@link MAX_BATCH_ROWS} rows and 60,000 parameters)
 *    inside ONE PostgreSQL transaction, identity sequences moved past the copied ids, and each table's row count
 *    compared before `COMMIT`: a failure or a mismatch leaves the target as it was.
 *
 * `poller_lock` is not copied: it is the SQLite store's single-poller lock, a row of the process that held it. Nor are
 * the ownership tables `cluster_owners`, `replicas` and `startup_polls`: they say which live replica polls which cluster, facts of the
 * processes on the source store only (a copied owner valid until far in the future would leave its cluster unpolled).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { StoreError } from './errors.js';
import { MIGRATIONS } from './migrations.js';
import { migratePostgres } from './migrations-postgres.js';
import type { SqlExecutor } from './sql.js';

/** Tables of the SQLite store that {@link copySqliteToPostgres} leaves behind (see the module comment). */
export const NOT_COPIED = ['poller_lock', 'cluster_owners', 'replicas', 'startup_polls'] as const;

/** Most rows one `INSERT` carries. */
export const MAX_BATCH_ROWS = 1000;
/** PostgreSQL's protocol allows 65,535 parameters per statement; stay below. */
const MAX_PARAMS = 60_000;

/** Options of {@link copySqliteToPostgres}. */
export interface CopyOptions {
  /** Empty a non-empty target first instead of refusing. */
  force?: boolean;
  /** Rows per `INSERT` (default and maximum {@link MAX_BATCH_ROWS}). */
  batchRows?: number;
  /** Progress lines (`findings: 1000/5000 rows`), e.g. to stderr. */
  progress?: (line: string) => void;
  /** Directory of the temporary backup (default the OS temp directory). */
  tmpDir?: string;
}

/** What was copied. */
export interface CopyResult {
  /** Rows per copied table, in copy order. */
  tables: { name: string; rows: number }[];
  /** Total rows. */
  rows: number;
  /** The schema version both stores have now. */
  schemaVersion: number;
}

function quote(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** Takes the online backup of `sqlitePath` into `dir` and brings it to the current schema; returns the open copy. */
async function backupOf(sqlitePath: string, dir: string): Promise<Database.Database> {
  let source: Database.Database;
  try {
    source = new Database(sqlitePath, { readonly: true, fileMustExist: true });
  } catch (err) {
    throw new StoreError(`store copy: cannot open the SQLite store ${sqlitePath}: ${(err as Error).message}`);
  }
  const file = join(dir, 'backup.db');
  try {
    await source.backup(file);
  } catch (err) {
    throw new StoreError(`store copy: the online backup of ${sqlitePath} failed: ${(err as Error).message}`);
  } finally {
    source.close();
  }
  const db = new Database(file);
  try {
    const problems = (db.pragma('quick_check(3)') as Record<string, unknown>[]).map((r) => String(Object.values(r)[0])).filter((l) => l !== 'ok');
    if (problems.length > 0) throw new StoreError(`store copy: ${sqlitePath} is damaged (PRAGMA quick_check: ${problems.join('; ')}); restore it from a backup first`);
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version > MIGRATIONS.length) {
      throw new StoreError(`store copy: ${sqlitePath} has schema version ${version}, newer than this tokenwatch knows (${MIGRATIONS.length}); run the copy with the newer tokenwatch`);
    }
    if (version === 0) throw new StoreError(`store copy: ${sqlitePath} is not a tokenwatch store (schema version 0, no tables)`);
    // The backup is private: bring it to this binary's schema, as openStore would.
    for (let v = version; v < MIGRATIONS.length; v++) {
      db.transaction(() => {
        db.exec(MIGRATIONS[v]!);
        db.pragma(`user_version = ${v + 1}`);
      })();
    }
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

/**
 * Copies the SQLite store at `sqlitePath` into the PostgreSQL store behind `target` (see the module comment).
 * @throws {StoreError} when the SQLite file cannot be opened or backed up, is damaged or newer than this binary; when
 *   the target has rows and `force` is not set (naming the tables); when a row count differs after the copy; or any
 *   PostgreSQL error (the transaction is rolled back, the target unchanged)
 */
export async function copySqliteToPostgres(sqlitePath: string, target: SqlExecutor, opts: CopyOptions = {}): Promise<CopyResult> {
  const progress = opts.progress ?? (() => {});
  const batchRows = Math.max(1, Math.min(opts.batchRows ?? MAX_BATCH_ROWS, MAX_BATCH_ROWS));
  const dir = mkdtempSync(join(opts.tmpDir ?? tmpdir(), 'tokenwatch-copy-'));
  try {
    progress(`backing up ${sqlitePath} (SQLite online backup)`);
    const db = await backupOf(sqlitePath, dir);
    try {
      const { version } = await migratePostgres(target);
      // Creation order: a table comes after the tables its foreign keys name.
      const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid").all() as { name: string }[])
        .map((t) => t.name)
        .filter((t) => !(NOT_COPIED as readonly string[]).includes(t));
      const result = await target.transaction(async (tx) => {
        const nonEmpty: string[] = [];
        for (const t of tables) if ((await tx.get(`SELECT 1 AS one FROM ${quote(t)} LIMIT 1`)) !== undefined) nonEmpty.push(t);
        if (nonEmpty.length > 0) {
          if (!opts.force) {
            throw new StoreError(`store copy: the PostgreSQL store is not empty (rows in ${nonEmpty.join(', ')}); copy into an empty database, or pass --force to replace its rows`);
          }
          progress(`emptying ${nonEmpty.join(', ')} (--force)`);
          await tx.run(`TRUNCATE ${tables.map(quote).join(', ')} RESTART IDENTITY CASCADE`);
        }
        const copied: { name: string; rows: number }[] = [];
        for (const t of tables) copied.push({ name: t, rows: await copyTable(db, tx, t, batchRows, progress) });
        for (const { name, rows } of copied) {
          const n = (await tx.get<{ n: number }>(`SELECT count(*) AS n FROM ${quote(name)}`))?.n ?? 0;
          if (n !== rows) throw new StoreError(`store copy: ${name} has ${n} rows in PostgreSQL after the copy, ${rows} in SQLite; nothing was committed`);
        }
        return copied;
      });
      const rows = result.reduce((n, t) => n + t.rows, 0);
      progress(`copied ${rows} rows in ${result.length} tables; row counts match`);
      return { tables: result, rows, schemaVersion: version };
    } finally {
      db.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Copies one table in batches; moves an identity sequence past the copied ids. Returns the rows copied. */
async function copyTable(db: Database.Database, tx: SqlExecutor, table: string, batchRows: number, progress: (line: string) => void): Promise<number> {
  const columns = (db.prepare('SELECT name FROM pragma_table_info(?) ORDER BY cid').all(table) as { name: string }[]).map((c) => c.name);
  const total = (db.prepare(`SELECT count(*) AS n FROM ${quote(table)}`).get() as { n: number }).n;
  const perBatch = Math.max(1, Math.min(batchRows, Math.floor(MAX_PARAMS / columns.length)));
  const head = `INSERT INTO ${quote(table)} (${columns.map(quote).join(', ')}) VALUES `;
  const tuple = `(${columns.map(() => '?').join(', ')})`;
  let done = 0;
  let batch: unknown[][] = [];
  const flush = async () => {
    if (batch.length === 0) return;
    await tx.run(head + batch.map(() => tuple).join(', '), batch.flat());
    done += batch.length;
    batch = [];
    progress(`${table}: ${done}/${total} rows`);
  };
  // rowid order where the table has one; the iterator reads the backup lazily, one batch in memory at a time.
  for (const row of db.prepare(`SELECT ${columns.map(quote).join(', ')} FROM ${quote(table)}`).raw().iterate() as IterableIterator<unknown[]>) {
    batch.push(row);
    if (batch.length >= perBatch) await flush();
  }
  await flush();
  if (total === 0) progress(`${table}: 0 rows`);
  const identity = await tx.all<{ column_name: string }>(
    "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ? AND is_identity = 'YES'",
    [table],
  );
  for (const { column_name: col } of identity) {
    await tx.get(`SELECT setval(pg_get_serial_sequence(?, ?), COALESCE((SELECT max(${quote(col)}) FROM ${quote(table)}), 0) + 1, false) AS v`, [table, col]);
  }
  return done;
}
