/**
 * `runScan` with `jobs` > 1 gives the same result as the serial scan (report, reference time and its source),
 * on real worker threads, for inputs above the parallel threshold: a plain JSON-lines file split into ranges,
 * rotated gzip files (whose tails the workers read) and an export read whole.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { closePlan, PARALLEL_MIN_BYTES, planParallelRead, workerEntry } from '../../src/scan/parallel.js';
import { runScan, type ReadProgress } from '../../src/scan/run.js';

const dir = mkdtempSync(join(tmpdir(), 'tokenwatch-parallel-run-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function line(i: number, stale: boolean, time: string): string {
  const sa = `ns-${i % 7}:sa-${i % 5}`;
  const annotations: Record<string, string> = { 'authorization.k8s.io/decision': 'allow' };
  if (stale) {
    annotations['authentication.k8s.io/stale-token'] = `subject: system:serviceaccount:${sa}, seconds after warning threshold: ${86_400 * (i % 90)}`;
  }
  return JSON.stringify({
    kind: 'Event',
    apiVersion: 'audit.k8s.io/v1',
    level: 'Metadata',
    auditID: `id-${i % 40_000}`, // repeats: duplicates across ranges and files
    stage: 'ResponseComplete',
    verb: 'get',
    user: { username: `system:serviceaccount:${sa}`, extra: { 'authentication.kubernetes.io/pod-name': [`pod-${i % 11}`] } },
    sourceIPs: ['10.0.0.1'],
    userAgent: 'client-go/v0.0.0',
    responseStatus: { metadata: {}, code: 200 },
    requestReceivedTimestamp: time,
    stageTimestamp: time,
    annotations,
    padding: 'x'.repeat(1300), // 45,000 lines ≈ 70 MB: above PARALLEL_MIN_BYTES (64 MiB)
  });
}

function lines(from: number, count: number, hour: number): string {
  const out: string[] = [];
  for (let i = from; i < from + count; i++) {
    const time = `2026-11-20T${String(hour).padStart(2, '0')}:${String(Math.floor(i / 60) % 60).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}.000000Z`;
    out.push(line(i, i % 499 === 0, time)); // sparse (~1.3 stale lines per MiB): read by workers
  }
  return `${out.join('\n')}\n`;
}

describe('runScan with worker threads', () => {
  const plain = join(dir, 'audit.log');
  writeFileSync(plain, lines(0, 45_000, 10)); // ~70 MB: above PARALLEL_MIN_BYTES
  const gz = [1, 2].map((n) => {
    const f = join(dir, `audit-${n}.log.gz`);
    // The second file ends with the latest event of all, a fresh-token one: only the tail read finds its time.
    const last = n === 2 ? `${line(99_999, false, '2026-11-20T23:00:00.000000Z')}\n` : '';
    writeFileSync(f, gzipSync(lines(n * 30_000, 10_000, 10 + n) + last));
    return f;
  });
  const files = [plain, ...gz];

  it('is used for these inputs', async () => {
    expect(workerEntry().pathname).toMatch(/src\/scan\/worker-tsx\.mjs$/);
    const plan = await planParallelRead(files, { jobs: 2, minPlainBytes: 0 }); // plain: split from 64 MiB, not 1 GiB
    expect(plan?.tasks.filter((t) => t.kind === 'range').length).toBeGreaterThan(1);
    expect(plan?.tasks.filter((t) => t.kind === 'gzip').length).toBe(2);
    expect(PARALLEL_MIN_BYTES).toBeLessThan(70_000_000);
    // A plan holds open file handles; Node 26 fails the process when one is closed by garbage collection.
    if (plan) await closePlan(plan);
    expect(plan?.handles).toEqual([]);
  });

  it('gives the serial result: findings, stats, reference time (from the gzip tails)', async () => {
    const serial = await runScan({ files, cluster: 'c', maxTokenAge: { mode: 'eks' } });
    const progress: ReadProgress[] = [];
    const parallel = await runScan({
      files,
      cluster: 'c',
      maxTokenAge: { mode: 'eks' },
      jobs: 2,
      onProgress: (p) => progress.push(p),
      parallelPlan: { minPlainBytes: 0 },
    });
    expect(parallel).toEqual(serial);
    expect(serial.report.stats.duplicates).toBeGreaterThan(0);
    expect(serial.nowSource).toBe('latest-event');
    expect(serial.now).toBe(Date.parse('2026-11-20T23:00:00Z')); // the last line of the second .gz file
    // Progress covers every file and ends at each file's size.
    for (const f of files) expect(progress.filter((p) => p.file === f).at(-1)?.bytesRead).toBeGreaterThan(0);
    const last = progress.filter((p) => p.file === plain).at(-1);
    expect(last?.bytesRead).toBe(last?.totalBytes);
  });

  it('built: the worker is dist/cli/worker.js next to the bundle chunk that holds parallel.ts', () => {
    expect(workerEntry('file:///opt/tokenwatch/dist/cli/chunk-ABCD1234.js').href).toBe('file:///opt/tokenwatch/dist/cli/worker.js');
  });
});
