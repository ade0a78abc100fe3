/**
 * Verification after a remediation: did the fix work?
 *
 * After a succeeded rollout restart (or ServiceAccount recreation) tokenwatch keeps watching the subject's token
 * records as polls bring new audit events:
 * - **recurrence**: a token *issued after the action started* is used stale again. A new bound token only turns
 *   stale one hour after it is issued (`warnafter` = issue + 3607 s, kubernetes `pkg/serviceaccount/claims.go`), so
 *   a stale use of such a token means the client still does not refresh it: the restart only bought another token
 *   lifetime (e.g. Multus thin plugin copying the token into a host file; docs/design/domain.md §6).
 * - **persisting**: a token issued *before* the action is still used after the action completed (a pod that was
 *   not replaced, a token copied elsewhere), or 401s / legacy-token use continue; after a ServiceAccount
 *   recreation, also 401s of the subject (its pods still present tokens of the old ServiceAccount).
 * - **resolved**: no use of the finding's kind after the action completed, for the whole settle period
 *   (`config.remediation.settlePeriod`, default 2 h: longer than the hour a new token needs to turn stale).
 * - otherwise **pending**.
 *
 * A resolved outcome concludes the whole subject: every other open or snoozed finding of the same ServiceAccount
 * whose signal stopped with the action (no record of its kind seen after the action completed) is resolved with it,
 * with its own `verification.resolved` row and report (e.g. the 401 finding of a ServiceAccount whose restart fixed
 * its stale tokens).
 *
 * {@link assessVerification} is pure (time is a parameter). {@link Verifier} applies it after each poll to every
 * succeeded action not yet concluded, records the conclusion in the store — the approval's verification column, set by
 * compare-and-set (`Store.concludeVerification`) so it is reported once, across replicas and restarts too, and in the
 * same transaction the finding status `resolved` and a `verification.<outcome>` action-log row (history) — and hands
 * it to a reporter (the Slack thread reply).
 *
 * **Node probe** (docs/design/architecture.md "Signals besides the audit log"): where the node probe (`tokenwatch probe`, `src/probe/`) reports a host file holding the
 * subject's token, the restart is also checked on the file itself, independently of the audit-based outcome and usually
 * much sooner: once every node whose report names the subject has reported again after the action completed, the
 * file was either *rewritten* with a token issued after the action started, or *not rewritten* (e.g. the Multus thin
 * plugin v4 without `--cleanup-config-on-exit=true` keeps the old kubeconfig). {@link assessProbeCheck} is pure; the
 * Verifier records the outcome once per action in the approval's probe-check column (`Store.concludeProbeCheck`, a
 * compare-and-set) with a `probe-check.<outcome>` action-log row, and hands it to `reportProbe` (a thread reply).
 * After the settle period it decides with the nodes that did report, or records `none` (no Slack reply) when no
 * report names the subject.
 */
import type { ActionKind, ApprovalState } from '../approvals/index.js';
import { CLUSTER_ACTION_KINDS, objectLabel } from '../core/actions.js';
import { WARN_AFTER_TOLERANCE_MS } from '../findings/aggregate.js';
import { issuedTime } from '../findings/token-math.js';
import type { FindingKind, TokenRecord } from '../findings/types.js';
import type { Logger } from '../observability/logger.js';
import { probeVerifiesRestart, type ProbeRestartFile } from '../probe/findings.js';
import type { ProbeReport } from '../probe/host.js';
import type { ActionLogEntry, Store, StoredApproval, StoredFinding } from '../store/index.js';
import { countOf } from '../core/plural.js';


/**
 * Tolerance, ms, for comparing audit event times (API server clock) with tokenwatch's clock and for the ±60 s
 * grouping of `warnAfter` values (docs/design/architecture.md "Terms": token).
 */
export const CLOCK_TOLERANCE_MS = WARN_AFTER_TOLERANCE_MS;

/** Input of {@link assessVerification}. Times are epoch ms UTC. */
export interface VerificationInput {
  kind: FindingKind;
  /** When the action started (the restart patch was sent, the ServiceAccount deleted). */
  startedAt: number;
  /** When it completed (rollout complete, ServiceAccount created). */
  completedAt: number;
  /** Quiet period required before the finding counts as resolved, ms. */
  settleMs: number;
  now: number;
  /** The subject's token records of the finding's kind, as the store holds them after the latest poll. */
  records: readonly TokenRecord[];
}

