/**
 * At most one open action (requested / approved / running) per target, whichever finding, message or
 * replica the click comes from — through the real Bolt app (HTTP mode), the fake Slack and the fake Kubernetes API.
 * The Multus example has two findings for kube-system/multus (stale token, and the 401s attributed to it), shown as
 * one alert with "Restart DaemonSet kube-multus-ds"; the restart button ids of each finding (an alert of an earlier
 * version had one per finding) still resolve, so requests arrive through both.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { findingId } from '../../src/findings/build.js';
import { auditEvent } from '../sources/events.js';
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
const approvalsIn = (x: Harness, ts: string) => x.slack.thread(OPS, ts).filter((m) => m.text.includes('approval needed'));
const DS = { kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds' } as const;
/** The restart button id of the Multus 401 finding (what its own alert carried before alerts were grouped). */
const restartOf401 = (x: Harness) => x.bot.parts.ids.idFor(findingId(CLUSTER, 'kube-system', 'multus', 'unauthorized'), { action: 'restart', workload: DS });
/** Slack's permalink of a thread reply (what chat.getPermalink returns). */
const permalinkOf = (m: { ts: string; threadTs?: string }) =>
  `https://fake-workspace.slack.com/archives/${OPS}/p${m.ts.replace('.', '')}?thread_ts=${m.threadTs}&cid=${OPS}`;

