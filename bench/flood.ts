/**
 * 401-flood benchmark: memory stays bounded whatever number of distinct sources send rejected requests, and whatever
 * number of them one poll window holds.
 *
 * Anyone who can reach the API server can make audit-logged 401s, each from its own source IP and user agent. This
 * prints peak RSS for 1,000,000 such events (default) through:
 *   1. `tokenwatch scan`: a JSON-lines audit log of N 401 events (`bench/data/flood-<N>.jsonl`, git-ignored, written
 *      once), scanned in a child process with one thread and with the default `--jobs` (worker threads); its peak RSS
 *      (`process.resourceUsage().maxRSS`);
 *   2. the live pipeline's per-poll path (what `src/pipeline/poll.ts` does after reading): reload the token records from
 *      the SQLite store, merge the poll's new uses in a `TokenAggregator`, write the records back, build findings —
 *      over 10 polls of N/10 uses, in this process; its peak RSS, the records kept and the evidence lines.
 *   3. `serve`'s poll as the Deployment runs it, under the Deployment's heap limit (`--max-old-space-size` read from
 *      manifests/base/deployment.yaml, 384 MiB): for each of `--serve-events` (default 1,000,000 and 5,000,000) one
 *      `ClusterPoller.pollOnce` of a whole window of token-less 401s, each from its own source, in a child process
 *      (bench/flood-poll.ts): from a file source, and (for `--cloudwatch-events`, default 1,000,000) from the loopback
 *      CloudWatch fake through the real SDK (the fake runs in this process, so its memory is not the child's). Prints
 *      the child's peak RSS, the commits and the most events held (`poll.chunkEvents`), and the machine and heap it ran
 *      under (docs/live-mode.md#bounded-polls).
 * The Deployment's memory limit is 512 MiB (manifests/): the poll path, which the Deployment runs, must stay well under
 * it and every poll of part 3 must complete (the exit code says whether they did). `scan` runs on an operator's
 * machine; its figures are printed for comparison.
 *
 * Usage: `npm run bench:flood -- [--events N] [--serve-events N,N] [--cloudwatch-events N,N] [--only-serve]` (also
 * run at the end of `npm run bench`). Not part of `npm test`.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, release, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { once } from 'node:events';
import type { TokenUse } from '../src/audit/types.js';
import { TokenAggregator } from '../src/findings/aggregate.js';
import { buildFindings } from '../src/findings/build.js';
import { openStore } from '../src/store/index.js';
import { startFakeCloudWatch } from '../test/fakes/cloudwatch.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const DATA_DIR = join(ROOT, 'bench', 'data');
const LIMIT_MIB = 512;

const USAGE = 'usage: npm run bench:flood -- [--events N] [--serve-events N,N] [--cloudwatch-events N,N] [--only-serve]';

interface Args {
  events: number;
  serveEvents: number[];
  cloudwatchEvents: number[];
  onlyServe: boolean;
}

function counts(flag: string, v: string | undefined): number[] {
  const list = (v ?? '').split(',').filter((x) => x !== '');
  if (list.length === 0 || !list.every((x) => /^\d+$/.test(x) && Number(x) > 0)) throw new Error(`${flag} needs positive whole numbers separated by commas (got '${v ?? ''}')`);
  return list.map(Number);
}

function parseArgs(argv: string[]): Args {
  const args: Args = { events: 1_000_000, serveEvents: [1_000_000, 5_000_000], cloudwatchEvents: [1_000_000], onlyServe: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--events') {
      const v = argv[++i] ?? '';
      if (!/^\d+$/.test(v) || Number(v) <= 0) throw new Error(`--events needs a positive whole number (got '${v}')`);
      args.events = Number(v);
    } else if (a === '--serve-events') {
      args.serveEvents = counts(a, argv[++i]);
    } else if (a === '--cloudwatch-events') {
      args.cloudwatchEvents = counts(a, argv[++i]);
    } else if (a === '--only-serve') {
      args.onlyServe = true;
    } else if (a === '--help' || a === '-h') {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    } else {
      throw new Error(`unknown argument '${a ?? ''}' (${USAGE})`);
    }
  }
  return args;
}

/** The i-th distinct source: an IPv4 address from 10.0.0.0/8 upwards and its own user agent. */
function source(i: number): { ip: string; ua: string } {
  const n = 0x0a000000 + i;
  return { ip: `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`, ua: `scanner-${i % 997}/1.${i}` };
}

