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
    expect(e.members).toEqual([...e.recovered]);
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

  it('four ServiceAccounts are not a cluster event; five in one namespace are', async () => {
    const findings = await scenario();
    expect(detectCredentialEvents(findings.filter((f) => !['prometheus', 'reporter'].includes(f.serviceAccount)))).toEqual([]);
    expect(detectCredentialEvents(findings.map((f) => ({ ...f, namespace: 'kube-system' })).filter((f) => f.serviceAccount !== 'reporter'))).toHaveLength(1);
  });

  it('adds one critical cluster-credential finding (namespace and ServiceAccount *, no workloads: no Restart button)', async () => {
    const findings = await scenario();
    const applied = applyCredentialEvents(findings, detectCredentialEvents(findings));
    const cluster = applied.filter((f) => f.kind === 'cluster-credential');
    expect(cluster).toHaveLength(1);
    expect(cluster[0]).toMatchObject({ namespace: '*', serviceAccount: '*', severity: 'critical', workloads: [], tokens: [], cause: { id: 'cluster-credential-change' } });
    expect(cluster[0]!.cause.summary).toBe('API server refused valid-looking tokens from 6 ServiceAccounts: signing key changed / servers disagree / clock skew');
    expect(applied.filter((f) => f.kind === 'unauthorized' && f.cause.id === 'client-caches-token').map((f) => f.serviceAccount)).toEqual(['reporter']);
  });

  /** `n` ServiceAccounts in `namespaces` whose first 401s start `stepMs` apart and never stop; `stale` adds stale uses the day before. */
  async function staggered(n: number, stepMs: number, o: { stale?: boolean; namespaces?: number } = {}) {
    const agg = new TokenAggregator({ cluster: 'k3s-ha', maxTokenAge: { mode: 'eks' } });
    const items: unknown[] = [];
    for (let i = 0; i < n; i++) {
      const ns = `ns${i % (o.namespaces ?? 1)}`;
      const sa = `client-${i}`;
      const ip = `10.4.0.${10 + i}`;
      const ua = `client-${i}/v1.0.0`;
      items.push({ kind: 'Pod', apiVersion: 'v1', metadata: { namespace: ns, name: `${sa}-pod`, uid: `${sa}-uid` }, spec: { serviceAccountName: sa, containers: [{ name: 'app', image: 'acme/app:1.0' }] }, status: { phase: 'Running', startTime: '2025-01-01T00:00:00Z', podIP: ip, hostIP: '10.0.0.1' } });
      if (o.stale) {
        // Day 89 after warnAfter: stale uses until shortly before the 401s (all pods restarted together 90 days ago).
        for (let x = ONSET - 6 * 3_600_000; x < ONSET; x += 3_600_000) {
          agg.add({ kind: 'stale', auditID: `${sa}-s-${x}`, time: x, sourceIPs: [ip], userAgent: ua, subject: `system:serviceaccount:${ns}:${sa}`, namespace: ns, serviceAccount: sa, pod: `${sa}-pod`, secondsAfterWarning: Math.floor((x - (ONSET - 90 * 86_400_000)) / 1000), warnAfter: ONSET - 90 * 86_400_000 });
        }
      }
      const start = ONSET + i * stepMs;
      for (let x = start; x <= ONSET + 60 * MIN; x += 2 * MIN) agg.add(unauthorizedUse({ time: x, ip, ua, auditID: `${sa}-${x}` }));
    }
    return buildFindings(agg.records(), { now: ONSET + 61 * MIN, state: SnapshotClusterState.fromList({ kind: 'List', apiVersion: 'v1', items }) });
  }

  for (const [name, ns] of [['a signing-key rotation', 3], ['API servers disagreeing on the key', 1], ['a skewed control-plane clock', 2]] as const) {
    it(`${name}: 6 ServiceAccounts, first 401s staggered over 4 minutes, no end: one cluster-level alert, no client causes`, async () => {
      const findings = await staggered(6, 48_000, { namespaces: ns });
      const events = detectCredentialEvents(findings);
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({ serviceAccounts: 6, recovered: [], stillFailing: [] });
      expect(events[0]!.members).toHaveLength(6);
      const applied = applyCredentialEvents(findings, events);
      expect(applied.filter((f) => f.kind === 'cluster-credential').map((f) => f.severity)).toEqual(['critical']);
      const perSa = applied.filter((f) => f.kind === 'unauthorized');
      expect(perSa).toHaveLength(6);
      expect(perSa.every((f) => f.cause.id === 'unknown' && f.severity === 'warning')).toBe(true);
      expect(perSa.some((f) => f.cause.id === 'client-caches-token')).toBe(false);
    });
  }

  it('first 401s spread over more than 5 minutes are not one event', async () => {
    expect(detectCredentialEvents(await staggered(5, 75_000))).toHaveLength(1); // 5 first 401s within 5 minutes
    expect(detectCredentialEvents(await staggered(5, 80_000))).toEqual([]); // over 5 min 20 s: no event
  });

  it('ServiceAccounts reaching day 90 together after stale uses keep their client causes; so does a single client', async () => {
    const together = await staggered(6, 10_000, { stale: true });
    expect(detectCredentialEvents(together)).toEqual([]);
    const single = await staggered(1, 0, { stale: true });
    expect(detectCredentialEvents(single)).toEqual([]);
    expect(single.find((f) => f.kind === 'unauthorized')!.cause.id).not.toBe('unknown');
  });
});
