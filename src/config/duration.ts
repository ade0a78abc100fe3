/**
 * Strict duration strings for the config file: `10m`, `24h`, `30m`, `7d`, `1h30m`, `500ms`.
 *
 * Why not the `ms` package: it is only a transitive dependency here (not declared in package.json), and it
 * accepts inputs that are easy to get wrong in a config file — a bare `"10"` means 10 milliseconds, and
 * negative or fractional values (`-5m`, `1.5h`) and long words (`10 minutes`) are accepted too. This parser
 * accepts only non-negative integers with a unit, optionally chained from the largest unit to the smallest.
 */
import { DAY_MS, HOUR_MS, MINUTE_MS, SECOND_MS, WEEK_MS } from '../core/units.js';
import { ErrorCode, TokenwatchError } from '../errors.js';

/** Units and their length in milliseconds, largest first (the order a chained duration must follow). */
export const DURATION_UNITS = [
  ['w', WEEK_MS],
  ['d', DAY_MS],
  ['h', HOUR_MS],
  ['m', MINUTE_MS],
  ['s', SECOND_MS],
  ['ms', 1],
] as const;

const PART = /(\d+)(ms|w|d|h|m|s)/y;

/** Error thrown by {@link parseDuration}; the message says what is accepted. */
export class DurationError extends TokenwatchError {
  constructor(readonly input: string) {
    super(
      ErrorCode.DurationInvalid,
      `invalid duration ${JSON.stringify(input)}: expected an integer with a unit (ms, s, m, h, d, w), ` +
        `e.g. "10m", "24h", "7d" or "1h30m"`,
    );
    this.name = 'DurationError';
  }
}

/**
 * Parses a duration string into milliseconds.
 *
 * Grammar: one or more `<digits><unit>` parts, units `w d h m s ms`, each unit at most once and in
 * decreasing order (`1h30m` yes, `30m1h` or `1h1h` no). No sign, no fraction, no spaces, no bare number.
 * @returns milliseconds (a safe integer, ≥ 0)
 * @throws {DurationError} for anything else, or when the result exceeds `Number.MAX_SAFE_INTEGER`
 */
export function parseDuration(input: string): number {
  if (input.length === 0 || input.length > 64) throw new DurationError(input);
  let total = 0;
  let lastRank = -1;
  PART.lastIndex = 0;
  while (PART.lastIndex < input.length) {
    const m = PART.exec(input);
    if (m === null) throw new DurationError(input);
    const [, digits, unit] = m;
    const rank = DURATION_UNITS.findIndex(([u]) => u === unit);
    if (rank <= lastRank) throw new DurationError(input);
    lastRank = rank;
    const unitMs = DURATION_UNITS[rank]![1];
    total += Number(digits) * unitMs;
  }
  if (!Number.isSafeInteger(total)) throw new DurationError(input);
  return total;
}

/**
 * Formats milliseconds as the shortest exact duration string that {@link parseDuration} reads back to
 * the same value: `600000 → "10m"`, `5400000 → "1h30m"`, `0 → "0s"`, `1500 → "1s500ms"`.
 * Weeks are not used (`14d`, not `2w`), as days read more naturally in a config file.
 * @throws {RangeError} for negative, fractional or unsafe values
 */
export function formatDuration(ms: number): string {
  if (!Number.isSafeInteger(ms) || ms < 0) throw new RangeError(`cannot format duration ${ms} ms`);
  if (ms === 0) return '0s';
  let rest = ms;
  let out = '';
  for (const [unit, unitMs] of DURATION_UNITS) {
    if (unit === 'w') continue;
    const n = Math.floor(rest / unitMs);
    if (n > 0) {
      out += `${n}${unit}`;
      rest -= n * unitMs;
    }
  }
  return out;
}
