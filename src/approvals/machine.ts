/**
 * The approval state machine for remediation actions (docs/design/architecture.md "Slack and approvals" and "Security").
 *
 * Pure: no I/O, no clock. Every function takes the current time `now` (epoch ms UTC) as a parameter and
 * returns the next state plus a list of {@link Effect}s for the caller (the Slack/remediation shell) to
 * carry out. Persisting is the caller's job: it applies the returned `patch` with the store's
 * compare-and-set `transitionApproval(id, from, to, patch, at)`, so that of ten simultaneous clicks exactly
 * one wins; the losers re-read the approval and call {@link decide} again, which then refuses with
 * `already-decided` (its detail carries the approval as it now stands, to say who decided).
 *
 * ## Transitions
 *
 * | from        | event              | guard                                         | to          | effects |
 * |-------------|--------------------|-----------------------------------------------|-------------|---------|
 * | (none)      | request            | {@link canRequest}                            | `requested` | action-log, kube-event |
 * | `requested` | approve(user)      | allowed approver, not requester*, first vote, now < expiresAt, approvals+1 < required | `requested` | action-log, update-approval-message |
 * | `requested` | approve(user)      | same, approvals+1 ≥ required                  | `approved`  | action-log, kube-event, update-approval-message, execute |
 * | `requested` | reject(user)       | allowed approver or the requester, now < expiresAt | `rejected` | action-log, kube-event, update-approval-message |
 * | `requested` | expire             | now ≥ expiresAt                               | `expired`   | action-log, kube-event, update-approval-message |
 * | `requested` | fail(error)        | (failed server-side dry run stops the flow)   | `failed`    | action-log, kube-event (Warning), update-approval-message |
 * | `approved`  | start              | —                                             | `running`   | action-log, kube-event |
 * | `approved`  | fail(error)        | (could not start, e.g. precondition)          | `failed`    | action-log, kube-event (Warning), update-approval-message |
 * | `running`   | succeed            | —                                             | `succeeded` | action-log, kube-event, update-approval-message |
 * | `running`   | fail(error)        | —                                             | `failed`    | action-log, kube-event (Warning), update-approval-message |
 *
 * \* unless `policy.allowSelfApproval`. One reject rejects (a single deny always denies; docs/design/prior-art.md).
 * A request expires at exactly `expiresAt` (`now >= expiresAt`). `succeeded`, `failed`, `rejected` and
 * `expired` are terminal. Any other (state, event) pair is refused. Votes travel in `patch.votes`; a succeeded
 * restart or recreation is verified by the verifier after later polls (src/remediation/verify.ts), not by an effect.
 */
import {
  isListed,
  namespaceAllowed,
  requiredApprovalsFor,
  type ApprovalPolicy,
} from './policy.js';
import { actionNoun, describeTarget, isRestartableKind, type ActionKind, type RestartableKind } from '../core/actions.js';

/** Approval states (docs/design/architecture.md "Slack and approvals"): `requested → approved → running → succeeded | failed`, or `rejected | expired`. */
export type ApprovalState = 'requested' | 'approved' | 'running' | 'succeeded' | 'failed' | 'rejected' | 'expired';

/** Remediation action kinds (defined once, in ./kinds.ts). */
export type { ActionKind };

/** Kinds of object an action can target: a restartable workload (src/core/actions.ts) or a ServiceAccount. */
export type TargetKind = RestartableKind | 'ServiceAccount';

/** The exact object an action changes, as stored server-side (never read from a button payload). */
export interface ActionTarget {
  cluster: string;
  kind: TargetKind;
  namespace: string;
  name: string;
  /** The finding the action was requested from. */
  findingId: string;
}

/** One vote on an approval. `at` is epoch ms UTC. */
export interface Vote {
  user: string;
  vote: 'approve' | 'reject';
  at: number;
  /** Optional reason given with a reject. */
  reason?: string;
}

/** Result of the server-side dry run (`?dryRun=All`) made before the approval message is posted. */
export interface DryRunResult {
  ok: boolean;
  /** e.g. `daemonsets.apps "kube-multus-ds" is forbidden: …` on failure, or a short summary on success. */
  message: string;
  /** Epoch ms UTC. */
  at: number;
}

