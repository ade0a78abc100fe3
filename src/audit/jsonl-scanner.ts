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
import { parseRfc3339Ms } from './token-use.js';

const LF = 0x0a;
const OPEN = 0x7b; // {
const CLOSE = 0x7d; // }

/** Default for `maxLineBytes`: 64 MiB. */
export const DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024;

function isWsByte(c: number): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0d;
}

/**
 * Bytes between two event-time samples ({@link JsonlScanner.sampleTimes}): the first line counted as an event without
 * being parsed that starts at or after each multiple of 256 KiB of the input (an offset, so a serial read and the
 * ranges of a parallel read take the same lines) gives its time for the clock-skew rule's density (docs/clock-skew.md
 * rule 2), standing for the lines up to the next sample. 4,096 samples per GiB.
 */
export const TIME_SAMPLE_BYTES = 256 * 1024;

/**
 * Bytes of an input's (uncompressed) start and end whose events `scan` counts line by line for the clock-skew rule
 * (`TAIL_BYTES` of `src/scan/latest-event.ts`): no time sample is given there.
 */
export const EDGE_BYTES = 256 * 1024;

/** Receives one event-time sample: the time (epoch ms UTC) and how many events it stands for. */
export type TimeSampleSink = (time: number, weight: number) => void;

const RECEIVED_KEY = Buffer.from('"requestReceivedTimestamp"');
const STAGE_KEY = Buffer.from('"stageTimestamp"');
/** Longest time value read (RFC 3339 with nanoseconds and an offset fits). */
const MAX_TIME_VALUE_BYTES = 40;

/**
 * The event time of one sampled line of audit JSON `buf[s, e)`, from its bytes alone (no `JSON.parse`, nothing but the
 * value decoded), epoch ms UTC: the value of the line's last `"requestReceivedTimestamp"` key, else of its last
 * `"stageTimestamp"` key (`eventTimeMs` reads the same keys; the API server writes them after the request and response
 * objects, so the last is the event's own), found by a native backward search from the line's end; undefined when there
 * is none or its value is not a plain RFC 3339 string. Pure.
 */
export function sampledLineTime(buf: Buffer, s: number, e: number): number | undefined {
  const line = buf.subarray(s, e); // the search stays within the line
  let k = line.lastIndexOf(RECEIVED_KEY);
  let at = k + RECEIVED_KEY.length;
  if (k === -1) {
    k = line.lastIndexOf(STAGE_KEY);
    if (k === -1) return undefined;
    at = k + STAGE_KEY.length;
  }
  const n = line.length;
  while (at < n && isWsByte(line[at]!)) at++;
  if (line[at] !== 0x3a) return undefined; // :
  at++;
  while (at < n && isWsByte(line[at]!)) at++;
  if (line[at] !== 0x22) return undefined; // "
  at++;
  const end = line.indexOf(0x22, at);
  if (end === -1 || end - at > MAX_TIME_VALUE_BYTES) return undefined;
  return utcTimeAt(line, at, end) ?? parseRfc3339Ms(line.toString('latin1', at, end));
}

/** The number written by the `len` decimal digits of `b` at `at`; -1 when one of them is not a digit. */
function digitsAt(b: Buffer, at: number, len: number): number {
  let v = 0;
  for (let k = at; k < at + len; k++) {
    const c = b[k]! - 0x30;
    if (c < 0 || c > 9) return -1;
    v = v * 10 + c;
  }
  return v;
}

/** The last day {@link utcTimeAt} converted (Date.UTC is most of its cost; samples of a file share their day). */
let sampleDay = { key: -1, ms: 0 };

/**
 * `b[at, end)` read as the API server writes times, `YYYY-MM-DDTHH:MM:SS[.fraction]Z`, epoch ms UTC (as
 * `parseRfc3339Ms` gives it); undefined for any other spelling or a date that does not exist (the caller then asks
 * `parseRfc3339Ms`). Pure but for a one-day cache.
 */
