/**
 * Approvals that never stall (docs/slack.md "Reminders, escalation and paging"), end to end: the real `tokenwatch
 * serve` and Bolt app (HTTP mode) against the loopback fake Slack and fake Kubernetes API server (harness.ts), on the
 * SQLite store, with the service clock moved by the test. A request left unanswered is reminded once and escalated
 * once at expiry; the requester is told each outcome by direct message; nothing is repeated or lost across a restart.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/index.js';
import { sendBlockAction, type FakeSlack } from '../../src/sandbox/fakes/slack.js';
import { viewSubmissionPayload } from '../fakes/slack-requests.js';
import { APPROVER, blockText, ONCALL_APPROVER, OPS, REQUESTER, SECRET, startHarness, type Harness } from './harness.js';

const MIN = 60_000;
const HOUR = 60 * MIN;
const ESCALATION_GROUP = 'S0ESCALAT1';
/** The bot's direct-message channel with the requester (the fake names it as Slack does: `D…`). */
const REQUESTER_DM = `D${REQUESTER.slice(1)}`;

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

const withEscalation = { tweak: (c: Config) => void (c.slack!.approvals.escalateTo = ESCALATION_GROUP) };

/** Requests a restart of kube-multus-ds as REQUESTER; returns the alert and the approval message. */
async function requestRestart(x: Harness) {
  const alert = await x.alert('kube-system', 'multus');
  await x.click(REQUESTER, alert, 'tw_restart');
  const approval = x.slack.thread(OPS, alert.ts).filter((m) => m.text.includes('approval needed')).at(-1);
  if (!approval) throw new Error('no approval message');
  return { alert, approval };
}

const threadTexts = (slack: FakeSlack, ts: string) => slack.thread(OPS, ts).map((m) => blockText(m));
const reminders = (slack: FakeSlack, ts: string) => threadTexts(slack, ts).filter((t) => t.includes('Reminder:'));
const escalations = (slack: FakeSlack, ts: string) => threadTexts(slack, ts).filter((t) => t.includes('Expired unanswered'));
const dms = (slack: FakeSlack) => slack.messages(REQUESTER_DM).map((m) => m.text);

async function sweep(x: Harness): Promise<void> {
  await x.bot.sweep();
  await x.bot.idle();
}

