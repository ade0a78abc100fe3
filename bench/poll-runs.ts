/**
 * What `serve`'s reads and prunes of poll runs cost at fleet scale (src/store/polls.ts; docs/performance.md "Poll runs
 * at fleet scale"). Builds a SQLite store file with CLUSTERS × RUNS finished poll runs, 5 minutes apart per cluster
 * (the default schedule; 2,016 runs are its 7 days of default retention), then prints, median of 7 runs each:
 *
 * - through the store (its worker thread, as `serve` calls them): `pruneRuns` after every poll, when nothing and when
 *   one tick of the fleet (CLUSTERS runs) is past retention; `coverage` of one cluster over 24 h (quiet resolution,
 *   every poll); `lastRuns` of one cluster (each poller's start, `/tokens status` of a cluster another replica polls)
 *   and of all (the shared health every 10 s with clusters shared out across replicas);
 * - the same statements on a direct better-sqlite3 connection, as they are and as they were before (the statements
 *   and schema of schema version 18: no index on `started_at`, `lastRuns` filtering the whole table), each inside a
 *   transaction rolled back after it so that every run sees the same rows.
 *
 * Usage: `npm run bench:poll-runs -- [CLUSTERS=1000] [RUNS=2016]`. Writes its file under the OS temp directory and
 * removes it at the end. Times are wall-clock ms.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { openStore } from '../src/store/db.js';

const args = process.argv.slice(2);
if (args.length > 2 || args.some((a) => !/^[1-9]\d*$/.test(a))) {
  process.stderr.write(`usage: npm run bench:poll-runs -- [CLUSTERS=1000] [RUNS=2016]   (positive whole numbers; got: ${args.join(' ')})\n`);
  process.exit(2);
}
const [CLUSTERS = 1000, RUNS = 2016] = args.map(Number);
const INTERVAL_MS = 300_000;
const DAY_MS = 86_400_000;
const REPEAT = 7;
const NOW = Date.UTC(2026, 11, 7);
const oldest = NOW - RUNS * INTERVAL_MS;
const oneTick = oldest + INTERVAL_MS;
const probe = `cluster-${Math.floor(CLUSTERS / 2)}`;

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ms = (x: number): string => `${x < 10 ? x.toFixed(2) : x.toFixed(0)} ms`;

/** Statements as they are now and as they were (schema version 18). */
const PRUNE = {
  now: 'DELETE FROM poll_runs WHERE started_at < ? AND EXISTS (SELECT 1 FROM poll_runs later WHERE later.cluster = poll_runs.cluster AND later.id > poll_runs.id)',
  before: 'DELETE FROM poll_runs WHERE started_at < ? AND id NOT IN (SELECT max(id) FROM poll_runs GROUP BY cluster)',
};
const COVERAGE = `SELECT
  (SELECT count(*) FROM poll_runs WHERE cluster = ? AND started_at >= ? AND ended_at IS NOT NULL AND error IS NOT NULL) AS failed,
  (SELECT count(*) FROM poll_runs WHERE cluster = ? AND started_at >= ? AND ended_at IS NOT NULL AND error IS NULL) AS succeeded,
  (SELECT max(started_at) FROM poll_runs WHERE cluster = ? AND started_at <= ? AND ended_at IS NOT NULL AND error IS NULL) AS last_before`;
const LAST_SUCCESS = `(SELECT max(s.ended_at) FROM poll_runs s WHERE s.cluster = p.cluster AND s.ended_at IS NOT NULL AND s.error IS NULL) AS last_success_at`;
const LAST_RUNS = {
  now: `WITH RECURSIVE clusters (name) AS (
          SELECT min(cluster) FROM poll_runs
          UNION ALL
          SELECT (SELECT min(q.cluster) FROM poll_runs q WHERE q.cluster > clusters.name) FROM clusters WHERE clusters.name IS NOT NULL)
        SELECT p.*, ${LAST_SUCCESS} FROM clusters c JOIN poll_runs p ON p.id = (SELECT max(q.id) FROM poll_runs q WHERE q.cluster = c.name) ORDER BY p.cluster`,
  before: `SELECT p.*, ${LAST_SUCCESS} FROM poll_runs p WHERE p.id = (SELECT max(q.id) FROM poll_runs q WHERE q.cluster = p.cluster) ORDER BY p.cluster`,
};

