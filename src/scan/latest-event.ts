/**
 * The latest event time of an audit JSON-lines file, read from its tail: the default reference time of
 * `scan` is "the latest event time in the input" (docs/design/contracts.md "--format json"), but the reader's prefilter
 * never parses events without token signals, so their times are not otherwise known.
 *
 * The API server writes events as their stages complete, so the latest `requestReceivedTimestamp` is
 * among the last lines: the newest request's own `RequestReceived` (or later) event is written at or
 * after it. A window of {@link TAIL_BYTES} covers hundreds of lines, enough for the small reorderings
 * of buffered audit backends.
 */
import { ErrorCode, TokenwatchError } from '../errors.js';
import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { createGunzip } from 'node:zlib';
import pLimit from 'p-limit';
import { isGzip } from '../audit/formats.js';
import { createInflater, releaseInflated } from '../sources/inflated.js';
import { eventTimeMs, isAuditEvent, parseRfc3339Ms } from '../audit/token-use.js';
import { EventTimeDensity, HOST_CLOCK_MARGIN_MS, SKEW_GAP_MS, judgeEventTimes } from '../findings/clock-skew.js';
import { mayHoldTokenUse } from '../audit/records.js';
import { EDGE_BYTES } from '../audit/jsonl-scanner.js';

/**
 * Receives an event time (epoch ms UTC) of a file's first or last lines that the clock-skew rule
 * (`src/findings/clock-skew.ts`, applied to those lines' times) left out, with the file when known.
 */
export type SkewedTimeSink = (time: number, file?: string) => void;

/**
 * Receives the event time (epoch ms UTC) of one line among a file's first or last {@link TAIL_BYTES} that the
 * clock-skew rule kept, for the density the rule then judges over the whole input (docs/clock-skew.md): every audit
 * event there, once per file (a line in both the first and the last bytes of a small file is given by the head only),
 * except lines that may hold a token use (the prefilter's `mayHoldTokenUse`), which the reader counts as token uses.
 */
export type EdgeTimeSink = (time: number) => void;

/**
 * Where the lines of a file's last bytes that its first {@link TAIL_BYTES} do not already hold begin: a byte offset into
 * the tail (of `tailLength` bytes, the end of `total` bytes, uncompressed for gzip) from which a line whose `\n` (or the
 * file's end) lies at or after it is not in the head; `Infinity` when the head holds the whole file. Pure.
 */
export function edgeCountFrom(total: number, tailLength: number): number {
  return total <= TAIL_BYTES ? Number.POSITIVE_INFINITY : TAIL_BYTES - (total - tailLength);
}

/** The clock-skew rule applied to the times of one file's first or last lines: which of them to leave out. */
function judgeLines(times: Iterable<number>, ceiling: number): (t: number) => boolean {
  const plain = (t: number) => t > ceiling;
  // The common case costs one pass: all times within one gap of each other and under the ceiling.
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (const t of times) {
    if (!Number.isFinite(t)) continue;
    if (t < min) min = t;
    if (t > max) max = t;
  }
  if (max === Number.NEGATIVE_INFINITY || (max - min <= SKEW_GAP_MS && max <= ceiling)) return plain;
  const d = new EventTimeDensity();
  for (const t of times) if (Number.isFinite(t)) d.add(t);
  return judgeEventTimes(d, ceiling - HOST_CLOCK_MARGIN_MS).inconsistent;
}

