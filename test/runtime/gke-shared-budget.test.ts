/**
 * The Cloud Logging read budget is one per quota project across replicas: two replicas (each its own connection to one
 * store) reading clusters of one project take their tokens from the store's `rate_buckets` (src/core/token-bucket.ts,
 * the mechanism of the shared CloudWatch budget), so together they stay within `readsPerMinute`, asserted at the
 * loopback `entries:list` (its request times); the same replicas with budgets of their own overrun it. Credentials:
 * the real `google-auth-library` against the loopback metadata server.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { gkeAuditEntry, startFakeCloudLogging, type FakeCloudLogging } from '../../src/sandbox/fakes/cloud-logging.js';
import { startFakeGceMetadata, type FakeGceMetadata } from '../../src/sandbox/fakes/gce-metadata.js';
import { CloudLoggingRegistry } from '../../src/sources/cloud-logging.js';
import { emptyStats } from '../../src/sources/types.js';
import { SqlBucketStateStore } from '../../src/store/rate-buckets.js';
import { drain } from '../sources/events.js';
import { storeBackends } from '../store/backends.js';

const NOW = Date.parse('2026-11-20T12:00:00Z');
const MIN = 60_000;
const PROJECT = 'tokenwatch-fake';
/** 5 read requests per second for the project. */
const READS_PER_MINUTE = 300;

function peakIn(at: readonly number[], windowMs: number): number {
  const sorted = [...at].sort((a, b) => a - b);
  let peak = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[i]! - sorted[j]! >= windowMs) j++;
    peak = Math.max(peak, i - j + 1);
  }
  return peak;
}

let metadata: FakeGceMetadata;
const saved: Record<string, string | undefined> = {};
beforeAll(async () => {
  metadata = await startFakeGceMetadata({ projectId: PROJECT });
  for (const k of ['GCE_METADATA_HOST', 'METADATA_SERVER_DETECTION', 'GOOGLE_APPLICATION_CREDENTIALS']) saved[k] = process.env[k];
  Object.assign(process.env, metadata.env);
  delete process.env['GOOGLE_APPLICATION_CREDENTIALS'];
});
afterAll(async () => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  await metadata.close();
});

describe.each(storeBackends())('Cloud Logging budget shared by two replicas (%s)', (_name, backend) => {
  let fake: FakeCloudLogging | undefined;
  afterEach(async () => {
    await fake?.close();
    fake = undefined;
    await backend.cleanup();
  });
  afterAll(backend.dispose);

  /** Replica i reads GKE cluster c<i> of the project: 8 entries, one a page (8 requests each, all at once). */
  async function pollBoth(registries: [CloudLoggingRegistry, CloudLoggingRegistry]): Promise<number[]> {
    fake = await startFakeCloudLogging();
    const polls = registries.map((registry, i) => {
      fake!.add(Array.from({ length: 8 }, (_, j) => gkeAuditEntry({ project: PROJECT, cluster: `c${i}`, insertId: `c${i}-${j}`, time: NOW - 10 * MIN + j, labels: { 'authentication.k8s.io/stale-token': 'subject: system:serviceaccount:a:b, seconds after warning threshold: 10' } })));
      const source = registry.source({ project: PROJECT, clusterName: `c${i}`, endpoint: fake!.url, overlap: 10 * MIN, lag: MIN, pageSize: 1 });
      return drain(source.poll(undefined, { now: NOW, lookbackMs: 60 * MIN, stats: emptyStats() })).then((r) => r.items.length);
    });
    expect(await Promise.all(polls)).toEqual([8, 8]);
    return fake!.requests().map((r) => r.receivedAt);
  }

  it('replicas with budgets of their own overrun the project’s rate', { timeout: 60_000 }, async () => {
    const at = await pollBoth([new CloudLoggingRegistry({ readsPerMinute: READS_PER_MINUTE }), new CloudLoggingRegistry({ readsPerMinute: READS_PER_MINUTE })]);
    expect(peakIn(at, 1000)).toBeGreaterThan(7);
  });

  it('replicas sharing the store’s rate_buckets stay within it together', { timeout: 60_000 }, async () => {
    const stores = [await backend.openShared(), await backend.peer()];
    const shared = (i: number) => new CloudLoggingRegistry({ readsPerMinute: READS_PER_MINUTE, store: new SqlBucketStateStore(stores[i]!.sql), clock: Date.now });
    const at = await pollBoth([shared(0), shared(1)]);
    expect(at).toHaveLength(16);
    expect(peakIn(at, 1000)).toBeLessThanOrEqual(6);
  });
});
