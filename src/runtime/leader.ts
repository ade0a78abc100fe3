/**
 * Leader election over a `coordination.k8s.io/v1` Lease, for running two or more replicas of `tokenwatch serve`
 * where only one polls and executes.
 *
 * Algorithm (the one of client-go `tools/leaderelection/leaderelection.go`, `tryAcquireOrRenew`):
 * every `retryPeriodMs` the elector reads the Lease; when it is missing it creates it (holding it); when it is held
 * by someone else whose record has not changed for `leaseDurationSeconds` **as observed on the local clock**
 * (so clock skew between nodes does not matter), or held by nobody (`holderIdentity` empty: released), or held by
 * this identity, it replaces the Lease with itself as holder, sending the `metadata.resourceVersion` it read, so a
 * concurrent writer makes it fail with 409 Conflict (lost the race). The leader renews every `retryPeriodMs`; if it
 * cannot renew for `renewDeadlineMs` (< lease duration) it steps down, before any other replica can take over.
 * `stop()` releases the Lease (`holderIdentity: ""`, `leaseDurationSeconds: 1`, as client-go's `release()` does), so
 * a follower takes over within one retry period instead of a whole lease duration.
 *
 * Why not a library: client-node 2 ships no elector (docs/design/stack.md §2); `@codedependant/kubernetes-leader-election`
 * 1.0.1 builds its own KubeConfig from the environment (cannot be pointed at a given cluster), acts as leader
 * without any Lease when `KUBERNETES_SERVICE_HOST` is unset, depends on a watch, stops retrying after three
 * attempts, creates Leases with a misspelt `leaseDurationSec` field, and has no renew deadline or drain step.
 *
 * MicroTime: `spec.renewTime` / `spec.acquireTime` are `metav1.MicroTime`, which the API server parses with
 * RFC3339Micro (`2006-01-02T15:04:05.000000Z07:00`, exactly 6 fractional digits; apimachinery
 * `pkg/apis/meta/v1/micro_time.go`); `Date#toISOString()` has 3 and is rejected. client-node's `V1MicroTime`
 * serializes with 6 (docs/design/stack.md §2), so every time sent is a `V1MicroTime`.
 *
 * RBAC: get, create, update `leases` in the elector's namespace (`LEADER_API_CALLS` in test/manifests/rbac-calls.ts, which the RBAC test checks against the manifests).
 */
import { ErrorCode, TokenwatchError } from '../errors.js';
import { EventEmitter } from 'node:events';
import {
  ApiException,
  CoordinationV1Api,
  V1MicroTime,
  type ConfigurationOptions,
  type KubeConfig,
  type V1Lease,
} from '@kubernetes/client-node';
import { timeoutOptions } from '../cluster/kube.js';


/** Minimal structured logger (pino's `Logger` fits). */
export interface ElectorLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  debug?(obj: object, msg: string): void;
}

/** Options of {@link LeaderElector}. All durations are milliseconds. */
export interface LeaderElectorOptions {
  /** Cluster access (in a pod: `kubeConfigFor({ inCluster: true })`). */
  kubeConfig: KubeConfig;
  /** Namespace of the Lease (the pod's own, env `POD_NAMESPACE`). */
  namespace: string;
  /** Name of the Lease; default `tokenwatch`. The leader-election Role is limited to this name. */
  leaseName?: string;
  /** Unique identity of this replica (the pod name, env `POD_NAME`). */
  identity: string;
  /** How long a lease is valid without renewal; written as whole seconds (rounded up). Default 15,000. */
  leaseDurationMs?: number;
  /** The leader steps down when it could not renew for this long; must be < lease duration. Default 10,000. */
  renewDeadlineMs?: number;
  /** Interval between attempts (leader: renewals); followers add up to `jitter` × this. Default 2,000. */
  retryPeriodMs?: number;
  /** Timeout of each API request. Default `renewDeadlineMs / 2`. */
  requestTimeoutMs?: number;
  /** Extra random wait of followers as a fraction of `retryPeriodMs` (client-go JitterFactor 1.2). Default 0.2. */
  jitter?: number;
  /** Clock: epoch milliseconds (UTC). Default `Date.now`. */
  now?: () => number;
  /** Random number in [0, 1) for the jitter. Default `Math.random`. */
  random?: () => number;
  /**
   * Called once by {@link LeaderElector.stop}, before the Lease is released, while it is still held and renewed:
   * wait for in-flight work here (e.g. `scheduler.stop()`), so no other replica starts while it runs.
   */
  beforeRelease?: () => Promise<void>;
  logger?: ElectorLogger;
}

