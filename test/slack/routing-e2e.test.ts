/**
 * Routing rules end to end: real `tokenwatch serve` + Bolt (HTTP mode and Socket Mode) against the fake Slack and the
 * fake Kubernetes API server, driven by the bundled example (Multus DaemonSet in kube-system, Flux controllers in
 * flux-system, others elsewhere; see harness.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/index.js';
import { appHomeOpenedBody, blockActionPayload, sendEvent, type FakeMessage, type FakeSlack } from '../../src/sandbox/fakes/slack.js';
import { APPROVER, SECRET, blockText, buttonValue, ELSEWHERE, OPS, REQUESTER, socketConnected, startHarness, startFakes, startSocketModeHarness, waitFor, type Harness, type SocketModeHarness } from './harness.js';

/** @network-oncall */
const NETWORK_ONCALL = 'S0NETONCAL';
const NET_MENTION = `<!subteam^${NETWORK_ONCALL}>`;

const NET_ID = 'C0NETALERT';
const PLATFORM_ID = 'C0PLATFORM';

/** kube-system DaemonSets → #net-alerts mentioning @network-oncall; flux-system → #platform (by name, or by id). */
function routes(byName: boolean): (c: Config) => void {
  return (c) => {
    c.slack!.routes = [
      { match: { namespaces: ['kube-system'], kinds: ['DaemonSet'] }, channel: byName ? '#net-alerts' : NET_ID, owners: [NETWORK_ONCALL], mentionFrom: 'info' },
      { match: { namespaces: ['flux-system'] }, channel: byName ? '#platform' : PLATFORM_ID, owners: [], mentionFrom: 'info' },
    ];
  };
}

function channelId(slack: FakeSlack, name: string): string {
  const c = slack.channels().find((x) => x.name === name || x.id === (name === 'net-alerts' ? NET_ID : PLATFORM_ID));
  if (!c) throw new Error(`no channel #${name}: ${JSON.stringify(slack.channels().map((x) => x.name))}`);
  return c.id;
}

/** Every message of the fake Slack (top level and replies), with its versions' texts and blocks. */
function everything(slack: FakeSlack): FakeMessage[] {
  return slack.snapshot().channels.flatMap((c) => c.messages.filter((m) => !m.threadTs).flatMap((m) => [m, ...m.replies]));
}

/** How many times a mention was sent: in every post and every edit of every message. */
function mentionsSent(slack: FakeSlack, mention: string): number {
  return everything(slack).reduce((n, m) => n + [m, ...m.edits].filter((v) => blockText(v as FakeMessage).includes(mention) || v.text.includes(mention)).length, 0);
}

const subjects = (slack: FakeSlack, channel: string) => slack.messages(channel).filter((m) => !m.threadTs).map((m) => m.text);

async function checkRouting(h: Harness): Promise<{ net: string; platform: string }> {
  const net = channelId(h.slack, 'net-alerts');
  const platform = channelId(h.slack, 'platform');
  const multus = await h.alert('kube-system', 'multus');
  expect(multus.channel).toBe(net);
  expect(h.slack.messages(net).filter((m) => m.text.includes('kube-system/multus'))).toHaveLength(1);
  const flux = await h.alert('flux-system', 'helm-controller');
  expect(flux.channel).toBe(platform);
  expect(h.slack.messages(platform).filter((m) => m.text.includes('flux-system/helm-controller'))).toHaveLength(1);
  expect(blockText(flux)).not.toContain('<!subteam^');
  // The Multus alert mentions the network on-call group once, in its first post.
  expect(blockText(multus)).toContain(NET_MENTION);
  // Unmatched alerts (the fluent-bit DaemonSet is in logging, ci/deployer has no workload) stay in the cluster's channel.
  expect((await h.alert('logging', 'fluent-bit')).channel).toBe(OPS);
  expect((await h.alert('ci', 'deployer')).channel).toBe(OPS);
  const ops = subjects(h.slack, OPS);
  expect(ops.some((t) => t.includes('kube-system/multus') || t.includes('flux-system/'))).toBe(false);
  expect(subjects(h.slack, platform).every((t) => t.includes('flux-system/'))).toBe(true);
  // Every alert is in exactly one channel.
  const all = everything(h.slack).filter((m) => !m.threadTs && m.text.includes('[prod-eks]'));
  expect(new Set(all.map((m) => m.text)).size).toBe(all.length);
  return { net, platform };
}

