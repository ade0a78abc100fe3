/**
 * CloudWatchSource against the loopback fake, with the real @aws-sdk/client-cloudwatch-logs client.
 */
process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] = 'true';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeCloudWatch, type FakeCloudWatch } from '../fakes/cloudwatch.js';
import { CloudWatchClients, CloudWatchSource, type CloudWatchSourceOptions } from '../../src/sources/cloudwatch.js';
import { createAuditSource } from '../../src/sources/index.js';
import { aggregateToTokenUses, parseTokenUseAggregate, type TokenUseAggregate } from '../../src/sources/insights.js';
import { emptyStats, SourceError } from '../../src/sources/types.js';
import { TokenAggregator } from '../../src/findings/aggregate.js';
import { tokenUseFromJson } from '../../src/audit/records.js';
import { createReadStats } from '../../src/sources/reader.js';
import { auditEvent, drain, type EventSpec } from './events.js';

const GROUP = '/aws/eks/prod/cluster';
const PREFIX = 'kube-apiserver-audit-';
const T = Date.parse('2026-11-29T12:00:00Z');
const MIN = 60_000;
const HOUR = 60 * MIN;
const PATTERN = '?"authentication.k8s.io/stale-token" ?"authentication.k8s.io/legacy-token" ?"Authentication failed" ?"Unauthorized"';

let fake: FakeCloudWatch;
let clock = T;
const sources: CloudWatchSource[] = [];

function source(extra: Partial<CloudWatchSourceOptions> = {}): CloudWatchSource {
  const s = new CloudWatchSource({
    region: 'us-west-2',
    logGroup: GROUP,
    streamPrefix: PREFIX,
    endpoint: fake.url,
    credentials: { accessKeyId: 'AKIDTEST', secretAccessKey: 'secret' },
    mode: 'filter',
    overlapMs: 10 * MIN,
    maxAttempts: 6,
    sdkRetryDelayMs: 1,
    retry: { baseDelayMs: 2, maxDelayMs: 10, maxRetries: 3, budgetMs: 5_000 },
    insights: { pollIntervalMs: 1 },
    ...extra,
  });
  sources.push(s);
  return s;
}

function put(stream: string, specs: EventSpec[], ingestionTime?: number): void {
  fake.putEvents(
    GROUP,
    stream,
    specs.map((s) => ({ timestamp: s.time, message: auditEvent(s), ...(ingestionTime !== undefined && { ingestionTime }) })),
  );
}

const ids = (items: string[]): string[] => items.map((m) => (JSON.parse(m) as { auditID: string }).auditID);
const fle = () => fake.requestsOf('FilterLogEvents');

beforeEach(async () => {
  clock = T;
  fake = await startFakeCloudWatch({ now: () => clock });
});

afterEach(async () => {
  for (const s of sources.splice(0)) s.close();
  await fake.close();
});

