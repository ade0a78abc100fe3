/**
 * Row types and the interface of the durable store of `tokenwatch serve` (SQLite, `src/store/db.ts`).
 *
 * All times are epoch milliseconds UTC, passed in by the caller (the store never reads the clock).
 * Every method is asynchronous (one {@link SqlExecutor} underneath: SQLite or PostgreSQL). Several calls can be made atomic with
 * {@link Store.transaction}: a poll stores its new token records, the auditIDs it saw and the source cursor in
 * one transaction, so a crash mid-poll neither loses nor double-counts an audit event.
 */
import type { OutboxRepository } from './outbox.js';
import type { ScanRequestRepository } from './scan-requests.js';
import type { SqlExecutor } from './sql.js';
import type { TokenMetricsSample } from '../findings/token-metrics.js';
import type { Approval, ApprovalState, DryRunResult, Vote } from '../approvals/machine.js';
import type { Finding, FindingKind, Severity, TokenRecord } from '../findings/types.js';

/**
 * Status of a stored finding:
 * - `open`: reported and current;
 * - `resolved`: verified fixed (no stale use for the settle period) or closed by hand;
 * - `snoozed`: muted until `snoozedUntil`.
 */
export type FindingStatus = 'open' | 'resolved' | 'snoozed';

/** A finding as stored, with its lifecycle. */
export interface StoredFinding {
  id: string;
  cluster: string;
  /** The finding as last saved (the `scan` JSON contract shape). */
  finding: Finding;
  /** Severity as last saved (= `finding.severity`). */
  severity: Severity;
  status: FindingStatus;
  /** Set while `status` is `snoozed`: snoozed until this time. */
  snoozedUntil: number | null;
  /** Set while `status` is `resolved`: when it was resolved. */
  resolvedAt: number | null;
  /**
   * Set while `status` is `resolved`: why — `verified` (a fix was verified), `quiet` (no signal for the quiet period
   * while every poll succeeded), or null (resolved before the store recorded reasons, or without one).
   */
  resolution: FindingResolution | null;
  /** When the store first saw this finding (the `now` of its first save). */
  createdAt: number;
  /** The `now` of its latest save that changed it, or of its latest status change. */
  updatedAt: number;
}

/**
 * What one {@link Store.saveFindings} did to one finding. Escalation = `previousSeverity` lower than `severity`;
 * recurrence = `previousStatus` `resolved` and `status` `open`.
 */
export interface FindingChange {
  id: string;
  /** True when the finding was not stored before. */
  isNew: boolean;
  severity: Severity;
  /** Severity before this save, null when new. */
  previousSeverity: Severity | null;
  status: FindingStatus;
  /** Status before this save, null when new. */
  previousStatus: FindingStatus | null;
  /**
   * Set when this save reopened a finding resolved as quiet because of a use delivered late: not seen before (its
   * request count rose) and dated inside the quiet-resolved period (after the last use the resolution relied on, at or
   * before `resolvedAt`), e.g. an audit event CloudWatch delivered after the poll that resolved it, inside the poll
   * overlap. `resolvedAt`: when it had been resolved, epoch ms.
   */
  lateUse?: { resolvedAt: number };
}

/** Why a finding was resolved (see {@link StoredFinding.resolution}). */
export type FindingResolution = 'verified' | 'quiet';

/** New status of a finding for {@link Store.setFindingStatus}. */
export type FindingStatusUpdate = { status: 'open' } | { status: 'resolved'; reason?: FindingResolution } | { status: 'snoozed'; until: number };

/** Polls of one cluster over a period, for quiet resolution ({@link Store.pollCoverage}). */
export interface PollCoverage {
  /** Polls that failed and started at or after `from`. */
  failed: number;
  /** Successful polls that started at or after `from`. */
  succeeded: number;
  /** Start of the latest successful poll that started at or before `from`, or null when there is none. */
  lastSuccessAtOrBefore: number | null;
}

