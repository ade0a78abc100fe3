/**
 * Runs approved remediations and commits approval transitions with their side effects.
 *
 * The approval state machine (`src/approvals/machine.ts`) is pure: it returns a {@link Transition} (next state, a
 * patch, and effects). This module is the shell that carries a transition out:
 * 1. compare-and-set in the store (`Store.approvals.transition(id, from, to, patch, at)`): of concurrent callers
 *    exactly one wins; the losers re-read and decide again (then usually get `already-decided`);
 * 2. only after winning: one action-log row per `action-log` effect, a Kubernetes Event on the target per
 *    `kube-event` effect (best effort, `KubeRemediator.recordEvent`), the approvals metric on final states.
 * The remaining effects (`update-approval-message`, `execute`) are returned to the caller,
 * which owns Slack.
 *
 * {@link executeApproval} moves an `approved` approval to `running` (compare-and-set, so ten simultaneous clicks
 * execute it once), performs the rollout restart (one strategic-merge patch, then rollout progress until complete
 * or `rolloutTimeoutMs`) or the ServiceAccount recreation, and ends in `succeeded` or `failed`.
 *
 * Times are epoch ms UTC from the injected clock. Facts on rollouts and recreation: docs/design/domain.md §7.
 */
import { backoffDelay } from '../core/backoff.js';
import {
  approvalEvent,
  decide,
  refuse,
  type ActionTarget,
  type Approval,
  type ApprovalEvent,
  type ApprovalPolicy,
  type ApprovalState,
  type DryRunResult,
  type Effect,
  type Refusal,
  type Transition,
} from '../approvals/index.js';
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { ActionSubject, ApprovalUpdate, ClaimResult, ExecutionRecord, NewActionLogEntry, NewApproval, Store, StoredApproval } from '../store/index.js';
import type { V1ServiceAccount } from '@kubernetes/client-node';
import {
  isUidMismatch,
  KubeCallError,
  preservedOf,
  recreatedServiceAccount,
  restartedAtValue,
  type KubeRemediator,
  type RecreateResult,
  type RolloutProgress,
} from './kube-remediator.js';
import { isRestartableKind, type RestartableKind, objectLabel } from '../core/actions.js';

/** The parts of {@link KubeRemediator} the executor uses. */
export type Remediator = Pick<
  KubeRemediator,
  | 'preflightRestart'
  | 'restart'
  | 'restartedAt'
  | 'rolloutProgress'
  | 'preflightRecreateServiceAccount'
  | 'readServiceAccount'
  | 'deleteServiceAccount'
  | 'createServiceAccount'
  | 'recordEvent'
>;

/**
 * A dry-run result as the executor stores it: the state machine's {@link DryRunResult} plus the uid the
 * ServiceAccount had at preflight, so the recreation deletes only that object (uid precondition). The store keeps
 * the dry run as a JSON document, so the extra field survives a restart.
 */
export interface PreflightRecord extends DryRunResult {
  uid?: string;
  /** The ServiceAccount's resourceVersion the approvers saw: the recreation's delete precondition. */
  resourceVersion?: string;
}

/** Final states of an approval. */
const FINAL: readonly ApprovalState[] = ['succeeded', 'failed', 'rejected', 'expired'];

/** What the Slack side does when the executor makes progress. All optional; errors are logged, never thrown. */
export interface ExecutionHooks {
  /** The approval changed state (re-render its message). */
  onApprovalChanged?(approval: StoredApproval): Promise<void>;
  /**
   * Rollout figures changed (post or update the progress message). `startedAt` = when the patch was sent. Throws
   * when Slack did not accept it: the executor then sends it again (see `runRestart`).
   */
  onProgress?(approval: StoredApproval, progress: RolloutProgress, startedAt: number): Promise<void>;
  /** The final progress was not accepted after bounded retries and is stored for the next tick ({@link resendPendingProgress}). */
  onProgressPending?(approval: StoredApproval): Promise<void>;
  /** A ServiceAccount was recreated (offer the restart of its workloads). */
  onRecreated?(approval: StoredApproval, result: RecreateResult): Promise<void>;
  /** Something needs a human now (e.g. a ServiceAccount created by someone else during a recreation): alert. */
  onAlarm?(approval: StoredApproval, text: string): Promise<void>;
}

