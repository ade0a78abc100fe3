/**
 * Attribution of 401s (no user in the event): a pod IP held by exactly one pod names its ServiceAccount whatever the
 * user agent (jgroups-extras/jgroups-kubernetes#239: `Java/17`; kiwigrid/k8s-sidecar#372:
 * `OpenAPI-Generator/31.0.0/python`), continuity of user agent and workload across a pod replacement is said
 * (Azure/AKS#5075), and 401s tied only by source IP and user agent are labelled so and not critical on their own.
 */
import { describe, expect, it } from 'vitest';
import type { TokenUse } from '../../src/audit/types.js';
import { SnapshotClusterState } from '../../src/cluster/snapshot.js';
import { TokenAggregator } from '../../src/findings/aggregate.js';
import { ADDRESS_ONLY_ATTRIBUTION, buildFindings } from '../../src/findings/build.js';
import type { Finding } from '../../src/findings/types.js';
import { staleUse, t, unauthorizedUse } from './helpers.js';

const NOW = t('2025-01-10T12:00:00Z');
const MIN = 60_000;

interface PodSpec {
  ns: string;
  name: string;
  sa: string;
  rs?: string;
  image: string;
  ip: string;
  start: string;
  hostNetwork?: boolean;
}
function podItem(p: PodSpec): Record<string, unknown> {
  return {
    kind: 'Pod',
    apiVersion: 'v1',
    metadata: {
      namespace: p.ns,
      name: p.name,
      uid: `${p.name}-uid`,
      ...(p.rs ? { ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: p.rs, uid: `${p.rs}-uid`, controller: true }] } : {}),
    },
    spec: { serviceAccountName: p.sa, ...(p.hostNetwork ? { hostNetwork: true } : {}), containers: [{ name: 'app', image: p.image }] },
    status: { phase: 'Running', startTime: p.start, podIP: p.ip, hostIP: '10.0.0.10' },
  };
}
function replicaSet(ns: string, name: string, deployment: string): Record<string, unknown> {
  return {
    kind: 'ReplicaSet',
    apiVersion: 'apps/v1',
    metadata: { namespace: ns, name, uid: `${name}-uid`, ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: deployment, uid: `${deployment}-uid`, controller: true }] },
    spec: { template: { spec: { containers: [] } } },
  };
}

async function build(uses: TokenUse[], items: Record<string, unknown>[]): Promise<Finding[]> {
  const agg = new TokenAggregator({ cluster: 'prod', maxTokenAge: { mode: 'eks' } });
  for (const u of uses) agg.add(u);
  return buildFindings(agg.records(), { now: NOW, state: SnapshotClusterState.fromList({ kind: 'List', apiVersion: 'v1', items }) });
}

const burst = (ip: string, ua: string, n: number, from: number): TokenUse[] =>
  Array.from({ length: n }, (_, i) => unauthorizedUse({ time: from + i * MIN, ip, ua, auditID: `u-${ip}-${i}` }));

describe('401s from a pod IP held by exactly one pod', () => {
  it('JGroups KUBE_PING (Java/17), no stale use first: the pod’s ServiceAccount, and the evidence says how', async () => {
    const items = [podItem({ ns: 'keycloak', name: 'keycloak-0', sa: 'keycloak', image: 'quay.io/keycloak/keycloak:26.0', ip: '10.1.2.3', start: '2025-01-10T10:00:00Z' })];
    const findings = await build(burst('10.1.2.3', 'Java/17', 3, NOW - 10 * MIN), items);
    const f = findings.find((x) => x.kind === 'unauthorized')!;
    expect(`${f.namespace}/${f.serviceAccount}`).toBe('keycloak/keycloak');
    expect(f.cause.evidence[0]).toBe(
      'inferred: attributed by source IP 10.1.2.3, the pod IP of exactly one pod, keycloak/keycloak-0 (ServiceAccount keycloak, not hostNetwork), running since 2025-01-10T10:00:00.000Z through the 401s (2025-01-10T11:50:00.000Z to 2025-01-10T11:52:00.000Z)',
    );
    // Tied by address alone: not critical, and the finding says on what it rests.
    expect(f.severity).toBe('warning');
    expect(f.attribution?.basis).toBe('address-only');
  });

  it('k8s-sidecar (OpenAPI-Generator/31.0.0/python): attributed the same way', async () => {
    const items = [podItem({ ns: 'monitoring', name: 'grafana-6d9f-abcde', sa: 'grafana', image: 'docker.io/grafana/grafana:11.0.0', ip: '10.1.7.7', start: '2025-01-10T09:00:00Z' })];
    const f = (await build(burst('10.1.7.7', 'OpenAPI-Generator/31.0.0/python', 2, NOW - 5 * MIN), items)).find((x) => x.kind === 'unauthorized')!;
    expect(`${f.namespace}/${f.serviceAccount}`).toBe('monitoring/grafana');
  });

  it('a pod that started after the first 401 is not the only owner of the IP during them: unattributed', async () => {
    const items = [podItem({ ns: 'keycloak', name: 'keycloak-0', sa: 'keycloak', image: 'quay.io/keycloak/keycloak:26.0', ip: '10.1.2.3', start: '2025-01-10T11:51:00Z' })];
    const f = (await build(burst('10.1.2.3', 'Java/17', 3, NOW - 10 * MIN), items)).find((x) => x.kind === 'unauthorized')!;
    expect(f.serviceAccount).toBe('(unattributed)');
  });

  it('AKS 1.30: 401s from the recreated pod carry the user agent of the earlier pod’s stale uses: continuity is evidence', async () => {
    const ua = 'OpenAPI-Generator/29.0.0/python';
    const items = [
      replicaSet('apps', 'reporter-7c9d8', 'reporter'),
      podItem({ ns: 'apps', name: 'reporter-7c9d8-new01', sa: 'reporter', rs: 'reporter-7c9d8', image: 'acme/reporter:2.1', ip: '10.2.0.9', start: '2025-01-10T08:00:00Z' }),
    ];
    const uses = [
      staleUse({ ns: 'apps', sa: 'reporter', pod: 'reporter-7c9d8-old01', time: NOW - 5 * 3_600_000, secondsAfterWarning: 3 * 86_400, ip: '10.2.0.4', ua }),
      ...burst('10.2.0.9', ua, 4, NOW - 20 * MIN),
    ];
    const f = (await build(uses, items)).find((x) => x.kind === 'unauthorized')!;
    expect(`${f.namespace}/${f.serviceAccount}`).toBe('apps/reporter');
    expect(f.cause.evidence.find((e) => e.startsWith('inferred:'))).toContain(
      `; the same user agent ${ua} made stale uses from earlier pod reporter-7c9d8-old01 of Deployment apps/reporter: the client that kept its token goes on failing after the pod was replaced`,
    );
  });
});

