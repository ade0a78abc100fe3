import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { App, LogLevel } from '@slack/bolt';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  blockActionPayload,
  DEFAULT_BOT_TOKEN,
  sendBlockAction,
  sendSlashCommand,
  startFakeSlack,
  type FakeSlack,
  type FakeSlackChange,
} from '../../../src/sandbox/fakes/slack.js';

const SECRET = 'test-signing-secret';

let fake: FakeSlack;
let app: App;
let url: string;
const seen: Array<{ kind: string; user: string; text: string }> = [];

/** Resolves with the first change matching `pred` (or rejects after `ms`). */
function nextChange(pred: (c: FakeSlackChange) => boolean, ms = 3000): Promise<FakeSlackChange> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off();
      reject(new Error('no matching change'));
    }, ms);
    const off = fake.on('change', (c) => {
      if (pred(c)) {
        clearTimeout(timer);
        off();
        resolve(c);
      }
    });
  });
}

beforeEach(async () => {
  fake = await startFakeSlack({ channels: [{ id: 'C0OPS00001', name: 'ops' }] });
  seen.length = 0;
  app = new App({
    token: DEFAULT_BOT_TOKEN,
    signingSecret: SECRET,
    logLevel: LogLevel.ERROR,
    clientOptions: { slackApiUrl: fake.apiUrl, retryConfig: { retries: 0 } },
  });
  app.command('/tokens', async ({ ack, command, client }) => {
    await ack();
    seen.push({ kind: 'command', user: command.user_id, text: command.text });
    await client.chat.postEphemeral({ channel: command.channel_id, user: command.user_id, text: `status of ${command.text.split(' ')[1] ?? 'all'}` });
  });
  app.action('tw_approve', async ({ ack, body, action, respond }) => {
    await ack();
    const value = action.type === 'button' ? (action.value ?? '') : '';
    seen.push({ kind: 'action', user: body.user.id, text: value });
    await respond({ text: `approved ${value}`, response_type: 'ephemeral', replace_original: false });
  });
  const server = (await app.start({ port: 0, host: '127.0.0.1' })) as Server;
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/slack/events`;
});

afterEach(async () => {
  await app.stop();
  await fake.close();
});

describe('a real Bolt App in HTTP mode against the fake Slack', () => {
  it('a signed slash command gets 200; the handler calls the fake Web API', async () => {
    const ephemeral = nextChange((c) => c.type === 'ephemeral');
    const res = await sendSlashCommand(url, SECRET, { text: 'status prod-eks', user_id: 'U0AAAAAAA1', channel_id: 'C0OPS00001' });
    expect(res.status).toBe(200);
    await ephemeral;
    expect(seen).toEqual([{ kind: 'command', user: 'U0AAAAAAA1', text: 'status prod-eks' }]);
    expect(fake.ephemerals({ user: 'U0AAAAAAA1' }).map((e) => e.text)).toEqual(['status of prod-eks']);
    // Bolt with a single token calls auth.test (at start-up) before any listener runs
    expect(fake.calls.map((c) => c.method)).toEqual(['auth.test', 'chat.postEphemeral']);
  });

  it('a badly signed slash command gets 401 and reaches no handler', async () => {
    const wrongSecret = await sendSlashCommand(url, 'not-the-secret', { text: 'status', user_id: 'U0AAAAAAA1', channel_id: 'C0OPS00001' });
    expect(wrongSecret.status).toBe(401);
    const tampered = await sendSlashCommand(url, SECRET, { text: 'status', user_id: 'U0AAAAAAA1', channel_id: 'C0OPS00001' }, { signature: `v0=${'0'.repeat(64)}` });
    expect(tampered.status).toBe(401);
    const stale = await sendSlashCommand(url, SECRET, { text: 'status', user_id: 'U0AAAAAAA1', channel_id: 'C0OPS00001' }, { timestampSec: Math.floor(Date.now() / 1000) - 6 * 60 });
    expect(stale.status).toBe(401);
    expect(seen).toEqual([]);
    // only Bolt's own start-up auth.test reached the Web API
    expect(fake.calls.map((c) => c.method)).toEqual(['auth.test']);
  });

  it('a signed block_actions click reaches the action handler, which answers on the fake response_url', async () => {
    const msg = fake.postAsUser('C0OPS00001', 'U0BOT00001', 'approval message');
    const responseUrl = fake.responseUrl({ channel: 'C0OPS00001', user: 'U0BBBBBBB2', messageTs: msg.ts });
    const answered = nextChange((c) => c.type === 'ephemeral');
    const payload = blockActionPayload({ user: 'U0BBBBBBB2', actionId: 'tw_approve', value: 'approve_0001', channel: 'C0OPS00001', messageTs: msg.ts, responseUrl });
    const res = await sendBlockAction(url, SECRET, payload);
    expect(res.status).toBe(200);
    await answered;
    expect(seen).toEqual([{ kind: 'action', user: 'U0BBBBBBB2', text: 'approve_0001' }]);
    expect(fake.ephemerals({ user: 'U0BBBBBBB2' }).map((e) => [e.text, e.via])).toEqual([['approved approve_0001', 'response_url']]);
    const bad = await sendBlockAction(url, 'not-the-secret', payload);
    expect(bad.status).toBe(401);
    expect(seen).toHaveLength(1);
  });
});
