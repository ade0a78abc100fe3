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
import { eventTimeMs, isAuditEvent, parseRfc3339Ms } from '../audit/token-use.js';

const S3_PREFIX_RE = /^\d{4}-\d{2}-\d{2}T\S{1,40}[ \t]+(\{.*)$/;

/** Bytes of a file's (decompressed) end that are searched for events. */
export const TAIL_BYTES = 256 * 1024;

/**
 * Latest event time (`requestReceivedTimestamp`, else `stageTimestamp`; `eventTimeMs` of the audit
 * module) among the complete JSON lines in `tail`, epoch ms UTC; undefined when none is an audit event.
 * The first line is skipped when `partialFirst` (the window starts mid-line). Pure.
 *
 * Lines are taken from the last one back (the newest come last, so the latest time is found early), and a line is
 * `JSON.parse`d only when {@link eventTimeUpperBound} says it could hold a later time: on many small files this skips
 * most of the parsing (10,000 files of 300 KB: 256 KiB of tail each) with the same result.
 */
export function latestEventTimeInTail(tail: Buffer, partialFirst: boolean): number | undefined {
  const lines = tail.toString('utf8').split('\n');
  let latest: number | undefined;
  for (let i = lines.length - 1; i >= (partialFirst ? 1 : 0); i--) {
    let line = lines[i]?.trim();
    if (line && line[0] !== '{') line = S3_PREFIX_RE.exec(line)?.[1]; // `<timestamp> {…}` (CloudWatch export to S3)
    if (line?.[0] !== '{') continue;
    if (latest !== undefined && eventTimeUpperBound(line) <= latest) continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      continue; // cut short or not JSON: the reader counts it as malformed
    }
    if (!isAuditEvent(value)) continue;
    const t = eventTimeMs(value);
    if (t !== undefined && (latest === undefined || t > latest)) latest = t;
  }
  return latest;
}

/** The two keys `eventTimeMs` reads, as they appear in JSON text (with their quotes). */
const TIME_KEYS = ['"requestReceivedTimestamp"', '"stageTimestamp"'] as const;
/** `\u0040`–`\u007f` escapes: a key spelled with escaped letters would hide from a text search (Go never writes them). */
const ESCAPED_LETTER_RE = /\\u00[4-7][0-9a-f]/i;

/**
 * An upper bound of the time `eventTimeMs(JSON.parse(line))` gives, epoch ms UTC, from the text alone: the latest
 * of every string value written after a `"requestReceivedTimestamp"` or `"stageTimestamp"` key anywhere in the line
 * (the event's own keys among them, so its time cannot be later); -Infinity when there is none (no time at all);
 * Infinity when the text cannot be trusted (a value or a key with escapes). Pure.
 */
export function eventTimeUpperBound(line: string): number {
  if (line.includes('\\u') && ESCAPED_LETTER_RE.test(line)) return Number.POSITIVE_INFINITY;
  let bound = Number.NEGATIVE_INFINITY;
  for (const key of TIME_KEYS) {
    for (let at = line.indexOf(key); at !== -1; at = line.indexOf(key, at + 1)) {
      let i = at + key.length;
      while (line[i] === ' ' || line[i] === '\t') i++;
      if (line[i] !== ':') continue; // a string value, not a key
      i++;
      while (line[i] === ' ' || line[i] === '\t') i++;
      if (line[i] !== '"') continue; // not a string: eventTimeMs ignores it
      const end = line.indexOf('"', i + 1);
      const raw = end === -1 ? '' : line.slice(i + 1, end);
      if (end === -1 || raw.includes('\\')) return Number.POSITIVE_INFINITY;
      const t = parseRfc3339Ms(raw);
      if (t !== undefined && t > bound) bound = t;
    }
  }
  return bound;
}

async function plainTail(file: string, size: number): Promise<{ tail: Buffer; partialFirst: boolean }> {
  const fh = await open(file, 'r');
  try {
    const length = Math.min(size, TAIL_BYTES);
    const tail = Buffer.alloc(length);
    const { bytesRead } = await fh.read(tail, 0, length, size - length);
    return { tail: tail.subarray(0, bytesRead), partialFirst: size > length };
  } finally {
    await fh.close();
  }
}

/** Files whose tails are read at the same time: memory stays a few MiB whatever the number of files. */
export const TAIL_CONCURRENCY = 2;

/**
 * Decompresses the whole gzip file (no random access) keeping only its last {@link TAIL_BYTES}. Stops (and
 * frees its streams) when `signal` aborts.
 */
async function gzipTail(file: string, signal?: AbortSignal): Promise<{ tail: Buffer; partialFirst: boolean }> {
  let kept: Buffer[] = [];
  let keptBytes = 0;
  let dropped = false;
  const input = createReadStream(file, { highWaterMark: 1024 * 1024 });
  const gunzip = input.pipe(createGunzip({ chunkSize: 256 * 1024 }));
  const onAbort = (): void => {
    input.destroy();
    gunzip.destroy(new TokenwatchError(ErrorCode.Aborted, 'aborted'));
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  if (signal?.aborted) onAbort();
  try {
    for await (const chunk of gunzip as AsyncIterable<Buffer>) {
      kept.push(chunk);
      keptBytes += chunk.length;
      while (kept.length > 1 && keptBytes - (kept[0]?.length ?? 0) >= TAIL_BYTES) {
        keptBytes -= kept[0]?.length ?? 0;
        kept = kept.slice(1);
        dropped = true;
      }
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    input.destroy();
  }
  const all = Buffer.concat(kept);
  const tail = all.length > TAIL_BYTES ? all.subarray(all.length - TAIL_BYTES) : all;
  return { tail, partialFirst: dropped || all.length > TAIL_BYTES };
}

/**
 * Latest event time among the last lines of one file (plain or gzip audit JSON lines), epoch ms UTC.
 * Best effort: undefined for other formats (exports hold no event per line), empty or unreadable files
 * (the reader reports those). A gzip file is decompressed in full, on libuv's thread pool.
 */
export async function latestEventTimeOfFile(file: string, signal?: AbortSignal): Promise<number | undefined> {
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
    const { tail, partialFirst } = isGzip(head) ? await gzipTail(file, signal) : await plainTail(file, size);
    return latestEventTimeInTail(tail, partialFirst);
  } catch {
    return undefined;
  }
}

/**
 * Latest event time over the tails of all `files`, epoch ms UTC; undefined when none has one. Never throws.
 * At most {@link TAIL_CONCURRENCY} files are open at once (so memory does not grow with the number of files);
 * once `signal` aborts, no further file is read and a running gzip inflation stops.
 */
export async function latestEventTimeOfFiles(files: string[], signal?: AbortSignal): Promise<number | undefined> {
  const limit = pLimit(TAIL_CONCURRENCY);
  const times = await Promise.all(files.map((f) => limit(() => latestEventTimeOfFile(f, signal))));
  let latest: number | undefined;
  for (const t of times) if (t !== undefined && (latest === undefined || t > latest)) latest = t;
  return latest;
}
