/**
 * Poll runs at fleet scale (src/store/polls.ts; docs/performance.md "Poll runs at fleet scale"): every statement the
 * poll-run repository runs against `poll_runs` finds its rows through an index, so its cost follows the rows it
 * needs, not the runs kept (2 million at 1,000 clusters polled every 5 minutes for 7 days). Each statement the
 * repository sends to SQLite is recorded and explained (`EXPLAIN QUERY PLAN`) on the migrated schema: no step may
 * scan `poll_runs` (or one of its aliases) whole. The timings themselves are `npx tsx bench/poll-runs.ts`'s.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/db.js';
import { PollRepository } from '../../src/store/polls.js';
import type { SqlExecutor } from '../../src/store/sql.js';
import { openSqliteExecutor, type SqliteExecutor } from '../../src/store/sqlite.js';
import { MIN, T0 } from './helpers.js';

let dir: string;
let file: string;
let executor: SqliteExecutor;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tw-poll-runs-plans-'));
  file = join(dir, 'store.db');
  await (await openStore(file)).close(); // migrated to the current schema
  executor = openSqliteExecutor(file);
  await executor.ready();
});
afterAll(async () => {
  await executor.close();
  rmSync(dir, { recursive: true, force: true });
});

/** An executor that records every statement it passes on to `inner`. */
function recording(inner: SqlExecutor, seen: string[]): SqlExecutor {
  return new Proxy(inner, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (typeof args[0] === 'string') seen.push(args[0]);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

/** The steps of a statement's query plan that read a table or index whole (`SCAN x`), except the CTE's own rows. */
function fullScans(db: Database.Database, sql: string): string[] {
  const params = Array.from({ length: (sql.match(/\?/g) ?? []).length }, () => 1);
  const plan = db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as Array<{ detail: string }>;
  return plan.map((r) => r.detail).filter((d) => d.startsWith('SCAN ') && !/^SCAN (clusters|c|CONSTANT ROW)$/.test(d));
}

describe('poll runs at fleet scale (SQLite)', () => {
  it('no statement of a poll, its prune, coverage or the last-run reads scans poll_runs whole', async () => {
    const seen: string[] = [];
    const polls = new PollRepository(recording(executor, seen));
    for (let i = 0; i < 3; i++) {
      for (const cluster of ['prod', 'staging']) {
        const id = await polls.startRun(cluster, 's', T0 + i * MIN, T0 + i * MIN);
        await polls.finishRun(id, { endedAt: T0 + i * MIN + 500, events: 1, tokenUses: 0 });
      }
    }
    await polls.coverage('prod', T0);
    await polls.pruneRuns(T0 + MIN);
    await polls.lastRuns('prod');
    await polls.lastRuns();
    await polls.ticks('prod', T0);
    expect((await polls.lastRuns()).map((r) => [r.cluster, r.startedAt])).toEqual([
      ['prod', T0 + 2 * MIN],
      ['staging', T0 + 2 * MIN],
    ]);

    const statements = [...new Set(seen)].filter((s) => /\bpoll_runs\b/.test(s));
    expect(statements.length).toBeGreaterThanOrEqual(7);
    const db = new Database(file, { readonly: true });
    try {
      for (const sql of statements) expect(fullScans(db, sql), sql).toEqual([]);
    } finally {
      db.close();
    }
  });
});