let h: Harness | undefined;
let sm: SocketModeHarness | undefined;
afterEach(async () => {
  await h?.stop();
  await sm?.h.stop();
  await sm?.ws.close();
  await sm?.front.close();
  h = undefined;
  sm = undefined;
});

describe('routing rules (HTTP mode)', () => {
  it('routes Multus to #net-alerts with one mention and Flux to #platform, once each; Restart works there and nowhere unrelated', async () => {
    const fakes = await startFakes();
    fakes.slack.addChannel({ id: NET_ID, name: 'net-alerts' });
    fakes.slack.addChannel({ id: PLATFORM_ID, name: 'platform' });
    h = await startHarness({ tweak: routes(true), fakeSlack: fakes.slack, kube: fakes.kube });
    const { net } = await checkRouting(h);
    const mentionsAfterFirstPoll = mentionsSent(h.slack, NET_MENTION);
    const netAlerts = h.slack.messages(net).filter((m) => !m.threadTs).length;
    expect(mentionsAfterFirstPoll).toBe(netAlerts);

    // More polls (edits of the alerts) neither repost nor mention again.
    h.advance(10 * 60_000);
    await h.poll();
    await h.poll();
    await checkRouting(h);
    expect(mentionsSent(h.slack, NET_MENTION)).toBe(mentionsAfterFirstPoll);

    // Restart on the routed alert: the approval goes in its thread in #net-alerts, and the approver's approval runs it.
    const multus = await h.alert('kube-system', 'multus');
    expect((await h.click(REQUESTER, multus, 'tw_restart')).status).toBe(200);
    const approval = h.slack.thread(net, multus.ts).find((m) => m.text.includes('approval needed'));
    expect(approval?.text).toContain('restart of DaemonSet kube-system/kube-multus-ds');
    // The same button replayed in an unrelated channel is refused and changes nothing.
    await h.click(REQUESTER, multus, 'tw_restart', { channel: ELSEWHERE });
    expect(h.ephemerals(REQUESTER).at(-1)).toContain('Each channel only reaches its own clusters');
    expect((await h.serve.context.store.approvals.list()).length).toBe(1);
    await h.click(APPROVER, approval!, 'tw_approve');
    const patches = h.kube.requestsMatching({ method: 'PATCH', resource: 'daemonsets' }).filter((r) => !r.dryRun);
    expect(patches).toHaveLength(1);
    expect(patches[0]!.path).toContain('kube-multus-ds');

    // /tokens for the cluster works in a routed channel (and says where each alert went), not in an unrelated one.
    await h.command('status prod-eks', REQUESTER, net);
    const status = h.slack.ephemerals({ user: REQUESTER }).at(-1)!;
    expect(JSON.stringify(status.blocks)).toContain(`in <#${net}>`);
    expect(JSON.stringify(status.blocks)).not.toContain(`in <#${OPS}>`);
    await h.command('status prod-eks', REQUESTER, ELSEWHERE);
    expect(h.slack.ephemerals({ user: REQUESTER }).at(-1)!.text).toContain('Each channel only reaches its own clusters');

    // The Home tab says where each routed alert went.
    const res = await sendEvent(h.bot.eventsUrl!, SECRET, appHomeOpenedBody({ user: REQUESTER, tab: 'home' }));
    expect(res.status).toBe(200);
    await h.bot.idle();
    await waitFor(() => h!.slack.homeView(REQUESTER) !== undefined);
    const home = JSON.stringify(h.slack.homeView(REQUESTER)!.view.blocks);
    expect(home).toMatch(new RegExp(`kube-system/multus>[^"]* · in <#${net}>`));
    expect(home).not.toContain(`in <#${OPS}>`);
  });
});

