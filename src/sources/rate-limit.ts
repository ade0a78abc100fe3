/**
 * One CloudWatch Logs request budget per AWS account and Region for the whole deployment: a token bucket per
 * (account, Region, operation), shared by every cluster polled there, in front of every HTTP attempt (SDK retries
 * included), adaptive on `ThrottlingException`.
 *
 * Why: FilterLogEvents allows 5 requests per second per account and Region, StartQuery and GetQueryResults 5 each
 * (CloudWatch Logs quotas, https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/cloudwatch_limits_cwl.html).
 * Clusters that each retry on their own overrun it together and spend most requests on throttling answers.
 *
 * The bucket: `rate` tokens per second, at most {@link BUCKET_BURST} held (requests go out evenly, not in bursts);
 * a request takes one token as it is sent, and when there is none it waits until the next one is due and tries again,
 * so the callers of one bucket never send faster than its rate together, even when their timers fire late at once. Adaptive: a `ThrottlingException` (someone
 * else shares the quota: another tool, a replica) halves the bucket's current rate, down to
 * {@link MIN_RATE_FRACTION} of the configured one; after {@link RECOVER_AFTER_MS} without one it climbs back by
 * {@link RECOVER_PER_SECOND} of the configured rate per second (additive increase, multiplicative decrease).
 *
 * State: behind {@link BucketStateStore}, an atomic read-modify-write per bucket key, so that a store-backed
 * implementation (one row per key in a shared database, updated in a transaction) can share the budget across
 * replicas; {@link MemoryBucketStateStore} is the in-process one.
 */
import { sleep } from './retry.js';

/** The state of one bucket. Times are ms on the limiter's clock. */
export interface BucketState {
  /** Tokens now, 0 to {@link BUCKET_BURST}. */
  tokens: number;
  /** When `tokens` was computed. */
  updatedAt: number;
  /** Current rate, tokens per second (≤ the configured rate; lowered on throttling). */
  rate: number;
  /** Last `ThrottlingException`, if any. */
  lastThrottleAt?: number;
}

/**
 * Where bucket state lives. `update` must be atomic per key: it reads the state (undefined for a new key), calls `fn`
 * once, and stores what `fn` returns as `state` before anyone else reads that key.
 */
export interface BucketStateStore {
  update<T>(key: string, fn: (state: BucketState | undefined) => { state: BucketState; result: T }): T;
}

/** In-process {@link BucketStateStore} (one replica). */
export class MemoryBucketStateStore implements BucketStateStore {
  private readonly states = new Map<string, BucketState>();

  update<T>(key: string, fn: (state: BucketState | undefined) => { state: BucketState; result: T }): T {
    const { state, result } = fn(this.states.get(key));
    this.states.set(key, state);
    return result;
  }

  /** A copy of a bucket's state (tests, status). */
  get(key: string): BucketState | undefined {
    const s = this.states.get(key);
    return s ? { ...s } : undefined;
  }
}

/** Most tokens a bucket holds: 1, so requests are spaced `1 / rate` s apart. */
export const BUCKET_BURST = 1;
/** The lowest current rate, as a fraction of the configured rate. */
export const MIN_RATE_FRACTION = 0.1;
/** Time without throttling before the rate climbs back, ms. */
export const RECOVER_AFTER_MS = 2_000;
/** How fast the rate climbs back: this fraction of the configured rate per second. */
export const RECOVER_PER_SECOND = 0.1;

/** The operations with a budget, and their configured rates (requests per second per account and Region). */
export interface CloudWatchTps {
  filterLogEvents: number;
  startQuery: number;
  getQueryResults: number;
}

/** CloudWatch Logs operation names (the SDK's command names without `Command`) of {@link CloudWatchTps}. */
const OPERATIONS: Record<string, keyof CloudWatchTps> = {
  FilterLogEvents: 'filterLogEvents',
  StartQuery: 'startQuery',
  GetQueryResults: 'getQueryResults',
};

