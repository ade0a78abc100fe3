/**
 * Streaming reader of audit inputs: yields the {@link TokenUse}s found in files of any supported format,
 * each request (auditID) once, with bounded memory. The file reading of the `sources` stage (open, stat, gunzip);
 * the parsers it feeds are the pure ones of `src/audit/`.
 *
 * Formats are detected per file by content (see `src/audit/formats.ts`), after transparent gzip decompression
 * (magic bytes `1f 8b`, so rotated names such as `audit-2026-11-19T10-00-00.000.log.gz` or `audit.log.1`
 * need no special handling):
 * - audit JSON lines (`--audit-log-path` files): scanned on raw Buffers, see `src/audit/jsonl-scanner.ts`;
 * - `aws logs filter-log-events` JSON output and Logs Insights JSON exports: scanned on raw Buffers, each
 *   log message prefiltered before it is decoded and parsed, see `src/audit/json-export-scanner.ts`;
 * - CloudWatch Logs exports to S3 (`<timestamp> <event JSON>` lines): the JSON-lines scanner, prefix skipped;
 * - Logs Insights CSV exports (RFC 4180): streamed with csv-parse;
 * - `aws logs get-query-results` JSON and Logs Insights JSON exports without `@message` (e.g. the EKS guide
 *   query's `subject`, `elapsedtime`): streamed with @streamparser/json, one row at a time.
 * Rows of Insights results go through `tokenUseFromInsightsRow` (`src/audit/insights-rows.ts`).
 *
 * Per-record functions a worker thread can call on its own chunk/line (all pure, no I/O):
 * `JsonlScanner` (push Buffers of JSON lines, optionally `<timestamp> ` prefixed), `JsonExportScanner`,
 * `tokenUseFromRecordText` / `tokenUseFromJson` (one record's text), `tokenUseFromInsightsRow` (one Insights row),
 * `queryResultCells` (one get-query-results row → field map), `detectFormat` (a file's head), and once per file
 * `noAuditEventError` (the "no audit event in this file" rule).
 */
import { readSync } from 'node:fs';
import { open, stat, type FileHandle } from 'node:fs/promises';
import { Readable, pipeline } from 'node:stream';
import { createInflater, releaseInflated } from './inflated.js';
import { EdgeRecorder, type StreamEdges } from './stream-edges.js';
import { AKS_ADMIN_ONLY_TEXT, aksAdminOnly, GKE_NO_DATA_ACCESS_TEXT, gkeWithoutDataAccess, tallyPlatformHints } from './platform-hints.js';
import type { InputFormat, ReadNotice, ReadStats, TokenUse } from '../audit/types.js';
import { InputError, errorReason } from '../errors.js';
import {
  DETECT_HEAD_BYTES,
  KNOWN_FORMATS_TEXT,
  describeFirstRecord,
  describeUnknownContent,
  detectFormat,
  documentPaths,
  isGzip,
  leadingNulBytes,
  startsAsBatchDocument,
} from '../audit/formats.js';
import { createShapeTally, tokenUsesFromWrappedValue, type ShapeTally } from '../audit/records.js';
import { countOf, groupedNumber } from '../core/plural.js';
import { DEFAULT_MAX_LINE_BYTES, EDGE_BYTES, JsonlScanner, type LongLineSink, type TimeSampleSink } from '../audit/jsonl-scanner.js';
import type { JSONParser } from '@streamparser/json';
import { JsonExportScanner } from '../audit/json-export-scanner.js';
import { RecordGate } from '../audit/record-gate.js';
import {
  INSIGHTS_MAX_ROWS,
  createRowTally,
  queryResultCells,
  tokenUseFromInsightsRow,
  type InsightsRowTally,
} from '../audit/insights-rows.js';

export { tokenUseFromJson } from '../audit/records.js';
export { DEFAULT_MAX_LINE_BYTES, JsonlScanner } from '../audit/jsonl-scanner.js';

/** Progress of one file: bytes read from disk (compressed bytes for gzip) out of its size. */
export interface ReadProgress {
  file: string;
  bytesRead: number;
  /** File size from `fstat` (0 for pipes and other non-regular files). */
  totalBytes: number;
  /** Gzip files: bytes inflated so far (the compressed `bytesRead` can lag far behind a large inflation). */
  decompressedBytes?: number;
}

/** Options of {@link readTokenUses}. */
export interface ReadOptions {
  /** Called at most about every 100 ms per file, and once when a file is fully read. */
  onProgress?: (p: ReadProgress) => void;
  /** A JSON line or CSV record longer than this is counted malformed and skipped. Default 64 MiB. */
  maxLineBytes?: number;
  /**
   * Stop with an InputError when one gzip file inflates to more than this many bytes (a decompression bomb
   * guard). Default: no limit.
   */
  maxDecompressedBytes?: number;
  /** Called for each {@link ReadNotice} (not an error: the read goes on). */
  onNotice?: (n: ReadNotice) => void;
  /**
   * For each input of audit JSON lines (plain or gzip) that is not a regular file (standard input, a pipe), which
   * cannot be read a second time: its first and last `bytes` (uncompressed), kept as it is read and handed to
   * `onEdges` once it has been read to its end (see `stream-edges.ts`).
   */
  streamEdges?: { bytes: number; onEdges: (edges: StreamEdges) => void };
  /**
   * For each input of audit JSON lines (plain or gzip, files and standard input): event times sampled across the whole
   * input, the first line that does not pass the prefilter at or after every 256 KiB (`TIME_SAMPLE_BYTES`), each with
   * the number of such lines it stands for (`JsonlScanner.sampleTimes`), none from an input's first and last `EDGE_BYTES` (256 KiB, which
   * `scan` counts line by line). For the clock-skew density (docs/clock-skew.md rule 2).
   */
  onTimeSample?: TimeSampleSink;
}

/** A fresh, all-zero {@link ReadStats}. */
export function createReadStats(): ReadStats {
  return { files: 0, lines: 0, events: 0, tokenUses: 0, malformed: 0, duplicates: 0 };
}

