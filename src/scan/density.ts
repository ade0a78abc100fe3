/**
 * How dense an input is in lines the prefilter passes, sampled before a parallel read is planned (`parallel.ts`).
 *
 * A worker thread scans bytes fast but every token use it finds is copied to the calling thread (structured clone),
 * where it is deduplicated and aggregated in input order. On input where few lines pass the prefilter that costs
 * nothing and two threads read about twice as fast as one; on dense input (a cluster deep in stale tokens, a 401
 * flood) the copies and the merge on the calling thread cost more than the second thread saves: measured on the
 * 2-CPU development VM, a 256 MiB file with 30 % stale-token lines took 1.7–1.9 s and 123 MB on one thread, 3.0–3.6 s
 * and 290–307 MB on two (docs/performance.md "Scan parallelism"). The planner therefore samples what the prefilter
 * sees and stays on one thread when the input is dense ({@link DENSE_HITS_PER_MIB}).
 *
 * Sampling reads {@link SAMPLE_WINDOWS} windows of {@link SAMPLE_WINDOW_BYTES} spread evenly over the large plain files
 * (positional reads, well under a millisecond each from the page cache), and inflates the first 16 KiB of a gzip
 * file's head, already read for format detection. A window's partial first and last lines are not counted.
 */
import { gunzipSync, constants as zlib } from 'node:zlib';
import type { FileHandle } from 'node:fs/promises';
import { prefilterSearch } from '../audit/records.js';

/**
 * Windows sampled in all over the plain files sampled across their length (64: 4 MiB; each file gets its share, at
 * least {@link SAMPLE_MIN_WINDOWS}). At the {@link DENSE_HITS_PER_MIB} limit a 4 MiB sample holds ~16 passing lines,
 * so one or two lines more or less do not flip the decision; with 8 windows (0.5 MiB) two lines did: a 1 GiB log with
 * 0.7 passing lines per MiB (`npm run bench`'s sparse input) sampled 4.1 per MiB and was read on one thread.
 */
export const SAMPLE_WINDOWS = 64;
/** Fewest windows sampled in one plain file when many share {@link SAMPLE_WINDOWS}. */
export const SAMPLE_MIN_WINDOWS = 8;
/** Bytes per sampled window (64 KiB: dozens of audit events of 0.5–2 KiB). */
export const SAMPLE_WINDOW_BYTES = 64 * 1024;
/** Compressed bytes of a gzip file's head inflated for the sample (audit logs inflate 10–20×: ~160–320 KiB). */
const GZIP_SAMPLE_IN_BYTES = 16 * 1024;
/** Most uncompressed bytes taken from a gzip file's head. */
const GZIP_SAMPLE_MAX_BYTES = 4 * 1024 * 1024;

/**
 * Above this many prefilter-passing lines per MiB of input (averaged over the input, gzip uncompressed), a read stays
 * on one thread. 4 per MiB is about 0.5 % of 1.4 KiB audit events: at 0.1 % (0.7 per MiB) two threads read a 1 GiB
 * file as fast as one or faster, at 1 % (7 per MiB) and above they paid more CPU than they saved on the development
 * VM (docs/performance.md "Scan parallelism"). Below it a 16 MiB range holds at most ~64 token uses, so what workers
 * hand back stays small.
 */
export const DENSE_HITS_PER_MIB = 4;

/** What a sample saw: bytes of whole lines, lines, and lines holding a prefilter needle. */
export interface DensitySample {
  bytes: number;
  lines: number;
  hits: number;
}

const LF = 0x0a;

/**
 * Counts the whole lines of `buf` (after its first `\n` unless `fromStart`, up to its last `\n` unless `toEnd`) and
 * those holding a prefilter needle (`PREFILTER_NEEDLES`, `src/audit/terms.ts`), with the prefilter's own search. Pure.
 */
