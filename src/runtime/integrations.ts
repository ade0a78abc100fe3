/**
 * Serve's integrations (Slack), as plain data and the steps that use it: started with retry, each with the verifier of
 * the actions approved through it, alerted and then verified after each poll, stopped in reverse order.
 *
 * An integration that cannot start must not take polling down with it, or a Deployment would crash-loop: serve keeps
 * polling and storing findings. A rejected token (final) is logged once and shown as `failed` on /readyz until serve
 * restarts; an unreachable service (`IntegrationUnavailableError`, `retryable: true`) is retried in the background
 * with backoff, shown as `unavailable` meanwhile; alerts found in between are posted once it starts.
 */
import { backoffDelay } from '../core/backoff.js';
import type { Finding } from '../findings/types.js';
import type { AccessState } from '../observability/health.js';
import type { Logger } from '../observability/logger.js';
import type { PollOutcome } from '../pipeline/poll.js';
import type { Verifier } from '../remediation/verify.js';
import type { Integration } from '../slack/context.js';
import type { ClusterRuntime } from './build-cluster.js';
import { IntegrationHealth } from './health.js';
import type { ServeContext } from './serve-options.js';

/** What starting and verifying through the integrations needs. */
export interface IntegrationDeps {
  logger: Logger;
  /** First retry delay of an integration unavailable at start, ms; doubles per failed attempt, up to 5 minutes. */
  retryBaseMs: number;
  /** Builds the verifier of approved actions that reports through an integration's `verificationReporter`. */
  verifierFor(reporter: NonNullable<Integration['verificationReporter']>): Verifier;
  /** Whether serve is stopping: nothing starts and no verification runs any more. */
  stopping(): boolean;
  /** Clock of the health model's failure times, epoch ms. */
  clock: () => number;
}

/** The integrations' state: what started, what is pending or failed, and the health model's view of each. */
export interface IntegrationSet {
  /** Started, in start order. */
  readonly started: Integration[];
  readonly verifiers: Map<Integration, Verifier>;
  /** `unavailable` / `failed` by starter name, until it starts. */
  readonly pending: Map<string, string>;
  /** Why integrations failed to start (final), for `/tokens status`. */
  readonly errors: string[];
  readonly retryTimers: Set<NodeJS.Timeout>;
  readonly waiters: Map<string, Array<() => void>>;
  /** Each integration's state for the health model, by starter name. */
  readonly health: IntegrationHealth;
  /** Starter names tried so far, and the integration each started as. */
  readonly byName: Map<string, Integration | undefined>;
}

/** An empty {@link IntegrationSet}. */
export function integrationSet(): IntegrationSet {
  return { started: [], verifiers: new Map(), pending: new Map(), errors: [], retryTimers: new Set(), waiters: new Map(), health: new IntegrationHealth(), byName: new Map() };
}

/** Starts one integration named `name` (attempt `tries`); a retryable failure schedules the next attempt. Rejects never. */
export async function startIntegration(set: IntegrationSet, deps: IntegrationDeps, start: (ctx: ServeContext) => Promise<Integration>, name: string, context: ServeContext, tries = 1): Promise<void> {
  const { logger } = deps;
  if (deps.stopping()) return;
  try {
    const integration = await start(context);
    if (deps.stopping()) {
      await integration.stop().catch(() => undefined);
      return;
    }
    if (integration.verificationReporter) set.verifiers.set(integration, deps.verifierFor(integration.verificationReporter));
    set.started.push(integration);
    set.byName.set(name, integration);
    set.health.started(name, deps.clock());
    set.pending.delete(integration.name);
    set.pending.delete(name);
    if (tries > 1) logger.info({ integration: name, attempts: tries }, `${name} is reachable again: integration started`);
    for (const w of set.waiters.get(name) ?? []) w();
    set.waiters.delete(name);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    const retryable = (err as { retryable?: unknown }).retryable === true;
    if (!set.byName.has(name)) set.byName.set(name, undefined);
    set.health.startFailed(name, message, !retryable, deps.clock());
    if (retryable) {
      const delay = backoffDelay(deps.retryBaseMs, tries - 1, 300_000);
      set.pending.set(name, 'unavailable');
      logger.error({ err, integration: name, attempt: tries, retryInSeconds: Math.round(delay / 1000) }, `${message} (attempt ${tries}; retrying in ${Math.round(delay / 1000)} s)`);
      const t = setTimeout(() => {
        set.retryTimers.delete(t);
        void startIntegration(set, deps, start, name, context, tries + 1);
      }, delay);
      t.unref();
      set.retryTimers.add(t);
      return;
    }
    set.pending.set(name, 'failed');
    set.errors.push(message);
    logger.error({ err, integration: name }, `integration could not start, running without it (polling and the store go on): ${message}`);
  }
}

