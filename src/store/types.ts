/**
 * The interface of the durable store of `tokenwatch serve` (SQLite or PostgreSQL, `src/store/db.ts`): the {@link Store}
 * and its repositories. The row types they take and return are in `src/store/rows.ts` (re-exported here).
 *
 * All times are epoch milliseconds UTC, passed in by the caller (the store never reads the clock).
 * Every repository method is asynchronous (one {@link SqlExecutor} underneath: SQLite or PostgreSQL). Several calls can be made atomic with
 * {@link Store.transaction}: a poll stores its new token records, the auditIDs it saw and the source cursor in
 * one transaction, so a crash mid-poll neither loses nor double-counts an audit event.
 */
import type { ActionLogRepository } from './action-log.js';
import type { ApprovalRepository } from './approvals.js';
import type { FindingRepository } from './findings.js';
import type { MetricSampleRepository } from './metric-samples.js';
import type { OutboxRepository } from './outbox.js';
import type { PollerLockRepository } from './poller-lock.js';
import type { PollRepository } from './polls.js';
import type { ReplayRepository } from './replay.js';
import type { SlackRefRepository } from './slack-refs.js';
import type { TokenRecordRepository } from './token-records.js';
import type { ScanRequestRepository } from './scan-requests.js';
import type { SqlExecutor } from './sql.js';

export type * from './rows.js';

/**
 * The durable store: one repository per aggregate over one {@link SqlExecutor} (docs/design/architecture.md "Store").
 * Callers take the repositories they use (`store.findings.list(…)`, `store.approvals.get(…)`) and declare that part
 * with {@link StorePart}. Create one with `openStore(path)` or `openConfiguredStore(config.store)`; one per process,
 * closed on shutdown. Inside {@link Store.transaction} every repository is bound to the transaction.
 */
export interface Store {
  /** The database file (`:memory:` for an in-memory store), or `user@host:port/database` for PostgreSQL. */
  readonly path: string;
  /** Schema version after migrations (SQLite: `PRAGMA user_version`). */
  readonly schemaVersion: number;
  /** The poller lock: one polling process per store (`poller_lock`, src/store/poller-lock.ts). */
  readonly pollerLock: PollerLockRepository;
  /** Source cursors, seen auditIDs, poll runs and missed ticks (src/store/polls.ts). */
  readonly polls: PollRepository;
  /** The Slack replay cache shared by every replica (`slack_seen_requests`, src/store/replay.ts). */
  readonly replay: ReplayRepository;
  /** The aggregator's token records per cluster (`token_records`, src/store/token-records.ts). */
  readonly tokenRecords: TokenRecordRepository;
  /** Each cluster's current findings with their lifecycle (`findings`, src/store/findings.ts). */
  readonly findings: FindingRepository;
  /** Where alerts were posted in Slack and pending post intents (src/store/slack-refs.ts). */
  readonly slackRefs: SlackRefRepository;
  /** Approvals and their votes (`approvals`, `votes`, src/store/approvals.ts). */
  readonly approvals: ApprovalRepository;
  /** The action log (`action_log`, src/store/action-log.ts). */
  readonly actions: ActionLogRepository;
  /** API-server token metric scrapes (`token_metric_samples`, src/store/metric-samples.ts). */
  readonly metricSamples: MetricSampleRepository;
  /** The Slack notification queue's rows (`slack_outbox`, src/store/outbox.ts). */
  readonly outbox: OutboxRepository;
  /** Pending "scan now" requests for the replica that polls a cluster (`scan_requests`, src/store/scan-requests.ts). */
  readonly scanRequests: ScanRequestRepository;
  /**
   * The executor under the store (inside {@link Store.transaction}: the transaction's). It stays public for what is
   * not an aggregate of this store: modules that keep their own rows in the same database and must write them in
   * the store's transaction or on a connection they choose (cluster ownership and its fencing, src/store/cluster-owners.ts,
   * src/runtime/shard-coordinator.ts; shared rate buckets, src/store/rate-buckets.ts; webhook batches,
   * src/store/webhook-batches.ts; Slack notices and pages, src/store/notices.ts), the dialect and failure state the
   * runtime reports (readiness), and tests and benches that read rows directly.
   */
  readonly sql: SqlExecutor;

  /**
   * Runs `fn` in one write transaction (SQLite: BEGIN IMMEDIATE) and returns its result. `fn` gets a Store bound
   * to the transaction: everything inside must go through it (calls on the outer store wait for the transaction to
   * end, and from inside it are refused with a {@link StoreError}). If `fn` throws, everything it wrote is rolled
   * back and the error is rethrown. Nested calls (`tx.transaction`) become savepoints.
   */
  transaction<T>(fn: (tx: Store) => Promise<T>): Promise<T>;

  /** Closes the database (idempotent). */
  close(): Promise<void>;
}

/** The names of the store's repositories. */
type RepositoryName = Exclude<keyof Store, 'path' | 'schemaVersion' | 'sql' | 'transaction' | 'close'>;

/**
 * The part of a {@link Store} a caller uses: for each repository named, the methods it calls, e.g.
 * `StorePart<{ findings: 'list'; approvals: 'list' }>` is `{ findings: Pick<FindingRepository, 'list'>; approvals: … }`.
 * A real store is one; a test double is a plain object with those methods.
 */
export type StorePart<Uses extends { [R in RepositoryName]?: keyof Store[R] }> = {
  readonly [R in keyof Uses & RepositoryName]: Pick<Store[R], Uses[R] & keyof Store[R]>;
};
