/**
 * Parsers for CLI flag values. Each throws commander's `InvalidArgumentError` with a message that
 * says what is expected; commander prefixes it with the flag name (`option '--now <iso>' argument
 * 'x' is invalid. …`), and the CLI prints it on one line and exits 2.
 */
import { availableParallelism } from 'node:os';
import { InvalidArgumentError } from 'commander';
import { parseMaxTokenAge, type MaxTokenAge } from '../config/max-token-age.js';

/**
 * ISO-8601 date (`2026-11-20`, read as UTC midnight) or date-time with an explicit zone
 * (`2026-11-20T12:00:00Z`, `2026-11-20T13:00:00.5+01:00`). A date-time without a zone is refused:
 * JavaScript would read it as local time, which makes a report depend on the machine.
 */
const ISO_8601 = /^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2}))?$/i;

/** True when the `YYYY-MM-DD` prefix names a real day (V8 reads `2026-02-30` as March 2). */
function validCalendarDate(iso: string): boolean {
  const [y, m, d] = iso.slice(0, 10).split('-').map(Number);
  if (y === undefined || m === undefined || d === undefined || m < 1 || m > 12 || d < 1) return false;
  return d <= new Date(Date.UTC(y, m, 0)).getUTCDate();
}

/**
 * Parses `--now`.
 * @returns epoch ms UTC
 * @throws InvalidArgumentError when not an ISO-8601 date or zoned date-time
 */
export function parseNow(value: string): number {
  const trimmed = value.trim();
  const ms = ISO_8601.test(trimmed) && validCalendarDate(trimmed) ? Date.parse(trimmed) : Number.NaN;
  if (Number.isNaN(ms)) {
    throw new InvalidArgumentError('Expected an ISO-8601 time with a zone, e.g. 2026-11-20T12:00:00Z.');
  }
  return ms;
}

/**
 * Parses `--max-token-age`: `eks` (90 days after warnafter), `upstream` (1 year after issue), a positive whole
 * number of seconds after warnafter, or a duration such as `90d` — the config's `maxTokenAge` grammar, by the
 * same function (`parseMaxTokenAge` in the findings module); its error is rewrapped for commander.
 * @throws InvalidArgumentError
 */
export function parseMaxTokenAgeFlag(value: string): MaxTokenAge {
  try {
    return parseMaxTokenAge(value);
  } catch {
    throw new InvalidArgumentError('Expected eks, upstream, a positive whole number of seconds or a duration such as 90d.');
  }
}

/**
 * Parses `--cluster`: any non-empty name without whitespace (used as a label in findings).
 * @throws InvalidArgumentError
 */
export function parseClusterName(value: string): string {
  if (!/^\S+$/.test(value)) throw new InvalidArgumentError('Expected a non-empty name without spaces.');
  return value;
}

const SIZE_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  kib: 1024,
  kb: 1000,
  m: 1024 ** 2,
  mib: 1024 ** 2,
  mb: 1000 ** 2,
  g: 1024 ** 3,
  gib: 1024 ** 3,
  gb: 1000 ** 3,
  t: 1024 ** 4,
  tib: 1024 ** 4,
  tb: 1000 ** 4,
};

/**
 * Parses a byte size: a positive whole number of bytes, or a number with a unit (`K`/`KiB` = 1024,
 * `KB` = 1000, likewise `M`, `G`, `T`; case-insensitive), e.g. `20GiB`, `500MB`, `1.5G`.
 * @returns bytes (a safe integer, rounded down)
 * @throws InvalidArgumentError
 */
export function parseByteSize(value: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(value);
  const unit = m ? SIZE_UNITS[m[2]!.toLowerCase()] : undefined;
  const bytes = m && unit !== undefined ? Math.floor(Number(m[1]) * unit) : Number.NaN;
  if (!Number.isSafeInteger(bytes) || bytes <= 0) {
    throw new InvalidArgumentError('Expected a positive size in bytes, e.g. 20GiB, 500MB or 1073741824.');
  }
  return bytes;
}

/**
 * Parses `--jobs`: a positive whole number of worker threads, capped at `os.availableParallelism()` (more threads
 * than usable CPUs only add start-up cost and memory).
 * @throws InvalidArgumentError
 */
export function parseJobs(value: string, cap: number = availableParallelism()): number {
  const n = /^\s*\d+\s*$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError('Expected a positive whole number of threads.');
  return Math.min(n, Math.max(1, cap));
}
