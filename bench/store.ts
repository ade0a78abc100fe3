/**
 * Store benchmark (the store is pruned by retention, and a poll writes only what changed).
 *
 * Part 1 — idle poll: a store holding N token records (default 100,000: stale tokens of 1,000 ServiceAccounts × 100
 * pods, without cluster state) and an audit source with nothing new. Times `ClusterPoller.pollOnce` (the real poller:
 * read records, aggregate, write, build findings, save findings, retention, quiet check) three times each:
 *   - before: token records written the old way (all deleted and re-inserted on every poll);
 *   - after, first poll of a process: every record compared with the stored row, none written;
 *   - after, later polls: nothing new and nothing to prune, so nothing compared or written;
 *   - after, a poll with one new token use: every record compared in memory, one written.
 * Prints the median of each. Wall-clock times: run it on an otherwise idle machine.
 *
 * Part 2 — store size over a simulated period longer than the longest default retention (action log, 90 d): every
 * simulated day brings `--events-per-day` audit events (default 100,000), stored as the poller stores them:
 *   - seen auditIDs: 2 h retention, so only the last 2 h of a day's events are still there at the end of the day
 *     (the bench inserts only those; inserting the whole day and pruning gives the same end state, slower);
 *   - token records: `--distinct-ratio` of the events (default 0.2) are uses of a token not seen before (e.g. 401s
 *     from new sources), the rest repeat known tokens; token records are kept `retention.tokenRecords` (7 d);
 *   - poll runs: 288 a day (every 5 min), kept `retention.pollRuns` (7 d);
 *   - action log: `--actions-per-day` rows (default 200), kept `retention.actionLog` (90 d).
 * Retention runs once per simulated day with the defaults of `Config.retention` (the poller runs it after every poll).
 * Prints, every 10 days and at the end: rows per table, pages in use and the database file size. SQLite reuses freed
 * pages, so the file stops growing once retention applies.
 *
 * Part 3 — the store's cost per poll on both backends: the same ClusterPoller on the embedded SQLite store (a file) and
 * on the PostgreSQL store (a pool over loopback TCP), with `--poll-records` token records stored (default 10,000):
 *   - an idle poll (nothing new; nothing compared or written);
 *   - a poll of `--poll-events` new audit events (default 10,000 stale-token uses spread over 100 ServiceAccounts: their
 *     auditIDs marked seen, their token records merged and written, findings saved, one poll run, retention).
 * PostgreSQL: `TOKENWATCH_BENCH_POSTGRES_URL` (`postgres://user@host:port/db`, password from `PGPASSWORD`, sslmode
 * disable) or, without it, a throwaway server started like the tests' (test/support/postgres-server.ts; skipped with a
 * message when the binaries are missing). Prints the median of 3 polls of each kind, per backend, and the load average
 * (`os.loadavg()`) before and after: on a shared machine the figures move with it.
 *
 * Usage: `npm run bench:store -- [--parts 1,2,3] [--days N] [--events-per-day N] [--distinct-ratio R] [--actions-per-day N]
 * [--records N] [--poll-records N] [--poll-events N]`
 */
import { appendFileSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseConfig } from '../src/config/index.js';
import type { TokenRecord } from '../src/findings/types.js';
import { createLogger } from '../src/observability/logger.js';
import { ClusterPoller, POLLER_DEFAULTS } from '../src/pipeline/poll.js';
import { FileSource } from '../src/sources/file.js';
import pg from 'pg';
import { parsePostgresUrl } from '../src/config/schema.js';
import { openPostgresStore } from '../src/store/db.js';
import { openStore, type Store } from '../src/store/index.js';
import type { PostgresOptions } from '../src/store/postgres.js';
import { auditEvent } from '../test/sources/events.js';
import { startPostgres } from '../test/support/postgres-server.js';

