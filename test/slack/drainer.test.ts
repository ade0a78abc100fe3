/**
 * The Slack notification queue end to end against the loopback Slack fake (real @slack/web-api client), a real store
 * and the queue's rows on the same SQLite file: polls only enqueue; the drainer posts and edits at Slack's rates on an
 * injected clock (its waits move the clock, never the wall clock), most urgent first, coalescing a group's pending
 * edits into one, a digest first for many new alerts in one channel, and a restart mid-queue that posts nothing twice.
 */
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { webApi } from '@slack/bolt';
import { DEFAULT_BOT_TOKEN, startFakeSlack, type FakeSlack } from '../../src/sandbox/fakes/slack.js';
import { parseConfig } from '../../src/config/index.js';
import { approvalPolicyFor } from '../../src/approvals/from-config.js';
import type { Finding } from '../../src/findings/types.js';
import { groupIdOf } from '../../src/findings/groups.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { SlackApi } from '../../src/slack/api.js';
import { ButtonIds } from '../../src/slack/buttons.js';
import { ChannelMap } from '../../src/slack/channels.js';
import { DIGEST_EVENT_TYPE, NotificationDrainer } from '../../src/slack/drainer.js';
import { Notifier } from '../../src/slack/notifier.js';
import { DEFAULT_SLACK_RATES, RateGate } from '../../src/slack/outbox.js';
import { openStore, type Store } from '../../src/store/index.js';
import { OutboxRepository } from '../../src/store/outbox.js';
import type { SqlExecutor } from '../../src/store/sql.js';
import { openSqliteExecutor } from '../../src/store/sqlite.js';
import { finding, tempDir } from '../store/helpers.js';

const T = Date.UTC(2026, 10, 20, 12, 0, 0);
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const CH = 'C0OPS00001';
const FOREVER = 1e12;

let fake: FakeSlack;
let path: string;
const open: Array<{ store: Store; sql: SqlExecutor; drainer: NotificationDrainer }> = [];

beforeEach(async () => {
  fake = await startFakeSlack({ channels: [{ id: CH, name: 'ops' }] });
  path = join(tempDir(), 'tw.db');
});
afterEach(async () => {
  for (const o of open.splice(0)) {
    await o.drainer.stop();
    await o.store.close();
    await o.sql.close();
  }
  await fake.close();
});

/** One serve's worth: store, notifier, queue rows and drainer on the shared fake clock; `calls` logs each Web API call with the clock. */
async function setup(clock: { t: number }, opts: { digestThreshold?: number; leader?: { v: boolean }; retries?: number; frozen?: { v: boolean }; owns?: (cluster: string) => boolean } = {}) {
  const config = parseConfig(
    { slack: { enabled: true, mode: 'http' }, clusters: [{ name: 'prod', audit: { file: { path: '/dev/null' } }, slack: { channel: '#ops', approvers: ['U0APPROVE1'] } }] },
    { SLACK_BOT_TOKEN: DEFAULT_BOT_TOKEN, SLACK_SIGNING_SECRET: 'x'.repeat(32) },
  );
  const logger = createLogger({ level: process.env['TW_DEBUG'] ? 'debug' : 'silent' });
  const store = await openStore(path);
  // The queue's rows through a second connection to the same file, as another repository of the store would be.
  const sql = openSqliteExecutor(path);
  const gate = new RateGate(DEFAULT_SLACK_RATES, () => clock.t);
  const calls: Array<{ method: string; at: number }> = [];
  const pauses: Array<{ method: string; ms: number }> = [];
  const api = new SlackApi({
    client: new webApi.WebClient(DEFAULT_BOT_TOKEN, { slackApiUrl: fake.apiUrl, retryConfig: { retries: opts.retries ?? 0, minTimeout: 0, maxTimeout: 0 } }),
    logger,
    channelIntervalMs: 0,
    onCall: (method, channel) => {
      gate.record(method, channel);
      calls.push({ method, at: clock.t });
    },
    onRateLimited: (method, ms) => {
      gate.pause(method, ms);
      pauses.push({ method, ms });
    },
  });
  const notifier = new Notifier({
    api,
    store,
    ids: new ButtonIds(DEFAULT_BOT_TOKEN, store),
    channels: new ChannelMap(config),
    clock: () => clock.t,
    logger,
    policyFor: (c) => approvalPolicyFor(config.clusters.find((x) => x.name === c)!, config),
    canRemediate: () => true,
  });
  const metrics = new Metrics();
  const drainer = new NotificationDrainer({
    queue: new OutboxRepository(sql),
    sender: {
      sendItem: (i) => notifier.sendItem(i),
      digestLine: (c, g, now) => notifier.digestLine(c, g, now),
      post: (c, m, metadata) => api.post(c, m, undefined, metadata),
      update: (c, ts, m) => api.update(c, ts, m),
      findDigest: async (c, key, oldest) => {
        const ts = await api.findByMetadata(c, DIGEST_EVENT_TYPE, 'digest_key', key, oldest);
        return ts === undefined ? undefined : { channel: c, ts };
      },
    },
    gate,
    clock: () => clock.t,
    logger,
    metrics,
    idleCheckMs: FOREVER,
    ...(opts.leader ? { ownsAny: () => opts.leader!.v } : {}),
    ...(opts.owns ? { owns: opts.owns } : {}),
    ...(opts.digestThreshold !== undefined ? { digestThreshold: opts.digestThreshold } : {}),
    // Waits move the injected clock (unless `frozen`: the test moves it); an idle loop waits for a kick.
    sleep: async (ms, signal) => {
      if (ms < FOREVER && !opts.frozen?.v) {
        clock.t += ms;
        return;
      }
      if (!signal.aborted) await new Promise<void>((r) => signal.addEventListener('abort', () => r(), { once: true }));
    },
  });
  open.push({ store, sql, drainer });
  /** A poll: findings stored, the work enqueued (nothing sent here). */
  const poll = async (findings: Finding[]) => {
    const changes = await store.findings.save('prod', findings, clock.t);
    await drainer.enqueue(await notifier.workItems('prod', findings, changes, clock.t));
  };
  return { store, notifier, drainer, poll, calls, gate, metrics, pauses, api };
}

