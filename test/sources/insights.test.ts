/**
 * Pure parts of the sources: filter pattern terms, Logs Insights rows → aggregates → weighted token uses.
 */
import { describe, expect, it } from 'vitest';
import {
  aggregateToTokenUses,
  buildInsightsQuery,
  isTokenUseAggregateText,
  parseTokenUseAggregate,
  rowToAggregate,
  type TokenUseAggregate,
} from '../../src/sources/insights.js';
import { anyTermFilterPattern, anyTermInsightsFilter, quoteFilterTerm, TOKEN_USE_FILTER_PATTERN, TOKEN_USE_TERMS } from '../../src/sources/terms.js';
import { runInsightsQuery } from '../fakes/cloudwatch.js';
import { auditEvent } from './events.js';

const ctx = { source: 'cloudwatch:r:/g', windowStart: 1_000_000, windowEnd: 2_000_000 };
const row = (o: Record<string, string>) => Object.entries(o).map(([field, value]) => ({ field, value }));

describe('filter pattern terms', () => {
  it('quotes every term and ORs them with ?', () => {
    expect(TOKEN_USE_FILTER_PATTERN).toBe('?"authentication.k8s.io/stale-token" ?"authentication.k8s.io/legacy-token" ?"Authentication failed" ?"Unauthorized"');
    expect(anyTermFilterPattern(['only'])).toBe('"only"');
    expect(quoteFilterTerm('a "b" \\c')).toBe('"a \\"b\\" \\\\c"');
    expect(() => anyTermFilterPattern([])).toThrow(/at least one term/);
  });

  it('gives the Logs Insights query its filter from the same terms', () => {
    expect(anyTermInsightsFilter()).toBe(
      'filter @message like "authentication.k8s.io/stale-token" or @message like "authentication.k8s.io/legacy-token" or @message like "Authentication failed" or @message like "Unauthorized"',
    );
    expect(buildInsightsQuery({ streamPrefix: 'kube-apiserver-audit-', startMs: 0, endMs: 1000 }).split('\n| ')).toContain(anyTermInsightsFilter(TOKEN_USE_TERMS));
    expect(() => anyTermInsightsFilter([])).toThrow(/at least one term/);
    expect(() => anyTermInsightsFilter(['a"b'])).toThrow(/quote or backslash/);
  });
});

