/**
 * Never twice, never lost (docs/slack.md "Crash safety", notices): `tokenwatch serve` runs in a child process
 * (serve-child.ts: the real Bolt app) against the fakes in this process, and is killed with SIGKILL while the fake
 * answers the call that sends a reminder, an outcome direct message or a page — after the post, before the record.
 * The next process, on the same SQLite store, finds the message by its metadata and records it instead of posting it
 * again; a page goes again with the same `dedup_key`, which PagerDuty folds into the one alert. With the PostgreSQL
 * store, the replica that takes over does the same (a real PostgreSQL, test/support/postgres-server.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FAKE_ROUTING_KEY, startFakePagerDuty, startFakeWebhook, type FakePagerDuty, type FakeWebhook } from '../../src/sandbox/fakes/pagerduty.js';
import type { FakeSlack } from '../../src/sandbox/fakes/slack.js';
import type { FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import { groupIdOf } from '../../src/findings/groups.js';
import { openStore, type Store } from '../../src/store/index.js';
import { NoticeRepository } from '../../src/store/notices.js';
import type { Config } from '../../src/config/index.js';
import { childScript } from '../support/build.js';
import { createTestDatabase, postgresServer, type TestDatabase } from '../support/postgres.js';
import { CLUSTER, OPS, REF, REQUESTER, prepareDir, startFakes, startHarness, type Harness } from './harness.js';

const MIN = 60_000;

let child: ChildProcess | undefined;
let h: Harness | undefined;
let fakes: { slack: FakeSlack; kube: FakeKube } | undefined;
let peek: Store | undefined;
let pd: FakePagerDuty | undefined;
let hook: FakeWebhook | undefined;
afterEach(async () => {
  child?.kill('SIGKILL');
  child = undefined;
  await peek?.close();
  peek = undefined;
  await h?.stop();
  h = undefined;
  await fakes?.slack.close().catch(() => undefined);
  await fakes?.kube.close().catch(() => undefined);
  fakes = undefined;
  await pd?.close();
  await hook?.close();
  pd = undefined;
  hook = undefined;
});

type Job = {
  start?: number;
  sweep?: boolean;
  paging?: { after: number; pagerdutyUrl: string; webhookUrl: string; routingKey: string };
  postgres?: NonNullable<Config['store']['postgres']>;
};

/** Starts serve in a child process on `dir`; resolves with its events URL once serving (rejects if it dies first). */
async function startChild(dir: string, f: { slack: FakeSlack; kube: FakeKube }, job: Job): Promise<string> {
  const c = spawn(process.execPath, [childScript('serve-child'), JSON.stringify({ dir, slackApiUrl: f.slack.apiUrl, kubeUrl: f.kube.url, ...job })], { stdio: ['ignore', 'pipe', 'pipe'] });
  child = c;
  let err = '';
  c.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise<string>((resolve, reject) => {
    let out = '';
    c.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve((JSON.parse(line) as { eventsUrl: string }).eventsUrl);
    });
    c.on('exit', () => reject(new Error(`serve child exited before serving: ${err}`)));
  });
}

const kill = () => child?.kill('SIGKILL');

/** Kills the child when the fake Slack gets a notice message with `key` in its metadata; resolves with its ts. */
function killOnNotice(slack: FakeSlack, key: string): { ts: () => string | undefined } {
  let ts: string | undefined;
  slack.on('change', (c) => {
    if (c.type !== 'message' || ts !== undefined) return;
    if (c.message.metadata?.event_type === 'tokenwatch_notice' && c.message.metadata.event_payload['notice_key'] === key) {
      ts = c.message.ts;
      kill();
    }
  });
  return { ts: () => ts };
}

/** A restart of kube-multus-ds requested as REQUESTER in an in-process serve, then stopped; the approval id and the alert ts. */
async function requestThenStop(dir: string, f: { slack: FakeSlack; kube: FakeKube }): Promise<{ id: string; alertTs: string }> {
  const x = await startHarness({ dir, fakeSlack: f.slack, kube: f.kube });
  const alert = await x.alert('kube-system', 'multus');
  await x.click(REQUESTER, alert, 'tw_restart');
  const id = (await x.serve.context.store.approvals.list({ cluster: CLUSTER }))[0]!.id;
  await x.stop({ keepFakes: true });
  return { id, alertTs: alert.ts };
}

