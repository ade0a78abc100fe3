/**
 * CPU of a steady poll, and its store commits (docs/performance.md "Commits without an fsync: measured, not kept").
 *
 * One `ClusterPoller` (the real poller: aggregate, store write, findings, retention) on a file audit source and an
 * embedded SQLite store in a temporary folder (a file, WAL mode, `synchronous = FULL`), without cluster state. After
 * one first poll, each of `--polls` polls finds `--events` new stale-token audit events of one ServiceAccount (7 pods)
 * appended to the file. Prints the process's CPU per poll (user and system, `process.cpuUsage()`: every thread,
 * the store's worker thread included) and the wall time per poll.
 *
 * How many fsyncs a poll makes, and what they cost: run it under strace, e.g.
 * `strace -f -c -e trace=fsync,fdatasync npx tsx bench/poll-cpu.ts --polls 100` (Linux).
 *
 * Usage: `npm run bench:poll-cpu -- [--polls N] [--events N]` — defaults 200 polls, 3 events each; a bad argument
 * prints the usage line and exits 2.
 */
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../src/config/index.js';
import { createLogger } from '../src/observability/logger.js';
import { ClusterPoller } from '../src/pipeline/poll.js';
import { FileSource } from '../src/sources/file.js';
import { openStore } from '../src/store/index.js';
import { auditEvent } from '../test/sources/events.js';
import { benchArgs } from './args.js';

const args = benchArgs('bench:poll-cpu', 'usage: npm run bench:poll-cpu -- [--polls N] [--events N]', {
  polls: { type: 'string', default: '200' },
  events: { type: 'string', default: '3' },
});
const polls = args.whole('polls');
const perPoll = args.whole('events');

const T0 = Date.parse('2026-11-20T12:00:00Z');
const dir = mkdtempSync(join(tmpdir(), 'tokenwatch-bench-poll-cpu-'));
const log = join(dir, 'audit.log');
let n = 0;
/** One stale-token request of Multus's ServiceAccount at `time` (epoch ms), as a ResponseComplete audit event line. */
const line = (time: number): string =>
  `${auditEvent({ auditID: `a${n++}`, time, kind: 'stale', pod: `kube-multus-ds-${n % 7}`, secondsAfterWarning: 7_000_000, sourceIP: '192.168.1.10', userAgent: 'multus/v0.0.0 (linux/amd64) kubernetes/$Format' })}\n`;

// Ctrl-C (or a kill) leaves no temporary folder behind: the `finally` below does not run on a signal.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    rmSync(dir, { recursive: true, force: true });
    process.exit(signal === 'SIGINT' ? 130 : 143);
  });
}
try {
  writeFileSync(log, line(T0));
  const store = await openStore(join(dir, 'tokenwatch.db'));
  const cluster = parseConfig({ clusters: [{ name: 'bench', audit: { file: { path: log } } }] }, {}).clusters[0]!;
  let now = T0 + 60_000;
  const poller = new ClusterPoller({ cluster, source: new FileSource({ path: log }), store, logger: createLogger({ level: 'silent' }), clock: () => now });
  await poller.pollOnce();
  const load0 = loadavg()[0]!;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < polls; i++) {
    appendFileSync(log, Array.from({ length: perPoll }, (_, k) => line(now + k)).join(''));
    now += 60_000;
    const r = await poller.pollOnce();
    if (r.error !== undefined) throw new Error(`poll ${i + 1} failed: ${r.error}`);
  }
  const cpu = process.cpuUsage(cpu0);
  const wall = performance.now() - t0;
  await store.close();
  const ms = (us: number): string => (us / 1000 / polls).toFixed(2);
  process.stdout.write(
    `${polls} polls of ${perPoll} new events each (SQLite file store, synchronous = FULL)\n` +
      `  CPU per poll   ${ms(cpu.user + cpu.system)} ms (user ${ms(cpu.user)}, system ${ms(cpu.system)})\n` +
      `  wall per poll  ${(wall / polls).toFixed(2)} ms\n` +
      `  load average   ${load0.toFixed(2)} → ${loadavg()[0]!.toFixed(2)}\n`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
