/**
 * Store reads at fleet scale (src/store/polls.ts; docs/performance.md "Poll runs at fleet scale"): every statement
 * the poll-run repository runs against `poll_runs` and `missed_polls`, the action log's retention prune and a poll's
 * read of its cluster's alert refs finds its rows through an index, so its cost follows the rows it needs, not the
 * rows kept (2 million poll runs at 1,000 clusters polled every 5 minutes for 7 days). Each statement sent to SQLite
 * is recorded and explained (`EXPLAIN QUERY PLAN`) on the migrated schema: no step may scan one of these tables (or
 * an alias of one) whole. The timings themselves are `npm run bench:poll-runs`'s.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/db.js';
import { ActionLogRepository } from '../../src/store/action-log.js';
import { PollRepository } from '../../src/store/polls.js';
import { SlackRefRepository } from '../../src/store/slack-refs.js';
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

/**
 * The steps of a statement's query plan that read a table or index whole (`SCAN x`), except the CTE's own rows and
 * `approvals` (open approvals, a handful, read once by the action log's prune).
 */
function fullScans(db: Database.Database, sql: string): string[] {
  const params = Array.from({ length: (sql.match(/\?/g) ?? []).length }, () => 1);
  const plan = db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as Array<{ detail: string }>;
  return plan.map((r) => r.detail).filter((d) => d.startsWith('SCAN ') && !/^SCAN (clusters|c|CONSTANT ROW|approvals\b.*)$/.test(d));
}

describe('poll runs at fleet scale (SQLite)', () => {
  it('no statement of a poll, its prunes, coverage or the last-run reads scans poll_runs, missed_polls, action_log or alert_refs whole', async () => {
    const seen: string[] = [];
    const polls = new PollRepository(recording(executor, seen));
    const actions = new ActionLogRepository(recording(executor, seen));
    const refs = new SlackRefRepository(recording(executor, seen));
    for (let i = 0; i < 3; i++) {
      for (const cluster of ['prod', 'staging']) {
        const id = await polls.startRun(cluster, 's', T0 + i * MIN, T0 + i * MIN);
        await polls.finishRun(id, { endedAt: T0 + i * MIN + 500, events: 1, tokenUses: 0 });
      }
    }
    await polls.coverage('prod', T0);
    await polls.pruneRuns(T0 + MIN);
    await actions.prune(T0);
    await refs.alertRefsOf('prod');
    await polls.lastRuns('prod');
    await polls.lastRuns();
    await polls.ticks('prod', T0);
    expect((await polls.lastRuns()).map((r) => [r.cluster, r.startedAt])).toEqual([
      ['prod', T0 + 2 * MIN],
      ['staging', T0 + 2 * MIN],
    ]);

    const statements = [...new Set(seen)].filter((s) => /\b(poll_runs|missed_polls|action_log|alert_refs)\b/.test(s));
    expect(statements.length).toBeGreaterThanOrEqual(10);
    const db = new Database(file, { readonly: true });
    try {
      for (const sql of statements) expect(fullScans(db, sql), sql).toEqual([]);
    } finally {
      db.close();
    }
  });
});
