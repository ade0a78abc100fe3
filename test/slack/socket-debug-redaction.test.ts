/**
 * Socket Mode with debug logging on: the Socket Mode client and Bolt print whole envelopes and the WebSocket URL at
 * debug level. The `response_url` (lets anyone answer in the channel for 30 minutes), the payload's verification
 * `token` and the WebSocket `ticket` must not reach the log (SECURITY.md). Real Bolt `SocketModeReceiver`
 * against the Socket Mode fake.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { blockActionPayload, slashCommandBody, startFakeSlack } from '../../src/sandbox/fakes/slack.js';
import { SocketModeServer, startApiFront } from '../../src/sandbox/fakes/slack-socket.js';
import { buttonValue, OPS, ONCALL, ONCALL_APPROVER, REQUESTER, startHarness, type Harness } from './harness.js';

async function waitFor(cond: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 10));
  }
}

let h: Harness | undefined;
let ws: SocketModeServer | undefined;
let front: Awaited<ReturnType<typeof startApiFront>> | undefined;
afterEach(async () => {
  await h?.stop();
  await front?.close();
  await ws?.close();
  h = undefined;
});

const TICKET = 'e1b2c3d4-ticket-5f6a7b8c9d0e';
const VERIFICATION = 'vErIfIcAtIoNtOkEn0123';

describe('Socket Mode debug logs', () => {
  it('redact response_url, the verification token and the WebSocket ticket, and still show the envelope', async () => {
    ws = new SocketModeServer();
    const wsPort = await ws.listen();
    const fake = await startFakeSlack({ channels: [{ id: OPS, name: 'ops' }], userGroups: { [ONCALL]: [ONCALL_APPROVER] } });
    front = await startApiFront(fake, `ws://127.0.0.1:${wsPort}/link/?ticket=${TICKET}&app_id=A0FAKEAPP1`);
    const logs: Array<Record<string, unknown>> = [];
    h = await startHarness({
      fakeSlack: fake,
      logs,
      logLevel: 'debug',
      tweak: (c) => {
        c.clusters.splice(1);
        c.slack!.mode = 'socket';
        c.slack!.apiUrl = front!.url;
        c.slack!.appToken = 'xapp-1-A0FAKEAPP1-1-test';
      },
    });
    await waitFor(async () => (await h!.metrics.text()).includes('tokenwatch_slack_socket_connected 1'));

    const commandUrl = fake.responseUrl({ channel: OPS, user: REQUESTER });
    const cmd = await ws.send({
      envelope_id: 'env-1',
      type: 'slash_commands',
      accepts_response_payload: true,
      payload: slashCommandBody({ text: 'help', token: VERIFICATION, user_id: REQUESTER, channel_id: OPS, response_url: commandUrl }),
    });
    expect(cmd.ack).toEqual({ envelope_id: 'env-1', payload: {} });
    const alert = h.alert('kube-system', 'multus');
    const clickUrl = fake.responseUrl({ channel: OPS, user: ONCALL_APPROVER, messageTs: alert.ts });
    const click = blockActionPayload({ user: ONCALL_APPROVER, actionId: 'tw_details', value: buttonValue(alert, 'tw_details'), channel: OPS, messageTs: alert.ts, responseUrl: clickUrl });
    (click as Record<string, unknown>)['token'] = VERIFICATION;
    await ws.send({ envelope_id: 'env-2', type: 'interactive', accepts_response_payload: false, payload: click });
    await h.bot.idle();
    expect(fake.ephemerals({ user: REQUESTER })).toHaveLength(1); // the command was answered through its response_url

    const text = logs.map((l) => JSON.stringify(l)).join('\n');
    // The envelopes were logged (so the assertions below look at real debug output) …
    expect(logs.some((l) => String(l['msg']).includes('Received a message on the WebSocket') && String(l['msg']).includes('env-1'))).toBe(true);
    expect(logs.some((l) => String(l['msg']).includes('env-2'))).toBe(true);
    // … without their secrets.
    for (const secret of [commandUrl, clickUrl, new URL(commandUrl).pathname, VERIFICATION, TICKET]) expect(text).not.toContain(secret);
    expect(text).toContain('"response_url\\":\\"[Redacted]\\"');
    expect(text).toContain('ticket=[Redacted]');
  }, 30_000);
});