interface Args {
  days: number;
  eventsPerDay: number;
  distinctRatio: number;
  actionsPerDay: number;
  records: number;
  parts: Set<number>;
  pollRecords: number;
  pollEvents: number;
}

const USAGE = 'usage: bench/store.ts [--parts 1,2,3] [--days N] [--events-per-day N] [--distinct-ratio R] [--actions-per-day N] [--records N] [--poll-records N] [--poll-events N]';

function parseArgs(argv: string[]): Args {
  const a: Args = { days: 100, eventsPerDay: 100_000, distinctRatio: 0.2, actionsPerDay: 200, records: 100_000, parts: new Set([1, 2, 3]), pollRecords: 10_000, pollEvents: 10_000 };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    if (k === '--parts') {
      const parts = (argv[++i] ?? '').split(',').map(Number);
      if (parts.length === 0 || parts.some((n) => ![1, 2, 3].includes(n))) throw new Error(`bad value for --parts: ${argv[i]} (${USAGE})`);
      a.parts = new Set(parts);
      continue;
    }
    const v = Number(argv[++i]);
    if (!Number.isFinite(v) || v < 0) throw new Error(`bad value for ${k}: ${argv[i]} (${USAGE})`);
    if (k === '--days') a.days = Math.floor(v);
    else if (k === '--events-per-day') a.eventsPerDay = Math.floor(v);
    else if (k === '--distinct-ratio') a.distinctRatio = Math.min(1, v);
    else if (k === '--actions-per-day') a.actionsPerDay = Math.floor(v);
    else if (k === '--records') a.records = Math.floor(v);
    else if (k === '--poll-records') a.pollRecords = Math.floor(v);
    else if (k === '--poll-events') a.pollEvents = Math.floor(v);
    else throw new Error(`unknown argument ${k} (${USAGE})`);
  }
  return a;
}

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;
const T0 = Date.parse('2026-01-01T00:00:00Z');
const CLUSTER = 'bench';
const silent = createLogger({ level: 'silent' });

/** A stale token of ServiceAccount `sa-<s>` in pod `p-<p>`, used at `lastSeen`. */
function staleToken(s: number, p: number, lastSeen: number): TokenRecord {
  const warnAfter = lastSeen - 20 * DAY;
  return {
    cluster: CLUSTER,
    kind: 'stale-token',
    subject: `system:serviceaccount:ns-${s % 50}:sa-${s}`,
    namespace: `ns-${s % 50}`,
    serviceAccount: `sa-${s}`,
    pod: `sa-${s}-pod-${p}`,
    podUid: `00000000-0000-4000-8000-${(s * 1000 + p).toString().padStart(12, '0')}`,
    warnAfter,
    rejectionAt: warnAfter + 90 * DAY,
    requests: 12,
    firstSeen: lastSeen - 6 * HOUR,
    lastSeen,
    maxSecondsAfterWarning: 20 * 86_400,
    userAgents: ['client-go/v0.29.0 (linux/amd64) kubernetes/abcdef'],
    sourceIPs: ['10.0.0.1'],
    hourly: { [String(Math.floor(lastSeen / HOUR) * HOUR)]: 12 },
  };
}

/** An unauthorized-use record from source `i` (a new 401 source), at `lastSeen`. */
function unauthorized(i: number, lastSeen: number): TokenRecord {
  return {
    cluster: CLUSTER,
    kind: 'unauthorized',
    subject: '(unattributed)/(unattributed)',
    namespace: '(unattributed)',
    serviceAccount: '(unattributed)',
    requests: 1,
    firstSeen: lastSeen,
    lastSeen,
    userAgents: [`scanner/${i % 97}`],
    sourceIPs: [`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`],
    hourly: { [String(Math.floor(lastSeen / HOUR) * HOUR)]: 1 },
  };
}