/** Result of a finished poll, for {@link Store.finishPollRun}. */
export interface PollRunResult {
  endedAt: number;
  /** Audit events (or Logs Insights rows) read. */
  events: number;
  /** Token uses that were new (after auditID dedupe). */
  tokenUses: number;
  /** Why the poll failed; absent/undefined for a successful poll. */
  error?: string;
  /** Free-form counters (e.g. the source's `requests`, `bytes`, `throttled`). */
  stats?: Record<string, number>;
}

/** One poll of one cluster. */
export interface PollRun {
  id: number;
  cluster: string;
  /** The source's id (e.g. `cloudwatch:us-west-2:/aws/eks/prod/cluster`, `file:/var/log/audit.log`). */
  source: string;
  startedAt: number;
  /** Null while running (or when the process died mid-poll). */
  endedAt: number | null;
  events: number;
  tokenUses: number;
  /** Null for a successful (or still running) poll. */
  error: string | null;
  stats: Record<string, number>;
}

/** A scheduled tick of a cluster that started no poll (the store's `missed_polls`). Times are epoch ms UTC. */
export interface MissedPoll {
  cluster: string;
  /** The cron tick. */
  scheduledAt: number;
  /**
   * Why: `overlap` (the previous poll was still running), `coalesced` (folded into a late poll still running),
   * `unowned` (no replica could start it: the cluster was changing hands or its ownership had not been renewed),
   * `store-unavailable` (its poll failed with the store unreachable; recorded after the store came back).
   */
  reason: string;
  /** The replica id that recorded it, when clusters are shared out across replicas. */
  replica?: string;
  recordedAt: number;
}

/** The ticks of one cluster accounted for since a time (see {@link Store.pollTicks}), ascending, epoch ms. */
export interface PollTicks {
  /** Ticks with a finished poll run (one entry per run: a tick polled twice appears twice). */
  polled: number[];
  /** Ticks with a missed record, and its reason. */
  missed: { scheduledAt: number; reason: string }[];
}

/** The latest poll of a cluster plus its last success, for `/tokens status` and `/readyz`. */
export interface PollStatus extends PollRun {
  /** `endedAt` of the latest successful poll of the cluster, null when none succeeded yet. */
  lastSuccessAt: number | null;
}

/** Where a finding's Slack message is, and what it showed when last posted or updated. */
export interface MessageRef {
  /** Channel id the message was posted in. */
  channel: string;
  /** Message `ts` (its id in the channel; chat.update and thread replies use it). */
  ts: string;
  /** Severity the message shows (to detect escalations). */
  severity: Severity;
  /** Hash of the rendered content (skip chat.update when unchanged). */
  hash: string;
}

/** Where an alert group's Slack message is and what it showed: a {@link MessageRef} plus the live signals shown. */
export interface AlertRef extends MessageRef {
  /** Finding kinds the message showed as live (to say in the thread when one starts or stops). */
  signals: FindingKind[];
}

/** Location of a Slack message (e.g. an approval request message). */
export interface MessageLocation {
  channel: string;
  ts: string;
}

/**
 * What a running action did, recorded as it goes so that a process that resumes it (after a crash or an ownership
 * change) knows which Kubernetes writes were made (docs/design/architecture.md "Slack and approvals"). JSON in the store.
 */
export interface ExecutionRecord {
  /** Restart: the strategic-merge PATCH was answered (its response's `metadata.generation`). */
  patched?: { generation?: number; at: number };
  /** Recreation: the ServiceAccount body to create (labels, annotations, … of the object that was deleted). */
  body?: unknown;
  /** Recreation: uid of the ServiceAccount that is (to be) deleted. */
  oldUid?: string;
  /** Recreation: the DELETE was answered. */
  deleted?: boolean;
  /** Restart: the rollout progress (JSON of its figures) that Slack last accepted in the progress message. */
  shown?: string;
  /**
   * Restart: the final progress of the rollout when Slack did not accept its edit after bounded retries; re-sent on
   * the next tick (and after a restart of tokenwatch) until accepted, then removed.
   */
  pendingProgress?: { desired: number; updated: number; ready: number; available: number; done: boolean; observed: boolean; timedOut?: boolean };
}

