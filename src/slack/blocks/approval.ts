/**
 * Approval messages: the request (requester, exact target, approvers, expiry, dry-run result, Approve/Reject
 * buttons) and the same message once decided (no buttons; who and when). Pure.
 */
import { approvalsOf, isExpired, type Approval, type ApprovalState, type ActionKind } from '../../approvals/machine.js';
import { actionNoun, objectLabel } from '../../core/actions.js';
import { ACTION_IDS, opaqueId } from './ids.js';
import { LIMITS } from './limits.js';
import { clip, code, escapeMrkdwn, escClip, linesWithin, listWithin, md, mention, plain, slackDate, utc, type KnownBlock, type SlackMessage } from './text.js';

/** Extra facts about the exact target, shown in the request so approvers know what they approve. */
export interface TargetFacts {
  /** Pods the workload runs (DaemonSet `desiredNumberScheduled`, else `spec.replicas`). */
  desired?: number;
  /** `RollingUpdate` / `OnDelete` (DaemonSet) or the Deployment strategy. */
  updateStrategy?: string;
  /** For recreate: what is carried over (e.g. `eks.amazonaws.com/role-arn`, imagePullSecrets). */
  preserved?: string[];
  /** Free-form warning, e.g. why the dry run is the only check possible. */
  note?: string;
}

/** Context of the approval builders. `approveId`/`rejectId` are the opaque ids the buttons carry. */
export interface ApprovalMessageContext {
  now: number;
  approveId?: string;
  rejectId?: string;
}

const VERB: Record<ActionKind, string> = {
  restart: 'restart',
  'recreate-serviceaccount': 'recreate',
  snooze: 'snooze',
};

function titleOf(a: Approval): string {
  return `${VERB[a.action][0]!.toUpperCase()}${VERB[a.action].slice(1)} ${a.target.kind} ${a.target.name}`;
}

/** `*restart* DaemonSet `kube-system/kube-multus-ds` in *prod-eks*` */
function targetLine(a: Approval): string {
  return `*${actionNoun(a.action)}* of ${escapeMrkdwn(a.target.kind)} ${code(`${a.target.namespace}/${a.target.name}`, 300)} in *${escClip(a.target.cluster, 200)}*`;
}

function dryRunLine(a: Approval): string | undefined {
  if (!a.dryRun) return undefined;
  return a.dryRun.ok
    ? `✅ Server-side dry run passed${a.dryRun.message ? `: ${escClip(a.dryRun.message, 800)}` : ''}`
    : `❌ Server-side dry run failed: ${escClip(a.dryRun.message, 1500)}`;
}

function votesLines(a: Approval): string[] {
  return a.votes.map((v) =>
    v.vote === 'approve'
      ? `✔︎ ${mention(v.user)} approved ${slackDate(v.at)}`
      : `✖︎ ${mention(v.user)} rejected ${slackDate(v.at)}${v.reason ? `: ${escClip(v.reason, 300)}` : ''}`,
  );
}

/**
 * How many approvals `a` needs and why, e.g. `kube-system is protected: 2 approvals` (a target in one of the policy's
 * `protectedNamespaces` needs `protectedApprovals` distinct approvals, see docs/slack.md) or `1 approval`. The
 * requester's own approval never counts unless self-approval is allowed.
 */
export function approvalNeed(a: Pick<Approval, 'requiredApprovals' | 'target'>): string {
  const n = a.requiredApprovals;
  return n > 1 ? `${a.target.namespace} is protected: ${n} approvals` : '1 approval';
}

function factsLine(f: TargetFacts | undefined): string | undefined {
  if (!f) return undefined;
  const parts: string[] = [];
  if (f.desired !== undefined) parts.push(`${f.desired} pod${f.desired === 1 ? '' : 's'}`);
  if (f.updateStrategy) parts.push(`update strategy ${code(f.updateStrategy, 40)}`);
  if (f.preserved?.length) parts.push(`keeps ${listWithin(f.preserved.slice(0, 5).map((p) => code(p, 100)), 5, ', ', f.preserved.length)}`);
  if (f.note) parts.push(escClip(f.note, 500));
  return parts.length ? parts.join(' · ') : undefined;
}

/**
 * The approval request: names the requester, the exact target, the approvers (user ids and user-group ids,
 * rendered as mentions), the approvals so far, the expiry and the dry-run result. Approve (primary, with a
 * confirm dialog) and Reject buttons are shown only while the request takes votes (state `requested`, not
 * expired at `ctx.now`, dry run not failed) and ids are given. For any other state this renders
 * {@link approvalDecidedMessage}.
 * @throws TypeError when a button id is not opaque.
 */
