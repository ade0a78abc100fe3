import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { acquirePollerLock, PollerLockError } from '../../src/runtime/poller-lock.js';
import { composeServe } from '../../src/runtime/compose.js';
import type { ServeHandle } from '../../src/runtime/serve-options.js';
import { openStore } from '../../src/store/db.js';
import type { Store } from '../../src/store/types.js';
import { auditEvent } from '../sources/events.js';
import { cliMain } from '../support/build.js';
import { ownershipWhile } from '../../src/core/ownership.js';

const T0 = Date.parse('2026-11-20T12:00:00Z');
const silent = createLogger({ level: 'silent' });

function setup(): { dir: string; db: string; config: ReturnType<typeof parseConfig> } {
  const dir = mkdtempSync(join(tmpdir(), 'tw-lock-'));
  const log = join(dir, 'audit.log');
  writeFileSync(log, `${auditEvent({ auditID: 'a1', time: T0, kind: 'stale', secondsAfterWarning: 7_200_000 })}\n`);
  const db = join(dir, 'tw.db');
  const config = parseConfig({ store: { path: db }, http: { host: '127.0.0.1', port: 0 }, clusters: [{ name: 'prod', audit: { file: { path: log } }, schedule: '0 0 1 1 *' }] }, {});
  return { dir, db, config };
}

const handles: ServeHandle[] = [];
const stores: Store[] = [];
afterEach(async () => {
  for (const h of handles.splice(0)) await h.stop();
  for (const s of stores.splice(0)) await s.close();
});