/** Size of each read from disk into a fresh buffer (consumers may keep it): 64 KiB (see RawSource). */
const READ_CHUNK_BYTES = 64 * 1024;
/**
 * Size of each read of the fast path into one recycled buffer (`RawSource.readChunkSync`): 1 MiB, which scans ~8 %
 * faster than 64 KiB (fewer calls, fewer lines split across reads) and is never kept.
 */
const RECYCLED_READ_BYTES = 1024 * 1024;
/** Longest stretch of synchronous reading and scanning before the event loop gets a turn. */
const YIELD_EVERY_MS = 20;
const PROGRESS_INTERVAL_MS = 100;

interface FileContext {
  file: string;
  stats: ReadStats;
  maxLineBytes: number;
  maxDecompressedBytes: number;
  notice: (code: ReadNotice['code'], message: string, row?: number) => void;
  onProgress: ReadOptions['onProgress'];
  streamEdges?: ReadOptions['streamEdges'];
  onTimeSample?: TimeSampleSink;
}

/**
 * The dedupe rule of a read (one request counts once, docs/design/domain.md §3): true for the first use of its
 * `auditID` (counted in `stats.tokenUses`), false for a repeat (counted in `stats.duplicates`). Shared by the serial
 * reader and the parallel merge (`scan/parallel.ts`), so both count alike.
 */
export function countOnce(seen: SeenAuditIDs, stats: ReadStats, use: TokenUse, onConflict?: (use: TokenUse) => void): boolean {
  const mark = useMark(use);
  const prev = seen.get(use.auditID);
  if (prev !== undefined) {
    // One request logs one event per stage with different content: a repeat proves nothing. The same stage twice with
    // different token annotations does: keep this use too, count and report the conflict.
    if (Math.floor(prev / 2 ** 32) !== Math.floor(mark / 2 ** 32) || prev === mark) {
      stats.duplicates++;
      return false;
    }
    stats.auditIdConflicts = (stats.auditIdConflicts ?? 0) + 1;
    onConflict?.(use);
    stats.tokenUses++;
    return true;
  }
  seen.set(use.auditID, mark);
  stats.tokenUses++;
  return true;
}

/** auditID → {@link useMark} of the first use counted with it (a number: memory stays that of a set of ids). */
export type SeenAuditIDs = Map<string, number>;

const STAGES = ['RequestReceived', 'ResponseStarted', 'ResponseComplete', 'Panic'];

/**
 * A use's stage (high part: index in {@link STAGES} + 1, 0 when unknown, 5 for another value) and a 32-bit FNV-1a hash
 * of its token annotations (kind, subject, seconds after warning, legacy Secret) in the low 32 bits.
 */
