/**
 * One budget per real quota across replicas: two replicas, each with its own pool on one real PostgreSQL store, take
 * their tokens from the store's `rate_buckets` (src/store/rate-buckets.ts, src/core/token-bucket.ts), so together they
 * never exceed one CloudWatch Logs FilterLogEvents budget (asserted at the CloudWatch fake, which throttles over AWS's
 * 5 requests per second) nor one Slack method budget (asserted at the fake Slack's call log). Each is checked against
 * the same replicas with budgets of their own, which overrun the quota. The bucket table on both backends, and the
 * fallback to a replica's own bucket while the store is down.
 */
process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] = 'true';

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { webApi } from '@slack/bolt';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { Metrics } from '../../src/observability/metrics.js';
import { composeServe } from '../../src/runtime/compose.js';
import type { ServeHandle } from '../../src/runtime/serve-options.js';
import { MemoryBucketStateStore, TokenBucketLimiter, type BucketStateStore } from '../../src/core/token-bucket.js';
import { createLogger } from '../../src/observability/logger.js';
import { DEFAULT_BOT, DEFAULT_BOT_TOKEN, startFakeSlack, type FakeSlack } from '../../src/sandbox/fakes/slack.js';
import { SlackApi } from '../../src/slack/api.js';
import { slackBudget } from '../../src/slack/budget.js';
import { CloudWatchSource } from '../../src/sources/cloudwatch.js';
import { CloudWatchRateLimiter } from '../../src/sources/rate-limit.js';
import { emptyStats } from '../../src/sources/types.js';
import { SqlBucketStateStore } from '../../src/store/rate-buckets.js';
import type { Store } from '../../src/store/types.js';
import { startFakeCloudWatch, type FakeCloudWatch } from '../fakes/cloudwatch.js';
import { auditEvent, drain } from '../sources/events.js';
import { storeBackends, type StoreBackend } from '../store/backends.js';
import { createTestDatabase } from '../support/postgres.js';

const T = Date.parse('2026-11-29T12:00:00Z');
const HOUR = 3_600_000;
const PREFIX = 'kube-apiserver-audit-';
const TPS = { filterLogEvents: 5, startQuery: 5, getQueryResults: 5 };

/** Most of `at` (ms) within any window of `windowMs`. */
function peakIn(at: readonly number[], windowMs: number): number {
  const sorted = [...at].sort((a, b) => a - b);
  let peak = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[i]! - sorted[j]! >= windowMs) j++;
    peak = Math.max(peak, i - j + 1);
  }
  return peak;
}

const backends = storeBackends();
const postgres = backends.find(([name]) => name === 'postgres')?.[1];

describe.each(backends)('rate_buckets (%s)', (_name, backend) => {
  afterEach(backend.cleanup);
  afterAll(backend.dispose);

  it('keeps one bucket per key that a second replica reads and updates in turn', async () => {
    const a = await backend.openShared();
    const b = await backend.peer();
    let now = 1_000_000;
    const limits = { rate: 1, burst: 2 };
    const la = new TokenBucketLimiter({ limitsOf: (k) => (k === 'q' ? limits : undefined), store: new SqlBucketStateStore(a.sql), clock: () => now });
    const lb = new TokenBucketLimiter({ limitsOf: (k) => (k === 'q' ? limits : undefined), store: new SqlBucketStateStore(b.sql), clock: () => now });
    await la.acquire('q');
    await lb.acquire('q'); // the burst of 2 is spent by the two replicas together
    const row = await a.sql.get<{ tokens: number; rate: number }>('SELECT tokens, rate FROM rate_buckets WHERE key = ?', ['q']);
    expect(row).toMatchObject({ tokens: 0, rate: 1 });
    // A third call must wait for a token: it is due 1 s later on the shared clock.
    let done = false;
    const third = la.acquire('q').then(() => (done = true));
    await new Promise((r) => setTimeout(r, 50));
    expect(done).toBe(false);
    now += 1000;
    await third;
    expect((await b.sql.get<{ tokens: number }>('SELECT tokens FROM rate_buckets WHERE key = ?', ['q']))?.tokens).toBe(0);
    await la.acquire('other'); // a key without limits passes and writes nothing
    expect((await a.sql.all('SELECT key FROM rate_buckets')).map((r) => r['key'])).toEqual(['q']);
  });
});

describe('a shared budget whose store fails', () => {
  it('takes the token of the replica’s own bucket and says so, instead of failing the call', async () => {
    const failing: BucketStateStore = { update: () => Promise.reject(new Error('PostgreSQL store: connection terminated (SELECT tokens …)')) };
    const errors: string[] = [];
    let now = 0;
    const l = new TokenBucketLimiter({ limitsOf: () => ({ rate: 1, burst: 1 }), store: failing, clock: () => now, onStoreError: (key) => errors.push(key) });
    await l.acquire('q');
    expect(errors).toEqual(['q']);
    // The own bucket still limits: the next token is due 1 s later.
    let done = false;
    const next = l.acquire('q').then(() => (done = true));
    await new Promise((r) => setTimeout(r, 50));
    expect(done).toBe(false);
    now += 1000;
    await next;
    // Every attempt that could not read the store was told (the waiting call tried at least twice).
    expect(errors.length).toBeGreaterThanOrEqual(3);
    expect(new Set(errors)).toEqual(new Set(['q']));
  });
});