describe('CloudWatchSource filter mode', () => {
  it('reads all pages, an empty page with a nextToken included, and only what the quoted-term OR pattern selects', async () => {
    await fake.close();
    fake = await startFakeCloudWatch({ now: () => clock, pageSize: 2 });
    put(`${PREFIX}aaa`, [
      { auditID: 's1', time: T - 50 * MIN, kind: 'stale', pod: 'p1', secondsAfterWarning: 100 },
      { auditID: 'n1', time: T - 49 * MIN, kind: 'plain' },
      { auditID: 'l1', time: T - 48 * MIN, kind: 'legacy', legacySecret: 'jenkins-token-abc' },
      { auditID: 'n2', time: T - 47 * MIN, kind: 'plain' },
      { auditID: 'u1', time: T - 46 * MIN, kind: 'unauthorized' },
    ]);
    put(`${PREFIX}bbb`, [
      { auditID: 's2', time: T - 45 * MIN, kind: 'stale', pod: 'p2', secondsAfterWarning: 5000 },
      { auditID: 'n3', time: T - 44 * MIN, kind: 'plain' },
      { auditID: 's3', time: T - 43 * MIN, kind: 'stale', pod: 'p1', secondsAfterWarning: 520 },
    ]);
    // Not an audit stream: excluded by logStreamNamePrefix.
    put('authenticator-ccc', [{ auditID: 'x1', time: T - 42 * MIN, kind: 'stale', pod: 'p9' }]);
    // Before the lookback: excluded by startTime.
    put(`${PREFIX}aaa`, [{ auditID: 'old', time: T - 2 * HOUR, kind: 'stale', pod: 'p1' }]);
    fake.emptyPagesNext(1);

    const stats = emptyStats();
    const { items, result } = await drain(source().poll(undefined, { now: T, lookbackMs: HOUR, stats }));

    expect(ids(items)).toEqual(['s1', 'l1', 'u1', 's2', 's3']);
    expect(JSON.parse(result)).toEqual({ v: 1, until: T });
    const reqs = fle();
    // empty page (token), 2 events (token), 2 events (token), 1 event (no token)
    expect(reqs.map((r) => [(r.response as { events: unknown[] }).events.length, 'nextToken' in (r.response as object)])).toEqual([
      [0, true],
      [2, true],
      [2, true],
      [1, false],
    ]);
    expect(reqs[0]?.body).toEqual({
      logGroupIdentifier: GROUP,
      logStreamNamePrefix: PREFIX,
      startTime: T - HOUR,
      endTime: T,
      filterPattern: PATTERN,
      limit: 10_000,
    });
    expect(reqs[1]?.body['nextToken']).toBe((reqs[0]!.response as { nextToken: string }).nextToken);
    expect(reqs[3]?.body['nextToken']).toBe((reqs[2]!.response as { nextToken: string }).nextToken);
    expect(stats).toEqual({ requests: 4, bytes: reqs.reduce((n, r) => n + r.responseBytes, 0), records: 5, throttled: 0 });
  });

  it('polls incrementally: nothing new costs exactly one request, re-reading only the overlap window', async () => {
    put(`${PREFIX}aaa`, [
      { auditID: 'a', time: T - 30 * MIN, kind: 'stale', pod: 'p1', secondsAfterWarning: 10 },
      { auditID: 'b', time: T - 8 * MIN, kind: 'stale', pod: 'p1', secondsAfterWarning: 1330 },
      { auditID: 'c', time: T - 1 * MIN, kind: 'plain' },
    ]);
    const src = source();
    const first = await drain(src.poll(undefined, { now: T, lookbackMs: HOUR, stats: emptyStats() }));
    expect(ids(first.items)).toEqual(['a', 'b']);

    const stats = emptyStats();
    const second = await drain(src.poll(first.result, { now: T + 5 * MIN, lookbackMs: HOUR, stats }));
    expect(ids(second.items)).toEqual(['b']); // inside [T-10min, T+5min]; the caller dedupes it by auditID
    expect(stats.requests).toBe(1);
    expect(fle()).toHaveLength(2);
    expect(fle()[1]?.body['startTime']).toBe(T - 10 * MIN);
    expect(fle()[1]?.body['endTime']).toBe(T + 5 * MIN);
    expect(JSON.parse(second.result)).toEqual({ v: 1, until: T + 5 * MIN });

    // A quiet cluster: the cursor still advances, so the next poll does not rescan from the last match.
    const third = await drain(src.poll(second.result, { now: T + 30 * MIN, lookbackMs: HOUR, stats: emptyStats() }));
    expect(third.items).toEqual([]);
    expect(fle()[2]?.body['startTime']).toBe(T - 5 * MIN);
    expect(JSON.parse(third.result)).toEqual({ v: 1, until: T + 30 * MIN });
  });

  it('re-reads the overlap window so an event delivered late (older than the cursor) is yielded', async () => {
    put(`${PREFIX}aaa`, [{ auditID: 'on-time', time: T - 20 * MIN, kind: 'stale', pod: 'p1', secondsAfterWarning: 60 }]);
    // Logged before the first poll but ingested 4 min after it.
    put(`${PREFIX}bbb`, [{ auditID: 'late', time: T - 3 * MIN, kind: 'stale', pod: 'p2', secondsAfterWarning: 600 }], T + 4 * MIN);
    // Later than the overlap window allows: ingested 4 min after the poll, 20 min after it was logged.
    put(`${PREFIX}bbb`, [{ auditID: 'too-late', time: T - 16 * MIN, kind: 'stale', pod: 'p3', secondsAfterWarning: 600 }], T + 4 * MIN);
    const src = source();
    const first = await drain(src.poll(undefined, { now: T, lookbackMs: HOUR, stats: emptyStats() }));
    expect(ids(first.items)).toEqual(['on-time']);
    clock = T + 5 * MIN;
    const second = await drain(src.poll(first.result, { now: T + 5 * MIN, lookbackMs: HOUR, stats: emptyStats() }));
    expect(ids(second.items)).toEqual(['late']);
  });

  it('rides out a storm of 8 ThrottlingExceptions (SDK retries, then its own backoff) and completes the poll', async () => {
    put(`${PREFIX}aaa`, [{ auditID: 'a', time: T - MIN, kind: 'stale', pod: 'p1', secondsAfterWarning: 1 }]);
    fake.throttleNext(8);
    const stats = emptyStats();
    const { items, result } = await drain(source().poll(undefined, { now: T, lookbackMs: HOUR, stats }));
    expect(ids(items)).toEqual(['a']);
    expect(JSON.parse(result)).toEqual({ v: 1, until: T });
    // 6 SDK attempts throttled, the source backs off, then 2 more throttled and 1 success.
    expect(fle().map((r) => r.status)).toEqual([400, 400, 400, 400, 400, 400, 400, 400, 200]);
    expect(fle()[0]?.response).toEqual({ __type: 'ThrottlingException', message: 'Rate exceeded' });
    expect(stats.requests).toBe(9);
    expect(stats.throttled).toBe(8);
  });

  it('resumes from the last nextToken when a later page keeps failing past the SDK attempts', async () => {
    await fake.close();
    fake = await startFakeCloudWatch({ now: () => clock, pageSize: 1 });
    put(`${PREFIX}aaa`, [
      { auditID: 'a', time: T - 3 * MIN, kind: 'stale', pod: 'p1', secondsAfterWarning: 1 },
      { auditID: 'b', time: T - 2 * MIN, kind: 'stale', pod: 'p1', secondsAfterWarning: 61 },
    ]);
    const src = source();
    const gen = src.poll(undefined, { now: T, lookbackMs: HOUR, stats: emptyStats() });
    const first = await gen.next();
    expect(ids([first.value as string])).toEqual(['a']);
    fake.failNext(7, { type: 'ServiceUnavailableException' });
    const rest: string[] = [];
    for (;;) {
      const r = await gen.next();
      if (r.done) break;
      rest.push(r.value);
    }
    expect(ids(rest)).toEqual(['b']);
    const reqs = fle();
    expect(reqs.map((r) => r.status)).toEqual([200, 500, 500, 500, 500, 500, 500, 500, 200]);
    const token = (reqs[0]!.response as { nextToken: string }).nextToken;
    expect(reqs[7]?.body['nextToken']).toBe(token); // own retry resumes at page 2, not page 1
  });

  it('gives up on a persistent 5xx with a clear, retryable SourceError after a bounded number of requests', async () => {
    fake.failNext(Number.POSITIVE_INFINITY, { type: 'ServiceUnavailableException' });
    const err = await drain(source().poll(undefined, { now: T, lookbackMs: HOUR, stats: emptyStats() })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SourceError);
    const se = err as SourceError;
    expect(se.awsCode).toBe('ServiceUnavailableException');
    expect(se.code).toBe('source_failed');
    expect(se.retryable).toBe(true);
    expect(se.sourceId).toBe('cloudwatch:us-west-2:/aws/eks/prod/cluster');
    expect(se.message).toMatch(
      /^CloudWatch Logs FilterLogEvents on log group '\/aws\/eks\/prod\/cluster' \(us-west-2\) failed: ServiceUnavailableException: The service cannot complete the request\. \(gave up after 3 retries of its own over \d+\.\d s/,
    );
    expect(fle()).toHaveLength(6 * 4); // (1 + 3 own retries) × 6 SDK attempts: bounded by count, not by time
  });

  it('does not retry AccessDenied or a missing log group', async () => {
    fake.failNext(1, { type: 'AccessDeniedException' });
    const denied = await drain(source().poll(undefined, { now: T, lookbackMs: HOUR, stats: emptyStats() })).catch((e: unknown) => e);
    expect(denied).toBeInstanceOf(SourceError);
    expect((denied as SourceError).awsCode).toBe('AccessDeniedException');
    expect((denied as SourceError).retryable).toBe(false);
    expect(fle()).toHaveLength(1);

    const missing = await drain(source({ logGroup: '/aws/eks/nope/cluster' }).poll(undefined, { now: T, lookbackMs: HOUR, stats: emptyStats() })).catch(
      (e: unknown) => e,
    );
    expect((missing as SourceError).awsCode).toBe('ResourceNotFoundException');
    expect((missing as SourceError).message).toBe(
      "CloudWatch Logs FilterLogEvents on log group '/aws/eks/nope/cluster' (us-west-2) failed: ResourceNotFoundException: The specified log group does not exist.",
    );
    expect(fle()).toHaveLength(2);
  });

  it('stops backing off when the poll is aborted', async () => {
    fake.failNext(Number.POSITIVE_INFINITY, { type: 'ThrottlingException', message: 'Rate exceeded' });
    const ac = new AbortController();
    const reason = new Error('SIGTERM');
    const src = source({ retry: { baseDelayMs: 30_000, maxDelayMs: 30_000, maxRetries: 5, budgetMs: 600_000 } });
    const started = performance.now();
    const p = drain(src.poll(undefined, { now: T, lookbackMs: HOUR, stats: emptyStats(), signal: ac.signal })).catch((e: unknown) => e);
    setTimeout(() => ac.abort(reason), 200);
    expect(await p).toBe(reason);
    // Well before the first 30 s backoff would have ended (a generous bound: a busy machine delays timers by seconds).
    expect(performance.now() - started).toBeLessThan(25_000);
    expect(fle().length).toBeLessThanOrEqual(6); // the first request's SDK attempts only: no retry of its own ran
  });

  it('uses the default credential chain and AWS_ENDPOINT_URL_CLOUDWATCH_LOGS when neither is given', async () => {
    const saved = { ...process.env };
    try {
      process.env['AWS_ACCESS_KEY_ID'] = 'AKIDFROMENV';
      process.env['AWS_SECRET_ACCESS_KEY'] = 'envsecret';
      process.env['AWS_ENDPOINT_URL_CLOUDWATCH_LOGS'] = fake.url;
      process.env['AWS_CONFIG_FILE'] = '/nonexistent/config';
      process.env['AWS_SHARED_CREDENTIALS_FILE'] = '/nonexistent/credentials';
      delete process.env['AWS_PROFILE'];
      put(`${PREFIX}aaa`, [{ auditID: 'a', time: T - MIN, kind: 'legacy' }]);
      const src = new CloudWatchSource({ region: 'eu-west-1', logGroup: GROUP, streamPrefix: PREFIX });
      sources.push(src);
      const { items } = await drain(src.poll(undefined, { now: T, lookbackMs: HOUR, stats: emptyStats() }));
      expect(ids(items)).toEqual(['a']);
      expect(String(fle()[0]?.headers['authorization'])).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIDFROMENV\/\d{8}\/eu-west-1\/logs\/aws4_request/);
    } finally {
      process.env = saved;
    }
  });

  it('rejects a cursor it did not write', async () => {
    const err = await drain(source().poll('{"ino":1}', { now: T, lookbackMs: HOUR, stats: emptyStats() })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SourceError);
    expect((err as SourceError).awsCode).toBe('InvalidCursor');
    expect(fle()).toHaveLength(0);
  });
});

