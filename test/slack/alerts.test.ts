/**
 * Alerts end to end: one message per root cause (the findings of one ServiceAccount), never posted twice (next polls, restart of tokenwatch), updated in
 * place, escalations in the thread, snooze, details, a channel the bot is not in, and a 429 from Slack.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeSlack } from '../../src/sandbox/fakes/slack.js';
import { auditEvent } from '../sources/events.js';
import {
  blockText,
  buttonIds,
  CLUSTER,
  ONCALL,
  ONCALL_APPROVER,
  OPS,
  overflowLabels,
  REQUESTER,
  STAGING,
  startHarness,
  type Harness,
} from './harness.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

const topLevelPosts = (x: Harness, channel = OPS) => x.slack.callsTo('chat.postMessage').filter((c) => c.args.channel === channel && c.args.thread_ts === undefined && c.status === 200 && c.response.ok === true);
const updates = (x: Harness) => x.slack.callsTo('chat.update');

describe('alerts', () => {
  it('posts one alert per ServiceAccount with the cluster name and its actions; later polls and a restart of tokenwatch never post it again', async () => {
    h = await startHarness();
    const texts = h.slack.messages(OPS).map((m) => m.text);
    // The Multus stale tokens and the 401s they cause are one alert (one root cause), its header the worst fact.
    expect(texts).toEqual([
      '🔴 [prod-eks] critical: kube-system/multus — requests now fail with 401 (requests rejected with 401 · stale tokens)',
      '🔵 [prod-eks] info: flux-system/helm-controller — rejected in 44 days (stale tokens)',
      '🔵 [prod-eks] info: logging/fluent-bit — rejected in 70 days (stale tokens)',
      '🔵 [prod-eks] info: ci/deployer — legacy Secret token in use (legacy Secret token)',
    ]);
    const multus = await h.alert('kube-system', 'multus');
    expect((await h.alert('kube-system', 'multus', 'unauthorized')).ts).toBe(multus.ts);
    expect((multus.blocks![0] as { text: { text: string } }).text.text).toBe('🔴 Critical · prod-eks · kube-system/multus — requests now fail with 401');
    expect(buttonIds(multus)).toEqual(['tw_restart', 'tw_more']);
    expect(overflowLabels(multus)).toEqual(['Snooze 1 day', 'Snooze 7 days', 'Details']);
    expect(blockText(multus)).toContain('Restart DaemonSet kube-multus-ds — buys 90 days');
    expect(blockText(multus)).toContain('of 6 live'); // pods live of m, m from the DaemonSet
    // The example's legacy-token subject runs no workload: no restart button; Recreate (a fix for a legacy token) in the menu.
    expect(buttonIds(await h.alert('ci', 'deployer', 'legacy-token'))).toEqual(['tw_more']);
    expect(overflowLabels(await h.alert('ci', 'deployer'))).toEqual(['Recreate ServiceAccount…', 'Snooze 1 day', 'Snooze 7 days', 'Details']);
    expect(topLevelPosts(h)).toHaveLength(4);

    await h.poll();
    expect(topLevelPosts(h)).toHaveLength(4);
    expect(updates(h)).toHaveLength(0); // nothing changed: same content hash

    // Restart tokenwatch on the same store and audit log.
    const { dir, slack, kube } = h;
    await h.stop({ keepFakes: true });
    h = await startHarness({ dir, fakeSlack: slack, kube });
    expect(topLevelPosts(h)).toHaveLength(4);
    expect(h.slack.messages(OPS)).toHaveLength(4);

    // A day later the days-left figures change: updated in place, still no new message.
    h.advance(DAY);
    await h.poll();
    expect(topLevelPosts(h)).toHaveLength(4);
    expect(updates(h).length).toBeGreaterThanOrEqual(2);
    expect((await h.alert('flux-system', 'helm-controller')).text).toBe('🔵 [prod-eks] info: flux-system/helm-controller — rejected in 43 days (stale tokens)');
  });

  it('posts an escalation (info → warning) in the alert thread and updates the header', async () => {
    h = await startHarness();
    const fb = await h.alert('logging', 'fluent-bit');
    h.advance(45 * DAY);
    await h.poll();
    const replies = h.slack.thread(OPS, fb.ts).map((m) => m.text);
    expect(replies).toEqual(['[prod-eks] logging/fluent-bit escalated from info to warning']);
    expect(((await h.alert('logging', 'fluent-bit')).blocks![0] as { text: { text: string } }).text.text).toBe('🟠 Warning · prod-eks · logging/fluent-bit — rejected in 25 days');
    h.advance(HOUR);
    await h.poll();
    expect(h.slack.thread(OPS, fb.ts)).toHaveLength(1);
  });

  it('snooze: the alert says so and is not updated until the snooze ends', async () => {
    h = await startHarness();
    const multus = await h.alert('kube-system', 'multus');
    await h.click(REQUESTER, multus, 'tw_snooze_1d');
    const store = h.serve.context.store;
    const id = (await store.findings.list()).find((f) => f.finding.serviceAccount === 'multus' && f.finding.kind === 'stale-token')!.id;
    expect(await store.findings.get(id)).toMatchObject({ status: 'snoozed' });
    // The alert is the ServiceAccount's: its 401 finding is snoozed with it.
    const id401 = (await store.findings.list()).find((f) => f.finding.serviceAccount === 'multus' && f.finding.kind === 'unauthorized')!.id;
    expect(await store.findings.get(id401)).toMatchObject({ status: 'snoozed' });
    const snoozed = await h.alert('kube-system', 'multus');
    expect(blockText(snoozed)).toContain('😴 Snoozed until');
    expect(h.slack.thread(OPS, multus.ts).map((m) => m.text)).toEqual(['[prod-eks] kube-system/multus snoozed until 2026-11-21 12:00 UTC']);
    expect((await store.actions.list(CLUSTER)).map((r) => [r.action, r.actor, r.result])).toEqual([
      ['snooze', REQUESTER, 'snoozed'],
      ['snooze', REQUESTER, 'snoozed'],
    ]);

    const editsBefore = snoozed.edits.length;
    h.advance(2 * HOUR);
    await h.poll();
    expect((await h.alert('kube-system', 'multus')).edits).toHaveLength(editsBefore);

    h.advance(DAY);
    await h.poll();
    expect((await store.findings.get(id))!.status).toBe('open');
    expect(blockText(await h.alert('kube-system', 'multus'))).not.toContain('Snoozed');
    expect(topLevelPosts(h)).toHaveLength(4);
  });

  it('details: posts the tokens, cause and evidence of every signal in the thread once a minute at most', async () => {
    h = await startHarness();
    const multus = await h.alert('kube-system', 'multus');
    await h.click(ONCALL_APPROVER, multus, 'tw_details');
    await h.click(ONCALL_APPROVER, multus, 'tw_details');
    const thread = h.slack.thread(OPS, multus.ts);
    // One details reply per signal of the alert (most severe first, then the nearer rejection): stale tokens, 401s.
    expect(thread.map((m) => (m.blocks![0] as { text: { text: string } }).text.text)).toEqual([
      '🔎 Details · prod-eks · kube-system/multus · stale-token',
      '🔎 Details · prod-eks · kube-system/multus · unauthorized',
    ]);
    expect(blockText(thread[0]!)).toContain('`kube-multus-ds-b4j4z`');
    expect(blockText(thread[0]!)).toContain('*Sources:*');
    expect(blockText(thread[0]!)).toContain('Requests per hour, last 24 h');
    expect(h.ephemerals(ONCALL_APPROVER)).toEqual(['The details were posted in the alert’s thread less than a minute ago.']);
  });

  it('a channel the bot is not in: one clear log line, /tokens status shows it, alerts resume once invited', async () => {
    const logs: Array<Record<string, unknown>> = [];
    h = await startHarness({ logs });
    const channelErrors = () => logs.filter((l) => typeof l['msg'] === 'string' && (l['msg'] as string).startsWith('cannot post to Slack channel'));
    expect(channelErrors().map((l) => l['msg'])).toEqual([
      'cannot post to Slack channel C0STAGE001: the bot is not a member of this channel: invite it with /invite @tokenwatch (or add the chat:write.public scope for public channels)',
    ]);
    expect(channelErrors()[0]).toMatchObject({ level: 'error', channel: STAGING, clusters: ['staging-eks'], error: 'not_in_channel' });
    // The alert stays queued and is tried again after its backoff (5 s, then 10 s), on the queue's clock.
    h.advance(5_000);
    await h.poll('staging-eks');
    expect(channelErrors()).toHaveLength(1);
    await h.command('status staging-eks', REQUESTER, STAGING);
    expect(blockText(h.slack.ephemerals({ user: REQUESTER }).at(-1)!)).toContain('⚠️ Alerts channel <#C0STAGE001>: the bot is not in this channel; invite it with `/invite @tokenwatch`');
    expect(await h.metrics.text()).toContain('tokenwatch_slack_api_errors_total{method="chat.postMessage",error="not_in_channel"} 2');

    h.slack.setBotMembership(STAGING, true);
    h.advance(10_000);
    await h.poll('staging-eks');
    expect(h.slack.messages(STAGING).map((m) => m.text)).toEqual(['🟠 [staging-eks] warning: logging/fluent-bit — rejected in 8 days (stale tokens)']);
    expect(logs.some((l) => l['msg'] === 'Slack channel works again')).toBe(true);
  });

  it('a poll does not wait for Slack: a failed post stays queued, /tokens status shows the backlog, and it goes out after its backoff', async () => {
    h = await startHarness();
    const before = h.slack.messages(OPS).length;
    h.appendAudit([auditEvent({ auditID: 'queued-1', time: h.now() - 60_000, kind: 'stale', namespace: 'team-a', serviceAccount: 'worker', pod: 'worker-1', secondsAfterWarning: 1_000_000 })]);
    h.slack.failNext('chat.postMessage', 'internal_error', 1, (args) => String(args['text']).includes('team-a/worker'));
    await h.poll();
    expect(h.slack.messages(OPS)).toHaveLength(before);
    await h.command(`status ${CLUSTER}`, REQUESTER);
    expect(blockText(h.slack.ephemerals({ user: REQUESTER }).at(-1)!)).toContain('📬 Slack backlog: 1 alert update waiting, the oldest queued');
    // The staging channel's alert waits too (the bot is not in that channel): counted in the queue, not in the line.
    expect(h.bot.parts.drainer.backlog().depth).toBe(2);
    // Past the queue's backoff (5 s), the next poll finds it due: posted once, and the status line is gone.
    h.advance(5_000);
    await h.poll();
    expect(h.slack.messages(OPS).filter((m) => m.text.includes('team-a/worker'))).toHaveLength(1);
    await h.command(`status ${CLUSTER}`, REQUESTER);
    expect(blockText(h.slack.ephemerals({ user: REQUESTER }).at(-1)!)).not.toContain('Slack backlog');
  });

  it('a 429 from chat.postMessage is retried after Retry-After and the alert is posted once', async () => {
    const fake = await startFakeSlack({ channels: [{ id: OPS, name: 'ops' }], userGroups: { [ONCALL]: [ONCALL_APPROVER] } });
    fake.rateLimitNext('chat.postMessage', 1, 1);
    const t0 = Date.now();
    h = await startHarness({ fakeSlack: fake, tweak: (c) => void c.clusters.splice(1) });
    const calls = h.slack.callsTo('chat.postMessage');
    expect(calls.map((c) => c.status)).toEqual([429, 200, 200, 200, 200]);
    expect(calls[1]!.at - calls[0]!.at).toBeGreaterThanOrEqual(1000);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1000);
    expect(h.slack.messages(OPS)).toHaveLength(4);
    expect(await h.metrics.text()).toContain('tokenwatch_slack_api_errors_total{method="chat.postMessage",error="ratelimited"} 1');
  });
});
