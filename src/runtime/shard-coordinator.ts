/**
 * The heartbeat loop of clusters shared out across replicas (docs/design/architecture.md "Clusters shared out
 * across replicas"). Every `heartbeatMs` one replica: refreshes its `replicas` row; renews every cluster it owns
 * (learning which it lost); reads all rows; and follows {@link planHeartbeat}: takes the free clusters it should own
 * (compare-and-set, epoch bumped), hands over the idle ones it should no longer own, and drains the busy ones
 * (no new work; handed over at a later beat once their poll or action has ended).
 *
 * {@link ShardCoordinator.owns} gates work on this replica: true while the cluster is held, not draining, and its
 * last renewal (issued at local time t) is younger than the TTL — so a replica that cannot reach the store stops
 * starting work once another may have taken over. Safety does not rest on clocks: every poll run and chunk commit
 * checks the epoch in its own transaction ({@link ShardCoordinator.fence}), so a replica that lost a cluster while
 * paused or partitioned cannot commit for it.
 */
import { hostname } from 'node:os';
import { ErrorCode, TokenwatchError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { ClusterOwners, type ClusterOwnerRecord } from '../store/cluster-owners.js';
import type { SqlExecutor } from '../store/sql.js';
import { planHeartbeat, replicaId, SHARD_HEARTBEAT_MS, SHARD_TTL_MS, type ReplicaRow } from './shards.js';

/** A write for a cluster this replica no longer owns at the epoch its work started with (see the module docstring). */
export class ClusterNotOwnedError extends TokenwatchError {
  constructor(
    readonly cluster: string,
    readonly epoch?: number,
  ) {
    super(ErrorCode.ClusterNotOwned, `this replica no longer owns cluster ${cluster}${epoch !== undefined ? ` (epoch ${epoch})` : ''}: another replica took it over, so this write is refused`);
    this.name = 'ClusterNotOwnedError';
  }
}

/** Why a cluster stopped being this replica's. */
export type LossReason = 'released' | 'taken' | 'lapsed';

/** Options of {@link ShardCoordinator}. Durations are ms. */
export interface ShardCoordinatorOptions {
  /** The shared store's SQL executor (the `replicas` and `cluster_owners` tables). */
  db: SqlExecutor;
  /** The cluster names in this replica's config. */
  clusters: readonly string[];
  /** Base of this replica's id: the pod name (env `POD_NAME`), else the host name. A random suffix is added. */
  name?: string;
  /** Epoch ms UTC; default `Date.now` (wall clock: heartbeats are compared across replicas). */
  clock?: () => number;
  /** Default {@link SHARD_HEARTBEAT_MS}. */
  heartbeatMs?: number;
  /** Default {@link SHARD_TTL_MS}; must be more than `heartbeatMs`. */
  ttlMs?: number;
  /** Whether work of the cluster (a poll, an approved action) runs on this replica now: it is handed over after. */
  busy: (cluster: string) => boolean;
  logger: Logger;
  metrics?: Metrics;
  /** Called when this replica has taken a cluster (its work may start now). */
  onAcquired?: (cluster: string, epoch: number, previous: ClusterOwnerRecord | undefined) => void;
  /** Called when a cluster stopped being this replica's (abort its running work: its commits would be refused). */
  onLost?: (cluster: string, reason: LossReason) => void;
}

/** What `/readyz` and `/tokens status` show. */
export interface ShardStatus {
  /** This replica's id. */
  replica: string;
  /** Per configured cluster: its owner's replica id as last read (null: nobody), and whether it is this one. */
  owners: Record<string, string | null>;
  /** Live replicas as last read, by id. */
  replicas: string[];
  /** Clusters this replica holds but hands over once their work ends. */
  draining: string[];
  /** When the last heartbeat succeeded, epoch ms; undefined before the first. */
  lastBeatAt?: number;
  /** Set while heartbeats fail (the store is unreachable); a word, not the error text. */
  error?: 'store-unavailable';
}

interface Held {
  epoch: number;
  /** Local clock when the renewal that covers it was issued. */
  renewedAt: number;
}

/** See the module docstring. */
export class ShardCoordinator {
  readonly id: string;
  private readonly repo: ClusterOwners;
  private readonly clock: () => number;
  /** The heartbeat interval, ms. */
  readonly heartbeatMs: number;
  /** The ownership TTL, ms. */
  readonly ttlMs: number;
  private readonly self: ReplicaRow;
  private readonly held = new Map<string, Held>();
  private draining = new Set<string>();
  private lastOwners = new Map<string, string | null>();
  private lastLive: string[] = [];
  private lastBeatAt: number | undefined;
  private failing = false;
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly opts: ShardCoordinatorOptions) {
    this.clock = opts.clock ?? Date.now;
    this.heartbeatMs = opts.heartbeatMs ?? SHARD_HEARTBEAT_MS;
    this.ttlMs = opts.ttlMs ?? SHARD_TTL_MS;
    if (!(this.ttlMs > this.heartbeatMs)) throw new TokenwatchError(ErrorCode.ValueInvalid, `the ownership TTL (${this.ttlMs} ms) must be longer than the heartbeat (${this.heartbeatMs} ms)`);
    this.id = replicaId(opts.name ?? hostname());
    this.repo = new ClusterOwners(opts.db);
    const now = this.clock();
    this.self = { id: this.id, host: hostname(), startedAt: now, heartbeatAt: now, clusters: [...opts.clusters] };
  }

  /** Runs the first heartbeat (errors are logged, not thrown: the store may come later), then one every `heartbeatMs`. */
  async start(): Promise<void> {
    await this.beat();
    if (this.stopped) return;
    this.timer = setInterval(() => void this.beat(), this.heartbeatMs);
    this.timer.unref();
  }

  /** Whether this replica may start work for `cluster` now (see the module docstring). */
  owns(cluster: string): boolean {
    const h = this.held.get(cluster);
    return h !== undefined && !this.draining.has(cluster) && this.clock() - h.renewedAt < this.ttlMs;
  }

  /** The epoch this replica holds `cluster` at, if it holds it. */
  epochOf(cluster: string): number | undefined {
    return this.held.get(cluster)?.epoch;
  }

  /** Clusters this replica may start work for now. */
  owned(): string[] {
    return [...this.held.keys()].filter((c) => this.owns(c)).sort();
  }

  /**
   * Fencing, inside the caller's transaction `tx` (before it commits a poll run or a chunk): takes the cluster's lock
   * and checks this replica still holds it at `epoch`.
   * @throws {ClusterNotOwnedError} when it does not (the caller's transaction rolls back)
   */
  async fence(tx: SqlExecutor, cluster: string, epoch: number): Promise<void> {
    if (!(await ClusterOwners.holds(tx, cluster, this.id, epoch))) throw new ClusterNotOwnedError(cluster, epoch);
  }

  /**
   * Claims `cluster`'s start-up poll for this replica (src/store/cluster-owners.ts `claimStartupPoll`): true when no
   * live replica claimed it before, so this replica runs it; false when one did (it polled the cluster at its start).
   * @throws the store's error
   */
  claimStartupPoll(cluster: string): Promise<boolean> {
    return this.repo.claimStartupPoll(cluster, this.id, this.clock(), this.ttlMs);
  }

  /** The state shown by `/readyz` and `/tokens status`. */
  status(): ShardStatus {
    const owners: Record<string, string | null> = {};
    for (const c of this.opts.clusters) owners[c] = this.held.has(c) ? this.id : (this.lastOwners.get(c) ?? null);
    return {
      replica: this.id,
      owners,
      replicas: this.lastLive,
      draining: [...this.draining].sort(),
      ...(this.lastBeatAt !== undefined ? { lastBeatAt: this.lastBeatAt } : {}),
      ...(this.failing ? { error: 'store-unavailable' as const } : {}),
    };
  }

  /** One heartbeat (the timer calls it; tests call it directly). Never throws; concurrent calls share one run. */
  beat(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    this.beating ??= this.beatOnce().finally(() => {
      this.beating = undefined;
    });
    return this.beating;
  }

  private lose(cluster: string, reason: LossReason): void {
    if (!this.held.delete(cluster)) return;
    this.draining.delete(cluster);
    this.opts.metrics?.clusterOwnershipChanges.inc({ cluster, change: reason === 'released' ? 'released' : 'lost' });
    if (reason === 'released') this.opts.logger.info({ cluster, replica: this.id }, `handed cluster ${cluster} over: another replica should own it now`);
    else this.opts.logger.warn({ cluster, replica: this.id, reason }, `lost cluster ${cluster} (${reason === 'taken' ? 'another replica took it over' : 'not renewed in time'}): its work on this replica stops`);
    this.opts.onLost?.(cluster, reason);
  }

  private async beatOnce(): Promise<void> {
    const { logger } = this.opts;
    const now = this.clock();
    try {
      await this.repo.heartbeat({ ...this.self, heartbeatAt: now, clusters: [...this.self.clusters] });
      const still = await this.repo.renew(this.id, now, this.ttlMs);
      for (const [cluster, h] of [...this.held]) {
        if (still.get(cluster) !== h.epoch) this.lose(cluster, 'taken');
        else h.renewedAt = now;
      }
      // A row this replica owns but did not know of (taken by an earlier heartbeat whose answer was lost): keep it.
      for (const [cluster, epoch] of still) if (!this.held.has(cluster) && this.self.clusters.includes(cluster)) this.held.set(cluster, { epoch, renewedAt: now });
      const [replicas, owners] = [await this.repo.listReplicas(), await this.repo.listOwners()];
      const heldEpochs = new Map([...this.held].map(([c, h]) => [c, h.epoch]));
      const plan = planHeartbeat({ self: { ...this.self, heartbeatAt: now }, replicas, owners, held: heldEpochs, busy: this.opts.busy, now, ttlMs: this.ttlMs });
      for (const cluster of plan.take) {
        if (this.stopped) break;
        const res = await this.repo.take(cluster, this.id, now, this.ttlMs);
        if (!res.taken) continue;
        this.held.set(cluster, { epoch: res.epoch, renewedAt: now });
        const prev = res.previous;
        this.opts.metrics?.clusterOwnershipChanges.inc({ cluster, change: 'taken' });
        logger.info(
          { cluster, replica: this.id, epoch: res.epoch, ...(prev?.owner ? { previousOwner: prev.owner } : {}) },
          prev?.owner ? `took cluster ${cluster} over from ${prev.owner} (its ownership lapsed)` : `took cluster ${cluster} (it had no owner)`,
        );
        this.opts.onAcquired?.(cluster, res.epoch, prev);
      }
      const draining = new Set(plan.drain);
      for (const cluster of plan.release) {
        const h = this.held.get(cluster);
        if (!h) continue;
        // No new work from here on (owns() is false while draining), then busy is checked again: a poll the scheduler
        // started while this heartbeat awaited the store is waited for, not cut off by the release.
        this.draining.add(cluster);
        if (this.opts.busy(cluster)) {
          draining.add(cluster);
          continue;
        }
        await this.repo.release(cluster, this.id, h.epoch, now);
        this.lose(cluster, 'released');
      }
      for (const c of draining) if (!this.draining.has(c)) logger.info({ cluster: c, replica: this.id }, `cluster ${c} should move to another replica: no new work here; handed over once its running work ends`);
      this.draining = draining;
      await this.repo.pruneReplicas(now - 10 * this.ttlMs);
      const live = new Set(replicas.filter((r) => now - r.heartbeatAt < this.ttlMs).map((r) => r.id));
      live.add(this.id);
      this.lastLive = [...live].sort();
      const taken = new Map(owners.map((o) => [o.cluster, o.owner !== null && o.expiresAt > now ? o.owner : null]));
      for (const c of plan.take) if (this.held.has(c)) taken.set(c, this.id);
      for (const c of plan.release) taken.set(c, null);
      this.lastOwners = taken;
      this.lastBeatAt = now;
      if (this.failing) logger.info({ replica: this.id }, 'the store is reachable again: cluster ownership heartbeats resumed');
      this.failing = false;
    } catch (err) {
      if (!this.failing) logger.error({ err, replica: this.id }, 'cluster ownership heartbeat failed (store unavailable?): clusters not renewed stop being polled here once their ownership lapses; retrying every heartbeat');
      this.failing = true;
      for (const [cluster, h] of [...this.held]) if (now - h.renewedAt >= this.ttlMs) this.lose(cluster, 'lapsed');
    }
    this.opts.metrics?.clustersOwned.set(this.owned().length);
  }

  /**
   * Stops heartbeats, hands over every cluster still held (call after this replica's work has stopped) and deletes
   * its replica row, so the others take over at their next heartbeat rather than after the TTL. Errors are logged.
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.beating;
    const now = this.clock();
    try {
      for (const [cluster, h] of [...this.held]) {
        await this.repo.release(cluster, this.id, h.epoch, now);
        this.lose(cluster, 'released');
      }
      await this.repo.removeReplica(this.id);
    } catch (err) {
      this.opts.logger.warn({ err, replica: this.id }, 'handing clusters over at stop failed: the other replicas take them once their ownership lapses');
    }
    this.opts.metrics?.clustersOwned.set(0);
  }
}
