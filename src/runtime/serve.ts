/**
 * The parts of `tokenwatch serve` that `composeServe` (`compose.ts`) puts together, and the types of its
 * handle: opening the store for polling (the poller lock), the CloudWatch budgets every cluster shares, the scheduler,
 * the integrations (Slack) with their start retries and verifiers, the one sequence that follows a poll (alerts, then
 * verification), `/readyz`, and the health/metrics HTTP listener (`/healthz`, `/readyz`, `/metrics`).
 *
 * Lifecycle (docs/design/architecture.md "How serve is put together"): `composeServe` resolves once the store is
 * open, the HTTP listener is up and the schedule is running (first polls start within the jitter).
 * {@link ServeHandle.stop} (SIGTERM) stops new polls, aborts running ones (a hung cluster does not hold up shutdown)
 * and waits for them to settle, stops Slack, closes the listener and the store, then releases the Lease.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from '../config/types.js';
import type { BucketStateStore } from '../core/token-bucket.js';
import { backoffDelay } from '../core/backoff.js';
import type { Ownership } from '../core/ownership.js';
import type { Finding } from '../findings/types.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { Verifier } from '../remediation/verify.js';
import type { Integration, RunNowResult, SlackContext } from '../slack/context.js';
import type { SlackOptions } from '../slack/app.js';
import { FleetInsightsRegistry } from '../sources/index.js';
import { CloudWatchRateLimiter } from '../sources/rate-limit.js';
import type { CloudLoggingRegistryOptions } from '../sources/cloud-logging.js';
import { openConfiguredStore, type PollStatus, type Store } from '../store/index.js';
import { isStoreUnavailable } from '../store/unavailable.js';
import { BLIND_REASONS, type BlindReason } from './blind.js';
import { IntegrationHealth } from './health.js';
import { clusterAccessTexts, clusterVerdict, type Access, type AccessState } from '../observability/health.js';
import type { ClusterRuntime } from './build-cluster.js';
import type { SlackIntegration } from './build-slack.js';
import { acquirePollerLock, type PollerLock, type PollerLockError, type PollerLockOptions } from './poller-lock.js';
import type { ShardCoordinator, ShardCoordinatorOptions } from './shard-coordinator.js';
import type { PollOutcome } from '../pipeline/poll.js';
import { Scheduler } from './scheduler.js';
import { budgetStoreError } from './budgets.js';

/** What an integration (Slack) gets from serve; it satisfies the Slack integration's own {@link SlackContext}. */
export interface ServeContext extends SlackContext {
  config: Config;
  store: Store;
  logger: Logger;
  metrics: Metrics;
  clusters: Map<string, ClusterRuntime>;
  scheduler: Scheduler;
  clock: () => number;
  /** Starts a poll of `cluster` now through the scheduler (`/tokens scan`). */
  runNow(cluster: string): RunNowResult;
  /**
   * Which clusters this process polls and executes approved actions for: every cluster while it holds the SQLite
   * store's poller lock, or with clusters shared out across replicas (PostgreSQL) the clusters it owns.
   */
  ownership: Ownership;
  /** Cluster ownership, when clusters are shared out across replicas ({@link ServeOptions.sharding}). */
  shards?: ShardCoordinator;
  /** Why integrations (Slack) failed to start, if any did; serve runs on without them. */
  integrationErrors?: string[];
}

