/**
 * The store of `tokenwatch serve`: one repository per aggregate (poller lock, cursors and polls, token records,
 * findings, Slack message refs, approvals, action log, token metric samples, Slack replay cache, Slack outbox, scan
 * requests) over one {@link SqlExecutor}: the {@link Store} exposes them, callers take the ones they use
 * (docs/design/architecture.md "Store"). {@link openStore} opens the embedded SQLite store (`src/store/sqlite.ts`), {@link openPostgresStore} the PostgreSQL one
 * (`src/store/postgres.ts`), {@link openConfiguredStore} the one the config names.
 */
import { randomBytes } from 'node:crypto';
import type { Config } from '../config/types.js';
import { ActionLogRepository } from './action-log.js';
import { ApprovalRepository } from './approvals.js';
import { FindingRepository } from './findings.js';
import { MetricSampleRepository } from './metric-samples.js';
import { PollerLockRepository } from './poller-lock.js';
import { PollRepository } from './polls.js';
import { ReplayRepository } from './replay.js';
import { ScanRequestRepository } from './scan-requests.js';
import { SlackRefRepository } from './slack-refs.js';
import type { SqlExecutor } from './sql.js';
import { OutboxRepository } from './outbox.js';
import { openSqliteExecutor, type SqliteOptions } from './sqlite.js';
import { migratePostgres } from './migrations-postgres.js';
import { describePostgres, openPostgres, type PostgresOptions, postgresOptionsOf } from './postgres.js';
import { TokenRecordRepository } from './token-records.js';
import type { Store } from './types.js';

/** Options of {@link openStore}. */
export type StoreOptions = SqliteOptions;

/** A new opaque approval id: 16 random bytes, base64url (22 characters). */
export function newApprovalId(): string {
  return randomBytes(16).toString('base64url');
}

/**
 * Opens (creating if needed) the SQLite store at `path` and migrates it to the current schema, in the store's worker
 * thread (src/store/sqlite.ts). The file's directory is created. `:memory:` gives a private in-memory store (tests).
 * @throws {StoreError} when the file is not a SQLite database, fails SQLite's integrity check (`PRAGMA quick_check`),
 *   or its schema version is newer than this build knows
 */
export async function openStore(path: string, opts: StoreOptions = {}): Promise<Store> {
  const sql = openSqliteExecutor(path, opts);
  try {
    return new RepositoryStore(sql, sql.path, await sql.ready());
  } catch (err) {
    await sql.close();
    throw err;
  }
}

/**
 * Opens the PostgreSQL store (src/store/postgres.ts) and migrates it (src/store/migrations-postgres.ts, under an
 * advisory lock, so replicas starting together migrate once). The store's `path` is `user@host:port/database`.
 * @throws {StoreError} when the server cannot be reached or refuses the login (the first connection is opened here),
 *   or the schema has a breaking step newer than this build
 */
export async function openPostgresStore(opts: PostgresOptions): Promise<Store> {
  const sql = openPostgres(opts);
  try {
    const { version } = await migratePostgres(sql);
    return new RepositoryStore(sql, describePostgres(opts), version);
  } catch (err) {
    await sql.close();
    throw err;
  }
}

/** Opens the store the config names: PostgreSQL when `store.postgres` is set, else the SQLite file `store.path`. */
export function openConfiguredStore(store: Config['store']): Promise<Store> {
  return store.postgres !== undefined ? openPostgresStore(postgresOptionsOf(store.postgres)) : openStore(store.path);
}

/**
 * The {@link Store}: its repositories over one {@link SqlExecutor}; inside {@link Store.transaction}, a new one over the
 * transaction's executor.
 */
export class RepositoryStore implements Store {
  readonly pollerLock: PollerLockRepository;
  readonly polls: PollRepository;
  readonly replay: ReplayRepository;
  readonly tokenRecords: TokenRecordRepository;
  readonly findings: FindingRepository;
  readonly slackRefs: SlackRefRepository;
  readonly approvals: ApprovalRepository;
  readonly actions: ActionLogRepository;
  readonly metricSamples: MetricSampleRepository;
  readonly outbox: OutboxRepository;
  readonly scanRequests: ScanRequestRepository;

  /** @param path as {@link Store.path}; @param schemaVersion as {@link Store.schemaVersion} (the executor is migrated). */
  constructor(
    readonly sql: SqlExecutor,
    readonly path: string,
    readonly schemaVersion: number,
  ) {
    this.pollerLock = new PollerLockRepository(sql);
    this.polls = new PollRepository(sql);
    this.replay = new ReplayRepository(sql);
    this.tokenRecords = new TokenRecordRepository(sql);
    this.findings = new FindingRepository(sql);
    this.slackRefs = new SlackRefRepository(sql);
    this.approvals = new ApprovalRepository(sql);
    this.actions = new ActionLogRepository(sql);
    this.metricSamples = new MetricSampleRepository(sql);
    this.outbox = new OutboxRepository(sql);
    this.scanRequests = new ScanRequestRepository(sql);
  }

  transaction<T>(fn: (tx: Store) => Promise<T>): Promise<T> {
    return this.sql.transaction((tx) => fn(new RepositoryStore(tx, this.path, this.schemaVersion)));
  }

  close(): Promise<void> {
    return this.sql.close();
  }
}
