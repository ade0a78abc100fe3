/**
 * The fake CloudWatch Logs server itself: wire format, FilterLogEvents semantics, the Logs Insights interpreter.
 */
process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] = 'true';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  CloudWatchLogsClient,
  DescribeLogGroupsCommand,
  FilterLogEventsCommand,
  GetQueryResultsCommand,
  InvalidParameterException,
  LimitExceededException,
  MalformedQueryException,
  ResourceNotFoundException,
  StartQueryCommand,
} from '@aws-sdk/client-cloudwatch-logs';
import { compileFilterPattern, runInsightsQuery, startFakeCloudWatch, type FakeCloudWatch } from './cloudwatch.js';
import { auditEvent } from '../sources/events.js';

let fake: FakeCloudWatch;
let client: CloudWatchLogsClient;

beforeEach(async () => {
  fake = await startFakeCloudWatch();
  client = new CloudWatchLogsClient({
    region: 'us-east-1',
    endpoint: fake.url,
    credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
    maxAttempts: 1,
  });
});

afterEach(async () => {
  client.destroy();
  await fake.close();
});

describe('fake CloudWatch Logs: wire protocol', () => {
  it('answers AWS JSON 1.1 and sends errors as __type bodies with x-amzn-errortype', async () => {
    fake.throttleNext(1);
    const res = await fetch(fake.url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-amz-json-1.1', 'x-amz-target': 'Logs_20140328.FilterLogEvents' },
      body: JSON.stringify({ logGroupName: 'g' }),
    });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toBe('application/x-amz-json-1.1');
    expect(res.headers.get('x-amzn-errortype')).toBe('ThrottlingException');
    expect(await res.json()).toEqual({ __type: 'ThrottlingException', message: 'Rate exceeded' });

    const unknown = await fetch(fake.url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-amz-json-1.1', 'x-amz-target': 'Logs_20140328.PutLogEvents' },
      body: '{}',
    });
    expect(unknown.status).toBe(400);
    expect(((await unknown.json()) as { __type: string }).__type).toBe('UnknownOperationException');
    expect(fake.requests.map((r) => [r.op, r.status, r.error])).toEqual([
      ['FilterLogEvents', 400, 'ThrottlingException'],
      ['PutLogEvents', 400, 'UnknownOperationException'],
    ]);
  });

  it('accepts any SigV4 credentials and surfaces errors as the SDK exception classes', async () => {
    fake.putEvents('/g', 's', [{ timestamp: 1000, message: 'hello' }]);
    const other = new CloudWatchLogsClient({ region: 'ap-south-1', endpoint: fake.url, credentials: { accessKeyId: 'zz', secretAccessKey: 'yy' } });
    const out = await other.send(new FilterLogEventsCommand({ logGroupName: '/g' }));
    other.destroy();
    expect(out.events?.map((e) => e.message)).toEqual(['hello']);
    expect(String(fake.requests[0]?.headers['authorization'])).toMatch(/^AWS4-HMAC-SHA256 Credential=zz\//);

    await expect(client.send(new FilterLogEventsCommand({ logGroupName: '/missing' }))).rejects.toBeInstanceOf(ResourceNotFoundException);
    await expect(client.send(new FilterLogEventsCommand({ logGroupName: '/g', logGroupIdentifier: '/g' }))).rejects.toBeInstanceOf(
      InvalidParameterException,
    );
    await expect(
      client.send(new StartQueryCommand({ logGroupName: '/g', startTime: 1_700_000_000_000, endTime: 1_700_000_060_000, queryString: 'fields @message' })),
    ).rejects.toBeInstanceOf(InvalidParameterException);
    await expect(
      client.send(new StartQueryCommand({ logGroupName: '/g', startTime: 0, endTime: 10, queryString: 'fields @message | frobnicate' })),
    ).rejects.toBeInstanceOf(MalformedQueryException);
  });

  it('filters by time (start and end inclusive), stream prefix and ARN identifier; lists groups', async () => {
    fake.putEvents('/aws/eks/a/cluster', 'kube-apiserver-audit-1', [
      { timestamp: 999, message: 'm999' },
      { timestamp: 1000, message: 'm1000' },
      { timestamp: 2000, message: 'm2000' },
      { timestamp: 2001, message: 'm2001' },
    ]);
    fake.putEvents('/aws/eks/a/cluster', 'authenticator-1', [{ timestamp: 1500, message: 'auth' }]);
    const out = await client.send(
      new FilterLogEventsCommand({
        logGroupIdentifier: 'arn:aws:logs:us-east-1:123456789012:log-group:/aws/eks/a/cluster',
        logStreamNamePrefix: 'kube-apiserver-audit-',
        startTime: 1000,
        endTime: 2000,
      }),
    );
    expect(out.events?.map((e) => [e.logStreamName, e.timestamp, e.message])).toEqual([
      ['kube-apiserver-audit-1', 1000, 'm1000'],
      ['kube-apiserver-audit-1', 2000, 'm2000'],
    ]);
    expect(out.searchedLogStreams).toEqual([{ logStreamName: 'kube-apiserver-audit-1', searchedCompletely: true }]);
    expect(out.nextToken).toBeUndefined();
    const groups = await client.send(new DescribeLogGroupsCommand({ logGroupNamePrefix: '/aws/eks/' }));
    expect(groups.logGroups?.map((g) => g.logGroupName)).toEqual(['/aws/eks/a/cluster']);
  });

  it('pages by scanPerPage, returning empty pages with a nextToken over non-matching stretches', async () => {
    await fake.close();
    fake = await startFakeCloudWatch({ scanPerPage: 3 });
    client.destroy();
    client = new CloudWatchLogsClient({ region: 'us-east-1', endpoint: fake.url, credentials: { accessKeyId: 'a', secretAccessKey: 'b' } });
    fake.putEvents('/g', 's', [
      { timestamp: 1, message: 'no' },
      { timestamp: 2, message: 'no' },
      { timestamp: 3, message: 'no' },
      { timestamp: 4, message: 'hit one' },
      { timestamp: 5, message: 'no' },
      { timestamp: 6, message: 'hit two' },
    ]);
    const pages: [number, boolean][] = [];
    let nextToken: string | undefined;
    do {
      const out = await client.send(new FilterLogEventsCommand({ logGroupName: '/g', filterPattern: 'hit', ...(nextToken && { nextToken }) }));
      pages.push([out.events?.length ?? 0, !!out.nextToken]);
      nextToken = out.nextToken;
    } while (nextToken);
    expect(pages).toEqual([
      [0, true],
      [2, false],
    ]);
  });

  it('hides events ingested after the fake clock (late delivery)', async () => {
    let now = 10_000;
    await fake.close();
    fake = await startFakeCloudWatch({ now: () => now });
    client.destroy();
    client = new CloudWatchLogsClient({ region: 'us-east-1', endpoint: fake.url, credentials: { accessKeyId: 'a', secretAccessKey: 'b' } });
    fake.putEvents('/g', 's', [{ timestamp: 5_000, message: 'late', ingestionTime: 20_000 }]);
    expect((await client.send(new FilterLogEventsCommand({ logGroupName: '/g' }))).events).toEqual([]);
    now = 20_000;
    const out = await client.send(new FilterLogEventsCommand({ logGroupName: '/g' }));
    expect(out.events?.map((e) => [e.timestamp, e.ingestionTime, e.message])).toEqual([[5_000, 20_000, 'late']]);
  });
});

