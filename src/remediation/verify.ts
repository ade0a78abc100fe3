/**
 * Verification after a remediation: did the fix work — for the whole alert, not one of its findings?
 *
 * An approved action is bound to the alert it was requested on: one ServiceAccount of one cluster (the approval's
 * subject, stored as its `subject_key` when the request was made), whichever finding of the alert the clicked button
 * named. After a succeeded rollout restart (or ServiceAccount recreation) tokenwatch judges **every signal of that
 * ServiceAccount** as polls bring new audit events — its stale-token, 401 and legacy-token records — and the node
 * probe's check of its token file:
 * - **recurrence**: a token *issued after the action started* is used stale again. A new bound token only turns
 *   stale one hour after it is issued (`warnafter` = issue + 3607 s, kubernetes `pkg/serviceaccount/claims.go`), so
 *   a stale use of such a token means the client still does not refresh it: the restart only bought another token
 *   lifetime (e.g. Multus thin plugin copying the token into a host file; docs/design/domain.md §6).
 * - **persisting**: after the action completed, a token issued *before* it is still used stale (a pod that was not
 *   replaced, a token copied elsewhere), or 401s or legacy-token use of the ServiceAccount continue (after a
 *   ServiceAccount recreation: its pods still present tokens of the old ServiceAccount).
 * - **resolved**: none of those signals after the action completed, for the whole settle period
 *   (`config.remediation.settlePeriod`, default 2 h: longer than the hour a new token needs to turn stale), and no
 *   node-probe report since the action of a host file holding a copy of the ServiceAccount's token that will go
 *   stale (the file not rewritten, or rewritten by a client whose cause is `static-token-file`): such a copy goes stale
 *   again whatever the audit log says so far, so the verification waits for the recurrence instead.
 * - otherwise **pending**.
 * Recurrence wins over persisting; both are reported as soon as they are seen.
 *
 * A resolved outcome concludes the whole alert once: every open or snoozed finding of the ServiceAccount is resolved
 * with it, each with its own `verification.resolved` action-log row, and one report (one thread reply) says so.
 *
 * When two succeeded actions on one alert both wait for their verification, the later one **supersedes** the earlier:
 * the earlier is concluded `superseded` (an action-log row and, through `reportSuperseded`, a thread reply), so
 * "resolved" is said once, for the alert, from the latest action.
 *
 * {@link assessVerification} is pure (time is a parameter). {@link Verifier} applies it after each poll to every
 * succeeded action not yet concluded, records the conclusion in the store — the approval's verification column, set by
 * compare-and-set (`Store.approvals.concludeVerification`) so it is reported once, across replicas and restarts too, and in the
 * same transaction the finding statuses `resolved` and `verification.<outcome>` action-log rows (history) — and hands
 * it to a reporter (the Slack thread reply).
 *
 * **Node probe** (docs/design/architecture.md "Signals besides the audit log"): where the node probe (`tokenwatch probe`, `src/probe/`) reports a host file holding the
 * subject's token, the restart is also checked on the file itself, independently of the audit-based outcome and usually
 * much sooner: once every node whose report names the subject has reported again after the action completed, the
 * file was either *rewritten* with a token issued after the action started, or *not rewritten* (e.g. the Multus thin
 * plugin v4 without `--cleanup-config-on-exit=true` keeps the old kubeconfig). {@link assessProbeCheck} is pure; the
 * Verifier records the outcome once per action in the approval's probe-check column (`Store.approvals.concludeProbeCheck`, a
 * compare-and-set) with a `probe-check.<outcome>` action-log row, and hands it to `reportProbe` (a thread reply).
 * After the settle period it decides with the nodes that did report, or records `none` (no Slack reply) when no
 * report names the subject.
 */
import type { ActionKind, ApprovalState } from '../approvals/index.js';
import { CLUSTER_ACTION_KINDS, objectLabel } from '../core/actions.js';
import { WARN_AFTER_TOLERANCE_MS } from '../findings/aggregate.js';
import { issuedTime } from '../findings/token-math.js';
import type { TokenKind, TokenRecord } from '../findings/types.js';
import type { Logger } from '../observability/logger.js';
import { probeVerifiesRestart, type ProbeRestartFile } from '../probe/findings.js';
import type { ProbeReport } from '../probe/host.js';
import type { ActionLogEntry, ActionSubject, Store, StoredApproval, StoredFinding } from '../store/index.js';
import { compareFindings } from '../findings/build.js';
import { countOf } from '../core/plural.js';


/**
 * Tolerance, ms, for comparing audit event times (API server clock) with tokenwatch's clock and for the ±60 s
 * grouping of `warnAfter` values (docs/design/architecture.md "Terms": token).
 */
export const CLOCK_TOLERANCE_MS = WARN_AFTER_TOLERANCE_MS;