export function approvalRequestMessage(
  approval: Approval,
  target: TargetFacts | undefined,
  approvers: readonly string[],
  ctx: ApprovalMessageContext,
): SlackMessage {
  const a = approval;
  if (a.state !== 'requested') return approvalDecidedMessage(a, approvers, ctx);
  const title = titleOf(a);
  const expired = isExpired(a, ctx.now);
  const blocks: KnownBlock[] = [{ type: 'header', text: plain(`🔐 Approval needed: ${title}`, LIMITS.headerText) }];
  const facts = factsLine(target);
  blocks.push({
    type: 'section',
    text: md(`${mention(a.requester)} asks for a ${targetLine(a)}.${facts ? `\n${facts}` : ''}`),
    fields: [
      md(`*Requested by*\n${mention(a.requester)}`),
      md(`*Approvers*\n${approvers.length ? listWithin(approvers.slice(0, 15).map(mention), 15, ', ', approvers.length) : '_none configured_'}`, LIMITS.sectionFieldText),
      md(`*Approvals*\n${approvalsOf(a).length} of ${a.requiredApprovals}${a.requiredApprovals > 1 ? ` · ${escClip(approvalNeed(a), 200)}` : ''}`),
      md(`*Expires*\n${slackDate(a.expiresAt)}${expired ? ' (*expired*)' : ''}`),
    ],
  });
  const dry = dryRunLine(a);
  if (dry) blocks.push({ type: 'section', text: md(dry) });
  const votes = votesLines(a);
  if (votes.length) blocks.push({ type: 'context', elements: [md(linesWithin(votes, LIMITS.contextText))] });
  const canVote = !expired && a.dryRun?.ok !== false;
  if (canVote && ctx.approveId !== undefined && ctx.rejectId !== undefined) {
    blocks.push({
      type: 'actions',
      block_id: 'tw_approval_actions',
      elements: [
        {
          type: 'button',
          action_id: ACTION_IDS.approve,
          text: plain('Approve', LIMITS.buttonText),
          value: opaqueId(ctx.approveId),
          style: 'primary',
          confirm: {
            title: plain(`Approve: ${title}?`, LIMITS.confirmTitle),
            text: plain(
              `${title} in ${a.target.cluster} (namespace ${a.target.namespace}) runs as soon as the required approvals are in.`,
              LIMITS.confirmText,
            ),
            confirm: plain('Approve', LIMITS.confirmButton),
            deny: plain('Cancel', LIMITS.confirmButton),
            style: 'danger',
          },
        },
        { type: 'button', action_id: ACTION_IDS.reject, text: plain('Reject', LIMITS.buttonText), value: opaqueId(ctx.rejectId) },
      ],
    });
  }
  blocks.push({ type: 'context', elements: [md(`Approval ${code(a.id, 140)} · requested ${slackDate(a.createdAt)}`)] });
  const text = `🔐 [${a.target.cluster}] approval needed: ${actionNoun(a.action)} of ${objectLabel(a.target)}, requested by ${a.requester}, expires ${utc(a.expiresAt)}`;
  return { text: clip(text, 3000), blocks };
}

const STATE_HEAD: Record<ApprovalState, string> = {
  requested: '🔐 Waiting for approval',
  approved: '✅ Approved',
  running: '⏳ Running',
  succeeded: '✅ Done',
  failed: '❌ Failed',
  rejected: '❌ Rejected',
  expired: '⌛ Expired',
};

/**
 * The approval message after a decision, without buttons: state, who approved/rejected and when, the
 * error of a failed action, or the expiry time of an expired request.
 */