describe('fake CloudWatch Logs: filter patterns (term subset)', () => {
  it('implements quoted terms, AND, ?OR and -exclusion as case-sensitive substring matches', () => {
    const or = compileFilterPattern('?"authentication.k8s.io/stale-token" ?"Authentication failed"');
    expect(or('{"annotations":{"authentication.k8s.io/stale-token":"x"}}')).toBe(true);
    expect(or('"message":"Authentication failed, attempted: bearer"')).toBe(true);
    expect(or('"message":"authentication failed"')).toBe(false);
    expect(or('authentication.k8s.io/legacy-token')).toBe(false);
    const and = compileFilterPattern('ERROR "bad request" -debug');
    expect(and('ERROR: bad request')).toBe(true);
    expect(and('ERROR: bad request debug')).toBe(false);
    expect(and('ERROR: bad')).toBe(false);
    expect(compileFilterPattern('"say \\"hi\\""')('they say "hi"')).toBe(true);
    expect(compileFilterPattern('')('anything')).toBe(true);
    expect(() => compileFilterPattern('{ $.a = 1 }')).toThrow(/term filter patterns only/);
    expect(() => compileFilterPattern('?a b')).toThrow(/mixing/);
  });
});

describe('fake CloudWatch Logs: Logs Insights interpreter', () => {
  it('runs the EKS user guide stale-token query with a stats clause, computed from the events', () => {
    const sa = (ns: string, n: string) => `system:serviceaccount:${ns}:${n}`;
    const ev = (id: string, secs: number, subj: string) => ({
      timestamp: 1_000 + secs,
      stream: 'kube-apiserver-audit-1',
      message: auditEvent({ auditID: id, time: 1_000, kind: 'stale', pod: 'p', secondsAfterWarning: secs, namespace: subj.split(':')[2], serviceAccount: subj.split(':')[3] }),
    });
    const rows = runInsightsQuery(
      [
        'fields @timestamp',
        'filter @logStream like /kube-apiserver-audit/',
        'filter @message like /seconds after warning threshold/',
        'parse @message "subject: *, seconds after warning threshold:*\\"" as subject, elapsedtime',
        'stats count(*) as hits, max(elapsedtime) as maxAge by subject',
        'sort hits desc',
      ].join(' | '),
      [
        ev('1', 100, sa('kube-system', 'multus')),
        ev('2', 5000, sa('kube-system', 'multus')),
        ev('3', 900, sa('kube-system', 'multus')),
        ev('4', 42, sa('flux-system', 'helm-controller')),
        { timestamp: 5, stream: 'kube-apiserver-audit-1', message: auditEvent({ auditID: '5', time: 5, kind: 'plain' }) },
        { timestamp: 6, stream: 'authenticator-1', message: auditEvent({ auditID: '6', time: 6, kind: 'stale', secondsAfterWarning: 7 }) },
      ],
    );
    // elapsedtime keeps the leading space, as docs/design/domain.md §4 notes; max() compares numerically.
    expect(rows).toEqual([
      { subject: sa('kube-system', 'multus'), hits: '3', maxAge: ' 5000' },
      { subject: sa('flux-system', 'helm-controller'), hits: '1', maxAge: ' 42' },
    ]);
  });

  it('evaluates fields expressions, toMillis, coalesce, regex parse and @timestamp formatting', () => {
    const rows = runInsightsQuery(
      'parse @message /n=(?<n>\\d+)/ | fields toMillis(@timestamp) as ms, floor(n / 10) * 10 as tens, coalesce(n, "none") as nn | sort ms asc | display @timestamp, ms, tens, nn',
      [
        { timestamp: Date.parse('2026-11-29T12:00:00.123Z'), message: 'n=47' },
        { timestamp: Date.parse('2026-11-29T12:00:01Z'), message: 'nothing' },
      ],
    );
    expect(rows).toEqual([
      { '@timestamp': '2026-11-29 12:00:00.123', ms: String(Date.parse('2026-11-29T12:00:00.123Z')), tens: '40', nn: '47' },
      { '@timestamp': '2026-11-29 12:00:01.000', ms: String(Date.parse('2026-11-29T12:00:01Z')), nn: 'none' },
    ]);
  });
});

