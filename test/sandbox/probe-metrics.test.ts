/** The sandbox shows API-server token metrics and node-probe objects (docs/design/architecture.md "Signals besides the audit log"). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { KubeMetricsScraper } from '../../src/sources/apiserver-metrics.js';
import { tokenMetricsFromText } from '../../src/findings/token-metrics.js';
import { KubeProbeReports } from '../../src/probe/objects.js';
import { startSandbox } from '../../src/sandbox/sandbox.js';
import { refreshProbeObjects, SANDBOX_PROBE_INTERVAL_MS } from '../../src/sandbox/probe-metrics.js';
import { DEFAULT_RESOURCES } from '../../src/sandbox/fakes/kubernetes/types.js';
import { ObjectStore } from '../../src/sandbox/fakes/kubernetes/object-store.js';
import { PROBE_NAMESPACE } from '../../src/probe/objects.js';

const dataDir = mkdtempSync(join(tmpdir(), 'tokenwatch-sandbox-probe-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe('sandbox: API-server metrics and node probe', () => {
  it('serves realistic /metrics and a probe ConfigMap per Multus node; the Multus finding names the file as observed', async () => {
    const sb = await startSandbox({ port: 0, speed: 600, pollEverySeconds: 1, dataDir, stepMs: 100, rolloutPollMs: 100, channelIntervalMs: 20, tickMs: 200, reset: true, slack: false });
    try {
      const kc = sb.kube.kubeConfig();
      const sample = tokenMetricsFromText(await new KubeMetricsScraper(kc).scrape(), Date.now());
      expect(sample.processStartAt).not.toBeNull();
      expect(sample.counters.stale).toBeGreaterThanOrEqual(0);
      const reports = await new KubeProbeReports(kc).read();
      expect(reports.length).toBeGreaterThan(0);
      const entry = reports[0]!.entries[0]!;
      expect(entry).toMatchObject({ path: '/etc/cni/net.d/multus.d/multus.kubeconfig', status: 'token', namespace: 'kube-system', serviceAccount: 'multus' });
      await sb.serve.firstPolls;
      const multus = (await sb.serve.context.store.findings.list(undefined, { status: ['open'] })).find((f) => f.finding.serviceAccount === 'multus' && f.finding.kind === 'stale-token');
      expect(multus?.finding.cause.id).toBe('static-token-file');
      expect(multus?.finding.cause.evidence.some((e) => e.startsWith('node probe: /etc/cni/net.d/multus.d/multus.kubeconfig on node '))).toBe(true);
    } finally {
      await sb.stop();
    }
  });
});

describe('sandbox: the fake probe reports on the real probe\'s interval', () => {
  it('rewrites a node\'s report every 5 sandbox minutes even when nothing changed (a restart\'s check needs reports made after it)', () => {
    const store = new ObjectStore([...DEFAULT_RESOURCES]);
    const T0 = Date.parse('2026-11-20T12:00:00Z');
    for (const [name, node] of [['kube-multus-ds-a', 'ip-10-0-1-5.ec2.internal'], ['kube-multus-ds-b', 'ip-10-0-1-6.ec2.internal']] as const) {
      store.put({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { namespace: 'kube-system', name, uid: `uid-${name}` },
        spec: { serviceAccountName: 'multus', nodeName: node, containers: [{ name: 'kube-multus', image: 'multus:v4.0.2' }] },
        status: { startTime: new Date(T0 - 80 * 86_400_000).toISOString() },
      });
    }
    const subjects = new Set(['kube-system/multus']);
    const probedAt = () =>
      store
        .list('ConfigMap')
        .filter((o) => (o as { metadata: { namespace: string } }).metadata.namespace === PROBE_NAMESPACE)
        .map((o) => (JSON.parse((o as { data: Record<string, string> }).data['report.json']!) as { node: string; probedAt: string }))
        .map((r) => `${r.node} ${r.probedAt}`)
        .sort();
    expect(refreshProbeObjects(store, [], subjects, T0)).toBe(2);
    // Within the interval nothing changed, nothing is written; past it, each node reports again at the new time.
    expect(refreshProbeObjects(store, [], subjects, T0 + SANDBOX_PROBE_INTERVAL_MS - 1)).toBe(0);
    expect(probedAt()).toEqual(['ip-10-0-1-5.ec2.internal 2026-11-20T12:00:00.000Z', 'ip-10-0-1-6.ec2.internal 2026-11-20T12:00:00.000Z']);
    expect(refreshProbeObjects(store, [], subjects, T0 + SANDBOX_PROBE_INTERVAL_MS)).toBe(2);
    expect(probedAt()).toEqual(['ip-10-0-1-5.ec2.internal 2026-11-20T12:05:00.000Z', 'ip-10-0-1-6.ec2.internal 2026-11-20T12:05:00.000Z']);
  });
});
