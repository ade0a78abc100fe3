/**
 * The approval-gated remediation flow end to end: real `tokenwatch serve` + Bolt (HTTP mode) against the fake
 * Slack and the fake Kubernetes API server, driven by the bundled Multus example (see harness.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { RESTARTED_AT } from '../../src/remediation/kube-remediator.js';
import { openStore } from '../../src/store/index.js';
import { auditEvent } from '../sources/events.js';
import {
  APPROVER,
  blockText,
  buttonIds,
  CLUSTER,
  ELSEWHERE,
  ONCALL_APPROVER,
  OPS,
  OUTSIDER,
  overflowLabels,
  overflowOption,
  REQUESTER,
  staleLine,
  startHarness,
  type Harness,
} from './harness.js';

const MIN = 60_000;
const HOUR = 60 * MIN;

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

const openStoreFor = async (dir: string) => await openStore(join(dir, 'tw.db'));
const realPatches = (x: Harness) => x.kube.requestsMatching({ method: 'PATCH', resource: 'daemonsets' }).filter((r) => !r.dryRun);
const eventReasons = (x: Harness) =>
  x.kube.requestsMatching({ method: 'POST', resource: 'events' }).map((r) => (r.body as { reason: string; type: string }).reason + '/' + (r.body as { type: string }).type);

/** Requests a restart of kube-multus-ds as REQUESTER; returns the alert and the approval message. */
async function requestRestart(x: Harness) {
  const alert = await x.alert('kube-system', 'multus');
  const res = await x.click(REQUESTER, alert, 'tw_restart');
  expect(res.status).toBe(200);
  const thread = x.slack.thread(OPS, alert.ts);
  const approval = thread.find((m) => m.text.includes('approval needed'));
  if (!approval) throw new Error(`no approval message in ${JSON.stringify(thread.map((m) => m.text))}`);
  return { alert, approval };
}

