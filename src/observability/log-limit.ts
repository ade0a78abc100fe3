/**
 * A log-line limiter for events an outsider can repeat at will (e.g. Slack requests with a bad signature): the first
 * occurrence is logged, further ones within `intervalMs` are only counted, and the next logged line says how many were
 * left out. Memory is constant (two numbers). The count of every occurrence belongs in a metric, not here. Pure
 * except for the injected clock.
 */

/** See the module docstring. */
export class LogRateLimit {
  private lastLogged = Number.NEGATIVE_INFINITY;
  private suppressed = 0;

  /**
   * @param intervalMs at most one line per this many ms (> 0)
   * @param now clock, epoch ms (default `Date.now`)
   * @throws RangeError when `intervalMs` is not a positive finite number
   */
  constructor(
    readonly intervalMs: number,
    private readonly now: () => number = Date.now,
  ) {
    if (!(intervalMs > 0) || !Number.isFinite(intervalMs)) throw new RangeError(`intervalMs must be a positive number, got ${intervalMs}`);
  }

  /**
   * Records one occurrence.
   * @returns undefined when this occurrence is not to be logged; otherwise how many occurrences were left out
   *   since the last logged one (0 for the first).
   */
  take(): number | undefined {
    const t = this.now();
    if (t - this.lastLogged < this.intervalMs) {
      this.suppressed++;
      return undefined;
    }
    this.lastLogged = t;
    const left = this.suppressed;
    this.suppressed = 0;
    return left;
  }
}
