/**
 * Worker thread of the parallel scan (`parallel.ts`): runs the existing audit scanners on one task at a time and
 * posts back compact results. Started by `new Worker(...)`: from `dist/cli/worker.js` when built, or through
 * `worker-tsx.mjs` (tsx) when running from the TypeScript sources (vitest, `bin/tokenwatch.js` without `dist/`).
 * The pool's own thread also runs tasks, with {@link runTask}.
 *
 * Tasks (see {@link WorkerTask}):
 * - `range`: the lines of a plain audit JSON-lines file that *start* in a byte range (see {@link lineStart}),
 *   scanned with the reader's `JsonlScanner`;
 * - `gzip`: a whole gzip file; audit JSON lines are scanned with `JsonlScanner` while the last
 *   `TAIL_BYTES` of the decompressed data are kept ({@link StreamTail}) for `latestEventTimeInTail` (so the file is inflated once,
 *   not twice); any other content or any error falls back to the `file` path, which words errors exactly as a
 *   serial scan does;
 * - `file`: a whole file of any format through the reader's `readTokenUses` (CSV and whole-document JSON exports).
 *
 * Token uses are returned in input order without cross-task deduplication (`range`, `gzip`) or deduplicated
 * within the file (`file`, as `readTokenUses` does); the main thread dedupes across tasks by `auditID`.
 */