function useMark(use: TokenUse): number {
  const i = use.stage === undefined ? -1 : STAGES.indexOf(use.stage);
  const stage = use.stage === undefined ? 0 : i >= 0 ? i + 1 : STAGES.length + 1;
  const text = `${use.kind}\0${use.subject ?? ''}\0${use.secondsAfterWarning ?? ''}\0${use.legacySecret?.kind ?? ''}\0${use.legacySecret?.name ?? ''}\0${use.legacySecret?.namespace ?? ''}`;
  let h = 0x811c9dc5;
  for (let k = 0; k < text.length; k++) {
    h ^= text.charCodeAt(k);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return stage * 2 ** 32 + h;
}

/** The warning for the first auditID conflict of a read (later ones are only counted, in `stats.auditIdConflicts`). */
export function auditIdConflictMessage(file: string, use: TokenUse): string {
  return `${file}: two records with auditID ${use.auditID} and stage ${use.stage ?? '(none)'} carry different token annotations; both are kept (a forged or corrupted event must not hide a token use) and further conflicts are counted in stats.auditIdConflicts`;
}

/**
 * Reads the files in order and yields their token uses.
 *
 * - Each request is yielded once: an `auditID` already yielded in this call (from any stage or file)
 *   increments `stats.duplicates` instead.
 * - Counts into `stats` (see `ReadStats`; `lines` = JSON lines / CSV rows / exported log events seen,
 *   `events` = records that look like audit events, `malformed` = records skipped as unreadable;
 *   `lines = events + malformed` always holds; blank lines are not counted).
 *   A JSON export (`filter-log-events`, Insights JSON) that breaks off (syntax error, truncation) counts
 *   one malformed record and ends that file; what was read before is kept.
 * - Memory stays bounded by the longest line, not the file size: files are streamed, and a line over
 *   `maxLineBytes` is buffered only up to that limit, then skipped. The dedupe set holds one auditID per
 *   distinct token-use request (~100 bytes each).
 *
 * - A file in which no record is an audit event (or an EKS guide query row) is an InputError naming the file and
 *   the formats tokenwatch knows — never a run that counts every line malformed; a file with at least one
 *   readable event keeps counting its malformed records.
 * - Leading NUL bytes (the hole `logrotate copytruncate` leaves) are skipped, with a notice.
 * - Notices (`opts.onNotice`): partial or capped Logs Insights results, guide-query rows without pods,
 *   a file that could not be read to its end (truncated), skipped NUL bytes.
 *
 * @throws InputError (naming the file) for a missing or unreadable file, a directory, a file whose format is
 *   unknown (including binary data and UTF-16 text, with how to convert it), a file without a single audit event,
 *   corrupt/truncated gzip data, or a gzip file inflating past `maxDecompressedBytes`. All files are checked to
 *   exist before the first is read.
 */
export async function* readTokenUses(
  files: string[],
  stats: ReadStats,
  opts: ReadOptions = {},
): AsyncGenerator<TokenUse> {
  const maxLineBytes = opts.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
  if (!(maxLineBytes > 0)) throw new RangeError('maxLineBytes must be positive');
  const maxDecompressedBytes = opts.maxDecompressedBytes ?? Infinity;
  if (!(maxDecompressedBytes > 0)) throw new RangeError('maxDecompressedBytes must be positive');
  if (files.filter((f) => f === STDIN).length > 1) throw new InputError(STDIN, 'standard input can be read only once');
  for (const file of files) {
    if (file === STDIN) continue;
    try {
      const st = await stat(file);
      if (st.isDirectory()) throw new InputError(file, 'is a directory, not an audit log file');
    } catch (err) {
      throw toOpenError(err, file);
    }
  }
  const seen: SeenAuditIDs = new Map();
  let conflictReported = false;
  for (const file of files) {
    const ctx: FileContext = {
      file,
      stats,
      maxLineBytes,
      maxDecompressedBytes,
      onProgress: opts.onProgress,
      ...(opts.streamEdges ? { streamEdges: opts.streamEdges } : {}),
      ...(opts.onTimeSample ? { onTimeSample: opts.onTimeSample } : {}),
      notice: (code, message, row) => opts.onNotice?.({ file, code, message, ...(row !== undefined ? { row } : {}) }),
    };
    const onConflict = (use: TokenUse): void => {
      if (conflictReported) return;
      conflictReported = true;
      ctx.notice('auditid-conflict', auditIdConflictMessage(file, use));
    };
    for await (const use of readOneFile(ctx)) {
      if (countOnce(seen, stats, use, onConflict)) yield use;
    }
  }
}

function toOpenError(err: unknown, file: string): InputError {
  if (err instanceof InputError) return err;
  return new InputError(file, `cannot read file (${errorReason(err)})`, {
    cause: err,
    ...(file === STDIN ? { subject: 'standard input' } : {}),
  });
}

/** `chunks`, each given to `edges` as it passes (before the scanner may reuse it); `return` is passed on. */
function recorded(chunks: AsyncIterator<Buffer>, edges: EdgeRecorder): AsyncIterator<Buffer> {
  return {
    async next() {
      const r = await chunks.next();
      if (!r.done) edges.add(r.value);
      return r;
    },
    ...(chunks.return ? { return: (v?: unknown) => chunks.return!(v) } : {}),
  };
}

/** The `--audit-log` name of standard input. */
export const STDIN = '-';



async function* readOneFile(ctx: FileContext): AsyncGenerator<TokenUse> {
  const { file, stats } = ctx;
  // Standard input (a pipe, socket or redirected file) is read as a stream: every format works, none needs to seek.
  let fh: FileHandle | undefined;
  try {
    if (file !== STDIN) fh = await open(file, 'r');
  } catch (err) {
    throw toOpenError(err, file);
  }
  try {
    let totalBytes = 0;
    let regular = false;
    try {
      const st = await fh?.stat();
      if (st?.isDirectory()) throw new InputError(file, 'is a directory, not an audit log file');
      regular = st?.isFile() ?? false;
      totalBytes = regular && st ? st.size : 0;
    } catch (err) {
      throw toOpenError(err, file);
    }
    stats.files++;
    const rawSource = new RawSource(fh ?? process.stdin, file, totalBytes, regular, ctx.onProgress);
    const raw = rawSource.chunks()[Symbol.asyncIterator]();
    const rawHead = await peek(raw, 2);
    const gzip = rawHead.chunks.length > 0 && isGzip(Buffer.concat(rawHead.chunks));
    let data: AsyncIterator<Buffer> = replay(rawHead, raw);
    if (gzip) data = gunzip(ctx, data, rawSource)[Symbol.asyncIterator]();
    const nul = { bytes: 0 };
    data = skipLeadingNuls(data, nul)[Symbol.asyncIterator]();
    const head = await peek(data, DETECT_HEAD_BYTES);
    if (nul.bytes > 0) {
      ctx.notice(
        'leading-nul',
        `${file}: skipped ${nul.bytes} NUL bytes at the start of the file (the hole \`copytruncate\` log rotation leaves)`,
      );
    }
    const headBytes = Buffer.concat(head.chunks).subarray(0, DETECT_HEAD_BYTES);
    const format = detectFormat(headBytes);
    if (format === undefined) {
      if (isBlank(headBytes) && head.done) {
        // An empty (e.g. just rotated) log holds no events: not an error, but a pipeline whose producer failed
        // (`kubectl logs … | tokenwatch scan -`) must not pass in silence.
        ctx.notice('empty', `${file}: empty: no record to read (exit code unchanged)`);
        return;
      }
      const { what, hint } = describeUnknownContent(headBytes);
      throw new InputError(
        file,
        `unknown input format (${what}${gzip ? ' after gunzip' : ''}); ` +
          (hint ? `${hint}. ` : '') +
          `tokenwatch reads ${KNOWN_FORMATS_TEXT}`,
      );
    }
    const before = { lines: stats.lines, events: stats.events, malformed: stats.malformed, oversized: stats.oversized ?? 0, nulLines: stats.nulLines ?? 0 };
    const tally = createRowTally();
    const shapes = createShapeTally();
    if (format === 'wrapped-jsonl' || format === 'json-documents') tallyPlatformHints(headBytes, shapes); // AKS categories, GKE log names (./platform-hints.ts)
    if (format === 'insights-csv') {
      yield* scanCsv(replay(head, data), ctx, tally);
    } else if (format === 'insights-query-results' || format === 'insights-query-rows' || format === 'insights-json-fields') {
      yield* scanJsonRows(replay(head, data), ctx, format, tally);
    } else if (format === 'json-documents') {
      yield* scanDocuments(replay(head, data), ctx, documentPaths(headBytes), shapes);
    } else {
      const out: TokenUse[] = [];
      // Batch documents (EventList, `{"records":[…]}`) longer than the record limit are streamed record by record.
      const longLine = format === 'wrapped-jsonl' ? batchLineStreamer((await import('@streamparser/json')).JSONParser, ctx, out, shapes) : undefined;
      const scanner: ByteScanner =
        format === 'audit-jsonl' || format === 'cw-s3-export' || format === 'aws-logs-tail' || format === 'wrapped-jsonl'
          ? new JsonlScanner(
              stats,
              out,
              ctx.maxLineBytes,
              format === 'cw-s3-export' || format === 'aws-logs-tail',
              format === 'wrapped-jsonl' ? shapes : undefined,
              longLine,
            )
          : new JsonExportScanner(format, stats, out, ctx.maxLineBytes);
      // Audit JSON lines (plain or gzip, files and standard input): event times sampled across the whole input.
      // Its first and last bytes are counted line by line (scan's edges; not those of `aws logs tail` output): no sample there.
      const edge = format === 'aws-logs-tail' ? 0 : EDGE_BYTES;
      if (ctx.onTimeSample && format !== 'wrapped-jsonl') (scanner instanceof JsonlScanner ? scanner : undefined)?.sampleTimes(ctx.onTimeSample, { from: edge, tail: edge });
      if (!gzip && regular) {
        // Fast path: the rest of the file is read synchronously into one recycled buffer (see RawSource) — for JSON
        // lines, the needle search's own memory, so that searching it copies nothing.
        await data.return?.();
        const lines: JsonlScanner | undefined = scanner instanceof JsonlScanner ? scanner : undefined;
        const into = lines?.claimReadBuffer();
        try {
          yield* scanBytes(scanner, out, head.chunks, head.done ? () => undefined : () => rawSource.readChunkSync(into));
        } finally {
          lines?.release();
        }
      } else if (!regular && ctx.streamEdges && (format === 'audit-jsonl' || format === 'cw-s3-export')) {
        // Read once: its first and last lines are kept as they pass (a regular file's are read again by position).
        const edges = new EdgeRecorder(file, ctx.streamEdges.bytes);
        const rest = head.done ? undefined : data;
        for (const c of head.chunks) edges.add(c);
        yield* scanBytes(scanner, out, head.chunks, rest ? recorded(rest, edges) : () => undefined);
        ctx.streamEdges.onEdges(edges.take());
      } else {
        yield* scanBytes(scanner, out, head.chunks, head.done ? () => undefined : data);
      }
      if (scanner.failed) {
        ctx.notice(
          'truncated',
          `${file}: the JSON document breaks off after ${countOf(stats.lines - before.lines - 1, 'record')} (syntax error or ` +
            'truncated file); the rest of the file was not read',
          stats.lines - before.lines,
        );
      }
      if (format === 'insights-json') capNotice(ctx, stats.lines - before.lines - (scanner.failed ? 1 : 0));
    }
    const records = stats.lines - before.lines;
    const events = stats.events - before.events;
    // (Audit JSON lines are not described: their first record is an event; and a parallel read of their ranges words
    // the error alike without the head.)
    const first = format === 'audit-jsonl' ? undefined : describeFirstRecord(headBytes);
    const noEvent = noAuditEventError(file, format, records, events, tally, first);
    if (noEvent) throw noEvent;
    shapeNotices(ctx, records, events, stats.malformed - before.malformed, shapes);
    for (const n of skippedRecordNotices(file, (stats.oversized ?? 0) - before.oversized, (stats.nulLines ?? 0) - before.nulLines, ctx.maxLineBytes)) ctx.notice(n.code, n.message);
    if (tally.guideRows > 0) {
      ctx.notice(
        'guide-query',
        `${file}: ${tally.guideRows} ${tally.guideRows === 1 ? 'row' : 'rows'} of the EKS guide query (subject, ` +
          'elapsedtime) without @message: findings ' +
          'name ServiceAccounts and rejection dates, but such input cannot tell pods, workloads from pods, user agents, ' +
          'source IPs or causes; keep @message in the query (`fields @timestamp, @message`) for those',
      );
    }
  } finally {
    await fh?.close().catch(() => undefined);
  }
}

/**
 * The rule behind every format (docs/design/contracts.md "Exit codes", exit 2: unknown format): a file in which no record is an audit event in a known format is an
 * error naming the file and the formats tokenwatch knows — never a run that counts every line malformed. Pure;
 * call it once per file after scanning it (e.g. from a worker thread that scanned the file's chunks).
 *
 * @param records records of the file counted in `stats.lines`; @param events of them, counted in `stats.events`.
 * @returns the InputError to throw, or `undefined` when the file is fine (no records at all, or ≥ 1 event).
 */
export function noAuditEventError(
  file: string,
  format: InputFormat,
  records: number,
  events: number,
  tally: InsightsRowTally = createRowTally(),
  first?: { what: string; hint?: string },
): InputError | undefined {
  if (records === 0 || events > 0) return undefined;
  return new InputError(
    file,
    `${records === 1 ? 'its only record is not' : `none of its ${countOf(records, 'record')} is`} an audit event in a format tokenwatch knows (read as ` +
      `${FORMAT_NAMES[format]}${first ? `; the first record is ${first.what}` : ''}); ` +
      (first?.hint ? `${first.hint}; ` : '') +
      (tally.guideRowsWithoutTime > 0
        ? 'its rows have a subject but no @timestamp (a `stats … by subject` query): run the query without ' +
          '`stats` (keep `fields @timestamp, @message`) so each row has its time; '
        : '') +
      `tokenwatch reads ${KNOWN_FORMATS_TEXT}`,
  );
}

/**
 * The warnings for records of one file that were skipped and read past (`oversized` records over `maxLineBytes`,
 * `nulLines` lines holding a NUL byte): none when both are 0. Pure; the serial reader calls it once per file, and so
 * does the parallel merge for a file read in ranges.
 */
export function skippedRecordNotices(file: string, oversized: number, nulLines: number, maxLineBytes: number): ReadNotice[] {
  const out: ReadNotice[] = [];
  if (oversized > 0) {
    out.push({
      file,
      code: 'oversized',
      message:
        `${file}: skipped ${countOf(oversized, 'record')} longer than ${formatBytes(maxLineBytes)} (the record limit) and read on; ` +
        'no audit event is that long: check that the file holds only the audit log (counted in stats.oversized and stats.malformed)',
    });
  }
  if (nulLines > 0) {
    out.push({
      file,
      code: 'nul-line',
      message:
        `${file}: skipped ${countOf(nulLines, 'line')} holding NUL bytes (a zeroed block, e.g. from a crash while writing) and read on ` +
        '(counted in stats.nulLines and stats.malformed)',
    });
  }
  return out;
}

/** `64 MiB`, `1 KiB`, `512 bytes`: a byte limit for messages. */
function formatBytes(n: number): string {
  if (n >= 1024 * 1024 && n % (1024 * 1024) === 0) return `${n / (1024 * 1024)} MiB`;
  if (n >= 1024 && n % 1024 === 0) return `${n / 1024} KiB`;
  return `${countOf(n, 'byte')}`;
}

/** How each format is named in messages. */
const FORMAT_NAMES: Record<InputFormat, string> = {
  'audit-jsonl': 'audit JSON lines',
  'wrapped-jsonl': 'JSON lines of audit webhook batches, GKE, AKS or Loki records',
  'json-documents': 'pretty-printed, concatenated or JSON-array documents',
  'aws-logs-tail': '`aws logs tail` text',
  'cw-s3-export': 'a CloudWatch export to S3',
  'filter-log-events': '`aws logs filter-log-events` output',
  'insights-query-results': '`aws logs get-query-results` output',
  'insights-query-rows': '`aws logs get-query-results --query results` output',
  'insights-json': 'a Logs Insights JSON export',
  'insights-json-fields': 'a Logs Insights JSON export without @message',
  'insights-csv': 'a Logs Insights CSV export',
};

const SPLIT_HINT =
  'split the query by time range (e.g. one query per day with `aws logs start-query --start-time/--end-time`, ' +
  'or narrower console time ranges) so that each returns fewer than 10,000 rows';

/** A Logs Insights result of exactly {@link INSIGHTS_MAX_ROWS} rows was probably cut at the cap. */
function capNotice(ctx: FileContext, rows: number): void {
  if (rows !== INSIGHTS_MAX_ROWS) return;
  ctx.notice(
    'row-cap',
    `${ctx.file}: exactly ${groupedNumber(INSIGHTS_MAX_ROWS)} rows, the Logs Insights per-query limit: the result ` +
      `is probably truncated; ${SPLIT_HINT}`,
  );
}

/** Drops the NUL bytes at the start of a stream (counted in `nul.bytes`), then passes everything through. */
async function* skipLeadingNuls(it: AsyncIterator<Buffer>, nul: { bytes: number }): AsyncGenerator<Buffer> {
  try {
    let skipping = true;
    for (;;) {
      const r = await it.next();
      if (r.done) return;
      let chunk = r.value;
      if (skipping) {
        const n = leadingNulBytes(chunk);
        nul.bytes += n;
        if (n === chunk.length) continue;
        skipping = false;
        if (n > 0) chunk = chunk.subarray(n);
      }
      yield chunk;
    }
  } finally {
    await it.return?.();
  }
}

function isBlank(b: Buffer): boolean {
  for (let i = 0; i < b.length; i++) {
    const c = b[i];
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) {
      if (i === 0 && b.length >= 3 && c === 0xef && b[1] === 0xbb && b[2] === 0xbf) {
        i = 2;
        continue;
      }
      return false;
    }
  }
  return true;
}

