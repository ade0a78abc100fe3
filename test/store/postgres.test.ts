/**
 * The PostgreSQL executor (src/store/postgres.ts) against the run's real server (test/support/postgres-server.ts):
 * placeholders, int8 as numbers, transactions and savepoints, advisory locks, the statement timeout, errors without
 * data, a password re-read for each new connection, and TLS with sslmode verify-full against the test CA.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreError } from '../../src/store/errors.js';
import { numberPlaceholders, openPostgres, type PostgresExecutor, PostgresStoreError, QUERY_CANCELED } from '../../src/store/postgres.js';
import { createTestDatabase, postgresServer, superuserClient, type TestDatabase } from '../support/postgres.js';

describe('numberPlaceholders', () => {
  it('numbers ? in order outside quoted text and comments', () => {
    expect(numberPlaceholders('SELECT ? , ?')).toBe('SELECT $1 , $2');
    expect(numberPlaceholders("SELECT '?', 'it''s ?', ? FROM t WHERE a = ?")).toBe("SELECT '?', 'it''s ?', $1 FROM t WHERE a = $2");
    expect(numberPlaceholders('SELECT "col?" FROM t WHERE x = ? -- why?\n AND y = ?')).toBe('SELECT "col?" FROM t WHERE x = $1 -- why?\n AND y = $2');
    expect(numberPlaceholders('SELECT /* ? */ ? , $$a ? b$$, $q$?$q$, ?')).toBe('SELECT /* ? */ $1 , $$a ? b$$, $q$?$q$, $2');
    expect(numberPlaceholders("SELECT E'\\'?', ?")).toBe("SELECT E'\\'?', $1");
    expect(numberPlaceholders('INSERT INTO t (a) VALUES (?) ON CONFLICT DO NOTHING')).toBe('INSERT INTO t (a) VALUES ($1) ON CONFLICT DO NOTHING');
  });
});

const pgServer = postgresServer();