/** Dependencies of the executor. */
export interface ExecutorDeps {
  store: Store;
  /** The remediator of the approval's cluster, or undefined when the cluster has no Kubernetes access. */
  remediatorFor(cluster: string): Remediator | undefined;
  /** The approval policy of a cluster (undefined: no Slack section, no actions). */
  policyFor(cluster: string): ApprovalPolicy | undefined;
  /** Clock, epoch ms. */
  clock: () => number;
  /** How long to follow a rollout before it counts as failed, ms (`config.remediation.rolloutTimeout`). */
  rolloutTimeoutMs: number;
  /** Interval between rollout progress reads, ms. */
  pollIntervalMs: number;
  /** Sleep (default `setTimeout`); tests may shorten it. */
  sleep?: (ms: number) => Promise<void>;
  /** First wait before retrying the final progress edit, ms (doubles per attempt; default 1000). */
  progressRetryMs?: number;
  logger: Logger;
  metrics?: Metrics;
  hooks?: ExecutionHooks;
  /**
   * Aborted on shutdown: a rollout being followed is left `running` (the patch was sent) and is followed again by
   * `executeApproval(…, { resume: true })` at the next start.
   */
  signal?: AbortSignal;
  /**
   * False once this replica no longer owns the approval's cluster (`Ownership.owns`: the poller lock lost, or the
   * cluster moved to another replica): a followed rollout is then left `running` for the new owner to follow, as on
   * shutdown. Default: always true.
   */
  owns?: (cluster: string) => boolean;
}

/** Returned by the rollout loop when {@link ExecutorDeps.signal} aborted it or the cluster's ownership was lost. */
const INTERRUPTED = Symbol('interrupted');

/** Result of {@link commitEvent}: the transition that was committed, or why the event was refused. */
export type CommitResult =
  | { ok: true; transition: Transition; approval: StoredApproval; effects: Effect[] }
  | { ok: false; refusal: Refusal; approval: StoredApproval | undefined };

/**
 * Commits one accepted transition: compare-and-set `transition.from → transition.next` with its patch (plus
 * `extra`, e.g. the message location), then the action-log rows and Kubernetes Events of its effects.
 * @returns the approval as stored after the transition, or undefined when another caller changed it first.
 */
export async function commitTransition(
  deps: Pick<ExecutorDeps, 'store' | 'remediatorFor' | 'clock' | 'logger' | 'metrics'>,
  approval: Approval,
  transition: Transition,
  now: number,
  extra: ApprovalUpdate = {},
): Promise<StoredApproval | undefined> {
  const { store } = deps;
  const won = await store.approvals.transition(approval.id, transition.from, transition.next, { ...transition.patch, ...extra }, now);
  if (!won) return undefined;
  const after = (await store.approvals.get(approval.id))!;
  await applyEffects(deps, after, transition.effects, now);
  if (FINAL.includes(transition.next) && transition.from !== transition.next) {
    deps.metrics?.approvals.inc({ cluster: after.target.cluster, outcome: transition.next });
  }
  return after;
}

/**
 * The action-log row of an `action-log` effect of a transition of `approval` at `now`: action `<action>.<new state>`
 * (`<action>.vote` for a vote below quorum), result the new state, detail the machine's summary.
 */
function actionLogEntry(approval: Approval, e: Extract<Effect, { type: 'action-log' }>, now: number): NewActionLogEntry {
  const t = approval.target;
  return {
    at: now,
    cluster: t.cluster,
    findingId: t.findingId,
    approvalId: approval.id,
    actor: e.actor,
    action: `${approval.action}.${e.from === e.to ? 'vote' : e.to}`,
    target: objectLabel(t),
    result: e.to,
    detail: e.summary,
  };
}

/**
 * Stores a new request with the store's one-open-action-per-target claim (`Store.approvals.claim`), expiring in the same
 * transaction, through the state machine's `expire` transition, the stale requests of its target or subject: the
 * machine decides (requested and `now >= expiresAt`), the store applies the compare-and-set with the transition's
 * action-log rows; the Kubernetes Events and the approvals metric follow for each one that moved. Their Slack
 * messages are left to the caller (`ClaimResult.expired`).
 * @param now epoch ms UTC (the request's `createdAt`)
 */
