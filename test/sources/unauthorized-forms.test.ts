/**
 * Every form of a user-less 401 (docs/design/domain.md §2) reaches the findings engine from every live source `serve`
 * runs — CloudWatch FilterLogEvents, Logs Insights, fleet Logs Insights (real @aws-sdk client against the loopback
 * fake) and the audit webhook receiver (HTTPS on loopback) — and a request logged at `ResponseStarted` and
 * `ResponseComplete` counts once. The filter pattern and the query text the fake receives are asserted: both come from
 * the one list of terms (`src/audit/terms.ts`).
 */
process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] = 'true';

import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startFakeCloudWatch, type FakeCloudWatch } from '../fakes/cloudwatch.js';
import { CloudWatchSource } from '../../src/sources/cloudwatch.js';
import { FleetInsightsSource } from '../../src/sources/fleet-insights.js';
import { aggregateToTokenUses, parseTokenUseAggregate } from '../../src/sources/insights.js';
import { WebhookSource } from '../../src/sources/webhook.js';
import { emptyStats } from '../../src/sources/types.js';
import { isAuditEvent, toTokenUse } from '../../src/audit/token-use.js';
import { TokenAggregator } from '../../src/findings/aggregate.js';
import type { TokenUse } from '../../src/audit/types.js';
import { auditEvent, drain, UNAUTHORIZED_STATUS, type EventSpec, type UnauthorizedForm } from './events.js';
import { eventList, postBatch, selfSignedCert, type TestCert } from './webhook-client.js';

const REGION = 'us-west-2';
const GROUP = '/aws/eks/prod/cluster';
const PREFIX = 'kube-apiserver-audit-';
const T = Date.parse('2026-11-29T12:00:00Z');
const MIN = 60_000;
const HOUR = 60 * MIN;
const IP = '10.9.0.7';
const creds = { accessKeyId: 'AKIDTEST', secretAccessKey: 'secret' };
const FORMS = Object.keys(UNAUTHORIZED_STATUS) as UnauthorizedForm[];

const PATTERN = '?"authentication.k8s.io/stale-token" ?"authentication.k8s.io/legacy-token" ?"Authentication failed" ?"Unauthorized"';
const INSIGHTS_FILTER =
  'filter @message like "authentication.k8s.io/stale-token" or @message like "authentication.k8s.io/legacy-token" or @message like "Authentication failed" or @message like "Unauthorized"';

/** A stale token used from {@link IP}, then 3 rejected requests from there, each logged at two stages. */
function specs(form: UnauthorizedForm): EventSpec[] {
  const out: EventSpec[] = [{ auditID: 's1', time: T - 50 * MIN, kind: 'stale', pod: 'fluent-bit-x1', secondsAfterWarning: 89 * 86_400, sourceIP: IP, userAgent: 'Fluent-Bit' }];
  for (let i = 0; i < 3; i++) {
    for (const stage of ['ResponseStarted', 'ResponseComplete']) {
      out.push({ auditID: `u${i}`, time: T - (40 - i) * MIN, kind: 'unauthorized', form, stage, sourceIP: IP, userAgent: 'Fluent-Bit' });
    }
  }
  // An event of no token use (200, a user): selected by no term.
  out.push({ auditID: 'n1', time: T - 30 * MIN, kind: 'plain' });
  return out;
}

/** The 401 record the findings engine makes of the uses: attributed to the stale subject, 3 requests. */
function unauthorizedRecord(uses: TokenUse[]) {
  const agg = new TokenAggregator({ cluster: 'prod', maxTokenAge: { mode: 'eks' } });
  const seen = new Set<string>();
  for (const u of uses) {
    if (seen.has(u.auditID)) continue; // the poller's dedupe by auditID
    seen.add(u.auditID);
    agg.add(u);
  }
  return agg.records().filter((r) => r.kind === 'unauthorized');
}

const usesOfMessages = (items: string[]): TokenUse[] =>
  items
    .map((t) => JSON.parse(t) as unknown)
    .filter(isAuditEvent)
    .map(toTokenUse)
    .filter((u): u is TokenUse => u !== undefined);

