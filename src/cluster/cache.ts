/**
 * A watch cache of one cluster, the way controllers keep many clusters (client-go's Reflector/informer): list each
 * resource once, then watch it from the list's `resourceVersion`, so a poll reads memory instead of the API server.
 *
 * Watched, cluster-wide: pods, ServiceAccounts and the owner workloads of {@link OWNER_KINDS} (ReplicaSets,
 * Deployments, DaemonSets, StatefulSets, Jobs, CronJobs) — the objects {@link KubeClusterState} reads per poll — and,
 * only when Slack routing rules match on namespace labels (`metaKeys.namespaceLabels`), namespaces (the named label
 * keys only). The
 * reads are cluster-wide like the direct reads they replace: the audit log names ServiceAccounts in every namespace,
 * and the approval policy's `namespaces` lists scope actions, not what tokenwatch explains.
 *
 * Protocol (Kubernetes API concepts, "Efficient detection of changes" and "Watch bookmarks",
 * https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes):
 * - list in pages (`limit`, `continue`), remember the list's `metadata.resourceVersion`;
 * - watch with `watch=true&resourceVersion=<rv>&allowWatchBookmarks=true&timeoutSeconds=<30–60 min>`: a stream of JSON
 *   lines `{type, object}`; every event (bookmarks included) moves `rv` on, so a reconnect resumes where it stopped;
 * - `410 Gone` (an `ERROR` event whose Status has `code: 410`, reason `Expired`, or a 410 answer) means the history
 *   before `rv` is gone: relist, and replace the cache with the new list (objects missing from it are dropped);
 * - a stream the server ends (its `timeoutSeconds`), or one quiet for longer than `idleTimeoutMs` (a connection that
 *   went dark; default 5 min, while kube-apiserver's watch cache sends a bookmark about every minute,
 *   `defaultBookmarkFrequency = time.Minute` in kubernetes `staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go`),
 *   is reopened at once from `rv`; any other failure (connection refused, 403, 5xx, a broken line) is
 *   retried with exponential backoff (1 s doubling to 30 s, jittered).
 *
 * client-node 2 has a `ListWatch`/`makeInformer`, but it keeps every object whole, gives up after any error other
 * than 410 or a timeout (no reconnect), sends no `allowWatchBookmarks`, and its `Watch` aborts any stream quiet for
 * 30 s (a fixed private `requestTimeoutMs`) — a reconnect every 30 s per quiet resource. Hence this small list+watch
 * on undici's `fetch` with the KubeConfig's own authentication and connection pool ({@link poolConnections}).
 *
 * Memory is bounded per cluster: objects are converted on arrival ({@link toPodInfo}, {@link toWorkloadInfo},
 * {@link toServiceAccountInfo}) plus each object's controller reference; nothing of the raw JSON is kept, and equal
 * strings (images, label values, node names) are shared between entries, and so are the parts the pods of one
 * workload have in common (containers, labels, hostPath lists, controller references: one frozen copy each). Past
 * `maxObjects` entries the cache stops itself and every read goes to the API server. Reads return new top-level
 * objects over those frozen parts (no deep copy per read).
 *
 * Freshness: {@link ClusterWatchCache.freshness} says whether a read may come from the cache: every resource listed,
 * and no watch down for longer than `maxStaleMs`. Otherwise {@link KubeClusterState} reads the API directly and says
 * why ({@link KubeClusterStateOptions.onFallback}), so findings never come from a stale cache silently.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { HttpMethod, type KubeConfig, RequestContext } from '@kubernetes/client-node';
import { type Dispatcher, getGlobalDispatcher, interceptors } from 'undici';
import { ErrorCode, TokenwatchError } from '../errors.js';
import { TimeSlicer } from '../core/slice.js';
import {
  controllerRef,
  isBuiltinOwner,
  nearestWorkload,
  OWNER_KINDS,
  toPodInfo,
  toNamespaceLabels,
  toServiceAccountInfo,
  toWorkloadInfo,
  type MetaKeys,
} from './convert.js';
import type { LegacySecretInfo, PodInfo, ServiceAccountInfo, SubjectState, WorkloadInfo, WorkloadRef } from './types.js';

/** A pod as the cache keeps it: its {@link PodInfo} (empty `ownerChain`) and its controller reference. */
export interface CachedPod {
  info: PodInfo;
  controller?: WorkloadRef;
}

/** An owner workload as the cache keeps it: its {@link WorkloadInfo} and its own controller reference. */
export interface CachedOwner {
  info: WorkloadInfo;
  controller?: WorkloadRef;
}

/** What the cache holds now (diagnostics and tests): the converted entries, never raw objects. */
export interface CacheContents {
  pods: CachedPod[];
  serviceAccounts: ServiceAccountInfo[];
  owners: CachedOwner[];
}

/**
 * Whether reads may come from the cache; when not, why (`reason`, one line, no secrets) and in which state the cache
 * is: `syncing` (not every resource listed yet — normal right after start), `broken` (a watch down beyond the bound),
 * `disabled` (over `maxObjects`), `stopped` (not started, or stopped).
 */
export type CacheFreshness = { ok: true } | { ok: false; state: 'syncing' | 'broken' | 'disabled' | 'stopped'; reason: string };

/** A change in a cache's life, for logs (`serve` logs them per cluster). */
export interface CacheEvent {
  kind: 'synced' | 'relist' | 'watch-failed' | 'disabled';
  /** `pods`, `serviceaccounts`, `deployments.apps`, … (absent for `disabled`). */
  resource?: string;
  /** For `watch-failed`, `relist`, `disabled`: why. */
  reason?: string;
}