async function peekAt(dir: string, key: string) {
  peek = await openStore(join(dir, 'tw.db'));
  const row = await peek.outbox.get(key);
  const sent = await new NoticeRepository(peek.sql).sent(key);
  await peek.close();
  peek = undefined;
  return { row, sent };
}

describe('kill -9 between posting a notice and recording it', { timeout: 180_000 }, () => {
  it('a reminder: the next process finds it in the thread by its metadata; one reminder', async () => {
    const dir = prepareDir();
    fakes = await startFakes();
    const { slack, kube } = fakes;
    const { id, alertTs } = await requestThenStop(dir, fakes);
    const key = `reminder:${id}`;
    const killed = killOnNotice(slack, key);
    await expect(startChild(dir, fakes, { start: REF + 16 * MIN })).rejects.toThrow(/exited before serving/);
    child = undefined;
    expect(killed.ts()).toBeDefined();
    const before = await peekAt(dir, key);
    expect(before.row?.payload.notice?.postingAt).toBeGreaterThan(0);
    expect(before.sent).toBeUndefined();

    h = await startHarness({ dir, fakeSlack: slack, kube, start: REF + 17 * MIN });
    const reminders = slack.thread(OPS, alertTs).filter((m) => m.metadata?.event_payload['notice_key'] === key);
    expect(reminders.map((m) => m.ts)).toEqual([killed.ts()]);
    expect(slack.callsTo('conversations.replies').length).toBeGreaterThanOrEqual(1);
    const store = h.serve.context.store;
    expect(await store.outbox.get(key)).toBeUndefined();
    expect(await new NoticeRepository(store.sql).sent(key)).toMatchObject({ channel: OPS, ts: killed.ts() });
    await h.bot.sweep();
    await h.bot.idle();
    expect(slack.thread(OPS, alertTs).filter((m) => m.text.includes('Reminder:'))).toHaveLength(1);
  });

  it('the outcome told to the requester: the next process finds the direct message (conversations.open, history); one message; the escalation before it once', async () => {
    const dir = prepareDir();
    fakes = await startFakes();
    const { slack, kube } = fakes;
    const { id, alertTs } = await requestThenStop(dir, fakes);
    const key = `outcome:${id}:expired`;
    const killed = killOnNotice(slack, key);
    // The child starts after the expiry and sweeps: the request expires, the escalation goes, then the DM — killed.
    await expect(startChild(dir, fakes, { start: REF + 31 * MIN, sweep: true })).rejects.toThrow(/exited before serving/);
    child = undefined;
    expect(killed.ts()).toBeDefined();
    expect((await peekAt(dir, key)).sent).toBeUndefined();
    expect((await peekAt(dir, `escalation:${id}`)).sent).toBeDefined();

    h = await startHarness({ dir, fakeSlack: slack, kube, start: REF + 32 * MIN });
    await h.bot.sweep();
    await h.bot.idle();
    const dm = `D${REQUESTER.slice(1)}`;
    expect(slack.messages(dm).map((m) => m.ts)).toEqual([killed.ts()]);
    expect(slack.callsTo('conversations.open').length).toBeGreaterThanOrEqual(1);
    expect(await new NoticeRepository(h.serve.context.store.sql).sent(key)).toMatchObject({ channel: dm, ts: killed.ts() });
    expect(slack.thread(OPS, alertTs).filter((m) => m.text.includes('Expired unanswered'))).toHaveLength(1);
  });

  it('a page: sent again with the same dedup_key, which PagerDuty folds into the one alert; the webhook once', async () => {
    const dir = prepareDir();
    fakes = await startFakes();
    const { slack, kube } = fakes;
    pd = await startFakePagerDuty();
    hook = await startFakeWebhook();
    const paging = { after: 10 * MIN, pagerdutyUrl: pd.url, webhookUrl: hook.url, routingKey: FAKE_ROUTING_KEY };
    const withPaging = {
      tweak: (c: Config) => {
        c.slack!.paging = { after: paging.after, pagerduty: { url: paging.pagerdutyUrl }, webhook: { url: paging.webhookUrl } };
        c.slack!.pagerdutyRoutingKey = FAKE_ROUTING_KEY;
      },
    };
    // First run: the multus alert is seen critical at REF.
    const first = await startHarness({ dir, fakeSlack: slack, kube, ...withPaging });
    await first.stop({ keepFakes: true });
    expect(pd.events).toEqual([]);

    pd.onEvent(() => kill());
    await expect(startChild(dir, fakes, { start: REF + 11 * MIN, paging })).rejects.toThrow(/exited before serving/);
    child = undefined;
    const multus = groupIdOf({ cluster: CLUSTER, namespace: 'kube-system', serviceAccount: 'multus' });
    const key = `page:${multus}:1:trigger:pagerduty`;
    expect(pd.events.map((e) => e.body.dedup_key)).toEqual([`tokenwatch/${multus}/1`]);
    expect((await peekAt(dir, key)).sent).toBeUndefined();

    h = await startHarness({ dir, fakeSlack: slack, kube, start: REF + 12 * MIN, ...withPaging });
    await h.bot.sweep();
    await h.bot.idle();
    expect(pd.events.map((e) => e.body.dedup_key)).toEqual([`tokenwatch/${multus}/1`, `tokenwatch/${multus}/1`]);
    expect(pd.alerts()).toEqual([expect.objectContaining({ dedupKey: `tokenwatch/${multus}/1`, status: 'triggered', triggers: 2 })]);
    expect(hook.requests.map((r) => r.idempotencyKey)).toEqual([`page:${multus}:1:trigger:webhook`]);
    expect(await new NoticeRepository(h.serve.context.store.sql).sent(key)).toBeDefined();
    expect(await h.serve.context.store.outbox.get(key)).toBeUndefined();
  });
});

