/**
 * The wording of the approval machine's refusals (`src/approvals/machine.ts` returns a coded
 * {@link RefusalReason} with its {@link RefusalDetail}; the sentence, with Slack mentions, is made here). Pure.
 */
import { formatUtc, type Approval, type Refusal, type RefusalDetail } from '../../approvals/machine.js';
import { actionNoun } from '../../core/actions.js';
import { mention } from './text.js';

/** `a`, `a and b`, `a, b and c`. */
export function joinAnd(items: readonly string[]): string {
  if (items.length <= 1) return items.join('');
  return `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`;
}

/** At most this many approvers are named in a refusal; more read "and N others". */
const MAX_APPROVERS_NAMED = 10;

function approverMentions(ids: readonly string[]): string[] {
  if (ids.length <= MAX_APPROVERS_NAMED) return ids.map(mention);
  const shown = ids.slice(0, MAX_APPROVERS_NAMED - 1).map(mention);
  return [...shown, `${ids.length - shown.length} others`];
}

/**
 * Who decided and how, as a sentence fragment for a state that no longer takes votes, e.g.
 * `approved by <@U2> at 2026-11-29 14:10 UTC and is now running`.
 */
export function describeDecision(approval: Approval): string {
  const approvers = approval.votes.filter((v) => v.vote === 'approve');
  const approvedBy =
    approvers.length > 0
      ? `approved by ${joinAnd(approvers.map((v) => mention(v.user)))} at ${formatUtc(approvers[approvers.length - 1]!.at)}`
      : '';
  switch (approval.state) {
    case 'requested':
      return 'still waiting for approval';
    case 'approved':
      return `${approvedBy} and is about to run`;
    case 'running':
      return `${approvedBy} and is now running`;
    case 'succeeded':
      return `${approvedBy} and has succeeded`;
    case 'failed':
      return approvedBy
        ? `${approvedBy} and has failed${approval.error ? ` (${approval.error})` : ''}`
        : `stopped before approval: it failed${approval.error ? ` (${approval.error})` : ''}`;
    case 'rejected': {
      const r = approval.votes.find((v) => v.vote === 'reject');
      const verb = r && r.user === approval.requester ? 'withdrawn' : 'rejected';
      return r
        ? `${verb} by ${mention(r.user)} at ${formatUtc(r.at)}${r.reason ? ` (“${r.reason}”)` : ''}`
        : 'rejected';
    }
    case 'expired':
      return `expired at ${formatUtc(approval.expiresAt)} without a decision`;
  }
}

/**
 * One human sentence (mrkdwn, may mention users) saying why a click or event was refused, for an ephemeral reply,
 * e.g. `You requested this restart, so someone else must approve it (no self-approval).`
 */
export function refusalText(refusal: Pick<Refusal, 'detail'>): string {
  const d: RefusalDetail = refusal.detail;
  switch (d.type) {
    case 'kind-mismatch':
      return `A ${actionNoun(d.action)} cannot target a ${d.targetKind}.`;
    case 'action-not-in-policy': {
      const allowed = d.allowed.map(actionNoun);
      return `A ${actionNoun(d.action)} is not allowed here: the policy for ${d.cluster} allows ${allowed.length ? joinAnd(allowed) : 'no actions'}.`;
    }
    case 'no-policy':
      return `Cluster ${d.cluster} has no approval policy (no slack section in the config).`;
    case 'namespace-not-in-policy':
      return `Actions on namespace ${d.namespace} are not allowed by the policy for ${d.cluster}.`;
    case 'not-a-requester':
      return `You are not allowed to request actions in ${d.cluster}; ask someone on the tokenwatch requester list.`;
    case 'self-approval':
      return `You requested this ${actionNoun(d.action)}, so someone else must approve it (no self-approval).`;
    case 'not-an-approver':
      return d.vote === 'approve'
        ? `You are not an approver for ${d.cluster}, so you cannot approve this ${actionNoun(d.action)}; approvers: ${
            d.approvers.length ? joinAnd(approverMentions(d.approvers)) : 'none configured'
          }.`
        : `You are not an approver for ${d.cluster}, so you cannot reject this ${actionNoun(d.action)}.`;
    case 'already-approved':
      return d.vote === 'approve'
        ? `You already approved this ${actionNoun(d.action)}; it needs ${d.left} more approval${d.left === 1 ? '' : 's'} from someone else.`
        : `You already approved this ${actionNoun(d.action)}, so you cannot reject it now; another approver still can.`;
    case 'expired':
      return `This ${actionNoun(d.action)} request expired at ${formatUtc(d.expiresAt)}, so it can no longer be ${
        d.vote === 'approve' ? 'approved' : 'rejected'
      }; request it again if it is still needed.`;
    case 'decided': {
      const noun = actionNoun(d.approval.action);
      const decision = describeDecision(d.approval);
      switch (d.attempted) {
        case 'vote':
          return `This ${noun} was already ${decision}; it no longer takes votes.`;
        case 'expire':
          return `This ${noun} was already ${decision}; it cannot expire.`;
        case 'start':
          return `This ${noun} cannot start again: it was already ${decision}.`;
        case 'fail':
          return `This ${noun} cannot fail from state ${d.approval.state}: it is already ${decision}.`;
      }
      return `This ${noun} was already ${decision}.`; // not reached: the switch covers every attempt
    }
    case 'not-due':
      return `This ${actionNoun(d.action)} request does not expire until ${formatUtc(d.expiresAt)}.`;
    case 'not-approved-yet':
      return `This ${actionNoun(d.action)} cannot start: it is still waiting for approval.`;
    case 'not-running':
      return `This ${actionNoun(d.action)} cannot succeed from state ${d.state}: it is not running.`;
    case 'changed-concurrently':
      return 'This request changed several times while your click was processed; look at it again.';
    case 'approval-missing':
      return 'This approval request no longer exists.';
  }
}
