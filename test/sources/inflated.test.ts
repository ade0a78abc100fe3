import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INFLATE_CHUNK_BYTES, createInflater, releaseInflated, releasedInflatedBytes } from '../../src/sources/inflated.js';
import { DEFAULT_MAX_LINE_BYTES, createReadStats, readTokenUses } from '../../src/sources/reader.js';
import { runTask, type WorkerReply } from '../../src/scan/worker.js';
import { StreamTail, TAIL_BYTES, latestEventTimeOfFile } from '../../src/scan/latest-event.js';
import { auditEvent } from './events.js';

/** Text of `n` pseudo-random lines (so that gzip output is not trivially small), deterministic. */
function text(n: number): string {
  let x = 12345;
  const lines: string[] = [];
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    lines.push(`${i} ${x.toString(36).repeat(1 + (x % 7))}`);
  }
  return lines.join('\n') + '\n';
}

describe('releaseInflated', () => {
  it('rejects an output chunk size that could come from the shared buffer pool', () => {
    expect(() => createInflater(Buffer.poolSize)).toThrow(RangeError);
    expect(() => createInflater(INFLATE_CHUNK_BYTES)).not.toThrow();
    expect(INFLATE_CHUNK_BYTES).toBeGreaterThan(Buffer.poolSize);
  });

  it('leaves a buffer of any other origin alone', () => {
    const own = Buffer.alloc(INFLATE_CHUNK_BYTES, 7);
    expect(releaseInflated(own)).toBe(false);
    expect(own.length).toBe(INFLATE_CHUNK_BYTES);
    const pooled = Buffer.from('abc'); // a slice of the shared pool
    expect(releaseInflated(pooled)).toBe(false);
    expect(pooled.toString()).toBe('abc');
  });

  it('frees each full output buffer once its last chunk is read, and only then; the data read is intact', async () => {
    const plain = Buffer.from(text(60_000));
    const inflater = createInflater();
    Readable.from([gzipSync(plain)]).pipe(inflater.stream);
    const copies: Buffer[] = [];
    let freed = 0;
    const before = releasedInflatedBytes();
    for await (const chunk of inflater.chunks()) {
      copies.push(Buffer.from(chunk));
      const endsBuffer = chunk.byteOffset + chunk.length === chunk.buffer.byteLength;
      const was = chunk.length;
      expect(releaseInflated(chunk)).toBe(endsBuffer);
      if (endsBuffer) {
        freed++;
        expect(chunk.length).toBe(0); // detached: its memory is gone
        expect(releaseInflated(chunk)).toBe(false); // once
      } else {
        expect(chunk.length).toBe(was);
      }
    }
    expect(Buffer.concat(copies).equals(plain)).toBe(true);
    expect(freed).toBe(Math.floor(plain.length / INFLATE_CHUNK_BYTES));
    expect(releasedInflatedBytes() - before).toBe(freed * INFLATE_CHUNK_BYTES);
  });
});

describe('StreamTail', () => {
  it('keeps the last TAIL_BYTES and hands each chunk it lets go of to `dropped`, oldest first', () => {
    const gone: number[] = [];
    const tail = new StreamTail((c) => gone.push(c[0]!));
    const chunk = (i: number): Buffer => Buffer.alloc(64 * 1024, i);
    for (let i = 0; i < 10; i++) tail.add(chunk(i));
    // 10 × 64 KiB; the tail needs the last 4 (256 KiB), so chunks 0–5 were let go of, in order.
    expect(gone).toEqual([0, 1, 2, 3, 4, 5]);
    const { tail: t, partialFirst } = tail.take();
    expect(t.length).toBe(TAIL_BYTES);
    expect([t[0], t[t.length - 1]]).toEqual([6, 9]);
    expect(partialFirst).toBe(true);
  });
});

describe('the gzip inflation loops give back the buffers they have read', () => {
  const T0 = Date.UTC(2026, 10, 20, 0, 0, 0);
  let dir: string;
  let file: string;
  let inflatedBytes: number;
  const lines = 20_000;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tw-inflated-'));
    file = join(dir, 'audit.log.gz');
    const pad = 'x'.repeat(700); // ~1 KiB lines: ~20 MiB inflated, lines cut across the output buffers
    const body =
      Array.from({ length: lines }, (_, i) => {
        const kind = i % 1000 === 999 ? 'stale' : 'plain';
        return auditEvent({ auditID: `a-${i}`, time: T0 + i * 40, kind, userAgent: `bench/${pad}` });
      }).join('\n') + '\n';
    inflatedBytes = Buffer.byteLength(body);
    await writeFile(file, gzipSync(body));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  /** All of the file's full output buffers but the last few (the tail keeps up to TAIL_BYTES plus a chunk). */
  const most = (): number => inflatedBytes - TAIL_BYTES - 2 * INFLATE_CHUNK_BYTES;

  it('the serial reader, every line read intact', { timeout: 120_000 }, async () => {
    const before = releasedInflatedBytes();
    const stats = createReadStats();
    let uses = 0;
    for await (const _ of readTokenUses([file], stats, {})) uses++;
    expect(stats.lines).toBe(lines);
    expect(stats.malformed).toBe(0);
    expect(uses).toBe(lines / 1000); // every 1000th line is a stale-token use
    expect(releasedInflatedBytes() - before).toBeGreaterThan(most());
  });

  it("the worker's gzip fast path, every line read intact", { timeout: 120_000 }, async () => {
    const before = releasedInflatedBytes();
    const replies: WorkerReply[] = [];
    await runTask({ kind: 'gzip', id: 0, file, maxLineBytes: DEFAULT_MAX_LINE_BYTES }, (r) => replies.push(r));
    const done = replies.find((r) => r.type === 'done');
    expect(done?.type === 'done' ? [done.uses.length, done.stats.lines, done.stats.malformed] : []).toEqual([lines / 1000, lines, 0]);
    expect(done?.type === 'done' ? done.tailLatest : undefined).toBe(T0 + (lines - 1) * 40);
    expect(releasedInflatedBytes() - before).toBeGreaterThan(most());
  });

  it('the tail read of the default reference time', { timeout: 120_000 }, async () => {
    const before = releasedInflatedBytes();
    expect(await latestEventTimeOfFile(file)).toBe(T0 + (lines - 1) * 40);
    expect(releasedInflatedBytes() - before).toBeGreaterThan(most() - 256 * 1024);
  });
});
