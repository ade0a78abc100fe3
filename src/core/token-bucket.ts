/**
 * A token-bucket rate limiter whose state lives behind {@link BucketStateStore}: in process
 * ({@link MemoryBucketStateStore}, one replica) or in a shared database (src/store/rate-buckets.ts, one row per key,
 * read and written in one transaction), so that every replica of a deployment takes its tokens from the same bucket.
 * Reused by every budget of an outside quota: CloudWatch Logs per account, Region and operation
 * (src/sources/rate-limit.ts) and the Slack Web API per workspace and method (src/runtime/build-slack.ts).
 *
 * The bucket of a key ({@link BucketLimits}): `rate` tokens per second, at most `burst` held; a call takes one token
 * as it is made and, when there is none, waits until the next one is due and tries again (tokens are taken when calls
 * go out, not reserved ahead: callers whose timers fire late together cannot burst). Within one process the callers
 * of one key queue behind each other, so only the head of the queue reads the shared state (at most one store
 * transaction per token per replica, not one per waiting caller).
 *
 * Adaptive (`adaptive: true`): {@link TokenBucketLimiter.throttled} — an answer of the service saying the quota was
 * overrun (someone else shares it: another tool, a replica on an older version) — halves the bucket's current rate,
 * down to {@link MIN_RATE_FRACTION} of the configured one; after {@link RECOVER_AFTER_MS} without one it climbs back
 * by {@link RECOVER_PER_SECOND} of the configured rate per second (additive increase, multiplicative decrease).
 *
 * A shared store that fails (database down) does not stop the callers: that call takes its token from an in-process
 * bucket of the same key instead (the budget is then per replica until the store answers again), and `onStoreError`
 * is told.
 */
import { KeyedLock } from './keyed-lock.js';

/** The state of one bucket. Times are ms on the limiter's clock. */
export interface BucketState {
  /** Tokens now, 0 to the bucket's burst. */
  tokens: number;
  /** When `tokens` was computed. */
  updatedAt: number;
  /** Current rate, tokens per second (≤ the configured rate; lowered on throttling). */
  rate: number;
  /** Last throttling answer, if any. */
  lastThrottleAt?: number;
}

/**
 * Where bucket state lives. `update` must be atomic per key: it reads the state (undefined for a new key), calls `fn`
 * once, and stores what `fn` returns as `state` before anyone else (in any process sharing the store) reads that key.
 * @throws when the state cannot be read or written (the limiter then falls back to its in-process bucket)
 */
export interface BucketStateStore {
  update<T>(key: string, fn: (state: BucketState | undefined) => { state: BucketState; result: T }): Promise<T>;
}

/** In-process {@link BucketStateStore} (one replica). */
export class MemoryBucketStateStore implements BucketStateStore {
  private readonly states = new Map<string, BucketState>();

  update<T>(key: string, fn: (state: BucketState | undefined) => { state: BucketState; result: T }): Promise<T> {
    const { state, result } = fn(this.states.get(key));
    this.states.set(key, state);
    return Promise.resolve(result);
  }

  /** A copy of a bucket's state (tests, status). */
  get(key: string): BucketState | undefined {
    const s = this.states.get(key);
    return s ? { ...s } : undefined;
  }
}

/** The lowest current rate of an adaptive bucket, as a fraction of the configured rate. */
export const MIN_RATE_FRACTION = 0.1;
/** Time without throttling before an adaptive bucket's rate climbs back, ms. */
export const RECOVER_AFTER_MS = 2_000;
/** How fast an adaptive bucket's rate climbs back: this fraction of the configured rate per second. */
export const RECOVER_PER_SECOND = 0.1;

/** The configured limits of one key's bucket. */
export interface BucketLimits {
  /** Tokens per second (> 0). */
  rate: number;
  /** Most tokens held (≥ 1): calls allowed back to back before the rate applies. */
  burst: number;
  /** Halve the rate on {@link TokenBucketLimiter.throttled} (see the module docstring). Default false. */
  adaptive?: boolean;
}

