/**
 * Restart verified by the node probe, end to end through `composeServe`, the real Bolt app (HTTP mode, signed
 * requests) and the loopback Slack and Kubernetes fakes: the probe's own code reads a temporary host directory holding
 * a Multus kubeconfig with a test JWT and publishes its ConfigMap to the fake; after an approved restart the
 * verification thread says whether the file was rewritten with a token issued after the restart (file, node, `iat`),
 * beside the audit-based verification that still follows.
 */
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { findingId } from '../../src/findings/build.js';
import { probeHost } from '../../src/probe/host.js';
import { PROBE_NAMESPACE, publishReport } from '../../src/probe/objects.js';
import { PROBE_AUDIENCE } from '../../src/probe/verify.js';
import { serveTokenReviews, type FakeTokenIssuer } from '../../src/sandbox/fakes/token-review.js';
import { assessProbeCheck } from '../../src/remediation/verify.js';
import { APPROVER, blockText, CLUSTER, OPS, REF, REQUESTER, startHarness, type Harness } from '../slack/harness.js';
import { boundToken, multusKubeconfig } from './jwt.js';

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY_S = 86_400;
const MULTUS = '/etc/cni/net.d/multus.d/multus.kubeconfig';
const NODE = 'ip-192-168-14-201.ec2.internal';

let h: Harness | undefined;
let host: string;
let issuer: FakeTokenIssuer | undefined;

/** The uid of kube-system/multus in the harness's cluster (the token's claim must match the live ServiceAccount). */
const MULTUS_SA_UID = (JSON.parse(readFileSync('examples/cluster-snapshot.json', 'utf8')) as { items: { kind: string; metadata: { namespace?: string; name: string; uid: string } }[] }).items.find(
  (o) => o.kind === 'ServiceAccount' && o.metadata.namespace === 'kube-system' && o.metadata.name === 'multus',
)!.metadata.uid;

beforeEach(() => {
  host = join(mkdtempSync(join(tmpdir(), 'tw-probe-verify-')), 'host');
  writeKubeconfig(boundToken({ iat: REF / 1000 - 40 * DAY_S, saUid: MULTUS_SA_UID }));
});
afterEach(async () => {
  issuer?.remove();
  issuer = undefined;
  await h?.stop();
  h = undefined;
});

function writeKubeconfig(token: string): void {
  const full = join(host, MULTUS);
  mkdirSync(dirname(full), { recursive: true });
  writeFileSync(full, multusKubeconfig(token), { mode: 0o600 });
  chmodSync(full, 0o600);
}

/**
 * One probe run on {@link NODE} at the service clock's time, published to the fake as the DaemonSet would: by the
 * probe pod on that node, with its projected token as proof.
 */
async function probe(x: Harness): Promise<void> {
  if (!issuer) {
    x.kube.store.put({ apiVersion: 'v1', kind: 'Pod', metadata: { namespace: PROBE_NAMESPACE, name: 'tokenwatch-probe-q9z8x', uid: 'probe-pod-uid' }, spec: { nodeName: NODE, serviceAccountName: 'tokenwatch-probe' } });
    issuer = serveTokenReviews(x.kube, x.now);
  }
  const report = await probeHost({ node: NODE, hostRoot: host, now: x.now() });
  await publishReport(x.kube.kubeConfig(), report, PROBE_NAMESPACE, issuer.issue({ namespace: PROBE_NAMESPACE, pod: 'tokenwatch-probe-q9z8x', audience: PROBE_AUDIENCE }));
}

/** Restart of the Multus DaemonSet requested and approved; the rollout completes. */
async function restart(x: Harness): Promise<void> {
  const alert = await x.alert('kube-system', 'multus');
  await x.click(REQUESTER, alert, 'tw_restart');
  const approval = x.slack.thread(OPS, alert.ts).find((m) => m.text.includes('approval needed'))!;
  await x.click(APPROVER, approval, 'tw_approve');
  expect((await x.serve.context.store.approvals.list({ cluster: CLUSTER }))[0]!.state).toBe('succeeded');
}

const thread = async (x: Harness) => x.slack.thread(OPS, (await x.alert('kube-system', 'multus')).ts);
const probeReplies = async (x: Harness) => (await thread(x)).filter((m) => m.text.includes('node probe:'));
const probeRows = async (x: Harness) => {
  const store = x.serve.context.store;
  return (await store.actions.ofApproval((await store.approvals.list({ cluster: CLUSTER }))[0]!.id)).filter((r) => r.action.startsWith('probe-check.'));
};

