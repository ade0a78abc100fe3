/**
 * Crash safety (docs/slack.md, "Crash safety"). `tokenwatch serve` runs in a child process (serve-child.ts: the real Bolt app in HTTP
 * mode) against the fake Slack and fake Kubernetes API in this process; it is killed with SIGKILL at one step of an
 * approved action (no cleanup runs), and a new process on the same store (the harness, in this process) resumes it.
 * Whatever the step: exactly one real PATCH (or DELETE), and an end state that matches what the API server did.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { blockActionPayload, sendBlockAction, type FakeSlack } from '../../src/sandbox/fakes/slack.js';
import { viewSubmissionPayload } from '../fakes/slack-requests.js';
import type { FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import { groupIdOf } from '../../src/findings/groups.js';
import { RESTARTED_AT } from '../../src/remediation/kube-remediator.js';
import { PICKUP_GRACE_MS } from '../../src/slack/flow.js';
import { openStore, type Store } from '../../src/store/index.js';
import { appendFileSync } from 'node:fs';
import { auditEvent } from '../sources/events.js';
import { APPROVER, buttonValue, CLUSTER, OPS, overflowOption, prepareDir, REF, REQUESTER, SECRET, startFakes, startHarness, type Harness } from './harness.js';
import { childScript } from '../support/build.js';

let child: ChildProcess | undefined;
let h: Harness | undefined;
let fakes: { slack: FakeSlack; kube: FakeKube } | undefined;
let peek: Store | undefined;
afterEach(async () => {
  child?.kill('SIGKILL');
  child = undefined;
  await peek?.close();
  peek = undefined;
  await h?.stop();
  h = undefined;
  if (fakes) {
    await fakes.slack.close().catch(() => undefined);
    await fakes.kube.close().catch(() => undefined);
  }
  fakes = undefined;
});

/** Waits (event-driven polling, generous bound) until `cond` holds. */
async function until(cond: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 6000; i++) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Starts serve in a child process on `dir`; resolves with its Bolt events URL and a promise of its exit. */
async function startChild(dir: string, f: { slack: FakeSlack; kube: FakeKube }): Promise<{ url: string; exited: Promise<NodeJS.Signals | null> }> {
  const c = spawn(process.execPath, [childScript('serve-child'), JSON.stringify({ dir, slackApiUrl: f.slack.apiUrl, kubeUrl: f.kube.url })], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child = c;
  const exited = new Promise<NodeJS.Signals | null>((resolve) => c.on('exit', (_code, signal) => resolve(signal)));
  let err = '';
  c.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    c.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve((JSON.parse(line) as { eventsUrl: string }).eventsUrl);
    });
    c.on('exit', () => reject(new Error(`serve child exited before serving: ${err}`)));
  });
  return { url, exited };
}

const kill = () => child?.kill('SIGKILL');
const realWrites = (k: FakeKube, method: string, resource: string) => k.requestsMatching({ method, resource }).filter((r) => !r.dryRun);

/**
 * Requests (REQUESTER) and approves (APPROVER) `action` through the child's Bolt app: a restart of the Multus
 * DaemonSet from its alert's button, or a recreation of `logging/fluent-bit` (a legacy-token subject, where recreating
 * is offered) from its alert's overflow menu and confirm modal, the way Slack sends them.
 */
