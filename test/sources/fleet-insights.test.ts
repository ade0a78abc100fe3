/**
 * Fleet Logs Insights mode against the loopback CloudWatch fake (real @aws-sdk/client-cloudwatch-logs client): one
 * query over many clusters' log groups gives each cluster the same rows as its own insights-mode query, and the same
 * token records as FilterLogEvents mode on the same stored events.
 */
process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] = 'true';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeCloudWatch, type FakeCloudWatch } from '../fakes/cloudwatch.js';
import { CloudWatchSource } from '../../src/sources/cloudwatch.js';
import { FleetInsightsMembers, FleetInsightsSource, planFleetQueries, type FleetInsightsMember, type FleetInsightsOptions } from '../../src/sources/fleet-insights.js';
import { aggregateToTokenUses, parseTokenUseAggregate, type TokenUseAggregate } from '../../src/sources/insights.js';
import { emptyStats, SourceError } from '../../src/sources/types.js';
import { isAuditEvent, toTokenUse } from '../../src/audit/token-use.js';
import { TokenAggregator } from '../../src/findings/aggregate.js';
import type { TokenRecord } from '../../src/findings/types.js';
import { auditEvent, drain, type EventSpec } from './events.js';

const REGION = 'us-west-2';
const PREFIX = 'kube-apiserver-audit-';
const T = Date.parse('2026-11-29T12:00:00Z');
const MIN = 60_000;
const HOUR = 60 * MIN;
const OVERLAP = 10 * MIN;
const creds = { accessKeyId: 'AKIDTEST', secretAccessKey: 'secret' };
const group = (c: string) => `/aws/eks/${c}/cluster`;
const sourceId = (c: string) => `cloudwatch:${REGION}:${group(c)}`;

let fake: FakeCloudWatch;
const closers: { close(): void }[] = [];

beforeEach(async () => {
  stored.length = 0;
  fake = await startFakeCloudWatch({ now: () => T, queryRunningPolls: 1 });
});

afterEach(async () => {
  for (const c of closers.splice(0)) c.close();
  await fake.close();
});

function fleet(extra: Partial<FleetInsightsOptions> = {}): FleetInsightsSource {
  const f = new FleetInsightsSource({
    region: REGION,
    streamPrefix: PREFIX,
    endpoint: fake.url,
    credentials: creds,
    overlapMs: OVERLAP,
    pollIntervalMs: 1,
    // The SDK retries LimitExceededException itself (a throttling code for smithy), with its own delays: one attempt
    // here, so the source's own backoff is what is tested.
    maxAttempts: 1,
    retry: { baseDelayMs: 2, maxDelayMs: 10, maxRetries: 3, budgetMs: 5_000 },
    ...extra,
  });
  closers.push(f);
  return f;
}

function single(cluster: string, mode: 'filter' | 'insights'): CloudWatchSource {
  const s = new CloudWatchSource({
    region: REGION,
    logGroup: group(cluster),
    streamPrefix: PREFIX,
    endpoint: fake.url,
    credentials: creds,
    mode,
    overlapMs: OVERLAP,
    insights: { pollIntervalMs: 1 },
  });
  closers.push(s);
  return s;
}

/**
 * Stale tokens of DaemonSet pods (two warnAfter points, one pod per node), a legacy Secret token, 401s from one
 * client, a plain event, an event of another stream and events outside the window [T − 1 h, T − 10 min).
 */
const stored: { group: string; time: number; message: string }[] = [];

