/**
 * The default `--jobs` (every available core) and `--jobs 1` print the same `scan --format json` document, on a dense
 * input (30 % stale-token lines, which the planner keeps on one thread) and on a sparse one (0.1 %, which worker
 * threads read), with the planner's size threshold lowered so that small files take the parallel path. The planner's
 * decision itself (dense: one thread; sparse: workers) is asserted too. Not timed: `npm run bench` measures speed.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { jsonDocument } from '../../src/cli/commands/scan.js';
import { open } from 'node:fs/promises';
import { DENSE_HITS_PER_MIB, SAMPLE_WINDOW_BYTES, countHits, hitsPerMiB, samplePlainFile } from '../../src/scan/density.js';
import { closePlan, defaultJobs, maxJobs, PLAIN_PARALLEL_MIN_BYTES, planParallelRead } from '../../src/scan/parallel.js';
import { runScan, type ScanOptions } from '../../src/scan/run.js';

const dir = mkdtempSync(join(tmpdir(), 'tokenwatch-parallel-default-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** One audit event line (~1.4 KB, like an EKS event); `stale` adds the stale-token annotation. */
function line(i: number, stale: boolean): string {
  const sa = `ns-${i % 3}:sa-${i % 4}`;
  const sec = 1_000 + i;
  const time = new Date(Date.parse('2026-11-20T00:00:00Z') + sec * 1000).toISOString();
  const annotations: Record<string, string> = { 'authorization.k8s.io/decision': 'allow' };
  if (stale) {
    annotations['authentication.k8s.io/stale-token'] = `subject: system:serviceaccount:${sa}, seconds after warning threshold: ${86_400 * (5 + (i % 80))}`;
  }
  return JSON.stringify({
    kind: 'Event',
    apiVersion: 'audit.k8s.io/v1',
    level: 'Metadata',
    auditID: `id-${i}`,
    stage: 'ResponseComplete',
    verb: 'list',
    user: { username: `system:serviceaccount:${sa}`, extra: { 'authentication.kubernetes.io/pod-name': [`pod-${i % 9}`] } },
    sourceIPs: [`10.0.${i % 3}.${i % 7}`],
    userAgent: 'client-go/v0.0.0',
    responseStatus: { metadata: {}, code: 200 },
    requestReceivedTimestamp: time,
    stageTimestamp: time,
    annotations,
    padding: 'x'.repeat(1000),
  });
}

/** `count` lines of which a `share` are stale, evenly spread (as bench/run.ts writes them). */
function file(name: string, count: number, share: number): string {
  const out: string[] = [];
  for (let i = 0; i < count; i++) out.push(line(i, Math.floor((i + 1) * share) > Math.floor(i * share)));
  const f = join(dir, name);
  writeFileSync(f, `${out.join('\n')}\n`);
  return f;
}

const dense = file('dense.log', 1_500, 0.3); // ~2 MB, 450 stale-token lines
const sparse = file('sparse.log', 6_000, 0.001); // ~8 MB, 6 stale-token lines

/** The planner's own thresholds, but any input size and small ranges: small files can take the parallel path. */
const small = { minBytes: 0, partBytes: 256 * 1024 };

async function scanJson(files: string[], extra: Partial<ScanOptions>): Promise<string> {
  const result = await runScan({ files, cluster: 'c', maxTokenAge: { mode: 'eks' }, ...extra });
  return JSON.stringify(jsonDocument(result, 'c'), null, 2);
}

describe('default --jobs and --jobs 1 give the same scan JSON', () => {
  const jobs = Math.max(2, maxJobs()); // the CLI's default; at least 2 so the parallel path is taken on one core too

  it('dense input (30 % stale-token lines): the planner keeps it on one thread, the document is the same', async () => {
    let density = 0;
    expect(await planParallelRead([dense], { jobs, ...small, onDensity: (d) => (density = d) })).toBeUndefined();
    expect(density).toBeGreaterThan(DENSE_HITS_PER_MIB);
    const one = await scanJson([dense], { jobs: 1 });
    expect(await scanJson([dense], { jobs, parallelPlan: small })).toBe(one);
    expect(JSON.parse(one).stats.tokenUses).toBe(450);
  });

  it('dense input forced onto workers still gives the same document (what the threshold saves is time, not output)', async () => {
    const one = await scanJson([dense], { jobs: 1 });
    expect(await scanJson([dense], { jobs, parallelPlan: { ...small, maxHitsPerMiB: Number.POSITIVE_INFINITY } })).toBe(one);
  });

  it('sparse input (0.1 %): read by worker threads, the document is the same', async () => {
    let density = Number.NaN;
    const plan = await planParallelRead([sparse], { jobs, ...small, onDensity: (d) => (density = d) });
    expect(plan?.tasks.filter((t) => t.kind === 'range').length).toBeGreaterThan(1);
    if (plan) await closePlan(plan);
    expect(density).toBeLessThanOrEqual(DENSE_HITS_PER_MIB);
    const one = await scanJson([sparse], { jobs: 1 });
    expect(await scanJson([sparse], { jobs, parallelPlan: small })).toBe(one);
    expect(JSON.parse(one).stats.tokenUses).toBe(6);
    expect(JSON.parse(one).findings.length).toBeGreaterThan(0);
  });

  it('both files together (dense on average): the same document', async () => {
    const one = await scanJson([sparse, dense], { jobs: 1 });
    expect(await scanJson([sparse, dense], { jobs, parallelPlan: small })).toBe(one);
  });
});