/** An approval as stored: the state machine's {@link Approval} plus where its Slack message is. */
export interface StoredApproval extends Approval {
  /** The approval request message, once posted. */
  message: MessageLocation | null;
  /** When execution started (epoch ms UTC; for a restart, the `restartedAt` value sent). Absent before. */
  startedAt?: number;
  /** What the running action did so far (absent before execution). */
  execution?: ExecutionRecord;
  /** The rollout progress message in the thread, once posted. */
  progress?: MessageLocation;
  /**
   * The verifier's conclusion on a succeeded action, once recorded ({@link Store.concludeVerification}; outcome names
   * are the verifier's, src/remediation/verify.ts).
   */
  verification?: Conclusion;
  /** The node-probe check's conclusion, once recorded ({@link Store.concludeProbeCheck}). */
  probeCheck?: Conclusion;
  /**
   * The ServiceAccount the action is about (the alert it was approved on), from the `subject_key` recorded at the
   * request; absent when none was known then (a target without a stored finding).
   */
  subject?: ActionSubject;
}

/** A conclusion recorded once on an approval: its outcome name and when it was reached (epoch ms UTC). */
export interface Conclusion {
  outcome: string;
  at: number;
}

/** The ServiceAccount an action is about: the finding's for a restart, the target itself for a recreation. */
export interface ActionSubject {
  namespace: string;
  serviceAccount: string;
}

/**
 * Result of {@link Store.claimApproval}: the stored approval, or the open approval that blocks it. `expired`
 * lists the `requested` approvals of the same target or subject past `expiresAt` whose {@link StaleDecision} was
 * applied in the same transaction, as stored after it (their Slack messages still need an edit).
 */
export type ClaimResult =
  | { ok: true; approval: StoredApproval; expired: StoredApproval[] }
  | { ok: false; open: StoredApproval; expired: StoredApproval[] };

/**
 * What the caller decided for one stale request that {@link Store.claimApproval} found (a `requested` approval of
 * the same target or subject past `expiresAt`): the compare-and-set to apply, as {@link Store.transitionApproval}
 * takes it (`from` → `to` with `patch`, at the claim's `now`), and the action-log rows to append when it wins, in the
 * claim's transaction. The approval state machine decides it (its `expire` transition); the store holds no policy.
 */
export interface StaleDecision {
  from: ApprovalState;
  to: ApprovalState;
  patch: ApprovalUpdate;
  log: readonly NewActionLogEntry[];
}

/** The caller's decision on a stale request (see {@link StaleDecision}); undefined leaves it as it is. Called inside the claim's transaction: pure, no I/O. */
export type DecideStale = (stale: StoredApproval) => StaleDecision | undefined;

/** Input of {@link Store.createApproval}: an approval from `createApproval` of the state machine. */
export type NewApproval = Approval & { message?: MessageLocation | null };

/**
 * Fields written together with a state change by {@link Store.transitionApproval}. Structurally a superset of
 * the state machine's `ApprovalPatch`, so a transition's `patch` can be passed as it is.
 * - `state`, when given, must equal the `to` argument;
 * - `votes`: the full vote list after the transition (as the machine returns it); it must contain every vote
 *   already stored, otherwise the patch was computed from a stale read and the transition loses;
 * - `updatedAt` is ignored in favour of the `at` argument.
 */
export interface ApprovalUpdate {
  state?: ApprovalState;
  votes?: Vote[];
  error?: string | null;
  dryRun?: DryRunResult | null;
  message?: MessageLocation | null;
  /** Sets `startedAt` (see {@link StoredApproval.startedAt}). */
  startedAt?: number;
  /** Replaces the execution record. */
  execution?: ExecutionRecord;
  /** Sets the progress message location. */
  progress?: MessageLocation;
  updatedAt?: number;
}

/** Filter of {@link Store.listApprovals}. */
export interface ApprovalFilter {
  cluster?: string;
  states?: ApprovalState[];
  /** Only approvals with `expiresAt` ≤ this time (for expiry sweeps). */
  expiresAtOrBefore?: number;
  findingId?: string;
}

