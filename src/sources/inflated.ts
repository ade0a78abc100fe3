/**
 * Gunzip streams whose output memory is given back as soon as it has been read, so that decompressing a rotated
 * `.gz` audit log keeps a few MiB of inflated data in memory rather than tens of MiB of dead buffers per thread.
 *
 * Why it is needed: Node's zlib stream writes its output into a buffer of `chunkSize` bytes and, once that buffer is
 * full, allocates a fresh one (`Buffer.allocUnsafe(chunkSize)` in `processCallback` of
 * https://github.com/nodejs/node/blob/main/lib/zlib.js). The full buffer is garbage as soon as its chunks have been
 * read, but V8 frees the memory behind an `ArrayBuffer` only when a GC finds its JS object dead, and the scanners
 * allocate so little on the JS heap that no GC runs until V8's external-memory trigger (tens of MiB later): about
 * 60 MB of dead buffers per thread in the peak RSS of a `scan` of rotated `.gz` files (docs/performance.md).
 *
 * How: each full output buffer is detached once its last chunk has been read, with the standard
 * `ArrayBuffer.prototype.transfer(0)` (ES2024; https://tc39.es/ecma262/#sec-arraybuffer.prototype.transfer), which
 * releases its memory at once (V8 drops the backing store when the buffer is detached). Only buffers that zlib itself
 * allocated for one of these streams are detached, and only when zlib has filled them (it never writes into a full
 * buffer again), so nothing else of the process is touched. The reader must not keep a view of a chunk it hands to
 * {@link releaseInflated}: tokenwatch's byte scanners copy what they keep (`JsonlScanner`, `JsonExportScanner`), as
 * they must for the recycled read buffer of plain files.
 */
import { createGunzip, type Gunzip } from 'node:zlib';

/**
 * Output chunk size of the streams made here, bytes (zlib's default is 16 KiB): larger than Node's shared buffer pool
 * (`Buffer.poolSize`: 8 KiB up to Node 22, 64 KiB from Node 24), so that a buffer of this length is never a pool slab.
 */
export const INFLATE_CHUNK_BYTES = 128 * 1024;

/** The output buffers of this thread's inflating streams that zlib has allocated and not yet seen detached. */
const owned = new WeakSet<ArrayBuffer>();

/** Bytes of output buffers this thread has given back (see {@link releasedInflatedBytes}). */
let released = 0;

type Transferable = ArrayBuffer & { transfer?: (newLength?: number) => ArrayBuffer };

/** A gunzip stream and the reading of its chunks; see {@link createInflater}. */
export interface Inflater {
  /** The gunzip stream (concatenated members allowed, as `zlib.createGunzip`): pipe the compressed bytes into it. */
  readonly stream: Gunzip;
  /**
   * Its chunks, in order, each releasable with {@link releaseInflated}: a view of zlib's output buffer (or, where the
   * stream joined buffered chunks, a copy). Errors of the stream are thrown. Read once.
   */
  chunks(): AsyncGenerator<Buffer>;
}

/**
 * A gunzip stream whose output buffers can be given back as they are read ({@link releaseInflated}).
 * @param chunkSize output buffer size, bytes; larger than `Buffer.poolSize`, so that neither zlib's buffers nor a buffer
 *   of that length can be a slab of Node's shared buffer pool (which backs many small, unrelated buffers)
 * @throws RangeError when `chunkSize` is not larger than `Buffer.poolSize`
 */
export function createInflater(chunkSize: number = INFLATE_CHUNK_BYTES): Inflater {
  if (!(chunkSize > Buffer.poolSize)) throw new RangeError(`chunkSize must be larger than Buffer.poolSize (${Buffer.poolSize}), got ${chunkSize}`);
  const stream = createGunzip({ chunkSize });
  return {
    stream,
    async *chunks() {
      for await (const chunk of stream as AsyncIterable<Buffer>) {
        const ab = chunk.buffer as ArrayBuffer;
        // zlib's own output buffers are exactly chunkSize long (where the stream joined buffered chunks, the copy is
        // ours alone); a pool slab is never that long.
        if (ab.byteLength === chunkSize && ab.byteLength > Buffer.poolSize) owned.add(ab);
        yield chunk;
      }
    },
  };
}

/**
 * Gives back the memory of an inflated chunk that its reader is done with: when `chunk` is the last part of an
 * output buffer of {@link Inflater.chunks} (zlib has filled it and moved on), that buffer is detached now; otherwise
 * nothing happens (a chunk of any other origin, or one whose buffer zlib still writes into, is left alone). Every
 * earlier chunk of the same buffer must have been read too (chunks are read in order), and no view of any of them
 * may be kept: they read as empty once detached.
 * @returns whether a buffer was released
 */
export function releaseInflated(chunk: Buffer): boolean {
  const ab = chunk.buffer as Transferable;
  if (!owned.has(ab) || chunk.byteOffset + chunk.byteLength !== ab.byteLength || typeof ab.transfer !== 'function') return false;
  owned.delete(ab);
  released += ab.byteLength;
  ab.transfer(0);
  return true;
}

/**
 * Bytes of inflated output this thread has given back through {@link releaseInflated} since it started.
 * @internal Exported for the tests that check the inflation loops give their buffers back (exempt from the production knip pass).
 */
export function releasedInflatedBytes(): number {
  return released;
}
