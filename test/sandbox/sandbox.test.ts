/**
 * The sandbox as a whole, without a browser: start (fake Slack, simulated cluster, replayed audit log, serve with the
 * Slack app in HTTP mode, page server), the page's JSON API sending signed commands and clicks, a second run that
 * continues from the saved state, and `reset`.
 */
import { request as httpRequest } from 'node:http';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadBundle } from '../../src/sandbox/replay.js';
import { SANDBOX_BOT_TOKEN, SANDBOX_CHANNEL, SANDBOX_NET_CHANNEL, SANDBOX_PLATFORM_CHANNEL, startSandbox, staticTokenSubjects, type SandboxHandle } from '../../src/sandbox/sandbox.js';

const dataDir = mkdtempSync(join(tmpdir(), 'tokenwatch-sandbox-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

const FAST = { port: 0, speed: 600, pollEverySeconds: 1, dataDir, stepMs: 100, rolloutPollMs: 100, channelIntervalMs: 20, tickMs: 200 } as const;

/** GET `path` with a chosen Host header (fetch cannot set it); resolves with the status code. */
function statusWithHost(sb: SandboxHandle, path: string, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const u = new URL(`${sb.url}${path}`);
    const req = httpRequest({ host: u.hostname, port: u.port, path: `${u.pathname}${u.search}`, headers: { host } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

async function waitFor<T>(what: string, fn: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface PageState {
  channel: { id: string; name: string };
  channels: Array<{ id: string; name: string; alerts: number }>;
  messages: Array<{ ts: string; text: string; blocks?: unknown[]; replies: Array<{ ts: string; text: string }> }>;
  ephemerals: Array<{ ts: string; text: string; threadTs?: string }>;
  notices: Array<{ text: string }>;
  slackReady: boolean;
}

async function state(sb: SandboxHandle, user: string, channel?: string): Promise<PageState> {
  const r = await fetch(`${sb.url}api/state?user=${user}${channel ? `&channel=${channel}` : ''}`);
  expect(r.status).toBe(200);
  return (await r.json()) as PageState;
}

async function post(sb: SandboxHandle, path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await fetch(`${sb.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

const ALL_CHANNELS = [SANDBOX_NET_CHANNEL, SANDBOX_PLATFORM_CHANNEL, SANDBOX_CHANNEL];

describe('tokenwatch sandbox', () => {
  let first: { tsByText: Map<string, string>; messages: number } | undefined;
  let dmSent: { channel: string; ts: string } | undefined;

  it('derives the static-token-file subjects from the cause catalog', () => {
    expect([...staticTokenSubjects()]).toContain('kube-system/multus');
  });

  it('starts everything on loopback, replays the examples shifted to now, posts the alerts, and answers signed commands and clicks from the page API', async () => {
    const sb = await startSandbox({ ...FAST, reset: true });
    try {
      expect(sb.resumed).toBe(false);
      expect(sb.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
      expect(sb.kube.url.startsWith('http://127.0.0.1:')).toBe(true);
      expect(sb.slack.url.startsWith('http://127.0.0.1:')).toBe(true);
      expect(sb.app?.eventsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/slack\/events$/);
      // The audit log starts with the bundled events, shifted so the reference time is the sandbox's start.
      const bundle = loadBundle(new URL('../../examples/', import.meta.url).pathname);
      const firstLine = readFileSync(sb.auditLog, 'utf8').split('\n', 1)[0]!;
      const orig = JSON.parse(bundle.lines[0]!) as { auditID: string; requestReceivedTimestamp: string };
      const shifted = JSON.parse(firstLine) as { auditID: string; requestReceivedTimestamp: string };
      expect(shifted.auditID).toBe(orig.auditID);
      const shiftMs = Date.parse(shifted.requestReceivedTimestamp) - Date.parse(orig.requestReceivedTimestamp);
      expect(Math.abs(bundle.referenceTime + shiftMs - Date.now())).toBeLessThan(60_000);
      expect(readFileSync(sb.kubeconfig, 'utf8')).toContain(`server: ${sb.kube.url}`);
      expect(readFileSync(join(dataDir, 'tokenwatch.yaml'), 'utf8')).toContain('mode: http');

      // The five findings of the examples become four alerts: Multus's stale tokens and 401s are one. The routing
      // rules send Multus (a kube-system DaemonSet) to #net-alerts, mentioning @network-oncall, and Flux (flux-system)
      // to #platform; the rest stays in the cluster's channel.
      const inAll = () => ALL_CHANNELS.flatMap((c) => sb.slack.messages(c.id));
      const alerts = await waitFor('four alerts', () => (inAll().length >= 4 ? inAll() : undefined));
      expect(alerts).toHaveLength(4);
      const net = sb.slack.messages(SANDBOX_NET_CHANNEL.id);
      expect(net).toHaveLength(1);
      // (Its headline fact moves with the polls: "requests now fail with 401", later "rejection date passed (requests rejected with 401 …)".)
      expect(net[0]!.text).toMatch(/\[prod-eks\] critical: kube-system\/multus — .*401/);
      // Its first post mentioned @network-oncall, once; no other version of any message did (edits drop the line).
      const versions = inAll().flatMap((m) => [...m.edits.map((e) => JSON.stringify(e.blocks)), JSON.stringify(m.blocks)]);
      expect(JSON.stringify((net[0]!.edits[0] ?? net[0]!).blocks).split('<!subteam^S0NETONCAL>')).toHaveLength(2);
      expect(versions.join('').split('<!subteam^S0NETONCAL>')).toHaveLength(2);
      const platform = sb.slack.messages(SANDBOX_PLATFORM_CHANNEL.id);
      expect(platform).toHaveLength(1);
      expect(platform[0]!.text).toMatch(/\[prod-eks\] .*flux-system\/helm-controller/);
      expect(sb.slack.messages(SANDBOX_CHANNEL.id).some((m) => /kube-system\/multus|flux-system\//.test(m.text))).toBe(false);
      // The page lists the three channels and opens at #net-alerts; each channel's state has its own messages.
      const s = await state(sb, 'U0REQUEST');
      expect(s.slackReady).toBe(true);
      expect(s.channels.map((c) => [c.name, c.alerts])).toEqual([['net-alerts', 1], ['platform', 1], ['ops-prod-eks', 2]]);
      expect(s.channel.id).toBe(SANDBOX_NET_CHANNEL.id);
      expect(s.messages.map((m) => m.ts)).toEqual(net.map((m) => m.ts));
      expect((await state(sb, 'U0REQUEST', 'platform')).messages.map((m) => m.ts)).toEqual(sb.slack.messages(SANDBOX_PLATFORM_CHANNEL.id).map((m) => m.ts));

      // A slash command goes to the bot signed; its answer is an ephemeral for that user only.
      const cmd = await post(sb, 'api/command', { user: 'U0REQUEST', text: '/tokens help' });
      expect(cmd).toEqual({ status: 200, body: { ok: true, status: 200 } });
      const help = await waitFor('help ephemeral', async () => (await state(sb, 'U0REQUEST')).ephemerals.find((e) => e.text.startsWith('tokenwatch help')));
      expect(help.text).toContain('/tokens status [cluster]');
      expect((await state(sb, 'U0APPROVE')).ephemerals).toEqual([]);
      // Another command name is not sent anywhere; the user gets Slack's notice.
      expect((await post(sb, 'api/command', { user: 'U0OUTSIDE', text: '/deploy now' })).body).toEqual({ ok: false, error: 'unknown_command' });
      expect((await state(sb, 'U0OUTSIDE')).notices.map((n) => n.text)).toEqual(['/deploy is not a valid command. In this sandbox, `/tokens` is the only one (try `/tokens help`).']);

      // Details from the alert's overflow menu: a signed block_actions payload with the selected option; the bot
      // answers in the alert's thread.
      const multus = net[0]!;
      const menu = (multus.blocks as Array<{ elements?: Array<{ action_id?: string; options?: Array<{ text: { text: string }; value: string }> }> }>)
        .flatMap((b) => b.elements ?? [])
        .find((e) => e.action_id === 'tw_more')!;
      const value = menu.options!.find((o) => o.text.text === 'Details')!.value;
      const click = await post(sb, 'api/action', { user: 'U0OUTSIDE', channel: SANDBOX_NET_CHANNEL.id, ts: multus.ts, ephemeral: false, actionId: 'tw_more', blockId: 'tw_alert_actions', value, text: 'Details', selected: true });
      expect(click).toEqual({ status: 200, body: { ok: true, status: 200 } });
      const reply = await waitFor('details reply', () => sb.slack.thread(SANDBOX_NET_CHANNEL.id, multus.ts).find((m) => m.text.startsWith('Details for kube-system/multus')));
      expect(reply.threadTs).toBe(multus.ts);

      // Clicks on unknown messages and cross-origin posts are refused.
      expect((await post(sb, 'api/action', { user: 'U0REQUEST', ts: '1.000001', actionId: 'tw_details', value })).status).toBe(404);
      expect((await post(sb, 'api/command', { user: 'U0REQUEST', text: '/tokens help' }, { origin: 'https://evil.example' })).status).toBe(403);
      // DNS rebinding: a name that resolves to 127.0.0.1 still sends its own Host header; only loopback names pass.
      const port = new URL(sb.url).port;
      expect(await statusWithHost(sb, 'api/state?user=U0REQUEST', `evil.example:${port}`)).toBe(421);
      expect(await statusWithHost(sb, '', 'evil.example')).toBe(421);
      expect(await statusWithHost(sb, 'api/state?user=U0REQUEST', `localhost:${port}`)).toBe(200);
      expect(await statusWithHost(sb, 'api/state?user=U0REQUEST', `[::1]:${port}`)).toBe(200);
      expect((await post(sb, 'api/command', { user: 'U9NOBODY', text: '/tokens help' })).status).toBe(400);

      // A direct message from the bot (as a requester gets about a restart request), to be restored by the next run.
      const bot = { authorization: `Bearer ${SANDBOX_BOT_TOKEN}`, 'content-type': 'application/x-www-form-urlencoded' };
      const dm = (await (await fetch(`${sb.slack.apiUrl}conversations.open`, { method: 'POST', headers: bot, body: 'users=U0REQUEST' })).json()) as { channel: { id: string } };
      const sent = (await (await fetch(`${sb.slack.apiUrl}chat.postMessage`, { method: 'POST', headers: bot, body: new URLSearchParams({ channel: dm.channel.id, text: 'your restart request' }).toString() })).json()) as { ok: boolean; ts: string };
      expect(sent.ok).toBe(true);
      dmSent = { channel: dm.channel.id, ts: sent.ts };
      await waitFor('the direct message saved', () => existsSync(join(dataDir, 'slack.json')) && readFileSync(join(dataDir, 'slack.json'), 'utf8').includes('your restart request'), 10_000);

      first = { tsByText: new Map(alerts.map((m) => [m.text.split(' — ')[0]!, m.ts])), messages: alerts.length };
    } finally {
      await sb.stop();
    }
  }, 40_000);

  it('a second run continues: same channel and message ts, alerts updated in place, not posted again', async () => {
    expect(first).toBeDefined();
    const sb = await startSandbox({ ...FAST });
    try {
      expect(sb.resumed).toBe(true);
      const restored = ALL_CHANNELS.flatMap((c) => sb.slack.messages(c.id));
      expect(restored).toHaveLength(first!.messages);
      for (const m of restored) expect(first!.tsByText.get(m.text.split(' — ')[0]!)).toBe(m.ts);
      // The bot's direct message too, in its reopened channel, under its ts.
      expect(sb.slack.messages(dmSent!.channel).map((m) => [m.text, m.ts])).toEqual([['your restart request', dmSent!.ts]]);
      // The Details reply was restored in its thread.
      expect(sb.slack.thread(SANDBOX_NET_CHANNEL.id, restored[0]!.ts).length).toBeGreaterThanOrEqual(1);
      // Let a few polls run: updates, no new alerts, no failed updates.
      await waitFor('an alert updated in place', () => sb.slack.callsTo('chat.update').length > 0, 10_000);
      await new Promise((r) => setTimeout(r, 2500));
      expect(ALL_CHANNELS.flatMap((c) => sb.slack.messages(c.id))).toHaveLength(first!.messages);
      const restoredAt = Math.max(...[...restored, ...sb.slack.messages(dmSent!.channel)].map((m) => m.postedAt)); // the restore's own posts
      const postsAfterRestore = sb.slack.callsTo('chat.postMessage').filter((c) => !c.args.thread_ts && c.at > restoredAt);
      expect(postsAfterRestore).toEqual([]);
      expect(sb.slack.callsTo('chat.update').filter((c) => c.response.ok !== true)).toEqual([]);
    } finally {
      await sb.stop();
    }
  }, 40_000);

  it('the approval flow through the page API (no browser): a Fluent Bit restart requested by Riya, refused for her, approved by Ahmed, verified resolved after the settle period; the resolved alert shows the pods running now with fresh tokens, old pods only in Details', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tokenwatch-sandbox-flow-'));
    // ×3000: the 2-hour settle period takes 2.4 s.
    const sb = await startSandbox({ ...FAST, dataDir: dir, speed: 3000, reset: true });
    try {
      const ch = SANDBOX_CHANNEL.id;
      const alert = await waitFor('the Fluent Bit alert', () => sb.slack.messages(ch).find((m) => m.text.includes('logging/fluent-bit')));
      const button = (blocks: unknown, actionId: string): string =>
        (blocks as Array<{ elements?: Array<{ action_id?: string; value?: string }> }>).flatMap((b) => b.elements ?? []).find((e) => e.action_id === actionId)!.value!;
      const click = (user: string, ts: string, actionId: string, value: string) => post(sb, 'api/action', { user, channel: ch, ts, ephemeral: false, actionId, value });
      expect((await click('U0REQUEST', alert.ts, 'tw_restart', button(alert.blocks, 'tw_restart'))).body).toEqual({ ok: true, status: 200 });
      const request = await waitFor('the approval request', () => sb.slack.thread(ch, alert.ts).find((m) => m.text.includes('approval needed: restart of DaemonSet logging/fluent-bit')));
      const approve = button(request.blocks, 'tw_approve');
      await click('U0REQUEST', request.ts, 'tw_approve', approve);
      // Her refusal is placed in the thread she clicked in.
      const refusal = await waitFor('the refusal', async () => (await state(sb, 'U0REQUEST', ch)).ephemerals.find((e) => e.text.includes('someone else must approve it')));
      expect(refusal.threadTs).toBe(alert.ts);
      expect(sb.kube.requestsMatching((r) => r.method === 'PATCH' && !r.dryRun)).toHaveLength(0);
      await click('U0APPROVE', request.ts, 'tw_approve', approve);
      await waitFor('the rollout', () => sb.slack.thread(ch, alert.ts).find((m) => m.text.includes('rollout of DaemonSet logging/fluent-bit complete')), 20_000);
      expect(sb.kube.requestsMatching((r) => r.method === 'PATCH' && !r.dryRun && r.name === 'fluent-bit')).toHaveLength(1);
      const verified = await waitFor('the verification', () => sb.slack.thread(ch, alert.ts).find((m) => m.text.startsWith('✅ [prod-eks] verified: no stale token use by logging/fluent-bit')), 20_000);
      expect(verified.threadTs).toBe(alert.ts);
      // No recurrence for a client that is not a static token file.
      expect(sb.slack.thread(ch, alert.ts).filter((m) => m.text.includes('recurrence'))).toEqual([]);
      // The resolved alert tells the state now: the 6 pods running now, all started by the restart, with fresh
      // tokens; what fixed it and when. Never "0 of 6 live · 6 gone" or "Rejection unknown" about pods that are gone.
      const resolved = await waitFor('the resolved alert', () => {
        const m = sb.slack.message(ch, alert.ts);
        return m && (m.blocks?.[0] as { text?: { text: string } } | undefined)?.text?.text.startsWith('✅ Resolved') ? m : undefined;
      });
      const fields = ((resolved.blocks ?? []) as Array<{ fields?: Array<{ text: string }> }>).flatMap((b) => b.fields ?? []).map((f) => f.text);
      expect(fields[0]).toBe('*Workload*\nDaemonSet `logging/fluent-bit`');
      expect(fields[1]).toBe('*Pods now*\n6 pods with fresh tokens');
      expect(fields[2]).toMatch(/^\*Fixed\*\nrestart of DaemonSet logging\/fluent-bit, <!date\^\d+\^/);
      expect(fields[3]).toMatch(/^\*Before\*\n/);
      const shown = JSON.stringify(resolved.blocks);
      expect(shown).not.toMatch(/live|gone|Rejection|unknown/);
      const newPods = sb.kube.store.list('Pod', { namespace: 'logging' }).map((p) => String((p.metadata as { name: string }).name)).filter((n) => n.startsWith('fluent-bit-'));
      expect(newPods).toHaveLength(6);
      // The pods seen with stale tokens before the fix (gone now) are in Details, which the resolved alert keeps.
      const details = (resolved.blocks as Array<{ elements?: Array<{ action_id?: string; options?: Array<{ text: { text: string }; value: string }> }> }>)
        .flatMap((b) => b.elements ?? [])
        .find((e) => e.action_id === 'tw_more')!
        .options!.find((o) => o.text.text === 'Details')!;
      expect((await post(sb, 'api/action', { user: 'U0REQUEST', channel: ch, ts: alert.ts, ephemeral: false, actionId: 'tw_more', value: details.value, selected: true, text: 'Details' })).body).toEqual({ ok: true, status: 200 });
      const reply = await waitFor('the Details reply', () => sb.slack.thread(ch, alert.ts).find((m) => m.text.startsWith('Details for logging/fluent-bit')));
      expect(JSON.stringify(reply.blocks)).toContain('*Not in cluster state*');
      for (const p of newPods) expect(JSON.stringify(reply.blocks)).not.toContain(p);
    } finally {
      await sb.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('reset starts over, removing only the files the sandbox wrote', async () => {
    // Files a user put into the sandbox's folder after it created it stay.
    writeFileSync(join(dataDir, 'notes.txt'), 'mine');
    writeFileSync(join(dataDir, 'audit', 'my-own.log'), 'mine too');
    expect(existsSync(join(dataDir, 'sandbox.json'))).toBe(true);
    const sb = await startSandbox({ ...FAST, reset: true, slack: false });
    try {
      expect(readFileSync(join(dataDir, 'notes.txt'), 'utf8')).toBe('mine');
      expect(readFileSync(join(dataDir, 'audit', 'my-own.log'), 'utf8')).toBe('mine too');
      expect(sb.resumed).toBe(false);
      expect(sb.slack.messages(SANDBOX_CHANNEL.id)).toEqual([]);
      expect((await state(sb, 'U0REQUEST')).slackReady).toBe(false);
      expect((await post(sb, 'api/command', { user: 'U0REQUEST', text: '/tokens help' })).body).toEqual({ ok: false, error: 'no_app' });
    } finally {
      await sb.stop();
    }
  }, 30_000);
});
