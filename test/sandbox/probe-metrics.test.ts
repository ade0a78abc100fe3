/** The sandbox shows API-server token metrics and node-probe objects (docs/design/architecture.md "Signals besides the audit log"). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { KubeMetricsScraper } from '../../src/sources/apiserver-metrics.js';
import { tokenMetricsFromText } from '../../src/findings/token-metrics.js';
import { KubeProbeReports } from '../../src/probe/objects.js';
import { startSandbox } from '../../src/sandbox/sandbox.js';

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
      const multus = sb.serve.context.store.listFindings(undefined, { status: ['open'] }).find((f) => f.finding.serviceAccount === 'multus' && f.finding.kind === 'stale-token');
      expect(multus?.finding.cause.id).toBe('static-token-file');
      expect(multus?.finding.cause.evidence.some((e) => e.startsWith('node probe: /etc/cni/net.d/multus.d/multus.kubeconfig on node '))).toBe(true);
    } finally {
      await sb.stop();
    }
  });
});