describe('CloudWatchSource insights mode', () => {
  // Token of pod A: warnAfter W1, used 5 times; secondsAfterWarning = (time - W1) / 1000.
  const W1 = T - 3 * HOUR;
  const W2 = T - 30 * HOUR;
  const aTimes = [T - 50 * MIN, T - 45 * MIN, T - 40 * MIN, T - 35 * MIN, T - 30 * MIN];
  const bTimes = [T - 20 * MIN, T - 15 * MIN];

  function seed(): void {
    put(
      `${PREFIX}aaa`,
      aTimes.map((t, i) => ({ auditID: `a${i}`, time: t, kind: 'stale' as const, pod: 'kube-multus-ds-aaaaa', secondsAfterWarning: (t - W1) / 1000 })),
    );
    put(
      `${PREFIX}bbb`,
      bTimes.map((t, i) => ({ auditID: `b${i}`, time: t, kind: 'stale' as const, pod: 'kube-multus-ds-bbbbb', secondsAfterWarning: (t - W2) / 1000 })),
    );
    put(`${PREFIX}aaa`, [
      { auditID: 'l0', time: T - 40 * MIN, kind: 'legacy', namespace: 'ci', serviceAccount: 'jenkins', legacySecret: 'jenkins-token-x1', userAgent: 'Jenkins/2.4' },
      { auditID: 'l1', time: T - 25 * MIN, kind: 'legacy', namespace: 'ci', serviceAccount: 'jenkins', legacySecret: 'jenkins-token-x1', userAgent: 'Jenkins/2.4' },
      { auditID: 'u0', time: T - 33 * MIN, kind: 'unauthorized', sourceIP: '10.0.0.7', userAgent: 'Fluent-Bit' },
      { auditID: 'u1', time: T - 32 * MIN, kind: 'unauthorized', sourceIP: '10.0.0.7', userAgent: 'Fluent-Bit' },
      { auditID: 'n0', time: T - 31 * MIN, kind: 'plain' },
      // Outside the window: before it, and inside the trailing overlap (read next poll).
      { auditID: 'early', time: T - 2 * HOUR, kind: 'stale', pod: 'kube-multus-ds-aaaaa', secondsAfterWarning: 3600 },
      { auditID: 'trail', time: T - 7 * MIN, kind: 'stale', pod: 'kube-multus-ds-bbbbb', secondsAfterWarning: (T - 7 * MIN - W2) / 1000 },
    ]);
    put('authenticator-zzz', [{ auditID: 'z', time: T - 30 * MIN, kind: 'stale', pod: 'kube-multus-ds-aaaaa', secondsAfterWarning: 1 }]);
  }

  it('aggregates server-side per (subject, pod, warnAfter) from the stored events, one row per token', async () => {
    await fake.close();
    fake = await startFakeCloudWatch({ now: () => clock, queryRunningPolls: 2 });
    seed();
    const stats = emptyStats();
    const { items, result } = await drain(source({ mode: 'insights' }).poll(undefined, { now: T, lookbackMs: HOUR, stats }));
    const aggs = items.map(parseTokenUseAggregate).sort((x, y) => x.firstSeen - y.firstSeen);
    const win = { source: 'cloudwatch:us-west-2:/aws/eks/prod/cluster', windowStart: T - HOUR, windowEnd: T - 10 * MIN };
    const strip = ({ id: _id, ...rest }: TokenUseAggregate) => rest;
    expect(aggs.map(strip)).toEqual([
      {
        kind: 'TokenUseAggregate',
        v: 1,
        ...win,
        useKind: 'stale',
        subject: 'system:serviceaccount:kube-system:multus',
        pod: 'kube-multus-ds-aaaaa',
        podUid: '3f1c2a4e-0000-4000-8000-000000000020', // events.ts: the pod-uid extra
        warnAfter: W1,
        requests: 5,
        firstSeen: T - 50 * MIN,
        lastSeen: T - 30 * MIN,
        maxSecondsAfterWarning: (T - 30 * MIN - W1) / 1000,
        userAgent: 'multus/v0.0.0 (linux/amd64) kubernetes/$Format',
        sourceIP: '192.168.1.10',
      },
      {
        kind: 'TokenUseAggregate',
        v: 1,
        ...win,
        useKind: 'legacy',
        subject: 'system:serviceaccount:ci:jenkins',
        requests: 2,
        firstSeen: T - 40 * MIN,
        lastSeen: T - 25 * MIN,
        userAgent: 'Jenkins/2.4',
        sourceIP: '192.168.1.10',
        legacySecret: { name: 'jenkins-token-x1', kind: 'autogenerated' },
      },
      {
        kind: 'TokenUseAggregate',
        v: 1,
        ...win,
        useKind: 'unauthorized',
        requests: 2,
        firstSeen: T - 33 * MIN,
        lastSeen: T - 32 * MIN,
        userAgent: 'Fluent-Bit',
        sourceIP: '10.0.0.7',
      },
      {
        kind: 'TokenUseAggregate',
        v: 1,
        ...win,
        useKind: 'stale',
        subject: 'system:serviceaccount:kube-system:multus',
        pod: 'kube-multus-ds-bbbbb',
        podUid: '3f1c2a4e-0000-4000-8000-000000000020', // events.ts: the pod-uid extra
        warnAfter: W2,
        requests: 2,
        firstSeen: T - 20 * MIN,
        lastSeen: T - 15 * MIN,
        maxSecondsAfterWarning: (T - 15 * MIN - W2) / 1000,
        userAgent: 'multus/v0.0.0 (linux/amd64) kubernetes/$Format',
        sourceIP: '192.168.1.10',
      },
    ]);
    expect(JSON.parse(result)).toEqual({ v: 1, until: T - 10 * MIN });
    const start = fake.requestsOf('StartQuery');
    expect(start).toHaveLength(1);
    expect(start[0]?.body).toMatchObject({
      logGroupIdentifiers: [GROUP],
      startTime: (T - HOUR) / 1000,
      endTime: (T - 10 * MIN) / 1000,
      limit: 10_000,
    });
    expect(fake.requestsOf('GetQueryResults').map((r) => (r.response as { status: string }).status)).toEqual(['Running', 'Running', 'Complete']);
    expect(fake.requestsOf('StopQuery')).toHaveLength(0);
    expect(stats).toMatchObject({ requests: 4, records: 4, throttled: 0 });

    // One row per token, as two weighted token uses keeping first/last seen and the count.
    const uses = aggregateToTokenUses(aggs[0] as TokenUseAggregate);
    expect(uses.map((u) => ({ ...u, auditID: u.auditID.replace(/^insights:[0-9a-f]{32}:/, '') }))).toEqual([
      {
        kind: 'stale',
        auditID: 'first',
        time: T - 50 * MIN,
        weight: 1,
        subject: 'system:serviceaccount:kube-system:multus',
        namespace: 'kube-system',
        serviceAccount: 'multus',
        pod: 'kube-multus-ds-aaaaa',
        podUid: '3f1c2a4e-0000-4000-8000-000000000020', // events.ts: the pod-uid extra
        userAgent: 'multus/v0.0.0 (linux/amd64) kubernetes/$Format',
        sourceIPs: ['192.168.1.10'],
        secondsAfterWarning: (T - 50 * MIN - W1) / 1000,
        warnAfter: W1,
      },
      {
        kind: 'stale',
        auditID: 'last',
        time: T - 30 * MIN,
        weight: 4,
        subject: 'system:serviceaccount:kube-system:multus',
        namespace: 'kube-system',
        serviceAccount: 'multus',
        pod: 'kube-multus-ds-aaaaa',
        podUid: '3f1c2a4e-0000-4000-8000-000000000020', // events.ts: the pod-uid extra
        userAgent: 'multus/v0.0.0 (linux/amd64) kubernetes/$Format',
        sourceIPs: ['192.168.1.10'],
        secondsAfterWarning: (T - 30 * MIN - W1) / 1000,
        warnAfter: W1,
      },
    ]);
  });

  it('moves its window without overlap, so consecutive polls never count an event twice', async () => {
    seed();
    const src = source({ mode: 'insights' });
    const first = await drain(src.poll(undefined, { now: T, lookbackMs: HOUR, stats: emptyStats() }));
    const second = await drain(src.poll(first.result, { now: T + 5 * MIN, lookbackMs: HOUR, stats: emptyStats() }));
    const rows = second.items.map(parseTokenUseAggregate);
    expect(rows.map((r) => [r.pod, r.requests, r.firstSeen, r.windowStart, r.windowEnd])).toEqual([
      ['kube-multus-ds-bbbbb', 1, T - 7 * MIN, T - 10 * MIN, T - 5 * MIN],
    ]);
    const total = [...first.items, ...second.items].map(parseTokenUseAggregate).reduce((n, r) => n + r.requests, 0);
    expect(total).toBe(5 + 2 + 2 + 2 + 1); // a*, b*, l*, u*, trail — each once
    expect(fake.requestsOf('StartQuery')[1]?.body).toMatchObject({ startTime: (T - 10 * MIN) / 1000, endTime: (T - 5 * MIN) / 1000 });
  });

  it('stops the query and fails when it does not complete in time', async () => {
    await fake.close();
    fake = await startFakeCloudWatch({ now: () => clock, queryRunningPolls: 1_000_000 });
    seed();
    const src = source({ mode: 'insights', insights: { pollIntervalMs: 5, timeoutMs: 60 } });
    const err = await drain(src.poll(undefined, { now: T, lookbackMs: HOUR, stats: emptyStats() })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SourceError);
    expect((err as SourceError).awsCode).toBe('QueryTimeout');
    const stop = fake.requestsOf('StopQuery');
    expect(stop).toHaveLength(1);
    expect(stop[0]?.body['queryId']).toBe((fake.requestsOf('StartQuery')[0]!.response as { queryId: string }).queryId);
    expect(stop[0]?.response).toEqual({ success: true });
  });

  it('fails without yielding anything when the result hits the row limit', async () => {
    seed();
    const src = source({ mode: 'insights', insights: { pollIntervalMs: 1, limit: 3 } });
    const gen = src.poll(undefined, { now: T, lookbackMs: HOUR, stats: emptyStats() });
    const err = await gen.next().catch((e: unknown) => e);
    expect((err as SourceError).awsCode).toBe('QueryResultLimit');
  });

  it('retries a throttled StartQuery', async () => {
    seed();
    fake.throttleNext(7, 'StartQuery');
    const stats = emptyStats();
    const { items } = await drain(source({ mode: 'insights' }).poll(undefined, { now: T, lookbackMs: HOUR, stats }));
    expect(items).toHaveLength(4);
    expect(fake.requestsOf('StartQuery').map((r) => r.status)).toEqual([400, 400, 400, 400, 400, 400, 400, 200]);
    expect(stats.throttled).toBe(7);
  });
});

