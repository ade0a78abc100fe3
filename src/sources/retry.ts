/**
 * The CloudWatch source's own retry layer, around the SDK's: when the SDK has spent its `maxAttempts` on a
 * throttled or failing request, the source waits (exponential backoff with jitter) and tries again, within a
 * bounded number of retries and a bounded time per poll. Then it gives up with a {@link SourceError}.
 *
 * Why two layers: FilterLogEvents is limited to 5 requests/s per account and Region and that quota cannot be raised
 * (repost.aws knowledge-center/cloudwatch-logs-throttling); many clusters polling the same account can see long
 * throttling storms, and the SDK's retry quota (token bucket) may refuse retries during one.
 */
import { backoffDelay } from '../core/backoff.js';
import { setTimeout as wait } from 'node:timers/promises';
import { SourceError } from './types.js';

/** Retry settings of the source's own layer. */
export interface RetryPolicy {
  /** First backoff delay, ms (doubles per retry). Default 1,000. */
  baseDelayMs: number;
  /** Largest single delay, ms. Default 20,000. */
  maxDelayMs: number;
  /** Retries (after the SDK's own attempts) per poll. Default 8. */
  maxRetries: number;
  /** Total time the poll may spend in backoff, ms. Default 120,000. */
  budgetMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { baseDelayMs: 1_000, maxDelayMs: 20_000, maxRetries: 8, budgetMs: 120_000 };

/** AWS error codes of throttling (smithy `THROTTLING_ERROR_CODES` plus Logs' `LimitExceededException` for query concurrency). */
const THROTTLING_CODES = new Set([
  'ThrottlingException',
  'Throttling',
  'ThrottledException',
  'RequestThrottledException',
  'TooManyRequestsException',
  'RequestLimitExceeded',
  'ProvisionedThroughputExceededException',
  'LimitExceededException',
]);

const TRANSIENT_CODES = new Set([
  'ServiceUnavailableException',
  'ServiceUnavailable',
  'InternalFailure',
  'InternalServerError',
  'InternalServiceError',
  'RequestTimeout',
  'RequestTimeoutException',
  'TimeoutError',
]);

const NETWORK_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'ETIMEDOUT', 'EPIPE', 'EAI_AGAIN', 'ENOTFOUND', 'ECONNABORTED']);

/** The error's AWS code (`name`), or Node's `code`, or `Error`. */
export function errorCode(err: unknown): string {
  if (err && typeof err === 'object') {
    const e = err as { name?: unknown; code?: unknown; Code?: unknown };
    if (typeof e.code === 'string' && NETWORK_CODES.has(e.code)) return e.code;
    if (typeof e.name === 'string' && e.name !== 'Error') return e.name;
    if (typeof e.Code === 'string') return e.Code;
    if (typeof e.code === 'string') return e.code;
  }
  return 'Error';
}

/** True for throttling errors. */
export function isThrottling(err: unknown): boolean {
  return THROTTLING_CODES.has(errorCode(err));
}

/** True for errors a later attempt may not get: throttling, 5xx, timeouts, connection errors. */
export function isRetryable(err: unknown): boolean {
  const code = errorCode(err);
  if (THROTTLING_CODES.has(code) || TRANSIENT_CODES.has(code) || NETWORK_CODES.has(code)) return true;
  if (err && typeof err === 'object') {
    const status = (err as { $metadata?: { httpStatusCode?: unknown } }).$metadata?.httpStatusCode;
    if (typeof status === 'number' && status >= 500) return true;
  }
  return false;
}

/**
 * Resolves after `ms` (`node:timers/promises`), or rejects with the signal's own reason when it aborts, as the file
 * source does (`node:timers/promises` alone would reject with a generic `AbortError`).
 */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  try {
    await wait(ms, undefined, signal === undefined ? undefined : { signal });
  } catch (err) {
    if (signal?.aborted) throw signal.reason;
    throw err;
  }
}

/** Tracks one poll's retries. */
export class RetryBudget {
  private retries = 0;
  private waitedMs = 0;
  private readonly started = performance.now();

  constructor(
    private readonly policy: RetryPolicy,
    private readonly sourceId: string,
    private readonly describe: string,
    private readonly random: () => number = Math.random,
  ) {}

  /**
   * Handles a failed request: waits and returns when it may be retried; throws a {@link SourceError} when the
   * error is not retryable or the budget is spent; rethrows an abort.
   */
  async onError(err: unknown, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) throw signal.reason;
    const code = errorCode(err);
    const message = err instanceof Error ? err.message : String(err);
    if (!isRetryable(err)) {
      throw new SourceError(`${this.describe} failed: ${code}: ${message}`, this.sourceId, code, false, { cause: err });
    }
    const capped = backoffDelay(this.policy.baseDelayMs, this.retries, this.policy.maxDelayMs);
    const delay = Math.round(capped / 2 + (capped / 2) * this.random());
    if (this.retries >= this.policy.maxRetries || this.waitedMs + delay > this.policy.budgetMs) {
      const secs = ((performance.now() - this.started) / 1000).toFixed(1);
      throw new SourceError(
        `${this.describe} failed: ${code}: ${message} (gave up after ${this.retries} retries of its own over ${secs} s, each after the SDK's own attempts)`,
        this.sourceId,
        code,
        true,
        { cause: err },
      );
    }
    this.retries++;
    this.waitedMs += delay;
    await sleep(delay, signal);
  }

  /** Call after a successful request: the retry count restarts (the time budget does not). */
  onSuccess(): void {
    this.retries = 0;
  }
}
