import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { InputError } from '../../src/errors.js';
import { runScan } from '../../src/scan/run.js';

const dir = mkdtempSync(join(tmpdir(), 'tokenwatch-scan-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** One audit.k8s.io/v1 event line, as the API server writes it (Metadata level, ResponseComplete). */
function event(o: { id: string; time: string; sa?: string; pod?: string; staleSeconds?: number }): string {
  const sa = o.sa ?? 'kube-system:multus';
  const annotations: Record<string, string> = { 'authorization.k8s.io/decision': 'allow' };
  if (o.staleSeconds !== undefined) {
    annotations['authentication.k8s.io/stale-token'] =
      `subject: system:serviceaccount:${sa}, seconds after warning threshold: ${o.staleSeconds}`;
  }
  return JSON.stringify({
    kind: 'Event',
    apiVersion: 'audit.k8s.io/v1',
    level: 'Metadata',
    auditID: o.id,
    stage: 'ResponseComplete',
    requestURI: '/api/v1/namespaces/kube-system/pods',
    verb: 'list',
    user: {
      username: `system:serviceaccount:${sa}`,
      groups: ['system:serviceaccounts', 'system:authenticated'],
      extra: {
        'authentication.kubernetes.io/pod-name': [o.pod ?? 'kube-multus-ds-zwh6w'],
        'authentication.kubernetes.io/pod-uid': ['0b1c2d3e-0000-4000-8000-000000000001'],
      },
    },
    sourceIPs: ['192.168.1.10'],
    userAgent: 'multus/v0.0.0 (linux/amd64) kubernetes/$Format',
    responseStatus: { metadata: {}, code: 200 },
    requestReceivedTimestamp: o.time,
    stageTimestamp: o.time,
    annotations,
  });
}

function file(name: string, lines: string[]): string {
  const path = join(dir, name);
  writeFileSync(path, `${lines.join('\n')}\n`);
  return path;
}

const DAY_S = 86_400;
// Two stale uses of one token: warnAfter = 2026-11-20T12:00:00Z − 84 d = 2026-08-28T12:00:00Z,
// rejection on EKS = warnAfter + 90 d = 2026-11-26T12:00:00Z.
const stale = file('stale.log', [
  event({ id: 'a1', time: '2026-11-20T11:00:00.000000Z', staleSeconds: 84 * DAY_S - 3600 }),
  event({ id: 'a2', time: '2026-11-20T12:00:00.000000Z', staleSeconds: 84 * DAY_S }),
  event({ id: 'a3', time: '2026-11-20T12:30:00.000000Z', sa: 'kube-system:coredns' }), // fresh token: no token use
  'not json at all',
]);

describe('runScan', () => {
  it('defaults the reference time to the latest event and computes severity from it', async () => {
    const result = await runScan({ files: [stale], cluster: 'prod-eks', maxTokenAge: { mode: 'eks' } });
    expect(result.nowSource).toBe('latest-event');
    // The fresh-token event at 12:30 is the latest event, though not a token use.
    expect(result.now).toBe(Date.parse('2026-11-20T12:30:00Z'));
    expect(result.latestEventTime).toBe(Date.parse('2026-11-20T12:30:00Z'));
    expect(result.report.stats).toMatchObject({ files: 1, lines: 4, tokenUses: 2, malformed: 1, duplicates: 0 });
    expect(result.report.findings).toHaveLength(1);
    const f = result.report.findings[0];
    expect(f).toMatchObject({
      cluster: 'prod-eks',
      namespace: 'kube-system',
      serviceAccount: 'multus',
      kind: 'stale-token',
      severity: 'critical', // 5.96 days before rejection
      requests: 2,
      pods: ['kube-multus-ds-zwh6w'],
      maxSecondsAfterWarning: 84 * DAY_S,
    });
    expect(Date.parse(f?.rejectionAt ?? '')).toBe(Date.parse('2026-11-26T12:00:00Z'));
  });

  it('uses the given reference time instead', async () => {
    const now = Date.parse('2026-10-01T00:00:00Z'); // 56.5 days before rejection → info
    const result = await runScan({ files: [stale], cluster: 'c', maxTokenAge: { mode: 'eks' }, now });
    expect(result.nowSource).toBe('option');
    expect(result.now).toBe(now);
    expect(result.report.findings.map((f) => f.severity)).toEqual(['info']);
  });

  it('applies --max-token-age', async () => {
    const result = await runScan({ files: [stale], cluster: 'c', maxTokenAge: { mode: 'seconds', seconds: 100 * DAY_S } });
    expect(Date.parse(result.report.findings[0]?.rejectionAt ?? '')).toBe(Date.parse('2026-12-06T12:00:00Z'));
    expect(result.report.findings[0]?.severity).toBe('warning'); // 16 days left
  });

  it('counts each auditID once across files', async () => {
    const result = await runScan({ files: [stale, stale], cluster: 'c', maxTokenAge: { mode: 'eks' } });
    expect(result.report.stats).toMatchObject({ files: 2, lines: 8, tokenUses: 2, duplicates: 2, malformed: 2 });
    expect(result.report.findings[0]?.requests).toBe(2);
  });

  it('takes the latest event from the end of the log even when it is not a token use', async () => {
    const later = file('later.log', [
      event({ id: 'b1', time: '2026-11-20T12:00:00.000000Z', staleSeconds: 84 * DAY_S }),
      event({ id: 'b2', time: '2026-11-20T13:30:00.123456Z', sa: 'kube-system:coredns' }),
    ]);
    const result = await runScan({ files: [later], cluster: 'c', maxTokenAge: { mode: 'eks' } });
    expect(result.nowSource).toBe('latest-event');
    expect(result.now).toBe(Date.parse('2026-11-20T13:30:00.123Z'));
    expect(result.latestEventTime).toBe(Date.parse('2026-11-20T13:30:00.123Z'));
  });

  it('reads the tail of a gzip log too', async () => {
    const path = join(dir, 'rotated.log.gz');
    writeFileSync(
      path,
      gzipSync(
        `${[
          event({ id: 'c1', time: '2026-11-19T05:00:00.000000Z', staleSeconds: 80 * DAY_S }),
          event({ id: 'c2', time: '2026-11-19T05:59:49.266968Z', sa: 'kube-system:coredns' }),
        ].join('\n')}\n`,
      ),
    );
    const result = await runScan({ files: [path], cluster: 'c', maxTokenAge: { mode: 'eks' } });
    expect(result.now).toBe(Date.parse('2026-11-19T05:59:49.266Z'));
    expect(result.report.stats.tokenUses).toBe(1);
  });

  it('falls back to the clock when the input holds no event', async () => {
    const empty = file('empty.log', []);
    const before = Date.now();
    const result = await runScan({ files: [empty], cluster: 'c', maxTokenAge: { mode: 'eks' } });
    expect(result.nowSource).toBe('clock');
    expect(result.now).toBeGreaterThanOrEqual(before);
    expect(result.latestEventTime).toBeUndefined();
    expect(result.report.findings).toEqual([]);
  });

  it('reports progress per file', async () => {
    const seen: { file: string; bytesRead: number; totalBytes: number }[] = [];
    await runScan({ files: [stale], cluster: 'c', maxTokenAge: { mode: 'eks' }, onProgress: (p) => seen.push(p) });
    const last = seen.at(-1);
    expect(last?.file).toBe(stale);
    expect(last?.bytesRead).toBe(last?.totalBytes);
    expect(last?.totalBytes).toBeGreaterThan(0);
  });

  it('loads the cluster snapshot before reading any log, so a bad snapshot fails first', async () => {
    const err = await runScan({
      files: [join(dir, 'missing.log')],
      cluster: 'c',
      snapshot: join(dir, 'missing-snapshot.json'),
      maxTokenAge: { mode: 'eks' },
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InputError);
    expect((err as InputError).file).toBe(join(dir, 'missing-snapshot.json'));
  });

  it('throws InputError naming a missing audit log', async () => {
    const err = await runScan({ files: [stale, join(dir, 'missing.log')], cluster: 'c', maxTokenAge: { mode: 'eks' } }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(InputError);
    expect((err as InputError).file).toBe(join(dir, 'missing.log'));
  });
});
