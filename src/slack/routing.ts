/**
 * Routing rules (docs/slack.md "Routing"): which Slack channel an alert goes to, and whom it mentions. Pure.
 *
 * `slack.routes` is an ordered list of rules; each names conditions (cluster, namespace, workload kind and name,
 * ServiceAccount, labels and annotations of the workload or of its pods) and a channel with optional owners (Slack
 * user groups `S…`, users `U…`/`W…`). The first rule whose every condition holds wins; an alert no rule matches goes
 * to its cluster's channel (`clusters[].slack.channel`), as does a cluster-level alert (namespace `*`). Severity never
 * selects a channel: it selects whether the owners are mentioned (`mentionFrom`).
 *
 * A mention is built only from the configured owner ids (validated `^[UWS][A-Z0-9]{2,}$` by the config schema), never
 * from audit-log text.
 */
import picomatch from 'picomatch';
import { SEVERITY_RANK, type Severity } from '../findings/types.js';

/** One routing rule as the config holds it (src/config/schema.ts `slack.routes[]`). */
export interface RouteRule {
  /** Conditions, all of which must hold; an absent condition holds for every alert. Lists hold if any entry matches. */
  match: {
    /** Cluster name globs. */
    clusters?: string[];
    /** Namespace globs (`kube-system`, `team-*`). */
    namespaces?: string[];
    /** Workload kinds (`DaemonSet`, `Deployment`, …), exact. With `workloads`: one workload must satisfy both. */
    kinds?: string[];
    /** Workload name globs. */
    workloads?: string[];
    /** ServiceAccount name globs. */
    serviceAccounts?: string[];
    /** Label key → value glob (`*`: any value); holds when a workload of the alert or one of its pods has it. */
    labels?: Record<string, string>;
    /** Annotation key → value glob, as `labels`. */
    annotations?: Record<string, string>;
    /** Label key → value glob, as `labels`, on the alert's namespace (the Namespace object). */
    namespaceLabels?: Record<string, string>;
  };
  /** Channel id (`C…`, `G…`) or `#name`. */
  channel: string;
  /** Slack user group ids (`S…`) and user ids (`U…`, `W…`) to mention. */
  owners: string[];
  /** Lowest severity at which the owners are mentioned (default `info`: always). */
  mentionFrom: Severity;
}

/** Labels and annotations of one object (a workload or a pod); only the keys rules name need be present. */
export interface ObjectMeta {
  labels?: Readonly<Record<string, string>>;
  annotations?: Readonly<Record<string, string>>;
}

/** What a rule is matched against: the alert's subject and what cluster state says of it. */
export interface RouteSubject {
  cluster: string;
  /** `*` for a cluster-level alert. */
  namespace: string;
  serviceAccount: string;
  /** The alert's workloads (top of their pods' owner chains), with their labels/annotations when known. */
  workloads: ReadonlyArray<{ kind: string; name: string } & ObjectMeta>;
  /** The ServiceAccount's pods' labels/annotations, when known. */
  pods?: readonly ObjectMeta[];
  /** The labels of the alert's namespace that rules name, when known (undefined: unknown, rules on them do not match). */
  namespaceLabels?: Readonly<Record<string, string>>;
}

/** Where an alert goes: the channel, and the owners to mention from severity `mentionFrom` on. */
export interface Route {
  channel: string;
  owners: string[];
  mentionFrom: Severity;
  /** Index of the matching rule in `slack.routes`; undefined when the cluster's channel caught it. */
  rule?: number;
}

const globCache = new Map<string, (s: string) => boolean>();

/** Whether `value` matches glob `pattern` (picomatch: `*`, `?`, `[a-z]`, `{a,b}`; dots are ordinary characters). */
export function globMatch(pattern: string, value: string): boolean {
  let m = globCache.get(pattern);
  if (!m) {
    m = picomatch(pattern, { dot: true, nonegate: true });
    if (globCache.size > 10_000) globCache.clear();
    globCache.set(pattern, m);
  }
  return m(value);
}

const anyGlob = (patterns: readonly string[] | undefined, value: string): boolean => patterns === undefined || patterns.some((p) => globMatch(p, value));

function metaHolds(want: Readonly<Record<string, string>> | undefined, field: 'labels' | 'annotations', objects: readonly ObjectMeta[]): boolean {
  if (want === undefined) return true;
  return Object.entries(want).every(([key, pattern]) =>
    objects.some((o) => {
      const v = o[field]?.[key];
      return v !== undefined && globMatch(pattern, v);
    }),
  );
}

