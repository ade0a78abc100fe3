/**
 * The one builder of `tokenwatch serve`: {@link composeServe} builds the service in the order data flows through it and
 * returns one handle. The CLI (`src/cli/commands/serve.ts`), the sandbox (`src/sandbox/sandbox.ts`), the bench and the
 * tests all call it; they substitute parts through {@link ServeOptions} (a clock, no jitter, Slack tuning, their own
 * integrations), as Backstage's `KubernetesBuilder` takes replacements
 * (https://backstage.io/docs/reference/plugin-kubernetes-backend.kubernetesbuilder). The order (docs/design/architecture.md
 * "How serve is put together"):
 *
 * 1. ownership (`src/core/ownership.ts`, {@link shardingOf}): with a PostgreSQL store, clusters shared out across replicas
 *    (`shard-coordinator.ts`); with the SQLite store (one replica by design), the store's poller lock;
 * 2. the store (`src/store/`), with the poller lock (`poller-lock.ts`) unless the clusters are shared out;
 * 3. per cluster ({@link buildClusters}, each by `build-cluster.ts` {@link buildCluster}): audit source, cluster state, remediator, monitors, poller;
 * 4. the scheduler (`scheduler.ts`), and with replicas the shard coordinator ({@link createShards});
 * 5. the health/metrics listener (`health-server.ts`) and the audit webhook listeners (before Slack, so probes answer while it connects);
 * 6. the Slack parts (`build-slack.ts`, started with retry by `integrations.ts`), then the verifier of the actions approved through them (`src/remediation/verify.ts`);
 * 7. the polls start ({@link schedulePolls}; with replicas {@link StartupPolls} and {@link tickChecker}).
 *
 * After each successful poll the poll pipeline (`src/pipeline/poll.ts`) runs its notify step ({@link pollSteps} below: the
 * blind-log gauge, the integrations' alerts), then its verify step (the verifier's conclusions); a verification reply has its alert's queued work sent first, so it replies under an
 * alert that already shows the poll's findings.
 */
import pLimit from 'p-limit';
import type { ClusterWatchCache } from '../cluster/cache.js';
import { KubeconfigFiles } from '../cluster/kube.js';
import type { Config } from '../config/types.js';
import { ownershipWhile, type Ownership } from '../core/ownership.js';
import type { Finding } from '../findings/types.js';
import { createLogger, type Logger } from '../observability/logger.js';
import { Metrics } from '../observability/metrics.js';
import type { PollOutcome } from '../pipeline/poll.js';
import { Verifier } from '../remediation/verify.js';
import type { Integration } from '../slack/context.js';
import { CloudWatchClients } from '../sources/index.js';
import type { PollStatus, Store } from '../store/index.js';
import { SqlBucketStateStore } from '../store/rate-buckets.js';
import { WebhookBatches } from '../store/webhook-batches.js';
import { buildCluster, type ClusterRuntime } from './build-cluster.js';
import type { SlackIntegration } from './build-slack.js';
import { sharedGcpLogging } from './gcp-logging.js';
import { readinessOf, startHealthServer, type HealthServer } from './health-server.js';
import {
  alertIntegrations,
  cancelRetries,
  integrationSet,
  integrationStates,
  slackAccessOf,
  startIntegration,
  stopIntegrations,
  verifyThrough,
  whenStarted,
  type IntegrationDeps,
  type IntegrationSet,
} from './integrations.js';
import { logAnalyticsSources } from './log-analytics.js';
import type { Scheduler } from './scheduler.js';
import { createScheduler, openPollingStore, sharedCloudWatch, updateBlindGauge } from './serve.js';
import type { ServeContext, ServeHandle, ServeOptions } from './serve-options.js';
import { ClusterNotOwnedError, ShardCoordinator, type ShardCoordinatorOptions } from './shard-coordinator.js';
import { UnrecordedTicks } from './unrecorded-ticks.js';

/**
 * How many list pages the watch caches of all clusters process at once (parse and convert; the requests themselves
 * are not bounded). A thousand clusters list pods, ServiceAccounts and six owner kinds at start: unbounded, those
 * pages would keep the event loop busy for seconds, and a Slack ack would wait behind them.
 */
