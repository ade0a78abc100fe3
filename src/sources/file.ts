/**
 * File audit source: follows the audit log a self-managed API server writes (`--audit-log-path`, JSON lines;
 * rotated by size with `--audit-log-maxsize`/`--audit-log-maxbackup`, docs/design/domain.md §3) across polls.
 *
 * Cursor: JSON `{"v":1,"ino":<inode>,"size":<bytes>,"pos":<bytes>,"head":"<sha256 of the first line, 16 hex>"}`.
 * - Appends: reads from `pos` to the last complete line; a partial last line waits for the next poll.
 * - Rotation by rename (new inode at `path`): finishes the old file first if it can still be found — `<path>.1`
 *   (logrotate) or `<name>-<timestamp><ext>` in the same directory (the API server's lumberjack naming, e.g.
 *   `audit-2026-11-29T12-00-00.000.log`) with the cursor's inode — then reads the new file from 0. Compressed
 *   backups (`--audit-log-compress`, `.gz`) cannot be resumed by offset and are skipped; so is a file rotated
 *   away twice between two polls (only the inode's current name is checked).
 * - Truncation: size < pos, or the first line changed (copytruncate followed by new writes past `pos`) → from 0.
 * The caller dedupes by auditID, so a re-read after a false rotation guess costs time, not correctness.
 *
 * First poll (no cursor): reads the whole file, ignoring `lookbackMs`: finding a time offset in an unindexed file
 * means parsing it anyway, and the prefilter makes the full read cheap (only lines with a token-use term are
 * decoded and yielded).
 *
 * Progress commits (`PollOptions.checkpoint`): after every `checkpointEvents` yielded lines the source hands out the
 * cursor of the offset after the last one, so a long read (a 401 flood) is stored in bounded chunks and a restart goes
 * on from the last committed chunk (docs/live-mode.md#bounded-polls).
 *
 * Yields only lines that pass the audit reader's prefilter (`mayHoldTokenUse`, `src/audit/records.ts`); stats: `requests` = files opened,
 * `bytes` = bytes read, `records` = complete lines seen.
 */
import { ErrorCode, TokenwatchError } from '../errors.js';
import { createHash } from 'node:crypto';
import { open, readdir, stat, type FileHandle } from 'node:fs/promises';
import { basename, dirname, extname, join } from 'node:path';
import { mayHoldTokenUse } from '../audit/records.js';
import { isPlatformExport, tallyPlatformHints } from './platform-hints.js';
import { DEFAULT_CHECKPOINT_EVENTS, SourceError, type AuditSource, type PollOptions, type SourceStats } from './types.js';

/** Options of {@link FileSource}. */
export interface FileSourceOptions {
  /** The audit log file. */
  path: string;
  /** Read chunk size, bytes. Default 1 MiB. */
  chunkBytes?: number;
  /** A line longer than this without a newline is skipped (counted in `records`). Default 16 MiB. */
  maxLineBytes?: number;
  /** Line prefilter. Default `mayHoldTokenUse` of the audit reader (`src/audit/records.ts`). */
  prefilter?: (line: Buffer) => boolean;
}

/** The file source's cursor. */
export interface FileCursor {
  v: 1;
  /** Inode of the file read. */
  ino: number;
  /** Its size when last read, bytes. */
  size: number;
  /** Offset after the last complete line read, bytes. */
  pos: number;
  /** sha256 (16 hex chars) of the first complete line, '' while the file has none. */
  head: string;
}

/** Parses a file cursor. @throws Error when malformed. */
export function parseFileCursor(cursor: string): FileCursor {
  const v: unknown = JSON.parse(cursor);
  const c = v as Partial<FileCursor>;
  if (!v || typeof v !== 'object' || typeof c.ino !== 'number' || typeof c.pos !== 'number' || typeof c.size !== 'number' || typeof c.head !== 'string') {
    throw new TokenwatchError(ErrorCode.CursorInvalid, `not a file source cursor: ${cursor.slice(0, 100)}`);
  }
  return { v: 1, ino: c.ino, size: c.size, pos: c.pos, head: c.head };
}

const HEAD_MAX = 64 * 1024;