const S3_PREFIX_RE = /^\d{4}-\d{2}-\d{2}T\S{1,40}[ \t]+(\{.*)$/;

/**
 * An event time later than the scanning host's clock plus this much cannot come from a real API server (the
 * clocks of the two may differ a little): such times are ignored for the default reference time (a forged event
 * stamped 9999-12-31 must not turn every finding critical).
 */
export const PLAUSIBLE_CLOCK_SKEW_MS = 24 * 3_600_000;

/** Bytes of a file's (decompressed) end that are searched for events (and of its start: the scanner samples neither). */
export const TAIL_BYTES = EDGE_BYTES;

/**
 * Latest event time (`requestReceivedTimestamp`, else `stageTimestamp`; `eventTimeMs` of the audit
 * module) among the complete JSON lines in `tail`, epoch ms UTC, ignoring times after `ceiling` (default: the clock
 * plus {@link PLAUSIBLE_CLOCK_SKEW_MS}); undefined when none is an audit event.
 * The first line is skipped when `partialFirst` (the window starts mid-line). Pure when `ceiling` is given.
 *
 * Lines are taken from the last one back (the newest come last, so the latest time is found early), and a line is
 * `JSON.parse`d only when its upper bound ({@link eventTimeUpperBounds}) says it could hold a later time: on many
 * small files this skips most of the parsing (10,000 files of 300 KB: 256 KiB of tail each) with the same result.
 *
 * Times the clock-skew rule (`src/findings/clock-skew.ts`) leaves out among the tail's own line times (a group of
 * events stamped days after the rest of the tail: a node with a wrong clock) are not taken; `skewed` receives them.
 *
 * With `edges`, every complete line's event time that is kept and that the head does not hold (the lines whose `\n`
 * lies at or after `edges.from`, see {@link edgeCountFrom}) goes to `edges.sink` (see {@link EdgeTimeSink}): those
 * lines are all parsed.
 */
export function latestEventTimeInTail(
  tail: Buffer,
  partialFirst: boolean,
  ceiling: number = Date.now() + PLAUSIBLE_CLOCK_SKEW_MS,
  skewed?: SkewedTimeSink,
  edges?: { from: number; sink: EdgeTimeSink },
): number | undefined {
  const text = tail.toString('utf8');
  const lines = text.split('\n');
  const bounds = eventTimeUpperBounds(text, lines);
  const inconsistent = judgeLines(bounds, ceiling);
  if (skewed) for (const b of bounds) if (Number.isFinite(b) && b <= ceiling && inconsistent(b)) skewed(b);
  let latest: number | undefined;
  for (let i = lines.length - 1; i >= (partialFirst ? 1 : 0); i--) {
    if (latest !== undefined && bounds[i]! <= latest) continue;
    let line = lines[i]?.trim();
    if (line && line[0] !== '{') line = S3_PREFIX_RE.exec(line)?.[1]; // `<timestamp> {…}` (CloudWatch export to S3)
    if (line?.[0] !== '{') continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      continue; // cut short or not JSON: the reader counts it as malformed
    }
    if (!isAuditEvent(value)) continue;
    const t = eventTimeMs(value);
    if (t !== undefined && t <= ceiling && !inconsistent(t) && (latest === undefined || t > latest)) latest = t;
  }
  if (edges && edges.from <= tail.length) {
    // The first line counted is the one holding byte `from` (its `\n` is at or after it): the lines before it are in the head.
    let first = 0;
    if (edges.from > 0) {
      const start = tail.lastIndexOf(0x0a, edges.from - 1) + 1;
      for (let at = tail.indexOf(0x0a); at !== -1 && at < start; at = tail.indexOf(0x0a, at + 1)) first++;
    }
    for (let i = Math.max(first, partialFirst ? 1 : 0); i < lines.length; i++) {
      const t = lineEventTime(lines[i]!);
      if (t !== undefined && t <= ceiling && !inconsistent(t)) edges.sink(t);
    }
  }
  return latest;
}

/**
 * The event time of one line of audit JSON (or `<timestamp> {…}`), epoch ms UTC; undefined when it is not an audit
 * event, or when it may hold a token use (the prefilter passes it: the reader counts it as one, see {@link EdgeTimeSink}).
 */
function lineEventTime(raw: string): number | undefined {
  let line = raw.trim();
  if (line && line[0] !== '{') line = S3_PREFIX_RE.exec(line)?.[1] ?? '';
  if (line[0] !== '{' || mayHoldTokenUse(line)) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  return isAuditEvent(value) ? eventTimeMs(value) : undefined;
}

/**
 * A key `eventTimeMs` reads followed by its string value: the value, then what ends it (`"`, or `\\` for a value with
 * escapes, which cannot be read from the text; nothing when the line ends first). Whitespace as JSON allows it within
 * a line (RFC 8259 §2: space, tab, CR; a line feed ends the line).
 */