/** Result of {@link assessVerification}. */
export type VerificationOutcome =
  /** Not decided yet; decided at the latest at `decideAt` if nothing is seen. */
  | { outcome: 'pending'; decideAt: number }
  /** No use since the action completed, for at least the settle period (`quietMs`). */
  | { outcome: 'resolved'; quietMs: number }
  /** Tokens issued after the action started are used stale: the cause is still there. */
  | { outcome: 'recurrence'; tokens: number; requests: number; firstSeen: number; lastSeen: number }
  /** Tokens issued before the action (or 401s, legacy-token use) are still used after it completed. */
  | { outcome: 'persisting'; tokens: number; lastSeen: number };

/** Concluded outcomes (what gets reported). */
export type ConcludedOutcome = Exclude<VerificationOutcome, { outcome: 'pending' }>;

/** Issue time of a stale token's record (`warnAfter − 3607 s`), or undefined for records without `warnAfter`. */
export function issuedAt(r: Pick<TokenRecord, 'warnAfter'>): number | undefined {
  return r.warnAfter === undefined ? undefined : issuedTime(r.warnAfter);
}

/**
 * Judges an action from the subject's token records; see the module docstring for the rules. Recurrence wins over
 * persisting, and both are reported as soon as they are seen; resolved needs `now − completedAt ≥ settleMs`.
 */
export function assessVerification(input: VerificationInput): VerificationOutcome {
  const { startedAt, completedAt, settleMs, now } = input;
  const used = input.records.filter((r) => r.lastSeen > completedAt + (input.kind === 'stale-token' ? 0 : CLOCK_TOLERANCE_MS));
  if (input.kind === 'stale-token') {
    const fresh = input.records.filter((r) => {
      const issued = issuedAt(r);
      return issued !== undefined && issued >= startedAt - CLOCK_TOLERANCE_MS;
    });
    if (fresh.length > 0) {
      return {
        outcome: 'recurrence',
        tokens: fresh.length,
        requests: fresh.reduce((n, r) => n + r.requests, 0),
        firstSeen: fresh.reduce((m, r) => Math.min(m, r.firstSeen), Infinity),
        lastSeen: fresh.reduce((m, r) => Math.max(m, r.lastSeen), 0),
      };
    }
    const old = used.filter((r) => r.lastSeen > completedAt + CLOCK_TOLERANCE_MS);
    if (old.length > 0) return { outcome: 'persisting', tokens: old.length, lastSeen: old.reduce((m, r) => Math.max(m, r.lastSeen), 0) };
    if (used.length > 0) return { outcome: 'pending', decideAt: completedAt + settleMs };
  } else if (used.length > 0) {
    return { outcome: 'persisting', tokens: used.length, lastSeen: used.reduce((m, r) => Math.max(m, r.lastSeen), 0) };
  }
  const quietMs = now - completedAt;
  if (quietMs >= settleMs) return { outcome: 'resolved', quietMs };
  return { outcome: 'pending', decideAt: completedAt + settleMs };
}

/** A concluded verification, for the reporter. */
export interface VerificationReport {
  approval: StoredApproval;
  /** The finding as stored after the conclusion (status `resolved` for a resolved outcome). */
  finding: StoredFinding;
  outcome: ConcludedOutcome;
  startedAt: number;
  completedAt: number;
  settleMs: number;
  now: number;
}

/** Input of {@link assessProbeCheck}. Times are epoch ms UTC. */
export interface ProbeCheckInput {
  /** The cluster's current node-probe reports (one per node). */
  reports: readonly ProbeReport[];
  subject: { namespace: string; serviceAccount: string };
  /** When the action started: a token issued from then on (less {@link CLOCK_TOLERANCE_MS}) counts as rewritten. */
  startedAt: number;
  /** When it completed: only reports probed after this say anything about the restart. */
  completedAt: number;
  /** After `completedAt + settleMs` the check decides with the nodes that reported. */
  settleMs: number;
  now: number;
}

/** Result of {@link assessProbeCheck}. */
export type ProbeCheckOutcome =
  /** Wait for the probe to report again from `waitingFor` (nodes). */
  | { outcome: 'pending'; waitingFor: string[] }
  /** No report names the subject (no probe, or no token file of it): nothing to say. */
  | { outcome: 'none' }
  /**
   * Every file of the subject reported after the action holds a token issued after it (`rewritten`), or at least one
   * still holds an older token (`not-rewritten`). `silent`: nodes whose file was reported before the action and that
   * have not reported since (only after the settle period).
   */
  | { outcome: 'rewritten' | 'not-rewritten'; files: ProbeRestartFile[]; silent: string[] };

