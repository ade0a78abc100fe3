/**
 * One root cause, one calm alert — end to end through `tokenwatch serve`, the real Bolt app (HTTP mode, signed
 * requests) and the loopback fakes of Slack and Kubernetes, for the seed's case: the Multus DaemonSet's stale tokens,
 * then the 401s they cause, plus node-probe evidence of the token file on the node.
 *
 * - exactly one top-level alert for `kube-system/multus`, posted once with its final blocks (never edited right after:
 *   no "(edited)"), edited when the 401s start and saying so in its thread;
 * - its only primary button restarts `kube-system/kube-multus-ds` and says what it buys; Recreate ServiceAccount is
 *   not offered (a crafted click is refused with the reason and changes nothing), while the legacy-token alert of
 *   `ci/deployer` offers it in the overflow menu behind a confirm modal;
 * - after a verified restart the alert resolves once, with its 401 signal, in place.
 */
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { findingId } from '../../src/findings/build.js';
import { groupIdOf } from '../../src/findings/groups.js';
import { probeHost } from '../../src/probe/host.js';
import { PROBE_NAMESPACE, publishReport } from '../../src/probe/objects.js';
import { PROBE_AUDIENCE } from '../../src/probe/verify.js';
import { serveTokenReviews, type FakeTokenIssuer } from '../../src/sandbox/fakes/token-review.js';
import { validateMessage } from './blocks/validate.js';
import { boundToken, multusKubeconfig } from '../probe/jwt.js';
import { auditEvent } from '../sources/events.js';
import { APPROVER, blockText, buttonIds, CLUSTER, OPS, overflowLabels, prepareDir, REF, REQUESTER, startHarness, type Harness } from './harness.js';

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY_S = 86_400;
const NODE = 'ip-192-168-14-201.ec2.internal';
const MULTUS_FILE = '/etc/cni/net.d/multus.d/multus.kubeconfig';

let h: Harness | undefined;
let issuer: FakeTokenIssuer | undefined;
afterEach(async () => {
  issuer?.remove();
  issuer = undefined;
  await h?.stop();
  h = undefined;
});

const MULTUS_SA_UID = (JSON.parse(readFileSync('examples/cluster-snapshot.json', 'utf8')) as { items: { kind: string; metadata: { namespace?: string; name: string; uid: string } }[] }).items.find(
  (o) => o.kind === 'ServiceAccount' && o.metadata.namespace === 'kube-system' && o.metadata.name === 'multus',
)!.metadata.uid;

/** A scenario directory whose audit log holds the example without its 401s (stale tokens first). */
function staleFirstDir(): string {
  const dir = prepareDir();
  const path = join(dir, 'audit.log');
  writeFileSync(path, readFileSync(path, 'utf8').split('\n').filter((l) => !l.includes('"code":401')).join('\n'));
  return dir;
}

/** The node probe finds the Multus kubeconfig (a 40-day-old token) on NODE and publishes its report. */
async function probe(x: Harness, hostRoot: string): Promise<void> {
  if (!issuer) {
    x.kube.store.put({ apiVersion: 'v1', kind: 'Pod', metadata: { namespace: PROBE_NAMESPACE, name: 'tokenwatch-probe-q9z8x', uid: 'probe-pod-uid' }, spec: { nodeName: NODE, serviceAccountName: 'tokenwatch-probe' } });
    issuer = serveTokenReviews(x.kube, x.now);
  }
  const report = await probeHost({ node: NODE, hostRoot, now: x.now() });
  await publishReport(x.kube.kubeConfig(), report, PROBE_NAMESPACE, issuer.issue({ namespace: PROBE_NAMESPACE, pod: 'tokenwatch-probe-q9z8x', audience: PROBE_AUDIENCE }));
}

function probeHostDir(): string {
  const host = join(mkdtempSync(join(tmpdir(), 'tw-one-alert-')), 'host');
  const full = join(host, MULTUS_FILE);
  mkdirSync(dirname(full), { recursive: true });
  writeFileSync(full, multusKubeconfig(boundToken({ iat: REF / 1000 - 40 * DAY_S, saUid: MULTUS_SA_UID })), { mode: 0o600 });
  chmodSync(full, 0o600);
  return host;
}

const topLevel = (x: Harness) => x.slack.messages(OPS).filter((m) => !m.deleted);
const multusAlerts = (x: Harness) => topLevel(x).filter((m) => m.text.includes('kube-system/multus'));
const headerOf = (m: { blocks?: unknown[] }) => (m.blocks![0] as { text: { text: string } }).text.text;
/** Interactive elements of a message's actions blocks. */
const elements = (m: { blocks?: unknown[] }) =>
  ((m.blocks ?? []) as Array<{ type: string; elements?: Array<Record<string, unknown>> }>).filter((b) => b.type === 'actions').flatMap((b) => b.elements ?? []);

