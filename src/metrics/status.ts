/**
 * The `/tokens status` note about API-server token metrics for one cluster (issue 13), read from the store.
 */
import type { ClusterConfig } from '../config/types.js';
import type { Store } from '../store/index.js';
import { REPLICA_WINDOW_MS } from './live.js';
import { metricsStatusLine } from './token-metrics.js';

/**
 * `{ notes: [line] }` for `ClusterStatus`, or `{}` when the cluster has no Kubernetes access (no metrics read) and
 * no sample. Samples of the last 24 h before `now` (epoch ms) are used.
 */
export function metricsNotes(store: Store, rt: { config: Pick<ClusterConfig, 'name' | 'audit' | 'kubernetes'> }, error: string | undefined, now: number): { notes?: string[] } {
  const samples = store.listTokenMetricSamples(rt.config.name, now - REPLICA_WINDOW_MS);
  if (samples.length === 0 && error === undefined) return {};
  const line = metricsStatusLine({ samples, auditLog: !('none' in rt.config.audit), ...(error !== undefined ? { error } : {}) });
  return line ? { notes: [line] } : {};
}
