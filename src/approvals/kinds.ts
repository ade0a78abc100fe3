/**
 * The action vocabulary, defined once: the config schema, the approval policy and machine, the Slack buttons and
 * verification all use these names. A leaf module (no imports), so that both the policy and the machine can use it.
 */

/**
 * Every remediation action kind, in display order: `restart` = rollout restart of a DaemonSet/Deployment/StatefulSet;
 * `recreate-serviceaccount` = delete and recreate the ServiceAccount (new UID invalidates its tokens, docs/design/domain.md §7);
 * `snooze` = mute a finding.
 */
export const ACTION_KINDS = ['restart', 'recreate-serviceaccount', 'snooze'] as const;

/** A remediation action kind (see {@link ACTION_KINDS}). */
export type ActionKind = (typeof ACTION_KINDS)[number];

/** The action kinds that change the cluster (they need approvers and are verified afterwards); `snooze` does not. */
export const CLUSTER_ACTION_KINDS: readonly ActionKind[] = ['restart', 'recreate-serviceaccount'];
