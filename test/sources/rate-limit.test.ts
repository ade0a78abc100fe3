/**
 * The shared CloudWatch Logs budget (src/sources/rate-limit.ts): the bucket's arithmetic on an injected clock, and many
 * clusters' CloudWatchSources (the real SDK) sharing one budget against the fake with AWS's 5 TPS FilterLogEvents
 * quota — never over it — and adapting when the configured rate is more than the service allows.
 */
process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] = 'true';

import { afterEach, describe, expect, it } from 'vitest';
import { startFakeCloudWatch, type FakeCloudWatch } from '../fakes/cloudwatch.js';
import { CloudWatchSource } from '../../src/sources/cloudwatch.js';
import { MemoryBucketStateStore } from '../../src/core/token-bucket.js';
import { accountOfLogGroup, CloudWatchRateLimiter } from '../../src/sources/rate-limit.js';
import { emptyStats } from '../../src/sources/types.js';
import { auditEvent, drain } from './events.js';

const T = Date.parse('2026-11-29T12:00:00Z');
const HOUR = 3_600_000;
const PREFIX = 'kube-apiserver-audit-';
const TPS = { filterLogEvents: 5, startQuery: 5, getQueryResults: 5 };

describe('CloudWatchRateLimiter (bucket arithmetic, injected clock)', () => {
  it('keys budgets by account (from a log group ARN, else the credentials’ own) and Region; unbudgeted operations pass', () => {
    expect(accountOfLogGroup('arn:aws:logs:eu-west-1:210987654321:log-group:/aws/eks/a/cluster')).toBe('210987654321');
    expect(accountOfLogGroup('/aws/eks/a/cluster')).toBe('self');
    const l = new CloudWatchRateLimiter({ tps: TPS });
    expect(l.keyOf('self', 'us-east-1', 'FilterLogEvents')).toBe('self/us-east-1/FilterLogEvents');
    expect(l.keyOf('self', 'us-east-1', 'StopQuery')).toBeUndefined();
  });

  it('halves the rate on ThrottlingException (once per burst of answers), floors it, and recovers after quiet', async () => {
    let now = 0;
    const store = new MemoryBucketStateStore();
    const rates: number[] = [];
    const l = new CloudWatchRateLimiter({ tps: TPS, store, clock: () => now, onThrottle: (_k, r) => rates.push(r) });
    const key = 'self/us-east-1/FilterLogEvents';
    await l.acquire(key); // the first token is there: no wait
    expect(store.get(key)).toMatchObject({ rate: 5, tokens: 0 });
    await l.throttled(key);
    await l.throttled(key); // same instant: answers to requests sent together count once
    expect(rates).toEqual([2.5, 2.5]);
    now += 500; // ≥ 1 / 2.5 s later: another halving
    await l.throttled(key);
    now += 1000; // ≥ 1 / 1.25 s
    await l.throttled(key);
    now += 1000; // < 1 / 0.625 s: the same burst, no halving
    await l.throttled(key);
    now += 2000;
    await l.throttled(key); // 0.3125 is below the floor: 0.5 (10 % of 5)
    expect(rates).toEqual([2.5, 2.5, 1.25, 0.625, 0.625, 0.5]);
    // 12 s without throttling: +10 % of 5 TPS per second once 2 s have passed → back to 5 (capped).
    now += 12_000;
    await l.acquire(key);
    expect(store.get(key)?.rate).toBe(5);
  });
});