describe('restart flow', () => {
  it('request by one user, approval by another: dry run, one strategic-merge PATCH, progress, events, action log, verification', async () => {
    // The rollout waits for the first progress message, so there are edits to check (a rollout done at the first read,
    // possible on a loaded machine, posts only its end).
    h = await startHarness({ rollout: { stepMs: 150, podsPerStep: 1, afterFirstProgress: true } });
    const { alert, approval } = await requestRestart(h);

    // The request: a dry run only, an approval message naming requester, exact target, approvers (group expanded), expiry.
    const dry = h.kube.requestsMatching({ method: 'PATCH', resource: 'daemonsets' });
    expect(dry.map((r) => r.dryRun)).toEqual([true]);
    expect(approval.text).toBe('🔐 [prod-eks] approval needed: restart of DaemonSet kube-system/kube-multus-ds, requested by U0REQUEST1, expires 2026-11-20 12:30 UTC');
    const approvalBlocks = blockText(approval);
    expect(approvalBlocks).toContain('<@U0REQUEST1> asks for a *restart* of DaemonSet `kube-system/kube-multus-ds` in *prod-eks*');
    expect(approvalBlocks).toContain('*Approvers*\\n<@U0APPROVE1>, <@U0APPROVE2>');
    expect(approvalBlocks).toContain('6 pods · update strategy `RollingUpdate`');
    expect(approvalBlocks).toContain('Server-side dry run passed');
    expect(buttonIds(approval)).toEqual(['tw_approve', 'tw_reject']);
    expect(h.ephemerals(REQUESTER)).toEqual([
      'Requested: restart of DaemonSet kube-system/kube-multus-ds; waiting for approval until 2026-11-20 12:30 UTC',
    ]);

    // An approver from the on-call user group approves.
    await h.click(ONCALL_APPROVER, approval, 'tw_approve');
    const patches = realPatches(h);
    expect(patches).toHaveLength(1);
    expect(patches[0]!.contentType).toBe('application/strategic-merge-patch+json');
    const restartedAt = ((patches[0]!.body as { spec: { template: { metadata: { annotations: Record<string, string> } } } }).spec.template.metadata.annotations)[RESTARTED_AT];
    expect(restartedAt).toMatch(/^2026-11-20T12:00:\d\dZ$/);
    expect((h.kube.store.get('DaemonSet', 'kube-system', 'kube-multus-ds')!['spec'] as { template: { metadata: { annotations: Record<string, string> } } }).template.metadata.annotations[RESTARTED_AT]).toBe(restartedAt);

    // Approval message: approved → running → done, buttons gone.
    const decided = h.slack.message(OPS, approval.ts)!;
    expect(decided.text).toBe('✅ Done [prod-eks]: restart of DaemonSet kube-system/kube-multus-ds (approved by U0APPROVE2)');
    expect(decided.edits.map((e) => e.text.split(':')[0])).toEqual(['🔐 [prod-eks] approval needed', '✅ Approved [prod-eks]', '⏳ Running [prod-eks]']);
    expect(buttonIds(decided)).toEqual([]);

    // Rollout progress: one thread message updated until complete, counting from 0 updated pods.
    const progress = h.slack.thread(OPS, alert.ts).find((m) => m.text.includes('rollout of DaemonSet'))!;
    expect(progress.text).toBe('✅ [prod-eks] rollout of DaemonSet kube-system/kube-multus-ds complete');
    // The first figures never count the old template's pods as updated (6/6 before the controller saw the change);
    // how far the fake controller got by the first read depends on the machine's load.
    expect(progress.edits[0]!.text).toMatch(/^⏳ \[prod-eks\] rolling out DaemonSet kube-system\/kube-multus-ds: [0-5]\/6 updated$/);
    // Edited in place; how many intermediate figures were seen depends on the machine's load, each an in-progress text.
    expect(progress.edits.every((e) => e.text.startsWith('⏳ [prod-eks] rolling out DaemonSet'))).toBe(true);
    expect(blockText(progress)).toContain('6 of 6 updated, 6 ready, 6 available');

    // A Kubernetes Event per transition, an action-log row per transition.
    expect(eventReasons(h)).toEqual(['TokenwatchRestart/Normal', 'TokenwatchRestart/Normal', 'TokenwatchRestart/Normal', 'TokenwatchRestart/Normal']);
    const store = h.serve.context.store;
    const a = (await store.approvals.list({ cluster: CLUSTER }))[0]!;
    expect(a.state).toBe('succeeded');
    expect((await store.actions.ofApproval(a.id)).map((r) => [r.action, r.actor])).toEqual([
      ['restart.requested', REQUESTER],
      ['restart.approved', ONCALL_APPROVER],
      ['restart.running', null],
      ['restart.succeeded', null],
    ]);
    expect(await h.metrics.text()).toContain('tokenwatch_remediations_total{cluster="prod-eks",action="restart",outcome="succeeded"} 1');

    // Verification: a poll within the settle period says nothing; after it, resolved ✅ and the alert edited.
    h.advance(HOUR);
    await h.poll();
    expect(h.slack.thread(OPS, alert.ts).map((m) => m.text)).not.toContainEqual(expect.stringContaining('verified'));
    h.advance(HOUR + MIN);
    await h.poll();
    const replies = h.slack.thread(OPS, alert.ts).map((m) => m.text);
    // Every signal of the alert is verified; the alert resolves once, in place, said once in its thread.
    expect(replies.filter((r) => r.includes('verified'))).toEqual([
      '✅ [prod-eks] verified: no stale token use or 401 Unauthorized responses by kube-system/multus since the restart; alert resolved',
    ]);
    const resolved = await h.alert('kube-system', 'multus');
    expect(resolved.text).toBe('✅ [prod-eks] resolved: kube-system/multus (requests rejected with 401 · stale tokens)');
    expect(buttonIds(resolved)).toEqual(['tw_more']);
    expect(overflowLabels(resolved)).toEqual(['Details']);
    expect((await store.findings.get(a.target.findingId))!.status).toBe('resolved');
    // Reported once.
    h.advance(HOUR);
    await h.poll();
    expect(h.slack.thread(OPS, alert.ts).filter((m) => m.text.includes('verified'))).toHaveLength(1);
    expect(h.slack.callsTo('chat.postMessage').filter((c) => c.args.channel === OPS && c.args.thread_ts === undefined)).toHaveLength(4);
  });

  it('recurrence: stale use of a token issued after the restart is reported with the cause and its fix, and the alert\'s headline fix becomes the cause\'s', async () => {
    h = await startHarness();
    const { alert, approval } = await requestRestart(h);
    // Before any recurrence the restart is the fix the alert offers.
    expect(blockText(alert)).toContain('*Fix:* restart DaemonSet `kube-system/kube-multus-ds`: its pods get fresh tokens, valid for 90 days.');
    await h.click(APPROVER, approval, 'tw_approve');
    expect((await h.serve.context.store.approvals.list())[0]!.state).toBe('succeeded');
    // 90 minutes later, a new pod's token (issued at the restart) is presented stale: Multus copied it into a host file.
    const t = h.now() + 90 * MIN;
    h.appendAudit([staleLine('recur-1', t, 'kube-multus-ds-fresh1', 30 * 60), staleLine('recur-2', t + 5 * MIN, 'kube-multus-ds-fresh1', 35 * 60)]);
    h.advance(95 * MIN);
    await h.poll();
    const reply = h.slack.thread(OPS, alert.ts).at(-1)!;
    expect(reply.text).toMatch(/^⚠️ \[prod-eks\] recurrence: stale token use by kube-system\/multus came back after the restart; fix: /);
    const text = blockText(reply);
    expect(text).toContain('A restart only rewrites the copied token, which buys one more token lifetime (90 days on EKS)');
    expect(text).toContain('(2 requests');
    const store = h.serve.context.store;
    const a = (await store.approvals.list())[0]!;
    expect((await store.actions.ofApproval(a.id)).at(-1)).toMatchObject({ action: 'verification.recurrence', result: 'recurrence' });
    expect((await store.findings.get(a.target.findingId))!.status).toBe('open');
    // The alert itself now says what the restart is: a stop-gap. Its headline fix is the cause's (the thick plugin,
    // from the cause catalogue), and the Restart button says it will recur.
    const after = await h.alert('kube-system', 'multus');
    expect(after.ts).toBe(alert.ts);
    expect(blockText(after)).toContain('*Fix:* Move to the Multus thick plugin (multus-daemon; on EKS a v4.0.2-eksbuild.1 or later _thick image).');
    expect(blockText(after)).toContain('*Stop-gap:* restart DaemonSet `kube-system/kube-multus-ds`: fresh tokens for 90 days, then it recurs (the stale tokens came back after a restart (recurrence ');
    expect(blockText(after)).not.toContain('its pods get fresh tokens');
    const restart = ((after.blocks ?? []) as Array<{ type: string; elements?: Array<{ action_id?: string; text?: { text: string } }> }>)
      .filter((b) => b.type === 'actions')
      .flatMap((b) => b.elements ?? [])
      .find((e) => e.action_id === 'tw_restart');
    expect(restart?.text?.text).toBe('Restart DaemonSet kube-multus-ds — buys 90 days, will recur');
    // Not repeated on the next poll, and the alert keeps saying so.
    h.advance(10 * MIN);
    await h.poll();
    expect(h.slack.thread(OPS, alert.ts).filter((m) => m.text.includes('recurrence'))).toHaveLength(1);
    expect(blockText(await h.alert('kube-system', 'multus'))).toContain('buys 90 days, will recur');
  });
});