/**
 * Sequential reads of one open file, `READ_CHUNK_BYTES` at a time, reporting progress.
 *
 * Regular files are read with `readSync` (the scanners' fast path into one small recycled buffer): a chunk
 * that fits the CPU's L2 cache is scanned three times (newlines, two needles) at cache speed, and a synchronous
 * read costs a syscall where an async one costs a thread-pool round trip. Measured on a 1 GB audit log
 * (2-vCPU VM, whole process, best of 5): 64 KiB sync reads 1.2 s; 128 KiB–1 MiB sync reads 1.6–1.9 s;
 * 1 MiB async double-buffered reads 1.8 s. The event loop still gets a turn every `YIELD_EVERY_MS`.
 * Pipes and other non-regular files are read asynchronously (a sync read could block on them).
 */
class RawSource {
  private bytesRead = 0;
  private lastProgress = 0;
  private spare: Buffer | undefined;
  private decompressed: number | undefined;

  constructor(
    /** The open file, or a stream (standard input) that is read as a pipe. */
    private readonly fh: FileHandle | Readable,
    private readonly file: string,
    private readonly totalBytes: number,
    private readonly regular: boolean,
    private readonly onProgress: ReadOptions['onProgress'],
  ) {}

  /** Chunks in fresh buffers (consumers may keep them). */
  chunks(): AsyncGenerator<Buffer> {
    return this.regular ? this.syncChunks() : this.asyncChunks();
  }