const WATCH_LIST_CONCURRENCY = 8;
/** How many clusters' watch caches start (list) at once, and how long one may take its turn before the next starts, ms. */
const WATCH_START_CONCURRENCY = 16;
const WATCH_START_TURN_MS = 10_000;
/**
 * Every how many heartbeats a replica re-reads the clusters' latest poll runs for `/readyz` (30 s with the default 5-s
 * heartbeat): the query reads every retained poll run, so not at every beat.
 */
const SHARED_POLLS_BEATS = 6;
/** How often, ms, ticks kept while the store was unavailable are tried again without replicas (with them: every heartbeat). */
const UNRECORDED_RETRY_MS = 5_000;
/** How far back, ms, a poll of a cluster shared out across replicas looks for ticks nobody accounted for (at least 10 TTLs). */
const TICK_CHECK_WINDOW_MS = 30 * 60_000;
/** Sharding options: the caller's, or from `shards` in the config with a PostgreSQL store; undefined: one replica. */
type Sharding = Partial<Pick<ShardCoordinatorOptions, 'db' | 'name' | 'clock' | 'heartbeatMs' | 'ttlMs'>> & { heartbeatMs: number; ttlMs: number };

/**
 * Step 1. Ownership: with a PostgreSQL store the replicas share the clusters out through the database
 * (shard-coordinator.ts); with the SQLite store one process owns every cluster while it holds the poller lock.
 * The heartbeat and TTL come from `shards` in the config unless the caller's sharding options set them.
 */
function shardingOf(config: Config, opts: ServeOptions): Sharding | undefined {
  const fromConfig = { heartbeatMs: config.shards.heartbeat, ttlMs: config.shards.ttl };
  if (opts.sharding) return { ...fromConfig, ...opts.sharding };
  if (config.store.postgres !== undefined && opts.ownership === undefined) return { ...fromConfig, ...(opts.env?.POD_NAME ? { name: opts.env.POD_NAME } : {}) };
  return undefined;
}

/** What the steps share once the store is open. */
interface Parts {
  config: Config;
  opts: ServeOptions;
  logger: Logger;
  metrics: Metrics;
  clock: () => number;
  store: Store;
  sharding: Sharding | undefined;
  clusters: Map<string, ClusterRuntime>;
  integrations: IntegrationSet;
  integrationDeps: IntegrationDeps;
  stopping: () => boolean;
  /** The shard coordinator once built (step 4), with sharding only. */
  shards: () => ShardCoordinator | undefined;
  /** What to take down, last first, when a later step fails. */
  undo: Array<() => unknown>;
}

/**
 * The poll pipeline's steps that reach the integrations: "notify" (the blind-log gauge, then the integrations' alerts:
 * Slack queues them) and "verify" (concludes approved actions in their threads, under the alerts just queued).
 */
function pollSteps(p: Parts): { notify: (rt: ClusterRuntime, findings: Finding[], outcome: PollOutcome) => Promise<void>; verify: (rt: ClusterRuntime) => Promise<void> } {
  /** The integrations that alerted on each cluster's last poll: its verify step reports through the same ones. */
  const alerted = new Map<string, readonly Integration[]>();
  return {
    notify: async (rt, findings, outcome) => {
      updateBlindGauge(p.metrics, rt, p.clock());
      const started = [...p.integrations.started]; // one that starts meanwhile joins at the next poll
      alerted.set(rt.config.name, started);
      await alertIntegrations(started, p.logger, rt, findings, outcome);
    },
    verify: async (rt) => {
      await verifyThrough(p.integrations, p.integrationDeps, alerted.get(rt.config.name) ?? [], rt.config.name);
    },
  };
}

/**
 * Step 3. Per cluster, in flow order: audit source, cluster state, remediator, monitors, poller. Returns what closes
 * their sources, watch caches and CloudWatch clients.
 */
