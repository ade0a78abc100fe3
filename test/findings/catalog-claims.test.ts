/**
 * The catalogue's version and image rules are checked against the images they claim: a Multus v4 image is never
 * "thin plugin (v3 and older)", nor is a Multus client whose version nothing shows; the metrics-server k3s bundles
 * (rancher/mirrored-metrics-server, from k3s's own manifests) is not "the old Helm chart".
 */
import { describe, expect, it } from 'vitest';
import { SnapshotClusterState } from '../../src/cluster/snapshot.js';
import { TokenAggregator } from '../../src/findings/aggregate.js';
import { buildFindings } from '../../src/findings/build.js';
import { DAY, staleUse, t } from './helpers.js';

const W = t('2026-08-01T00:00:00Z');

async function causeOf(o: { image?: string; sa: string; ua: string; command?: string[] }) {
  const agg = new TokenAggregator({ cluster: 'c', maxTokenAge: { mode: 'eks' } });
  agg.add(staleUse({ time: W + 80 * DAY, secondsAfterWarning: 80 * 86_400, pod: 'p1', sa: o.sa, ns: 'kube-system', ua: o.ua }));
  const items = o.image
    ? [{ kind: 'Pod', apiVersion: 'v1', metadata: { namespace: 'kube-system', name: 'p1', uid: 'u1' }, spec: { serviceAccountName: o.sa, containers: [{ name: 'x', image: o.image, command: o.command ?? [] }] }, status: { phase: 'Running', startTime: '2026-07-01T00:00:00Z', podIP: '192.168.1.10' } }]
    : [];
  const [f] = await buildFindings(agg.records(), { now: W + 81 * DAY, ...(o.image ? { state: SnapshotClusterState.fromList({ kind: 'List', apiVersion: 'v1', items }) } : {}) });
  return f!.cause;
}

describe('catalogue claims match the images', () => {
  it('RKE2 Multus v4.1.4 (rancher/hardened-multus-cni) is the v4 thin plugin, not "v3 and older"', async () => {
    const c = await causeOf({ image: 'rancher/hardened-multus-cni:v4.1.4-build20250108', sa: 'multus', ua: 'multus/v0.0.0 (linux/amd64) kubernetes/$Format', command: ['/thin_entrypoint'] });
    expect(c.component).toBe('multus-thin');
    expect(c.evidence.join('\n')).toContain('thin plugin v4');
    expect(c.evidence.join('\n')).not.toContain('v3 and older');
  });

  it('a Multus client known only by its user agent is not given a version', async () => {
    const c = await causeOf({ sa: 'multus', ua: 'multus/v0.0.0 (linux/amd64) kubernetes/$Format' });
    expect(c.component).toBe('multus-thin');
    expect(c.evidence.join('\n')).toContain('identifies Multus CNI thin plugin; version unknown');
    expect(c.evidence.join('\n')).not.toContain('v3 and older');
  });

  it('the metrics-server k3s bundles is not the old Helm chart; the upstream image still is', async () => {
    const k3s = await causeOf({ image: 'rancher/mirrored-metrics-server:v0.7.2', sa: 'metrics-server', ua: 'metrics-server/v0.7.2 (linux/amd64) kubernetes/$Format' });
    expect(k3s.component).not.toBe('metrics-server');
    expect(k3s.evidence.join('\n')).toContain('k3s bundles');
    const upstream = await causeOf({ image: 'registry.k8s.io/metrics-server/metrics-server:v0.5.2', sa: 'metrics-server', ua: 'metrics-server/v0.5.2 (linux/amd64) kubernetes/$Format' });
    expect(upstream.component).toBe('metrics-server');
  });
});
