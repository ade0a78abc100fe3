/**
 * Multi-core read of audit inputs: splits the work into tasks (byte ranges of plain audit JSON-lines files, whole
 * gzip files, whole files of the other formats), runs them on `node:worker_threads` workers (`worker.ts`), and
 * merges the results in input order, deduplicating by `auditID`, so the token uses and `ReadStats` are identical
 * to the serial `readTokenUses` over the same files (same uses in the same order, same `lines`, `events`,
 * `malformed`, `tokenUses`, `duplicates`, `files`).
 *
 * Why this is identical:
 * - every line of a plain JSON-lines file belongs to exactly one range (the one its first byte falls in, see
 *   `worker.ts` `lineStart`) and is scanned whole by the same `JsonlScanner` the serial reader uses;
 * - results are consumed in task order (file order, then byte order), and the first use of each `auditID` is kept:
 *   the same use the serial reader keeps; later ones count as `duplicates`;
 * - gzip, CSV and whole-document JSON exports are read whole by one worker, with the serial reader's code or
 *   (gzip audit JSON lines) its `JsonlScanner`; errors are worded by the serial reader.
 *
 * Small inputs ({@link PARALLEL_MIN_BYTES}), dense inputs (many lines pass the prefilter: the calling thread's merge
 * and the copies of token uses between threads would cost more than a second thread saves; `density.ts`), a single
 * task, pipes and `jobs` 1 are not worth a worker: {@link planParallelRead} returns `undefined` and the caller reads
 * serially. Workers therefore only ever read input that holds few token uses, and hand back small results.
 */
import { ErrorCode, TokenwatchError, InputError, errorReason } from '../errors.js';
import { readFileSync } from 'node:fs';
import { open, stat, type FileHandle } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import pLimit from 'p-limit';
import { DETECT_HEAD_BYTES, detectFormat, isGzip } from '../audit/formats.js';
import { DEFAULT_MAX_LINE_BYTES, STDIN, auditIdConflictMessage, countOnce, noAuditEventError, skippedRecordNotices, type ReadProgress, type SeenAuditIDs } from '../sources/reader.js';
import type { InputFormat, ReadNotice, ReadStats, TokenUse } from '../audit/types.js';
import type { WorkerMessage, WorkerReply, WorkerTask } from './worker.js';
import { DENSE_HITS_PER_MIB, SAMPLE_MIN_WINDOWS, SAMPLE_WINDOWS, countHits, hitsPerMiB, sampleGzipHead, samplePlainFile, type DensitySample } from './density.js';

/**
 * Inputs smaller than this in all (64 MiB; gzip files counted uncompressed, see `inputBytes`) are read on the main
 * thread: a worker is ready 40–160 ms after it is started (its own V8, the bundle's chunks, the WebAssembly search; a
 * process's first worker the slowest), so below that a second thread saves little or nothing. Measured on the 2-CPU
 * development VM (`npm run bench`; docs/performance.md "Benchmark" and "Where two threads start to pay off for plain
 * lines"): two threads pay off from ~64 MiB of gzip input and 1.5 GiB of plain lines
 * ({@link PLAIN_PARALLEL_MIN_BYTES}).
 */
export const PARALLEL_MIN_BYTES = 64 * 1024 * 1024;

/**
 * Plain JSON-lines input (the part of the input split into byte ranges) smaller than this in all (1.5 GiB) is read on
 * one thread, unless the rest of the input (gzip, exports) reaches {@link PARALLEL_MIN_BYTES} by itself. One core scans
 * sparse plain lines from the page cache at 2–4 GB/s (the prefilter's one-pass SIMD search; most of the rest is
 * copying from the page cache), while a second thread is ready only ~0.15 s after it is started (a process's first
 * worker thread; its own V8 and the bundle's chunks), so below this a second thread saves less than it costs. On the
 * 2-CPU development VM (sparse logs of 0.1 % stale events, written just before, medians of 7 alternating runs of the
 * compiled CLI, load 1–1.6, 2026-12-07): 1 GiB took 0.58 s on two threads against 0.47 s on one, 1.5 GiB 0.56 s
 * against 0.60 s, 2 GiB 0.65 s against 0.75 s; docs/performance.md "Where two threads start to pay off for plain
 * lines". Inflating gzip is ~10× slower per byte, so there two threads pay off from {@link PARALLEL_MIN_BYTES}.
 * `scan --help` (src/cli/commands/scan.ts) and docs/scan.md state this limit: change them with it.
 */
