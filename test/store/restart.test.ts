import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/db.js';
import { bundleStore } from './bundle.js';
import { finding, MIN, staleRecord, T0, tempDir } from './helpers.js';

describe('transaction', () => {
  it('rolls back cursor, seen auditIDs and token records together when the function throws', async () => {
    const store = await openStore(join(tempDir(), 'tx.db'));
    await store.polls.setCursor('src', 'c1');
    await expect(
      store.transaction(async (tx) => {
        await tx.polls.markSeen('prod', ['a', 'b'], T0);
        await tx.tokenRecords.upsert([staleRecord()]);
        await tx.polls.setCursor('src', 'c2');
        await tx.findings.save('prod', [finding()], T0);
        throw new Error('poll failed half-way');
      }),
    ).rejects.toThrow('poll failed half-way');
    expect(await store.polls.getCursor('src')).toBe('c1');
    expect(await store.polls.countSeen('prod')).toBe(0);
    expect(await store.tokenRecords.list('prod')).toEqual([]);
    expect(await store.findings.list()).toEqual([]);
    // and commits when it returns
    const fresh = await store.transaction(async (tx) => {
      const ids = await tx.polls.markSeen('prod', ['a', 'b'], T0);
      await tx.polls.setCursor('src', 'c2');
      return ids;
    });
    expect(fresh).toEqual(['a', 'b']);
    expect(await store.polls.getCursor('src')).toBe('c2');
    await store.close();
  });

  it('a failing nested step rolls back only its savepoint when caught', async () => {
    const store = await openStore(':memory:');
    await store.transaction(async (tx) => {
      await tx.polls.setCursor('src', 'outer');
      try {
        await tx.transaction(async (inner) => {
          await inner.polls.markSeen('prod', ['x'], T0);
          throw new Error('inner');
        });
      } catch {
        // ignored: the inner savepoint is rolled back
      }
    });
    expect(await store.polls.getCursor('src')).toBe('outer');
    expect(await store.polls.countSeen('prod')).toBe(0);
    await store.close();
  });

  it('refuses a call on the outer store from inside its own transaction (it would wait for itself)', async () => {
    const store = await openStore(':memory:');
    await expect(store.transaction(async () => await store.polls.setCursor('src', 'x'))).rejects.toThrow(/inside its own open transaction/);
    expect(await store.polls.getCursor('src')).toBeUndefined();
    await store.close();
  });
});

describe('restart safety (a process killed mid-poll)', () => {
  let bundle: { url: string; cleanup: () => void };
  beforeAll(async () => {
    bundle = await bundleStore('restart');
  });
  afterAll(() => bundle.cleanup());

  const event = (n: number, pod: string) => ({ auditID: `audit-${n}`, podUid: pod, time: T0 + n * MIN });
  const range = (from: number, to: number, pod = (n: number) => (n % 2 === 0 ? 'pod-a' : 'pod-b')) =>
    Array.from({ length: to - from + 1 }, (_, i) => event(from + i, pod(from + i)));

  function poll(path: string, events: ReturnType<typeof range>, cursor: string, crashAt?: string): { status: number | null; signal: string | null } {
    const job = JSON.stringify({ storeModule: bundle.url, path, events, cursor, crashAt, now: T0 });
    const r = spawnSync(process.execPath, [join(import.meta.dirname, 'poll-child.mjs'), job], { encoding: 'utf8' });
    if (r.stderr) throw new Error(r.stderr);
    return { status: r.status, signal: r.signal };
  }

  async function requestsByPod(path: string): Promise<Record<string, number>> {
    const store = await openStore(path);
    const out = Object.fromEntries((await store.tokenRecords.list('prod')).map((r) => [r.podUid!, r.requests]));
    await store.close();
    return out;
  }

  it('a poll killed at any point inside its transaction keeps nothing; the re-poll counts every event once', async () => {
    const path = join(tempDir(), 'restart.db');
    expect(poll(path, range(1, 5), 'c1')).toEqual({ status: 0, signal: null });
    expect(await requestsByPod(path)).toEqual({ 'pod-a': 2, 'pod-b': 3 });

    // the next poll re-reads 4..5 (overlap window) and finds 6..9; the process is killed inside the transaction
    for (const crashAt of ['after-seen', 'after-records', 'before-commit']) {
      expect(poll(path, range(4, 9), 'c2', crashAt)).toEqual({ status: null, signal: 'SIGKILL' });
      const afterCrash = await openStore(path);
      expect([crashAt, await afterCrash.polls.getCursor('file:/audit-prod.log'), await afterCrash.polls.countSeen('prod')]).toEqual([crashAt, 'c1', 5]);
      await afterCrash.close();
      expect(await requestsByPod(path)).toEqual({ 'pod-a': 2, 'pod-b': 3 });
    }

    // after the restart the poll starts again from c1 minus the overlap; event 10 arrived late (old timestamp)
    expect(poll(path, [...range(3, 9), event(10, 'pod-a')], 'c2')).toEqual({ status: 0, signal: null });
    expect(await requestsByPod(path)).toEqual({ 'pod-a': 5, 'pod-b': 5 });
    // the same window read once more changes nothing
    expect(poll(path, range(1, 10), 'c3')).toEqual({ status: 0, signal: null });
    expect(await requestsByPod(path)).toEqual({ 'pod-a': 5, 'pod-b': 5 });
    const final = await openStore(path);
    expect(await final.polls.getCursor('file:/audit-prod.log')).toBe('c3');
    expect(await final.polls.countSeen('prod')).toBe(10);
    await final.close();
  });
});