describe('401s tied only by source IP and user agent (forgeable by anyone on the node network)', () => {
  const node = '10.0.5.5';
  const multusUa = 'multus/v0.0.0 (linux/amd64) kubernetes/$Format';
  const items = [
    podItem({ ns: 'kube-system', name: 'kube-multus-ds-a', sa: 'multus', image: 'ghcr.io/k8snetworkplumbingwg/multus-cni:v3.9.3', ip: node, start: '2024-12-01T00:00:00Z', hostNetwork: true }),
    podItem({ ns: 'kube-system', name: 'kube-proxy-a', sa: 'kube-proxy', image: 'registry.k8s.io/kube-proxy:v1.29.0', ip: node, start: '2024-12-01T00:00:00Z', hostNetwork: true }),
  ];

  it('three token-less requests with the Multus pod’s IP and user agent: labelled, warning, not critical', async () => {
    const f = (await build(burst(node, multusUa, 3, NOW - 3 * MIN), items)).find((x) => x.kind === 'unauthorized')!;
    expect(`${f.namespace}/${f.serviceAccount}`).toBe('kube-system/multus');
    expect(f.cause.evidence).toContainEqual(expect.stringMatching(/^inferred: attributed by source IP and user agent \(source IP 10\.0\.5\.5\)/));
    expect(f.severity).toBe('warning');
    expect(f.attribution?.basis).toBe('address-only');
    expect(f.cause.evidence).toContainEqual(expect.stringContaining(`401s attributed ${ADDRESS_ONLY_ATTRIBUTION} (source address 10.0.5.5, user agent ${multusUa})`));
  });

  it('many such requests, or a stale use of the ServiceAccount from elsewhere, do not make it critical', async () => {
    const many = (await build(burst(node, multusUa, 50, NOW - 60 * MIN), items)).find((x) => x.kind === 'unauthorized')!;
    expect(many.severity).toBe('warning');
    const withStale = [
      staleUse({ ns: 'kube-system', sa: 'multus', pod: 'kube-multus-ds-a', time: NOW - 3_600_000, secondsAfterWarning: 80 * 86_400, ip: '10.0.9.9', ua: multusUa }),
      ...burst(node, multusUa, 3, NOW - 3 * MIN),
    ];
    const findings = await build(withStale, items);
    expect(findings.find((x) => x.kind === 'unauthorized')!.severity).toBe('warning');
    expect(findings.find((x) => x.kind === 'stale-token')!.severity).not.toBe('critical');
  });

  it('Multus’s own stale uses going on after token-less 401s with its IP and user agent began: forged, not critical', async () => {
    const uses = [
      staleUse({ ns: 'kube-system', sa: 'multus', pod: 'kube-multus-ds-a', time: NOW - 30 * MIN, secondsAfterWarning: 10 * 86_400, ip: node, ua: multusUa, auditID: 's1' }),
      staleUse({ ns: 'kube-system', sa: 'multus', pod: 'kube-multus-ds-a', time: NOW - 1 * MIN, secondsAfterWarning: 10 * 86_400 + 29 * 60, ip: node, ua: multusUa, auditID: 's2' }),
      ...burst(node, multusUa, 3, NOW - 20 * MIN),
    ];
    const findings = await build(uses, items);
    const f = findings.find((x) => x.kind === 'unauthorized')!;
    expect(`${f.namespace}/${f.serviceAccount}`).toBe('kube-system/multus');
    expect(f.attribution?.basis).toBe('address-only');
    expect(findings.every((x) => x.severity !== 'critical')).toBe(true);
  });

  it('the pod’s stale uses stopping where its 401s start corroborate them: critical, and it says so', async () => {
    const uses = [
      staleUse({ ns: 'kube-system', sa: 'multus', pod: 'kube-multus-ds-a', time: NOW - 40 * MIN, secondsAfterWarning: 89 * 86_400, ip: node, ua: multusUa, auditID: 's1' }),
      staleUse({ ns: 'kube-system', sa: 'multus', pod: 'kube-multus-ds-a', time: NOW - 21 * MIN, secondsAfterWarning: 89 * 86_400 + 19 * 60, ip: node, ua: multusUa, auditID: 's2' }),
      ...burst(node, multusUa, 3, NOW - 20 * MIN),
    ];
    const f = (await build(uses, items)).find((x) => x.kind === 'unauthorized')!;
    expect(f.attribution?.basis).toBe('corroborated');
    expect(f.attribution?.text).toContain('the stale-token uses from there (pod kube-multus-ds-a) stopped at 2025-01-10T11:39:00.000Z, where the 401s started (2025-01-10T11:40:00.000Z)');
    expect(f.severity).toBe('critical');
  });
});