/** An approval request and its votes. Times are epoch ms UTC. */
export interface Approval {
  /** Opaque id (also what the Approve/Reject buttons carry). */
  id: string;
  action: ActionKind;
  target: ActionTarget;
  /** Slack user id of the requester. */
  requester: string;
  createdAt: number;
  /** The request is refused from this instant on (`now >= expiresAt`). */
  expiresAt: number;
  /** Distinct approvals needed (1, or the policy's `protectedApprovals` for protected namespaces). */
  requiredApprovals: number;
  votes: Vote[];
  state: ApprovalState;
  dryRun: DryRunResult | null;
  /** Error message of a failed action (state `failed`), else null/undefined. */
  error?: string | null;
  updatedAt: number;
}

/** Events that move an approval. `userGroups` = Slack user-group ids the clicking user belongs to. */
export type ApprovalEvent =
  | {
      type: 'approve';
      user: string;
      userGroups?: readonly string[];
      /**
       * The policy's user groups each earlier approver belongs to now (read when this vote is cast): earlier votes are
       * re-checked against the approvers in force (see {@link voidApprovals}). A voter absent here has no groups.
       */
      voterGroups?: Readonly<Record<string, readonly string[]>>;
    }
  | { type: 'reject'; user: string; userGroups?: readonly string[]; reason?: string }
  | { type: 'expire' }
  | { type: 'start' }
  | { type: 'succeed' }
  | { type: 'fail'; error: string };

/** Event constructors, e.g. `decide(a, approvalEvent.approve('U2', ['S1']), policy, now)`. */
export const approvalEvent = {
  approve: (user: string, userGroups: readonly string[] = [], voterGroups?: Readonly<Record<string, readonly string[]>>): ApprovalEvent =>
    voterGroups === undefined ? { type: 'approve', user, userGroups } : { type: 'approve', user, userGroups, voterGroups },
  reject: (user: string, reason?: string, userGroups: readonly string[] = []): ApprovalEvent =>
    reason === undefined ? { type: 'reject', user, userGroups } : { type: 'reject', user, userGroups, reason },
  expire: (): ApprovalEvent => ({ type: 'expire' }),
  start: (): ApprovalEvent => ({ type: 'start' }),
  succeed: (): ApprovalEvent => ({ type: 'succeed' }),
  fail: (error: string): ApprovalEvent => ({ type: 'fail', error }),
} as const;

/**
 * Why a click or event is refused. `invalid-transition` is for system events (`start`, `succeed`, `fail`,
 * `expire`) arriving in a state that does not accept them, e.g. `expire` before `expiresAt`.
 */
export type RefusalReason =
  | 'not-an-approver'
  | 'self-approval'
  | 'already-voted'
  | 'expired'
  | 'already-decided'
  | 'action-not-allowed'
  | 'namespace-not-allowed'
  | 'not-a-requester'
  | 'invalid-transition';

/**
 * The facts of a refusal, one variant per situation, for the caller to word (the Slack wording is
 * `refusalText` in `src/slack/blocks/refusal.ts`; this module carries no chat syntax).
 */
