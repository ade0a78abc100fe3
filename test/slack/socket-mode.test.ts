/**
 * Socket Mode end to end on loopback: the real Bolt `SocketModeReceiver` (@slack/socket-mode 3, undici WebSocket)
 * connects to the Socket Mode fake in `test/fakes/slack-socket.ts` (RFC 6455 handshake and text/ping/pong/close frames;
 * Slack's envelope protocol: `hello`, envelopes with `envelope_id`, acks echoing it). `apps.connections.open` is
 * answered by a small front that forwards every other Web API method to the fake Slack (`src/sandbox/fakes/slack.ts`).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { blockActionPayload, slashCommandBody } from '../../src/sandbox/fakes/slack.js';
import type { SocketModeServer, startApiFront } from '../fakes/slack-socket.js';
import { blockText, buttonIds, buttonValue, OPS, ONCALL_APPROVER, overflowLabels, overflowOption, REQUESTER, socketConnected, startSocketModeHarness, waitFor, type Harness } from './harness.js';

let h: Harness | undefined;
let ws: SocketModeServer | undefined;
let front: Awaited<ReturnType<typeof startApiFront>> | undefined;
afterEach(async () => {
  await h?.stop();
  await front?.close();
  await ws?.close();
  h = undefined;
});

describe('Socket Mode', () => {
  it('connects, acks slash commands and button clicks over the socket, and reconnects after the server drops it', async () => {
    const started = await startSocketModeHarness({
    });
    ({ h, ws, front } = started);
    const fake = started.fake;
    expect(h.bot.eventsUrl).toBeUndefined();
    await waitFor(() => socketConnected(h!));
    expect(h.bot.watchdog!.isConnected).toBe(true);
    expect(front.opens).toBe(1);

    // A slash command envelope: acked over the socket, answered through response_url.
    const cmd = await ws.send({
      envelope_id: 'env-1',
      type: 'slash_commands',
      accepts_response_payload: true,
      payload: slashCommandBody({ text: 'status prod-eks', user_id: REQUESTER, channel_id: OPS, response_url: fake.responseUrl({ channel: OPS, user: REQUESTER }) }),
    });
    expect(cmd.ack).toEqual({ envelope_id: 'env-1', payload: {} });
    await h.bot.idle();
    expect(fake.ephemerals({ user: REQUESTER }).map((e) => e.text)).toEqual(['Tokenwatch status — prod-eks: 1 critical, 0 warning, 3 info']);

    // A button click envelope (Details).
    const alert = await h.alert('kube-system', 'multus');
    const click = await ws.send({
      envelope_id: 'env-2',
      type: 'interactive',
      accepts_response_payload: false,
      payload: blockActionPayload({ user: ONCALL_APPROVER, actionId: 'tw_more', value: overflowOption(alert, 'Details')!.value, selectedOption: overflowOption(alert, 'Details')!, channel: OPS, messageTs: alert.ts, responseUrl: fake.responseUrl({ channel: OPS, user: ONCALL_APPROVER, messageTs: alert.ts }) }),
    });
    expect(click.ack).toMatchObject({ envelope_id: 'env-2' });
    await h.bot.idle();
    expect(blockText(fake.thread(OPS, alert.ts)[0]!)).toContain('🔎 Details · prod-eks · kube-system/multus');

    // One alert for the Multus root cause, posted once (never edited), its only primary button the DaemonSet restart,
    // no Recreate; the restart requested and approved over the socket; verified, the alert resolves in place.
    expect(fake.messages(OPS).filter((m) => m.text.includes('kube-system/multus'))).toHaveLength(1);
    expect(alert.edits).toEqual([]);
    expect(buttonIds(alert)).toEqual(['tw_restart', 'tw_more']);
    expect(overflowLabels(alert)).not.toContain('Recreate ServiceAccount…');
    expect(blockText(alert)).toContain('"style":"primary"');
    const interactive = async (id: string, payload: Record<string, unknown>) => {
      await ws!.send({ envelope_id: id, type: 'interactive', accepts_response_payload: false, payload });
      await h!.bot.idle();
    };
    const clickOn = (user: string, m: { ts: string; blocks: unknown[] | undefined }, actionId: string) =>
      blockActionPayload({ user, actionId, value: buttonValue(m, actionId), channel: OPS, messageTs: m.ts, responseUrl: fake.responseUrl({ channel: OPS, user, messageTs: m.ts }) });
    await interactive('env-restart', clickOn(REQUESTER, alert, 'tw_restart'));
    const approval = fake.thread(OPS, alert.ts).find((m) => m.text.includes('approval needed: restart of DaemonSet kube-system/kube-multus-ds'))!;
    await interactive('env-approve', clickOn(ONCALL_APPROVER, approval, 'tw_approve'));
    await waitFor(async () => (await h!.serve.context.store.approvals.list())[0]?.state === 'succeeded');
    h.advance(2 * 3_600_000 + 60_000);
    await h.poll();
    expect((fake.message(OPS, alert.ts)!.blocks![0] as { text: { text: string } }).text.text).toBe('✅ Resolved · prod-eks · kube-system/multus');
    expect(fake.messages(OPS).filter((m) => m.text.includes('kube-system/multus'))).toHaveLength(1);

    // The server drops the connection: the gauge goes to 0, the client reconnects with a new URL, hello → 1.
    ws.sockets.at(-1)!.destroy();
    await waitFor(() => ws!.connections === 2, 15_000);
    await waitFor(() => socketConnected(h!));
    expect(front.opens).toBe(2);
    const again = await ws.send({ envelope_id: 'env-3', type: 'slash_commands', accepts_response_payload: true, payload: slashCommandBody({ text: 'help', user_id: REQUESTER, channel_id: OPS, response_url: fake.responseUrl({ channel: OPS, user: REQUESTER }) }) });
    expect(again.ack).toEqual({ envelope_id: 'env-3', payload: {} });
  }, 30_000);
});

describe('Socket Mode redeliveries and connection state', () => {
  it('an envelope delivered twice (same envelope_id, or the same payload with a later retry_attempt) is acked each time but handled once', async () => {
    const started = await startSocketModeHarness({
    });
    ({ h, ws, front } = started);
    const fake = started.fake;
    await waitFor(() => socketConnected(h!));
    const alert = await h.alert('kube-system', 'multus');
    const payload = blockActionPayload({ user: ONCALL_APPROVER, actionId: 'tw_more', value: overflowOption(alert, 'Details')!.value, selectedOption: overflowOption(alert, 'Details')!, channel: OPS, messageTs: alert.ts, responseUrl: fake.responseUrl({ channel: OPS, user: ONCALL_APPROVER, messageTs: alert.ts }) });
    const details = () => fake.thread(OPS, alert.ts).filter((m) => blockText(m).includes('Details'));
    const first = await ws.send({ envelope_id: 'env-dup', type: 'interactive', accepts_response_payload: false, payload });
    expect(first.ack).toMatchObject({ envelope_id: 'env-dup' });
    await h.bot.idle();
    expect(details()).toHaveLength(2); // one per signal of the alert (stale tokens, 401s)
    // Same envelope again.
    const second = await ws.send({ envelope_id: 'env-dup', type: 'interactive', accepts_response_payload: false, payload });
    expect(second.ack).toMatchObject({ envelope_id: 'env-dup' });
    // Slack's retry of it: a new envelope id, the same payload, retry_attempt 1.
    const retry = await ws.send({ envelope_id: 'env-dup-retry', type: 'interactive', accepts_response_payload: false, retry_attempt: 1, retry_reason: 'timeout', payload });
    expect(retry.ack).toMatchObject({ envelope_id: 'env-dup-retry' });
    await h.bot.idle();
    expect(details()).toHaveLength(2);
    expect(await h.metrics.text()).toContain('tokenwatch_slack_duplicate_requests_total{transport="socket"} 2');
    // New envelopes with new payloads are handled: a slash command, twice.
    for (const id of ['env-cmd-1', 'env-cmd-2']) {
      await ws.send({ envelope_id: id, type: 'slash_commands', accepts_response_payload: true, payload: slashCommandBody({ text: 'help', user_id: REQUESTER, channel_id: OPS, trigger_id: `${id}.fake`, response_url: fake.responseUrl({ channel: OPS, user: REQUESTER }) }) });
      await h.bot.idle();
    }
    expect(fake.ephemerals({ user: REQUESTER })).toHaveLength(2);
    // And a redelivered slash command envelope does not answer twice.
    await ws.send({ envelope_id: 'env-cmd-2', type: 'slash_commands', accepts_response_payload: true, retry_attempt: 1, payload: slashCommandBody({ text: 'help', user_id: REQUESTER, channel_id: OPS, trigger_id: 'env-cmd-2.fake', response_url: fake.responseUrl({ channel: OPS, user: REQUESTER }) }) });
    await h.bot.idle();
    expect(fake.ephemerals({ user: REQUESTER })).toHaveLength(2);
    expect(await h.metrics.text()).toContain('tokenwatch_slack_duplicate_requests_total{transport="socket"} 3');
  }, 30_000);

  it('tokenwatch_slack_socket_connected drops to 0 when the socket closes, before the client starts reconnecting', async () => {
    const started = await startSocketModeHarness({
      // The client's reconnect delay (its ping timeout) is 20 s here: the gauge must not wait for it.
      slack: { socketClientPingTimeoutMs: 20_000 },
    });
    ({ h, ws, front } = started);
    await waitFor(() => socketConnected(h!));
    expect(h.serve.readiness().integrations).toEqual({ slack: 'connected' });
    ws.sockets.at(-1)!.destroy();
    await waitFor(async () => (await h!.metrics.text()).includes('tokenwatch_slack_socket_connected 0'), 10_000);
    expect(front.opens).toBe(1); // no reconnect attempt yet
    expect(h.bot.watchdog!.isConnected).toBe(false);
    expect(h.serve.readiness().integrations).toEqual({ slack: 'disconnected' });
  }, 30_000);
});

/*
 * With debug logging on, the Socket Mode client and Bolt print whole envelopes and the WebSocket URL. The
 * `response_url` (lets anyone answer in the channel for 30 minutes), the payload's verification `token` and the
 * WebSocket `ticket` must not reach the log (SECURITY.md).
 */
