/**
 * The Log Analytics query budget is one per identity across replicas: two replicas (each its own connection to one
 * store) reading AKS clusters with one workload identity take their query tokens from the store's `rate_buckets`
 * (src/core/token-bucket.ts, as the CloudWatch and Cloud Logging budgets), so together they stay within
 * `poll.logAnalytics.queriesPerSecond` (5: the service's 200 queries per 30 s per identity), asserted at the loopback
 * Logs Query API fake: the 16 queries of both replicas cannot all arrive before 15 / 5 = 3 s, the time one bucket of
 * rate 5 and burst 1 needs to grant them (a busy machine only makes it later; budgets of their own would let them
 * through in 7 / 5 = 1.4 s). The real wiring (src/runtime/log-analytics.ts), the real `@azure/monitor-query-logs`
 * client and the real token exchange against the loopback Entra endpoint.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { logAnalyticsSources } from '../../src/runtime/log-analytics.js';
import { startFakeEntraToken, type FakeEntraToken } from '../../src/sandbox/fakes/entra-token.js';
import { startFakeLogAnalytics, type FakeLogAnalytics } from '../../src/sandbox/fakes/log-analytics.js';
import { loopbackCert } from '../../src/sandbox/fakes/tls.js';
import { emptyStats } from '../../src/sources/types.js';
import { SqlBucketStateStore } from '../../src/store/rate-buckets.js';
import { storeBackends } from '../store/backends.js';

const NOW = Date.parse('2026-11-20T12:00:00Z');
const TENANT = '72f988bf-86f1-41af-91ab-2d7cd011db47';
const CLIENT = '5f1c2d3e-4b5a-6978-8a9b-0c1d2e3f4a5b';
const SA_TOKEN = 'federated.sa.token';
/** Clusters per replica, each in a workspace of its own: one query each. */
const CLUSTERS = 8;

describe.each(storeBackends())('Log Analytics query budget shared by two replicas (%s)', (_name, backend) => {
  let logs: FakeLogAnalytics | undefined;
  let entra: FakeEntraToken | undefined;
  afterEach(async () => {
    await logs?.close();
    await entra?.close();
    logs = entra = undefined;
    await backend.cleanup();
  });
  afterAll(backend.dispose);

  /** Each replica polls its 8 clusters at once (8 workspaces: 8 queries); ms from the start of the polls to the last query's arrival. */
  async function pollBoth(buckets: [SqlBucketStateStore, SqlBucketStateStore]): Promise<number> {
    const dir = mkdtempSync(join(tmpdir(), 'tw-la-budget-'));
    const tls = loopbackCert();
    const caFile = join(dir, 'ca.pem');
    writeFileSync(caFile, tls.cert);
    writeFileSync(join(dir, 'token'), SA_TOKEN);
    entra = await startFakeEntraToken({ cert: tls.cert, key: tls.key, tenantId: TENANT, clientId: CLIENT, assertion: SA_TOKEN });
    logs = await startFakeLogAnalytics({ cert: tls.cert, key: tls.key, acceptToken: (t) => entra!.issued(t) });
    const env = { AZURE_CLIENT_ID: CLIENT, AZURE_TENANT_ID: TENANT, AZURE_FEDERATED_TOKEN_FILE: join(dir, 'token'), AZURE_AUTHORITY_HOST: entra.authorityHost };
    const startedAt = Date.now();
    const polls = buckets.map(async (store, r) => {
      const workspace = (i: number) => `0b4a3c2d-1e5f-4a6b-8c7d-${String(r * 100 + i).padStart(12, '0')}`;
      const clusters = Array.from({ length: CLUSTERS }, (_, i) => ({
        name: `r${r}-c${i}`,
        audit: { azure: { workspaceId: workspace(i), resourceId: `/subscriptions/s/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/r${r}-c${i}`, endpoint: logs!.endpoint, caFile } },
      }));
      const config = parseConfig({ clusters }, {});
      const la = logAnalyticsSources({ config, metrics: new Metrics(), logger: createLogger({ level: 'silent' }), env, buckets: store });
      try {
        const sources = await Promise.all(config.clusters.map((c) => la.sources(('azure' in c.audit ? c.audit.azure : undefined)!)));
        await Promise.all(
          sources.map(async (s) => {
            const gen = s.poll(undefined, { now: NOW, lookbackMs: 60 * 60_000, stats: emptyStats() });
            while (!(await gen.next()).done);
          }),
        );
      } finally {
        la.close();
      }
    });
    await Promise.all(polls);
    const answered = logs.queries.filter((q) => q.status === 200);
    expect(answered).toHaveLength(2 * CLUSTERS);
    return Math.max(...answered.map((q) => q.receivedAt)) - startedAt;
  }

  it('replicas sharing the store’s rate_buckets stay within the identity’s rate together', { timeout: 60_000 }, async () => {
    const stores = [await backend.openShared(), await backend.peer()];
    const elapsed = await pollBoth([new SqlBucketStateStore(stores[0]!.sql), new SqlBucketStateStore(stores[1]!.sql)]);
    // 16 queries, one bucket of 5 per second and burst 1: the last is granted 3 s after the first at the earliest.
    expect(elapsed).toBeGreaterThanOrEqual(2_900);
    // One bucket, keyed by the identity, in the store both replicas use.
    expect(await stores[1]!.sql.all<{ key: string }>('SELECT key FROM rate_buckets ORDER BY key', [])).toEqual([{ key: `loganalytics/${CLIENT}` }]);
  });
});
