/**
 * The prefilter's needle search over Buffers: where does the next occurrence of any of up to three needles begin?
 *
 * `Buffer.indexOf` searches one needle at ~3 GB/s (Node's Boyer-Moore-Horspool, `src/string_search.h`), and the
 * prefilter has three (`PREFILTER_NEEDLES`, `terms.ts`): one pass per needle over every byte was most of a scan's CPU.
 * This searches all of them in one pass with WebAssembly SIMD (`needle-search.wat`; `npm run bench` prints the scan
 * figures). Where WebAssembly is unavailable (`node --jitless`) or rejects the module, it falls back to one
 * `Buffer.indexOf` call per needle, with the same results.
 *
 * The WebAssembly code can only read its own memory: a haystack elsewhere is copied in, {@link COPY_BYTES} at a
 * time. A caller that reads a file itself can read straight into {@link NeedleSearch.claimReadBuffer}'s buffer, which
 * lies in that memory, and nothing is copied. One search per thread and set of needles serves every reader.
 */
import { NEEDLE_SEARCH_WASM } from './needle-search-wasm.js';

/** Bytes of a haystack outside the module's memory copied in per call of the WebAssembly search (256 KiB). */
export const COPY_BYTES = 256 * 1024;
/** Longest needle, bytes (the module keeps each in a 64-byte slot). */
export const MAX_NEEDLE_BYTES = 64;
/** Most needles one search takes (the module has three needle slots). */
export const MAX_NEEDLES = 3;
/**
 * Memory layout, as `needle-search.wat` documents it: needle k at 64·k, its length (u32 LE) at 192 + 4·k, its two
 * anchor offsets (u32 LE) at 208 + 8·k and 212 + 8·k.
 */
const NEEDLE_SLOT = 64;
const LENGTHS_AT = 192;
const ANCHORS_AT = 208;
const DATA_AT = 1024;
/** Bytes after each haystack region the SIMD loads may touch (≤ end + 80; see the .wat). */
const PAD = 128;
const PAGE = 64 * 1024;

/** Size of {@link NeedleSearch.claimReadBuffer}'s buffer: 1 MiB. */
export const READ_BUFFER_BYTES = 1024 * 1024;

/**
 * Offsets of the two bytes of a needle that the WebAssembly search tests at every position (its anchors); the rest of
 * the needle is compared only where both match. Bytes that are rare in the haystack, or rare at that distance from
 * each other, make few candidates (`PREFILTER_ANCHORS`, `terms.ts`). Default: the first and the last byte.
 */
export type Anchors = readonly [number, number];

/** Options of {@link needleSearch}. */
export interface NeedleSearchOptions {
  /** false: the `Buffer.indexOf` fallback (tests). */
  wasm?: boolean;
  /** One {@link Anchors} pair per needle (same order); only speed depends on them, never the result. */
  anchors?: readonly Anchors[];
}

/** Finds the next occurrence of any of its needles. */
export interface NeedleSearch {
  /**
   * Offset in `haystack` of the first byte of the leftmost occurrence of any needle that begins at or after
   * `from` and lies wholly inside `haystack`; -1 when there is none. Same result as the least of
   * `haystack.indexOf(needle, from)` over the needles, ignoring -1s. Synchronous and self-contained: one
   * search may serve any number of readers in a thread.
   */
  indexOf(haystack: Buffer, from: number): number;
  /**
   * A {@link READ_BUFFER_BYTES} buffer in the search's own memory, to read input into: searching it (or a subarray
   * of it) copies nothing. One reader at a time holds it: undefined while another holds it (or on the fallback);
   * give it back with {@link NeedleSearch.releaseReadBuffer}.
   */
  claimReadBuffer(): Buffer | undefined;
  /** Gives back the buffer {@link NeedleSearch.claimReadBuffer} returned (no-op when it was not claimed). */
  releaseReadBuffer(buffer: Buffer | undefined): void;
  /** True when the WebAssembly search runs; false on the `Buffer.indexOf` fallback. */
  readonly simd: boolean;
}

/** What this module uses of the WebAssembly JS API (the project's TypeScript libs do not declare it). */
interface WasmApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: unknown };
}
/** The module's exports (see needle-search.wat). */
interface Exports {
  memory: { buffer: ArrayBuffer; grow(pages: number): number };
  find: (start: number, end: number) => number;
}

let compiled: object | null | undefined;

/** The compiled module, once per thread; null when WebAssembly (or its SIMD) is unavailable here. */
function wasmModule(): object | null {
  if (compiled === undefined) {
    // `node --jitless` has no WebAssembly global; a V8 without SIMD rejects the module.
    const api = (globalThis as { WebAssembly?: WasmApi }).WebAssembly;
    try {
      compiled = api ? new api.Module(Buffer.from(NEEDLE_SEARCH_WASM, 'base64')) : null;
    } catch {
      compiled = null;
    }
  }
  return compiled;
}

/** One `Buffer.indexOf` pass per needle: the reference the WebAssembly search must equal, and its fallback. */
function indexOfAny(haystack: Buffer, needles: readonly Buffer[], from: number): number {
  let best = -1;
  for (const n of needles) {
    const i = haystack.indexOf(n, from);
    if (i !== -1 && (best === -1 || i < best)) best = i;
  }
  return best;
}