describe.skipIf(!pgServer.available)('PostgreSQL executor', () => {
  let db: TestDatabase;
  let ex: PostgresExecutor;
  beforeAll(async () => {
    db = await createTestDatabase();
    ex = openPostgres(db.options);
    await ex.run('CREATE TABLE t (id BIGSERIAL PRIMARY KEY, k TEXT UNIQUE, v BIGINT)');
    await ex.run('CREATE TABLE counter (id INTEGER PRIMARY KEY, n BIGINT NOT NULL)');
    await ex.run('INSERT INTO counter (id, n) VALUES (1, 0)');
  });
  afterAll(async () => {
    await ex?.close();
    await db?.drop();
  });

  it('binds ? parameters, leaving a quoted ? alone', async () => {
    const row = await ex.get<{ a: string; b: string; c: number }>("SELECT ?::text AS a, '?' AS b, ?::int AS c", ['x', 7]);
    expect(row).toEqual({ a: 'x', b: '?', c: 7 });
  });

  it('returns BIGINT, count(*) and sum() as numbers', async () => {
    const t = 1_764_633_600_123;
    const res = await ex.run('INSERT INTO t (k, v) VALUES (?, ?), (?, ?)', ['int8-a', t, 'int8-b', 2]);
    expect(res.changes).toBe(2);
    const rows = await ex.all<{ id: number; v: number }>("SELECT id, v FROM t WHERE k LIKE 'int8-%' ORDER BY k");
    expect(rows.map((r) => r.v)).toEqual([t, 2]);
    expect(typeof rows[0]!.id).toBe('number');
    const agg = await ex.get<{ n: number; s: number }>("SELECT count(*) AS n, sum(v) AS s FROM t WHERE k LIKE 'int8-%'");
    expect(agg).toEqual({ n: 2, s: t + 2 });
  });

  it('keeps the type parser to its own pool (pg.types stays as it was)', async () => {
    const pg = (await import('pg')).default;
    const client = await superuserClient(db.name);
    try {
      const { rows } = await client.query('SELECT 5::bigint AS v');
      expect(rows[0].v).toBe('5');
    } finally {
      await client.end();
    }
    expect(pg.types.getTypeParser(20, 'text')('5')).toBe('5');
  });

  it('rolls a transaction back when its function throws, and rethrows', async () => {
    const boom = new Error('boom');
    await expect(
      ex.transaction(async (tx) => {
        await tx.run('INSERT INTO t (k, v) VALUES (?, ?)', ['rolled-back', 1]);
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(await ex.get("SELECT 1 AS one FROM t WHERE k = 'rolled-back'")).toBeUndefined();
  });

  it('commits a transaction and returns its result; a nested one is a savepoint', async () => {
    const result = await ex.transaction(async (tx) => {
      await tx.run('INSERT INTO t (k, v) VALUES (?, ?)', ['outer', 1]);
      await expect(
        tx.transaction(async (inner) => {
          await inner.run('INSERT INTO t (k, v) VALUES (?, ?)', ['inner-undone', 2]);
          throw new Error('inner fails');
        }),
      ).rejects.toThrow('inner fails');
      await tx.transaction(async (inner) => inner.run('INSERT INTO t (k, v) VALUES (?, ?)', ['inner-kept', 3]));
      return 'done';
    });
    expect(result).toBe('done');
    const keys = (await ex.all<{ k: string }>("SELECT k FROM t WHERE k IN ('outer', 'inner-undone', 'inner-kept') ORDER BY k")).map((r) => r.k);
    expect(keys).toEqual(['inner-kept', 'outer']);
  });

  it('refuses a transaction executor used after its end, and lock() outside a transaction', async () => {
    let leaked: Parameters<Parameters<PostgresExecutor['transaction']>[0]>[0] | undefined;
    await ex.transaction(async (tx) => {
      leaked = tx;
    });
    await expect(leaked!.get('SELECT 1')).rejects.toThrow(/transaction that has ended/);
    await expect(ex.lock('k')).rejects.toThrow(/outside a transaction/);
  });

  it('serialises two transactions (two pools, as two replicas) that lock one key', async () => {
    const other = openPostgres(db.options);
    try {
      const events: string[] = [];
      let releaseA!: () => void;
      const aMayEnd = new Promise<void>((r) => {
        releaseA = r;
      });
      let aLocked!: () => void;
      const aHasLock = new Promise<void>((r) => {
        aLocked = r;
      });
      const a = ex.transaction(async (tx) => {
        await tx.lock('approval-target:x');
        aLocked();
        await aMayEnd;
        events.push('a ends');
      });
      await aHasLock;
      const b = other.transaction(async (tx) => {
        await tx.lock('approval-target:x');
        events.push('b has the lock');
      });
      // Wait (on the server's own view, not a clock) until b's backend waits for the advisory lock.
      const admin = await superuserClient(db.name);
      try {
        for (;;) {
          const { rows } = await admin.query("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted");
          if (rows[0].n > 0) break;
          await new Promise((r) => setImmediate(r));
        }
      } finally {
        await admin.end();
      }
      expect(events).toEqual([]);
      releaseA();
      await Promise.all([a, b]);
      expect(events).toEqual(['a ends', 'b has the lock']);
    } finally {
      await other.close();
    }
  });

  it('loses no update of concurrent read-modify-write transactions that lock first', async () => {
    const pools = [ex, openPostgres(db.options), openPostgres(db.options)];
    try {
      const before = (await ex.get<{ n: number }>('SELECT n FROM counter WHERE id = 1'))!.n;
      const rounds = 30;
      await Promise.all(
        Array.from({ length: rounds }, (_, i) =>
          pools[i % pools.length]!.transaction(async (tx) => {
            await tx.lock('counter');
            const { n } = (await tx.get<{ n: number }>('SELECT n FROM counter WHERE id = 1'))!;
            await tx.run('UPDATE counter SET n = ? WHERE id = 1', [n + 1]);
          }),
        ),
      );
      expect((await ex.get<{ n: number }>('SELECT n FROM counter WHERE id = 1'))!.n).toBe(before + rounds);
    } finally {
      await Promise.all(pools.slice(1).map((p) => p.close()));
    }
  });

  it('cancels a statement past statement_timeout with a clear error', async () => {
    const slow = openPostgres({ ...db.options, statementTimeoutMs: 50 });
    try {
      const err = await slow.get('SELECT pg_sleep(60)').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(PostgresStoreError);
      expect((err as PostgresStoreError).sqlState).toBe(QUERY_CANCELED);
      expect((err as Error).message).toMatch(/SELECT pg_sleep\(60\).*statement timeout.*statementTimeout/);
      // The pool stays usable.
      expect(await slow.get('SELECT 1 AS one')).toEqual({ one: 1 });
    } finally {
      await slow.close();
    }
  });

  it('names the backend and statement in errors, never the parameters', async () => {
    await ex.run('INSERT INTO t (k, v) VALUES (?, ?)', ['secret-dup-value', 1]);
    const dup = await ex.run('INSERT INTO t (k, v) VALUES (?, ?)', ['secret-dup-value', 2]).catch((e: unknown) => e);
    expect(dup).toBeInstanceOf(StoreError);
    expect((dup as PostgresStoreError).sqlState).toBe('23505');
    expect((dup as PostgresStoreError).constraint).toBe('t_k_key');
    expect((dup as Error).message).toMatch(/^PostgreSQL store \(postgres@127\.0\.0\.1:\d+\/tw_\w+\) in "INSERT INTO t \(k, v\) VALUES \(\?, \?\)": duplicate key/);
    expect(JSON.stringify(dup) + String((dup as Error).stack) + (dup as Error).message).not.toContain('secret-dup-value');
    const bad = await ex.get('SELECT ?::bigint AS v', ['secret-not-a-number']).catch((e: unknown) => e);
    expect((bad as PostgresStoreError).sqlState).toBe('22P02');
    expect((bad as Error).message).not.toContain('secret-not-a-number');
    expect((bad as Error).message).toContain('data exception');
  });

  it('fails a connection to a closed port with a StoreError naming the server', async () => {
    const nowhere = openPostgres({ ...db.options, port: 1, connectTimeoutMs: 5000 });
    try {
      const err = await nowhere.get('SELECT 1').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(PostgresStoreError);
      expect((err as Error).message).toMatch(/PostgreSQL store \(postgres@127\.0\.0\.1:1\/tw_\w+\).*ECONNREFUSED/);
    } finally {
      await nowhere.close();
    }
  });

  describe('passwords', () => {
    const role = `app_${process.pid}`;
    let dir: string;
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'tw-pgpass-'));
      await ex.run(`CREATE ROLE ${role} LOGIN PASSWORD 'first-secret'`);
    });
    afterAll(async () => {
      rmSync(dir, { recursive: true, force: true });
      await ex.run(`DROP ROLE IF EXISTS ${role}`);
    });

    it('reads the password file for each new connection, so a rotated password is used', async () => {
      const file = join(dir, 'password');
      writeFileSync(file, 'first-secret\n');
      const app = openPostgres({ ...db.options, user: role, passwordFrom: { file }, poolSize: 3 });
      try {
        expect(await app.get('SELECT current_user AS u')).toEqual({ u: role });
        // Rotate: the server first, so a new connection with the old file fails without showing either password.
        await ex.run(`ALTER ROLE ${role} PASSWORD 'second-secret'`);
        await app.transaction(async (tx) => {
          // The pooled connection is now taken by this transaction: the next statement needs a new connection.
          await tx.get('SELECT 1');
          const err = await app.get('SELECT 1').catch((e: unknown) => e);
          expect(err).toBeInstanceOf(PostgresStoreError);
          expect((err as PostgresStoreError).sqlState).toBe('28P01');
          expect((err as Error).message).not.toMatch(/first-secret|second-secret/);
          writeFileSync(file, 'second-secret\n');
          expect(await app.get('SELECT current_user AS u')).toEqual({ u: role });
        });
      } finally {
        await app.close();
      }
    });

    it('reads the password from an environment variable, and says which one is unset', async () => {
      await ex.run(`ALTER ROLE ${role} PASSWORD 'env-secret'`);
      const name = `TW_TEST_PGPASSWORD_${process.pid}`;
      const app = openPostgres({ ...db.options, user: role, passwordFrom: { env: name } });
      try {
        const err = await app.get('SELECT 1').catch((e: unknown) => e);
        expect((err as Error).message).toContain(`environment variable ${name} is not set`);
        process.env[name] = 'env-secret';
        expect(await app.get('SELECT current_user AS u')).toEqual({ u: role });
      } finally {
        delete process.env[name];
        await app.close();
      }
    });
  });

  describe.skipIf(!pgServer.available || pgServer.caFile === undefined)('TLS', () => {
    const caFile = pgServer.available ? pgServer.caFile : undefined;
    it('connects with sslmode verify-full to 127.0.0.1 and to localhost, checked against the CA file', async () => {
      for (const host of ['127.0.0.1', 'localhost']) {
        const tls = openPostgres({ ...db.options, host, sslmode: 'verify-full', caFile });
        try {
          expect(await tls.get('SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()')).toEqual({ ssl: true });
        } finally {
          await tls.close();
        }
      }
    });

    it('refuses a server certificate that another CA signed (verify-full and verify-ca), and accepts it with require', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'tw-otherca-'));
      try {
        execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=other CA', '-keyout', 'k.pem', '-out', 'ca.pem'], { cwd: dir, stdio: 'pipe' });
        for (const sslmode of ['verify-full', 'verify-ca'] as const) {
          const tls = openPostgres({ ...db.options, sslmode, caFile: join(dir, 'ca.pem') });
          try {
            await expect(tls.get('SELECT 1')).rejects.toThrow(/PostgreSQL store .*(certificate|self.signed)/i);
          } finally {
            await tls.close();
          }
        }
        const loose = openPostgres({ ...db.options, sslmode: 'require' });
        try {
          expect(await loose.get('SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()')).toEqual({ ssl: true });
        } finally {
          await loose.close();
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('refuses a missing CA file at open, naming the setting', () => {
      expect(() => openPostgres({ ...db.options, sslmode: 'verify-full', caFile: '/nonexistent/ca.pem' })).toThrow(/cannot read the CA file \/nonexistent\/ca\.pem.*store\.postgres\.caFile/);
    });
  });
});