/** The old poll write: every record of the cluster deleted and re-inserted. */
function oldReplace(store: Store): Store {
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'tokenRecords') {
        const replace = (cluster: string, records: readonly TokenRecord[]) =>
          target.transaction(async (tx) => {
            const deleted = await tx.tokenRecords.prune(cluster, Number.MAX_SAFE_INTEGER);
            await tx.tokenRecords.upsert(records);
            return { upserted: records.length, deleted };
          });
        // The repository with its other methods (on the prototype chain) and `replace` done the old way.
        return Object.assign(Object.create(target.tokenRecords) as Store['tokenRecords'], { replace });
      }
      // The poller writes through the transaction's Store: it must write the old way too.
      if (prop === 'transaction') return <T>(fn: (tx: Store) => Promise<T>) => target.transaction((tx) => fn(oldReplace(tx)));
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function idlePoll(args: Args, dir: string): Promise<void> {
  const log = join(dir, 'audit.log');
  writeFileSync(log, '');
  const cluster = parseConfig({ clusters: [{ name: CLUSTER, audit: { file: { path: log } } }] }, {}).clusters[0]!;
  const now = T0 + 200 * DAY;
  const records: TokenRecord[] = [];
  for (let i = 0; i < args.records; i++) records.push(staleToken(Math.floor(i / 100), i % 100, now - (i % 5000) * MIN));
  console.log(`\nPart 1: idle poll with ${args.records.toLocaleString('en-US')} token records (nothing new in the audit source)`);
  const modes = [
    ['before', 'before: every record deleted and re-inserted  '],
    ['first', 'after, first poll of a process: all compared  '],
    ['steady', 'after, later polls: nothing compared        '],
    ['one-new', 'after, a poll with one new token use         '],
  ] as const;
  let seq = 0;
  for (const [mode, label] of modes) {
    const path = join(dir, `idle-${mode}.db`);
    const store = await openStore(path);
    await store.tokenRecords.upsert(records);
    const target = mode === 'before' ? oldReplace(store) : store;
    const mk = () => new ClusterPoller({ cluster, source: new FileSource({ path: log }), store: target, logger: silent, clock: () => now });
    let poller = mk();
    await poller.pollOnce(); // warm-up: first read of the (empty) source, findings saved
    const times: number[] = [];
    let written = 0;
    for (let i = 0; i < 3; i++) {
      // The old poller rewrote on every poll; a new poller instance compares everything once.
      if (mode === 'before' || mode === 'first') poller = mk();
      if (mode === 'one-new') {
        const pod = 'sa-7-pod-7';
        appendFileSync(log, `${auditEvent({ auditID: `new-${seq++}`, time: now - MIN, kind: 'stale', namespace: 'ns-7', serviceAccount: 'sa-7', pod, secondsAfterWarning: 20 * 86_400 })}\n`);
      }
      const t = performance.now();
      const out = await poller.pollOnce();
      times.push(performance.now() - t);
      if (out.error) throw new Error(out.error);
      written = out.recordsWritten;
    }
    console.log(`  ${label}: median ${(median(times) / 1000).toFixed(2)} s per poll, ${written.toLocaleString('en-US')} token-record rows written`);
    await store.close();
  }
}

function sizeOf(path: string): string {
  const bytes = statSync(path).size + (statSync(`${path}-wal`, { throwIfNoEntry: false })?.size ?? 0);
  return `${(bytes / 1_048_576).toFixed(1)} MiB`;
}