/** Concluded probe outcomes (what gets reported in Slack). */
export type ConcludedProbeOutcome = Extract<ProbeCheckOutcome, { files: ProbeRestartFile[] }>;

/**
 * Judges an action from the node-probe reports (see the module docstring). Pure. A node's report counts once it was
 * probed at or after `completedAt`; a node whose report names the subject but is older makes the check wait, until
 * the settle period has passed.
 */
export function assessProbeCheck(input: ProbeCheckInput): ProbeCheckOutcome {
  const { subject, completedAt } = input;
  const names = (r: ProbeReport) => r.entries.some((e) => e.status === 'token' && e.namespace === subject.namespace && e.serviceAccount === subject.serviceAccount);
  const fresh = input.reports.filter((r) => Date.parse(r.probedAt) >= completedAt);
  const waiting = input.reports.filter((r) => !fresh.includes(r) && names(r)).map((r) => r.node);
  const due = input.now >= completedAt + input.settleMs;
  if (waiting.length > 0 && !due) return { outcome: 'pending', waitingFor: waiting };
  const check = probeVerifiesRestart(fresh, subject, input.startedAt - CLOCK_TOLERANCE_MS, input.now);
  if (check.files.length === 0) return due ? { outcome: 'none' } : { outcome: 'pending', waitingFor: waiting };
  return { outcome: check.verified ? 'rewritten' : 'not-rewritten', files: check.files, silent: waiting };
}

/** A concluded probe check, for the reporter. */
export interface ProbeCheckReport {
  approval: StoredApproval;
  finding: StoredFinding;
  outcome: ConcludedProbeOutcome;
  startedAt: number;
  completedAt: number;
  now: number;
}

/** Dependencies of {@link Verifier}. */
export interface VerifierDeps {
  store: Store;
  clock: () => number;
  /** `config.remediation.settlePeriod`, ms. */
  settleMs: number;
  logger: Logger;
  /** Reports a conclusion (Slack thread reply, message edit). Errors are logged; the conclusion stays recorded. */
  report?: (r: VerificationReport) => Promise<void>;
  /**
   * The cluster's node-probe reports, or undefined when the cluster has no Kubernetes access. Read only
   * while a probe check is open. Errors are logged and the check retried after the next poll.
   */
  probeReports?: (cluster: string) => Promise<readonly ProbeReport[]> | undefined;
  /** Reports a concluded probe check (Slack thread reply). Errors are logged; the conclusion stays recorded. */
  reportProbe?: (r: ProbeCheckReport) => Promise<void>;
}

/** Actions that verification follows: those that change the cluster. */
const VERIFIED_ACTIONS: ReadonlySet<ActionKind> = new Set(CLUSTER_ACTION_KINDS);

/** The outcome recorded for a succeeded action not verified because a later action on the same finding is. */
const SUPERSEDED = 'superseded';

function stateTime(rows: Awaited<ReturnType<Store['listApprovalActions']>>, state: ApprovalState): number | undefined {
  return rows.find((r) => r.result === state)?.at;
}

/** Applies {@link assessVerification} to the succeeded actions of a cluster after each poll. */
export class Verifier {
  constructor(private readonly deps: VerifierDeps) {}

