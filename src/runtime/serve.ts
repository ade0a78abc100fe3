/**
 * `tokenwatch serve`: the long-running service. Wires config → store → per cluster its runtime (`build-cluster.ts`
 * {@link buildCluster}: audit source, cluster state, remediator, monitors, poller) → scheduler, plus the
 * health/metrics HTTP listener (`/healthz`, `/readyz`, `/metrics`) and, when enabled, the Slack integration.
 *
 * Lifecycle: {@link startServe} resolves once the store is open, the HTTP listener is up and the
 * schedule is running (first polls start within the jitter). {@link ServeHandle.stop} (SIGTERM) stops
 * new polls, aborts running ones (a hung cluster does not hold up shutdown) and waits for them to settle, stops Slack,
 * closes the listener and the store.
 */
import { backoffDelay } from '../core/backoff.js';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from '../config/types.js';
import type { Finding } from '../findings/types.js';
import { createLogger, type Logger } from '../observability/logger.js';
import { Metrics } from '../observability/metrics.js';
import type { PollOutcome } from './poller.js';
import { BLIND_REASONS, type BlindReason } from './blind.js';
import { buildCluster, type ClusterRuntime } from './build-cluster.js';
import { Scheduler } from './scheduler.js';
import { FleetInsightsRegistry } from '../sources/index.js';
import { CloudWatchRateLimiter } from '../sources/rate-limit.js';
import type { Store } from '../store/index.js';
import { openConfiguredStore } from '../store/open.js';
import { acquirePollerLock, type PollerLock, type PollerLockError, type PollerLockOptions } from './poller-lock.js';
import { ClusterNotOwnedError, ShardCoordinator, type ShardCoordinatorOptions } from './shard-coordinator.js';
import { Verifier } from '../remediation/verify.js';
import type { Integration, RunNowResult, SlackContext } from '../slack/context.js';


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
   * Whether this replica polls `cluster` and executes its approved actions (without `cluster`: any cluster): the
   * leader, or with clusters shared out across replicas the cluster's owner. Always true without HA.
   */
  isLeader(cluster?: string): boolean;
  /** Leader-election state, when leader election runs. */
  leaderStatus?: () => LeaderStatus;
  /** Cluster ownership, when clusters are shared out across replicas ({@link ServeOptions.sharding}). */
  shards?: ShardCoordinator;
  /** Why integrations (Slack) failed to start, if any did; serve runs on without them. */
  integrationErrors?: string[];
}

/**
 * The body of `/readyz` (JSON): states only, never error text (details are in the log, scrubbed).
 * - `status`: `ready` | `starting` | `stopping` (the HTTP status is 200 only for `ready`);
 * - `polls`: per cluster, `ok` | `degraded` (the last poll failed: source, cluster state or store; or the running poll
 *   has taken longer than 3 × `poll.requestTimeout`: a slow or hung cluster) | `pending`;
 * - `integrations`: per integration (`slack`), `ok` | `connected` | `disconnected` | `unavailable` (not reachable at
 *   start, retrying) | `failed` (could not start; see the log);
 * - `blind`: per cluster whose audit log cannot see stale tokens, the reason (a blind log never makes a replica
 *   unready either).
 * Readiness is about serving requests: failing polls never make a replica unready (every replica would turn
 * unready together and stop answering `/tokens status`); they show here, in `/tokens status` and in the
 * `tokenwatch_poll_failing` metric.
 */
export interface ReadinessBody {
  /** `store-unavailable`: the shared store (PostgreSQL) cannot be reached; this replica polls nothing until it can. */
  status: 'ready' | 'starting' | 'stopping' | 'store-unavailable';
  polls: Record<string, 'ok' | 'degraded' | 'pending'>;
  integrations: Record<string, string>;
  /**
   * Clusters whose audit log is blind (src/runtime/blind.ts), with the reason: `eks-audit-log-off`,
   * `no-events-for-polls`, `no-events-for-time`. Clusters that are not blind are absent.
   */
  blind: Record<string, BlindReason>;
  /**
   * With clusters shared out across replicas only: this replica's id and, per cluster, the id of the replica that
   * owns it as last read (null: none right now; taken over within the ownership TTL).
   */
  shards?: { replica: string; owners: Record<string, string | null> };
}

