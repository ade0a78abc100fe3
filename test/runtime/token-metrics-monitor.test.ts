/**
 * API-server token metrics in live mode against the loopback Kubernetes fake: the real `serve` (poller, store,
 * Slack notifier, `/tokens status`), the fake serving realistic Prometheus text at `/metrics`.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { apiServerMetricsText, type FakeTokenCounters } from '../../src/sandbox/fakes/kubernetes/metrics.js';
import { startFakeKube, type FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import { findingId } from '../../src/findings/build.js';
import { createLogger } from '../../src/observability/logger.js';
import { KubeMetricsScraper, MetricsScrapeError } from '../../src/sources/apiserver-metrics.js';
import { TokenMetricsMonitor } from '../../src/runtime/token-metrics-monitor.js';
import { openStore } from '../../src/store/index.js';
import { blockText, CLUSTER, OPS, REQUESTER, staleLine, startHarness, type Harness } from '../slack/harness.js';

const MIN = 60_000;
const START_A = Date.parse('2026-11-20T06:00:00.250Z');
const START_B = Date.parse('2026-11-20T09:30:00.125Z');

let h: Harness | undefined;
let kube: FakeKube | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
  kube = undefined;
});

/** A fake API server whose /metrics shows `current` (mutable) for the process started at `start.value`. */
async function metricsKube(): Promise<{ kube: FakeKube; set(start: number, c: FakeTokenCounters): void }> {
  let text = apiServerMetricsText({ processStart: START_A, counters: { stale: 100, valid: 5000 } });
  const k = await startFakeKube({ metrics: () => text });
  return { kube: k, set: (start, c) => void (text = apiServerMetricsText({ processStart: start, counters: c })) };
}

describe('metrics-only cluster (audit log off)', () => {
  it('raises one cluster-level finding when stale use increased on the same API-server process, and /tokens status says so', async () => {
    const m = await metricsKube();
    kube = m.kube;
    h = await startHarness({
      kube,
      tweak: (c) => {
        c.clusters[0]!.audit = { none: true };
      },
    });
    // First poll (in startHarness): first scrape of process A, no rate → no finding.
    const id = findingId(CLUSTER, '*', '*', 'stale-token');
    expect(await h.serve.context.store.findings.get(id)).toBeUndefined();
    expect(kube.requestsMatching({ path: '/metrics' })).toHaveLength(1);

    // Another replica answers (process B): no rate across processes, still no finding.
    m.set(START_B, { stale: 3, valid: 10 });
    h.advance(5 * MIN);
    await h.poll();
    expect(await h.serve.context.store.findings.get(id)).toBeUndefined();

    // Process A again, 10 min after its first scrape, stale up by 7.
    m.set(START_A, { stale: 107, valid: 5600 });
    h.advance(5 * MIN);
    await h.poll();
    const stored = (await h.serve.context.store.findings.get(id))!;
    expect(stored.finding).toMatchObject({ namespace: '*', serviceAccount: '*', kind: 'stale-token', severity: 'warning', requests: 7 });
    expect(stored.finding.cause.summary).toContain('per API-server replica reached (2 replicas seen');
    const alert = await h.alert('*', '*');
    expect(blockText(alert)).toContain('API-server metrics show stale tokens in use in *prod-eks*; no audit event names the clients');
    expect(blockText(alert)).toContain('*Signals:* stale tokens · API-server metrics');
    expect(blockText(alert)).not.toContain('Recreate ServiceAccount');
    expect(blockText(alert)).not.toContain('tw_restart');
    // The exact figures are in Details (the cause's summary).
    await h.click(REQUESTER, alert, 'tw_details');
    expect(h.slack.thread(OPS, alert.ts).map((m) => blockText(m)).join('')).toContain('7 uses of stale bound tokens in 10 min (≈42/h)');

    await h.command(`status ${CLUSTER}`, REQUESTER, OPS);
    const status = blockText(h.slack.ephemerals({ user: REQUESTER }).at(-1)!);
    expect(status).toContain('stale tokens in use: 42/h · audit log: off — which clients? enable audit logging or run the node probe');
    expect(status).toContain('per API-server replica reached: 2 replicas seen');

    // A drop on process A is a reset: no new increase, the finding keeps its figure.
    m.set(START_A, { stale: 2, valid: 1 });
    h.advance(5 * MIN);
    await h.poll();
    expect((await h.serve.context.store.findings.get(id))!.finding.requests).toBe(7);
  });

  it('with the audit log on, an increase the audit findings explain raises nothing extra', async () => {
    const m = await metricsKube();
    kube = m.kube;
    h = await startHarness({ kube });
    m.set(START_A, { stale: 150, valid: 5000 });
    h.advance(5 * MIN);
    h.appendAudit([staleLine('metrics-explained-1', h.now() - MIN, 'kube-multus-ds-zwh6w', 7_000_000)]);
    await h.poll();
    // The example audit log has Multus stale-token findings seen within the window → explained.
    expect(await h.serve.context.store.findings.get(findingId(CLUSTER, '*', '*', 'stale-token'))).toBeUndefined();
  });
});

describe('KubeMetricsScraper', () => {
  it('reads /metrics with the kubeconfig credentials, and names the missing permission on 403', async () => {
    kube = await startFakeKube({ metrics: 'serviceaccount_stale_tokens_total 1\n', rbac: [{ apiGroups: [], resources: [], verbs: ['get'], nonResourceURLs: ['/metrics'] }] });
    const text = await new KubeMetricsScraper(kube.kubeConfig({ token: 'scrape-token' })).scrape();
    expect(text).toBe('serviceaccount_stale_tokens_total 1\n');
    expect(kube.requestsMatching({ path: '/metrics' })[0]!.headers.authorization).toBe('Bearer scrape-token');
    await kube.close();

    kube = await startFakeKube({ metrics: 'x 1\n', rbac: [] });
    const err = await new KubeMetricsScraper(kube.kubeConfig()).scrape().catch((e: unknown) => e);
    expect(err).toEqual(new MetricsScrapeError('GET /metrics forbidden: grant nonResourceURLs ["/metrics"] verb get (tokenwatch-reader ClusterRole)', 403));
    await kube.close();
    kube = undefined;
  });

  it('a failed scrape leaves the poll healthy and is reported by the monitor', async () => {
    kube = await startFakeKube({});
    const store = await openStore(':memory:');
    const mon = new TokenMetricsMonitor({ cluster: 'c', scraper: new KubeMetricsScraper(kube.kubeConfig()), store, logger: createLogger({ level: 'silent' }) });
    const r = await mon.poll([], Date.parse('2026-11-20T12:00:00Z'));
    expect(r).toEqual({ findings: [], error: 'GET /metrics answered HTTP 404' });
    expect(mon.lastError).toBe('GET /metrics answered HTTP 404');
    await store.close();
    await kube.close();
    kube = undefined;
  });
});