/** One action-log row: who did what to which target, when, with what result. Never updated or deleted. */
export interface ActionLogEntry {
  id: number;
  at: number;
  cluster: string;
  findingId: string | null;
  approvalId: string | null;
  /** Slack user id, or null for tokenwatch itself (expiry, verification). */
  actor: string | null;
  /** e.g. `restart.requested`, `restart.approved`, `snooze`, `verification.resolved`. */
  action: string;
  /** Human-readable target, e.g. `DaemonSet kube-system/kube-multus-ds`. */
  target: string;
  /** e.g. `ok`, `refused`, `failed`, or the new approval state. */
  result: string;
  detail: string | null;
}

/** Input of {@link Store.logAction}. */
export interface NewActionLogEntry {
  at: number;
  cluster: string;
  findingId?: string | null;
  approvalId?: string | null;
  actor: string | null;
  action: string;
  target: string;
  result: string;
  detail?: string | null;
}

/** Who holds (or asks for) a store's poller lock: a random id per process, and where it runs (for messages). */
export interface PollerLockHolder {
  /** Random per process; only the holder with this id may refresh or release the lock. */
  id: string;
  /** Host name (in Kubernetes, the pod name). */
  host: string;
  pid: number;
}

/** The lock's row: the holder plus when it took the lock and last refreshed it (epoch ms, UTC). */
export interface PollerLockRow extends PollerLockHolder {
  acquiredAt: number;
  heartbeatAt: number;
}

/** What {@link Store.claimPollerLock} found: taken (perhaps over a stale or dead holder) or held by another live process. */
export type PollerLockClaim = { acquired: true; replaced?: PollerLockRow } | { acquired: false; holder: PollerLockRow };

/** The durable store. Create one with `openStore(path)`; one per process, closed on shutdown. */
export interface Store {
  /** The database file (`:memory:` for an in-memory store). */
  readonly path: string;
  /** Schema version after migrations (`PRAGMA user_version`). */
  readonly schemaVersion: number;
  /** The Slack notification queue's rows (`slack_outbox`, src/store/outbox.ts). */
  readonly outbox: OutboxRepository;
  /** Pending "scan now" requests for the replica that polls a cluster (`scan_requests`, src/store/scan-requests.ts). */
  readonly scanRequests: ScanRequestRepository;
  /**
   * The executor under the store (inside {@link Store.transaction}: the transaction's), for rows kept by other
   * modules in the same database and transaction, e.g. cluster ownership (src/store/cluster-owners.ts).
   */
  readonly sql: SqlExecutor;

  /**
   * Runs `fn` in one write transaction (SQLite: BEGIN IMMEDIATE) and returns its result. `fn` gets a Store bound
   * to the transaction: everything inside must go through it (calls on the outer store wait for the transaction to
   * end, and from inside it are refused with a {@link StoreError}). If `fn` throws, everything it wrote is rolled
   * back and the error is rethrown. Nested calls (`tx.transaction`) become savepoints.
   */
  transaction<T>(fn: (tx: Store) => Promise<T>): Promise<T>;

  // --- the poller lock (one polling process per store)
  /**
   * Takes the store's poller lock for `holder` in one write transaction, unless another holder refreshed it
   * within `staleAfterMs` before `now` and `isGone(row)` is false (e.g. same host, a pid that no longer runs).
   * Re-claiming one's own lock refreshes it.
   * @param now epoch ms; @param staleAfterMs ms without a heartbeat after which the lock is free
   */
  claimPollerLock(holder: PollerLockHolder, now: number, staleAfterMs: number, isGone?: (row: PollerLockRow) => boolean): Promise<PollerLockClaim>;
  /** Refreshes the holder's heartbeat to `now`; false when the lock is no longer this holder's (taken over as stale). */
  heartbeatPollerLock(holderId: string, now: number): Promise<boolean>;
  /** Releases the lock if `holderId` holds it (idempotent). */
  releasePollerLock(holderId: string): Promise<void>;
  /** The lock's row, if anyone holds it. */
  getPollerLock(): Promise<PollerLockRow | undefined>;

