/**
 * Event times that cannot be trusted: the one rule `scan` uses to keep a wrong clock (a control-plane node whose clock
 * runs days ahead or behind, kubernetes/kubernetes#124022) or a forged timestamp from setting the reference time,
 * stretching the readiness window, or making phantom tokens and rejection dates (`warnAfter = eventTime − seconds`).
 *
 * The rule (docs/clock-skew.md), on the input's token-use times plus the times of the other events of each file's first
 * and last lines (`src/scan/latest-event.ts` `EdgeTimeSink`) and event times sampled across the middle of every file,
 * each standing for the events up to the next sample (`JsonlScanner.sampleTimes`, {@link EventTimeDensity.addSample}):
 * 1. **Host clock**: a time later than the scanning host's clock plus {@link HOST_CLOCK_MARGIN_MS} (24 h) is inconsistent.
 * 2. **Density**: the remaining times are put in one-hour buckets and split into groups wherever two consecutive
 *    non-empty buckets lie more than {@link SKEW_GAP_MS} (24 h) apart. The group standing for the most events is the
 *    bulk of the input. When the bulk holds at least {@link MIN_BULK_TIMES} (10) times read (a sample is one), every
 *    other group that stands for at most {@link MAX_SKEWED_SHARE} (a quarter) as many events as the bulk is inconsistent — however close its own times are
 *    to each other, so a group of 10 events stamped 2 or 8 days ahead of an hour of normal events is caught, before or
 *    after the bulk alike.
 * A real pause in the audit log followed by a small burst also matches rule 2: such times are never silently dropped —
 * they are listed (`ignoredEventTimes`, stderr, the table footer) with their file, and `--now` overrides the reference
 * time.
 *
 * Pure: no I/O. Times are epoch ms UTC.
 */
import { HOUR_MS } from '../core/units.js';

/** Rule 1's margin over the host clock: 24 h (a real API server's clock and the host's differ by far less). */
export const HOST_CLOCK_MARGIN_MS = 24 * HOUR_MS;
/** Rule 2's gap: groups of times more than 24 h apart are judged separately (catches a 2-day and an 8-day skew). */
export const SKEW_GAP_MS = 24 * HOUR_MS;
/** Rule 2 judges only when the bulk holds at least this many times (a sparse input has no bulk to compare with). */
export const MIN_BULK_TIMES = 10;
/** Rule 2: a group apart from the bulk is inconsistent when it holds at most this share of the bulk's count. */
export const MAX_SKEWED_SHARE = 0.25;

/** An event time (or range of them) left out as inconsistent, and why (the `ignoredEventTimes` entries of `scan`). */
export interface IgnoredEventTime {
  /** The (earliest) time, ISO-8601 UTC. */
  time: string;
  /** Why it was left out, with the numbers of the rule that caught it. */
  reason: string;
  /** Additive: the latest time of the range, ISO-8601 UTC, when the entry stands for several times. */
  until?: string;
  /** Additive: how many event times (token uses, events of a file's first or last lines, sampled events) the entry stands for. */
  count?: number;
  /** Additive: the input file(s) that hold them, when known. */
  source?: string;
}

interface Bucket {
  /** Events the bucket's times stand for (a sample stands for many). */
  count: number;
  /** Times read into the bucket (a sample is one). */
  reads: number;
  min: number;
  max: number;
}

/** Counts of event times per UTC hour, with each hour's earliest and latest time. Memory: one entry per distinct hour. */
export class EventTimeDensity {
  private readonly buckets = new Map<number, Bucket>();

  /**
   * Adds `n` times at `t` (epoch ms). `n` = 0 adds a time that counts for no further event (a file's first or last
   * event time, already counted or a line the prefilter passes that is no token use): it extends its hour's range, and
   * a group of such times alone is judged with no weight.
   */
  add(t: number, n = 1): void {
    this.put(t, n, n);
  }

  /**
   * Adds one time sampled from the middle of an input (`JsonlScanner.sampleTimes`) that stands for `weight` events: it
   * counts `weight` times towards its group's size, but as one time read towards {@link MIN_BULK_TIMES}.
   */
  addSample(t: number, weight: number): void {
    this.put(t, weight, 1);
  }

  private put(t: number, n: number, reads: number): void {
    const h = Math.floor(t / HOUR_MS);
    const b = this.buckets.get(h);
    if (b) {
      b.count += n;
      b.reads += reads;
      if (t < b.min) b.min = t;
      if (t > b.max) b.max = t;
    } else {
      this.buckets.set(h, { count: n, reads, min: t, max: t });
    }
  }

  /** The buckets, earliest first. */
  sorted(): Bucket[] {
    return [...this.buckets.entries()].sort((a, b) => a[0] - b[0]).map(([, b]) => b);
  }
}

/** A contiguous range of inconsistent times, [from, to] inclusive, with the reason. */
interface SkewedRange {
  from: number;
  to: number;
  count: number;
  reason: string;
}

/** What {@link judgeEventTimes} found. */
export interface EventTimeJudgement {
  /** True when `t` is inconsistent (later than the ceiling, or inside a range rule 2 caught). */
  inconsistent(t: number): boolean;
  /** The consistent times' earliest and latest, when any. */
  earliest?: number;
  latest?: number;
  /** The inconsistent ranges, earliest first (without files: the caller adds them). */
  ignored: IgnoredEventTime[];
}

const iso = (t: number) => new Date(t).toISOString();

