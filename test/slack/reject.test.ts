/**
 * Withdrawing one's own request says "Withdrawn by @user" (not "Rejected") with an ephemeral
 * confirmation; Reject by an approver opens a modal (views.open) asking an optional reason, shown in the thread's
 * approval message and the action log; `/tokens history` tells withdrawn from rejected. Real Bolt app (HTTP mode),
 * fake Slack (views.open, view_submission), fake Kubernetes API.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { sendBlockAction } from '../../src/sandbox/fakes/slack.js';
import { viewSubmissionPayload } from '../fakes/slack-requests.js';
import { APPROVER, blockText, buttonIds, CLUSTER, OPS, REQUESTER, SECRET, startHarness, type Harness } from './harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

async function requestRestart(x: Harness) {
  const alert = await x.alert('kube-system', 'multus');
  await x.click(REQUESTER, alert, 'tw_restart');
  return x.slack.thread(OPS, alert.ts).find((m) => m.text.includes('approval needed'))!;
}

describe('withdraw and reject', () => {
  it('the requester withdraws: "Withdrawn by", an ephemeral confirmation, no modal; history says withdrawn', async () => {
    h = await startHarness();
    const approval = await requestRestart(h);
    await h.click(REQUESTER, approval, 'tw_reject');
    expect(h.slack.views()).toEqual([]);
    const msg = h.slack.message(OPS, approval.ts)!;
    expect(msg.text).toBe('↩️ Withdrawn [prod-eks]: restart of DaemonSet kube-system/kube-multus-ds by U0REQUEST1');
    expect(blockText(msg)).toContain('Withdrawn by <@U0REQUEST1>');
    expect(blockText(msg)).not.toContain('Rejected');
    expect(buttonIds(msg)).toEqual([]);
    expect(h.ephemerals(REQUESTER).at(-1)).toBe('You withdrew your request for the restart of DaemonSet kube-system/kube-multus-ds; nothing was changed.');
    const store = h.serve.context.store;
    const a = (await store.approvals.list())[0]!;
    expect((await store.actions.ofApproval(a.id)).at(-1)).toMatchObject({ action: 'restart.rejected', actor: REQUESTER, detail: 'restart of DaemonSet kube-system/kube-multus-ds in prod-eks withdrawn' });
    await h.command(`history ${CLUSTER}`, REQUESTER);
    const history = h.slack.ephemerals({ user: REQUESTER }).at(-1)!;
    expect(blockText(history)).toContain('*withdrawn* by the requester');
  });

  it('an approver rejects through the modal with a reason: shown in the thread and the action log; history says rejected by', async () => {
    h = await startHarness();
    const approval = await requestRestart(h);
    await h.click(APPROVER, approval, 'tw_reject');
    // The click opened the modal; nothing is decided yet.
    const views = h.slack.views();
    expect(views).toHaveLength(1);
    expect(views[0]!.view.callback_id).toBe('tw_reject_reason');
    expect(JSON.stringify(views[0]!.view.blocks)).toContain('Reason (optional, shown in the thread)');
    const store = h.serve.context.store;
    expect((await store.approvals.list())[0]!.state).toBe('requested');
    const res = await sendBlockAction(h.bot.eventsUrl!, SECRET, viewSubmissionPayload({ user: APPROVER, view: views[0]!, values: { tw_reason: { tw_reason: 'not during the CNI upgrade window' } } }));
    expect(res.status).toBe(200);
    await h.bot.idle();
    const a = (await store.approvals.list())[0]!;
    expect(a.state).toBe('rejected');
    expect(a.votes).toEqual([{ user: APPROVER, vote: 'reject', at: expect.any(Number), reason: 'not during the CNI upgrade window' }]);
    const msg = h.slack.message(OPS, approval.ts)!;
    expect(msg.text).toBe('❌ Rejected [prod-eks]: restart of DaemonSet kube-system/kube-multus-ds by U0APPROVE1');
    expect(blockText(msg)).toContain('Rejected by <@U0APPROVE1>');
    expect(blockText(msg)).toContain('“not during the CNI upgrade window”');
    expect((await store.actions.ofApproval(a.id)).at(-1)).toMatchObject({ action: 'restart.rejected', actor: APPROVER, detail: 'restart of DaemonSet kube-system/kube-multus-ds in prod-eks rejected: not during the CNI upgrade window' });
    expect(h.kube.requestsMatching({ method: 'PATCH', resource: 'daemonsets' }).filter((r) => !r.dryRun)).toEqual([]);
    await h.command(`history ${CLUSTER}`, REQUESTER);
    const history = blockText(h.slack.ephemerals({ user: REQUESTER }).at(-1)!);
    expect(history).toContain('*rejected* by <@U0APPROVE1>: not during the CNI upgrade window');
  });

  it('a modal submitted without a reason rejects without one; a second submission is refused as already decided', async () => {
    h = await startHarness();
    const approval = await requestRestart(h);
    await h.click(APPROVER, approval, 'tw_reject');
    const view = h.slack.views()[0]!;
    await sendBlockAction(h.bot.eventsUrl!, SECRET, viewSubmissionPayload({ user: APPROVER, view, values: { tw_reason: { tw_reason: null } } }));
    await h.bot.idle();
    const a = (await h.serve.context.store.approvals.list())[0]!;
    expect(a.state).toBe('rejected');
    expect(a.votes[0]!.reason).toBeUndefined();
    await sendBlockAction(h.bot.eventsUrl!, SECRET, viewSubmissionPayload({ user: APPROVER, view, values: { tw_reason: { tw_reason: 'again' } } }));
    await h.bot.idle();
    expect(h.ephemerals(APPROVER).at(-1)).toMatch(/^⛔ This restart was already rejected by <@U0APPROVE1>/);
  });
});

describe('/tokens history', () => {
  it('shows a restart whose verification was superseded by a later restart of the same finding', async () => {
    h = await startHarness();
    // Two restarts of kube-multus-ds one after the other (the first is done, so the second may be requested).
    for (let i = 0; i < 2; i++) {
      const approval = await requestRestart(h);
      await h.click(APPROVER, approval, 'tw_approve');
      expect((await h.serve.context.store.approvals.list()).at(-1)!.state).toBe('succeeded');
    }
    await h.poll();
    await h.command(`history ${CLUSTER}`, REQUESTER);
    const history = blockText(h.slack.ephemerals({ user: REQUESTER }).at(-1)!);
    expect(history).toContain('*succeeded*: verification: superseded by a later action on the same finding');
  });
});
