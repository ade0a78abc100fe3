/**
 * The store of `tokenwatch serve`: one repository per aggregate (poller lock, cursors and polls, token records,
 * findings, Slack message refs, approvals, action log, token metric samples, Slack replay cache, Slack outbox, scan
 * requests) over one {@link SqlExecutor}, behind the {@link Store} facade whose methods delegate to them
 * (docs/design/architecture.md "Store"). {@link openStore} opens the embedded SQLite store (`src/store/sqlite.ts`), {@link openPostgresStore} the PostgreSQL one
 * (`src/store/postgres.ts`), {@link openConfiguredStore} the one the config names.
 */
import { randomBytes } from 'node:crypto';
import type { Config } from '../config/types.js';
import type { TokenMetricsSample } from '../findings/token-metrics.js';
import type { ApprovalState } from '../approvals/machine.js';
import type { Finding, TokenRecord } from '../findings/types.js';
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
import type {
  ActionLogEntry,
  ActionSubject,
  AlertRef,
  ApprovalFilter,
  ApprovalUpdate,
  ClaimResult,
  DecideStale,
  FindingChange,
  FindingStatus,
  FindingStatusUpdate,
  MessageRef,
  MissedPoll,
  NewActionLogEntry,
  NewApproval,
  PollCoverage,
  PollerLockClaim,
  PollerLockHolder,
  PollerLockRow,
  PollRunResult,
  PollStatus,
  PollTicks,
  Store,
  StoredApproval,
  StoredFinding,
} from './types.js';

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

/** The {@link Store} facade: each method delegates to the repository of its aggregate. */
export class RepositoryStore implements Store {
  private readonly pollerLock: PollerLockRepository;
  private readonly polls: PollRepository;
  private readonly replay: ReplayRepository;
  private readonly tokenRecords: TokenRecordRepository;
  private readonly findings: FindingRepository;
  private readonly slackRefs: SlackRefRepository;
  private readonly approvals: ApprovalRepository;
  private readonly actions: ActionLogRepository;
  private readonly metricSamples: MetricSampleRepository;
  readonly outbox: OutboxRepository;
  readonly scanRequests: ScanRequestRepository;

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

  // --- poller lock
  getPollerLock(): Promise<PollerLockRow | undefined> {
    return this.pollerLock.get();
  }
  claimPollerLock(holder: PollerLockHolder, now: number, staleAfterMs: number, isGone?: (row: PollerLockRow) => boolean): Promise<PollerLockClaim> {
    return this.pollerLock.claim(holder, now, staleAfterMs, isGone);
  }
  heartbeatPollerLock(holderId: string, now: number): Promise<boolean> {
    return this.pollerLock.heartbeat(holderId, now);
  }
  releasePollerLock(holderId: string): Promise<void> {
    return this.pollerLock.release(holderId);
  }

  // --- Slack replay cache
  claimSlackRequest(keys: readonly string[], now: number, expiresAt: number): Promise<boolean> {
    return this.replay.claim(keys, now, expiresAt);
  }

  // --- cursors, watchedSince, seen auditIDs, poll runs
  getCursor(sourceId: string): Promise<string | undefined> {
    return this.polls.getCursor(sourceId);
  }
  setCursor(sourceId: string, cursor: string): Promise<void> {
    return this.polls.setCursor(sourceId, cursor);
  }
  watchedSince(cluster: string): Promise<number | undefined> {
    return this.polls.watchedSince(cluster);
  }
  markWatchedSince(cluster: string, at: number): Promise<void> {
    return this.polls.markWatchedSince(cluster, at);
  }
  markSeen(cluster: string, auditIDs: readonly string[], seenAt: number): Promise<string[]> {
    return this.polls.markSeen(cluster, auditIDs, seenAt);
  }
  pruneSeen(cluster: string, olderThan: number): Promise<number> {
    return this.polls.pruneSeen(cluster, olderThan);
  }
  countSeen(cluster: string): Promise<number> {
    return this.polls.countSeen(cluster);
  }
  startPollRun(cluster: string, source: string, startedAt: number, scheduledAt?: number): Promise<number> {
    return this.polls.startRun(cluster, source, startedAt, scheduledAt);
  }
  recordMissedPoll(missed: MissedPoll): Promise<boolean> {
    return this.polls.recordMissed(missed);
  }
  pollTicks(cluster: string, since: number): Promise<PollTicks> {
    return this.polls.ticks(cluster, since);
  }
  finishPollRun(id: number, result: PollRunResult): Promise<void> {
    return this.polls.finishRun(id, result);
  }
  lastPollRuns(): Promise<PollStatus[]> {
    return this.polls.lastRuns();
  }
  prunePollRuns(olderThan: number): Promise<number> {
    return this.polls.pruneRuns(olderThan);
  }
  pollCoverage(cluster: string, from: number): Promise<PollCoverage> {
    return this.polls.coverage(cluster, from);
  }