describe('after a poll: notify, then verify', () => {
  it('the poll that brings a recurrence edits the alert first, then the verification replies in its thread', async () => {
    h = await startHarness();
    const { alert, approval } = await requestRestart(h);
    await h.click(APPROVER, approval, 'tw_approve');
    expect((await h.serve.context.store.approvals.list())[0]!.state).toBe('succeeded');
    const t = h.now() + 90 * MIN;
    h.appendAudit([staleLine('recur-1', t, 'kube-multus-ds-fresh1', 30 * 60), staleLine('recur-2', t + 5 * MIN, 'kube-multus-ds-fresh1', 35 * 60)]);
    h.advance(95 * MIN);
    // The alert's and its thread's calls of the poll that sees the new stale uses.
    const from = h.slack.calls.length;
    const before = JSON.stringify(h.slack.message(OPS, alert.ts)!.blocks);
    await h.poll();
    const calls = h.slack.calls.slice(from).filter((c) => c.args.channel === OPS && (c.args.ts === alert.ts || c.args.thread_ts === alert.ts));
    // The notifier's edit of the alert (this poll's findings), then the verifier's reply under it, then the alert
    // edited once more to say the restart is a stop-gap: in that order.
    expect(calls.map((c) => [c.method, String(c.args.text).split(':')[0]])).toEqual([
      ['chat.update', '🔴 [prod-eks] critical'],
      ['chat.postMessage', '⚠️ [prod-eks] recurrence'],
      ['chat.update', '🔴 [prod-eks] critical'],
    ]);
    expect(JSON.stringify(calls[2]!.args.blocks)).toContain('will recur');
    // The edit shows this poll's findings: kube-multus-ds-fresh1, not among the DaemonSet's 6 running pods, is one more gone pod.
    expect(before).toContain('5 of 6 live · 1 gone');
    expect(JSON.stringify(calls[0]!.args.blocks)).toContain('5 of 6 live · 2 gone');
  });
});

