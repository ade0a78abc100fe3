/**
 * Remediation integrity through the real Bolt app (HTTP mode), the real client-node and the loopback fakes of Slack
 * and Kubernetes: writes carry the uid the approvers saw, a recreation race is not reported as success, a request
 * whose message cannot be posted does not block its target, approver lists leave the requester out, the final
 * progress edit is retried until Slack accepts it, and `/tokens scan` is rate-limited per user and cluster.
 */
import { auditEvent } from '../sources/events.js';
import { afterEach, describe, expect, it } from 'vitest';
import { APPROVER, blockText, CLUSTER, ONCALL_APPROVER, OPS, OUTSIDER, REQUESTER, startHarness, type Harness } from './harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

/** Waits (event-driven polling, generous bound) until `cond` holds. */
async function until(cond: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 6000; i++) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const realWrites = (x: Harness, method: string, resource: string) => x.kube.requestsMatching({ method, resource }).filter((r) => !r.dryRun);
const approvalMessage = (x: Harness, alertTs: string) => x.slack.thread(OPS, alertTs).find((m) => m.text.includes('approval needed'));

describe('uid preconditions', () => {
  it('a DaemonSet deleted and recreated (new uid, another image) between request and approval is not patched: "replaced since it was approved"', async () => {
    h = await startHarness();
    const alert = await h.alert('kube-system', 'multus');
    await h.click(REQUESTER, alert, 'tw_restart');
    const approval = approvalMessage(h, alert.ts)!;
    const approvedUid = String(h.kube.store.get('DaemonSet', 'kube-system', 'kube-multus-ds')!.metadata!['uid']);
    // Replaced: same name, a new uid (the fake's store assigns one), another image.
    const old = h.kube.store.delete('DaemonSet', 'kube-system', 'kube-multus-ds')!;
    const replacement = structuredClone(old) as { metadata: Record<string, unknown>; spec: { template: { spec: { containers: Array<{ image: string }> } } } };
    delete replacement.metadata['uid'];
    replacement.spec.template.spec.containers[0]!.image = 'registry.example/attacker:1';
    h.kube.store.put(replacement as never);
    const before = structuredClone(h.kube.store.get('DaemonSet', 'kube-system', 'kube-multus-ds')!);
    expect(before.metadata!['uid']).not.toBe(approvedUid);

    await h.click(APPROVER, approval, 'tw_approve');
    const store = h.serve.context.store;
    await until(async () => (await store.approvals.list())[0]!.state === 'failed', 'the restart to fail');
    await h.bot.idle();
    const a = (await store.approvals.list())[0]!;
    expect(a.error).toBe(
      `the DaemonSet kube-system/kube-multus-ds was replaced since it was approved (the approvers saw uid ${approvedUid}; the API server holds another object under that name), so nothing was patched. Request it again to review the current object.`,
    );
    expect(blockText(h.slack.message(OPS, approval.ts)!)).toContain('was replaced since it was approved');
    const patches = realWrites(h, 'PATCH', 'daemonsets');
    expect(patches).toHaveLength(1);
    expect((patches[0]!.body as { metadata: { uid: string } }).metadata.uid).toBe(approvedUid);
    expect(h.kube.store.get('DaemonSet', 'kube-system', 'kube-multus-ds')).toEqual(before);
  });
});