function seed(cluster: string, pods: number, seed: number): void {
  const put = (stream: string, specs: EventSpec[]) => {
    const events = specs.map((s) => ({ timestamp: s.time, message: auditEvent(s) }));
    for (const e of events) stored.push({ group: group(cluster), time: e.timestamp, message: e.message });
    fake.putEvents(group(cluster), stream, events);
  };
  const specs: EventSpec[] = [];
  for (let p = 0; p < pods; p++) {
    const warnAfter = T - (3 + p) * HOUR - seed * MIN;
    for (let i = 0; i < 4 + p; i++) {
      const time = T - 55 * MIN + i * 7 * MIN + p * 1_000 + seed;
      specs.push({ auditID: `${cluster}-s${p}-${i}`, time, kind: 'stale', pod: `kube-multus-ds-${cluster}${p}`, secondsAfterWarning: Math.floor((time - warnAfter) / 1000), sourceIP: `10.0.${seed}.${p}` });
    }
  }
  specs.push(
    { auditID: `${cluster}-l0`, time: T - 40 * MIN, kind: 'legacy', namespace: 'ci', serviceAccount: 'jenkins', legacySecret: 'jenkins-token-x1', userAgent: 'Jenkins/2.4' },
    { auditID: `${cluster}-l1`, time: T - 25 * MIN + seed, kind: 'legacy', namespace: 'ci', serviceAccount: 'jenkins', legacySecret: 'jenkins-token-x1', userAgent: 'Jenkins/2.4' },
    { auditID: `${cluster}-u0`, time: T - 33 * MIN, kind: 'unauthorized', sourceIP: '10.9.0.7', userAgent: 'Fluent-Bit' },
    { auditID: `${cluster}-u1`, time: T - 32 * MIN, kind: 'unauthorized', sourceIP: '10.9.0.7', userAgent: 'Fluent-Bit' },
    { auditID: `${cluster}-n0`, time: T - 31 * MIN, kind: 'plain' },
    { auditID: `${cluster}-early`, time: T - 2 * HOUR, kind: 'stale', pod: `kube-multus-ds-${cluster}0`, secondsAfterWarning: 3600 },
    { auditID: `${cluster}-trail`, time: T - 7 * MIN, kind: 'stale', pod: `kube-multus-ds-${cluster}0`, secondsAfterWarning: 9000 },
  );
  put(`${PREFIX}${cluster}`, specs);
  put('authenticator-x', [{ auditID: `${cluster}-z`, time: T - 30 * MIN, kind: 'stale', pod: 'other', secondsAfterWarning: 1 }]);
}

const byId = (a: TokenUseAggregate[]) => [...a].sort((x, y) => (x.id < y.id ? -1 : 1));

/** The findings engine's token records of one cluster. */
function records(cluster: string, uses: Iterable<Parameters<TokenAggregator['add']>[0]>): TokenRecord[] {
  const agg = new TokenAggregator({ cluster, maxTokenAge: { mode: 'eks' } });
  for (const u of uses) agg.add(u);
  return agg
    .records()
    .sort((a, b) => `${a.kind}${a.subject}${a.pod}${a.warnAfter}`.localeCompare(`${b.kind}${b.subject}${b.pod}${b.warnAfter}`));
}