/**
 * The body of `/readyz` (JSON), the health model's view (src/observability/health.ts; docs/live-mode.md "Health"):
 * - `status`: `ready` | `starting` | `stopping` | `store-unavailable`;
 * - `serves`: what this pod serves now — `slack` (an integration started: commands, buttons, alerts), `audit-webhook`
 *   (an audit webhook listener is up), `polls` (a cluster's audit source is not failing). The HTTP status is 503
 *   only while starting or stopping or when `serves` is empty, 200 otherwise ({@link readyzCode}): an unready pod
 *   leaves the Service, and the audit webhook shares it, so a Slack or store problem must not cost audit batches;
 * - `access`: per cluster, each access its poll needs (`audit`, `kubernetes`, `watchCache`, `slack`) in words:
 *   `… : ok`, or the failure with its start time (`Kubernetes API unreachable: connect ECONNREFUSED …, since 09:12
 *   UTC`), `pending`, `not used`. Scrubbed of secrets;
 * - `polls`: per cluster, `ok` | `degraded` | `pending`: `degraded` when any access of the cluster fails (a failed
 *   poll; a poll running longer than 3 × `poll.requestTimeout`; an unreachable or refusing Kubernetes API; a broken
 *   watch cache; Slack down) — a cluster whose access fails is never `ok`;
 * - `integrations`: per integration (`slack`), `ok` | `connected` | `disconnected` | `unavailable` (not reachable at
 *   start, retrying) | `failed` (could not start; `access` says why);
 * - `blind`: per cluster whose audit log cannot see stale tokens, the reason (a blind log never makes a pod unready).
 * The same states show in `/tokens status`, the Home tab and the `tokenwatch_access_failing` metric.
 */
export interface ReadinessBody {
  /**
   * `store-unavailable`: the shared store (PostgreSQL) cannot be reached; this replica polls nothing until it can, and
   * still answers Slack (saying so), so it stays in the Service (HTTP 200). Also when the SQLite store's worker thread
   * stopped (src/store/sqlite.ts): nothing is stored until a restart.
   */
  status: 'ready' | 'starting' | 'stopping' | 'store-unavailable';
  /** What the pod serves now; empty: nothing (HTTP 503). */
  serves: Array<'slack' | 'audit-webhook' | 'polls'>;
  polls: Record<string, 'ok' | 'degraded' | 'pending'>;
  /** Per cluster, per access (`audit`, `kubernetes`, `watchCache`, `slack`), its state in words. */
  access: Record<string, Record<Access, string>>;
  integrations: Record<string, string>;
  /**
   * Clusters whose audit log is blind (src/runtime/blind.ts), with the reason ({@link BLIND_REASONS}: e.g.
   * `eks-audit-log-off`, `no-read-access`, `aks-admin-only`, `no-events-for-polls`). Clusters that are not blind are absent.
   */
  blind: Record<string, BlindReason>;
  /**
   * With clusters shared out across replicas only: this replica's id; per cluster, the id of the replica that owns it
   * as last read (null: none right now; taken over within the ownership TTL); and per cluster its latest poll run in
   * the shared store, whichever replica ran it (`startedAt` ISO 8601 UTC; `status` `ok`, `degraded` (it failed) or
   * `running`), re-read every 6 heartbeats (30 s by default). A cluster another replica owns shows in `polls` from that shared run, not
   * as `pending`.
   */
  shards?: { replica: string; owners: Record<string, string | null>; lastPolls: Record<string, SharedPoll> };
}

/** A cluster's latest poll run in the shared store, as `/readyz` shows it (see {@link ReadinessBody.shards}). */
export interface SharedPoll {
  startedAt: string;
  status: 'ok' | 'degraded' | 'running';
}

/**
 * Options of `composeServe` (`compose.ts`): the CLI passes `env`, `logger` and `metrics`; the sandbox, the bench and the tests
 * substitute the rest (a clock, no jitter, Slack tuning, their own integrations).
 */