describe('one open action per target', () => {
  it('a restart requested through the 401 finding while one through the stale one is open is refused with a link; one PATCH', async () => {
    h = await startHarness();
    const stale = await h.alert('kube-system', 'multus');
    expect(buttonIds(stale)).toContain('tw_restart');
    await h.click(REQUESTER, stale, 'tw_restart');
    const approval = approvalIn(h, stale.ts)!;
    await h.click(OTHER, stale, 'tw_restart', { value: restartOf401(h) });
    expect(approvalsIn(h, stale.ts)).toHaveLength(1);
    expect(h.ephemerals(OTHER)).toEqual([
      `⛔ A restart of DaemonSet \`kube-system/kube-multus-ds\` is already open (requested by <@${REQUESTER}>, waiting for approval), so nothing new was requested. <${permalinkOf(approval)}|See the open request>.`,
    ]);
    // The same from the same alert by the same user, after approval (running / done states block too until done).
    await h.click(APPROVER, approval, 'tw_approve');
    expect(realPatches(h)).toHaveLength(1);
    const store = h.serve.context.store;
    expect((await store.approvals.list()).map((a) => [a.target.findingId === stale.ts, a.state])).toEqual([[false, 'succeeded']]);
    expect((await store.actions.list(CLUSTER)).filter((r) => r.action === 'restart.refused').map((r) => r.actor)).toEqual([OTHER]);
  });

  it('a restart while a recreation of its ServiceAccount is open, and the reverse, are refused with a link', async () => {
    h = await startHarness();
    // Recreating is offered where a legacy Secret token must be revoked: fluent-bit's clients also use one.
    h.appendAudit([auditEvent({ auditID: 'legacy-fb-1', time: h.now() - MIN, kind: 'legacy', namespace: 'logging', serviceAccount: 'fluent-bit' })]);
    await h.poll();
    const alert = await h.alert('logging', 'fluent-bit');
    // Recreation first (overflow menu, confirm modal), then a restart of a workload of that ServiceAccount.
    await h.click(REQUESTER, alert, 'tw_recreate_sa');
    await h.submitView(REQUESTER, 'tw_recreate_confirm');
    const recreation = approvalIn(h, alert.ts)!;
    await h.click(OTHER, alert, 'tw_restart');
    expect(h.ephemerals(OTHER).at(-1)).toBe(
      `⛔ A ServiceAccount recreation of ServiceAccount \`logging/fluent-bit\` is open (requested by <@${REQUESTER}>, waiting for approval), so a restart of DaemonSet \`logging/fluent-bit\` cannot be requested until it ends. <${permalinkOf(recreation)}|See the open request>.`,
    );
    // Withdrawn: the restart can now be requested; then a recreation is refused.
    await h.click(REQUESTER, recreation, 'tw_reject');
    await h.click(OTHER, alert, 'tw_restart');
    const restart = approvalsIn(h, alert.ts).at(-1)!;
    await h.click(REQUESTER, alert, 'tw_recreate_sa');
    await h.submitView(REQUESTER, 'tw_recreate_confirm');
    expect(h.ephemerals(REQUESTER).at(-1)).toBe(
      `⛔ A restart of DaemonSet \`logging/fluent-bit\` is open (requested by <@${OTHER}>, waiting for approval), so a ServiceAccount recreation of ServiceAccount \`logging/fluent-bit\` cannot be requested until it ends. <${permalinkOf(restart)}|See the open request>.`,
    );
    expect((await h.serve.context.store.approvals.list()).map((a) => [a.action, a.state])).toEqual([
      ['recreate-serviceaccount', 'rejected'],
      ['restart', 'requested'],
    ]);
    expect(h.kube.requestsMatching({ method: 'DELETE', resource: 'serviceaccounts' }).filter((r) => !r.dryRun)).toEqual([]);
  });

  it('an expired request does not block: the new request is stored and the old message says expired', async () => {
    h = await startHarness();
    const stale = await h.alert('kube-system', 'multus');
    await h.click(REQUESTER, stale, 'tw_restart');
    const first = approvalIn(h, stale.ts)!;
    h.advance(31 * MIN);
    await h.click(OTHER, stale, 'tw_restart', { value: restartOf401(h) });
    // The new request's message (the old one now says expired).
    expect(approvalsIn(h, stale.ts).map((m) => m.ts)).not.toContain(first.ts);
    expect(approvalsIn(h, stale.ts)).toHaveLength(1);
    expect(h.slack.message(OPS, first.ts)!.text).toBe('⌛ Expired [prod-eks]: restart of DaemonSet kube-system/kube-multus-ds');
    const store = h.serve.context.store;
    expect((await store.approvals.list()).map((a) => a.state)).toEqual(['expired', 'requested']);
    const old = (await store.approvals.list())[0]!;
    expect((await store.actions.ofApproval(old.id)).map((r) => [r.action, r.result])).toEqual([
      ['restart.requested', 'requested'],
      ['restart.expired', 'expired'],
    ]);
    const events = h.kube.requestsMatching({ method: 'POST', resource: 'events' }).map((r) => (r.body as { message: string }).message);
    expect(events.filter((m) => m.includes(`expired without a decision (tokenwatch approval ${old.id})`))).toHaveLength(1);
  });

  it('20 concurrent requests through both findings on two replicas sharing one store: 1 request, 1 PATCH', async () => {
    h = await startHarness();
    follower = await startHarness({ dir: h.dir, fakeSlack: h.slack, kube: h.kube, owner: () => false });
    const stale = await h.alert('kube-system', 'multus');
    const other = restartOf401(h);
    const users = Array.from({ length: 20 }, (_, i) => `U0CLICK${String(i).padStart(3, '0')}`);
    const results = await Promise.all(
      users.map(async (u, i) => await (i % 2 === 0 ? h! : follower!).click(u, stale, 'tw_restart', { wait: false, ...(i % 4 < 2 ? {} : { value: other }) })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(200));
    await Promise.all([h.bot.idle(), follower.bot.idle()]);
    const store = h.serve.context.store;
    const approvals = await store.approvals.list();
    expect(approvals).toHaveLength(1);
    const refused = users.flatMap((u) => h!.ephemerals(u)).filter((e) => e.startsWith('⛔'));
    expect(refused).toHaveLength(19);
    for (const r of refused) expect(r).toMatch(/^⛔ A restart of DaemonSet `kube-system\/kube-multus-ds` is already open \(requested by <@U0CLICK\d{3}>, waiting for approval\), so nothing new was requested\. /);
    // Which of the concurrent requests wins is not fixed (each waits for the store's answers, so they interleave): the
    // stale finding's request posts its approval message in the alert's thread, the 401 finding's (it has no alert of
    // its own here) in the channel. Exactly one, wherever it is.
    const approval = [...h.slack.messages(OPS), ...h.slack.messages(OPS).flatMap((m) => approvalsIn(h!, m.ts))].filter((m) => m.text.includes('approval needed'));
    expect(approval).toHaveLength(1);
    await h.click(APPROVER, approval[0]!, 'tw_approve');
    for (let i = 0; i < 300 && (await store.approvals.list())[0]!.state !== 'succeeded'; i++) await new Promise((r) => setTimeout(r, 10));
    expect((await store.approvals.list())[0]!.state).toBe('succeeded');
    expect(realPatches(h)).toHaveLength(1);
    expect(blockText(h.slack.message(OPS, approval[0]!.ts)!)).toContain('Approved by <@U0APPROVE1>');
  });
});