describe('fleet Logs Insights mode', () => {
  it('gives each cluster the rows of its own insights query and the token records FilterLogEvents mode finds, in one query', async () => {
    const clusters = ['a', 'b', 'c'];
    for (const [i, c] of clusters.entries()) seed(c, i + 1, i + 1);
    const stats = emptyStats();
    const members: FleetInsightsMember[] = clusters.map((c) => ({ sourceId: sourceId(c), logGroup: group(c) }));
    const out = await fleet().poll(members, { now: T, lookbackMs: HOUR, stats });
    expect(out.queries).toBe(1);
    expect(fake.requestsOf('StartQuery')).toHaveLength(1);
    expect(fake.requestsOf('StartQuery')[0]?.body).toMatchObject({ logGroupIdentifiers: clusters.map(group), startTime: (T - HOUR) / 1000, endTime: (T - OVERLAP) / 1000 });
    // Bytes scanned: every event of the three groups in the query's whole-second range, matching or not, whatever its
    // stream (the fake bills message bytes + 26 per event); each cluster's early (T − 2 h) and trailing (T − 7 min)
    // events are not scanned.
    const scanned = stored.filter((e) => e.time >= T - HOUR && e.time < T - OVERLAP + 1_000);
    expect(scanned.length).toBe(stored.length - 6);
    expect(out.bytesScanned).toBe(scanned.reduce((n, e) => n + Buffer.byteLength(e.message) + 26, 0));

    for (const [i, c] of clusters.entries()) {
      const m = out.members.get(sourceId(c));
      if (!m?.ok) throw new Error(`cluster ${c} failed: ${m?.ok === false ? m.error.message : 'missing'}`);
      expect(JSON.parse(m.cursor)).toEqual({ v: 1, until: T - OVERLAP });
      // One row per token (i + 1 stale pods), one legacy, one 401 client: not one per event.
      expect(m.aggregates.map((a) => a.useKind).sort()).toEqual([...Array<string>(i + 1).fill('stale'), 'legacy', 'unauthorized'].sort());
      expect(m.aggregates.every((a) => a.source === sourceId(c))).toBe(true);

      // Equal to the cluster's own one-log-group insights query, ids included.
      const ownStats = emptyStats();
      const own = await drain(single(c, 'insights').poll(undefined, { now: T, lookbackMs: HOUR, stats: ownStats }));
      expect(byId(m.aggregates)).toEqual(byId(own.items.map(parseTokenUseAggregate)));
      // Its own query's bytes scanned (one log group), as GetQueryResults' statistics say: a part of the fleet query's.
      expect(ownStats.insights).toEqual({ bytesScanned: expect.any(Number), logGroups: 1 });
      expect(ownStats.insights!.bytesScanned).toBeGreaterThan(0);
      expect(ownStats.insights!.bytesScanned).toBeLessThan(out.bytesScanned);

      // Equal to what FilterLogEvents mode finds on the same events: its window [now − lookback, now] is set to the
      // insights window (no event lies on its end).
      const filterStats = emptyStats();
      const filter = await drain(single(c, 'filter').poll(undefined, { now: T - OVERLAP, lookbackMs: HOUR - OVERLAP, stats: filterStats }));
      // FilterLogEvents reports no bytes searched: no Logs Insights figure, only the bytes received.
      expect(filterStats.insights).toBeUndefined();
      expect(filterStats.bytes).toBeGreaterThan(0);
      const filterUses = filter.items
        .map((t) => JSON.parse(t) as unknown)
        .filter(isAuditEvent)
        .map(toTokenUse)
        .filter((u) => u !== undefined);
      expect(filterUses.length).toBe(2 + 2 + Array.from({ length: i + 1 }, (_, p) => 4 + p).reduce((x, y) => x + y, 0));
      const fleetRecords = records(c, m.aggregates.flatMap(aggregateToTokenUses));
      expect(fleetRecords).toEqual(records(c, filterUses));
      // The stale record of pod 0: 4 requests, first and last seen as stored.
      expect(fleetRecords.find((r) => r.kind === 'stale-token' && r.pod === `kube-multus-ds-${c}0`)).toMatchObject({
        requests: 4,
        firstSeen: T - 55 * MIN + (i + 1),
        lastSeen: T - 55 * MIN + 21 * MIN + (i + 1),
      });
    }
  });

  it('puts at most 50 log groups in a query and keeps within its concurrent-query limit', async () => {
    await fake.close();
    fake = await startFakeCloudWatch({ now: () => T, queryRunningPolls: 3, maxConcurrentQueries: 2 });
    const names = Array.from({ length: 120 }, (_, i) => `c${i}`);
    for (const c of names) fake.putEvents(group(c), `${PREFIX}x`, [{ timestamp: T - 20 * MIN, message: auditEvent({ auditID: c, time: T - 20 * MIN, kind: 'legacy', legacySecret: `s-${c}` }) }]);
    const out = await fleet({ maxConcurrentQueries: 2 }).poll(
      names.map((c) => ({ sourceId: sourceId(c), logGroup: group(c) })),
      { now: T, lookbackMs: HOUR, stats: emptyStats() },
    );
    expect(fake.requestsOf('StartQuery').map((r) => (r.body['logGroupIdentifiers'] as string[]).length)).toEqual([50, 50, 20]);
    expect(fake.requestsOf('StartQuery').every((r) => r.status === 200)).toBe(true);
    expect(fake.peakConcurrentQueries()).toBe(2);
    expect(out.queries).toBe(3);
    for (const c of names) {
      const m = out.members.get(sourceId(c));
      expect(m?.ok && m.aggregates.map((a) => a.legacySecret?.name)).toEqual([`s-${c}`]);
    }
  });

  it('backs off on LimitExceededException (the quota is shared with dashboards) and then runs the query', async () => {
    seed('a', 1, 1);
    fake.failNext(3, { type: 'LimitExceededException' }, 'StartQuery');
    const out = await fleet({ limitBackoff: { baseMs: 2, maxMs: 8 } }).poll([{ sourceId: sourceId('a'), logGroup: group('a') }], { now: T, lookbackMs: HOUR, stats: emptyStats() });
    expect(fake.requestsOf('StartQuery').map((r) => r.error ?? 'ok')).toEqual(['LimitExceededException', 'LimitExceededException', 'LimitExceededException', 'ok']);
    expect(out.members.get(sourceId('a'))?.ok).toBe(true);
  });

  it('fails only the members of a query that cannot run, with a clear error, and keeps their cursors', async () => {
    seed('a', 1, 1);
    fake.failNext(Infinity, { type: 'LimitExceededException' }, 'StartQuery');
    const clock = { t: 0 };
    const f = fleet({ limitBackoff: { baseMs: 1, maxMs: 1 }, timeoutMs: 50, clock: () => (clock.t += 10) });
    const out = await f.poll([{ sourceId: sourceId('a'), logGroup: group('a') }, { sourceId: 'bad', logGroup: group('b'), cursor: 'nonsense' }], { now: T, lookbackMs: HOUR, stats: emptyStats() });
    const a = out.members.get(sourceId('a'));
    expect(a?.ok).toBe(false);
    if (a?.ok === false) {
      expect(a.error).toBeInstanceOf(SourceError);
      expect(a.error.message).toMatch(/LimitExceededException until the 50 ms deadline/);
    }
    expect(out.members.get('bad')).toMatchObject({ ok: false });
    expect(out.queries).toBe(0);
  });

  it('plans one query per window, never two same-named log groups of one account together, and refuses duplicates', () => {
    const m = (id: string, logGroup: string): FleetInsightsMember => ({ sourceId: id, logGroup });
    const arn = (acct: string, name: string) => `arn:aws:logs:us-west-2:${acct}:log-group:${name}`;
    const plan = planFleetQueries(
      [m('1', arn('111111111111', '/aws/eks/x/cluster')), m('2', arn('222222222222', '/aws/eks/x/cluster')), m('3', '/aws/eks/y/cluster'), m('4', '/aws/eks/z/cluster')],
      (x) => (x.sourceId === '4' ? 2 : 1),
      50,
    );
    expect(plan.map((b) => [b.windowStart, b.members.map((x) => x.sourceId)])).toEqual([
      [1, ['1', '2', '3']],
      [2, ['4']],
    ]);
    expect(planFleetQueries([m('1', arn('111111111111', '/g')), m('2', '/g')], () => 1, 50).map((b) => b.members.length)).toEqual([1, 1]);
    expect(() => planFleetQueries([m('1', '/g'), m('2', '/g')], () => 1, 50)).toThrow(/two clusters read log group '\/g'/);
  });

  it('serves clusters whose polls are spread over the interval from one fleet query per interval', async () => {
    for (const [i, c] of ['a', 'b', 'c'].entries()) seed(c, 1, i + 1);
    const members = new FleetInsightsMembers(fleet(), { reuseMs: 5 * MIN });
    const srcs = ['a', 'b', 'c'].map((c) => members.add(sourceId(c), group(c)));
    const poll = (s: (typeof srcs)[number], now: number, cursor?: string) => drain(s.poll(cursor, { now, lookbackMs: HOUR, stats: emptyStats() }));
    const [a, b, c] = srcs as [(typeof srcs)[0], (typeof srcs)[0], (typeof srcs)[0]];
    const pa = await poll(a, T);
    const pb = await poll(b, T + MIN);
    const pc = await poll(c, T + 2 * MIN);
    expect(fake.requestsOf('StartQuery')).toHaveLength(1);
    // b's rows are those of its own insights-mode query at the fleet poll's time.
    const own = await drain(single('b', 'insights').poll(undefined, { now: T, lookbackMs: HOUR, stats: emptyStats() }));
    expect(byId(pb.items.map(parseTokenUseAggregate))).toEqual(byId(own.items.map(parseTokenUseAggregate)));
    expect(pa.items).toHaveLength(3);
    expect(pc.items).toHaveLength(3);
    for (const p of [pa, pb, pc]) expect(JSON.parse(p.result)).toEqual({ v: 1, until: T - OVERLAP });
    // Next interval: one query again, every member from the cursor its last poll returned (one window).
    fake.putEvents(group('c'), `${PREFIX}c`, [{ timestamp: T - 5 * MIN, message: auditEvent({ auditID: 'late', time: T - 5 * MIN, kind: 'legacy', legacySecret: 'later' }) }]);
    const next = await poll(c, T + 6 * MIN, pc.result);
    const again = await poll(a, T + 7 * MIN, pa.result);
    expect(fake.requestsOf('StartQuery')).toHaveLength(3); // 1 + the insights-mode comparison + 1
    expect(fake.requestsOf('StartQuery')[2]?.body).toMatchObject({ startTime: (T - OVERLAP) / 1000, endTime: (T + 6 * MIN - OVERLAP) / 1000 });
    // The seed's `trail` use (T − 7 min, in the trailing overlap before) is read now, with the new legacy use.
    expect(next.items.map(parseTokenUseAggregate).map((x) => [x.useKind, x.legacySecret?.name ?? x.lastSeen])).toEqual([
      ['stale', T - 7 * MIN],
      ['legacy', 'later'],
    ]);
    expect(again.items.map(parseTokenUseAggregate).map((x) => [x.useKind, x.lastSeen])).toEqual([['stale', T - 7 * MIN]]);
    // A cursor the fleet did not start from (the caller did not store the last one): a fresh fleet poll, where b's
    // window differs from a's and c's, so it is a query of its own.
    await poll(b, T + 8 * MIN, undefined);
    expect(fake.requestsOf('StartQuery').slice(3).map((r) => r.body['logGroupIdentifiers'])).toEqual([[group('b')], [group('a'), group('c')]]);
    expect(() => members.add('x', group('a'))).toThrow(/two clusters read log group/);
    for (const s of srcs) s.close();

    // A restart: new members, the cursors from the store. The first poll assumes the others are where it is (they
    // were served by one fleet poll), so one query serves all three again.
    const restarted = new FleetInsightsMembers(fleet(), { reuseMs: 5 * MIN });
    const [ra, rb, rc] = ['a', 'b', 'c'].map((x) => restarted.add(sourceId(x), group(x))) as [(typeof srcs)[0], (typeof srcs)[0], (typeof srcs)[0]];
    const queriesBefore = fake.requestsOf('StartQuery').length;
    await poll(ra, T + 11 * MIN, again.result);
    await poll(rc, T + 12 * MIN, next.result);
    expect(fake.requestsOf('StartQuery').length - queriesBefore).toBe(1);
    // b's stored cursor is older (its last poll was a lone query): a fleet poll where b's window is a query of its own
    // (a and c, from their new cursors, another).
    const rbOut = await poll(rb, T + 13 * MIN, JSON.stringify({ v: 1, until: T - OVERLAP }));
    const last = fake.requestsOf('StartQuery').slice(queriesBefore + 1);
    expect(last.map((r) => [r.body['logGroupIdentifiers'], r.body['startTime']])).toEqual([
      [[group('b')], (T - OVERLAP) / 1000],
      [[group('a'), group('c')], (T + 11 * MIN - OVERLAP) / 1000],
    ]);
    expect(JSON.parse(rbOut.result)).toEqual({ v: 1, until: T + 13 * MIN - OVERLAP });
    for (const s of [ra, rb, rc]) s.close();
  });

  it('is what createAuditSource builds for insights-mode clusters when poll.cloudwatchFleetInsights is enabled', async () => {
    seed('a', 1, 1);
    seed('b', 2, 2);
    const { createAuditSource, FleetInsightsRegistry } = await import('../../src/sources/index.js');
    const settings = { enabled: true, maxLogGroupsPerQuery: 50, maxConcurrentQueries: 10, reuse: 5 * MIN };
    const queries: unknown[] = [];
    const registry = new FleetInsightsRegistry(settings, (q) => queries.push(q));
    const cfg = (c: string, mode: 'insights' | 'filter') => ({ cloudwatch: { region: REGION, logGroup: group(c), streamPrefix: PREFIX, endpoint: fake.url, mode, overlap: OVERLAP } });
    const extra = { fleetInsights: registry, credentials: creds, maxAttempts: 1, insights: { pollIntervalMs: 1 } };
    const [a, b] = [createAuditSource(cfg('a', 'insights'), extra), createAuditSource(cfg('b', 'insights'), extra)] as const;
    const filter = createAuditSource(cfg('c', 'filter'), extra);
    const off = createAuditSource(cfg('a', 'insights'), { ...extra, fleetInsights: new FleetInsightsRegistry({ ...settings, enabled: false }) });
    closers.push(filter as CloudWatchSource, off as CloudWatchSource);
    expect(filter).toBeInstanceOf(CloudWatchSource);
    expect(off).toBeInstanceOf(CloudWatchSource);
    expect([a.id, b.id]).toEqual([sourceId('a'), sourceId('b')]);
    const ra = await drain(a.poll(undefined, { now: T, lookbackMs: HOUR, stats: emptyStats() }));
    const rb = await drain(b.poll(undefined, { now: T + MIN, lookbackMs: HOUR, stats: emptyStats() }));
    expect(fake.requestsOf('StartQuery').map((r) => r.body['logGroupIdentifiers'])).toEqual([[group('a'), group('b')]]);
    expect([ra.items.length, rb.items.length]).toEqual([3, 4]);
    const sq = fake.requestsOf('GetQueryResults').at(-1)?.response as { statistics: { bytesScanned: number; recordsScanned: number } };
    expect(queries).toEqual([{ region: REGION, logGroups: 2, bytesScanned: sq.statistics.bytesScanned, recordsScanned: sq.statistics.recordsScanned }]);
    expect(sq.statistics.recordsScanned).toBe(stored.filter((e) => e.time >= T - HOUR && e.time < T - OVERLAP + 1_000).length);
    expect(() => createAuditSource(cfg('a', 'insights'), extra)).toThrow(/two clusters read log group/);
    a.close?.();
    b.close?.();
  });
});

