/**
 * The store's rows for clusters shared out across replicas (docs/design/architecture.md "Clusters shared out across
 * replicas"): `replicas` (one heartbeat row per running `serve` process) and `cluster_owners` (one ownership row per
 * cluster, with an epoch bumped at every change of owner). The decisions are made in src/runtime/shards.ts; this
 * repository only reads and writes, in the portable SQL of src/store/sql.ts, so the same text runs on SQLite and
 * PostgreSQL. Times are epoch ms UTC from the caller's clock.
 *
 * Concurrency: every change of a cluster's owner and every fencing check runs in one transaction that first takes
 * `tx.lock('cluster-owner:<cluster>')` (PostgreSQL: an advisory transaction lock; SQLite: `BEGIN IMMEDIATE` already
 * serialises writers), so a take and a fenced commit of the same cluster never interleave: the commit either lands
 * before the take (and the new owner's poll reads it) or sees the new epoch and refuses.
 */
import type { SqlExecutor } from './sql.js';

/** A replica's heartbeat row. */
export interface ReplicaRecord {
  id: string;
  host: string;
  startedAt: number;
  heartbeatAt: number;
  /** Cluster names in the replica's config. */
  clusters: string[];
}

/** A cluster's ownership row. */
export interface ClusterOwnerRecord {
  cluster: string;
  /** Null once released. */
  owner: string | null;
  epoch: number;
  expiresAt: number;
  changedAt: number;
}

/** The lock key of a cluster's ownership (see the module docstring). */
export const clusterOwnerLockKey = (cluster: string): string => `cluster-owner:${cluster}`;

interface ReplicaSqlRow extends Record<string, unknown> {
  id: string;
  host: string;
  started_at: number;
  heartbeat_at: number;
  clusters: string;
}
interface OwnerSqlRow extends Record<string, unknown> {
  cluster: string;
  owner: string | null;
  epoch: number;
  expires_at: number;
  changed_at: number;
}

const parseClusters = (text: string): string[] => {
  try {
    const v: unknown = JSON.parse(text);
    return Array.isArray(v) ? v.filter((c): c is string => typeof c === 'string') : [];
  } catch {
    return [];
  }
};
const toReplica = (r: ReplicaSqlRow): ReplicaRecord => ({
  id: r.id,
  host: r.host,
  startedAt: Number(r.started_at),
  heartbeatAt: Number(r.heartbeat_at),
  clusters: parseClusters(r.clusters),
});
const toOwner = (r: OwnerSqlRow): ClusterOwnerRecord => ({
  cluster: r.cluster,
  owner: r.owner,
  epoch: Number(r.epoch),
  expiresAt: Number(r.expires_at),
  changedAt: Number(r.changed_at),
});

/** The outcome of {@link ClusterOwners.take}. */
export type TakeResult =
  | { taken: true; epoch: number; previous: ClusterOwnerRecord | undefined }
  | { taken: false; holder: ClusterOwnerRecord };

/** Reads and writes `replicas` and `cluster_owners`; see the module docstring. */
export class ClusterOwners {
  constructor(private readonly db: SqlExecutor) {}

  /** Creates or refreshes this replica's heartbeat row. */
  async heartbeat(r: ReplicaRecord): Promise<void> {
    await this.db.run(
      `INSERT INTO replicas (id, host, started_at, heartbeat_at, clusters) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, clusters = excluded.clusters`,
      [r.id, r.host, r.startedAt, r.heartbeatAt, JSON.stringify(r.clusters)],
    );
  }

  /** Every replica row, by id. */
  async listReplicas(): Promise<ReplicaRecord[]> {
    return (await this.db.all<ReplicaSqlRow>('SELECT id, host, started_at, heartbeat_at, clusters FROM replicas ORDER BY id')).map(toReplica);
  }

  /** Deletes this replica's row (graceful stop). */
  async removeReplica(id: string): Promise<void> {
    await this.db.run('DELETE FROM replicas WHERE id = ?', [id]);
  }

  /** Deletes the rows of replicas whose last heartbeat is before `before`; returns how many. */
  async pruneReplicas(before: number): Promise<number> {
    return (await this.db.run('DELETE FROM replicas WHERE heartbeat_at < ?', [before])).changes;
  }

  /**
   * Claims the start-up poll of `cluster` for `replica` (table `startup_polls`), in one statement: it is claimed when
   * no replica claimed it, or the replica that did is no longer live (no `replicas` row with a heartbeat after
   * `now - ttlMs`: stopped, or gone since). Of concurrent claims one wins.
   * @returns whether `replica` claimed it now
   */
  async claimStartupPoll(cluster: string, replica: string, now: number, ttlMs: number): Promise<boolean> {
    const r = await this.db.run(
      `INSERT INTO startup_polls (cluster, replica, claimed_at) VALUES (?, ?, ?)
       ON CONFLICT (cluster) DO UPDATE SET replica = excluded.replica, claimed_at = excluded.claimed_at
       WHERE NOT EXISTS (SELECT 1 FROM replicas r WHERE r.id = startup_polls.replica AND r.heartbeat_at > ?)`,
      [cluster, replica, now, now - ttlMs],
    );
    return r.changes > 0;
  }