async function requestAndApprove(url: string, dir: string, slack: FakeSlack, actionId: 'tw_restart' | 'tw_recreate_sa') {
  peek = await openStore(join(dir, 'tw.db'));
  const [ns, sa] = actionId === 'tw_restart' ? ['kube-system', 'multus'] : ['logging', 'fluent-bit'];
  const ref = (await peek.slackRefs.getAlertRef(groupIdOf({ cluster: CLUSTER, namespace: ns, serviceAccount: sa })))!;
  const alert = slack.message(ref.channel, ref.ts)!;
  const click = (user: string, m: { ts: string; blocks: unknown[] | undefined }, id: string) =>
    sendBlockAction(url, SECRET, blockActionPayload({ user, actionId: id, value: buttonValue(m, id), channel: OPS, messageTs: m.ts, responseUrl: slack.responseUrl({ channel: OPS, user, messageTs: m.ts }) }));
  if (actionId === 'tw_restart') await click(REQUESTER, alert, actionId);
  else {
    const option = overflowOption(alert, 'Recreate ServiceAccount…')!;
    await sendBlockAction(url, SECRET, blockActionPayload({ user: REQUESTER, actionId: 'tw_more', value: option.value, selectedOption: option, channel: OPS, messageTs: alert.ts, responseUrl: slack.responseUrl({ channel: OPS, user: REQUESTER, messageTs: alert.ts }) }));
    await until(() => slack.views().some((v) => v.view.callback_id === 'tw_recreate_confirm'), 'the recreate confirmation');
    await sendBlockAction(url, SECRET, viewSubmissionPayload({ user: REQUESTER, view: slack.views().find((v) => v.view.callback_id === 'tw_recreate_confirm')! }));
  }
  await until(() => slack.thread(OPS, alert.ts).some((m) => m.text.includes('approval needed') && (m.blocks ?? []).length > 0), 'the approval message');
  const approval = slack.thread(OPS, alert.ts).find((m) => m.text.includes('approval needed'))!;
  await click(APPROVER, approval, 'tw_approve');
  return { alert, approval };
}

/** The new process's clock: past the pickup grace of the approval the killed process left (a restart later). */
const resumeAt = (a: { updatedAt: number }) => Math.max(REF, a.updatedAt) + PICKUP_GRACE_MS + 1;

type Step = 'before-patch' | 'after-patch' | 'mid-rollout';

/** Arms a SIGKILL of the child at `step` of the restart. */
function armRestartKill(step: Step, f: { slack: FakeSlack; kube: FakeKube }): void {
  if (step === 'before-patch') {
    // The "started" Kubernetes Event is written after `running` is stored and before the PATCH.
    f.kube.addReactor((req) => {
      if (req.method === 'POST' && req.resource === 'events' && String((req.body as { message?: string }).message).includes(' started')) kill();
      return undefined;
    });
  } else if (step === 'after-patch') {
    // The PATCH is applied by the API server; the child never sees the response.
    f.kube.store.onWrite((e) => {
      if (e.def.kind === 'DaemonSet' && e.type === 'MODIFIED' && e.previous && e.object.metadata?.['generation'] !== e.previous.metadata?.['generation']) kill();
    });
  } else {
    // The first edit of the progress message: the rollout is under way and its message was posted.
    f.slack.on('change', (c) => {
      if (c.type === 'update' && c.message.text.startsWith('⏳ [prod-eks] rolling out')) kill();
    });
  }
}

