/**
 * Every scheduled tick accounted for through a store outage (src/runtime/unrecorded-ticks.ts): `serve` on a real
 * PostgreSQL reached through a loopback TCP proxy polls every second; the proxy then refuses and drops every
 * connection for a few seconds. The ticks whose polls failed meanwhile are counted at once in
 * `tokenwatch_polls_missed_total{reason="store-unavailable"}` and, once the database answers again, written as missed
 * records with that reason; every tick from before the outage to after it has a finished poll run or a missed record.
 */
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { composeServe } from '../../src/runtime/compose.js';
import type { ServeHandle } from '../../src/runtime/serve-options.js';
import { auditEvent } from '../sources/events.js';
import { createTestDatabase, postgresServer } from '../support/postgres.js';
import { until } from '../support/until.js';

const pgServer = postgresServer();
const silent = createLogger({ level: 'silent' });

/** A loopback TCP proxy to the server; `down()` drops every connection and refuses new ones until `up()`. */
async function proxy(host: string, port: number): Promise<{ port: number; down: () => void; up: () => void; close: () => void }> {
  const sockets = new Set<Socket>();
  let isDown = false;
  const server: Server = createServer((client) => {
    if (isDown) return void client.destroy();
    const upstream = connect(port, host);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    }
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as { port: number }).port,
    down: () => {
      isDown = true;
      for (const s of sockets) s.destroy();
    },
    up: () => {
      isDown = false;
    },
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

const handles: ServeHandle[] = [];
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const h of handles.splice(0)) await h.stop();
  for (const f of cleanups.splice(0).reverse()) await f();
});

async function storeUnavailableMisses(metrics: Metrics): Promise<number> {
  const m = await metrics.pollsMissed.get();
  return m.values.filter((v) => v.labels['reason'] === 'store-unavailable').reduce((n, v) => n + v.value, 0);
}

describe.skipIf(!pgServer.available)('scheduled ticks through a store outage (PostgreSQL)', () => {
  it('ticks whose polls failed while the database was unreachable are counted, then recorded as missed when it answers', { timeout: 180_000 }, async () => {
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    const p = await proxy(db.options.host, db.options.port ?? 5432);
    cleanups.push(() => p.close());
    const dir = mkdtempSync(join(tmpdir(), 'tw-outage-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const log = join(dir, 'prod.log');
    writeFileSync(log, `${auditEvent({ auditID: 'prod-1', time: Date.now() - 60_000, kind: 'stale', secondsAfterWarning: 7_200_000 })}\n`);
    const config = parseConfig(
      {
        store: { path: join(dir, 'tw.db'), postgres: { host: '127.0.0.1', port: p.port, database: db.options.database, user: db.options.user, sslmode: 'disable', poolSize: 4, connectTimeout: '1s' } },
        http: { host: '127.0.0.1', port: 0 },
        // Every second (6-field cron).
        clusters: [{ name: 'prod', audit: { file: { path: log } }, schedule: '* * * * * *' }],
      },
      {},
    );
    const metrics = new Metrics();
    // A TTL far longer than the outage: the replica keeps the cluster, so its ticks run and fail on the store.
    const h = await composeServe(config, { logger: silent, metrics, jitterMs: 0, spread: false, sharding: { name: 'tw-a', heartbeatMs: 200, ttlMs: 60_000 } });
    handles.push(h);
    const sql = h.context.store.sql;
    const polled = async () => (await sql.all<{ t: number }>("SELECT scheduled_at AS t FROM poll_runs WHERE cluster = 'prod' AND ended_at IS NOT NULL AND scheduled_at IS NOT NULL")).map((r) => Number(r.t));
    await until('two scheduled polls', async () => (await polled()).length >= 2);
    const before = Math.max(...(await polled()));

    p.down();
    await until('two ticks missed with the store unavailable', async () => (await storeUnavailableMisses(metrics)) >= 2);
    const counted = await storeUnavailableMisses(metrics);
    p.up();

    // Back: the kept ticks are written as missed with their reason, and scheduled polls succeed again.
    const missed = async () => sql.all<{ t: number; reason: string }>("SELECT scheduled_at AS t, reason FROM missed_polls WHERE cluster = 'prod' ORDER BY scheduled_at");
    await until('the outage ticks recorded', async () => (await missed()).filter((m) => m.reason === 'store-unavailable').length >= counted);
    const after = await until('a scheduled poll after the outage', async () => {
      const ts = (await polled()).filter((t) => t > before);
      const ms = (await missed()).map((m) => Number(m.t));
      const last = Math.max(0, ...ms);
      const next = ts.filter((t) => t > last);
      return next.length > 0 ? Math.min(...next) : undefined;
    });
    const runs = await polled();
    const records = (await missed()).map((m) => ({ t: Number(m.t), reason: m.reason }));
    expect(records.filter((m) => m.reason === 'store-unavailable').length).toBe(counted);
    // Every tick (each second) from the last poll before the outage to the first after it: polled or recorded missed.
    const accounted = new Set([...runs, ...records.map((m) => m.t)]);
    const gaps: string[] = [];
    for (let t = before; t <= after; t += 1000) if (!accounted.has(t)) gaps.push(new Date(t).toISOString());
    expect(gaps).toEqual([]);
  });
});
