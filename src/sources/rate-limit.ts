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
 * so the callers of one bucket never send faster than its rate together, even when their timers fire late at once.
 * Adaptive: a `ThrottlingException` (someone else shares the quota: another tool, a replica) halves the bucket's current rate, down to
 * 10 % of the configured one; after 2 s without one it climbs back by 10 % of the configured rate per second
 * (additive increase, multiplicative decrease; the constants of src/core/token-bucket.ts).
 *
 * State: behind {@link BucketStateStore} (src/core/token-bucket.ts, the limiter every outside quota shares): in process
 * with the SQLite store (one replica), or the store's `rate_buckets` table with PostgreSQL, so that replicas share
 * one budget per account and Region (docs/live-mode.md "Shared budgets").
 */
import { type BucketStateStore, TokenBucketLimiter } from '../core/token-bucket.js';

/** Most tokens a bucket holds: 1, so requests are spaced `1 / rate` s apart. */
export const BUCKET_BURST = 1;

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
  /** Default in-process; the store's `rate_buckets` (src/store/rate-buckets.ts) to share the budget across replicas. */
  store?: BucketStateStore;
  /** Clock, ms. Default `performance.now` (a shared store needs a clock all replicas share: `Date.now`). */
  clock?: () => number;
  /** Told of every throttling answer and rate change (metrics, logs). */
  onThrottle?: (key: string, newRate: number) => void;
  /** Told when the shared store failed and a request took its token from the in-process bucket. */
  onStoreError?: (key: string, err: unknown) => void;
}

/**
 * The account of a log group identifier: the 12 digits of an ARN (`arn:aws:logs:<region>:<account>:log-group:…`), or
 * `self` for a bare name (the credentials' own account).
 */
export function accountOfLogGroup(logGroup: string): string {
  const m = /^arn:[^:]+:logs:[^:]*:(\d{12}):/.exec(logGroup);
  return m ? m[1]! : 'self';
}

/** The request budget; see the module docstring. Keys are `<account>/<region>/<operation>`. */
export class CloudWatchRateLimiter extends TokenBucketLimiter {
  constructor(opts: CloudWatchRateLimiterOptions) {
    super({
      limitsOf: (key) => {
        const op = OPERATIONS[key.slice(key.lastIndexOf('/') + 1)];
        return op ? { rate: opts.tps[op], burst: BUCKET_BURST, adaptive: true } : undefined;
      },
      ...(opts.store !== undefined && { store: opts.store }),
      ...(opts.clock !== undefined && { clock: opts.clock }),
      ...(opts.onThrottle !== undefined && { onThrottle: opts.onThrottle }),
      ...(opts.onStoreError !== undefined && { onStoreError: opts.onStoreError }),
    });
  }

  /** The bucket key of an operation in an account and Region, or undefined for an operation without a budget. */
  keyOf(account: string, region: string, operation: string): string | undefined {
    return OPERATIONS[operation] ? `${account}/${region}/${operation}` : undefined;
  }
}