async function buildClusters(p: Parts, fence: (cluster: string, tx: Store) => Promise<void>): Promise<() => void> {
  const { config, opts, store, logger, metrics, clock, sharding, clusters } = p;
  // With replicas (PostgreSQL), one CloudWatch budget per account and Region for all of them, in the store.
  const buckets = sharding ? new SqlBucketStateStore(store.sql) : undefined;
  const { rateLimiter, fleetInsights } = sharedCloudWatch(config, metrics, buckets && { buckets, logger });
  const gcpLogging = sharedGcpLogging(config, metrics, buckets && { buckets, logger }, opts.gcpLogging);
  // AKS clusters in Log Analytics: the client is loaded on the first such cluster only.
  const logAnalytics = config.clusters.some((c) => 'azure' in c.audit) ? logAnalyticsSources({ config, metrics, logger, ...(buckets && { buckets }) }) : undefined;
  if (logAnalytics) p.undo.push(() => logAnalytics.close());
  const slowPollAfterMs = opts.slowPollAfterMs ?? 3 * config.poll.requestTimeout;
  const onBlindChange = (rt: ClusterRuntime) => updateBlindGauge(metrics, rt, clock());
  // The watch caches of all clusters list at start: their pages are processed a few at a time (cache.ts listLimit)…
  const watchListLimit = pLimit(WATCH_LIST_CONCURRENCY);
  // …and start a few at a time: a cache takes its turn until it has synced or for at most its turn (a hung cluster
  // does not hold up the others), so a thousand clusters do not send 8,000 list requests at once.
  const watchStarts = pLimit(opts.watchStart?.concurrency ?? WATCH_START_CONCURRENCY);
  const turnMs = opts.watchStart?.turnMs ?? WATCH_START_TURN_MS;
  const startWatchCache = (cache: ClusterWatchCache): void => {
    void watchStarts(async () => {
      if (p.stopping()) return;
      cache.start();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([cache.synced(), new Promise<void>((resolve) => (timer = setTimeout(resolve, turnMs)))]);
      clearTimeout(timer);
    });
  };
  // One CloudWatch Logs client per Region and endpoint for all clusters (src/sources/cloudwatch.ts CloudWatchClients).
  const cloudwatchClients = new CloudWatchClients({ requestTimeoutMs: config.poll.requestTimeout });
  const closeClusters = () => {
    for (const rt of clusters.values()) {
      rt.source.close?.();
      rt.watchCache?.stop();
    }
    cloudwatchClients.destroy();
  };
  p.undo.push(closeClusters);
  // Replicas: a webhook batch any replica accepts goes to the shared store, where the cluster's owner polls it.
  const webhookBatches = sharding ? new WebhookBatches(store.sql) : undefined;
  // A fleet's kubeconfig file (often one file of every context, or the default kubeconfig) is read and parsed once;
  // each cluster takes its context. Nothing reads the files after the start: the parses are dropped then.
  const kubeconfigFiles = new KubeconfigFiles();
  const { notify, verify } = pollSteps(p);
  for (const c of config.clusters) {
    clusters.set(c.name, await buildCluster(c, { config, store, logger, metrics, clock, rateLimiter, fleetInsights, cloudwatchClients, gcpLogging, slowPollAfterMs, watchListLimit, startWatchCache, kubeconfigFiles, onBlindChange, notify, verify, ...(sharding ? { fence, webhookBatches } : {}), slackAccess: (cluster, now) => slackAccessOf(p.integrations, cluster, now), ...(logAnalytics && { logAnalytics: logAnalytics.sources }) }));
  }
  kubeconfigFiles.clear();
  metrics.pollRunningOf = () =>
    [...clusters].map(([name, rt]) => {
      const since = rt.poller.health().runningSince;
      return [name, since === undefined ? 0 : Math.max(0, clock() - since) / 1000] as const;
    });
  // The health model per cluster and access (src/observability/health.ts), as /readyz shows it.
  metrics.accessFailingOf = () => [...clusters].flatMap(([name, rt]) => Object.entries(rt.access(clock())).map(([access, s]) => [name, access, s.state === 'failing'] as const));
  for (const rt of clusters.values()) onBlindChange(rt); // EKS audit logging off is known before the first poll
  return closeClusters;
}

/**
 * With clusters shared out, before the poll for `tick` of `cluster`: false when that tick is accounted for already (a
 * replica polled it or recorded it missed: it is not polled again); else the earlier ticks (since this process
 * started scheduling, `since`, within {@link TICK_CHECK_WINDOW_MS}) that no replica polled and none recorded as missed
 * — the cluster was changing hands, or its owner's renewal was late — are recorded as missed (`unowned`), so every
 * tick is accounted for once (docs/design/architecture.md "Clusters shared out across replicas"), and true.
 */