/** Options of {@link startServe}. */
export interface ServeOptions {
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
  /** Starts integrations (Slack) once pollers exist; default: Slack when `config.slack.enabled`. */
  integrations?: ((ctx: ServeContext) => Promise<Integration>)[];
  /**
   * Leader gate for polling (HA). Without it this process takes the store's poller lock (`poller-lock.ts`) and
   * polls while it holds it; start fails with a {@link PollerLockError} when another live process holds it.
   */
  isLeader?: () => boolean;
  /** Poller-lock clock (default `Date.now`, not `clock`), timing and identity (tests); see {@link PollerLockOptions}. */
  pollerLock?: Pick<PollerLockOptions, 'clock' | 'staleAfterMs' | 'heartbeatMs' | 'host' | 'pid' | 'isRunning'>;
  /** Leader-election state for status displays; absent when running without leader election. */
  leaderStatus?: () => LeaderStatus;
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
}

/** Leader-election state shown by `/tokens status` (see `src/runtime/leader.ts`). */
export interface LeaderStatus {
  identity: string;
  leader: boolean;
  /** Current holder of the Lease ('' when released or unknown). */
  holder: string;
  lastError?: string;
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
  /** Graceful stop; idempotent. */
  stop(): Promise<void>;
}


/**
 * Starts the service; see the module docstring.
 * @throws when the store cannot be opened, another process polls it ({@link PollerLockError}), or the port is taken
 */