describe('one alert per root cause', { timeout: 120_000 }, () => {
  it('stale tokens, then 401s, plus node-probe evidence: one alert, one primary Restart, no Recreate; resolved once after a verified restart', async () => {
    const host = probeHostDir();
    h = await startHarness({ dir: staleFirstDir() });
    const store = h.serve.context.store;

    // Stale tokens only: one alert, posted once with its final blocks — no chat.update of it yet, no "(edited)".
    expect(multusAlerts(h)).toHaveLength(1);
    let alert = await h.alert('kube-system', 'multus');
    expect(alert.edits).toEqual([]);
    expect(h.slack.callsTo('chat.update').filter((c) => c.args.ts === alert.ts)).toEqual([]);
    expect(headerOf(alert)).toBe('🔴 Critical · prod-eks · kube-system/multus — rejection date passed');
    expect(validateMessage(alert)).toEqual([]);

    // The probe sees the token file on the node: evidence on the same alert.
    await probe(h, host);
    h.advance(5 * MIN);
    await h.poll();
    expect(blockText(await h.alert('kube-system', 'multus'))).toContain('token file seen by the node probe');

    // Then 401s of the same clients: the same message, edited, and its thread says the signal started. They come from
    // the Multus pod whose stale token's rejection date has passed (192.168.90.44), so their attribution by address and
    // user agent is corroborated (src/findings/build.ts attributionBasis) and the alert may say requests fail.
    const t = h.now() - MIN;
    h.appendAudit(
      Array.from({ length: 3 }, (_, i) => auditEvent({ auditID: `u401-${i}`, time: t + i * 1000, kind: 'unauthorized', sourceIP: '192.168.90.44' })),
    );
    await h.poll();
    expect((await store.findings.get(findingId(CLUSTER, 'kube-system', 'multus', 'unauthorized')))?.status).toBe('open');
    expect(multusAlerts(h)).toHaveLength(1);
    alert = await h.alert('kube-system', 'multus');
    expect(headerOf(alert)).toBe('🔴 Critical · prod-eks · kube-system/multus — requests now fail with 401');
    expect(blockText(alert)).toContain('*Signals:* requests rejected with 401 · stale tokens · token file seen by the node probe');
    expect(blockText(alert)).not.toContain('0 of 6'); // pods come from the stale signal, not "Pods affected 0 of 6"
    const started = h.slack.thread(OPS, alert.ts).filter((m) => m.text.includes('requests rejected with 401 started'));
    expect(started).toHaveLength(1);
    expect(validateMessage(alert)).toEqual([]);

    // One set of actions: the only primary button restarts the DaemonSet; no Recreate anywhere on this alert. The
    // node probe saw the token copied into a file on the node, so the restart is a stop-gap: the headline fix is the
    // cause's (the thick plugin), and the button says the stale tokens will come back.
    const primary = elements(alert).filter((e) => e['style'] === 'primary');
    expect(primary.map((e) => [e['action_id'], (e['text'] as { text: string }).text])).toEqual([['tw_restart', 'Restart DaemonSet kube-multus-ds — buys 90 days, will recur']]);
    expect(blockText(alert)).toContain('*Fix:* Move to the Multus thick plugin (multus-daemon; on EKS a v4.0.2-eksbuild.1 or later _thick image).');
    expect(blockText(alert)).toContain('*Stop-gap:* restart DaemonSet `kube-system/kube-multus-ds`: fresh tokens for 90 days, then it recurs (the node probe found its token copied into a file on the node');
    expect(buttonIds(alert)).toEqual(['tw_restart', 'tw_more']);
    expect(overflowLabels(alert)).toEqual(['Snooze 1 day', 'Snooze 7 days', 'Details']);
    expect(blockText(alert)).not.toContain('Recreate');

    // /tokens status: one line for this alert, linked, and no buttons.
    await h.command(`status ${CLUSTER}`, REQUESTER);
    const status = h.slack.ephemerals({ user: REQUESTER }).at(-1)!;
    expect(elements(status)).toEqual([]);
    const link = h.slack.callsTo('chat.getPermalink').find((c) => c.args.message_ts === alert.ts)?.response['permalink'] as string;
    expect(link).toBeTruthy();
    expect(blockText(status).split(link)).toHaveLength(2);

    // A forged or stale Recreate click (the old button's action id, an id the server computes for this finding) is
    // refused with the reason and changes nothing.
    const forged = h.bot.parts.ids.idFor(findingId(CLUSTER, 'kube-system', 'multus', 'stale-token'), { action: 'recreate-serviceaccount' });
    await h.click(REQUESTER, alert, 'tw_recreate_sa', { value: forged });
    expect(h.ephemerals(REQUESTER).at(-1)).toMatch(/^⛔ Recreating ServiceAccount `kube-system\/multus` is not a fix for this alert \(its token is read from a file on the node/);
    expect(h.slack.views()).toEqual([]);
    expect(await store.approvals.list({ cluster: CLUSTER })).toEqual([]);

    // The restart, approved; verified after the settle period with neither stale use nor 401s: resolved once, in place.
    await h.click(REQUESTER, alert, 'tw_restart');
    const approval = h.slack.thread(OPS, alert.ts).find((m) => m.text.includes('approval needed'))!;
    await h.click(APPROVER, approval, 'tw_approve');
    expect((await store.approvals.list({ cluster: CLUSTER }))[0]!.state).toBe('succeeded');
    h.advance(2 * HOUR + MIN);
    await h.poll();
    h.advance(HOUR);
    await h.poll();
    alert = await h.alert('kube-system', 'multus');
    expect(headerOf(alert)).toBe('✅ Resolved · prod-eks · kube-system/multus');
    expect(blockText(alert)).toContain('*Signals:* requests rejected with 401 · stale tokens');
    expect(elements(alert).map((e) => e['type'])).toEqual(['overflow']);
    expect(overflowLabels(alert)).toEqual(['Details']);
    // Resolved once: of every version the message had, only the current one is the resolved variant; later polls
    // leave it alone.
    expect([...alert.edits.map((e) => headerOf(e)), headerOf(alert)].filter((x) => x.startsWith('✅'))).toHaveLength(1);
    const edits = alert.edits.length;
    h.advance(HOUR);
    await h.poll();
    expect((await h.alert('kube-system', 'multus')).edits).toHaveLength(edits);
    for (const kind of ['stale-token', 'unauthorized'] as const) expect((await store.findings.get(findingId(CLUSTER, 'kube-system', 'multus', kind)))!.status).toBe('resolved');
    expect(multusAlerts(h)).toHaveLength(1);
    expect((await store.slackRefs.getAlertRef(groupIdOf({ cluster: CLUSTER, namespace: 'kube-system', serviceAccount: 'multus' })))?.signals).toEqual([]);
  });

  it('a legacy Secret token: Recreate ServiceAccount only in the overflow menu, behind a confirm modal saying what breaks', async () => {
    h = await startHarness();
    const deployer = await h.alert('ci', 'deployer');
    // No workload: no Restart button at all.
    expect(buttonIds(deployer)).toEqual(['tw_more']);
    expect(overflowLabels(deployer)).toEqual(['Recreate ServiceAccount…', 'Snooze 1 day', 'Snooze 7 days', 'Details']);
    await h.click(REQUESTER, deployer, 'tw_recreate_sa');
    // Choosing it opens the modal; nothing is requested until it is submitted.
    const views = h.slack.views();
    expect(views.map((v) => v.view.callback_id)).toEqual(['tw_recreate_confirm']);
    expect(JSON.stringify(views[0]!.view.blocks)).toContain('*What breaks:* its new UID invalidates every token issued for it');
    expect(await h.serve.context.store.approvals.list({ cluster: CLUSTER })).toEqual([]);
    // Checked again at submission: had the legacy token's signal been resolved meanwhile, nothing is requested.
    const legacyId = findingId(CLUSTER, 'ci', 'deployer', 'legacy-token');
    await h.serve.context.store.findings.setStatus(legacyId, { status: 'resolved', reason: 'quiet' }, h.now());
    await h.submitView(REQUESTER, 'tw_recreate_confirm');
    expect(h.ephemerals(REQUESTER).at(-1)).toMatch(/^⛔ This finding is already resolved, so nothing was requested/);
    expect(await h.serve.context.store.approvals.list({ cluster: CLUSTER })).toEqual([]);
    // Seen again: chosen again from the menu, a new confirmation, submitted.
    await h.serve.context.store.findings.setStatus(legacyId, { status: 'open' }, h.now());
    await h.click(REQUESTER, deployer, 'tw_recreate_sa');
    expect(h.slack.views()).toHaveLength(2);
    await h.submitView(REQUESTER, 'tw_recreate_confirm');
    const approvals = await h.serve.context.store.approvals.list({ cluster: CLUSTER });
    expect(approvals.map((a) => [a.action, a.target.kind, `${a.target.namespace}/${a.target.name}`, a.requester])).toEqual([['recreate-serviceaccount', 'ServiceAccount', 'ci/deployer', REQUESTER]]);
    expect(h.slack.thread(OPS, deployer.ts).some((m) => m.text.includes('approval needed: ServiceAccount recreation of ServiceAccount ci/deployer'))).toBe(true);
  });

  it('the alerts of the example: one per ServiceAccount, none edited on its first post, every payload within limits', async () => {
    h = await startHarness();
    const alerts = topLevel(h);
    expect(alerts.map((m) => m.text.split(' — ')[0])).toEqual([
      '🔴 [prod-eks] critical: kube-system/multus',
      '🔵 [prod-eks] info: flux-system/helm-controller',
      '🔵 [prod-eks] info: logging/fluent-bit',
      '🔵 [prod-eks] info: ci/deployer',
    ]);
    for (const m of alerts) {
      expect(m.edits).toEqual([]);
      expect(validateMessage(m)).toEqual([]);
    }
    expect(h.slack.callsTo('chat.update')).toEqual([]);
  });
});
