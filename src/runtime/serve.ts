/**
 * The parts of `tokenwatch serve` that `composeServe` (`compose.ts`) puts together: opening the store for polling (the
 * poller lock), the CloudWatch budgets every cluster shares, the blind-log gauge and the scheduler. Serve's options,
 * context and handle are in `serve-options.ts`, its integrations (Slack) in `integrations.ts`, `/readyz` and the
 * health/metrics listener in `health-server.ts`.
 *
 * Lifecycle (docs/design/architecture.md "How serve is put together"): `composeServe` resolves once the store is
 * open, the HTTP listener is up and the schedule is running (first polls start within the jitter).
 * `ServeHandle.stop` (SIGTERM) stops new polls, aborts running ones (a hung cluster does not hold up shutdown)
 * and waits for them to settle, stops Slack, closes the listener and the store, then releases the poller lock.
 */
import type { Config } from '../config/types.js';
import type { BucketStateStore } from '../core/token-bucket.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { FleetInsightsRegistry } from '../sources/index.js';
import { CloudWatchRateLimiter } from '../sources/rate-limit.js';
import { openConfiguredStore, type Store } from '../store/index.js';
import { isStoreUnavailable } from '../store/unavailable.js';
import { BLIND_REASONS } from './blind.js';
import type { ClusterRuntime } from './build-cluster.js';
import { acquirePollerLock, type PollerLock, type PollerLockError } from './poller-lock.js';
import type { ServeOptions } from './serve-options.js';
import { Scheduler } from './scheduler.js';
import { budgetStoreError } from './budgets.js';

/** The store, and the poller lock this process holds on it unless ownership is given or shared out. */
export interface PollingStore {
  store: Store;
  lock?: PollerLock;
}

/**
 * Opens the store (`config.store`: the SQLite file `path`, or `postgres`); unless `lockFree` takes its poller lock: this process must be the only
 * one polling it (docs/design/architecture.md "Live mode").
 * @throws when the store cannot be opened, or {@link PollerLockError} when another live process polls it (the store
 *   is closed again)
 */
export async function openPollingStore(config: Config, opts: Pick<ServeOptions, 'pollerLock'> & { lockFree: boolean; logger: Logger; metrics: Metrics }): Promise<PollingStore> {
  const store = await openConfiguredStore(config.store);
  if (opts.lockFree) return { store };
  try {
    // Wall-clock time by default, not the service clock: the sandbox runs serve on a faster simulated clock.
    const lock = await acquirePollerLock({ store, clock: Date.now, logger: opts.logger, onLost: () => opts.metrics.leader.set(0), ...opts.pollerLock });
    return { store, lock };
  } catch (err) {
    await store.close();
    throw err;
  }
}

/** What every cluster of this deployment shares of CloudWatch Logs. */
export interface SharedCloudWatch {
  /** One CloudWatch Logs budget per account and Region (src/sources/rate-limit.ts). */
  rateLimiter: CloudWatchRateLimiter;
  /** Fleet Logs Insights queries of insights-mode clusters, when `poll.cloudwatchFleetInsights` is enabled. */
  fleetInsights: FleetInsightsRegistry;
}

/**
 * Builds the {@link SharedCloudWatch} of `config.poll`, counting throttles and Insights queries in `metrics`. With
 * `shared` (the PostgreSQL store's `rate_buckets`, src/store/rate-buckets.ts), every replica takes its CloudWatch
 * tokens from the same bucket per account, Region and operation, on the wall clock (epoch ms); without it the budget
 * is this process's.
 */