export async function claimRequest(
  deps: Pick<ExecutorDeps, 'store' | 'remediatorFor' | 'policyFor' | 'logger' | 'metrics'>,
  approval: NewApproval,
  now: number,
  subject?: ActionSubject,
): Promise<ClaimResult> {
  const decided = new Map<string, Transition>();
  const res = await deps.store.approvals.claim(
    approval,
    now,
    (stale) => {
      const policy = deps.policyFor(stale.target.cluster);
      const d = policy && decide(stale, approvalEvent.expire(), policy, now);
      if (!d?.ok) return undefined;
      decided.set(stale.id, d);
      return { from: d.from, to: d.next, patch: d.patch, log: d.effects.flatMap((e) => (e.type === 'action-log' ? [actionLogEntry(stale, e, now)] : [])) };
    },
    subject,
  );
  for (const a of res.expired) {
    const d = decided.get(a.id)!;
    await applyEffects(deps, a, d.effects.filter((e) => e.type !== 'action-log'), now);
    deps.metrics?.approvals.inc({ cluster: a.target.cluster, outcome: d.next });
  }
  return res;
}

/**
 * Writes the action-log rows and Kubernetes Events of `effects` (other effects are left to the caller).
 * Events are best effort: a missing `create events` permission is logged, never fatal.
 */
export async function applyEffects(
  deps: Pick<ExecutorDeps, 'store' | 'remediatorFor' | 'logger'>,
  approval: Approval,
  effects: readonly Effect[],
  now: number,
): Promise<void> {
  const t = approval.target;
  for (const e of effects) {
    if (e.type === 'action-log') {
      await deps.store.actions.log(actionLogEntry(approval, e, now));
    } else if (e.type === 'kube-event') {
      const rem = deps.remediatorFor(t.cluster);
      if (!rem) continue;
      const ok = await rem.recordEvent(
        { kind: t.kind, namespace: t.namespace, name: t.name },
        { reason: e.reason, message: e.message, type: e.eventType, at: new Date(now) },
      );
      if (!ok) deps.logger.warn({ cluster: t.cluster, target: objectLabel(t), reason: e.reason }, 'could not record the Kubernetes Event on the target (create events permission?)');
    }
  }
}

/**
 * Decides `event` on the stored approval `id` and commits it, re-reading and deciding again when another caller
 * changed the approval in between (up to `attempts` times). Refusals come from the latest stored state.
 */
export async function commitEvent(
  deps: Pick<ExecutorDeps, 'store' | 'remediatorFor' | 'policyFor' | 'clock' | 'logger' | 'metrics'>,
  id: string,
  event: ApprovalEvent,
  extra: ApprovalUpdate = {},
  attempts = 5,
): Promise<CommitResult> {
  let last: StoredApproval | undefined;
  for (let i = 0; i < attempts; i++) {
    last = await deps.store.approvals.get(id);
    if (!last) {
      return { ok: false, refusal: refuse('invalid-transition', { type: 'approval-missing' }), approval: undefined };
    }
    const policy = deps.policyFor(last.target.cluster);
    if (!policy) {
      return {
        ok: false,
        refusal: refuse('action-not-allowed', { type: 'no-policy', cluster: last.target.cluster }),
        approval: last,
      };
    }
    const now = deps.clock();
    const d = decide(last, event, policy, now);
    if (!d.ok) return { ok: false, refusal: d, approval: last };
    const after = await commitTransition(deps, last, d, now, extra);
    if (after) return { ok: true, transition: d, approval: after, effects: d.effects };
  }
  return {
    ok: false,
    refusal: refuse('already-decided', { type: 'changed-concurrently' }),
    approval: last,
  };
}

async function safely(deps: ExecutorDeps, what: string, fn: () => Promise<void> | undefined): Promise<void> {
  try {
    await fn();
  } catch (err) {
    deps.logger.error({ err }, `${what} failed`);
  }
}

/**
 * Runs an `approved` approval: `approved → running` by compare-and-set (a caller that loses does nothing and gets
 * undefined), then the action, then `succeeded` or `failed`. Never throws for Kubernetes failures: they end the
 * approval in `failed` with the API server's message.
 * @param resume when true, the approval is already `running` (tokenwatch stopped, or ownership moved, while it
 *   ran): a restart first establishes whether its PATCH was applied (see `runRestart`) and sends it if not, then
 *   follows the rollout to its end.
 * @returns the final stored approval, or undefined when another caller runs it.
 */
