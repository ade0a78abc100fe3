/**
 * Why an approved action cannot be executed on a cluster, in words for the approval flow's replies
 * (`src/slack/flow.ts` `remediationProblem`): the cluster is unknown, its Kubernetes access could not be set up, or it
 * has none configured (`kubernetes: none`, docs/configuration.md).
 */
import type { ClusterConfig } from '../config/types.js';

/** What {@link remediationProblem} reads of a cluster's runtime. */
export interface RemediationTarget {
  config: Pick<ClusterConfig, 'kubernetes'>;
  /** Why Kubernetes access could not be set up (scrubbed), if it could not. */
  kubeError?: string | undefined;
}

/**
 * The reason no remediator exists for `rt` (`undefined`: the cluster is unknown to this service). Called only when the
 * cluster has no remediator; never throws.
 */
export function remediationProblem(rt: RemediationTarget | undefined): string {
  if (!rt) return 'unknown cluster';
  if (rt.kubeError) return rt.kubeError;
  return 'none' in rt.config.kubernetes ? 'Kubernetes access is not configured for this cluster (kubernetes: none)' : 'no Kubernetes access';
}
