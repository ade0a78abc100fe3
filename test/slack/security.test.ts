/**
 * Through the real Bolt app, the real `serve` and the loopback Slack fake: replayed signed requests
 * (also to the other replica), approver groups failing closed, the receiver's listen address, honest health with a
 * failing store, Slack unreachable at start, and secrets fed through the log call sites that take external text.
 */
import { copyFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { webApi } from '@slack/bolt';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { startApiFront } from '../fakes/slack-socket.js';
import { blockActionPayload, DEFAULT_BOT_TOKEN, startFakeSlack } from '../../src/sandbox/fakes/slack.js';
import { recordBlockAction, recordSlashCommand, sendRecordedRequest } from '../fakes/slack-requests.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { composeServe } from '../../src/runtime/compose.js';
import type { ServeHandle } from '../../src/runtime/serve-options.js';
import { SlackApi } from '../../src/slack/api.js';
import { startSlackWith, type SlackIntegration } from '../../src/runtime/build-slack.js';
import { Directory } from '../../src/slack/directory.js';
import { SECRET_CORES, SECRET_SAMPLES } from '../observability/secrets.js';
import { blockText, CLUSTER, configWithSlackAt, ONCALL, ONCALL_APPROVER, OPS, overflowOption, REQUESTER, SECRET, startHarness, type Harness } from './harness.js';
import { freePort } from '../support/processes.js';

const harnesses: Harness[] = [];
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const h of harnesses.splice(0).reverse()) await h.stop({ keepFakes: true }).catch(() => undefined);
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function harness(opts: Parameters<typeof startHarness>[0] = {}): Promise<Harness> {
  const h = await startHarness(opts);
  harnesses.push(h);
  if (!opts.fakeSlack) cleanups.push(async () => { await h.slack.close(); await h.kube.close(); });
  return h;
}

function logSink(): { lines: Array<Record<string, unknown>>; raw: string[]; destination: Writable } {
  const lines: Array<Record<string, unknown>> = [];
  const raw: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString('utf8').split('\n')) {
        if (!l.trim()) continue;
        raw.push(l);
        lines.push(JSON.parse(l) as Record<string, unknown>);
      }
      cb();
    },
  });
  return { lines, raw, destination };
}

async function metric(h: { metrics: Metrics }, line: string): Promise<boolean> {
  return (await h.metrics.text()).includes(line);
}

describe('replayed signed requests (HTTP mode)', () => {
  it('a byte-identical slash command sent again within the 5-minute window is acknowledged but not run again', async () => {
    const h = await harness();
    const req = recordSlashCommand(SECRET, { text: 'status prod-eks', user_id: REQUESTER, channel_id: OPS, response_url: h.slack.responseUrl({ channel: OPS, user: REQUESTER }) });
    const first = await sendRecordedRequest(h.bot.eventsUrl!, req);
    await h.bot.idle();
    expect(first.status).toBe(200);
    expect(h.ephemerals(REQUESTER)).toHaveLength(1);
    const again = await sendRecordedRequest(h.bot.eventsUrl!, req);
    await h.bot.idle();
    expect(again.status).toBe(200);
    expect(again.body).toBe('');
    expect(h.ephemerals(REQUESTER)).toHaveLength(1);
    expect(await metric(h, 'tokenwatch_slack_duplicate_requests_total{transport="http"} 1')).toBe(true);
    // A new request (new timestamp, so a new signature) with the same text still runs.
    const fresh = recordSlashCommand(SECRET, { text: 'status prod-eks', user_id: REQUESTER, channel_id: OPS, response_url: h.slack.responseUrl({ channel: OPS, user: REQUESTER }) }, { timestampSec: Math.floor(Date.now() / 1000) + 1 });
    expect((await sendRecordedRequest(h.bot.eventsUrl!, fresh)).status).toBe(200);
    await h.bot.idle();
    expect(h.ephemerals(REQUESTER)).toHaveLength(2);
  }, 30_000);

  it('a validly signed request timestamped more than 5 minutes ahead is refused; 4 minutes ahead is handled', async () => {
    const h = await harness();
    const at = (aheadSec: number) =>
      recordSlashCommand(SECRET, { text: 'status prod-eks', user_id: REQUESTER, channel_id: OPS, response_url: h.slack.responseUrl({ channel: OPS, user: REQUESTER }) }, { timestampSec: Math.floor(Date.now() / 1000) + aheadSec });
    const future = await sendRecordedRequest(h.bot.eventsUrl!, at(10 * 60));
    await h.bot.idle();
    expect(future.body).toBe('');
    expect(h.ephemerals(REQUESTER)).toHaveLength(0);
    expect(await metric(h, 'tokenwatch_slack_rejected_requests_total{reason="timestamp-in-future"} 1')).toBe(true);
    expect((await sendRecordedRequest(h.bot.eventsUrl!, at(4 * 60))).status).toBe(200);
    await h.bot.idle();
    expect(h.ephemerals(REQUESTER)).toHaveLength(1);
  }, 30_000);

  it('a replayed button click sent to the other replica (shared store) is caught there too', async () => {
    const leader = await harness();
    const standby = await harness({ dir: leader.dir, fakeSlack: leader.slack, kube: leader.kube, owner: () => false });
    const alert = await leader.alert('kube-system', 'multus');
    const option = overflowOption(alert, 'Details')!;
    const payload = blockActionPayload({ user: ONCALL_APPROVER, actionId: 'tw_more', value: option.value, selectedOption: option, channel: OPS, messageTs: alert.ts, responseUrl: leader.slack.responseUrl({ channel: OPS, user: ONCALL_APPROVER, messageTs: alert.ts }) });
    const req = recordBlockAction(SECRET, payload);
    expect((await sendRecordedRequest(leader.bot.eventsUrl!, req)).status).toBe(200);
    await leader.bot.idle();
    // One details reply per signal of the alert (stale tokens, 401s).
    const details = () => leader.slack.thread(OPS, alert.ts).filter((m) => blockText(m).includes('Details'));
    expect(details()).toHaveLength(2);
    expect((await sendRecordedRequest(standby.bot.eventsUrl!, req)).status).toBe(200);
    await standby.bot.idle();
    await leader.bot.idle();
    expect(details()).toHaveLength(2);
    expect(await metric(standby, 'tokenwatch_slack_duplicate_requests_total{transport="http"} 1')).toBe(true);
  }, 30_000);

  it('replay keys expire: the store drops keys past their expiry and keeps fresh ones', async () => {
    const h = await harness();
    const store = h.serve.context.store;
    expect(await store.replay.claim(['k1'], 1000, 2000)).toBe(true);
    expect(await store.replay.claim(['k1'], 1999, 3000)).toBe(false);
    expect(await store.replay.claim(['k1'], 2000, 3000)).toBe(true);
    expect(await store.replay.claim(['k2', 'k1'], 2500, 4000)).toBe(false);
  }, 30_000);
});

