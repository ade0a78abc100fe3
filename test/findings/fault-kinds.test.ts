/**
 * One small input per fault kind: invalidated legacy tokens, tokens of replaced pods, operator-owned
 * workloads, the cause catalogue (new entries, rebuilt images, fixed libraries) and 401s from a node's IP.
 */
import { describe, expect, it } from 'vitest';
import type { TokenUse } from '../../src/audit/types.js';
import { SnapshotClusterState } from '../../src/cluster/snapshot.js';
import { TokenAggregator } from '../../src/findings/aggregate.js';
import { buildFindings } from '../../src/findings/build.js';
import { OWN_TOKEN_FIX, classifyCause, repositoryMatches } from '../../src/findings/causes.js';
import type { Finding } from '../../src/findings/types.js';
import { findingButtons } from '../../src/slack/blocks/finding.js';
import { DAY, container, pod, staleUse, subjectState, t, unauthorizedUse } from './helpers.js';

const NOW = t('2024-06-05T12:00:00Z');

type Obj = Record<string, unknown>;
const meta = (kind: string, ns: string, name: string, extra: Obj = {}, owner?: [string, string, string?]): Obj => ({
  kind,
  apiVersion: kind === 'Pod' || kind === 'ServiceAccount' || kind === 'Secret' ? 'v1' : kind === 'Job' || kind === 'CronJob' ? 'batch/v1' : 'apps/v1',
  metadata: {
    namespace: ns,
    name,
    uid: `${name}-uid`,
    ...(owner ? { ownerReferences: [{ apiVersion: owner[2] ?? 'apps/v1', kind: owner[0], name: owner[1], uid: `${owner[1]}-uid`, controller: true }] } : {}),
  },
  ...extra,
});
const podObj = (ns: string, name: string, sa: string, owner: [string, string, string?] | undefined, o: { image?: string; start?: string; ip?: string; hostIP?: string; hostNetwork?: boolean; labels?: Record<string, string> } = {}): Obj => {
  const m = meta('Pod', ns, name, {}, owner);
  if (o.labels) (m['metadata'] as Obj)['labels'] = o.labels;
  return {
    ...m,
    spec: { serviceAccountName: sa, ...(o.hostNetwork ? { hostNetwork: true } : {}), containers: [{ name: name.split('-')[0], image: o.image ?? 'acme/app:1.0' }] },
    status: { phase: 'Running', startTime: o.start ?? '2024-03-01T00:00:00Z', ...(o.ip ? { podIP: o.ip } : {}), ...(o.hostIP ? { hostIP: o.hostIP } : {}) },
  };
};
const snapshot = (items: Obj[]) => SnapshotClusterState.fromList({ kind: 'List', apiVersion: 'v1', items });

async function build(uses: TokenUse[], items?: Obj[], now = NOW): Promise<Finding[]> {
  const agg = new TokenAggregator({ cluster: 'prod', maxTokenAge: { mode: 'eks' } });
  for (const u of uses) agg.add(u);
  return buildFindings(agg.records(), { now, ...(items ? { state: snapshot(items) } : {}) });
}

const invalidated = (secret: string, ns: string, time: number, ip = '192.168.1.5'): TokenUse => ({
  kind: 'legacy',
  auditID: `l-${secret}-${time}`,
  time,
  sourceIPs: [ip],
  userAgent: 'python-requests/2.31.0',
  responseCode: 401,
  legacySecret: { name: secret, namespace: ns, kind: 'invalidated' },
});

