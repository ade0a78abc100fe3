import { isValidSlackRequest, webApi } from '@slack/bolt';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  blockActionPayload,
  DEFAULT_BOT,
  DEFAULT_BOT_TOKEN,
  signSlackRequest,
  slashCommandBody,
  startFakeSlack,
  type FakeSlack,
  type FakeSlackChange,
} from '../../../src/sandbox/fakes/slack.js';
import { findingMessage } from '../../../src/slack/blocks/index.js';
import { multusFinding, NOW } from '../../slack/blocks/fixtures.js';

const { WebClient } = webApi;
type WebClientT = InstanceType<typeof WebClient>;

let fake: FakeSlack;
let client: WebClientT;
const changes: FakeSlackChange[] = [];

function newClient(token = DEFAULT_BOT_TOKEN, opts: ConstructorParameters<typeof WebClient>[1] = {}): WebClientT {
  return new WebClient(token, { slackApiUrl: fake.apiUrl, retryConfig: { retries: 0 }, ...opts });
}

/** The platform error code of a rejected WebClient call. */
async function slackError(p: Promise<unknown>): Promise<{ code: string; error: string; data: Record<string, unknown> }> {
  try {
    await p;
  } catch (e) {
    const err = e as { code: string; data: { error: string } & Record<string, unknown> };
    return { code: err.code, error: err.data?.error, data: err.data };
  }
  throw new Error('expected the call to fail');
}

beforeEach(async () => {
  fake = await startFakeSlack({
    channels: [
      { id: 'C0OPS00001', name: 'ops' },
      { id: 'C0PRIVATE1', name: 'secret', botIsMember: false },
      { id: 'C0SMALL001', name: 'small', members: ['U0AAAAAAA1'] },
    ],
    users: [{ id: 'U0AAAAAAA1', name: 'alice', realName: 'Alice Approver' }],
    userGroups: { S0OPS00001: ['U0AAAAAAA1', 'U0BBBBBBB2'] },
  });
  changes.length = 0;
  fake.on('change', (c) => changes.push(c));
  client = newClient();
});

afterEach(async () => {
  await fake.close();
});

