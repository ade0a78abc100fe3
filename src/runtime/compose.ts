/**
 * The composition root of `tokenwatch serve`: everything the live service runs is built in `src/runtime/`, and this
 * module puts it together.
 *
 * - leader election (`leader.ts`): with POD_NAME and POD_NAMESPACE set in a pod (the Deployment in manifests/ sets
 *   them), replicas elect a leader on a coordination.k8s.io Lease; only the leader polls and executes actions. Not
 *   with a PostgreSQL store (`store.postgres`): there the replicas share the clusters out through the database
 *   instead (`shard-coordinator.ts`; replica ids from POD_NAME, else the host name), no Lease is used;
 * - the service (`serve.ts` {@link startServe}): the store, one audit source, cluster clients (state, remediator,
 *   metrics scraper, probe reader) and poller (`poller.ts`) per cluster, the scheduler (`scheduler.ts`), the
 *   health/metrics listener, the Slack integration (`build-slack.ts`: the Bolt app of `src/slack/app.ts`, then the
 *   notifier, directory and approval flow on it), which gets only the small `SlackContext` interface, and the verifier of approved actions, which `serve.ts` builds and
 *   reports through the integration's `verificationReporter`. After each successful poll `serve.ts` runs one sequence:
 *   the integration alerts (`Integration.afterPoll`), then the verifier concludes (docs/design/architecture.md
 *   "How serve is put together").
 *
 * The CLI (`src/cli/commands/serve.ts`) loads the config, calls {@link composeServe} and stops it on a signal.
 */
import { kubeConfigFor } from '../cluster/kube.js';
import { poolConnections } from '../cluster/pool.js';
import type { Config } from '../config/types.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { electionFromEnv, LeaderElector } from './leader.js';
import { startServe, type ServeHandle } from './serve.js';

/** What {@link composeServe} needs besides the config. */
export interface ComposeOptions {
  /** The process environment (leader election reads KUBERNETES_SERVICE_HOST, POD_NAME, POD_NAMESPACE, TOKENWATCH_LEASE_NAME). */
  env: NodeJS.ProcessEnv;
  logger: Logger;
  metrics: Metrics;
}

/** A running `tokenwatch serve`. */
export interface ComposedServe {
  handle: ServeHandle;
  /** Graceful stop: in-flight polls finish first (the service stops), only then is the Lease released. Idempotent. */
  stop(): Promise<void>;
}

/** Starts leader election when running in a pod with the election variables set; undefined otherwise. */
function startLeaderElection({ env, logger, metrics }: ComposeOptions): LeaderElector | undefined {
  const election = env.KUBERNETES_SERVICE_HOST ? electionFromEnv(env) : undefined;
  if (!election) return undefined;
  const elector = new LeaderElector({ kubeConfig: poolConnections(kubeConfigFor({ inCluster: true })), ...election, logger }); // keep-alive: renewals every retry period
  elector.on('started', () => {
    metrics.leader.set(1);
    logger.info({ identity: election.identity }, 'became leader: polling and executing approved actions');
  });
  elector.on('stopped', (reason) => {
    metrics.leader.set(0);
    logger.warn({ identity: election.identity, reason }, 'no longer leader: polls stop on this replica');
  });
  elector.start();
  return elector;
}

/**
 * Builds and starts the live service (see the module docstring).
 * @throws what {@link startServe} throws (store cannot be opened, port taken), after releasing the Lease.
 */
export async function composeServe(config: Config, opts: ComposeOptions): Promise<ComposedServe> {
  const shared = config.store.postgres !== undefined;
  const elector = shared ? undefined : startLeaderElection(opts);
  let handle: ServeHandle;
  try {
    handle = await startServe(config, {
      logger: opts.logger,
      metrics: opts.metrics,
      ...(elector && { isLeader: () => elector.isLeader(), leaderStatus: () => elector.status() }),
      ...(shared && { sharding: { ...(opts.env.POD_NAME ? { name: opts.env.POD_NAME } : {}) } }),
    });
  } catch (err) {
    await elector?.stop({ release: true });
    throw err;
  }
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= handle
      .stop()
      .then(() => elector?.stop({ release: true }))
      .then(() => undefined));
  return { handle, stop };
}
