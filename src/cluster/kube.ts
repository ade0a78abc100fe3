/**
 * Live cluster state from the Kubernetes API through `@kubernetes/client-node` 1.4 (object-parameter API;
 * stack.md §2 — 2.x needs Node ≥ 22).
 *
 * Reads are read-only and few: one ServiceAccount get and one pod list per ServiceAccount, plus one get per distinct
 * owner object (cached for the duration of one call), plus — only with the opt-in `secretMetadata` option — one
 * Secret list per ServiceAccount. Every request goes through a shared
 * concurrency limit (p-limit) and a per-request timeout (an `AbortSignal` set on the request context by a
 * middleware). Secrets, when read at all, are listed metadata-only
 * (`Accept: application/json;as=PartialObjectMetadataList;…`), so token data never leaves the API server; but RBAC
 * cannot grant "metadata only" (`list secrets` also allows reading the data), which is why the default install
 * grants no Secret access and this read is off by default (docs/install.md "Secret metadata").
 *
 * Errors: 404 → empty/undefined; anything else that stops a core read (unreachable, timeout, 401, 403, 5xx) →
 * `{available:false, error:'cluster state unavailable: <reason>'}`; a 403 names the missing permission (verb,
 * resource, API group, namespace). Failures of the optional reads (owner objects, Secrets) keep the state
 * available and set `error: 'cluster state partial: <reason>'`.
 */
import {
  ApiException,
  AppsV1Api,
  BatchV1Api,
  CoreV1Api,
  KubeConfig,
  Observable,
  type ConfigurationOptions,
  type ObservableMiddleware,
  type RequestContext,
  type ResponseContext,
} from '@kubernetes/client-node';
import pLimit, { type LimitFunction } from 'p-limit';
import {
  assembleSubjectState,
  OWNER_KINDS,
  resolveOwnerChain,
  SA_TOKEN_SECRET_TYPE,
  toLegacySecretInfo,
  toPodInfo,
} from './convert.js';
import type { ClusterStateSource, LegacySecretInfo, PodInfo, SubjectState, WorkloadRef } from './types.js';

/** One kind of Kubernetes API call this module can make (for RBAC: `rules[].verbs/resources/apiGroups`). */
export interface KubeApiCall {
  verb: 'get' | 'list';
  resource: string;
  /** `''` for the core group. */
  apiGroup: string;
}

/**
 * Every API call {@link KubeClusterState} makes by default (without {@link SECRET_METADATA_API_CALLS}). Keep in sync
 * with the code: a test compares it with the calls recorded by the fake API server, and the RBAC manifests must
 * grant exactly these (namespaced reads in every namespace watched).
 */
export const KUBE_API_CALLS: readonly KubeApiCall[] = [
  { verb: 'get', resource: 'serviceaccounts', apiGroup: '' },
  { verb: 'get', resource: 'pods', apiGroup: '' },
  { verb: 'list', resource: 'pods', apiGroup: '' },
  ...Object.values(OWNER_KINDS).map((k) => ({ verb: 'get' as const, resource: k.resource, apiGroup: k.apiGroup })),
];

/**
 * The extra call of the opt-in Secret metadata read ({@link KubeClusterStateOptions.secretMetadata}): list Secrets
 * of type `kubernetes.io/service-account-token`, metadata only. Granted by the separate `tokenwatch-secret-metadata`
 * ClusterRole (manifests/components/secret-metadata, Helm `rbac.secretMetadata`), never by the default install.
 */
export const SECRET_METADATA_API_CALLS: readonly KubeApiCall[] = [{ verb: 'list', resource: 'secrets', apiGroup: '' }];

/** Options of {@link KubeClusterState}. */
export interface KubeClusterStateOptions {
  /** Per-request timeout in milliseconds (default 10,000). */
  timeoutMs?: number;
  /** Maximum requests in flight at once, shared by all calls on this instance (default 8). */
  concurrency?: number;
  /**
   * Also list the metadata of legacy token Secrets (`type=kubernetes.io/service-account-token`) of each
   * ServiceAccount, for their `kubernetes.io/legacy-token-last-used` / `legacy-token-invalid-since` labels. Default
   * false: the least-privilege install grants no Secret access. Config: `clusters[].kubernetes.secretMetadata`.
   */
  secretMetadata?: boolean;
}