export interface ServeOptions {
  /**
   * The process environment: with clusters shared out across replicas, `POD_NAME` is the base of the replica id.
   * Default none.
   */
  env?: NodeJS.ProcessEnv;
  logger?: Logger;
  metrics?: Metrics;
  /** Clock, epoch ms. Default `Date.now`. */
  clock?: () => number;
  /** Scheduler jitter, ms; overrides `config.poll.jitter` (default 10 s; tests use 0). */
  jitterMs?: number;
  /** Whether scheduled polls start at each cluster's stable offset; overrides `config.poll.spread` (tests of tick timing use false). */
  spread?: boolean;
  /**
   * How long a poll may run, ms of `clock`, before the cluster shows degraded as slow (default 3 × `poll.requestTimeout`).
   * The sandbox, whose clock runs faster than real time, scales it by its speed.
   */
  slowPollAfterMs?: number;
  /**
   * How many clusters' watch caches start at once and the longest turn of one, ms (default 16 and 10,000; tests use
   * smaller ones).
   */
  watchStart?: { concurrency?: number; turnMs?: number };
  /**
   * Starts integrations (Slack) once pollers exist, replacing the default: Slack (`build-slack.ts`, tuned by
   * {@link slack}) when `config.slack.enabled`. An empty list runs without integrations.
   */
  integrations?: ((ctx: ServeContext) => Promise<Integration>)[];
  /** Tuning of the default Slack integration (intervals, listen host, timeouts; `src/slack/app.ts` `SlackOptions`). */
  slack?: SlackOptions;
  /**
   * Which clusters this process owns, replacing the store's poller lock (tests running two processes on one store).
   * Without it and without sharding this process takes the store's poller lock (`poller-lock.ts`) and owns every
   * cluster while it holds it; start fails with a {@link PollerLockError} when another live process holds it.
   */
  ownership?: Ownership;
  /** Poller-lock clock (default `Date.now`, not `clock`), timing and identity (tests); see {@link PollerLockOptions}. */
  pollerLock?: Pick<PollerLockOptions, 'clock' | 'staleAfterMs' | 'heartbeatMs' | 'host' | 'pid' | 'isRunning'>;
  /**
   * Clusters shared out across replicas (docs/design/architecture.md "Clusters shared out across replicas"): the
   * replica id's base (default the host name), the heartbeat timing, and the executor of the ownership rows (default
   * the store's own; `composeServe` turns this on with a PostgreSQL store). Each replica polls and remediates only the clusters it owns;
   * no poller lock is taken. Default: off (one replica polls everything, the SQLite store).
   */
  sharding?: Partial<Pick<ShardCoordinatorOptions, 'db' | 'name' | 'clock' | 'heartbeatMs' | 'ttlMs'>>;
  /**
   * First delay before retrying an integration that was unavailable at start, ms (default 15,000); it doubles after
   * each failed attempt, up to 5 minutes.
   */
  integrationRetryMs?: number;
  /** Names of the integrations in `integrations`, for `/readyz` (default `slack`, then `integration-<i>`). */
  integrationNames?: string[];
  /** Cloud Logging (GKE) source options the config does not carry (tests: fast retries). */
  gcpLogging?: Partial<CloudLoggingRegistryOptions>;
}

/** A running service. */
export interface ServeHandle {
  /** Port of the health/metrics listener. */
  port: number;
  context: ServeContext;
  /** Resolves when every cluster's first poll has finished (tests, sandbox). */
  firstPolls: Promise<void>;
  /** The `/readyz` body now. */
  readiness(): ReadinessBody;
  /** Resolves when a retried integration has started (tests); rejects never. */
  integrationStarted(name: string): Promise<void>;
  /** The default Slack integration once it has started (sandbox, bench); undefined with `integrations` given. */
  slack(): SlackIntegration | undefined;
  /** Graceful stop: in-flight polls finish first, then integrations, listener and store. Idempotent. */
  stop(): Promise<void>;
}

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

/** What {@link Integrations} needs. */
export interface IntegrationsDeps {
  logger: Logger;
  /** First retry delay of an integration unavailable at start, ms; doubles per failed attempt, up to 5 minutes. */
  retryBaseMs: number;
  /** Builds the verifier of approved actions that reports through an integration's `verificationReporter`. */
  verifierFor(reporter: NonNullable<Integration['verificationReporter']>): Verifier;
  /** Whether serve is stopping: nothing starts and no verification runs any more. */
  stopping(): boolean;
  /** Clock of the health model's failure times, epoch ms (default `Date.now`). */
  clock?: () => number;
}