/** Applies the module's rule to `density` with the host clock `hostNow` (epoch ms). Pure. */
export function judgeEventTimes(density: EventTimeDensity, hostNow: number): EventTimeJudgement {
  const ceiling = hostNow + HOST_CLOCK_MARGIN_MS;
  const all = density.sorted();
  const ranges: SkewedRange[] = [];
  const late = all.filter((b) => b.max > ceiling);
  const kept = all.filter((b) => b.max <= ceiling);
  // A bucket straddling the ceiling (the hour of host clock + 24 h): its times after the ceiling are inconsistent too.
  if (late.length > 0) {
    ranges.push({
      from: Math.max(ceiling + 1, late[0]!.min),
      to: late[late.length - 1]!.max,
      count: late.reduce((n, b) => n + b.count, 0),
      reason: `later than the scanning host's clock plus ${HOST_CLOCK_MARGIN_MS / HOUR_MS} h (${iso(ceiling)})`,
    });
  }
  // Rule 2: groups split at gaps of more than SKEW_GAP_MS.
  const groups: Bucket[][] = [];
  for (const b of kept) {
    const last = groups[groups.length - 1];
    if (last && b.min - last[last.length - 1]!.max <= SKEW_GAP_MS) last.push(b);
    else groups.push([b]);
  }
  const sum = (g: Bucket[]) => g.reduce((n, b) => n + b.count, 0);
  let bulk = 0;
  for (let i = 1; i < groups.length; i++) if (sum(groups[i]!) >= sum(groups[bulk]!)) bulk = i; // ties: the later group
  const consistent: Bucket[] = [];
  const bulkCount = groups.length > 0 ? sum(groups[bulk]!) : 0;
  // The bulk must hold 10 times read: a sample stands for the events of up to 256 KiB of lines, but is one time read.
  const bulkReads = groups.length > 0 ? groups[bulk]!.reduce((n, b) => n + b.reads, 0) : 0;
  for (const [i, g] of groups.entries()) {
    const n = sum(g);
    if (i !== bulk && bulkReads >= MIN_BULK_TIMES && n <= bulkCount * MAX_SKEWED_SHARE) {
      const b = groups[bulk]!;
      const from = g[0]!.min;
      const to = g[g.length - 1]!.max;
      const apart = i < bulk ? b[0]!.min - to : from - b[b.length - 1]!.max;
      ranges.push({
        from,
        to,
        count: Math.max(1, n),
        reason:
          `${n === 0 ? "a file's first or last event time" : `${n} time${n === 1 ? '' : 's'}`} ${Math.floor(apart / HOUR_MS)} h ${i < bulk ? 'before' : 'after'} the bulk of the input ` +
          `(${bulkCount} times, ${iso(b[0]!.min)} to ${iso(b[b.length - 1]!.max)}): more than ${SKEW_GAP_MS / HOUR_MS} h apart ` +
          `and at most ${MAX_SKEWED_SHARE * 100}% as many — a wrong clock on the node that wrote them?`,
      });
    } else {
      consistent.push(...g);
    }
  }
  ranges.sort((a, b) => a.from - b.from);
  return {
    inconsistent: (t) => t > ceiling || ranges.some((r) => t >= r.from && t <= r.to),
    ...(consistent.length > 0 ? { earliest: Math.min(...consistent.map((b) => b.min)), latest: Math.max(...consistent.map((b) => b.max)) } : {}),
    ignored: ranges.map((r) => ({ time: iso(r.from), ...(r.to !== r.from ? { until: iso(r.to) } : {}), count: r.count, reason: r.reason })),
  };
}

/** One line naming the inconsistent times, for the readiness verdict and the table footer. */
export function inconsistentTimesText(ignored: readonly IgnoredEventTime[]): string {
  const n = ignored.reduce((s, t) => s + (t.count ?? 1), 0);
  const first = ignored[0];
  return `${n} event time${n === 1 ? '' : 's'} left out${first ? ` (from ${first.time}${first.source ? ` in ${first.source}` : ''})` : ''}`;
}

/**
 * What a live poll left out by rule 1 (later than the host clock plus {@link HOST_CLOCK_MARGIN_MS}): how many token
 * uses, their earliest and latest event time (ISO-8601 UTC) and the audit source that yielded them.
 */
export interface IgnoredEventTimes {
  count: number;
  first: string;
  last: string;
  source: string;
}

/** Adds one left-out time `t` (epoch ms) of `source` to `so` (undefined: none yet). Pure: returns the new value. */
export function noteIgnoredTime(so: IgnoredEventTimes | undefined, t: number, source: string): IgnoredEventTimes {
  const at = iso(t);
  if (!so) return { count: 1, first: at, last: at, source };
  // ISO-8601 UTC strings of one format order as their times do.
  const [first, , last] = [at, so.first, so.last].sort();
  return { count: so.count + 1, first: first as string, last: last as string, source: so.source };
}

/** The readiness reason and status line of {@link IgnoredEventTimes}. */
export function ignoredTimesText(so: IgnoredEventTimes): string {
  const range = so.first === so.last ? so.first : `${so.first} to ${so.last}`;
  return `${so.count} token use${so.count === 1 ? '' : 's'} stamped ${range} left out of the last poll (${so.source}): later than the host clock plus ${HOST_CLOCK_MARGIN_MS / HOUR_MS} h — a wrong clock on a control-plane node?`;
}
