/**
 * Incremental scanner for audit JSON lines (the `--audit-log-path` format: one audit.k8s.io/v1 Event per
 * line). Pure and synchronous: feed it Buffers in any chunking, it counts lines and collects token uses.
 *
 * It is built for speed: it works on Buffers, finds newlines with `Buffer.indexOf` (native memchr) and both
 * prefilter needles in one pass ({@link NeedleSearch}, WebAssembly SIMD), and decodes + `JSON.parse`s only the
 * lines that contain a needle. A line that does not start with `{` and end with `}` (after trimming spaces, tabs, `\r`)
 * is malformed. A line longer than `maxLineBytes` is malformed and skipped without being buffered whole.
 */
import type { ReadStats, TokenUse } from './types.js';
import { needleSearch, type NeedleSearch } from './needle-search.js';
import { PREFILTER_NEEDLE_BUFFERS, tokenUseFromJson, tokenUsesFromWrappedText, type ShapeTally } from './records.js';

const LF = 0x0a;
const OPEN = 0x7b; // {
const CLOSE = 0x7d; // }

/** Default for `maxLineBytes`: 64 MiB. */
export const DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024;

function isWsByte(c: number): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0d;
}

/** Longest `<timestamp> ` prefix skipped in `timestampPrefix` mode (ISO-8601 with nanoseconds and a zone fits). */
const MAX_PREFIX_BYTES = 48;

/** Longest log stream name (CloudWatch Logs limit: 512 characters, `CreateLogStream` API reference). */
const MAX_STREAM_BYTES = 512;

/**
 * Start of the JSON after a `<ISO-8601 timestamp> ` prefix (CloudWatch Logs export to S3) in `buf[s, e)`:
 * the first byte after the first run of spaces/tabs, when the line starts with a digit and the gap comes within
 * {@link MAX_PREFIX_BYTES}; else `s` unchanged. When what follows is not `{` but a second word and a `{` follow
 * (`aws logs tail` output: `<timestamp> <log stream> <message>`,
 * https://awscli.amazonaws.com/v2/documentation/api/latest/reference/logs/tail.html), the start of that `{`. Pure.
 */
export function skipTimestampPrefix(buf: Buffer, s: number, e: number): number {
  const c = buf[s];
  if (c === undefined || c < 0x30 || c > 0x39) return s;
  const end = Math.min(e, s + MAX_PREFIX_BYTES);
  let i = s;
  while (i < end && buf[i] !== 0x20 && buf[i] !== 0x09) i++;
  if (i >= end) return s;
  while (i < e && (buf[i] === 0x20 || buf[i] === 0x09)) i++;
  if (buf[i] === OPEN) return i;
  const streamEnd = Math.min(e, i + MAX_STREAM_BYTES);
  let j = i;
  while (j < streamEnd && buf[j] !== 0x20 && buf[j] !== 0x09) j++;
  if (j >= streamEnd) return i;
  while (j < e && (buf[j] === 0x20 || buf[j] === 0x09)) j++;
  return buf[j] === OPEN ? j : i;
}

/**
 * Scans audit JSON lines. Counts in `stats`: `lines` (non-blank lines), `events`, `malformed`
 * (see `records.ts`); pushes token uses to `out` in input order, without deduplication.
 * Blank (whitespace-only) lines are ignored and not counted. A UTF-8 BOM at the very start is skipped.
 * With `timestampPrefix`, a line may start with `<ISO-8601 timestamp> ` before the event's JSON (CloudWatch Logs
 * export to S3, `aws logs create-export-task`); the prefix is skipped (the event's own timestamps are used).
 *
 * Chunks are not retained after `push` returns (a partial last line is copied), so the caller may reuse
 * its read buffer.
 */
export class JsonlScanner {
  private parts: Buffer[] = [];
  private partsLen = 0;
  private skipping = false;
  private atStart = true;
  private readonly needles: NeedleSearch;
  private claimed: Buffer | undefined;

  constructor(
    private readonly stats: ReadStats,
    private readonly out: TokenUse[],
    private readonly maxLineBytes: number = DEFAULT_MAX_LINE_BYTES,
    private readonly timestampPrefix = false,
    /**
     * Set: each line may be any shape of `shapes.ts` (EventList, GKE entry, AKS record, Loki line, …), unwrapped by
     * `tokenUsesFromWrappedText`, which tallies the platforms' wrappers here; unset: each line is one audit event.
     */
    private readonly shapes?: ShapeTally,
  ) {
    this.needles = needleSearch(PREFILTER_NEEDLE_BUFFERS);
  }

