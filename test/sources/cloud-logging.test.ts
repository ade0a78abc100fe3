/**
 * The Cloud Logging source (src/sources/cloud-logging.ts) on its own: the real `google-auth-library` against the
 * loopback metadata server and the loopback `entries:list` (src/sandbox/fakes/).
 */
import { chmodSync, existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { gkeAuditEntry, startFakeCloudLogging, type FakeCloudLogging } from '../../src/sandbox/fakes/cloud-logging.js';
import { startFakeGceMetadata, type FakeGceMetadata } from '../../src/sandbox/fakes/gce-metadata.js';
import { MemoryBucketStateStore } from '../../src/core/token-bucket.js';
import { CloudLoggingRegistry, buildGkeFilter, gcpBudgetKey, parseGkeCursor } from '../../src/sources/cloud-logging.js';
import { createPlatformHints } from '../../src/sources/platform-hints.js';
import { emptyStats, SourceError, type AuditSource, type SourceStats } from '../../src/sources/types.js';

const MIN = 60_000;
const NOW = Date.parse('2026-11-20T12:00:00Z');
const PROJECT = 'tokenwatch-fake';
const TOKEN = 'ya29.secret-access-token-0123456789';

let metadata: FakeGceMetadata;
const saved: Record<string, string | undefined> = {};
/** A folder first on PATH whose `gcloud` records each run in `calls` (google-auth-library's project lookup runs it). */
const gcloudDir = mkdtempSync(join(tmpdir(), 'tw-gcloud-'));
const gcloudCalls = join(gcloudDir, 'calls');
beforeAll(async () => {
  metadata = await startFakeGceMetadata({ projectId: PROJECT, accessToken: TOKEN });
  for (const k of ['GCE_METADATA_HOST', 'METADATA_SERVER_DETECTION', 'GOOGLE_APPLICATION_CREDENTIALS', 'PATH']) saved[k] = process.env[k];
  Object.assign(process.env, metadata.env);
  delete process.env['GOOGLE_APPLICATION_CREDENTIALS'];
  writeFileSync(join(gcloudDir, 'gcloud'), `#!/bin/sh\necho "$*" >> '${gcloudCalls}'\nexit 1\n`);
  chmodSync(join(gcloudDir, 'gcloud'), 0o755);
  process.env['PATH'] = `${gcloudDir}${delimiter}${process.env['PATH'] ?? ''}`;
});
afterAll(async () => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  await metadata.close();
});

let fake: FakeCloudLogging | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

async function drain(source: AuditSource, cursor: string | undefined, now: number, stats: SourceStats = { ...emptyStats(), platformHints: createPlatformHints() }) {
  const texts: string[] = [];
  const gen = source.poll(cursor, { now, lookbackMs: 60 * MIN, stats });
  let next = await gen.next();
  while (!next.done) {
    texts.push(next.value);
    next = await gen.next();
  }
  return { texts, cursor: next.value, stats };
}

const settings = (endpoint: string, clusterName = 'gke-a') => ({ project: PROJECT, clusterName, endpoint, overlap: 10 * MIN, lag: MIN, pageSize: 1000 });
const stale = (insertId: string, time: number, cluster = 'gke-a') =>
  gkeAuditEntry({ project: PROJECT, cluster, insertId, time, principal: 'system:serviceaccount:kube-system:multus', labels: { 'authentication.k8s.io/stale-token': 'subject: system:serviceaccount:kube-system:multus, seconds after warning threshold: 7000000' } });