describe('approver user groups when usergroups.users.list fails', () => {
  it('uses the last known members for at most maxStaleMs after they were read, then nobody (fail closed)', async () => {
    const fake = await startFakeSlack({ userGroups: { [ONCALL]: [ONCALL_APPROVER] } });
    cleanups.push(() => fake.close());
    let now = Date.parse('2026-11-20T12:00:00Z');
    const client = new webApi.WebClient(DEFAULT_BOT_TOKEN, { slackApiUrl: fake.apiUrl, retryConfig: { retries: 0 } });
    const log = createLogger({ level: 'silent' });
    const dir = new Directory(new SlackApi({ client, logger: log, channelIntervalMs: 0 }), { logger: log, ttlMs: 60_000, maxStaleMs: 600_000, now: () => now });
    expect(await dir.members(ONCALL)).toEqual([ONCALL_APPROVER]);
    fake.failNext('usergroups.users.list', 'fatal_error', 100);
    now += 5 * 60_000; // cache expired, call fails, 5 min old: still usable
    expect(await dir.members(ONCALL)).toEqual([ONCALL_APPROVER]);
    now += 5 * 60_000; // 10 min since the last successful read: fail closed
    expect(await dir.members(ONCALL)).toEqual([]);
    expect(await dir.groupsOf(ONCALL_APPROVER, [ONCALL])).toEqual([]);
    expect(fake.callsTo('usergroups.users.list').length).toBeGreaterThanOrEqual(3);
  });
});

describe('approver group membership cache', () => {
  it('by default, someone removed from an approver group stops counting within a minute, also when Slack then fails', async () => {
    const fake = await startFakeSlack({ userGroups: { [ONCALL]: [ONCALL_APPROVER] } });
    cleanups.push(() => fake.close());
    let now = Date.parse('2026-11-20T12:00:00Z');
    const client = new webApi.WebClient(DEFAULT_BOT_TOKEN, { slackApiUrl: fake.apiUrl, retryConfig: { retries: 0 } });
    const log = createLogger({ level: 'silent' });
    const dir = new Directory(new SlackApi({ client, logger: log, channelIntervalMs: 0 }), { logger: log, now: () => now });
    expect(await dir.groupsOf(ONCALL_APPROVER, [ONCALL])).toEqual([ONCALL]);
    fake.setUserGroup(ONCALL, []);
    now += 59_000; // cached
    expect(await dir.groupsOf(ONCALL_APPROVER, [ONCALL])).toEqual([ONCALL]);
    now += 1_000; // a minute after the read: asked again
    expect(await dir.groupsOf(ONCALL_APPROVER, [ONCALL])).toEqual([]);
    fake.setUserGroup(ONCALL, [ONCALL_APPROVER]);
    now += 60_000;
    expect(await dir.groupsOf(ONCALL_APPROVER, [ONCALL])).toEqual([ONCALL]);
    fake.failNext('usergroups.users.list', 'fatal_error', 100);
    now += 61_000; // the call fails and the last read is over a minute old: fail closed
    expect(await dir.groupsOf(ONCALL_APPROVER, [ONCALL])).toEqual([]);
  });
});

