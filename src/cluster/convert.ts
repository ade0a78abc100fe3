/**
 * Pure converters from Kubernetes API objects to the cluster-state shapes of `./types.ts`.
 *
 * Inputs are typed loosely (`unknown`): they may be plain JSON (a `kubectl get -o json` snapshot,
 * timestamps as RFC 3339 strings) or `@kubernetes/client-node` 2 model instances (`V1Pod`, …,
 * timestamps deserialized to `Date`). Both are read through the narrowing helpers below, so no
 * converter throws on a malformed object: missing fields become `undefined`, `[]` or `{}`.
 *
 * No I/O here. Owner-chain resolution takes a lookup function; `snapshot.ts` answers it from an
 * in-memory index and `kube.ts` from API reads.
 *
 * Field meanings: Kubernetes API reference (core/v1 Pod, ServiceAccount, Secret; apps/v1; batch/v1).
 */
import type {
  ContainerInfo,
  LegacySecretInfo,
  PodInfo,
  ServiceAccountInfo,
  SubjectState,
  WorkloadInfo,
  WorkloadRef,
} from './types.js';

/** Secret type of legacy ServiceAccount token Secrets (kubernetes `pkg/apis/core/types.go`, `SecretTypeServiceAccountToken`). */
export const SA_TOKEN_SECRET_TYPE = 'kubernetes.io/service-account-token';
/** Annotation naming the ServiceAccount of a token Secret (`ServiceAccountNameKey`, same file). */
export const SA_NAME_ANNOTATION = 'kubernetes.io/service-account.name';
/** Label the API server sets (at most daily, `YYYY-MM-DD` UTC) when a legacy token is used; GA 1.28 (KEP-2799). */
export const LEGACY_TOKEN_LAST_USED_LABEL = 'kubernetes.io/legacy-token-last-used';
/** Label the legacy-token cleaner sets when it invalidates an unused token; GA 1.30 (KEP-2799). */
export const LEGACY_TOKEN_INVALID_SINCE_LABEL = 'kubernetes.io/legacy-token-invalid-since';

/** Owner kinds whose objects tokenwatch reads to climb an owner chain, with their API group. */
export const OWNER_KINDS: Readonly<Record<string, { apiGroup: string; resource: string }>> = {
  ReplicaSet: { apiGroup: 'apps', resource: 'replicasets' },
  Deployment: { apiGroup: 'apps', resource: 'deployments' },
  DaemonSet: { apiGroup: 'apps', resource: 'daemonsets' },
  StatefulSet: { apiGroup: 'apps', resource: 'statefulsets' },
  Job: { apiGroup: 'batch', resource: 'jobs' },
  CronJob: { apiGroup: 'batch', resource: 'cronjobs' },
};

/** Deepest owner chain followed (a real chain is at most Pod → Job → CronJob / Pod → ReplicaSet → Deployment). */
const MAX_OWNER_DEPTH = 8;

