/**
 * The SQLite store's worker thread (src/store/sqlite.ts, sqlite-worker.ts): statements run off the event loop, a
 * stopped thread fails every pending and later call (and `/readyz`) instead of hanging, the worker entry is found
 * from the sources and beside a bundle's chunks; and `runMany` on both backends.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Worker } from 'node:worker_threads';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { readinessOf } from '../../src/runtime/health-server.js';
import { openStore } from '../../src/store/db.js';
import { StoreError } from '../../src/store/errors.js';
import { openSqliteExecutor, sqliteWorkerEntry } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/types.js';
import { isStoreUnavailable } from '../../src/store/unavailable.js';
import { storeBackends } from './backends.js';
import { finding, T0, tempDir } from './helpers.js';

/** A statement that keeps SQLite busy for a while (counts to 3 million in a recursive CTE). */
const HEAVY = 'WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 3000000) SELECT count(*) AS n FROM c';

/** The worker thread behind a SQLite store (internal: to stop it as a crash would). */
function workerOf(store: Store): Worker {
  return (store.sql as unknown as { link: { thread: { worker: Worker } } }).link.thread.worker;
}

describe('SQLite worker thread', () => {
  const opened: Store[] = [];
  afterEach(async () => {
    for (const s of opened.splice(0)) await s.close();
  });
  const open = async (path: string): Promise<Store> => {
    const s = await openStore(path);
    opened.push(s);
    return s;
  };

  it('runs statements off the event loop: a timer callback runs while a long statement is under way', async () => {
    const store = await open(join(tempDir(), 'loop.db'));
    let ranDuring = false;
    let done = false;
    const query = store.sql.get<{ n: number }>(HEAVY).then((row) => {
      done = true;
      return row;
    });
    // On the event loop's thread the statement would run before any macrotask; here the loop turns meanwhile.
    await new Promise<void>((resolve) => setImmediate(() => {
      ranDuring = !done;
      resolve();
    }));
    expect(await query).toEqual({ n: 3_000_000 });
    expect(ranDuring).toBe(true);
  });

  it('a statement outside a transaction waits for another connection’s write lock without holding up that connection', async () => {
    const path = join(tempDir(), 'busy.db');
    const [a, b] = [await open(path), await open(path)];
    let inside!: () => void;
    const entered = new Promise<void>((r) => (inside = r));
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const tx = a.transaction(async (t) => {
      await t.polls.setCursor('a', '1');
      inside();
      await held;
      // Posted after b's write below, which finds the lock taken: it must not wait for that write.
      await t.polls.setCursor('a', '2');
    });
    await entered;
    const write = b.polls.setCursor('b', '1');
    release();
    await tx;
    await write;
    expect([await b.polls.getCursor('a'), await a.polls.getCursor('b')]).toEqual(['2', '1']);
  });

  it('a stopped thread fails the pending statement and every later call with a StoreError that says unavailable; /readyz says store-unavailable', async () => {
    const path = join(tempDir(), 'crash.db');
    const store = await openStore(path);
    await store.polls.setCursor('src', 'c1');
    const pending = store.sql.get(HEAVY);
    await workerOf(store).terminate();
    const err = await pending.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect((err as Error).message).toMatch(/^SQLite store: its worker thread stopped \(exit code \d+\); restart tokenwatch$/);
    expect(isStoreUnavailable(err)).toBe(true);
    await expect(store.polls.getCursor('src')).rejects.toThrow(/its worker thread stopped/);
    await expect(store.transaction(async (tx) => tx.polls.setCursor('src', 'c2'))).rejects.toThrow(/its worker thread stopped/);
    expect(store.sql.failure?.()).toBe(err);
    expect(readinessOf({ phase: 'ready', clusters: new Map(), integrations: { states: () => ({}), running: () => [] } as never, now: T0, storeFailure: store.sql.failure?.() }).status).toBe(
      'store-unavailable',
    );
    expect(readinessOf({ phase: 'ready', clusters: new Map(), integrations: { states: () => ({}), running: () => [] } as never, now: T0 }).status).toBe('ready');
    await store.close();
    // A new open starts a new thread; what was committed is there.
    const again = await open(path);
    expect(await again.polls.getCursor('src')).toBe('c1');
    expect(again.sql.failure?.()).toBeUndefined();
  });

  it('keeps committed data through close (checkpoint) and names the file and statement in a statement error, never the data', async () => {
    const path = join(tempDir(), 'err.db');
    const store = await open(path);
    const err = await store.sql.run('INSERT INTO cursors (source_id, cursor) VALUES (?, ?)', ['secret-source', null]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect((err as Error).message).toBe(`SQLite store ${path}: INSERT INTO cursors: NOT NULL constraint failed: cursors.cursor (SQLITE_CONSTRAINT_NOTNULL)`);
    expect((err as Error).message).not.toContain('secret-source');
  });

  it('an executor whose open fails rejects ready() and every statement with the open error', async () => {
    const dir = tempDir();
    const x = openSqliteExecutor(dir);
    const expected = `cannot open store ${dir}: it is a directory; point store.path at the database file inside it (e.g. ${join(dir, 'tokenwatch.db')})`;
    await expect(x.ready()).rejects.toThrow(expected);
    await expect(x.get('SELECT 1')).rejects.toThrow(expected);
    await x.close();
  });

  it('finds the worker entry beside the module: tsx bootstrap for the sources, sqlite-worker.js / .mjs in a bundle, else says what is missing', () => {
    expect(sqliteWorkerEntry('file:///repo/src/store/sqlite.ts').href).toBe('file:///repo/src/store/sqlite-worker-tsx.mjs');
    const dist = join(tempDir(), 'dist', 'cli');
    mkdirSync(dist, { recursive: true });
    const chunk = pathToFileURL(join(dist, 'chunk-ABCD.js')).href;
    expect(() => sqliteWorkerEntry(chunk)).toThrow(
      new StoreError(
        `cannot start the SQLite store's worker thread: no sqlite-worker.js or sqlite-worker.mjs beside ${join(dist, 'chunk-ABCD.js')}; ` +
          'a bundle of tokenwatch must build src/store/sqlite-worker.ts as an entry point of its own (scripts/build.mjs)',
      ),
    );
    writeFileSync(join(dist, 'sqlite-worker.mjs'), '');
    expect(sqliteWorkerEntry(chunk).href).toBe(pathToFileURL(join(dist, 'sqlite-worker.mjs')).href);
    writeFileSync(join(dist, 'sqlite-worker.js'), '');
    expect(sqliteWorkerEntry(chunk).href).toBe(pathToFileURL(join(dist, 'sqlite-worker.js')).href);
  });
});

describe.each(storeBackends())('runMany (%s)', (_name, backend) => {
  afterEach(backend.cleanup);
  afterAll(backend.dispose);

  // Values that quoting must keep apart from the statement: quotes, backslashes, placeholders, dollar quotes.
  const awkward = ["it's", 'back\\slash', 'what?', '$1 and $$x$$', "E'\\x'", '', 'üñí ✓'];

  it('runs one statement per row in order and gives each row’s changes', async () => {
    const store = await backend.open();
    await store.polls.setCursor('k1', 'old');
    const rows = awkward.map((v, i) => [`k${i}`, v]);
    const changes = await store.transaction(async (tx) =>
      tx.sql.runMany('INSERT INTO cursors (source_id, cursor) VALUES (?, ?) ON CONFLICT (source_id) DO NOTHING', rows),
    );
    expect(changes).toEqual(awkward.map((_, i) => (i === 1 ? 0 : 1)));
    const stored = await store.sql.all<{ source_id: string; cursor: string }>('SELECT source_id, cursor FROM cursors ORDER BY source_id');
    expect(stored.map((r) => [r.source_id, r.cursor])).toEqual(rows.map(([k, v]) => [k, k === 'k1' ? 'old' : v]).sort((a, b) => (a[0]! < b[0]! ? -1 : 1)));
    // Numbers and later rows that see earlier ones (one statement after the other).
    const seen = await store.sql.runMany('INSERT INTO seen (cluster, audit_id, seen_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING', [
      ['prod', 'a', T0],
      ['prod', 'a', T0 + 1],
      ['prod', 'b', T0 + 2],
    ]);
    expect(seen).toEqual([1, 0, 1]);
    expect(await store.sql.all('SELECT audit_id, seen_at FROM seen ORDER BY audit_id')).toEqual([
      { audit_id: 'a', seen_at: T0 },
      { audit_id: 'b', seen_at: T0 + 2 },
    ]);
    expect(await store.sql.runMany('DELETE FROM seen WHERE audit_id = ?', [['a'], ['zzz'], ['b']])).toEqual([1, 0, 1]);
    expect(await store.sql.runMany('DELETE FROM seen WHERE audit_id = ?', [])).toEqual([]);
  });

  it('more rows than one batch of PostgreSQL text (500), all counted', async () => {
    const store = await backend.open();
    const ids = Array.from({ length: 1234 }, (_, i) => `id-${i}`);
    const insert = 'INSERT INTO seen (cluster, audit_id, seen_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING';
    expect(await store.sql.runMany(insert, ids.slice(0, 600).map((id) => ['prod', id, T0]))).toEqual(Array(600).fill(1));
    expect(await store.sql.runMany(insert, ids.map((id) => ['prod', id, T0]))).toEqual([...Array(600).fill(0), ...Array(634).fill(1)]);
    expect(await store.polls.countSeen('prod')).toBe(1234);
  });

  it('saves more findings than one read names (512), an id given twice inserted once and then updated', async () => {
    const store = await backend.open();
    const many = Array.from({ length: 600 }, (_, i) => finding({ id: `f-${i}`, serviceAccount: `sa-${i}` }));
    expect((await store.findings.save('prod', many, T0)).filter((c) => c.isNew)).toHaveLength(600);
    const changes = await store.findings.save('prod', [...many, finding({ id: 'f-new' }), finding({ id: 'f-new', severity: 'critical' })], T0 + 1);
    expect(changes.filter((c) => c.isNew).map((c) => c.id)).toEqual(['f-new']);
    expect(changes.at(-1)).toMatchObject({ id: 'f-new', isNew: false, severity: 'critical', previousSeverity: 'warning' });
    expect((await store.findings.get('f-new'))?.severity).toBe('critical');
    expect(await store.findings.list('prod')).toHaveLength(601);
  });

  it('outside a transaction: all rows or none', async () => {
    const store = await backend.open();
    await expect(
      store.sql.runMany('INSERT INTO cursors (source_id, cursor) VALUES (?, ?)', [
        ['a', '1'],
        ['b', null],
      ]),
    ).rejects.toThrow(StoreError);
    expect(await store.sql.all('SELECT source_id FROM cursors')).toEqual([]);
  });
});