// Each test starts a child process (tsx compiles the sources): generous bounds, the suite must pass on a busy machine.
// The fake rollout waits for the first "rolling out" message, so a slow first progress read cannot find the rollout
// done already (then no progress edit would come for the mid-rollout kill).
describe('kill -9 during an approved restart', { timeout: 120_000 }, () => {
  for (const step of ['before-patch', 'after-patch', 'mid-rollout'] as const) {
    it(`killed ${step}: the next process sends the PATCH only if it never happened; exactly one PATCH, truthful end state`, async () => {
      const dir = prepareDir();
      fakes = await startFakes({ rollout: { stepMs: 100, podsPerStep: 1, afterFirstProgress: true } });
      const { slack, kube } = fakes;
      const { url, exited } = await startChild(dir, fakes);
      armRestartKill(step, fakes);
      const { alert, approval } = await requestAndApprove(url, dir, slack, 'tw_restart');
      expect(await exited).toBe('SIGKILL');
      child = undefined;
      const left = (await peek!.approvals.list())[0]!;
      expect(left.state).toBe('running');
      expect(realWrites(kube, 'PATCH', 'daemonsets')).toHaveLength(step === 'before-patch' ? 0 : 1);

      h = await startHarness({ dir, fakeSlack: slack, kube, start: resumeAt(left) });
      const store = h.serve.context.store;
      await until(async () => (await store.approvals.get(left.id))!.state !== 'running', 'the resumed restart to end');
      await h.bot.idle();
      const a = (await store.approvals.get(left.id))!;
      expect(a.state).toBe('succeeded');
      const patches = realWrites(kube, 'PATCH', 'daemonsets');
      expect(patches).toHaveLength(1);
      const sent = (patches[0]!.body as { spec: { template: { metadata: { annotations: Record<string, string> } } } }).spec.template.metadata.annotations[RESTARTED_AT]!;
      expect(Date.parse(sent)).toBe(a.startedAt);
      const ds = kube.store.get('DaemonSet', 'kube-system', 'kube-multus-ds')!;
      expect((ds['spec'] as { template: { metadata: { annotations: Record<string, string> } } }).template.metadata.annotations[RESTARTED_AT]).toBe(sent);
      expect(slack.message(OPS, approval.ts)!.text).toBe('✅ Done [prod-eks]: restart of DaemonSet kube-system/kube-multus-ds (approved by U0APPROVE1)');
      // One progress message, edited to its end state by whichever process followed the rollout.
      const progress = slack.thread(OPS, alert.ts).filter((m) => m.text.includes('rollout of DaemonSet') || m.text.includes('rolling out'));
      expect(progress.map((m) => m.text)).toEqual(['✅ [prod-eks] rollout of DaemonSet kube-system/kube-multus-ds complete']);
      expect((await store.actions.ofApproval(a.id)).map((r) => r.action)).toEqual(['restart.requested', 'restart.approved', 'restart.running', 'restart.succeeded']);
    });
  }
});

describe('kill -9 in the PATCH window with a later restartedAt already on the pod template', { timeout: 120_000 }, () => {
  it('the later value (a fast clock, anyone with edit rights) proves nothing: the next process sends its PATCH, then Done', async () => {
    const dir = prepareDir();
    fakes = await startFakes({ rollout: { stepMs: 100, podsPerStep: 1, afterFirstProgress: true } });
    const { slack, kube } = fakes;
    const LATER = '2026-11-21T09:00:00Z';
    kube.store.update('DaemonSet', 'kube-system', 'kube-multus-ds', (o) => {
      const tpl = (o['spec'] as { template: { metadata: { annotations?: Record<string, string> } } }).template;
      tpl.metadata.annotations = { ...(tpl.metadata.annotations ?? {}), [RESTARTED_AT]: LATER };
    });
    const generation = kube.store.get('DaemonSet', 'kube-system', 'kube-multus-ds')!.metadata!['generation'] as number;
    const { url, exited } = await startChild(dir, fakes);
    armRestartKill('before-patch', fakes);
    const { approval } = await requestAndApprove(url, dir, slack, 'tw_restart');
    expect(await exited).toBe('SIGKILL');
    child = undefined;
    const left = (await peek!.approvals.list())[0]!;
    expect(left.state).toBe('running');
    expect(Date.parse(LATER)).toBeGreaterThan(left.startedAt!);
    expect(realWrites(kube, 'PATCH', 'daemonsets')).toHaveLength(0);

    h = await startHarness({ dir, fakeSlack: slack, kube, start: resumeAt(left) });
    const store = h.serve.context.store;
    await until(async () => (await store.approvals.get(left.id))!.state !== 'running', 'the resumed restart to end');
    await h.bot.idle();
    expect((await store.approvals.get(left.id))!.state).toBe('succeeded');
    const patches = realWrites(kube, 'PATCH', 'daemonsets');
    expect(patches).toHaveLength(1);
    const ds = kube.store.get('DaemonSet', 'kube-system', 'kube-multus-ds')!;
    expect(ds.metadata!['generation']).toBe(generation + 1);
    expect(Date.parse((ds['spec'] as { template: { metadata: { annotations: Record<string, string> } } }).template.metadata.annotations[RESTARTED_AT]!)).toBe(left.startedAt);
    expect(slack.message(OPS, approval.ts)!.text).toBe('✅ Done [prod-eks]: restart of DaemonSet kube-system/kube-multus-ds (approved by U0APPROVE1)');
  });
});