describe('forged X-Forwarded-For through fleet Logs Insights', () => {
  it('extracts each event’s whole sourceIPs list: the 401s belong to the connection’s address, not the forged entry', async () => {
    const ua = 'billing-api/1.4';
    const specs: EventSpec[] = [
      ...[40, 30, 20].map((m, i) => ({ auditID: `s${i}`, time: T - m * MIN, kind: 'stale' as const, namespace: 'payments', serviceAccount: 'billing-api', pod: 'billing-api-0', secondsAfterWarning: 86_400 + i, sourceIP: '10.1.1.5', userAgent: ua })),
      ...Array.from({ length: 12 }, (_, i) => ({ auditID: `u${i}`, time: T - 35 * MIN + i * 1000, kind: 'unauthorized' as const, sourceIPs: ['10.1.1.5', '10.9.9.9'], userAgent: ua })),
    ];
    fake.putEvents(group('pay'), `${PREFIX}pay`, specs.map((s) => ({ timestamp: s.time, message: auditEvent(s) })));
    const out = await fleet().poll([{ sourceId: sourceId('pay'), logGroup: group('pay') }], { now: T, lookbackMs: HOUR, stats: emptyStats() });
    const m = out.members.get(sourceId('pay'));
    if (!m?.ok) throw new Error('the fleet query failed');
    expect(m.aggregates.find((a) => a.useKind === 'unauthorized')?.sourceIP).toBe('10.1.1.5,10.9.9.9');
    const u = records('pay', m.aggregates.flatMap(aggregateToTokenUses)).filter((r) => r.kind === 'unauthorized');
    expect(u).toHaveLength(1);
    expect(u[0]).toMatchObject({ subject: '(unattributed)', sourceIPs: ['10.9.9.9'], forwardedIPs: ['10.1.1.5'], requests: 12 });
  });
});