describe('restart of tokenwatch during a rollout', () => {
  it('the rollout is left running on stop and followed to the end by the next process, without a second PATCH', async () => {
    // The rollout stands still until the next process has started: this one is stopped mid-rollout however slowly
    // it stops on a busy machine.
    let held = true;
    h = await startHarness({ rollout: { stepMs: 150, podsPerStep: 1, hold: () => held } });
    const { alert, approval } = await requestRestart(h);
    await h.click(APPROVER, approval, 'tw_approve', { wait: false });
    const store = () => h!.serve.context.store;
    for (let i = 0; i < 300 && realPatches(h).length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(realPatches(h)).toHaveLength(1);
    const { dir, slack, kube } = h;
    await h.stop({ keepFakes: true });
    const reopened = await openStoreFor(dir);
    expect((await reopened.approvals.list()).map((a) => a.state)).toEqual(['running']);
    await reopened.close();
    h = await startHarness({ dir, fakeSlack: slack, kube });
    held = false;
    // The new process picks it up once it has been running for a second (PICKUP_GRACE_MS).
    for (let i = 0; i < 500 && (await store().approvals.list())[0]!.state !== 'succeeded'; i++) await new Promise((r) => setTimeout(r, 10));
    await h.bot.idle();
    expect((await store().approvals.list()).map((a) => a.state)).toEqual(['succeeded']);
    expect(realPatches(h)).toHaveLength(1);
    const progress = h.slack.thread(OPS, alert.ts).filter((m) => m.text.includes('rollout of DaemonSet') || m.text.includes('rolling out'));
    expect(progress.at(-1)!.text).toBe('✅ [prod-eks] rollout of DaemonSet kube-system/kube-multus-ds complete');
    expect(h.slack.message(OPS, approval.ts)!.text).toBe('✅ Done [prod-eks]: restart of DaemonSet kube-system/kube-multus-ds (approved by U0APPROVE1)');
  });
});

describe('two replicas (HA) on one store', () => {
  it('a follower takes the approve click and commits the vote; the leader runs the restart once', async () => {
    h = await startHarness();
    const { alert, approval } = await requestRestart(h);
    const follower = await startHarness({ dir: h.dir, fakeSlack: h.slack, kube: h.kube, owner: () => false });
    try {
      await follower.click(APPROVER, approval, 'tw_approve');
      expect(realPatches(h)).toHaveLength(0);
      for (let i = 0; i < 300 && (await h.serve.context.store.approvals.list())[0]!.state !== 'succeeded'; i++) await new Promise((r) => setTimeout(r, 10));
      await h.bot.idle();
      expect(realPatches(h)).toHaveLength(1);
      expect((await h.serve.context.store.approvals.list())[0]!.state).toBe('succeeded');
      expect(h.slack.message(OPS, approval.ts)!.text).toBe('✅ Done [prod-eks]: restart of DaemonSet kube-system/kube-multus-ds (approved by U0APPROVE1)');
      expect(h.slack.thread(OPS, alert.ts).filter((m) => m.text.includes('rollout of DaemonSet'))).toHaveLength(1);
      // `/tokens scan` on the standby replica: the leader polls.
      const polls = async () => Number(/tokenwatch_polls_total\{cluster="prod-eks",outcome="ok"\} (\d+)/.exec(await h!.metrics.text())?.[1] ?? 0);
      const before = await polls();
      await follower.command('scan prod-eks', REQUESTER);
      expect(follower.ephemerals(REQUESTER).at(-1)).toBe('Polling prod-eks now');
      for (let i = 0; i < 300 && (await polls()) === before; i++) await new Promise((r) => setTimeout(r, 10));
      expect(await polls()).toBe(before + 1);
    } finally {
      await follower.stop({ keepFakes: true });
    }
  });
});

describe('refusals', () => {
  it('self-approval, a non-approver, and a click from another channel are refused ephemerally; nothing runs', async () => {
    h = await startHarness();
    const { approval } = await requestRestart(h);
    await h.click(REQUESTER, approval, 'tw_approve');
    await h.click(OUTSIDER, approval, 'tw_approve');
    await h.click(APPROVER, approval, 'tw_approve', { channel: ELSEWHERE });
    expect(h.ephemerals(REQUESTER).at(-1)).toBe('⛔ You requested this restart, so someone else must approve it (no self-approval).');
    expect(h.ephemerals(OUTSIDER)).toEqual([
      '⛔ You are not an approver for prod-eks, so you cannot approve this restart; approvers: <@U0APPROVE1> and <@U0APPROVE2>.',
    ]);
    expect(h.ephemerals(APPROVER)).toEqual(['⛔ Cluster *prod-eks* reports to <#C0OPS00001>; ask there. Each channel only reaches its own clusters.']);
    expect(realPatches(h)).toHaveLength(0);
    const store = h.serve.context.store;
    const a = (await store.approvals.list())[0]!;
    expect(a.state).toBe('requested');
    expect(a.votes).toEqual([]);
    expect((await store.actions.ofApproval(a.id)).map((r) => [r.action, r.actor, r.result])).toEqual([
      ['restart.requested', REQUESTER, 'requested'],
      ['restart.refused', REQUESTER, 'refused'],
      ['restart.refused', OUTSIDER, 'refused'],
      ['restart.refused', APPROVER, 'refused'],
    ]);
  });

  it('an expired request is refused at click time and its message edited; the sweep expires the others', async () => {
    h = await startHarness();
    const first = await requestRestart(h);
    // A second request on another finding (fluent-bit DaemonSet).
    const fb = await h.alert('logging', 'fluent-bit');
    await h.click(REQUESTER, fb, 'tw_restart');
    const fbApproval = h.slack.thread(OPS, fb.ts).find((m) => m.text.includes('approval needed'))!;
    h.advance(31 * MIN);
    await h.click(APPROVER, first.approval, 'tw_approve');
    expect(h.ephemerals(APPROVER)).toEqual([
      '⛔ This restart request expired at 2026-11-20 12:30 UTC, so it can no longer be approved; request it again if it is still needed.',
    ]);
    expect(h.slack.message(OPS, first.approval.ts)!.text).toBe('⌛ Expired [prod-eks]: restart of DaemonSet kube-system/kube-multus-ds');
    expect(await h.bot.sweep()).toBe(1);
    expect(h.slack.message(OPS, fbApproval.ts)!.text).toBe('⌛ Expired [prod-eks]: restart of DaemonSet logging/fluent-bit');
    expect(buttonIds(h.slack.message(OPS, fbApproval.ts)!)).toEqual([]);
    expect(realPatches(h)).toHaveLength(0);
    expect((await h.serve.context.store.approvals.list()).map((a) => a.state)).toEqual(['expired', 'expired']);
    expect(await h.metrics.text()).toContain('tokenwatch_approvals_total{cluster="prod-eks",outcome="expired"} 2');
  });

  it('ten simultaneous approve clicks by ten approvers execute the restart once', async () => {
    const many = Array.from({ length: 10 }, (_, i) => `U0MANY${String(i).padStart(4, '0')}`);
    h = await startHarness({ oncall: many });
    const { approval } = await requestRestart(h);
    const results = await Promise.all(many.map((u) => h!.click(u, approval, 'tw_approve', { wait: false })));
    expect(results.map((r) => r.status)).toEqual(Array(10).fill(200));
    await h.bot.idle();
    expect(realPatches(h)).toHaveLength(1);
    const a = (await h.serve.context.store.approvals.list())[0]!;
    expect(a.state).toBe('succeeded');
    expect(a.votes).toHaveLength(1);
    const refused = many.flatMap((u) => h!.ephemerals(u));
    expect(refused).toHaveLength(9);
    for (const r of refused) expect(r).toMatch(/^⛔ This restart was already approved by <@U0MANY\d{4}> at 2026-11-20 12:0\d UTC and is (about to run|now running|has succeeded); it no longer takes votes\.$/);
  });

  it('a tampered or unknown button value is refused and changes nothing', async () => {
    h = await startHarness();
    const alert = await h.alert('kube-system', 'multus');
    const before = h.kube.requests.length;
    await h.click(REQUESTER, alert, 'tw_restart', { value: 'AAAAAAAAAAAAAAAAAAAAAA' });
    await h.click(REQUESTER, alert, 'tw_restart', { value: 'kube-system/kube-multus-ds' });
    // A genuine snooze id sent as a restart button.
    await h.click(REQUESTER, alert, 'tw_restart', { value: overflowOption(alert, 'Snooze 1 day')!.value });
    await h.click(APPROVER, alert, 'tw_approve', { value: 'nosuchapprovalid000000' });
    expect(h.ephemerals(REQUESTER)).toEqual(Array(3).fill('⛔ This button is not valid any more (unknown or altered value), so nothing was done. Use the buttons on the current alert, or `/tokens status`.'));
    expect(h.ephemerals(APPROVER)).toEqual(['⛔ This approval request does not exist (unknown or altered button value), so nothing was done.']);
    expect(h.kube.requests.length).toBe(before);
    expect(await h.serve.context.store.approvals.list()).toEqual([]);
    expect(h.slack.thread(OPS, alert.ts)).toEqual([]);
    expect((await h.serve.context.store.findings.get((await h.serve.context.store.findings.list())[0]!.id))!.status).toBe('open');
  });

  it('a failing server-side dry run (RBAC) is reported in the thread and stops the flow', async () => {
    h = await startHarness();
    h.kube.forbid({ method: 'PATCH', resource: 'daemonsets' });
    const alert = await h.alert('kube-system', 'multus');
    await h.click(REQUESTER, alert, 'tw_restart');
    const thread = h.slack.thread(OPS, alert.ts);
    expect(thread.map((m) => m.text)).toEqual(['❌ Failed [prod-eks]: restart of DaemonSet kube-system/kube-multus-ds']);
    expect(buttonIds(thread[0]!)).toEqual([]);
    expect(blockText(thread[0]!)).toContain('Stopped before approval. Nothing was changed.');
    expect(blockText(thread[0]!)).toContain('forbidden');
    expect(h.ephemerals(REQUESTER)[0]).toMatch(/^⛔ The server-side dry run of the restart of DaemonSet `kube-system\/kube-multus-ds` failed, so nothing was requested or changed: dry-run restart of DaemonSet kube-system\/kube-multus-ds: 403 .*forbidden/);
    const a = (await h.serve.context.store.approvals.list())[0]!;
    expect(a.state).toBe('failed');
    expect(a.dryRun).toMatchObject({ ok: false });
    expect(h.kube.requestsMatching({ method: 'PATCH', resource: 'daemonsets' }).map((r) => r.dryRun)).toEqual([true]);
    expect(eventReasons(h)).toEqual(['TokenwatchRestart/Normal', 'TokenwatchRestart/Warning']);
  });

  it('a requester who is not on the requester list is refused', async () => {
    h = await startHarness({ tweak: (c) => void (c.clusters[0]!.slack!.requesters = [APPROVER]) });
    const alert = await h.alert('kube-system', 'multus');
    await h.click(OUTSIDER, alert, 'tw_restart');
    expect(h.ephemerals(OUTSIDER)).toEqual(['⛔ You are not allowed to request actions in prod-eks; ask someone on the tokenwatch requester list.']);
    expect(h.kube.requestsMatching({ method: 'PATCH' })).toEqual([]);
  });
});

describe('recreate ServiceAccount', () => {
  it('deletes with a uid precondition and recreates with the IRSA annotation, labels and imagePullSecrets, then offers the restart', async () => {
    h = await startHarness();
    // Recreating is a fix where a legacy Secret token must be revoked: fluent-bit's clients also use one. (Not
    // Multus: its cause is a token file on the node, which recreating does not fix.)
    h.appendAudit([auditEvent({ auditID: 'legacy-fb-1', time: h.now() - MIN, kind: 'legacy', namespace: 'logging', serviceAccount: 'fluent-bit' })]);
    await h.poll();
    const ROLE = 'arn:aws:iam::111122223333:role/fluent-bit-irsa';
    h.kube.store.update('ServiceAccount', 'logging', 'fluent-bit', (o) => {
      const md = o.metadata as { annotations?: Record<string, string> };
      md.annotations = { ...(md.annotations ?? {}), 'eks.amazonaws.com/role-arn': ROLE };
      o['imagePullSecrets'] = [{ name: 'ecr-pull' }];
    });
    const oldUid = String(h.kube.store.get('ServiceAccount', 'logging', 'fluent-bit')!.metadata!['uid']);
    const alert = await h.alert('logging', 'fluent-bit');
    expect(overflowLabels(alert)).toContain('Recreate ServiceAccount…');
    // Choosing it in the overflow menu opens the confirm modal; submitting it requests the recreation.
    await h.click(REQUESTER, alert, 'tw_recreate_sa');
    expect(h.slack.thread(OPS, alert.ts).filter((m) => m.text.includes('approval needed'))).toEqual([]);
    await h.submitView(REQUESTER, 'tw_recreate_confirm');
    const approval = h.slack.thread(OPS, alert.ts).find((m) => m.text.includes('approval needed'))!;
    expect(approval.text).toContain('ServiceAccount recreation of ServiceAccount logging/fluent-bit');
    expect(blockText(approval)).toContain('`eks.amazonaws.com/role-arn`');
    await h.click(APPROVER, approval, 'tw_approve');

    const del = h.kube.requestsMatching({ method: 'DELETE', resource: 'serviceaccounts' }).filter((r) => !r.dryRun);
    expect(del).toHaveLength(1);
    expect((del[0]!.body as { preconditions: { uid: string } }).preconditions.uid).toBe(oldUid);
    const sa = h.kube.store.get('ServiceAccount', 'logging', 'fluent-bit')!;
    const md = sa.metadata as { uid: string; annotations: Record<string, string>; labels: Record<string, string> };
    expect(md.uid).not.toBe(oldUid);
    expect(md.annotations['eks.amazonaws.com/role-arn']).toBe(ROLE);
    expect(md.labels).toMatchObject({ 'app.kubernetes.io/name': 'fluent-bit', 'helm.sh/chart': 'fluent-bit-0.19.19' });
    expect(sa['imagePullSecrets']).toEqual([{ name: 'ecr-pull' }]);

    const thread = h.slack.thread(OPS, alert.ts);
    const done = thread.find((m) => m.text.includes('recreated'))!;
    expect(done.text).toBe('[prod-eks] ServiceAccount logging/fluent-bit recreated');
    expect(blockText(done)).toContain(`\`${oldUid}\` → \`${md.uid}\``);
    expect(buttonIds(done)).toEqual(['tw_restart']);
    expect((await h.serve.context.store.approvals.list())[0]!.state).toBe('succeeded');
    expect(eventReasons(h).every((r) => r.startsWith('TokenwatchRecreateServiceAccount/'))).toBe(true);

    // The offered restart button works like the alert's.
    await h.click(REQUESTER, done, 'tw_restart');
    expect((await h.serve.context.store.approvals.list()).map((a) => [a.action, a.state])).toEqual([
      ['recreate-serviceaccount', 'succeeded'],
      ['restart', 'requested'],
    ]);
  });
});

describe('ack', () => {
  it('block_actions are acknowledged well before the work is done', async () => {
    h = await startHarness();
    h.kube.delay(1500, { method: 'PATCH' }); // the dry run alone takes 1.5 s
    const alert = await h.alert('kube-system', 'multus');
    const res = await h.click(REQUESTER, alert, 'tw_restart', { wait: false });
    // Acked while the dry run is still held by the API server: order, not a wall-clock bound.
    expect(res.status).toBe(200);
    expect(h.slack.thread(OPS, alert.ts)).toEqual([]);
    await h.bot.idle();
    expect(h.slack.thread(OPS, alert.ts)).toHaveLength(1);
  });
});