export async function executeApproval(deps: ExecutorDeps, id: string, opts: { resume?: boolean } = {}): Promise<StoredApproval | undefined> {
  let approval: StoredApproval | undefined;
  if (opts.resume) {
    approval = await deps.store.approvals.get(id);
    if (approval?.state !== 'running') return undefined;
  } else {
    // The execution time is stored with the start (whole seconds: the `restartedAt` annotation has second
    // precision), before any Kubernetes write, so a resumed action can tell whether the PATCH happened.
    const started = await commitEvent(deps, id, { type: 'start' }, { startedAt: Math.floor(deps.clock() / 1000) * 1000 });
    if (!started.ok) return undefined;
    approval = started.approval;
    // Not awaited: a slow or rate-limited chat.update must not hold the Kubernetes write back (the message updates of
    // one approval are serialized by the Slack side, so the final update still lands last).
    const shown = approval;
    void safely(deps, 'approval message update', () => deps.hooks?.onApprovalChanged?.(shown));
  }
  const a = approval;
  const t = a.target;
  const log = deps.logger.child({ cluster: t.cluster, approval: a.id, action: a.action, target: objectLabel(t) });
  const rem = deps.remediatorFor(t.cluster);
  let error: string | undefined;
  if (!rem) {
    error = `no Kubernetes access to cluster ${t.cluster}`;
  } else if (a.action === 'restart' && isRestartableKind(t.kind)) {
    const r = await runRestart(deps, rem, a, { ...t, kind: t.kind }, opts.resume === true, log);
    if (r === INTERRUPTED) {
      log.info('stopping or no longer the owner of the cluster while following the rollout: left running for the next owner to follow');
      return await deps.store.approvals.get(a.id);
    }
    error = r;
  } else if (a.action === 'recreate-serviceaccount' && t.kind === 'ServiceAccount') {
    const r = await runRecreate(deps, rem, a, opts.resume === true, log);
    if (r === INTERRUPTED) return await deps.store.approvals.get(a.id);
    if (typeof r === 'string') error = r;
    else {
      log.info({ oldUid: r.oldUid, newUid: r.newUid, preserved: r.preserved }, 'ServiceAccount recreated');
      await safely(deps, 'recreate hook', async () => deps.hooks?.onRecreated?.((await deps.store.approvals.get(a.id))!, r));
    }
  } else {
    error = `cannot run a ${a.action} on a ${t.kind}`;
  }
  const end = await commitEvent(deps, a.id, error === undefined ? { type: 'succeed' } : { type: 'fail', error });
  const outcome = error === undefined ? 'succeeded' : 'failed';
  deps.metrics?.remediations.inc({ cluster: t.cluster, action: a.action, outcome });
  if (error !== undefined) log.error({ error }, `${a.action} failed`);
  else log.info(`${a.action} succeeded`);
  if (!end.ok) {
    log.warn({ refusal: end.refusal.reason, detail: end.refusal.detail.type }, 'could not record the end of the action');
    return await deps.store.approvals.get(a.id);
  }
  await safely(deps, 'approval message update', () => deps.hooks?.onApprovalChanged?.(end.approval));
  return end.approval;
}

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/**
 * ServiceAccount recreation in recorded steps, each stored before the next Kubernetes write:
 * 1. read the ServiceAccount; refuse ("changed since it was approved") when its uid or resourceVersion differs from
 *    the dry run the approvers saw, or it has finalizers; store the body to create (labels, annotations,
 *    ownerReferences, imagePullSecrets, automount) and the old uid;
 * 2. DELETE with the dry run's uid and resourceVersion as preconditions; store that it was deleted;
 * 3. POST the stored body.
 * Resumed after a crash, it establishes which step happened from the store and the API server (the old uid still
 * there: not deleted; a 409 on create with a new uid: already created) and does only the missing ones, so the
 * ServiceAccount exists at the end and is deleted at most once.
 */