  /** Every ownership row, by cluster. */
  async listOwners(): Promise<ClusterOwnerRecord[]> {
    return (await this.db.all<OwnerSqlRow>('SELECT cluster, owner, epoch, expires_at, changed_at FROM cluster_owners ORDER BY cluster')).map(toOwner);
  }

  /** The ownership row of one cluster. */
  async getOwner(cluster: string): Promise<ClusterOwnerRecord | undefined> {
    const r = await this.db.get<OwnerSqlRow>('SELECT cluster, owner, epoch, expires_at, changed_at FROM cluster_owners WHERE cluster = ?', [cluster]);
    return r ? toOwner(r) : undefined;
  }

  /**
   * Takes `cluster` for `owner` by compare-and-set, in one transaction under the cluster's lock: when there is no
   * row, or it is released (`owner` null) or expired (`expires_at <= now`), it becomes `owner`'s with the epoch
   * bumped (1 for a new row) until `now + ttlMs`. A row already `owner`'s is renewed with its epoch. Otherwise
   * nothing changes and the holder is returned.
   */
  async take(cluster: string, owner: string, now: number, ttlMs: number): Promise<TakeResult> {
    return this.db.transaction(async (tx) => {
      await tx.lock(clusterOwnerLockKey(cluster));
      const r = await tx.get<OwnerSqlRow>('SELECT cluster, owner, epoch, expires_at, changed_at FROM cluster_owners WHERE cluster = ?', [cluster]);
      const row = r ? toOwner(r) : undefined;
      if (!row) {
        await tx.run('INSERT INTO cluster_owners (cluster, owner, epoch, expires_at, changed_at) VALUES (?, ?, 1, ?, ?)', [cluster, owner, now + ttlMs, now]);
        return { taken: true, epoch: 1, previous: undefined };
      }
      if (row.owner === owner) {
        await tx.run('UPDATE cluster_owners SET expires_at = ? WHERE cluster = ?', [now + ttlMs, cluster]);
        return { taken: true, epoch: row.epoch, previous: row };
      }
      if (row.owner !== null && row.expiresAt > now) return { taken: false, holder: row };
      const epoch = row.epoch + 1;
      await tx.run('UPDATE cluster_owners SET owner = ?, epoch = ?, expires_at = ?, changed_at = ? WHERE cluster = ?', [owner, epoch, now + ttlMs, now, cluster]);
      return { taken: true, epoch, previous: row };
    });
  }

  /**
   * Renews every cluster `owner` holds until `now + ttlMs` and returns them with their epochs (what it still
   * holds: a cluster taken by another replica meanwhile is not renewed and not returned).
   */
  async renew(owner: string, now: number, ttlMs: number): Promise<Map<string, number>> {
    await this.db.run('UPDATE cluster_owners SET expires_at = ? WHERE owner = ?', [now + ttlMs, owner]);
    const rows = await this.db.all<{ cluster: string; epoch: number }>('SELECT cluster, epoch FROM cluster_owners WHERE owner = ?', [owner]);
    return new Map(rows.map((r) => [r.cluster, Number(r.epoch)]));
  }

  /**
   * Hands `cluster` over: clears its owner if it is still `owner`'s at `epoch` (the epoch stays; the next taker
   * bumps it). Returns whether it was released.
   */
  async release(cluster: string, owner: string, epoch: number, now: number): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      await tx.lock(clusterOwnerLockKey(cluster));
      const res = await tx.run('UPDATE cluster_owners SET owner = NULL, expires_at = ?, changed_at = ? WHERE cluster = ? AND owner = ? AND epoch = ?', [now, now, cluster, owner, epoch]);
      return res.changes > 0;
    });
  }

  /**
   * Fencing, inside a caller's transaction `tx`: takes the cluster's lock and tells whether `owner` still holds
   * `cluster` at `epoch`. A caller that gets false must roll back (throw) rather than commit.
   */
  static async holds(tx: SqlExecutor, cluster: string, owner: string, epoch: number): Promise<boolean> {
    await tx.lock(clusterOwnerLockKey(cluster));
    const r = await tx.get('SELECT epoch FROM cluster_owners WHERE cluster = ? AND owner = ? AND epoch = ?', [cluster, owner, epoch]);
    return r !== undefined;
  }
}