describe('Slack HTTP receiver listen address', () => {
  it('slack.host defaults to http.host and is where the receiver binds', async () => {
    const c = parseConfig({ http: { host: '127.0.0.1' }, slack: { enabled: true, mode: 'http' }, clusters: [{ name: 'a', audit: { file: { path: 'x.log' } }, slack: { channel: 'C0AAA', approvers: ['U0AAA'] } }] }, { SLACK_BOT_TOKEN: DEFAULT_BOT_TOKEN, SLACK_SIGNING_SECRET: SECRET });
    expect(c.slack!.host).toBe('127.0.0.1');
    const h = await harness({ slack: { host: undefined }, tweak: (cfg) => { cfg.slack!.host = '127.0.0.2'; } });
    const url = new URL(h.bot.eventsUrl!);
    expect(url.hostname).toBe('127.0.0.2');
    expect((await h.command('help', REQUESTER)).status).toBe(200);
    // Nothing listens on the other loopback address at that port.
    await expect(fetch(`http://127.0.0.1:${url.port}/slack/events`, { method: 'POST' })).rejects.toThrow();
  }, 30_000);
});

describe('honest health', () => {
  it('polls failing on the store (disk full) show in /tokens status, tokenwatch_poll_failing and /readyz; the replica stays ready', async () => {
    const h = await harness();
    const store = h.serve.context.store;
    const original = store.polls.startRun.bind(store);
    store.polls.startRun = () => {
      throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
    };
    await h.poll();
    const rt = h.serve.context.clusters.get(CLUSTER)!;
    expect(rt.poller.health()).toMatchObject({ status: 'degraded', lastError: 'database or disk is full' });
    expect(await metric(h, `tokenwatch_poll_failing{cluster="${CLUSTER}"} 1`)).toBe(true);
    expect(await metric(h, `tokenwatch_polls_total{cluster="${CLUSTER}",outcome="error"} 1`)).toBe(true);
    const ready = await fetch(`http://127.0.0.1:${h.serve.port}/readyz`);
    expect(ready.status).toBe(200);
    const body = (await ready.json()) as { status: string; polls: Record<string, string> };
    expect(body).toMatchObject({ status: 'ready', polls: { [CLUSTER]: 'degraded' }, integrations: { slack: 'ok' } });
    // The health model says what failed, in words, with its time.
    expect((body as unknown as { access: Record<string, { audit: string }> }).access[CLUSTER]!.audit).toBe('audit source: poll failed: database or disk is full, since 12:00 UTC');
    await h.command(`status ${CLUSTER}`, REQUESTER);
    expect(h.ephemerals(REQUESTER).at(-1)).toBeDefined();
    const status = h.slack.ephemerals({ user: REQUESTER }).at(-1)!;
    expect(blockText(status)).toContain('degraded: database or disk is full');
    store.polls.startRun = original;
    await h.poll();
    expect(await metric(h, `tokenwatch_poll_failing{cluster="${CLUSTER}"} 0`)).toBe(true);
    expect(((await (await fetch(`http://127.0.0.1:${h.serve.port}/readyz`)).json()) as { polls: Record<string, string> }).polls[CLUSTER]).toBe('ok');
  }, 30_000);
});

