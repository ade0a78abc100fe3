/**
 * Row types of the durable store of `tokenwatch serve`: what its repositories (src/store/*.ts) take and return.
 *
 * All times are epoch milliseconds UTC, passed in by the caller (the store never reads the clock).
 */
import type { Approval, ApprovalState, DryRunResult, Vote } from '../approvals/machine.js';
import type { Finding, FindingKind, Severity } from '../findings/types.js';

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
 * What one {@link FindingRepository.save} did to one finding. Escalation = `previousSeverity` lower than `severity`;
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

/** New status of a finding for {@link FindingRepository.setStatus}. */
export type FindingStatusUpdate = { status: 'open' } | { status: 'resolved'; reason?: FindingResolution } | { status: 'snoozed'; until: number };

/** Polls of one cluster over a period, for quiet resolution ({@link PollRepository.coverage}). */
export interface PollCoverage {
  /** Polls that failed and started at or after `from`. */
  failed: number;
  /** Successful polls that started at or after `from`. */
  succeeded: number;
  /** Start of the latest successful poll that started at or before `from`, or null when there is none. */
  lastSuccessAtOrBefore: number | null;
}

/** Result of a finished poll, for {@link PollRepository.finishRun}. */
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

/** The ticks of one cluster accounted for since a time (see {@link PollRepository.ticks}), ascending, epoch ms. */
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
   * The verifier's conclusion on a succeeded action, once recorded ({@link ApprovalRepository.concludeVerification}; outcome names
   * are the verifier's, src/remediation/verify.ts).
   */
  verification?: Conclusion;
  /** The node-probe check's conclusion, once recorded ({@link ApprovalRepository.concludeProbeCheck}). */
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
 * Result of {@link ApprovalRepository.claim}: the stored approval, or the open approval that blocks it. `expired`
 * lists the `requested` approvals of the same target or subject past `expiresAt` whose {@link StaleDecision} was
 * applied in the same transaction, as stored after it (their Slack messages still need an edit).
 */
export type ClaimResult =
  | { ok: true; approval: StoredApproval; expired: StoredApproval[] }
  | { ok: false; open: StoredApproval; expired: StoredApproval[] };

/**
 * What the caller decided for one stale request that {@link ApprovalRepository.claim} found (a `requested` approval of
 * the same target or subject past `expiresAt`): the compare-and-set to apply, as {@link ApprovalRepository.transition}
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

/** Input of {@link ApprovalRepository.create}: an approval from `createApproval` of the state machine. */
export type NewApproval = Approval & { message?: MessageLocation | null };

/**
 * Fields written together with a state change by {@link ApprovalRepository.transition}. Structurally a superset of
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

/** Filter of {@link ApprovalRepository.list}. */
export interface ApprovalFilter {
  cluster?: string;
  states?: ApprovalState[];
  /** Only approvals with `expiresAt` ≤ this time (for expiry sweeps). */
  expiresAtOrBefore?: number;
  findingId?: string;
  /** Only approvals created at or after this time, epoch ms (the follow-up scan's horizon). */
  createdAtOrAfter?: number;
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

/** Input of {@link ActionLogRepository.log}. */
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

/** What {@link PollerLockRepository.claim} found: taken (perhaps over a stale or dead holder) or held by another live process. */
export type PollerLockClaim = { acquired: true; replaced?: PollerLockRow } | { acquired: false; holder: PollerLockRow };
