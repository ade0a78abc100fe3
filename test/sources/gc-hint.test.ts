import { describe, expect, it } from 'vitest';
import { GC_HINT_BYTES, GcHint, youngGenerationGc } from '../../src/sources/gc-hint.js';

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