  // --- token records
  upsertTokenRecords(records: readonly TokenRecord[]): Promise<void> {
    return this.tokenRecords.upsert(records);
  }
  replaceTokenRecords(cluster: string, records: readonly TokenRecord[], previous?: readonly TokenRecord[]): Promise<{ upserted: number; deleted: number }> {
    return this.tokenRecords.replace(cluster, records, previous);
  }
  listTokenRecords(cluster: string): Promise<TokenRecord[]> {
    return this.tokenRecords.list(cluster);
  }
  pruneTokenRecords(cluster: string, lastSeenBefore: number): Promise<number> {
    return this.tokenRecords.prune(cluster, lastSeenBefore);
  }
  countTokenRecords(cluster: string): Promise<number> {
    return this.tokenRecords.count(cluster);
  }

  // --- findings
  saveFindings(cluster: string, findings: readonly Finding[], now: number): Promise<FindingChange[]> {
    return this.findings.save(cluster, findings, now);
  }
  listFindings(cluster?: string, opts?: { status?: FindingStatus[] }): Promise<StoredFinding[]> {
    return this.findings.list(cluster, opts);
  }
  getFinding(id: string): Promise<StoredFinding | undefined> {
    return this.findings.get(id);
  }
  setFindingStatus(id: string, update: FindingStatusUpdate, at: number): Promise<boolean> {
    return this.findings.setStatus(id, update, at);
  }

  // --- Slack message refs
  getMessageRef(findingId: string): Promise<MessageRef | undefined> {
    return this.slackRefs.getMessageRef(findingId);
  }
  saveMessageRef(findingId: string, ref: MessageRef): Promise<void> {
    return this.slackRefs.saveMessageRef(findingId, ref);
  }
  deleteMessageRef(findingId: string): Promise<void> {
    return this.slackRefs.deleteMessageRef(findingId);
  }
  recordAlertIntent(findingId: string, channel: string, at: number): Promise<void> {
    return this.slackRefs.recordAlertIntent(findingId, channel, at);
  }
  getAlertIntent(findingId: string): Promise<{ channel: string; at: number } | undefined> {
    return this.slackRefs.getAlertIntent(findingId);
  }
  getAlertRef(groupId: string): Promise<AlertRef | undefined> {
    return this.slackRefs.getAlertRef(groupId);
  }
  saveAlertRef(groupId: string, cluster: string, ref: AlertRef): Promise<void> {
    return this.slackRefs.saveAlertRef(groupId, cluster, ref);
  }
  recordGroupIntent(groupId: string, channel: string, at: number): Promise<void> {
    return this.slackRefs.recordGroupIntent(groupId, channel, at);
  }
  getGroupIntent(groupId: string): Promise<{ channel: string; at: number } | undefined> {
    return this.slackRefs.getGroupIntent(groupId);
  }

  // --- approvals
  createApproval(approval: NewApproval, subject?: ActionSubject): Promise<StoredApproval> {
    return this.approvals.create(approval, subject);
  }
  claimApproval(approval: NewApproval, now: number, decideStale?: DecideStale, subject?: ActionSubject): Promise<ClaimResult> {
    return this.approvals.claim(approval, now, decideStale, subject);
  }
  openApprovalFor(action: NewApproval['action'], target: NewApproval['target'], now: number, subject?: ActionSubject): Promise<StoredApproval | undefined> {
    return this.approvals.openFor(action, target, now, subject);
  }
  getApproval(id: string): Promise<StoredApproval | undefined> {
    return this.approvals.get(id);
  }
  transitionApproval(id: string, from: ApprovalState, to: ApprovalState, patch: ApprovalUpdate, at: number): Promise<boolean> {
    return this.approvals.transition(id, from, to, patch, at);
  }
  listApprovals(filter?: ApprovalFilter): Promise<StoredApproval[]> {
    return this.approvals.list(filter);
  }
  concludeVerification(id: string, outcome: string, at: number): Promise<boolean> {
    return this.approvals.concludeVerification(id, outcome, at);
  }
  concludeProbeCheck(id: string, outcome: string, at: number): Promise<boolean> {
    return this.approvals.concludeProbeCheck(id, outcome, at);
  }

  // --- action log
  logAction(entry: NewActionLogEntry): Promise<number> {
    return this.actions.log(entry);
  }
  listActions(cluster: string, limit?: number): Promise<ActionLogEntry[]> {
    return this.actions.list(cluster, limit);
  }
  listApprovalActions(approvalId: string): Promise<ActionLogEntry[]> {
    return this.actions.ofApproval(approvalId);
  }
  pruneActionLog(olderThan: number): Promise<number> {
    return this.actions.prune(olderThan);
  }

  // --- API-server token metrics
  saveTokenMetricSample(cluster: string, sample: TokenMetricsSample): Promise<void> {
    return this.metricSamples.save(cluster, sample);
  }
  lastTokenMetricSample(cluster: string, processStartAt: number): Promise<TokenMetricsSample | undefined> {
    return this.metricSamples.last(cluster, processStartAt);
  }
  listTokenMetricSamples(cluster: string, since: number): Promise<TokenMetricsSample[]> {
    return this.metricSamples.list(cluster, since);
  }
  pruneTokenMetricSamples(cluster: string, olderThan: number): Promise<number> {
    return this.metricSamples.prune(cluster, olderThan);
  }

  close(): Promise<void> {
    return this.sql.close();
  }
}
