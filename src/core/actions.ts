/**
 * The action vocabulary, defined once: the config schema, the approval policy and machine, the Slack buttons and
 * verification all use these names, and the words for an action and its target. A leaf module (no imports), so that
 * the store, the policy and the machine can all use it.
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