  /**
   * The next chunk of a regular file, read synchronously into `into` (default: a recycled buffer of
   * RECYCLED_READ_BYTES): valid only until the next call. `undefined` at the end of the file.
   */
  readChunkSync(into?: Buffer): Buffer | undefined {
    const buf = into ?? (this.spare ??= Buffer.allocUnsafeSlow(RECYCLED_READ_BYTES));
    const n = this.readInto(buf);
    return n === 0 ? undefined : buf.subarray(0, n);
  }

  private readInto(buf: Buffer): number {
    if (this.fh instanceof Readable) throw new InputError(this.file, 'is a stream: it cannot be read synchronously');
    let n: number;
    try {
      n = readSync(this.fh.fd, buf, 0, buf.length, null);
    } catch (err) {
      throw this.readError(err);
    }
    this.progress(n, n === 0);
    return n;
  }

  private async *syncChunks(): AsyncGenerator<Buffer> {
    let lastTurn = performance.now();
    for (;;) {
      const buf = Buffer.allocUnsafeSlow(READ_CHUNK_BYTES);
      const n = this.readInto(buf);
      if (n === 0) return;
      yield buf.subarray(0, n);
      const now = performance.now();
      if (now - lastTurn >= YIELD_EVERY_MS) {
        await new Promise<void>((resolve) => setImmediate(resolve)); // let timers and I/O run
        lastTurn = performance.now();
      }
    }
  }

  private async *asyncChunks(): AsyncGenerator<Buffer> {
    if (this.fh instanceof Readable) {
      const stream = this.fh;
      try {
        for await (const chunk of stream) {
          const buf = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
          this.progress(buf.length, false);
          yield buf;
        }
      } catch (err) {
        throw this.readError(err);
      }
      this.progress(0, true);
      return;
    }
    for (;;) {
      const buf = Buffer.allocUnsafeSlow(READ_CHUNK_BYTES);
      let n: number;
      try {
        ({ bytesRead: n } = await this.fh.read(buf, 0, buf.length, null));
      } catch (err) {
        throw this.readError(err);
      }
      this.progress(n, n === 0);
      if (n === 0) return;
      yield buf.subarray(0, n);
    }
  }

