/**
 * The first and last bytes of an input that cannot be read twice (standard input, a pipe), kept while the reader reads
 * it once: `scan` takes the event times of those lines from them (the default reference time and the readiness
 * window, docs/scan.md "--now"), as it reads a regular file's first and last bytes again by position.
 */

/** What {@link EdgeRecorder.take} hands over (bytes uncompressed, after any leading NUL bytes). */
export interface StreamEdges {
  /** The input's `--audit-log` name (`-` for standard input). */
  file: string;
  /** Its first bytes. */
  head: Buffer;
  /** True when more bytes followed the head (its last line may be partial). */
  partialLast: boolean;
  /** Its last bytes. */
  tail: Buffer;
  /** True when bytes came before the tail (its first line may be partial). */
  partialFirst: boolean;
  /** Bytes of the input in all. */
  total: number;
}

/**
 * Keeps the first and the last `bytes` of a stream of chunks by copying them (the reader gives its chunks back for
 * reuse once scanned): at most `bytes` for the head and `2 × bytes` for the tail, whatever the input's size.
 */
export class EdgeRecorder {
  private readonly head: Buffer[] = [];
  private headBytes = 0;
  private ring: Buffer | undefined;
  private len = 0;
  private seen = 0;

  /** @param bytes how many bytes of each end to keep (> 0) */
  constructor(
    private readonly file: string,
    private readonly bytes: number,
  ) {}

  /** Records the next chunk (copies what it needs of it at once: the chunk may be reused afterwards). */
  add(chunk: Buffer): void {
    this.seen += chunk.length;
    if (this.headBytes < this.bytes) {
      const part = chunk.subarray(0, this.bytes - this.headBytes);
      this.head.push(Buffer.from(part));
      this.headBytes += part.length;
    }
    const ring = (this.ring ??= Buffer.allocUnsafe(2 * this.bytes));
    if (chunk.length >= this.bytes) {
      chunk.copy(ring, 0, chunk.length - this.bytes);
      this.len = this.bytes;
      return;
    }
    if (this.len + chunk.length > ring.length) {
      // Keep the last bytes - chunk.length bytes at the start, then append: the tail is whole again.
      const keep = this.bytes - chunk.length;
      ring.copy(ring, 0, this.len - keep, this.len);
      this.len = keep;
    }
    chunk.copy(ring, this.len);
    this.len += chunk.length;
  }

  /** The head and the tail recorded so far (fresh buffers). */
  take(): StreamEdges {
    const tailLength = Math.min(this.len, this.bytes);
    const tail = Buffer.from((this.ring ?? Buffer.alloc(0)).subarray(this.len - tailLength, this.len));
    return { file: this.file, head: Buffer.concat(this.head), partialLast: this.seen > this.headBytes, tail, partialFirst: this.seen > tail.length, total: this.seen };
  }
}