describe('kill -9 during an approved ServiceAccount recreation', { timeout: 120_000 }, () => {
  it('killed between DELETE and POST: the next process creates the ServiceAccount from the stored body; exactly one DELETE', async () => {
    const dir = prepareDir();
    // fluent-bit's clients also use a legacy Secret token, which recreating the ServiceAccount revokes.
    appendFileSync(join(dir, 'audit.log'), `${auditEvent({ auditID: 'legacy-fb-1', time: REF - 60_000, kind: 'legacy', namespace: 'logging', serviceAccount: 'fluent-bit' })}\n`);
    fakes = await startFakes();
    const { slack, kube } = fakes;
    const ROLE = 'arn:aws:iam::111122223333:role/fluent-bit-irsa';
    kube.store.update('ServiceAccount', 'logging', 'fluent-bit', (o) => {
      const md = o.metadata as { annotations?: Record<string, string> };
      md.annotations = { ...(md.annotations ?? {}), 'eks.amazonaws.com/role-arn': ROLE };
    });
    const oldUid = String(kube.store.get('ServiceAccount', 'logging', 'fluent-bit')!.metadata!['uid']);
    const { url, exited } = await startChild(dir, fakes);
    kube.store.onWrite((e) => {
      if (e.def.kind === 'ServiceAccount' && e.type === 'DELETED') kill();
    });
    const { alert } = await requestAndApprove(url, dir, slack, 'tw_recreate_sa');
    expect(await exited).toBe('SIGKILL');
    child = undefined;
    expect(kube.store.get('ServiceAccount', 'logging', 'fluent-bit')).toBeUndefined();
    const left = (await peek!.approvals.list())[0]!;
    expect(left.state).toBe('running');

    h = await startHarness({ dir, fakeSlack: slack, kube, start: resumeAt(left) });
    const store = h.serve.context.store;
    await until(async () => (await store.approvals.get(left.id))!.state !== 'running', 'the resumed recreation to end');
    await h.bot.idle();
    expect((await store.approvals.get(left.id))!.state).toBe('succeeded');
    expect(realWrites(kube, 'DELETE', 'serviceaccounts')).toHaveLength(1);
    expect(realWrites(kube, 'POST', 'serviceaccounts')).toHaveLength(1);
    const sa = kube.store.get('ServiceAccount', 'logging', 'fluent-bit')!;
    const md = sa.metadata as { uid: string; annotations: Record<string, string>; labels: Record<string, string> };
    expect(md.uid).not.toBe(oldUid);
    expect(md.annotations['eks.amazonaws.com/role-arn']).toBe(ROLE);
    expect(md.labels).toMatchObject({ 'app.kubernetes.io/name': 'fluent-bit' });
    expect(slack.thread(OPS, alert.ts).filter((m) => m.text.includes('recreated')).map((m) => m.text)).toEqual(['[prod-eks] ServiceAccount logging/fluent-bit recreated']);
  });
});

