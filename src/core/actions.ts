/**
 * The action vocabulary, defined once: the config schema, the approval policy and machine, the Slack buttons and
 * verification all use these names, and the words for an action and its target. A leaf module (no imports), so that
 * the store, the policy and the machine can all use it.
 */
import { MINUTE_MS } from './units.js';

/**
 * Every remediation action kind, in display order: `restart` = rollout restart of a DaemonSet/Deployment/StatefulSet;
 * `recreate-serviceaccount` = delete and recreate the ServiceAccount (new UID invalidates its tokens, docs/design/domain.md §7);
 * `snooze` = mute a finding.
 */
export const ACTION_KINDS = ['restart', 'recreate-serviceaccount', 'snooze'] as const;

/** A remediation action kind (see {@link ACTION_KINDS}). */
export type ActionKind = (typeof ACTION_KINDS)[number];

/**
 * Workload kinds a rollout restart applies to: the apps/v1 controllers whose pod template kubectl's
 * `rollout restart` annotates (kubectl `polymorphichelpers/objectrestarter.go`).
 */
export const RESTARTABLE_KINDS = ['DaemonSet', 'Deployment', 'StatefulSet'] as const;

/** A workload kind a rollout restart applies to (see {@link RESTARTABLE_KINDS}). */
export type RestartableKind = (typeof RESTARTABLE_KINDS)[number];

/** Whether `kind` is one of {@link RESTARTABLE_KINDS}. */
export function isRestartableKind(kind: string): kind is RestartableKind {
  return (RESTARTABLE_KINDS as readonly string[]).includes(kind);
}

/** The action kinds that change the cluster (they need approvers and are verified afterwards); `snooze` does not. */
export const CLUSTER_ACTION_KINDS: readonly ActionKind[] = ['restart', 'recreate-serviceaccount'];

/** Human name of an action, lower case, as used in sentences ("this restart"). */
export function actionNoun(action: ActionKind): string {
  switch (action) {
    case 'restart':
      return 'restart';
    case 'recreate-serviceaccount':
      return 'ServiceAccount recreation';
    case 'snooze':
      return 'snooze';
  }
}

/**
 * The label of one namespaced Kubernetes object, `Kind namespace/name` (`DaemonSet kube-system/kube-multus-ds`): the
 * one way messages, logs and the action log name a workload or an action's target.
 */
export function objectLabel(o: { kind: string; namespace: string; name: string }): string {
  return `${o.kind} ${o.namespace}/${o.name}`;
}

/** An action's target with its cluster: `DaemonSet kube-system/kube-multus-ds in prod-eks`. */
export function describeTarget(t: { kind: string; namespace: string; name: string; cluster: string }): string {
  return `${objectLabel(t)} in ${t.cluster}`;
}

/** Wildcard allowed in an approval policy's `requesters` only: any workspace member may *request*. */
export const ANY_USER = '*';

/**
 * The approval policy's defaults, defined once: the config schema (`clusters[].slack`) fills them in and the approval
 * policy is built from that (docs/design/architecture.md "Security"; config.example.yaml). Approvers have no default:
 * the config requires them when a cluster-changing action is offered.
 * - `requesters`: anyone (`'*'`); `allowSelfApproval`: false; `protectedApprovals`: 2 distinct approvals in a protected
 *   namespace; `actions`: all three; `expiryMs`: a pending request expires after 30 minutes, in milliseconds.
 */
export const APPROVAL_DEFAULTS = {
  requesters: [ANY_USER],
  allowSelfApproval: false,
  protectedApprovals: 2,
  actions: ACTION_KINDS,
  expiryMs: 30 * MINUTE_MS,
} as const;