export function sharedCloudWatch(config: Config, metrics: Metrics, shared?: { buckets: BucketStateStore; logger: Logger }): SharedCloudWatch {
  const rateLimiter = new CloudWatchRateLimiter({
    tps: config.poll.cloudwatchTps,
    ...(shared && { store: shared.buckets, clock: Date.now, onStoreError: budgetStoreError('cloudwatch', metrics, shared.logger) }),
    onThrottle: (key, rate) => {
      const [account = '', region = '', operation = ''] = key.split('/');
      metrics.cloudwatchThrottled.inc({ account, region, operation });
      metrics.cloudwatchRate.set({ account, region, operation }, rate);
    },
  });
  const fleetInsights = new FleetInsightsRegistry(config.poll.cloudwatchFleetInsights, (q) => {
    metrics.cloudwatchInsightsQueries.inc({ region: q.region });
    metrics.cloudwatchInsightsBytes.inc({ region: q.region }, q.bytesScanned);
  });
  return { rateLimiter, fleetInsights };
}

/** Sets the `tokenwatch_audit_log_blind` gauge of `rt`'s cluster: 1 for its current reason, 0 for the others. */
export function updateBlindGauge(metrics: Metrics, rt: ClusterRuntime, now: number): void {
  const b = rt.blind.state(now);
  for (const reason of BLIND_REASONS) metrics.auditLogBlind.set({ cluster: rt.config.name, reason }, b.blind && b.reason === reason ? 1 : 0);
}

/**
 * The scheduler of the clusters' polls (`scheduler.ts`): jitter, spread and concurrency from `config.poll` unless
 * overridden, gated by `shouldRun` (ownership), missed and late ticks counted, logged, recorded by the poller and, when
 * `store` is given, in the store (`Store.polls.recordMissed`, with the replica id `replica()` returns). `runAtStart`
 * false: no start-up run of its own (with replicas, compose.ts claims each cluster's start-up poll in the store).
 */
export function createScheduler(
  config: Config,
  opts: Pick<ServeOptions, 'jitterMs' | 'spread'>,
  deps: {
    clusters: ReadonlyMap<string, ClusterRuntime>;
    shouldRun: (job: string) => boolean;
    metrics: Metrics;
    logger: Logger;
    store?: Store;
    replica?: () => string | undefined;
    clock?: () => number;
    runAtStart?: boolean;
    /** Told of a missed tick whose record the store refused for being unavailable (kept for a record later). */
    onUnrecorded?: (job: string, tick: number, reason: string) => void;
  },
): Scheduler {
  const { clusters, metrics, logger, store } = deps;
  return new Scheduler({
    ...(deps.runAtStart !== undefined && { runAtStart: deps.runAtStart }),
    jitterMs: opts.jitterMs ?? config.poll.jitter,
    spread: opts.spread ?? config.poll.spread,
    concurrency: config.poll.concurrency,
    shouldRun: deps.shouldRun,
    onOverlap: (job) => metrics.polls.inc({ cluster: job, outcome: 'skipped-overlap' }),
    onMissed: (job, tick) => {
      metrics.pollsMissed.inc({ cluster: job, reason: tick.reason });
      clusters.get(job)?.poller.recordMissed(tick.dueAt, tick.reason);
      const why = tick.reason === 'overlap' ? 'the previous poll of this cluster is still running' : 'folded into a late poll of this cluster that is still running';
      logger.warn({ cluster: job, dueAt: new Date(tick.dueAt).toISOString(), reason: tick.reason }, `scheduled poll missed: ${why}`);
      const replica = deps.replica?.();
      void store
        ?.polls.recordMissed({ cluster: job, scheduledAt: tick.dueAt, reason: tick.reason, ...(replica ? { replica } : {}), recordedAt: (deps.clock ?? Date.now)() })
        .catch((err: unknown) => {
          logger.warn({ err, cluster: job }, 'recording a missed scheduled poll in the store failed');
          if (isStoreUnavailable(err)) deps.onUnrecorded?.(job, tick.dueAt, tick.reason);
        });
    },
    onLate: (job, tick) => {
      metrics.pollsLate.inc({ cluster: job });
      logger.warn({ cluster: job, dueAt: new Date(tick.dueAt).toISOString(), lateMs: tick.lateMs }, 'scheduled poll ran late: its timer fired late (event loop busy)');
    },
    onError: (job, err) => logger.error({ err, cluster: job }, 'poll job failed'),
  });
}