/** A Lease as the elector sees it. Times are epoch ms (UTC). */
export interface LeaseRecord {
  holderIdentity: string;
  leaseDurationSeconds: number;
  acquireTime?: number;
  renewTime?: number;
  leaseTransitions: number;
  resourceVersion?: string;
}

/** What the elector saw last of someone else's lease: the record and when (local clock, epoch ms) it changed. */
export interface Observation {
  key: string;
  at: number;
}

/** Result of {@link decide}. */
export type LeaseDecision =
  | { action: 'acquire'; transitions: number }
  | { action: 'renew'; transitions: number }
  | { action: 'wait'; holder: string; expiresAt: number };

/**
 * Pure decision of one attempt on an existing Lease (client-go `tryAcquireOrRenew`).
 * @param lease the Lease read
 * @param observedAt when (local clock, epoch ms) this exact record was first seen
 * @param identity this replica's identity
 * @param now local time, epoch ms
 * @returns `renew` (ours), `acquire` (free, released or expired; `transitions` is the new leaseTransitions) or
 *   `wait` with the holder and when (local clock) the lease expires unless renewed.
 */
export function decide(lease: LeaseRecord, observedAt: number, identity: string, now: number): LeaseDecision {
  if (lease.holderIdentity === identity) return { action: 'renew', transitions: lease.leaseTransitions };
  const expiresAt = observedAt + lease.leaseDurationSeconds * 1000;
  if (lease.holderIdentity !== '' && now < expiresAt) return { action: 'wait', holder: lease.holderIdentity, expiresAt };
  return { action: 'acquire', transitions: lease.leaseTransitions + 1 };
}

/** Epoch ms of a MicroTime as client-node hands it over (string with 6 fractional digits, or a Date), else undefined. */
export function parseMicroTime(v: unknown): number | undefined {
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? undefined : v.getTime();
  if (typeof v !== 'string' || v === '') return undefined;
  const ms = Date.parse(v);
  return Number.isNaN(ms) ? undefined : ms;
}

/** The {@link LeaseRecord} of a Lease object. */
export function toLeaseRecord(lease: V1Lease): LeaseRecord {
  const s = lease.spec ?? {};
  const rec: LeaseRecord = {
    holderIdentity: s.holderIdentity ?? '',
    leaseDurationSeconds: s.leaseDurationSeconds ?? 0,
    leaseTransitions: s.leaseTransitions ?? 0,
  };
  const acquire = parseMicroTime(s.acquireTime);
  const renew = parseMicroTime(s.renewTime);
  if (acquire !== undefined) rec.acquireTime = acquire;
  if (renew !== undefined) rec.renewTime = renew;
  if (lease.metadata?.resourceVersion) rec.resourceVersion = lease.metadata.resourceVersion;
  return rec;
}

/** Leader-election settings from a pod's environment (Downward API), or undefined outside a pod. */
export function electionFromEnv(env: NodeJS.ProcessEnv = process.env): { namespace: string; identity: string; leaseName: string } | undefined {
  const identity = env['POD_NAME']?.trim();
  const namespace = env['POD_NAMESPACE']?.trim();
  if (!identity || !namespace) return undefined;
  return { identity, namespace, leaseName: env['TOKENWATCH_LEASE_NAME']?.trim() || 'tokenwatch' };
}