describe('restart verified by the node probe', () => {
  it('the file rewritten with a token issued after the restart: thread names file, node and iat; the audit verification follows', async () => {
    h = await startHarness();
    await probe(h);
    await h.poll();
    expect((await h.alert('kube-system', 'multus')).text).toContain('kube-system/multus');
    await restart(h);

    // The probe has not looked since the restart: nothing said yet.
    await h.poll();
    expect(await probeReplies(h)).toEqual([]);
    expect(await probeRows(h)).toEqual([]);

    // The new pod rewrote the kubeconfig; the probe's next run publishes it.
    h.advance(2 * MIN);
    const iat = Math.floor(h.now() / 1000) - 30;
    writeKubeconfig(boundToken({ iat, pod: 'kube-multus-ds-new01', saUid: MULTUS_SA_UID }));
    await probe(h);
    await h.poll();
    const issued = new Date(iat * 1000).toISOString();
    expect((await probeReplies(h)).map((m) => m.text)).toEqual([`🔎 [prod-eks] node probe: token file rewritten after the restart (${MULTUS} on node ${NODE}, token issued ${issued})`]);
    const reply = (await probeReplies(h))[0]!;
    expect(blockText(reply)).toContain('was rewritten after the restart');
    expect(blockText(reply)).toContain(`\`${MULTUS}\` on node \`${NODE}\`: rewritten, token issued <!date^${iat}^`);
    expect((await probeRows(h)).map((r) => [r.action, r.findingId, r.detail])).toEqual([
      ['probe-check.rewritten', findingId(CLUSTER, 'kube-system', 'multus', 'stale-token'), `${MULTUS} on node ${NODE}: rewritten, token issued ${issued}`],
    ]);

    // Said once.
    await probe(h);
    await h.poll();
    expect(await probeReplies(h)).toHaveLength(1);

    // The rewritten file is a copy again (static token file): however quiet the audit log stays, the alert is not
    // "resolved" after the settle period; its verification waits for the copy's fate (the recurrence).
    h.advance(2 * HOUR + 5 * MIN);
    await h.poll();
    const texts = (await thread(h)).map((m) => m.text);
    expect(texts.filter((t) => t.startsWith('✅ [prod-eks] verified'))).toEqual([]);
    expect((await h.serve.context.store.approvals.list({ cluster: 'prod-eks' }))[0]!.verification).toBeUndefined();
    expect(await probeReplies(h)).toHaveLength(1);
  });

  it('the file NOT rewritten after the restart (Multus thin plugin keeping its kubeconfig): said in the thread with the old iat', async () => {
    h = await startHarness();
    await probe(h);
    await h.poll();
    await restart(h);
    h.advance(2 * MIN);
    await probe(h); // same file, same old token
    await h.poll();
    const issued = new Date((REF / 1000 - 40 * DAY_S) * 1000).toISOString();
    expect((await probeReplies(h)).map((m) => m.text)).toEqual([`⚠️ [prod-eks] node probe: token file NOT rewritten after the restart (${MULTUS} on node ${NODE}, token issued ${issued})`]);
    const text = blockText((await probeReplies(h))[0]!);
    expect(text).toContain('was *NOT rewritten* after the restart');
    expect(text).toContain(`*not rewritten*, still a token issued <!date^${REF / 1000 - 40 * DAY_S}^`);
    expect(text).toContain('--cleanup-config-on-exit=true');
    expect((await probeRows(h)).map((r) => r.action)).toEqual(['probe-check.not-rewritten']);
  });

  it('without probe reports naming the ServiceAccount: no probe reply; after the settle period one probe-check.none row', async () => {
    h = await startHarness();
    await restart(h);
    h.advance(2 * MIN);
    await h.poll();
    expect(await probeRows(h)).toEqual([]);
    h.advance(2 * HOUR);
    await h.poll();
    expect(await probeReplies(h)).toEqual([]);
    expect((await probeRows(h)).map((r) => [r.action, r.detail])).toEqual([['probe-check.none', 'no node-probe report names the ServiceAccount']]);
  });
});

describe('assessProbeCheck', () => {
  const entry = (iat: number) => ({ path: MULTUS, pathHash: '0123456789abcdef', mtime: null, status: 'token' as const, tokenKind: 'bound' as const, namespace: 'kube-system', serviceAccount: 'multus', issuedAt: new Date(iat).toISOString() });
  const report = (node: string, probedAt: number, iat: number) => ({ version: 1 as const, node, probedAt: new Date(probedAt).toISOString(), globs: [], entries: [entry(iat)] });
  const subject = { namespace: 'kube-system', serviceAccount: 'multus' };
  const base = { subject, startedAt: REF, completedAt: REF + MIN, settleMs: 2 * HOUR };

  it('waits for every node naming the subject to report after completion, until the settle period; then decides with those that did', () => {
    const reports = [report('a', REF + 2 * MIN, REF + 30_000), report('b', REF - HOUR, REF - 40 * DAY_S * 1000)];
    expect(assessProbeCheck({ ...base, reports, now: REF + 3 * MIN })).toEqual({ outcome: 'pending', waitingFor: ['b'] });
    expect(assessProbeCheck({ ...base, reports, now: REF + 3 * HOUR })).toMatchObject({ outcome: 'rewritten', silent: ['b'], files: [{ node: 'a', rewritten: true }] });
    const both = [reports[0]!, report('b', REF + 2 * MIN, REF - 40 * DAY_S * 1000)];
    expect(assessProbeCheck({ ...base, reports: both, now: REF + 3 * MIN })).toMatchObject({ outcome: 'not-rewritten', silent: [], files: [{ node: 'a', rewritten: true }, { node: 'b', rewritten: false }] });
  });

  it('a token issued within the clock tolerance before the start counts as rewritten; nothing about the subject → none after the settle period', () => {
    expect(assessProbeCheck({ ...base, reports: [report('a', REF + 2 * MIN, REF - 30_000)], now: REF + 3 * MIN })).toMatchObject({ outcome: 'rewritten' });
    expect(assessProbeCheck({ ...base, reports: [], now: REF + 3 * MIN })).toEqual({ outcome: 'pending', waitingFor: [] });
    expect(assessProbeCheck({ ...base, reports: [], now: REF + 3 * HOUR })).toEqual({ outcome: 'none' });
  });
});
