/**
 * 401-flood benchmark (issue 14 §1): memory stays bounded whatever number of distinct sources send rejected requests.
 *
 * Anyone who can reach the API server can make audit-logged 401s, each from its own source IP and user agent. This
 * prints peak RSS for 1,000,000 such events (default) through:
 *   1. `tokenwatch scan`: a JSON-lines audit log of N 401 events (`bench/data/flood-<N>.jsonl`, git-ignored, written
 *      once), scanned in a child process with one thread and with the default `--jobs` (worker threads); its peak RSS
 *      (`process.resourceUsage().maxRSS`);
 *   2. the live pipeline's per-poll path (what `src/runtime/poller.ts` does after reading): reload the token records from
 *      the SQLite store, merge the poll's new uses in a `TokenAggregator`, write the records back, build findings —
 *      over 10 polls of N/10 uses, in this process; its peak RSS, the records kept and the evidence lines.
 * The Deployment's memory limit is 512 MiB (manifests/): the poll path, which the Deployment runs, must stay well under
 * it (the exit code says whether it did). `scan` runs on an operator's machine; its figures are printed for comparison.
 *
 * Usage: `npm run bench:flood -- [--events N]` (also run at the end of `npm run bench`). Not part of `npm test`.
 */
import { spawnSync } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { once } from 'node:events';
import type { TokenUse } from '../src/audit/types.js';
import { TokenAggregator } from '../src/findings/aggregate.js';
import { buildFindings } from '../src/findings/build.js';
import { openStore } from '../src/store/index.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const DATA_DIR = join(ROOT, 'bench', 'data');
const LIMIT_MIB = 512;

function parseArgs(argv: string[]): { events: number } {
  let events = 1_000_000;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--events') {
      const v = Number(argv[++i]);
      if (!Number.isInteger(v) || v <= 0) throw new Error(`--events needs a positive whole number (got '${argv[i] ?? ''}')`);
      events = v;
    } else if (a === '--help' || a === '-h') {
      process.stdout.write('usage: npm run bench:flood -- [--events N]\n');
      process.exit(0);
    } else {
      throw new Error(`unknown argument '${a ?? ''}' (usage: npm run bench:flood -- [--events N])`);
    }
  }
  return { events };
}

/** The i-th distinct source: an IPv4 address from 10.0.0.0/8 upwards and its own user agent. */
function source(i: number): { ip: string; ua: string } {
  const n = 0x0a000000 + i;
  return { ip: `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`, ua: `scanner-${i % 997}/1.${i}` };
}

const T0 = Date.parse('2026-11-01T00:00:00Z');

async function writeLog(file: string, events: number): Promise<void> {
  mkdirSync(dirname(file), { recursive: true });
  const tmp = `${file}.tmp`;
  const out = createWriteStream(tmp);
  for (let i = 0; i < events; i++) {
    const { ip, ua } = source(i);
    const ts = new Date(T0 + i * 10).toISOString().replace('Z', '000Z');
    const line = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"flood-${i}","stage":"ResponseStarted","requestURI":"/api/v1/namespaces/default/pods","verb":"list","user":{},"sourceIPs":["${ip}"],"userAgent":"${ua}","responseStatus":{"metadata":{},"message":"Authentication failed, attempted: bearer","code":401},"requestReceivedTimestamp":"${ts}","stageTimestamp":"${ts}"}\n`;
    if (!out.write(line)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
  renameSync(tmp, file);
}

function use(i: number): TokenUse {
  const { ip, ua } = source(i);
  return { kind: 'unauthorized', auditID: `flood-${i}`, time: T0 + i * 10, sourceIPs: [ip], userAgent: ua, responseCode: 401 };
}

async function main(): Promise<void> {
  const { events } = parseArgs(process.argv.slice(2));
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
    const store = openStore(join(dir, 'flood.db'));
    const polls = 10;
    const per = Math.ceil(events / polls);
    for (let p = 0; p < polls; p++) {
      const agg = TokenAggregator.from({ cluster: 'bench', maxTokenAge: { mode: 'eks' } }, store.listTokenRecords('bench'));
      for (let i = p * per; i < Math.min(events, (p + 1) * per); i++) agg.add(use(i));
      const merged = agg.records();
      store.replaceTokenRecords('bench', merged);
      const findings = await buildFindings(merged, { now: T0 + events * 10 });
      records = merged.length;
      evidence = findings.reduce((n, f) => n + f.cause.evidence.length, 0);
      sourcesLine = findings[0]?.cause.evidence.find((e) => e.includes('more source')) ?? '';
    }
    store.close();
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

await main();