function hashHead(line: Buffer): string {
  return createHash('sha256').update(line).digest('hex').slice(0, 16);
}

/** sha256 (16 hex chars) of the file's first complete line ('' if none within the first 64 KiB). */
export async function readHead(fh: FileHandle, size: number): Promise<string> {
  const n = Math.min(size, HEAD_MAX);
  if (n === 0) return '';
  const buf = Buffer.alloc(n);
  const { bytesRead } = await fh.read(buf, 0, n, 0);
  const nl = buf.subarray(0, bytesRead).indexOf(0x0a);
  return nl < 0 ? '' : hashHead(buf.subarray(0, nl));
}

function isEnoent(err: unknown): boolean {
  return !!err && typeof err === 'object' && (err as { code?: unknown }).code === 'ENOENT';
}

/** Options of one poll's reads: the poll's, plus the lines yielded since the last checkpoint. */
type ReadOptions = PollOptions & { since: { lines: number } };

/** Follows one audit log file. See the module doc. */
export class FileSource implements AuditSource {
  readonly id: string;
  private readonly chunkBytes: number;
  private readonly maxLineBytes: number;
  private readonly prefilter: (line: Buffer) => boolean;

  constructor(private readonly opts: FileSourceOptions) {
    if (!opts.path) throw new TokenwatchError(ErrorCode.Internal, 'FileSource: path is required');
    this.id = `file:${opts.path}`;
    this.chunkBytes = opts.chunkBytes ?? 1024 * 1024;
    this.maxLineBytes = opts.maxLineBytes ?? 16 * 1024 * 1024;
    this.prefilter = opts.prefilter ?? mayHoldTokenUse;
  }

  /** {@inheritDoc AuditSource.poll} */
  async *poll(cursor: string | undefined, opts: PollOptions): AsyncGenerator<string, string> {
    let prev: FileCursor | undefined;
    try {
      prev = cursor ? parseFileCursor(cursor) : undefined;
    } catch (err) {
      throw new SourceError((err as Error).message, this.id, 'InvalidCursor', false, { cause: err });
    }
    // One count across the rotated file and the new one: a checkpoint at least every `checkpointEvents` lines.
    return yield* this.run(prev, { ...opts, since: { lines: 0 } });
  }

  private async *run(prev: FileCursor | undefined, o: ReadOptions): AsyncGenerator<string, string> {
    let fh: FileHandle;
    try {
      fh = await open(this.opts.path, 'r');
    } catch (err) {
      if (isEnoent(err) && prev) {
        // Rotated away and not yet recreated: finish the old file if it is still around, keep waiting.
        const finished = yield* this.finishRotated(prev, o);
        return JSON.stringify(finished ?? prev);
      }
      const code = (err as { code?: string }).code ?? 'Error';
      throw new SourceError(`cannot open audit log ${this.opts.path}: ${(err as Error).message}`, this.id, code, code === 'ENOENT', { cause: err });
    }
    o.stats.requests++;
    try {
      const st = await fh.stat();
      const ino = st.ino;
      const size = st.size;
      const head = await readHead(fh, size);
      let pos = 0;
      if (prev && prev.ino === ino) {
        const truncated = size < prev.pos || (prev.head !== '' && head !== prev.head);
        pos = truncated ? 0 : prev.pos;
      } else if (prev) {
        yield* this.finishRotated(prev, o);
      }
      const at = (p: number): string => JSON.stringify({ v: 1, ino, size, pos: p, head } satisfies FileCursor);
      return at(yield* this.readLines(fh, pos, size, o, at));
    } finally {
      await fh.close();
    }
  }