/** State for status displays (`/tokens status`). */
export interface ElectorStatus {
  identity: string;
  /** Whether this replica may start work now ({@link LeaderElector.isLeader}). */
  leader: boolean;
  /** Holder of the Lease last seen ('' = released or unknown). */
  holder: string;
  /** The last failure of an API call (e.g. a missing RBAC permission), cleared by the next success. */
  lastError?: string;
}

/** Events: `started` (became leader), `stopped` (no longer leader: lost, released or crashed renewals), `leader` (a new holder was seen). */
export interface LeaderElectorEvents {
  started: [];
  stopped: [reason: string];
  leader: [identity: string];
}

type Attempt = { ok: true; transitions: number } | { ok: false; heldBy?: string };

/** HTTP status of a client-node error, or undefined. */
function statusOf(err: unknown): number | undefined {
  return err instanceof ApiException ? err.code : undefined;
}

/** A one-line reason for a failed call; a 403 names the RBAC rule needed. */
function describeError(err: unknown, what: string, namespace: string): string {
  if (err instanceof ApiException) {
    let message = '';
    const body: unknown = err.body;
    let parsed: unknown = body;
    if (typeof body === 'string') {
      try {
        parsed = JSON.parse(body);
      } catch {
        message = body.slice(0, 300);
      }
    }
    if (typeof parsed === 'object' && parsed !== null && 'message' in parsed && typeof parsed.message === 'string') message = parsed.message;
    if (err.code === 403) {
      return `${what}: forbidden: ${message} (RBAC rule needed in namespace ${namespace}: apiGroups ["coordination.k8s.io"], resources ["leases"], verbs ["get","create","update"])`;
    }
    return `${what}: HTTP ${err.code}${message ? `: ${message}` : ''}`;
  }
  const e = err as { name?: string; message?: string };
  if (e?.name === 'AbortError' || e?.name === 'TimeoutError') return `${what}: request timed out`;
  return `${what}: ${e?.message ?? String(err)}`;
}

/**
 * A leader elector over one Lease. Use: `const el = new LeaderElector(opts); el.start();` gate work on
 * `el.isLeader()` (e.g. the scheduler's `shouldRun`), and on SIGTERM `await el.stop()`.
 */
export class LeaderElector extends EventEmitter<LeaderElectorEvents> {
  readonly identity: string;
  readonly namespace: string;
  readonly leaseName: string;
  private readonly api: CoordinationV1Api;
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private readonly requestTimeoutMs: number;
  private readonly jitter: number;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly log: ElectorLogger;
  private readonly beforeRelease: (() => Promise<void>) | undefined;

  private leading = false;
  private draining = false;
  private lastRenewAt = Number.NEGATIVE_INFINITY;
  private observed: Observation | undefined;
  private holder = '';
  private lastError: string | undefined;
  private loop: Promise<void> | undefined;
  private stopLoop = false;
  private wake: (() => void) | undefined;
  private stopping: Promise<void> | undefined;

  /** @throws RangeError unless leaseDuration > renewDeadline > retryPeriod > 0 and leaseDuration ≥ 1 s. */
  constructor(opts: LeaderElectorOptions) {
    super();
    this.identity = opts.identity;
    this.namespace = opts.namespace;
    this.leaseName = opts.leaseName ?? 'tokenwatch';
    this.leaseDurationMs = opts.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = opts.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = opts.retryPeriodMs ?? 2_000;
    this.requestTimeoutMs = opts.requestTimeoutMs ?? Math.floor(this.renewDeadlineMs / 2);
    this.jitter = opts.jitter ?? 0.2;
    this.now = opts.now ?? Date.now;
    this.random = opts.random ?? Math.random;
    this.log = opts.logger ?? { info: () => undefined, warn: () => undefined };
    this.beforeRelease = opts.beforeRelease;
    if (!this.identity) throw new RangeError('leader election: identity must not be empty');
    if (!(this.retryPeriodMs > 0 && this.renewDeadlineMs > this.retryPeriodMs && this.leaseDurationMs > this.renewDeadlineMs)) {
      throw new RangeError(
        `leader election: need leaseDuration > renewDeadline > retryPeriod > 0 (got ${this.leaseDurationMs} ms, ${this.renewDeadlineMs} ms, ${this.retryPeriodMs} ms)`,
      );
    }
    if (this.leaseDurationMs < 1000) throw new RangeError('leader election: leaseDuration must be at least 1000 ms (the Lease stores whole seconds)');
    this.api = opts.kubeConfig.makeApiClient(CoordinationV1Api);
  }

