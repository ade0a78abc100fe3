/**
 * The sandbox's simulated clock. Sandbox time starts at a given instant and runs `speed` times faster than the wall
 * clock, so tokens age (and a fresh bound token turns stale one sandbox hour after it is issued) in minutes instead
 * of hours. Everything that reasons about token age shares it: the replayed audit events' timestamps, the cluster
 * simulation's object timestamps, the fake Slack's message `ts`, and `tokenwatch serve` (`composeServe({ clock })`).
 * Wall-clock concerns stay on the wall clock: Slack request signatures (Bolt rejects timestamps more than five
 * minutes off), the poll schedule, the rollout pace.
 *
 * All values are epoch milliseconds, UTC.
 */

/** Options of {@link SimClock}. */
export interface SimClockOptions {
  /** Sandbox time at creation, epoch ms. */
  start: number;
  /** Sandbox milliseconds per wall-clock millisecond; at least 1. */
  speed: number;
  /** Wall clock, epoch ms (default `Date.now`). */
  realNow?: () => number;
}

/**
 * A monotonic sandbox clock: `now() = start + (wall − wallAtStart) × speed`, floored to whole milliseconds and never
 * going backwards (a wall-clock step back holds it still).
 * @throws RangeError when `speed` is not a finite number ≥ 1.
 */
export class SimClock {
  readonly speed: number;
  private readonly start: number;
  private readonly realNow: () => number;
  private readonly realStart: number;
  private last: number;

  constructor(opts: SimClockOptions) {
    if (!Number.isFinite(opts.speed) || opts.speed < 1) throw new RangeError(`speed must be a number ≥ 1, got ${opts.speed}`);
    this.speed = opts.speed;
    this.start = Math.floor(opts.start);
    this.realNow = opts.realNow ?? Date.now;
    this.realStart = this.realNow();
    this.last = this.start;
  }

  /** Sandbox time, epoch ms. */
  now(): number {
    const t = this.start + Math.floor((this.realNow() - this.realStart) * this.speed);
    if (t > this.last) this.last = t;
    return this.last;
  }

  /** Wall-clock milliseconds that cover `simMs` sandbox milliseconds (rounded up). */
  toReal(simMs: number): number {
    return Math.ceil(simMs / this.speed);
  }

  /** Bound `now`, for passing as a `() => number` clock. */
  readonly fn = (): number => this.now();
}

/**
 * A strictly increasing clock over `base` (each call returns at least the previous value + 1 ms), with a pin used
 * while restoring the fake Slack's messages: while pinned, `now()` returns the pinned value (and later calls continue
 * above it). The fake Slack derives message `ts` from its clock; strictly increasing milliseconds make every `ts`
 * exactly `<ms/1000>.<ms%1000>000`, so a saved message can be restored under its original `ts`.
 */
export class StrictClock {
  private last = 0;
  private pinned: number | undefined;

  constructor(private readonly base: () => number) {}

  /** Epoch ms, strictly greater than any earlier answer (unless pinned). */
  now(): number {
    if (this.pinned !== undefined) {
      this.last = Math.max(this.last, this.pinned);
      return this.pinned;
    }
    const t = Math.max(this.base(), this.last + 1);
    this.last = t;
    return t;
  }

  /** Makes `now()` answer `ms` until {@link unpin}. */
  pin(ms: number): void {
    this.pinned = ms;
  }

  unpin(): void {
    this.pinned = undefined;
  }

  readonly fn = (): number => this.now();
}

/** The epoch ms a Slack `ts` (`"1795176000.123000"`) stands for, floored to whole milliseconds. */
export function tsToMs(ts: string): number {
  const [sec, frac = ''] = ts.split('.');
  return Number(sec) * 1000 + Math.floor(Number((frac + '000000').slice(0, 6)) / 1000);
}
