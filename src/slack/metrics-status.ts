/**
 * The `/tokens status` note about API-server token metrics for one cluster, read from the store.
 */
import type { ClusterConfig } from '../config/types.js';
import type { Store } from '../store/index.js';
import { REPLICA_WINDOW_MS, metricsStatusLine } from '../findings/token-metrics.js';

/** `n` bytes in binary units, one decimal from KiB up (`512 B`, `93.0 KiB`, `1.5 GiB`). */
export function byteSize(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let v = Math.max(0, n);
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${Math.round(v)} B` : `${v.toFixed(1)} ${units[i]}`;
}

/**
 * The `/tokens status` line of what the last successful poll's CloudWatch reads cost (`SlackPollHealth.lastPollCost`):
 * Logs Insights bytes scanned (what it bills by; in fleet mode the one query its batch shares), or for
 * FilterLogEvents the requests and bytes received — FilterLogEvents does not report the bytes it searched.
 * Undefined for other sources and before a successful poll.
 */
export function auditCostLine(audit: ClusterConfig['audit'], cost: { requests: number; bytes: number; insights?: { bytesScanned: number; logGroups: number } } | undefined): string | undefined {
  if (!cost || !('cloudwatch' in audit)) return undefined;
  if (cost.insights) {
    const q = cost.insights.logGroups > 1 ? `one fleet query over ${cost.insights.logGroups} log groups, shared by their clusters` : 'its own query';
    return `CloudWatch cost of the last poll: Logs Insights scanned ${byteSize(cost.insights.bytesScanned)} (${q}); ${cost.requests} requests`;
  }
  return `CloudWatch cost of the last poll: ${cost.requests} FilterLogEvents requests, ${byteSize(cost.bytes)} received (FilterLogEvents does not report the bytes it searched)`;
}

/**
 * `{ notes: [...] }` for `ClusterStatus`: the API-server token metrics line (samples of the last 24 h before `now`,
 * epoch ms), the CloudWatch cost of the last poll ({@link auditCostLine}) and a failed node-probe read; `{}` when there is nothing to say (no Kubernetes access, no sample).
 */
export async function metricsNotes(
  store: Store,
  rt: { config: Pick<ClusterConfig, 'name' | 'audit' | 'kubernetes'> },
  health: { metricsError?: string; probeError?: string; lastPollCost?: Parameters<typeof auditCostLine>[1] },
  now: number,
): Promise<{ notes?: string[] }> {
  const notes: string[] = [];
  const cost = auditCostLine(rt.config.audit, health.lastPollCost);
  if (cost) notes.push(cost);
  const samples = await store.metricSamples.list(rt.config.name, now - REPLICA_WINDOW_MS);
  const error = health.metricsError;
  if (samples.length > 0 || error !== undefined) {
    const line = metricsStatusLine({ samples, auditLog: !('none' in rt.config.audit), ...(error !== undefined ? { error } : {}) });
    if (line) notes.push(line);
  }
  if (health.probeError) notes.push(`node probe reports unavailable: ${health.probeError}`);
  return notes.length ? { notes } : {};
}