/** Access to a cluster, as configured per cluster (design.md "Live mode"). */
export interface KubeAccess {
  /** Use the pod's ServiceAccount (`KUBERNETES_SERVICE_HOST/PORT`, token and CA under `/var/run/secrets/kubernetes.io/serviceaccount`). */
  inCluster?: boolean;
  /** Path of a kubeconfig file; default: `$KUBECONFIG`, then `~/.kube/config` (client-node `loadFromDefault`). */
  kubeconfig?: string;
  /** Context to use from the kubeconfig; default its `current-context`. */
  context?: string;
}

/**
 * Build a client-node `KubeConfig` for a cluster.
 *
 * EKS seam: token auth from AWS credentials is not built here yet. It plugs in by returning a `KubeConfig` whose
 * user carries the token — either `kc.loadFromOptions({clusters:[{name, server, caData}], users:[{name, token}], …})`
 * rebuilt before the token's 15-minute expiry, or `kc.addAuthenticator(a)` with an `Authenticator`
 * (`isAuthProvider(user)`, `applyAuthentication(user, opts)` setting `Authorization: Bearer k8s-aws-v1.…`), which
 * client-node calls on every request. {@link KubeClusterState} only needs the resulting `KubeConfig`.
 *
 * @throws Error when in-cluster config is asked for outside a pod, the kubeconfig cannot be read, or the context
 *   does not exist (message lists the contexts available).
 */
export function kubeConfigFor(opts: KubeAccess = {}): KubeConfig {
  const kc = new KubeConfig();
  if (opts.inCluster) {
    if (!process.env['KUBERNETES_SERVICE_HOST']) {
      throw new Error('in-cluster Kubernetes config requested but KUBERNETES_SERVICE_HOST is not set (not running in a pod?)');
    }
    kc.loadFromCluster();
  } else if (opts.kubeconfig) {
    try {
      kc.loadFromFile(opts.kubeconfig);
    } catch (err) {
      throw new Error(`cannot load kubeconfig ${opts.kubeconfig}: ${err instanceof Error ? err.message : String(err)}`);
    }
  } else {
    kc.loadFromDefault();
  }
  if (opts.context) {
    if (!kc.getContextObject(opts.context)) {
      const known = kc.getContexts().map((c) => c.name);
      throw new Error(`kubeconfig context "${opts.context}" not found (contexts: ${known.length ? known.join(', ') : 'none'})`);
    }
    kc.setCurrentContext(opts.context);
  }
  return kc;
}

/** Thrown by {@link KubeClusterState.getPod} when the cluster cannot be read (never for a missing pod). */
export class ClusterUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ClusterUnavailableError';
  }
}

/** What a call is doing, for error messages and RBAC hints. */
interface CallInfo {
  verb: 'get' | 'list';
  resource: string;
  apiGroup: string;
  namespace: string;
  name?: string;
}

/** A read that failed for a reason other than 404; `reason` is human-readable, without the `cluster state …:` prefix. */
class ReadError extends Error {
  constructor(readonly reason: string) {
    super(reason);
  }
}

/** Extract the `message` of a Status body, which client-node hands over as an object or a JSON string. */
function statusMessage(body: unknown): string | undefined {
  let b: unknown = body;
  if (typeof body === 'string') {
    try {
      b = JSON.parse(body);
    } catch {
      return body.trim() ? body.slice(0, 300) : undefined;
    }
  }
  if (typeof b === 'object' && b !== null && 'message' in b && typeof b.message === 'string') return b.message;
  return undefined;
}

function describeCall(c: CallInfo): string {
  return `${c.verb} ${c.resource}${c.apiGroup ? `.${c.apiGroup}` : ''} in namespace ${c.namespace}`;
}

/** Classify an error thrown by a client-node call into a reason. Returns undefined for 404 (not found). */
function classify(err: unknown, call: CallInfo, timeoutMs: number): string | undefined {
  if (err instanceof ApiException) {
    const code = err.code;
    if (code === 404) return undefined;
    if (code === 403) {
      return (
        `forbidden: no permission to ${call.verb} ${call.resource} in namespace ${call.namespace}` +
        ` (RBAC rule needed: apiGroups ["${call.apiGroup}"], resources ["${call.resource}"], verbs ["${call.verb}"])`
      );
    }
    if (code === 401) return `unauthorized (HTTP 401) on ${describeCall(call)}: credentials rejected or expired`;
    const msg = statusMessage(err.body);
    return `HTTP ${code} on ${describeCall(call)}${msg ? `: ${msg}` : ''}`;
  }
  if (err instanceof Error) {
    if (err.name === 'AbortError' || err.name === 'TimeoutError') {
      return `request timed out after ${timeoutMs} ms (${describeCall(call)})`;
    }
    // node-fetch FetchError: "request to <url> failed, reason: connect ECONNREFUSED 127.0.0.1:443"
    const m = /reason: (.*)$/.exec(err.message);
    return `${m?.[1] ?? err.message} (${describeCall(call)})`;
  }
  return `${String(err)} (${describeCall(call)})`;
}

