/**
 * Approval policy: who may request and who may approve remediation actions in one cluster, which actions
 * and namespaces are allowed, how many approvals a protected namespace needs and when a request expires.
 *
 * Pure: no I/O. Slack user-group membership is resolved by the caller (via `usergroups.users.list`,
 * scope `usergroups:read`, api.slack.com/methods/usergroups.users.list) and passed in as data or as a
 * lookup function.
 *
 * Identifiers follow Slack's id prefixes (api.slack.com/changelog/2016-08-11-user-id-format-changes and
 * api.slack.com/types/usergroup): users `U…` (or `W…` for Enterprise Grid org-wide users), user groups `S…`.
 */
import { ANY_USER, type ActionKind } from '../core/actions.js';

/** A Slack user id (`U…`, `W…`). */
export const SLACK_USER_ID = /^[UW][A-Z0-9]{2,}$/;
/** A Slack user-group (subteam) id (`S…`). */
export const SLACK_GROUP_ID = /^S[A-Z0-9]{2,}$/;

/**
 * Per-cluster approval policy.
 *
 * - `requesters`, `approvers`: Slack user ids (`U…`/`W…`) and user-group ids (`S…`). `requesters` may also
 *   contain {@link ANY_USER} (`'*'`). `approvers` never accepts a wildcard: an approval button without a
 *   clicker allow-list lets any workspace member approve (NousResearch/hermes-agent#6735; docs/design/prior-art.md).
 * - `allowSelfApproval`: the requester may vote on their own request (default false).
 * - `protectedNamespaces`: namespaces (exact, or a prefix ending in `*`) whose targets need
 *   `protectedApprovals` distinct approvals (default 2) instead of 1.
 * - `actions`: allow-list of action kinds.
 * - `namespaces.allow` / `namespaces.deny`: patterns (exact, or prefix ending in `*`); an empty allow list
 *   allows every namespace; deny wins over allow.
 * - `expiryMs`: how long a request waits for a decision, in milliseconds (default 30 min).
 */
export interface ApprovalPolicy {
  requesters: string[];
  approvers: string[];
  allowSelfApproval: boolean;
  protectedNamespaces: string[];
  protectedApprovals: number;
  actions: ActionKind[];
  namespaces: { allow: string[]; deny: string[] };
  expiryMs: number;
}

/**
 * Expands a list of user and user-group ids into distinct user ids, in first-seen order.
 * Group ids (`S…`) are replaced by `groupMembers(groupId)`; user ids are kept; anything else
 * (including `'*'`) is dropped.
 * @param groupMembers lookup of a group's member user ids (e.g. a cache of `usergroups.users.list`).
 */
export function resolveMembers(ids: readonly string[], groupMembers: (groupId: string) => readonly string[]): string[] {
  const out = new Set<string>();
  for (const id of ids) {
    if (SLACK_GROUP_ID.test(id)) {
      for (const u of groupMembers(id)) if (SLACK_USER_ID.test(u)) out.add(u);
    } else if (SLACK_USER_ID.test(id)) {
      out.add(id);
    }
  }
  return [...out];
}

/**
 * Whether `user` is named in `ids`, directly or through one of `userGroups` (the user-group ids the
 * user belongs to). `'*'` in `ids` matches anyone only when `wildcard` is true.
 */
export function isListed(user: string, userGroups: readonly string[], ids: readonly string[], wildcard = false): boolean {
  if (wildcard && ids.includes(ANY_USER)) return true;
  if (ids.includes(user)) return true;
  return userGroups.some((g) => ids.includes(g));
}

/** Whether a namespace matches a pattern: exact, `*` (any) or a prefix ending in `*`. */
export function matchesNamespace(namespace: string, pattern: string): boolean {
  if (pattern === '*') return true;
  if (pattern.endsWith('*')) return namespace.startsWith(pattern.slice(0, -1));
  return namespace === pattern;
}

/** Whether actions may target `namespace`: not denied, and allowed (empty allow list = all). */
export function namespaceAllowed(namespace: string, policy: ApprovalPolicy): boolean {
  if (policy.namespaces.deny.some((p) => matchesNamespace(namespace, p))) return false;
  if (policy.namespaces.allow.length === 0) return true;
  return policy.namespaces.allow.some((p) => matchesNamespace(namespace, p));
}

/** Whether `namespace` is protected (needs {@link ApprovalPolicy.protectedApprovals} approvals). */
export function isProtectedNamespace(namespace: string, policy: ApprovalPolicy): boolean {
  return policy.protectedNamespaces.some((p) => matchesNamespace(namespace, p));
}

/** Approvals a new request for a target in `namespace` needs: 1, or `protectedApprovals` when protected. */
export function requiredApprovalsFor(namespace: string, policy: ApprovalPolicy): number {
  return isProtectedNamespace(namespace, policy) ? Math.max(1, policy.protectedApprovals) : 1;
}