async function simulate(args: Args, dir: string): Promise<void> {
  const path = join(dir, 'period.db');
  const store = await openStore(path);
  const retention = POLLER_DEFAULTS.retention;
  const quietMs = POLLER_DEFAULTS.quietPeriodMs;
  const distinct = Math.round(args.eventsPerDay * args.distinctRatio);
  const seenPerDay = Math.round(args.eventsPerDay / 12); // the last 2 h of the day
  console.log(
    `\nPart 2: ${args.days} simulated days, ${args.eventsPerDay.toLocaleString('en-US')} events/day (${distinct.toLocaleString('en-US')} new token records/day), ` +
      `${args.actionsPerDay} action-log rows/day, 288 polls/day; retention: token records ${retention.tokenRecordsMs / DAY} d, ` +
      `poll runs ${Math.max(retention.pollRunsMs, quietMs + HOUR) / DAY} d, action log ${retention.actionLogMs / DAY} d, seen auditIDs 2 h`,
  );
  console.log('  day  token records  seen ids  poll runs  action log  file (db + wal)');
  let source = 0;
  let audit = 0;
  const t0 = performance.now();
  for (let day = 1; day <= args.days; day++) {
    const end = T0 + day * DAY;
    await store.transaction(async (tx) => {
      const recs: TokenRecord[] = [];
      for (let i = 0; i < distinct; i++) recs.push(unauthorized(source++, end - DAY + Math.floor((i * DAY) / Math.max(1, distinct))));
      await tx.tokenRecords.upsert(recs);
      const ids: string[] = [];
      for (let i = 0; i < seenPerDay; i++) ids.push(`audit-${audit++}`);
      await tx.polls.markSeen(CLUSTER, ids, end);
      for (let p = 0; p < 288; p++) {
        const at = end - DAY + p * 5 * MIN;
        await tx.polls.finishRun(await tx.polls.startRun(CLUSTER, 'file:bench', at), { endedAt: at + 2000, events: Math.round(args.eventsPerDay / 288), tokenUses: 0 });
      }
      for (let i = 0; i < args.actionsPerDay; i++) {
        await tx.actions.log({ at: end - DAY + Math.floor((i * DAY) / args.actionsPerDay), cluster: CLUSTER, actor: 'U0BENCH', action: 'snooze', target: `ServiceAccount ns/sa-${i}`, result: 'ok', detail: 'snoozed for 1 day' });
      }
      // Retention, as the poller applies it after each poll.
      await tx.polls.pruneSeen(CLUSTER, end - 2 * HOUR - 1);
      await tx.tokenRecords.prune(CLUSTER, end - retention.tokenRecordsMs);
      await tx.polls.pruneRuns(end - Math.max(retention.pollRunsMs, quietMs + HOUR));
      await tx.actions.prune(end - retention.actionLogMs);
    });
    if (day % 10 === 0 || day === args.days) {
      const actions = (await store.actions.list(CLUSTER, 1_000_000)).length;
      console.log(
        `  ${String(day).padStart(3)}  ${(await store.tokenRecords.count(CLUSTER)).toLocaleString('en-US').padStart(13)}  ${(await store.polls.countSeen(CLUSTER)).toLocaleString('en-US').padStart(8)}` +
          `  ${(await pollRunCount(path)).toLocaleString('en-US').padStart(9)}  ${actions.toLocaleString('en-US').padStart(10)}  ${sizeOf(path).padStart(15)}`,
      );
    }
  }
  console.log(`  (simulated in ${((performance.now() - t0) / 1000).toFixed(1)} s)`);
  await store.close();
}

/** Poll runs stored (read with a second connection; the Store interface lists only the latest per cluster). */
async function pollRunCount(path: string): Promise<number> {
  const s = await openStore(path);
  try {
    return (await s.polls.coverage(CLUSTER, 0)).succeeded;
  } finally {
    await s.close();
  }
}

/** Where Part 3 gets PostgreSQL: the URL of `TOKENWATCH_BENCH_POSTGRES_URL`, or a throwaway server; undefined with why. */
async function benchPostgres(): Promise<{ options: PostgresOptions; stop: () => void } | { skip: string }> {
  const url = process.env.TOKENWATCH_BENCH_POSTGRES_URL;
  if (url !== undefined && url !== '') {
    const at = parsePostgresUrl(url);
    if ('problems' in at) throw new Error(`TOKENWATCH_BENCH_POSTGRES_URL: ${at.problems.join('; ')}`);
    return { options: { ...at, sslmode: 'disable', ...(process.env.PGPASSWORD ? { password: process.env.PGPASSWORD } : {}) }, stop: () => {} };
  }
  const server = await startPostgres();
  if (!server.info.available) return { skip: server.info.reason };
  const { host, port, superuser } = server.info;
  const admin = new pg.Client({ host, port, user: superuser, database: 'postgres' });
  await admin.connect();
  await admin.query('CREATE DATABASE tokenwatch_bench');
  await admin.end();
  return { options: { host, port, user: superuser, database: 'tokenwatch_bench', sslmode: 'disable' }, stop: server.stop };
}