describe('Logs Insights rows', () => {
  it('classifies rows as stale, legacy or unauthorized and drops rows that are none', () => {
    const stale = rowToAggregate(
      row({ twUser: 'system:serviceaccount:a:b', twPod: 'p-1', twWarnAfter: '1200000', twRequests: '3', twFirstSeen: '1300000', twLastSeen: '1400000', twMaxSecs: '200', twUa: 'ua', twIp: '1.2.3.4' }),
      ctx,
    );
    expect(stale).toMatchObject({ useKind: 'stale', subject: 'system:serviceaccount:a:b', pod: 'p-1', warnAfter: 1_200_000, maxSecondsAfterWarning: 200, requests: 3 });
    const invalidated = rowToAggregate(
      row({ twUser: 'system:serviceaccount:ci:old', twLegacy: 'legacy-token', twLegacyKind: 'invalidated', twLegacySecret: 'old-token-x/ci', twRequests: '1', twFirstSeen: '1500000', twLastSeen: '1500000' }),
      ctx,
    );
    expect(invalidated?.legacySecret).toEqual({ name: 'old-token-x', namespace: 'ci', kind: 'invalidated' });
    const manual = rowToAggregate(row({ twLegacyKind: 'manual-secret', twLegacySecret: 'm', twRequests: '1', twFirstSeen: '1', twLastSeen: '1' }), ctx);
    expect(manual).toMatchObject({ useKind: 'legacy', legacySecret: { name: 'm', kind: 'manual' } });
    const unauth = rowToAggregate(row({ twUser: 'ignored', tw401: '401', twRequests: '2', twFirstSeen: '1', twLastSeen: '2' }), ctx);
    expect(unauth).toMatchObject({ useKind: 'unauthorized', requests: 2 });
    expect(unauth?.subject).toBeUndefined();
    expect(rowToAggregate(row({ twUser: 'x', twRequests: '2', twFirstSeen: '1', twLastSeen: '2' }), ctx)).toBeUndefined();
    expect(rowToAggregate(row({ twRequests: '2' }), ctx)).toBeUndefined();
  });

  it('gives a row the same id in the same window, another in another window', () => {
    const r = row({ twUser: 'u', twLegacy: 'legacy-token', twRequests: '1', twFirstSeen: '5', twLastSeen: '5' });
    const a = rowToAggregate(r, ctx);
    expect(rowToAggregate(r, ctx)?.id).toBe(a?.id);
    expect(rowToAggregate(r, { ...ctx, windowEnd: 3_000_000 })?.id).not.toBe(a?.id);
    expect(a?.id).toMatch(/^[0-9a-f]{32}$/);
    const text = JSON.stringify(a);
    expect(isTokenUseAggregateText(text)).toBe(true);
    expect(isTokenUseAggregateText(auditEvent({ auditID: 'x', time: 0, kind: 'legacy' }))).toBe(false);
    expect(parseTokenUseAggregate(text)).toEqual(a);
    expect(() => parseTokenUseAggregate('{"kind":"Event"}')).toThrow(/not a TokenUseAggregate/);
  });

  it('turns an aggregate into first/last weighted token uses with consistent seconds after warning', () => {
    const a: TokenUseAggregate = {
      kind: 'TokenUseAggregate',
      v: 1,
      id: 'abc',
      ...ctx,
      useKind: 'stale',
      subject: 'system:serviceaccount:kube-system:multus',
      pod: 'kube-multus-ds-x',
      warnAfter: 1_000_000 - 60_000,
      requests: 10,
      firstSeen: 1_100_000,
      lastSeen: 1_900_000,
      maxSecondsAfterWarning: 950,
      sourceIP: '10.1.1.1',
    };
    const [first, last] = aggregateToTokenUses(a);
    expect(first).toMatchObject({ auditID: 'insights:abc:first', time: 1_100_000, weight: 1, secondsAfterWarning: 150, warnAfter: 950_000 });
    expect(last).toMatchObject({ auditID: 'insights:abc:last', time: 1_900_000, weight: 9, secondsAfterWarning: 950, warnAfter: 950_000 });
    expect(last?.namespace).toBe('kube-system');
    expect(last?.serviceAccount).toBe('multus');
    expect(aggregateToTokenUses({ ...a, requests: 1, firstSeen: 1_900_000 })).toHaveLength(1);
    const [u] = aggregateToTokenUses({ ...a, useKind: 'unauthorized', subject: undefined, pod: undefined, warnAfter: undefined, maxSecondsAfterWarning: undefined, requests: 1 });
    expect(u).toEqual({ kind: 'unauthorized', auditID: 'insights:abc:last', time: 1_900_000, weight: 1, sourceIPs: ['10.1.1.1'], responseCode: 401 });
  });

  it('builds a query whose window is exact to the millisecond and whose stream filter is the prefix', () => {
    const q = buildInsightsQuery({ streamPrefix: 'kube-apiserver-audit-', startMs: 1_500, endMs: 2_500 });
    const ev = (id: string, t: number, stream = 'kube-apiserver-audit-x') => ({
      timestamp: t,
      stream,
      message: auditEvent({ auditID: id, time: t, kind: 'legacy', legacySecret: 's' }),
    });
    const rows = runInsightsQuery(q, [ev('a', 1_499), ev('b', 1_500), ev('c', 2_499), ev('d', 2_500), ev('e', 2_000, 'kube-apiserver-x')]);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ twRequests: '2', twFirstSeen: '1500', twLastSeen: '2499', twLegacyKind: 'autogenerated-secret', twLegacySecret: 's' });
  });
});

describe('createAuditSource', () => {
  it('builds the source the config names, with the ids the cursor store keys on', async () => {
    const { createAuditSource } = await import('../../src/sources/index.js');
    const { CloudWatchSource } = await import('../../src/sources/cloudwatch.js');
    const { FileSource } = await import('../../src/sources/file.js');
    const file = createAuditSource({ file: { path: '/var/log/kube-apiserver/audit.log' } });
    expect(file).toBeInstanceOf(FileSource);
    expect(file.id).toBe('file:/var/log/kube-apiserver/audit.log');
    const cw = createAuditSource({
      cloudwatch: { region: 'us-west-2', logGroup: '/aws/eks/prod/cluster', streamPrefix: 'kube-apiserver-audit-', mode: 'filter', overlap: 600_000 },
    });
    expect(cw).toBeInstanceOf(CloudWatchSource);
    expect(cw.id).toBe('cloudwatch:us-west-2:/aws/eks/prod/cluster');
    cw.close?.();
  });
});