/** Options of {@link ClusterWatchCache}. */
export interface WatchCacheOptions {
  /** Longest a watch may be down (reconnecting) before reads go to the API server again, ms (default 30,000). */
  maxStaleMs?: number;
  /** A watch stream quiet (no event, no bookmark) this long is reopened from its resourceVersion, ms (default 300,000). */
  idleTimeoutMs?: number;
  /** Timeout of one list page request, ms (default 60,000). */
  listTimeoutMs?: number;
  /** Items per list page (`limit`, default 500 as client-go's reflector). */
  pageSize?: number;
  /** Most entries kept, all resources together (default 200,000); past it the cache disables itself. */
  maxObjects?: number;
  /** First and largest retry delay after a failure, ms (default 1,000 and 30,000). */
  backoffMs?: { initial: number; max: number };
  /** Clock for staleness, epoch ms (default `Date.now`). */
  clock?: () => number;
  /**
   * Label/annotation keys kept of workloads, annotation keys of pods (pods keep all labels): those the Slack routing
   * rules name (src/slack/routing.ts). Default none, so nothing more is held than without rules.
   */
  metaKeys?: MetaKeys;
  /**
   * Clock the pod-IP history is stamped with, epoch ms, in the time of the audit events it explains (`serve` passes
   * its service clock; default {@link clock}).
   */
  eventClock?: () => number;
  /**
   * How long a pod that stopped holding an IP (deleted, IP changed, Succeeded/Failed) stays findable by that IP, ms
   * (default 86,400,000: the default poll `lookback`); see {@link ClusterWatchCache.podsByIP}.
   */
  ipHistoryMs?: number;
  /** Most ended IP holds kept, all IPs together (default 10,000); past it the oldest are dropped first. */
  maxIpHistory?: number;
  /** Told about syncs, relists, failures (default: nothing). */
  onEvent?: (e: CacheEvent) => void;
  /**
   * Runs the CPU part of each list page (parsing the answer, converting its items), so that the caches of many
   * clusters share a bound (`serve` passes one `p-limit` for all: at start a thousand clusters list at once). Only
   * the answer's processing waits here, not the request: a cluster that never answers holds no slot. Default: no bound.
   */
  listLimit?: <T>(fn: () => Promise<T>) => Promise<T>;
}

/**
 * One pod's hold of one IP (its pod IP, or for a hostNetwork pod its node's IP): from `since` (the pod's
 * `status.startTime`, else when the cache saw it with that IP — but never before the IP's previous pod let it go: a
 * pod may start while the pod whose IP it gets is still terminating) to `until` (when the cache saw it deleted, with another
 * IP, or Succeeded/Failed; undefined while held). Epoch ms of the cache's event clock.
 */
interface IpHold {
  key: string;
  pod: CachedPod;
  since: number;
  until?: number;
}

/** The hold of pod `key` among an IP's holders (the one hold, or a Map of several), if it has one. */
function holdOf(holders: IpHold | Map<string, IpHold> | undefined, key: string): IpHold | undefined {
  return holders instanceof Map ? holders.get(key) : holders?.key === key ? holders : undefined;
}

/** A time range, epoch ms, both ends included. */
export interface TimeRange {
  from: number;
  to: number;
}

/** A resource the cache watches. */
interface Watched {
  /** `pods`, `deployments.apps`: how messages name it. */
  name: string;
  /** Collection path, cluster-wide (`/api/v1/pods`). */
  path: string;
}

/** One resource's store: the converted entries by `namespace/name`. */
interface EntryStore {
  replaceAll(entries: Map<string, unknown>): void;
  upsert(key: string, obj: unknown): void;
  remove(key: string): void;
  convert(obj: unknown): unknown;
}

/** A failure with the HTTP status it came with (0: none). */
class WatchError extends TokenwatchError {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(ErrorCode.ClusterReadFailed, message);
  }
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const metaOf = (o: unknown): Obj => (isObj(o) && isObj(o['metadata']) ? o['metadata'] : {});
const keyOf = (o: unknown): string => {
  const m = metaOf(o);
  return `${typeof m['namespace'] === 'string' ? m['namespace'] : ''}/${typeof m['name'] === 'string' ? m['name'] : ''}`;
};
const rvOf = (o: unknown): string | undefined => {
  const rv = metaOf(o)['resourceVersion'];
  return typeof rv === 'string' && rv !== '' ? rv : undefined;
};

function statusText(body: unknown): string | undefined {
  return isObj(body) && typeof body['message'] === 'string' ? body['message'] : undefined;
}

function describeError(err: unknown): string {
  if (err instanceof WatchError) return err.message;
  if (err instanceof Error) {
    if (err.name === 'TimeoutError') return 'request timed out';
    // undici's request rejects with the cause itself (`connect ECONNREFUSED …`); its fetch with TypeError "fetch
    // failed" whose cause says why.
    return err.cause instanceof Error ? err.cause.message : err.message;
  }
  return String(err);
}

/** Cut a WorkloadInfo for a bare pod from its PodInfo (what `toWorkloadInfo(pod, 'Pod')` gives). */
function bareWorkload(p: PodInfo): WorkloadInfo {
  const w: WorkloadInfo = {
    kind: 'Pod',
    namespace: p.namespace,
    name: p.name,
    images: p.containers.map((c) => c.image),
    args: p.containers.flatMap((c) => c.args),
  };
  if (p.uid) w.uid = p.uid;
  w.serviceAccount = p.serviceAccount;
  return w;
}

/**
 * Shares equal strings between entries (images, registries, label values, node names repeat across pods and across
 * clusters, but every JSON.parse makes fresh copies). Bounded: past `max` distinct strings it starts over.
 */
class Interner {
  private readonly strings = new Map<string, string>();
  constructor(private readonly max = 200_000) {}

  /** `v` with every string in it (values, not keys) replaced by the shared copy; arrays and objects edited in place. */
  deep<T>(v: T): T {
    if (typeof v === 'string') return this.string(v) as T;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) v[i] = this.deep(v[i]);
    } else if (isObj(v)) {
      const o: Obj = v;
      for (const k of Object.keys(o)) o[k] = this.deep(o[k]);
    }
    return v;
  }

  /** The shared copy of `s`. */
  string(s: string): string {
    const known = this.strings.get(s);
    if (known !== undefined) return known;
    if (this.strings.size >= this.max) this.strings.clear();
    this.strings.set(s, s);
    return s;
  }
}

