/**
 * `scan` on hostile or unusual input: errors name the file, warnings go to stderr
 * and the JSON `warnings`, the table escapes control characters, progress shows for long reads, tails stop
 * when the read fails.
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { jsonDocument } from '../../src/cli/commands/scan.js';
import { renderScanTable } from '../../src/cli/format.js';
import { escapeControl } from '../../src/cli/escape.js';
import { PROGRESS_AFTER_MS, shouldShowProgress, startProgress } from '../../src/cli/progress.js';
import { latestEventTimeOfFiles } from '../../src/scan/latest-event.js';
import { runScan } from '../../src/scan/run.js';
import { cliMain } from '../support/build.js';
import { ROOT, runCli } from './run-cli.js';

const dir = mkdtempSync(join(tmpdir(), 'tw-scan-hostile-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const SA = 'system:serviceaccount:kube-system:edge-router';
function event(id: string, pod: string, userAgent: string): string {
  return JSON.stringify({
    kind: 'Event',
    apiVersion: 'audit.k8s.io/v1',
    auditID: id,
    stage: 'ResponseComplete',
    user: { username: SA, extra: { 'authentication.kubernetes.io/pod-name': [pod] } },
    sourceIPs: ['10.0.0.1'],
    userAgent,
    responseStatus: { code: 200 },
    requestReceivedTimestamp: '2022-08-24T14:25:33.000000Z',
    annotations: { 'authentication.k8s.io/stale-token': `subject: ${SA}, seconds after warning threshold: 100` },
  });
}

describe('no readable audit event: exit 2 naming the file and the known formats', () => {
  it('a JSON array of non-audit rows', async () => {
    const f = join(dir, 'rows.json');
    writeFileSync(f, JSON.stringify([{ '@timestamp': '2022-01-01 00:00:00.000', note: 'hello' }]));
    const run = await runCli(['scan', '--audit-log', f, '--format', 'json']);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(run.stderr).toContain(`cannot read ${f}: its only record is not an audit event`);
    expect(run.stderr).toContain('aws logs get-query-results --output json');
  });
});

describe('warnings on stderr and in the JSON', () => {
  it('guide-query input: findings, plus what such input cannot tell', async () => {
    const f = join(dir, 'guide.csv');
    writeFileSync(f, `@timestamp,subject,elapsedtime\n2022-08-24 14:25:33.659,${SA}, 15329\n`);
    const run = await runCli(['scan', '--audit-log', f, '--format', 'json']);
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/^tokenwatch: warning: .*guide\.csv: 1 row of the EKS guide query.*cannot tell pods/);
    const doc = JSON.parse(run.stdout) as { findings: Array<{ serviceAccount: string; rejectionAt: string }>; warnings: Array<{ code: string }>; stats: { truncated: unknown[] } };
    expect(doc.findings.map((x) => x.serviceAccount)).toEqual(['edge-router']);
    // warnAfter = 14:25:33.659 − 15329 s = 10:10:04.659; + 90 days (EKS)
    expect(Math.abs(Date.parse(doc.findings[0]!.rejectionAt) - Date.parse('2022-11-22T10:10:04.659Z'))).toBeLessThan(1000);
    expect(doc.warnings.map((w) => w.code)).toEqual(['guide-query']);
    expect(doc.stats.truncated).toEqual([]);
  });

  it('a CSV cut at an oversized record: stats.truncated names the file and row', async () => {
    const ok = `2022-08-24 14:25:33.000,"${event('c1', 'p', 'ua').replace(/"/g, '""')}"`;
    const f = join(dir, 'cut.csv');
    writeFileSync(f, `@timestamp,@message\n${ok}\n2022-08-24 14:25:34.000,"${'x'.repeat(8192)}\n${ok}\n`);
    const result = await runScan({ files: [f], cluster: 'c', maxTokenAge: { mode: 'eks' }, maxLineBytes: 4096 });
    const doc = jsonDocument(result, 'c') as { stats: { truncated: unknown[] }; warnings: unknown[] };
    expect(doc.stats.truncated).toEqual([{ file: f, row: 2, message: expect.stringContaining('truncated there: rows after 1 were not read') }]);
    expect(doc.warnings).toHaveLength(1);
  });
});

describe('terminal table escapes control characters', () => {
  it('pod names cannot recolour or move the cursor', async () => {
    const f = join(dir, 'esc.log');
    writeFileSync(f, `${event('e1', 'evil\u001b[31mpod\u0007\r', 'ua\u001b]0;title\u0007')}\n`);
    const result = await runScan({ files: [f], cluster: 'prod', maxTokenAge: { mode: 'eks' } });
    const table = renderScanTable(result.report, { now: result.now, nowSource: result.nowSource, color: false });
    expect(table).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f]/); // only line feeds of the layout remain
    expect(table).toContain('evil\\x1b[31mpod\\x07\\x0d');
  });

  it('error lines escape control characters in file names too', async () => {
    const run = await runCli(['scan', '--audit-log', join(dir, 'missing\u001b[31m.log')]);
    expect(run.code).toBe(2);
    expect(run.stderr).not.toContain('\u001b');
    expect(run.stderr).toContain('missing\\x1b[31m.log: no such file');
  });

  it('escapeControl keeps printable text and escapes C0, DEL, C1 and bidi overrides', () => {
    expect(escapeControl('kube-multus-ds-458dh ✓')).toBe('kube-multus-ds-458dh ✓');
    expect(escapeControl('a\u001bb\u007fc\u009bd\u202ee\nf')).toBe('a\\x1bb\\x7fc\\x9bd\\u202ee\\x0af');
  });
});

describe('progress for long reads (whenever a run lasts more than about 2 s)', () => {
  function fakeTty(): { stream: NodeJS.WriteStream; written: () => string } {
    const pass = new PassThrough();
    const chunks: Buffer[] = [];
    pass.on('data', (c: Buffer) => chunks.push(c));
    const stream = Object.assign(pass, { isTTY: true, columns: 120 }) as unknown as NodeJS.WriteStream;
    return { stream, written: () => Buffer.concat(chunks).toString('utf8') };
  }

  it('small input: nothing before 2 s of reading, a bar (with inflated bytes) after', () => {
    expect(shouldShowProgress(true, 10, PROGRESS_AFTER_MS - 1)).toBe(false);
    expect(shouldShowProgress(true, 10, PROGRESS_AFTER_MS)).toBe(true);
    expect(shouldShowProgress(false, 10, 10 * PROGRESS_AFTER_MS)).toBe(false);
    const f = join(dir, 'small.gz');
    writeFileSync(f, gzipSync(Buffer.from('x')));
    let now = 1_000_000;
    const { stream, written } = fakeTty();
    const p = startProgress([f], stream, () => now);
    expect(p).toBeDefined();
    p!.onProgress({ file: f, bytesRead: 10, totalBytes: 21, decompressedBytes: 5 * 1024 * 1024 });
    expect(written()).toBe('');
    now += PROGRESS_AFTER_MS;
    p!.onProgress({ file: f, bytesRead: 20, totalBytes: 21, decompressedBytes: 900 * 1024 * 1024 });
    p!.stop();
    expect(written()).toContain('inflated 900 MiB');
  });
});

describe('a failed read stops the reference-time tail reads', () => {
  it('an aborted signal reads no file', async () => {
    const f = join(dir, 'tail.log');
    writeFileSync(f, `${event('t1', 'p', 'ua')}\n`);
    expect(await latestEventTimeOfFiles([f])).toBe(Date.parse('2022-08-24T14:25:33Z'));
    const ac = new AbortController();
    ac.abort();
    expect(await latestEventTimeOfFiles([f, f], ac.signal)).toBeUndefined();
  });

  it('runScan rejects on a corrupt gzip (the CLI then exits 2 at once)', async () => {
    const good = gzipSync(Buffer.from(`${event('g1', 'p', 'ua')}\n`.repeat(2000)));
    const f = join(dir, 'corrupt.gz');
    writeFileSync(f, Buffer.concat([good.subarray(0, good.length - 40), Buffer.alloc(40, 0x55)]));
    await expect(runScan({ files: [f], cluster: 'c', maxTokenAge: { mode: 'eks' } })).rejects.toThrow(/corrupt or truncated gzip/);
  });
});

describe('output that cannot be written', () => {
  it('a full disk on stdout (/dev/full): one line on stderr and exit 2, not a stack trace or the findings exit 1', async () => {
    if (!existsSync('/dev/full')) return; // Linux only
    const full = openSync('/dev/full', 'w');
    try {
      const run = await new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
        const child = spawn(process.execPath, [cliMain(), 'scan', 'examples/audit/kube-apiserver-audit.log', 'examples/audit/kube-apiserver-audit-2026-11-19T06-00-00.000.log.gz', '--fail-on', 'critical'], { cwd: ROOT, stdio: ['ignore', full, 'pipe'] });
        const err: Buffer[] = [];
        child.stderr?.on('data', (b: Buffer) => err.push(b));
        child.on('error', reject);
        child.on('close', (code) => resolve({ code, stderr: Buffer.concat(err).toString('utf8') }));
      });
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(/^tokenwatch: cannot write the output to stdout: ENOSPC: no space left on device/m);
      expect(run.stderr).not.toMatch(/\n\s+at /); // no stack trace
    } finally {
      closeSync(full);
    }
  });

  it('a full disk on stderr: exit 2 for an unreadable input, never the findings exit 1', async () => {
    if (!existsSync('/dev/full')) return; // Linux only
    const full = openSync('/dev/full', 'w');
    try {
      const code = await new Promise<number | null>((resolve, reject) => {
        const child = spawn(process.execPath, [cliMain(), 'scan', 'examples/audit/no-such-file.log'], { cwd: ROOT, stdio: ['ignore', 'ignore', full] });
        child.on('error', reject);
        child.on('close', resolve);
      });
      expect(code).toBe(2);
    } finally {
      closeSync(full);
    }
  });
});