describe('routing rules on labels', () => {
  it('routes by a workload label read through the watch cache, which keeps only the keys rules name', async () => {
    const fakes = await startFakes();
    fakes.slack.addChannel({ id: PLATFORM_ID, name: 'platform' });
    h = await startHarness({
      fakeSlack: fakes.slack,
      kube: fakes.kube,
      tweak: (c) => {
        c.slack!.routes = [{ match: { labels: { 'app.kubernetes.io/part-of': 'flu*' } }, channel: PLATFORM_ID, owners: [], mentionFrom: 'info' }];
      },
    });
    expect((await h.alert('flux-system', 'helm-controller')).channel).toBe(PLATFORM_ID);
    expect((await h.alert('kube-system', 'multus')).channel).toBe(OPS);
    const rt = h.serve.context.clusters.get('prod-eks')!;
    const state = await rt.state!.describeServiceAccount('flux-system', 'helm-controller');
    expect(state.workloads.map((w) => w.labels)).toEqual([{ 'app.kubernetes.io/part-of': 'flux' }]);
    expect(state.pods.every((p) => p.annotations === undefined)).toBe(true);
    expect(rt.watchCache?.freshness().ok).toBe(true);
    // No rule names namespace labels: no namespace is read or watched.
    expect(rt.watchCache?.watchedResources).not.toContain('namespaces');
    expect(h.kube.requestsMatching({ resource: 'namespaces' })).toEqual([]);
  });

  /** A Namespace object with labels, as the team labels it (the snapshot has none). */
  const labelNamespace = (kube: Harness['kube'], name: string, labels: Record<string, string>): void => {
    kube.store.put({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } });
  };
  const byNamespaceLabel = (c: Config): void => {
    c.slack!.routes = [{ match: { namespaceLabels: { team: 'network' } }, channel: NET_ID, owners: [NETWORK_ONCALL], mentionFrom: 'info' }];
  };

  it('routes by a namespace label read through a namespace watch, opened only because a rule names namespace labels', async () => {
    const fakes = await startFakes();
    fakes.slack.addChannel({ id: NET_ID, name: 'net-alerts' });
    labelNamespace(fakes.kube, 'kube-system', { team: 'network', 'kubernetes.io/metadata.name': 'kube-system' });
    labelNamespace(fakes.kube, 'flux-system', { team: 'platform' });
    h = await startHarness({ fakeSlack: fakes.slack, kube: fakes.kube, tweak: byNamespaceLabel });
    const multus = await h.alert('kube-system', 'multus');
    expect(multus.channel).toBe(NET_ID);
    expect(blockText(multus)).toContain(NET_MENTION);
    expect((await h.alert('flux-system', 'helm-controller')).channel).toBe(OPS);
    const rt = h.serve.context.clusters.get('prod-eks')!;
    expect(rt.watchCache?.watchedResources).toContain('namespaces');
    expect(h.kube.requestsMatching({ verb: 'watch', resource: 'namespaces' }).length).toBeGreaterThan(0);
    expect(h.kube.requestsMatching({ verb: 'list', resource: 'namespaces' }).length).toBeGreaterThan(0);
    // Only the label keys rules name are kept.
    expect(rt.watchCache?.getNamespaceLabels('kube-system')).toEqual({ team: 'network' });
  });

  it('a namespace that cannot be read (no namespaces RBAC) matches no namespace-label rule: the cluster\'s channel, and the reads say why', async () => {
    const fakes = await startFakes();
    fakes.slack.addChannel({ id: NET_ID, name: 'net-alerts' });
    labelNamespace(fakes.kube, 'kube-system', { team: 'network' });
    fakes.kube.forbid({ resource: 'namespaces' });
    h = await startHarness({ fakeSlack: fakes.slack, kube: fakes.kube, tweak: byNamespaceLabel });
    expect((await h.alert('kube-system', 'multus')).channel).toBe(OPS);
    const rt = h.serve.context.clusters.get('prod-eks')!;
    expect(await rt.state!.namespaceLabels!('kube-system')).toEqual({ available: false, error: expect.stringContaining('forbidden: no permission to get namespaces') });
    expect(rt.watchCache?.freshness()).toMatchObject({ ok: false, reason: expect.stringContaining('namespaces') });
  });
});

