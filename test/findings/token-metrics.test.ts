import { describe, expect, it } from 'vitest';
import { apiServerMetricsText } from '../../src/sandbox/fakes/kubernetes/metrics.js';
import type { Finding } from '../../src/findings/types.js';
import { parsePrometheusText } from '../../src/findings/prometheus-text.js';
import {
  CLUSTER_WIDE,
  TokenMetricsError,
  compareSamples,
  metricsFindings,
  metricsStatusLine,
  sinceStart,
  tokenMetricsFromText,
  type TokenMetricsSample,
} from '../../src/findings/token-metrics.js';

const T0 = Date.parse('2026-11-20T12:00:00Z');
const START_A = Date.parse('2026-11-20T06:00:00.250Z');
const START_B = Date.parse('2026-11-19T23:10:00.500Z');
const MIN = 60_000;

const sample = (scrapedAt: number, processStartAt: number | null, stale: number, extra: Partial<TokenMetricsSample['counters']> = {}): TokenMetricsSample => ({
  scrapedAt,
  processStartAt,
  counters: { stale, valid: 1000, legacy: 0, ...extra },
});

describe('parsePrometheusText', () => {
  it('reads names, labels with escapes, Go floats, timestamps and TYPE lines; counts malformed lines', () => {
    const r = parsePrometheusText(
      [
        '# HELP x_total help with "quotes"',
        '# TYPE x_total counter',
        'x_total 3',
        'y{a="1",b="with \\"q\\" and \\\\ and \\n"} 1.5e+09 1700000000000',
        'z{le="+Inf",} +Inf',
        'nan_metric NaN',
        'bad line here',
        'w{a="unterminated} 1',
        '',
      ].join('\n'),
    );
    expect(r.types).toEqual({ x_total: 'counter' });
    expect(r.samples).toHaveLength(4);
    expect(r.samples[0]).toEqual({ name: 'x_total', labels: {}, value: 3 });
    expect(r.samples[1]).toEqual({ name: 'y', labels: { a: '1', b: 'with "q" and \\ and \n' }, value: 1.5e9, timestampMs: 1_700_000_000_000 });
    expect(r.samples[2]).toMatchObject({ name: 'z', labels: { le: '+Inf' }, value: Infinity });
    expect(Number.isNaN(r.samples[3]!.value)).toBe(true);
    expect(r.malformed).toBe(2);
    expect(r.malformedLines).toEqual([7, 8]);
  });
});

describe('tokenMetricsFromText', () => {
  it('extracts the serviceaccount_* counters and the process start from realistic API-server text', () => {
    const text = apiServerMetricsText({ processStart: START_A, counters: { stale: 42, valid: 9000, legacy: 3, legacyAuto: 2, legacyManual: 1, invalidLegacyAuto: 0 } });
    const s = tokenMetricsFromText(text, T0);
    expect(s).toEqual({
      scrapedAt: T0,
      processStartAt: START_A,
      counters: { stale: 42, valid: 9000, legacy: 3, legacyAuto: 2, legacyManual: 1, invalidLegacyAuto: 0 },
    });
  });

  it('leaves out counters an older API server does not export', () => {
    const s = tokenMetricsFromText(apiServerMetricsText({ processStart: START_A, counters: { stale: 1 } }), T0);
    expect(Object.keys(s.counters).sort()).toEqual(['legacy', 'stale', 'valid']);
  });

  it('says what it found when the text has no token counters', () => {
    expect(() => tokenMetricsFromText('<html>nope</html>\n', T0)).toThrow(new TokenMetricsError('not Prometheus text (1 unreadable line, first at line 1)'));
    expect(() => tokenMetricsFromText('# TYPE up gauge\nup 1\n', T0)).toThrow(/\b1 sample but no serviceaccount_\* token counter/);
  });
});

describe('compareSamples', () => {
  it('gives a rate only between scrapes of the same process', () => {
    const a = sample(T0, START_A, 100);
    const b = sample(T0 + 5 * MIN, START_A, 142);
    expect(compareSamples(a, b)).toEqual({ kind: 'increase', previous: a, seconds: 300, deltas: { stale: 42, valid: 0, legacy: 0 } });
    expect(compareSamples(sample(T0, START_B, 10), b)).toEqual({ kind: 'first' });
    expect(compareSamples(undefined, b)).toEqual({ kind: 'first' });
    expect(compareSamples(sample(T0, null, 10), sample(T0 + MIN, null, 20))).toEqual({ kind: 'first' });
  });

  it('treats a drop as a reset, never a negative rate', () => {
    const a = sample(T0, START_A, 100);
    expect(compareSamples(a, sample(T0 + MIN, START_A, 5))).toEqual({ kind: 'reset', previous: a });
  });
});