/** Options of {@link TokenBucketLimiter}. */
export interface TokenBucketLimiterOptions {
  /** The limits of a key, or undefined for a key without a budget (its calls pass at once). */
  limitsOf: (key: string) => BucketLimits | undefined;
  /** Default {@link MemoryBucketStateStore}. */
  store?: BucketStateStore;
  /**
   * Clock, ms. Default `performance.now` with the in-process store; a shared store needs a clock every replica shares:
   * pass `Date.now` (epoch ms, hosts kept in step by NTP).
   */
  clock?: () => number;
  /** Told of every throttling answer with the bucket's new rate (metrics, logs). */
  onThrottle?: (key: string, newRate: number) => void;
  /** Told when the shared store failed and a call took its token from the in-process bucket instead. */
  onStoreError?: (key: string, err: unknown) => void;
}

/** `ms` later, or the signal's reason as soon as it aborts. */
function wait(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal!.reason as Error);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The limiter; see the module docstring. */
export class TokenBucketLimiter {
  private readonly store: BucketStateStore;
  private readonly local: MemoryBucketStateStore;
  private readonly clock: () => number;
  private readonly queues = new KeyedLock();

  constructor(private readonly opts: TokenBucketLimiterOptions) {
    this.local = new MemoryBucketStateStore();
    this.store = opts.store ?? this.local;
    this.clock = opts.clock ?? (() => performance.now());
  }

  /** The state through the shared store, or the in-process one when the shared store fails. */
  private async update<T>(key: string, fn: (state: BucketState | undefined) => { state: BucketState; result: T }): Promise<T> {
    if (this.store === this.local) return this.local.update(key, fn);
    try {
      return await this.store.update(key, fn);
    } catch (err) {
      this.opts.onStoreError?.(key, err);
      return this.local.update(key, fn);
    }
  }

  /**
   * Takes a token of bucket `key`, waiting for one when there is none (behind earlier callers of `key` in this
   * process).
   * @throws the signal's reason when `signal` aborts while waiting
   */
  acquire(key: string, signal?: AbortSignal): Promise<void> {
    const limits = this.opts.limitsOf(key);
    if (limits === undefined) return Promise.resolve();
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    return this.queues.run(key, () => this.take(key, limits, signal));
  }

  private async take(key: string, limits: BucketLimits, signal?: AbortSignal): Promise<void> {
    const { rate: max, burst } = limits;
    for (;;) {
      if (signal?.aborted) throw signal.reason;
      const now = this.clock();
      const waitMs = await this.update(key, (s) => {
        const st: BucketState = s ? { ...s } : { tokens: burst, updatedAt: now, rate: max };
        const dt = Math.max(0, now - st.updatedAt) / 1000;
        st.rate = Math.min(st.rate, max);
        if (st.rate < max && (st.lastThrottleAt === undefined || now - st.lastThrottleAt >= RECOVER_AFTER_MS)) {
          st.rate = Math.min(max, st.rate + dt * max * RECOVER_PER_SECOND);
        }
        st.tokens = Math.min(burst, st.tokens + dt * st.rate);
        st.updatedAt = Math.max(st.updatedAt, now);
        if (st.tokens >= 1) {
          st.tokens -= 1;
          return { state: st, result: 0 };
        }
        return { state: st, result: ((1 - st.tokens) / st.rate) * 1000 };
      });
      if (waitMs <= 0) return;
      await wait(Math.max(1, Math.ceil(waitMs)), signal);
    }
  }

  /**
   * A throttling answer to a call of bucket `key` (an adaptive one): halves its current rate (not below the floor),
   * once per burst of answers.
   * @returns the bucket's rate after it, or undefined for a key without an adaptive budget
   */
  async throttled(key: string): Promise<number | undefined> {
    const limits = this.opts.limitsOf(key);
    if (limits === undefined || !limits.adaptive) return undefined;
    const max = limits.rate;
    const now = this.clock();
    const rate = await this.update(key, (s) => {
      const st: BucketState = s ? { ...s } : { tokens: 0, updatedAt: now, rate: max };
      // One halving per burst of throttling answers: answers to calls made at the old rate arrive together.
      if (st.lastThrottleAt === undefined || now - st.lastThrottleAt >= 1000 / st.rate) st.rate = Math.max(max * MIN_RATE_FRACTION, st.rate / 2);
      st.lastThrottleAt = now;
      return { state: st, result: st.rate };
    });
    this.opts.onThrottle?.(key, rate);
    return rate;
  }
}
