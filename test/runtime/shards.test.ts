import { describe, expect, it } from 'vitest';
import { desiredOwner, desiredOwners, isFree, liveReplicas, planHeartbeat, replicaId, type OwnerRow, type ReplicaRow } from '../../src/runtime/shards.js';

const T0 = Date.parse('2026-12-01T12:00:00Z');
const TTL = 15_000;
const clusters = Array.from({ length: 600 }, (_, i) => `cluster-${i}`);
const replica = (id: string, heartbeatAt = T0, cs: readonly string[] = clusters): ReplicaRow => ({ id, host: 'h', startedAt: T0 - 60_000, heartbeatAt, clusters: cs });

describe('rendezvous ownership', () => {
  it('is the same whatever order the replicas are listed in, and spreads clusters about evenly', () => {
    const ids = ['tw-a-1', 'tw-b-2', 'tw-c-3'];
    const counts = new Map(ids.map((id) => [id, 0]));
    for (const c of clusters) {
      const owner = desiredOwner(c, ids)!;
      expect(desiredOwner(c, [...ids].reverse())).toBe(owner);
      counts.set(owner, counts.get(owner)! + 1);
    }
    // 600 clusters over 3 replicas: 200 each on average; a fair hash keeps each well within ±25 %.
    for (const n of counts.values()) {
      expect(n).toBeGreaterThan(150);
      expect(n).toBeLessThan(250);
    }
    expect(desiredOwner('x', [])).toBeUndefined();
  });

  it('moves only the joining replica\'s share when one joins, and only the leaving one\'s when one leaves', () => {
    const before = ['tw-a-1', 'tw-b-2', 'tw-c-3'];
    const after = [...before, 'tw-d-4'];
    let moved = 0;
    for (const c of clusters) {
      const o1 = desiredOwner(c, before)!;
      const o2 = desiredOwner(c, after)!;
      if (o1 !== o2) {
        moved++;
        expect(o2).toBe('tw-d-4'); // a cluster moves only to the new replica
      }
    }
    // About 1/4 of the clusters move (150 of 600).
    expect(moved).toBeGreaterThan(100);
    expect(moved).toBeLessThan(200);
    for (const c of clusters) {
      const o1 = desiredOwner(c, after)!;
      const o2 = desiredOwner(c, before)!;
      if (o1 !== 'tw-d-4') expect(o2).toBe(o1); // when d leaves, only its clusters move
    }
  });

  it('counts only live replicas that have the cluster in their config; self is always a candidate', () => {
    const self = replica('tw-a-1', T0, ['prod', 'stage']);
    const rows = [self, replica('tw-b-2', T0 - TTL), replica('tw-c-3', T0 - 1000, ['prod'])];
    const live = liveReplicas(rows, T0, TTL);
    expect(live.map((r) => r.id)).toEqual(['tw-a-1', 'tw-c-3']); // b's heartbeat is exactly TTL old: not live
    const desired = desiredOwners(['prod', 'stage'], live, self);
    expect(desired.get('stage')).toBe('tw-a-1'); // c does not have stage
    expect(desired.get('prod')).toBe(desiredOwner('prod', ['tw-a-1', 'tw-c-3']));
    expect(desiredOwners(['stage'], [], self).get('stage')).toBe('tw-a-1');
  });

  it('makes replica ids unique per process', () => {
    const a = replicaId('tokenwatch-7d9f-xk2');
    expect(a).toMatch(/^tokenwatch-7d9f-xk2-[0-9a-f]{6}$/);
    expect(replicaId('tokenwatch-7d9f-xk2')).not.toBe(a);
  });
});

describe('planHeartbeat', () => {
  const owner = (cluster: string, o: string | null, expiresAt: number, epoch = 1): OwnerRow => ({ cluster, owner: o, epoch, expiresAt, changedAt: T0 - 60_000 });
  // Two replicas; which one should own each cluster is fixed by the hash.
  const ids = ['tw-a-1', 'tw-b-2'];
  const cs = clusters.slice(0, 40);
  const forA = cs.filter((c) => desiredOwner(c, ids) === 'tw-a-1');
  const forB = cs.filter((c) => desiredOwner(c, ids) === 'tw-b-2');
  const a = replica('tw-a-1', T0, cs);
  const b = replica('tw-b-2', T0, cs);

  it('takes only free or expired clusters that it should own', () => {
    expect(forA.length).toBeGreaterThan(5);
    expect(forB.length).toBeGreaterThan(5);
    const [free, released, expired, held] = forA;
    const owners = [owner(released!, null, T0 - 1), owner(expired!, 'tw-b-2', T0), owner(held!, 'tw-b-2', T0 + 1)];
    const plan = planHeartbeat({ self: a, replicas: [a, b], owners, held: new Map(), busy: () => false, now: T0, ttlMs: TTL });
    expect(plan.take).toContain(free);
    expect(plan.take).toContain(released);
    expect(plan.take).toContain(expired); // expiresAt == now: lapsed
    expect(plan.take).not.toContain(held); // b still holds it: b hands it over, a takes it at a later beat
    expect(plan.take.filter((c) => forB.includes(c))).toEqual([]); // b's share is left to b, even when free
    expect(plan.release).toEqual([]);
  });

  it('hands over what it should no longer own once nothing runs there; drains what is busy', () => {
    const held = new Map(cs.map((c) => [c, 3]));
    const [busy] = forB;
    const plan = planHeartbeat({ self: a, replicas: [a, b], owners: cs.map((c) => owner(c, 'tw-a-1', T0 + TTL, 3)), held, busy: (c) => c === busy, now: T0, ttlMs: TTL });
    expect(plan.drain).toEqual([busy]);
    expect(plan.release.sort()).toEqual(forB.filter((c) => c !== busy).sort());
    expect(plan.take).toEqual([]);
  });

  it('takes over every cluster once the other replica\'s heartbeat is past the TTL', () => {
    const staleB = replica('tw-b-2', T0 - TTL - 1, cs);
    const owners = forB.map((c) => owner(c, 'tw-b-2', T0 - 1));
    const plan = planHeartbeat({ self: a, replicas: [a, staleB], owners, held: new Map(forA.map((c) => [c, 1])), busy: () => false, now: T0, ttlMs: TTL });
    expect(plan.take.sort()).toEqual([...forB].sort());
  });

  it('treats a missing row as free', () => {
    expect(isFree(undefined, T0)).toBe(true);
    expect(isFree(owner('x', 'tw-a-1', T0 + 1), T0)).toBe(false);
  });
});
