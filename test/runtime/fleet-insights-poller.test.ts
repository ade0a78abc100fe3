/**
 * The Done-when of fleet Insights mode through the poller: on the same stored events, clusters polled through one
 * fleet Logs Insights query store the same findings as clusters polled with FilterLogEvents (loopback CloudWatch fake,
 * real SDK, real store).
 */
process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] = 'true';

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeCloudWatch, type FakeCloudWatch } from '../fakes/cloudwatch.js';
import { parseConfig, type ClusterConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { ClusterPoller } from '../../src/pipeline/poll.js';
import { auditCostLine } from '../../src/slack/metrics-status.js';
import { createAuditSource, FleetInsightsRegistry } from '../../src/sources/index.js';
import { openStore, type Store } from '../../src/store/index.js';
import { auditEvent, type EventSpec } from '../sources/events.js';

const T0 = Date.parse('2026-11-20T12:00:00Z');
const MIN = 60_000;
const quiet = createLogger({ level: 'silent' });
const creds = { accessKeyId: 'x', secretAccessKey: 'x' };

let cw: FakeCloudWatch;
let dir: string;
const stores: Store[] = [];
beforeEach(async () => {
  cw = await startFakeCloudWatch({ now: () => T0 + 30 * MIN });
  dir = mkdtempSync(join(tmpdir(), 'tw-fleet-'));
});
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  await cw.close();
});

function clusterConfig(name: string, mode: 'filter' | 'insights'): ClusterConfig {
  return parseConfig({ clusters: [{ name, audit: { cloudwatch: { region: 'us-east-1', logGroup: `/aws/eks/${name}/cluster`, endpoint: cw.url, mode } } }] }, {}).clusters[0]!;
}

describe('fleet Insights mode through the poller', () => {
  it('stores the findings FilterLogEvents mode stores, per cluster, from one query', { timeout: 120_000 }, async () => {
    const names = ['east', 'west', 'north'];
    for (const [n, name] of names.entries()) {
      const specs: EventSpec[] = [];
      for (let p = 0; p <= n; p++) {
        for (let i = 0; i < 3 + p; i++) {
          const time = T0 + i * MIN + p * 1_000;
          specs.push({ auditID: `${name}-${p}-${i}`, time, kind: 'stale', pod: `kube-multus-ds-${name}${p}`, secondsAfterWarning: 7_000_000 + (time - T0) / 1000 + p * 3600, sourceIP: `10.1.${n}.${p}` });
        }
      }
      specs.push(
        { auditID: `${name}-l`, time: T0 + 2 * MIN, kind: 'legacy', namespace: 'ci', serviceAccount: 'jenkins', legacySecret: 'jenkins-token-abcde', userAgent: 'Jenkins/2.4' },
        { auditID: `${name}-u`, time: T0 + 3 * MIN, kind: 'unauthorized', sourceIP: '10.9.9.9', userAgent: 'Fluent-Bit' },
      );
      cw.putEvents(`/aws/eks/${name}/cluster`, 'kube-apiserver-audit-1', specs.map((s) => ({ timestamp: s.time, message: auditEvent(s) })));
    }
    const now = T0 + 30 * MIN;
    const costs: Record<string, unknown[]> = { filter: [], insights: [] };
    const metrics = new Metrics();
    const run = async (mode: 'filter' | 'insights', registry?: FleetInsightsRegistry) => {
      const store = await openStore(join(dir, `${mode}.db`));
      stores.push(store);
      // As serve does: every cluster's source first, then the polls (one after another, as spread polls run).
      const clusters = names.map((name) => {
        const cluster = clusterConfig(name, mode);
        return { cluster, source: createAuditSource(cluster.audit, { credentials: creds, maxAttempts: 1, insights: { pollIntervalMs: 1 }, ...(registry && { fleetInsights: registry }) }) };
      });
      const out = [];
      for (const { cluster, source } of clusters) {
        const poller = new ClusterPoller({ cluster, source, store, logger: quiet, clock: () => now, metrics });
        const r = await poller.pollOnce();
        expect(r.error).toBeUndefined();
        out.push(r.findings);
        costs[mode]!.push(poller.health().lastPollCost);
      }
      for (const { source } of clusters) source.close?.();
      return out;
    };
    const filter = await run('filter');
    const before = cw.requestsOf('StartQuery').length;
    const fleet = await run('insights', new FleetInsightsRegistry({ enabled: true, maxLogGroupsPerQuery: 50, maxConcurrentQueries: 10, reuse: 5 * MIN }));
    expect(cw.requestsOf('StartQuery').length - before).toBe(1);
    // Each cluster: 1 + n stale pods (one finding per ServiceAccount), the legacy token, the 401s.
    expect(filter.map((f) => f.length)).toEqual(fleet.map((f) => f.length));
    expect(filter[2]!.find((f) => f.kind === 'stale-token')).toMatchObject({ requests: 3 + 4 + 5 });
    expect(fleet).toEqual(filter);

    // What each poll cost, as /tokens status and the metric show it: FilterLogEvents reports no bytes searched (only
    // requests and bytes received); every fleet-mode poll reports the one shared query's bytes scanned, as the fake
    // bills them (message bytes + 26 per event of the three groups in its window).
    for (const c of costs['filter']!) expect(c).toEqual({ requests: expect.any(Number), bytes: expect.any(Number) });
    const scanned = (costs['insights'] as Array<{ insights: { bytesScanned: number; logGroups: number } }>).map((c) => c.insights);
    expect(scanned[0]!.bytesScanned).toBeGreaterThan(0);
    expect(scanned).toEqual(names.map(() => ({ bytesScanned: scanned[0]!.bytesScanned, logGroups: 3 })));
    const gauge = await metrics.registry.getSingleMetric('tokenwatch_poll_insights_bytes_scanned')!.get();
    expect(gauge.values.map((v) => [v.labels['cluster'], v.value])).toEqual(names.map((n) => [n, scanned[0]!.bytesScanned]));
    const audit = clusterConfig('east', 'insights').audit;
    expect(auditCostLine(audit, costs['insights']![0] as never)).toMatch(/^CloudWatch cost of the last poll: Logs Insights scanned \d+\.\d (KiB|B) \(one fleet query over 3 log groups, shared by their clusters\); \d+ requests$/);
    expect(auditCostLine(audit, costs['filter']![0] as never)).toMatch(/FilterLogEvents requests, .* received \(FilterLogEvents does not report the bytes it searched\)$/);
  });
});
