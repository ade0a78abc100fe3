/**
 * The runtime side of the health model (src/observability/health.ts): per cluster, the state of each access its poll
 * needs, read from the parts that attempt them — the poller (audit source), the per-poll `GET /version` and the
 * poll's cluster-state reads (Kubernetes API, src/cluster/reachability.ts), the watch cache's freshness, and the Slack
 * integration (its start, its Socket Mode connection, the cluster's alert channel). `/readyz`, `/tokens status`, the
 * Home tab and the `tokenwatch_access_failing` metric all read {@link ClusterHealth.access}.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { kubeApiProblem } from '../cluster/reachability.js';
import type { ClusterConfig } from '../config/types.js';
import { AccessTracker, type AccessState, type ClusterAccess } from '../observability/health.js';
import type { SlackPollHealth } from '../slack/context.js';
import type { BlindState } from './blind.js';

/** What {@link ClusterHealth} reads of one cluster's runtime. */
export interface ClusterHealthParts {
  config: ClusterConfig;
  poller: { health(): SlackPollHealth };
  kubeConfig?: KubeConfig | undefined;
  /** Why Kubernetes access could not be set up at start (scrubbed), if it could not. */
  kubeError?: string | undefined;
  watchCache?: { freshness(): { ok: true } | { ok: false; state: string; reason: string } } | undefined;
  /** The blind-log monitor (src/runtime/blind.ts): a source refused the read of its audit log is blind, said so here. */
  blind?: { state(now: number): BlindState; noReadAccessSince?(): number | undefined } | undefined;
}

/** The Slack side of a cluster's health: the integration's state and the cluster's channel, from {@link IntegrationHealth}. */
export type SlackAccessOf = (cluster: string, now: number) => AccessState;

/**
 * One cluster's accesses (see the module doc). The Kubernetes API is checked after every poll ({@link afterPoll});
 * the watch cache and Slack are read when asked, each keeping the time its failure started.
 */
export class ClusterHealth {
  private readonly kube = new AccessTracker();
  private readonly cache = new AccessTracker();

  constructor(
    private readonly parts: ClusterHealthParts,
    /** When serve built this cluster, epoch ms: the start of a failure found at start (an unreadable kubeconfig). */
    private readonly builtAt: number,
    private readonly opts: { requestTimeoutMs: number; slack?: SlackAccessOf },
  ) {}

  /**
   * After a poll of this cluster (whatever its outcome), at `at`: `GET /version` with the cluster's credentials, then
   * the poll's own Kubernetes reads (a forbidden verb, a timeout). Never rejects.
   */
  async afterPoll(at: number): Promise<void> {
    const { kubeConfig, config } = this.parts;
    if (!kubeConfig || 'none' in config.kubernetes) return;
    const problem = await kubeApiProblem(kubeConfig, this.opts.requestTimeoutMs);
    if (problem !== undefined) return this.kube.fail(problem, at);
    const h = this.parts.poller.health();
    const hung = h.lastError?.startsWith('Kubernetes API not answering: ') ? h.lastError.slice('Kubernetes API '.length) : undefined;
    if (hung) return this.kube.fail(hung, at);
    if (h.stateError !== undefined) return this.kube.fail(`failed a read: ${h.stateError}`, at);
    this.kube.ok(at);
  }

  /** Every access of the cluster now (`now`: epoch ms, for the watch cache and Slack, read now). */
  access(now: number): ClusterAccess {
    return { audit: this.audit(now), kubernetes: this.kubernetes(), watchCache: this.watchCache(now), slack: this.opts.slack?.(this.parts.config.name, now) ?? { state: 'off', detail: 'Slack not enabled' } };
  }