export async function startServe(config: Config, opts: ServeOptions = {}): Promise<ServeHandle> {
  const logger = opts.logger ?? createLogger({ level: config.log.level });
  const metrics = opts.metrics ?? new Metrics({ defaultMetrics: true });
  const clock = opts.clock ?? Date.now;
  const store = await openConfiguredStore(config.store);
  // Without leader election this process polls: it must be the only one on this store (docs/design/architecture.md "Live mode").
  let lock: PollerLock | undefined;
  if (!opts.isLeader && !opts.sharding) {
    try {
      // Wall-clock time by default, not `clock`: the sandbox runs serve on a faster simulated clock.
      lock = await acquirePollerLock({ store, clock: Date.now, logger, onLost: () => metrics.leader.set(0), ...opts.pollerLock });
    } catch (err) {
      await store.close();
      throw err;
    }
  }
  const clusters = new Map<string, ClusterRuntime>();
  let ready = false;
  let stopping = false;

  const updateBlindGauge = (rt: ClusterRuntime): void => {
    const b = rt.blind.state(clock());
    for (const reason of BLIND_REASONS) metrics.auditLogBlind.set({ cluster: rt.config.name, reason }, b.blind && b.reason === reason ? 1 : 0);
  };

  // The started integrations (Slack), and the verifier of approved actions of each that reports verifications.
  const integrations: Integration[] = [];
  const verifiers = new Map<Integration, Verifier>();
  /**
   * What follows a successful poll of `rt`, in this order: the blind-log gauge; each started integration alerts on the
   * poll (`Integration.afterPoll`: Slack posts and edits its alerts); then each integration's verifier concludes the
   * cluster's approved actions (resolved / recurrence / persisting, the node probe's check) and replies in the alerts'
   * threads, which by then show this poll's findings. A step that fails is logged and the next one still runs.
   */
  const afterPoll = async (rt: ClusterRuntime, findings: Finding[], outcome: PollOutcome): Promise<void> => {
    updateBlindGauge(rt);
    const cluster = rt.config.name;
    const started = [...integrations]; // one that starts meanwhile joins at the next poll
    for (const i of started) {
      if (!i.afterPoll) continue;
      try {
        await i.afterPoll(rt, findings, outcome);
      } catch (err) {
        logger.error({ err, cluster, integration: i.name }, 'alerting after a poll failed');
      }
    }
    for (const i of started) {
      const verifier = verifiers.get(i);
      if (!verifier || stopping) continue;
      try {
        await verifier.verifyCluster(cluster);
      } catch (err) {
        logger.error({ err, cluster, integration: i.name }, 'verification after a poll failed');
      }
    }
  };

  // One CloudWatch Logs budget per account and Region for every cluster of this deployment (src/sources/rate-limit.ts).
  const rateLimiter = new CloudWatchRateLimiter({
    tps: config.poll.cloudwatchTps,
    onThrottle: (key, rate) => {
      const [account = '', region = '', operation = ''] = key.split('/');
      metrics.cloudwatchThrottled.inc({ account, region, operation });
      metrics.cloudwatchRate.set({ account, region, operation }, rate);
    },
  });
  // Insights-mode clusters share fleet Logs Insights queries when poll.cloudwatchFleetInsights is enabled.
  const fleetInsights = new FleetInsightsRegistry(config.poll.cloudwatchFleetInsights, (q) => {
    metrics.cloudwatchInsightsQueries.inc({ region: q.region });
    metrics.cloudwatchInsightsBytes.inc({ region: q.region }, q.bytesScanned);
  });
  // Clusters shared out across replicas: a poll commits only while this replica owns its cluster at the epoch the poll
  // started with (shard-coordinator.ts fence; the coordinator is built below, before any poll runs).
  const pollEpochs = new Map<string, number>();
  const fence = async (cluster: string, tx: Store): Promise<void> => {
    const epoch = pollEpochs.get(cluster);
    if (!shards || epoch === undefined) throw new ClusterNotOwnedError(cluster);
    await shards.fence(tx.sql, cluster, epoch);
  };
  // Per cluster, in flow order (build-cluster.ts): audit source, cluster state, remediator, monitors, poller.
  const slowPollAfterMs = opts.slowPollAfterMs ?? 3 * config.poll.requestTimeout;
  for (const c of config.clusters) {
    clusters.set(c.name, await buildCluster(c, { config, store, logger, metrics, clock, rateLimiter, fleetInsights, slowPollAfterMs, onBlindChange: updateBlindGauge, afterPoll, ...(opts.sharding ? { fence } : {}) }));
  }

  const firstDone = new Map<string, () => void>();
  const firstPolls = Promise.all(config.clusters.map((c) => new Promise<void>((resolve) => firstDone.set(c.name, resolve)))).then(() => undefined);
  // Clusters shared out across replicas: this replica polls and remediates the clusters it owns (shard-coordinator.ts).
  let scheduling = false;
  const integrationBusy = (cluster: string): boolean => integrations.some((i) => i.busy?.(cluster) === true);
  const shards = opts.sharding
    ? new ShardCoordinator({
        ...opts.sharding,
        db: opts.sharding.db ?? store.sql,
        clusters: config.clusters.map((c) => c.name),
        busy: (cluster) => scheduler.isBusy(cluster) || integrationBusy(cluster),
        logger: logger.child({ component: 'shards' }),
        metrics,
        onAcquired: (cluster) => {
          if (scheduling) void catchUp(cluster).catch((err: unknown) => logger.error({ err, cluster }, 'polling a cluster taken over failed'));
        },
        onLost: (cluster) => {
          if (scheduler.abort(cluster, new ClusterNotOwnedError(cluster))) logger.warn({ cluster }, 'aborted the running poll of a cluster this replica no longer owns');
        },
      })
    : undefined;
  const leads = opts.isLeader;
  const isLeader = (cluster?: string): boolean => {
    if (leads) return leads();
    if (shards) return cluster === undefined ? shards.owned().length > 0 : shards.owns(cluster);
    return lock?.held() ?? true;
  };
  const scheduler = new Scheduler({
    jitterMs: opts.jitterMs ?? config.poll.jitter,
    spread: opts.spread ?? config.poll.spread,
    concurrency: config.poll.concurrency,
    shouldRun: (job) => isLeader(job),
    onOverlap: (job) => metrics.polls.inc({ cluster: job, outcome: 'skipped-overlap' }),
    onMissed: (job, tick) => {
      metrics.pollsMissed.inc({ cluster: job, reason: tick.reason });
      clusters.get(job)?.poller.recordMissed(tick.dueAt, tick.reason);
      const why = tick.reason === 'overlap' ? 'the previous poll of this cluster is still running' : 'folded into a late poll of this cluster that is still running';
      logger.warn({ cluster: job, dueAt: new Date(tick.dueAt).toISOString(), reason: tick.reason }, `scheduled poll missed: ${why}`);
    },
    onLate: (job, tick) => {
      metrics.pollsLate.inc({ cluster: job });
      logger.warn({ cluster: job, dueAt: new Date(tick.dueAt).toISOString(), lateMs: tick.lateMs }, 'scheduled poll ran late: its timer fired late (event loop busy)');
    },
    onError: (job, err) => logger.error({ err, cluster: job }, 'poll job failed'),
  });

  metrics.pollRunningOf = () =>
    [...clusters].map(([name, rt]) => {
      const since = rt.poller.health().runningSince;
      return [name, since === undefined ? 0 : Math.max(0, clock() - since) / 1000] as const;
    });
  for (const rt of clusters.values()) updateBlindGauge(rt); // EKS audit logging off is known before the first poll

  const context: ServeContext = {
    config,
    store,
    logger,
    metrics,
    clusters,
    scheduler,
    clock,
    runNow: (cluster) => scheduler.runNow(cluster),
    isLeader,
    leaderStatus: opts.leaderStatus,
    ...(shards ? { shards, ownerOf: (cluster: string) => shards.status().owners[cluster] ?? null } : {}),
  };
  if (!opts.isLeader && !shards) metrics.leader.set(1);
  /**
   * A cluster this replica has just taken over: poll it at once unless a poll that started at or after its latest
   * scheduled time has finished (the previous owner ran this tick: polling again would poll it twice). A poll the
   * previous owner left unfinished (killed) is run again; it reads on from the last committed chunk.
   */
  const catchUp = async (cluster: string): Promise<void> => {
    const due = scheduler.previousDue(cluster);
    const last = (await store.lastPollRuns()).find((r) => r.cluster === cluster);
    const ran = due !== undefined && last !== undefined && last.endedAt !== null && last.startedAt >= due;
    if (ran) return;
    logger.info({ cluster, ...(last ? { lastPollStartedAt: new Date(last.startedAt).toISOString() } : {}) }, 'polling a cluster taken over now: its latest scheduled poll did not complete');
    scheduler.runNow(cluster);
  };

  const integrationState = new Map<string, string>();
  const readiness = (): ReadinessBody => {
    const polls: ReadinessBody['polls'] = {};
    for (const [name, rt] of clusters) polls[name] = rt.poller.health().status;
    const states: Record<string, string> = Object.fromEntries(integrationState);
    for (const i of integrations) states[i.name] = i.state?.() ?? 'ok';
    const blind: ReadinessBody['blind'] = {};
    for (const [name, rt] of clusters) {
      const b = rt.blind.state(clock());
      if (b.blind) blind[name] = b.reason;
    }
    const sh = shards?.status();
    const status = stopping ? 'stopping' : !ready ? 'starting' : sh?.error ? 'store-unavailable' : 'ready';
    return { status, polls, integrations: states, blind, ...(sh ? { shards: { replica: sh.replica, owners: sh.owners } } : {}) };
  };
  const server: Server = createServer((req, res) => {
    const url = (req.url ?? '/').split('?')[0];
    if (url === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    } else if (url === '/readyz') {
      const body = readiness();
      res.writeHead(body.status === 'ready' ? 200 : 503, { 'content-type': 'application/json' }).end(`${JSON.stringify(body)}\n`);
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
    server.listen(config.http.port, config.http.host, () => resolve());
  }).catch(async (err: unknown) => {
    await lock?.release();
    await store.close();
    throw err;
  });
  const port = (server.address() as AddressInfo).port;
  // Audit webhook listeners (src/sources/webhook.ts) start before the first poll; one that cannot bind stops serve.
  try {
    for (const rt of clusters.values()) if (rt.source.start) rt.webhookPort = await rt.source.start();
  } catch (err) {
    for (const rt of clusters.values()) rt.source.close?.();
    server.close();
    await lock?.release();
    await store.close();
    throw err;
  }

  const starters =
    opts.integrations ?? (config.slack?.enabled ? [async (ctx: ServeContext) => (await import('./build-slack.js')).startSlack(ctx)] : []);
  // An integration that cannot start must not take polling down with it, or a Deployment would crash-loop: serve
  // keeps polling and storing findings. A rejected token (final) is logged once and shown as `failed` on /readyz
  // until serve restarts; an unreachable service (IntegrationUnavailableError) is retried in the background with
  // backoff, shown as `unavailable` meanwhile; alerts found in between are posted once it starts.
  const failedIntegrations: string[] = [];
  const retryTimers = new Set<NodeJS.Timeout>();
  const startedWaiters = new Map<string, Array<() => void>>();
  const retryBase = opts.integrationRetryMs ?? 15_000;
  const nameOf = (i: number) => opts.integrationNames?.[i] ?? (i === 0 ? 'slack' : `integration-${i}`);
  // The verifier of approved actions reporting through `reporter` (Slack thread replies), run by `afterPoll`.
  const verifierFor = (reporter: NonNullable<Integration['verificationReporter']>): Verifier =>
    new Verifier({
      store,
      clock,
      settleMs: config.remediation.settlePeriod,
      logger: logger.child({ component: 'verify' }),
      probeReports: (cluster) => clusters.get(cluster)?.probe?.read(),
      ...reporter,
    });
  const attempt = async (start: (ctx: ServeContext) => Promise<Integration>, name: string, tries: number): Promise<void> => {
    if (stopping) return;
    try {
      const integration = await start(context);
      if (stopping) {
        await integration.stop().catch(() => undefined);
        return;
      }
      if (integration.verificationReporter) verifiers.set(integration, verifierFor(integration.verificationReporter));
      integrations.push(integration);
      integrationState.delete(integration.name);
      integrationState.delete(name);
      if (tries > 1) logger.info({ integration: name, attempts: tries }, `${name} is reachable again: integration started`);
      for (const w of startedWaiters.get(name) ?? []) w();
      startedWaiters.delete(name);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if ((err as { retryable?: unknown }).retryable === true) {
        const delay = backoffDelay(retryBase, tries - 1, 300_000);
        integrationState.set(name, 'unavailable');
        logger.error({ err, integration: name, attempt: tries, retryInSeconds: Math.round(delay / 1000) }, `${message} (attempt ${tries}; retrying in ${Math.round(delay / 1000)} s)`);
        const t = setTimeout(() => {
          retryTimers.delete(t);
          void attempt(start, name, tries + 1);
        }, delay);
        t.unref();
        retryTimers.add(t);
        return;
      }
      integrationState.set(name, 'failed');
      failedIntegrations.push(message);
      logger.error({ err, integration: name }, `integration could not start, running without it (polling and the store go on): ${message}`);
    }
  };
  // Ownership first, so the integrations' start (resuming approved actions, posting pending alerts) sees it.
  await shards?.start();
  for (const [i, start] of starters.entries()) await attempt(start, nameOf(i), 1);
  context.integrationErrors = failedIntegrations;

  scheduler.start(
    [...clusters.values()].map((rt) => ({
      name: rt.config.name,
      schedule: rt.config.schedule,
      run: async (signal) => {
        if (shards) {
          // The epoch this poll runs at: every commit of it checks it (fence); none when the cluster was lost meanwhile.
          const epoch = shards.owns(rt.config.name) ? shards.epochOf(rt.config.name) : undefined;
          if (epoch === undefined) return;
          pollEpochs.set(rt.config.name, epoch);
        }
        await rt.poller.pollOnce(signal);
        firstDone.get(rt.config.name)?.();
      },
    })),
  );
  scheduling = true;
  ready = true;
  logger.info({ port, ...(shards ? { replica: shards.id, owned: shards.owned() } : {}), clusters: [...clusters.keys()], slack: integrations.map((i) => i.name) }, 'tokenwatch serve started');

  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      stopping = true;
      for (const t of retryTimers) clearTimeout(t);
      retryTimers.clear();
      logger.info('stopping: no new polls, aborting running ones');
      await scheduler.stop();
      for (const i of integrations.reverse()) {
        try {
          await i.stop();
        } catch (err) {
          logger.error({ err, integration: i.name }, 'integration stop failed');
        }
      }
      for (const rt of clusters.values()) {
        rt.source.close?.();
        rt.watchCache?.stop();
      }
      await shards?.stop(); // hands its clusters over: the others take them at their next heartbeat
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await lock?.release();
      await store.close();
      logger.info('stopped');
    })());

  const integrationStarted = (name: string): Promise<void> =>
    integrations.some((i) => i.name === name) ? Promise.resolve() : new Promise<void>((resolve) => startedWaiters.set(name, [...(startedWaiters.get(name) ?? []), resolve]));

  return { port, context, firstPolls, stop, readiness, integrationStarted };
}
