/**
 * A byte-level gate in front of a streaming JSON parser (@streamparser/json) that bounds each record and reads on past
 * one that is too long. Pure and synchronous.
 *
 * The records are the object, array or string values at nesting depth `recordDepth` whose container is an array
 * (depth 0: each top-level document): `$.*` of a JSON array is depth 1, `$.items.*` of an EventList, `$.records.*` of
 * an Event Hubs document and `$.results.*` of `get-query-results` output are depth 2. Bytes outside records pass
 * through at once; a record's bytes are held until it is complete, then passed on whole. A record longer than
 * `maxRecordBytes` is dropped as it grows (never held past the limit) and the parser gets `null` in its place, so it
 * sees a well-formed document and emits `null` for that record; `onOversized` is called once for it. Memory stays
 * bounded by the longest record kept, not by the document.
 *
 * The gate tracks strings (with escapes) and nesting only; it does not validate JSON: the parser behind it does.
 */

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const NULL_TEXT = Buffer.from('null');

/** See the module docstring. */
export class RecordGate {
  /** Container of each open nesting level: true for an array, false for an object. */
  private readonly arrays: boolean[] = [];
  private inString = false;
  private escaped = false;
  /** Set while a record is being held (its depth is `recordDepth`; `string`: the record is a string value). */
  private record: { string: boolean } | undefined;
  private held: Buffer[] = [];
  private heldLen = 0;
  private dropping = false;

  constructor(
    private readonly recordDepth: number,
    private readonly maxRecordBytes: number,
    /** Receives the bytes for the parser (structure at once, each kept record whole, `null` for a dropped one). */
    private readonly write: (bytes: Buffer) => void,
    private readonly onOversized: () => void,
  ) {}

  /** Feeds the next bytes of the input (not retained after the call, except copies of a held record's part). */
  push(chunk: Buffer): void {
    let passFrom = 0; // start of the bytes not yet passed on or held
    let i = 0;
    const n = chunk.length;
    while (i < n) {
      if (this.inString) {
        // Skip to the next quote or backslash.
        let j = i;
        while (j < n) {
          const c = chunk[j]!;
          if (this.escaped) this.escaped = false;
          else if (c === BACKSLASH) this.escaped = true;
          else if (c === QUOTE) break;
          j++;
        }
        if (j >= n) {
          i = n;
          break;
        }
        this.inString = false;
        i = j + 1;
        if (this.record?.string) passFrom = this.endRecord(chunk, passFrom, i);
        continue;
      }
      const c = chunk[i]!;
      const depth = this.arrays.length;
      if (this.record === undefined && depth === this.recordDepth && (depth === 0 || this.arrays[depth - 1]) && (c === 0x7b || c === 0x5b || c === QUOTE)) {
        // A record starts here: pass on what came before it, then hold it.
        if (i > passFrom) this.write(chunk.subarray(passFrom, i));
        passFrom = i;
        this.record = { string: c === QUOTE };
        this.held = [];
        this.heldLen = 0;
        this.dropping = false;
      }
      if (c === QUOTE) {
        this.inString = true;
      } else if (c === 0x7b || c === 0x5b) {
        this.arrays.push(c === 0x5b);
      } else if (c === 0x7d || c === 0x5d) {
        this.arrays.pop();
        i++;
        if (this.record !== undefined && !this.record.string && this.arrays.length === this.recordDepth) passFrom = this.endRecord(chunk, passFrom, i);
        continue;
      }
      i++;
    }
    if (this.record !== undefined) this.hold(chunk, passFrom, n);
    else if (n > passFrom) this.write(chunk.subarray(passFrom));
  }

  /** End of input: a record cut short is passed on as it is, so that the parser reports the truncation. */
  end(): void {
    if (this.record === undefined) return;
    if (!this.dropping && this.heldLen > 0) this.write(Buffer.concat(this.held));
    else if (this.dropping) this.onOversized();
    this.record = undefined;
    this.held = [];
    this.heldLen = 0;
  }

  /** Keeps `chunk[from, to)` of the current record (a copy), or drops the record once it is over the limit. */
  private hold(chunk: Buffer, from: number, to: number): void {
    if (this.dropping || to <= from) return;
    if (this.heldLen + (to - from) > this.maxRecordBytes) {
      this.dropping = true;
      this.held = [];
      this.heldLen = 0;
      return;
    }
    this.held.push(Buffer.from(chunk.subarray(from, to)));
    this.heldLen += to - from;
  }

  /** The current record ends just before `chunk[end]`: pass it on (or `null` for a dropped one); returns `end`. */
  private endRecord(chunk: Buffer, from: number, end: number): number {
    this.hold(chunk, from, end);
    if (this.dropping) {
      this.write(NULL_TEXT);
      this.onOversized();
    } else {
      this.write(this.held.length === 1 ? this.held[0]! : Buffer.concat(this.held));
    }
    this.record = undefined;
    this.held = [];
    this.heldLen = 0;
    this.dropping = false;
    return end;
  }
}