/** Each of `integrations` alerts on the poll, in turn (Slack queues its alerts' posts and edits); a failure is logged. */
export async function alertIntegrations(integrations: readonly Integration[], logger: Logger, rt: ClusterRuntime, findings: Finding[], outcome: PollOutcome): Promise<void> {
  for (const i of integrations) {
    if (!i.afterPoll) continue;
    try {
      await i.afterPoll(rt, findings, outcome);
    } catch (err) {
      logger.error({ err, cluster: rt.config.name, integration: i.name }, 'alerting after a poll failed');
    }
  }
}

/**
 * The verifier of each of `integrations` concludes `cluster`'s approved actions (resolved / recurrence / persisting,
 * the node probe's check) and replies in the alerts' threads; skipped while stopping; a failure is logged.
 */
export async function verifyThrough(set: IntegrationSet, deps: Pick<IntegrationDeps, 'logger' | 'stopping'>, integrations: readonly Integration[], cluster: string): Promise<void> {
  for (const i of integrations) {
    const verifier = set.verifiers.get(i);
    if (!verifier || deps.stopping()) continue;
    try {
      await verifier.verifyCluster(cluster);
    } catch (err) {
      deps.logger.error({ err, cluster, integration: i.name }, 'verification after a poll failed');
    }
  }
}

/** `/readyz` states: `unavailable` / `failed` of those not started, then each started one's `state()` (`ok`). */
export function integrationStates(set: IntegrationSet): Record<string, string> {
  const states: Record<string, string> = Object.fromEntries(set.pending);
  for (const i of set.started) states[i.name] = i.state?.() ?? 'ok';
  return states;
}

/**
 * Slack's access for `cluster` in the health model at `now`: the worst state of the integrations tried (a failed
 * start, a dropped connection, the cluster's channel refusing posts), `off` when none is configured.
 */
export function slackAccessOf(set: IntegrationSet, cluster: string, now: number): AccessState {
  if (set.byName.size === 0) return { state: 'off', detail: 'Slack not enabled' };
  const states = [...set.byName].map(([name, running]) => set.health.of(name, now, running, cluster));
  return states.find((s) => s.state === 'failing') ?? states.find((s) => s.state === 'pending') ?? states[0]!;
}

/** Resolves when the integration `name` has started (tests); rejects never. */
export function whenStarted(set: IntegrationSet, name: string): Promise<void> {
  if (set.started.some((i) => i.name === name)) return Promise.resolve();
  return new Promise<void>((resolve) => set.waiters.set(name, [...(set.waiters.get(name) ?? []), resolve]));
}

/** No more start retries. */
export function cancelRetries(set: IntegrationSet): void {
  for (const t of set.retryTimers) clearTimeout(t);
  set.retryTimers.clear();
}

/** Stops the started integrations, last started first; a failure is logged. */
export async function stopIntegrations(set: IntegrationSet, logger: Logger): Promise<void> {
  for (const i of set.started.reverse()) {
    try {
      await i.stop();
    } catch (err) {
      logger.error({ err, integration: i.name }, 'integration stop failed');
    }
  }
}
