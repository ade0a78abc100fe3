import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GC_HINT_BYTES, GcHint, setDefaultGcCollector, youngGenerationGc } from '../../src/sources/gc-hint.js';
import { DEFAULT_MAX_LINE_BYTES, createReadStats, readTokenUses } from '../../src/sources/reader.js';
import { runTask, type WorkerReply } from '../../src/scan/worker.js';
import { latestEventTimeOfFile } from '../../src/scan/latest-event.js';
import { auditEvent } from './events.js';

describe('GcHint', () => {
  it('calls collect once per `every` bytes, counting across chunk boundaries', () => {
    let calls = 0;
    const hint = new GcHint(1024 * 1024, () => calls++);
    // 20 MiB in 64 KiB chunks: after 1, 2, …, 20 MiB → 20 calls.
    for (let i = 0; i < 320; i++) hint.add(64 * 1024);
    expect(calls).toBe(20);
    hint.add(1024 * 1024 - 1);
    expect(calls).toBe(20); // one byte short of the next MiB
    hint.add(1);
    expect(calls).toBe(21);
  });

  it('defaults to one call per 8 MiB', () => {
    expect(GC_HINT_BYTES).toBe(8 * 1024 * 1024);
    let calls = 0;
    const hint = new GcHint(undefined, () => calls++);
    for (let i = 0; i < 3 * 128; i++) hint.add(64 * 1024); // 24 MiB
    expect(calls).toBe(3);
  });

  it('rejects a non-positive interval', () => {
    expect(() => new GcHint(0, () => undefined)).toThrow(RangeError);
  });

  it("gets V8's young-generation GC without putting gc on the program's global", () => {
    const gc = youngGenerationGc();
    expect(typeof gc).toBe('function');
    expect(() => gc?.()).not.toThrow();
    expect(youngGenerationGc()).toBe(gc); // looked up once
    expect((globalThis as { gc?: unknown }).gc).toBeUndefined();
  });
});

describe('the gzip inflation loops hint once per 8 MiB inflated', () => {
  const T0 = Date.UTC(2026, 10, 20, 0, 0, 0);
  let dir: string;
  let file: string;
  let inflatedBytes: number;
  const lines = 20_000;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tw-gchint-'));
    file = join(dir, 'audit.log.gz');
    const pad = 'x'.repeat(700); // ~1 KiB lines: 20,000 of them inflate to ~20 MiB (two full 8 MiB intervals)
    const text = Array.from({ length: lines }, (_, i) => {
      const kind = i % 1000 === 999 ? 'stale' : 'plain';
      return auditEvent({ auditID: `a-${i}`, time: T0 + i * 40, kind, userAgent: `bench/${pad}` });
    }).join('\n') + '\n';
    inflatedBytes = Buffer.byteLength(text);
    await writeFile(file, gzipSync(text));
  });
  afterAll(async () => {
    setDefaultGcCollector(undefined);
    await rm(dir, { recursive: true, force: true });
  });
  const counting = (): { calls: () => number } => {
    let n = 0;
    setDefaultGcCollector(() => n++);
    return { calls: () => n };
  };
  const expected = (): number => Math.floor(inflatedBytes / GC_HINT_BYTES);

  it('the serial reader', { timeout: 120_000 }, async () => {
    expect(expected()).toBeGreaterThanOrEqual(2);
    const c = counting();
    const stats = createReadStats();
    let uses = 0;
    for await (const _ of readTokenUses([file], stats, {})) uses++;
    setDefaultGcCollector(undefined);
    expect(stats.lines).toBe(lines);
    expect(uses).toBe(lines / 1000); // every 1000th line is a stale-token use
    expect(c.calls()).toBe(expected());
  });

  it("the worker's gzip fast path", { timeout: 120_000 }, async () => {
    const c = counting();
    const replies: WorkerReply[] = [];
    await runTask({ kind: 'gzip', id: 0, file, maxLineBytes: DEFAULT_MAX_LINE_BYTES }, (r) => replies.push(r));
    setDefaultGcCollector(undefined);
    const done = replies.find((r) => r.type === 'done');
    expect(done?.type === 'done' ? done.uses.length : -1).toBe(lines / 1000);
    expect(c.calls()).toBe(expected());
  });

  it('the tail read of the default reference time', { timeout: 120_000 }, async () => {
    const c = counting();
    const latest = await latestEventTimeOfFile(file);
    setDefaultGcCollector(undefined);
    expect(latest).toBe(T0 + (lines - 1) * 40);
    expect(c.calls()).toBe(expected());
  });
});