function tickChecker(p: Parts, scheduler: Scheduler, since: number): (cluster: string, tick: number) => Promise<boolean> {
  const { store, metrics, logger, clock, clusters } = p;
  return async (cluster, tick) => {
    const shards = p.shards();
    const from = Math.max(since, tick - Math.max(TICK_CHECK_WINDOW_MS, 10 * (shards?.ttlMs ?? 0)));
    const ticks = scheduler.ticksBetween(cluster, from, tick);
    const seen = await store.polls.ticks(cluster, ticks[0] ?? tick);
    const accounted = new Set([...seen.polled, ...seen.missed.map((m) => m.scheduledAt)]);
    if (accounted.has(tick)) return false;
    for (const t of ticks) {
      if (accounted.has(t)) continue;
      if (!(await store.polls.recordMissed({ cluster, scheduledAt: t, reason: 'unowned', ...(shards ? { replica: shards.id } : {}), recordedAt: clock() }))) continue;
      metrics.pollsMissed.inc({ cluster, reason: 'unowned' });
      clusters.get(cluster)?.poller.recordMissed(t, 'unowned');
      logger.warn({ cluster, dueAt: new Date(t).toISOString(), reason: 'unowned' }, 'scheduled poll missed: no replica could start it (the cluster was changing hands, or its ownership was not renewed in time)');
    }
    return true;
  };
}

/**
 * With replicas: the clusters whose start-up poll this replica has not claimed or seen claimed yet. Each cluster's
 * start-up poll runs once across replicas: on the replica that owns it after its start-up jitter, or that takes it
 * over later (within `until`: the jitter plus 10 ownership TTLs), whichever claims it first in the store
 * (`startup_polls`); a claim by a replica still live stands, one by a replica gone since (stopped, killed) does not.
 */
class StartupPolls {
  private readonly pending: Set<string>;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly until: number;

  constructor(
    private readonly p: Parts,
    private readonly scheduler: Scheduler,
  ) {
    this.pending = new Set(p.sharding ? p.config.clusters.map((c) => c.name) : []);
    this.until = Date.now() + scheduler.jitterMs + 10 * (p.sharding?.ttlMs ?? 0);
  }

  /** Claims `cluster`'s start-up poll if it is pending here; true when this replica is to run it. Rejects never. */
  async claim(cluster: string): Promise<boolean> {
    const shards = this.p.shards();
    if (!shards || !this.pending.delete(cluster)) return false;
    if (Date.now() > this.until) {
      this.pending.clear(); // ownership settled long ago: a takeover now is a takeover, not a start
      return false;
    }
    try {
      return await shards.claimStartupPoll(cluster);
    } catch (err) {
      this.p.logger.warn({ err, cluster }, 'claiming the start-up poll in the store failed; polling anyway');
      return true;
    }
  }

  /**
   * Each pending cluster's start-up poll, after a random jitter (as the scheduler's own start-up run), by this replica
   * if it owns the cluster then and claims the poll; a cluster it takes over later is claimed at the takeover.
   */
  start(ownership: Ownership): void {
    const { scheduler } = this;
    for (const cluster of this.pending) {
      const t = setTimeout(() => {
        this.timers.delete(t);
        if (this.p.stopping() || !ownership.owns(cluster)) return;
        void this.claim(cluster).then((claimed) => {
          if (claimed && !this.p.stopping()) scheduler.runNow(cluster);
        });
      }, scheduler.jitterMs > 0 ? Math.floor(Math.random() * scheduler.jitterMs) : 0);
      this.timers.add(t);
    }
  }

  /** Cancels the start-up polls not started yet. */
  cancel(): void {
    for (const t of this.timers) clearTimeout(t);
  }
}

/**
 * Step 4, with sharding: the shard coordinator. A cluster this replica takes over is polled at once for its latest due
 * tick unless that tick is accounted for (a replica polled it, or recorded it missed), or it came before this process
 * started and a poll that started after it has finished (the previous owner ran it). A poll the previous owner left
 * unfinished (killed) is run again; it reads on from the last committed chunk. When this replica claims the cluster's
 * start-up poll, it polls now in any case (for the latest tick when that is not accounted for).
 */