function utcTimeAt(b: Buffer, at: number, end: number): number | undefined {
  const n = end - at;
  if (n < 20 || b[end - 1] !== 0x5a || b[at + 4] !== 0x2d || b[at + 7] !== 0x2d || b[at + 10] !== 0x54 || b[at + 13] !== 0x3a || b[at + 16] !== 0x3a) return undefined;
  const year = digitsAt(b, at, 4);
  const month = digitsAt(b, at + 5, 2);
  const day = digitsAt(b, at + 8, 2);
  const hour = digitsAt(b, at + 11, 2);
  const minute = digitsAt(b, at + 14, 2);
  const second = digitsAt(b, at + 17, 2);
  if (year < 0 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 60) return undefined;
  let frac = 0;
  if (n > 20) {
    const digits = n - 21; // `.` and 1–9 digits; the first three are the milliseconds
    if (b[at + 19] !== 0x2e || digits < 1 || digits > 9 || digitsAt(b, at + 20, digits) < 0) return undefined;
    frac = digitsAt(b, at + 20, Math.min(3, digits)) * (digits >= 3 ? 1 : digits === 2 ? 10 : 100);
  }
  const key = (year * 100 + month) * 100 + day;
  if (key !== sampleDay.key) {
    const ms = Date.UTC(year, month - 1, day);
    if (new Date(ms).getUTCDate() !== day) return undefined; // e.g. Feb 30
    sampleDay = { key, ms };
  }
  return sampleDay.ms + ((hour * 60 + minute) * 60 + second) * 1000 + frac;
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
  private sink: TimeSampleSink | undefined;
  /** Offset of the next byte pushed (see {@link JsonlScanner.sampleTimes}). */
  private pushed = 0;
  /** Offset where the held partial line (`parts`) begins. */
  private partialAt = 0;
  /** The offset at or after which the next line counted as an event without being parsed is sampled. */
  private nextSample = Number.POSITIVE_INFINITY;
  /** Events counted by `record` (parsed lines), so that `stats.events` minus this counts the lines not parsed. */
  private parsed = 0;
  /** Samples of lines starting before `sampleFrom`, or at or after `sampleUntil`, are not given. */
  private sampleFrom = 0;
  private sampleUntil = Number.POSITIVE_INFINITY;
  /** Lines not parsed before this scanner's first line when it begins mid-input (a range): credited to its first sample. */
  private startCount: number | undefined;
  /**
   * Samples taken, not yet given (flat: time, offset, count of lines not parsed before its line): a sample's weight is
   * known when the next one is taken; those of the input's last `holdBytes` are held until its end is known.
   */
  private held: number[] = [];
  private holdBytes = 0;
  /** Where the last sample's lines end (a count as in `held`), once a line of the input's last bytes was met. */
  private lastEnd: number | undefined;

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

  /**
   * Samples event times for the clock-skew density (docs/clock-skew.md rule 2): the first line counted as an event
   * without being parsed that starts at or after each multiple of {@link TIME_SAMPLE_BYTES} of the input (offsets count
   * from `edges.at`, where the scanner begins; default 0), read by {@link sampledLineTime}, goes to `sink` with the
   * number of such lines from it up to the next sample (its weight; those before the first sample too when the scanner
   * begins mid-input). Not given, nor their lines counted: samples of lines starting before `edges.from` (the input's
   * first bytes, whose events the caller counts line by line) or at or after `edges.until` (its last bytes, when their
   * offset is known: a sample is taken there to end the previous one's lines); with `edges.tail`, those of the input's
   * last `tail` bytes, known at {@link JsonlScanner.end} (samples are held back until then). Costs one comparison a line.
   */
  sampleTimes(sink: TimeSampleSink, edges: { at?: number; from: number; until?: number; tail?: number }): void {
    this.sink = sink;
    this.pushed = edges.at ?? 0;
    this.sampleFrom = edges.from;
    this.sampleUntil = edges.until ?? Number.POSITIVE_INFINITY;
    this.holdBytes = edges.tail ?? 0;
    this.nextSample = this.pushed;
    if (this.pushed > 0) this.startCount = this.stats.events - this.parsed;
  }

  /** One line `buf[s, e)` to sample, starting `at` bytes into the input, counted (see {@link JsonlScanner.sampleTimes}). */
  private sample(buf: Buffer, s: number, e: number, at: number): void {
    const next = (Math.floor(at / TIME_SAMPLE_BYTES) + 1) * TIME_SAMPLE_BYTES;
    this.nextSample = at < this.sampleUntil && next > this.sampleUntil ? this.sampleUntil : next;
    const before = this.stats.events - this.parsed - 1; // lines not parsed before this one
    const held = this.held;
    if (at < this.sampleFrom || at >= this.sampleUntil) {
      // The input's first or last bytes, counted line by line by the caller: the last sample's lines end here.
      if (held.length > 0 && this.lastEnd === undefined) this.lastEnd = before;
      this.startCount = undefined;
      return;
    }
    const t = sampledLineTime(buf, s, e);
    if (t === undefined) return; // no readable time: the previous sample stands for this line too
    held.push(t, at, this.startCount ?? before);
    this.startCount = undefined;
    // A sample's lines end where the next one's begin; it is given once the input has gone `holdBytes` past it.
    let k = 0;
    for (; k + 3 < held.length && held[k + 1]! < at - this.holdBytes; k += 3) this.sink!(held[k]!, held[k + 5]! - held[k + 2]!);
    if (k > 0) this.held = held.slice(k);
  }

  /** At the end of input: the held samples outside its last `holdBytes` are given, the others dropped. */
  private endSamples(): void {
    const held = this.held;
    if (!this.sink || held.length === 0) return;
    const end = this.lastEnd ?? this.stats.events - this.parsed;
    const tail = this.pushed - this.holdBytes; // where the input's last `holdBytes` begin
    for (let k = 0; k < held.length && held[k + 1]! < tail; k += 3) {
      if (k + 3 >= held.length) {
        this.sink(held[k]!, end - held[k + 2]!);
        break;
      }
      // Lines up to the next sample; when that one is in the last bytes, only the share of them before those bytes.
      const lines = held[k + 5]! - held[k + 2]!;
      const share = held[k + 4]! < tail ? 1 : (tail - held[k + 1]!) / (held[k + 4]! - held[k + 1]!);
      this.sink(held[k]!, Math.round(lines * share));
    }
    this.held = [];
    this.lastEnd = undefined;
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
    const base = this.pushed; // the offset of chunk[0] in the input
    this.pushed += len;
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
    let nextSample = this.nextSample - base; // in this chunk's offsets
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
        if (s >= nextSample) {
          this.sample(chunk, s, e, base + s);
          nextSample = this.nextSample - base;
        }
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
    this.endSamples();
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
    if (this.partsLen === 0) this.partialAt = this.pushed - chunk.length + from;
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
      const events = this.stats.events;
      tokenUsesFromWrappedText(text, this.stats, this.out, this.shapes);
      this.parsed += this.stats.events - events;
      return;
    }
    const events = this.stats.events;
    const use = tokenUseFromJson(text, this.stats);
    this.parsed += this.stats.events - events;
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
      if (this.partialAt >= this.nextSample) this.sample(buf, s, e, this.partialAt);
    }
  }
}
