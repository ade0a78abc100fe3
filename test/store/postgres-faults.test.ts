/**
 * The PostgreSQL executor under connection faults (src/store/postgres.ts "Connection faults", "Timeouts"), on the
 * run's real server: a backend terminated while a statement or a transaction runs on a checked-out connection fails
 * that work with a PostgresStoreError instead of an unhandled 'error' event (which would end the process), and the
 * next statement is served; a connection that a loopback TCP proxy black-holes is dropped after the client-side query
 * timeout, and the next statement (on a new connection) is served.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { openPostgres, PostgresStoreError, type PostgresExecutor } from '../../src/store/postgres.js';
import type { StoreError } from '../../src/store/errors.js';
import { createTestDatabase, postgresServer, superuserClient, type TestDatabase } from '../support/postgres.js';

const pgServer = postgresServer();
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
});

async function database(): Promise<TestDatabase> {
  const db = await createTestDatabase();
  cleanups.push(() => db.drop());
  return db;
}

function open(opts: Parameters<typeof openPostgres>[0]): { sql: PostgresExecutor; errors: StoreError[] } {
  const errors: StoreError[] = [];
  const sql = openPostgres({ ...opts, onIdleError: (e) => errors.push(e) });
  cleanups.push(() => sql.close());
  return { sql, errors };
}

/** Terminates every backend of `db` running `pg_sleep` once one is seen (waits for it). */
async function terminateSleepers(db: string): Promise<number> {
  const admin = await superuserClient();
  try {
    for (;;) {
      const r = await admin.query("SELECT pg_terminate_backend(pid) AS t FROM pg_stat_activity WHERE datname = $1 AND query LIKE '%pg_sleep%' AND pid <> pg_backend_pid()", [db]);
      if (r.rowCount! > 0) return r.rowCount!;
      await new Promise((res) => setTimeout(res, 20));
    }
  } finally {
    await admin.end();
  }
}

/** A loopback TCP proxy to the server; `blackHole()` stops forwarding on the connections open now (new ones pass). */
async function proxy(host: string, port: number): Promise<{ port: number; blackHole: () => void; close: () => void }> {
  const live: Array<{ hole: boolean }> = [];
  const sockets: Socket[] = [];
  const server: Server = createServer((down) => {
    const state = { hole: false };
    live.push(state);
    const up = connect(port, host);
    sockets.push(down, up);
    down.on('data', (d) => state.hole || up.write(d));
    up.on('data', (d) => state.hole || down.write(d));
    down.on('error', () => up.destroy());
    up.on('error', () => down.destroy());
    down.on('close', () => up.destroy());
    up.on('close', () => down.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address() as { port: number };
  return {
    port: addr.port,
    blackHole: () => {
      for (const s of live) s.hole = true;
    },
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

describe.skipIf(!pgServer.available)('PostgreSQL executor under connection faults', () => {
  it('a backend terminated during a statement and during a transaction fails that work, not the process; the next statement is served', { timeout: 60_000 }, async () => {
    const db = await database();
    const { sql, errors } = open({ ...db.options, poolSize: 2 });
    await sql.run('CREATE TABLE t (n INTEGER)');
    // A pooled statement.
    const running = sql.get('SELECT pg_sleep(30) AS s').then(() => undefined, (e: unknown) => e);
    expect(await terminateSleepers(db.name)).toBe(1);
    expect(await running).toBeInstanceOf(PostgresStoreError);
    // A transaction on a checked-out client: rolled back, nothing of it kept.
    const tx = sql.transaction(async (t) => {
      await t.run('INSERT INTO t (n) VALUES (1)');
      await t.get('SELECT pg_sleep(30) AS s');
    }).then(() => undefined, (e: unknown) => e);
    expect(await terminateSleepers(db.name)).toBe(1);
    expect(await tx).toBeInstanceOf(PostgresStoreError);
    expect(await sql.get('SELECT count(*) AS n FROM t')).toEqual({ n: 0 });
    await sql.run('INSERT INTO t (n) VALUES (2)');
    expect(await sql.all('SELECT n FROM t')).toEqual([{ n: 2 }]);
    // The connection errors were reported, never thrown as events: this test would have ended the worker.
    for (const e of errors) expect(e).toBeInstanceOf(PostgresStoreError);
  });

  it('a black-holed connection is dropped after the client-side query timeout, and the next statement is served', { timeout: 60_000 }, async () => {
    const db = await database();
    const p = await proxy(db.options.host, db.options.port ?? 5432);
    cleanups.push(() => p.close());
    const { sql } = open({ ...db.options, port: p.port, poolSize: 1, statementTimeoutMs: 60_000, queryTimeoutMs: 1_000 });
    expect(await sql.get('SELECT 1 AS one')).toEqual({ one: 1 });
    p.blackHole();
    const err = await sql.get('SELECT 2 AS two').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(PostgresStoreError);
    expect((err as Error).message).toMatch(/timeout/i);
    // The pool's only connection was dropped: the next statement opens a new one through the proxy and is served.
    expect(await sql.get('SELECT 3 AS three')).toEqual({ three: 3 });
  });
});