const dir = mkdtempSync(join(tmpdir(), 'tw-bench-poll-runs-'));
const file = join(dir, 'store.db');
try {
  await (await openStore(file)).close(); // migrated, empty
  const db = new Database(file);
  const insert = db.prepare('INSERT INTO poll_runs (cluster, source, started_at, ended_at, scheduled_at) VALUES (?, ?, ?, ?, ?)');
  db.transaction(() => {
    for (let j = 0; j < RUNS; j++) {
      const t = oldest + j * INTERVAL_MS;
      for (let c = 0; c < CLUSTERS; c++) insert.run(`cluster-${c}`, 'cloudwatch', t, t + 1000, t);
    }
  })();

  const direct = (sql: string, params: unknown[]): number => {
    const stmt = db.prepare(sql);
    const times: number[] = [];
    for (let i = 0; i < REPEAT; i++) {
      db.exec('BEGIN');
      const t0 = performance.now();
      if (stmt.reader) stmt.all(...params);
      else stmt.run(...params);
      times.push(performance.now() - t0);
      db.exec('ROLLBACK');
    }
    return median(times);
  };
  const cov = [probe, NOW - DAY_MS, probe, NOW - DAY_MS, probe, NOW - DAY_MS];
  const measure = (v: 'now' | 'before') => ({
    pruneIdle: direct(PRUNE[v], [oldest]),
    pruneTick: direct(PRUNE[v], [oneTick]),
    coverage: direct(COVERAGE, cov),
    lastRunsAll: direct(LAST_RUNS[v], []),
  });
  const now = measure('now');
  db.exec('DROP INDEX poll_runs_by_start; DROP INDEX poll_runs_by_cluster_start; DROP INDEX poll_runs_succeeded');
  const before = measure('before');
  db.exec(`CREATE INDEX poll_runs_by_start ON poll_runs (started_at);
    CREATE INDEX poll_runs_by_cluster_start ON poll_runs (cluster, started_at);
    CREATE INDEX poll_runs_succeeded ON poll_runs (cluster, ended_at) WHERE ended_at IS NOT NULL AND error IS NULL;`);
  db.close();

  const store = await openStore(file);
  let deleted = 0;
  const timed = async (fn: (i: number) => Promise<unknown>): Promise<number> => {
    const times: number[] = [];
    for (let i = 0; i < REPEAT; i++) {
      const t0 = performance.now();
      await fn(i);
      times.push(performance.now() - t0);
    }
    return median(times);
  };
  const viaStore = {
    pruneIdle: await timed(() => store.polls.pruneRuns(oldest)),
    pruneTick: await timed(async (i) => (deleted += await store.polls.pruneRuns(oldest + (i + 1) * INTERVAL_MS))),
    coverage: await timed(() => store.polls.coverage(probe, NOW - DAY_MS)),
    lastRunsOne: await timed(() => store.polls.lastRuns(probe)),
    lastRunsAll: await timed(() => store.polls.lastRuns()),
  };
  await store.close();
  const deletedPerTick = Math.round(deleted / REPEAT);

  const row = (what: string, s: string, n: string, b: string) => console.log(`  ${what.padEnd(44)}${s.padStart(10)}${n.padStart(12)}${b.padStart(12)}`);
  console.log(`poll_runs: ${CLUSTERS.toLocaleString('en-US')} clusters × ${RUNS.toLocaleString('en-US')} runs = ${(CLUSTERS * RUNS).toLocaleString('en-US')} rows (SQLite); median of ${REPEAT}`);
  console.log('  via store: as serve calls it, committed; direct and before: the statement alone, rolled back (no commit)');
  row('', 'via store', 'direct', 'before');
  row('pruneRuns, nothing past retention', ms(viaStore.pruneIdle), ms(now.pruneIdle), ms(before.pruneIdle));
  row(`pruneRuns, one tick past (${deletedPerTick} runs deleted)`, ms(viaStore.pruneTick), ms(now.pruneTick), ms(before.pruneTick));
  row('coverage of one cluster over 24 h', ms(viaStore.coverage), ms(now.coverage), ms(before.coverage));
  row('lastRuns of one cluster', ms(viaStore.lastRunsOne), '', '(= all)');
  row('lastRuns of all clusters', ms(viaStore.lastRunsAll), ms(now.lastRunsAll), ms(before.lastRunsAll));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