/**
 * Shares equal values between entries: the pods of one ReplicaSet or DaemonSet (and of the same workload in other
 * clusters) have equal containers, labels, hostPath lists and controller references, so each distinct value is kept
 * once, deep-frozen, keyed by its JSON text (the converters build objects with a fixed key order). Bounded like
 * {@link Interner}. What the cache hands out shares these frozen parts: a caller that edits them fails loudly
 * (`TypeError` in strict mode) instead of changing the cache.
 */
class ValueSharer {
  private readonly values = new Map<string, unknown>();
  constructor(
    private readonly strings: Interner,
    private readonly max = 100_000,
  ) {}

  /** The shared, frozen copy of `v` (its strings interned). */
  of<T>(v: T): T {
    const key = JSON.stringify(v);
    const known = this.values.get(key);
    if (known !== undefined) return known as T;
    if (this.values.size >= this.max) this.values.clear();
    const shared = deepFreeze(this.strings.deep(v));
    this.values.set(key, shared);
    return shared;
  }
}

function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null && !Object.isFrozen(v)) {
    for (const x of Object.values(v)) deepFreeze(x);
    Object.freeze(v);
  }
  return v;
}

/** One interner for every cache of the process: clusters share images and label values too. */
const SHARED_STRINGS = new Interner();
/** One sharer of pod parts for every cache of the process. */
const SHARED_VALUES = new ValueSharer(SHARED_STRINGS);

/**
 * A pod's {@link CachedPod} with its repeating parts shared ({@link ValueSharer}) and its repeating strings interned;
 * the strings unique to the pod (name, uid, IPs) are kept as parsed, since sharing them saves nothing.
 */
function compactPod(info: PodInfo, controller: WorkloadRef | undefined): CachedPod {
  const s = SHARED_STRINGS;
  const v = SHARED_VALUES;
  info.namespace = s.string(info.namespace);
  info.serviceAccount = s.string(info.serviceAccount);
  info.containers = v.of(info.containers);
  info.hostPaths = v.of(info.hostPaths);
  info.ownerChain = v.of(info.ownerChain);
  info.labels = v.of(info.labels);
  if (info.annotations !== undefined) info.annotations = v.of(info.annotations);
  if (info.node !== undefined) info.node = s.string(info.node);
  if (info.phase !== undefined) info.phase = s.string(info.phase);
  if (info.hostIP !== undefined) info.hostIP = s.string(info.hostIP);
  // A copy of exactly its length: the converter's array grew by push/unshift, which leaves room for 16 elements (about
  // 130 bytes more per pod than one IP needs).
  if (info.ips !== undefined) info.ips = Object.freeze(info.ips.slice()) as string[];
  return controller ? { info, controller: v.of(controller) } : { info };
}

/** Deepest owner chain followed (as `resolveOwnerChain` in convert.ts). */
const MAX_OWNER_DEPTH = 8;

/**
 * The watch cache of one cluster (see the module doc). {@link start} once; {@link stop} on shutdown. Reads are
 * synchronous and never touch the network.
 */
export class ClusterWatchCache {
  private readonly pods = new Map<string, CachedPod>();
  /** Pod names by `namespace/serviceAccount`. */
  private readonly podsBySa = new Map<string, Set<string>>();
  private readonly serviceAccounts = new Map<string, ServiceAccountInfo>();
  /** Owners by `Kind/namespace/name`. */
  private readonly owners = new Map<string, CachedOwner>();
  /**
   * The labels routing rules name of each namespace, by `/name` (cluster-scoped key); watched only when
   * `metaKeys.namespaceLabels` names some (`slack.routes[].match.namespaceLabels`).
   */
  private readonly namespaces = new Map<string, Readonly<Record<string, string>>>();
  /**
   * Current IP holds: IP → the one hold, or pod key → hold when several pods hold the IP (hostNetwork pods share their
   * node's). Most IPs have one holder, and a Map for each of them cost about 150 bytes per pod.
   */
  private readonly ipHolders = new Map<string, IpHold | Map<string, IpHold>>();
  /** Ended IP holds by IP, and all of them in the order they ended (for pruning). */
  private readonly ipEnded = new Map<string, IpHold[]>();
  private ipEndedQueue: { ip: string; hold: IpHold }[] = [];
  private readonly reflectors: Reflector[] = [];
  private readonly abort = new AbortController();
  private disabledReason: string | undefined;
  private started = false;
  private readonly opts: Required<Omit<WatchCacheOptions, 'onEvent' | 'eventClock' | 'listLimit' | 'metaKeys'>> & Pick<WatchCacheOptions, 'onEvent' | 'listLimit' | 'metaKeys'> & { eventClock: () => number };
  private syncedResolve: (() => void) | undefined;
  private readonly interner = SHARED_STRINGS;
  private readonly syncedPromise: Promise<void>;