/** A client-node middleware that edits each request before it is sent. */
function preMiddleware(edit: (ctx: RequestContext) => void): ObservableMiddleware {
  return {
    pre: (ctx: RequestContext) => {
      edit(ctx);
      return new Observable(Promise.resolve(ctx));
    },
    post: (rsp: ResponseContext) => new Observable(Promise.resolve(rsp)),
  };
}

/**
 * Per-call options: a fresh abort signal firing after `ms` milliseconds (node-fetch honours `RequestContext` signals,
 * client-node `gen/http/isomorphic-fetch.js`), plus any extra middleware. Appended to the API client's own
 * middleware, like client-node's `setHeaderOptions`.
 */
function callOptions(ms: number, extra: ObservableMiddleware[] = []): ConfigurationOptions {
  return {
    middleware: [preMiddleware((ctx) => ctx.setSignal(AbortSignal.timeout(ms))), ...extra],
    middlewareMergeStrategy: 'append',
  };
}

/** Where the RBAC of the opt-in Secret metadata read comes from (for the 403 hint). */
const SECRET_METADATA_RBAC_HINT = 'the secret-metadata RBAC (kustomize component manifests/components/secret-metadata, Helm rbac.secretMetadata=true)';

/** Ask for a metadata-only list (Kubernetes API concepts, "Receiving resources as metadata only"). */
const METADATA_ONLY = preMiddleware((ctx) =>
  ctx.setHeaderParam('Accept', 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json'),
);

/**
 * {@link ClusterStateSource} over the live Kubernetes API. Safe to share: calls only read and keep no state between
 * calls except the concurrency limit.
 */
export class KubeClusterState implements ClusterStateSource {
  private readonly core: CoreV1Api;
  private readonly apps: AppsV1Api;
  private readonly batch: BatchV1Api;
  private readonly limit: LimitFunction;
  private readonly timeoutMs: number;
  private readonly secretMetadata: boolean;

  /**
   * @param kc a client-node KubeConfig (see {@link kubeConfigFor}; tests use the fake's `kubeConfig()`).
   */
  constructor(kc: KubeConfig, opts: KubeClusterStateOptions = {}) {
    this.core = kc.makeApiClient(CoreV1Api);
    this.apps = kc.makeApiClient(AppsV1Api);
    this.batch = kc.makeApiClient(BatchV1Api);
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    this.limit = pLimit(opts.concurrency ?? 8);
    this.secretMetadata = opts.secretMetadata ?? false;
  }

  /** Run one API call under the limit and timeout; 404 → undefined; other failures → ReadError. */
  private async call<T>(
    info: CallInfo,
    fn: (options: ConfigurationOptions) => Promise<T>,
    extra: ObservableMiddleware[] = [],
  ): Promise<T | undefined> {
    return this.limit(async () => {
      try {
        return await fn(callOptions(this.timeoutMs, extra));
      } catch (err) {
        const reason = classify(err, info, this.timeoutMs);
        if (reason === undefined) return undefined;
        throw new ReadError(reason);
      }
    });
  }

  private readOwner(ref: WorkloadRef): Promise<unknown> {
    const kind = OWNER_KINDS[ref.kind];
    if (!kind) return Promise.resolve(undefined);
    const info: CallInfo = { verb: 'get', resource: kind.resource, apiGroup: kind.apiGroup, namespace: ref.namespace, name: ref.name };
    const p = { name: ref.name, namespace: ref.namespace };
    return this.call<unknown>(info, (o): Promise<unknown> => {
      switch (ref.kind) {
        case 'ReplicaSet':
          return this.apps.readNamespacedReplicaSet(p, o);
        case 'Deployment':
          return this.apps.readNamespacedDeployment(p, o);
        case 'DaemonSet':
          return this.apps.readNamespacedDaemonSet(p, o);
        case 'StatefulSet':
          return this.apps.readNamespacedStatefulSet(p, o);
        case 'Job':
          return this.batch.readNamespacedJob(p, o);
        default:
          return this.batch.readNamespacedCronJob(p, o);
      }
    });
  }

  /**
   * An owner lookup that reads each owner once per call and records failures in `problems` instead of throwing
   * (a failed owner read ends that chain).
   */
  private ownerLookup(problems: string[]): (ref: WorkloadRef) => Promise<unknown> {
    const cache = new Map<string, Promise<unknown>>();
    return (ref) => {
      const key = `${ref.kind}/${ref.namespace}/${ref.name}`;
      let p = cache.get(key);
      if (!p) {
        p = this.readOwner(ref).catch((err: unknown) => {
          if (!(err instanceof ReadError)) throw err;
          if (!problems.includes(err.reason)) problems.push(err.reason);
          return undefined;
        });
        cache.set(key, p);
      }
      return p;
    };
  }

  /**
   * See {@link ClusterStateSource.describeServiceAccount}. Makes: get serviceaccount, list pods with
   * `fieldSelector=spec.serviceAccountName=<name>`, one get per owner object and, only with the `secretMetadata`
   * option, list secrets (metadata only) with `fieldSelector=type=kubernetes.io/service-account-token`.
   * Never throws for cluster errors; see the module doc for `available`/`error`. A 403 on the opt-in Secret list
   * keeps the state available (`cluster state partial: …`, naming the RBAC component that grants it).
   */
  async describeServiceAccount(namespace: string, name: string): Promise<SubjectState> {
    const saCall = this.call({ verb: 'get', resource: 'serviceaccounts', apiGroup: '', namespace, name }, (o) =>
      this.core.readNamespacedServiceAccount({ name, namespace }, o),
    );
    const podsCall = this.call({ verb: 'list', resource: 'pods', apiGroup: '', namespace }, (o) =>
      this.core.listNamespacedPod({ namespace, fieldSelector: `spec.serviceAccountName=${name}` }, o),
    );
    const secretsCall = this.secretMetadata
      ? this.call({ verb: 'list', resource: 'secrets', apiGroup: '', namespace }, (o) =>
          this.core.listNamespacedSecret({ namespace, fieldSelector: `type=${SA_TOKEN_SECRET_TYPE}` }, o),
          [METADATA_ONLY],
        ).catch((err: unknown) => {
          if (err instanceof ReadError && err.reason.startsWith('forbidden:')) {
            throw new ReadError(`${err.reason}; kubernetes.secretMetadata is on but not granted: apply ${SECRET_METADATA_RBAC_HINT}, or turn it off`);
          }
          throw err;
        })
      : Promise.resolve(undefined);
    const [sa, pods, secrets] = await Promise.allSettled([saCall, podsCall, secretsCall]);
    for (const r of [sa, pods]) {
      if (r.status === 'rejected') return unavailable(r.reason);
    }
    const problems: string[] = [];
    let legacySecrets: LegacySecretInfo[] = [];
    if (secrets.status === 'rejected') {
      if (!(secrets.reason instanceof ReadError)) throw secrets.reason;
      problems.push(secrets.reason.reason);
    } else {
      legacySecrets = (secrets.value?.items ?? [])
        .map(toLegacySecretInfo)
        .filter((s): s is LegacySecretInfo => s !== undefined);
    }
    const lookup = this.ownerLookup(problems);
    const state = await assembleSubjectState(
      namespace,
      name,
      {
        serviceAccount: sa.status === 'fulfilled' ? sa.value : undefined,
        pods: pods.status === 'fulfilled' ? (pods.value?.items ?? []) : [],
        legacySecrets,
      },
      lookup,
    );
    if (problems.length > 0) state.error = `cluster state partial: ${problems.join('; ')}`;
    return state;
  }

  /**
   * See {@link ClusterStateSource.getPod}: the pod with its owner chain, or undefined when it does not exist.
   * Owner reads that fail shorten the chain silently.
   * @throws ClusterUnavailableError (`cluster state unavailable: <reason>`) when the pod cannot be read.
   */
  async getPod(namespace: string, name: string): Promise<PodInfo | undefined> {
    let pod: unknown;
    try {
      pod = await this.call({ verb: 'get', resource: 'pods', apiGroup: '', namespace, name }, (o) =>
        this.core.readNamespacedPod({ name, namespace }, o),
      );
    } catch (err) {
      if (err instanceof ReadError) throw new ClusterUnavailableError(`cluster state unavailable: ${err.reason}`);
      throw err;
    }
    if (pod === undefined) return undefined;
    return toPodInfo(pod, await resolveOwnerChain(pod, this.ownerLookup([])));
  }
}

function unavailable(reason: unknown): SubjectState {
  if (!(reason instanceof ReadError)) throw reason;
  return {
    available: false,
    error: `cluster state unavailable: ${reason.reason}`,
    pods: [],
    workloads: [],
    legacySecrets: [],
  };
}