describe.skipIf(postgres === undefined)('two replicas on one PostgreSQL store', () => {
  const backend = postgres as StoreBackend;
  let cw: FakeCloudWatch | undefined;
  let slack: FakeSlack | undefined;
  const sources: CloudWatchSource[] = [];
  afterEach(async () => {
    for (const s of sources.splice(0)) s.close();
    await cw?.close();
    await slack?.close();
    cw = slack = undefined;
    await backend.cleanup();
  });
  afterAll(() => backend.dispose());

  async function replicas(): Promise<[Store, Store]> {
    return [await backend.openShared(), await backend.peer()];
  }

  /** 6 clusters per replica, two pages each, all polled at once against one 5-TPS account and Region. */
  async function pollBoth(limiters: [CloudWatchRateLimiter, CloudWatchRateLimiter]): Promise<FakeCloudWatch> {
    cw = await startFakeCloudWatch({ tps: { FilterLogEvents: 5 }, now: () => T });
    const polls: Promise<number>[] = [];
    for (let i = 0; i < 12; i++) {
      const group = `/aws/eks/c${i}/cluster`;
      cw.putEvents(group, `${PREFIX}a`, [0, 1].map((j) => ({ timestamp: T - 600_000 + j, message: auditEvent({ auditID: `c${i}-${j}`, time: T - 600_000 + j, kind: 'stale' }) })));
      const src = new CloudWatchSource({
        region: 'us-east-1',
        logGroup: group,
        streamPrefix: PREFIX,
        endpoint: cw.url,
        credentials: { accessKeyId: 'AKIDTEST', secretAccessKey: 'secret' },
        pageSize: 1,
        maxAttempts: 6,
        sdkRetryDelayMs: 50,
        retry: { baseDelayMs: 50, maxDelayMs: 500, maxRetries: 20, budgetMs: 60_000 },
        rateLimiter: limiters[i % 2]!,
      });
      sources.push(src);
      polls.push(drain(src.poll(undefined, { now: T, lookbackMs: HOUR, stats: emptyStats() })).then((r) => r.items.length));
    }
    expect(await Promise.all(polls)).toEqual(new Array(12).fill(2)); // every cluster read both its events
    return cw;
  }

  it('CloudWatch: budgets of their own overrun the account’s 5 TPS (the fake throttles)', { timeout: 120_000 }, async () => {
    const fake = await pollBoth([new CloudWatchRateLimiter({ tps: TPS }), new CloudWatchRateLimiter({ tps: TPS })]);
    expect(fake.requestsOf('FilterLogEvents').filter((r) => r.error === 'ThrottlingException').length).toBeGreaterThan(0);
  });

  it('CloudWatch: with the budget in the store, the two replicas together stay within 5 TPS and are never throttled', { timeout: 120_000 }, async () => {
    const [a, b] = await replicas();
    const shared = (s: Store) => new CloudWatchRateLimiter({ tps: TPS, store: new SqlBucketStateStore(s.sql), clock: Date.now });
    const fake = await pollBoth([shared(a), shared(b)]);
    const reqs = fake.requestsOf('FilterLogEvents');
    expect(reqs).toHaveLength(24); // one request per page, no retries
    expect(reqs.filter((r) => r.error !== undefined)).toEqual([]);
    // The budget sends 1 per 200 ms across both replicas: at most 6 in a closed second (the fake's burst is 5).
    expect(peakIn(reqs.map((r) => r.receivedAt), 1000)).toBeLessThanOrEqual(6);
    expect(await a.sql.all('SELECT key FROM rate_buckets')).toEqual([{ key: 'self/us-east-1/FilterLogEvents' }]);
  });

  /** `chat.update` at 300 per minute (5/s) with a burst of 2; each replica edits 15 messages at once. */
  const RATES = { postIntervalMs: 1000, perMinute: { 'chat.update': 300 }, burst: 2 };

  /** Replica `i`'s budget hook. */
  type BudgetOf = (i: number) => (method: string, channel: string | undefined) => Promise<void>;

  async function updateFromBoth(budgetOf: BudgetOf): Promise<number[]> {
    slack = await startFakeSlack();
    const logger = createLogger({ level: 'silent' });
    const apis = [0, 1].map((i) => {
      const client = new webApi.WebClient(DEFAULT_BOT_TOKEN, { slackApiUrl: slack!.apiUrl, retryConfig: { retries: 0 } });
      return new SlackApi({ client, logger, channelIntervalMs: 0, budget: budgetOf(i) });
    });
    const posted: { channel: string; ts: string }[] = [];
    for (let i = 0; i < 30; i++) posted.push(await apis[0]!.post(`C${i}`, { text: `alert ${i}`, blocks: [] }));
    const edits = posted.map((m, i) => apis[i % 2]!.update(m.channel, m.ts, { text: `alert ${i}, edited`, blocks: [] }));
    await Promise.all(edits);
    const updates = slack.callsTo('chat.update');
    expect(updates.filter((c) => c.response['ok'] === true)).toHaveLength(30);
    return updates.map((c) => c.at);
  }

  it('Slack: budgets of their own send chat.update at twice the workspace’s rate', { timeout: 120_000 }, async () => {
    const at = await updateFromBoth((_i) => slackBudget({ team: DEFAULT_BOT.teamId, rates: RATES, store: new MemoryBucketStateStore() }));
    // One bucket allows at most 2 + 5 in a second; two of their own send about twice that.
    expect(peakIn(at, 1000)).toBeGreaterThan(7);
  });

  it('Slack: with the budget in the store, the two replicas together keep one chat.update budget per workspace', { timeout: 120_000 }, async () => {
    const stores = await replicas();
    const at = await updateFromBoth((i) => slackBudget({ team: DEFAULT_BOT.teamId, rates: RATES, store: new SqlBucketStateStore(stores[i]!.sql) }));
    // A token bucket of 5/s with a burst of 2 allows at most 2 + 5 calls in any closed second.
    expect(peakIn(at, 1000)).toBeLessThanOrEqual(7);
    const keys = (await stores[0].sql.all<{ key: string }>('SELECT key FROM rate_buckets ORDER BY key')).map((r) => r.key);
    expect(keys).toContain(`slack/${DEFAULT_BOT.teamId}/chat.update`);
  });
});