describe('CloudWatchClients (one SDK client per Region and endpoint for a deployment)', () => {
  it('sources of many clusters in one Region share one client; each poll still counts only its own requests', async () => {
    const clients = new CloudWatchClients({ credentials: { accessKeyId: 'AKIDTEST', secretAccessKey: 'secret' }, maxAttempts: 2, sdkRetryDelayMs: 1 });
    try {
      const groups = ['/aws/eks/a/cluster', '/aws/eks/b/cluster', '/aws/eks/c/cluster'];
      const made = groups.map((g, i) => {
        fake.putEvents(g, PREFIX + '0', [{ timestamp: T - MIN, message: auditEvent({ auditID: `e${i}`, time: T - MIN, kind: 'stale' }) }]);
        return createAuditSource(
          { cloudwatch: { region: 'us-west-2', logGroup: g, streamPrefix: PREFIX, endpoint: fake.url, mode: 'filter', overlap: 10 * MIN } } as never,
          { clients },
        );
      });
      // Another endpoint (or Region) is another client.
      createAuditSource({ cloudwatch: { region: 'us-west-2', logGroup: groups[0]!, streamPrefix: PREFIX, endpoint: `${fake.url}/`, mode: 'filter', overlap: 10 * MIN } } as never, { clients });
      expect(clients.size).toBe(2);
      for (const [i, src] of made.entries()) {
        const stats = emptyStats();
        const { items } = await drain(src.poll(undefined, { now: T, lookbackMs: HOUR, stats }));
        expect(ids(items)).toEqual([`e${i}`]);
        expect(stats.requests).toBe(1);
        src.close?.(); // a shared client is not the source's to close: the next source still reads
      }
      expect(fle().map((r) => r.body['logGroupIdentifier'])).toEqual(groups);
    } finally {
      clients.destroy();
    }
    expect(clients.size).toBe(0);
  });
});

