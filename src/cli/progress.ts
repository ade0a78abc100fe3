/**
 * Read progress on stderr for large inputs: a cli-progress bar showing bytes read, total and rate.
 * Shown only when stderr is a TTY and the inputs total more than {@link PROGRESS_MIN_BYTES};
 * nothing at all is written otherwise (pipes, CI logs, small files).
 */
import { statSync } from 'node:fs';
import cliProgress from 'cli-progress';
import type { ReadProgress } from '../scan/run.js';

/** Inputs larger than this (50 MiB, on disk) get a progress bar. */
export const PROGRESS_MIN_BYTES = 50 * 1024 * 1024;

/** Whether a progress bar is worth showing. */
export function shouldShowProgress(isTTY: boolean | undefined, totalBytes: number): boolean {
  return isTTY === true && totalBytes > PROGRESS_MIN_BYTES;
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
 * Starts a progress bar on `stream` when {@link shouldShowProgress} says so, else returns undefined.
 * Progress is per file from the reader; the bar shows the sum over all files.
 */
export function startProgress(files: string[], stream: NodeJS.WriteStream): ProgressDisplay | undefined {
  const total = totalInputBytes(files);
  if (!shouldShowProgress(stream.isTTY, total)) return undefined;

  const bar = new cliProgress.SingleBar(
    {
      stream,
      format: 'reading {bar} {percentage}% | {read} / {size} | {rate} | ETA {eta_formatted}',
      hideCursor: true,
      clearOnComplete: true,
      etaBuffer: 50,
    },
    cliProgress.Presets.shades_classic,
  );
  const started = Date.now();
  const perFile = new Map<string, number>();
  let done = 0;
  bar.start(total, 0, { read: mb(0), size: mb(total), rate: '-' });
  return {
    onProgress(p) {
      perFile.set(p.file, p.bytesRead);
      done = 0;
      for (const v of perFile.values()) done += v;
      const seconds = (Date.now() - started) / 1000;
      const rate = seconds > 0 ? `${(done / 1024 / 1024 / seconds).toFixed(0)} MiB/s` : '-';
      bar.update(Math.min(done, total), { read: mb(done), size: mb(total), rate });
    },
    stop() {
      bar.stop();
    },
  };
}