describe('sinceStart', () => {
  it('reports totals and the average hourly rate since the process started', () => {
    const s = sample(T0, START_A, 600, { legacy: 6 });
    const r = sinceStart(s, START_A + 2 * 3_600_000);
    expect(r.uptimeSeconds).toBe(7200);
    expect(r.totals.stale).toBe(600);
    expect(r.perHour).toMatchObject({ stale: 300, legacy: 3 });
    expect(() => sinceStart(s, START_A - 1000)).toThrow(/before the API-server process started \(2026-11-20T06:00:00.250Z\)/);
  });
});

describe('metricsFindings', () => {
  const prev = sample(T0, START_A, 100, { invalidLegacyAuto: 4 });
  const next = sample(T0 + 10 * MIN, START_A, 107, { invalidLegacyAuto: 6 });
  const cmp = compareSamples(prev, next);

  it('raises cluster-level findings when stale or invalidated-legacy use increased and no audit finding explains it', () => {
    const out = metricsFindings({ cluster: 'prod', sample: next, comparison: cmp, auditFindings: [], replicasSeen: 2 });
    expect(out.map((f) => [f.kind, f.severity, f.requests, f.namespace, f.serviceAccount])).toEqual([
      ['stale-token', 'warning', 7, CLUSTER_WIDE, CLUSTER_WIDE],
      ['legacy-token', 'critical', 2, CLUSTER_WIDE, CLUSTER_WIDE],
    ]);
    expect(out[0]!.cause.summary).toBe(
      'API-server metrics: 7 uses of stale bound tokens in 10 min (≈42/h), per API-server replica reached (2 replicas seen; each counts only its own requests — not a cluster-wide figure). No audit event names the clients.',
    );
    expect(out[0]!.cause.evidence[0]).toBe(
      'serviceaccount_stale_tokens_total rose by 7 between 2026-11-20T12:00:00.000Z and 2026-11-20T12:10:00.000Z on the API-server process started 2026-11-20T06:00:00.250Z',
    );
    expect(out[0]!.firstSeen).toBe('2026-11-20T12:00:00.000Z');
    expect(out[0]!.rejectionAt).toBeNull();
  });

  it('raises nothing an audit finding of the same kind explains, nothing on a first scrape or a reset', () => {
    const audit = { kind: 'stale-token', namespace: 'kube-system', lastSeen: new Date(T0 + 5 * MIN).toISOString() } as Finding;
    expect(metricsFindings({ cluster: 'prod', sample: next, comparison: cmp, auditFindings: [audit] }).map((f) => f.kind)).toEqual(['legacy-token']);
    const old = { ...audit, lastSeen: new Date(T0 - 60 * MIN).toISOString() } as Finding;
    expect(metricsFindings({ cluster: 'prod', sample: next, comparison: cmp, auditFindings: [old] }).map((f) => f.kind)).toEqual(['stale-token', 'legacy-token']);
    expect(metricsFindings({ cluster: 'prod', sample: next, comparison: { kind: 'first' }, auditFindings: [] })).toEqual([]);
    expect(metricsFindings({ cluster: 'prod', sample: next, comparison: { kind: 'reset', previous: prev }, auditFindings: [] })).toEqual([]);
  });
});

describe('metricsStatusLine', () => {
  it('shows the rate between two scrapes of one replica, audit off, what to do, and the per-replica caveat', () => {
    const line = metricsStatusLine({
      samples: [sample(T0, START_A, 100), sample(T0 + 2 * MIN, START_B, 5), sample(T0 + 5 * MIN, START_A, 103.5)],
      auditLog: false,
    });
    expect(line).not.toMatch(/\([^)]*\(/); // flat: no nested parentheses
    expect(line).toBe(
      'stale tokens in use: 42/h · audit log: off — which clients? enable audit logging or run the node probe · between the last two scrapes of one replica · per API-server replica reached: 2 replicas seen, each counts only its own requests, not a cluster-wide figure',
    );
  });

  it('falls back to the average since the replica started, and reports a failed scrape', () => {
    const line = metricsStatusLine({ samples: [sample(START_A + 3_600_000, START_A, 5)], auditLog: true, error: 'GET /metrics answered HTTP 500' });
    expect(line).toBe(
      'stale tokens in use: 5/h · audit log: on · average since that replica started · per API-server replica reached: a load balancer may spread requests over several, not a cluster-wide figure · last scrape failed: GET /metrics answered HTTP 500',
    );
    expect(metricsStatusLine({ samples: [], auditLog: false, error: 'x' })).toBe('API-server token metrics: unavailable (x)');
    expect(metricsStatusLine({ samples: [], auditLog: false })).toBeUndefined();
  });
});
