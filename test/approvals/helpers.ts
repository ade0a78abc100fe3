/**
 * Test helpers of the approval stage: a complete policy from a partial one (the product builds policies from the config,
 * `approvalPolicyFor` in src/approvals/from-config.ts), and an approval after an accepted transition, as the store's
 * compare-and-set writes it.
 */
import { APPROVAL_DEFAULTS } from '../../src/core/actions.js';
import type { Approval, Transition } from '../../src/approvals/machine.js';
import type { ApprovalPolicy } from '../../src/approvals/policy.js';

/**
 * A complete policy from a partial one, with the defaults of {@link APPROVAL_DEFAULTS} (those the config fills in).
 * Approvers default to none (nobody can approve) so a missing setting fails closed.
 */
export function definePolicy(partial: Partial<ApprovalPolicy> = {}): ApprovalPolicy {
  return {
    requesters: partial.requesters ?? [...APPROVAL_DEFAULTS.requesters],
    approvers: partial.approvers ?? [],
    allowSelfApproval: partial.allowSelfApproval ?? APPROVAL_DEFAULTS.allowSelfApproval,
    protectedNamespaces: partial.protectedNamespaces ?? [],
    protectedApprovals: partial.protectedApprovals ?? APPROVAL_DEFAULTS.protectedApprovals,
    actions: partial.actions ?? [...APPROVAL_DEFAULTS.actions],
    namespaces: { allow: partial.namespaces?.allow ?? [], deny: partial.namespaces?.deny ?? [] },
    expiryMs: partial.expiryMs ?? APPROVAL_DEFAULTS.expiryMs,
  };
}

/** The approval after an accepted transition (`{ ...approval, ...patch }`), e.g. to render the next message. */
export function applyTransition(approval: Approval, t: Transition): Approval {
  return { ...approval, ...t.patch, votes: t.patch.votes ?? approval.votes };
}
