/**
 * The `/tokens status` note about API-server token metrics for one cluster, read from the store.
 */
import type { ClusterConfig } from '../config/types.js';
import type { Store } from '../store/index.js';
import { REPLICA_WINDOW_MS, metricsStatusLine } from '../findings/token-metrics.js';

/**
 * `{ notes: [...] }` for `ClusterStatus`: the API-server token metrics line (samples of the last 24 h before `now`,
 * epoch ms) and a failed node-probe read; `{}` when there is nothing to say (no Kubernetes access, no sample).
 */
export async function metricsNotes(
  store: Store,
  rt: { config: Pick<ClusterConfig, 'name' | 'audit' | 'kubernetes'> },
  health: { metricsError?: string; probeError?: string },
  now: number,
): Promise<{ notes?: string[] }> {
  const notes: string[] = [];
  const samples = await store.listTokenMetricSamples(rt.config.name, now - REPLICA_WINDOW_MS);
  const error = health.metricsError;
  if (samples.length > 0 || error !== undefined) {
    const line = metricsStatusLine({ samples, auditLog: !('none' in rt.config.audit), ...(error !== undefined ? { error } : {}) });
    if (line) notes.push(line);
  }
  if (health.probeError) notes.push(`node probe reports unavailable: ${health.probeError}`);
  return notes.length ? { notes } : {};
}
