/**
 * The SQLite worker thread: owns the better-sqlite3 connections of the process's SQLite stores
 * (`sqlite-connection.ts`; one per executor, normally one in all) and runs the requests that the executors on the
 * event loop's thread (`sqlite.ts`) post to it (messages: `sqlite-protocol.ts`). Because better-sqlite3 is
 * synchronous, everything SQLite does — statements, `PRAGMA quick_check` and migrations at open, and above all the
 * fsync of every commit (`synchronous = FULL`) — blocks this thread, not the one that serves Slack and the health
 * endpoints (docs/design/architecture.md "Store").
 *
 * Order: each connection's requests run one at a time in the order they were posted; a request that arrives while
 * its connection is idle starts at once, so of several connections the one that asks first goes first (as on one
 * thread: `BEGIN IMMEDIATE` in arrival order). A request that finds the write lock held by another connection
 * (SQLITE_BUSY: a `begin`, or a statement outside a transaction) is retried without blocking the thread, so the other
 * connections' requests — the lock holder's commit among them — run meanwhile.
 *
 * Started by `new Worker(...)` with {@link SqliteWorkerData} as `workerData`: from `dist/cli/sqlite-worker.js` (an
 * entry point of scripts/build.mjs; the tests' bundles build it the same way) or, from the TypeScript sources, through
 * `sqlite-worker-tsx.mjs`. It does nothing in any other thread.
 *
 * Replies: the value, or the error — the open's StoreError, or for a statement a `SqliteStoreError` naming the file
 * and the statement's first words. An uncaught failure ends the thread, which the executors report as a
 * `SqliteWorkerStoppedError` on every pending and later call.
 */
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { StoreError } from './errors.js';
import { openConnection, type SqliteConnection } from './sqlite-connection.js';
import { SQLITE_WORKER_FLAG, type SqliteReply, type SqliteRequest, type SqliteWorkerData, statementError, toWire } from './sqlite-protocol.js';

/** One connection and its requests not yet run. */
interface Slot {
  conn?: SqliteConnection;
  path: string;
  queue: SqliteRequest[];
  busy: boolean;
}

/** Runs one request on its connection; the reply's value. @throws the open's or the statement's StoreError */
async function handle(slot: Slot, req: SqliteRequest): Promise<Extract<SqliteReply, { ok: true }>['value']> {
  if (req.op === 'open') {
    slot.conn = openConnection(req);
    return slot.conn.schemaVersion;
  }
  const conn = slot.conn;
  if (conn === undefined) throw new StoreError(`store ${slot.path} is not open`);
  switch (req.op) {
    case 'all':
      return conn.whenFree(() => conn.all(req.sql, req.params));
    case 'get':
      return conn.whenFree(() => conn.get(req.sql, req.params));
    case 'run':
      return conn.whenFree(() => conn.run(req.sql, req.params));
    case 'runMany':
      // Always inside a transaction (the executor opens one around it), so never retried half-done.
      return conn.runMany(req.sql, req.rows);
    case 'begin':
      await conn.begin();
      return undefined;
    case 'commit':
      conn.commit();
      return undefined;
    case 'rollback':
      conn.rollback();
      return undefined;
    case 'close':
      conn.close();
      return undefined;
  }
}

/** The statement a request runs, for its error message. */
function statementOf(req: SqliteRequest): string {
  if ('sql' in req) return req.sql;
  return { open: 'open', begin: 'BEGIN IMMEDIATE', commit: 'COMMIT', rollback: 'ROLLBACK', close: 'PRAGMA wal_checkpoint(PASSIVE)' }[req.op];
}

function serve(): void {
  const port = parentPort!;
  const slots = new Map<number, Slot>();
  /** Runs a connection's queued requests one after the other; the first synchronously, when it was idle. */
  const drain = async (id: number, slot: Slot): Promise<void> => {
    slot.busy = true;
    for (let req = slot.queue.shift(); req !== undefined; req = slot.queue.shift()) {
      let reply: SqliteReply;
      try {
        reply = { id: req.id, ok: true, value: await handle(slot, req) };
      } catch (err) {
        reply = { id: req.id, ok: false, error: toWire(req.op === 'open' ? err : statementError(err, slot.path, statementOf(req))) };
      }
      if (req.op === 'close' || (req.op === 'open' && !reply.ok)) slots.delete(id);
      port.postMessage(reply);
    }
    slot.busy = false;
  };
  port.on('message', (req: SqliteRequest) => {
    let slot = slots.get(req.conn);
    if (slot === undefined) {
      slot = { path: req.op === 'open' ? req.path : '(unknown)', queue: [], busy: false };
      slots.set(req.conn, slot);
    }
    slot.queue.push(req);
    if (!slot.busy) void drain(req.conn, slot);
  });
}

if (!isMainThread && (workerData as Partial<SqliteWorkerData> | null)?.[SQLITE_WORKER_FLAG] === true) serve();
