/**
 * The Notifier against the fake Slack Web API, driven directly with findings (store + saveFindings), for the cases
 * the bundled example does not produce: first 401s of a subject (the same alert, a signal started), signals stopping,
 * a resolved finding seen again, an alert deleted in Slack, a channel configured by name, actions limited by the
 * policy, and the upgrade from one alert per finding (merge).
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { webApi } from '@slack/bolt';
import { DEFAULT_BOT_TOKEN, startFakeSlack, type FakeSlack } from '../../src/sandbox/fakes/slack.js';
import { parseConfig, type Config } from '../../src/config/index.js';
import { approvalPolicyFor } from '../../src/approvals/from-config.js';
import type { Finding } from '../../src/findings/types.js';
import { createLogger } from '../../src/observability/logger.js';
import { SlackApi } from '../../src/slack/api.js';
import { ButtonIds } from '../../src/slack/buttons.js';
import { ChannelMap } from '../../src/slack/channels.js';
import { messageHash, Notifier, visibleHash } from '../../src/slack/notifier.js';
import { compareItems } from '../../src/slack/outbox.js';
import type { OutboxItem } from '../../src/store/outbox.js';
import { openStore, type Store } from '../../src/store/index.js';
import { finding } from '../store/helpers.js';
import { groupIdOf } from '../../src/findings/groups.js';
import { buttonIds, overflowLabels } from './harness.js';

const T = Date.UTC(2026, 10, 20, 12, 0, 0);
const HOUR = 3_600_000;
const DAY_MS = 24 * HOUR;

let fake: FakeSlack;
let store: Store;

function setup(slack: Record<string, unknown> = {}, canRemediate = true): { notifier: Notifier; config: Config; channels: ChannelMap; now: { t: number } } {
  const config = parseConfig(
    {
      slack: { enabled: true, mode: 'http' },
      clusters: [{ name: 'prod', audit: { file: { path: '/dev/null' } }, slack: { channel: '#ops', approvers: ['U0APPROVE1'], ...slack } }],
    },
    { SLACK_BOT_TOKEN: DEFAULT_BOT_TOKEN, SLACK_SIGNING_SECRET: 'x'.repeat(32) },
  );
  const logger = createLogger({ level: 'silent' });
  const channels = new ChannelMap(config);
  const api = new SlackApi({ client: new webApi.WebClient(DEFAULT_BOT_TOKEN, { slackApiUrl: fake.apiUrl, retryConfig: { retries: 0 } }), logger, channelIntervalMs: 0 });
  const now = { t: T };
  const notifier = new Notifier({
    api,
    store,
    ids: new ButtonIds(DEFAULT_BOT_TOKEN, store),
    channels,
    clock: () => now.t,
    logger,
    policyFor: (c) => approvalPolicyFor(config.clusters.find((x) => x.name === c)!, config),
    canRemediate: () => canRemediate,
  });
  return { notifier, config, channels, now };
}

/** A poll: the findings stored, then its work items sent in queue order, as the drainer sends them (src/slack/drainer.ts). */
async function poll(n: Notifier, findings: Finding[], at: number): Promise<void> {
  const changes = await store.findings.save('prod', findings, at);
  for (const item of (await n.workItems('prod', findings, changes, at)).sort(compareItems)) await n.sendItem(item);
}

beforeEach(async () => {
  fake = await startFakeSlack({ channels: [{ id: 'C0OPS00001', name: 'ops' }] });
  store = await openStore(':memory:');
});
afterEach(async () => {
  await store.close();
  await fake.close();
});

const stale = finding({ id: 'f-stale', cluster: 'prod', severity: 'warning' });
const unauthorized = finding({ id: 'f-401', cluster: 'prod', kind: 'unauthorized', severity: 'critical', rejectionAt: null, maxSecondsAfterWarning: null, tokens: [] });

const CH = 'C0OPS00001';
const gid = groupIdOf(stale);

