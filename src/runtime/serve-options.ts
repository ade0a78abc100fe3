/**
 * The types of `tokenwatch serve`'s composition (`compose.ts` `composeServe`): the options its callers pass, the
 * context its integrations get, and the handle it returns.
 */
import type { Config } from '../config/types.js';
import type { Ownership } from '../core/ownership.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { SlackOptions } from '../slack/app.js';
import type { Integration, RunNowResult, SlackContext } from '../slack/context.js';
import type { CloudLoggingRegistryOptions } from '../sources/cloud-logging.js';
import type { Store } from '../store/index.js';
import type { ClusterRuntime } from './build-cluster.js';
import type { SlackIntegration } from './build-slack.js';
import type { ReadinessBody } from './health-server.js';
import type { PollerLockError, PollerLockOptions } from './poller-lock.js';
import type { Scheduler } from './scheduler.js';
import type { ShardCoordinator, ShardCoordinatorOptions } from './shard-coordinator.js';

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
