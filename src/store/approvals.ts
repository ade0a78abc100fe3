/**
 * The approvals repository: approvals with their votes, the one-open-action-per-target claim and the compare-and-set
 * of a transition (docs/design/architecture.md "Slack and approvals"). Legality of a transition is the state
 * machine's concern (`src/approvals/machine.ts`). Times are epoch ms UTC.
 */
import type { ApprovalState, DryRunResult, Vote } from '../approvals/machine.js';
import { ActionLogRepository } from './action-log.js';
import { isUniqueViolation, StoreError } from './errors.js';
import type { SqlExecutor } from './sql.js';
import { SEP } from './token-records.js';
import type { ActionSubject, ApprovalFilter, ApprovalUpdate, ClaimResult, DecideStale, ExecutionRecord, NewApproval, StoredApproval } from './rows.js';

type ApprovalRow = {
  id: string;
  action: StoredApproval['action'];
  target: string;
  requester: string;
  state: ApprovalState;
  required_approvals: number;
  created_at: number;
  expires_at: number;
  updated_at: number;
  dry_run: string | null;
  error: string | null;
  message_channel: string | null;
  message_ts: string | null;
  target_key?: string | null;
  subject_key?: string | null;
  started_at?: number | null;
  execution?: string | null;
  progress_channel?: string | null;
  progress_ts?: string | null;
  verification?: string | null;
  verified_at?: number | null;
  probe_check?: string | null;
  probe_checked_at?: number | null;
};
type VoteRow = { user: string; vote: Vote['vote']; at: number; reason: string | null };