async function runRecreate(
  deps: ExecutorDeps,
  rem: Remediator,
  a: StoredApproval,
  resume: boolean,
  log: Logger,
): Promise<RecreateResult | string | typeof INTERRUPTED> {
  const t = a.target;
  const ref = { kind: 'ServiceAccount' as const, namespace: t.namespace, name: t.name };
  const label = `ServiceAccount ${t.namespace}/${t.name}`;
  const dry = a.dryRun as PreflightRecord | null;
  let exec: ExecutionRecord = a.execution ?? {};
  try {
    if (exec.body === undefined) {
      const sa = await rem.readServiceAccount(ref);
      if (!sa) return `${label} no longer exists; nothing was deleted or created`;
      const uid = sa.metadata?.uid;
      const rv = sa.metadata?.resourceVersion;
      if ((dry?.uid !== undefined && uid !== dry.uid) || (dry?.resourceVersion !== undefined && rv !== dry.resourceVersion)) {
        return `${label} changed since it was approved (${uid !== dry?.uid ? `uid ${uid} ≠ ${dry?.uid}` : `resourceVersion ${rv} ≠ ${dry?.resourceVersion}`}); nothing was deleted. Request it again to review the current object.`;
      }
      if (sa.metadata?.finalizers?.length) {
        return `${label} has finalizers (${sa.metadata.finalizers.join(', ')}); nothing was deleted`;
      }
      exec = { body: recreatedServiceAccount(sa), ...(uid !== undefined ? { oldUid: uid } : {}) };
      await record(deps, a, exec);
    }
    if (!exec.deleted) {
      let gone = false;
      if (resume) {
        const now = await rem.readServiceAccount(ref);
        gone = !now || now.metadata?.uid !== exec.oldUid;
      }
      if (!gone) {
        if (deps.signal?.aborted || deps.owns?.(a.target.cluster) === false) return INTERRUPTED;
        try {
          await rem.deleteServiceAccount(ref, { uid: exec.oldUid, resourceVersion: dry?.resourceVersion });
        } catch (err) {
          if (err instanceof KubeCallError && err.status === 409) {
            return `${label} changed since it was approved (${err.message}); nothing was deleted. Request it again to review the current object.`;
          }
          throw err;
        }
      } else {
        log.info('resumed: the ServiceAccount was already deleted; not deleting again');
      }
      exec = { ...exec, deleted: true };
      await record(deps, a, { deleted: true });
    }
    const body = exec.body as V1ServiceAccount;
    let created: V1ServiceAccount;
    try {
      created = await rem.createServiceAccount(t.namespace, body);
    } catch (err) {
      const existing = err instanceof KubeCallError && err.status === 409 ? await rem.readServiceAccount(ref) : undefined;
      if (!existing || existing.metadata?.uid === exec.oldUid) {
        return `${message(err)} (it was deleted; recreate it from: ${JSON.stringify(body)})`;
      }
      // Another client created it between our DELETE and POST (or this approval did, before a restart): only an
      // object equal to the stored body is ours to report as recreated.
      const diff = bodyDifferences(body, existing);
      if (diff.length > 0) {
        const text = `${label} was created by someone else, with different ${diff.join('; ')}, after tokenwatch deleted it and before it could create it again; tokenwatch did not recreate it. Check who created it (the audit log has the request) and delete it if it is not yours.`;
        log.error({ uid: existing.metadata?.uid, differences: diff }, 'the ServiceAccount was created by someone else between the DELETE and the POST');
        await safely(deps, 'recreation conflict alert', async () => deps.hooks?.onAlarm?.(await deps.store.approvals.get(a.id) ?? a, text));
        return text;
      }
      log.info('the ServiceAccount exists again with exactly the stored body (created by this approval before a restart)');
      created = existing;
    }
    return { oldUid: exec.oldUid, newUid: created.metadata?.uid, preserved: preservedOf(body) };
  } catch (err) {
    return message(err);
  }
}

/**
 * How `existing` differs from the body a recreation would create, per field a recreation keeps (labels,
 * annotations, ownerReferences, imagePullSecrets, automountServiceAccountToken), e.g.
 * `annotations: eks.amazonaws.com/role-arn=arn:aws:iam::999999999999:role/x (expected …=arn:…:role/y)`. Empty when equal.
 */