export type RefusalDetail =
  /** The action does not apply to this kind of object (e.g. a ServiceAccount recreation of a DaemonSet). */
  | { type: 'kind-mismatch'; action: ActionKind; targetKind: TargetKind }
  /** The cluster's policy does not allow the action; `allowed` are the actions it does allow. */
  | { type: 'action-not-in-policy'; action: ActionKind; cluster: string; allowed: ActionKind[] }
  /** The cluster has no approval policy at all. */
  | { type: 'no-policy'; cluster: string }
  /** The cluster's policy does not allow actions in the namespace. */
  | { type: 'namespace-not-in-policy'; cluster: string; namespace: string }
  /** The user may not request actions in the cluster. */
  | { type: 'not-a-requester'; cluster: string }
  /** The requester approves their own request. */
  | { type: 'self-approval'; action: ActionKind }
  /** The user is not an approver; `approvers` are the policy's approvers (user or user-group ids). */
  | { type: 'not-an-approver'; action: ActionKind; cluster: string; vote: Vote['vote']; approvers: string[] }
  /** The user already approved; `left` approvals are still needed. */
  | { type: 'already-approved'; action: ActionKind; vote: Vote['vote']; left: number }
  /** The request expired before the vote. */
  | { type: 'expired'; action: ActionKind; vote: Vote['vote']; expiresAt: number }
  /** The approval is no longer `requested` (or no longer `approved` for `start`): `approval` is how it stands. */
  | { type: 'decided'; attempted: 'vote' | 'expire' | 'start' | 'fail'; approval: Approval }
  /** `expire` before the expiry time. */
  | { type: 'not-due'; action: ActionKind; expiresAt: number }
  /** `start` while the request still waits for approval. */
  | { type: 'not-approved-yet'; action: ActionKind }
  /** `succeed` while not running. */
  | { type: 'not-running'; action: ActionKind; state: ApprovalState }
  /** The approval kept changing while a click was being processed. */
  | { type: 'changed-concurrently' }
  /** The approval does not exist (any more). */
  | { type: 'approval-missing' };

/** A refusal: a stable {@link RefusalReason} and the {@link RefusalDetail} to word it from. */
export interface Refusal {
  ok: false;
  reason: RefusalReason;
  detail: RefusalDetail;
}

/** Kubernetes Event `reason` per action (docs/design/architecture.md "Slack and approvals": the target gets a Kubernetes Event, `reason: TokenwatchRestart` etc.). */
export const KUBE_EVENT_REASON: Record<ActionKind, string> = {
  restart: 'TokenwatchRestart',
  'recreate-serviceaccount': 'TokenwatchRecreateServiceAccount',
  snooze: 'TokenwatchSnooze',
};

/** Work for the caller after a transition was persisted (only after its compare-and-set succeeded). */
export type Effect =
  /** Write one action-log row: who, when (`now`), what, result. `actor` is null for system events. */
  | { type: 'action-log'; from: ApprovalState | null; to: ApprovalState; actor: string | null; summary: string }
  /** Create a Kubernetes Event on the target object; `message` ≤ 1024 chars (core/v1 Event note limit). */
  | { type: 'kube-event'; reason: string; eventType: 'Normal' | 'Warning'; message: string }
  /** Re-render the approval message (votes so far, or the decision without buttons) with chat.update. */
  | { type: 'update-approval-message' }
  /** Quorum reached: run the action now (then send `start`, and `succeed`/`fail`). */
  | { type: 'execute' };

/** Fields to write with the store's compare-and-set (state moves `from` → `patch.state`). */
export interface ApprovalPatch {
  state: ApprovalState;
  votes?: Vote[];
  error?: string | null;
  updatedAt: number;
}

/** An accepted event. `next` may equal the current state (a vote below quorum). */
export interface Transition {
  ok: true;
  from: ApprovalState;
  next: ApprovalState;
  patch: ApprovalPatch;
  effects: Effect[];
}

export type Decision = Transition | Refusal;

/** `2026-11-29 14:05 UTC` from epoch ms. */
export function formatUtc(ms: number): string {
  const iso = new Date(ms).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
}

/** A {@link Refusal} with the given reason and facts. */
export function refuse(reason: RefusalReason, detail: RefusalDetail): Refusal {
  return { ok: false, reason, detail };
}

/** Whether `approval` is past its expiry at `now` (`now >= expiresAt`). */
export function isExpired(approval: Pick<Approval, 'expiresAt'>, now: number): boolean {
  return now >= approval.expiresAt;
}

/**
 * Earlier approvals that no longer count under `policy` (the approvers in force now, e.g. after a config change and
 * a restart): voters not listed among `policy.approvers` directly or through `voterGroups[user]` (their user groups
 * now), and the requester's own approval when self-approval is no longer allowed. Their votes stay recorded but are
 * void: {@link decide} does not count them toward the quorum. Pure.
 */