/** Input of {@link assessVerification}. Times are epoch ms UTC. */
export interface VerificationInput {
  /** When the action started (the restart patch was sent, the ServiceAccount deleted). */
  startedAt: number;
  /** When it completed (rollout complete, ServiceAccount created). */
  completedAt: number;
  /** Quiet period required before the alert counts as resolved, ms. */
  settleMs: number;
  now: number;
  /**
   * Every token record of the alert's ServiceAccount (all kinds: stale-token, unauthorized, legacy-token), as the store
   * holds them after the latest poll.
   */
  records: readonly TokenRecord[];
  /**
   * The node probe found a host file holding the ServiceAccount's token after the action that will go stale: its check
   * concluded `not-rewritten`, or `rewritten` for a cause known to copy the token once (`static-token-file`). Quiet
   * audit signals do not mean resolved then.
   */
  copiedToken?: boolean;
}

/** Result of {@link assessVerification}. */
export type VerificationOutcome =
  /**
   * Not decided yet; decided at the latest at `decideAt` if nothing is seen. `copiedToken`: the settle period is over
   * but the probe saw a copied token, so it waits for that token's fate (a recurrence, or a later action).
   */
  | { outcome: 'pending'; decideAt: number; copiedToken?: true }
  /** No signal since the action completed, for at least the settle period (`quietMs`). */
  | { outcome: 'resolved'; quietMs: number }
  /** Tokens issued after the action started are used stale: the cause is still there. */
  | { outcome: 'recurrence'; tokens: number; requests: number; firstSeen: number; lastSeen: number }
  /**
   * Tokens issued before the action used stale, 401s or legacy-token use after it completed; `signals` names their
   * kinds (stale-token, unauthorized, legacy-token, in that order), `tokens` counts the records.
   */
  | { outcome: 'persisting'; tokens: number; lastSeen: number; signals: TokenKind[] };

/** Concluded outcomes (what gets reported). */
export type ConcludedOutcome = Exclude<VerificationOutcome, { outcome: 'pending' }>;

/** Issue time of a stale token's record (`warnAfter − 3607 s`), or undefined for records without `warnAfter`. */
export function issuedAt(r: Pick<TokenRecord, 'warnAfter'>): number | undefined {
  return r.warnAfter === undefined ? undefined : issuedTime(r.warnAfter);
}

const SIGNAL_ORDER: readonly TokenKind[] = ['stale-token', 'unauthorized', 'legacy-token'];

/**
 * Judges an action from every signal of the alert's ServiceAccount; see the module docstring for the rules.
 * Recurrence wins over persisting, and both are reported as soon as they are seen; resolved needs
 * `now − completedAt ≥ settleMs`, no record used after `completedAt` and no copied token.
 */