const T0 = Date.parse('2026-11-01T00:00:00Z');

/** The i-th token-less 401 (an audit event as the API server writes it, one line without newline), at T0 + 10 ms · i. */
function floodLine(i: number): string {
  const { ip, ua } = source(i);
  const ts = new Date(T0 + i * 10).toISOString().replace('Z', '000Z');
  return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"flood-${i}","stage":"ResponseStarted","requestURI":"/api/v1/namespaces/default/pods","verb":"list","user":{},"sourceIPs":["${ip}"],"userAgent":"${ua}","responseStatus":{"metadata":{},"message":"Authentication failed, attempted: bearer","code":401},"requestReceivedTimestamp":"${ts}","stageTimestamp":"${ts}"}`;
}

async function writeLog(file: string, events: number): Promise<void> {
  mkdirSync(dirname(file), { recursive: true });
  const tmp = `${file}.tmp`;
  const out = createWriteStream(tmp);
  for (let i = 0; i < events; i++) {
    if (!out.write(`${floodLine(i)}\n`)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
  renameSync(tmp, file);
}

function use(i: number): TokenUse {
  const { ip, ua } = source(i);
  return { kind: 'unauthorized', auditID: `flood-${i}`, time: T0 + i * 10, sourceIPs: [ip], userAgent: ua, responseCode: 401 };
}

async function scanAndPollPath(events: number): Promise<void> {
  const file = join(DATA_DIR, `flood-${events}.jsonl`);
  if (!existsSync(file)) {
    process.stderr.write(`writing ${events} distinct-source 401 events to ${file} …\n`);
    await writeLog(file, events);
  }

  // 1. scan, in a child process so its peak RSS is its own: one thread, then the CLI's default --jobs.
  const jobs = availableParallelism();
  const scanRss = (j: number): number => {
    const scan = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'bench', 'scan-rss.ts'), String(j), file], { cwd: ROOT, encoding: 'utf8' });
    if (scan.status !== 0) throw new Error(`scan failed: ${scan.stderr}`);
    return Number(scan.stdout.trim()) / 1024;
  };
  const serialRssMiB = scanRss(1);
  const scanRssMiB = jobs > 1 ? scanRss(jobs) : serialRssMiB;

  // 2. the poll path, in this process.
  const dir = mkdtempSync(join(tmpdir(), 'tokenwatch-flood-'));
  let records = 0;
  let evidence = 0;
  let sourcesLine = '';
  try {
    const store = await openStore(join(dir, 'flood.db'));
    const polls = 10;
    const per = Math.ceil(events / polls);
    for (let p = 0; p < polls; p++) {
      const agg = TokenAggregator.from({ cluster: 'bench', maxTokenAge: { mode: 'eks' } }, await store.tokenRecords.list('bench'));
      for (let i = p * per; i < Math.min(events, (p + 1) * per); i++) agg.add(use(i));
      const merged = agg.records();
      await store.tokenRecords.replace('bench', merged);
      const findings = await buildFindings(merged, { now: T0 + events * 10 });
      records = merged.length;
      evidence = findings.reduce((n, f) => n + f.cause.evidence.length, 0);
      sourcesLine = findings[0]?.cause.evidence.find((e) => e.includes('more source')) ?? '';
    }
    await store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const pollRssMiB = process.resourceUsage().maxRSS / 1024;

  const lines = [
    `401 flood: ${events.toLocaleString('en-US')} rejected requests, each from its own source IP and user agent`,
    `  scan           peak RSS ${serialRssMiB.toFixed(0)} MiB with --jobs 1, ${scanRssMiB.toFixed(0)} MiB with --jobs ${jobs} (the default here)`,
    `  poll path      peak RSS ${pollRssMiB.toFixed(0)} MiB (10 polls; ${records} token records kept, ${evidence} evidence lines)`,
    `  overflow line  ${sourcesLine.slice(0, 160)}`,
    `  limit          ${LIMIT_MIB} MiB (the Deployment's memory limit), for the poll path the Deployment runs: ${pollRssMiB < LIMIT_MIB ? 'OK' : 'EXCEEDED'}`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  if (pollRssMiB >= LIMIT_MIB) process.exitCode = 1;
}