  /** Compressed bytes read so far. */
  get bytesConsumed(): number {
    return this.bytesRead;
  }

  /** Gzip: bytes inflated so far (reported with the next progress call, at most every 100 ms). */
  inflated(total: number): void {
    this.decompressed = total;
    this.progress(0, false);
  }

  private readError(err: unknown): InputError {
    return new InputError(this.file, `read failed after ${this.bytesRead} bytes (${errorReason(err)})`, { cause: err });
  }

  private progress(n: number, final: boolean): void {
    this.bytesRead += n;
    if (!this.onProgress) return;
    const now = performance.now();
    if (final || now - this.lastProgress >= PROGRESS_INTERVAL_MS) {
      this.lastProgress = now;
      this.onProgress({
        file: this.file,
        bytesRead: this.bytesRead,
        totalBytes: this.totalBytes,
        ...(this.decompressed !== undefined ? { decompressedBytes: this.decompressed } : {}),
      });
    }
  }
}

interface Peeked {
  chunks: Buffer[];
  done: boolean;
}

/** Pulls chunks until at least `want` bytes are held or the source ends. */
async function peek(it: AsyncIterator<Buffer>, want: number): Promise<Peeked> {
  const chunks: Buffer[] = [];
  let n = 0;
  while (n < want) {
    const r = await it.next();
    if (r.done) return { chunks, done: true };
    chunks.push(r.value);
    n += r.value.length;
  }
  return { chunks, done: false };
}

/** The peeked chunks, then the rest of the source. Closes the source when abandoned. */
async function* replay(peeked: Peeked, it: AsyncIterator<Buffer>): AsyncGenerator<Buffer> {
  try {
    yield* peeked.chunks;
    if (peeked.done) return;
    for (;;) {
      const r = await it.next();
      if (r.done) return;
      yield r.value;
    }
  } finally {
    await it.return?.();
  }
}

function isZlibError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('Z_');
}

/**
 * Decompresses a gzip byte stream (concatenated members allowed), reporting inflated bytes with the file's
 * progress. Corrupt or truncated data, or more than `ctx.maxDecompressedBytes` inflated → InputError.
 */
async function* gunzip(ctx: FileContext, source: AsyncIterator<Buffer>, raw: RawSource): AsyncGenerator<Buffer> {
  const { file } = ctx;
  const src = Readable.from({ [Symbol.asyncIterator]: () => source }, { objectMode: false, highWaterMark: 1024 * 1024 });
  const inflater = createInflater(); // its chunks are given back as they are scanned (scanBytes)
  const gz = inflater.stream;
  pipeline(src, gz, () => undefined); // errors surface through the iteration below
  let inflated = 0;
  try {
    for await (const chunk of inflater.chunks()) {
      inflated += chunk.length;
      if (inflated > ctx.maxDecompressedBytes) {
        throw new InputError(
          file,
          `inflates to more than ${ctx.maxDecompressedBytes} bytes (--max-decompressed-bytes) after ` +
            `${raw.bytesConsumed} compressed bytes; stopped. Raise the limit if the file is genuine`,
        );
      }
      raw.inflated(inflated);
      yield chunk;
    }
  } catch (err) {
    if (err instanceof InputError) throw err;
    if (isZlibError(err)) throw new InputError(file, `corrupt or truncated gzip data (${errorReason(err)})`, { cause: err });
    throw new InputError(file, `cannot decompress (${errorReason(err)})`, { cause: err });
  } finally {
    gz.destroy();
    src.destroy();
  }
}

/** A synchronous byte scanner: `JsonlScanner` or `JsonExportScanner`. */
interface ByteScanner {
  push(chunk: Buffer): void;
  end(): void;
  readonly failed?: boolean;
}

/**
 * Feeds a scanner the head chunks, then the rest of the input, and yields the token uses it finds.
 * `rest` is a synchronous chunk reader (regular files) or an async chunk iterator (gunzip, pipes). Each chunk of a
 * gunzip stream is given back once pushed (`releaseInflated`: the byte scanners keep no view of what they were given).
 */
async function* scanBytes(
  scanner: ByteScanner,
  out: TokenUse[],
  head: Buffer[],
  rest: (() => Buffer | undefined) | AsyncIterator<Buffer>,
): AsyncGenerator<TokenUse> {
  for (const chunk of head) {
    scanner.push(chunk);
    releaseInflated(chunk);
    if (out.length > 0) yield* out.splice(0, out.length);
    if (scanner.failed) return; // a broken JSON export: the rest of the document cannot be located
  }
  if (typeof rest === 'function') {
    let lastTurn = performance.now();
    for (let chunk = rest(); chunk !== undefined; chunk = rest()) {
      scanner.push(chunk);
      if (out.length > 0) yield* out.splice(0, out.length);
      if (scanner.failed) return;
      const now = performance.now();
      if (now - lastTurn >= YIELD_EVERY_MS) {
        await new Promise<void>((resolve) => setImmediate(resolve)); // let timers and I/O run
        lastTurn = performance.now();
      }
    }
  } else {
    try {
      for (let r = await rest.next(); !r.done; r = await rest.next()) {
        scanner.push(r.value);
        releaseInflated(r.value);
        if (out.length > 0) yield* out.splice(0, out.length);
        if (scanner.failed) return;
      }
    } finally {
      await rest.return?.();
    }
  }
  scanner.end();
  yield* out;
}

/**
 * Logs Insights CSV export: a header with `@timestamp` and `@message` (or the EKS guide query's `subject` and
 * `elapsedtime`), RFC 4180 quoting (messages with embedded quotes, commas, newlines). Each row goes through
 * `tokenUseFromInsightsRow`. A bad record (wrong column count, stray quote) is counted malformed and skipped.
 * A record over `maxLineBytes` (in practice an unclosed quote swallowing the rest of the file) counts one
 * malformed record and ends the file — csv-parse cannot find the next record after it — with a `truncated`
 * notice naming the data row.
 */
