/**
 * Forged node-probe reports, through the loopback Kubernetes fake (TokenReview added with serveTokenReviews) and
 * the real KubeProbeReports + applyProbeReports: each attack of the second attack round with the outcome serve must
 * reach. The probe pods run on node-a and node-b; CoreDNS runs on node-b.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MAX_PROBE_FINDINGS_PER_POLL, applyProbeReports } from '../../src/probe/findings.js';
import type { ProbeEntry, ProbeReport } from '../../src/probe/host.js';
import { KubeProbeReports, PROBE_LABEL, PROBE_NAMESPACE, probeConfigMap, publishReport } from '../../src/probe/objects.js';
import { MAX_REPORT_ENTRIES, PROBE_AUDIENCE, type DropReason } from '../../src/probe/verify.js';
import { startFakeKube, type FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import { serveTokenReviews, type FakeTokenIssuer } from '../../src/sandbox/fakes/token-review.js';

const NOW = Date.parse('2026-11-20T12:00:00Z');
const DAY = 86_400_000;
const iso = (ms: number) => new Date(ms).toISOString();

let kube: FakeKube;
let tokens: FakeTokenIssuer;
let drops: Array<[string, DropReason, number]>;

const pod = (ns: string, name: string, node: string, sa: string) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { namespace: ns, name, uid: `uid-${name}` }, spec: { nodeName: node, serviceAccountName: sa } });
const sa = (ns: string, name: string) => ({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { namespace: ns, name, uid: `uid-sa-${name}` } });

beforeEach(async () => {
  kube = await startFakeKube({
    objects: [
      pod(PROBE_NAMESPACE, 'tokenwatch-probe-aaaaa', 'node-a', 'tokenwatch-probe'),
      pod(PROBE_NAMESPACE, 'tokenwatch-probe-bbbbb', 'node-b', 'tokenwatch-probe'),
      pod(PROBE_NAMESPACE, 'not-the-probe', 'node-a', 'default'),
      pod('kube-system', 'coredns-5d78c9869d-x2x8p', 'node-b', 'coredns'),
      pod('kube-system', 'kube-multus-ds-a1b2c', 'node-a', 'multus'),
      sa('kube-system', 'coredns'),
      sa('kube-system', 'multus'),
      ...Array.from({ length: 30 }, (_, i) => sa('team', `app-${i}`)),
    ],
  });
  tokens = serveTokenReviews(kube, () => NOW);
  drops = [];
});
afterEach(async () => {
  await kube.close();
});

const proofOf = (podName: string, o: { withNodeInfo?: boolean; audience?: string } = {}) => tokens.issue({ namespace: PROBE_NAMESPACE, pod: podName, audience: o.audience ?? PROBE_AUDIENCE, ...(o.withNodeInfo === false ? { withNodeInfo: false } : {}) });
const reader = () => new KubeProbeReports(kube.kubeConfig(), PROBE_NAMESPACE, (what, reason, n) => drops.push([what, reason, n]));
const dropped = (what: string, reason: DropReason) => drops.filter(([w, r]) => w === what && r === reason).reduce((a, [, , n]) => a + n, 0);

function entry(o: Partial<ProbeEntry> & { namespace: string; serviceAccount: string }, i = 0): ProbeEntry {
  return {
    path: `/etc/cni/net.d/f${i}.kubeconfig`,
    pathHash: i.toString(16).padStart(16, '0'),
    mtime: iso(NOW - 40 * DAY),
    status: 'token',
    tokenKind: 'bound',
    issuedAt: iso(NOW - 40 * DAY),
    warnAfter: iso(NOW - 40 * DAY + 3_607_000),
    rejectionAt: iso(NOW + 50 * DAY),
    ...o,
  };
}
const report = (node: string, entries: ProbeEntry[]): ProbeReport => ({ version: 1, node, probedAt: iso(NOW), globs: [], entries });
const multus = entry({ namespace: 'kube-system', serviceAccount: 'multus', serviceAccountUid: 'uid-sa-multus', pod: 'kube-multus-ds-a1b2c', podUid: 'uid-kube-multus-ds-a1b2c', node: 'node-a' });

/** Writes a ConfigMap as an attacker with the probe's Role would (create, or replace). */
async function put(name: string, data: Record<string, string>): Promise<void> {
  kube.store.put({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { namespace: PROBE_NAMESPACE, name, labels: { [PROBE_LABEL.key]: PROBE_LABEL.value } }, data });
}

