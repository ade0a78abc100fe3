/**
 * The App Home tab through the real Bolt app and the fake Slack, HTTP and Socket Mode: an `app_home_opened` event
 * (signed Events API request, or an `events_api` envelope) publishes the fleet's rejection calendar with
 * `views.publish`; a poll that changes what it shows republishes once after the debounce period, one that changes
 * nothing does not; more alerts than 100 blocks hold are capped and counted. The debounce runs on the service clock
 * (`h.advance`), its tick is called by the test (`tickMs: 0`).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { webApi } from '@slack/bolt';
import { appHomeOpenedBody, DEFAULT_BOT_TOKEN, sendEvent, startFakeSlack, type FakeSlack } from '../../src/sandbox/fakes/slack.js';
import { eventsApiEnvelope } from '../fakes/slack-requests.js';
import type { SocketModeServer, startApiFront } from '../fakes/slack-socket.js';
import { groupFindings } from '../../src/findings/groups.js';
import { daysLeft } from '../../src/slack/blocks/finding.js';
import { validateHomeView } from '../../src/slack/blocks/limits.js';
import { auditEvent } from '../sources/events.js';
import { APPROVER, CLUSTER, ONCALL_APPROVER, OPS, REQUESTER, SECRET, socketConnected, startHarness, startSocketModeHarness, waitFor, type Harness } from './harness.js';

const USER = 'U0HOMEUSR1';
const DEBOUNCE = 30_000;

type Block = { type: string; text?: { text: string }; elements?: Array<{ text: string }> };

function sections(blocks: unknown[]): string[] {
  return (blocks as Block[]).filter((b) => b.type === 'section').map((b) => b.text!.text);
}

/** The alert lines of a Home view: the sections between the "Alerts by days to rejection" header and the first divider. */
function alertLines(blocks: unknown[]): string[] {
  const bs = blocks as Block[];
  const start = bs.findIndex((b) => b.type === 'header' && b.text?.text === 'Alerts by days to rejection');
  const end = bs.findIndex((b, i) => i > start && b.type === 'divider');
  return bs.slice(start + 1, end).filter((b) => b.type === 'section').map((b) => b.text!.text);
}

function contextText(blocks: unknown[]): string[] {
  return (blocks as Block[]).filter((b) => b.type === 'context').flatMap((b) => (b.elements ?? []).map((e) => e.text));
}

let h: Harness | undefined;
let ws: SocketModeServer | undefined;
let front: Awaited<ReturnType<typeof startApiFront>> | undefined;
afterEach(async () => {
  await h?.stop();
  await front?.close();
  await ws?.close();
  h = undefined;
  ws = undefined;
  front = undefined;
});

async function openHome(user: string, tab: 'home' | 'messages' = 'home'): Promise<void> {
  const res = await sendEvent(h!.bot.eventsUrl!, SECRET, appHomeOpenedBody({ user, tab }));
  expect(res.status).toBe(200);
  await h!.bot.idle();
}

/** Open groups of every cluster, from the store (what the Home tab must list). */
async function openGroups(): Promise<Array<{ cluster: string; subject: string }>> {
  const out: Array<{ cluster: string; subject: string }> = [];
  for (const name of h!.serve.context.clusters.keys()) {
    for (const g of groupFindings((await h!.serve.context.store.findings.list(name, { status: ['open'] })).map((f) => f.finding))) out.push({ cluster: name, subject: `${g.namespace}/${g.serviceAccount}` });
  }
  return out;
}

