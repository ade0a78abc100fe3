/**
 * Ticks whose poll failed while the store was unavailable (src/runtime/unrecorded-ticks.ts): kept while the store is
 * down, written as missed (`store-unavailable`) once it answers, except ticks a replica accounted for meanwhile.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observability/logger.js';
import { UnrecordedTicks } from '../../src/runtime/unrecorded-ticks.js';
import { openStore, type Store, type StorePart } from '../../src/store/index.js';

const T0 = Date.parse('2026-11-20T12:00:00Z');
const silent = createLogger({ level: 'silent' });
const stores: Store[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

/** A store whose tick methods fail with a connection error while `down.value` is true. */
function flaky(store: Store, down: { value: boolean }): StorePart<{ polls: 'ticks' | 'recordMissed' }> {
  const fail = () => Promise.reject(Object.assign(new Error('PostgreSQL store: connect ECONNREFUSED 127.0.0.1:5432'), { name: 'PostgresStoreError' }));
  return {
    polls: {
      ticks: (c, s) => (down.value ? fail() : store.polls.ticks(c, s)),
      recordMissed: (m) => (down.value ? fail() : store.polls.recordMissed(m)),
    },
  };
}

describe('UnrecordedTicks', () => {
  it('keeps ticks while the store is down and records each as missed once it answers, unless accounted for meanwhile', async () => {
    const store = await openStore(':memory:');
    stores.push(store);
    const down = { value: true };
    const recorded: number[] = [];
    const ticks = new UnrecordedTicks({ store: flaky(store, down), logger: silent, replica: () => 'tw-a-1', clock: () => T0 + 60_000, retryMs: 3_600_000, onRecorded: (_c, t) => recorded.push(t) });
    try {
      for (const t of [T0, T0 + 1000, T0 + 2000, T0 + 3000]) ticks.add('prod', t);
      ticks.add('prod', T0); // once per tick
      expect(ticks.size).toBe(4);
      expect(await ticks.flush()).toBe(0); // still down: nothing written, nothing lost
      expect(ticks.size).toBe(4);
      // Meanwhile, another replica polled one tick and recorded another as missed.
      const run = await store.polls.startRun('prod', 'file:/a', T0 + 1100, T0 + 1000);
      await store.polls.finishRun(run, { endedAt: T0 + 1200, events: 0, tokenUses: 0 });
      await store.polls.recordMissed({ cluster: 'prod', scheduledAt: T0 + 2000, reason: 'unowned', replica: 'tw-b-2', recordedAt: T0 + 2100 });
      down.value = false;
      expect(await ticks.flush()).toBe(2);
      expect(ticks.size).toBe(0);
      expect(recorded).toEqual([T0, T0 + 3000]);
      const seen = await store.polls.ticks('prod', T0);
      expect(seen.polled).toEqual([T0 + 1000]);
      expect(seen.missed).toEqual([
        { scheduledAt: T0, reason: 'store-unavailable' },
        { scheduledAt: T0 + 2000, reason: 'unowned' },
        { scheduledAt: T0 + 3000, reason: 'store-unavailable' },
      ]);
      expect(await ticks.flush()).toBe(0); // nothing left, nothing twice
    } finally {
      ticks.stop();
    }
  });
});
