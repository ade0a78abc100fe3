/**
 * At most one open action (requested / approved / running) per target, whichever finding, message or
 * replica the click comes from — through the real Bolt app (HTTP mode), the fake Slack and the fake Kubernetes API.
 * The Multus example has two findings for kube-system/multus (stale token, and the 401s attributed to it), each with
 * "Restart DaemonSet kube-multus-ds".
 */
import { afterEach, describe, expect, it } from 'vitest';
import { APPROVER, blockText, buttonIds, CLUSTER, OPS, REQUESTER, startHarness, type Harness } from './harness.js';

const MIN = 60_000;
const OTHER = 'U0REQUEST2';

let h: Harness | undefined;
let follower: Harness | undefined;
afterEach(async () => {
  await follower?.stop({ keepFakes: true });
  follower = undefined;
  await h?.stop();
  h = undefined;
});

const realPatches = (x: Harness) => x.kube.requestsMatching({ method: 'PATCH', resource: 'daemonsets' }).filter((r) => !r.dryRun);
const approvalIn = (x: Harness, ts: string) => x.slack.thread(OPS, ts).find((m) => m.text.includes('approval needed'));
/** Slack's permalink of a thread reply (what chat.getPermalink returns). */
const permalinkOf = (m: { ts: string; threadTs?: string }) =>
  `https://fake-workspace.slack.com/archives/${OPS}/p${m.ts.replace('.', '')}?thread_ts=${m.threadTs}&cid=${OPS}`;