  /** Starts the election loop (idempotent). @throws Error after {@link stop}. */
  start(): void {
    if (this.stopping) throw new TokenwatchError(ErrorCode.LeaderElection, 'leader election: start() after stop()');
    if (this.loop) return;
    this.loop = this.run();
  }

  /**
   * Whether this replica may start work now: it holds the Lease, renewed it less than `renewDeadlineMs` ago,
   * and {@link stop} has not been called.
   */
  isLeader(): boolean {
    return this.leading && !this.draining && this.now() - this.lastRenewAt < this.renewDeadlineMs;
  }

  /** Current state, for status displays. */
  status(): ElectorStatus {
    const s: ElectorStatus = { identity: this.identity, leader: this.isLeader(), holder: this.holder };
    if (this.lastError !== undefined) s.lastError = this.lastError;
    return s;
  }

  /**
   * Stops: no new work (`isLeader()` turns false at once), then `beforeRelease` (while the Lease is still renewed),
   * then the loop ends and — unless `release: false` — the Lease is released so a follower takes over at once.
   * Idempotent; never throws (failures are logged).
   */
  stop(opts: { release?: boolean } = {}): Promise<void> {
    this.stopping ??= this.shutdown(opts.release ?? true);
    return this.stopping;
  }

  private async shutdown(release: boolean): Promise<void> {
    this.draining = true;
    if (this.beforeRelease) {
      try {
        await this.beforeRelease();
      } catch (err) {
        this.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'leader election: beforeRelease failed; releasing anyway');
      }
    }
    this.stopLoop = true;
    this.wake?.();
    await this.loop;
    if (this.leading) {
      if (release) await this.release();
      this.setFollower(release ? 'released' : 'stopped without release');
    }
  }

  private async run(): Promise<void> {
    while (!this.stopLoop) {
      const sentAt = this.now();
      let attempt: Attempt;
      try {
        attempt = await this.tryAcquireOrRenew(sentAt);
        this.clearError();
      } catch (err) {
        attempt = { ok: false };
        this.noteError(describeError(err, `leader election on lease ${this.namespace}/${this.leaseName}`, this.namespace));
      }
      if (attempt.ok) {
        // The server wrote renewTime after sentAt; other replicas measure the lease from when they saw it, so
        // counting from sentAt keeps this replica's deadline before anyone else's takeover.
        this.lastRenewAt = sentAt;
        if (!this.leading) {
          this.leading = true;
          this.log.info({ identity: this.identity, lease: `${this.namespace}/${this.leaseName}`, transitions: attempt.transitions }, 'leader election: became leader');
          this.emit('started');
        }
      } else if (this.leading) {
        if (attempt.heldBy !== undefined) this.setFollower(`lease taken by ${attempt.heldBy}`);
        else if (this.now() - this.lastRenewAt >= this.renewDeadlineMs) this.setFollower(`could not renew for ${this.renewDeadlineMs} ms`);
      }
      if (this.stopLoop) break;
      const wait = this.leading ? this.retryPeriodMs : this.retryPeriodMs * (1 + this.jitter * this.random());
      await this.sleep(wait);
    }
  }

  private setFollower(reason: string): void {
    if (!this.leading) return;
    this.leading = false;
    this.log.info({ identity: this.identity, reason }, 'leader election: stopped leading');
    this.emit('stopped', reason);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wake = done;
    });
  }

  private noteError(message: string): void {
    if (message !== this.lastError) this.log.warn({ identity: this.identity }, message);
    this.lastError = message;
  }

  private clearError(): void {
    if (this.lastError !== undefined) this.log.info({ identity: this.identity }, 'leader election: API calls succeed again');
    this.lastError = undefined;
  }

  private seeHolder(holder: string): void {
    if (holder !== this.holder) {
      this.holder = holder;
      if (holder !== '') this.emit('leader', holder);
    }
  }

  private observe(rec: LeaseRecord, at: number): number {
    const key = rec.resourceVersion ?? JSON.stringify(rec);
    if (this.observed?.key !== key) this.observed = { key, at };
    return this.observed.at;
  }

  /** One attempt. Returns ok when this replica holds the Lease afterwards. Throws on unexpected API errors. */
  private async tryAcquireOrRenew(now: number): Promise<Attempt> {
    const o = timeoutOptions(this.requestTimeoutMs);
    let lease: V1Lease;
    try {
      lease = await this.api.readNamespacedLease({ name: this.leaseName, namespace: this.namespace }, o);
    } catch (err) {
      if (statusOf(err) !== 404) throw err;
      return this.create(now, o);
    }
    const rec = toLeaseRecord(lease);
    const observedAt = this.observe(rec, now);
    const d = decide(rec, observedAt, this.identity, now);
    if (d.action === 'wait') {
      this.seeHolder(d.holder);
      return { ok: false, heldBy: d.holder };
    }
    const spec = { ...(lease.spec ?? {}) };
    spec.holderIdentity = this.identity;
    spec.leaseDurationSeconds = Math.ceil(this.leaseDurationMs / 1000);
    spec.renewTime = new V1MicroTime(now);
    if (d.action === 'acquire') {
      spec.acquireTime = new V1MicroTime(now);
      spec.leaseTransitions = d.transitions;
    }
    const body: V1Lease = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: lease.metadata ?? {}, spec };
    let written: V1Lease;
    try {
      written = await this.api.replaceNamespacedLease({ name: this.leaseName, namespace: this.namespace, body }, o);
    } catch (err) {
      if (statusOf(err) === 409) return { ok: false };
      throw err;
    }
    const wrec = toLeaseRecord(written);
    this.observe(wrec, now);
    this.seeHolder(this.identity);
    return { ok: true, transitions: wrec.leaseTransitions };
  }

  private async create(now: number, o: ConfigurationOptions): Promise<Attempt> {
    const body: V1Lease = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: this.leaseName, namespace: this.namespace },
      spec: {
        holderIdentity: this.identity,
        leaseDurationSeconds: Math.ceil(this.leaseDurationMs / 1000),
        acquireTime: new V1MicroTime(now),
        renewTime: new V1MicroTime(now),
        leaseTransitions: 0,
      },
    };
    try {
      const written = await this.api.createNamespacedLease({ namespace: this.namespace, body }, o);
      this.observe(toLeaseRecord(written), now);
    } catch (err) {
      if (statusOf(err) === 409) return { ok: false }; // another replica created it first
      throw err;
    }
    this.seeHolder(this.identity);
    return { ok: true, transitions: 0 };
  }

  /** Gives the Lease up if still ours (client-go `release()`): empty holder, 1-second duration. Logs failures. */
  private async release(): Promise<void> {
    const o = timeoutOptions(this.requestTimeoutMs);
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        const lease = await this.api.readNamespacedLease({ name: this.leaseName, namespace: this.namespace }, o);
        if ((lease.spec?.holderIdentity ?? '') !== this.identity) return;
        const now = this.now();
        const body: V1Lease = {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: lease.metadata ?? {},
          spec: { ...(lease.spec ?? {}), holderIdentity: '', leaseDurationSeconds: 1, acquireTime: new V1MicroTime(now), renewTime: new V1MicroTime(now) },
        };
        await this.api.replaceNamespacedLease({ name: this.leaseName, namespace: this.namespace, body }, o);
        this.holder = '';
        this.log.info({ identity: this.identity, lease: `${this.namespace}/${this.leaseName}` }, 'leader election: released the lease');
        return;
      } catch (err) {
        if (statusOf(err) === 409) continue;
        this.log.warn({ identity: this.identity }, describeError(err, 'leader election: could not release the lease (it expires on its own)', this.namespace));
        return;
      }
    }
  }
}