export function voidApprovals(approval: Pick<Approval, 'votes' | 'requester'>, policy: ApprovalPolicy, voterGroups: Readonly<Record<string, readonly string[]>> = {}): string[] {
  return approvalsOf(approval).filter(
    (u) => !isListed(u, voterGroups[u] ?? [], policy.approvers) || (u === approval.requester && !policy.allowSelfApproval),
  );
}

/** Distinct users who voted approve. */
export function approvalsOf(approval: Pick<Approval, 'votes'>): string[] {
  return [...new Set(approval.votes.filter((v) => v.vote === 'approve').map((v) => v.user))];
}

/** Whether `kind` is a valid target for `action`. */
function kindFits(action: ActionKind, kind: TargetKind): boolean {
  if (action === 'restart') return isRestartableKind(kind);
  if (action === 'recreate-serviceaccount') return kind === 'ServiceAccount';
  return true;
}

function policyRefusal(action: ActionKind, target: ActionTarget, policy: ApprovalPolicy): Refusal | undefined {
  if (!kindFits(action, target.kind)) {
    return refuse('action-not-allowed', { type: 'kind-mismatch', action, targetKind: target.kind });
  }
  if (!policy.actions.includes(action)) {
    return refuse('action-not-allowed', { type: 'action-not-in-policy', action, cluster: target.cluster, allowed: [...policy.actions] });
  }
  if (!namespaceAllowed(target.namespace, policy)) {
    return refuse('namespace-not-allowed', { type: 'namespace-not-in-policy', cluster: target.cluster, namespace: target.namespace });
  }
  return undefined;
}

/**
 * Whether `user` may request `action` on `target`.
 * @param userGroups Slack user-group ids `user` belongs to.
 * @returns `{ ok: true }` or a refusal with reason `not-a-requester`, `action-not-allowed` or `namespace-not-allowed`.
 */
export function canRequest(
  user: string,
  action: ActionKind,
  target: ActionTarget,
  policy: ApprovalPolicy,
  userGroups: readonly string[],
): { ok: true } | Refusal {
  if (!isListed(user, userGroups, policy.requesters, true)) {
    return refuse('not-a-requester', { type: 'not-a-requester', cluster: target.cluster });
  }
  return policyRefusal(action, target, policy) ?? { ok: true };
}

/** Input of {@link createApproval}. */
export interface ApprovalRequest {
  /** Opaque id chosen by the caller (e.g. random 128-bit, base64url). */
  id: string;
  action: ActionKind;
  target: ActionTarget;
  requester: string;
  requesterGroups: readonly string[];
  dryRun?: DryRunResult | null;
}

/**
 * A new approval in state `requested`, expiring `policy.expiryMs` after `now`, needing
 * {@link requiredApprovalsFor} approvals; or the refusal from {@link canRequest}.
 */
export function createApproval(
  req: ApprovalRequest,
  policy: ApprovalPolicy,
  now: number,
): { ok: true; approval: Approval; effects: Effect[] } | Refusal {
  const allowed = canRequest(req.requester, req.action, req.target, policy, req.requesterGroups);
  if (!allowed.ok) return allowed;
  const approval: Approval = {
    id: req.id,
    action: req.action,
    target: { ...req.target },
    requester: req.requester,
    createdAt: now,
    expiresAt: now + policy.expiryMs,
    requiredApprovals: requiredApprovalsFor(req.target.namespace, policy),
    votes: [],
    state: 'requested',
    dryRun: req.dryRun ?? null,
    error: null,
    updatedAt: now,
  };
  const what = `${actionNoun(req.action)} of ${describeTarget(req.target)}`;
  return {
    ok: true,
    approval,
    effects: [
      { type: 'action-log', from: null, to: 'requested', actor: req.requester, summary: `${what} requested` },
      kubeEvent(approval, 'Normal', `${what} requested by ${req.requester}; expires ${formatUtc(approval.expiresAt)}`),
    ],
  };
}

function kubeEvent(a: Approval, eventType: 'Normal' | 'Warning', message: string): Effect {
  const full = `${message} (tokenwatch approval ${a.id})`;
  return {
    type: 'kube-event',
    reason: KUBE_EVENT_REASON[a.action],
    eventType,
    message: full.length > 1024 ? `${full.slice(0, 1023)}…` : full,
  };
}

