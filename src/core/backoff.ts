/**
 * Exponential backoff, defined once: the delay before retry number `retry` (0 for the first retry) is
 * `baseMs · 2^retry`, at most `capMs`. Callers add their own jitter where many clients retry at once (the CloudWatch
 * source draws from [delay/2, delay], AWS's "equal jitter":
 * https://aws.amazon.com/blogs/architecture/exponential-backoff-and-jitter/).
 *
 * @param baseMs the first delay, ms; @param retry how many retries came before this one (≥ 0);
 * @param capMs the largest delay, ms (default: none).
 * @returns the delay, ms.
 */
export function backoffDelay(baseMs: number, retry: number, capMs = Number.POSITIVE_INFINITY): number {
  return Math.min(baseMs * 2 ** Math.max(0, retry), capMs);
}