describe('forged X-Forwarded-For through CloudWatch (filter and insights mode)', () => {
  // billing-api's pod (10.1.1.5) uses a stale token; an attacker at 10.9.9.9 sends 12 token-less requests with
  // `X-Forwarded-For: 10.1.1.5` and the same user agent. Earlier entries of sourceIPs are client-set: the 401s belong
  // to 10.9.9.9, and the forged entry is only kept to be shown.
  const UA = 'billing-api/1.4';
  function seedForged(): void {
    put(`${PREFIX}aaa`, [
      ...[40, 30, 20].map((m, i) => ({ auditID: `s${i}`, time: T - m * MIN, kind: 'stale' as const, namespace: 'payments', serviceAccount: 'billing-api', pod: 'billing-api-0', secondsAfterWarning: 86_400 + i, sourceIP: '10.1.1.5', userAgent: UA })),
      ...Array.from({ length: 12 }, (_, i) => ({ auditID: `u${i}`, time: T - 35 * MIN + i * 1000, kind: 'unauthorized' as const, sourceIPs: ['10.1.1.5', '10.9.9.9'], userAgent: UA })),
    ]);
  }
  function check(records: ReturnType<TokenAggregator['records']>): void {
    const u = records.filter((r) => r.kind === 'unauthorized');
    expect(u).toHaveLength(1);
    expect(u[0]).toMatchObject({ subject: '(unattributed)', sourceIPs: ['10.9.9.9'], forwardedIPs: ['10.1.1.5'], requests: 12 });
  }

  it('filter mode: the 401s are attributed to the connection’s address, not the forged entry', async () => {
    seedForged();
    const { items } = await drain(source({ mode: 'filter' }).poll(undefined, { now: T, lookbackMs: HOUR, stats: emptyStats() }));
    const agg = new TokenAggregator({ cluster: 'prod', maxTokenAge: { mode: 'eks' } });
    const stats = createReadStats();
    for (const m of items) {
      const use = tokenUseFromJson(m, stats);
      if (use) agg.add(use);
    }
    check(agg.records());
  });

  it('insights mode: the query extracts the whole sourceIPs list and the aggregator takes its last entry', async () => {
    seedForged();
    const { items } = await drain(source({ mode: 'insights' }).poll(undefined, { now: T, lookbackMs: HOUR, stats: emptyStats() }));
    const aggs = items.map((m) => parseTokenUseAggregate(m));
    expect(aggs.find((a) => a.useKind === 'unauthorized')?.sourceIP).toBe('10.1.1.5,10.9.9.9');
    const agg = new TokenAggregator({ cluster: 'prod', maxTokenAge: { mode: 'eks' } });
    for (const a of aggs) for (const u of aggregateToTokenUses(a)) agg.add(u);
    check(agg.records());
  });
});