const sa = (i: number, daysLeft: number, over: Partial<Finding> = {}): Finding => {
  const rejectionAt = new Date(T + daysLeft * DAY + HOUR).toISOString();
  const base = finding({ id: `f-${i}`, cluster: 'prod' });
  return { ...base, serviceAccount: `agent-${i}`, rejectionAt, severity: daysLeft < 7 ? 'critical' : 'warning', tokens: [{ ...base.tokens[0]!, pod: `agent-${i}-pod`, rejectionAt }], pods: [`agent-${i}-pod`], workloads: [{ kind: 'DaemonSet', namespace: 'kube-system', name: `agent-${i}` }], ...over };
};

describe('the Slack notification queue', () => {
  it('a poll only enqueues; the drainer posts most urgent first, one per second per channel', async () => {
    const clock = { t: T };
    const { drainer, poll, calls, metrics } = await setup(clock);
    await poll([sa(1, 40), sa(2, 3), sa(3, 20)]);
    expect(fake.callsTo('chat.postMessage')).toEqual([]);
    expect((await metrics.registry.getSingleMetric('tokenwatch_slack_queue_depth')!.get()).values[0]?.value ?? 0).toBe(0);
    drainer.start();
    await drainer.idle();
    expect(fake.messages(CH).map((m) => m.text.match(/agent-\d/)?.[0])).toEqual(['agent-2', 'agent-3', 'agent-1']);
    const posts = calls.filter((c) => c.method === 'chat.postMessage').map((c) => c.at - T);
    expect(posts).toEqual([0, 1000, 2000]);
    expect(drainer.backlog()).toEqual({ depth: 0, oldestEnqueuedAt: null });
  });

  it('coalesces the polls queued while this replica did not send into one chat.update per alert, and none without a visible change', async () => {
    const clock = { t: T };
    const leader = { v: true };
    const { drainer: again, poll, store } = await setup(clock, { leader });
    await poll([sa(1, 40)]);
    again.start();
    await again.idle();
    const ts = (await store.slackRefs.getAlertRef(groupIdOf(sa(1, 40))))!.ts;
    // While this replica does not send (not the leader), three polls queue up: new uses of the same pod (nothing
    // visible) and, in the last, a second pod.
    leader.v = false;
    clock.t += 5 * 60_000;
    await poll([sa(1, 40, { requests: 6 })]);
    clock.t += 5 * 60_000;
    await poll([sa(1, 40, { requests: 7 })]);
    clock.t += 5 * 60_000;
    await poll([sa(1, 40, { requests: 8, pods: ['agent-1-pod', 'agent-1-pod-b'] })]);
    expect(fake.callsTo('chat.update')).toEqual([]);
    leader.v = true;
    again.kick();
    await again.idle();
    expect(fake.callsTo('chat.update')).toHaveLength(1);
    expect(JSON.stringify(fake.message(CH, ts)!.blocks)).toContain('2 live');
    expect(fake.messages(CH)).toHaveLength(1);
    // One more poll with no visible change: sent, but no call.
    clock.t += 5 * 60_000;
    await poll([sa(1, 40, { requests: 9, pods: ['agent-1-pod', 'agent-1-pod-b'] })]);
    await again.idle();
    expect(fake.callsTo('chat.update')).toHaveLength(1);
  });

  it('many new alerts in one channel: a digest first, ranked by days to rejection, then each alert, the digest marked as they go out', async () => {
    const clock = { t: T };
    const { drainer, poll, calls } = await setup(clock, { digestThreshold: 10 });
    const findings = Array.from({ length: 12 }, (_, i) => sa(i, 30 - i));
    await poll(findings);
    drainer.start();
    await drainer.idle(FOREVER);
    const top = fake.messages(CH);
    expect(top).toHaveLength(13);
    const digest = top[0]!;
    expect(digest.text).toMatch(/^🗂️ 12 new alerts to follow/);
    const lines = JSON.stringify(digest.blocks).match(/agent-\d+/g)!;
    expect(lines).toEqual(Array.from({ length: 12 }, (_, i) => `agent-${11 - i}`));
    // The alerts follow in the same order, one per second after the digest.
    expect(top.slice(1).map((m) => m.text.match(/agent-\d+/)?.[0])).toEqual(lines);
    const posts = calls.filter((c) => c.method === 'chat.postMessage').map((c) => c.at - T);
    for (let i = 1; i < posts.length; i++) expect(posts[i]! - posts[i - 1]!).toBeGreaterThanOrEqual(1000);
    // Edited at most every 30 s, and at the end it shows every line posted.
    const edits = fake.message(CH, digest.ts)!.edits;
    expect(edits.length).toBeGreaterThanOrEqual(1);
    expect(JSON.stringify(fake.message(CH, digest.ts)!.blocks)).toContain('12 of 12 posted so far');
    expect(JSON.stringify(fake.message(CH, digest.ts)!.blocks)).not.toContain('to follow');
    // No alert of the digest was posted twice, and no further digest.
    expect(new Set(top.slice(1).map((m) => m.text)).size).toBe(12);
  });

  it('a restart mid-queue resumes it and posts nothing twice', async () => {
    const clock = { t: T };
    const first = await setup(clock);
    await first.poll(Array.from({ length: 6 }, (_, i) => sa(i, 20 + i)));
    // Stop after the second alert went out: the rest stays as rows.
    let posted = 0;
    let stopped: Promise<void> = Promise.resolve();
    const origin = first.notifier.sendItem.bind(first.notifier);
    const twoPosted = new Promise<void>((resolve) => {
      first.notifier.sendItem = async (item) => {
        const at = await origin(item);
        if (++posted === 2) {
          stopped = first.drainer.stop();
          resolve();
        }
        return at;
      };
    });
    first.drainer.start();
    await twoPosted;
    await stopped;
    expect(fake.messages(CH)).toHaveLength(2);
    const o = open.shift()!;
    await o.store.close();
    await o.sql.close();
    const second = await setup(clock);
    second.drainer.start();
    await second.drainer.idle();
    expect(fake.messages(CH)).toHaveLength(6);
    expect(new Set(fake.messages(CH).map((m) => m.text)).size).toBe(6);
  });

  it('a channel Slack refuses puts its items off; they go out once it works', async () => {
    const clock = { t: T };
    const { drainer, poll, store } = await setup(clock);
    fake.failNext('chat.postMessage', 'not_in_channel');
    await poll([sa(1, 10), sa(2, 12)]);
    drainer.start();
    await drainer.idle(FOREVER);
    expect(fake.messages(CH)).toHaveLength(2);
    expect(await store.slackRefs.getAlertRef(groupIdOf(sa(1, 10)))).toBeDefined();
    // The failure was backed off on the injected clock (5 s), not retried at once.
    expect(fake.callsTo('chat.postMessage').map((c) => c.response['ok'])).toEqual([false, true, true]);
  });

  it('honours Retry-After: a 429 on chat.update pauses the method in the gate, and the WebClient retries after it', { timeout: 120_000 }, async () => {
    const clock = { t: T };
    const { drainer, poll, store, pauses, gate } = await setup(clock, { retries: 1 });
    await poll([sa(1, 40)]);
    drainer.start();
    await drainer.idle();
    fake.rateLimitNext('chat.update', 1);
    clock.t += 5 * 60_000;
    await poll([sa(1, 40, { pods: ['agent-1-pod', 'agent-1-pod-b'] })]);
    await drainer.idle();
    expect(pauses).toEqual([{ method: 'chat.update', ms: 1000 }]);
    // The pause is on the queue's clock: nothing else of that method goes before it ends.
    expect(gate.waitMs('chat.update', CH)).toBeGreaterThan(0);
    expect(fake.callsTo('chat.update').map((c) => c.status)).toEqual([429, 200]);
    expect(JSON.stringify(fake.message(CH, (await store.slackRefs.getAlertRef(groupIdOf(sa(1, 40))))!.ts)!.blocks)).toContain('2 live');
  });

  it('killed between posting the digest and recording it: the next process finds it by its metadata and posts no second digest', async () => {
    const clock = { t: T };
    const first = await setup(clock, { digestThreshold: 10 });
    await first.poll(Array.from({ length: 12 }, (_, i) => sa(i, 30 - i)));
    // The first process dies as Slack answers the digest's chat.postMessage: nothing after the call runs (a kill -9).
    const posted = new Promise<void>((resolve) => {
      fake.on('change', (c) => {
        if (c.type === 'message' && c.message.text.startsWith('🗂️')) resolve();
      });
    });
    const origin = first.api.post.bind(first.api);
    first.api.post = async (...args) => {
      await origin(...args);
      return new Promise<never>(() => undefined);
    };
    first.drainer.start();
    await posted;
    expect(fake.messages(CH).map((m) => m.text.slice(0, 2))).toEqual(['🗂️'.slice(0, 2)]);
    const o = open.shift()!; // its loop never returns: closed without stop(), as a killed process leaves the file
    await o.store.close();
    await o.sql.close();

    const second = await setup(clock, { digestThreshold: 10 });
    second.drainer.start();
    await second.drainer.idle(FOREVER);
    const top = fake.messages(CH);
    // One digest (the first process's, found with one conversations.history call and edited), then the 12 alerts once each.
    expect(top.filter((m) => m.text.startsWith('🗂️'))).toHaveLength(1);
    expect(top).toHaveLength(13);
    expect(new Set(top.slice(1).map((m) => m.text)).size).toBe(12);
    expect(fake.callsTo('conversations.history')).toHaveLength(1);
    expect(top[0]!.metadata).toMatchObject({ event_type: DIGEST_EVENT_TYPE });
    expect(JSON.stringify(fake.message(CH, top[0]!.ts)!.blocks)).toContain('12 of 12 posted so far');
  });

  it('settle(key): the pending item of an alert goes next (after a digest of its channel not yet posted), so a reply follows the alert it answers', async () => {
    const clock = { t: T };
    const leader = { v: true };
    const { drainer, poll, store, api, calls } = await setup(clock, { digestThreshold: 10, leader });
    await poll([sa(1, 40)]);
    drainer.start();
    await drainer.idle();
    const ts = (await store.slackRefs.getAlertRef(groupIdOf(sa(1, 40))))!.ts;
    // While this replica does not send, a poll brings 12 more urgent new alerts and a visible change of agent-1's alert.
    leader.v = false;
    clock.t += 5 * 60_000;
    await poll([sa(1, 40, { pods: ['agent-1-pod', 'agent-1-pod-b'] }), ...Array.from({ length: 12 }, (_, i) => sa(100 + i, 5 + i))]);
    leader.v = true;
    const from = calls.length;
    // A verification reply in agent-1's thread waits for its pending edit, which goes first despite the 12 more urgent posts.
    await drainer.settle(`alert:${groupIdOf(sa(1, 40))}`);
    await api.post(CH, { text: 'verified', blocks: [] }, ts);
    expect(calls[from]?.method).toBe('chat.update');
    const edit = fake.calls.findIndex((c) => c.method === 'chat.update' && c.args['ts'] === ts);
    const reply = fake.calls.findIndex((c) => c.method === 'chat.postMessage' && c.args['thread_ts'] === ts);
    expect(edit).toBeGreaterThanOrEqual(0);
    expect(reply).toBeGreaterThan(edit);
    expect(fake.thread(CH, ts).map((m) => m.text)).toEqual(['verified']);
    expect(JSON.stringify(fake.message(CH, ts)!.blocks)).toContain('2 live');

    // The least urgent of the new alerts, waited for: the digest listing them goes first, then that alert.
    const last = `alert:${groupIdOf(sa(111, 16))}`;
    await drainer.settle(last);
    const top = fake.messages(CH);
    expect(top.map((m) => m.text.match(/^🗂️|agent-\d+/)?.[0])).toEqual(['agent-1', '🗂️', 'agent-111']);
    await drainer.idle(FOREVER);
    // The rest follow in the digest's order, none twice; the digest ends showing all 12 posted.
    expect(fake.messages(CH)).toHaveLength(14);
    expect(new Set(fake.messages(CH).map((m) => m.text)).size).toBe(14);
    expect(JSON.stringify(fake.message(CH, top[1]!.ts)!.blocks)).toContain('12 of 12 posted so far');
    // Nothing pending: settle resolves at once.
    await drainer.settle(last);
  });

  it('queue depth and the oldest item\'s age are gauges; the age is read at scrape time, so it grows while nothing goes out', async () => {
    const clock = { t: T };
    const frozen = { v: true };
    const { drainer, poll, metrics } = await setup(clock, { frozen });
    const gauge = async (name: string) => (await metrics.registry.getSingleMetric(name)!.get()).values[0]?.value;
    fake.failNext('chat.postMessage', 'not_in_channel');
    await poll([sa(1, 10), sa(2, 12)]);
    drainer.start();
    await drainer.idle();
    // The channel refused the first post: both items are put off (5 s), neither was sent.
    expect(fake.messages(CH)).toHaveLength(0);
    expect(await gauge('tokenwatch_slack_queue_depth')).toBe(2);
    expect(await gauge('tokenwatch_slack_queue_oldest_seconds')).toBe(0);
    expect(drainer.backlog()).toEqual({ depth: 2, oldestEnqueuedAt: T });
    expect(drainer.backlog((channel) => channel !== '#ops')).toEqual({ depth: 0, oldestEnqueuedAt: null });
    clock.t += 4_000;
    expect(await gauge('tokenwatch_slack_queue_oldest_seconds')).toBe(4);
    // The queue's waits move its clock again: past the backoff, the two go out.
    frozen.v = false;
    drainer.kick();
    await drainer.idle(60_000);
    expect(fake.messages(CH)).toHaveLength(2);
    expect(await gauge('tokenwatch_slack_queue_depth')).toBe(0);
    expect(await gauge('tokenwatch_slack_queue_oldest_seconds')).toBe(0);
  });

  it('clusters shared out across replicas: each replica sends only the items of the clusters it owns, so two never post one alert', async () => {
    const clock = { t: T };
    const owner = { prod: 'a' };
    const a = await setup(clock, { owns: (c) => c === 'prod' && owner.prod === 'a' });
    const b = await setup(clock, { owns: (c) => c === 'prod' && owner.prod === 'b' });
    await a.poll([sa(1, 10), sa(2, 20)]);
    b.drainer.start();
    a.drainer.start();
    await Promise.all([a.drainer.idle(), b.drainer.idle()]);
    expect(fake.messages(CH)).toHaveLength(2);
    expect(b.drainer.backlog().depth).toBe(0);
    // prod moves to b; a poll on b queues an edit (a second pod): b sends it, a does not touch it.
    owner.prod = 'b';
    clock.t += 5 * 60_000;
    await b.poll([sa(1, 10, { pods: ['agent-1-pod', 'agent-1-pod-b'] }), sa(2, 20)]);
    a.drainer.kick();
    await Promise.all([a.drainer.idle(), b.drainer.idle()]);
    expect(fake.callsTo('chat.update')).toHaveLength(1);
    expect(fake.messages(CH)).toHaveLength(2);
    expect(a.drainer.backlog().depth).toBe(0);
  });
});
