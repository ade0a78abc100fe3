/**
 * Every Kubernetes API call tokenwatch can make, as RBAC names them, and the PolicyRules that grant exactly those.
 *
 * Two groups, each declared for the code that makes the calls and checked against the requests that code really
 * sends to the fake API server (`test/manifests/rbac.test.ts`, `test/cluster/kube.test.ts`):
 * - {@link KUBE_API_CALLS} (of `src/cluster/kube.ts`): cluster-state reads, cluster-wide; plus the opt-in
 *   {@link SECRET_METADATA_API_CALLS} (list Secrets, metadata only) when `kubernetes.secretMetadata` is on.
 * - {@link REMEDIATION_API_CALLS} (of `src/remediation/kube-remediator.ts`): reads and writes of remediation.
 *
 * The manifests (`manifests/rbac-*.yaml`) split them by verb: read verbs (get, list, watch) in the `tokenwatch-reader`
 * ClusterRole, write verbs in `tokenwatch-writer` (bound per namespace by default, cluster-wide on request; drop it
 * for a read-only install), and the opt-in Secret list in
 * `tokenwatch-secret-metadata` (not in the default install). A test checks that the roles grant exactly
 * {@link readCalls} / {@link writeCalls} / {@link secretMetadataCalls}, for the kustomize
 * install and the Helm chart alike.
 *
 * RBAC facts (Kubernetes docs "Using RBAC Authorization"): a rule grants `verbs × resources × apiGroups`; a
 * `resourceNames` restriction cannot apply to `create` (the name is not known when the request is authorized);
 * `list` on Secrets also allows reading their data, even though tokenwatch asks for metadata only.
 */
import { ErrorCode, TokenwatchError } from '../../src/errors.js';
import { RESTARTABLE_KINDS } from '../../src/core/actions.js';
import { OWNER_KINDS } from '../../src/cluster/convert.js';


/** RBAC verbs tokenwatch uses. */
export type ApiVerb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete';

/** One kind of Kubernetes API call (for RBAC: `rules[].verbs/resources/apiGroups`) */
export interface ApiCall {
  verb: ApiVerb;
  /** Plural resource name, e.g. `daemonsets`; `<resource>/<subresource>` for a subresource. */
  resource: string;
  /** `''` for the core group. */
  apiGroup: string;
}

/** The resources the watch cache lists and watches cluster-wide (`src/cluster/cache.ts`): pods, ServiceAccounts, owner kinds. */
const WATCHED: readonly { resource: string; apiGroup: string }[] = [
  { resource: 'pods', apiGroup: '' },
  { resource: 'serviceaccounts', apiGroup: '' },
  ...Object.values(OWNER_KINDS),
];

/**
 * Every API call `KubeClusterState` (src/cluster/kube.ts) and its watch cache (src/cluster/cache.ts) make by default
 * (without {@link SECRET_METADATA_API_CALLS}): the direct reads (get ServiceAccount, get and list pods, get each owner
 * kind) and the cache's list + watch of pods, ServiceAccounts and owner kinds. Keep in sync with the code: a test
 * compares it with the calls recorded by the fake API server, and the RBAC manifests must grant exactly these,
 * cluster-wide.
 */
export const KUBE_API_CALLS: readonly ApiCall[] = [
  { verb: 'get', resource: 'serviceaccounts', apiGroup: '' },
  { verb: 'get', resource: 'pods', apiGroup: '' },
  { verb: 'list', resource: 'pods', apiGroup: '' },
  ...Object.values(OWNER_KINDS).map((k) => ({ verb: 'get' as const, resource: k.resource, apiGroup: k.apiGroup })),
  ...WATCHED.filter((w) => w.resource !== 'pods').map((w) => ({ verb: 'list' as const, resource: w.resource, apiGroup: w.apiGroup })),
  ...WATCHED.map((w) => ({ verb: 'watch' as const, resource: w.resource, apiGroup: w.apiGroup })),
];

/**
 * The extra call of the opt-in Secret metadata read (`KubeClusterStateOptions.secretMetadata`): list Secrets
 * of type `kubernetes.io/service-account-token`, metadata only. Granted by the separate `tokenwatch-secret-metadata`
 * ClusterRole (manifests/components/secret-metadata, Helm `rbac.secretMetadata`), never by the default install.
 */
