import { describe, expect, it } from 'vitest';
import { AccessTracker, accessText, clusterVerdict, problemOf, shortUtc, type ClusterAccess } from '../../src/observability/health.js';

const T = Date.parse('2026-11-20T09:12:30Z');

describe('the health model', () => {
  it('says ok, or the failure in words with the time it started; the time keeps while attempts keep failing', () => {
    const t = new AccessTracker();
    expect(accessText('kubernetes', t.state(), T)).toBe('Kubernetes API: pending');
    t.fail('unreachable: connect ECONNREFUSED 127.0.0.1:6443', T);
    t.fail('unreachable: connect ECONNREFUSED 127.0.0.1:6443', T + 3_600_000);
    expect(accessText('kubernetes', t.state(), T + 3_600_000)).toBe('Kubernetes API unreachable: connect ECONNREFUSED 127.0.0.1:6443, since 09:12 UTC');
    // Another day: the date too.
    expect(accessText('kubernetes', t.state(), T + 86_400_000)).toBe('Kubernetes API unreachable: connect ECONNREFUSED 127.0.0.1:6443, since 2026-11-20 09:12 UTC');
    t.ok(T + 7_200_000);
    expect(accessText('kubernetes', t.state(), T)).toBe('Kubernetes API: ok');
    t.fail('failed: HTTP 503 on GET /version', T + 9_000_000);
    expect(accessText('kubernetes', t.state(), T + 9_000_000)).toBe('Kubernetes API failed: HTTP 503 on GET /version, since 11:42 UTC');
    expect(accessText('audit', { state: 'failing', problem: ': poll failed: EISDIR', since: T }, T)).toBe('audit source: poll failed: EISDIR, since 09:12 UTC');
    expect(accessText('watchCache', { state: 'off', detail: 'kubernetes.watch: false' }, T)).toBe('watch cache: not used (kubernetes.watch: false)');
    expect(shortUtc(T, T)).toBe('09:12 UTC');
  });

  it('never carries a secret: tokens in an error are masked, however the state was made', () => {
    const t = new AccessTracker();
    t.fail('failed: Authorization: Bearer abc.def-ghi rejected for xoxb-1234-5678-abcdefgh', T);
    const text = accessText('slack', t.state(), T);
    expect(text).not.toContain('abc.def-ghi');
    expect(text).not.toContain('xoxb-1234-5678-abcdefgh');
    expect(text).toContain('[Redacted]');
    expect(accessText('kubernetes', { state: 'failing', problem: 'not set up: https://user:hunter2@proxy/ refused', since: T }, T)).not.toContain('hunter2');
  });

  it('a cluster with a failing access is never ok', () => {
    const ok = { state: 'ok' } as const;
    const all: ClusterAccess = { audit: ok, kubernetes: ok, watchCache: { state: 'off' }, slack: ok };
    expect(clusterVerdict(all)).toBe('ok');
    expect(clusterVerdict({ ...all, slack: { state: 'failing', problem: 'failed to start: x', since: T } })).toBe('failing');
    expect(clusterVerdict({ ...all, audit: { state: 'pending' } })).toBe('pending');
  });

  it('names network failures as unreachable, other errors as failed', () => {
    const refused = Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' }) });
    expect(problemOf(refused)).toBe('unreachable: connect ECONNREFUSED 127.0.0.1:6443');
    expect(problemOf(new Error('boom'))).toBe('failed: boom');
  });
});
