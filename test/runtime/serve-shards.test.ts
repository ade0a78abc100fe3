import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { composeServe as startServe } from '../../src/runtime/compose.js';
import type { ServeHandle } from '../../src/runtime/serve-options.js';
import { desiredOwner } from '../../src/runtime/shards.js';
import { auditEvent } from '../sources/events.js';

const T0 = Date.parse('2026-11-20T12:00:00Z');
const silent = createLogger({ level: 'silent' });
const NAMES = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot'];

async function waitFor<T>(what: string, fn: () => T | undefined | false, timeoutMs = 60_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function setup() {
  const dir = mkdtempSync(join(tmpdir(), 'tw-shards-serve-'));
  const clusters = NAMES.map((name) => {
    const log = join(dir, `${name}.log`);
    writeFileSync(log, `${auditEvent({ auditID: `${name}-1`, time: T0, kind: 'stale', secondsAfterWarning: 7_200_000 })}\n`);
    return { name, audit: { file: { path: log } }, schedule: '0 0 1 1 *' };
  });
  const db = join(dir, 'tw.db');
  return { db, config: parseConfig({ store: { path: db }, http: { host: '127.0.0.1', port: 0 }, clusters }, {}) };
}

const handles: ServeHandle[] = [];
afterEach(async () => {
  for (const h of handles.splice(0)) await h.stop();
});

describe('serve with clusters shared out across replicas', () => {
  it('each cluster is polled by its owner only; a stopped replica\'s clusters are taken over and polled once', { timeout: 120_000 }, async () => {
    const { config } = setup();
    const start = async (name: string) => {
      const h = await startServe(config, { logger: silent, metrics: new Metrics(), jitterMs: 0, clock: () => T0, sharding: { name, heartbeatMs: 100, ttlMs: 1000 } });
      handles.push(h);
      return h;
    };
    const a = await start('tw-a');
    // Alone, a owns and polls everything.
    await a.firstPolls;
    expect(a.readiness().shards?.owners).toEqual(Object.fromEntries(NAMES.map((n) => [n, a.context.shards!.id])));
    let bStartedAt = Date.now();
    // Rendezvous hashing over random replica ids gives b no cluster in (1/2)^6 ≈ 1.6 % of runs: then b stops (it owned
    // nothing) and a new b, a new id, starts, until one has a share.
    let b = await start('tw-b');
    let ids = [a.context.shards!.id, b.context.shards!.id];
    for (let attempt = 1; !NAMES.some((n) => desiredOwner(n, ids) === ids[1]); attempt++) {
      if (attempt >= 8) throw new Error('rendezvous gave tw-b no cluster in 8 tries');
      handles.splice(handles.indexOf(b), 1);
      await b.stop();
      bStartedAt = Date.now();
      b = await start('tw-b');
      ids = [a.context.shards!.id, b.context.shards!.id];
    }
    const share = NAMES.filter((n) => desiredOwner(n, ids) === ids[1]);
    // a hands b's share over; b takes it. b's start-up polls ran before it owned anything, and a's polls of this
    // tick had finished, so b does not poll them again.
    await waitFor('b owns its share', () => share.every((c) => b.context.ownership.owns(c)));
    for (const c of NAMES) expect(a.context.ownership.owns(c)).toBe(!share.includes(c));
    // One finished poll run per cluster: the tick was polled by a; b waits for the next one.
    const runs = async () => Object.fromEntries((await b.context.store.sql.all<{ cluster: string; n: number }>('SELECT cluster, count(*) AS n FROM poll_runs WHERE ended_at IS NOT NULL GROUP BY cluster')).map((r) => [r.cluster, r.n]));
    const once = Object.fromEntries(NAMES.map((n) => [n, 1]));
    expect(await runs()).toEqual(once);

    const readyB = b.readiness();
    expect(readyB.status).toBe('ready');
    expect(readyB.shards?.replica).toBe(ids[1]);
    // The clusters a polls show on b as a's last poll (from the shared store), named with their owner: not pending.
    const aShare = NAMES.filter((n) => !share.includes(n));
    const onB = await waitFor('b showing a\'s polls', () => {
      const r = b.readiness();
      return aShare.every((c) => r.shards?.lastPolls[c] !== undefined) ? r : undefined;
    });
    for (const c of aShare) {
      expect({ c, poll: onB.polls[c], owner: onB.shards?.owners[c], last: onB.shards?.lastPolls[c] }).toEqual({ c, poll: 'ok', owner: ids[0], last: { startedAt: new Date(T0).toISOString(), status: 'ok' } });
    }

    // a stops gracefully: b takes a's clusters at its next heartbeat and, as a's last poll of them completed, waits
    // for their next tick (no second poll of the same tick). Within b's start-up window (its jitter, 0 here, plus
    // 10 × ttl) a takeover claims the start-up poll again once a's replica row is gone (docs/live-mode.md "The start-up
    // poll, once per cluster"), so a stops only after that window, when a takeover is an ordinary one.
    const windowEnd = bStartedAt + 10 * 1000 + 500;
    while (Date.now() < windowEnd) await new Promise((r) => setTimeout(r, Math.min(500, windowEnd - Date.now())));
    await handles.shift()!.stop();
    await waitFor('b owns everything', () => NAMES.every((c) => b.context.ownership.owns(c)));
    expect(await runs()).toEqual(once);
    expect(b.readiness().shards?.owners).toEqual(Object.fromEntries(NAMES.map((n) => [n, ids[1]])));
  });
});