describe('kill -9 between posting an alert and saving its message ref', { timeout: 120_000 }, () => {
  it('the next process finds the posted alert by its metadata and updates it instead of posting it twice', async () => {
    const dir = prepareDir();
    fakes = await startFakes();
    const { slack, kube } = fakes;
    // Killed while the fake answers the first alert's chat.postMessage: the message exists, the ref was never saved.
    let first: string | undefined;
    slack.on('change', (c) => {
      if (c.type === 'message' && c.message.channel === OPS && !c.message.threadTs && first === undefined) {
        first = c.message.ts;
        kill();
      }
    });
    await expect(startChild(dir, fakes)).rejects.toThrow(/exited before serving/);
    child = undefined;
    const killedGroup = slack.message(OPS, first!)!.metadata!.event_payload['group_id'] as string;
    peek = await openStore(join(dir, 'tw.db'));
    expect(await peek.slackRefs.getAlertRef(killedGroup)).toBeUndefined();
    expect(await peek.slackRefs.getGroupIntent(killedGroup)).toMatchObject({ channel: OPS });

    h = await startHarness({ dir, fakeSlack: slack, kube });
    const store = h.serve.context.store;
    expect(await store.slackRefs.getAlertRef(killedGroup)).toMatchObject({ channel: OPS, ts: first });
    expect(await store.slackRefs.getGroupIntent(killedGroup)).toBeUndefined();
    expect(slack.message(OPS, first!)!.edits.length).toBeGreaterThanOrEqual(1);
    // One alert per group (a ServiceAccount's findings), each carrying its group id in the message metadata.
    const alerts = slack.messages(OPS).filter((m) => !m.threadTs);
    const ids = alerts.map((m) => m.metadata?.event_payload['group_id']);
    expect(new Set(ids).size).toBe(ids.length);
    const groups = [...new Set((await store.findings.list(CLUSTER)).map((f) => groupIdOf(f.finding)))];
    expect(ids.sort()).toEqual(groups.filter(async (g) => (await store.slackRefs.getAlertRef(g))?.channel === OPS).sort());
    // Looked up only for findings with an intent left (posts are queued per channel, so more than one may be pending).
    // (The channel checks at start read history with limit 1 and no metadata; they are not lookups.)
    const looked = slack.callsTo('conversations.history').filter((c) => String(c.args['include_all_metadata']) === 'true').length;
    expect(looked).toBeGreaterThanOrEqual(1);
    expect(looked).toBeLessThan(ids.length);
  });
});

describe('leader change during an approved restart', () => {
  it('the old leader stops before the PATCH; the new leader sends it once and follows the rollout to the end', async () => {
    let lead: 'a' | 'b' = 'a';
    h = await startHarness({ owner: () => lead === 'a' });
    const other = await startHarness({ dir: h.dir, fakeSlack: h.slack, kube: h.kube, owner: () => lead === 'b' });
    try {
      // Leadership moves right after the old leader stored `running` (its "started" Event), before its PATCH.
      h.kube.addReactor((req) => {
        if (req.method === 'POST' && req.resource === 'events' && String((req.body as { message?: string }).message).includes(' started')) lead = 'b';
        return undefined;
      });
      const alert = await h.alert('kube-system', 'multus');
      await h.click(REQUESTER, alert, 'tw_restart');
      const approval = h.slack.thread(OPS, alert.ts).find((m) => m.text.includes('approval needed'))!;
      await h.click(APPROVER, approval, 'tw_approve');
      const store = h.serve.context.store;
      await until(async () => (await store.approvals.list())[0]!.state === 'succeeded', 'the new leader to finish the restart');
      await other.bot.idle();
      expect(realWrites(h.kube, 'PATCH', 'daemonsets')).toHaveLength(1);
      expect(h.slack.message(OPS, approval.ts)!.text).toBe('✅ Done [prod-eks]: restart of DaemonSet kube-system/kube-multus-ds (approved by U0APPROVE1)');
      expect(h.slack.thread(OPS, alert.ts).filter((m) => m.text.includes('rollout of DaemonSet') || m.text.includes('rolling out')).map((m) => m.text)).toEqual([
        '✅ [prod-eks] rollout of DaemonSet kube-system/kube-multus-ds complete',
      ]);
    } finally {
      await other.stop({ keepFakes: true });
    }
  });
});