/** Searches made in this thread, by needles: instances (and their ~1.3 MiB of memory) are made once, not per file. */
const shared = new Map<string, NeedleSearch>();

/**
 * The search for `needles` of this thread (1–{@link MAX_NEEDLES} needles of 1–{@link MAX_NEEDLE_BYTES} bytes each),
 * made on first use and then shared. `options.wasm: false` gives a fallback search (tests); `options.anchors` picks
 * the bytes each needle is tested on ({@link Anchors}).
 * @throws RangeError for no needles, too many, an empty or too long needle, or anchors that are not two offsets inside
 *   their needle (one pair per needle)
 */
export function needleSearch(needles: readonly Buffer[], options: NeedleSearchOptions = {}): NeedleSearch {
  if (needles.length === 0 || needles.length > MAX_NEEDLES) throw new RangeError(`a search takes 1–${MAX_NEEDLES} needles (got ${needles.length})`);
  for (const n of needles) {
    if (n.length === 0 || n.length > MAX_NEEDLE_BYTES) throw new RangeError(`a needle is 1–${MAX_NEEDLE_BYTES} bytes (got ${n.length})`);
  }
  const anchors = options.anchors ?? needles.map((n): Anchors => [0, n.length - 1]);
  if (anchors.length !== needles.length) throw new RangeError(`one anchor pair per needle (got ${anchors.length} for ${needles.length})`);
  anchors.forEach((pair, k) => {
    const len = (needles[k] as Buffer).length;
    if (!pair.every((o) => Number.isSafeInteger(o) && o >= 0 && o < len)) throw new RangeError(`anchors of needle ${k} must lie inside it (got ${pair.join(', ')})`);
  });
  const list = [...needles];
  const mod = options.wasm === false ? null : wasmModule();
  if (mod === null) {
    return {
      indexOf: (haystack, from) => indexOfAny(haystack, list, from),
      claimReadBuffer: () => undefined,
      releaseReadBuffer: () => undefined,
      simd: false,
    };
  }
  const key = list.map((n, k) => `${n.toString('hex')}@${anchors[k]!.join(',')}`).join('/');
  let search = shared.get(key);
  if (!search) {
    // The module always searches three slots: fewer needles repeat the last one.
    const slots = [0, 1, 2].map((k) => Math.min(k, list.length - 1)).map((k) => ({ needle: list[k] as Buffer, anchors: anchors[k] as Anchors }));
    search = wasmSearch(mod, slots);
    shared.set(key, search);
  }
  return search;
}

function wasmSearch(mod: object, slots: readonly { needle: Buffer; anchors: Anchors }[]): NeedleSearch {
  const api = (globalThis as { WebAssembly?: WasmApi }).WebAssembly!;
  const { memory, find } = new api.Instance(mod, {}).exports as Exports;
  const copyAt = DATA_AT;
  const readAt = copyAt + COPY_BYTES + PAD;
  const bytes = readAt + READ_BUFFER_BYTES + PAD;
  if (bytes > memory.buffer.byteLength) memory.grow(Math.ceil((bytes - memory.buffer.byteLength) / PAGE));
  // Views are made after the last grow (growing detaches the old ArrayBuffer).
  const mem = Buffer.from(memory.buffer);
  slots.forEach(({ needle, anchors }, k) => {
    needle.copy(mem, k * NEEDLE_SLOT);
    mem.writeUInt32LE(needle.length, LENGTHS_AT + 4 * k);
    mem.writeUInt32LE(anchors[0], ANCHORS_AT + 8 * k);
    mem.writeUInt32LE(anchors[1], ANCHORS_AT + 8 * k + 4);
  });
  const readBuffer = mem.subarray(readAt, readAt + READ_BUFFER_BYTES);
  let claimed = false;
  const overlap = Math.max(...slots.map((s) => s.needle.length)) - 1;

  const indexOf = (haystack: Buffer, from: number): number => {
    const start = Math.max(0, from);
    if (start >= haystack.length) return -1;
    if (haystack.buffer === memory.buffer) {
      const base = haystack.byteOffset;
      const at = find(base + start, base + haystack.length);
      return at === -1 ? -1 : at - base;
    }
    // Copied in COPY_BYTES at a time; consecutive pieces overlap by (longest needle - 1) bytes so that a needle
    // across a piece boundary is found whole in the next piece.
    for (let s = start; s < haystack.length; s += COPY_BYTES - overlap) {
      const e = Math.min(haystack.length, s + COPY_BYTES);
      haystack.copy(mem, copyAt, s, e);
      const at = find(copyAt, copyAt + (e - s));
      if (at !== -1) return s + (at - copyAt);
      if (e === haystack.length) break;
    }
    return -1;
  };
  return {
    indexOf,
    claimReadBuffer() {
      if (claimed) return undefined;
      claimed = true;
      return readBuffer;
    },
    releaseReadBuffer(buffer) {
      if (buffer === readBuffer) claimed = false;
    },
    simd: true,
  };
}