describe('App Home tab (HTTP mode)', () => {
  it('opening Home publishes every cluster’s alerts by days to rejection, the 401s of Multus first, and source health', { timeout: 120_000 }, async () => {
    h = await startHarness({ slack: { home: { debounceMs: DEBOUNCE, tickMs: 0 } } });
    // The Messages tab is not the Home tab: nothing is published.
    await openHome(USER, 'messages');
    expect(h.slack.callsTo('views.publish')).toHaveLength(0);

    await openHome(USER);
    const home = h.slack.homeView(USER)!;
    expect(home.publishes).toBe(1);
    expect(validateHomeView(home.view)).toEqual([]);
    const lines = alertLines(home.view.blocks);
    const groups = await openGroups();
    // Every open alert of both clusters, once.
    expect(lines).toHaveLength(groups.length);
    for (const g of groups) expect(lines.filter((l) => l.includes(`*${g.cluster}*`) && l.includes(g.subject))).toHaveLength(1);
    expect(groups.some((g) => g.cluster === 'staging-eks')).toBe(true);
    // Multus: its requests are refused now (the 401s of the seed), so it is first, linked to its alert message.
    expect(lines[0]).toContain('kube-system/multus');
    expect(lines[0]).toContain('requests now fail with 401');
    const alert = await h.alert('kube-system', 'multus');
    expect(lines[0]).toContain(`<https://fake-workspace.slack.com/archives/${OPS}/p${alert.ts.replace('.', '')}|kube-system/multus>`);
    // The rest: days to rejection never decrease down the list; each is what its findings' rejection date says.
    const days = lines.slice(1).map((l) => /rejected in ([\d,]+) days?/.exec(l)?.[1]).filter((d): d is string => d !== undefined).map((d) => Number(d.replace(/,/g, '')));
    expect(days.length).toBeGreaterThan(0);
    expect([...days].sort((a, b) => a - b)).toEqual(days);
    const store = h.serve.context.store;
    const expected = (
      await Promise.all(
        (await openGroups())
          .filter((g) => g.subject !== 'kube-system/multus')
          .map(async (g) => {
            const fs = (await store.findings.list(g.cluster, { status: ['open'] })).map((f) => f.finding).filter((f) => `${f.namespace}/${f.serviceAccount}` === g.subject && f.rejectionAt);
            return fs.length ? Math.min(...fs.map((f) => daysLeft(f, h!.now())!)) : undefined;
          }),
      )
    )
      .filter((d): d is number => d !== undefined && d >= 0)
      .sort((a, b) => a - b);
    expect(days).toEqual(expected);
    // Source health per cluster: staging has no Kubernetes access (kubernetes: none).
    const text = sections(home.view.blocks).join('\n');
    // The fake API server has no /metrics endpoint: the poller's failed read is what Home shows.
    const metricsError = h.serve.context.clusters.get(CLUSTER)!.poller.health().metricsError;
    expect(metricsError).toBeDefined();
    expect(text).toContain(`*prod-eks* · ✅ audit log · ❌ API-server metrics: ${metricsError} · ✅ node probe`);
    expect(text).toContain('*staging-eks* · ✅ audit log · ➖ API-server metrics (kubernetes: none) · ➖ node probe (kubernetes: none)');
    expect(text).toContain('No approval is waiting for a vote.');
    // Readiness: every open stale-token ServiceAccount of prod-eks is a client that breaks once extension is off.
    const staleClients = (await store.findings.list(CLUSTER, { status: ['open'] })).filter((f) => f.finding.kind === 'stale-token').length;
    expect(staleClients).toBeGreaterThan(0);
    // The health model's accesses follow, in its words: staging-eks's channel does not have the bot.
    expect(text).toContain('*staging-eks* · ✅ audit log · ➖ API-server metrics (kubernetes: none) · ➖ node probe (kubernetes: none) · ❌ Slack cannot post to the cluster\'s alert channel: Slack answered not_in_channel, since 12:00 UTC');
    expect(text).toContain(`✅ node probe · ✅ Kubernetes API · ✅ watch cache · ✅ Slack · ❌ token extension off: not safe, ${staleClients} client${staleClients === 1 ? '' : 's'} would break`);

    // Opening again with nothing changed publishes nothing new.
    await openHome(USER);
    expect(h.slack.callsTo('views.publish')).toHaveLength(1);
  });

  it('the events URL answers Slack\'s url_verification challenge; an event with a bad signature is refused and publishes nothing', { timeout: 120_000 }, async () => {
    h = await startHarness({ slack: { home: { debounceMs: DEBOUNCE, tickMs: 0 } } });
    // Slack sends this when the Request URL is saved in Event Subscriptions (docs.slack.dev/reference/events/url_verification).
    const challenge = await sendEvent(h.bot.eventsUrl!, SECRET, { token: 'fake-verification-token', challenge: 'c-3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P', type: 'url_verification' });
    expect(challenge.status).toBe(200);
    expect(challenge.body).toContain('c-3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P');
    const forged = await sendEvent(h.bot.eventsUrl!, 'not-the-signing-secret-0000000000', appHomeOpenedBody({ user: USER }));
    expect(forged.status).toBe(401);
    await h.bot.idle();
    expect(h.slack.callsTo('views.publish')).toHaveLength(0);
  });

  it('a poll that changes what is shown republishes once after the debounce; one that changes nothing does not; an approval shows who must act', { timeout: 120_000 }, async () => {
    // kube-system protected with two approvals, as the shipped defaults do.
    h = await startHarness({
      slack: { home: { debounceMs: DEBOUNCE, tickMs: 0 } },
      tweak: (c) => {
        c.clusters[0]!.slack!.protectedNamespaces = ['kube-system'];
        c.clusters[0]!.slack!.protectedApprovals = 2;
      },
    });
    await openHome(USER);
    await openHome(APPROVER);
    expect(h.slack.callsTo('views.publish')).toHaveLength(2);

    // A poll with no new audit events: nothing shown changes.
    h.advance(DEBOUNCE + 1000);
    await h.poll();
    h.advance(DEBOUNCE + 1000);
    await h.bot.parts.home.tick();
    expect(h.slack.callsTo('views.publish')).toHaveLength(2);

    // A new ServiceAccount with stale tokens: the next polls (of either cluster) fold into one republish per user,
    // made only once the debounce period has passed.
    h.appendAudit([auditEvent({ auditID: 'home-new-1', time: h.now() - 60_000, kind: 'stale', namespace: 'monitoring', serviceAccount: 'prom-agent', pod: 'prom-agent-7f9c', secondsAfterWarning: 3_000_000 })]);
    await h.poll();
    await h.poll('staging-eks');
    h.advance(DEBOUNCE - 5000);
    expect(await h.bot.parts.home.tick()).toBe(0);
    expect(h.slack.callsTo('views.publish')).toHaveLength(2);
    h.advance(5000);
    expect(await h.bot.parts.home.tick()).toBe(2);
    expect(h.slack.callsTo('views.publish')).toHaveLength(4);
    expect(alertLines(h.slack.homeView(USER)!.view.blocks).filter((l) => l.includes('monitoring/prom-agent'))).toHaveLength(1);
    expect(h.slack.homeView(APPROVER)!.publishes).toBe(2);
    // Later ticks with nothing new publish nothing.
    h.advance(DEBOUNCE);
    expect(await h.bot.parts.home.tick()).toBe(0);

    // A restart requested by REQUESTER: the approval is listed with the approvers who have not voted, never the requester.
    await h.click(REQUESTER, await h.alert('kube-system', 'multus'), 'tw_restart');
    h.advance(DEBOUNCE);
    expect(await h.bot.parts.home.tick()).toBe(2);
    const approvals = sections(h.slack.homeView(USER)!.view.blocks).filter((l) => l.startsWith('⏳'));
    expect(approvals).toHaveLength(1);
    expect(approvals[0]).toContain('restart of DaemonSet');
    expect(approvals[0]).toContain('kube-system/kube-multus-ds');
    expect(approvals[0]).toContain(`requested by <@${REQUESTER}>`);
    expect(approvals[0]).toContain(`waiting on <@${APPROVER}>, <@${ONCALL_APPROVER}>`);
    expect(approvals[0]!.split('waiting on')[1]).not.toContain(REQUESTER);
    // No vote yet: all the approvals the policy requires for this target are still needed.
    const stored = await h.serve.context.store.approvals.list({ states: ['requested'] });
    expect(stored).toHaveLength(1);
    const required = stored[0]!.requiredApprovals;
    expect(required).toBe(2);
    expect(approvals[0]).toContain(`${required} more ${required === 1 ? 'approval' : 'approvals'} needed`);

    // One approver votes (a protected target needs a second): the next republish no longer waits on that approver.
    {
      const approval = h.slack.thread(OPS, (await h.alert('kube-system', 'multus')).ts).find((m) => m.text.includes('approval needed'))!;
      await h.click(APPROVER, approval, 'tw_approve');
      h.advance(DEBOUNCE);
      expect(await h.bot.parts.home.tick()).toBe(2);
      const after = sections(h.slack.homeView(USER)!.view.blocks).filter((l) => l.startsWith('⏳'));
      expect(after[0]).toContain(`${required - 1} more ${required - 1 === 1 ? 'approval' : 'approvals'} needed, waiting on <@${ONCALL_APPROVER}>`);
      expect(after[0]!.split('waiting on')[1]).not.toContain(APPROVER);
    }
  });

  it('more alerts than 100 blocks hold are capped, saying how many are not shown, and Slack accepts the view', { timeout: 120_000 }, async () => {
    h = await startHarness({ slack: { home: { debounceMs: DEBOUNCE, tickMs: 0 } } });
    const lines = Array.from({ length: 120 }, (_, i) =>
      auditEvent({ auditID: `many-${i}`, time: h!.now() - 60_000, kind: 'stale', namespace: `team-${String(i).padStart(3, '0')}`, serviceAccount: 'worker', pod: `worker-${i}`, secondsAfterWarning: 1_000_000 + i * 1000 }),
    );
    h.appendAudit(lines);
    await h.poll();
    await openHome(USER);
    const home = h.slack.homeView(USER)!;
    expect(h.slack.callsTo('views.publish')).toHaveLength(1);
    expect(home.view.blocks.length).toBeLessThanOrEqual(100);
    const total = (await openGroups()).length;
    expect(total).toBeGreaterThan(120);
    const shown = alertLines(home.view.blocks).length;
    const more = contextText(home.view.blocks).find((t) => t.includes('more alerts not shown'));
    expect(more).toBeDefined();
    expect(Number(/…and ([\d,]+) more alerts not shown/.exec(more!)![1]!.replace(/,/g, ''))).toBe(total - shown);
    expect(shown).toBeGreaterThan(50);
    expect(alertLines(home.view.blocks)[0]).toContain('kube-system/multus');
  });
});