export function bodyDifferences(body: V1ServiceAccount, existing: V1ServiceAccount): string[] {
  const out: string[] = [];
  const maps = (name: 'labels' | 'annotations') => {
    const want = body.metadata?.[name] ?? {};
    const got = existing.metadata?.[name] ?? {};
    const keys = [...new Set([...Object.keys(want), ...Object.keys(got)])].sort().filter((k) => want[k] !== got[k]);
    if (keys.length === 0) return;
    const shown = keys.map((k) => `${k}=${got[k] ?? '(absent)'} (expected ${want[k] ?? '(absent)'})`);
    out.push(`${name}: ${shown.join(', ')}`);
  };
  maps('annotations');
  maps('labels');
  const owners = (sa: V1ServiceAccount) => (sa.metadata?.ownerReferences ?? []).map((o) => `${o.kind}/${o.name}/${o.uid}`).sort().join(',');
  if (owners(body) !== owners(existing)) out.push(`ownerReferences: ${owners(existing) || '(none)'} (expected ${owners(body) || '(none)'})`);
  const secrets = (sa: V1ServiceAccount) => (sa.imagePullSecrets ?? []).map((x) => x.name ?? '').sort().join(',');
  if (secrets(body) !== secrets(existing)) out.push(`imagePullSecrets: ${secrets(existing) || '(none)'} (expected ${secrets(body) || '(none)'})`);
  if ((body.automountServiceAccountToken ?? null) !== (existing.automountServiceAccountToken ?? null)) {
    out.push(`automountServiceAccountToken: ${String(existing.automountServiceAccountToken ?? '(unset)')} (expected ${String(body.automountServiceAccountToken ?? '(unset)')})`);
  }
  return out;
}

/** Stores what a running action did (merged into its execution record) without changing its state. */
async function record(deps: ExecutorDeps, a: StoredApproval, what: ExecutionRecord): Promise<void> {
  const current = await deps.store.approvals.get(a.id);
  if (current?.state !== 'running') return;
  await deps.store.approvals.transition(a.id, 'running', 'running', { execution: { ...current.execution, ...what } }, deps.clock());
}

/** How often the final progress edit is tried before it is left to the next tick (attempts, with doubling waits). */
export const FINAL_PROGRESS_ATTEMPTS = 5;

/** JSON of a progress as recorded in {@link ExecutionRecord.shown}. */
export function progressKey(p: RolloutProgress): string {
  return JSON.stringify(p);
}

/**
 * Shows `p` in the progress message through the hook; up to `attempts` tries with doubling waits from
 * `progressRetryMs`. @returns whether Slack accepted it (true when there is no hook).
 */
async function showProgress(deps: ExecutorDeps, a: StoredApproval, p: RolloutProgress, startedAt: number, attempts: number, log: Logger): Promise<boolean> {
  const hook = deps.hooks?.onProgress;
  if (!hook) return true;
  const sleep = deps.sleep ?? ((ms: number) => delay(ms));
  for (let i = 0; ; i++) {
    try {
      await hook(a, p, startedAt);
      return true;
    } catch (err) {
      if (i + 1 >= attempts) {
        log.warn({ err, attempts }, 'the progress message was not updated; trying again at the next tick');
        return false;
      }
      await sleep(backoffDelay(deps.progressRetryMs ?? 1000, i));
    }
  }
}

/**
 * The rollout restart and its progress; returns an error message, or undefined on success.
 *
 * Every write carries the uid the approvers saw in the dry run (`metadata.uid` in the strategic-merge patch, which
 * the API server refuses to change), so a workload deleted and recreated under the same name since the approval is
 * not patched: that ends as "the <kind> was replaced since it was approved".
 *
 * When resuming (`resume`), first establishes whether its own PATCH happened: recorded in the store, or the
 * workload (same uid) carries exactly the `restartedAt` value this approval sends (its `startedAt`, stored before
 * the PATCH). Any other value — an older one, or a later one written by someone else or a replica with a fast clock —
 * proves nothing, so the PATCH is sent (with the same value): nothing is reported done that the API server did not do.
 *
 * Progress is recorded as shown only once Slack accepted it ({@link ExecutionRecord.shown}), so an edit that failed is
 * sent again on the next read; the final one is tried {@link FINAL_PROGRESS_ATTEMPTS} times and, if Slack still
 * refuses, stored as {@link ExecutionRecord.pendingProgress} for the next tick.
 */
