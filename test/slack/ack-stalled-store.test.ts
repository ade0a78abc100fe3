/**
 * Acks that never wait on the store (src/slack/replay.ts "Acks never wait on the store"), through `tokenwatch serve`
 * on the run's real PostgreSQL, the real Bolt app (HTTP mode, signed requests) and the loopback fake Slack: while
 * another connection holds an exclusive lock on the replay cache's table (so the guard's claim cannot finish), a
 * `/tokens status` command and a click are still acknowledged; they are handled once the lock is released.
 *
 * With the store down (its connections refused), a click is acknowledged and its answer says the store is unavailable.
 *
 * The order of events is asserted, not a duration: the lock is released when the ack has arrived, or — only if the
 * ack waits on the store, which is the fault — after a fallback delay; the ack must come first.
 */
import { connect, createServer, type Socket } from 'node:net';
import type pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { sendSlashCommand, type SendResult } from '../../src/sandbox/fakes/slack.js';
import { createTestDatabase, postgresServer, superuserClient, type TestDatabase } from '../support/postgres.js';
import { CLUSTER, OPS, REQUESTER, SECRET, startHarness, waitFor, type Harness } from './harness.js';

const pgServer = postgresServer();

let h: Harness | undefined;
let db: TestDatabase | undefined;
let locker: pg.Client | undefined;
let proxy: { port: number; close: () => void } | undefined;
afterEach(async () => {
  proxy?.close();
  proxy = undefined;
  await locker?.end().catch(() => undefined);
  locker = undefined;
  await h?.stop();
  h = undefined;
  await db?.drop();
  db = undefined;
});

/** Holds an ACCESS EXCLUSIVE lock on `slack_seen_requests` (the replay cache) in an open transaction until `release`. */
async function stallReplayCache(database: string): Promise<{ release: () => Promise<void> }> {
  locker = await superuserClient(database);
  locker.on('error', () => undefined); // terminated by the database's drop at the end
  await locker.query('BEGIN');
  await locker.query('LOCK TABLE slack_seen_requests IN ACCESS EXCLUSIVE MODE');
  const c = locker;
  return { release: async () => void (await c.query('COMMIT')) };
}

/** Whether a backend of `database` other than the locker waits on a lock (the guard's claim, stalled). */
async function claimWaiting(database: string): Promise<boolean> {
  const admin = await superuserClient();
  admin.on('error', () => undefined);
  try {
    const r = await admin.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'", [database]);
    return (r.rows[0] as { n: number }).n > 0;
  } finally {
    await admin.end();
  }
}

/**
 * Sends a request while the replay cache is stalled and returns the order of "ack" and "stall-ended": the stall ends
 * when the ack arrived and the guard's claim was seen waiting, or after a fallback of 20 s (a waiting ack).
 */
async function orderUnderStall(database: string, send: () => Promise<SendResult>): Promise<{ order: string[]; res: SendResult }> {
  const stall = await stallReplayCache(database);
  const order: string[] = [];
  const sent = send().then((r) => {
    order.push('ack');
    return r;
  });
  const fallback = new Promise<void>((r) => setTimeout(r, 20_000).unref());
  await Promise.race([sent.then(() => waitFor(() => claimWaiting(database))), fallback]);
  order.push('stall-ended');
  await stall.release();
  const res = await sent;
  return { order, res };
}

/** A loopback TCP proxy to PostgreSQL; `close()` stops listening and cuts every connection (the store is down). */
async function tcpProxy(host: string, port: number): Promise<{ port: number; close: () => void }> {
  const sockets: Socket[] = [];
  const server = createServer((down) => {
    const up = connect(port, host);
    sockets.push(down, up);
    down.pipe(up).pipe(down);
    down.on('error', () => up.destroy());
    up.on('error', () => down.destroy());
    down.on('close', () => up.destroy());
    up.on('close', () => down.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as { port: number }).port,
    close: () => {
      server.close();
      for (const s of sockets) s.destroy();
    },
  };
}

describe.skipIf(!pgServer.available)('acks while the store is stalled (PostgreSQL lock on the replay cache)', () => {
  it('a /tokens command and a click are acknowledged before the stall ends, and handled after it', { timeout: 120_000 }, async () => {
    db = await createTestDatabase();
    const o = db.options;
    h = await startHarness({
      tweak: (c) => {
        c.store.postgres = { host: o.host, port: o.port ?? 5432, database: o.database, user: o.user, sslmode: 'disable', poolSize: 4 } as NonNullable<typeof c.store.postgres>;
      },
    });
    const url = h.bot.eventsUrl!;
    const multus = await h.alert('kube-system', 'multus');

    const cmd = await orderUnderStall(db.name, () =>
      sendSlashCommand(url, SECRET, { text: `status ${CLUSTER}`, user_id: REQUESTER, channel_id: OPS, response_url: h!.slack.responseUrl({ channel: OPS, user: REQUESTER }) }),
    );
    expect(cmd.order).toEqual(['ack', 'stall-ended']);
    expect(cmd.res.status).toBe(200);
    await h.bot.idle();
    await waitFor(() => h!.ephemerals(REQUESTER).some((t) => t.includes(CLUSTER)));

    const click = await orderUnderStall(db.name, () => h!.click(REQUESTER, multus, 'tw_details', { wait: false }));
    expect(click.order).toEqual(['ack', 'stall-ended']);
    expect(click.res.status).toBe(200);
    await h.bot.idle();
    // The Details click was handled once the claim went through: the details are in the alert's thread.
    await waitFor(() => h!.slack.thread(OPS, multus.ts).some((m) => JSON.stringify(m.blocks ?? []).includes('Details')));
  });

  it('with the store down, a click is acknowledged and answered that the store is unavailable', { timeout: 120_000 }, async () => {
    db = await createTestDatabase();
    const o = db.options;
    proxy = await tcpProxy(o.host, o.port ?? 5432);
    const port = proxy.port;
    h = await startHarness({
      tweak: (c) => {
        c.store.postgres = { host: '127.0.0.1', port, database: o.database, user: o.user, sslmode: 'disable', poolSize: 4 } as NonNullable<typeof c.store.postgres>;
      },
    });
    const multus = await h.alert('kube-system', 'multus');
    proxy.close();
    const res = await h.click(REQUESTER, multus, 'tw_details', { wait: false });
    expect(res.status).toBe(200);
    await waitFor(() => h!.ephemerals(REQUESTER).some((t) => t.includes('store (its database) is unavailable right now, so nothing was changed')));
  });
});