export const PLAIN_PARALLEL_MIN_BYTES = 1536 * 1024 * 1024;

/** Tasks handed to the pool ahead of the merge, per worker (bounds the results held while earlier ones finish). */
const TASKS_AHEAD_PER_WORKER = 4;
/** Range size bounds for splitting plain files: 1–16 MiB, aiming at 8 ranges per worker for an even finish. */
const MIN_PART_BYTES = 1024 * 1024;
const MAX_PART_BYTES = 16 * 1024 * 1024;
const PARTS_PER_JOB = 8;

/**
 * Formats split into byte ranges: one record per line, a record never spans lines, and a blank line is ignored (a
 * range that does not start the file is scanned after a `\n`, so a BOM-like first line is data, as in a serial read).
 * Others (CSV with quoted newlines, whole-document JSON exports) are read whole by one thread. A line-oriented format
 * added to the reader (e.g. `<ISO timestamp> <event JSON>` export lines) can join this set once `worker.ts`
 * `scanRange` picks its scanner.
 */
const SPLIT_FORMATS: ReadonlySet<InputFormat> = new Set<InputFormat>(['audit-jsonl']);

/**
 * The default and upper bound of `--jobs`: `os.availableParallelism()` (CPUs this process may use, which honours
 * CPU affinity masks such as `taskset` and container cpusets).
 */
export function maxJobs(): number {
  return Math.max(1, availableParallelism());
}

/**
 * The default of `--jobs`: {@link maxJobs}, or 1 when other work keeps every CPU busy as the scan starts. A second
 * thread only pays off on a core no one else is using: on the 2-CPU development VM under a load average of 15–20, a
 * 256 MiB sparse log took 1.7× as long on two threads as on one (docs/performance.md "Scan parallelism").
 *
 * "Busy" is read from the kernel's count of runnable threads at this moment, the fourth field of `/proc/loadavg`
 * (`running/total`, proc(5)), less the one running this code: when those are at least the CPUs, no core is idle. The
 * count is instantaneous, unlike the load averages (decaying over 1–15 minutes), so scans run back to back on a quiet
 * machine do not see their own past load. Where `/proc/loadavg` cannot be read (not Linux), {@link maxJobs}.
 *
 * @param procLoadavg the text of `/proc/loadavg` (tests pass their own); empty when unreadable
 */