function createShards(p: Parts, sharding: Sharding, scheduler: Scheduler, startup: StartupPolls, o: { since: number; scheduling: () => boolean }): ShardCoordinator {
  const { store, logger, metrics, config } = p;
  /** Whether `tick` of `cluster` needs no poll from a replica taking it over (see `catchUp`). */
  const tickAccounted = async (cluster: string, tick: number): Promise<boolean> => {
    const seen = await store.polls.ticks(cluster, tick);
    if (seen.polled.includes(tick) || seen.missed.some((m) => m.scheduledAt === tick)) return true;
    const [last] = await store.polls.lastRuns(cluster);
    return tick < o.since && last !== undefined && last.endedAt !== null && last.startedAt >= tick;
  };
  const catchUp = async (cluster: string, claimed: boolean): Promise<void> => {
    let tick = scheduler.previousTick(cluster);
    if (tick !== undefined && (await tickAccounted(cluster, tick))) {
      if (!claimed) return;
      tick = undefined;
    }
    logger.info({ cluster, ...(tick !== undefined ? { tick: new Date(tick).toISOString() } : {}), startup: claimed }, claimed ? 'start-up poll of a cluster (claimed for this replica in the store)' : 'polling a cluster taken over now: its latest scheduled poll did not complete');
    scheduler.runNow(cluster, tick);
  };
  return new ShardCoordinator({
    ...sharding,
    db: sharding.db ?? store.sql,
    clusters: config.clusters.map((c) => c.name),
    busy: (cluster) => scheduler.isBusy(cluster) || p.integrations.started.some((i) => i.busy?.(cluster) === true),
    logger: logger.child({ component: 'shards' }),
    metrics,
    onAcquired: (cluster) => {
      if (o.scheduling()) void startup.claim(cluster).then((claimed) => catchUp(cluster, claimed)).catch((err: unknown) => logger.error({ err, cluster }, 'polling a cluster taken over failed'));
    },
    onLost: (cluster) => {
      if (scheduler.abort(cluster, new ClusterNotOwnedError(cluster))) logger.warn({ cluster }, 'aborted the running poll of a cluster this replica no longer owns');
    },
  });
}

/**
 * Step 5 with shards: every cluster's latest poll run in the shared store, re-read every {@link SHARED_POLLS_BEATS}
 * heartbeats once started, so /readyz shows the clusters other replicas poll by their owner's last poll, not as
 * pending. Returns the last read, and what starts and stops the re-reading.
 */
function sharedPollsReader(store: Store): { current: () => Map<string, PollStatus>; start: (sh: ShardCoordinator) => Promise<void>; stop: () => void } {
  let polls = new Map<string, PollStatus>();
  let timer: NodeJS.Timeout | undefined;
  const read = async (): Promise<void> => {
    try {
      polls = new Map((await store.polls.lastRuns()).map((r) => [r.cluster, r]));
    } catch {
      // The store is unavailable: the heartbeat says so (/readyz `store-unavailable`); keep what was last read.
    }
  };
  return {
    current: () => polls,
    start: async (sh) => {
      await read();
      timer = setInterval(() => void read(), SHARED_POLLS_BEATS * sh.heartbeatMs);
      timer.unref();
    },
    stop: () => clearInterval(timer),
  };
}

/**
 * Step 7. The polls: each cluster's job on the scheduler. With shards, a poll runs only at the epoch this replica owns
 * the cluster at (every commit of it checks it: `pollEpochs`, the fence), after the earlier ticks are accounted for.
 * Resolves the returned promise once every cluster's first poll has finished.
 */
function schedulePolls(p: Parts, scheduler: Scheduler, unrecorded: UnrecordedTicks, pollEpochs: Map<string, number>, checkTicks: (cluster: string, tick: number) => Promise<boolean>): Promise<void> {
  const { config, clusters, metrics, logger } = p;
  const firstDone = new Map<string, () => void>();
  const firstPolls = Promise.all(config.clusters.map((c) => new Promise<void>((resolve) => firstDone.set(c.name, resolve)))).then(() => undefined);
  const runOf = (rt: ClusterRuntime) => async (signal: AbortSignal, tick: number | undefined) => {
    const shards = p.shards();
    if (shards) {
      // The epoch this poll runs at: every commit of it checks it (fence); none when the cluster was lost meanwhile.
      const epoch = shards.owns(rt.config.name) ? shards.epochOf(rt.config.name) : undefined;
      if (epoch === undefined) return;
      pollEpochs.set(rt.config.name, epoch);
      if (tick !== undefined) {
        // Ticks kept from a store outage first, with their own reason, before the check records gaps as unowned.
        if (unrecorded.size > 0) await unrecorded.flush();
        const run = await checkTicks(rt.config.name, tick).catch((err: unknown) => {
          logger.warn({ err, cluster: rt.config.name }, 'checking the earlier scheduled polls in the store failed; polling anyway');
          return true;
        });
        if (!run) return;
      }
    }
    const outcome = await rt.poller.pollOnce(signal, { scheduledAt: tick });
    if (tick !== undefined && outcome.storeUnavailable) {
      // Neither a finished poll run nor a missed record could be written: counted now, recorded once the store answers.
      metrics.pollsMissed.inc({ cluster: rt.config.name, reason: 'store-unavailable' });
      rt.poller.recordMissed(tick, 'store-unavailable');
      unrecorded.add(rt.config.name, tick);
    } else if (outcome.error === undefined && unrecorded.size > 0) void unrecorded.flush();
    firstDone.get(rt.config.name)?.();
  };
  scheduler.start([...clusters.values()].map((rt) => ({ name: rt.config.name, schedule: rt.config.schedule, run: runOf(rt) })));
  return firstPolls;
}

