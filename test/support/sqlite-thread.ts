/**
 * A vitest setup file (every test file's; `vitest.config.ts`): keeps one SQLite store open in each test worker, so the
 * product's SQLite worker thread (src/store/sqlite.ts `SqliteThread`: one per process, started by the first open,
 * ended by the last close) stays up across the tests and files a worker runs, as it does in a `serve` process, which
 * keeps its store open for its life. Without it, every test that opens and closes a store starts a thread that, from
 * the TypeScript sources, registers tsx and loads the worker's modules again: 0.144 s of CPU per open and close, against
 * 0.012 s with the thread up (ten of each in one vitest file on the 2-core VM, Node 24.22.3, 2026-12-06).
 *
 * A test that stops the thread (test/store/sqlite-worker.test.ts) ends the kept store with it; the next file's setup
 * finds it unusable and opens another. The store is a file of its own in a temporary folder, which no test reads.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../../src/store/db.js';
import type { Store } from '../../src/store/types.js';

const KEPT = Symbol.for('tokenwatch.test.keptSqliteStore');
const holder = globalThis as { [KEPT]?: Store };

/** Whether the kept store still answers (its thread may have been stopped by a test). */
async function answers(store: Store): Promise<boolean> {
  try {
    await store.polls.getCursor('kept-store');
    return true;
  } catch {
    return false;
  }
}

const kept = holder[KEPT];
if (kept === undefined || !(await answers(kept))) holder[KEPT] = await openStore(join(mkdtempSync(join(tmpdir(), 'tw-kept-store-')), 'kept.db'));