/**
 * The integrations (Slack) of serve: started with retry, each with the verifier of the actions approved through it,
 * alerted and then verified after each poll, stopped in reverse order.
 *
 * An integration that cannot start must not take polling down with it, or a Deployment would crash-loop: serve keeps
 * polling and storing findings. A rejected token (final) is logged once and shown as `failed` on /readyz until serve
 * restarts; an unreachable service (`IntegrationUnavailableError`, `retryable: true`) is retried in the background
 * with backoff, shown as `unavailable` meanwhile; alerts found in between are posted once it starts.
 */
export class Integrations {
  private readonly started: Integration[] = [];
  private readonly verifiers = new Map<Integration, Verifier>();
  /** `unavailable` / `failed` by starter name, until it starts. */
  private readonly pending = new Map<string, string>();
  /** Why integrations failed to start (final), for `/tokens status`. */
  readonly errors: string[] = [];
  private readonly retryTimers = new Set<NodeJS.Timeout>();
  private readonly waiters = new Map<string, Array<() => void>>();
  /** Each integration's state for the health model, by starter name. */
  private readonly health = new IntegrationHealth();
  /** Starter names tried so far, and the integration each started as. */
  private readonly byName = new Map<string, Integration | undefined>();

  constructor(private readonly deps: IntegrationsDeps) {}

  private now(): number {
    return (this.deps.clock ?? Date.now)();
  }

  /** Starts one integration (attempt `tries`); a retryable failure schedules the next attempt. Rejects never. */
  async start(start: (ctx: ServeContext) => Promise<Integration>, name: string, context: ServeContext, tries = 1): Promise<void> {
    const { logger } = this.deps;
    if (this.deps.stopping()) return;
    try {
      const integration = await start(context);
      if (this.deps.stopping()) {
        await integration.stop().catch(() => undefined);
        return;
      }
      if (integration.verificationReporter) this.verifiers.set(integration, this.deps.verifierFor(integration.verificationReporter));
      this.started.push(integration);
      this.byName.set(name, integration);
      this.health.started(name, this.now());
      this.pending.delete(integration.name);
      this.pending.delete(name);
      if (tries > 1) logger.info({ integration: name, attempts: tries }, `${name} is reachable again: integration started`);
      for (const w of this.waiters.get(name) ?? []) w();
      this.waiters.delete(name);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      const retryable = (err as { retryable?: unknown }).retryable === true;
      if (!this.byName.has(name)) this.byName.set(name, undefined);
      this.health.startFailed(name, message, !retryable, this.now());
      if (retryable) {
        const delay = backoffDelay(this.deps.retryBaseMs, tries - 1, 300_000);
        this.pending.set(name, 'unavailable');
        logger.error({ err, integration: name, attempt: tries, retryInSeconds: Math.round(delay / 1000) }, `${message} (attempt ${tries}; retrying in ${Math.round(delay / 1000)} s)`);
        const t = setTimeout(() => {
          this.retryTimers.delete(t);
          void this.start(start, name, context, tries + 1);
        }, delay);
        t.unref();
        this.retryTimers.add(t);
        return;
      }
      this.pending.set(name, 'failed');
      this.errors.push(message);
      logger.error({ err, integration: name }, `integration could not start, running without it (polling and the store go on): ${message}`);
    }
  }

  /** The integrations started so far, in start order. */
  running(): readonly Integration[] {
    return [...this.started];
  }

  /** Each of `integrations` alerts on the poll, in turn (Slack queues its alerts' posts and edits); a failure is logged. */
  async alert(integrations: readonly Integration[], rt: ClusterRuntime, findings: Finding[], outcome: PollOutcome): Promise<void> {
    for (const i of integrations) {
      if (!i.afterPoll) continue;
      try {
        await i.afterPoll(rt, findings, outcome);
      } catch (err) {
        this.deps.logger.error({ err, cluster: rt.config.name, integration: i.name }, 'alerting after a poll failed');
      }
    }
  }