  /** @param kc the cluster's KubeConfig (server, authentication, TLS; see {@link poolConnections}). */
  constructor(
    private readonly kc: KubeConfig,
    opts: WatchCacheOptions = {},
  ) {
    this.opts = {
      maxStaleMs: opts.maxStaleMs ?? 30_000,
      idleTimeoutMs: opts.idleTimeoutMs ?? 300_000,
      listTimeoutMs: opts.listTimeoutMs ?? 60_000,
      pageSize: opts.pageSize ?? 500,
      maxObjects: opts.maxObjects ?? 200_000,
      backoffMs: opts.backoffMs ?? { initial: 1000, max: 30_000 },
      clock: opts.clock ?? Date.now,
      eventClock: opts.eventClock ?? opts.clock ?? Date.now,
      ipHistoryMs: opts.ipHistoryMs ?? 86_400_000,
      maxIpHistory: opts.maxIpHistory ?? 10_000,
      ...(opts.onEvent ? { onEvent: opts.onEvent } : {}),
      ...(opts.listLimit ? { listLimit: opts.listLimit } : {}),
      ...(opts.metaKeys ? { metaKeys: opts.metaKeys } : {}),
    };
    this.syncedPromise = new Promise((resolve) => {
      this.syncedResolve = resolve;
    });
    const podStore: EntryStore = {
      convert: (o) => {
        return compactPod(toPodInfo(o, [], this.opts.metaKeys), controllerRef(o));
      },
      replaceAll: (entries) => {
        // Pods missing from a relist were deleted meanwhile: they end their IP holds now (not silently forgotten).
        for (const k of [...this.pods.keys()]) if (!entries.has(k)) this.dropPod(k);
        for (const [k, v] of entries) this.putPod(k, v as CachedPod);
      },
      upsert: (k, v) => this.putPod(k, v as CachedPod),
      remove: (k) => this.dropPod(k),
    };
    this.reflectors.push(new Reflector(this, { name: 'pods', path: '/api/v1/pods' }, podStore));
    const saStore = mapStore(this.serviceAccounts, (o) => this.interner.deep(toServiceAccountInfo(o)), (k) => k);
    this.reflectors.push(new Reflector(this, { name: 'serviceaccounts', path: '/api/v1/serviceaccounts' }, saStore));
    for (const [kind, def] of Object.entries(OWNER_KINDS)) {
      const store = mapStore(
        this.owners,
        (o): CachedOwner => {
          const ref = controllerRef(o);
          return this.interner.deep({ info: toWorkloadInfo(o, kind, this.opts.metaKeys), ...(ref ? { controller: ref } : {}) });
        },
        (k) => `${kind}/${k}`,
        (k) => k.startsWith(`${kind}/`),
      );
      this.reflectors.push(new Reflector(this, { name: `${def.resource}.${def.apiGroup}`, path: `/apis/${def.apiGroup}/v1/${def.resource}` }, store));
    }
    const nsKeys = opts.metaKeys?.namespaceLabels ?? [];
    if (nsKeys.length > 0) {
      const nsStore = mapStore(this.namespaces, (o) => SHARED_VALUES.of(toNamespaceLabels(o, nsKeys)), (k) => k);
      this.reflectors.push(new Reflector(this, { name: 'namespaces', path: '/api/v1/namespaces' }, nsStore));
    }
  }

  /** @internal shared with {@link Reflector}. */
  get options(): typeof this.opts {
    return this.opts;
  }

  /** @internal the stop signal shared by every request of this cache. */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /** @internal the KubeConfig requests authenticate with. */
  get kubeConfig(): KubeConfig {
    return this.kc;
  }

  /** @internal called by reflectors after a change: enforce `maxObjects`; after a first sync: maybe resolve {@link synced}. */
  changed(): void {
    if (this.disabledReason !== undefined) return;
    const n = this.size;
    if (n > this.opts.maxObjects) {
      this.disabledReason = `watch cache disabled: more than ${this.opts.maxObjects} objects (pods, ServiceAccounts, workloads) in the cluster`;
      this.opts.onEvent?.({ kind: 'disabled', reason: this.disabledReason });
      this.abort.abort();
      this.pods.clear();
      this.podsBySa.clear();
      this.serviceAccounts.clear();
      this.owners.clear();
      this.namespaces.clear();
      this.ipHolders.clear();
      this.ipEnded.clear();
      this.ipEndedQueue = [];
    }
    if (this.reflectors.every((r) => r.synced)) this.syncedResolve?.();
  }

  /** @internal event hook for reflectors. */
  emit(e: CacheEvent): void {
    this.opts.onEvent?.(e);
  }

  private putPod(key: string, p: CachedPod): void {
    this.updateHolds(key, p);
    this.unindexPod(key);
    this.pods.set(key, p);
    const saKey = `${p.info.namespace}/${p.info.serviceAccount}`;
    let set = this.podsBySa.get(saKey);
    if (!set) this.podsBySa.set(saKey, (set = new Set()));
    set.add(key);
  }

  private dropPod(key: string): void {
    this.updateHolds(key, undefined);
    this.unindexPod(key);
  }

  /**
   * The IPs a pod holds: none once it is Succeeded or Failed (its IP is free for another pod, though `status.podIP`
   * stays on the object), else its pod IPs and, for a hostNetwork pod, its node's IP (as the snapshot indexes them).
   */
  private static heldIps(p: CachedPod | undefined): Set<string> {
    const ips = new Set<string>();
    if (!p || p.info.phase === 'Succeeded' || p.info.phase === 'Failed') return ips;
    for (const ip of p.info.ips ?? []) ips.add(ip);
    if (p.info.hostNetwork && p.info.hostIP) ips.add(p.info.hostIP);
    return ips;
  }

