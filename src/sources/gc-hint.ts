/**
 * Young-generation GC hints for gzip inflation loops, so that the memory of inflated chunks is returned while a file is
 * read rather than tens of MiB later.
 *
 * Each chunk a gunzip stream emits is a fresh `ArrayBuffer` (Node's zlib allocates a new output buffer per
 * `chunkSize`), garbage as soon as the scanner has read it. V8 frees the memory of an `ArrayBuffer` only when a GC
 * finds its JS object dead, and the scanners allocate little on the JS heap, so no scavenge runs for a long time: the
 * dead buffers pile up until V8's external-memory trigger (about 64 MiB above the level after the last GC, per
 * thread) starts a full GC. With a gzip reader on the calling thread and one in each worker, that was ~60 MB of dead
 * buffers per thread in the peak RSS of a `scan` of rotated `.gz` files. A minor GC every
 * {@link GC_HINT_BYTES} of inflated data keeps them to a few MiB; it costs well under a millisecond when little
 * of the young generation survives (one per 8 MiB: ~130 per GiB inflated).
 *
 * The `gc` function is taken as jest-leak-detector takes it (set `--expose-gc`, read `gc` in a new V8 context,
 * unset the flag: https://github.com/jestjs/jest/blob/main/packages/jest-leak-detector/src/index.ts), so the
 * program's own global gets no `gc`; `gc({ type: 'minor' })` is V8's scavenge
 * (https://v8.dev/blog/trash-talk). Where the runtime refuses, no hint is given (memory then peaks higher, nothing
 * else changes).
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** Inflated bytes between two young-generation GC hints of one inflation loop. */
export const GC_HINT_BYTES = 8 * 1024 * 1024;

/** `undefined`: not looked up yet; `null`: unavailable. */
let minorGc: (() => void) | null | undefined;

/**
 * V8's young-generation GC as a function, or `null` when the runtime does not give it. Looked up once per thread
 * (each worker thread has its own V8 isolate and gets its own). Never throws.
 */
export function youngGenerationGc(): (() => void) | null {
  if (minorGc !== undefined) return minorGc;
  minorGc = null;
  try {
    const own = (globalThis as { gc?: unknown }).gc; // `node --expose-gc`: already there
    let gc: unknown = own;
    if (typeof own !== 'function') {
      setFlagsFromString('--expose-gc');
      try {
        gc = runInNewContext('gc');
      } finally {
        setFlagsFromString('--no-expose-gc');
      }
    }
    if (typeof gc === 'function') {
      const fn = gc as (options: { type: 'minor' }) => void;
      minorGc = () => fn({ type: 'minor' });
    }
  } catch {
    minorGc = null;
  }
  return minorGc;
}

/** What a {@link GcHint} built without `collect` calls instead of V8's GC; see {@link setDefaultGcCollector}. */
let defaultCollector: (() => void) | undefined;

/**
 * Makes every {@link GcHint} built afterwards without its own `collect` call `collect` instead of V8's GC (tests count
 * the hints of the real inflation loops with it); `undefined` restores V8's GC.
 * @internal Exported for the tests that count the hints (exempt from the production knip pass).
 */
export function setDefaultGcCollector(collect: (() => void) | undefined): void {
  defaultCollector = collect;
}

/**
 * Counts the bytes an inflation loop emits and calls `collect` each time {@link GC_HINT_BYTES} (or `every`) more have
 * passed. `collect` defaults to {@link youngGenerationGc} (nothing when unavailable); tests inject a counter.
 */
export class GcHint {
  private since = 0;
  private readonly collect: (() => void) | null;

  /**
   * @param every bytes between two calls, > 0
   * @param collect what to call; default {@link youngGenerationGc}
   */
  constructor(
    private readonly every: number = GC_HINT_BYTES,
    collect?: () => void,
  ) {
    if (!(every > 0)) throw new RangeError('every must be positive');
    this.collect = collect ?? defaultCollector ?? youngGenerationGc();
  }

  /** Records `bytes` more inflated bytes; calls `collect` when {@link every} have passed since the last call. */
  add(bytes: number): void {
    this.since += bytes;
    if (this.since < this.every) return;
    this.since = 0;
    this.collect?.();
  }
}