describe('fake CloudWatch Logs: per-operation rate limit (tps)', () => {
  it('answers ThrottlingException past a burst of `rate`, refills at `rate` per second, and limits only that operation', async () => {
    let now = 0;
    const limited = await startFakeCloudWatch({ tps: { FilterLogEvents: 5 }, rateClock: () => now });
    const c = new CloudWatchLogsClient({ region: 'us-east-1', endpoint: limited.url, credentials: { accessKeyId: 'a', secretAccessKey: 'b' }, maxAttempts: 1 });
    try {
      limited.createLogGroup('/g');
      const call = () => c.send(new FilterLogEventsCommand({ logGroupName: '/g' })).then(() => 'ok', (e: Error) => e.name);
      const burst: string[] = [];
      for (let i = 0; i < 7; i++) burst.push(await call()); // all at the same instant of the rate clock
      expect(burst).toEqual(['ok', 'ok', 'ok', 'ok', 'ok', 'ThrottlingException', 'ThrottlingException']);
      now += 400; // 2 tokens back at 5 per second
      expect([await call(), await call(), await call()]).toEqual(['ok', 'ok', 'ThrottlingException']);
      expect(await c.send(new DescribeLogGroupsCommand({})).then(() => 'ok')).toBe('ok'); // not limited
      expect(limited.requestsOf('FilterLogEvents').map((r) => r.receivedAt)).toEqual([0, 0, 0, 0, 0, 0, 0, 400, 400, 400]);
    } finally {
      c.destroy();
      await limited.close();
    }
  });
});