  // --- source cursors
  /** The cursor last saved for a source, or undefined on the first poll. */
  getCursor(sourceId: string): Promise<string | undefined>;
  /**
   * Claims Slack request keys (replay cache, see src/slack/replay.ts) atomically across replicas: deletes expired
   * keys (`expires_at <= now`), then inserts each key with `expiresAt`.
   * @param keys one request's keys (e.g. its envelope id and trigger id); all are recorded
   * @param now epoch ms; @param expiresAt epoch ms
   * @returns true when none of the keys was present (the request is new), false when any was (a replay)
   */
  claimSlackRequest(keys: readonly string[], now: number, expiresAt: number): Promise<boolean>;
  /** Saves (replaces) a source's cursor. */
  setCursor(sourceId: string, cursor: string): Promise<void>;
  /**
   * Start of the first successful poll of a cluster (epoch ms UTC), kept for good (poll runs are pruned): where the
   * audit window of live mode's readiness verdict begins. Undefined before the first success.
   */
  watchedSince(cluster: string): Promise<number | undefined>;
  /** Records `at` as {@link Store.watchedSince} unless one is already recorded. */
  markWatchedSince(cluster: string, at: number): Promise<void>;

  // --- seen auditIDs (dedupe across overlapping polls and restarts)
  /**
   * Records auditIDs as seen at `seenAt` and returns those that were not seen before, in input order
   * (an id repeated in the input counts once). One transaction; existing rows keep their first `seenAt`.
   */
  markSeen(cluster: string, auditIDs: readonly string[], seenAt: number): Promise<string[]>;
  /** Forgets auditIDs of `cluster` seen before `olderThan`; returns how many. */
  pruneSeen(cluster: string, olderThan: number): Promise<number>;
  /** Number of remembered auditIDs of `cluster`. */
  countSeen(cluster: string): Promise<number>;

  // --- token records
  /**
   * Inserts or replaces records by {@link tokenRecordKey} (cluster, kind, subject, and pod + warnAfter minute,
   * legacy Secret, or 401 source). Note: the aggregator may re-key a record when it merges (an earlier
   * `warnAfter`, a new 401 attribution); for its full output use {@link replaceTokenRecords}.
   */
  upsertTokenRecords(records: readonly TokenRecord[]): Promise<void>;
  /**
   * Makes the records of `cluster` equal to `records` (one transaction), writing only what changed: records whose
   * key is gone are deleted, new or changed ones upserted, identical ones not touched (an idle poll writes nothing).
   * Records of another cluster throw. @returns rows written (upserted + deleted).
   * @param previous the cluster's records as {@link listTokenRecords} returned them earlier in the same transaction
   *   (unmodified): compared in memory instead of reading every row again. Omit it when unsure.
   */
  replaceTokenRecords(cluster: string, records: readonly TokenRecord[], previous?: readonly TokenRecord[]): Promise<{ upserted: number; deleted: number }>;
  /** All records of `cluster`, ordered by kind, subject, key. */
  listTokenRecords(cluster: string): Promise<TokenRecord[]>;
  /** Deletes records of `cluster` whose `lastSeen` is before `lastSeenBefore`; returns how many. */
  pruneTokenRecords(cluster: string, lastSeenBefore: number): Promise<number>;
  /** Number of stored token records of `cluster`. */
  countTokenRecords(cluster: string): Promise<number>;

