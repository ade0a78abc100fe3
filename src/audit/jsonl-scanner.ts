/**
 * Incremental scanner for audit JSON lines (the `--audit-log-path` format: one audit.k8s.io/v1 Event per
 * line). Pure and synchronous: feed it Buffers in any chunking, it counts lines and collects token uses.
 *
 * It is built for speed: it works on Buffers, finds newlines with `Buffer.indexOf` (native memchr) and both
 * prefilter needles in one pass ({@link NeedleSearch}, WebAssembly SIMD), and decodes + `JSON.parse`s only the
 * lines that contain a needle. A line that does not start with `{` and end with `}` (after trimming spaces, tabs, `\r`)
 * is malformed. A line longer than `maxLineBytes` is malformed and skipped without being buffered whole, as is a line
 * holding a NUL byte; the scan reads on after either.
 */
import type { ReadStats, TokenUse } from './types.js';
import type { NeedleSearch } from './needle-search.js';
import { prefilterSearch, tokenUseFromJson, tokenUsesFromWrappedText, type ShapeTally } from './records.js';

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
 * Where a line over the record limit can go instead of being skipped: the bytes of the whole line (without its
 * newline), in order, then `end()`. The sink counts what it reads in `stats` (the scanner does not count the line).
 */
export interface LongLineSink {
  write(bytes: Buffer): void;
  end(): void;
}

/** Bytes of a long line's start given to {@link JsonlScannerOptions.longLine} to decide whether it can be streamed. */
const LONG_LINE_HEAD_BYTES = 256;

/** Counts one line over the record limit: malformed, and in `stats.oversized`. */
function countOversized(stats: ReadStats): void {
  stats.malformed++;
  stats.oversized = (stats.oversized ?? 0) + 1;
}

/** Counts one line holding a NUL byte: malformed, and in `stats.nulLines`. */
function countNulLine(stats: ReadStats): void {
  stats.malformed++;
  stats.nulLines = (stats.nulLines ?? 0) + 1;
}

/**
 * Scans audit JSON lines. Counts in `stats`: `lines` (non-blank lines), `events`, `malformed`
 * (see `records.ts`; of them, lines over `maxLineBytes` also in `oversized` and lines holding a NUL byte in
 * `nulLines`: each is skipped and the scan reads on); pushes token uses to `out` in input order, without deduplication.
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
  /** The sink of the long line being streamed, up to its newline. */
  private streaming: LongLineSink | undefined;
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
    /**
     * Called with the first bytes of a line over `maxLineBytes`: a sink that streams the line (e.g. a webhook batch
     * `{"kind":"EventList","items":[…]}` or an Event Hubs `{"records":[…]}` document larger than the limit, whose
     * records each fit), or undefined to skip the line as oversized.
     */
    private readonly longLine?: (head: Buffer) => LongLineSink | undefined,
  ) {
    this.needles = prefilterSearch();
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
    if (this.streaming) {
      const nl = chunk.indexOf(LF, pos);
      if (nl === -1) {
        this.streaming.write(chunk.subarray(pos));
        return;
      }
      this.streaming.write(chunk.subarray(pos, nl));
      this.streaming.end();
      this.streaming = undefined;
      pos = nl + 1;
    } else if (this.skipping) {
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
        const sink = this.openLongLine(chunk.subarray(pos, nl));
        if (sink) {
          sink.write(chunk.subarray(pos, nl));
          sink.end();
        } else {
          this.stats.lines++;
          countOversized(this.stats);
        }
        this.parts = [];
        this.partsLen = 0;
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
    let nul = chunk.indexOf(0, pos); // next NUL byte ≥ the current line's start, or len when none (one memchr per chunk)
    if (nul === -1) nul = len;
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
      if (nul < s) {
        nul = chunk.indexOf(0, s);
        if (nul === -1) nul = len;
      }
      if (nul < e) {
        countNulLine(stats);
        continue;
      }
      if (this.timestampPrefix && chunk[s] !== OPEN) s = skipTimestampPrefix(chunk, s, e);
      if (e - s > max) {
        const sink = this.longLine?.(chunk.subarray(s, Math.min(e, s + LONG_LINE_HEAD_BYTES)));
        if (sink) {
          stats.lines--; // the sink counts the records it reads
          sink.write(chunk.subarray(s, e));
          sink.end();
        } else {
          countOversized(stats);
        }
        continue;
      }
      if (chunk[s] !== OPEN || chunk[e - 1] !== CLOSE) {
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
    if (this.streaming) {
      this.streaming.end();
      this.streaming = undefined;
    }
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
      const sink = this.openLongLine(chunk.subarray(from));
      if (sink) {
        // Over the limit but streamable: what we hold, then everything up to the next newline, goes to the sink.
        sink.write(chunk.subarray(from));
        this.streaming = sink;
        this.parts = [];
        this.partsLen = 0;
        return;
      }
      // Over the limit: count it once, drop what we hold and skip to the next newline.
      this.parts = [];
      this.partsLen = 0;
      this.skipping = true;
      this.stats.lines++;
      countOversized(this.stats);
      return;
    }
    this.parts.push(Buffer.from(chunk.subarray(from))); // copy: the caller may reuse `chunk`
    this.partsLen += n;
  }

  /**
   * A sink for the held long line (`this.parts`, then `next`) from {@link JsonlScanner.longLine}, already given the
   * held parts; undefined when the line is to be skipped. The caller writes `next` and what follows.
   */
  private openLongLine(next: Buffer): LongLineSink | undefined {
    if (!this.longLine) return undefined;
    // The line's first bytes: from the held parts (only as many as needed), then `next`.
    const first: Buffer[] = [];
    let n = 0;
    for (const p of [...this.parts, next]) {
      if (n >= 2 * LONG_LINE_HEAD_BYTES) break;
      first.push(p.subarray(0, 2 * LONG_LINE_HEAD_BYTES));
      n += first.at(-1)!.length;
    }
    const held = first.length === 1 ? first[0]! : Buffer.concat(first);
    let s = 0;
    while (s < held.length && isWsByte(held[s]!)) s++;
    const sink = this.longLine(held.subarray(s, s + LONG_LINE_HEAD_BYTES));
    if (sink) for (const p of this.parts) sink.write(p);
    return sink;
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
    const nul = buf.indexOf(0, s);
    if (nul !== -1 && nul < e) {
      countNulLine(this.stats);
      return;
    }
    if (this.timestampPrefix && buf[s] !== OPEN) s = skipTimestampPrefix(buf, s, e);
    if (e - s > this.maxLineBytes) {
      countOversized(this.stats);
      return;
    }
    if (buf[s] !== OPEN || buf[e - 1] !== CLOSE) {
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