describe('§2 invalidated legacy tokens', () => {
  const uses = [invalidated('reporter-token-abcde', 'bi', NOW - DAY), invalidated('reporter-token-abcde', 'bi', NOW), invalidated('etl', 'data', NOW)];

  it('the Secret annotation names the ServiceAccount (no .secrets[] on it): one finding each, labels in evidence', async () => {
    const items = [
      meta('ServiceAccount', 'bi', 'reporter'),
      meta('ServiceAccount', 'data', 'loader'),
      {
        ...meta('Secret', 'data', 'etl'),
        type: 'kubernetes.io/service-account-token',
        metadata: { namespace: 'data', name: 'etl', annotations: { 'kubernetes.io/service-account.name': 'loader' }, labels: { 'kubernetes.io/legacy-token-invalid-since': '2024-05-01' } },
      },
    ];
    const findings = await build(uses, items);
    expect(findings.map((f) => `${f.namespace}/${f.serviceAccount} ${f.kind} ${f.severity} ${f.requests}`).sort()).toEqual([
      'bi/reporter legacy-token warning 2',
      'data/loader legacy-token warning 1',
    ]);
    const loader = findings.find((f) => f.serviceAccount === 'loader')!;
    expect(loader.cause.evidence[0]).toBe('ServiceAccount data/loader owns Secret etl: Secret data/etl is annotated kubernetes.io/service-account.name: loader');
    expect(loader.cause.evidence).toContain('Secret data/etl label kubernetes.io/legacy-token-invalid-since: 2024-05-01');
    expect(loader.cause.fix).toMatch(/^To get the client working again for now, re-enable the token by removing the label \(kubectl label secret etl -n data kubernetes\.io\/legacy-token-invalid-since-\)/);
    const reporter = findings.find((f) => f.serviceAccount === 'reporter')!;
    expect(reporter.cause.evidence[0]).toContain('not confirmed: no ServiceAccount in cluster state lists the Secret');
  });

  it('without cluster state, a Secret whose name is not <sa>-token-xxxxx is named as such', async () => {
    const findings = await build(uses);
    expect(findings.map((f) => `${f.namespace}/${f.serviceAccount}`).sort()).toEqual(['bi/reporter', 'data/(secret etl)']);
    const etl = findings.find((f) => f.namespace === 'data')!;
    expect(etl.severity).toBe('warning');
    expect(etl.cause.evidence[0]).toBe('the audit events name only Secret data/etl; its ServiceAccount is unknown (no cluster state)');
  });
});

describe('§3 tokens of pods that no longer exist', () => {
  const sa = { ns: 'web', sa: 'api' };
  const oldUid = 'old-uid';
  // Deployment pod api-1 replaced by api-1 (StatefulSet-like same name) 30 min before the end of the data.
  const staleOld = (time: number, ip = '10.1.0.5') => staleUse({ ...sa, pod: 'api-0', podUid: oldUid, time, secondsAfterWarning: 80 * 86_400, ip, ua: 'api/1.0' });
  const items = (ip = '10.1.0.9') => [
    meta('ServiceAccount', 'web', 'api'),
    meta('StatefulSet', 'web', 'api'),
    podObj('web', 'api-0', 'api', ['StatefulSet', 'api'], { start: '2024-06-05T11:30:00Z', ip }),
  ];

  it('uses that stop before the replacement started: client-caches-token, no live token, info', async () => {
    const [f] = await build([staleOld(NOW - 2 * 3_600_000), staleOld(NOW - 40 * 60_000)], items());
    expect(f).toMatchObject({ cause: { id: 'client-caches-token' }, rejectionAt: null, severity: 'info' });
  });

  it('401s from the same source and user agent after the replacement started: static-token-file, said why', async () => {
    const u = unauthorizedUse({ time: NOW - 5 * 60_000, ip: '10.1.0.5', ua: 'api/1.0' });
    const findings = await build([staleOld(NOW - 40 * 60_000), u], items());
    const f = findings.find((x) => x.kind === 'stale-token')!;
    expect(f.cause.id).toBe('static-token-file');
    expect(f.cause.evidence[0]).toMatch(/^1 request rejected with 401 up to 2024-06-05T11:55:00\.000Z, after pod api-0 was replaced \(its successor api-0 started 2024-06-05T11:30:00\.000Z\)/);
  });

  it('a Deployment restarted 30 min ago (new pod names): old tokens are not live and not a token file', async () => {
    const old = (time: number) => staleUse({ ...sa, pod: 'api-6f7c9-abcde', podUid: 'gone-uid', time, secondsAfterWarning: 87 * 86_400, ua: 'api/1.0' });
    const state = [
      meta('ServiceAccount', 'web', 'api'),
      meta('Deployment', 'web', 'api'),
      meta('ReplicaSet', 'web', 'api-88d1e', {}, ['Deployment', 'api']),
      podObj('web', 'api-88d1e-fghij', 'api', ['ReplicaSet', 'api-88d1e'], { start: '2024-06-05T11:30:00Z' }),
    ];
    const [f] = await build([old(NOW - 3 * 3_600_000), old(NOW - 35 * 60_000)], state);
    expect(f).toMatchObject({ cause: { id: 'client-caches-token' }, rejectionAt: null, severity: 'info', workloads: [{ kind: 'Deployment', name: 'api' }] });
    expect(f!.cause.evidence).toContainEqual(expect.stringContaining('stale uses came from earlier pods api-6f7c9-abcde'));
  });

  it('live state (readsCurrentState): an absent pod token is dead, but a failed pod read leaves it live', async () => {
    const use = staleUse({ ...sa, pod: 'api-0', podUid: 'u0', time: NOW, secondsAfterWarning: 88 * 86_400, ua: 'api/1.0' });
    const agg = new TokenAggregator({ cluster: 'prod', maxTokenAge: { mode: 'eks' } });
    agg.add(use);
    const live = (fail: boolean) => ({
      readsCurrentState: true,
      describeServiceAccount: async () => subjectState({ serviceAccount: { namespace: 'web', name: 'api', labels: {}, annotations: {}, imagePullSecrets: [], secrets: [] } }),
      getPod: async () => {
        if (fail) throw new Error('connect ECONNREFUSED');
        return undefined;
      },
    });
    const [gone] = await buildFindings(agg.records(), { now: NOW, state: live(false) });
    expect([gone!.rejectionAt, gone!.severity]).toEqual([null, 'info']);
    const [unknown] = await buildFindings(agg.records(), { now: NOW, state: live(true) });
    expect(unknown!.severity).toBe('critical');
  });

  it('a running pod whose token comes from another IP while other tokens come from their pods: static-token-file', async () => {
    const a = staleUse({ ...sa, pod: 'api-0', podUid: 'api-0-uid', time: NOW, secondsAfterWarning: 80 * 86_400, ip: '10.1.0.9', ua: 'api/1.0' });
    const b = staleUse({ ...sa, pod: 'api-1', podUid: 'api-1-uid', time: NOW, secondsAfterWarning: 80 * 86_400, ip: '172.16.9.9', ua: 'api/1.0' });
    const state = [...items('10.1.0.9'), podObj('web', 'api-1', 'api', ['StatefulSet', 'api'], { ip: '10.1.0.10', hostIP: '10.0.0.2' })];
    const [f] = await build([a, b], state);
    expect(f!.cause.id).toBe('static-token-file');
    expect(f!.cause.evidence[0]).toContain("token of pod api-1 used from source IP 172.16.9.9, which is neither the pod's IP (10.1.0.10) nor its node's (10.0.0.2)");
  });
});

