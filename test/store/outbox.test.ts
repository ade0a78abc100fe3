/**
 * The notification queue's rows (src/store/outbox.ts) on a real SQLite file: coalescing on enqueue, order, the
 * version check on completion, rescheduling, the queue's stats, and rows that outlive the process (a restart).
 */
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openSqliteExecutor } from '../../src/store/sqlite.js';
import { OutboxRepository, type OutboxItem } from '../../src/store/outbox.js';
import { tempDir } from './helpers.js';

const T = Date.UTC(2026, 11, 1, 12, 0, 0);
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

function item(over: Partial<OutboxItem> & { key: string }): OutboxItem {
  return { kind: 'alert', cluster: 'prod', channel: 'C1', call: 'post', urgency: T, enqueuedAt: T, notBefore: 0, attempts: 0, version: 0, payload: {}, ...over };
}

async function open(path: string): Promise<OutboxRepository> {
  const sql = openSqliteExecutor(path);
  closers.push(() => sql.close());
  return new OutboxRepository(sql);
}

describe('OutboxRepository', () => {
  it('merges a later item of a pending key into it, lists most urgent first, and completes only the version it sent', async () => {
    const q = await open(join(tempDir(), 'tw.db'));
    await q.enqueue([item({ key: 'alert:b', urgency: T + 2 }), item({ key: 'alert:a', urgency: T + 1, payload: { reopened: [{ findingId: 'f1', late: false, resolvedAt: null }] } })]);
    await q.enqueue([item({ key: 'alert:a', call: 'edit', urgency: T + 3, enqueuedAt: T + 60_000, payload: { reopened: [{ findingId: 'f2', late: true, resolvedAt: T - 1 }] } })]);
    const items = await q.list();
    expect(items.map((i) => [i.key, i.version, i.call])).toEqual([
      ['alert:b', 0, 'post'],
      ['alert:a', 1, 'edit'],
    ]);
    expect(items[1]).toMatchObject({ enqueuedAt: T, urgency: T + 3 });
    expect(items[1]!.payload.reopened?.map((r) => r.findingId)).toEqual(['f1', 'f2']);
    expect(await q.stats()).toEqual({ depth: 2, oldestEnqueuedAt: T });
    // Sent version 0 of a, but a poll merged into it meanwhile: it stays.
    expect(await q.complete('alert:a', 0)).toBe(false);
    expect(await q.complete('alert:a', 1)).toBe(true);
    await q.reschedule('alert:b', T + 5_000, 1);
    expect(await q.get('alert:b')).toMatchObject({ notBefore: T + 5_000, attempts: 1 });
    await q.update('alert:b', { call: 'edit', payload: { digest: { createdAt: T, lines: [], shownPosted: 0 } }, notBefore: T + 6_000 });
    expect(await q.get('alert:b')).toMatchObject({ call: 'edit', notBefore: T + 6_000, payload: { digest: { createdAt: T, lines: [], shownPosted: 0 } } });
    await q.remove('alert:b');
    expect(await q.stats()).toEqual({ depth: 0, oldestEnqueuedAt: null });
  });

  it('keeps pending items across a restart (close, open again)', async () => {
    const path = join(tempDir(), 'tw.db');
    const q = await open(path);
    await q.enqueue([item({ key: 'alert:x', urgency: -5 }), item({ key: 'alert:y' })]);
    await closers.shift()!();
    const again = await open(path);
    expect((await again.list()).map((i) => [i.key, i.urgency])).toEqual([
      ['alert:x', -5],
      ['alert:y', T],
    ]);
  });
});