export function approvalDecidedMessage(approval: Approval, approvers: readonly string[], _ctx: { now: number }): SlackMessage {
  const a = approval;
  const title = titleOf(a);
  const approvedBy = a.votes.filter((v) => v.vote === 'approve');
  const rejectedBy = a.votes.find((v) => v.vote === 'reject');
  // The requester's own "Reject" withdraws the request (docs/slack.md, "Approvals"): said so, not "Rejected".
  const head = a.state === 'rejected' && rejectedBy?.user === a.requester ? '↩️ Withdrawn' : STATE_HEAD[a.state];
  const blocks: KnownBlock[] = [{ type: 'header', text: plain(`${head}: ${title}`, LIMITS.headerText) }];
  const lines: string[] = [`${mention(a.requester)} asked for a ${targetLine(a)} ${slackDate(a.createdAt)}.`];
  switch (a.state) {
    case 'rejected':
      if (rejectedBy) {
        const withdrawn = rejectedBy.user === a.requester;
        lines.push(
          `${withdrawn ? 'Withdrawn' : 'Rejected'} by ${mention(rejectedBy.user)} ${slackDate(rejectedBy.at)}${
            rejectedBy.reason ? `: “${escClip(rejectedBy.reason, 500)}”` : ''
          }. Nothing was changed.`,
        );
      }
      break;
    case 'expired':
      lines.push(`Expired ${slackDate(a.expiresAt)} without ${a.requiredApprovals > 1 ? `${a.requiredApprovals} approvals` : 'an approval'}. Nothing was changed.`);
      break;
    case 'failed':
      if (!approvedBy.length) lines.push(`Stopped before approval. Nothing was changed.`);
      lines.push(`Error: ${escClip(a.error ?? a.dryRun?.message ?? 'unknown error', 1500)}`);
      break;
    default:
      break;
  }
  if (approvedBy.length) {
    lines.push(`Approved by ${listWithin(approvedBy.slice(0, 10).map((v) => `${mention(v.user)} ${slackDate(v.at)}`), 10, ', ', approvedBy.length)}.`);
  }
  if (a.state === 'running') lines.push('Progress follows in this thread.');
  if (a.state === 'succeeded') lines.push(`Finished ${slackDate(a.updatedAt)}; verification follows in this thread.`);
  const dry = dryRunLine(a);
  if (dry && a.state === 'failed' && !approvedBy.length) lines.push(dry);
  blocks.push({ type: 'section', text: md(linesWithin(lines, LIMITS.sectionText)) });
  blocks.push({
    type: 'context',
    elements: [
      md(`Approval ${code(a.id, 140)} · approvers: ${approvers.length ? listWithin(approvers.slice(0, 8).map(mention), 8, ', ', approvers.length) : 'none configured'}`),
    ],
  });
  const who =
    a.state === 'rejected' && rejectedBy
      ? ` by ${rejectedBy.user}`
      : approvedBy.length && a.state !== 'expired'
        ? ` (approved by ${approvedBy.map((v) => v.user).join(', ')})`
        : '';
  const text = `${head} [${a.target.cluster}]: ${actionNoun(a.action)} of ${objectLabel(a.target)}${who}`;
  return { text: clip(text, 3000), blocks };
}

/** `callback_id` of the reject-reason modal. */
export const REJECT_MODAL_CALLBACK_ID = 'tw_reject_reason';
/** block_id / action_id of the modal's reason input. */
export const REJECT_REASON_INPUT = 'tw_reason';
/** Longest reason kept, characters. */
export const REJECT_REASON_MAX = 500;

/** A Slack modal view (views.open `view`). */
export interface ModalView {
  type: 'modal';
  callback_id: string;
  private_metadata: string;
  title: { type: 'plain_text'; text: string };
  submit: { type: 'plain_text'; text: string };
  close: { type: 'plain_text'; text: string };
  blocks: unknown[];
}

/**
 * The modal a (non-requesting) approver gets on Reject: what is rejected and an optional reason (plain text, at most
 * {@link REJECT_REASON_MAX} characters), shown in the thread's approval message and written to the action log.
 * `privateMetadata` carries the approval id and the channel of the click (opaque to the user; Slack signs the submission).
 */
export function rejectReasonModal(a: Approval, privateMetadata: string): ModalView {
  return {
    type: 'modal',
    callback_id: REJECT_MODAL_CALLBACK_ID,
    private_metadata: privateMetadata,
    title: { type: 'plain_text', text: 'Reject request' },
    submit: { type: 'plain_text', text: 'Reject' },
    close: { type: 'plain_text', text: 'Cancel' },
    blocks: [
      { type: 'section', text: md(`Reject the ${targetLine(a)} requested by ${mention(a.requester)}? Nothing will be changed.`) },
      {
        type: 'input',
        block_id: REJECT_REASON_INPUT,
        optional: true,
        label: { type: 'plain_text', text: 'Reason (optional, shown in the thread)' },
        element: { type: 'plain_text_input', action_id: REJECT_REASON_INPUT, multiline: true, max_length: REJECT_REASON_MAX },
      },
    ],
  };
}
