/**
 * Read progress on stderr for long reads: a cli-progress bar showing bytes read, total, rate and, for gzip
 * inputs, bytes inflated. Shown only when stderr is a TTY, from the start when the inputs total more than
 * {@link PROGRESS_MIN_BYTES}, else as soon as the read has lasted {@link PROGRESS_AFTER_MS} (a small gzip file
 * that inflates to gigabytes gets a bar too); nothing at all is written otherwise (pipes, CI logs, quick reads).
 */
import { statSync } from 'node:fs';
import cliProgress from 'cli-progress';
import type { ReadProgress } from '../scan/run.js';

/** Inputs larger than this (50 MiB, on disk) get a progress bar. */
export const PROGRESS_MIN_BYTES = 50 * 1024 * 1024;

/** Reads lasting longer than this (ms) get a progress bar whatever the input size: about 2 s. */
export const PROGRESS_AFTER_MS = 2000;

/**
 * Whether a progress bar is worth showing: on a TTY, for inputs over {@link PROGRESS_MIN_BYTES} on disk, or
 * (when `elapsedMs` is given) once the read has lasted {@link PROGRESS_AFTER_MS} ms.
 */
export function shouldShowProgress(isTTY: boolean | undefined, totalBytes: number, elapsedMs = 0): boolean {
  return isTTY === true && (totalBytes > PROGRESS_MIN_BYTES || elapsedMs >= PROGRESS_AFTER_MS);
}

/** Sum of the sizes on disk of the files that exist (missing files are left to the reader's error). */
export function totalInputBytes(files: string[]): number {
  let total = 0;
  for (const file of files) {
    try {
      total += statSync(file).size;
    } catch {
      // The reader reports unreadable files with a proper error.
    }
  }
  return total;
}

function mb(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(0)} MiB`;
}

/** A running progress display: feed it reader progress, stop it before printing results. */
export interface ProgressDisplay {
  onProgress: (p: ReadProgress) => void;
  stop: () => void;
}

/**
 * A progress display for the read of `files` on `stream`; undefined when `stream` is not a TTY. The bar itself
 * starts when {@link shouldShowProgress} says so (large input at once, else after {@link PROGRESS_AFTER_MS} of
 * reading, checked at each progress report — the reader reports at least every 100 ms while it reads).
 * Progress is per file from the reader; the bar shows the sum over all files (compressed bytes for gzip) and,
 * when gzip files are read, the bytes inflated so far.
 *
 * @param clock epoch ms source (injectable for tests); default `Date.now`.
 */
export function startProgress(
  files: string[],
  stream: NodeJS.WriteStream,
  clock: () => number = Date.now,
): ProgressDisplay | undefined {
  if (stream.isTTY !== true) return undefined;
  const total = totalInputBytes(files);
  const started = clock();
  const perFile = new Map<string, number>();
  const inflatedPerFile = new Map<string, number>();
  let bar: cliProgress.SingleBar | undefined;
  const payload = (done: number, now: number): Record<string, string> => {
    const seconds = (now - started) / 1000;
    let inflated = 0;
    for (const v of inflatedPerFile.values()) inflated += v;
    return {
      read: mb(done),
      size: mb(total),
      rate: seconds > 0 ? `${(done / 1024 / 1024 / seconds).toFixed(0)} MiB/s` : '-',
      inflated: inflatedPerFile.size > 0 ? ` | inflated ${mb(inflated)}` : '',
    };
  };
  const begin = (): cliProgress.SingleBar => {
    const b = new cliProgress.SingleBar(
      {
        stream,
        format: 'reading {bar} {percentage}% | {read} / {size}{inflated} | {rate} | ETA {eta_formatted}',
        hideCursor: true,
        clearOnComplete: true,
        etaBuffer: 50,
      },
      cliProgress.Presets.shades_classic,
    );
    b.start(Math.max(total, 1), 0, payload(0, clock()));
    return b;
  };
  if (shouldShowProgress(true, total)) bar = begin();
  return {
    onProgress(p) {
      perFile.set(p.file, p.bytesRead);
      if (p.decompressedBytes !== undefined) inflatedPerFile.set(p.file, p.decompressedBytes);
      const now = clock();
      if (!bar) {
        if (!shouldShowProgress(true, total, now - started)) return;
        bar = begin();
      }
      let done = 0;
      for (const v of perFile.values()) done += v;
      bar.update(Math.min(done, total), payload(done, now));
    },
    stop() {
      bar?.stop();
    },
  };
}