async function* scanCsv(chunks: AsyncIterable<Buffer>, ctx: FileContext, tally: InsightsRowTally): AsyncGenerator<TokenUse> {
  const { stats } = ctx;
  const { parse: parseCsv } = await import('csv-parse'); // loaded on first use
  const src = Readable.from(chunks, { objectMode: false, highWaterMark: 1024 * 1024 });
  let oversize = false;
  let rows = 0; // data rows seen (good and skipped)
  const csv = parseCsv({
    columns: true,
    bom: true,
    skip_empty_lines: true,
    skip_records_with_error: true,
    max_record_size: ctx.maxLineBytes,
    on_skip: (err) => {
      if (oversize) return undefined;
      rows++;
      stats.lines++;
      stats.malformed++;
      if (err?.code === 'CSV_MAX_RECORD_SIZE') {
        // csv-parse cannot resync after this: stop feeding it, but let it deliver the rows it holds.
        oversize = true;
        // `records`: data records csv-parse has completed before this one (rows the loop below may not have seen yet).
        const row = (typeof err.records === 'number' ? err.records : rows - 1) + 1;
        ctx.notice(
          'truncated',
          `${ctx.file}: CSV data row ${row} is longer than ${ctx.maxLineBytes} bytes (an unclosed quote?); the file was ` +
            `truncated there: rows after ${row - 1} were not read`,
          row,
        );
        queueMicrotask(() => {
          src.unpipe(csv);
          src.destroy();
          csv.end();
        });
      }
      return undefined;
    },
  });
  src.on('error', (err) => csv.destroy(err));
  src.pipe(csv);
  let failed = false;
  try {
    for await (const row of csv as AsyncIterable<Record<string, string>>) {
      rows++;
      stats.lines++;
      const use = tokenUseFromInsightsRow(row, stats, tally);
      if (use) yield use;
    }
  } catch (err) {
    if (err instanceof InputError) throw err;
    failed = !oversize;
  } finally {
    csv.destroy();
    src.destroy();
  }
  if (failed) {
    stats.lines++;
    stats.malformed++;
  }
  capNotice(ctx, rows);
}

/**
 * `aws logs get-query-results --output json` (`{"results": [[{"field","value"}…]…], "statistics", "status"}`,
 * several documents concatenated allowed; or only its rows, `--query results`), or a Logs Insights JSON export without `@message` (`[{…}, …]`), streamed
 * one row at a time with @streamparser/json. Each row is one of `lines` and goes through `tokenUseFromInsightsRow`.
 * Notices: `status` other than `Complete` (partial result), exactly 10,000 rows in one result (cap). A syntax
 * error or truncation counts one malformed record and ends the file (notice); a row over `maxLineBytes` is skipped
 * (malformed and `oversized`, see `RecordGate`) and the file read on.
 */
async function* scanJsonRows(
  chunks: AsyncIterable<Buffer>,
  ctx: FileContext,
  format: 'insights-query-results' | 'insights-query-rows' | 'insights-json-fields',
  tally: InsightsRowTally,
): AsyncGenerator<TokenUse> {
  const { stats, file } = ctx;
  const { JSONParser } = await import('@streamparser/json'); // loaded on first use
  const queryResults = format === 'insights-query-results';
  const cells = format !== 'insights-json-fields'; // rows are arrays of {field, value}
  const parser = new JSONParser({
    paths: queryResults ? ['$.results.*', '$.status'] : ['$.*'],
    keepStack: false,
    separator: '',
    // Byte-buffered strings: ~10× faster than the default per-character string building on long @message values.
    stringBufferSize: 64 * 1024,
  });
  const out: TokenUse[] = [];
  let rows = 0; // rows of the current result document
  const progress = { records: 0, sinceRecord: 0 }; // rows of the whole file; bytes fed since the last one ended
  let sawStatus = false;
  parser.onValue = ({ value, key }) => {
    if (queryResults && key === 'status') {
      sawStatus = true;
      if (value !== 'Complete') {
        ctx.notice(
          'partial-result',
          `${file}: query status is ${JSON.stringify(value)}, not "Complete": the result is partial; wait for the ` +
            'query to finish (`aws logs get-query-results` until status is Complete), or ' + SPLIT_HINT,
        );
      }
      capNotice(ctx, rows);
      rows = 0;
      return;
    }
    rows++;
    progress.records++;
    stats.lines++;
    progress.sinceRecord = 0;
    const row = cells ? queryResultCells(value) : value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
    if (!row) {
      stats.malformed++;
      return;
    }
    const use = tokenUseFromInsightsRow(row, stats, tally);
    if (use) out.push(use);
  };
  yield* streamJson(chunks, ctx, parser, out, progress, 'rows', queryResults ? 2 : 1);
  if (!sawStatus || rows > 0) capNotice(ctx, rows);
}

/**
 * Notices from a read file's counts and its platform wrappers: most records not audit events (with the count), GKE
 * entries' missing fields, and logs that cannot see most stale-token requests (AKS `kube-audit-admin` only, which
 * leaves out get and list; GKE Admin Activity without Data Access, where reads are logged).
 */
function shapeNotices(ctx: FileContext, records: number, events: number, malformed: number, shapes: ShapeTally): void {
  const { file } = ctx;
  if (events > 0 && malformed > events) {
    ctx.notice(
      'mostly-not-events',
      `${file}: only ${events} of its ${records} records are audit events; ${malformed} were skipped as unreadable ` +
        '(not an audit event in a known shape, or cut short): check that the file holds only the audit log',
    );
  }
  if (shapes.gkeEntries > 0) {
    ctx.notice(
      'gke-fields',
      `${file}: GKE Cloud Audit Logs entries carry no pod claims (user.extra) and no request URI: findings name ` +
        'ServiceAccounts, source IPs and user agents, but not pods or workloads from pods',
    );
  }
  if (aksAdminOnly(shapes.aksCategories)) ctx.notice('blind-log', `${file}: ${AKS_ADMIN_ONLY_TEXT}`);
  if (gkeWithoutDataAccess(shapes.gkeLogs)) ctx.notice('blind-log', `${file}: ${GKE_NO_DATA_ACCESS_TEXT}`);
}