export const SECRET_METADATA_API_CALLS: readonly ApiCall[] = [{ verb: 'list', resource: 'secrets', apiGroup: '' }];

/**
 * The calls of routing by namespace labels (`slack.routes[].match.namespaceLabels`): the watch cache's list + watch of
 * namespaces (src/cluster/cache.ts) and the direct get when it is not fresh (src/cluster/kube.ts `namespaceLabels`).
 * Granted by the separate `tokenwatch-namespace-labels` ClusterRole (manifests/components/namespace-labels, Helm
 * `rbac.namespaces`), never by the default install.
 */
export const NAMESPACE_LABELS_API_CALLS: readonly ApiCall[] = [
  { verb: 'get', resource: 'namespaces', apiGroup: '' },
  { verb: 'list', resource: 'namespaces', apiGroup: '' },
  { verb: 'watch', resource: 'namespaces', apiGroup: '' },
];

/** Verbs that only read. Everything else is a write and belongs in the writer role. */
export const READ_VERBS: readonly ApiVerb[] = ['get', 'list', 'watch'];

/** Whether a verb only reads. */
export function isReadVerb(verb: string): boolean {
  return (READ_VERBS as readonly string[]).includes(verb);
}

/** The plural resources of the restartable kinds: `daemonsets`, `deployments`, `statefulsets`. */
const RESTARTABLE = RESTARTABLE_KINDS.map((kind) => `${kind.toLowerCase()}s`);

/**
 * Every API call `KubeRemediator` (`src/remediation/kube-remediator.ts`) can make:
 * - rollout restart: get (preflight, rollout progress) and patch (strategic merge; `?dryRun=All` in preflight is the
 *   same verb) of DaemonSets, Deployments, StatefulSets (`apps`);
 * - ServiceAccount recreation: get, delete and create `serviceaccounts` (dry runs included);
 * - Kubernetes Events on the target: create `events` (core/v1).
 */
export const REMEDIATION_API_CALLS: readonly ApiCall[] = [
  ...RESTARTABLE.map((resource) => ({ verb: 'get' as const, resource, apiGroup: 'apps' })),
  ...RESTARTABLE.map((resource) => ({ verb: 'patch' as const, resource, apiGroup: 'apps' })),
  { verb: 'get', resource: 'serviceaccounts', apiGroup: '' },
  { verb: 'delete', resource: 'serviceaccounts', apiGroup: '' },
  { verb: 'create', resource: 'serviceaccounts', apiGroup: '' },
  { verb: 'create', resource: 'events', apiGroup: '' },
];

/** A call to a non-resource URL (RBAC `nonResourceURLs`), e.g. `get /metrics`. */
export interface NonResourceCall {
  verb: 'get';
  /** Exact path, e.g. `/metrics`. */
  nonResourceURL: string;
}

/**
 * Non-resource calls: `KubeMetricsScraper` (`src/sources/apiserver-metrics.ts`) reads the API server's `GET /metrics` for the
 * ServiceAccount token counters. Granted by the reader ClusterRole (non-resource URLs can only be granted
 * by a ClusterRole; Kubernetes docs "Using RBAC Authorization").
 */
export const NON_RESOURCE_CALLS: readonly NonResourceCall[] = [{ verb: 'get', nonResourceURL: '/metrics' }];

/** The PolicyRules granting exactly `calls` (one rule per verb set, URLs sorted). */
export function nonResourceRulesFor(calls: readonly NonResourceCall[]): { nonResourceURLs: string[]; verbs: string[] }[] {
  const byUrl = new Map<string, Set<string>>();
  for (const c of calls) byUrl.set(c.nonResourceURL, (byUrl.get(c.nonResourceURL) ?? new Set()).add(c.verb));
  const rules = new Map<string, { nonResourceURLs: string[]; verbs: string[] }>();
  for (const [url, verbs] of byUrl) {
    const v = [...verbs].sort();
    const r = rules.get(v.join()) ?? { nonResourceURLs: [], verbs: v };
    r.nonResourceURLs.push(url);
    rules.set(v.join(), r);
  }
  return [...rules.values()].map((r) => ({ ...r, nonResourceURLs: r.nonResourceURLs.sort() }));
}