export function countHits(buf: Buffer, fromStart: boolean, toEnd: boolean): DensitySample {
  const first = fromStart ? 0 : buf.indexOf(LF) + 1;
  const lastNl = buf.lastIndexOf(LF);
  const end = toEnd ? buf.length : lastNl + 1;
  if ((!fromStart && first === 0) || end <= first) return { bytes: 0, lines: 0, hits: 0 };
  const view = buf.subarray(first, end);
  let lines = 0;
  for (let at = view.indexOf(LF); at !== -1; at = view.indexOf(LF, at + 1)) lines++;
  if (toEnd && view.length > 0 && view[view.length - 1] !== LF) lines++;
  const search = prefilterSearch();
  let hits = 0;
  for (let from = 0; ; ) {
    const h = search.indexOf(view, from);
    if (h === -1) break;
    hits++;
    const nl = view.indexOf(LF, h);
    if (nl === -1) break;
    from = nl + 1;
  }
  return { bytes: view.length, lines, hits };
}

/** Adds `b` into `a`. */
export function addSample(a: DensitySample, b: DensitySample): void {
  a.bytes += b.bytes;
  a.lines += b.lines;
  a.hits += b.hits;
}

/**
 * Samples a plain file through an open handle: `count` windows of {@link SAMPLE_WINDOW_BYTES} spread from its start to
 * its end (the whole file when it is smaller than all windows together). Never throws: a failed read samples nothing.
 * @param size the file's size, bytes
 * @param count windows to read, ≥ 1 (default {@link SAMPLE_WINDOWS})
 */
export async function samplePlainFile(handle: FileHandle, size: number, count: number = SAMPLE_WINDOWS): Promise<DensitySample> {
  const total: DensitySample = { bytes: 0, lines: 0, hits: 0 };
  const buf = Buffer.allocUnsafe(SAMPLE_WINDOW_BYTES);
  const windows = size <= count * SAMPLE_WINDOW_BYTES ? Math.ceil(size / SAMPLE_WINDOW_BYTES) : count;
  const step = windows > 1 ? (size - SAMPLE_WINDOW_BYTES) / (windows - 1) : 0;
  try {
    for (let w = 0; w < windows; w++) {
      const start = Math.max(0, Math.floor(w * step));
      const { bytesRead } = await handle.read(buf, 0, buf.length, start);
      const end = start + bytesRead;
      addSample(total, countHits(buf.subarray(0, bytesRead), start === 0, end >= size));
    }
  } catch {
    // unreadable here: the read itself reports it, worded as the serial reader words it
  }
  return total;
}

/**
 * Samples the head of a gzip file from its first bytes on disk (`head`): the first {@link GZIP_SAMPLE_IN_BYTES}
 * inflated as far as they go, at most {@link GZIP_SAMPLE_MAX_BYTES}. Never throws: corrupt data samples nothing (the read reports it).
 */
export function sampleGzipHead(head: Buffer): DensitySample {
  try {
    const out = gunzipSync(head.subarray(0, GZIP_SAMPLE_IN_BYTES), { finishFlush: zlib.Z_SYNC_FLUSH, maxOutputLength: GZIP_SAMPLE_MAX_BYTES });
    return countHits(out, true, false);
  } catch {
    return { bytes: 0, lines: 0, hits: 0 };
  }
}

/**
 * Prefilter-passing lines per MiB the input is estimated to hold: each file's sampled density weighted by its input
 * bytes (files without a sample count as their sampled neighbours' average). 0 when nothing was sampled.
 */
export function hitsPerMiB(files: readonly { bytes: number; sample: DensitySample | undefined }[]): number {
  let sampledHits = 0;
  let sampledBytes = 0;
  for (const f of files) {
    if (!f.sample || f.sample.bytes === 0) continue;
    sampledHits += f.sample.hits;
    sampledBytes += f.sample.bytes;
  }
  if (sampledBytes === 0) return 0;
  const avg = sampledHits / sampledBytes;
  let hits = 0;
  let bytes = 0;
  for (const f of files) {
    const d = f.sample && f.sample.bytes > 0 ? f.sample.hits / f.sample.bytes : avg;
    hits += d * f.bytes;
    bytes += f.bytes;
  }
  return bytes === 0 ? 0 : (hits / bytes) * 1024 * 1024;
}