describe('an unanswered request', () => {
  it('is reminded once at half its expiry, escalated once at expiry, and its requester told it expired — also across a restart', async () => {
    h = await startHarness(withEscalation);
    const { alert } = await requestRestart(h);
    const dir = h.dir;

    // Before half the expiry (30 min): nothing.
    h.advance(14 * MIN);
    await sweep(h);
    expect(reminders(h.slack, alert.ts)).toEqual([]);

    // At half: one reminder in the alert's thread, naming the approvers who may still act (group expanded), not the requester.
    h.advance(2 * MIN);
    await sweep(h);
    const r = reminders(h.slack, alert.ts);
    expect(r).toHaveLength(1);
    expect(r[0]).toContain(`<@${APPROVER}>`);
    expect(r[0]).toContain(`<@${ONCALL_APPROVER}>`);
    expect(r[0]).toContain('still waits for approval (0 of 1)');
    expect(r[0]).toContain('it expires in 14 min');
    expect(r[0]!.split(`<@${REQUESTER}>`)).toHaveLength(2); // named once, as the requester, not asked to approve
    await sweep(h);
    expect(reminders(h.slack, alert.ts)).toHaveLength(1);

    // A restart before the expiry: the reminder is not sent again.
    const slack = h.slack;
    const kube = h.kube;
    const at = h.now();
    await h.stop({ keepFakes: true });
    h = await startHarness({ ...withEscalation, dir, fakeSlack: slack, kube, start: at });
    await sweep(h);
    expect(reminders(slack, alert.ts)).toHaveLength(1);
    expect(dms(slack)).toEqual([]);

    // At expiry: the request expires, the thread says it expired unanswered and mentions the escalation group once;
    // the requester gets one direct message.
    h.advance(15 * MIN);
    await sweep(h);
    const e = escalations(slack, alert.ts);
    expect(e).toHaveLength(1);
    expect(e[0]).toContain(`<!subteam^${ESCALATION_GROUP}>`);
    expect(e[0]).toContain('got 0 of 1 approvals in 30 min and expired; nothing was changed');
    expect(dms(slack)).toHaveLength(1);
    expect(dms(slack)[0]).toContain('Your restart request for DaemonSet `kube-system/kube-multus-ds` in *prod-eks* expired after 30 min with 0 of 1 approvals');
    // The message goes to the requester's user id (chat:write); Slack puts it in the bot's DM channel.
    expect(slack.callsTo('chat.postMessage').filter((c) => c.args.channel === REQUESTER)).toHaveLength(1);

    // Neither more sweeps nor a second restart repeat anything.
    await sweep(h);
    const at2 = h.now();
    await h.stop({ keepFakes: true });
    h = await startHarness({ ...withEscalation, dir, fakeSlack: slack, kube, start: at2 });
    await sweep(h);
    h.advance(HOUR);
    await sweep(h);
    expect(reminders(slack, alert.ts)).toHaveLength(1);
    expect(escalations(slack, alert.ts)).toHaveLength(1);
    expect(threadTexts(slack, alert.ts).join('\n').split(`<!subteam^${ESCALATION_GROUP}>`)).toHaveLength(2);
    expect(dms(slack)).toHaveLength(1);
  });

  it('without an escalation group, says it expired unanswered and mentions no group', async () => {
    h = await startHarness({ tweak: (c) => void (c.slack!.approvals.reminders = false) });
    const { alert } = await requestRestart(h);
    h.advance(31 * MIN);
    await sweep(h);
    expect(reminders(h.slack, alert.ts)).toEqual([]); // reminders: false
    const e = escalations(h.slack, alert.ts);
    expect(e).toHaveLength(1);
    expect(e[0]).not.toContain('subteam');
  });
});

describe('the requester is told the outcome', () => {
  it('approved, done and verified — each once, in order, as direct messages', async () => {
    h = await startHarness();
    const { alert, approval } = await requestRestart(h);
    await h.click(APPROVER, approval, 'tw_approve');
    expect(dms(h.slack)).toEqual([
      expect.stringContaining('✅ Your restart request for DaemonSet `kube-system/kube-multus-ds` in *prod-eks* was approved by <@U0APPROVE1>; tokenwatch runs it now.'),
      expect.stringContaining('is done. tokenwatch now verifies'),
    ]);
    // Verification after the settle period (2 h): verified.
    h.advance(2 * HOUR + MIN);
    await h.poll();
    await h.bot.idle();
    expect(h.slack.thread(OPS, alert.ts).some((m) => m.text.includes('verified'))).toBe(true);
    expect(dms(h.slack)).toHaveLength(3);
    expect(dms(h.slack)[2]).toContain('Verified: after your restart request for DaemonSet `kube-system/kube-multus-ds` in *prod-eks*, no signal of the alert came back');
    await sweep(h);
    expect(dms(h.slack)).toHaveLength(3);
  });

  it('rejected, with the reason; a request the requester withdraws is not told back', async () => {
    h = await startHarness();
    const { approval } = await requestRestart(h);
    await h.click(APPROVER, approval, 'tw_reject');
    const view = h.slack.views().filter((v) => v.view.callback_id === 'tw_reject_reason').at(-1)!;
    await sendBlockAction(h.bot.eventsUrl!, SECRET, viewSubmissionPayload({ user: APPROVER, view, values: { tw_reason: { tw_reason: 'not during the CNI upgrade' } } }));
    await h.bot.idle();
    expect(dms(h.slack)).toEqual([expect.stringContaining('🚫 Your restart request for DaemonSet `kube-system/kube-multus-ds` in *prod-eks* was rejected by <@U0APPROVE1>: “not during the CNI upgrade”. Nothing was changed.')]);

    const second = await requestRestart(h);
    await h.click(REQUESTER, second.approval, 'tw_reject');
    await sweep(h);
    expect(dms(h.slack)).toHaveLength(1);
  });
});