  /**
   * Moves the IP holds of pod `key` to its new state `next` (undefined: deleted): ended holds go to the history. A new
   * hold starts at the pod's start, but not before the latest end of another pod's hold of that IP (see {@link IpHold}).
   */
  private updateHolds(key: string, next: CachedPod | undefined): void {
    const now = this.opts.eventClock();
    const before = ClusterWatchCache.heldIps(this.pods.get(key));
    const after = ClusterWatchCache.heldIps(next);
    for (const ip of before) {
      if (after.has(ip)) continue;
      const holders = this.ipHolders.get(ip);
      const hold = holdOf(holders, key);
      if (!hold) continue;
      if (holders instanceof Map) {
        holders.delete(key);
        if (holders.size === 1) this.ipHolders.set(ip, holders.values().next().value!);
      } else this.ipHolders.delete(ip);
      hold.until = now;
      let ended = this.ipEnded.get(ip);
      if (!ended) this.ipEnded.set(ip, (ended = []));
      ended.push(hold);
      this.ipEndedQueue.push({ ip, hold });
    }
    for (const ip of after) {
      const holders = this.ipHolders.get(ip);
      const hold = holdOf(holders, key);
      if (hold) hold.pod = next!;
      else {
        let since = Math.min(next!.info.startTime ?? now, now);
        for (const h of this.ipEnded.get(ip) ?? []) if (h.key !== key && h.until !== undefined && h.until > since) since = Math.min(h.until, now);
        const added: IpHold = { key, pod: next!, since };
        if (holders === undefined) this.ipHolders.set(ip, added);
        else if (holders instanceof Map) holders.set(key, added);
        else this.ipHolders.set(ip, new Map([[holders.key, holders], [key, added]]));
      }
    }
    this.pruneIpHistory(now);
  }

  /** Drops ended holds older than `ipHistoryMs`, and the oldest beyond `maxIpHistory`. */
  private pruneIpHistory(now: number): void {
    const cutoff = now - this.opts.ipHistoryMs;
    let n = 0;
    const q = this.ipEndedQueue;
    while (n < q.length && (q.length - n > this.opts.maxIpHistory || (q[n]!.hold.until ?? now) < cutoff)) {
      const { ip, hold } = q[n]!;
      const list = this.ipEnded.get(ip);
      const i = list ? list.indexOf(hold) : -1;
      if (i >= 0) list!.splice(i, 1);
      if (list && list.length === 0) this.ipEnded.delete(ip);
      n++;
    }
    if (n > 0) this.ipEndedQueue = q.slice(n);
  }

  private unindexPod(key: string): void {
    const old = this.pods.get(key);
    if (!old) return;
    this.pods.delete(key);
    const saKey = `${old.info.namespace}/${old.info.serviceAccount}`;
    const set = this.podsBySa.get(saKey);
    set?.delete(key);
    if (set?.size === 0) this.podsBySa.delete(saKey);
  }

  /** Start listing and watching (idempotent). Failures are retried in the background, never thrown. */
  start(): void {
    if (this.started) return;
    this.started = true;
    for (const r of this.reflectors) void r.run();
  }

  /** Stop every watch and pending retry; the cache stays readable but is no longer fresh. */
  stop(): void {
    this.abort.abort();
  }

  /** Resolves once every resource has been listed (never rejects; may never resolve when the API is unreachable). */
  synced(): Promise<void> {
    return this.syncedPromise;
  }

  /** Whether reads may come from the cache now; see the module doc. */
  freshness(): CacheFreshness {
    if (this.disabledReason !== undefined) return { ok: false, state: 'disabled', reason: this.disabledReason };
    if (!this.started) return { ok: false, state: 'stopped', reason: 'watch cache not started' };
    if (this.abort.signal.aborted) return { ok: false, state: 'stopped', reason: 'watch cache stopped' };
    const unsynced = this.reflectors.filter((r) => !r.synced);
    if (unsynced.length > 0) {
      const why = unsynced.map((r) => (r.lastError ? `${r.watched.name}: ${r.lastError}` : r.watched.name)).join('; ');
      return { ok: false, state: 'syncing', reason: `watch cache not synced yet (${why})` };
    }
    const now = this.opts.clock();
    for (const r of this.reflectors) {
      if (r.downSince !== undefined && now - r.downSince > this.opts.maxStaleMs) {
        const secs = Math.round((now - r.downSince) / 1000);
        return { ok: false, state: 'broken', reason: `watch of ${r.watched.name} down for ${secs} s${r.lastError ? ` (${r.lastError})` : ''}` };
      }
    }
    return { ok: true };
  }

  /** What the cache holds (copies of the entry lists; for diagnostics and tests). */
  contents(): CacheContents {
    return { pods: [...this.pods.values()], serviceAccounts: [...this.serviceAccounts.values()], owners: [...this.owners.values()] };
  }

  /** Number of entries kept, all resources. */
  get size(): number {
    return this.pods.size + this.serviceAccounts.size + this.owners.size + this.namespaces.size;
  }

  /** The resources watched (`pods`, `serviceaccounts`, `deployments.apps`, …, `namespaces` only when rules name namespace labels). */
  get watchedResources(): string[] {
    return this.reflectors.map((r) => r.watched.name);
  }

  /**
   * The labels the routing rules name of namespace `name` (`metaKeys.namespaceLabels`; a frozen object, `{}` when it
   * has none of them), or undefined when the cache has no such namespace or does not watch namespaces.
   */
  getNamespaceLabels(name: string): Readonly<Record<string, string>> | undefined {
    return this.namespaces.get(`/${name}`);
  }

  private owner(ref: WorkloadRef): CachedOwner | undefined {
    return this.owners.get(`${ref.kind}/${ref.namespace}/${ref.name}`);
  }

  /** The owner chain above a controller reference, as `resolveOwnerChain` (convert.ts) climbs it over API reads. */
  private chainFrom(first: WorkloadRef | undefined): WorkloadRef[] {
    const chain: WorkloadRef[] = [];
    const seen = new Set<string>();
    let ref = first;
    while (ref && chain.length < MAX_OWNER_DEPTH) {
      const key = `${ref.kind}/${ref.namespace}/${ref.name}`;
      if (seen.has(key)) break;
      seen.add(key);
      chain.push(ref);
      if (!isBuiltinOwner(ref)) break;
      ref = this.owner(ref)?.controller;
    }
    return chain;
  }

  /**
   * A cached pod with its owner chain: a new top-level object (callers may set its fields), whose containers, labels,
   * hostPaths and IPs are the cache's own, frozen or not to be edited ({@link ValueSharer}).
   */
  private podWithChain(p: CachedPod): PodInfo {
    return { ...p.info, ownerChain: this.chainFrom(p.controller) };
  }