describe('Notifier', () => {
  it('posts to a channel configured by #name and learns its id for channel checks', async () => {
    const { notifier, channels } = setup();
    await poll(notifier, [stale], T);
    expect(fake.messages(CH).map((m) => m.text)).toEqual([expect.stringContaining('[prod] warning: kube-system/multus')]);
    expect(await store.slackRefs.getAlertRef(gid)).toMatchObject({ channel: CH, severity: 'warning', signals: ['stale-token'] });
    expect(channels.allows('prod', { id: CH, name: 'privategroup' })).toBe(true);
    expect(channels.allows('prod', { id: 'C0OTHER001', name: 'other' })).toBe(false);
  });

  it('first 401s of a subject with a stale-token alert: the same alert, edited, and a reply in its thread saying the signal started', async () => {
    const { notifier } = setup();
    await poll(notifier, [stale], T);
    const ts = (await store.slackRefs.getAlertRef(gid))!.ts;
    await poll(notifier, [unauthorized, stale], T + HOUR);
    expect(fake.messages(CH).map((m) => m.ts)).toEqual([ts]);
    expect(await store.slackRefs.getAlertRef(gid)).toMatchObject({ ts, severity: 'critical', signals: ['unauthorized', 'stale-token'] });
    expect(fake.thread(CH, ts).map((m) => m.text)).toEqual([
      '[prod] kube-system/multus escalated from warning to critical',
      '[prod] kube-system/multus: requests rejected with 401 started',
    ]);
    expect(fake.message(CH, ts)!.edits).toHaveLength(1);
    // The 401s stop (their finding resolved) while the stale tokens go on: said in the thread, the alert stays open.
    await store.findings.setStatus('f-401', { status: 'resolved', reason: 'quiet' }, T + 2 * HOUR);
    await poll(notifier, [stale], T + 2 * HOUR);
    expect(fake.thread(CH, ts).map((m) => m.text).at(-1)).toBe('[prod] kube-system/multus: requests rejected with 401 stopped');
    expect(fake.message(CH, ts)!.text).toMatch(/^🟠 \[prod\] warning: kube-system\/multus/);
  });

  it('both findings new in the same poll: one alert, posted once with its final blocks, no thread reply and no edit', async () => {
    const { notifier } = setup();
    await poll(notifier, [{ ...unauthorized, requests: 6 }, { ...stale, requests: 60 }], T);
    expect(fake.messages(CH)).toHaveLength(1);
    const ts = (await store.slackRefs.getAlertRef(gid))!.ts;
    expect(fake.thread(CH, ts)).toEqual([]);
    expect(fake.message(CH, ts)!.edits).toEqual([]);
    expect(fake.callsTo('chat.update')).toEqual([]);
    // A further use of the same token changes no count shown (bucketed): no edit.
    await poll(notifier, [{ ...unauthorized, requests: 7 }, { ...stale, requests: 61 }], T + 60_000);
    expect(fake.callsTo('chat.update')).toEqual([]);
  });

  it('a resolved finding seen again is reopened in its thread, with buttons back', async () => {
    const { notifier } = setup();
    await poll(notifier, [stale], T);
    await store.findings.setStatus('f-stale', { status: 'resolved' }, T + HOUR);
    await notifier.refresh('f-stale');
    const ts = (await store.slackRefs.getAlertRef(gid))!.ts;
    expect(fake.message(CH, ts)!.text).toBe('✅ [prod] resolved: kube-system/multus (stale tokens)');
    // Resolved: nothing to act on, only Details in its menu.
    expect(buttonIds(fake.message(CH, ts)!)).toEqual(['tw_more']);
    await poll(notifier, [{ ...stale, lastSeen: new Date(T + 2 * HOUR).toISOString() }], T + 2 * HOUR);
    expect((await store.findings.get('f-stale'))!.status).toBe('open');
    expect(fake.thread(CH, ts).map((m) => m.text)).toEqual(['[prod] kube-system/multus reopened: seen again after it was resolved']);
    expect(buttonIds(fake.message(CH, ts)!)).toContain('tw_restart');
    expect(fake.messages(CH)).toHaveLength(1);
  });

  it('an alert deleted in Slack is posted anew, and the ref follows', async () => {
    const { notifier } = setup();
    await poll(notifier, [stale], T);
    const first = (await store.slackRefs.getAlertRef(gid))!;
    fake.failNext('chat.update', 'message_not_found');
    await poll(notifier, [{ ...stale, severity: 'critical' }], T + HOUR);
    const second = (await store.slackRefs.getAlertRef(gid))!;
    expect(second.ts).not.toBe(first.ts);
    expect(fake.messages(CH).map((m) => m.ts)).toEqual([first.ts, second.ts]);
    // The ref keeps the hash of what the reader sees (the view the message was rendered from).
    expect(second.hash).toBe(visibleHash(notifier.viewGroup(await notifier.membersOf(stale), T)));
    expect(fake.message(CH, second.ts)!.text).toBe(notifier.renderGroup(await notifier.membersOf(stale), T).text);
  });

  it('actions follow the policy and Kubernetes access', async () => {
    const onlySnooze = setup({ actions: ['snooze'] });
    await poll(onlySnooze.notifier, [stale], T);
    expect(buttonIds(fake.messages(CH)[0]!)).toEqual(['tw_more']);
    expect(overflowLabels(fake.messages(CH)[0]!)).toEqual(['Snooze 1 day', 'Snooze 7 days', 'Details']);
  });

  it('no restart or recreate in a denied namespace or without Kubernetes access', async () => {
    const denied = setup({ namespaces: { deny: ['kube-*'] } });
    await poll(denied.notifier, [stale], T);
    expect(buttonIds(fake.messages(CH)[0]!)).toEqual(['tw_more']);
    expect(overflowLabels(fake.messages(CH)[0]!)).toEqual(['Snooze 1 day', 'Snooze 7 days', 'Details']);
    const noKube = setup({}, false);
    expect(noKube.notifier.restartButtons(stale)).toEqual([]);
  });

  it('upgrade: per-kind alerts of one ServiceAccount are merged — the newer kept and showing the group, the older edited once to point at it', async () => {
    const { notifier } = setup();
    // An earlier version posted one alert per finding and saved a message ref per finding.
    await store.findings.save('prod', [stale, unauthorized], T);
    const client = new webApi.WebClient(DEFAULT_BOT_TOKEN, { slackApiUrl: fake.apiUrl, retryConfig: { retries: 0 } });
    const older = await client.chat.postMessage({ channel: CH, text: '🟠 [prod] warning: stale token used by kube-system/multus' });
    const newer = await client.chat.postMessage({ channel: CH, text: '🔴 [prod] critical: 401 unauthorized used by kube-system/multus' });
    await store.slackRefs.saveMessageRef('f-stale', { channel: CH, ts: older.ts!, severity: 'warning', hash: 'old' });
    await store.slackRefs.saveMessageRef('f-401', { channel: CH, ts: newer.ts!, severity: 'critical', hash: 'old' });

    await poll(notifier, [unauthorized, stale], T + HOUR);
    expect(fake.messages(CH).map((m) => m.ts)).toEqual([older.ts, newer.ts]); // nothing new posted
    expect(await store.slackRefs.getAlertRef(gid)).toMatchObject({ channel: CH, ts: newer.ts, signals: ['unauthorized', 'stale-token'] });
    expect(fake.message(CH, newer.ts!)!.text).toBe('🔴 [prod] critical: kube-system/multus — requests failed with 401 (requests rejected with 401 · stale tokens)');
    const link = fake.callsTo('chat.getPermalink').at(-1)!.response['permalink'] as string;
    expect(link).toContain(newer.ts!.replace('.', ''));
    const merged = fake.message(CH, older.ts!)!;
    expect(merged.text).toBe('[prod] kube-system/multus: merged into one alert');
    expect(JSON.stringify(merged.blocks)).toContain(`<${link}|this alert>`);
    expect(merged.edits).toHaveLength(1);
    expect(await store.slackRefs.getMessageRef('f-stale')).toBeUndefined();
    expect(await store.slackRefs.getMessageRef('f-401')).toBeUndefined();
    // Threads of the older message's finding go to the kept alert now.
    expect(await notifier.messageOf('f-stale')).toEqual({ channel: CH, ts: newer.ts });

    // Later polls never touch the pointer again.
    await poll(notifier, [unauthorized, { ...stale, severity: 'critical' }], T + 2 * HOUR);
    expect(fake.message(CH, older.ts!)!.edits).toHaveLength(1);
    expect(fake.messages(CH)).toHaveLength(2);
  });
});