/** Whether every condition of `rule` holds for `s`. A cluster-level alert (namespace `*`) matches no rule. */
export function ruleMatches(rule: Pick<RouteRule, 'match'>, s: RouteSubject): boolean {
  if (s.namespace === '*') return false;
  const m = rule.match;
  if (!anyGlob(m.clusters, s.cluster) || !anyGlob(m.namespaces, s.namespace) || !anyGlob(m.serviceAccounts, s.serviceAccount)) return false;
  if (m.kinds !== undefined || m.workloads !== undefined) {
    if (!s.workloads.some((w) => (m.kinds === undefined || m.kinds.includes(w.kind)) && anyGlob(m.workloads, w.name))) return false;
  }
  const objects: ObjectMeta[] = [...s.workloads, ...(s.pods ?? [])];
  const ns: ObjectMeta[] = s.namespaceLabels ? [{ labels: s.namespaceLabels }] : [];
  return metaHolds(m.labels, 'labels', objects) && metaHolds(m.annotations, 'annotations', objects) && metaHolds(m.namespaceLabels, 'labels', ns);
}

/**
 * The route of an alert: the first rule of `rules` that matches `s`, else `clusterChannel` with no owners.
 * @param clusterChannel the cluster's channel (`clusters[].slack.channel`).
 */
export function routeOf(rules: readonly RouteRule[], clusterChannel: string, s: RouteSubject): Route {
  const i = rules.findIndex((r) => ruleMatches(r, s));
  if (i < 0) return { channel: clusterChannel, owners: [], mentionFrom: 'info' };
  const r = rules[i]!;
  return { channel: r.channel, owners: [...r.owners], mentionFrom: r.mentionFrom, rule: i };
}

/** Whether a rule can match some alert of cluster `cluster` (its `clusters` globs, if any, accept the name). */
export function ruleMayMatchCluster(rule: Pick<RouteRule, 'match'>, cluster: string): boolean {
  return anyGlob(rule.match.clusters, cluster);
}

/** Whether any rule needs cluster state (workload kinds or names, labels, annotations, namespace labels) to be decided. */
export function rulesNeedState(rules: readonly RouteRule[]): boolean {
  return rules.some(
    (r) => r.match.kinds !== undefined || r.match.workloads !== undefined || r.match.labels !== undefined || r.match.annotations !== undefined || r.match.namespaceLabels !== undefined,
  );
}

/** Whether any rule matches on namespace labels (then the cluster's namespaces are read: a watch and more RBAC). */
export function rulesNeedNamespaceLabels(rules: readonly RouteRule[]): boolean {
  return rules.some((r) => r.match.namespaceLabels !== undefined);
}

/**
 * The label and annotation keys the rules name: all the watch cache needs to keep of workloads and pods, and the
 * namespace label keys (`namespaceLabels`; empty: namespaces are not read at all).
 */
export function keysRulesName(rules: readonly RouteRule[]): { labels: Set<string>; annotations: Set<string>; namespaceLabels: Set<string> } {
  const labels = new Set<string>();
  const annotations = new Set<string>();
  const namespaceLabels = new Set<string>();
  for (const r of rules) {
    for (const k of Object.keys(r.match.labels ?? {})) labels.add(k);
    for (const k of Object.keys(r.match.annotations ?? {})) annotations.add(k);
    for (const k of Object.keys(r.match.namespaceLabels ?? {})) namespaceLabels.add(k);
  }
  return { labels, annotations, namespaceLabels };
}

/**
 * The mention of configured owners: `<!subteam^S…>` for a user group, `<@U…>` for a user (Slack "Formatting text",
 * https://api.slack.com/reference/surfaces/formatting#mentioning-users). Ids that are not Slack ids (the schema
 * rejects them) are left out, so nothing but a configured id can become a mention. Empty string for none.
 */
export function ownersMention(owners: readonly string[]): string {
  return owners
    .filter((o) => /^[UWS][A-Z0-9]{2,}$/.test(o))
    .map((o) => (o.startsWith('S') ? `<!subteam^${o}>` : `<@${o}>`))
    .join(' ');
}

/** Whether an alert of severity `severity` mentions the owners of `route` (it has owners, and severity ≥ `mentionFrom`). */
export function mentions(route: Pick<Route, 'owners' | 'mentionFrom'>, severity: Severity): boolean {
  return route.owners.length > 0 && SEVERITY_RANK[severity] >= SEVERITY_RANK[route.mentionFrom];
}