// ---------------------------------------------------------------------------------------------
// Narrowing helpers (JSON boundary)
// ---------------------------------------------------------------------------------------------

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Value at a property path, or undefined when any step is missing or not an object. */
function at(v: unknown, ...path: string[]): unknown {
  let cur = v;
  for (const key of path) {
    if (!isObj(cur)) return undefined;
    cur = cur[key];
  }
  return cur;
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

function bool(v: unknown): boolean | undefined {
  return typeof v === 'boolean' ? v : undefined;
}

function arr(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

function strings(v: unknown): string[] {
  return arr(v).filter((x): x is string => typeof x === 'string');
}

function stringMap(v: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!isObj(v)) return out;
  for (const [k, val] of Object.entries(v)) if (typeof val === 'string') out[k] = val;
  return out;
}

/** Names of `[{name}]` lists (`imagePullSecrets`, `secrets`). */
function names(v: unknown): string[] {
  return arr(v)
    .map((x) => str(at(x, 'name')))
    .filter((x): x is string => x !== undefined && x !== '');
}

/**
 * A Kubernetes timestamp (RFC 3339 string in JSON, `Date` after client-node deserialization) as epoch ms UTC.
 * @returns undefined when absent or unparseable.
 */
export function toEpochMs(v: unknown): number | undefined {
  if (v instanceof Date) {
    const t = v.getTime();
    return Number.isNaN(t) ? undefined : t;
  }
  if (typeof v === 'string' && v !== '') {
    const t = Date.parse(v);
    return Number.isNaN(t) ? undefined : t;
  }
  return undefined;
}

/** `metadata.namespace` / `metadata.name` / `kind` of an object ('' when missing). */
export function objectKey(obj: unknown): { kind: string; namespace: string; name: string } {
  return {
    kind: str(at(obj, 'kind')) ?? '',
    namespace: str(at(obj, 'metadata', 'namespace')) ?? '',
    name: str(at(obj, 'metadata', 'name')) ?? '',
  };
}

// ---------------------------------------------------------------------------------------------
// Images
// ---------------------------------------------------------------------------------------------

/** Parts of a container image reference. */
export interface ImageRef {
  /** Registry host[:port], when the first path component is one. */
  registry?: string;
  /** Path without registry, tag and digest (`eks/multus-cni`, `nginx`). */
  repository: string;
  tag?: string;
  /** `algorithm:hex`, e.g. `sha256:…`. */
  digest?: string;
}

/**
 * Split an image reference into registry, repository, tag and digest, following the Docker
 * reference grammar (github.com/distribution/reference `normalize.go`, `splitDockerDomain`): the first
 * `/`-separated component is a registry when it contains `.` or `:` or is `localhost`; the tag is the part
 * after the last `:` of the final path component; the digest follows `@`.
 * Docker Hub names are left as written (`nginx` stays `nginx`, not `library/nginx`).
 *
 * Examples: `602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/multus-cni:v3.7.2-eksbuild.1` →
 * `{registry:'602401143452.dkr.ecr.us-west-2.amazonaws.com', repository:'eks/multus-cni', tag:'v3.7.2-eksbuild.1'}`;
 * `localhost:5000/app@sha256:ab…` → `{registry:'localhost:5000', repository:'app', digest:'sha256:ab…'}`.
 */
export function parseImageRef(image: string): ImageRef {
  let rest = image.trim();
  let digest: string | undefined;
  const atIdx = rest.indexOf('@');
  if (atIdx >= 0) {
    digest = rest.slice(atIdx + 1) || undefined;
    rest = rest.slice(0, atIdx);
  }
  let registry: string | undefined;
  const slash = rest.indexOf('/');
  if (slash >= 0) {
    const first = rest.slice(0, slash);
    if (first.includes('.') || first.includes(':') || first === 'localhost') {
      registry = first;
      rest = rest.slice(slash + 1);
    }
  }
  let tag: string | undefined;
  const lastSlash = rest.lastIndexOf('/');
  const colon = rest.lastIndexOf(':');
  if (colon > lastSlash) {
    tag = rest.slice(colon + 1) || undefined;
    rest = rest.slice(0, colon);
  }
  const ref: ImageRef = { repository: rest };
  if (registry !== undefined) ref.registry = registry;
  if (tag !== undefined) ref.tag = tag;
  if (digest !== undefined) ref.digest = digest;
  return ref;
}

// ---------------------------------------------------------------------------------------------
// Pods and containers
// ---------------------------------------------------------------------------------------------

/** One `spec.containers[]` / `spec.initContainers[]` entry as {@link ContainerInfo}. */
export function toContainerInfo(container: unknown, init: boolean): ContainerInfo {
  const image = str(at(container, 'image')) ?? '';
  const ref = parseImageRef(image);
  const info: ContainerInfo = {
    name: str(at(container, 'name')) ?? '',
    image,
    imageRepository: ref.repository,
    command: strings(at(container, 'command')),
    args: strings(at(container, 'args')),
    init,
  };
  const env: Record<string, string> = {};
  for (const e of arr(at(container, 'env'))) {
    const name = str(at(e, 'name'));
    const value = str(at(e, 'value'));
    if (name !== undefined && value !== undefined) env[name] = value;
  }
  if (Object.keys(env).length > 0) info.env = env;
  if (ref.tag !== undefined) info.imageTag = ref.tag;
  if (ref.registry !== undefined) info.imageRegistry = ref.registry;
  if (ref.digest !== undefined) info.imageDigest = ref.digest;
  return info;
}

/** Containers of a pod spec: regular containers first, then init containers (flagged `init: true`). */
export function podSpecContainers(podSpec: unknown): ContainerInfo[] {
  return [
    ...arr(at(podSpec, 'containers')).map((c) => toContainerInfo(c, false)),
    ...arr(at(podSpec, 'initContainers')).map((c) => toContainerInfo(c, true)),
  ];
}

/**
 * Whether a pod spec mounts a projected ServiceAccount token: any `volumes[].projected.sources[]` with a
 * `serviceAccountToken` source. The automatic `kube-api-access-*` volume is such a projected volume
 * (kubernetes `plugin/pkg/admission/serviceaccount/admission.go`, `TokenVolumeSource`).
 */
export function hasProjectedToken(podSpec: unknown): boolean {
  return arr(at(podSpec, 'volumes')).some((vol) =>
    arr(at(vol, 'projected', 'sources')).some((src) => isObj(at(src, 'serviceAccountToken'))),
  );
}

/** ServiceAccount of a pod spec: `serviceAccountName`, else deprecated `serviceAccount`, else `default` (API server default). */
export function podServiceAccount(podSpec: unknown): string {
  return str(at(podSpec, 'serviceAccountName')) || str(at(podSpec, 'serviceAccount')) || 'default';
}

/**
 * A Pod as {@link PodInfo}. `ownerChain` is passed in (see {@link resolveOwnerChain}); it defaults to empty.
 * `startTime` is `status.startTime` in epoch ms UTC.
 */
/**
 * The label and annotation keys kept of workloads (and annotation keys of pods) beyond what tokenwatch itself reads:
 * those the Slack routing rules name (`slack.routes[].match.labels`/`annotations`), so memory stays bounded.
 */
export interface MetaKeys {
  labels: readonly string[];
  annotations: readonly string[];
  /**
   * The label keys kept of Namespace objects (`slack.routes[].match.namespaceLabels`). Absent or empty: namespaces are
   * not read at all (no watch, no RBAC needed).
   */
  namespaceLabels?: readonly string[];
}

/** The labels of a Namespace object whose key is in `keys` (empty object when none is). */
export function toNamespaceLabels(ns: unknown, keys: readonly string[]): Record<string, string> {
  return pick(at(ns, 'metadata', 'labels'), keys) ?? {};
}

/** The entries of `map` whose key is in `keys`, or undefined when none is. */
function pick(map: unknown, keys: readonly string[]): Record<string, string> | undefined {
  if (keys.length === 0) return undefined;
  const all = stringMap(map);
  const out: Record<string, string> = {};
  let any = false;
  for (const k of keys) {
    const v = all[k];
    if (v !== undefined) {
      out[k] = v;
      any = true;
    }
  }
  return any ? out : undefined;
}

export function toPodInfo(pod: unknown, ownerChain: WorkloadRef[] = [], keep?: MetaKeys): PodInfo {
  const spec = at(pod, 'spec');
  const info: PodInfo = {
    namespace: str(at(pod, 'metadata', 'namespace')) ?? '',
    name: str(at(pod, 'metadata', 'name')) ?? '',
    serviceAccount: podServiceAccount(spec),
    containers: podSpecContainers(spec),
    hostPaths: arr(at(spec, 'volumes'))
      .map((vol) => str(at(vol, 'hostPath', 'path')))
      .filter((p): p is string => p !== undefined),
    projectedToken: hasProjectedToken(spec),
    ownerChain,
    labels: stringMap(at(pod, 'metadata', 'labels')),
  };
  const uid = str(at(pod, 'metadata', 'uid'));
  if (uid) info.uid = uid;
  const node = str(at(spec, 'nodeName'));
  if (node) info.node = node;
  const startTime = toEpochMs(at(pod, 'status', 'startTime'));
  if (startTime !== undefined) info.startTime = startTime;
  const phase = str(at(pod, 'status', 'phase'));
  if (phase) info.phase = phase;
  const ips = arr(at(pod, 'status', 'podIPs'))
    .map((x) => str(at(x, 'ip')))
    .filter((x): x is string => !!x);
  const podIP = str(at(pod, 'status', 'podIP'));
  if (podIP && !ips.includes(podIP)) ips.unshift(podIP);
  if (ips.length > 0) info.ips = ips;
  const hostIP = str(at(pod, 'status', 'hostIP'));
  if (hostIP) info.hostIP = hostIP;
  if (bool(at(spec, 'hostNetwork')) === true) info.hostNetwork = true;
  const annotations = keep ? pick(at(pod, 'metadata', 'annotations'), keep.annotations) : undefined;
  if (annotations) info.annotations = annotations;
  return info;
}

// ---------------------------------------------------------------------------------------------
// Owner chains and workloads
// ---------------------------------------------------------------------------------------------

/**
 * Finds the object a {@link WorkloadRef} names, or undefined when it is gone, unknown or unreadable.
 * May be synchronous (snapshot index) or asynchronous (API read).
 */
export type OwnerLookup = (ref: WorkloadRef) => Promise<unknown> | unknown;

/**
 * The controlling owner of an object: the `metadata.ownerReferences[]` entry with `controller: true`, else the
 * first entry (kubernetes `apimachinery/pkg/apis/meta/v1/controller_ref.go`). Owners live in the object's
 * namespace, except cluster-scoped kinds (`Node`, owner of static mirror pods), which get namespace `''`.
 */
export function controllerRef(obj: unknown): WorkloadRef | undefined {
  const refs = arr(at(obj, 'metadata', 'ownerReferences')).filter(isObj);
  const ref = refs.find((r) => r['controller'] === true) ?? refs[0];
  const kind = str(at(ref, 'kind'));
  const name = str(at(ref, 'name'));
  if (!kind || !name) return undefined;
  const namespace = kind === 'Node' ? '' : (str(at(obj, 'metadata', 'namespace')) ?? '');
  const apiVersion = str(at(ref, 'apiVersion'));
  const out: WorkloadRef = { kind, namespace, name };
  // Kept only where it matters: a custom resource reusing a built-in kind name (e.g. apps.kruise.io StatefulSet).
  if (apiVersion && OWNER_KINDS[kind] && !isBuiltinOwner({ kind, namespace, name, apiVersion })) out.apiVersion = apiVersion;
  return out;
}

/** Kinds `kubectl rollout restart` can restart (kubectl `polymorphichelpers/objectrestarter.go`), all in group `apps`. */
export const ROLLOUT_KINDS: readonly string[] = ['Deployment', 'StatefulSet', 'DaemonSet'];

/** API group of an `apiVersion` (`apps/v1` → `apps`, `v1` → `''`). */
export function apiGroupOf(apiVersion: string): string {
  const i = apiVersion.indexOf('/');
  return i < 0 ? '' : apiVersion.slice(0, i);
}

/**
 * Whether an owner reference names a built-in kind tokenwatch reads ({@link OWNER_KINDS}): same kind and, when the
 * reference carries an `apiVersion`, the same API group (`extensions` is accepted for the old apps kinds). A custom
 * resource that reuses a built-in kind name (OpenKruise `apps.kruise.io` StatefulSet/DaemonSet) is not one.
 */
export function isBuiltinOwner(ref: WorkloadRef): boolean {
  const k = OWNER_KINDS[ref.kind];
  if (!k) return false;
  if (ref.apiVersion === undefined) return true;
  const g = apiGroupOf(ref.apiVersion);
  return g === k.apiGroup || (g === 'extensions' && k.apiGroup === 'apps');
}

/**
 * The workload to name for a pod with this owner chain (direct owner first), and the object above it:
 * - the nearest restartable controller (apps/v1 Deployment, StatefulSet, DaemonSet — a ReplicaSet is climbed to its
 *   Deployment), so an operator's pods are named by the StatefulSet/Deployment it created, not by its custom resource;
 * - else, for a Job, its CronJob when it has one (not restartable: the next run gets a fresh token), else the Job;
 * - else the top of the chain (a bare ReplicaSet, a custom resource, a Node for mirror pods).
 * `owner` is the next reference up the chain, when there is one.
 * @returns undefined for a bare pod (empty chain).
 */
export function nearestWorkload(chain: readonly WorkloadRef[]): { workload: WorkloadRef; owner?: WorkloadRef } | undefined {
  if (chain.length === 0) return undefined;
  let i = chain.findIndex((r) => ROLLOUT_KINDS.includes(r.kind) && isBuiltinOwner(r));
  if (i < 0) {
    const job = chain.findIndex((r) => r.kind === 'Job' && isBuiltinOwner(r));
    if (job >= 0) {
      const next = chain[job + 1];
      i = next && next.kind === 'CronJob' && isBuiltinOwner(next) ? job + 1 : job;
    } else {
      i = chain.length - 1;
    }
  }
  const workload = chain[i]!;
  const owner = chain[i + 1];
  return owner ? { workload, owner } : { workload };
}

/**
 * Owner chain of a pod (or any object), from its direct controller up to the top: Pod → ReplicaSet → Deployment,
 * Pod → Job → CronJob, Pod → DaemonSet, Pod → StatefulSet; a bare pod gives `[]`.
 * An owner the lookup cannot find still appears (its reference is known) but ends the chain.
 * Cycles and chains deeper than 8 are cut.
 */
export async function resolveOwnerChain(obj: unknown, lookup: OwnerLookup): Promise<WorkloadRef[]> {
  const chain: WorkloadRef[] = [];
  const seen = new Set<string>();
  let cur: unknown = obj;
  while (chain.length < MAX_OWNER_DEPTH) {
    const ref = controllerRef(cur);
    if (!ref) break;
    const key = `${ref.kind}/${ref.namespace}/${ref.name}`;
    if (seen.has(key)) break;
    seen.add(key);
    chain.push(ref);
    if (!isBuiltinOwner(ref)) break; // a custom resource: its owners are not read
    const next = await lookup(ref);
    if (next === undefined || next === null) break;
    cur = next;
  }
  return chain;
}

/** Pod spec of a workload's pod template (`spec.template.spec`; CronJob `spec.jobTemplate.spec.template.spec`; Pod `spec`). */
export function podTemplateSpec(obj: unknown): unknown {
  const kind = str(at(obj, 'kind'));
  if (kind === 'Pod') return at(obj, 'spec');
  if (kind === 'CronJob') return at(obj, 'spec', 'jobTemplate', 'spec', 'template', 'spec');
  return at(obj, 'spec', 'template', 'spec');
}

/**
 * A workload object (DaemonSet, Deployment, StatefulSet, ReplicaSet, Job, CronJob, or a bare Pod) as
 * {@link WorkloadInfo}. `kind` must be given for client-node model instances, which may lack it; it wins over
 * the object's own `kind`.
 * - `updateStrategy`: DaemonSet/StatefulSet `spec.updateStrategy.type`, Deployment `spec.strategy.type`;
 * - `desired`: DaemonSet `status.desiredNumberScheduled`, else `spec.replicas`;
 * - `images`/`args`: of the pod template's containers then init containers.
 */
export function toWorkloadInfo(obj: unknown, kind?: string, keep?: MetaKeys): WorkloadInfo {
  const k = kind ?? str(at(obj, 'kind')) ?? '';
  const spec = at(obj, 'spec');
  const tmpl = k === 'Pod' ? spec : podTemplateSpec({ kind: k, spec });
  const containers = podSpecContainers(tmpl);
  const info: WorkloadInfo = {
    kind: k,
    namespace: str(at(obj, 'metadata', 'namespace')) ?? '',
    name: str(at(obj, 'metadata', 'name')) ?? '',
    images: containers.map((c) => c.image),
    args: containers.flatMap((c) => c.args),
  };
  const uid = str(at(obj, 'metadata', 'uid'));
  if (uid) info.uid = uid;
  const strategy =
    k === 'Deployment' ? str(at(spec, 'strategy', 'type')) : str(at(spec, 'updateStrategy', 'type'));
  if (strategy) info.updateStrategy = strategy;
  if (k === 'Deployment') {
    const paused = bool(at(spec, 'paused'));
    if (paused !== undefined) info.paused = paused;
  }
  const desired = k === 'DaemonSet' ? num(at(obj, 'status', 'desiredNumberScheduled')) : num(at(spec, 'replicas'));
  if (desired !== undefined) info.desired = desired;
  if (tmpl !== undefined) info.serviceAccount = podServiceAccount(tmpl);
  if (keep) {
    const labels = pick(at(obj, 'metadata', 'labels'), keep.labels);
    if (labels) info.labels = labels;
    const annotations = pick(at(obj, 'metadata', 'annotations'), keep.annotations);
    if (annotations) info.annotations = annotations;
  }
  return info;
}

// ---------------------------------------------------------------------------------------------
// ServiceAccounts and legacy token Secrets
// ---------------------------------------------------------------------------------------------

/** A ServiceAccount as {@link ServiceAccountInfo} (`createdAt` = `metadata.creationTimestamp`, epoch ms UTC). */
export function toServiceAccountInfo(sa: unknown): ServiceAccountInfo {
  const info: ServiceAccountInfo = {
    namespace: str(at(sa, 'metadata', 'namespace')) ?? '',
    name: str(at(sa, 'metadata', 'name')) ?? '',
    labels: stringMap(at(sa, 'metadata', 'labels')),
    annotations: stringMap(at(sa, 'metadata', 'annotations')),
    imagePullSecrets: names(at(sa, 'imagePullSecrets')),
    secrets: names(at(sa, 'secrets')),
  };
  const uid = str(at(sa, 'metadata', 'uid'));
  if (uid) info.uid = uid;
  const automount = bool(at(sa, 'automountServiceAccountToken'));
  if (automount !== undefined) info.automountServiceAccountToken = automount;
  const createdAt = toEpochMs(at(sa, 'metadata', 'creationTimestamp'));
  if (createdAt !== undefined) info.createdAt = createdAt;
  return info;
}

/**
 * A `kubernetes.io/service-account-token` Secret as {@link LegacySecretInfo}, reading only metadata (never `data`).
 * Returns undefined for a Secret of another `type` or without the `kubernetes.io/service-account.name`
 * annotation. A missing `type` is accepted, because a metadata-only list (`PartialObjectMetadataList`)
 * filtered server-side by `type=kubernetes.io/service-account-token` carries no `type` field.
 */
export function toLegacySecretInfo(secret: unknown): LegacySecretInfo | undefined {
  const type = str(at(secret, 'type'));
  if (type !== undefined && type !== SA_TOKEN_SECRET_TYPE) return undefined;
  const annotations = stringMap(at(secret, 'metadata', 'annotations'));
  const serviceAccount = annotations[SA_NAME_ANNOTATION];
  if (!serviceAccount) return undefined;
  const labels = stringMap(at(secret, 'metadata', 'labels'));
  const info: LegacySecretInfo = {
    namespace: str(at(secret, 'metadata', 'namespace')) ?? '',
    name: str(at(secret, 'metadata', 'name')) ?? '',
    serviceAccount,
  };
  const lastUsed = labels[LEGACY_TOKEN_LAST_USED_LABEL];
  if (lastUsed) info.lastUsed = lastUsed;
  const invalidSince = labels[LEGACY_TOKEN_INVALID_SINCE_LABEL];
  if (invalidSince) info.invalidSince = invalidSince;
  const createdAt = toEpochMs(at(secret, 'metadata', 'creationTimestamp'));
  if (createdAt !== undefined) info.createdAt = createdAt;
  return info;
}

// ---------------------------------------------------------------------------------------------
// Assembly shared by both ClusterStateSource implementations
// ---------------------------------------------------------------------------------------------

function refKey(r: WorkloadRef): string {
  return `${r.kind}/${r.namespace}/${r.name}`;
}

function byKindThenName(a: WorkloadRef, b: WorkloadRef): number {
  return a.kind.localeCompare(b.kind) || a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name);
}