/** Key of a call: `verb resource apiGroup` (the apiGroup is empty for core). */
export function callKey(c: ApiCall | { verb: string; resource: string; apiGroup: string }): string {
  return `${c.verb} ${c.resource} ${c.apiGroup}`;
}

/** Distinct calls, sorted by key. */
export function uniqueCalls(calls: readonly ApiCall[]): ApiCall[] {
  const byKey = new Map<string, ApiCall>();
  for (const c of calls) byKey.set(callKey(c), { verb: c.verb, resource: c.resource, apiGroup: c.apiGroup });
  return [...byKey.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, c]) => c);
}

/** Cluster-wide calls with read verbs: cluster-state reads plus the reads of remediation (the reader ClusterRole). */
export function readCalls(): ApiCall[] {
  return uniqueCalls([...KUBE_API_CALLS, ...REMEDIATION_API_CALLS].filter((c) => isReadVerb(c.verb)));
}

/** The opt-in Secret metadata read (the `tokenwatch-secret-metadata` ClusterRole): list Secrets. */
export function secretMetadataCalls(): ApiCall[] {
  return uniqueCalls(SECRET_METADATA_API_CALLS);
}

/** Calls with write verbs (the writer ClusterRole): remediation's writes. */
export function writeCalls(): ApiCall[] {
  return uniqueCalls(REMEDIATION_API_CALLS.filter((c) => !isReadVerb(c.verb)));
}

/** An RBAC PolicyRule (`rbac.authorization.k8s.io/v1`) over resources (non-resource rules: {@link nonResourceRulesFor}). */
export interface RbacRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

/**
 * The smallest readable set of PolicyRules granting exactly `calls`: one rule per (apiGroup, verb set), resources
 * sorted. Expanding the result ({@link expandRules}) gives back exactly the calls.
 */
export function rulesFor(calls: readonly ApiCall[]): RbacRule[] {
  const verbsByResource = new Map<string, { apiGroup: string; resource: string; verbs: Set<string> }>();
  for (const c of calls) {
    const k = `${c.apiGroup}\u0000${c.resource}`;
    const e = verbsByResource.get(k) ?? { apiGroup: c.apiGroup, resource: c.resource, verbs: new Set<string>() };
    e.verbs.add(c.verb);
    verbsByResource.set(k, e);
  }
  const rules = new Map<string, RbacRule>();
  for (const e of verbsByResource.values()) {
    const verbs = [...e.verbs].sort();
    const k = `${e.apiGroup}\u0000${verbs.join(',')}`;
    const r = rules.get(k) ?? { apiGroups: [e.apiGroup], resources: [], verbs };
    r.resources.push(e.resource);
    rules.set(k, r);
  }
  return [...rules.values()]
    .map((r) => ({ ...r, resources: [...r.resources].sort() }))
    .sort((a, b) => (a.apiGroups[0] ?? '').localeCompare(b.apiGroups[0] ?? '') || a.verbs.join().localeCompare(b.verbs.join()));
}

/**
 * Every (verb, resource, apiGroup) a list of rules grants, as sorted {@link callKey} strings. Rules over
 * `nonResourceURLs` grant no resource call and are skipped (checked with {@link nonResourceRulesFor}).
 * @throws Error on a `*` wildcard (which would grant more than any list of calls).
 */
export function expandRules(rules: readonly RbacRule[]): string[] {
  const keys = new Set<string>();
  for (const r of rules) {
    const urls = (r as { nonResourceURLs?: string[] }).nonResourceURLs;
    if (urls !== undefined) {
      if (urls.includes('*')) throw new TokenwatchError(ErrorCode.Internal, `RBAC rule with a wildcard grants more than the code uses: ${JSON.stringify(r)}`);
      continue;
    }
    for (const list of [r.apiGroups, r.resources, r.verbs]) {
      if (list.includes('*')) throw new TokenwatchError(ErrorCode.Internal, `RBAC rule with a wildcard grants more than the code uses: ${JSON.stringify(r)}`);
    }
    for (const apiGroup of r.apiGroups) for (const resource of r.resources) for (const verb of r.verbs) keys.add(callKey({ verb, resource, apiGroup }));
  }
  return [...keys].sort();
}