describe('App Home tab (Socket Mode)', () => {
  it('an events_api envelope with app_home_opened is acked and publishes the view', { timeout: 120_000 }, async () => {
    const started = await startSocketModeHarness({
      slack: { home: { debounceMs: DEBOUNCE, tickMs: 0 } },
    });
    ({ h, ws, front } = started);
    const fake = started.fake;
    await waitFor(() => socketConnected(h!));
    const { ack } = await ws.send(eventsApiEnvelope('env-home-1', appHomeOpenedBody({ user: USER })));
    expect(ack).toMatchObject({ envelope_id: 'env-home-1' });
    await waitFor(() => fake.homeView(USER) !== undefined);
    await h.bot.idle();
    const lines = alertLines(fake.homeView(USER)!.view.blocks);
    expect(lines[0]).toContain(`*${CLUSTER}*`);
    expect(lines[0]).toContain('kube-system/multus');
    expect(lines[0]).toContain('requests now fail with 401');
    expect(lines).toHaveLength((await openGroups()).length);
  });
});

describe('fake Slack views.publish', () => {
  let fake: FakeSlack | undefined;
  afterEach(async () => {
    await fake?.close();
    fake = undefined;
  });

  it('refuses what Slack refuses: no user_id, a view that is not home, more than 100 blocks', async () => {
    fake = await startFakeSlack();
    const client = new webApi.WebClient(DEFAULT_BOT_TOKEN, { slackApiUrl: fake.apiUrl, retryConfig: { retries: 0 } });
    const section = { type: 'section', text: { type: 'mrkdwn', text: 'x' } };
    const err = async (p: Promise<unknown>) => ((await p.then(() => undefined, (e: unknown) => e)) as { data?: { error?: string; response_metadata?: { messages?: string[] } } } | undefined)?.data;
    expect((await err(client.views.publish({ user_id: '', view: { type: 'home', blocks: [section] } })))?.error).toBe('invalid_arguments');
    expect((await err(client.views.publish({ user_id: USER, view: { type: 'modal', blocks: [section] } as never })))?.error).toBe('invalid_arguments');
    const tooMany = await err(client.views.publish({ user_id: USER, view: { type: 'home', blocks: Array.from({ length: 101 }, () => section) } as never }));
    expect(tooMany?.error).toBe('invalid_arguments');
    expect(tooMany?.response_metadata?.messages).toContain('[ERROR] no more than 100 items allowed [json-pointer:/view/blocks]');
    expect(fake.homeView(USER)).toBeUndefined();
    const ok = await client.views.publish({ user_id: USER, view: { type: 'home', blocks: Array.from({ length: 100 }, () => section) } as never });
    expect(ok.ok).toBe(true);
    expect(fake.homeView(USER)!.view.blocks).toHaveLength(100);
  });
});