function transition(a: Approval, next: ApprovalState, now: number, effects: Effect[], extra: Partial<ApprovalPatch> = {}): Transition {
  return { ok: true, from: a.state, next, patch: { state: next, updatedAt: now, ...extra }, effects };
}

function voteRefusalForState(a: Approval, vote: Vote['vote'], now: number): Refusal | undefined {
  if (a.state === 'expired' || (a.state === 'requested' && isExpired(a, now))) {
    return refuse('expired', { type: 'expired', action: a.action, vote, expiresAt: a.expiresAt });
  }
  if (a.state !== 'requested') {
    return refuse('already-decided', { type: 'decided', attempted: 'vote', approval: a });
  }
  return undefined;
}

/**
 * Decides what an event does to an approval at time `now` (epoch ms UTC). Pure.
 *
 * Refusals (reason → when):
 * - `already-decided`: the state is not `requested` (the detail carries the approval, to say who decided);
 * - `expired`: `now >= expiresAt` or state `expired`;
 * - `action-not-allowed` / `namespace-not-allowed`: the policy (re-checked at vote time) no longer allows it;
 * - `self-approval`: the requester approves and `allowSelfApproval` is false;
 * - `not-an-approver`: the user is not in `policy.approvers` (directly or via `userGroups`); the requester may
 *   still reject (withdraw) their own request;
 * - `already-voted`: the user already approved (quorum of distinct users; one vote per user, so an
 *   approval cannot later become a reject);
 * - `invalid-transition`: a system event in a state that does not take it (see the table above).
 */