describe.skipIf(postgres === undefined)('two serve replicas on one PostgreSQL store', () => {
  const handles: ServeHandle[] = [];
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const h of handles.splice(0)) await h.stop();
    for (const f of cleanups.splice(0).reverse()) await f();
  });

  it('poll 12 CloudWatch clusters of one account and Region within one 5-TPS FilterLogEvents budget, never throttled', { timeout: 180_000 }, async () => {
    const env = { AWS_ACCESS_KEY_ID: 'AKIDTEST', AWS_SECRET_ACCESS_KEY: 'secret', AWS_REGION: 'us-east-1' };
    const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
    Object.assign(process.env, env);
    cleanups.push(() => {
      for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    });
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    const dir = mkdtempSync(join(tmpdir(), 'tw-budget-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    // One event per page: each cluster's poll sends 4 FilterLogEvents requests (3 pages and the empty last one).
    const fake = await startFakeCloudWatch({ tps: { FilterLogEvents: 5 }, pageSize: 1 });
    cleanups.push(() => fake.close());
    const now = Date.now();
    const names = Array.from({ length: 12 }, (_, i) => `c${i}`);
    for (const name of names) {
      fake.putEvents(`/aws/eks/${name}/cluster`, `${PREFIX}a`, [0, 1, 2].map((j) => ({ timestamp: now - 60_000 + j, message: auditEvent({ auditID: `${name}-${j}`, time: now - 60_000 + j, kind: 'stale' }) })));
    }
    const clusters = names.map((name) => ({ name, audit: { cloudwatch: { region: 'us-east-1', endpoint: fake.url } }, schedule: '0 0 1 1 *' }));
    const start = async (name: string) => {
      const config = parseConfig(
        {
          store: { path: join(dir, `${name}.db`), postgres: { host: db.options.host, port: db.options.port, database: db.options.database, user: db.options.user, sslmode: 'disable', poolSize: 4 } },
          http: { host: '127.0.0.1', port: 0 },
          poll: { cloudwatchTps: { filterLogEvents: 5 } },
          clusters,
        },
        {},
      );
      const h = await composeServe(config, { logger: createLogger({ level: 'silent' }), metrics: new Metrics(), jitterMs: 500, sharding: { name, heartbeatMs: 100, ttlMs: 1000 } });
      handles.push(h);
      return h;
    };
    const [a] = await Promise.all([start('tw-a'), start('tw-b')]);
    const finished = async () => Number((await a.context.store.sql.get<{ n: number }>('SELECT count(DISTINCT cluster) AS n FROM poll_runs WHERE ended_at IS NOT NULL AND error IS NULL'))?.n ?? 0);
    const end = Date.now() + 120_000;
    while ((await finished()) < names.length) {
      if (Date.now() > end) throw new Error('timed out waiting for every cluster\'s start-up poll');
      await new Promise((r) => setTimeout(r, 50));
    }
    const reqs = fake.requestsOf('FilterLogEvents');
    expect(reqs.length).toBeGreaterThanOrEqual(names.length * 2);
    expect(reqs.filter((r) => r.error !== undefined)).toEqual([]); // never throttled
    expect(peakIn(reqs.map((r) => r.receivedAt), 1000)).toBeLessThanOrEqual(6);
    expect(await a.context.store.sql.all('SELECT key FROM rate_buckets')).toEqual([{ key: 'self/us-east-1/FilterLogEvents' }]);
  });
});
