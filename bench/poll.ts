/**
 * Poll benchmark (docs/design/architecture.md "Performance targets": a poll with nothing new costs one CloudWatch request per log
 * group; work grows with new token uses, not with audit volume).
 *
 * Runs the CloudWatch source with the real SDK against the loopback fake (`test/fakes/cloudwatch.ts`) holding a day of
 * synthetic EKS audit events, and prints requests and response bytes per poll:
 *   1. first poll, filter mode (24 h lookback);
 *   2. next poll 5 min later with 5 min of new audit volume;
 *   3. a poll with nothing new;
 *   4. the same day with no filter pattern (what a client-side filter would transfer), for comparison;
 *   5. first poll, Logs Insights mode.
 *
 * Usage: `npx tsx bench/poll.ts [--events N] [--stale-ratio R] [--scan-per-page N]`
 *   --events N         audit events in the day (default 100000)
 *   --stale-ratio R    share of them with the stale-token annotation (default 0.001)
 *   --scan-per-page N  events the fake examines per FilterLogEvents page (default 10000). CloudWatch does not
 *                      publish how much it scans per call; this models its empty/partial pages. 0 = unlimited.
 */
process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] = 'true';

import { performance } from 'node:perf_hooks';
import { startFakeCloudWatch } from '../test/fakes/cloudwatch.js';
import { CloudWatchSource } from '../src/sources/cloudwatch.js';
import { emptyStats, type SourceStats } from '../src/sources/types.js';
import { auditEvent } from '../test/sources/events.js';

interface Args {
  events: number;
  staleRatio: number;
  scanPerPage: number;
}

function parseArgs(argv: string[]): Args {
  const a: Args = { events: 100_000, staleRatio: 0.001, scanPerPage: 10_000 };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = Number(argv[++i]);
    if (!Number.isFinite(v) || v < 0) throw new Error(`bad value for ${k}: ${argv[i]}`);
    if (k === '--events') a.events = Math.floor(v);
    else if (k === '--stale-ratio') a.staleRatio = v;
    else if (k === '--scan-per-page') a.scanPerPage = Math.floor(v);
    else throw new Error(`unknown argument ${k} (usage: bench/poll.ts [--events N] [--stale-ratio R] [--scan-per-page N])`);
  }
  return a;
}

const GROUP = '/aws/eks/bench/cluster';
const PREFIX = 'kube-apiserver-audit-';
const MIN = 60_000;
const DAY = 24 * 60 * MIN;

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const now = Date.parse('2026-11-29T12:00:00Z');
  const fake = await startFakeCloudWatch({
    ...(args.scanPerPage > 0 && { scanPerPage: args.scanPerPage }),
    now: () => now + DAY,
  });
  // A day of audit volume over 4 streams, evenly spread, ending 5 min after `now` (the second poll's new data).
  const total = args.events;
  const staleEvery = args.staleRatio > 0 ? Math.round(1 / args.staleRatio) : Number.POSITIVE_INFINITY;
  const span = DAY + 5 * MIN;
  const start = now - DAY;
  const pods = ['kube-multus-ds-a1', 'kube-multus-ds-b2', 'kube-multus-ds-c3', 'fluent-bit-x9', 'helm-controller-7'];
  const warnAfter = now - 40 * DAY;
  const perStream = new Map<string, { timestamp: number; message: string }[]>();
  let stale = 0;
  let staleInFirstWindow = 0;
  for (let i = 0; i < total; i++) {
    const t = start + Math.floor((i * span) / total);
    const isStale = (i + 1) % staleEvery === 0;
    const message = auditEvent(
      isStale
        ? { auditID: `e${i}`, time: t, kind: 'stale', pod: pods[stale % pods.length] as string, secondsAfterWarning: Math.floor((t - warnAfter) / 1000) }
        : { auditID: `e${i}`, time: t, kind: 'plain' },
    );
    if (isStale) {
      stale++;
      if (t <= now) staleInFirstWindow++;
    }
    const stream = `${PREFIX}${(i % 4).toString(16).padStart(32, '0')}`;
    let list = perStream.get(stream);
    if (!list) perStream.set(stream, (list = []));
    list.push({ timestamp: t, message });
  }
  for (const [stream, events] of perStream) fake.putEvents(GROUP, stream, events);

  const mk = (mode: 'filter' | 'insights', filterPattern?: string) =>
    new CloudWatchSource({
      region: 'us-east-1',
      logGroup: GROUP,
      streamPrefix: PREFIX,
      endpoint: fake.url,
      credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' },
      mode,
      overlapMs: 10 * MIN,
      insights: { pollIntervalMs: 5 },
      ...(filterPattern !== undefined && { filterPattern }),
    });

  const rows: { poll: string; requests: number; bytes: number; records: number; yielded: number; ms: number }[] = [];
  const run = async (label: string, src: CloudWatchSource, cursor: string | undefined, at: number): Promise<string> => {
    const stats: SourceStats = emptyStats();
    const t0 = performance.now();
    const gen = src.poll(cursor, { now: at, lookbackMs: DAY, stats });
    let yielded = 0;
    let r = await gen.next();
    while (!r.done) {
      yielded++;
      r = await gen.next();
    }
    rows.push({ poll: label, requests: stats.requests, bytes: stats.bytes, records: stats.records, yielded, ms: Math.round(performance.now() - t0) });
    return r.value;
  };

  const filter = mk('filter');
  const c1 = await run('filter: first poll (24 h lookback)', filter, undefined, now);
  const c2 = await run('filter: +5 min of new audit volume', filter, c1, now + 5 * MIN);
  await run('filter: nothing new', filter, c2, now + 5 * MIN + 1);
  const unfiltered = mk('filter', '');
  await run('no filter pattern: first poll (comparison)', unfiltered, undefined, now);
  const insights = mk('insights');
  await run('insights: first poll (24 h lookback)', insights, undefined, now + 10 * MIN);
  filter.close();
  unfiltered.close();
  insights.close();
  await fake.close();

  const fmt = (n: number) => n.toLocaleString('en-US');
  process.stdout.write(
    `poll benchmark: ${fmt(total)} audit events/day, ${fmt(stale)} stale (${fmt(staleInFirstWindow)} in the first window), ` +
      `fake scans ${args.scanPerPage > 0 ? fmt(args.scanPerPage) : 'all'} events per page\n\n`,
  );
  const header = ['poll', 'requests', 'bytes', 'records', 'yielded', 'ms'];
  const table = rows.map((r) => [r.poll, fmt(r.requests), fmt(r.bytes), fmt(r.records), fmt(r.yielded), fmt(r.ms)]);
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((row) => (row[i] as string).length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number))).join('  ');
  process.stdout.write(line(header) + '\n' + table.map(line).join('\n') + '\n');
  const nothingNew = rows[2];
  process.stdout.write(`\ntarget "nothing new = 1 request per log group": ${nothingNew?.requests === 1 ? 'met' : `NOT met (${nothingNew?.requests})`}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench/poll: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  process.exit(1);
});