async function findings(): Promise<ReturnType<typeof applyProbeReports>> {
  const reports = await reader().read();
  return applyProbeReports({ cluster: 'prod', reports, findings: [], now: NOW, metricsShowUse: true });
}

describe('forged node-probe reports', () => {
  it('a genuine report from node-a is believed (proof of the probe pod on node-a, names and claims checked)', async () => {
    await publishReport(kube.kubeConfig(), report('node-a', [multus]), PROBE_NAMESPACE, proofOf('tokenwatch-probe-aaaaa'));
    const fs = await findings();
    expect(fs.map((f) => `${f.namespace}/${f.serviceAccount}`)).toEqual(['kube-system/multus']);
    expect(drops).toEqual([]);
    // The probe wrote without reading: create, then (second run) replace.
    await publishReport(kube.kubeConfig(), report('node-a', [multus]), PROBE_NAMESPACE, proofOf('tokenwatch-probe-aaaaa'));
    expect(kube.requests.filter((r) => r.resource === 'configmaps' && r.verb !== 'list').map((r) => r.method)).toEqual(['POST', 'POST', 'PUT']);
  });

  it('clusters without node info in tokens (< 1.30): the node is taken from the live probe pod', async () => {
    await publishReport(kube.kubeConfig(), report('node-a', [multus]), PROBE_NAMESPACE, proofOf('tokenwatch-probe-aaaaa', { withNodeInfo: false }));
    expect((await reader().read()).map((r) => r.node)).toEqual(['node-a']);
    await kube.store.delete('ConfigMap', PROBE_NAMESPACE, 'tokenwatch-probe-node-a');
    // node-b's probe, without node info, writing a report for node-a: its pod is not on node-a.
    await publishReport(kube.kubeConfig(), report('node-a', [multus]), PROBE_NAMESPACE, proofOf('tokenwatch-probe-bbbbb', { withNodeInfo: false }));
    expect(await reader().read()).toEqual([]);
    expect(dropped('report', 'wrong-node')).toBe(1);
  });

  it('one 505 KiB ConfigMap: refused without a proof; from a real probe, capped at MAX_REPORT_ENTRIES entries with the rest counted', async () => {
    const many = Array.from({ length: 1_504 }, (_, i) => entry({ namespace: 'team', serviceAccount: `app-${i % 30}`, node: 'node-a' }, i));
    const big = probeConfigMap(report('node-a', many), PROBE_NAMESPACE);
    expect(JSON.stringify(big.data).length).toBeGreaterThan(505 * 1024);
    await put('tokenwatch-probe-node-a', big.data!);
    expect(await findings()).toEqual([]);
    expect(dropped('report', 'too-large')).toBe(1);

    // The same flood of files, in a report that fits and that node-a's probe really wrote.
    await kube.store.delete('ConfigMap', PROBE_NAMESPACE, 'tokenwatch-probe-node-a');
    const compact = report('node-a', many.map((e) => ({ path: e.path, pathHash: e.pathHash, mtime: e.mtime, status: e.status, tokenKind: e.tokenKind, namespace: e.namespace!, serviceAccount: e.serviceAccount!, warnAfter: e.warnAfter!, rejectionAt: e.rejectionAt! })).slice(0, 300));
    await put('tokenwatch-probe-node-a', { 'report.json': JSON.stringify(compact), proof: proofOf('tokenwatch-probe-aaaaa') });
    const reports = await reader().read();
    expect(reports[0]!.entries).toHaveLength(MAX_REPORT_ENTRIES);
    expect(dropped('entry', 'over-cap')).toBe(300 - MAX_REPORT_ENTRIES);
    let overflow = 0;
    const fs = applyProbeReports({ cluster: 'prod', reports, findings: [], now: NOW, metricsShowUse: true, onOverflow: (n) => (overflow += n) });
    expect(fs).toHaveLength(MAX_PROBE_FINDINGS_PER_POLL); // 30 ServiceAccounts named, 20 findings at most per poll
    expect(overflow).toBe(30 - MAX_PROBE_FINDINGS_PER_POLL);
  });

  it('60 ConfigMaps: none believed (no proof, names that are not the node, a copied proof, a pod that is not the probe)', async () => {
    const proofA = proofOf('tokenwatch-probe-aaaaa');
    for (let i = 0; i < 57; i++) await put(`tokenwatch-probe-node-${i}`, { 'report.json': JSON.stringify(report(`node-${i}`, [entry({ namespace: 'team', serviceAccount: `app-${i % 30}` })])) });
    // node-a's proof copied into a report naming node-b, and into one whose name is not its node's.
    await put('tokenwatch-probe-node-b', { 'report.json': JSON.stringify(report('node-b', [multus])), proof: proofA });
    await put('tokenwatch-probe-elsewhere', { 'report.json': JSON.stringify(report('node-a', [multus])), proof: proofA });
    // A pod of another ServiceAccount on node-a.
    await put('tokenwatch-probe-node-a', { 'report.json': JSON.stringify(report('node-a', [multus])), proof: tokens.issue({ namespace: PROBE_NAMESPACE, pod: 'not-the-probe', audience: PROBE_AUDIENCE }) });
    expect(await findings()).toEqual([]);
    expect(dropped('report', 'no-proof')).toBe(57);
    expect(dropped('report', 'wrong-node')).toBe(1);
    expect(dropped('report', 'name-mismatch')).toBe(1);
    expect(dropped('report', 'wrong-identity')).toBe(1);
  });

  it('a proof for another audience, or of a deleted probe pod, is refused', async () => {
    await put('tokenwatch-probe-node-a', { 'report.json': JSON.stringify(report('node-a', [multus])), proof: proofOf('tokenwatch-probe-aaaaa', { audience: 'https://kubernetes.default.svc' }) });
    expect(await reader().read()).toEqual([]);
    const proof = proofOf('tokenwatch-probe-aaaaa');
    await kube.store.delete('Pod', PROBE_NAMESPACE, 'tokenwatch-probe-aaaaa');
    await put('tokenwatch-probe-node-a', { 'report.json': JSON.stringify(report('node-a', [multus])), proof });
    expect(await reader().read()).toEqual([]);
    expect(dropped('report', 'proof-rejected')).toBe(2);
  });

  it('a forged claim for healthy kube-system/coredns (its pod runs on node-b) from node-a: dropped, no finding', async () => {
    const coredns = entry({ namespace: 'kube-system', serviceAccount: 'coredns', pod: 'coredns-5d78c9869d-x2x8p', node: 'node-b' });
    const asIfLocal = entry({ namespace: 'kube-system', serviceAccount: 'coredns', pod: 'coredns-5d78c9869d-x2x8p' }, 1);
    const wrongUid = entry({ namespace: 'kube-system', serviceAccount: 'coredns', serviceAccountUid: 'forged-uid' }, 2);
    const ghost = entry({ namespace: 'kube-system', serviceAccount: 'no-such-sa' }, 3);
    await publishReport(kube.kubeConfig(), report('node-a', [coredns, asIfLocal, wrongUid, ghost, multus]), PROBE_NAMESPACE, proofOf('tokenwatch-probe-aaaaa'));
    const fs = await findings();
    expect(fs.map((f) => f.serviceAccount)).toEqual(['multus']);
    expect(dropped('entry', 'pod-not-on-node')).toBe(2);
    expect(dropped('entry', 'unknown-serviceaccount')).toBe(2);
  });

  it('a namespace <!channel> and a ServiceAccount <https://evil.example|click>: refused as not Kubernetes names', async () => {
    const bad = [entry({ namespace: '<!channel>', serviceAccount: 'multus' }), entry({ namespace: 'kube-system', serviceAccount: '<https://evil.example|click>' }, 1)];
    await publishReport(kube.kubeConfig(), report('node-a', [...bad, multus]), PROBE_NAMESPACE, proofOf('tokenwatch-probe-aaaaa'));
    const fs = await findings();
    expect(fs.map((f) => `${f.namespace}/${f.serviceAccount}`)).toEqual(['kube-system/multus']);
    expect(dropped('entry', 'invalid-name')).toBe(2);
    expect(JSON.stringify(fs)).not.toContain('evil.example');
  });
});