describe('Notifier: an alert is edited only when something a reader sees changes', () => {
  const SEC = 1000;
  const tok = stale.tokens[0]!;
  const at = (ms: number) => new Date(ms).toISOString();
  /** The stale finding after `n` uses in all, the last at `last`; the earliest rejection moved by `jitterMs` (audit events give whole seconds). */
  const used = (n: number, last: number, jitterMs = 0, extra: Partial<Finding> = {}): Finding => {
    const rejectionAt = at(T + 10 * DAY_MS + HOUR + jitterMs);
    return { ...stale, requests: n, lastSeen: at(last), rejectionAt, tokens: [{ ...tok, requests: n, lastSeen: at(last), rejectionAt }], ...extra };
  };

  it('a new use of a pod already listed (count in the same bucket, rejection a second later): no chat.update', async () => {
    const { notifier, now } = setup();
    await poll(notifier, [used(6, T - 60 * SEC)], T);
    now.t = T + 5 * 60_000;
    await poll(notifier, [used(7, now.t - SEC, SEC)], now.t);
    now.t = T + 10 * 60_000;
    await poll(notifier, [used(8, now.t - SEC, 2 * SEC)], now.t);
    expect(fake.callsTo('chat.update')).toEqual([]);
    expect(fake.messages(CH)).toHaveLength(1);
  });

  it('a new pod: one chat.update, showing it', async () => {
    const { notifier, now } = setup();
    await poll(notifier, [used(6, T - 60 * SEC)], T);
    const ts = (await store.slackRefs.getAlertRef(gid))!.ts;
    now.t = T + 5 * 60_000;
    const pod2 = { ...tok, pod: 'kube-multus-ds-abcde', podUid: '7d3c1f7e-0000-4000-8000-000000000002' };
    const twoPods = used(7, now.t - SEC, 0, { pods: [...stale.pods, pod2.pod], tokens: [tok, pod2] });
    await poll(notifier, [twoPods], now.t);
    expect(fake.callsTo('chat.update')).toHaveLength(1);
    expect(JSON.stringify(fake.message(CH, ts)!.blocks)).toContain('2 live');
    // The same two pods again, one more use: nothing to edit.
    now.t = T + 10 * 60_000;
    await poll(notifier, [{ ...twoPods, requests: 8, lastSeen: at(now.t - SEC) }], now.t);
    expect(fake.callsTo('chat.update')).toHaveLength(1);
  });

  it('a count crossing a display bucket (9 → 12 requests: "5+" → "10+"): one chat.update', async () => {
    const { notifier, now } = setup();
    await poll(notifier, [used(6, T - 60 * SEC)], T);
    now.t = T + 5 * 60_000;
    await poll(notifier, [used(9, now.t - SEC)], now.t);
    expect(fake.callsTo('chat.update')).toEqual([]);
    now.t = T + 10 * 60_000;
    await poll(notifier, [used(12, now.t - SEC)], now.t);
    expect(fake.callsTo('chat.update')).toHaveLength(1);
    expect(JSON.stringify(fake.message(CH, (await store.slackRefs.getAlertRef(gid))!.ts)!.blocks)).toContain('10+ with stale tokens');
    now.t = T + 15 * 60_000;
    await poll(notifier, [used(19, now.t - SEC)], now.t);
    expect(fake.callsTo('chat.update')).toHaveLength(1);
  });

  it('the days-left figure changing: one chat.update', async () => {
    const { notifier, now } = setup();
    const f = { ...stale, rejectionAt: at(T + 5 * DAY_MS + HOUR), tokens: [{ ...tok, rejectionAt: at(T + 5 * DAY_MS + HOUR) }] };
    await poll(notifier, [f], T);
    const ts = (await store.slackRefs.getAlertRef(gid))!.ts;
    expect(JSON.stringify(fake.message(CH, ts)!.blocks)).toContain('5 days left');
    now.t = T + 30 * 60_000;
    await poll(notifier, [f], now.t);
    expect(fake.callsTo('chat.update')).toEqual([]);
    now.t = T + 2 * HOUR;
    await poll(notifier, [f], now.t);
    expect(fake.callsTo('chat.update')).toHaveLength(1);
    expect(JSON.stringify(fake.message(CH, ts)!.blocks)).toContain('4 days left');
  });

  it('a poll that changes nothing an alert shows writes nothing to its ref; one that does writes it once', async () => {
    const { notifier, now } = setup();
    const f = { ...stale, rejectionAt: at(T + 5 * DAY_MS + HOUR), tokens: [{ ...tok, rejectionAt: at(T + 5 * DAY_MS + HOUR) }] };
    await poll(notifier, [f], T);
    const saves = vi.spyOn(store.slackRefs, 'saveAlertRef');
    const before = (await store.slackRefs.getAlertRef(gid))!;
    for (const m of [10, 20, 30]) {
      now.t = T + m * 60_000;
      await poll(notifier, [f], now.t);
    }
    expect(fake.callsTo('chat.update')).toEqual([]);
    expect(saves).not.toHaveBeenCalled();
    expect(await store.slackRefs.getAlertRef(gid)).toEqual(before);
    // The days-left figure changes: one edit, and the ref records what the alert shows now.
    now.t = T + 2 * HOUR;
    await poll(notifier, [f], now.t);
    expect(fake.callsTo('chat.update')).toHaveLength(1);
    expect(saves).toHaveBeenCalledTimes(1);
    expect((await store.slackRefs.getAlertRef(gid))!.hash).toBe(visibleHash(notifier.viewGroup(await notifier.membersOf(f), now.t)));
    expect((await store.slackRefs.getAlertRef(gid))!.hash).not.toBe(before.hash);
  });

  it("sending a queued item of an alert that already shows its group reads its ref once and edits nothing", async () => {
    const { notifier, now } = setup();
    await poll(notifier, [used(6, T - 60 * SEC)], T);
    const ref = (await store.slackRefs.getAlertRef(gid))!;
    now.t = T + 60_000;
    await store.findings.save('prod', [used(6, T - 60 * SEC)], now.t);
    // An item queued while the alert was behind (a change since shown by another send, a click's edit).
    const item: OutboxItem = { key: `alert:${gid}`, kind: 'alert', cluster: 'prod', channel: CH, call: 'edit', urgency: 0, enqueuedAt: now.t, notBefore: 0, attempts: 0, version: 0, payload: {} };
    const reads = vi.spyOn(store.slackRefs, 'getAlertRef');
    expect(await notifier.sendItem(item)).toEqual({ channel: ref.channel, ts: ref.ts });
    expect(reads).toHaveBeenCalledTimes(1);
    expect(fake.callsTo('chat.update')).toEqual([]);
  });

  it("a poll that changes nothing its alerts show queues nothing, reading the cluster's refs and approvals once however many groups it touches", async () => {
    const { notifier } = setup();
    const groups = ['a', 'b', 'c'].map((sa) => ({ ...stale, id: `f-${sa}`, serviceAccount: sa }));
    await poll(notifier, groups, T);
    expect(fake.messages(CH)).toHaveLength(3);
    const one = vi.spyOn(store.slackRefs, 'getAlertRef');
    const all = vi.spyOn(store.slackRefs, 'alertRefsOf');
    const approvals = vi.spyOn(store.approvals, 'list');
    const changes = await store.findings.save('prod', groups, T + 60_000);
    expect(await notifier.workItems('prod', groups, changes, T + 60_000)).toEqual([]);
    expect(all).toHaveBeenCalledTimes(1);
    expect(approvals).toHaveBeenCalledTimes(1);
    expect(one).not.toHaveBeenCalled();
  });

  it('a poll queues an edit item for exactly the groups whose alert would change: a new pod, a signal started, a severity risen', async () => {
    const { notifier, now } = setup();
    const groups = ['a', 'b', 'c', 'd'].map((sa) => used(6, T - 60 * SEC, 0, { id: `f-${sa}`, serviceAccount: sa }));
    await poll(notifier, groups, T);
    now.t = T + 5 * 60_000;
    const pod2 = { ...tok, pod: 'kube-multus-ds-abcde', podUid: '7d3c1f7e-0000-4000-8000-000000000002' };
    const b = { ...groups[1]!, pods: [...stale.pods, pod2.pod], tokens: [tok, pod2] };
    const c401 = { ...unauthorized, id: 'f-c-401', serviceAccount: 'c' };
    const d = { ...groups[3]!, severity: 'critical' as const };
    const found = [groups[0]!, b, groups[2]!, c401, d];
    const changes = await store.findings.save('prod', found, now.t);
    const items = await notifier.workItems('prod', found, changes, now.t);
    expect(items.map((i) => [i.key, i.call]).sort()).toEqual(['b', 'c', 'd'].map((sa) => [`alert:${groupIdOf({ ...stale, serviceAccount: sa })}`, 'edit']).sort());
    for (const item of items.sort(compareItems)) await notifier.sendItem(item);
    expect(fake.callsTo('chat.update')).toHaveLength(3);
  });

  it('a group whose live findings are all snoozed gets no item until the snooze ends', async () => {
    const { notifier, now } = setup();
    await poll(notifier, [used(6, T - 60 * SEC)], T);
    await store.findings.setStatus(stale.id, { status: 'snoozed', until: T + DAY_MS }, T);
    now.t = T + 5 * 60_000;
    const bigger = used(40, now.t - SEC);
    expect(await notifier.workItems('prod', [bigger], await store.findings.save('prod', [bigger], now.t), now.t)).toEqual([]);
    now.t = T + DAY_MS + 60_000;
    expect((await notifier.workItems('prod', [bigger], await store.findings.save('prod', [bigger], now.t), now.t)).map((i) => i.call)).toEqual(['edit']);
  });

  it('a signal that starts during a snooze is shown at once and, when it stops before the snooze ends, the alert reads snoozed again', async () => {
    const { notifier, now } = setup();
    await poll(notifier, [used(6, T - 60 * SEC)], T);
    await store.findings.setStatus(stale.id, { status: 'snoozed', until: T + DAY_MS }, T);
    await notifier.refresh(stale.id); // as the Snooze click does: the alert says so at once
    const snoozed = JSON.stringify(fake.messages(CH)[0]!.blocks);
    expect(snoozed).toContain('Snoozed until');
    const updates = fake.callsTo('chat.update').length;
    now.t = T + 5 * 60_000;
    const found = [used(6, T - 60 * SEC), unauthorized]; // 401s of the same ServiceAccount start
    const items = await notifier.workItems('prod', found, await store.findings.save('prod', found, now.t), now.t);
    expect(items.map((i) => i.call)).toEqual(['edit']);
    for (const item of items) await notifier.sendItem(item);
    expect(fake.callsTo('chat.update')).toHaveLength(updates + 1);
    const shown = fake.messages(CH)[0]!;
    expect(shown.text).toContain('critical');
    expect(JSON.stringify(shown.blocks)).not.toContain('Snoozed until');

    // The 401s stop while the snooze lasts: the alert is edited once more — the signal gone, snoozed again — with a
    // "stopped" reply in its thread, and then left alone.
    now.t = T + DAY_MS - 10 * 60_000;
    await store.findings.setStatus(unauthorized.id, { status: 'resolved', reason: 'quiet' }, now.t);
    const after = [used(6, T - 60 * SEC)];
    const again = await notifier.workItems('prod', after, await store.findings.save('prod', after, now.t), now.t);
    expect(again.map((i) => i.call)).toEqual(['edit']);
    const replies = fake.callsTo('chat.postMessage').length;
    for (const item of again) await notifier.sendItem(item);
    expect(fake.callsTo('chat.update')).toHaveLength(updates + 2);
    const back = fake.messages(CH)[0]!;
    expect(JSON.stringify(back.blocks)).toContain('Snoozed until');
    expect(back.text).not.toContain('critical');
    expect(fake.callsTo('chat.postMessage').slice(replies).map((c) => String(c.args.text))).toEqual([expect.stringMatching(/stopped/i)]);
    now.t += 5 * 60_000;
    expect(await notifier.workItems('prod', after, await store.findings.save('prod', after, now.t), now.t)).toEqual([]);
  });

  it('an alert ref of an earlier version (hash of the whole message) that shows the current message is not edited on upgrade', async () => {
    const { notifier, now } = setup();
    await poll(notifier, [used(6, T - 60 * SEC)], T);
    const ref = (await store.slackRefs.getAlertRef(gid))!;
    const msg = notifier.renderGroup(await notifier.membersOf(stale), T);
    await store.slackRefs.saveAlertRef(gid, 'prod', { ...ref, hash: messageHash(msg) });
    now.t = T + 60_000;
    await poll(notifier, [used(6, T - 60 * SEC)], now.t);
    expect(fake.callsTo('chat.update')).toEqual([]);
    expect((await store.slackRefs.getAlertRef(gid))!.hash).toBe(visibleHash(notifier.viewGroup(await notifier.membersOf(stale), now.t)));
  });
});