  /**
   * The verifier of each of `integrations` concludes `cluster`'s approved actions (resolved / recurrence / persisting,
   * the node probe's check) and replies in the alerts' threads; skipped while stopping; a failure is logged.
   */
  async verify(integrations: readonly Integration[], cluster: string): Promise<void> {
    for (const i of integrations) {
      const verifier = this.verifiers.get(i);
      if (!verifier || this.deps.stopping()) continue;
      try {
        await verifier.verifyCluster(cluster);
      } catch (err) {
        this.deps.logger.error({ err, cluster, integration: i.name }, 'verification after a poll failed');
      }
    }
  }

  /** `/readyz` states: `unavailable` / `failed` of those not started, then each started one's `state()` (`ok`). */
  states(): Record<string, string> {
    const states: Record<string, string> = Object.fromEntries(this.pending);
    for (const i of this.started) states[i.name] = i.state?.() ?? 'ok';
    return states;
  }

  /**
   * Slack's access for `cluster` in the health model at `now`: the worst state of the integrations tried (a failed
   * start, a dropped connection, the cluster's channel refusing posts), `off` when none is configured.
   */
  accessOf(cluster: string, now: number): AccessState {
    if (this.byName.size === 0) return { state: 'off', detail: 'Slack not enabled' };
    const states = [...this.byName].map(([name, running]) => this.health.of(name, now, running, cluster));
    return states.find((s) => s.state === 'failing') ?? states.find((s) => s.state === 'pending') ?? states[0]!;
  }

  /** Resolves when the integration `name` has started (tests); rejects never. */
  whenStarted(name: string): Promise<void> {
    if (this.started.some((i) => i.name === name)) return Promise.resolve();
    return new Promise<void>((resolve) => this.waiters.set(name, [...(this.waiters.get(name) ?? []), resolve]));
  }

  /** No more start retries. */
  cancelRetries(): void {
    for (const t of this.retryTimers) clearTimeout(t);
    this.retryTimers.clear();
  }

  /** Stops the started integrations, last started first; a failure is logged. */
  async stop(): Promise<void> {
    for (const i of this.started.reverse()) {
      try {
        await i.stop();
      } catch (err) {
        this.deps.logger.error({ err, integration: i.name }, 'integration stop failed');
      }
    }
  }
}

/** The `/readyz` body now (see {@link ReadinessBody}). */
export function readinessOf(o: {
  phase: 'ready' | 'starting' | 'stopping';
  clusters: ReadonlyMap<string, ClusterRuntime>;
  integrations: Integrations;
  now: number;
  shards?: ShardCoordinator | undefined;
  /** With shards: each cluster's latest poll run in the shared store, as last read. */
  sharedPolls?: ReadonlyMap<string, PollStatus>;
  /** Why the store can run no statement any more (`SqlExecutor.failure`), or undefined. */
  storeFailure?: Error | undefined;
}): ReadinessBody {
  const sh = o.shards?.status();
  const lastPolls: Record<string, SharedPoll> = {};
  for (const [name, run] of o.sharedPolls ?? []) {
    if (o.clusters.has(name)) lastPolls[name] = { startedAt: new Date(run.startedAt).toISOString(), status: run.endedAt === null ? 'running' : run.error !== null ? 'degraded' : 'ok' };
  }
  const polls: ReadinessBody['polls'] = {};
  const access: ReadinessBody['access'] = {};
  let polling = false;
  for (const [name, rt] of o.clusters) {
    const shared = o.sharedPolls?.get(name);
    const a = rt.access(o.now);
    // A cluster another replica polls: its state is that replica's latest run (this replica's poller is idle for it).
    if (sh && sh.owners[name] !== sh.replica && shared) {
      polls[name] = shared.endedAt === null ? (shared.lastSuccessAt !== null ? 'ok' : 'pending') : shared.error !== null ? 'degraded' : 'ok';
      a.audit = polls[name] === 'degraded' ? { state: 'failing', problem: `: poll failed: ${shared.error ?? 'no reason recorded'}`, since: shared.startedAt } : polls[name] === 'ok' ? { state: 'ok', at: shared.startedAt } : { state: 'pending', detail: 'no poll yet' };
    } else polls[name] = rt.poller.health().status;
    // Never `ok` while an access of the cluster fails.
    if (clusterVerdict(a) === 'failing') polls[name] = 'degraded';
    access[name] = clusterAccessTexts(a, o.now);
    if (a.audit.state !== 'failing') polling = true;
  }
  const blind: ReadinessBody['blind'] = {};
  for (const [name, rt] of o.clusters) {
    const b = rt.blind.state(o.now);
    if (b.blind) blind[name] = b.reason;
  }
  // Clusters shared out across replicas: the shared store unreachable makes this replica poll nothing until it returns.
  // Or the SQLite store's worker thread stopped: nothing can be stored until a restart.
  const storeDown = sh?.error !== undefined || o.storeFailure !== undefined;
  const status = o.phase === 'ready' && storeDown ? 'store-unavailable' : o.phase;
  const serves: ReadinessBody['serves'] = [];
  if (o.integrations.running().length > 0) serves.push('slack');
  if ([...o.clusters.values()].some((rt) => rt.webhookPort !== undefined)) serves.push('audit-webhook');
  if (polling && !storeDown) serves.push('polls');
  return { status, serves, polls, access, integrations: o.integrations.states(), blind, ...(sh ? { shards: { replica: sh.replica, owners: sh.owners, lastPolls } } : {}) };
}