  /**
   * A buffer to read input into before pushing it (subarrays of it): the needle search's own memory
   * ({@link NeedleSearch.claimReadBuffer}, 1 MiB), which spares the search a copy of every byte. Undefined when
   * another scanner of this thread holds it (then read into any Buffer). The same buffer every call; push what was
   * read before reading again. Given back by {@link JsonlScanner.end} or {@link JsonlScanner.release}.
   */
  claimReadBuffer(): Buffer | undefined {
    this.claimed ??= this.needles.claimReadBuffer();
    return this.claimed;
  }

  /** Gives back the buffer of {@link JsonlScanner.claimReadBuffer} (call it when reading stops early, e.g. on error). */
  release(): void {
    this.needles.releaseReadBuffer(this.claimed);
    this.claimed = undefined;
  }

  /** Feeds the next bytes of the input. */
  push(chunk: Buffer): void {
    const len = chunk.length;
    if (len === 0) return;
    let pos = 0;
    if (this.atStart) {
      this.atStart = false;
      if (len >= 3 && chunk[0] === 0xef && chunk[1] === 0xbb && chunk[2] === 0xbf) pos = 3;
    }
    if (this.skipping) {
      const nl = chunk.indexOf(LF, pos);
      if (nl === -1) return;
      this.skipping = false;
      pos = nl + 1;
    } else if (this.partsLen > 0) {
      const nl = chunk.indexOf(LF, pos);
      if (nl === -1) {
        this.appendPartial(chunk, pos);
        return;
      }
      if (this.partsLen + nl - pos > this.maxLineBytes) {
        this.parts = [];
        this.partsLen = 0;
        this.stats.lines++;
        this.stats.malformed++;
      } else {
        this.parts.push(chunk.subarray(pos, nl));
        const line = Buffer.concat(this.parts);
        this.parts = [];
        this.partsLen = 0;
        this.line(line, 0, line.length);
      }
      pos = nl + 1;
    }

    // Hot loop over complete lines inside this chunk.
    const stats = this.stats;
    const max = this.maxLineBytes;
    const needles = this.needles;
    let next = -1; // next position of either needle ≥ the current line's start, or len when none
    for (;;) {
      const nl = chunk.indexOf(LF, pos);
      if (nl === -1) break;
      let s = pos;
      let e = nl;
      pos = nl + 1;
      while (s < e && isWsByte(chunk[s]!)) s++;
      while (e > s && isWsByte(chunk[e - 1]!)) e--;
      if (s === e) continue;
      stats.lines++;
      if (this.timestampPrefix && chunk[s] !== OPEN) s = skipTimestampPrefix(chunk, s, e);
      if (e - s > max || chunk[s] !== OPEN || chunk[e - 1] !== CLOSE) {
        stats.malformed++;
        continue;
      }
      if (next < s) {
        next = needles.indexOf(chunk, s);
        if (next === -1) next = len;
      }
      if (next < e) {
        this.record(chunk.toString('utf8', s, e));
      } else {
        stats.events++;
      }
    }
    if (pos < len) this.appendPartial(chunk, pos);
  }

  /** Signals the end of input: a last line without a trailing newline is processed now; gives back the read buffer. */
  end(): void {
    this.release();
    if (this.partsLen > 0) {
      const line = Buffer.concat(this.parts);
      this.parts = [];
      this.partsLen = 0;
      this.line(line, 0, line.length);
    }
    this.skipping = false;
  }

  private appendPartial(chunk: Buffer, from: number): void {
    const n = chunk.length - from;
    if (this.partsLen + n > this.maxLineBytes) {
      // Over the limit: count it once, drop what we hold and skip to the next newline.
      this.parts = [];
      this.partsLen = 0;
      this.skipping = true;
      this.stats.lines++;
      this.stats.malformed++;
      return;
    }
    this.parts.push(Buffer.from(chunk.subarray(from))); // copy: the caller may reuse `chunk`
    this.partsLen += n;
  }

  /** One record's text that passed the prefilter. */
  private record(text: string): void {
    if (this.shapes) {
      tokenUsesFromWrappedText(text, this.stats, this.out, this.shapes);
      return;
    }
    const use = tokenUseFromJson(text, this.stats);
    if (use) this.out.push(use);
  }

  /** One complete line `buf[s, e)` (no newline), outside the hot loop. */
  private line(buf: Buffer, s: number, e: number): void {
    while (s < e && isWsByte(buf[s]!)) s++;
    while (e > s && isWsByte(buf[e - 1]!)) e--;
    if (s === e) return;
    this.stats.lines++;
    if (this.timestampPrefix && buf[s] !== OPEN) s = skipTimestampPrefix(buf, s, e);
    if (e - s > this.maxLineBytes || buf[s] !== OPEN || buf[e - 1] !== CLOSE) {
      this.stats.malformed++;
      return;
    }
    const hit = this.needles.indexOf(buf, s);
    if (hit !== -1 && hit < e) {
      this.record(buf.toString('utf8', s, e));
    } else {
      this.stats.events++;
    }
  }
}
