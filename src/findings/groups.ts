/**
 * Alert groups: one root cause, one alert. Pure.
 *
 * The per-kind findings of one ServiceAccount of one cluster (stale-token, unauthorized, legacy-token; node-probe
 * evidence and API-server metrics arrive as findings of those kinds or as evidence on them) describe one root cause:
 * the clients of that ServiceAccount hold a token the API server rejects, or will. They are shown as one alert — one
 * Slack message, one thread, one set of actions, one line in `/tokens status`, one row of the `scan` table — while
 * `scan --format json` keeps its per-kind `findings` (a contract) and adds the `groups` that reference them
 * (docs/design/contracts.md "--format json").
 *
 * A group's id is a stable hash of (cluster, namespace, serviceAccount), so it survives new signals starting and old
 * ones stopping. Its severity is the worst of its members' (callers pass the live members when that matters).
 */
import { sha256Hex } from '../core/digest.js';
import { SEVERITY_RANK, type Finding, type FindingKind, type ScanGroup, type Severity } from './types.js';

/** One alert group as printed in `scan --format json` under `groups` (contract, additive): {@link ScanGroup}. */
export type FindingGroupJson = ScanGroup;

/** A group with its member findings (most severe first, in `compareFindings` order of the input). */
export interface FindingGroup<F extends Finding = Finding> extends FindingGroupJson {
  members: F[];
}

/** The order kinds are named in: the failing signal first, then the stale one, then the legacy one. */
export const FINDING_KIND_ORDER: readonly FindingKind[] = ['cluster-credential', 'unauthorized', 'stale-token', 'legacy-token'];

/** The id of the group of a finding's ServiceAccount: `g` + 15 hex chars of SHA-256 of `cluster/namespace/serviceAccount`. */
export function groupIdOf(f: Pick<Finding, 'cluster' | 'namespace' | 'serviceAccount'>): string {
  return `g${sha256Hex(`group\u001f${f.cluster}\u001f${f.namespace}\u001f${f.serviceAccount}`).slice(0, 15)}`;
}

/** The worst severity of `findings` (`info` for none). */
export function worstSeverity(findings: readonly Pick<Finding, 'severity'>[]): Severity {
  let worst: Severity = 'info';
  for (const f of findings) if (SEVERITY_RANK[f.severity] > SEVERITY_RANK[worst]) worst = f.severity;
  return worst;
}

/**
 * Groups findings by (cluster, namespace, serviceAccount). Groups come in the order of their first member in the
 * input (pass findings sorted with `compareFindings` to get the most urgent group first); members keep the input order.
 */
export function groupFindings<F extends Finding>(findings: readonly F[]): FindingGroup<F>[] {
  const byId = new Map<string, FindingGroup<F>>();
  for (const f of findings) {
    const id = groupIdOf(f);
    let g = byId.get(id);
    if (!g) {
      g = { id, cluster: f.cluster, namespace: f.namespace, serviceAccount: f.serviceAccount, severity: f.severity, kinds: [], findings: [], members: [] };
      byId.set(id, g);
    }
    g.members.push(f);
    g.findings.push(f.id);
  }
  for (const g of byId.values()) {
    g.severity = worstSeverity(g.members);
    g.kinds = FINDING_KIND_ORDER.filter((k) => g.members.some((m) => m.kind === k));
  }
  return [...byId.values()];
}

/** The JSON form of groups (drops `members`). */
export function groupsJson(groups: readonly FindingGroup[]): FindingGroupJson[] {
  return groups.map((g) => ({ id: g.id, cluster: g.cluster, namespace: g.namespace, serviceAccount: g.serviceAccount, severity: g.severity, kinds: g.kinds, findings: g.findings }));
}
