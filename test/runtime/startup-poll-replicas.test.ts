/**
 * The start-up poll with two `serve` replicas on one PostgreSQL store (src/runtime/compose.ts "start-up poll"): the
 * replicas start at once, ownership moves while their start-up jitter runs, and every cluster is polled exactly once
 * at start-up — not by both (the first owner polled it, then the second took it over and polled it again) nor by
 * neither (the first owner's jitter ended after it handed the cluster over, the second's before it took it).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { composeServe } from '../../src/runtime/compose.js';
import type { ServeHandle } from '../../src/runtime/serve-options.js';
import { desiredOwner } from '../../src/runtime/shards.js';
import { auditEvent } from '../sources/events.js';
import { createTestDatabase, postgresServer } from '../support/postgres.js';
import { until } from '../support/until.js';

const pgServer = postgresServer();
const T0 = Date.parse('2026-11-20T12:00:00Z');
const silent = createLogger({ level: 'silent' });
const NAMES = Array.from({ length: 16 }, (_, i) => `c${String(i).padStart(2, '0')}`);
const HEARTBEAT_MS = 100;
const TTL_MS = 1000;
const JITTER_MS = 1500;

const handles: ServeHandle[] = [];
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const h of handles.splice(0)) await h.stop();
  for (const f of cleanups.splice(0).reverse()) await f();
});

describe.skipIf(!pgServer.available)('start-up poll with two replicas on PostgreSQL', () => {
  it('every cluster is polled once at start-up across the replicas, while ownership moves during the jitter', { timeout: 180_000 }, async () => {
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    const dir = mkdtempSync(join(tmpdir(), 'tw-startup-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const clusters = NAMES.map((name) => {
      const log = join(dir, `${name}.log`);
      writeFileSync(log, `${auditEvent({ auditID: `${name}-1`, time: T0, kind: 'stale', secondsAfterWarning: 7_200_000 })}\n`);
      // Once a year: no scheduled tick comes during the test, so every poll run is a start-up poll.
      return { name, audit: { file: { path: log } }, schedule: '0 0 1 1 *' };
    });
    const start = async (name: string) => {
      const config = parseConfig(
        {
          store: { path: join(dir, `${name}.db`), postgres: { host: db.options.host, port: db.options.port, database: db.options.database, user: db.options.user, sslmode: 'disable', poolSize: 4 } },
          http: { host: '127.0.0.1', port: 0 },
          clusters,
        },
        {},
      );
      const h = await composeServe(config, { logger: silent, metrics: new Metrics(), jitterMs: JITTER_MS, clock: () => T0, sharding: { name, heartbeatMs: HEARTBEAT_MS, ttlMs: TTL_MS } });
      handles.push(h);
      return h;
    };
    const [a, b] = await Promise.all([start('tw-a'), start('tw-b')]);
    const ids = [a.context.shards!.id, b.context.shards!.id];
    const byId = new Map([
      [ids[0], a],
      [ids[1], b],
    ]);
    // Ownership settles on the desired owners.
    await until('every cluster owned by its desired owner', () => NAMES.every((c) => byId.get(desiredOwner(c, ids))!.context.ownership.owns(c)));
    const runs = async () =>
      new Map((await a.context.store.sql.all<{ cluster: string; n: number }>('SELECT cluster, count(*) AS n FROM poll_runs WHERE ended_at IS NOT NULL GROUP BY cluster')).map((r) => [r.cluster, Number(r.n)]));
    await until('every cluster polled', async () => (await runs()).size === NAMES.length);
    // Past the window in which a takeover may still claim a start-up poll (jitter + 10 TTLs), with nothing running.
    await new Promise((r) => setTimeout(r, JITTER_MS + 10 * TTL_MS + 500));
    await until('no poll running', () => NAMES.every((c) => !a.context.scheduler.isBusy(c) && !b.context.scheduler.isBusy(c)));
    expect(Object.fromEntries(await runs())).toEqual(Object.fromEntries(NAMES.map((c) => [c, 1])));
    // One claim per cluster, each by a live replica.
    const claims = await a.context.store.sql.all<{ cluster: string; replica: string }>('SELECT cluster, replica FROM startup_polls ORDER BY cluster');
    expect(claims.map((c) => c.cluster)).toEqual(NAMES);
    for (const c of claims) expect(ids).toContain(c.replica);
  });
});