  /**
   * Reads the rest of the rotated-away file with inode `prev.ino` from `prev.pos`, if it is found under a rotation
   * name. Returns the cursor after it, or undefined when not found.
   */
  private async *finishRotated(prev: FileCursor, o: ReadOptions): AsyncGenerator<string, FileCursor | undefined> {
    const path = await this.findRotated(prev.ino);
    if (!path) return undefined;
    let fh: FileHandle;
    try {
      fh = await open(path, 'r');
    } catch {
      return undefined;
    }
    o.stats.requests++;
    try {
      const st = await fh.stat();
      if (st.ino !== prev.ino) return undefined;
      const head = await readHead(fh, st.size);
      const from = st.size < prev.pos || (prev.head !== '' && head !== prev.head) ? 0 : prev.pos;
      const at = (p: number): FileCursor => ({ v: 1, ino: st.ino, size: st.size, pos: p, head });
      // A checkpoint here names the rotated file's inode: a restart finds it again by inode and goes on from `pos`.
      const end = yield* this.readLines(fh, from, st.size, o, (p) => JSON.stringify(at(p)));
      return at(end);
    } finally {
      await fh.close();
    }
  }

  /** A file in the log's directory, under a rotation name, with inode `ino`. */
  private async findRotated(ino: number): Promise<string | undefined> {
    const dir = dirname(this.opts.path);
    const base = basename(this.opts.path);
    const ext = extname(base);
    const stem = ext ? base.slice(0, -ext.length) : base;
    const candidates = [`${this.opts.path}.1`];
    try {
      for (const name of await readdir(dir)) {
        if (name === base || name.endsWith('.gz')) continue;
        if (name.startsWith(`${stem}-`) && name.endsWith(ext)) candidates.push(join(dir, name));
        else if (name.startsWith(`${base}.`)) candidates.push(join(dir, name));
      }
    } catch {
      /* directory unreadable: only the .1 guess */
    }
    for (const p of new Set(candidates)) {
      try {
        if ((await stat(p)).ino === ino) return p;
      } catch {
        /* not there */
      }
    }
    return undefined;
  }

  /**
   * Yields prefiltered complete lines in [from, size); returns the offset after the last complete line. After every
   * `o.checkpointEvents` yielded lines it awaits `o.checkpoint(cursorAt(offset after the last yielded line))`.
   */
  private async *readLines(fh: FileHandle, from: number, size: number, o: ReadOptions, cursorAt: (pos: number) => string): AsyncGenerator<string, number> {
    const stats: SourceStats = o.stats;
    const every = Math.max(1, o.checkpointEvents ?? DEFAULT_CHECKPOINT_EVENTS);
    let pos = from;
    let carry: Buffer = Buffer.alloc(0);
    let skipping = false;
    // Decided by the first record read: only an AKS or GKE export pays for the per-line platform markers.
    let platformExport: boolean | undefined;
    let readAt = from;
    const chunk = Buffer.alloc(this.chunkBytes);
    while (readAt < size) {
      if (o.signal?.aborted) throw o.signal.reason;
      const want = Math.min(this.chunkBytes, size - readAt);
      const { bytesRead } = await fh.read(chunk, 0, want, readAt);
      if (bytesRead === 0) break;
      readAt += bytesRead;
      stats.bytes += bytesRead;
      const data = carry.length ? Buffer.concat([carry, chunk.subarray(0, bytesRead)]) : Buffer.from(chunk.subarray(0, bytesRead));
      let start = 0;
      for (;;) {
        const nl = data.indexOf(0x0a, start);
        if (nl < 0) break;
        const lineEnd = nl > start && data[nl - 1] === 0x0d ? nl - 1 : nl;
        const line = data.subarray(start, lineEnd);
        pos += nl + 1 - start;
        start = nl + 1;
        if (skipping) {
          skipping = false;
          continue;
        }
        stats.records++;
        if (stats.platformHints && line.length > 0) {
          platformExport ??= isPlatformExport(line);
          if (platformExport) tallyPlatformHints(line, stats.platformHints);
        }
        if (line.length > 0 && this.prefilter(line)) {
          yield line.toString('utf8');
          if (o.checkpoint && ++o.since.lines >= every) {
            o.since.lines = 0;
            await o.checkpoint(cursorAt(pos));
          }
        }
      }
      carry = data.subarray(start);
      if (carry.length > this.maxLineBytes) {
        // A runaway line: drop what we have and skip to its end.
        pos += carry.length;
        carry = Buffer.alloc(0);
        if (!skipping) stats.records++;
        skipping = true;
      }
    }
    return pos;
  }
}