export function defaultJobs(procLoadavg: string = readProcLoadavg(), cpus: number = maxJobs()): number {
  const running = Number(/^\S+ \S+ \S+ (\d+)\//.exec(procLoadavg)?.[1] ?? Number.NaN);
  if (!Number.isSafeInteger(running)) return cpus;
  return running - 1 >= cpus ? 1 : cpus;
}

function readProcLoadavg(): string {
  try {
    return readFileSync('/proc/loadavg', 'utf8');
  } catch {
    return '';
  }
}

/** Options of {@link planParallelRead}. */
export interface PlanOptions {
  /** Worker threads to use, ≥ 1 (the CLI caps it at {@link maxJobs}). 1 means serial. */
  jobs: number;
  /** As `ReadOptions.maxLineBytes` of the reader. Default 64 MiB. */
  maxLineBytes?: number;
  /** As `ReadOptions.maxDecompressedBytes`: gzip files are then read by the reader itself (`file` tasks), guard included. */
  maxDecompressedBytes?: number;
  /** Inputs below this total size (gzip uncompressed) stay serial. Default {@link PARALLEL_MIN_BYTES}. Tests pass 0. */
  minBytes?: number;
  /**
   * Plain JSON-lines input below this in all stays serial unless the rest reaches `minBytes` by itself. Default
   * {@link PLAIN_PARALLEL_MIN_BYTES}, or `minBytes` when that is given (tests passing `minBytes: 0` split any size).
   */
  minPlainBytes?: number;
  /** Range size for splitting plain JSON-lines files, bytes. Default: see MIN/MAX_PART_BYTES. Tests pass small ones. */
  partBytes?: number;
  /**
   * Inputs whose sampled prefilter-passing lines per MiB exceed this stay serial (`density.ts`). Default
   * {@link DENSE_HITS_PER_MIB}. Tests of the parallel machinery on small, dense files pass `Infinity`.
   */
  maxHitsPerMiB?: number;
  /** Told the estimated prefilter-passing lines per MiB of the input, once sampled (the bench and tests print it). */
  onDensity?: (hitsPerMiB: number) => void;
}

/** How a parallel read will run: the tasks in input order and the worker count. */
export interface ParallelPlan {
  tasks: WorkerTask[];
  /** Readers to use, the calling thread included: min(jobs, tasks). */
  workers: number;
  /** Sizes on disk of the files, for progress. */
  sizes: Map<string, number>;
  /**
   * Gzip files whose tail (`latestEventTimeOfFile`) the workers compute while they inflate them, so the
   * caller need not inflate them a second time; see {@link ParallelRead.tailLatest}.
   */
  workerTailFiles: Set<string>;
  /**
   * One open handle per file split into ranges; its descriptor is in each of the file's range tasks. Closed when the
   * read ends (`readParallel`), or by {@link closePlan} when a plan is dropped unread.
   */
  handles: FileHandle[];
}

/** Closes the plan's file handles (after its read, or when it is not read at all). Never throws. */
export async function closePlan(plan: ParallelPlan): Promise<void> {
  await closeHandles(plan.handles.splice(0));
}

async function closeHandles(handles: FileHandle[]): Promise<void> {
  await Promise.all(handles.map((h) => h.close().catch(() => undefined)));
}

/** What the planner needs of a file's first {@link DETECT_HEAD_BYTES} and last 4 bytes. */
interface FileHead {
  gzip: boolean;
  /** The gzip trailer (ISIZE), or empty. */
  trailer: Buffer;
  /** The format detected from the head (plain files only). */
  format: InputFormat | undefined;
  /** What the prefilter passes in the head (gzip: its first 16 KiB inflated; nothing when not sampled). */
  sample: DensitySample;
}

/**
 * Reads and classifies a file's head and trailer; undefined when it cannot be read. Only the classification is
 * kept (not the head itself), so planning many files holds a few bytes per file, not 64 KiB.
 */
async function readHeadAndTrailer(file: string, size: number, sampleGzip: boolean): Promise<FileHead | undefined> {
  try {
    const fh = await open(file, 'r');
    try {
      const buf = Buffer.alloc(DETECT_HEAD_BYTES);
      const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
      const head = buf.subarray(0, bytesRead);
      const trailer = Buffer.alloc(4);
      const t = size >= 4 ? (await fh.read(trailer, 0, 4, size - 4)).bytesRead : 0;
      const gzip = isGzip(head);
      const none: DensitySample = { bytes: 0, lines: 0, hits: 0 };
      const sample = gzip ? (sampleGzip ? sampleGzipHead(head) : none) : countHits(head, true, bytesRead >= size);
      return { gzip, trailer: trailer.subarray(0, t), format: gzip ? undefined : (detectFormat(head) as InputFormat), sample };
    } finally {
      await fh.close();
    }
  } catch {
    return undefined; // the worker's serial reader reports it with its own wording
  }
}

/** Files whose heads are read at once while planning (memory and open file descriptors stay bounded). */
const HEAD_READ_CONCURRENCY = 8;

/**
 * Bytes of input a file stands for: its size, or for gzip the larger of its size and the uncompressed size in its
 * trailer (ISIZE, RFC 1952 §2.3.1: the last member's length mod 2^32, so a lower bound for multi-member files).
 * Audit logs compress 10–20×, so sizes on disk alone would keep many rotated `.gz` files on one thread.
 */
function inputBytes(size: number, gzip: boolean, trailer: Buffer): number {
  return gzip && trailer.length === 4 ? Math.max(size, trailer.readUInt32LE(0)) : size;
}

/**
 * At most this many plain files are sampled across their whole length (the others by their heads), and this many gzip
 * files' heads are inflated for the sample (the others count as the sampled average): planning stays within
 * milliseconds however many files there are.
 */
const SPREAD_SAMPLED_FILES = 16;

/**
 * True when the input is sparse enough for worker threads (`density.ts`): large plain files are sampled across their
 * length, the others by their heads, and the estimate is weighed by input bytes.
 */
async function denseEnoughForWorkers(
  files: string[],
  heads: (FileHead | undefined)[],
  sizes: Map<string, number>,
  weighed: { bytes: number; sample: DensitySample | undefined }[],
  opts: PlanOptions,
): Promise<boolean> {
  const limit = opts.maxHitsPerMiB ?? DENSE_HITS_PER_MIB;
  if (limit === Number.POSITIVE_INFINITY && !opts.onDensity) return true;
  const large = files
    .map((file, i) => ({ file, i, size: sizes.get(file) ?? 0 }))
    .filter(({ i, size }) => heads[i]?.gzip === false && size > DETECT_HEAD_BYTES)
    .sort((a, b) => b.size - a.size)
    .slice(0, SPREAD_SAMPLED_FILES);
  const windows = Math.max(SAMPLE_MIN_WINDOWS, Math.ceil(SAMPLE_WINDOWS / Math.max(1, large.length)));
  for (const { file, i, size } of large) {
    const fh = await open(file, 'r').catch(() => undefined);
    if (!fh) continue;
    try {
      weighed[i] = { bytes: weighed[i]?.bytes ?? size, sample: await samplePlainFile(fh, size, windows) };
    } finally {
      await fh.close().catch(() => undefined);
    }
  }
  const density = hitsPerMiB(weighed);
  opts.onDensity?.(density);
  return density <= limit;
}

/**
 * Decides whether and how to read `files` in parallel.
 *
 * @returns undefined when the read should stay serial: `jobs` ≤ 1, inputs under `minBytes` in all, plain JSON lines
 *   under `minPlainBytes` with the rest under `minBytes`, a non-regular
 *   file (a pipe cannot be read twice), dense input (more than `maxHitsPerMiB` sampled prefilter-passing lines per
 *   MiB, see `density.ts`), or fewer than two tasks (e.g. one gzip file).
 * @throws InputError for a missing or unreadable file or a directory, worded as the serial reader does, before
 *   any file is read (as the serial reader checks them all first).
 */
export async function planParallelRead(files: string[], opts: PlanOptions): Promise<ParallelPlan | undefined> {
  const sizes = new Map<string, number>();
  let regular = true;
  for (const file of files) {
    if (file === STDIN) {
      regular = false; // standard input is read once, serially
      continue;
    }
    try {
      const st = await stat(file);
      if (st.isDirectory()) throw new InputError(file, 'is a directory, not an audit log file');
      if (!st.isFile()) regular = false;
      sizes.set(file, st.size);
    } catch (err) {
      if (err instanceof InputError) throw err;
      throw new InputError(file, `cannot read file (${errorReason(err)})`, { cause: err });
    }
  }
  if (opts.jobs <= 1 || !regular) return undefined;
  const limit = pLimit(HEAD_READ_CONCURRENCY);
  // Gzip heads are inflated for the density sample in at most SPREAD_SAMPLED_FILES files, spread over the list.
  const gzipEvery = Math.ceil(files.length / SPREAD_SAMPLED_FILES);
  const heads = await Promise.all(files.map((f, i) => limit(() => readHeadAndTrailer(f, sizes.get(f) ?? 0, i % gzipEvery === 0))));
  let total = 0;
  let plainBytes = 0;
  const weighed: { bytes: number; sample: DensitySample | undefined }[] = [];
  for (const [i, file] of files.entries()) {
    const h = heads[i];
    const bytes = h ? inputBytes(sizes.get(file) ?? 0, h.gzip, h.trailer) : (sizes.get(file) ?? 0);
    total += bytes;
    if (h && !h.gzip && h.format !== undefined && SPLIT_FORMATS.has(h.format)) plainBytes += bytes;
    weighed.push({ bytes, sample: h?.sample });
  }
  const minBytes = opts.minBytes ?? PARALLEL_MIN_BYTES;
  if (total < minBytes) return undefined;
  // Plain lines scan so fast that a second thread pays off only on a lot of them (or when the rest needs it anyway).
  if (total - plainBytes < minBytes && plainBytes < (opts.minPlainBytes ?? opts.minBytes ?? PLAIN_PARALLEL_MIN_BYTES)) return undefined;
  // What the prefilter will see decides too, not only the size: dense input is read faster by one thread.
  if (!(await denseEnoughForWorkers(files, heads, sizes, weighed, opts))) return undefined;
  const maxLineBytes = opts.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
  const partBytes =
    opts.partBytes ?? Math.min(MAX_PART_BYTES, Math.max(MIN_PART_BYTES, Math.ceil(total / (opts.jobs * PARTS_PER_JOB))));
  if (!(partBytes > 0)) throw new RangeError('partBytes must be positive');
  const tasks: WorkerTask[] = [];
  const workerTailFiles = new Set<string>();
  const handles: FileHandle[] = [];
  try {
    for (const [i, file] of files.entries()) {
      const id = tasks.length;
      const head = heads[i];
      const split = head !== undefined && head.format !== undefined && (sizes.get(file) ?? 0) > partBytes && SPLIT_FORMATS.has(head.format);
      // A file split into ranges is read through one handle opened now, as the serial reader reads it through one:
      // renaming or replacing the path meanwhile (log rotation) cannot send later ranges to another file.
      const handle = split ? await open(file, 'r').catch(() => undefined) : undefined;
      if (handle) handles.push(handle);
      const size = handle ? (await handle.stat()).size : (sizes.get(file) ?? 0);
      if (head?.gzip && opts.maxDecompressedBytes === undefined) {
        tasks.push({ kind: 'gzip', id, file, maxLineBytes });
        workerTailFiles.add(file);
      } else if (handle && size > partBytes) {
        sizes.set(file, size);
        for (let start = 0; start < size; start += partBytes) {
          const end = Math.min(size, start + partBytes);
          tasks.push({ kind: 'range', id: tasks.length, file, fd: handle.fd, start, end, last: end === size, maxLineBytes });
        }
      } else {
        const guard = opts.maxDecompressedBytes !== undefined ? { maxDecompressedBytes: opts.maxDecompressedBytes } : {};
        tasks.push({ kind: 'file', id, file, maxLineBytes, ...guard });
      }
    }
  } catch (err) {
    await closeHandles(handles);
    throw err;
  }
  const plan: ParallelPlan = { tasks, workers: Math.min(opts.jobs, tasks.length), sizes, workerTailFiles, handles };
  if (tasks.length < 2) {
    await closePlan(plan);
    return undefined;
  }
  return plan;
}

/** Runs tasks somewhere and reports each task's replies. Injectable so tests can run tasks in-process. */
export interface TaskRunner {
  /** Starts the task; `onReply` gets its `progress` replies, then exactly one `done` or `error`. */
  run(task: WorkerTask, onReply: (r: WorkerReply) => void): void;
  /** Stops all work; pending tasks never reply. */
  close(): Promise<void>;
}

/**
 * Where the worker's module is: `worker.js` next to the module this code is in — in a build, `dist/cli/worker.js`
 * beside the bundle chunk holding `parallel.ts` (scripts/build.mjs puts every chunk in `dist/cli/`) — or, when this module
 * itself is TypeScript run by tsx or vitest, `worker-tsx.mjs`, which registers tsx in the worker thread (hooks
 * registered in the main thread do not reach workers) before importing `worker.ts`.
 */
export function workerEntry(moduleUrl: string = import.meta.url): URL {
  return moduleUrl.endsWith('.ts') ? new URL('./worker-tsx.mjs', moduleUrl) : new URL('./worker.js', moduleUrl);
}

/** `workerData` that tells `worker.ts` it runs as a scan worker (and not, say, in a test runner's thread). */
export const WORKER_DATA = { tokenwatchScanWorker: true } as const;

/**
 * Tasks a worker thread holds at once: the one it runs and the next, queued in the worker. The pool's own thread
 * hands out tasks only between its own ranges (a range scan blocks it for ~10 ms), so a worker given one task at a
 * time would sit idle until then after each task; with a second one queued it goes straight on. A worker gets none
 * before it says it is ready: one that is still starting (40–160 ms) would hold them while the calling thread, done
 * with the rest, waits.
 */
const TASKS_PER_WORKER = 2;

/**
 * A pool of `size` readers taking tasks in order as they become free: the calling thread itself (it would
 * otherwise sit idle while it waits for results; a worker thread costs ~35 ms of CPU to start and ~10 MB) and
 * `size - 1` worker threads, started as tasks arrive. Tasks the calling thread takes run between event-loop turns
 * (a range scan blocks it for one range, ≤ 16 MiB), one at a time; a worker holds up to {@link TASKS_PER_WORKER}
 * and runs them one after the other (`worker.ts`). A worker that dies (uncaught error, `process.exit`) fails the
 * tasks it held and every task after it. `callingThread: false` leaves every task to `size` worker threads (tests).
 */
export function workerPool(size: number, entry: URL = workerEntry(), callingThread = true): TaskRunner {
  type Job = { task: WorkerTask; onReply: (r: WorkerReply) => void };
  interface Slot {
    worker?: Worker;
    /** A worker posted `ready` (the calling thread's slot is always ready). */
    ready: boolean;
    /** Tasks given to this reader and not finished, in the order it runs them. */
    jobs: Job[];
  }
  const queue: Job[] = [];
  const inline: Slot = { ready: callingThread, jobs: [] };
  const slots: Slot[] = callingThread ? [inline] : [];
  let broken: Error | undefined;
  let closed = false;
  let runInline: Promise<typeof import('./worker.js')['runTask']> | undefined;

  const capacity = (slot: Slot): number => (!slot.ready ? 0 : slot.worker ? TASKS_PER_WORKER : 1);
  const fail = (err: Error): void => {
    if (broken) return;
    broken = err;
    const pending = [...slots.flatMap((s) => s.jobs.splice(0)), ...queue.splice(0)];
    for (const p of pending) {
      p.onReply({ type: 'error', id: p.task.id, name: 'Error', message: `scan worker failed: ${err.message}`, file: p.task.file });
    }
  };
  const finished = (slot: Slot, r: WorkerReply): void => {
    const at = slot.jobs.findIndex((j) => j.task.id === r.id);
    if (at === -1 || broken) return;
    const job = slot.jobs[at]!;
    if (r.type !== 'progress') slot.jobs.splice(at, 1);
    job.onReply(r);
    if (r.type !== 'progress') fill(slot);
  };
  /** Gives the slot queued tasks up to its capacity. */
  const fill = (slot: Slot): void => {
    while (!closed && slot.jobs.length < capacity(slot)) {
      const next = queue.shift();
      if (!next) return;
      slot.jobs.push(next);
      if (slot.worker) {
        slot.worker.postMessage(next.task);
      } else {
        runInline ??= import('./worker.js').then((m) => m.runTask);
        void runInline.then((runTask) =>
          setImmediate(() => {
            if (!closed) void runTask(next.task, (r) => finished(slot, r)); // not after close: its descriptors may be closed
          }),
        );
      }
    }
  };
  const spawn = (): Slot => {
    const worker = new Worker(entry, { workerData: WORKER_DATA });
    const slot: Slot = { worker, ready: false, jobs: [] };
    worker.on('message', (m: WorkerMessage) => {
      if (m.type !== 'ready') return finished(slot, m);
      slot.ready = true;
      fill(slot);
    });
    worker.on('error', (err) => fail(err));
    worker.on('exit', (code) => {
      if (!closed) fail(new TokenwatchError(ErrorCode.ScanWorkerFailed, `worker exited with code ${code}`));
    });
    return slot;
  };
  return {
    run(task, onReply) {
      if (broken) {
        onReply({ type: 'error', id: task.id, name: 'Error', message: `scan worker failed: ${broken.message}`, file: task.file });
        return;
      }
      queue.push({ task, onReply });
      // Start readers while there are fewer than `size` (the calling thread first), then fill free capacity in order.
      if (callingThread && inline.jobs.length === 0) return fill(inline);
      if (slots.length < size) return fill(slots[slots.push(spawn()) - 1]!);
      for (const slot of slots) if (slot.jobs.length < capacity(slot)) return fill(slot);
    },
    async close() {
      closed = true;
      queue.splice(0);
      await Promise.all(slots.map((s) => s.worker?.terminate()));
    },
  };
}

/** Options of {@link readParallel}. */
export interface ParallelReadOptions {
  /** Progress per file, summed over its ranges; `bytesRead` ≤ the file size seen when planning. */
  onProgress?: (p: ReadProgress) => void;
  /** The reader's notices (as `ReadOptions.onNotice`), reported in input order as each file's results are merged. */
  onNotice?: (n: ReadNotice) => void;
  /** Default: a {@link workerPool} of `plan.workers` threads. */
  runner?: TaskRunner;
  /** The event-time samples of the workers' audit JSON lines (as `ReadOptions.onTimeSample`), as each task is merged. */
  onTimeSample?: (time: number, weight: number) => void;
}

/** A running parallel read. */
export interface ParallelRead {
  /** The token uses, each `auditID` once, in the order the serial reader yields them. */
  uses: AsyncGenerator<TokenUse>;
  /**
   * After `uses` is exhausted: the latest event time in the tails of {@link ParallelPlan.workerTailFiles}
   * (as `latestEventTimeOfFiles` would give for them), epoch ms UTC; undefined when none has one.
   * Files whose tail no worker computed (not audit JSON lines) are read by `latestEventTimeOfFile` here.
   * `edge` receives the event times of those tails' lines as `latestEventTimeOfFiles` gives them to its own.
   */
  tailLatest: (edge?: (time: number) => void) => Promise<number | undefined>;
}

type Done = Extract<WorkerReply, { type: 'done' }>;

/** `Promise.withResolvers` (Node 22+) for Node 20. */
function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/**
 * Runs a plan and merges its results into `stats` (as `readTokenUses` counts them). Workers are stopped when
 * the uses are exhausted, on error, or when the consumer stops early.
 *
 * @throws (from `uses`) the InputError of the first failing task in input order, as the serial reader would
 *   throw it; an Error when a worker dies.
 */
export function readParallel(plan: ParallelPlan, stats: ReadStats, opts: ParallelReadOptions = {}): ParallelRead {
  const tails: (number | undefined)[] = [];
  const tailTimes: number[][] = [];
  const lateTails: string[] = [];
  const uses = mergeResults(plan, stats, opts, (file, tail, times) => {
    if (tail === undefined) lateTails.push(file);
    else if (tail !== null) tails.push(tail);
    if (times) tailTimes.push(times);
  });
  return {
    uses,
    async tailLatest(edge) {
      if (edge) for (const times of tailTimes) for (const t of times) edge(t);
      if (lateTails.length > 0) {
        const { latestEventTimeOfFiles } = await import('./latest-event.js');
        tails.push(await latestEventTimeOfFiles(lateTails, undefined, undefined, edge));
      }
      let latest: number | undefined;
      for (const t of tails) if (t !== undefined && (latest === undefined || t > latest)) latest = t;
      return latest;
    },
  };
}

async function* mergeResults(
  plan: ParallelPlan,
  stats: ReadStats,
  opts: ParallelReadOptions,
  onTail: (file: string, tail: number | null | undefined, times?: number[]) => void,
): AsyncGenerator<TokenUse> {
  const runner = opts.runner ?? workerPool(plan.workers);
  // Each task's result, dropped once merged (a merged task keeps nothing alive).
  const results: (ReturnType<typeof deferred<Done>> | undefined)[] = plan.tasks.map(() => deferred<Done>());
  const readByFile = new Map<string, number>();
  const onProgress = opts.onProgress;
  // Tasks are handed to the pool a bounded window ahead of the merge, so that results waiting to be merged (and the
  // pool's queue) stay bounded however many files there are.
  const window = Math.max(2, plan.workers * TASKS_AHEAD_PER_WORKER);
  let dispatched = 0;
  const dispatch = (upTo: number): void => {
    for (; dispatched < Math.min(upTo, plan.tasks.length); dispatched++) start(dispatched);
  };
  const start = (i: number): void => {
    const task = plan.tasks[i]!;
    runner.run(task, (r) => {
      if (r.type === 'progress') {
        if (!onProgress) return;
        const totalBytes = plan.sizes.get(task.file) ?? 0;
        const bytesRead = Math.min(totalBytes, (readByFile.get(task.file) ?? 0) + r.bytes);
        readByFile.set(task.file, bytesRead);
        onProgress({ file: task.file, bytesRead, totalBytes });
      } else if (r.type === 'done') {
        results[i]?.resolve(r);
      } else {
        results[i]?.reject(
          r.name === 'InputError'
            ? new InputError(r.file, r.reason ?? r.message, r.errno !== undefined ? { errno: r.errno } : {})
            : new TokenwatchError(ErrorCode.ScanWorkerFailed, r.message),
        );
      }
    });
  };
  for (const r of results) r?.promise.catch(() => undefined); // rejections are awaited in order below
  dispatch(window);
  const seen: SeenAuditIDs = new Map();
  // A conflict within one file is reported by the worker that read it; one across files (or ranges) here, once.
  let conflictReported = false;
  let fileTally: { lines: number; events: number; oversized: number; nulLines: number } | undefined;
  try {
    for (const [i, task] of plan.tasks.entries()) {
      dispatch(i + window);
      const done = await results[i]!.promise;
      results[i] = undefined;
      const s = done.stats;
      for (const n of done.notices ?? []) opts.onNotice?.(n);
      const samples = done.timeSamples;
      if (samples && opts.onTimeSample) for (let k = 0; k + 1 < samples.length; k += 2) opts.onTimeSample(samples[k]!, samples[k + 1]!);
      if (task.kind === 'range') {
        if (task.start === 0) {
          stats.files++;
          fileTally = { lines: 0, events: 0, oversized: 0, nulLines: 0 };
        }
        fileTally!.lines += s.lines;
        fileTally!.events += s.events;
        fileTally!.oversized += s.oversized ?? 0;
        fileTally!.nulLines += s.nulLines ?? 0;
        // The reader's "no audit event in this file" rule, over all ranges of the file (a `file` task applies it itself).
        if (task.last) {
          const err = noAuditEventError(task.file, 'audit-jsonl', fileTally!.lines, fileTally!.events);
          if (err) throw err;
          for (const n of skippedRecordNotices(task.file, fileTally!.oversized, fileTally!.nulLines, task.maxLineBytes)) opts.onNotice?.(n);
        }
      } else if (task.kind === 'gzip' && done.tailLatest !== undefined) {
        // The fast path of an audit JSON-lines gzip file: the same rule, for the whole file.
        const err = noAuditEventError(task.file, 'audit-jsonl', s.lines, s.events);
        if (err) throw err;
        for (const n of skippedRecordNotices(task.file, s.oversized ?? 0, s.nulLines ?? 0, task.maxLineBytes)) opts.onNotice?.(n);
      }
      if (task.kind !== 'range') {
        stats.files += s.files;
        stats.duplicates += s.duplicates; // within the file, counted by the serial reader (`file` tasks)
        onTail(task.file, task.kind === 'gzip' ? done.tailLatest : null, task.kind === 'gzip' ? done.tailTimes : undefined);
      }
      stats.lines += s.lines;
      stats.events += s.events;
      stats.malformed += s.malformed;
      if (s.oversized) stats.oversized = (stats.oversized ?? 0) + s.oversized;
      if (s.nulLines) stats.nulLines = (stats.nulLines ?? 0) + s.nulLines;
      if (onProgress && (task.kind !== 'range' || task.last)) {
        const totalBytes = plan.sizes.get(task.file) ?? 0;
        onProgress({ file: task.file, bytesRead: totalBytes, totalBytes });
      }
      const file = task.file;
      const onConflict = (use: TokenUse): void => {
        if (conflictReported || (done.notices ?? []).some((n) => n.code === 'auditid-conflict')) return;
        conflictReported = true;
        opts.onNotice?.({ file, code: 'auditid-conflict', message: auditIdConflictMessage(file, use) });
      };
      for (const use of done.uses) {
        if (countOnce(seen, stats, use, onConflict)) yield use;
      }
    }
  } finally {
    await runner.close(); // workers stopped first: none reads a descriptor after it is closed
    await closePlan(plan);
  }
}