/** A listening health/metrics server. */
export interface HealthServer {
  /** The bound port. */
  port: number;
  /** Stops listening and drops open connections. */
  close(): Promise<void>;
}

/**
 * The HTTP status of `/readyz` for `body`: 503 while starting or stopping, and when the pod serves nothing at all
 * (`serves` empty: no Slack integration running, no audit webhook listener, no cluster whose audit source works — or
 * the store is unavailable); 200 otherwise, whatever else fails (docs/live-mode.md "Health"). Readiness decides whether
 * the Service routes requests to the pod
 * (https://kubernetes.io/docs/concepts/configuration/liveness-readiness-startup-probes/): the audit webhook shares the
 * pod's Service, so an unready pod would lose audit batches over a Slack or Kubernetes problem, and while the shared
 * database is down every replica is in the same state — 503 would take all of them out at once and Slack would get a
 * timeout instead of the answer that says the store is unavailable. What fails shows in the body, `/tokens status`
 * and the metrics instead. Liveness is `/healthz` (the process answers), which no outage fails: a restart would not
 * bring the database or the API server back.
 */
export function readyzCode(body: Pick<ReadinessBody, 'status' | 'serves'>): 200 | 503 {
  if (body.status === 'starting' || body.status === 'stopping') return 503;
  return body.serves.length > 0 ? 200 : 503;
}

/**
 * Starts the health/metrics HTTP listener on `http.host`:`http.port`: `/healthz` (200 `ok`: liveness), `/readyz` (the
 * JSON of `readiness()`, 200 or 503 by {@link readyzCode}), `/metrics`
 * (Prometheus text of `metrics.registry`).
 * @throws the listen error (e.g. `EADDRINUSE` when the port is taken)
 */
export async function startHealthServer(http: Config['http'], deps: { readiness: () => ReadinessBody; metrics: Metrics; logger: Logger }): Promise<HealthServer> {
  const { metrics, logger } = deps;
  const server: Server = createServer((req, res) => {
    const url = (req.url ?? '/').split('?')[0];
    if (url === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    } else if (url === '/readyz') {
      const body = deps.readiness();
      res.writeHead(readyzCode(body), { 'content-type': 'application/json' }).end(`${JSON.stringify(body)}\n`);
    } else if (url === '/metrics') {
      metrics.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
        (err: unknown) => {
          logger.error({ err }, 'rendering /metrics failed');
          res.writeHead(500, { 'content-type': 'text/plain' }).end('metrics unavailable (see the log)\n');
        },
      );
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try /healthz, /readyz, /metrics\n');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(http.port, http.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
    },
  };
}