const TICKET = 'e1b2c3d4-ticket-5f6a7b8c9d0e';
const VERIFICATION = 'vErIfIcAtIoNtOkEn0123';

describe('Socket Mode debug logs', () => {
  it('redact response_url, the verification token and the WebSocket ticket, and still show the envelope', async () => {
    const logs: Array<Record<string, unknown>> = [];
    const started = await startSocketModeHarness({
      linkPath: `/link/?ticket=${TICKET}&app_id=A0FAKEAPP1`,
      logs,
      logLevel: 'debug',
    });
    ({ h, ws, front } = started);
    const fake = started.fake;
    await waitFor(() => socketConnected(h!));

    const commandUrl = fake.responseUrl({ channel: OPS, user: REQUESTER });
    const cmd = await ws.send({
      envelope_id: 'env-1',
      type: 'slash_commands',
      accepts_response_payload: true,
      payload: slashCommandBody({ text: 'help', token: VERIFICATION, user_id: REQUESTER, channel_id: OPS, response_url: commandUrl }),
    });
    expect(cmd.ack).toEqual({ envelope_id: 'env-1', payload: {} });
    const alert = await h.alert('kube-system', 'multus');
    const clickUrl = fake.responseUrl({ channel: OPS, user: ONCALL_APPROVER, messageTs: alert.ts });
    const click = blockActionPayload({ user: ONCALL_APPROVER, actionId: 'tw_more', value: overflowOption(alert, 'Details')!.value, selectedOption: overflowOption(alert, 'Details')!, channel: OPS, messageTs: alert.ts, responseUrl: clickUrl });
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