  // --- findings
  /**
   * Saves the current findings of `cluster` (insert or update) as of `now`; a finding identical to the stored one
   * (same JSON, same status) is not written. New findings are `open`.
   * A `resolved` finding whose `lastSeen` is after its `resolvedAt` is reopened (a recurrence); one resolved as
   * `quiet` is also reopened by a late use (see {@link FindingChange.lateUse}); a `snoozed`
   * finding whose `snoozedUntil` ≤ `now` is reopened. Findings of the cluster not in `findings` are left as
   * they are. @throws {StoreError} when a finding belongs to another cluster.
   */
  saveFindings(cluster: string, findings: readonly Finding[], now: number): Promise<FindingChange[]>;
  /** Findings (of one cluster, or all), by severity (critical first), then `rejectionAt` (soonest first, none last), then id. */
  listFindings(cluster?: string, opts?: { status?: FindingStatus[] }): Promise<StoredFinding[]>;
  getFinding(id: string): Promise<StoredFinding | undefined>;
  /** Sets a finding's status at `at`; false when there is no such finding. */
  setFindingStatus(id: string, update: FindingStatusUpdate, at: number): Promise<boolean>;

  // --- poll runs
  /**
   * Records the start of a poll; returns its id. `scheduledAt`: the cron tick it runs for (epoch ms), for a scheduled
   * poll or a take-over's catch-up of a tick; absent for the start-up poll and `/tokens scan`.
   */
  startPollRun(cluster: string, source: string, startedAt: number, scheduledAt?: number): Promise<number>;
  /**
   * Records that the tick `scheduledAt` (epoch ms) of `cluster` started no poll, with the reason; false (nothing
   * written) when that tick already has a missed record (another replica recorded it).
   */
  recordMissedPoll(missed: MissedPoll): Promise<boolean>;
  /** The ticks of `cluster` at or after `since` (epoch ms) that are accounted for: see {@link PollTicks}. */
  pollTicks(cluster: string, since: number): Promise<PollTicks>;
  /** Records the end of a poll. @throws {StoreError} for an unknown id. */
  finishPollRun(id: number, result: PollRunResult): Promise<void>;
  /** The latest poll of each cluster (by start), ordered by cluster name, with its last success time. */
  lastPollRuns(): Promise<PollStatus[]>;
  /** Deletes poll runs that started before `olderThan`, keeping each cluster's latest; returns how many. */
  prunePollRuns(olderThan: number): Promise<number>;
  /** What the polls of `cluster` did since `from` (epoch ms): see {@link PollCoverage}. Running polls are not counted. */
  pollCoverage(cluster: string, from: number): Promise<PollCoverage>;

  // --- Slack message refs
  getMessageRef(findingId: string): Promise<MessageRef | undefined>;
  /** Saves (replaces) a finding's message ref. @throws {StoreError} when the finding is not stored. */
  saveMessageRef(findingId: string, ref: MessageRef): Promise<void>;
  /**
   * Records that the alert of a finding is about to be posted to `channel` at `at` (epoch ms), before
   * chat.postMessage; {@link saveMessageRef} clears it. An intent without a ref after a restart means the post may
   * have happened: look the message up (by its metadata) before posting again.
   */
  recordAlertIntent(findingId: string, channel: string, at: number): Promise<void>;
  /** The pending alert intent of a finding (see {@link recordAlertIntent}). */
  getAlertIntent(findingId: string): Promise<{ channel: string; at: number } | undefined>;
  /** Deletes a finding's (per-kind, pre-grouping) message ref; no-op when there is none. */
  deleteMessageRef(findingId: string): Promise<void>;
  /** The message of an alert group (id from `groupIdOf`, src/findings/groups.ts), if posted. */
  getAlertRef(groupId: string): Promise<AlertRef | undefined>;
  /** Saves (replaces) an alert group's message ref and clears its intent. */
  saveAlertRef(groupId: string, cluster: string, ref: AlertRef): Promise<void>;
  /** Records that a group's alert is about to be posted (as {@link recordAlertIntent}, per group). */
  recordGroupIntent(groupId: string, channel: string, at: number): Promise<void>;
  /** The pending alert intent of a group (see {@link recordGroupIntent}). */
  getGroupIntent(groupId: string): Promise<{ channel: string; at: number } | undefined>;

