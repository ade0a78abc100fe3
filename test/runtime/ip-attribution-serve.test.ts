/**
 * `serve` attributes token-less 401s by source IP from the watch cache, at the time of the 401s: a `Java/17` client
 * (JGroups KUBE_PING, jgroups-extras/jgroups-kubernetes#239) whose pod IP is held by exactly one pod gets its 401s on
 * that pod's ServiceAccount; after the pod is deleted and its IP is reused by another pod (k8s-sidecar,
 * `OpenAPI-Generator/31.0.0/python`, kiwigrid/k8s-sidecar#372), 401s before the reuse stay with the first pod and those
 * after go to the second; a node IP (shared by hostNetwork pods) names no client. Real serve, real client-node, the
 * loopback Kubernetes and Slack fakes (test/slack/harness.ts); the pods are created and deleted through the fake API
 * server and reach tokenwatch only through its watches.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ClusterWatchCache } from '../../src/cluster/cache.js';
import { auditEvent } from '../sources/events.js';
import { CLUSTER, startHarness, type Harness } from '../slack/harness.js';

const MIN = 60_000;
let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

/** A running pod as the API server shows it (`status.startTime` in whole seconds, as Kubernetes writes it). */
function pod(o: { ns: string; name: string; sa: string; image: string; ip: string; start: number; hostNetwork?: boolean }) {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { namespace: o.ns, name: o.name, uid: `uid-${o.name}` },
    spec: { serviceAccountName: o.sa, nodeName: 'ip-10-20-0-5', ...(o.hostNetwork ? { hostNetwork: true } : {}), containers: [{ name: 'main', image: o.image }] },
    status: {
      phase: 'Running',
      startTime: new Date(Math.floor(o.start / 1000) * 1000).toISOString().replace('.000Z', 'Z'),
      podIP: o.ip,
      podIPs: [{ ip: o.ip }],
      hostIP: o.hostNetwork ? o.ip : '10.20.0.5',
    },
  };
}

const burst = (id: string, ip: string, ua: string, from: number, n: number): string[] =>
  Array.from({ length: n }, (_, i) => auditEvent({ auditID: `${id}-${i}`, time: from + i * 10_000, kind: 'unauthorized', sourceIP: ip, userAgent: ua }));

/** The open 401 findings of the cluster. */
async function unauthorized(x: Harness) {
  return (await x.serve.context.store
    .findings.list(CLUSTER, { status: ['open'] }))
    .map((f) => f.finding)
    .filter((f) => f.kind === 'unauthorized');
}

async function cached(cache: ClusterWatchCache, ns: string, name: string, present: boolean): Promise<void> {
  await vi.waitFor(() => expect(cache.getPod(ns, name) !== undefined).toBe(present), { timeout: 10_000, interval: 10 });
}

describe('serve: live 401s attributed by pod IP from the watch cache', () => {
  it('a Java/17 pod’s 401s go to its ServiceAccount; after the IP is reused, earlier 401s stay with the deleted pod and later ones go to the new one; a node IP names nobody', { timeout: 120_000 }, async () => {
    h = await startHarness();
    const cache = h.serve.context.clusters.get(CLUSTER)!.watchCache!;
    await cache.synced();
    const ip = '10.1.2.3';
    const node = '10.20.0.5';
    const keycloakStart = h.now() - 2 * 60 * MIN;
    h.kube.store.put(pod({ ns: 'keycloak', name: 'keycloak-0', sa: 'keycloak', image: 'quay.io/keycloak/keycloak:26.0', ip, start: keycloakStart }));
    // A hostNetwork DaemonSet pod: its IP is the node's, which every hostNetwork pod and the node itself send from.
    h.kube.store.put(pod({ ns: 'kube-system', name: 'node-agent-x1', sa: 'node-agent', image: 'registry.example/node-agent:1.0', ip: node, start: keycloakStart, hostNetwork: true }));
    await cached(cache, 'keycloak', 'keycloak-0', true);
    await cached(cache, 'kube-system', 'node-agent-x1', true);

    const javaFrom = h.now() - 5 * MIN;
    h.appendAudit([...burst('jg', ip, 'Java/17', javaFrom, 3), ...burst('na', node, 'Java/17', javaFrom, 3)]);
    await h.poll();
    let found = await unauthorized(h);
    const keycloak = found.find((f) => f.namespace === 'keycloak');
    expect(`${keycloak?.namespace}/${keycloak?.serviceAccount}`).toBe('keycloak/keycloak');
    expect(keycloak!.pods).toEqual(['keycloak-0']);
    expect(keycloak!.cause.evidence[0]).toMatch(/^inferred: attributed by source IP 10\.1\.2\.3, the pod IP of exactly one pod, keycloak\/keycloak-0 \(ServiceAccount keycloak, not hostNetwork\)/);
    expect(found.some((f) => f.serviceAccount === 'node-agent')).toBe(false);
    // The node IP's 401s stay unattributed, with the hostNetwork pod named only as a candidate.
    const nodeIp = found.filter((f) => f.namespace === '(unattributed)').flatMap((f) => f.cause.evidence).find((e) => e.includes(`by source IP ${node}`));
    expect(nodeIp).toContain('candidate pods: kube-system/node-agent-x1');

    // keycloak-0 is deleted; a minute later a grafana pod starts with the same IP.
    h.kube.store.delete('Pod', 'keycloak', 'keycloak-0');
    await cached(cache, 'keycloak', 'keycloak-0', false);
    h.advance(MIN);
    const grafanaStart = h.now() + 1000;
    h.kube.store.put(pod({ ns: 'monitoring', name: 'grafana-6d9f-abcde', sa: 'grafana', image: 'docker.io/grafana/grafana:11.0.0', ip, start: grafanaStart }));
    await cached(cache, 'monitoring', 'grafana-6d9f-abcde', true);
    h.advance(2 * MIN);
    h.appendAudit(burst('sc', ip, 'OpenAPI-Generator/31.0.0/python', grafanaStart + 30_000, 2));
    await h.poll();
    found = await unauthorized(h);
    const bySa = Object.fromEntries(found.map((f) => [`${f.namespace}/${f.serviceAccount}`, f.pods]));
    expect(bySa['keycloak/keycloak']).toEqual(['keycloak-0']); // the 401s before the reuse: still the deleted pod
    expect(bySa['monitoring/grafana']).toEqual(['grafana-6d9f-abcde']); // after it: the pod that holds the IP now
    expect(found.find((f) => f.serviceAccount === 'grafana')!.cause.evidence.some((e) => e.includes('the pod IP of exactly one pod, monitoring/grafana-6d9f-abcde (ServiceAccount grafana'))).toBe(true);
    expect(found.some((f) => f.serviceAccount === 'node-agent')).toBe(false);
  });
});