/** Part 3: the same polls on SQLite and PostgreSQL. */
async function perBackend(args: Args, dir: string): Promise<void> {
  const load = () => loadavg().map((l) => l.toFixed(2)).join(' ');
  console.log(`\nPart 3: store cost per poll by backend (${args.pollRecords.toLocaleString('en-US')} token records stored; median of 3 polls; load average ${load()})`);
  const log = join(dir, 'backend-audit.log');
  writeFileSync(log, '');
  const cluster = parseConfig({ clusters: [{ name: CLUSTER, audit: { file: { path: log } } }] }, {}).clusters[0]!;
  const now = T0 + 200 * DAY;
  const records: TokenRecord[] = [];
  for (let i = 0; i < args.pollRecords; i++) records.push(staleToken(Math.floor(i / 100), i % 100, now - (i % 5000) * MIN));
  const pgTarget = await benchPostgres();
  const backends: [string, () => Promise<Store>][] = [['SQLite (file, synchronous = FULL)', () => openStore(join(dir, 'backend.db'))]];
  if ('skip' in pgTarget) console.log(`  PostgreSQL skipped: ${pgTarget.skip}`);
  else backends.push([`PostgreSQL (${pgTarget.options.host}:${pgTarget.options.port}, pool)`, () => openPostgresStore(pgTarget.options)]);
  let seq = 0;
  try {
    for (const [name, open] of backends) {
      writeFileSync(log, '');
      const store = await open();
      try {
        await store.tokenRecords.upsert(records);
        const poller = new ClusterPoller({ cluster, source: new FileSource({ path: log }), store, logger: silent, clock: () => now });
        await poller.pollOnce(); // warm-up: the first poll of a process compares every record
        const idle: number[] = [];
        const busy: number[] = [];
        for (let r = 0; r < 3; r++) {
          let t = performance.now();
          const quiet = await poller.pollOnce();
          idle.push(performance.now() - t);
          if (quiet.error) throw new Error(quiet.error);
          const lines: string[] = [];
          for (let e = 0; e < args.pollEvents; e++) {
            const s = e % 100;
            lines.push(auditEvent({ auditID: `bench-${seq++}`, time: now - MIN, kind: 'stale', namespace: `ns-${s % 50}`, serviceAccount: `sa-${s}`, pod: `sa-${s}-pod-${e % 7}`, secondsAfterWarning: 20 * 86_400 }));
          }
          appendFileSync(log, `${lines.join('\n')}\n`);
          t = performance.now();
          const out = await poller.pollOnce();
          busy.push(performance.now() - t);
          if (out.error) throw new Error(out.error);
        }
        console.log(`  ${name.padEnd(44)} idle poll ${median(idle).toFixed(0).padStart(6)} ms   poll of ${args.pollEvents.toLocaleString('en-US')} new events ${median(busy).toFixed(0).padStart(6)} ms`);
      } finally {
        await store.close();
      }
    }
    console.log(`  (load average after: ${load()})`);
  } finally {
    if (!('skip' in pgTarget)) pgTarget.stop();
  }
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const dir = mkdtempSync(join(tmpdir(), 'tw-bench-store-'));
  try {
    if (args.parts.has(1)) await idlePoll(args, dir);
    if (args.parts.has(2)) await simulate(args, dir);
    if (args.parts.has(3)) await perBackend(args, dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