  // --- approvals
  /** Stores a new approval (no open-action check: use {@link claimApproval}). @throws {StoreError} when the id exists. */
  createApproval(approval: NewApproval, subject?: ActionSubject): Promise<StoredApproval>;
  /**
   * Stores a new `requested` approval unless an open one (requested / approved / running, a `requested` one not
   * past `expiresAt`) blocks it, in one write transaction (so of concurrent claims, from other connections or
   * processes too, exactly one wins): one with the same target (cluster, kind, namespace, name), whatever finding
   * it came from; or, for a restart, an open ServiceAccount recreation of its subject; for a recreation, an open
   * restart of a workload of that ServiceAccount. A `requested` approval past `expiresAt` at `now` never blocks.
   * In the same transaction, each such stale request of that target or subject is handed to `decideStale` and the
   * compare-and-set it returns is applied with its action-log rows (see {@link StaleDecision}); without
   * `decideStale` they are left as they are. `subject` defaults to the finding's ServiceAccount (or the target, for
   * a ServiceAccount).
   */
  claimApproval(approval: NewApproval, now: number, decideStale?: DecideStale, subject?: ActionSubject): Promise<ClaimResult>;
  /** The open approval that would block a new `action` on `target` at `now` (read only; see {@link claimApproval}). */
  openApprovalFor(action: NewApproval['action'], target: NewApproval['target'], now: number, subject?: ActionSubject): Promise<StoredApproval | undefined>;
  getApproval(id: string): Promise<StoredApproval | undefined>;
  /**
   * Compare-and-set: moves approval `id` from state `from` to `to` and writes `patch`, only if it is still in
   * `from` (and, when `patch.votes` is given, no vote was stored since the caller read it). Returns whether it
   * won; of concurrent callers (other connections or processes included) exactly one wins. `from === to` is
   * allowed (a vote below quorum, saving the message location). Legality of the transition is the state
   * machine's concern (`src/approvals/machine.ts`).
   */
  transitionApproval(id: string, from: ApprovalState, to: ApprovalState, patch: ApprovalUpdate, at: number): Promise<boolean>;
  /** Approvals matching `filter`, oldest first. */
  listApprovals(filter?: ApprovalFilter): Promise<StoredApproval[]>;
  /**
   * Records the verifier's conclusion `outcome` on approval `id` at `at` (epoch ms) unless one is recorded: a
   * compare-and-set, so of concurrent callers (other replicas included) exactly one gets true and reports it.
   */
  concludeVerification(id: string, outcome: string, at: number): Promise<boolean>;
  /** As {@link concludeVerification}, for the node-probe check's conclusion. */
  concludeProbeCheck(id: string, outcome: string, at: number): Promise<boolean>;

  // --- action log
  /** Appends an action-log row; returns its id. */
  logAction(entry: NewActionLogEntry): Promise<number>;
  /** The latest `limit` rows of `cluster`, newest first. */
  listActions(cluster: string, limit?: number): Promise<ActionLogEntry[]>;
  /** All rows of one approval, oldest first. */
  listApprovalActions(approvalId: string): Promise<ActionLogEntry[]>;
  /**
   * Deletes action-log rows older than `olderThan` (retention; the log is otherwise append-only). Rows of approvals
   * still open (requested, approved, running) are kept. Returns how many were deleted.
   */
  pruneActionLog(olderThan: number): Promise<number>;

  // --- API-server token metrics
  /** Stores one scrape; a sample without a known process start is not stored (no rate can use it). */
  saveTokenMetricSample(cluster: string, sample: TokenMetricsSample): Promise<void>;
  /** The latest stored scrape of `cluster` from the API-server process started at `processStartAt` (epoch ms). */
  lastTokenMetricSample(cluster: string, processStartAt: number): Promise<TokenMetricsSample | undefined>;
  /** Scrapes of `cluster` taken at or after `since` (epoch ms), oldest first. */
  listTokenMetricSamples(cluster: string, since: number): Promise<TokenMetricsSample[]>;
  /** Deletes scrapes of `cluster` older than `olderThan` (epoch ms); returns how many. */
  pruneTokenMetricSamples(cluster: string, olderThan: number): Promise<number>;

  /** Closes the database (idempotent). */
  close(): Promise<void>;
}