/** Raw objects fetched for one ServiceAccount, input to {@link assembleSubjectState}. */
export interface SubjectObjects {
  /** The ServiceAccount object, undefined when it does not exist. */
  serviceAccount?: unknown;
  /** Pods whose `spec.serviceAccountName` is the ServiceAccount. */
  pods: unknown[];
  /** Legacy token Secrets (from {@link toLegacySecretInfo}); only those annotated for this ServiceAccount are kept. */
  legacySecrets: LegacySecretInfo[];
}

/**
 * Build the {@link SubjectState} of ServiceAccount `namespace/name` from fetched objects, climbing owner chains
 * with `lookup`. Sets `available: true`; the caller adds `error` for partial state.
 *
 * - `pods` sorted by name; `legacySecrets` only those annotated for this ServiceAccount, sorted by name;
 * - `workloads` = for each pod the workload {@link nearestWorkload} names (the nearest restartable controller, else
 *   the CronJob or Job, else the top of the chain), with the object above it as `owner` (e.g. an operator's custom
 *   resource), deduplicated, sorted by kind then name. A bare pod is its own workload (`kind: 'Pod'`); a workload the
 *   lookup cannot return (e.g. a custom resource or `Node`) appears with only its reference (`images: []`, `args: []`).
 */
export async function assembleSubjectState(
  namespace: string,
  name: string,
  objects: SubjectObjects,
  lookup: OwnerLookup,
  keep?: MetaKeys,
): Promise<SubjectState> {
  const pods: PodInfo[] = [];
  const workloads = new Map<string, WorkloadInfo>();
  for (const pod of objects.pods) {
    const chain = await resolveOwnerChain(pod, lookup);
    const info = toPodInfo(pod, chain, keep);
    pods.push(info);
    const near = nearestWorkload(chain);
    if (!near) {
      const w = toWorkloadInfo(pod, 'Pod', keep);
      workloads.set(refKey(w), w);
      continue;
    }
    const top = near.workload;
    const key = refKey(top);
    if (workloads.has(key)) continue;
    const obj = isBuiltinOwner(top) ? await lookup(top) : undefined;
    const w: WorkloadInfo =
      obj === undefined || obj === null
        ? { kind: top.kind, namespace: top.namespace, name: top.name, images: [], args: [] }
        : toWorkloadInfo(obj, top.kind, keep);
    if (near.owner) w.owner = { kind: near.owner.kind, namespace: near.owner.namespace, name: near.owner.name };
    workloads.set(key, w);
  }
  pods.sort((a, b) => a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name));
  const legacySecrets = objects.legacySecrets
    .filter((s) => s.namespace === namespace && s.serviceAccount === name)
    .sort((a, b) => a.name.localeCompare(b.name));
  const state: SubjectState = {
    available: true,
    pods,
    workloads: [...workloads.values()].sort(byKindThenName),
    legacySecrets,
  };
  if (objects.serviceAccount !== undefined && objects.serviceAccount !== null) {
    state.serviceAccount = toServiceAccountInfo(objects.serviceAccount);
  }
  return state;
}