describe('Slack unreachable at start', () => {
  it('polls and stores findings without Slack, names the network cause, retries, and posts the queued alert once Slack answers', async () => {
    const fake = await startFakeSlack({ channels: [{ id: OPS, name: 'ops' }] });
    cleanups.push(() => fake.close());
    const port = await freePort();
    const config = configWithSlackAt(port, 'tw-unreach-');
    const sink = logSink();
    let bot: SlackIntegration | undefined;
    const handle: ServeHandle = await composeServe(config, {
      logger: createLogger({ level: 'info', destination: sink.destination }),
      metrics: new Metrics(),
      clock: () => Date.parse('2026-11-20T12:00:00Z'),
      jitterMs: 0,
      integrationRetryMs: 20,
      integrations: [async (ctx) => (bot = await startSlackWith(ctx, { host: '127.0.0.1', channelIntervalMs: 0, retryConfig: { retries: 0 } }))],
    });
    cleanups.push(() => handle.stop());
    await handle.firstPolls;
    expect((await handle.context.store.findings.list(CLUSTER)).length).toBeGreaterThan(0);
    expect(handle.readiness().integrations).toEqual({ slack: 'unavailable' });
    const failure = sink.lines.find((l) => String(l.msg).startsWith('cannot reach Slack'));
    expect(failure?.msg).toContain(`cannot reach Slack at http://127.0.0.1:${port}/api/ (auth.test: network error ECONNREFUSED)`);
    expect(sink.raw.join('\n')).not.toContain('rejected the bot token');
    expect(fake.messages(OPS)).toHaveLength(0);

    const front = await startApiFront(fake, 'ws://127.0.0.1:1/unused', port);
    cleanups.push(() => front.close());
    await handle.integrationStarted('slack');
    await bot!.idle();
    expect(handle.readiness().integrations).toEqual({ slack: 'ok' });
    expect(fake.messages(OPS).map((m) => m.text).join('\n')).toContain('multus');
  }, 30_000);

  it('a password in slack.apiUrl never reaches the log or /readyz', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-userinfo-'));
    copyFileSync('examples/audit/kube-apiserver-audit.log', join(dir, 'audit.log'));
    const port = await freePort();
    const config = parseConfig(
      {
        store: { path: join(dir, 'tw.db') },
        http: { host: '127.0.0.1', port: 0 },
        slack: { enabled: true, mode: 'http', apiUrl: `http://proxyuser:hunter2-pass@127.0.0.1:${port}/api/`, port: 0 },
        clusters: [{ name: CLUSTER, audit: { file: { path: join(dir, 'audit.log') } }, schedule: '0 0 1 1 *', slack: { channel: OPS, approvers: ['U0APPROVE1'] } }],
      },
      { SLACK_BOT_TOKEN: DEFAULT_BOT_TOKEN, SLACK_SIGNING_SECRET: SECRET },
    );
    const sink = logSink();
    const handle = await composeServe(config, { logger: createLogger({ level: 'debug', destination: sink.destination }), jitterMs: 0, integrationRetryMs: 3_600_000 });
    cleanups.push(() => handle.stop());
    await handle.firstPolls;
    const ready = await (await fetch(`http://127.0.0.1:${handle.port}/readyz`)).text();
    expect(JSON.parse(ready)).toMatchObject({ integrations: { slack: 'failed' } });
    expect(sink.raw.some((l) => l.includes(`slack.apiUrl http://[Redacted]@127.0.0.1:${port}/api/ contains user:password@`))).toBe(true);
    for (const text of [sink.raw.join('\n'), ready]) {
      expect(text).not.toContain('hunter2');
      expect(text).not.toContain('proxyuser');
    }
  }, 30_000);
});

describe('secrets through the log call sites that take external text', () => {
  for (const [kind, secret] of Object.entries(SECRET_SAMPLES)) {
    it(`${kind}: /tokens command text, a failing poll, a Slack API error, Bolt's logger`, async () => {
      const logs: Array<Record<string, unknown>> = [];
      const h = await harness({ logs });
      // 1. /tokens text pasted by a user.
      await h.command(`status ${secret}`, REQUESTER);
      // 2. A poll failing with an error whose text carries the secret (a source or store error).
      const store = h.serve.context.store;
      const original = store.polls.startRun.bind(store);
      store.polls.startRun = () => {
        throw new Error(`upstream said: ${secret}`);
      };
      await h.poll();
      store.polls.startRun = original;
      // 3. A Slack Web API error (the directory's usergroups.users.list call), error text from Slack.
      h.slack.failNext('usergroups.users.list', `bad ${secret}`, 10);
      await new Directory(h.bot.parts.api, { logger: h.serve.context.logger, ttlMs: 0 }).members(ONCALL);
      // 4. Bolt's own log lines (receiver warnings carry request text), through the pino adapter.
      h.bot.parts.app.logger.warn('Failed to parse and verify the request data:', new Error(`body had ${secret}`), { headers: { Authorization: secret } });
      const text = JSON.stringify(logs);
      expect(logs.some((l) => String(l.msg).startsWith('Failed to parse and verify'))).toBe(true);
      expect(logs.some((l) => l.msg === '/tokens')).toBe(true);
      expect(logs.some((l) => String(l.msg).startsWith('poll failed'))).toBe(true);
      expect(logs.some((l) => String(l.msg).startsWith('cannot read the members'))).toBe(true);
      expect(text).not.toContain(SECRET_CORES[kind]);
      // Nor in what /tokens status shows in Slack.
      await h.command(`status ${CLUSTER}`, REQUESTER);
      expect(JSON.stringify(h.slack.ephemerals().at(-1))).not.toContain(SECRET_CORES[kind]);
    }, 30_000);
  }
});