export function decide(approval: Approval, event: ApprovalEvent, policy: ApprovalPolicy, now: number): Decision {
  const a = approval;
  const what = `${actionNoun(a.action)} of ${describeTarget(a.target)}`;
  switch (event.type) {
    case 'approve':
    case 'reject': {
      const stateRefusal = voteRefusalForState(a, event.type, now);
      if (stateRefusal) return stateRefusal;
      const groups = event.userGroups ?? [];
      const isRequester = event.user === a.requester;
      const isApprover = isListed(event.user, groups, policy.approvers);
      if (event.type === 'approve') {
        const pol = policyRefusal(a.action, a.target, policy);
        if (pol) return pol;
        if (isRequester && !policy.allowSelfApproval) {
          return refuse('self-approval', { type: 'self-approval', action: a.action });
        }
        if (!isApprover) return notAnApprover(a, policy, 'approve');
        if (approvalsOf(a).includes(event.user)) return alreadyApproved(a, 'approve');
        const vote: Vote = { user: event.user, vote: 'approve', at: now };
        const votes = [...a.votes, vote];
        // Every earlier vote is re-checked against the approvers in force now: a removed approver's vote is void.
        const voided = new Set(voidApprovals(a, policy, event.voterGroups ?? {}));
        const counted = [...new Set(votes.filter((v) => v.vote === 'approve' && !voided.has(v.user)).map((v) => v.user))];
        const count = counted.length;
        const voidNote = voided.size > 0 ? `; void (no longer allowed to approve): ${[...voided].join(', ')}` : '';
        if (count < a.requiredApprovals) {
          return transition(a, 'requested', now, [
            {
              type: 'action-log',
              from: 'requested',
              to: 'requested',
              actor: event.user,
              summary: `${what}: approval ${count} of ${a.requiredApprovals}${voidNote}`,
            },
            { type: 'update-approval-message' },
          ], { votes });
        }
        const by = counted.join(', ');
        return transition(a, 'approved', now, [
          { type: 'action-log', from: 'requested', to: 'approved', actor: event.user, summary: `${what} approved${voidNote}` },
          kubeEvent(a, 'Normal', `${what} approved by ${by}; requested by ${a.requester}`),
          { type: 'update-approval-message' },
          { type: 'execute' },
        ], { votes });
      }
      // reject
      if (!isApprover && !isRequester) return notAnApprover(a, policy, 'reject');
      // One vote per user (the store keys votes by user): an approval is not turned into a reject.
      if (approvalsOf(a).includes(event.user)) return alreadyApproved(a, 'reject');
      const vote: Vote =
        event.reason !== undefined && event.reason !== ''
          ? { user: event.user, vote: 'reject', at: now, reason: event.reason }
          : { user: event.user, vote: 'reject', at: now };
      return transition(a, 'rejected', now, [
        {
          type: 'action-log',
          from: 'requested',
          to: 'rejected',
          actor: event.user,
          summary: `${what} ${isRequester ? 'withdrawn' : 'rejected'}${vote.reason ? `: ${vote.reason}` : ''}`,
        },
        kubeEvent(a, 'Normal', `${what} ${isRequester ? 'withdrawn' : 'rejected'} by ${event.user}${vote.reason ? `: ${vote.reason}` : ''}`),
        { type: 'update-approval-message' },
      ], { votes: [...a.votes, vote] });
    }
    case 'expire': {
      if (a.state !== 'requested') {
        return refuse('already-decided', { type: 'decided', attempted: 'expire', approval: a });
      }
      if (!isExpired(a, now)) {
        return refuse('invalid-transition', { type: 'not-due', action: a.action, expiresAt: a.expiresAt });
      }
      return transition(a, 'expired', now, [
        { type: 'action-log', from: 'requested', to: 'expired', actor: null, summary: `${what} expired without a decision` },
        kubeEvent(a, 'Normal', `${what} expired without a decision`),
        { type: 'update-approval-message' },
      ]);
    }
    case 'start': {
      if (a.state !== 'approved') {
        return a.state === 'requested'
          ? refuse('invalid-transition', { type: 'not-approved-yet', action: a.action })
          : refuse('already-decided', { type: 'decided', attempted: 'start', approval: a });
      }
      return transition(a, 'running', now, [
        { type: 'action-log', from: 'approved', to: 'running', actor: null, summary: `${what} started` },
        kubeEvent(a, 'Normal', `${what} started`),
      ]);
    }
    case 'succeed': {
      if (a.state !== 'running') {
        return refuse('invalid-transition', { type: 'not-running', action: a.action, state: a.state });
      }
      const effects: Effect[] = [
        { type: 'action-log', from: 'running', to: 'succeeded', actor: null, summary: `${what} succeeded` },
        kubeEvent(a, 'Normal', `${what} succeeded`),
        { type: 'update-approval-message' },
      ];
      return transition(a, 'succeeded', now, effects);
    }
    case 'fail': {
      if (a.state !== 'running' && a.state !== 'approved' && a.state !== 'requested') {
        return refuse('invalid-transition', { type: 'decided', attempted: 'fail', approval: a });
      }
      return transition(
        a,
        'failed',
        now,
        [
          { type: 'action-log', from: a.state, to: 'failed', actor: null, summary: `${what} failed: ${event.error}` },
          kubeEvent(a, 'Warning', `${what} failed: ${event.error}`),
          { type: 'update-approval-message' },
        ],
        { error: event.error },
      );
    }
  }
}

/** The refusal of a vote by someone who may not cast it; it names who may. */
function notAnApprover(a: Approval, policy: ApprovalPolicy, vote: Vote['vote']): Refusal {
  return refuse('not-an-approver', { type: 'not-an-approver', action: a.action, cluster: a.target.cluster, vote, approvers: approversShown(a, policy) });
}

/** The refusal of a second vote by a user who approved already; it says how many approvals are still needed. */
function alreadyApproved(a: Approval, vote: Vote['vote']): Refusal {
  return refuse('already-voted', { type: 'already-approved', action: a.action, vote, left: a.requiredApprovals - approvalsOf(a).length });
}

/**
 * The approvers a refusal names: the policy's approvers (users and user groups) without the requester, who may
 * not approve their own request unless `allowSelfApproval`.
 */
function approversShown(a: Pick<Approval, 'requester'>, policy: Pick<ApprovalPolicy, 'approvers' | 'allowSelfApproval'>): string[] {
  return policy.allowSelfApproval ? [...policy.approvers] : policy.approvers.filter((u) => u !== a.requester);
}