describe('recreation race', () => {
  it('another client creates the ServiceAccount with another IAM role between DELETE and POST: failed, "created by someone else", an alarm in the thread', async () => {
    h = await startHarness();
    // Recreating is offered where a legacy Secret token must be revoked: fluent-bit's clients also use one.
    h.appendAudit([auditEvent({ auditID: 'legacy-fb-1', time: h.now() - 60_000, kind: 'legacy', namespace: 'logging', serviceAccount: 'fluent-bit' })]);
    await h.poll();
    const ROLE = 'arn:aws:iam::111122223333:role/fluent-bit-irsa';
    const ATTACKER = 'arn:aws:iam::999999999999:role/attacker';
    h.kube.store.update('ServiceAccount', 'logging', 'fluent-bit', (o) => {
      const md = o.metadata as { annotations?: Record<string, string> };
      md.annotations = { ...(md.annotations ?? {}), 'eks.amazonaws.com/role-arn': ROLE };
    });
    const kube = h.kube;
    kube.store.onWrite((e) => {
      if (e.def.kind === 'ServiceAccount' && e.type === 'DELETED') {
        const theirs = structuredClone(e.object) as { metadata: Record<string, unknown> };
        delete theirs.metadata['uid'];
        delete theirs.metadata['resourceVersion'];
        theirs.metadata['annotations'] = { ...(theirs.metadata['annotations'] as object), 'eks.amazonaws.com/role-arn': ATTACKER };
        queueMicrotask(() => kube.store.put(theirs as never));
      }
    });
    const alert = await h.alert('logging', 'fluent-bit');
    await h.click(REQUESTER, alert, 'tw_recreate_sa');
    await h.submitView(REQUESTER, 'tw_recreate_confirm');
    await h.click(APPROVER, approvalMessage(h, alert.ts)!, 'tw_approve');
    const store = h.serve.context.store;
    await until(async () => ['failed', 'succeeded'].includes((await store.approvals.list())[0]!.state), 'the recreation to end');
    await h.bot.idle();
    const a = (await store.approvals.list())[0]!;
    expect(a.state).toBe('failed');
    expect(a.error).toContain(`ServiceAccount logging/fluent-bit was created by someone else, with different annotations: eks.amazonaws.com/role-arn=${ATTACKER} (expected ${ROLE})`);
    expect(realWrites(h, 'DELETE', 'serviceaccounts')).toHaveLength(1);
    expect(realWrites(h, 'POST', 'serviceaccounts')).toHaveLength(1);
    const thread = h.slack.thread(OPS, alert.ts);
    expect(thread.filter((m) => m.text.includes('recreated'))).toEqual([]);
    const alarm = thread.find((m) => m.text.startsWith('🚨'))!;
    expect(alarm.text).toContain('created by someone else');
    expect(alarm.text).toContain(ATTACKER);
    expect((await store.actions.ofApproval(a.id)).map((r) => r.action)).toEqual(['recreate-serviceaccount.requested', 'recreate-serviceaccount.approved', 'recreate-serviceaccount.running', 'recreate-serviceaccount.failed']);
  });
});

describe('approval request that Slack does not post', () => {
  it('is released at once and the requester is told; the next request posts normally', async () => {
    h = await startHarness();
    const alert = await h.alert('kube-system', 'multus');
    h.slack.failNext('chat.postMessage', 'internal_error', 1, (args) => String(args['text']).includes('approval needed'));
    await h.click(REQUESTER, alert, 'tw_restart');
    const store = h.serve.context.store;
    const first = (await store.approvals.list())[0]!;
    expect(first.state).toBe('failed');
    expect(first.message).toBeNull();
    expect(first.error).toBe('the approval request could not be posted in Slack (Slack answered internal_error); nothing was changed');
    expect(h.ephemerals(REQUESTER).at(-1)).toBe(
      '⛔ Your restart request for DaemonSet `kube-system/kube-multus-ds` could not be posted in the channel (Slack answered internal_error), so it was withdrawn and nothing was changed. Try again in a moment.',
    );
    expect(approvalMessage(h, alert.ts)).toBeUndefined();

    await h.click(REQUESTER, alert, 'tw_restart');
    expect(h.ephemerals(REQUESTER).at(-1)).toContain('waiting for approval until');
    expect(approvalMessage(h, alert.ts)).toBeDefined();
    expect(await store.approvals.list({ states: ['requested'] })).toHaveLength(1);
    expect(realWrites(h, 'PATCH', 'daemonsets')).toEqual([]);
  });
});

