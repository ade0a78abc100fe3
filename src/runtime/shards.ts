/**
 * Clusters shared out across `serve` replicas (docs/design/architecture.md "Clusters shared out across replicas"):
 * the pure part — who is live, who should own each cluster, and what one replica does at one heartbeat. The loop
 * that reads and writes the store is `shard-coordinator.ts`; the rows are the store's `replicas` and
 * `cluster_owners` tables (src/store/cluster-owners.ts).
 *
 * - A replica is **live** while its heartbeat is younger than the TTL ({@link liveReplicas}).
 * - A cluster's **desired owner** is the live replica, among those that have the cluster in their config, with the
 *   highest rendezvous weight for it ({@link desiredOwner}: highest-random-weight hashing, Thaler and Ravishankar
 *   1998, https://en.wikipedia.org/wiki/Rendezvous_hashing). A replica joining or leaving changes the owner of only
 *   the clusters it wins or held — about 1/N of them — and every replica computes the same answer from the same rows.
 * - Ownership is a row per cluster with an **epoch** bumped at every change of owner; a replica takes a cluster it
 *   should own when the row is free (released or never taken) or expired, and hands over a cluster it should no
 *   longer own once its running work there (poll, approved action) has ended ({@link planHeartbeat}).
 */
import { createHash, randomBytes } from 'node:crypto';

/** A replica as its heartbeat row records it. Times are epoch ms UTC. */
export interface ReplicaRow {
  /** `<pod name or host>-<random suffix>`: unique per process, so a restarted pod is a new replica. */
  id: string;
  host: string;
  startedAt: number;
  heartbeatAt: number;
  /** The clusters in this replica's config (replicas of one Deployment may differ during a rolling config change). */
  clusters: readonly string[];
}

/** The ownership row of one cluster. Times are epoch ms UTC. */
export interface OwnerRow {
  cluster: string;
  /** The owning replica's id; null once released. */
  owner: string | null;
  /** Bumped at every change of owner; a write of a poll or action carries the epoch it started with (fencing). */
  epoch: number;
  /** Ownership lapses at this time unless renewed (renewed with every heartbeat of the owner). */
  expiresAt: number;
  /** When the owner last changed (taken or released). */
  changedAt: number;
}

/** Default heartbeat interval, ms: each replica refreshes its row and renews its clusters this often. */
export const SHARD_HEARTBEAT_MS = 5_000;
/**
 * Default TTL, ms: a replica without a heartbeat this long is not live, and a cluster not renewed this long is free.
 * With the defaults a `kill -9`'d replica's clusters are taken within TTL + one heartbeat (≤ 20 s) of its last renewal.
 */
export const SHARD_TTL_MS = 15_000;

/** The rendezvous weight of `replica` for `cluster`: the first 64 bits of SHA-256 over both, as an unsigned integer. */
export function rendezvousWeight(cluster: string, replica: string): bigint {
  return createHash('sha256').update(cluster).update('\u0000').update(replica).digest().readBigUInt64BE(0);
}

/**
 * The replica that should own `cluster`: of `candidates`, the one with the highest {@link rendezvousWeight} (ties,
 * which need a 64-bit collision, go to the smaller id). Undefined without candidates.
 */
export function desiredOwner(cluster: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestWeight = -1n;
  for (const id of candidates) {
    const w = rendezvousWeight(cluster, id);
    if (w > bestWeight || (w === bestWeight && best !== undefined && id < best)) {
      best = id;
      bestWeight = w;
    }
  }
  return best;
}

/** The replicas whose heartbeat is younger than `ttlMs` at `now` (epoch ms). */
export function liveReplicas(rows: readonly ReplicaRow[], now: number, ttlMs: number): ReplicaRow[] {
  return rows.filter((r) => now - r.heartbeatAt < ttlMs);
}

/**
 * The desired owner of every cluster in `clusters`, over the live replicas that have that cluster in their config.
 * `self` counts as live whatever its row says (it is running this code).
 */
export function desiredOwners(clusters: Iterable<string>, live: readonly ReplicaRow[], self: ReplicaRow): Map<string, string | undefined> {
  const all = live.some((r) => r.id === self.id) ? live : [...live, self];
  const sets = all.map((r) => ({ id: r.id, clusters: new Set(r.clusters) }));
  const out = new Map<string, string | undefined>();
  for (const c of clusters) out.set(c, desiredOwner(c, sets.filter((s) => s.clusters.has(c)).map((s) => s.id)));
  return out;
}

/** Whether an ownership row leaves the cluster free to take at `now`: released, or not renewed in time. */
export function isFree(row: OwnerRow | undefined, now: number): boolean {
  return row === undefined || row.owner === null || row.expiresAt <= now;
}

/** What one replica does at one heartbeat ({@link planHeartbeat}). */
export interface HeartbeatPlan {
  /** Clusters to take by compare-and-set (free or expired, and this replica should own them). */
  take: string[];
  /** Clusters to hand over now (held, should be another's, nothing running here). */
  release: string[];
  /** Clusters held that should be another's but still have work running here: no new work; released when it ends. */
  drain: string[];
}

/** Input of {@link planHeartbeat}. */
export interface HeartbeatView {
  self: ReplicaRow;
  /** Every replica row read at this heartbeat (live or not). */
  replicas: readonly ReplicaRow[];
  /** Every ownership row read at this heartbeat. */
  owners: readonly OwnerRow[];
  /** Clusters this replica holds now (renewed at this heartbeat), with their epoch. */
  held: ReadonlyMap<string, number>;
  /** Whether a poll or an approved action of the cluster is running on this replica. */
  busy: (cluster: string) => boolean;
  now: number;
  ttlMs: number;
}

/**
 * Decides one heartbeat of replica `self` (see the module docstring): for each cluster in its config, take it when
 * it should own it and it is free; hand it over when another live replica should own it and nothing of it runs
 * here, else drain it. A cluster no candidate should own (cannot happen: `self` is one) is left alone.
 */
export function planHeartbeat(view: HeartbeatView): HeartbeatPlan {
  const { self, now } = view;
  const live = liveReplicas(view.replicas, now, view.ttlMs);
  const desired = desiredOwners(self.clusters, live, self);
  const rows = new Map(view.owners.map((o) => [o.cluster, o]));
  const plan: HeartbeatPlan = { take: [], release: [], drain: [] };
  for (const cluster of self.clusters) {
    const want = desired.get(cluster);
    const mine = view.held.has(cluster);
    if (want === self.id) {
      if (!mine && isFree(rows.get(cluster), now)) plan.take.push(cluster);
    } else if (mine && want !== undefined) {
      (view.busy(cluster) ? plan.drain : plan.release).push(cluster);
    }
  }
  return plan;
}

/** A replica id: `<base>-<6 random hex digits>` (`base`: the pod name, else the host name). */
export function replicaId(base: string): string {
  return `${base}-${randomBytes(3).toString('hex')}`;
}