describe('fake CloudWatch Logs: one Logs Insights query over several log groups', () => {
  const T0 = Date.parse('2026-11-29T12:00:00Z');
  const results = async (queryId: string) => {
    for (;;) {
      const out = await client.send(new GetQueryResultsCommand({ queryId }));
      if (out.status === 'Complete') return (out.results ?? []).map((r) => Object.fromEntries(r.map((c) => [c.field, c.value])));
    }
  };

  it('runs filter (like, =, !=, ispresent), parse, stats count/min/max by @log, sort and limit across the groups it names', async () => {
    const msg = (user: string, code: number) => `{"user":{"username":"${user}"},"responseStatus":{"code":${code}}}`;
    fake.putEvents('/aws/eks/a/cluster', 'kube-apiserver-audit-1', [
      { timestamp: T0 + 1_000, message: msg('alice', 200) },
      { timestamp: T0 + 2_000, message: msg('alice', 200) },
      { timestamp: T0 + 3_000, message: msg('bob', 401) },
      { timestamp: T0 + 4_000, message: 'no user here' },
    ]);
    fake.putEvents('/aws/eks/b/cluster', 'kube-apiserver-audit-1', [{ timestamp: T0 + 5_000, message: msg('alice', 200) }]);
    fake.putEvents('/aws/eks/b/cluster', 'authenticator-1', [{ timestamp: T0 + 6_000, message: msg('alice', 200) }]);
    // A group the query does not name: none of its events count.
    fake.putEvents('/aws/eks/c/cluster', 'kube-apiserver-audit-1', [{ timestamp: T0 + 1_000, message: msg('alice', 200) }]);
    const { queryId } = await client.send(
      new StartQueryCommand({
        logGroupIdentifiers: ['/aws/eks/a/cluster', 'arn:aws:logs:us-east-1:123456789012:log-group:/aws/eks/b/cluster'],
        startTime: T0 / 1000,
        endTime: T0 / 1000 + 60,
        queryString: [
          'filter @logStream like /^kube-apiserver-audit-/',
          'parse @message /"username":"(?<user>[^"]*)"/',
          'parse @message /"code":(?<code>\\d+)/',
          'filter ispresent(user) and code != 401 and user = "alice"',
          'stats count(*) as n, min(@timestamp) as first, max(@timestamp) as last by @log, user',
          'sort n desc',
          'limit 10',
        ].join(' | '),
      }),
    );
    expect(await results(queryId as string)).toEqual([
      { '@log': '123456789012:/aws/eks/a/cluster', user: 'alice', n: '2', first: '2026-11-29 12:00:01.000', last: '2026-11-29 12:00:02.000' },
      { '@log': '123456789012:/aws/eks/b/cluster', user: 'alice', n: '1', first: '2026-11-29 12:00:05.000', last: '2026-11-29 12:00:05.000' },
    ]);
    const one = await client.send(
      new StartQueryCommand({ logGroupNames: ['/aws/eks/a/cluster', '/aws/eks/b/cluster'], startTime: T0 / 1000, endTime: T0 / 1000 + 60, queryString: 'stats count(*) as n by @log | sort @log | limit 1' }),
    );
    expect(await results(one.queryId as string)).toEqual([{ '@log': '123456789012:/aws/eks/a/cluster', n: '4' }]);
  });

  it('takes at most 50 log groups per query (StartQuery API reference), and names a missing one', async () => {
    const names = Array.from({ length: 51 }, (_, i) => `/aws/eks/c${i}/cluster`);
    for (const n of names) fake.createLogGroup(n);
    const q = (logGroupNames: string[]) => client.send(new StartQueryCommand({ logGroupNames, startTime: 1, endTime: 2, queryString: 'stats count(*) by @log' }));
    await expect(q(names)).rejects.toBeInstanceOf(InvalidParameterException);
    await expect(q(names.slice(0, 50))).resolves.toHaveProperty('queryId');
    await expect(q(['/aws/eks/missing/cluster'])).rejects.toBeInstanceOf(ResourceNotFoundException);
  });

  it('refuses a query over the concurrent-query quota with LimitExceededException until one completes', async () => {
    await fake.close();
    fake = await startFakeCloudWatch({ maxConcurrentQueries: 2, queryRunningPolls: 0 });
    client.destroy();
    client = new CloudWatchLogsClient({ region: 'us-east-1', endpoint: fake.url, credentials: { accessKeyId: 'a', secretAccessKey: 'b' }, maxAttempts: 1 });
    fake.createLogGroup('g');
    const q = () => client.send(new StartQueryCommand({ logGroupName: 'g', startTime: 1, endTime: 2, queryString: 'stats count(*)' }));
    const a = await q();
    await q();
    await expect(q()).rejects.toBeInstanceOf(LimitExceededException);
    // GetQueryResults completes the first (queryRunningPolls 0): a slot is free again.
    expect((await client.send(new GetQueryResultsCommand({ queryId: a.queryId }))).status).toBe('Complete');
    await expect(q()).resolves.toHaveProperty('queryId');
    expect(fake.peakConcurrentQueries()).toBe(2);
  });
});