/**
 * Builds and starts `tokenwatch serve` (see the module docstring); resolves once the listener is up and the schedule
 * runs.
 * @throws when the store cannot be opened, another process polls it (`PollerLockError`, `poller-lock.ts`), an audit
 *   webhook or the health port cannot bind (`EADDRINUSE`); what was started is stopped first.
 */
export async function composeServe(config: Config, opts: ServeOptions = {}): Promise<ServeHandle> {
  const logger = opts.logger ?? createLogger({ level: config.log.level });
  const metrics = opts.metrics ?? new Metrics({ defaultMetrics: true });
  const clock = opts.clock ?? Date.now;
  const undo: Array<() => unknown> = []; // what to take down, last first, when a later step fails

  try {
    // 1. Ownership (see shardingOf).
    const sharding = shardingOf(config, opts);
    // 2. The store; unless ownership is given or shared out, this process must be its only poller (the poller lock).
    const { store, lock } = await openPollingStore(config, { lockFree: opts.ownership !== undefined || sharding !== undefined, logger, metrics, pollerLock: opts.pollerLock });
    undo.push(() => store.close(), () => lock?.release());
    // Clusters shared out across replicas: this replica polls and remediates the clusters it owns (shard-coordinator.ts);
    // built in step 4, once the scheduler exists, before any poll runs.
    let shards: ShardCoordinator | undefined;
    // Ownership (src/core/ownership.ts): the clusters this replica owns when shared out, else all while it holds the lock.
    const whileLocked = ownershipWhile(() => lock?.held() ?? true);
    const ownership: Ownership = opts.ownership ?? {
      owns: (cluster) => (shards ? shards.owns(cluster) : whileLocked.owns(cluster)),
      ownsAny: () => (shards ? shards.owned().length > 0 : whileLocked.ownsAny()),
    };
    // A poll commits only while this replica owns its cluster at the epoch the poll started with (the fence).
    const pollEpochs = new Map<string, number>();
    const fence = async (cluster: string, tx: Store): Promise<void> => {
      const epoch = pollEpochs.get(cluster);
      if (!shards || epoch === undefined) throw new ClusterNotOwnedError(cluster);
      await shards.fence(tx.sql, cluster, epoch);
    };
    let phase: 'starting' | 'ready' | 'stopping' = 'starting';
    const stopping = () => phase === 'stopping';
    const clusters = new Map<string, ClusterRuntime>();
    // Step 6's verifier of approved actions, reporting through the integration that started them.
    const integrationDeps: IntegrationDeps = {
      logger,
      retryBaseMs: opts.integrationRetryMs ?? 15_000,
      stopping,
      clock,
      verifierFor: (reporter) => new Verifier({ store, clock, settleMs: config.remediation.settlePeriod, logger: logger.child({ component: 'verify' }), probeReports: (cluster) => clusters.get(cluster)?.probe?.read(), ...reporter }),
    };
    const integrations = integrationSet();
    const parts: Parts = { config, opts, logger, metrics, clock, store, sharding, clusters, integrations, integrationDeps, stopping, shards: () => shards, undo };

    // 3. Per cluster, in flow order: audit source, cluster state, remediator, monitors, poller.
    const closeClusters = await buildClusters(parts, fence);

    // 4. The scheduler (started in step 7).
    // Ticks whose poll failed while the store was unavailable (or whose missed record it refused), written once it answers.
    const unrecorded = new UnrecordedTicks({ store, logger, replica: () => shards?.id, clock, retryMs: sharding?.heartbeatMs ?? UNRECORDED_RETRY_MS });
    undo.push(() => unrecorded.stop());
    // With replicas, each cluster's start-up poll is claimed in the store (StartupPolls), not run by every replica's scheduler.
    const scheduler = createScheduler(config, opts, { clusters, shouldRun: (job) => ownership.owns(job), metrics, logger, store, replica: () => shards?.id, clock, runAtStart: !sharding, onUnrecorded: (job, tick, reason) => unrecorded.add(job, tick, reason) });
    let scheduling = false;
    /** When this process started scheduling, epoch ms (node-cron's clock): ticks before it are no business of its gap check. */
    const schedulingSince = Date.now();
    const startup = new StartupPolls(parts, scheduler);
    if (sharding) shards = createShards(parts, sharding, scheduler, startup, { since: schedulingSince, scheduling: () => scheduling });
    const owners = shards;
    const context: ServeContext = {
      ...{ config, store, logger, metrics, clusters, scheduler, clock, ownership },
      runNow: (cluster) => scheduler.runNow(cluster),
      ...(owners ? { shards: owners, ownerOf: (cluster: string) => owners.status().owners[cluster] ?? null } : {}),
    };
    if (!opts.ownership && !shards) metrics.leader.set(1);

    // 5. The health/metrics listener, then the audit webhook listeners (src/sources/webhook.ts): one that cannot bind stops serve.
    const sharedPolls = sharedPollsReader(store);
    const states = { running: () => integrations.started, states: () => integrationStates(integrations) };
    const readiness = () => readinessOf({ phase, clusters, integrations: states, now: clock(), shards, sharedPolls: sharedPolls.current(), storeFailure: store.sql.failure?.() });
    const server: HealthServer = await startHealthServer(config.http, { readiness, metrics, logger });
    undo.push(() => server.close());
    for (const rt of clusters.values()) if (rt.source.start) rt.webhookPort = await rt.source.start();

    // 6. The integrations (Slack: its parts in build-slack.ts), each with its verifier.
    let slack: SlackIntegration | undefined;
    const starters = opts.integrations ?? (config.slack?.enabled ? [async (ctx: ServeContext) => (slack = await (await import('./build-slack.js')).startSlackWith(ctx, opts.slack))] : []);
    const nameOf = (i: number) => opts.integrationNames?.[i] ?? (i === 0 ? 'slack' : `integration-${i}`);
    // Ownership first, so the integrations' start (resuming approved actions, posting pending alerts) sees it.
    if (shards) {
      const sh = shards;
      await sh.start();
      undo.push(() => sh.stop());
      await sharedPolls.start(sh);
      undo.push(() => sharedPolls.stop());
    }
    for (const [i, start] of starters.entries()) await startIntegration(integrations, integrationDeps, start, nameOf(i), context);
    context.integrationErrors = integrations.errors;

    // 7. The polls.
    const firstPolls = schedulePolls(parts, scheduler, unrecorded, pollEpochs, tickChecker(parts, scheduler, schedulingSince));
    scheduling = true;
    startup.start(ownership);
    undo.push(() => startup.cancel());
    phase = 'ready';
    logger.info({ port: server.port, ...(shards ? { replica: shards.id, owned: shards.owned() } : {}), clusters: [...clusters.keys()], slack: integrations.started.map((i) => i.name) }, 'tokenwatch serve started');

    let stopped: Promise<void> | undefined;
    const stop = () =>
      (stopped ??= (async () => {
        phase = 'stopping';
        startup.cancel();
        cancelRetries(integrations);
        logger.info('stopping: no new polls, aborting running ones');
        await scheduler.stop();
        unrecorded.stop();
        await stopIntegrations(integrations, logger);
        closeClusters();
        sharedPolls.stop();
        await shards?.stop(); // hands its clusters over: the others take them at their next heartbeat
        await server.close();
        await lock?.release();
        await store.close();
        logger.info('stopped');
      })());

    return { port: server.port, context, firstPolls, readiness, integrationStarted: (name) => whenStarted(integrations, name), slack: () => slack, stop };
  } catch (err) {
    for (const step of undo.reverse()) await (async () => step())().catch(() => undefined); // a failing step does not stop the others
    throw err;
  }
}