/**
 * Pretty-printed (`jq .`), concatenated or JSON-array documents of any shape of `shapes.ts`, streamed one record at a
 * time with @streamparser/json (`paths` from `documentPaths`: the array's elements, an EventList's `items` or Event
 * Hubs `records`, or each top-level document). Each record counts as in `tokenUsesFromWrappedValue`. A syntax error,
 * truncation counts one malformed record and ends the file (notice); a record over `maxLineBytes` is skipped (malformed
 * and `oversized`, see `RecordGate`) and the file read on.
 */
async function* scanDocuments(
  chunks: AsyncIterable<Buffer>,
  ctx: FileContext,
  paths: string[],
  shapes: ShapeTally,
): AsyncGenerator<TokenUse> {
  const { stats } = ctx;
  const { JSONParser } = await import('@streamparser/json'); // loaded on first use
  const parser = new JSONParser({ paths, keepStack: false, separator: '', stringBufferSize: 64 * 1024 });
  const out: TokenUse[] = [];
  const progress = { records: 0, sinceRecord: 0 };
  parser.onValue = ({ value }) => {
    progress.records++;
    stats.lines++;
    progress.sinceRecord = 0;
    tokenUsesFromWrappedValue(value, stats, out, shapes);
  };
  yield* streamJson(chunks, ctx, parser, out, progress, 'records', pathDepth(paths[0]!));
}

/**
 * For wrapped JSON lines: a line over the record limit that opens a batch document (`startsAsBatchDocument`: an
 * EventList or `{"records":[…]}`) is streamed like a `json-documents` file, its `items` / `records` one at a time
 * through a {@link RecordGate} (each counted in `stats.lines`, as `tokenUsesFromWrappedValue` counts it; one over the
 * limit skipped as oversized); other long lines are skipped as oversized. A line that breaks off counts one malformed
 * record after the records read from it; a batch without records counts one event (an empty batch).
 */
function batchLineStreamer(
  Parser: typeof JSONParser,
  ctx: FileContext,
  out: TokenUse[],
  shapes: ShapeTally,
): (head: Buffer) => LongLineSink | undefined {
  const { stats } = ctx;
  return (head) => {
    if (!startsAsBatchDocument(head)) return undefined;
    let records = 0;
    let broken = false;
    const parser = new Parser({ paths: ['$.items.*', '$.records.*'], keepStack: false, separator: '', stringBufferSize: 64 * 1024 });
    parser.onValue = ({ value }) => {
      records++;
      stats.lines++;
      tokenUsesFromWrappedValue(value, stats, out, shapes);
    };
    const gate = new RecordGate(2, ctx.maxLineBytes, (b) => parser.write(b), () => {
      stats.oversized = (stats.oversized ?? 0) + 1;
    });
    return {
      write(bytes) {
        if (broken) return;
        try {
          gate.push(bytes);
        } catch {
          broken = true;
        }
      },
      end() {
        if (!broken) {
          try {
            gate.end();
            parser.end();
          } catch {
            broken = true;
          }
        }
        if (broken || records === 0) {
          stats.lines++;
          if (broken) stats.malformed++;
          else stats.events++;
        }
      },
    };
  };
}

/** Nesting depth of the values a @streamparser/json path such as `$`, `$.*` or `$.items.*` selects (0, 1, 2). */
function pathDepth(path: string): number {
  return path.split('.').length - 1;
}

/**
 * Feeds a @streamparser/json parser the chunks (a UTF-8 BOM at the start skipped) and yields the token uses its
 * `onValue` pushes to `out`, as they come. `progress` is kept by `onValue`: records seen, and bytes fed since the last
 * one ended (reset to 0 there). Each record passes a {@link RecordGate} at `recordDepth` (one over `maxLineBytes` is
 * skipped, counted in `stats.oversized`, and the read goes on). A syntax error, truncation or a value outside the
 * records over `maxLineBytes` counts one malformed
 * record and ends the read, with a `truncated` notice counting the records (`unit`) read before.
 */
async function* streamJson(
  chunks: AsyncIterable<Buffer>,
  ctx: FileContext,
  parser: { write(b: Uint8Array): void; end(): void },
  out: TokenUse[],
  progress: { records: number; sinceRecord: number },
  unit: 'rows' | 'records',
  recordDepth: number,
): AsyncGenerator<TokenUse> {
  const { stats, file } = ctx;
  let broken = false;
  let first = true;
  // Records are bounded by the gate: one over the limit reaches the parser as `null` (counted oversized) and the read goes on.
  const gate = new RecordGate(
    recordDepth,
    ctx.maxLineBytes,
    (bytes) => {
      progress.sinceRecord += bytes.length;
      parser.write(bytes);
    },
    () => {
      stats.oversized = (stats.oversized ?? 0) + 1;
    },
  );
  const breakOff = (why: string): void => {
    broken = true;
    stats.lines++;
    stats.malformed++;
    ctx.notice('truncated', `${file}: ${why} after ${progress.records} ${unit}; the rest of the file was not read`, progress.records + 1);
  };
  try {
    for await (let chunk of chunks) {
      if (first) {
        first = false;
        if (chunk.length >= 3 && chunk[0] === 0xef && chunk[1] === 0xbb && chunk[2] === 0xbf) chunk = chunk.subarray(3);
      }
      try {
        gate.push(chunk);
      } catch (err) {
        breakOff(`the JSON document breaks off (${errorReason(err).slice(0, 120)})`);
        break;
      }
      if (out.length > 0) yield* out.splice(0, out.length);
      if (progress.sinceRecord > ctx.maxLineBytes + 1024 * 1024) {
        // Only a value outside the records (e.g. a huge string beside an EventList's items) gets here.
        breakOff(`one value outside the ${unit} is longer than ${ctx.maxLineBytes} bytes`);
        break;
      }
    }
    if (!broken) {
      try {
        gate.end();
        parser.end();
      } catch (err) {
        breakOff(`the JSON document is truncated (${errorReason(err).slice(0, 120)})`);
      }
    }
  } catch (err) {
    if (err instanceof InputError) throw err;
    throw new InputError(file, `read failed (${errorReason(err)})`, { cause: err });
  }
  yield* out.splice(0, out.length);
}