describe('fake Slack Web API with the real WebClient', () => {
  it('listens on loopback only', () => {
    expect(fake.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(fake.apiUrl).toBe(`${fake.url}/api/`);
  });

  it('auth.test answers the bot identity; unknown and missing tokens are refused', async () => {
    const r = await client.auth.test();
    expect({ ok: r.ok, user_id: r.user_id, bot_id: r.bot_id, team_id: r.team_id, user: r.user, team: r.team }).toEqual({
      ok: true,
      user_id: DEFAULT_BOT.userId,
      bot_id: DEFAULT_BOT.botId,
      team_id: DEFAULT_BOT.teamId,
      user: DEFAULT_BOT.user,
      team: DEFAULT_BOT.team,
    });
    expect(await slackError(newClient('xoxb-wrong').auth.test())).toMatchObject({ code: 'slack_webapi_platform_error', error: 'invalid_auth' });
    const raw = await fetch(`${fake.apiUrl}auth.test`, { method: 'POST' });
    expect(await raw.json()).toEqual({ ok: false, error: 'not_authed' });
    // the WebClient sent a bearer token and a form body
    const call = fake.callsTo('auth.test')[0]!;
    expect(call.token).toBe(DEFAULT_BOT_TOKEN);
    expect(call.headers['content-type']).toBe('application/x-www-form-urlencoded');
  });

  it('chat.postMessage stores messages with unique increasing ts, blocks parsed, threads supported', async () => {
    const { buttonsFor } = { buttonsFor: () => 'opaque_btn_1' };
    const alert = findingMessage(multusFinding(), { now: NOW, buttonsFor });
    const a = await client.chat.postMessage({ channel: 'C0OPS00001', ...alert });
    const b = await client.chat.postMessage({ channel: 'C0OPS00001', text: 'second' });
    const c = await client.chat.postMessage({ channel: '#ops', text: 'third, by channel name' });
    expect([a.ok, a.channel, b.channel, c.channel]).toEqual([true, 'C0OPS00001', 'C0OPS00001', 'C0OPS00001']);
    const ts = [a.ts!, b.ts!, c.ts!];
    expect(ts.every((t) => /^\d{10}\.\d{6}$/.test(t))).toBe(true);
    expect(Number(ts[0]) < Number(ts[1]) && Number(ts[1]) < Number(ts[2])).toBe(true);
    expect(new Set(ts).size).toBe(3);
    const stored = fake.messages('C0OPS00001');
    expect(stored.map((m) => m.text)).toEqual([alert.text, 'second', 'third, by channel name']);
    expect(stored[0]!.blocks).toEqual(JSON.parse(JSON.stringify(alert.blocks)));
    expect(stored[0]!.user).toBe(DEFAULT_BOT.userId);
    expect(a.message?.bot_id).toBe(DEFAULT_BOT.botId);

    const reply = await client.chat.postMessage({ channel: 'C0OPS00001', thread_ts: a.ts!, text: 'escalated to critical' });
    expect(reply.message?.thread_ts).toBe(a.ts);
    // a reply to a reply lands in the parent's thread
    await client.chat.postMessage({ channel: 'C0OPS00001', thread_ts: reply.ts!, text: 'and again' });
    expect(fake.thread('C0OPS00001', a.ts!).map((m) => m.text)).toEqual(['escalated to critical', 'and again']);
    expect(fake.messages('C0OPS00001')).toHaveLength(3);
    expect(await slackError(client.chat.postMessage({ channel: 'C0OPS00001', thread_ts: '1.000001', text: 'x' }))).toMatchObject({ error: 'thread_not_found' });
    expect(changes.filter((x) => x.type === 'message')).toHaveLength(5);
  });

  it('refuses channels the bot is not in, unknown channels when strict, and empty messages', async () => {
    expect(await slackError(client.chat.postMessage({ channel: 'C0PRIVATE1', text: 'hi' }))).toMatchObject({ error: 'not_in_channel' });
    expect(await slackError(client.chat.postMessage({ channel: 'C0OPS00001', text: '' }))).toMatchObject({ error: 'no_text' });
    fake.setBotMembership('C0PRIVATE1', true);
    expect((await client.chat.postMessage({ channel: 'C0PRIVATE1', text: 'hi' })).ok).toBe(true);
    // by default an unknown channel id is created on first post; strict fakes refuse it
    expect((await client.chat.postMessage({ channel: 'C0NEW00001', text: 'hi' })).ok).toBe(true);
    const strict = await startFakeSlack({ autoCreateChannels: false });
    try {
      const c = new WebClient(DEFAULT_BOT_TOKEN, { slackApiUrl: strict.apiUrl, retryConfig: { retries: 0 } });
      expect(await slackError(c.chat.postMessage({ channel: 'C0NEW00001', text: 'hi' }))).toMatchObject({ error: 'channel_not_found' });
    } finally {
      await strict.close();
    }
  });

  it('rejects messages that break Block Kit limits with invalid_blocks, naming the violation', async () => {
    const blocks = [{ type: 'section', text: { type: 'mrkdwn', text: 'x'.repeat(3001) } }];
    const e = await slackError(client.chat.postMessage({ channel: 'C0OPS00001', text: 'too long', blocks }));
    expect(e.error).toBe('invalid_blocks');
    expect(e.data.errors).toEqual(['/blocks/0/text/text: 3001 chars > 3000']);
    const r = await fetch(`${fake.apiUrl}chat.postMessage`, {
      method: 'POST',
      headers: { authorization: `Bearer ${DEFAULT_BOT_TOKEN}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ channel: 'C0OPS00001', text: 'x', blocks: '{not json' }).toString(),
    });
    expect(await r.json()).toEqual({ ok: false, error: 'invalid_blocks_format' });
    expect(fake.messages('C0OPS00001')).toHaveLength(0);
  });

  it('accepts JSON bodies as well as form bodies', async () => {
    const r = await fetch(`${fake.apiUrl}chat.postMessage`, {
      method: 'POST',
      headers: { authorization: `Bearer ${DEFAULT_BOT_TOKEN}`, 'content-type': 'application/json; charset=utf-8' },
      body: JSON.stringify({ channel: 'C0OPS00001', text: 'json', blocks: [{ type: 'divider' }] }),
    });
    const body = (await r.json()) as { ok: boolean; ts: string };
    expect(body.ok).toBe(true);
    expect(fake.message('C0OPS00001', body.ts)?.blocks).toEqual([{ type: 'divider' }]);
  });

  it('chat.update edits only the bot’s own messages and keeps the edit history', async () => {
    const m = await client.chat.postMessage({ channel: 'C0OPS00001', text: 'v1' });
    const u = await client.chat.update({ channel: 'C0OPS00001', ts: m.ts!, text: 'v2', blocks: [{ type: 'divider' }] });
    expect([u.ok, u.ts, u.text]).toEqual([true, m.ts, 'v2']);
    await client.chat.update({ channel: 'C0OPS00001', ts: m.ts!, text: 'v3' });
    const stored = fake.message('C0OPS00001', m.ts!)!;
    expect(stored.text).toBe('v3');
    expect(stored.edits.map((e) => [e.text, e.blocks])).toEqual([
      ['v1', undefined],
      ['v2', [{ type: 'divider' }]],
    ]);
    expect(await slackError(client.chat.update({ channel: 'C0OPS00001', ts: '1700000000.000001', text: 'x' }))).toMatchObject({ error: 'message_not_found' });
    const human = fake.postAsUser('C0OPS00001', 'U0AAAAAAA1', '/tokens status');
    expect(await slackError(client.chat.update({ channel: 'C0OPS00001', ts: human.ts, text: 'x' }))).toMatchObject({ error: 'cant_update_message' });
    expect(changes.filter((c) => c.type === 'update')).toHaveLength(2);
  });

  it('chat.postEphemeral records ephemerals per user and checks membership', async () => {
    const r = await client.chat.postEphemeral({ channel: 'C0OPS00001', user: 'U0AAAAAAA1', text: 'only you' });
    expect(r.ok).toBe(true);
    expect(fake.ephemerals({ user: 'U0AAAAAAA1' }).map((e) => [e.channel, e.text, e.via, e.messageTs])).toEqual([['C0OPS00001', 'only you', 'api', r.message_ts]]);
    expect(await slackError(client.chat.postEphemeral({ channel: 'C0SMALL001', user: 'U0OUTSIDE1', text: 'x' }))).toMatchObject({ error: 'user_not_in_channel' });
    expect(fake.messages('C0OPS00001')).toHaveLength(0);
    expect(changes.filter((c) => c.type === 'ephemeral')).toHaveLength(1);
  });

  it('usergroups.users.list, users.info and conversations.info', async () => {
    expect((await client.usergroups.users.list({ usergroup: 'S0OPS00001' })).users).toEqual(['U0AAAAAAA1', 'U0BBBBBBB2']);
    expect(await slackError(client.usergroups.users.list({ usergroup: 'S0NOPE0001' }))).toMatchObject({ error: 'no_such_subteam' });
    const u = await client.users.info({ user: 'U0AAAAAAA1' });
    expect([u.user?.id, u.user?.name, u.user?.real_name]).toEqual(['U0AAAAAAA1', 'alice', 'Alice Approver']);
    expect(await slackError(client.users.info({ user: 'U0NOPE0001' }))).toMatchObject({ error: 'user_not_found' });
    const c = await client.conversations.info({ channel: 'C0PRIVATE1' });
    expect([c.channel?.id, c.channel?.name, c.channel?.is_member]).toEqual(['C0PRIVATE1', 'secret', false]);
    expect(await slackError(client.conversations.info({ channel: 'C0NOPE0001' }))).toMatchObject({ error: 'channel_not_found' });
    fake.setUserGroup('S0NEW00001', ['U0CCCCCCC3']);
    expect((await client.usergroups.users.list({ usergroup: 'S0NEW00001' })).users).toEqual(['U0CCCCCCC3']);
  });

  it('failNext injects a platform error once', async () => {
    fake.failNext('chat.postMessage', 'channel_not_found');
    expect(await slackError(client.chat.postMessage({ channel: 'C0OPS00001', text: 'x' }))).toMatchObject({ error: 'channel_not_found' });
    expect((await client.chat.postMessage({ channel: 'C0OPS00001', text: 'x' })).ok).toBe(true);
  });

  it('429 with Retry-After, then success: the WebClient waits and retries', async () => {
    fake.rateLimitNext('chat.postMessage', 1);
    const retrying = newClient(DEFAULT_BOT_TOKEN, { retryConfig: { retries: 2, minTimeout: 0, maxTimeout: 0 } });
    const limited: number[] = [];
    retrying.on(webApi.WebClientEvent.RATE_LIMITED, (sec: number) => limited.push(sec));
    const t0 = performance.now();
    const r = await retrying.chat.postMessage({ channel: 'C0OPS00001', text: 'after the rate limit' });
    const elapsed = performance.now() - t0;
    expect(r.ok).toBe(true);
    expect(limited).toEqual([1]);
    expect(elapsed).toBeGreaterThanOrEqual(990);
    expect(fake.callsTo('chat.postMessage').map((c) => c.status)).toEqual([429, 200]);
    expect(fake.messages('C0OPS00001').map((m) => m.text)).toEqual(['after the rate limit']);
  });

  it('with rejectRateLimitedCalls the WebClient surfaces the Retry-After', async () => {
    fake.rateLimitNext('chat.update', 7);
    const c = newClient(DEFAULT_BOT_TOKEN, { rejectRateLimitedCalls: true });
    const e = (await c.chat.update({ channel: 'C0OPS00001', ts: '1.1', text: 'x' }).catch((err: unknown) => err)) as { code: string; retryAfter: number };
    expect([e.code, e.retryAfter]).toEqual(['slack_webapi_rate_limited_error', 7]);
  });

  it('response_url: ephemeral by default, in_channel, replace_original, at most 5 uses', async () => {
    const msg = await client.chat.postMessage({ channel: 'C0OPS00001', text: 'original' });
    const url = fake.responseUrl({ channel: 'C0OPS00001', user: 'U0AAAAAAA1', messageTs: msg.ts! });
    const post = (body: unknown) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect((await post({ text: 'just for you' })).status).toBe(200);
    expect((await post({ text: 'everyone', response_type: 'in_channel' })).status).toBe(200);
    expect((await post({ text: 'replaced', replace_original: true })).status).toBe(200);
    expect(fake.ephemerals({ user: 'U0AAAAAAA1' }).map((e) => [e.text, e.via])).toEqual([['just for you', 'response_url']]);
    expect(fake.messages('C0OPS00001').map((m) => m.text)).toEqual(['replaced', 'everyone']);
    expect((await post({ text: '4' })).status).toBe(200);
    expect((await post({ text: '5' })).status).toBe(200);
    const sixth = await post({ text: '6' });
    expect([sixth.status, await sixth.json()]).toEqual([404, { ok: false, error: 'used_url' }]);
  });

  it('response_url of an action on a thread reply: the ephemeral is in that thread from the start', async () => {
    const parent = await client.chat.postMessage({ channel: 'C0OPS00001', text: 'alert' });
    const reply = await client.chat.postMessage({ channel: 'C0OPS00001', text: 'approval needed', thread_ts: parent.ts! });
    const onReply = fake.responseUrl({ channel: 'C0OPS00001', user: 'U0AAAAAAA2', messageTs: reply.ts! });
    const onParent = fake.responseUrl({ channel: 'C0OPS00001', user: 'U0AAAAAAA2', messageTs: parent.ts! });
    for (const [url, text] of [[onReply, 'refused in the thread'], [onParent, 'refused on the alert']] as const) {
      const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text }) });
      expect(r.status).toBe(200);
    }
    expect(fake.ephemerals({ user: 'U0AAAAAAA2' }).map((e) => [e.text, e.threadTs])).toEqual([
      ['refused in the thread', parent.ts],
      ['refused on the alert', undefined],
    ]);
  });

  it('snapshot is JSON-safe and detached from live state', async () => {
    await client.chat.postMessage({ channel: 'C0OPS00001', text: 'one' });
    const snap = fake.snapshot();
    await client.chat.postMessage({ channel: 'C0OPS00001', text: 'two' });
    expect(snap.channels.find((c) => c.id === 'C0OPS00001')?.messages.map((m) => m.text)).toEqual(['one']);
    expect(JSON.parse(JSON.stringify(snap))).toEqual(snap);
  });
});

describe('signing helpers', () => {
  it('signatures verify with Bolt’s own verifier; a wrong secret or an old timestamp does not', () => {
    const body = new URLSearchParams(slashCommandBody({ text: 'status prod-eks', user_id: 'U0AAAAAAA1', channel_id: 'C0OPS00001' })).toString();
    const now = Math.floor(Date.now() / 1000);
    const h = signSlackRequest('s3cret', body, now);
    expect(h['x-slack-signature']).toMatch(/^v0=[0-9a-f]{64}$/);
    const check = (secret: string, ts: number) =>
      isValidSlackRequest({
        signingSecret: secret,
        body,
        headers: { 'x-slack-signature': signSlackRequest('s3cret', body, ts)['x-slack-signature'], 'x-slack-request-timestamp': ts },
      });
    expect(check('s3cret', now)).toBe(true);
    expect(check('other', now)).toBe(false);
    expect(check('s3cret', now - 10 * 60)).toBe(false);
  });

  it('known vector: HMAC-SHA256 of v0:<ts>:<body>', () => {
    // computed independently: printf 'v0:1531420618:token=x' | openssl dgst -sha256 -hmac 'secret'
    expect(signSlackRequest('secret', 'token=x', 1531420618)).toEqual({
      'x-slack-signature': 'v0=633ec74f3ea2689a9cfc1fa49494a96b74ad596089378b53ceb9a899f9c799b9',
      'x-slack-request-timestamp': '1531420618',
    });
  });

  it('slash command and block action payload shapes', () => {
    expect(slashCommandBody({ text: 'help', user_id: 'U0AAAAAAA1', channel_id: 'C0OPS00001', trigger_id: 't', response_url: 'http://127.0.0.1/r' })).toEqual({
      token: 'fake-verification-token',
      team_id: DEFAULT_BOT.teamId,
      team_domain: DEFAULT_BOT.team,
      channel_id: 'C0OPS00001',
      channel_name: 'c0ops00001',
      user_id: 'U0AAAAAAA1',
      user_name: 'u0aaaaaaa1',
      command: '/tokens',
      text: 'help',
      api_app_id: 'A0FAKEAPP1',
      is_enterprise_install: 'false',
      response_url: 'http://127.0.0.1/r',
      trigger_id: 't',
    });
    const p = blockActionPayload({ user: 'U0AAAAAAA1', actionId: 'tw_approve', value: 'approve_0001', channel: 'C0OPS00001', messageTs: '1.000001' }, 1700000000);
    expect(p).toMatchObject({
      type: 'block_actions',
      user: { id: 'U0AAAAAAA1' },
      channel: { id: 'C0OPS00001' },
      message: { ts: '1.000001' },
      container: { type: 'message', message_ts: '1.000001', channel_id: 'C0OPS00001' },
      actions: [{ type: 'button', action_id: 'tw_approve', value: 'approve_0001', block_id: 'actions', action_ts: '1700000000.000000' }],
    });
  });
});