describe('owner mentions and rule changes', () => {
  const OBS_ID = 'C0OBSERVE1';
  const OBS = 'S0OBSONCAL';
  const DAY = 86_400_000;

  it('mentions the owners when severity rises to mentionFrom, once; a rules change at restart does not move the alert', async () => {
    const fakes = await startFakes();
    h = await startHarness({
      fakeSlack: fakes.slack,
      kube: fakes.kube,
      tweak: (c) => {
        c.slack!.routes = [{ match: { clusters: ['prod-*'], namespaces: ['logging'] }, channel: OBS_ID, owners: [OBS], mentionFrom: 'warning' }];
      },
    });
    const fb = await h.alert('logging', 'fluent-bit');
    expect(fb.channel).toBe(OBS_ID);
    expect(blockText(fb)).not.toContain(`<!subteam^${OBS}>`); // info: below mentionFrom
    h.advance(45 * DAY);
    await h.poll();
    const replies = h.slack.thread(OBS_ID, fb.ts);
    expect(replies.map((m) => m.text)).toEqual(['[prod-eks] logging/fluent-bit escalated from info to warning']);
    expect(blockText(replies[0]!)).toContain(`🔔 Owners: <!subteam^${OBS}>`);
    h.advance(60 * 60_000);
    await h.poll();
    expect(mentionsSent(h.slack, `<!subteam^${OBS}>`)).toBe(1);

    // Restart with the logging rule pointing elsewhere: the alert stays (and is edited) where it was first posted.
    const dir = h.dir;
    await h.stop({ keepFakes: true });
    h = await startHarness({
      dir,
      fakeSlack: fakes.slack,
      kube: fakes.kube,
      start: Date.parse('2026-11-20T12:00:00Z') + 45 * DAY + 2 * 60 * 60_000,
      tweak: (c) => {
        c.slack!.routes = [{ match: { clusters: ['prod-*'], namespaces: ['logging'] }, channel: ELSEWHERE, owners: [OBS], mentionFrom: 'info' }];
      },
    });
    h.advance(20 * DAY);
    await h.poll();
    const after = await h.alert('logging', 'fluent-bit');
    expect(after.channel).toBe(OBS_ID);
    expect(after.ts).toBe(fb.ts);
    expect(h.slack.messages(ELSEWHERE).filter((m) => m.text.includes('logging/fluent-bit'))).toEqual([]);
    // Its escalation to critical mentions no one: the rule that matches now routes elsewhere.
    expect(h.slack.thread(OBS_ID, fb.ts).map((m) => m.text).at(-1)).toBe('[prod-eks] logging/fluent-bit escalated from warning to critical');
    expect(mentionsSent(h.slack, `<!subteam^${OBS}>`)).toBe(1);
  });
});