describe('§4 operator-owned workloads', () => {
  const use = (ns: string, sa: string, p: string) => staleUse({ ns, sa, pod: p, podUid: `${p}-uid`, time: NOW, secondsAfterWarning: 88 * 86_400, ua: 'x/1' });

  it('Pod → ReplicaSet → Deployment → custom resource names the Deployment, owned by the resource; restart offered', async () => {
    const items = [
      meta('Deployment', 'ops', 'agent', {}, ['Agent', 'main', 'example.io/v1']),
      meta('ReplicaSet', 'ops', 'agent-7d9', {}, ['Deployment', 'agent']),
      podObj('ops', 'agent-7d9-x1', 'agent', ['ReplicaSet', 'agent-7d9']),
    ];
    const [f] = await build([use('ops', 'agent', 'agent-7d9-x1')], items);
    expect(f!.workloads).toEqual([{ kind: 'Deployment', namespace: 'ops', name: 'agent', owner: { kind: 'Agent', namespace: 'ops', name: 'main' } }]);
    expect(findingButtons(f!, (a) => (a.action === 'restart' ? 'id-restart-1' : undefined)).map((b) => b.text.text)).toEqual(['Restart Deployment agent']);
  });

  it('Pod → DaemonSet → custom resource names the DaemonSet', async () => {
    const items = [meta('DaemonSet', 'ops', 'node-agent', {}, ['NodeAgent', 'cfg', 'example.io/v1']), podObj('ops', 'node-agent-abc', 'na', ['DaemonSet', 'node-agent'])];
    const [f] = await build([use('ops', 'na', 'node-agent-abc')], items);
    expect(f!.workloads).toEqual([{ kind: 'DaemonSet', namespace: 'ops', name: 'node-agent', owner: { kind: 'NodeAgent', namespace: 'ops', name: 'cfg' } }]);
  });

  it('Pod → Job → CronJob (→ custom resource): names the CronJob, no restart button, the next run gets a fresh token', async () => {
    const items = [
      meta('CronJob', 'ops', 'backup', {}, ['Backup', 'nightly', 'example.io/v1']),
      meta('Job', 'ops', 'backup-28512', {}, ['CronJob', 'backup', 'batch/v1']),
      podObj('ops', 'backup-28512-q', 'backup', ['Job', 'backup-28512', 'batch/v1']),
    ];
    const [f] = await build([use('ops', 'backup', 'backup-28512-q')], items);
    expect(f!.workloads).toEqual([{ kind: 'CronJob', namespace: 'ops', name: 'backup', owner: { kind: 'Backup', namespace: 'ops', name: 'nightly' } }]);
    expect(findingButtons(f!, (a) => (a.action === 'restart' ? 'id-restart-1' : undefined))).toEqual([]);
    expect(f!.cause.evidence).toContainEqual(expect.stringContaining('CronJob ops/backup runs these pods: there is nothing to restart, each run\'s pod gets a fresh token, so the next run is clean'));
  });

  it('a custom resource reusing a built-in kind name (OpenKruise apps.kruise.io StatefulSet) is not offered a restart', async () => {
    const items = [podObj('ops', 'db-0', 'db', ['StatefulSet', 'db', 'apps.kruise.io/v1beta1'])];
    const [f] = await build([use('ops', 'db', 'db-0')], items);
    expect(f!.workloads).toEqual([{ kind: 'StatefulSet', namespace: 'ops', name: 'db' }]);
    const state = snapshot(items);
    expect((await state.getPod('ops', 'db-0'))!.ownerChain).toEqual([{ kind: 'StatefulSet', namespace: 'ops', name: 'db', apiVersion: 'apps.kruise.io/v1beta1' }]);
  });
});