  /** A pod with its owner chain, or undefined when the cache has no such pod. */
  getPod(namespace: string, name: string): PodInfo | undefined {
    const p = this.pods.get(`${namespace}/${name}`);
    return p ? this.podWithChain(p) : undefined;
  }

  /**
   * Pods that held `ip` (as pod IP, or as node IP for a hostNetwork pod), with their owner chains, sorted by
   * namespace and name. Without `during`: the pods holding it now. With `during` (epoch ms, the times of the requests
   * to explain): every pod that held it at some time in the range — pods holding it now from their start (or from when the IP's
   * previous pod let it go), and pods
   * that stopped holding it (deleted, IP changed, Succeeded/Failed) up to when the cache saw that, kept for
   * `ipHistoryMs` — so a request is matched with the pod that had the IP at the request's time, and a range spanning
   * an IP's reuse gives both pods (ambiguous, never the wrong one). A pod that held an IP only before the cache
   * started, or before `ipHistoryMs`, is not known: such requests find no pod, or a pod started after them.
   */
  podsByIP(ip: string, during?: TimeRange): PodInfo[] {
    this.pruneIpHistory(this.opts.eventClock());
    const found = new Map<string, PodInfo>();
    const holders = this.ipHolders.get(ip);
    for (const hold of holders instanceof Map ? holders.values() : holders ? [holders] : []) {
      if (during && hold.since > during.to) continue;
      found.set(hold.key, this.podWithChain(hold.pod));
    }
    if (during) {
      for (const hold of this.ipEnded.get(ip) ?? []) {
        if (found.has(hold.key) || hold.since > during.to || (hold.until ?? Infinity) < during.from) continue;
        found.set(hold.key, this.podWithChain(hold.pod));
      }
    }
    return [...found.values()].sort((a, b) => a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name));
  }

  /** Number of ended IP holds kept (diagnostics and tests; bounded by `maxIpHistory`). */
  get ipHistorySize(): number {
    return this.ipEndedQueue.length;
  }

  /** A ServiceAccount, or undefined. */
  getServiceAccount(namespace: string, name: string): ServiceAccountInfo | undefined {
    return this.serviceAccounts.get(`${namespace}/${name}`);
  }

  /**
   * The {@link SubjectState} of a ServiceAccount from the cache, built as `assembleSubjectState` (convert.ts) builds
   * it from API reads: pods sorted by namespace and name, workloads by {@link nearestWorkload} (a bare pod is its own
   * workload), deduplicated and sorted by kind, namespace, name; `legacySecrets` filtered to this ServiceAccount.
   */
  describeServiceAccount(namespace: string, name: string, legacySecrets: LegacySecretInfo[] = []): SubjectState {
    const pods: PodInfo[] = [];
    const workloads = new Map<string, WorkloadInfo>();
    for (const key of this.podsBySa.get(`${namespace}/${name}`) ?? []) {
      const cached = this.pods.get(key);
      if (!cached) continue;
      const info = this.podWithChain(cached);
      pods.push(info);
      const near = nearestWorkload(info.ownerChain);
      if (!near) {
        const w = bareWorkload(info);
        workloads.set(`Pod/${w.namespace}/${w.name}`, w);
        continue;
      }
      const top = near.workload;
      const wkey = `${top.kind}/${top.namespace}/${top.name}`;
      if (workloads.has(wkey)) continue;
      const found = isBuiltinOwner(top) ? this.owner(top) : undefined;
      const w: WorkloadInfo = found
        ? structuredClone(found.info)
        : { kind: top.kind, namespace: top.namespace, name: top.name, images: [], args: [] };
      if (near.owner) w.owner = { kind: near.owner.kind, namespace: near.owner.namespace, name: near.owner.name };
      workloads.set(wkey, w);
    }
    pods.sort((a, b) => a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name));
    const state: SubjectState = {
      available: true,
      pods,
      workloads: [...workloads.values()].sort(
        (a, b) => a.kind.localeCompare(b.kind) || a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name),
      ),
      legacySecrets: legacySecrets.filter((s) => s.namespace === namespace && s.serviceAccount === name).sort((a, b) => a.name.localeCompare(b.name)),
    };
    const sa = this.getServiceAccount(namespace, name);
    if (sa) state.serviceAccount = structuredClone(sa);
    return state;
  }
}

/** An {@link EntryStore} over a map, keys mapped by `mapKey`; `owns` tells this store's keys in a shared map. */
function mapStore<T>(map: Map<string, T>, convert: (o: unknown) => T, mapKey: (k: string) => string, owns: (k: string) => boolean = () => true): EntryStore {
  return {
    convert,
    replaceAll(entries) {
      for (const k of [...map.keys()]) if (owns(k)) map.delete(k);
      for (const [k, v] of entries) map.set(mapKey(k), v as T);
    },
    upsert(k, v) {
      map.set(mapKey(k), v as T);
    },
    remove(k) {
      map.delete(mapKey(k));
    },
  };
}

/**
 * Redirects followed per request, as undici's `fetch` (and so client-node's direct reads) follows them: kube-apiserver
 * does not redirect, a proxy in front of it may. Followed by hand in {@link Reflector} rather than with undici's
 * redirect interceptor, whose handler would stay with every open watch stream.
 */
const MAX_REDIRECTS = 20;
/** Answers that redirect (RFC 9110 §15.4) to their `Location`. */
const REDIRECTS: ReadonlySet<number> = new Set([301, 302, 303, 307, 308]);

/** Each dispatcher with gzip decoding in front (undici's `interceptors.decompress`; error answers too), made once. */
const DECOMPRESSING = new WeakMap<Dispatcher, Dispatcher>();

/** `dispatcher` decoding `Content-Encoding: gzip` answers. */
function decompressing(dispatcher: Dispatcher): Dispatcher {
  let d = DECOMPRESSING.get(dispatcher);
  if (!d) {
    d = dispatcher.compose(interceptors.decompress({ skipErrorResponses: false }));
    DECOMPRESSING.set(dispatcher, d);
  }
  return d;
}