describe('two serve instances on one SQLite store', () => {
  it('refuses the second, naming the store file and the other holder; it starts once the first stopped', async () => {
    const { db, config } = setup();
    const first = await composeServe(config, { logger: silent, metrics: new Metrics(), jitterMs: 0, clock: () => T0, pollerLock: { clock: () => T0, host: 'node-a', pid: 4101 } });
    handles.push(first);
    await first.firstPolls;
    expect(first.context.ownership.ownsAny()).toBe(true);

    let refused: unknown;
    try {
      handles.push(await composeServe(config, { logger: silent, metrics: new Metrics(), jitterMs: 0, clock: () => T0, pollerLock: { clock: () => T0 + 20_000, host: 'node-b', pid: 4202 } }));
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(PollerLockError);
    expect((refused as Error).message).toBe(
      `another tokenwatch process polls the store ${db}: pid 4101 on host node-a, holding it since 2026-11-20T12:00:00.000Z, ` +
        'last heartbeat 2026-11-20T12:00:00.000Z (20 s ago). Two pollers on one SQLite store post every alert twice, so this one does not start. ' +
        'Stop the other process, give this one its own store.path, or run several replicas on a PostgreSQL store (store.postgres), which shares the clusters out; ' +
        'the lock is free once its heartbeat is 60 s old',
    );
    // The refused instance polled nothing and left the first one's lock and findings alone.
    expect(await first.context.store.pollerLock.get()).toMatchObject({ host: 'node-a', pid: 4101 });
    expect(await first.context.store.findings.list('prod')).toHaveLength(1);

    await handles.shift()!.stop();
    const second = await composeServe(config, { logger: silent, metrics: new Metrics(), jitterMs: 0, clock: () => T0, pollerLock: { clock: () => T0 + 30_000, host: 'node-b', pid: 4202 } });
    handles.push(second);
    expect(await second.context.store.pollerLock.get()).toMatchObject({ host: 'node-b', pid: 4202, acquiredAt: T0 + 30_000 });
  });

  it('with ownership given (the tests\' seam) takes no lock: the caller decides who polls', async () => {
    const { config } = setup();
    const a = await composeServe(config, { logger: silent, metrics: new Metrics(), jitterMs: 0, ownership: ownershipWhile(() => true) });
    handles.push(a);
    const b = await composeServe(config, { logger: silent, metrics: new Metrics(), jitterMs: 0, ownership: ownershipWhile(() => false) });
    handles.push(b);
    expect(await a.context.store.pollerLock.get()).toBeUndefined();
  });

  it('refuses while another real process on this host polls the store; takes over at once after it is killed', { timeout: 120_000 }, async () => {
    const { dir, db } = setup();
    const cfg = join(dir, 'tokenwatch.yaml');
    writeFileSync(cfg, `store:\n  path: ${db}\nhttp:\n  host: 127.0.0.1\n  port: 0\nclusters:\n  - name: prod\n    audit:\n      file:\n        path: ${join(dir, 'audit.log')}\n    schedule: "0 0 1 1 *"\n`);
    const child = spawn(process.execPath, [cliMain(), 'serve', '--config', cfg], { stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      await new Promise<void>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (b: Buffer) => {
          out += b.toString();
          if (out.includes('tokenwatch serve started')) resolve();
        });
        child.once('exit', (code) => reject(new Error(`serve exited early (${code}): ${out}`)));
      });
      const config = parseConfig({ store: { path: db }, http: { host: '127.0.0.1', port: 0 }, clusters: [{ name: 'prod', audit: { file: { path: join(dir, 'audit.log') } }, schedule: '0 0 1 1 *' }] }, {});
      await expect(composeServe(config, { logger: silent, metrics: new Metrics(), jitterMs: 0 })).rejects.toThrow(
        new RegExp(`^another tokenwatch process polls the store ${db.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: pid ${child.pid} on host ${hostname().replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}, `),
      );
      // A second `tokenwatch serve` on the same store: one line saying why, the same as a fatal JSON log line with its
      // code and reason (no stack trace for a refusal tokenwatch foresaw), exit 1.
      const second = spawnSync(process.execPath, [cliMain(), 'serve', '--config', cfg], { encoding: 'utf8', timeout: 60_000 });
      expect(second.status).toBe(1);
      const human = second.stderr.split('\n').filter((l) => l.startsWith('tokenwatch: serve could not start: '));
      expect(human).toHaveLength(1);
      expect(human[0]).toContain(`another tokenwatch process polls the store ${db}: pid ${child.pid}`);
      const fatal = `${second.stdout}\n${second.stderr}`.split('\n').filter((l) => l.includes('"msg":"tokenwatch serve could not start"')).map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(fatal).toHaveLength(1);
      expect(fatal[0]).toMatchObject({ code: expect.any(String), reason: expect.stringContaining('another tokenwatch process polls the store') });
      expect(JSON.stringify(fatal[0])).not.toContain('"stack"');
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
      // Killed: its row stays, but its pid no longer runs on this host, so the lock is free without waiting 60 s.
      const handle = await composeServe(config, { logger: silent, metrics: new Metrics(), jitterMs: 0 });
      handles.push(handle);
      expect(await handle.context.store.pollerLock.get()).toMatchObject({ host: hostname(), pid: process.pid });
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
});

describe('acquirePollerLock (injected clock)', () => {
  async function store(): Promise<Store> {
    const s = await openStore(join(mkdtempSync(join(tmpdir(), 'tw-lock-unit-')), 'tw.db'));
    stores.push(s);
    return s;
  }
  const opts = (s: Store, now: () => number, host: string, pid: number) => ({ store: s, clock: now, logger: silent, host, pid, isRunning: () => true });

  it('a lock without a heartbeat for 60 s is free; the stalled holder finds it lost at its next beat and stops', async () => {
    const s = await store();
    let now = T0;
    const a = await acquirePollerLock(opts(s, () => now, 'node-a', 1));
    now = T0 + 45_000;
    expect(await a.beat()).toBe(true);
    expect(await s.pollerLock.get()).toMatchObject({ host: 'node-a', heartbeatAt: T0 + 45_000, acquiredAt: T0 });
    now = T0 + 45_000 + 59_999;
    await expect(acquirePollerLock(opts(s, () => now, 'node-b', 2))).rejects.toThrow(PollerLockError);
    now = T0 + 45_000 + 60_000;
    const b = await acquirePollerLock(opts(s, () => now, 'node-b', 2));
    expect(await s.pollerLock.get()).toMatchObject({ host: 'node-b', pid: 2, acquiredAt: now });
    expect(await a.beat()).toBe(false);
    expect(a.held()).toBe(false);
    // The old holder's release does not free the new holder's lock.
    await a.release();
    expect(await s.pollerLock.get()).toMatchObject({ host: 'node-b' });
    expect(b.held()).toBe(true);
    await b.release();
    expect(await s.pollerLock.get()).toBeUndefined();
  });

  it('calls onLost with the new holder', async () => {
    const s = await store();
    let now = T0;
    const lost: unknown[] = [];
    const a = await acquirePollerLock({ ...opts(s, () => now, 'node-a', 1), onLost: (by) => lost.push(by) });
    now = T0 + 60_000;
    await acquirePollerLock(opts(s, () => now, 'node-b', 2));
    await a.beat();
    await a.beat();
    expect(lost).toEqual([{ id: expect.any(String), host: 'node-b', pid: 2, acquiredAt: T0 + 60_000, heartbeatAt: T0 + 60_000 }]);
  });

  it('a lock left on this host by a pid that no longer runs, or by this very pid (a restarted container), is free at once', async () => {
    const s = await store();
    await acquirePollerLock(opts(s, () => T0, 'pod-x', 1));
    // Same host, same pid: a container restarted as pid 1 again.
    await expect(acquirePollerLock({ ...opts(s, () => T0 + 1000, 'pod-x', 1) })).resolves.toBeDefined();
    // Same host, pid 1 no longer runs: a process that crashed.
    await expect(acquirePollerLock({ ...opts(s, () => T0 + 3000, 'pod-x', 8), isRunning: (pid) => pid !== 1 })).resolves.toBeDefined();
    expect(await s.pollerLock.get()).toMatchObject({ host: 'pod-x', pid: 8 });
    // Another host's pid says nothing about liveness here: only the heartbeat counts.
    await expect(acquirePollerLock({ ...opts(s, () => T0 + 4000, 'pod-y', 8), isRunning: () => false })).rejects.toThrow(PollerLockError);
  });
});
