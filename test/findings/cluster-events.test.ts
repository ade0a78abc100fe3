/**
 * A signing-key rotation (clastix/kamaji#1325): every ServiceAccount's tokens refused in the same minute, pods
 * recovering on their own. Reported once per cluster; recovered ServiceAccounts get no "caches its token" cause; one
 * that keeps failing after the others recovered keeps its own analysis.
 */
import { describe, expect, it } from 'vitest';
import { SnapshotClusterState } from '../../src/cluster/snapshot.js';
import { TokenAggregator } from '../../src/findings/aggregate.js';
import { buildFindings } from '../../src/findings/build.js';
import { applyCredentialEvents, detectCredentialEvents } from '../../src/findings/cluster-events.js';
import { t, unauthorizedUse } from './helpers.js';

const ONSET = t('2025-03-04T09:30:00Z');
const MIN = 60_000;

const clients = [
  { ns: 'kube-system', name: 'coredns-5d78c-aaaaa', sa: 'coredns', ip: '10.3.0.11', ua: 'coredns/v1.11.1' },
  { ns: 'kube-system', name: 'konnectivity-agent-bbbbb', sa: 'konnectivity-agent', ip: '10.3.0.12', ua: 'proxy-agent/v0.0.0' },
  { ns: 'kube-system', name: 'metrics-server-ccccc', sa: 'metrics-server', ip: '10.3.0.13', ua: 'metrics-server/v0.7.0' },
  { ns: 'cert-manager', name: 'cert-manager-ddddd', sa: 'cert-manager', ip: '10.3.0.14', ua: 'cert-manager/v1.14.0' },
  { ns: 'monitoring', name: 'prometheus-0', sa: 'prometheus', ip: '10.3.0.15', ua: 'Prometheus/2.50.0' },
  { ns: 'apps', name: 'reporter-eeeee', sa: 'reporter', ip: '10.3.0.16', ua: 'Java/17' },
];

async function scenario() {
  const items = clients.map((c) => ({
    kind: 'Pod',
    apiVersion: 'v1',
    metadata: { namespace: c.ns, name: c.name, uid: `${c.name}-uid` },
    spec: { serviceAccountName: c.sa, containers: [{ name: 'app', image: 'acme/app:1.0' }] },
    status: { phase: 'Running', startTime: '2025-03-01T00:00:00Z', podIP: c.ip, hostIP: '10.0.0.1' },
  }));
  const agg = new TokenAggregator({ cluster: 'tenant-a', maxTokenAge: { mode: 'upstream' } });
  clients.forEach((c, i) => {
    // Each client's first 401 within the onset minute; all but `reporter` stop after 3 minutes.
    const start = ONSET + i * 5_000;
    const end = c.sa === 'reporter' ? ONSET + 120 * MIN : start + 3 * MIN;
    for (let x = start; x <= end; x += MIN) agg.add(unauthorizedUse({ time: x, ip: c.ip, ua: c.ua, auditID: `${c.sa}-${x}` }));
  });
  const findings = await buildFindings(agg.records(), { now: ONSET + 121 * MIN, state: SnapshotClusterState.fromList({ kind: 'List', apiVersion: 'v1', items }) });
  return findings;
}

describe('cluster-level credential event', () => {
  it('is reported once, naming the recovered ServiceAccounts and the one still failing', async () => {
    const events = detectCredentialEvents(await scenario());
    expect(events).toHaveLength(1);
    const e = events[0]!;
    expect(e).toMatchObject({ kind: 'credential-change', cluster: 'tenant-a', at: '2025-03-04T09:30:00.000Z', serviceAccounts: 6 });
    expect(e.recovered).toEqual([
      'cert-manager/cert-manager',
      'kube-system/konnectivity-agent',
      'kube-system/coredns',
      'kube-system/metrics-server',
      'monitoring/prometheus',
    ].sort());
    expect(e.stillFailing).toEqual(['apps/reporter']);
    expect(e.summary).toContain('signing key rotates or its issuer changes');
  });

  it('recovered ServiceAccounts get no "caches its token" cause and are not critical; the one still failing keeps its analysis', async () => {
    const findings = await scenario();
    const applied = applyCredentialEvents(findings, detectCredentialEvents(findings));
    const coredns = applied.find((f) => f.serviceAccount === 'coredns')!;
    expect(coredns.cause.id).toBe('unknown');
    expect(coredns.cause.summary).toContain('cluster-level event');
    expect(coredns.severity).toBe('warning');
    const reporter = applied.find((f) => f.serviceAccount === 'reporter')!;
    expect(reporter).toEqual(findings.find((f) => f.serviceAccount === 'reporter'));
    // Its 401s are tied to it by its pod's address alone: not critical without corroboration (src/findings/build.ts).
    expect(reporter.attribution?.basis).toBe('address-only');
    expect(reporter.severity).toBe('warning');
  });

  it('four ServiceAccounts, or five in one namespace, are not a cluster event', async () => {
    const findings = await scenario();
    expect(detectCredentialEvents(findings.filter((f) => !['prometheus', 'reporter'].includes(f.serviceAccount)))).toEqual([]);
    expect(detectCredentialEvents(findings.map((f) => ({ ...f, namespace: 'kube-system' })).filter((f) => f.serviceAccount !== 'reporter'))).toEqual([]);
  });
});