  private audit(now: number): AccessState {
    if ('none' in this.parts.config.audit) return { state: 'off', detail: 'audit: none' };
    const h = this.parts.poller.health();
    if (h.slow) return { state: 'failing', problem: `not answering: a poll has been running for ${Math.round(h.slow.forMs / 1000)} s (the cluster's APIs are slow or hung)`, since: h.slow.since };
    if (h.status === 'pending') return { state: 'pending', detail: 'no poll yet' };
    const blind = this.parts.blind?.state(now);
    if (h.status === 'degraded' && blind?.blind && blind.reason === 'no-read-access') {
      // The source was refused the read of the audit log (no read permission): blind, with the fix, not "poll failed".
      const since = this.parts.blind?.noReadAccessSince?.() ?? h.failingSince ?? h.lastPollAt ?? this.builtAt;
      return { state: 'failing', problem: `blind: ${blind.text.replace(/^audit log blind: /, '')}`, since, ...(h.lastPollAt !== undefined ? { at: h.lastPollAt } : {}) };
    }
    if (h.status === 'degraded' && h.lastError !== undefined && !h.lastError.startsWith('Kubernetes API not answering: ')) {
      // The poll failed: reading the source, or storing what it read (a full disk) — said as the poll's failure.
      return { state: 'failing', problem: `: poll failed: ${h.lastError}`, since: h.failingSince ?? h.lastPollAt ?? this.builtAt, ...(h.lastPollAt !== undefined ? { at: h.lastPollAt } : {}) };
    }
    return { state: 'ok', ...(h.lastPollAt !== undefined ? { at: h.lastPollAt } : {}) };
  }

  private kubernetes(): AccessState {
    const k = this.parts.config.kubernetes;
    if ('none' in k) return { state: 'off', detail: 'kubernetes: none' };
    if (this.parts.kubeError !== undefined) return { state: 'failing', problem: `not set up: ${this.parts.kubeError}`, since: this.builtAt };
    const s = this.kube.state();
    return s.state === 'pending' ? { state: 'pending', detail: 'checked after the first poll' } : s;
  }

  private watchCache(now: number): AccessState {
    const k = this.parts.config.kubernetes;
    if ('none' in k) return { state: 'off', detail: 'kubernetes: none' };
    if ('watch' in k && k.watch === false) return { state: 'off', detail: 'kubernetes.watch: false' };
    if (this.parts.kubeError !== undefined) return { state: 'failing', problem: 'not started: no Kubernetes access', since: this.builtAt };
    const f = this.parts.watchCache?.freshness();
    if (!f) return { state: 'off' };
    if (f.ok) this.cache.ok(now);
    else if (f.state === 'syncing' && !f.reason.includes(': ')) this.cache.pending('listing');
    // "watch cache not synced yet (pods: connect ECONNREFUSED …)", "watch cache stopped", "watch cache broken: watch of pods down …".
    else this.cache.fail(f.reason.startsWith('watch cache ') ? f.reason.slice('watch cache '.length) : `${f.state}: ${f.reason}`, now);
    return this.cache.state();
  }
}

/**
 * Slack's state for the health model, per integration name: started (with a Socket Mode connection state and a channel
 * problem per cluster), unavailable (retrying), failed to start (final). Failure times are kept while they last.
 */
export class IntegrationHealth {
  private readonly trackers = new Map<string, AccessTracker>();

  private tracker(name: string): AccessTracker {
    let t = this.trackers.get(name);
    if (!t) this.trackers.set(name, (t = new AccessTracker()));
    return t;
  }

  /** A start attempt of `name` failed at `at`: `final` (e.g. a rejected token) or retried. */
  startFailed(name: string, message: string, final: boolean, at: number): void {
    this.tracker(name).fail(final ? `failed to start: ${message}` : `unreachable (retrying): ${message}`, at);
  }

  /** `name` started at `at`. */
  started(name: string, at: number): void {
    this.tracker(name).ok(at);
  }

  /**
   * The state of `name` for one cluster now: its start, then its connection (`state()` of the started integration:
   * `disconnected` fails), then the cluster's channel (`channelProblem`).
   */
  of(name: string, now: number, running?: { state?(): string; channelProblem?(cluster: string): { error: string; at: number } | undefined }, cluster?: string): AccessState {
    const t = this.tracker(name);
    if (running) {
      if (running.state?.() === 'disconnected') t.fail('disconnected: the Socket Mode connection is down (reconnecting)', now);
      else if (t.state().state !== 'ok') t.ok(now);
      if (cluster !== undefined && running.channelProblem && t.state().state === 'ok') {
        // The channel's problem as first seen on the service clock (the Slack API keeps wall-clock times).
        const c = this.tracker(`${name}\0channel\0${cluster}`);
        const p = running.channelProblem(cluster);
        if (p) c.fail(`cannot post to the cluster's alert channel: Slack answered ${p.error}`, now);
        else c.ok(now);
        if (p) return c.state();
      }
    }
    const s = t.state();
    return s.state === 'pending' ? { state: 'pending', detail: 'starting' } : s;
  }
}