/** Options of {@link CloudWatchRateLimiter}. */
export interface CloudWatchRateLimiterOptions {
  /** Configured rates (`poll.cloudwatchTps`). */
  tps: CloudWatchTps;
  /** Default {@link MemoryBucketStateStore}. */
  store?: BucketStateStore;
  /** Monotonic clock, ms. Default `performance.now` (a shared store needs a clock all replicas share: epoch ms). */
  clock?: () => number;
  /** Told of every throttling answer and rate change (metrics, logs). */
  onThrottle?: (key: string, newRate: number) => void;
}

/**
 * The account of a log group identifier: the 12 digits of an ARN (`arn:aws:logs:<region>:<account>:log-group:…`), or
 * `self` for a bare name (the credentials' own account).
 */
export function accountOfLogGroup(logGroup: string): string {
  const m = /^arn:[^:]+:logs:[^:]*:(\d{12}):/.exec(logGroup);
  return m ? m[1]! : 'self';
}

/** The request budget; see the module docstring. */
export class CloudWatchRateLimiter {
  private readonly store: BucketStateStore;
  private readonly clock: () => number;

  constructor(private readonly opts: CloudWatchRateLimiterOptions) {
    this.store = opts.store ?? new MemoryBucketStateStore();
    this.clock = opts.clock ?? (() => performance.now());
  }

  /** The bucket key of an operation in an account and Region, or undefined for an operation without a budget. */
  keyOf(account: string, region: string, operation: string): string | undefined {
    return OPERATIONS[operation] ? `${account}/${region}/${operation}` : undefined;
  }

  private rateOf(key: string): number {
    const op = OPERATIONS[key.slice(key.lastIndexOf('/') + 1)];
    return op ? this.opts.tps[op] : Infinity;
  }

  /**
   * Takes a token of bucket `key`, waiting for one when there is none.
   * @throws the signal's reason when `signal` aborts while waiting
   */
  async acquire(key: string, signal?: AbortSignal): Promise<void> {
    const max = this.rateOf(key);
    if (!Number.isFinite(max)) return;
    // Take a token when there is one; otherwise wait until one is due and try again. Tokens are taken when requests
    // are sent, not reserved ahead: callers whose timers fire late together (a busy event loop) cannot burst.
    for (;;) {
      if (signal?.aborted) throw signal.reason;
      const now = this.clock();
      const waitMs = this.store.update(key, (s) => {
        const st: BucketState = s ? { ...s } : { tokens: BUCKET_BURST, updatedAt: now, rate: max };
        const dt = Math.max(0, now - st.updatedAt) / 1000;
        st.rate = Math.min(st.rate, max);
        if (st.rate < max && (st.lastThrottleAt === undefined || now - st.lastThrottleAt >= RECOVER_AFTER_MS)) {
          st.rate = Math.min(max, st.rate + dt * max * RECOVER_PER_SECOND);
        }
        st.tokens = Math.min(BUCKET_BURST, st.tokens + dt * st.rate);
        st.updatedAt = now;
        if (st.tokens >= 1) {
          st.tokens -= 1;
          return { state: st, result: 0 };
        }
        return { state: st, result: ((1 - st.tokens) / st.rate) * 1000 };
      });
      if (waitMs <= 0) return;
      await sleep(Math.max(1, Math.ceil(waitMs)), signal);
    }
  }

  /** A `ThrottlingException` from bucket `key`'s operation: halves its current rate (not below the floor). */
  throttled(key: string): void {
    const max = this.rateOf(key);
    if (!Number.isFinite(max)) return;
    const now = this.clock();
    const rate = this.store.update(key, (s) => {
      const st: BucketState = s ? { ...s } : { tokens: 0, updatedAt: now, rate: max };
      // One halving per burst of throttling answers: answers to requests sent at the old rate arrive together.
      if (st.lastThrottleAt === undefined || now - st.lastThrottleAt >= 1000 / st.rate) st.rate = Math.max(max * MIN_RATE_FRACTION, st.rate / 2);
      st.lastThrottleAt = now;
      return { state: st, result: st.rate };
    });
    this.opts.onThrottle?.(key, rate);
  }
}