describe('channel health of routed channels', () => {
  /** A rule no alert of the seed matches: nothing is ever posted to its channel, so only a check can find it broken. */
  const quiet = (channel: string) => (c: Config) => {
    c.slack!.routes = [{ match: { namespaces: ['no-such-namespace'] }, channel, owners: [], mentionFrom: 'info' }];
  };
  const statusText = async (x: Harness): Promise<string> => {
    await x.command('status prod-eks', REQUESTER, OPS);
    return JSON.stringify(x.slack.ephemerals({ user: REQUESTER }).at(-1)!.blocks);
  };

  it('checks each routed channel at start and in /tokens status, not only after a failed post', async () => {
    const fakes = await startFakes();
    fakes.slack.addChannel({ id: NET_ID, name: 'net-alerts', botIsMember: false });
    h = await startHarness({ fakeSlack: fakes.slack, kube: fakes.kube, tweak: quiet(NET_ID) });
    await h.bot.idle();
    // At start: the channel was checked, never posted to, and its problem is known (health model and status).
    expect(h.slack.callsTo('chat.postMessage').filter((c) => c.args['channel'] === NET_ID)).toEqual([]);
    expect(h.slack.callsTo('conversations.history').some((c) => c.args['channel'] === NET_ID)).toBe(true);
    expect(h.bot.channelProblem?.('prod-eks')).toMatchObject({ error: 'not_in_channel' });
    expect(await statusText(h)).toContain(`⚠️ Routed alerts channel <#${NET_ID}>: the bot is not in this channel`);
    // Invited: the next /tokens status checks again and the warning is gone, without any post there.
    h.slack.setBotMembership(NET_ID, true);
    expect(await statusText(h)).not.toContain('Routed alerts channel');
    expect(h.bot.channelProblem?.('prod-eks')).toBeUndefined();
    // Removed again: /tokens status finds it at once.
    h.slack.setBotMembership(NET_ID, false);
    expect(await statusText(h)).toContain(`⚠️ Routed alerts channel <#${NET_ID}>`);
    expect(h.slack.callsTo('chat.postMessage').filter((c) => c.args['channel'] === NET_ID)).toEqual([]);
  });

  it('a public channel needs no membership when the token holds chat:write.public; a private one it is not in is reported', async () => {
    const fakes = await startFakes({ slackScopes: ['chat:write', 'chat:write.public', 'commands', 'channels:history', 'groups:history', 'usergroups:read'] });
    fakes.slack.addChannel({ id: NET_ID, name: 'net-alerts', botIsMember: false });
    fakes.slack.addChannel({ id: 'G0PRIVATE1', name: 'net-private', botIsMember: false, isPrivate: true });
    h = await startHarness({
      fakeSlack: fakes.slack,
      kube: fakes.kube,
      tweak: (c) => {
        c.slack!.routes = [
          { match: { namespaces: ['no-such-namespace'] }, channel: NET_ID, owners: [], mentionFrom: 'info' },
          { match: { namespaces: ['nor-this-one'] }, channel: 'G0PRIVATE1', owners: [], mentionFrom: 'info' },
        ];
      },
    });
    await h.bot.idle();
    const status = await statusText(h);
    expect(status).not.toContain(`Routed alerts channel <#${NET_ID}>`);
    expect(status).toContain('⚠️ Routed alerts channel <#G0PRIVATE1>: ');
  });
});

describe('routing rules (Socket Mode)', () => {
  it('routes the same way over Socket Mode', async () => {
    // Channels given by id: the fake creates them on the first post, the bot a member.
    sm = await startSocketModeHarness({ tweak: routes(false) });
    await waitFor(() => socketConnected(sm!.h));
    await sm.h.poll();
    await checkRouting(sm.h);
    expect(mentionsSent(sm.h.slack, NET_MENTION)).toBe(sm.h.slack.messages(channelId(sm.h.slack, 'net-alerts')).filter((m) => !m.threadTs).length);
    // Restart on the routed alert over the socket: the request goes in its thread in the routed channel; the same
    // click from an unrelated channel is refused.
    const { h: x, ws, fake } = sm;
    const alert = await x.alert('kube-system', 'multus');
    const click = (envelope: string, channel: string) =>
      ws.send({
        envelope_id: envelope,
        type: 'interactive',
        accepts_response_payload: false,
        payload: blockActionPayload({ user: REQUESTER, actionId: 'tw_restart', value: buttonValue(alert, 'tw_restart'), channel, messageTs: alert.ts, responseUrl: fake.responseUrl({ channel, user: REQUESTER, messageTs: alert.ts }) }),
      });
    await click('env-elsewhere', ELSEWHERE);
    await x.bot.idle();
    expect((await x.serve.context.store.approvals.list()).length).toBe(0);
    expect(fake.ephemerals({ user: REQUESTER }).at(-1)!.text).toContain('Each channel only reaches its own clusters');
    await click('env-routed', NET_ID);
    await x.bot.idle();
    expect(fake.thread(NET_ID, alert.ts).some((m) => m.text.includes('approval needed: restart of DaemonSet kube-system/kube-multus-ds'))).toBe(true);
    expect((await x.serve.context.store.approvals.list()).length).toBe(1);
  });
});