async function runRestart(
  deps: ExecutorDeps,
  rem: Remediator,
  a: StoredApproval,
  target: ActionTarget & { kind: RestartableKind },
  resume: boolean,
  log: Logger,
): Promise<string | undefined | typeof INTERRUPTED> {
  const sleep = deps.sleep ?? ((ms: number) => delay(ms));
  const ref = { kind: target.kind, namespace: target.namespace, name: target.name };
  // Rows of older versions have no startedAt: their `updatedAt` (the start transition) is the best estimate.
  const startedAt = a.startedAt ?? Math.floor(a.updatedAt / 1000) * 1000;
  const sent = restartedAtValue(new Date(startedAt));
  const uid = (a.dryRun as PreflightRecord | null)?.uid;
  let patched = a.execution?.patched !== undefined;
  if (!patched && resume) {
    // A process stopped (kill -9, ownership change) after `running` was stored: did its PATCH reach the API server?
    let seen: { value?: string; uid?: string };
    try {
      seen = await rem.restartedAt(ref);
    } catch (err) {
      return `cannot establish whether the restart was sent: ${message(err)}`;
    }
    if (seen.value === sent && (uid === undefined || seen.uid === uid)) {
      patched = true;
      log.info({ restartedAt: sent }, 'resumed: the workload carries the exact restartedAt value this approval sends, so its PATCH was applied; not sending it again');
      await record(deps, a, { patched: { at: deps.clock() } });
    } else {
      log.warn({ found: seen.value ?? null, sends: sent }, 'resumed: the workload does not carry this approval\'s restartedAt value, so its PATCH was never applied; sending it now');
    }
  }
  if (!patched) {
    // A replica that is stopping or lost the cluster sends nothing; the next owner resumes from here.
    if (deps.signal?.aborted || deps.owns?.(a.target.cluster) === false) return INTERRUPTED;
    try {
      const r = await rem.restart(ref, new Date(startedAt), uid);
      log.info({ generation: r.generation }, 'rollout restart patch sent');
      await record(deps, a, { patched: { ...(r.generation !== undefined ? { generation: r.generation } : {}), at: deps.clock() } });
    } catch (err) {
      if (isUidMismatch(err)) {
        return `the ${objectLabel(target)} was replaced since it was approved (the approvers saw uid ${uid}; the API server holds another object under that name), so nothing was patched. Request it again to review the current object.`;
      }
      return message(err);
    }
  }
  let shownKey = a.execution?.shown;
  for (;;) {
    let p: RolloutProgress;
    try {
      p = await rem.rolloutProgress(ref);
    } catch (err) {
      return `rollout status unavailable: ${message(err)}`;
    }
    const timedOut = !p.done && deps.clock() - startedAt >= deps.rolloutTimeoutMs;
    // Until the controller observed the new generation, `updated*` counts refer to the previous template.
    const current = p.observed ? p : { ...p, updated: 0 };
    const shown = timedOut ? { ...current, timedOut: true } : current;
    const key = progressKey(shown);
    const final = p.done || timedOut;
    if (key !== shownKey) {
      if (await showProgress(deps, a, shown, startedAt, final ? FINAL_PROGRESS_ATTEMPTS : 1, log)) {
        shownKey = key;
        await record(deps, a, { shown: key });
      } else if (final) {
        await record(deps, a, { pendingProgress: shown });
        await safely(deps, 'progress retry hook', async () => deps.hooks?.onProgressPending?.(await deps.store.approvals.get(a.id) ?? a));
      }
    }
    if (p.done) return undefined;
    if (deps.signal?.aborted || deps.owns?.(a.target.cluster) === false) return INTERRUPTED;
    if (timedOut) {
      return `the rollout did not complete within ${Math.round(deps.rolloutTimeoutMs / 1000)} s (${current.updated} of ${current.desired} pods updated, ${current.ready} ready)`;
    }
    await sleep(deps.pollIntervalMs);
  }
}

/**
 * Sends the final progress of an ended restart that Slack did not accept yet ({@link ExecutionRecord.pendingProgress})
 * once more; on success records it as shown. Called on each tick by the Slack side. @returns whether it is shown now.
 */
export async function resendPendingProgress(deps: ExecutorDeps, id: string): Promise<boolean> {
  const a = await deps.store.approvals.get(id);
  const pending = a?.execution?.pendingProgress;
  if (!a || !pending) return true;
  const log = deps.logger.child({ approval: id });
  const startedAt = a.startedAt ?? Math.floor(a.updatedAt / 1000) * 1000;
  if (!(await showProgress(deps, a, pending, startedAt, 1, log))) return false;
  const now = await deps.store.approvals.get(id);
  if (now) {
    const { pendingProgress: _done, ...rest } = now.execution ?? {};
    await deps.store.approvals.transition(id, now.state, now.state, { execution: { ...rest, shown: progressKey(pending) } }, deps.clock());
  }
  return true;
}