const INSERT = `INSERT INTO approvals (id, cluster, finding_id, action, target, requester, state, required_approvals,
                            created_at, expires_at, updated_at, dry_run, error, message_channel, message_ts,
                            target_key, subject_key)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;
// `subject_key = ?` with a null key matches nothing (a target without a known subject).
const OPEN_FOR = `SELECT * FROM approvals
     WHERE state IN ('requested', 'approved', 'running') AND NOT (state = 'requested' AND expires_at <= ?)
       AND (target_key = ? OR (subject_key = ? AND action <> ?))
     ORDER BY created_at, id LIMIT 1`;
const STALE_FOR = `SELECT * FROM approvals WHERE state = 'requested' AND expires_at <= ?
       AND (target_key = ? OR subject_key = ?) ORDER BY created_at, id`;
const VOTES_OF = 'SELECT "user", vote, at, reason FROM votes WHERE approval_id = ? ORDER BY seq';
const INSERT_VOTE = `INSERT INTO votes (approval_id, "user", vote, at, reason, seq)
     VALUES (?, ?, ?, ?, ?, (SELECT COALESCE(max(seq), 0) + 1 FROM votes WHERE approval_id = ?))`;
const CAS = `UPDATE approvals SET state = ?, updated_at = ?,
       error = CASE WHEN ? = 1 THEN ? ELSE error END,
       dry_run = CASE WHEN ? = 1 THEN ? ELSE dry_run END,
       message_channel = CASE WHEN ? = 1 THEN ? ELSE message_channel END,
       message_ts = CASE WHEN ? = 1 THEN ? ELSE message_ts END,
       started_at = CASE WHEN ? = 1 THEN ? ELSE started_at END,
       execution = CASE WHEN ? = 1 THEN ? ELSE execution END,
       progress_channel = CASE WHEN ? = 1 THEN ? ELSE progress_channel END,
       progress_ts = CASE WHEN ? = 1 THEN ? ELSE progress_ts END
     WHERE id = ? AND state = ?`;

/** `{ subject }` from a `subject_key` (cluster␟namespace␟serviceAccount), or nothing when the key is absent or not of that shape. */
function subjectOfKey(key: string | null | undefined): { subject?: ActionSubject } {
  const parts = key ? key.split(SEP) : [];
  return parts.length === 3 ? { subject: { namespace: parts[1]!, serviceAccount: parts[2]! } } : {};
}

/** Approvals (`approvals`) and their votes (`votes`) over a {@link SqlExecutor}. */
export class ApprovalRepository {
  private readonly actions: ActionLogRepository;

  constructor(private readonly sql: SqlExecutor) {
    this.actions = new ActionLogRepository(sql);
  }

  /** The keys of {@link claim}: target and subject (see the V_ACTION_TARGETS migration). */
  private async keysOf(target: NewApproval['target'], subject: ActionSubject | undefined): Promise<{ targetKey: string; subjectKey: string | null }> {
    const targetKey = [target.cluster, target.kind, target.namespace, target.name].join(SEP);
    let s = subject;
    if (!s && target.kind === 'ServiceAccount') s = { namespace: target.namespace, serviceAccount: target.name };
    if (!s) {
      const row = await this.sql.get<{ namespace: string; service_account: string }>('SELECT namespace, service_account FROM findings WHERE id = ?', [target.findingId]);
      if (row) s = { namespace: row.namespace, serviceAccount: row.service_account };
    }
    return { targetKey, subjectKey: s ? [target.cluster, s.namespace, s.serviceAccount].join(SEP) : null };
  }

  /**
   * The open approval that would block a new `action` on `target` at `now` (read only; see {@link ApprovalRepository.claim}).
   */
  async openFor(action: NewApproval['action'], target: NewApproval['target'], now: number, subject?: ActionSubject): Promise<StoredApproval | undefined> {
    const keys = await this.keysOf(target, subject);
    const row = await this.sql.get<ApprovalRow>(OPEN_FOR, [now, keys.targetKey, keys.subjectKey, action]);
    return row === undefined ? undefined : this.approvalOf(row);
  }

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
  claim(a: NewApproval, now: number, decideStale?: DecideStale, subject?: ActionSubject): Promise<ClaimResult> {
    return this.sql.transaction(async (tx): Promise<ClaimResult> => {
      const repo = new ApprovalRepository(tx);
      const keys = await repo.keysOf(a.target, subject);
      // One winner among concurrent claims on backends whose transactions do not serialise every writer.
      await tx.lock(`approval-target:${keys.targetKey}`);
      if (keys.subjectKey !== null) await tx.lock(`approval-subject:${keys.subjectKey}`);
      const expired: StoredApproval[] = [];
      const stale = decideStale === undefined ? [] : await tx.all<ApprovalRow>(STALE_FOR, [now, keys.targetKey, keys.subjectKey]);
      for (const row of stale) {
        const old = await repo.approvalOf(row);
        const d = decideStale!(old);
        if (d === undefined || !(await compareAndSet(tx, old.id, d.from, d.to, d.patch, now))) continue;
        for (const entry of d.log) await repo.actions.log(entry);
        expired.push((await repo.get(old.id))!);
      }
      const open = await tx.get<ApprovalRow>(OPEN_FOR, [now, keys.targetKey, keys.subjectKey, a.action]);
      if (open !== undefined) return { ok: false, open: await repo.approvalOf(open), expired };
      return { ok: true, approval: await repo.create(a, subject), expired };
    });
  }

  /**
   * Stores a new approval (no open-action check: use {@link ApprovalRepository.claim}).
   * @throws {StoreError} when the id exists.
   */
  async create(a: NewApproval, subject?: ActionSubject): Promise<StoredApproval> {
    await this.sql.transaction(async (tx) => {
      const keys = await new ApprovalRepository(tx).keysOf(a.target, subject);
      try {
        await tx.run(INSERT, [
          a.id,
          a.target.cluster,
          a.target.findingId,
          a.action,
          JSON.stringify(a.target),
          a.requester,
          a.state,
          a.requiredApprovals,
          a.createdAt,
          a.expiresAt,
          a.updatedAt,
          a.dryRun === null ? null : JSON.stringify(a.dryRun),
          a.error ?? null,
          a.message?.channel ?? null,
          a.message?.ts ?? null,
          keys.targetKey,
          keys.subjectKey,
        ]);
      } catch (err) {
        if (isUniqueViolation(err)) throw new StoreError(`createApproval: approval ${a.id} already exists`, { cause: err });
        throw err;
      }
      for (const v of a.votes) await insertVote(tx, a.id, v);
    });
    return (await this.get(a.id))!;
  }

  /** The approval `id`, if stored. */
  async get(id: string): Promise<StoredApproval | undefined> {
    const row = await this.sql.get<ApprovalRow>('SELECT * FROM approvals WHERE id = ?', [id]);
    return row === undefined ? undefined : this.approvalOf(row);
  }

  /**
   * Compare-and-set: moves approval `id` from state `from` to `to` and writes `patch`, only if it is still in
   * `from` (and, when `patch.votes` is given, no vote was stored since the caller read it). Returns whether it
   * won; of concurrent callers (other connections or processes included) exactly one wins. `from === to` is
   * allowed (a vote below quorum, saving the message location). Legality of the transition is the state
   * machine's concern (`src/approvals/machine.ts`). One transaction.
   */
  transition(id: string, from: ApprovalState, to: ApprovalState, patch: ApprovalUpdate, at: number): Promise<boolean> {
    return this.sql.transaction((tx) => compareAndSet(tx, id, from, to, patch, at));
  }

  /**
   * Records the verifier's conclusion `outcome` on approval `id` at `at` (epoch ms) unless one is recorded: a
   * compare-and-set, so of concurrent callers (other replicas included) exactly one gets true and reports it.
   * Compare-and-set on the NULL `verification` column.
   */
  async concludeVerification(id: string, outcome: string, at: number): Promise<boolean> {
    const { changes } = await this.sql.run('UPDATE approvals SET verification = ?, verified_at = ? WHERE id = ? AND verification IS NULL', [outcome, at, id]);
    return changes === 1;
  }

  /**
   * As {@link ApprovalRepository.concludeVerification}, for the node-probe check's conclusion.
   * Compare-and-set on the NULL `probe_check` column.
   */
  async concludeProbeCheck(id: string, outcome: string, at: number): Promise<boolean> {
    const { changes } = await this.sql.run('UPDATE approvals SET probe_check = ?, probe_checked_at = ? WHERE id = ? AND probe_check IS NULL', [outcome, at, id]);
    return changes === 1;
  }

  /**
   * Approvals matching `filter`, oldest first.
   */
  async list(filter: ApprovalFilter = {}): Promise<StoredApproval[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (filter.cluster !== undefined) {
      where.push('cluster = ?');
      params.push(filter.cluster);
    }
    if (filter.states !== undefined) {
      where.push(`state IN (${filter.states.map(() => '?').join(', ') || 'NULL'})`);
      params.push(...filter.states);
    }
    if (filter.expiresAtOrBefore !== undefined) {
      where.push('expires_at <= ?');
      params.push(filter.expiresAtOrBefore);
    }
    if (filter.findingId !== undefined) {
      where.push('finding_id = ?');
      params.push(filter.findingId);
    }
    if (filter.createdAtOrAfter !== undefined) {
      where.push('created_at >= ?');
      params.push(filter.createdAtOrAfter);
    }
    const matching = where.length > 0 ? `WHERE ${where.join(' AND ')}` : '';
    const rows = await this.sql.all<ApprovalRow>(`SELECT * FROM approvals ${matching} ORDER BY created_at, id`, params);
    if (rows.length === 0) return [];
    // The votes of every listed approval in one statement (a statement per approval made the list cost grow with
    // the store's whole history of approvals, which is never pruned).
    const votes = new Map<string, VoteRow[]>();
    const voteRows = await this.sql.all<VoteRow & { approval_id: string }>(
      `SELECT approval_id, "user", vote, at, reason FROM votes WHERE approval_id IN (SELECT id FROM approvals ${matching}) ORDER BY approval_id, seq`,
      params,
    );
    for (const v of voteRows) {
      const of = votes.get(v.approval_id);
      if (of) of.push(v);
      else votes.set(v.approval_id, [v]);
    }
    return rows.map((r) => approvalFromRow(r, votes.get(r.id) ?? []));
  }

  private async approvalOf(row: ApprovalRow): Promise<StoredApproval> {
    return approvalFromRow(row, await this.sql.all<VoteRow>(VOTES_OF, [row.id]));
  }
}

/** A stored approval from its row and its vote rows (in vote order). */
function approvalFromRow(row: ApprovalRow, voteRows: readonly VoteRow[]): StoredApproval {
  const votes = voteRows.map(
    (v): Vote => (v.reason === null ? { user: v.user, vote: v.vote, at: v.at } : { user: v.user, vote: v.vote, at: v.at, reason: v.reason }),
  );
  return {
    id: row.id,
    action: row.action,
    target: JSON.parse(row.target) as StoredApproval['target'],
    requester: row.requester,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    requiredApprovals: row.required_approvals,
    votes,
    state: row.state,
    dryRun: row.dry_run === null ? null : (JSON.parse(row.dry_run) as DryRunResult),
    error: row.error,
    updatedAt: row.updated_at,
    message: row.message_channel !== null && row.message_ts !== null ? { channel: row.message_channel, ts: row.message_ts } : null,
    ...(row.started_at != null ? { startedAt: row.started_at } : {}),
    ...(row.execution != null ? { execution: JSON.parse(row.execution) as ExecutionRecord } : {}),
    ...(row.progress_channel != null && row.progress_ts != null ? { progress: { channel: row.progress_channel, ts: row.progress_ts } } : {}),
    ...(row.verification != null && row.verified_at != null ? { verification: { outcome: row.verification, at: row.verified_at } } : {}),
    ...(row.probe_check != null && row.probe_checked_at != null ? { probeCheck: { outcome: row.probe_check, at: row.probe_checked_at } } : {}),
    ...subjectOfKey(row.subject_key),
  };
}

/**
 * The compare-and-set of `ApprovalRepository.transition` inside the transaction `tx`: moves approval `id` from `from` to `to`
 * with `patch` unless it left `from` or gained a vote since the caller read it. Whether it won.
 * @throws {StoreError} when `patch.state` differs from `to`
 */
async function compareAndSet(tx: SqlExecutor, id: string, from: ApprovalState, to: ApprovalState, patch: ApprovalUpdate, at: number): Promise<boolean> {
  if (patch.state !== undefined && patch.state !== to) {
    throw new StoreError(`transitionApproval(${id}): patch.state ${patch.state} differs from to=${to}`);
  }
  const row = await tx.get<ApprovalRow>('SELECT * FROM approvals WHERE id = ?', [id]);
  if (row === undefined || row.state !== from) return false;
  let newVotes: Vote[] = [];
  if (patch.votes !== undefined) {
    const stored = new Set((await tx.all<VoteRow>(VOTES_OF, [id])).map((v) => v.user));
    const given = new Set(patch.votes.map((v) => v.user));
    // Computed from a stale read: someone else's vote landed in between.
    for (const user of stored) if (!given.has(user)) return false;
    newVotes = patch.votes.filter((v) => !stored.has(v.user));
  }
  const flag = (set: boolean): number => (set ? 1 : 0);
  const { changes } = await tx.run(CAS, [
    to,
    at,
    flag('error' in patch),
    patch.error ?? null,
    flag('dryRun' in patch),
    patch.dryRun == null ? null : JSON.stringify(patch.dryRun),
    flag('message' in patch),
    patch.message?.channel ?? null,
    flag('message' in patch),
    patch.message?.ts ?? null,
    flag(patch.startedAt !== undefined),
    patch.startedAt ?? null,
    flag(patch.execution !== undefined),
    patch.execution === undefined ? null : JSON.stringify(patch.execution),
    flag(patch.progress !== undefined),
    patch.progress?.channel ?? null,
    flag(patch.progress !== undefined),
    patch.progress?.ts ?? null,
    id,
    from,
  ]);
  if (changes !== 1) return false;
  for (const v of newVotes) await insertVote(tx, id, v);
  return true;
}

async function insertVote(tx: SqlExecutor, approvalId: string, v: Vote): Promise<void> {
  await tx.run(INSERT_VOTE, [approvalId, v.user, v.vote, v.at, v.reason ?? null, approvalId]);
}
