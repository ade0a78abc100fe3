import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { ClusterNotOwnedError, ShardCoordinator, type ShardCoordinatorOptions } from '../../src/runtime/shard-coordinator.js';
import { desiredOwner } from '../../src/runtime/shards.js';
import { ClusterOwners } from '../../src/store/cluster-owners.js';
import { migratePostgres } from '../../src/store/migrations-postgres.js';
import { openPostgres } from '../../src/store/postgres.js';
import type { SqlExecutor } from '../../src/store/sql.js';
import { createTestDatabase, postgresServer, type TestDatabase } from '../support/postgres.js';
import { openSqliteExecutor } from '../../src/store/sqlite.js';

const T0 = Date.parse('2026-12-01T12:00:00Z');
const HB = 5_000;
const TTL = 15_000;
const clusters = Array.from({ length: 30 }, (_, i) => `cluster-${i}`);
const silent = createLogger({ level: 'silent' });

const open: SqlExecutor[] = [];
const databases: TestDatabase[] = [];
afterEach(async () => {
  for (const db of open.splice(0)) await db.close().catch(() => undefined);
  for (const d of databases.splice(0)) await d.drop();
});

const pgServer = postgresServer();
/** Each backend: a function that makes a fresh store and returns how to open another connection (replica) to it. */
const backends: [string, () => Promise<() => Promise<SqlExecutor>>][] = [
  [
    'sqlite',
    async () => {
      const file = join(mkdtempSync(join(tmpdir(), 'tw-shards-')), 'tw.db');
      return async () => openSqliteExecutor(file);
    },
  ],
  ...(pgServer.available
    ? [
        [
          'postgres',
          async () => {
            const d = await createTestDatabase();
            databases.push(d);
            const first = openPostgres(d.options);
            await migratePostgres(first);
            await first.close();
            return async () => openPostgres(d.options);
          },
        ] as [string, () => Promise<() => Promise<SqlExecutor>>],
      ]
    : []),
];

/** Two or more replicas, each with its own connection (pool) to one store, on one test clock. */
async function cluster(backend: () => Promise<() => Promise<SqlExecutor>>) {
  const connect = await backend();
  let now = T0;
  const replica = async (name: string, over: Partial<ShardCoordinatorOptions> = {}) => {
    const db = await connect();
    open.push(db);
    const busy = new Set<string>();
    const lost: string[] = [];
    const acquired: string[] = [];
    const metrics = new Metrics();
    const c = new ShardCoordinator({
      db,
      clusters,
      name,
      clock: () => now,
      heartbeatMs: HB,
      ttlMs: TTL,
      busy: (x) => busy.has(x),
      logger: silent,
      metrics,
      onLost: (x, why) => lost.push(`${x}:${why}`),
      onAcquired: (x) => acquired.push(x),
      ...over,
    });
    return { c, db, busy, lost, acquired, metrics };
  };
  return { replica, connect, advance: (ms: number) => (now += ms), now: () => now };
}

/** The owner of every cluster as the store has it (owner null or lapsed: undefined). */
async function ownersInStore(db: SqlExecutor, now: number): Promise<Map<string, string | undefined>> {
  const rows = await new ClusterOwners(db).listOwners();
  return new Map(rows.map((r) => [r.cluster, r.owner !== null && r.expiresAt > now ? r.owner : undefined]));
}