/** Why a watch stream ended. */
type StreamEnd = 'closed' | 'gone' | 'idle';

/** List+watch of one resource into one store (see the module doc). */
class Reflector {
  synced = false;
  /** When the watch went down (undefined while a watch stream is open). */
  downSince: number | undefined;
  lastError: string | undefined;
  private rv = '';
  private delay = 0;
  /** Backoff after watch streams that end before any event (see {@link run}), ms; 0 after one with an event. */
  private fruitlessDelay = 0;
  /** Whether the current (last) watch stream delivered an event. */
  private progressed = false;

  constructor(
    private readonly cache: ClusterWatchCache,
    readonly watched: Watched,
    private readonly store: EntryStore,
  ) {}

  /** Runs until the cache stops. Never throws. */
  async run(): Promise<void> {
    const { signal } = this.cache;
    this.downSince = this.cache.options.clock();
    while (!signal.aborted) {
      try {
        const listed = this.rv === '';
        if (listed) await this.list();
        const started = performance.now();
        const end = await this.watch();
        // A stream that ends before any event — refused with 410 right after the list it resumes from (the server
        // cannot serve that resourceVersion at all: a broken watch cache or proxy), or closed within a second — would
        // be reopened in a tight loop. Wait as after a failure, longer while it repeats (client-go's reflector treats
        // a watch shorter than a second without events as an error: "very short watch", tools/cache/reflector.go).
        const fruitless = !this.progressed && (end === 'gone' ? listed : end === 'closed' && performance.now() - started < 1000);
        if (end === 'gone') {
          this.cache.emit({ kind: 'relist', resource: this.watched.name, reason: 'resourceVersion too old (410 Gone)' });
          this.rv = '';
        }
        if (fruitless && !(await this.pauseAfterFruitless())) return;
        if (this.progressed) this.fruitlessDelay = 0;
        // Reopen at once: the server ended the stream, it went quiet, or its history expired.
        this.downSince ??= this.cache.options.clock();
      } catch (err) {
        if (signal.aborted) return;
        this.downSince ??= this.cache.options.clock();
        const reason = describeError(err);
        if (reason !== this.lastError) this.cache.emit({ kind: 'watch-failed', resource: this.watched.name, reason }); // once per new reason
        this.lastError = reason;
        if (err instanceof WatchError && err.status === 410) this.rv = '';
        const { initial, max } = this.cache.options.backoffMs;
        this.delay = this.delay === 0 ? initial : Math.min(this.delay * 2, max);
        try {
          await sleep(this.delay * (0.5 + Math.random() / 2), undefined, { signal });
        } catch {
          return; // stopped
        }
      }
    }
  }

  /** Sleeps the next {@link fruitlessDelay} (jittered like the failure backoff); false when the cache stopped meanwhile. */
  private async pauseAfterFruitless(): Promise<boolean> {
    const { initial, max } = this.cache.options.backoffMs;
    this.fruitlessDelay = this.fruitlessDelay === 0 ? initial : Math.min(this.fruitlessDelay * 2, max);
    try {
      await sleep(this.fruitlessDelay * (0.5 + Math.random() / 2), undefined, { signal: this.cache.signal });
      return true;
    } catch {
      return false; // stopped
    }
  }

  /**
   * One GET of the watched resource with `query`, through the cluster's pooled dispatcher (src/cluster/pool.ts; undici's
   * global one when the kubeconfig sets no TLS options). undici's `request` rather than its `fetch`: a watch stream is
   * held open for as long as the cache runs (8 per cluster), and `fetch` adds WHATWG Request, Headers, a
   * ReadableStream and a TextDecoder to every one of them (about 10 KiB of heap per stream more: docs/performance.md
   * "Watch streams through undici's request"). `compressed` (lists) asks for gzip, as `fetch` and client-go do:
   * kube-apiserver compresses answers over 128 KiB (its `APIResponseCompression` feature), and a page of 500 pods is
   * several MiB of JSON; watch streams are never compressed. The body is read by the caller — as JSON, as text, or
   * dumped — since an unread body keeps its connection busy.
   */
  private async request(query: Record<string, string>, signal: AbortSignal, compressed = false): Promise<Dispatcher.ResponseData> {
    const kc = this.cache.kubeConfig;
    const server = kc.getCurrentCluster()?.server;
    if (!server) throw new WatchError(0, 'no current cluster in the kubeconfig');
    const url = new URL(server.replace(/\/+$/, '') + this.watched.path);
    for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
    const ctx = new RequestContext(url.toString(), HttpMethod.GET);
    ctx.setHeaderParam('Accept', 'application/json');
    if (compressed) ctx.setHeaderParam('Accept-Encoding', 'gzip');
    await kc.applySecurityAuthentication(ctx);
    const base = ctx.getDispatcher() ?? getGlobalDispatcher();
    const dispatcher = compressed ? decompressing(base) : base;
    const headers = ctx.getHeaders();
    let at = url;
    for (let redirects = 0; ; redirects++) {
      const res = await dispatcher.request({ origin: at.origin, path: `${at.pathname}${at.search}`, method: 'GET', headers, signal });
      const location = res.headers['location'];
      if (!REDIRECTS.has(res.statusCode) || typeof location !== 'string' || redirects === MAX_REDIRECTS) return res;
      await res.body.dump();
      const next = new URL(location, at);
      // As fetch does: credentials go to the origin they were meant for only.
      if (next.origin !== at.origin) for (const k of Object.keys(headers)) if (k.toLowerCase() === 'authorization') delete headers[k];
      at = next;
    }
  }