describe('countHits (the density sample)', () => {
  it('counts whole lines and those holding a prefilter needle, leaving out partial edge lines', () => {
    const buf = Buffer.from('tail of a line authentication.k8s.io/stale-token\n{"a":1}\n{"m":"Unauthorized"}\n{"b":2}\n{"x":"Authentication failed"} partial');
    expect(countHits(buf, false, false)).toEqual({ bytes: 37, lines: 3, hits: 1 });
    expect(countHits(buf, true, true)).toEqual({ bytes: buf.length, lines: 5, hits: 3 });
    expect(countHits(Buffer.from('no newline at all'), false, false)).toEqual({ bytes: 0, lines: 0, hits: 0 });
  });
});

describe('the density sample is large enough not to flip on a line or two', () => {
  it('a sparse file whose passing lines sit where an 8-window sample looks is still read by workers', async () => {
    // Lines of one length L, so that offsets are known; one stale-token line in the middle of each of the 8 windows an
    // 8-window sample reads (its 0.5 MiB then holds 8: 16 per MiB), 8 in ~24 MiB in all (0.33 per MiB).
    const L = 2_000;
    const n = Math.floor((24 * 1024 * 1024) / L);
    const size = n * L;
    const step8 = (size - SAMPLE_WINDOW_BYTES) / 7;
    const staleAt = new Set(Array.from({ length: 8 }, (_, w) => Math.floor((Math.floor(w * step8) + SAMPLE_WINDOW_BYTES / 2) / L)));
    const lines = Array.from({ length: n }, (_, i) => {
      const text = line(i, staleAt.has(i));
      return text.slice(0, -2) + 'x'.repeat(L - 1 - text.length) + '"}';
    });
    expect(lines.every((t) => t.length === L - 1)).toBe(true);
    const f = join(dir, 'sparse-on-the-grid.log');
    writeFileSync(f, `${lines.join('\n')}\n`);
    const fh = await open(f, 'r');
    try {
      const eight = await samplePlainFile(fh, size, 8);
      expect(eight.hits).toBe(8);
      expect(hitsPerMiB([{ bytes: size, sample: eight }])).toBeGreaterThan(DENSE_HITS_PER_MIB); // what 8 windows concluded
    } finally {
      await fh.close();
    }
    let density = Number.NaN;
    const plan = await planParallelRead([f], { jobs: 2, minBytes: 0, partBytes: 4 * 1024 * 1024, onDensity: (d) => (density = d) });
    expect(density).toBeLessThanOrEqual(DENSE_HITS_PER_MIB);
    expect(density).toBeGreaterThan(0);
    expect(plan?.tasks.length).toBeGreaterThan(1);
    if (plan) await closePlan(plan);
  });
});

describe('plain lines need more input than gzip before a second thread pays off', () => {
  it('stays serial for plain input under PLAIN_PARALLEL_MIN_BYTES, splits it at or above', async () => {
    expect(await planParallelRead([sparse], { jobs: 2, minBytes: 1024, partBytes: 256 * 1024, minPlainBytes: 64 * 1024 * 1024 })).toBeUndefined();
    const plan = await planParallelRead([sparse], { jobs: 2, minBytes: 1024, partBytes: 256 * 1024, minPlainBytes: 1024 });
    expect(plan?.tasks.length).toBeGreaterThan(1);
    if (plan) await closePlan(plan);
    expect(PLAIN_PARALLEL_MIN_BYTES).toBe(1536 * 1024 * 1024);
  });

  it('scan --help and docs/scan.md state the limit the code has', () => {
    const limit = `plain JSON-lines files alone: ${PLAIN_PARALLEL_MIN_BYTES / 2 ** 30} GiB or more`;
    expect(readFileSync(new URL('../../src/cli/commands/scan.ts', import.meta.url), 'utf8')).toContain(limit);
    expect(readFileSync(new URL('../../docs/scan.md', import.meta.url), 'utf8')).toContain(limit);
  });
});

describe('defaultJobs (the CLI default of --jobs)', () => {
  it('every CPU, unless other runnable threads already fill them all (the running count of /proc/loadavg)', () => {
    expect(defaultJobs('0.52 0.58 0.59 1/467 12345\n', 2)).toBe(2); // only this thread runs
    expect(defaultJobs('3.10 2.00 1.00 2/467 12345\n', 2)).toBe(2); // one other: a core is idle (the load averages lag)
    expect(defaultJobs('0.10 0.10 0.10 3/467 12345\n', 2)).toBe(1); // two others on two CPUs
    expect(defaultJobs('15.2 13.0 9.0 14/400 999\n', 8)).toBe(1);
    expect(defaultJobs('15.2 13.0 9.0 5/400 999\n', 8)).toBe(8);
    expect(defaultJobs('', 4)).toBe(4); // no /proc/loadavg (not Linux)
    expect(defaultJobs('garbage', 4)).toBe(4);
  });
});