export function assessVerification(input: VerificationInput): VerificationOutcome {
  const { startedAt, completedAt, settleMs, now } = input;
  const stale = input.records.filter((r) => r.kind === 'stale-token');
  const fresh = stale.filter((r) => {
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
  // Used after the action completed, beyond the clock tolerance: old stale tokens, 401s, legacy-token use.
  const after = input.records.filter((r) => r.lastSeen > completedAt + CLOCK_TOLERANCE_MS);
  if (after.length > 0) {
    const kinds = new Set(after.map((r) => r.kind));
    return {
      outcome: 'persisting',
      tokens: after.length,
      lastSeen: after.reduce((m, r) => Math.max(m, r.lastSeen), 0),
      signals: SIGNAL_ORDER.filter((k) => kinds.has(k)),
    };
  }
  const decideAt = completedAt + settleMs;
  // A use within the tolerance of the completion (clock skew) only delays the decision.
  if (input.records.some((r) => r.lastSeen > completedAt)) return { outcome: 'pending', decideAt };
  const quietMs = now - completedAt;
  if (quietMs < settleMs) return { outcome: 'pending', decideAt };
  if (input.copiedToken) return { outcome: 'pending', decideAt, copiedToken: true };
  return { outcome: 'resolved', quietMs };
}

/** A concluded verification of one alert, for the reporter. */
export interface VerificationReport {
  approval: StoredApproval;
  /**
   * The alert's finding the reply speaks for, as stored after the conclusion: for a recurrence the ServiceAccount's
   * stale-token finding, else the approval's own finding, else the alert's most severe one.
   */
  finding: StoredFinding;
  /** Resolved: every finding of the alert concluded with it (statuses `resolved`); else empty. */
  resolved: StoredFinding[];
  outcome: ConcludedOutcome;
  startedAt: number;
  completedAt: number;
  settleMs: number;
  now: number;
}

/** An earlier action's verification superseded by a later action on the same alert, for the reporter. */
export interface SupersededReport {
  /** The earlier action, concluded `superseded`. */
  approval: StoredApproval;
  /** The later action whose verification covers the alert now. */
  by: StoredApproval;
  /** A finding of the alert (where the thread reply goes). */
  finding: StoredFinding;
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
  /** Reports an earlier action's verification superseded by a later one (Slack thread reply). Errors are logged. */
  reportSuperseded?: (r: SupersededReport) => Promise<void>;
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

/** The outcome recorded for a succeeded action not verified because a later action on the same alert is. */
const SUPERSEDED = 'superseded';

function stateTime(rows: Awaited<ReturnType<Store['actions']['ofApproval']>>, state: ApprovalState): number | undefined {
  return rows.find((r) => r.result === state)?.at;
}

/** Whether finding `f` is of ServiceAccount `s`. */
function isOf(f: Pick<StoredFinding['finding'], 'namespace' | 'serviceAccount'>, s: ActionSubject): boolean {
  return f.namespace === s.namespace && f.serviceAccount === s.serviceAccount;
}

/** Applies {@link assessVerification} to the succeeded actions of a cluster after each poll. */
export class Verifier {
  constructor(private readonly deps: VerifierDeps) {}

  /**
   * The alert (ServiceAccount) an action is about: the approval's recorded subject, else the ServiceAccount it
   * recreated, else its finding's; undefined when none is known.
   */
  private async subjectOf(a: StoredApproval): Promise<ActionSubject | undefined> {
    if (a.subject) return a.subject;
    if (a.target.kind === 'ServiceAccount') return { namespace: a.target.namespace, serviceAccount: a.target.name };
    const f = await this.deps.store.findings.get(a.target.findingId);
    return f ? { namespace: f.finding.namespace, serviceAccount: f.finding.serviceAccount } : undefined;
  }

  /**
   * Checks every succeeded restart/recreation of `cluster` that is not concluded yet — the latest per alert
   * (ServiceAccount); older ones are concluded `superseded` and reported as such. Call after each successful poll of
   * the cluster.
   * @returns the conclusions reached now.
   */
  async verifyCluster(cluster: string): Promise<VerificationReport[]> {
    await this.checkProbe(cluster);
    const { store, clock, settleMs, logger } = this.deps;
    const now = clock();
    const succeeded = (await store.approvals.list({ cluster, states: ['succeeded'] })).filter((a) => VERIFIED_ACTIONS.has(a.action));
    type Candidate = { a: StoredApproval; rows: ActionLogEntry[]; subject: ActionSubject; key: string };
    const candidates: Candidate[] = [];
    for (const a of succeeded) {
      if (a.verification !== undefined) continue;
      const subject = await this.subjectOf(a);
      if (!subject) continue;
      candidates.push({ a, rows: await store.actions.ofApproval(a.id), subject, key: `${subject.namespace}/${subject.serviceAccount}` });
    }
    const doneAt = (c: Candidate) => stateTime(c.rows, 'succeeded') ?? c.a.updatedAt;
    const latest = new Map<string, Candidate>();
    for (const c of candidates) {
      const prev = latest.get(c.key);
      if (!prev || doneAt(c) >= doneAt(prev)) latest.set(c.key, c);
    }
    const reports: VerificationReport[] = [];
    let stored: StoredFinding[] | undefined;
    let records: TokenRecord[] | undefined;
    for (const c of candidates) {
      const { a, rows, subject } = c;
      stored ??= await store.findings.list(cluster);
      const ofAlert = stored.filter((m) => isOf(m.finding, subject)).sort((x, y) => compareFindings(x.finding, y.finding));
      const later = latest.get(c.key)!;
      if (later !== c) {
        const won = await store.transaction(async (tx) => {
          if (!(await tx.approvals.concludeVerification(a.id, SUPERSEDED, now))) return false;
          await tx.actions.log({ at: now, cluster, findingId: a.target.findingId, approvalId: a.id, actor: null, action: `verification.${SUPERSEDED}`, target: objectLabel(a.target), result: SUPERSEDED, detail: `a later action on the same alert (approval ${later.a.id}) is verified instead` });
          return true;
        });
        const where = ofAlert.find((m) => m.id === a.target.findingId) ?? ofAlert[0];
        if (won && where && this.deps.reportSuperseded) {
          try {
            await this.deps.reportSuperseded({ approval: a, by: later.a, finding: where, now });
          } catch (err) {
            logger.error({ err, approval: a.id }, 'reporting a superseded verification failed');
          }
        }
        continue;
      }
      if (ofAlert.length === 0) continue; // nothing of the alert is stored any more: nothing to judge or say
      records ??= await store.tokenRecords.list(cluster);
      const mine = records.filter((r) => isOf(r, subject));
      const startedAt = stateTime(rows, 'running') ?? a.updatedAt;
      const completedAt = doneAt(c);
      // A host file holding the ServiceAccount's token after the action: not rewritten (the old token stays), or
      // rewritten by a client known to copy it once (static-token-file: the copy goes stale again).
      const copiedToken =
        a.probeCheck?.outcome === 'not-rewritten' || (a.probeCheck?.outcome === 'rewritten' && ofAlert.some((m) => m.finding.cause.id === 'static-token-file'));
      const outcome = assessVerification({ startedAt, completedAt, settleMs, now, records: mine, copiedToken });
      if (outcome.outcome === 'pending') continue;
      const speaker =
        (outcome.outcome === 'recurrence' ? ofAlert.find((m) => m.finding.kind === 'stale-token') : undefined) ??
        ofAlert.find((m) => m.id === a.target.findingId) ??
        ofAlert[0]!;
      // Concluded once across replicas and restarts: the compare-and-set on the approval's verification column, in
      // one transaction with the finding statuses and the action-log history (one row per finding concluded).
      const resolvedIds = await store.transaction(async (tx): Promise<string[] | undefined> => {
        if (!(await tx.approvals.concludeVerification(a.id, outcome.outcome, now))) return undefined;
        await tx.actions.log({
          at: now,
          cluster,
          findingId: speaker.id,
          approvalId: a.id,
          actor: null,
          action: `verification.${outcome.outcome}`,
          target: objectLabel(a.target),
          result: outcome.outcome,
          detail: describeOutcome(outcome),
        });
        if (outcome.outcome !== 'resolved') return [];
        // Every signal stayed quiet: the whole alert is resolved.
        const ids: string[] = [];
        for (const m of await tx.findings.list(cluster, { status: ['open', 'snoozed'] })) {
          if (!isOf(m.finding, subject)) continue;
          await tx.findings.setStatus(m.id, { status: 'resolved', reason: 'verified' }, now);
          if (m.id !== speaker.id) {
            await tx.actions.log({ at: now, cluster, findingId: m.id, approvalId: a.id, actor: null, action: 'verification.resolved', target: objectLabel(a.target), result: 'resolved', detail: `every signal of the alert quiet since the action; concluded with finding ${speaker.id}` });
          }
          ids.push(m.id);
        }
        return ids;
      });
      if (resolvedIds === undefined) continue; // another replica concluded it
      logger.info({ cluster, subject, approval: a.id, outcome, findings: resolvedIds }, `verification: ${outcome.outcome}`);
      const resolved: StoredFinding[] = [];
      for (const id of resolvedIds) {
        const f = await store.findings.get(id);
        if (f) resolved.push(f);
      }
      const report: VerificationReport = { approval: a, finding: (await store.findings.get(speaker.id)) ?? speaker, resolved, outcome, startedAt, completedAt, settleMs, now };
      reports.push(report);
      if (this.deps.report) {
        try {
          await this.deps.report(report);
        } catch (err) {
          logger.error({ err, finding: report.finding.id }, 'reporting a verification failed');
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
    for (const a of (await store.approvals.list({ cluster, states: ['succeeded'] })).filter((x) => VERIFIED_ACTIONS.has(x.action))) {
      if (a.probeCheck === undefined && a.verification?.outcome !== SUPERSEDED) open.push({ a, rows: await store.actions.ofApproval(a.id) });
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
      const stored = await store.findings.get(a.target.findingId);
      if (!stored) continue;
      const f = stored.finding;
      const startedAt = stateTime(rows, 'running') ?? a.updatedAt;
      const completedAt = stateTime(rows, 'succeeded') ?? a.updatedAt;
      const outcome = assessProbeCheck({ reports, subject: a.subject ?? f, startedAt, completedAt, settleMs, now });
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
        if (!(await tx.approvals.concludeProbeCheck(a.id, outcome.outcome, now))) return false;
        await tx.actions.log({ at: now, cluster, findingId: f.id, approvalId: a.id, actor: null, action: `probe-check.${outcome.outcome}`, target: objectLabel(a.target), result: outcome.outcome, detail });
        return true;
      });
      if (!won || outcome.outcome === 'none') continue;
      logger.info({ cluster, finding: f.id, approval: a.id, outcome: outcome.outcome, files: outcome.files }, `probe check: token file ${outcome.outcome}`);
      const report: ProbeCheckReport = { approval: a, finding: (await store.findings.get(f.id))!, outcome, startedAt, completedAt, now };
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
      return `no signal of the alert for ${Math.round(o.quietMs / 60_000)} min after the action`;
    case 'recurrence':
      return `${countOf(o.tokens, 'token')} issued after the action ${o.tokens === 1 ? 'is' : 'are'} used stale again (${countOf(o.requests, 'request')}, last ${new Date(o.lastSeen).toISOString()})`;
    case 'persisting':
      return `${o.signals.join(', ')}: ${countOf(o.tokens, 'token')} still used after the action (last ${new Date(o.lastSeen).toISOString()})`;
  }
}