  private async failure(res: Dispatcher.ResponseData, verb: string): Promise<WatchError> {
    let msg: string | undefined;
    try {
      msg = statusText(JSON.parse(await res.body.text()));
    } catch {
      msg = undefined;
    }
    if (res.statusCode === 403) {
      return new WatchError(403, `forbidden: no permission to ${verb} ${this.watched.name} (cluster-wide)${msg ? `: ${msg}` : ''}`);
    }
    return new WatchError(res.statusCode, `HTTP ${res.statusCode} on ${verb} ${this.watched.name}${msg ? `: ${msg}` : ''}`);
  }

  /** List every page; replace the store with the result; remember the list's resourceVersion. */
  private async list(): Promise<void> {
    const { pageSize, listTimeoutMs, listLimit } = this.cache.options;
    const fresh = new Map<string, unknown>();
    let cont: string | undefined;
    let rv = '';
    do {
      const signal = AbortSignal.any([this.cache.signal, AbortSignal.timeout(listTimeoutMs)]);
      const res = await this.request({ limit: String(pageSize), ...(cont ? { continue: cont } : {}) }, signal, true);
      if (res.statusCode !== 200) throw await this.failure(res, 'list');
      // The page's CPU work: within the shared bound, and in time slices (a page of 500 pods is long synchronous
      // work; src/core/slice.ts).
      const page = async (): Promise<void> => {
        const body = (await res.body.json()) as unknown;
        const items = isObj(body) && Array.isArray(body['items']) ? body['items'] : [];
        const slicer = new TimeSlicer();
        for (const item of items) {
          fresh.set(keyOf(item), this.store.convert(item));
          if (slicer.due()) await slicer.yield();
        }
        const m = metaOf(body);
        rv = typeof m['resourceVersion'] === 'string' ? m['resourceVersion'] : '';
        cont = typeof m['continue'] === 'string' && m['continue'] !== '' ? m['continue'] : undefined;
      };
      await (listLimit ? listLimit(page) : page());
    } while (cont !== undefined);
    if (rv === '') throw new WatchError(0, `list ${this.watched.name}: answer without metadata.resourceVersion`);
    this.store.replaceAll(fresh);
    this.rv = rv;
    const first = !this.synced;
    this.synced = true;
    this.cache.changed();
    if (first) this.cache.emit({ kind: 'synced', resource: this.watched.name });
  }

  /** One watch stream from `rv`; resolves when it ends normally, goes quiet, or reports 410. */
  private async watch(): Promise<StreamEnd> {
    const { idleTimeoutMs, listTimeoutMs } = this.cache.options;
    const ac = new AbortController();
    const onStop = (): void => ac.abort();
    this.cache.signal.addEventListener('abort', onStop, { once: true });
    let idle = false;
    let opened = false;
    this.progressed = false;
    let timer: NodeJS.Timeout | undefined;
    const arm = (ms = idleTimeoutMs): void => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        idle = true;
        ac.abort();
      }, ms);
      timer.unref();
    };
    try {
      arm(Math.min(idleTimeoutMs, listTimeoutMs)); // the answer's headers must come within a request timeout
      // client-go's reflector spreads watch ends over [min, 2·min); 30–60 min is the API server's own default range.
      const timeoutSeconds = String(Math.floor(1800 * (1 + Math.random())));
      const res = await this.request({ watch: 'true', resourceVersion: this.rv, allowWatchBookmarks: 'true', timeoutSeconds }, ac.signal);
      if (res.statusCode === 410) {
        await res.body.dump();
        return 'gone';
      }
      if (res.statusCode !== 200) throw await this.failure(res, 'watch');
      opened = true;
      this.downSince = undefined;
      this.lastError = undefined;
      this.delay = 0;
      arm();
      // UTF-8 characters split across chunks are joined by the stream's decoder.
      res.body.setEncoding('utf8');
      let buf = '';
      for await (const chunk of res.body) {
        arm();
        buf += chunk as string;
        let nl = buf.indexOf('\n');
        while (nl >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (line !== '' && this.event(line) === 'gone') return 'gone'; // leaving the loop cancels the body
          nl = buf.indexOf('\n');
        }
      }
      return 'closed';
    } catch (err) {
      // Quiet after the 200: reopen. No answer at all: a failure (backoff), e.g. a black-holed API server.
      if (idle && opened) return 'idle';
      if (idle) throw new WatchError(0, `no answer to watch ${this.watched.name} within ${Math.min(idleTimeoutMs, listTimeoutMs)} ms`);
      throw err;
    } finally {
      clearTimeout(timer);
      this.cache.signal.removeEventListener('abort', onStop);
    }
  }

  /** Apply one watch event line. @throws WatchError on an unparseable line or an ERROR other than 410. */
  private event(line: string): 'ok' | 'gone' {
    let e: unknown;
    try {
      e = JSON.parse(line);
    } catch {
      throw new WatchError(0, `watch ${this.watched.name}: unparseable event line`);
    }
    const type = isObj(e) ? e['type'] : undefined;
    const obj = isObj(e) ? e['object'] : undefined;
    switch (type) {
      case 'ADDED':
      case 'MODIFIED':
        this.store.upsert(keyOf(obj), this.store.convert(obj));
        this.cache.changed();
        break;
      case 'DELETED':
        this.store.remove(keyOf(obj));
        break;
      case 'BOOKMARK':
        break;
      case 'ERROR': {
        const code = isObj(obj) && typeof obj['code'] === 'number' ? obj['code'] : 0;
        if (code === 410) return 'gone';
        throw new WatchError(code, `watch ${this.watched.name}: ERROR event${code ? ` ${code}` : ''}${statusText(obj) ? `: ${statusText(obj)}` : ''}`);
      }
      default:
        throw new WatchError(0, `watch ${this.watched.name}: unknown event type ${JSON.stringify(type)}`);
    }
    this.progressed = true;
    const rv = rvOf(obj);
    if (rv !== undefined) this.rv = rv;
    return 'ok';
  }
}
