/**
 * `serve` with the watch cache (the default): after the cache has synced, a poll reads cluster state from memory, so
 * its only Kubernetes requests are the node-probe report list and the API-server `/metrics` scrape — no pod,
 * ServiceAccount or workload read — and the findings are the same as with direct reads (`kubernetes.watch: false`).
 * Real serve, real client-node and Bolt, against the loopback Kubernetes and Slack fakes (test/slack/harness.ts).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CLUSTER, startHarness, type Harness } from '../slack/harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

/** The findings of the cluster, as the store holds them (identity and what a reader sees). */
async function findings(x: Harness) {
  return (await x.serve.context.store
    .findings.list(CLUSTER, { status: ['open'] }))
    .map((f) => ({ id: f.finding.id, severity: f.severity, workloads: f.finding.workloads, pods: f.finding.pods }))
    .sort((a, b) => a.id.localeCompare(b.id));
}

describe('serve with the watch cache', () => {
  it('a steady-state poll makes no cluster-state request; findings equal those of direct reads', { timeout: 120_000 }, async () => {
    h = await startHarness();
    const cache = h.serve.context.clusters.get(CLUSTER)?.watchCache;
    expect(cache).toBeDefined();
    await cache!.synced();
    const before = h.kube.requests.length;
    await h.poll();
    const during = h.kube.requests.slice(before).filter((r) => r.verb !== 'watch'); // reconnects are not per poll
    // Besides the token metrics and the probe reports: the health model's one `GET /version` (src/cluster/reachability.ts).
    expect(during.map((r) => `${r.verb ?? r.method} ${r.resource ?? r.path}`).sort()).toEqual(['GET /metrics', 'GET /version', 'list configmaps']);
    const cached = await findings(h);
    expect(cached.length).toBeGreaterThan(0);
    expect(cached.some((f) => f.workloads.length > 0)).toBe(true); // state from the cache made it into the findings
    expect(h.kube.openWatches().length).toBe(8);
    const kube = h.kube;
    await h.stop({ keepFakes: true }); // serve's stop closes its watches
    await vi.waitFor(() => expect(kube.openWatches()).toEqual([]), { timeout: 10_000, interval: 10 });
    await h.slack.close();
    await kube.close();
    h = await startHarness({ tweak: (c) => Object.assign(c.clusters[0]!.kubernetes, { watch: false }) });
    expect(h.serve.context.clusters.get(CLUSTER)?.watchCache).toBeUndefined();
    const start = h.kube.requests.length;
    await h.poll();
    expect(h.kube.requests.slice(start).some((r) => r.verb === 'list' && r.resource === 'pods')).toBe(true);
    expect(await findings(h)).toEqual(cached);
  });
});