describe('one budget for many clusters (fake CloudWatch with a 5 TPS FilterLogEvents bucket)', () => {
  let fake: FakeCloudWatch | undefined;
  const sources: CloudWatchSource[] = [];
  afterEach(async () => {
    for (const s of sources.splice(0)) s.close();
    await fake?.close();
    fake = undefined;
  });

  async function fleet(clusters: number, limiter: CloudWatchRateLimiter | undefined): Promise<{ events: number[]; fake: FakeCloudWatch }> {
    fake = await startFakeCloudWatch({ tps: { FilterLogEvents: 5 }, now: () => T });
    const polls: Promise<number>[] = [];
    for (let i = 0; i < clusters; i++) {
      const group = `/aws/eks/c${i}/cluster`;
      // Two pages each (pageSize 1): 2 × N FilterLogEvents requests at once.
      fake.putEvents(group, `${PREFIX}a`, [0, 1].map((j) => ({ timestamp: T - 10 * 60_000 + j, message: auditEvent({ auditID: `c${i}-${j}`, time: T - 10 * 60_000 + j, kind: 'stale' }) })));
      const src = new CloudWatchSource({
        region: 'us-east-1',
        logGroup: group,
        streamPrefix: PREFIX,
        endpoint: fake.url,
        credentials: { accessKeyId: 'AKIDTEST', secretAccessKey: 'secret' },
        pageSize: 1,
        maxAttempts: 6,
        sdkRetryDelayMs: 50,
        retry: { baseDelayMs: 50, maxDelayMs: 500, maxRetries: 20, budgetMs: 60_000 },
        ...(limiter ? { rateLimiter: limiter } : {}),
      });
      sources.push(src);
      polls.push(drain(src.poll(undefined, { now: T, lookbackMs: HOUR, stats: emptyStats() })).then((r) => r.items.length));
    }
    return { events: await Promise.all(polls), fake };
  }

  /** Most requests that arrived within any 1 s window. */
  function peakPerSecond(at: number[]): number {
    const sorted = [...at].sort((a, b) => a - b);
    let peak = 0;
    for (let i = 0, j = 0; i < sorted.length; i++) {
      while (sorted[i]! - sorted[j]! >= 1000) j++;
      peak = Math.max(peak, i - j + 1);
    }
    return peak;
  }

  it('without a shared budget, 12 clusters at once overrun the quota (the fake throttles)', { timeout: 120_000 }, async () => {
    const { events, fake } = await fleet(12, undefined);
    expect(events).toEqual(new Array(12).fill(2));
    expect(fake.requestsOf('FilterLogEvents').filter((r) => r.error === 'ThrottlingException').length).toBeGreaterThan(0);
  });

  it('with the shared 5 TPS budget, 12 clusters read everything and are never throttled', { timeout: 120_000 }, async () => {
    const { events, fake } = await fleet(12, new CloudWatchRateLimiter({ tps: TPS }));
    expect(events).toEqual(new Array(12).fill(2)); // every cluster read both its events
    const reqs = fake.requestsOf('FilterLogEvents');
    expect(reqs).toHaveLength(24); // one request per page, no retries
    expect(reqs.filter((r) => r.error !== undefined)).toEqual([]);
    // The fake's bucket holds a burst of 5; the limiter sends 1 per 200 ms: at most 6 in a closed second.
    expect(peakPerSecond(reqs.map((r) => r.receivedAt))).toBeLessThanOrEqual(6);
  });

  it('configured above the real quota (10 TPS against 5), it backs off on ThrottlingException and still reads everything', { timeout: 120_000 }, async () => {
    const throttles: number[] = [];
    const limiter = new CloudWatchRateLimiter({ tps: { ...TPS, filterLogEvents: 10 }, onThrottle: (_k, r) => throttles.push(r) });
    const { events, fake } = await fleet(12, limiter);
    expect(events).toEqual(new Array(12).fill(2));
    const reqs = fake.requestsOf('FilterLogEvents');
    const throttled = reqs.filter((r) => r.error === 'ThrottlingException').length;
    expect(throttles.length).toBe(throttled); // every throttling answer reached the budget (SDK retries included)
    expect(Math.min(...throttles)).toBeLessThanOrEqual(5); // it slowed to the real quota or below
    expect(throttled).toBeLessThan(24); // fewer throttling answers than successful requests
  });
});