  /**
   * Checks every succeeded restart/recreation of `cluster` that is not concluded yet (the latest per finding; older
   * ones are concluded `superseded`). Call after each successful poll of the cluster.
   * @returns the conclusions reached now.
   */
  async verifyCluster(cluster: string): Promise<VerificationReport[]> {
    await this.checkProbe(cluster);
    const { store, clock, settleMs, logger } = this.deps;
    const now = clock();
    const succeeded = (await store.listApprovals({ cluster, states: ['succeeded'] })).filter((a) => VERIFIED_ACTIONS.has(a.action));
    const candidates: { a: StoredApproval; rows: ActionLogEntry[] }[] = [];
    for (const a of succeeded) if (a.verification === undefined) candidates.push({ a, rows: await store.listApprovalActions(a.id) });
    const latest = new Map<string, (typeof candidates)[number]>();
    for (const c of candidates) {
      const key = c.a.target.findingId;
      const prev = latest.get(key);
      if (!prev || (stateTime(c.rows, 'succeeded') ?? c.a.updatedAt) >= (stateTime(prev.rows, 'succeeded') ?? prev.a.updatedAt)) latest.set(key, c);
    }
    const reports: VerificationReport[] = [];
    let records: TokenRecord[] | undefined;
    for (const c of candidates) {
      const { a, rows } = c;
      if (latest.get(a.target.findingId) !== c) {
        await store.transaction(async (tx) => {
          if (!(await tx.concludeVerification(a.id, SUPERSEDED, now))) return;
          await tx.logAction({ at: now, cluster, findingId: a.target.findingId, approvalId: a.id, actor: null, action: `verification.${SUPERSEDED}`, target: objectLabel(a.target), result: SUPERSEDED, detail: 'a later action on the same finding is verified instead' });
        });
        continue;
      }
      const stored = await store.getFinding(a.target.findingId);
      if (!stored) continue;
      const f = stored.finding;
      records ??= await store.listTokenRecords(cluster);
      const all = records;
      const mine = records.filter((r) => r.kind === f.kind && r.namespace === f.namespace && r.serviceAccount === f.serviceAccount);
      const startedAt = stateTime(rows, 'running') ?? a.updatedAt;
      const completedAt = stateTime(rows, 'succeeded') ?? a.updatedAt;
      let outcome = assessVerification({ kind: f.kind, startedAt, completedAt, settleMs, now, records: mine });
      if (a.action === 'recreate-serviceaccount' && outcome.outcome !== 'recurrence') {
        // Tokens of the old ServiceAccount stop showing as stale because they are now rejected: 401s of the subject
        // after the recreation mean its pods were not restarted yet.
        const rejected = records.filter((r) => r.kind === 'unauthorized' && r.namespace === f.namespace && r.serviceAccount === f.serviceAccount && r.lastSeen > completedAt + CLOCK_TOLERANCE_MS);
        if (rejected.length > 0) outcome = { outcome: 'persisting', tokens: rejected.length, lastSeen: rejected.reduce((m, r) => Math.max(m, r.lastSeen), 0) };
      }
      if (outcome.outcome === 'pending') continue;
      // Concluded once across replicas and restarts: the compare-and-set on the approval's verification column, in
      // one transaction with the finding status and the action-log history (one row per finding concluded).
      const siblings = await store.transaction(async (tx): Promise<string[] | undefined> => {
        if (!(await tx.concludeVerification(a.id, outcome.outcome, now))) return undefined;
        if (outcome.outcome === 'resolved') await tx.setFindingStatus(f.id, { status: 'resolved', reason: 'verified' }, now);
        await tx.logAction({
          at: now,
          cluster,
          findingId: f.id,
          approvalId: a.id,
          actor: null,
          action: `verification.${outcome.outcome}`,
          target: objectLabel(a.target),
          result: outcome.outcome,
          detail: describeOutcome(outcome),
        });
        if (outcome.outcome !== 'resolved') return [];
        // The fix concludes every finding of the subject whose signal stopped with it.
        const also: string[] = [];
        for (const sib of await tx.listFindings(cluster, { status: ['open', 'snoozed'] })) {
          const s = sib.finding;
          if (s.id === f.id || s.namespace !== f.namespace || s.serviceAccount !== f.serviceAccount) continue;
          const after = all.filter((r) => r.kind === s.kind && r.namespace === s.namespace && r.serviceAccount === s.serviceAccount && r.lastSeen > completedAt + CLOCK_TOLERANCE_MS);
          if (after.length > 0) continue;
          await tx.setFindingStatus(s.id, { status: 'resolved', reason: 'verified' }, now);
          await tx.logAction({
            at: now,
            cluster,
            findingId: s.id,
            approvalId: a.id,
            actor: null,
            action: 'verification.resolved',
            target: objectLabel(a.target),
            result: 'resolved',
            detail: `no ${s.kind} signal since the action either; concluded with finding ${f.id}`,
          });
          also.push(s.id);
        }
        return also;
      });
      if (siblings === undefined) continue; // another replica concluded it
      logger.info({ cluster, finding: f.id, approval: a.id, outcome }, `verification: ${outcome.outcome}`);
      const concluded: VerificationReport[] = [{ approval: a, finding: (await store.getFinding(f.id))!, outcome, startedAt, completedAt, settleMs, now }];
      for (const id of siblings) {
        logger.info({ cluster, finding: id, with: f.id, approval: a.id }, 'verification: resolved with its subject');
        concluded.push({ approval: a, finding: (await store.getFinding(id))!, outcome, startedAt, completedAt, settleMs, now });
      }
      for (const report of concluded) {
        reports.push(report);
        if (this.deps.report) {
          try {
            await this.deps.report(report);
          } catch (err) {
            logger.error({ err, finding: report.finding.id }, 'reporting a verification failed');
          }
        }
      }
    }
    return reports;
  }