const TIME_VALUE_RE = /"(?:requestReceivedTimestamp|stageTimestamp)"[ \t\r]*:[ \t\r]*"([^"\\\n]*)(["\\]?)/g;
/** `\u0040`–`\u007f` escapes: a key spelled with escaped letters would hide from a text search (Go never writes them). */
const ESCAPED_LETTER_RE = /\\u00[4-7][0-9a-f]/gi;

/**
 * For each of `lines` (`text` split at `\n`), an upper bound of the time `eventTimeMs(JSON.parse(line))` gives, epoch
 * ms UTC, from the text alone: the latest of every string value written after a `"requestReceivedTimestamp"` or
 * `"stageTimestamp"` key anywhere in the line (the event's own keys among them, so its time cannot be later);
 * -Infinity when there is none (the line has no time); Infinity when the text cannot be trusted (a value with escapes,
 * a key that may be spelled with escapes, a value cut off by the line's end). One pass over the text. Pure.
 */
export function eventTimeUpperBounds(text: string, lines: string[] = text.split('\n')): Float64Array {
  const bounds = new Float64Array(lines.length).fill(Number.NEGATIVE_INFINITY);
  // Line i spans [starts[i], starts[i] + lines[i].length); matches come in text order, so one cursor finds their line.
  const starts = new Array<number>(lines.length);
  for (let i = 0, at = 0; i < lines.length; i++) {
    starts[i] = at;
    at += lines[i]!.length + 1;
  }
  const lineOf = (cursor: { i: number }, index: number): number => {
    while (cursor.i + 1 < lines.length && starts[cursor.i + 1]! <= index) cursor.i++;
    return cursor.i;
  };
  const times = { i: 0 };
  for (const m of text.matchAll(TIME_VALUE_RE)) {
    const i = lineOf(times, m.index);
    if (m[2] !== '"') {
      bounds[i] = Number.POSITIVE_INFINITY;
      continue;
    }
    const t = timeMsAtMost(m[1]!);
    if (t !== undefined && t > bounds[i]!) bounds[i] = t;
  }
  const escapes = { i: 0 };
  for (const m of text.matchAll(ESCAPED_LETTER_RE)) bounds[lineOf(escapes, m.index)] = Number.POSITIVE_INFINITY;
  return bounds;
}

/**
 * `parseRfc3339Ms(raw)`, or a time not earlier than it: the common `YYYY-MM-DDTHH:MM:SS[.fraction]Z` is read digit
 * by digit (10× faster than the regular expression; an invalid date such as Feb 30 gets a time instead of undefined,
 * which can only raise a bound), anything else goes to `parseRfc3339Ms`.
 */
function timeMsAtMost(raw: string): number | undefined {
  const n = raw.length;
  // Separators first (cheap), then the digits: -1 from `digitsAt` means "not a digit there".
  if (n < 20 || raw.charCodeAt(n - 1) !== 0x5a || raw.charCodeAt(10) !== 0x54 || raw.charCodeAt(4) !== 0x2d) return parseRfc3339Ms(raw);
  if (raw.charCodeAt(7) !== 0x2d || raw.charCodeAt(13) !== 0x3a || raw.charCodeAt(16) !== 0x3a) return parseRfc3339Ms(raw);
  const year = digitsAt(raw, 0, 4);
  const month = digitsAt(raw, 5, 2);
  const day = digitsAt(raw, 8, 2);
  const hour = digitsAt(raw, 11, 2);
  const minute = digitsAt(raw, 14, 2);
  const second = digitsAt(raw, 17, 2);
  if (year < 0 || month < 0 || day < 0 || hour < 0 || minute < 0 || second < 0) return parseRfc3339Ms(raw);
  let frac = 0;
  if (n > 20) {
    // `.` and 1–9 digits; the first three are the milliseconds (the rest truncated, as parseRfc3339Ms does).
    const digits = n - 21;
    if (raw.charCodeAt(19) !== 0x2e || digits < 1 || digits > 9 || digitsAt(raw, 20, digits) < 0) return parseRfc3339Ms(raw);
    frac = digitsAt(raw, 20, Math.min(3, digits)) * (digits >= 3 ? 1 : digits === 2 ? 10 : 100);
  }
  const key = (year * 100 + month) * 100 + day;
  if (key !== lastDay.key) lastDay = { key, ms: Date.UTC(year, month - 1, day) }; // lines of a tail share their day
  return lastDay.ms + ((hour * 60 + minute) * 60 + second) * 1000 + frac;
}

/** The last day `timeMsAtMost` converted (Date.UTC is most of its cost). */
let lastDay = { key: -1, ms: 0 };

/** The number written by the `len` decimal digits of `s` at `at`; -1 when one of them is not a digit. */
function digitsAt(s: string, at: number, len: number): number {
  let v = 0;
  for (let k = at; k < at + len; k++) {
    const c = s.charCodeAt(k) - 0x30;
    if (c < 0 || c > 9) return -1;
    v = v * 10 + c;
  }
  return v;
}

async function plainTail(file: string, size: number): Promise<{ tail: Buffer; partialFirst: boolean; total: number }> {
  const fh = await open(file, 'r');
  try {
    const length = Math.min(size, TAIL_BYTES);
    const tail = Buffer.alloc(length);
    const { bytesRead } = await fh.read(tail, 0, length, size - length);
    return { tail: tail.subarray(0, bytesRead), partialFirst: size > length, total: size };
  } finally {
    await fh.close();
  }
}

/** Files whose tails are read at the same time: memory stays a few MiB whatever the number of files. */
export const TAIL_CONCURRENCY = 2;

/**
 * The last {@link TAIL_BYTES} of a stream read in chunks (a gzip file decompressed in full, which has no random access):
 * whole chunks are kept while they are needed, the excess trimmed when the tail is taken.
 */
export class StreamTail {
  private chunks: Buffer[] = [];
  private kept = 0;
  private seen = 0;

  /** @param dropped called with each chunk the tail lets go of, oldest first (e.g. `releaseInflated`) */
  constructor(private readonly dropped?: (chunk: Buffer) => void) {}

  /** Adds the next chunk; the tail keeps a view of it until later chunks hold {@link TAIL_BYTES}. */
  add(chunk: Buffer): void {
    this.seen += chunk.length;
    this.chunks.push(chunk);
    this.kept += chunk.length;
    let drop = 0;
    while (drop < this.chunks.length - 1 && this.kept - this.chunks[drop]!.length >= TAIL_BYTES) {
      this.kept -= this.chunks[drop]!.length;
      drop++;
    }
    if (drop === 0) return;
    const gone = this.chunks.slice(0, drop);
    this.chunks = this.chunks.slice(drop);
    if (this.dropped) for (const c of gone) this.dropped(c);
  }

  /** The tail, whether bytes came before it (its first line may then be partial), and the bytes added in all. */
  take(): { tail: Buffer; partialFirst: boolean; total: number } {
    const all = Buffer.concat(this.chunks);
    return { tail: all.length > TAIL_BYTES ? all.subarray(all.length - TAIL_BYTES) : all, partialFirst: this.seen > TAIL_BYTES, total: this.seen };
  }
}

/**
 * Decompresses the whole gzip file (no random access) keeping only its last {@link TAIL_BYTES}. Stops (and
 * frees its streams) when `signal` aborts.
 */
async function gzipTail(file: string, signal?: AbortSignal): Promise<{ tail: Buffer; partialFirst: boolean; total: number }> {
  const tail = new StreamTail(releaseInflated); // the chunks before the tail are given back as they are dropped
  const input = createReadStream(file, { highWaterMark: 1024 * 1024 });
  const inflater = createInflater(256 * 1024);
  const gunzip = input.pipe(inflater.stream);
  const onAbort = (): void => {
    input.destroy();
    gunzip.destroy(new TokenwatchError(ErrorCode.Aborted, 'aborted'));
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  if (signal?.aborted) onAbort();
  try {
    for await (const chunk of inflater.chunks()) tail.add(chunk);
  } finally {
    signal?.removeEventListener('abort', onAbort);
    input.destroy();
  }
  return tail.take();
}

/**
 * Latest event time among the last lines of one file (plain or gzip audit JSON lines), epoch ms UTC.
 * Best effort: undefined for other formats (exports hold no event per line), empty or unreadable files
 * (the reader reports those). A gzip file is decompressed in full, on libuv's thread pool. `edge` receives the event
 * times of the last lines that the file's first {@link TAIL_BYTES} do not hold (see {@link EdgeTimeSink}).
 */
export async function latestEventTimeOfFile(file: string, signal?: AbortSignal, skewed?: SkewedTimeSink, edge?: EdgeTimeSink): Promise<number | undefined> {
  try {
    if (signal?.aborted) return undefined;
    const fh = await open(file, 'r');
    let size: number;
    const head = Buffer.alloc(2);
    try {
      const st = await fh.stat();
      if (!st.isFile()) return undefined;
      size = st.size;
      await fh.read(head, 0, 2, 0);
    } finally {
      await fh.close();
    }
    const { tail, partialFirst, total } = isGzip(head) ? await gzipTail(file, signal) : await plainTail(file, size);
    return latestEventTimeInTail(tail, partialFirst, undefined, skewed ? (t) => skewed(t, file) : undefined, edge ? { from: edgeCountFrom(total, tail.length), sink: edge } : undefined);
  } catch {
    return undefined;
  }
}

/**
 * Latest event time over the tails of all `files`, epoch ms UTC; undefined when none has one. Never throws.
 * At most {@link TAIL_CONCURRENCY} files are open at once (so memory does not grow with the number of files);
 * once `signal` aborts, no further file is read and a running gzip inflation stops. `edge`: as in
 * {@link latestEventTimeOfFile}, for every file.
 */
export async function latestEventTimeOfFiles(files: string[], signal?: AbortSignal, skewed?: SkewedTimeSink, edge?: EdgeTimeSink): Promise<number | undefined> {
  const limit = pLimit(TAIL_CONCURRENCY);
  const times = await Promise.all(files.map((f) => limit(() => latestEventTimeOfFile(f, signal, skewed, edge))));
  let latest: number | undefined;
  for (const t of times) if (t !== undefined && (latest === undefined || t > latest)) latest = t;
  return latest;
}

/**
 * Earliest event time among the complete JSON lines of `head` (the first bytes of a file), epoch ms UTC; undefined when
 * none is an audit event. The last line is skipped when `partialLast` (the window ends mid-line). Pure but for the
 * sinks: `edge` receives every kept event time of a line that may not hold a token use (see {@link EdgeTimeSink}).
 */
export function earliestEventTimeInHead(
  head: Buffer,
  partialLast: boolean,
  skewed?: SkewedTimeSink,
  ceiling: number = Date.now() + PLAUSIBLE_CLOCK_SKEW_MS,
  edge?: EdgeTimeSink,
): number | undefined {
  const lines = head.toString('utf8').split('\n');
  const times: number[] = [];
  const plain: boolean[] = []; // per time: its line cannot hold a token use
  for (let i = 0; i < lines.length - (partialLast ? 1 : 0); i++) {
    let line = lines[i]?.trim();
    if (line && line[0] !== '{') line = S3_PREFIX_RE.exec(line)?.[1];
    if (line?.[0] !== '{') continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      continue;
    }
    if (!isAuditEvent(value)) continue;
    const t = eventTimeMs(value);
    if (t !== undefined) {
      times.push(t);
      plain.push(edge !== undefined && !mayHoldTokenUse(line));
    }
  }
  // The clock-skew rule over the head's own times (a group stamped days before the rest: a node with a wrong clock).
  const inconsistent = judgeLines(times, ceiling);
  let earliest: number | undefined;
  for (const [i, t] of times.entries()) {
    if (inconsistent(t)) {
      skewed?.(t);
      continue;
    }
    if (earliest === undefined || t < earliest) earliest = t;
    if (plain[i]) edge?.(t);
  }
  return earliest;
}

/**
 * The first {@link TAIL_BYTES} of a file, inflated when it is gzip (only that much is inflated, and only that much
 * kept, so that {@link edgeCountFrom} knows which lines it holds).
 */
async function fileHead(file: string): Promise<{ head: Buffer; partialLast: boolean } | undefined> {
  const fh = await open(file, 'r');
  let raw: Buffer;
  let size: number;
  try {
    const st = await fh.stat();
    if (!st.isFile()) return undefined;
    size = st.size;
    raw = Buffer.alloc(Math.min(size, TAIL_BYTES));
    const { bytesRead } = await fh.read(raw, 0, raw.length, 0);
    raw = raw.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
  if (!isGzip(raw)) return { head: raw, partialLast: size > raw.length };
  const chunks: Buffer[] = [];
  let bytes = 0;
  let whole = false; // the file inflated to its end within the head
  const input = createReadStream(file, { highWaterMark: 256 * 1024 });
  const gunzip = input.pipe(createGunzip({ chunkSize: 64 * 1024 }));
  try {
    for await (const chunk of gunzip as AsyncIterable<Buffer>) {
      chunks.push(chunk);
      bytes += chunk.length;
      if (bytes >= TAIL_BYTES) break;
    }
    whole = bytes < TAIL_BYTES;
  } catch {
    // a corrupt or cut-off gzip: what was inflated still counts (the reader reports the error)
  } finally {
    input.destroy();
    gunzip.destroy();
  }
  const head = Buffer.concat(chunks);
  return { head: head.length > TAIL_BYTES ? head.subarray(0, TAIL_BYTES) : head, partialLast: !whole };
}

/**
 * Earliest event time over the heads (first {@link TAIL_BYTES}) of all `files` (plain or gzip audit JSON lines), epoch
 * ms UTC: where the audit window of the input starts (the readiness verdict, `src/findings/readiness.ts`). Best effort,
 * never throws: undefined for other formats and unreadable files. At most {@link TAIL_CONCURRENCY} files at once.
 * `edge` receives the event times of those first lines (see {@link EdgeTimeSink}).
 */
export async function earliestEventTimeOfFiles(files: string[], skewed?: SkewedTimeSink, edge?: EdgeTimeSink): Promise<number | undefined> {
  const limit = pLimit(TAIL_CONCURRENCY);
  const times = await Promise.all(
    files.map((f) =>
      limit(async () => {
        try {
          const h = await fileHead(f);
          return h ? earliestEventTimeInHead(h.head, h.partialLast, skewed ? (t) => skewed(t, f) : undefined, undefined, edge) : undefined;
        } catch {
          return undefined;
        }
      }),
    ),
  );
  let earliest: number | undefined;
  for (const t of times) if (t !== undefined && (earliest === undefined || t < earliest)) earliest = t;
  return earliest;
}
