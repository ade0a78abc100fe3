/**
 * FileSource on real files in a temp directory: appends, partial lines, rename rotation, copytruncate, cursor
 * round trip.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { appendFile, mkdtemp, rename, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileSource, parseFileCursor } from '../../src/sources/file.js';
import { emptyStats, SourceError, type SourceStats } from '../../src/sources/types.js';
import { auditEvent, drain, type EventSpec } from './events.js';

const T = Date.parse('2026-11-29T12:00:00Z');
let dir: string;
let path: string;

const stale = (id: string): EventSpec => ({ auditID: id, time: T, kind: 'stale', pod: 'p1', secondsAfterWarning: 100 });
const plain = (id: string): EventSpec => ({ auditID: id, time: T, kind: 'plain' });
const lines = (...specs: EventSpec[]): string => specs.map((s) => auditEvent(s) + '\n').join('');
const ids = (items: string[]): string[] => items.map((m) => (JSON.parse(m) as { auditID: string }).auditID);

async function poll(cursor: string | undefined, stats: SourceStats = emptyStats(), src = new FileSource({ path })) {
  return drain(src.poll(cursor, { now: T, lookbackMs: 86_400_000, stats }));
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tw-file-'));
  path = join(dir, 'audit.log');
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('FileSource', () => {
  it('reads the whole file on the first poll and only appended lines after, yielding only token-use lines', async () => {
    await writeFile(path, lines(stale('a'), plain('b'), { auditID: 'c', time: T, kind: 'unauthorized' }));
    const stats = emptyStats();
    const first = await poll(undefined, stats);
    expect(ids(first.items)).toEqual(['a', 'c']);
    const size1 = (await stat(path)).size;
    expect(stats).toEqual({ requests: 1, bytes: size1, records: 3, throttled: 0 });
    const c1 = parseFileCursor(first.result);
    expect(c1).toMatchObject({ v: 1, ino: (await stat(path)).ino, size: size1, pos: size1 });

    await appendFile(path, lines(plain('d'), { auditID: 'e', time: T, kind: 'legacy', legacySecret: 's' }));
    const stats2 = emptyStats();
    const second = await poll(first.result, stats2);
    expect(ids(second.items)).toEqual(['e']);
    const size2 = (await stat(path)).size;
    expect(stats2).toEqual({ requests: 1, bytes: size2 - size1, records: 2, throttled: 0 });
    expect(parseFileCursor(second.result).pos).toBe(size2);

    const third = await poll(second.result);
    expect(third.items).toEqual([]);
    expect(third.result).toBe(second.result);
  });

  it('leaves a partial last line for the next poll', async () => {
    const full = auditEvent(stale('p'));
    await writeFile(path, lines(stale('a')) + full.slice(0, 100));
    const first = await poll(undefined);
    expect(ids(first.items)).toEqual(['a']);
    expect(parseFileCursor(first.result).pos).toBe(Buffer.byteLength(lines(stale('a'))));
    await appendFile(path, full.slice(100) + '\r\n');
    const second = await poll(first.result);
    expect(ids(second.items)).toEqual(['p']);
    expect(parseFileCursor(second.result).pos).toBe((await stat(path)).size);
  });

  it('keeps its position across a restart through the cursor string', async () => {
    await writeFile(path, lines(stale('a'), stale('b')));
    const first = await poll(undefined);
    await appendFile(path, lines(stale('c')));
    const cursor = JSON.parse(JSON.stringify(first.result)) as string; // as stored and loaded
    const second = await poll(cursor, emptyStats(), new FileSource({ path }));
    expect(ids(second.items)).toEqual(['c']);
  });

  it('finishes the renamed file (<path>.1) before reading the new one from the start', async () => {
    await writeFile(path, lines(stale('a')));
    const first = await poll(undefined);
    await appendFile(path, lines(stale('b'), plain('x')));
    await rename(path, `${path}.1`);
    await writeFile(path, lines(stale('c')));
    const stats = emptyStats();
    const second = await poll(first.result, stats);
    expect(ids(second.items)).toEqual(['b', 'c']);
    expect(stats.requests).toBe(2);
    const c = parseFileCursor(second.result);
    expect(c.ino).toBe((await stat(path)).ino);
    expect(c.pos).toBe((await stat(path)).size);
  });

  it('hands out a checkpoint every checkpointEvents lines; one taken inside a rotated file resumes there, then the new file', async () => {
    await writeFile(path, lines(stale('a')));
    const first = await poll(undefined);
    await appendFile(path, lines(stale('b'), plain('x'), stale('c'), stale('d')));
    await rename(path, `${path}.1`);
    await writeFile(path, lines(stale('e'), stale('f'), stale('g')));
    const checkpoints: string[] = [];
    const all = await drain(new FileSource({ path }).poll(first.result, { now: T, lookbackMs: 86_400_000, stats: emptyStats(), checkpointEvents: 2, checkpoint: (c) => void checkpoints.push(c) }));
    expect(ids(all.items)).toEqual(['b', 'c', 'd', 'e', 'f', 'g']);
    // After b, c (2 yielded, the plain line between them not counted), then d, e — across the rotation — then f, g.
    expect(checkpoints).toHaveLength(3);
    const inRotated = parseFileCursor(checkpoints[0]!);
    expect(inRotated.ino).toBe((await stat(`${path}.1`)).ino);
    expect(inRotated.pos).toBe(Buffer.byteLength(lines(stale('a'), stale('b'), plain('x'), stale('c'))));
    // A restart from the first checkpoint reads the rest of the rotated file, then the new one: nothing twice.
    expect(ids((await poll(checkpoints[0])).items)).toEqual(['d', 'e', 'f', 'g']);
    const inNew = parseFileCursor(checkpoints[1]!);
    expect(inNew.ino).toBe((await stat(path)).ino);
    expect(ids((await poll(checkpoints[1])).items)).toEqual(['f', 'g']);
    expect(parseFileCursor(checkpoints[2]!)).toEqual(parseFileCursor(all.result));
  });

  it("finishes a file rotated to the API server's <name>-<timestamp>.log name", async () => {
    await writeFile(path, lines(stale('a')));
    const first = await poll(undefined);
    await appendFile(path, lines(stale('b')));
    await rename(path, join(dir, 'audit-2026-11-29T12-00-00.000.log'));
    await writeFile(join(dir, 'audit-2026-11-28T12-00-00.000.log'), lines(stale('older-backup')));
    await writeFile(path, lines(stale('c')));
    const second = await poll(first.result);
    expect(ids(second.items)).toEqual(['b', 'c']);
  });

  it('waits when the file was rotated away and not recreated yet, then reads the new one', async () => {
    await writeFile(path, lines(stale('a')));
    const first = await poll(undefined);
    await appendFile(path, lines(stale('b')));
    await rename(path, `${path}.1`);
    const second = await poll(first.result);
    expect(ids(second.items)).toEqual(['b']);
    await writeFile(path, lines(stale('c')));
    const third = await poll(second.result);
    expect(ids(third.items)).toEqual(['c']);
  });

  it('starts over after copytruncate, whether the file is shorter or already longer than the old position', async () => {
    await writeFile(path, lines(stale('a'), stale('b')));
    const first = await poll(undefined);
    const ino = (await stat(path)).ino;
    await truncate(path, 0);
    await writeFile(path, lines(stale('c')));
    expect((await stat(path)).ino).toBe(ino);
    const second = await poll(first.result);
    expect(ids(second.items)).toEqual(['c']); // size < pos

    await truncate(path, 0);
    await writeFile(path, lines({ ...stale('d'), pod: 'a-much-longer-pod-name-so-the-first-line-differs' }, stale('e'), stale('f')));
    const third = await poll(second.result);
    expect(ids(third.items)).toEqual(['d', 'e', 'f']); // size > pos, first line changed
  });

  it('reports a missing file as a retryable SourceError and a foreign cursor as a bad one', async () => {
    const err = await poll(undefined).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SourceError);
    expect((err as SourceError).awsCode).toBe('ENOENT');
    expect((err as SourceError).retryable).toBe(true);
    const bad = await poll('{"v":1,"until":5}').catch((e: unknown) => e);
    expect((bad as SourceError).awsCode).toBe('InvalidCursor');
    expect((bad as SourceError).message).toMatch(/^not a file source cursor/);
  });

  it('reads across chunk boundaries and skips a runaway line without losing the next one', async () => {
    const big = 'x'.repeat(5000);
    await writeFile(path, lines(stale('a')) + big + '\n' + lines(stale('b'), stale('c')));
    const stats = emptyStats();
    const out = await poll(undefined, stats, new FileSource({ path, chunkBytes: 64, maxLineBytes: 3000 }));
    expect(ids(out.items)).toEqual(['a', 'b', 'c']);
    expect(stats.records).toBe(4);
    expect(parseFileCursor(out.result).pos).toBe((await stat(path)).size);
  });
});
