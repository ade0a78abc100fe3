/**
 * Maps a cluster's Slack section of the config to the approval policy of `src/approvals/policy.ts`.
 */
import { APPROVAL_DEFAULTS } from '../core/actions.js';
import type { ApprovalPolicy } from './policy.js';
import type { ClusterConfig, Config } from '../config/types.js';

/**
 * The {@link ApprovalPolicy} of `cluster`, or undefined when the cluster has no `slack` section (no actions).
 * `requesters` absent → anyone (`'*'`); `expiryMs` from `slack.approvals.expiresAfter` (default 30 min).
 */
export function approvalPolicyFor(cluster: ClusterConfig, config: Pick<Config, 'slack'>): ApprovalPolicy | undefined {
  const s = cluster.slack;
  if (s === undefined) return undefined;
  return {
    requesters: s.requesters ?? [...APPROVAL_DEFAULTS.requesters],
    approvers: [...s.approvers],
    allowSelfApproval: s.allowSelfApproval,
    protectedNamespaces: [...(s.protectedNamespaces ?? [])],
    protectedApprovals: s.protectedApprovals,
    actions: [...s.actions],
    namespaces: { allow: [...(s.namespaces?.allow ?? [])], deny: [...(s.namespaces?.deny ?? [])] },
    expiryMs: config.slack?.approvals.expiresAfter ?? APPROVAL_DEFAULTS.expiryMs,
  };
}