describe('one open action per target', () => {
  it('a restart requested from the 401 alert while one from the stale alert is open is refused with a link; one PATCH', async () => {
    h = await startHarness();
    const stale = h.alert('kube-system', 'multus');
    const unauthorized = h.alert('kube-system', 'multus', 'unauthorized');
    expect(buttonIds(unauthorized)).toContain('tw_restart');
    await h.click(REQUESTER, stale, 'tw_restart');
    const approval = approvalIn(h, stale.ts)!;
    await h.click(OTHER, unauthorized, 'tw_restart');
    expect(approvalIn(h, unauthorized.ts)).toBeUndefined();
    expect(h.ephemerals(OTHER)).toEqual([
      `⛔ A restart of DaemonSet \`kube-system/kube-multus-ds\` is already open (requested by <@${REQUESTER}>, waiting for approval), so nothing new was requested. <${permalinkOf(approval)}|See the open request>.`,
    ]);
    // The same from the same alert by the same user, after approval (running / done states block too until done).
    await h.click(APPROVER, approval, 'tw_approve');
    expect(realPatches(h)).toHaveLength(1);
    const store = h.serve.context.store;
    expect(store.listApprovals().map((a) => [a.target.findingId === stale.ts, a.state])).toEqual([[false, 'succeeded']]);
    expect(store.listActions(CLUSTER).filter((r) => r.action === 'restart.refused').map((r) => r.actor)).toEqual([OTHER]);
  });

  it('a restart while a recreation of its ServiceAccount is open, and the reverse, are refused with a link', async () => {
    h = await startHarness();
    const stale = h.alert('kube-system', 'multus');
    const unauthorized = h.alert('kube-system', 'multus', 'unauthorized');
    // Recreation first, then a restart of a workload of that ServiceAccount (from the other finding).
    await h.click(REQUESTER, stale, 'tw_recreate_sa');
    const recreation = approvalIn(h, stale.ts)!;
    await h.click(OTHER, unauthorized, 'tw_restart');
    expect(h.ephemerals(OTHER).at(-1)).toBe(
      `⛔ A ServiceAccount recreation of ServiceAccount \`kube-system/multus\` is open (requested by <@${REQUESTER}>, waiting for approval), so a restart of DaemonSet \`kube-system/kube-multus-ds\` cannot be requested until it ends. <${permalinkOf(recreation)}|See the open request>.`,
    );
    // Withdrawn: the restart can now be requested; then a recreation is refused.
    await h.click(REQUESTER, recreation, 'tw_reject');
    await h.click(OTHER, unauthorized, 'tw_restart');
    const restart = approvalIn(h, unauthorized.ts)!;
    await h.click(REQUESTER, stale, 'tw_recreate_sa');
    expect(h.ephemerals(REQUESTER).at(-1)).toBe(
      `⛔ A restart of DaemonSet \`kube-system/kube-multus-ds\` is open (requested by <@${OTHER}>, waiting for approval), so a ServiceAccount recreation of ServiceAccount \`kube-system/multus\` cannot be requested until it ends. <${permalinkOf(restart)}|See the open request>.`,
    );
    expect(h.serve.context.store.listApprovals().map((a) => [a.action, a.state])).toEqual([
      ['recreate-serviceaccount', 'rejected'],
      ['restart', 'requested'],
    ]);
    expect(h.kube.requestsMatching({ method: 'DELETE', resource: 'serviceaccounts' }).filter((r) => !r.dryRun)).toEqual([]);
  });

  it('an expired request does not block: the new request is stored and the old message says expired', async () => {
    h = await startHarness();
    const stale = h.alert('kube-system', 'multus');
    await h.click(REQUESTER, stale, 'tw_restart');
    const first = approvalIn(h, stale.ts)!;
    h.advance(31 * MIN);
    const unauthorized = h.alert('kube-system', 'multus', 'unauthorized');
    await h.click(OTHER, unauthorized, 'tw_restart');
    expect(approvalIn(h, unauthorized.ts)).toBeDefined();
    expect(h.slack.message(OPS, first.ts)!.text).toBe('⌛ Expired [prod-eks]: restart of DaemonSet kube-system/kube-multus-ds');
    const store = h.serve.context.store;
    expect(store.listApprovals().map((a) => a.state)).toEqual(['expired', 'requested']);
    const old = store.listApprovals()[0]!;
    expect(store.listApprovalActions(old.id).map((r) => [r.action, r.result])).toEqual([
      ['restart.requested', 'requested'],
      ['restart.expired', 'expired'],
    ]);
    const events = h.kube.requestsMatching({ method: 'POST', resource: 'events' }).map((r) => (r.body as { message: string }).message);
    expect(events.filter((m) => m.includes(`expired without a decision (tokenwatch approval ${old.id})`))).toHaveLength(1);
  });

  it('20 concurrent requests from both alerts on two replicas sharing one store: 1 request, 1 PATCH', async () => {
    h = await startHarness();
    follower = await startHarness({ dir: h.dir, fakeSlack: h.slack, kube: h.kube, isLeader: () => false });
    const stale = h.alert('kube-system', 'multus');
    const unauthorized = h.alert('kube-system', 'multus', 'unauthorized');
    const users = Array.from({ length: 20 }, (_, i) => `U0CLICK${String(i).padStart(3, '0')}`);
    const results = await Promise.all(
      users.map((u, i) => (i % 2 === 0 ? h! : follower!).click(u, i % 4 < 2 ? stale : unauthorized, 'tw_restart', { wait: false })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(200));
    await Promise.all([h.bot.idle(), follower.bot.idle()]);
    const store = h.serve.context.store;
    const approvals = store.listApprovals();
    expect(approvals).toHaveLength(1);
    const refused = users.flatMap((u) => h!.ephemerals(u)).filter((e) => e.startsWith('⛔'));
    expect(refused).toHaveLength(19);
    for (const r of refused) expect(r).toMatch(/^⛔ A restart of DaemonSet `kube-system\/kube-multus-ds` is already open \(requested by <@U0CLICK\d{3}>, waiting for approval\), so nothing new was requested\. /);
    const approval = [...h.slack.thread(OPS, stale.ts), ...h.slack.thread(OPS, unauthorized.ts)].filter((m) => m.text.includes('approval needed'));
    expect(approval).toHaveLength(1);
    await h.click(APPROVER, approval[0]!, 'tw_approve');
    for (let i = 0; i < 300 && store.listApprovals()[0]!.state !== 'succeeded'; i++) await new Promise((r) => setTimeout(r, 10));
    expect(store.listApprovals()[0]!.state).toBe('succeeded');
    expect(realPatches(h)).toHaveLength(1);
    expect(blockText(h.slack.message(OPS, approval[0]!.ts)!)).toContain('Approved by <@U0APPROVE1>');
  });
});