const pgServer = postgresServer();

describe.skipIf(!pgServer.available)('PostgreSQL: failover between posting a notice and recording it', { timeout: 180_000 }, () => {
  let db: TestDatabase | undefined;
  afterEach(async () => {
    await db?.drop();
    db = undefined;
  });

  it('the replica that takes over finds the reminder and the outcome message posted by the one that died; one of each', async () => {
    db = await createTestDatabase();
    const postgres: NonNullable<Config['store']['postgres']> = { host: db.options.host, port: db.options.port ?? 5432, database: db.options.database, user: db.options.user, sslmode: 'disable', poolSize: 4, statementTimeout: 30_000, connectTimeout: 10_000, queryTimeout: 35_000 };
    const onPostgres = { owner: () => true, tweak: (c: Config) => void (c.store.postgres = postgres) };
    const dir = prepareDir();
    fakes = await startFakes();
    const { slack, kube } = fakes;
    // Replica 1 (in this process) takes the request, and leaves.
    const r1 = await startHarness({ dir, fakeSlack: slack, kube, ...onPostgres });
    const alert = await r1.alert('kube-system', 'multus');
    await r1.click(REQUESTER, alert, 'tw_restart');
    const id = (await r1.serve.context.store.approvals.list({ cluster: CLUSTER }))[0]!.id;
    await r1.stop({ keepFakes: true });

    // Replica 2 (a child process) posts the reminder and dies before recording it.
    const reminderKey = `reminder:${id}`;
    const killed = killOnNotice(slack, reminderKey);
    await expect(startChild(dir, fakes, { start: REF + 16 * MIN, postgres })).rejects.toThrow(/exited before serving/);
    child = undefined;
    expect(killed.ts()).toBeDefined();

    // Replica 3 takes over: finds the reminder; then the request expires there and the requester is told once.
    h = await startHarness({ dir, fakeSlack: slack, kube, start: REF + 17 * MIN, ...onPostgres });
    expect(slack.thread(OPS, alert.ts).filter((m) => m.text.includes('Reminder:')).map((m) => m.ts)).toEqual([killed.ts()]);
    const notices = new NoticeRepository(h.serve.context.store.sql);
    expect(await notices.sent(reminderKey)).toMatchObject({ ts: killed.ts() });
    h.advance(15 * MIN);
    await h.bot.sweep();
    await h.bot.idle();
    await h.bot.sweep();
    await h.bot.idle();
    expect(slack.messages(`D${REQUESTER.slice(1)}`)).toHaveLength(1);
    expect(slack.thread(OPS, alert.ts).filter((m) => m.text.includes('Expired unanswered'))).toHaveLength(1);
    expect(slack.thread(OPS, alert.ts).filter((m) => m.text.includes('Reminder:'))).toHaveLength(1);
  });
});