  /**
   * The node-probe check of every succeeded restart/recreation of `cluster` that has none yet and is not superseded
   * (see the module docstring). Called by {@link verifyCluster} first, so that in one poll the probe's reply comes
   * before the audit-based one.
   * @returns the conclusions reached now.
   */
  async checkProbe(cluster: string): Promise<ProbeCheckReport[]> {
    const { store, clock, settleMs, logger } = this.deps;
    if (!this.deps.probeReports) return [];
    const open: { a: StoredApproval; rows: ActionLogEntry[] }[] = [];
    for (const a of (await store.listApprovals({ cluster, states: ['succeeded'] })).filter((x) => VERIFIED_ACTIONS.has(x.action))) {
      if (a.probeCheck === undefined && a.verification?.outcome !== SUPERSEDED) open.push({ a, rows: await store.listApprovalActions(a.id) });
    }
    if (open.length === 0) return [];
    let reports: readonly ProbeReport[] | undefined;
    try {
      reports = await this.deps.probeReports(cluster);
    } catch (err) {
      logger.warn({ cluster, error: err instanceof Error ? err.message : String(err) }, 'probe check: node-probe reports unavailable; retrying after the next poll');
      return [];
    }
    if (reports === undefined) return [];
    const now = clock();
    const out: ProbeCheckReport[] = [];
    for (const { a, rows } of open) {
      const stored = await store.getFinding(a.target.findingId);
      if (!stored) continue;
      const f = stored.finding;
      const startedAt = stateTime(rows, 'running') ?? a.updatedAt;
      const completedAt = stateTime(rows, 'succeeded') ?? a.updatedAt;
      const outcome = assessProbeCheck({ reports, subject: f, startedAt, completedAt, settleMs, now });
      if (outcome.outcome === 'pending') continue;
      const detail =
        outcome.outcome === 'none'
          ? 'no node-probe report names the ServiceAccount'
          : [
              ...outcome.files.map((x) => `${x.path} on node ${x.node}: ${x.rewritten ? 'rewritten' : 'not rewritten'}, token issued ${x.issuedAt ?? 'unknown'}`),
              ...(outcome.silent.length ? [`no report since the action from node(s) ${outcome.silent.join(', ')}`] : []),
            ].join('; ');
      // Concluded once: the compare-and-set on the approval's probe-check column, with its action-log history row.
      const won = await store.transaction(async (tx) => {
        if (!(await tx.concludeProbeCheck(a.id, outcome.outcome, now))) return false;
        await tx.logAction({ at: now, cluster, findingId: f.id, approvalId: a.id, actor: null, action: `probe-check.${outcome.outcome}`, target: objectLabel(a.target), result: outcome.outcome, detail });
        return true;
      });
      if (!won || outcome.outcome === 'none') continue;
      logger.info({ cluster, finding: f.id, approval: a.id, outcome: outcome.outcome, files: outcome.files }, `probe check: token file ${outcome.outcome}`);
      const report: ProbeCheckReport = { approval: a, finding: (await store.getFinding(f.id))!, outcome, startedAt, completedAt, now };
      out.push(report);
      if (this.deps.reportProbe) {
        try {
          await this.deps.reportProbe(report);
        } catch (err) {
          logger.error({ err, finding: f.id }, 'reporting a probe check failed');
        }
      }
    }
    return out;
  }
}

/** One line for the action log. */
export function describeOutcome(o: ConcludedOutcome): string {
  switch (o.outcome) {
    case 'resolved':
      return `no use for ${Math.round(o.quietMs / 60_000)} min after the action`;
    case 'recurrence':
      return `${countOf(o.tokens, 'token')} issued after the action ${o.tokens === 1 ? 'is' : 'are'} used stale again (${countOf(o.requests, 'request')}, last ${new Date(o.lastSeen).toISOString()})`;
    case 'persisting':
      return `${countOf(o.tokens, 'token')} still used after the action (last ${new Date(o.lastSeen).toISOString()})`;
  }
}