describe('approver lists', () => {
  it('never include the requester, even when the requester is a configured approver', async () => {
    h = await startHarness({
      tweak: (c) => {
        const s = c.clusters.find((x) => x.name === CLUSTER)!.slack!;
        s.approvers = [APPROVER, REQUESTER];
      },
    });
    const alert = await h.alert('kube-system', 'multus');
    await h.click(REQUESTER, alert, 'tw_restart');
    const requested = blockText(h.slack.ephemerals({ user: REQUESTER }).at(-1)!);
    expect(requested).toContain(`<@${APPROVER}>`);
    expect(requested).not.toContain(`<@${REQUESTER}>`);
    const approval = approvalMessage(h, alert.ts)!;
    const approversField = blockText(approval).match(/\*Approvers\*\\n([^"]*)/)![1]!;
    expect(approversField).toBe(`<@${APPROVER}>`);
    // prod-eks protects no namespace here: one approval, said as such.
    expect(blockText(approval).match(/\*Approvals\*\\n([^"]*)/)![1]).toBe('0 of 1');
    expect(blockText(h.slack.ephemerals({ user: REQUESTER }).at(-1)!)).toContain('in the alert\'s thread (one approval)');
    // A non-approver's refusal names who may approve: not the requester.
    await h.click(OUTSIDER, approval, 'tw_approve');
    expect(h.ephemerals(OUTSIDER).at(-1)).toBe(`⛔ You are not an approver for ${CLUSTER}, so you cannot approve this restart; approvers: <@${APPROVER}>.`);
  });
});

describe('approver lists with user groups', () => {
  it('the requester is a member of the approver group: neither the approval message nor a refusal names them, and it says what the target needs', async () => {
    // Approvers: APPROVER and the on-call group (ONCALL_APPROVER and, here, REQUESTER); kube-system needs 2 approvals.
    h = await startHarness({
      oncall: [REQUESTER],
      tweak: (c) => {
        const s = c.clusters.find((x) => x.name === CLUSTER)!.slack!;
        s.protectedNamespaces = ['kube-system'];
        s.protectedApprovals = 2;
      },
    });
    const alert = await h.alert('kube-system', 'multus');
    await h.click(REQUESTER, alert, 'tw_restart');
    const approval = approvalMessage(h, alert.ts)!;
    const fields = blockText(approval);
    expect(fields.match(/\*Approvers\*\\n([^"]*)/)![1]).toBe(`<@${APPROVER}>, <@${ONCALL_APPROVER}>`);
    expect(fields.match(/\*Approvals\*\\n([^"]*)/)![1]).toBe('0 of 2 · kube-system is protected: 2 approvals');
    expect(blockText(h.slack.ephemerals({ user: REQUESTER }).at(-1)!)).toContain(`is waiting for approval by <@${APPROVER}>, <@${ONCALL_APPROVER}> in the alert's thread (kube-system is protected: 2 approvals from different people)`);
    await h.click(OUTSIDER, approval, 'tw_approve');
    expect(h.ephemerals(OUTSIDER).at(-1)).toBe(`⛔ You are not an approver for ${CLUSTER}, so you cannot approve this restart; approvers: <@${APPROVER}> and <@${ONCALL_APPROVER}>.`);
    // Two people other than the requester approve; then it runs.
    await h.click(APPROVER, approval, 'tw_approve');
    expect(h.ephemerals(APPROVER).at(-1)).toBe('Your approval is recorded (1 of 2); it runs once 1 more approver agrees.');
    expect(realWrites(h, 'PATCH', 'daemonsets')).toEqual([]);
    await h.click(ONCALL_APPROVER, approval, 'tw_approve');
    await until(async () => (await h!.serve.context.store.approvals.list())[0]!.state === 'succeeded', 'the restart to succeed');
    expect(realWrites(h, 'PATCH', 'daemonsets')).toHaveLength(1);
  }, 120_000);
});

// Each test runs a restart through Bolt and the fakes; on a loaded shared machine that takes well over 20 s.
describe('final progress edit', { timeout: 120_000 }, () => {
  it('Slack answers internal_error to the first final edit: it is retried and the progress message ends "complete"', async () => {
    // The rollout waits for the first progress message, so the final one is an edit (a rollout done at the first read
    // posts its final progress as a new message, with no edit to fail).
    h = await startHarness({ slack: { progressRetryMs: 20 }, rollout: { afterFirstProgress: true } });
    const isFinal = (args: Record<string, unknown>) => String(args['text']).startsWith('✅ [prod-eks] rollout of DaemonSet');
    h.slack.failNext('chat.update', 'internal_error', 1, isFinal);
    const alert = await h.alert('kube-system', 'multus');
    await h.click(REQUESTER, alert, 'tw_restart');
    await h.click(APPROVER, approvalMessage(h, alert.ts)!, 'tw_approve');
    const store = h.serve.context.store;
    await until(async () => (await store.approvals.list())[0]!.state === 'succeeded', 'the restart to succeed');
    // The final edit is sent (and retried) after the approval ends.
    const finals = () => h!.slack.callsTo('chat.update').filter((c) => isFinal(c.args));
    await until(() => finals().some((c) => c.response['ok'] === true), 'the retried final edit to land');
    await h.bot.idle();
    expect(finals().map((c) => c.response['ok'])).toEqual([false, true]);
    const progress = h.slack.thread(OPS, alert.ts).filter((m) => m.text.includes('rollout of DaemonSet') || m.text.includes('rolling out'));
    expect(progress.map((m) => m.text)).toEqual(['✅ [prod-eks] rollout of DaemonSet kube-system/kube-multus-ds complete']);
    const a = (await store.approvals.list())[0]!;
    expect(a.execution?.pendingProgress).toBeUndefined();
    expect(JSON.parse(a.execution!.shown!)).toMatchObject({ done: true });
  });

  it('Slack refuses every bounded retry: the approval ends, and the next tick re-sends the final state until it lands', async () => {
    h = await startHarness({ slack: { progressRetryMs: 1 }, rollout: { afterFirstProgress: true } });
    const isFinal = (args: Record<string, unknown>) => String(args['text']).startsWith('✅ [prod-eks] rollout of DaemonSet');
    h.slack.failNext('chat.update', 'internal_error', 6, isFinal);
    const alert = await h.alert('kube-system', 'multus');
    await h.click(REQUESTER, alert, 'tw_restart');
    await h.click(APPROVER, approvalMessage(h, alert.ts)!, 'tw_approve');
    const store = h.serve.context.store;
    await until(async () => (await store.approvals.list())[0]!.state === 'succeeded', 'the restart to succeed');
    await until(() => h!.slack.callsTo('chat.update').filter((c) => isFinal(c.args) && c.response['ok'] === true).length === 1, 'the final edit to land on a later tick');
    await h.bot.idle();
    expect(h.slack.callsTo('chat.update').filter((c) => isFinal(c.args)).map((c) => c.response['ok'])).toEqual([false, false, false, false, false, false, true]);
    const progress = h.slack.thread(OPS, alert.ts).filter((m) => m.text.includes('rollout of DaemonSet') || m.text.includes('rolling out'));
    expect(progress.map((m) => m.text)).toEqual(['✅ [prod-eks] rollout of DaemonSet kube-system/kube-multus-ds complete']);
    await until(async () => (await store.approvals.list())[0]!.execution?.pendingProgress === undefined, 'the pending progress to be cleared');
  });
});

describe('final progress edit across a restart', () => {
  it('Slack refuses every bounded retry and tokenwatch stops before the next tick: the next process re-sends the stored final state at start', async () => {
    // No pickUp tick in this process (1 h interval): only the next process's start can re-send it.
    h = await startHarness({ slack: { progressRetryMs: 1, pickupIntervalMs: 3_600_000 }, rollout: { afterFirstProgress: true } });
    const isFinal = (args: Record<string, unknown>) => String(args['text']).startsWith('✅ [prod-eks] rollout of DaemonSet');
    h.slack.failNext('chat.update', 'internal_error', 5, isFinal);
    const alert = await h.alert('kube-system', 'multus');
    await h.click(REQUESTER, alert, 'tw_restart');
    await h.click(APPROVER, approvalMessage(h, alert.ts)!, 'tw_approve');
    await until(async () => (await h!.serve.context.store.approvals.list())[0]!.state === 'succeeded', 'the restart to succeed');
    const store = () => h!.serve.context.store;
    // The final edit's retries run after the approval ends: wait for the last one to be refused and stored as pending.
    await until(
      async () => h!.slack.callsTo('chat.update').filter((c) => isFinal(c.args)).length === 5 && (await store().approvals.list())[0]!.execution?.pendingProgress?.done === true,
      'the five refused final edits and the stored pending state',
    );
    await h.bot.idle();
    // All five attempts refused: stored as pending, not as shown; the message still shows the last accepted state.
    expect(h.slack.callsTo('chat.update').filter((c) => isFinal(c.args)).map((c) => c.response['ok'])).toEqual([false, false, false, false, false]);
    const pending = (await store().approvals.list())[0]!.execution!;
    expect(pending.pendingProgress).toMatchObject({ done: true });
    expect(JSON.parse(pending.shown!)).not.toMatchObject({ done: true });
    const rolling = () => h!.slack.thread(OPS, alert.ts).filter((m) => m.text.includes('rollout of DaemonSet') || m.text.includes('rolling out'));
    expect(rolling().map((m) => m.text)).not.toContain('✅ [prod-eks] rollout of DaemonSet kube-system/kube-multus-ds complete');

    const { dir, slack, kube } = h;
    await h.stop({ keepFakes: true });
    h = await startHarness({ dir, fakeSlack: slack, kube, slack: { pickupIntervalMs: 3_600_000 } });
    await h.bot.idle();
    expect(h.slack.callsTo('chat.update').filter((c) => isFinal(c.args)).map((c) => c.response['ok'])).toEqual([false, false, false, false, false, true]);
    expect(rolling().map((m) => m.text)).toEqual(['✅ [prod-eks] rollout of DaemonSet kube-system/kube-multus-ds complete']);
    const done = (await store().approvals.list())[0]!.execution!;
    expect(done.pendingProgress).toBeUndefined();
    expect(JSON.parse(done.shown!)).toMatchObject({ done: true });
    expect(realWrites(h, 'PATCH', 'daemonsets')).toHaveLength(1);
  }, 120_000);
});

describe('/tokens scan rate limit', () => {
  it('one poll per user and cluster within slack.commands.scanInterval; the reply says when the next is allowed', async () => {
    h = await startHarness();
    const started = () => h!.ephemerals(REQUESTER).filter((t) => t.startsWith('Polling prod-eks now') || t.includes('already running'));
    await h.command('scan prod-eks', REQUESTER);
    expect(h.ephemerals(REQUESTER).at(-1)).toBe('Polling prod-eks now');
    const first = h.now();
    for (let i = 0; i < 5; i++) await h.command('scan prod-eks', REQUESTER);
    const refused = h.ephemerals(REQUESTER).slice(-5);
    const next = new Date(Math.floor(first / 1000) * 1000 + 120_000);
    for (const t of refused) expect(t).toMatch(new RegExp(`^You can ask for the next poll of prod-eks at ${next.toISOString().slice(0, 16).replace('T', ' ')} UTC \\(in [^)]+\\)$`));
    expect(started()).toHaveLength(1);
    // Another user is not limited by the first one's scan.
    await h.command('scan prod-eks', APPROVER);
    expect(h.ephemerals(APPROVER).at(-1)).not.toMatch(/next poll/);
    // Past the interval the first user may scan again.
    h.advance(120_000);
    await h.command('scan prod-eks', REQUESTER);
    expect(h.ephemerals(REQUESTER).at(-1)).not.toMatch(/next poll/);
  });
});
