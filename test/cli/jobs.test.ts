/**
 * `tokenwatch scan --jobs`: documented, validated, capped at the available CPUs, and the real CLI prints the same JSON with
 * worker threads as without: the bundle with one thread, the TypeScript sources through tsx (`bin/tokenwatch.js` without
 * `dist/`, whose workers start from `worker-tsx.mjs`) with two.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { InvalidArgumentError } from 'commander';
import { afterAll, describe, expect, it } from 'vitest';
import { parseJobs } from '../../src/cli/options.js';
import { runCli } from './run-cli.js';

const dir = mkdtempSync(join(tmpdir(), 'tokenwatch-jobs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('parseJobs', () => {
  it('takes a positive whole number, capped at the available CPUs', () => {
    expect(parseJobs('1', 4)).toBe(1);
    expect(parseJobs('3', 4)).toBe(3);
    expect(parseJobs(' 16 ', 4)).toBe(4);
    expect(parseJobs('2', 0)).toBe(1);
    expect(parseJobs('64')).toBe(Math.min(64, availableParallelism()));
  });

  it.each(['0', '-1', '1.5', 'two', '', '1e3'])('refuses %j', (v) => {
    expect(() => parseJobs(v, 4)).toThrow(InvalidArgumentError);
    expect(() => parseJobs(v, 4)).toThrow('Expected a positive whole number of threads.');
  });
});

describe('tokenwatch scan --jobs', () => {
  it('is documented in scan --help', async () => {
    const run = await runCli(['scan', '--help']);
    expect(run.code).toBe(0);
    const help = run.stdout.replace(/\s+/g, ' ');
    expect(help).toContain('--jobs <n>');
    expect(help).toContain('capped at the available CPUs');
    expect(help).toContain(`default: ${availableParallelism()}`);
  });

  it('a bad value exits 2 naming the flag', async () => {
    const run = await runCli(['scan', '--audit-log', 'examples/audit/x.log', '--jobs', '0']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("--jobs <n>' argument '0' is invalid");
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('prints the same JSON with 2 worker threads as with 1 (input above the parallel threshold)', async () => {
    const lines: string[] = [];
    for (let i = 0; i < 60_000; i++) {
      const stale = i % 500 === 0; // ids repeat after 50 000 lines: duplicates; sparse (~1.7 per MiB), so read by workers
      const k = i % 50_000; // a repeat carries the same annotations (else it is an auditID conflict, kept and warned)
      lines.push(
        JSON.stringify({
          kind: 'Event',
          apiVersion: 'audit.k8s.io/v1',
          auditID: `id-${i % 50_000}`,
          stage: 'ResponseComplete',
          verb: 'get',
          user: { username: `system:serviceaccount:kube-system:sa-${k % 3}` },
          sourceIPs: ['10.0.0.1'],
          responseStatus: { code: 200 },
          requestReceivedTimestamp: `2026-11-20T10:${String(Math.floor(i / 1000) % 60).padStart(2, '0')}:00.000000Z`,
          annotations: stale
            ? { 'authentication.k8s.io/stale-token': `subject: system:serviceaccount:kube-system:sa-${k % 3}, seconds after warning threshold: ${k}` }
            : { 'authorization.k8s.io/decision': 'allow', pad: 'x'.repeat(1100) }, // 60,000 lines ≈ 72 MB: above the 64 MiB threshold
        }),
      );
    }
    // Two rotated .gz files, ~72 MB uncompressed in all: above the 64 MiB threshold, each inflated by its own thread
    // (plain lines would need 1.5 GiB before a second thread pays off: src/scan/parallel.ts PLAIN_PARALLEL_MIN_BYTES).
    const files = [lines.slice(0, 30_000), lines.slice(30_000)].map((part, n) => {
      const file = join(dir, `audit-${n}.log.gz`);
      writeFileSync(file, gzipSync(`${part.join('\n')}\n`));
      return file;
    });
    const args = ['scan', '--format', 'json', '--audit-log', ...files];
    const [one, two] = await Promise.all([runCli([...args, '--jobs', '1']), runCli([...args, '--jobs', '2'], {}, { sources: true })]);
    expect(one.stderr).toBe('');
    expect(two.stderr).toBe('');
    expect(two.code).toBe(0);
    expect(two.stdout).toBe(one.stdout);
    const doc = JSON.parse(two.stdout) as { stats: { tokenUses: number; duplicates: number; lines: number } };
    expect(doc.stats.lines).toBe(60_000);
    expect(doc.stats.tokenUses).toBeGreaterThan(0);
    expect(doc.stats.duplicates).toBeGreaterThan(0);
  });
});