describe('CloudWatch sources read every 401 form', () => {
  let fake: FakeCloudWatch;
  const closers: { close(): void }[] = [];
  beforeEach(async () => {
    fake = await startFakeCloudWatch({ now: () => T, queryRunningPolls: 1 });
  });
  afterEach(async () => {
    for (const c of closers.splice(0)) c.close();
    await fake.close();
  });
  const single = (mode: 'filter' | 'insights') => {
    const s = new CloudWatchSource({ region: REGION, logGroup: GROUP, streamPrefix: PREFIX, endpoint: fake.url, credentials: creds, mode, overlapMs: 10 * MIN, insights: { pollIntervalMs: 1 } });
    closers.push(s);
    return s;
  };
  const seed = (form: UnauthorizedForm) =>
    fake.putEvents(
      GROUP,
      `${PREFIX}a`,
      specs(form).map((s) => ({ timestamp: s.time, message: auditEvent(s) })),
    );

  for (const form of FORMS) {
    it(`FilterLogEvents: ${form}`, async () => {
      seed(form);
      const { items } = await drain(single('filter').poll(undefined, { now: T, lookbackMs: HOUR, stats: emptyStats() }));
      expect(fake.requestsOf('FilterLogEvents')[0]?.body['filterPattern']).toBe(PATTERN);
      const uses = usesOfMessages(items);
      // Both stages of each rejected request arrive; the poller counts each auditID once.
      expect(uses.filter((u) => u.kind === 'unauthorized').map((u) => u.auditID)).toEqual(['u0', 'u0', 'u1', 'u1', 'u2', 'u2']);
      expect(unauthorizedRecord(uses)).toEqual([expect.objectContaining({ namespace: 'kube-system', serviceAccount: 'multus', requests: 3 })]);
    });

    it(`Logs Insights: ${form}`, async () => {
      seed(form);
      const { items } = await drain(single('insights').poll(undefined, { now: T, lookbackMs: HOUR, stats: emptyStats() }));
      const query = fake.requestsOf('StartQuery')[0]?.body['queryString'] as string;
      expect(query.split('\n| ')).toContain(INSIGHTS_FILTER);
      expect(query).toContain('count_distinct(twAuditId) as twRequests');
      const aggs = items.map(parseTokenUseAggregate);
      expect(aggs.filter((a) => a.useKind === 'unauthorized').map((a) => a.requests)).toEqual([3]); // 3 requests, not 6 events
      expect(unauthorizedRecord(aggs.flatMap(aggregateToTokenUses))).toEqual([expect.objectContaining({ serviceAccount: 'multus', requests: 3 })]);
    });

    it(`fleet Logs Insights: ${form}`, async () => {
      seed(form);
      const f = new FleetInsightsSource({ region: REGION, streamPrefix: PREFIX, endpoint: fake.url, credentials: creds, overlapMs: 10 * MIN, pollIntervalMs: 1, maxAttempts: 1, retry: { baseDelayMs: 2, maxDelayMs: 10, maxRetries: 3, budgetMs: 5_000 } });
      closers.push(f);
      const sourceId = `cloudwatch:${REGION}:${GROUP}`;
      const out = await f.poll([{ sourceId, logGroup: GROUP }], { now: T, lookbackMs: HOUR, stats: emptyStats() });
      const query = fake.requestsOf('StartQuery')[0]?.body['queryString'] as string;
      expect(query.split('\n| ')).toContain(INSIGHTS_FILTER);
      const m = out.members.get(sourceId);
      if (!m?.ok) throw new Error('fleet member failed');
      expect(m.aggregates.filter((a) => a.useKind === 'unauthorized').map((a) => a.requests)).toEqual([3]);
      expect(unauthorizedRecord(m.aggregates.flatMap(aggregateToTokenUses))).toEqual([expect.objectContaining({ serviceAccount: 'multus', requests: 3 })]);
    });
  }
});

describe('the audit webhook receiver reads every 401 form', () => {
  const TOKEN = 'webhook-token-7f3a9c';
  let certDir: string;
  let server: TestCert;
  const dirs: string[] = [];
  const sources: WebhookSource[] = [];
  beforeAll(() => {
    certDir = mkdtempSync(join(tmpdir(), 'tw-401-certs-'));
    server = selfSignedCert(certDir, 'server');
  });
  afterEach(async () => {
    for (const s of sources.splice(0)) s.close();
    for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
  });
  afterAll(async () => {
    await rm(certDir, { recursive: true, force: true });
  });

  for (const form of FORMS) {
    it(form, async () => {
      const d = mkdtempSync(join(tmpdir(), 'tw-401-webhook-'));
      dirs.push(d);
      const source = new WebhookSource({ cluster: 'prod', host: '127.0.0.1', port: 0, cert: server.cert, key: server.key, token: TOKEN, spoolPath: join(d, 'spool') });
      sources.push(source);
      const port = await source.start();
      const res = await postBatch({ port, ca: server.cert, token: TOKEN, body: eventList(specs(form).map(auditEvent)) });
      expect(res.status).toBe(200);
      const { items } = await drain(source.poll(undefined, { now: T, lookbackMs: 86_400_000, stats: emptyStats() }));
      const uses = usesOfMessages(items);
      expect(uses.map((u) => u.auditID)).toEqual(['s1', 'u0', 'u0', 'u1', 'u1', 'u2', 'u2']); // n1 is filtered out
      expect(unauthorizedRecord(uses)).toEqual([expect.objectContaining({ serviceAccount: 'multus', requests: 3 })]);
    });
  }
});