describe('§5 cause catalogue', () => {
  const stale = (ua: string, p = 'x-0') => {
    const agg = new TokenAggregator({ cluster: 'prod', maxTokenAge: { mode: 'eks' } });
    agg.add(staleUse({ ns: 'ns', sa: 'sa', pod: p, time: NOW, secondsAfterWarning: 80 * 86_400, ua }));
    return agg.records();
  };
  const withImage = (image: string, o: Parameters<typeof pod>[0] extends infer P ? Partial<P> : never = {}) =>
    subjectState({ pods: [pod({ name: 'x-0', namespace: 'ns', serviceAccount: 'sa', startTime: NOW - 81 * DAY, containers: [container(image)], hostPaths: [], ...o })] });
  const classify = (ua: string, image?: string, o = {}) =>
    classifyCause({ kind: 'stale-token', records: stale(ua), now: NOW, ...(image ? { state: withImage(image, o) } : {}) });

  it('images rebuilt by distributions and mirrors match their component', () => {
    expect(repositoryMatches('rancher/hardened-multus-cni', 'multus-cni')).toBe(true);
    expect(repositoryMatches('rancher/mirrored-calico-cni', 'calico/cni')).toBe(true);
    expect(repositoryMatches('rancher/mirrored-calico-node', 'calico/cni')).toBe(false);
    expect(classify('multus/v0.0.0', 'rancher/hardened-multus-cni:v3.9.3-build20230317').component).toBe('multus-thin');
    expect(classify('calico/v0.0.0', 'rancher/mirrored-calico-cni:v3.20.0').component).toBe('calico-cni');
    expect(classify('calico/v0.0.0', 'quay.io/calico/cni:v3.21.4@sha256:' + 'a'.repeat(64)).component).toBe('calico-cni');
    expect(classify('calico/v0.0.0', 'registry.corp.example:5000/dockerhub/calico/cni:v3.22.1').component).toBe('calico-cni');
    expect(classify('calico/v0.0.0', 'registry.corp.example:5000/dockerhub/calico/cni:v3.26.1').component).toBeNull();
    expect(classify('Fluent-Bit', 'public.ecr.aws/aws-observability/aws-for-fluent-bit:2.21.0').component).toBe('aws-for-fluent-bit');
    const pinned = classify('calico/v0.0.0', 'calico/cni@sha256:' + 'b'.repeat(64));
    expect(pinned.component).toBe('calico-cni');
    expect(pinned.evidence[0]).toContain('version unknown from a digest-pinned reference without tag');
  });

  it('Istio CNI install-cni < 1.15 and Linkerd CNI are static-token-file with their sources; Istio 1.15 is not', () => {
    const istio = classify('istio-cni/v0.0.0', 'docker.io/istio/install-cni:1.14.1');
    expect([istio.id, istio.component]).toEqual(['static-token-file', 'istio-cni']);
    expect(istio.sources).toContain('https://github.com/istio/istio/issues/38077');
    expect(classify('istio-cni/v0.0.0', 'rancher/mirrored-istio-install-cni:1.14.3').component).toBe('istio-cni');
    expect(classify('istio-cni/v0.0.0', 'docker.io/istio/install-cni:1.15.0').component).toBeNull();
    const linkerd = classify('linkerd-cni', 'cr.l5d.io/linkerd/cni-plugin:v1.2.2');
    expect([linkerd.id, linkerd.component]).toEqual(['static-token-file', 'linkerd-cni']);
    expect(linkerd.sources).toContain('https://github.com/linkerd/linkerd2/issues/12573');
  });

  it('Spark (SPARK-44925), found by its pod label, does not blame the fabric8 client it uses', () => {
    const spark = classify('fabric8-kubernetes-client/6.4.1', 'acme/etl-driver:2024.05', { labels: { 'spark-role': 'driver' } });
    expect([spark.id, spark.component]).toEqual(['client-caches-token', 'spark-kubernetes']);
    expect(spark.sources).toContain('https://issues.apache.org/jira/browse/SPARK-44925');
    expect(spark.evidence.join('\n')).toContain('the fabric8 client itself re-reads the token file');
    expect(classify('fabric8-kubernetes-client/6.4.1', 'apache/spark:3.5.1').component).toBeNull();
    expect(classify('fabric8-kubernetes-client/6.4.1', 'apache/spark:3.4.1').component).toBe('spark-kubernetes');
  });

  it('a fixed client library with stale uses: evidence says the application keeps its own token, the fix does not say upgrade', () => {
    const c = classify('fabric8-kubernetes-client/6.4.1', 'acme/orders:3.0');
    expect(c.id).toBe('client-caches-token');
    expect(c.evidence).toContainEqual(expect.stringContaining('re-reads the token file itself (fixed in 6.1.0, 5.12.4), yet this application presents a stale token: it keeps a token of its own'));
    expect(c.fix).toBe(OWN_TOKEN_FIX);
    expect(c.fix.toLowerCase()).not.toContain('upgrade');
    const py = classify('OpenAPI-Generator/29.0.0/python', 'acme/py:1');
    expect(py.fix).toBe(OWN_TOKEN_FIX);
  });
});