/** The Deployment's `--max-old-space-size` (MiB), read from the shipped manifest. */
function shippedHeapMiB(): number {
  const m = /--max-old-space-size=(\d+)/.exec(readFileSync(join(ROOT, 'manifests', 'base', 'deployment.yaml'), 'utf8'));
  if (!m) throw new Error('manifests/base/deployment.yaml sets no --max-old-space-size');
  return Number(m[1]);
}

interface PollFigures {
  maxRssKiB: number;
  heapLimitMiB: number;
  error: string | null;
  records: number;
  newUses: number;
  commits: number;
  maxHeld: number;
  chunkEvents: number;
  tokenRecords: number;
  requests: number;
  seconds: number;
}

/** Runs bench/flood-poll.ts under the heap limit; its figures, or the reason it did not complete. */
async function pollChild(heapMiB: number, args: string[]): Promise<PollFigures | string> {
  const child = spawn(process.execPath, [`--max-old-space-size=${heapMiB}`, '--import', 'tsx', join(ROOT, 'bench', 'flood-poll.ts'), ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-2000)));
  const [code, signal] = (await once(child, 'close')) as [number | null, NodeJS.Signals | null];
  if (code !== 0) return `exit ${code ?? signal}: ${stderr.trim().split('\n').slice(-3).join(' | ')}`;
  return JSON.parse(stdout.trim().split('\n').pop() ?? '') as PollFigures;
}

/** Part 3 (module doc): one serve poll per flood size and source, under the shipped heap limit. */
async function servePolls(args: Args): Promise<boolean> {
  const heapMiB = shippedHeapMiB();
  const cpu = cpus();
  const lines = [
    `serve poll of one window of token-less 401s under the Deployment's heap limit (--max-old-space-size=${heapMiB}, manifests/base/deployment.yaml)`,
    `  machine        ${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${cpu.length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB RAM, Linux ${release()}, Node ${process.version}, load ${loadavg().map((l) => l.toFixed(1)).join(' ')} at start`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  let ok = true;
  const report = (what: string, events: number, r: PollFigures | string): void => {
    const name = `${what} ${events.toLocaleString('en-US')}`.padEnd(22);
    if (typeof r === 'string') {
      ok = false;
      process.stdout.write(`  ${name} FAILED: ${r}\n`);
      return;
    }
    const complete = r.error === null && r.records === events && r.requests === events;
    if (!complete || r.maxRssKiB / 1024 >= LIMIT_MIB) ok = false;
    process.stdout.write(
      `  ${name} peak RSS ${(r.maxRssKiB / 1024).toFixed(0)} MiB (V8 heap limit ${r.heapLimitMiB.toFixed(0)} MiB), ${r.seconds.toFixed(0)} s, ${r.commits} commits of ≤ ${r.chunkEvents} events (most held ${r.maxHeld}), ${r.requests.toLocaleString('en-US')} requests in ${r.tokenRecords} token records: ${complete ? 'completed' : `INCOMPLETE (${r.error ?? `${r.records} events read`})`}\n`,
    );
  };
  for (const events of args.serveEvents) {
    const file = join(DATA_DIR, `flood-${events}.jsonl`);
    if (!existsSync(file)) {
      process.stderr.write(`writing ${events} distinct-source 401 events to ${file} …\n`);
      await writeLog(file, events);
    }
    report('file', events, await pollChild(heapMiB, [String(T0 + events * 10 + 60_000), 'file', file]));
  }
  for (const events of args.cloudwatchEvents) {
    const fake = await startFakeCloudWatch();
    try {
      const group = '/aws/eks/bench/cluster';
      for (let i = 0; i < events; i += 100_000) {
        const batch = [];
        for (let j = i; j < Math.min(events, i + 100_000); j++) batch.push({ timestamp: T0 + j * 10, message: floodLine(j), ingestionTime: T0 });
        fake.putEvents(group, 'kube-apiserver-audit-0a1b', batch);
      }
      fake.requests.length = 0;
      const r = await pollChild(heapMiB, [String(T0 + events * 10 + 60_000), 'cloudwatch', fake.url, group]);
      fake.requests.length = 0;
      report('cloudwatch', events, r);
    } finally {
      await fake.close();
    }
  }
  process.stdout.write(`  limit          ${LIMIT_MIB} MiB (the Deployment's memory limit): ${ok ? 'OK, every poll completed under it' : 'EXCEEDED or INCOMPLETE'}\n`);
  return ok;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  if (!args.onlyServe) await scanAndPollPath(args.events);
  if (!(await servePolls(args))) process.exitCode = 1;
}

await main();
