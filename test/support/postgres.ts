/**
 * Per-test-file access to the run's PostgreSQL server (test/support/postgres-server.ts, started by
 * test/global-setup.ts): a fresh database per call, dropped by the returned `drop`.
 *
 * Use `const pgServer = postgresServer();` and `describe.skipIf(!pgServer.available)(…)`; when the binaries are
 * missing outside CI the suite is skipped and {@link postgresServer} prints why, once per file.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import type { PostgresOptions } from '../../src/store/postgres.js';
import type { PostgresServerInfo } from './postgres-server.js';

let warned = false;

/** The run's server, or why there is none (a skip message is printed once per file). */
export function postgresServer(): PostgresServerInfo {
  const info = inject('postgres');
  if (info === undefined) throw new Error('no PostgreSQL info: run the tests with vitest.config.ts (its globalSetup starts the server)');
  if (!info.available && !warned) {
    warned = true;
    console.warn(`PostgreSQL tests skipped: ${info.reason}`);
  }
  return info;
}

type Available = Extract<PostgresServerInfo, { available: true }>;

function server(): Available {
  const info = postgresServer();
  if (!info.available) throw new Error(`PostgreSQL is not available: ${info.reason}`);
  return info;
}

/** A pg client of the superuser on the server's loopback port (for setup: roles, databases, inspection). */
export async function superuserClient(database = 'postgres'): Promise<pg.Client> {
  const s = server();
  const client = new pg.Client({ host: s.host, port: s.port, user: s.superuser, database });
  await client.connect();
  return client;
}

/** A new empty database on the run's server. */
export interface TestDatabase {
  name: string;
  /** Executor options for it, as the superuser over plain TCP (tests of TLS and passwords set their own). */
  options: PostgresOptions;
  /** Drops the database (terminating connections left open). */
  drop: () => Promise<void>;
}

/** Creates a fresh database (`tw_<random>`); call `drop` in `afterAll`/`afterEach`. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const s = server();
  const name = `tw_${randomBytes(6).toString('hex')}`;
  const admin = await superuserClient();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return {
    name,
    options: { host: s.host, port: s.port, database: name, user: s.superuser, sslmode: 'disable', poolSize: 4 },
    drop: async () => {
      const c = await superuserClient();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}