describe('§5 401s from a node IP', () => {
  const node = '10.0.5.5';
  const hostPods = [
    podObj('kube-system', 'kube-multus-ds-a', 'multus', ['DaemonSet', 'kube-multus-ds'], { image: 'ghcr.io/k8snetworkplumbingwg/multus-cni:v3.9.3', hostNetwork: true, ip: node, hostIP: node }),
    podObj('kube-system', 'kube-proxy-a', 'kube-proxy', ['DaemonSet', 'kube-proxy'], { image: 'registry.k8s.io/kube-proxy:v1.29.0', hostNetwork: true, ip: node, hostIP: node }),
  ];

  it('exactly one pod on that IP matches the user agent (via the catalogue): attributed by source IP', async () => {
    const findings = await build([unauthorizedUse({ time: NOW, ip: node, ua: 'multus/v0.0.0 (linux/amd64) kubernetes/$Format' })], hostPods);
    const f = findings.find((x) => x.kind === 'unauthorized')!;
    expect(`${f.namespace}/${f.serviceAccount}`).toBe('kube-system/multus');
    expect(f.cause.evidence).toContainEqual(
      expect.stringMatching(/^inferred: attributed by source IP and user agent \(source IP 10\.0\.5\.5\): of the 2 pods running on that IP, only kube-system\/kube-multus-ds-a \(ServiceAccount multus\) matches user agent/),
    );
    expect(f.cause.component).toBe('multus-thin');
    // One token-less request with the pod's IP and user agent is easy to forge: not critical on its own.
    expect(f.severity).toBe('warning');
  });

  it('no single match: stays unattributed, lists the candidates and says ambiguous', async () => {
    const findings = await build([unauthorizedUse({ time: NOW, ip: node, ua: 'Go-http-client/1.1' })], hostPods);
    const f = findings.find((x) => x.kind === 'unauthorized')!;
    expect(f.serviceAccount).toBe('(unattributed)');
    expect(f.cause.evidence[0]).toContain('ambiguous by source IP 10.0.5.5: no pod there matches user agent Go-http-client/1.1; candidate pods: kube-system/kube-multus-ds-a, kube-system/kube-proxy-a');
  });
});