describe('Cloud Logging source', () => {
  it('sends the token ADC got from the metadata server; a true duplicate (same insertId and timestamp) is read once, the same insertId at another timestamp twice', async () => {
    fake = await startFakeCloudLogging({ tokens: [TOKEN] });
    fake.add([stale('dup', NOW - 20 * MIN), stale('dup', NOW - 20 * MIN), stale('dup', NOW - 19 * MIN)]);
    const source = new CloudLoggingRegistry({ readsPerMinute: 60_000 }).source(settings(fake.url));
    const { texts, cursor, stats } = await drain(source, undefined, NOW);
    expect(texts.map((t) => (JSON.parse(t) as { timestamp: string }).timestamp).sort()).toEqual(['2026-11-20T11:40:00.000Z', '2026-11-20T11:41:00.000Z']);
    expect(parseGkeCursor(cursor)).toBe(NOW - MIN);
    expect(stats.requests).toBe(1); // data_access entries seen: no blind probe
    expect([...stats.platformHints!.gkeLogs]).toEqual(['data_access']);
    expect(metadata.tokensIssued()).toBeGreaterThan(0);
    // The source gives the library its project: no `gcloud config config-helper` run to look one up.
    expect(existsSync(gcloudCalls)).toBe(false);
    // The next window starts the overlap before the cursor and ends `lag` before now.
    await drain(source, cursor, NOW + 5 * MIN);
    expect(fake.requests().at(-1)!.filter).toContain(`timestamp>="${new Date(NOW - MIN - 10 * MIN).toISOString()}" AND timestamp<"${new Date(NOW + 4 * MIN).toISOString()}"`);
  });

  it('a refused token (401) and a missing role (403) fail the poll with the fix, without the token; neither is retried', async () => {
    fake = await startFakeCloudLogging({ tokens: ['ya29.another-token'] });
    const source = new CloudLoggingRegistry({ readsPerMinute: 60_000 }).source(settings(fake.url));
    const err = await drain(source, undefined, NOW).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SourceError);
    expect((err as SourceError).retryable).toBe(false);
    expect((err as Error).message).toMatch(/HTTP 401 UNAUTHENTICATED.*Application Default Credentials/);
    expect((err as Error).message).not.toContain(TOKEN);
    expect(fake.requests()).toHaveLength(1);

    const denied = await startFakeCloudLogging({ tokens: [TOKEN], forbiddenProjects: [PROJECT] });
    try {
      const e403 = await drain(new CloudLoggingRegistry({ readsPerMinute: 60_000 }).source(settings(denied.url)), undefined, NOW).catch((e: unknown) => e);
      expect((e403 as SourceError).retryable).toBe(false);
      expect((e403 as Error).message).toMatch(/HTTP 403 PERMISSION_DENIED.*grant the reader roles\/logging\.privateLogViewer on project tokenwatch-fake/);
      expect((e403 as Error).message).not.toContain(TOKEN);
      // Blind until the role is granted (the blind-log monitor's `no-read-access`); a refused token (401) is not.
      expect((e403 as SourceError).blind).toMatch(/may not read the logs of project tokenwatch-fake .*roles\/logging\.privateLogViewer/);
      expect((err as SourceError).blind).toBeUndefined();
      expect(denied.requests()).toHaveLength(1);
    } finally {
      await denied.close();
    }
  });

  it('a same-timestamp pair split by a page boundary gives both entries; requests are pages, empty pages with a token included', async () => {
    fake = await startFakeCloudLogging({ tokens: [TOKEN], emptyPages: 2 });
    const t = NOW - 10 * MIN;
    fake.add([stale('p1', t), stale('p2', t), stale('newer', t + MIN)]);
    const source = new CloudLoggingRegistry({ readsPerMinute: 60_000 }).source({ ...settings(fake.url), pageSize: 2 });
    const { texts, stats } = await drain(source, undefined, NOW);
    expect(texts.map((x) => (JSON.parse(x) as { insertId: string }).insertId)).toEqual(['newer', 'p2', 'p1']);
    expect(fake.requests().map((r) => r.entries)).toEqual([0, 0, 2, 1]);
    expect(stats.requests).toBe(4);
  });

  it('a 429 halves the quota project’s budget and the page is asked again; the read is complete', async () => {
    fake = await startFakeCloudLogging({ tokens: [TOKEN] });
    fake.add([stale('x', NOW - 5 * MIN)]);
    const store = new MemoryBucketStateStore();
    const throttles: Array<[string, number]> = [];
    const registry = new CloudLoggingRegistry({ readsPerMinute: 6_000, store, onThrottle: (p, r) => throttles.push([p, r]), retry: { maxAttempts: 3, baseDelayMs: 5, maxDelayMs: 10 } });
    const source = registry.source({ ...settings(fake.url), quotaProject: 'billing-project' });
    fake.throttle(1);
    const { texts, stats } = await drain(source, undefined, NOW);
    expect(texts).toHaveLength(1);
    expect(stats.throttled).toBe(1);
    expect(fake.requests().map((r) => r.status)).toEqual([429, 200]);
    expect(throttles).toEqual([['billing-project', 50]]);
    expect(store.get(gcpBudgetKey('billing-project'))!.rate).toBeLessThan(100);
  });

  it('blind probes run at most once per interval while no Data Access entry is seen, and their finding is reported with every poll', async () => {
    fake = await startFakeCloudLogging({ tokens: [TOKEN] });
    fake.add([gkeAuditEntry({ project: PROJECT, cluster: 'gke-a', insertId: 'w1', time: NOW - 20 * MIN, log: 'activity', principal: 'system:kube-scheduler' })]);
    const source = new CloudLoggingRegistry({ readsPerMinute: 60_000 }).source(settings(fake.url));
    const first = await drain(source, undefined, NOW);
    expect([...first.stats.platformHints!.gkeLogs]).toEqual(['activity']);
    expect(first.stats.requests).toBe(3); // the query, the Data Access probe, the Admin Activity probe
    const second = await drain(source, first.cursor, NOW + 5 * MIN);
    expect(second.stats.requests).toBe(1);
    expect([...second.stats.platformHints!.gkeLogs]).toEqual(['activity']); // the last probe's finding, reported again
    const later = await drain(source, second.cursor, NOW + 61 * MIN);
    expect(later.stats.requests).toBe(3);
  });

  it('builds one filter for all clusters of the project', () => {
    expect(buildGkeFilter('p-123456', ['a', 'b'], 0, 60_000)).toBe(
      'logName=("projects/p-123456/logs/cloudaudit.googleapis.com%2Factivity" OR "projects/p-123456/logs/cloudaudit.googleapis.com%2Fdata_access") AND resource.type="k8s_cluster" AND resource.labels.cluster_name=("a" OR "b") AND (labels."authentication.k8s.io/stale-token":* OR labels."authentication.k8s.io/legacy-token":* OR labels."authentication.k8s.io/legacy-token-invalidated":* OR protoPayload.status.code=16) AND timestamp>="1970-01-01T00:00:00.000Z" AND timestamp<"1970-01-01T00:01:00.000Z"',
    );
  });
});
