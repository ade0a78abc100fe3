/** `KeyedLock` (one chain per key) and `backoffDelay` (base · 2^retry, capped): the shared helpers of core/. */
import { describe, expect, it } from 'vitest';
import { backoffDelay } from '../../src/core/backoff.js';
import { KeyedLock } from '../../src/core/keyed-lock.js';

/** A promise and the function that settles it, so a test decides when a task ends. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => {
    open = r;
  });
  return { promise, open };
}

describe('KeyedLock', () => {
  it('runs tasks of one key one after another, in call order, and tasks of other keys meanwhile', async () => {
    const lock = new KeyedLock();
    const log: string[] = [];
    const first = gate();
    const a1 = lock.run('a', async () => {
      log.push('a1 start');
      await first.promise;
      log.push('a1 end');
    });
    const a2 = lock.run('a', async () => {
      log.push('a2');
    });
    await lock.run('b', async () => {
      log.push('b');
    });
    expect(log).toEqual(['a1 start', 'b']);
    first.open();
    await Promise.all([a1, a2]);
    expect(log).toEqual(['a1 start', 'b', 'a1 end', 'a2']);
  });

  it('a failed task rejects its own caller only; the next task of the key still runs', async () => {
    const lock = new KeyedLock();
    const failed = lock.run('k', async () => {
      throw new Error('boom');
    });
    const next = lock.run('k', async () => 42);
    await expect(failed).rejects.toThrow('boom');
    await expect(next).resolves.toBe(42);
  });
});

describe('KeyedLock.runLatest', () => {
  it('requests made while one runs become one more run, which starts after it; other keys are not held up', async () => {
    const lock = new KeyedLock();
    const log: string[] = [];
    const first = gate();
    let runs = 0;
    const edit = () =>
      lock.runLatest('m', async () => {
        const n = ++runs;
        log.push(`start ${n}`);
        if (n === 1) await first.promise;
        log.push(`end ${n}`);
      });
    const running = edit();
    await new Promise((r) => setImmediate(r)); // the first run has started
    expect(log).toEqual(['start 1']);
    const burst = Array.from({ length: 5 }, edit);
    await lock.runLatest('other', async () => {
      log.push('other');
    });
    first.open();
    await Promise.all([running, ...burst]);
    expect(log).toEqual(['start 1', 'other', 'end 1', 'start 2', 'end 2']);
    // Once nothing waits, the next request runs again.
    await edit();
    expect(runs).toBe(3);
  });
});

describe('backoffDelay', () => {
  it('doubles from the base per retry and stops at the cap', () => {
    expect([0, 1, 2, 3].map((r) => backoffDelay(1000, r))).toEqual([1000, 2000, 4000, 8000]);
    expect(backoffDelay(1000, 10, 300_000)).toBe(300_000);
    expect(backoffDelay(500, -1)).toBe(500);
  });
});