import { closeSync, createReadStream, fstatSync, openSync, readSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { detectFormat } from '../audit/formats.js';
import { READ_BUFFER_BYTES } from '../audit/needle-search.js';
import { DEFAULT_MAX_LINE_BYTES, JsonlScanner, createReadStats, readTokenUses, type ReadOptions } from '../sources/reader.js';
import { EDGE_BYTES } from '../audit/jsonl-scanner.js';
import type { ReadNotice, ReadStats, TokenUse } from '../audit/types.js';
import { InputError, errorReason } from '../errors.js';
import { StreamTail, edgeCountFrom, latestEventTimeInTail } from './latest-event.js';
import { createInflater, releaseInflated } from '../sources/inflated.js';

/** Scan the lines of `file` that start in `[start, end)` (byte offsets; `end` = file size for the last range). */
export interface RangeTask {
  kind: 'range';
  id: number;
  file: string;
  /**
   * A descriptor of `file` that the planner opened (threads share the process's descriptors; reads are positional):
   * every range of the file reads the same file even if its path is renamed or replaced meanwhile. Without it the
   * task opens `file` by name.
   */
  fd?: number;
  start: number;
  end: number;
  /** True for the range that ends at the file size seen when planning: it reads on to EOF (a growing log). */
  last: boolean;
  maxLineBytes: number;
}

/** Scan a whole file: `gzip` (fast path with tail) or `file` (the reader's `readTokenUses`). */
export interface FileTask {
  kind: 'gzip' | 'file';
  id: number;
  file: string;
  maxLineBytes: number;
  /** As `ReadOptions.maxDecompressedBytes`; the planner gives such gzip files `file` tasks (the reader's guard). */
  maxDecompressedBytes?: number;
}

/** A task posted by the main thread. */
export type WorkerTask = RangeTask | FileTask;

/** Messages a worker posts back. `bytes` are raw bytes read from disk (compressed for gzip) since the last report. */
export type WorkerReply =
  | { type: 'progress'; id: number; bytes: number }
  | {
      type: 'done';
      id: number;
      uses: TokenUse[];
      stats: ReadStats;
      /** The reader's notices about the file (`file` tasks), in order; the main thread reports them. */
      notices?: ReadNotice[];
      /**
       * Latest event time in the file's last lines (`latestEventTimeInTail`), epoch ms UTC, computed for `gzip`
       * tasks that took the fast path: `null` when there is none; absent when this task did not compute it.
       */
      tailLatest?: number | null;
      /**
       * With `tailLatest`: the event times of the file's last lines that its first `TAIL_BYTES` do not hold and that
       * the reader does not count as token uses (`EdgeTimeSink` of `latest-event.ts`), for the clock-skew density.
       */
      tailTimes?: number[];
      /**
       * The event-time samples of the task's audit JSON lines (`JsonlScanner.sampleTimes`), flat: time (epoch ms UTC),
       * then the number of events it stands for, for each; absent when none.
       */
      timeSamples?: number[];
    }
  | { type: 'error'; id: number; name: string; message: string; file: string; reason?: string; errno?: string };

/** What a worker thread posts: its task replies, and once, when it has loaded and listens for tasks, `ready`. */
export type WorkerMessage = WorkerReply | { type: 'ready' };

/** Read and inflate chunk size of gzip tasks. */
const GZIP_CHUNK_BYTES = 64 * 1024;
const LF = 0x0a;
const PROGRESS_MS = 100;

/** Reports raw bytes read, at most every {@link PROGRESS_MS}. */
class Progress {
  private pending = 0;
  private last = performance.now();
  constructor(
    private readonly id: number,
    private readonly post: (r: WorkerReply) => void,
  ) {}
  add(n: number): void {
    this.pending += n;
    const now = performance.now();
    if (now - this.last >= PROGRESS_MS) this.flush(now);
  }
  flush(now = performance.now()): void {
    this.last = now;
    if (this.pending === 0) return;
    this.post({ type: 'progress', id: this.id, bytes: this.pending });
    this.pending = 0;
  }
}

/**
 * Offset where the first line starting at or after `offset` begins: 0 for 0, else one past the first `\n` at or
 * after `offset - 1` (so a line that starts exactly at `offset` belongs to the range that starts there), or the end
 * of the file when there is none. Adjacent ranges computed with the same rule share their boundary, so every line is scanned
 * exactly once.
 */
export function lineStart(fd: number, offset: number, buf: Buffer): number {
  if (offset <= 0) return 0;
  let pos = offset - 1;
  for (;;) {
    const n = readSync(fd, buf, 0, buf.length, pos);
    if (n === 0) return pos;
    const nl = buf.subarray(0, n).indexOf(LF);
    if (nl !== -1) return pos + nl + 1;
    pos += n;
  }
}

/** Scans one range (see {@link RangeTask}) with `JsonlScanner`. Synchronous: a worker does nothing else meanwhile. */
export function scanRange(task: RangeTask, progress?: Progress): { uses: TokenUse[]; stats: ReadStats; timeSamples?: number[] } {
  const stats = createReadStats();
  const uses: TokenUse[] = [];
  const scanner = new JsonlScanner(stats, uses, task.maxLineBytes);
  const timeSamples: number[] = [];
  let fd: number;
  const own = task.fd === undefined;
  try {
    fd = task.fd ?? openSync(task.file, 'r');
  } catch (err) {
    throw new InputError(task.file, `cannot read file (${errorReason(err)})`, { cause: err });
  }
  // Read straight into the needle search's memory (1 MiB): nothing is copied again to search it.
  // Another reader of this thread holds it: a buffer of the same size (1 MiB reads scan ~8 % faster than 64 KiB).
  const buf = scanner.claimReadBuffer() ?? Buffer.allocUnsafeSlow(READ_BUFFER_BYTES);
  try {
    const from = lineStart(fd, task.start, buf);
    // The range ends where the next one starts (`lineStart(end)`): after the first `\n` at or after `end - 1`.
    const stopAt = task.last ? Number.POSITIVE_INFINITY : task.end - 1;
    if (!task.last && from >= task.end) return { uses, stats }; // no line starts in this range
    // No sample of the file's first and last EDGE_BYTES, whose events scan counts line by line (as in a serial read).
    const size = fstatSync(fd).size;
    scanner.sampleTimes((t, w) => timeSamples.push(t, w), { at: from > 0 ? from - 1 : 0, from: EDGE_BYTES, until: size - EDGE_BYTES });
    if (from > 0) scanner.push(Buffer.from('\n')); // not the file's start: a BOM here is data, as in a serial read
    let pos = from;
    for (;;) {
      let n: number;
      try {
        n = readSync(fd, buf, 0, buf.length, pos);
      } catch (err) {
        throw new InputError(task.file, `read failed after ${pos} bytes (${errorReason(err)})`, { cause: err });
      }
      if (n === 0) break;
      progress?.add(n);
      if (pos + n > stopAt) {
        const nl = buf.subarray(0, n).indexOf(LF, Math.max(0, stopAt - pos));
        if (nl !== -1) {
          scanner.push(buf.subarray(0, nl + 1));
          break;
        }
      }
      scanner.push(buf.subarray(0, n));
      pos += n;
    }
    scanner.end();
    return { uses, stats, ...(timeSamples.length > 0 ? { timeSamples } : {}) };
  } finally {
    scanner.release();
    if (own) closeSync(fd);
  }
}

/** Fast path of a gzip task: audit JSON lines only; `undefined` for any other content (caller falls back). */
async function scanGzipJsonl(
  task: FileTask,
  progress: Progress,
): Promise<{ uses: TokenUse[]; stats: ReadStats; tailLatest: number | null; tailTimes: number[]; timeSamples?: number[] } | undefined> {
  const stats = createReadStats();
  stats.files = 1;
  const uses: TokenUse[] = [];
  const scanner = new JsonlScanner(stats, uses, task.maxLineBytes);
  const timeSamples: number[] = [];
  scanner.sampleTimes((t, w) => timeSamples.push(t, w), { from: EDGE_BYTES, tail: EDGE_BYTES });
  const raw = createReadStream(task.file, { highWaterMark: GZIP_CHUNK_BYTES });
  raw.on('data', (b) => progress.add(b.length));
  const inflater = createInflater();
  const gz = inflater.stream;
  raw.on('error', (err) => gz.destroy(err));
  raw.pipe(gz);
  let head: Buffer[] | undefined = [];
  let headBytes = 0;
  // A chunk goes to the tail once scanned; the tail gives back the chunks it no longer needs (src/sources/inflated.ts).
  const tail = new StreamTail(releaseInflated);
  const scan = (chunk: Buffer): void => {
    scanner.push(chunk);
    tail.add(chunk);
  };
  try {
    for await (const chunk of inflater.chunks()) {
      if (head) {
        head.push(chunk);
        headBytes += chunk.length;
        if (headBytes < 64 * 1024) continue;
        if (detectFormat(Buffer.concat(head)) !== 'audit-jsonl') return undefined;
        for (const h of head) scan(h);
        head = undefined;
      } else {
        scan(chunk);
      }
    }
    if (head) {
      if (detectFormat(Buffer.concat(head)) !== 'audit-jsonl') return undefined;
      for (const h of head) scan(h);
    }
  } finally {
    gz.destroy();
    raw.destroy();
  }
  scanner.end();
  const last = tail.take();
  const tailTimes: number[] = [];
  const edges = { from: edgeCountFrom(last.total, last.tail.length), sink: (t: number) => tailTimes.push(t) };
  return {
    uses,
    stats,
    tailLatest: latestEventTimeInTail(last.tail, last.partialFirst, undefined, undefined, edges) ?? null,
    tailTimes,
    ...(timeSamples.length > 0 ? { timeSamples } : {}),
  };
}

/** A whole file through the reader, exactly as a serial scan reads it (formats, errors, in-file dedupe). */
async function scanFile(
  task: FileTask,
  progress: Progress,
): Promise<{ uses: TokenUse[]; stats: ReadStats; notices: ReadNotice[]; timeSamples?: number[] }> {
  const stats = createReadStats();
  const uses: TokenUse[] = [];
  const notices: ReadNotice[] = [];
  const timeSamples: number[] = [];
  let seen = 0;
  const opts: ReadOptions = {
    maxLineBytes: task.maxLineBytes,
    ...(task.maxDecompressedBytes !== undefined ? { maxDecompressedBytes: task.maxDecompressedBytes } : {}),
    onNotice: (n) => notices.push(n),
    onTimeSample: (t, w) => timeSamples.push(t, w),
    onProgress: (p: { bytesRead: number }) => {
      progress.add(p.bytesRead - seen);
      seen = p.bytesRead;
    },
  };
  for await (const use of readTokenUses([task.file], stats, opts)) uses.push(use);
  return { uses, stats, notices, ...(timeSamples.length > 0 ? { timeSamples } : {}) };
}

/** Runs one task and posts its progress and result (or error). Exported for tests; never throws. */
export async function runTask(task: WorkerTask, post: (r: WorkerReply) => void): Promise<void> {
  const progress = new Progress(task.id, post);
  try {
    let done: Extract<WorkerReply, { type: 'done' }>;
    if (task.kind === 'range') {
      done = { type: 'done', id: task.id, ...scanRange(task, progress) };
    } else if (task.kind === 'gzip') {
      const fast = await scanGzipJsonl(task, progress).catch(() => undefined);
      // Anything unusual (other formats, corrupt data, read errors): the reader's own path and messages.
      done = { type: 'done', id: task.id, ...(fast ?? (await scanFile(task, new Progress(task.id, () => undefined)))) };
    } else {
      done = { type: 'done', id: task.id, ...(await scanFile(task, progress)) };
    }
    progress.flush();
    post(done);
  } catch (err) {
    post({
      type: 'error',
      id: task.id,
      name: err instanceof InputError ? 'InputError' : err instanceof Error ? err.name : 'Error',
      message: err instanceof Error ? err.message : String(err),
      file: err instanceof InputError ? err.file : task.file,
      ...(err instanceof InputError ? { reason: err.reason, ...(err.errno !== undefined ? { errno: err.errno } : {}) } : {}),
    });
  }
}

// Only in a thread started by parallel.ts `workerPool` (which passes `WORKER_DATA`): imported elsewhere (the pool's
// own thread, a test runner's worker thread) this module must not take over the thread's port.
if (parentPort && (workerData as { tokenwatchScanWorker?: unknown } | null)?.tokenwatchScanWorker === true) {
  const port = parentPort;
  const post = (r: WorkerReply): void => port.postMessage(r);
  // Tasks run one after the other, in the order posted: the pool queues the next one here while this one runs.
  let running: Promise<void> = Promise.resolve();
  port.on('message', (task: WorkerTask) => {
    running = running.then(() => runTask(task, post));
  });
  port.postMessage({ type: 'ready' } satisfies WorkerMessage);
}

export { DEFAULT_MAX_LINE_BYTES };