describe.each(backends)('ShardCoordinator on %s', (_name, backend) => {
  it('a lone replica takes every cluster; a joining one gets its rendezvous share after one hand-over', async () => {
    const t = await cluster(backend);
    const a = await t.replica('tw-a');
    await a.c.start();
    expect(a.c.owned()).toEqual([...clusters].sort());
    expect(Number((await a.metrics.registry.getSingleMetric('tokenwatch_clusters_owned')!.get()).values[0]!.value)).toBe(30);

    const b = await t.replica('tw-b');
    t.advance(1000);
    await b.c.beat(); // b sees a live and owning everything: it takes nothing yet
    expect(b.c.owned()).toEqual([]);
    const share = clusters.filter((x) => desiredOwner(x, [a.c.id, b.c.id]) === b.c.id);
    expect(share.length).toBeGreaterThan(5);
    expect(share.length).toBeLessThan(25);

    t.advance(1000);
    await a.c.beat(); // a sees b: it hands b's share over (nothing runs there)
    expect(a.c.owned()).toEqual(clusters.filter((x) => !share.includes(x)).sort());
    expect(a.lost.sort()).toEqual(share.map((x) => `${x}:released`).sort());
    t.advance(1000);
    await b.c.beat();
    expect(b.c.owned()).toEqual([...share].sort());
    for (const x of share) expect(b.c.epochOf(x)).toBe(2); // the epoch moves with the owner

    const inStore = await ownersInStore(a.db, t.now());
    for (const x of clusters) expect(inStore.get(x)).toBe(share.includes(x) ? b.c.id : a.c.id);
    expect(a.c.status().owners[share[0]!]).toBeNull(); // as a last read it: released
    await a.c.beat();
    expect(a.c.status().owners[share[0]!]).toBe(b.c.id);
    expect(b.c.status().owners[clusters.find((x) => !share.includes(x))!]).toBe(a.c.id);
    expect(b.c.status().replicas).toEqual([a.c.id, b.c.id].sort());
  });

  it('a busy cluster is drained (no new work) and handed over only once its work has ended', async () => {
    const t = await cluster(backend);
    const a = await t.replica('tw-a');
    await a.c.start();
    const b = await t.replica('tw-b');
    await b.c.beat();
    const [x] = clusters.filter((c) => desiredOwner(c, [a.c.id, b.c.id]) === b.c.id);
    a.busy.add(x!);
    t.advance(1000);
    await a.c.beat();
    expect(a.c.owns(x!)).toBe(false); // no new poll starts here
    expect(a.c.epochOf(x!)).toBe(1); // but it is still held: its running poll commits
    expect(a.c.status().draining).toEqual([x]);
    await b.c.beat();
    expect(b.c.owns(x!)).toBe(false);

    a.busy.delete(x!);
    t.advance(1000);
    await a.c.beat();
    expect(a.c.epochOf(x!)).toBeUndefined();
    await b.c.beat();
    expect(b.c.owns(x!)).toBe(true);
  });

  it('a replica that stops beating (kill -9) loses its clusters after the TTL, and its commits are fenced', async () => {
    const t = await cluster(backend);
    const a = await t.replica('tw-a');
    const b = await t.replica('tw-b');
    await a.c.beat();
    await b.c.beat();
    await a.c.beat();
    await b.c.beat();
    const ofA = a.c.owned();
    expect(ofA.length).toBeGreaterThan(0);
    const [x] = ofA;
    a.lost.length = 0;
    const epoch = a.c.epochOf(x!)!;
    // a's poll started at this epoch, then a froze: b takes over once a's ownership lapsed, not before.
    t.advance(TTL - 1);
    await b.c.beat();
    expect(b.c.owns(x!)).toBe(false);
    expect(a.c.owns(x!)).toBe(true);
    t.advance(1);
    expect(a.c.owns(x!)).toBe(false); // a's own view lapses at the same time: it starts no new work
    await b.c.beat();
    expect(b.c.owned()).toEqual([...clusters].sort());
    expect(b.acquired.sort()).toEqual([...ofA, ...clusters.filter((c) => !ofA.includes(c))].sort());
    // a wakes up and tries to commit the chunk of its running poll: refused.
    await expect(a.db.transaction((tx) => a.c.fence(tx, x!, epoch))).rejects.toBeInstanceOf(ClusterNotOwnedError);
    await b.db.transaction((tx) => b.c.fence(tx, x!, b.c.epochOf(x!)!));
    await a.c.beat();
    expect(a.lost.sort()).toEqual(ofA.map((c) => `${c}:taken`).sort());
    expect(a.c.owned()).toEqual([]);
  });

  it('a graceful stop hands everything over at once: the other replica takes it at its next beat, not after the TTL', async () => {
    const t = await cluster(backend);
    const a = await t.replica('tw-a');
    const b = await t.replica('tw-b');
    await a.c.beat();
    await b.c.beat();
    await a.c.beat();
    await b.c.beat();
    await a.c.stop();
    t.advance(10);
    await b.c.beat();
    expect(b.c.owned()).toEqual([...clusters].sort());
    expect(b.c.status().replicas).toEqual([b.c.id]);
  });

  it('while the store is unreachable it keeps nothing past the TTL and says so; it resumes when the store is back', async () => {
    const t = await cluster(backend);
    let down = false;
    const real = await t.connect();
    open.push(real);
    const flaky: SqlExecutor = new Proxy(real, {
      get(target, prop, recv) {
        const v = Reflect.get(target, prop, recv) as unknown;
        if (typeof v !== 'function' || prop === 'close') return v;
        return (...args: unknown[]) => (down ? Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:5432')) : (v as (...a: unknown[]) => unknown).apply(target, args));
      },
    });
    const a = await t.replica('tw-a', { db: flaky });
    await a.c.beat();
    expect(a.c.owned()).toHaveLength(30);
    down = true;
    t.advance(HB);
    await a.c.beat();
    expect(a.c.status().error).toBe('store-unavailable');
    expect(a.c.owned()).toHaveLength(30); // renewed 5 s ago: still safe to work
    t.advance(TTL - HB);
    await a.c.beat();
    expect(a.c.owned()).toEqual([]);
    expect(a.lost).toHaveLength(30);
    down = false;
    t.advance(HB);
    await a.c.beat();
    expect(a.c.status().error).toBeUndefined();
    expect(a.c.owned()).toHaveLength(30); // nobody else took them: taken again
  });
});

describe.skipIf(!pgServer.available)('cluster ownership on PostgreSQL under concurrency', () => {
  it('of five replicas taking one free cluster in the same millisecond, exactly one gets it', { timeout: 60_000 }, async () => {
    const connect = await backends[1]![1]();
    const dbs = await Promise.all(Array.from({ length: 5 }, () => connect()));
    open.push(...dbs);
    for (let round = 0; round < 10; round++) {
      const cluster = `race-${round}`;
      const results = await Promise.all(dbs.map((db, i) => new ClusterOwners(db).take(cluster, `tw-${i}`, T0, TTL)));
      expect(results.filter((r) => r.taken)).toHaveLength(1);
      const row = await new ClusterOwners(dbs[0]!).getOwner(cluster);
      expect(row?.epoch).toBe(1);
      // Once it lapsed, the same race again: one winner — the old owner renewing (epoch 1) or another (epoch 2).
      const again = await Promise.all(dbs.map((db, i) => new ClusterOwners(db).take(cluster, `tw-${i}`, T0 + TTL, TTL)));
      const won = again.filter((r) => r.taken);
      expect(won).toHaveLength(1);
      expect((await new ClusterOwners(dbs[0]!).getOwner(cluster))?.epoch).toBe(won[0]!.taken ? won[0]!.epoch : -1);
    }
  });

  it('a fenced commit and a take of the same cluster never interleave: the commit lands before the take or is refused', { timeout: 60_000 }, async () => {
    const connect = await backends[1]![1]();
    const [a, b] = [await connect(), await connect()];
    open.push(a, b);
    await a.run('CREATE TABLE IF NOT EXISTS commits (cluster TEXT NOT NULL, epoch BIGINT NOT NULL)');
    for (let round = 0; round < 20; round++) {
      const cluster = `fence-${round}`;
      const first = await new ClusterOwners(a).take(cluster, 'tw-a', T0, TTL);
      expect(first.taken).toBe(true);
      // a commits a chunk at epoch 1 while b takes the lapsed cluster: whichever order, no commit at epoch 1 lands
      // after b's epoch 2 began.
      const commit = a
        .transaction(async (tx) => {
          if (!(await ClusterOwners.holds(tx, cluster, 'tw-a', 1))) throw new ClusterNotOwnedError(cluster, 1);
          await tx.run('INSERT INTO commits (cluster, epoch) VALUES (?, 1)', [cluster]);
          return 'committed' as const;
        })
        .catch((err: unknown) => (err instanceof ClusterNotOwnedError ? ('refused' as const) : Promise.reject(err)));
      const take = new ClusterOwners(b).take(cluster, 'tw-b', T0 + TTL, TTL).then(async (r) => {
        // The new owner reads what was committed before its take: that is where its poll starts.
        const seen = await b.all('SELECT epoch FROM commits WHERE cluster = ?', [cluster]);
        return { r, seen: seen.length };
      });
      const [c, t] = await Promise.all([commit, take]);
      expect(t.r.taken).toBe(true);
      const landed = (await a.all('SELECT epoch FROM commits WHERE cluster = ?', [cluster])).length;
      expect(landed).toBe(c === 'committed' ? 1 : 0);
      expect(t.seen).toBe(landed); // the taker saw every commit that landed
    }
  });
});
