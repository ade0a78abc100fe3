/**
 * A loopback fake of the Kubernetes API server for tests and the sandbox.
 *
 * `startFakeKube()` starts a `node:http` server on 127.0.0.1 (port 0) that speaks the real REST protocol closely
 * enough for `@kubernetes/client-node` 2 (and curl, and tokenwatch's watch cache) to use it unmodified:
 *
 * - paths `/api/v1/...` and `/apis/<group>/<version>/...`, namespaced (`/namespaces/<ns>/<resource>[/<name>[/<sub>]]`)
 *   and cluster-wide (`/api/v1/pods`) collections, discovery (`/api`, `/apis`, `/api/v1`, `/apis/<g>/<v>`), `/version`;
 * - verbs get, list, create (POST), update (PUT), patch, delete; `status` subresource for get/update/patch;
 * - list `fieldSelector` (`=`, `==`, `!=`; per-resource supported fields as in the real API server, others → 400
 *   `field label not supported`), `labelSelector` (`=`, `==`, `!=`, `in`, `notin`, `key`, `!key`), `limit`/`continue`;
 *   lists are `{kind:'<Kind>List', apiVersion, metadata:{resourceVersion}, items}` sorted by namespace/name, items
 *   without `kind`/`apiVersion` as a real server sends them;
 * - metadata-only responses when `Accept` asks for `as=PartialObjectMetadataList` / `as=PartialObjectMetadata`
 *   (Kubernetes API concepts, "Receiving resources as metadata only");
 * - errors as `Status` objects (`{kind:'Status',apiVersion:'v1',metadata:{},status:'Failure',message,reason,details,code}`);
 * - one global `resourceVersion` counter, incremented on every write; `metadata.generation` starts at 1 and is
 *   bumped when `spec` changes; `uid` and `creationTimestamp` filled on create;
 * - writes: POST create (409 AlreadyExists), PUT update (409 Conflict on a stale `metadata.resourceVersion`),
 *   PATCH with `application/strategic-merge-patch+json` and `application/merge-patch+json` (recursive merge, see
 *   {@link applyMergePatch}) and `application/json-patch+json` (RFC 6902; a non-array body → 400 BadRequest and a
 *   failing op, e.g. a `test` of `/metadata/uid` that does not match → 422 Invalid "the server rejected our request
 *   due to an error in our request", as kube-apiserver `handlers/patch.go` `applyJSPatch` does); any other patch type
 *   (incl. server-side apply) → 415 UnsupportedMediaType; uid preconditions as the API server enforces them: a patch
 *   that changes `metadata.uid` → 422 Invalid `metadata.uid: … field is immutable` (apimachinery
 *   `ValidateObjectMetaUpdate`), a PUT body whose `metadata.uid` differs and DELETE with `preconditions: {uid,
 *   resourceVersion}` in the `DeleteOptions` body → 409 Conflict "Precondition failed: …"; `?dryRun=All` validates and answers
 *   without storing anything; on resources with a status subresource, writes to the main resource keep the stored
 *   `status` and writes to `/status` change only `status`.
 *
 * - watch (`?watch=1` or `watch=true` on a collection; Kubernetes API concepts, "Efficient detection of changes",
 *   https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes): a `200` chunked
 *   stream of JSON lines `{"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":…}`, objects with `kind` and
 *   `apiVersion`; from `resourceVersion` R the events after R (kept in a bounded history), without one (or `0`) a
 *   synthetic `ADDED` per current object first; an R older than the history → one `ERROR` event carrying a `Status`
 *   (`code: 410`, `reason: Expired`, `too old resource version: R (oldest)`) and the end of the stream, as the API
 *   server answers; `allowWatchBookmarks=true` → a `BOOKMARK` (object with only `metadata.resourceVersion`) every
 *   `bookmarkIntervalMs`; `timeoutSeconds` ends the stream; `fieldSelector`/`labelSelector` filter by the object's new
 *   state (the real server also sends `DELETED` for an object leaving the selection; the fake does not);
 *
 * Not implemented (extend here when needed): server-side apply, finalizers/graceful deletion
 * (DELETE removes at once), garbage collection of dependents, admission/defaulting, `deletecollection`.
 *
 * Test hooks: {@link FakeKube.requests} (every request, with verb/resource/namespace/name, query, content type,
 * parsed body), {@link FakeKube.failNext}, {@link FakeKube.delay}, {@link FakeKube.forbid} and the `rbac` option
 * (403 Forbidden with the real message), {@link FakeKube.addReactor} (answer any request yourself), and
 * {@link ObjectStore} `put/get/update/delete/list/onWrite` for seeding objects and for making status progress over
 * time (e.g. a DaemonSet rollout: `store.onWrite(e => …store.update('DaemonSet', ns, name, o => { o.status = … }))`);
 * for watches {@link FakeKube.openWatches}, {@link FakeKube.dropWatches} (connections cut, as by a load balancer),
 * {@link FakeKube.compactHistory} (every older resourceVersion becomes "too old": the next watch gets 410) and
 * {@link FakeKube.connections} (TCP connections accepted, to check keep-alive reuse).
 *
 * Point client-node at it with {@link FakeKube.kubeConfig} (`loadFromOptions` with `skipTLSVerify: true`, required
 * for an `http://` server by client-node; docs/design/stack.md §8).
 */
import { randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { apiVersionOf, clone, immutableUid, isObj, meta, metaStr, notFoundDetails, qualifiedResource, type Obj } from './kubernetes/json.js';
import { ObjectStore, type ListOptions } from './kubernetes/object-store.js';
import { applyJsonPatch, applyMergePatch } from './kubernetes/patches.js';
import { matchesFields, matchesLabels, parseFieldSelector, parseLabelSelector } from './kubernetes/selectors.js';
import { DEFAULT_RESOURCES, type Fault, type KubeObject, type PolicyRule, type RecordedRequest, type RequestMatch, type ResourceDef, StatusError, statusObject, type WriteEvent } from './kubernetes/types.js';


/** Answers larger than this are gzipped for clients that accept it, as kube-apiserver does (128 KiB). */
const GZIP_THRESHOLD_BYTES = 128 * 1024;
/** Answer of a reactor: status code and JSON body (a `Status` is built for you by {@link statusObject}). */
export interface ReactorResponse {
  code: number;
  body?: unknown;
  headers?: Record<string, string>;
}

/** A reactor sees every request first (after delays); returning a response short-circuits normal handling. */
export type Reactor = (req: RecordedRequest, store: ObjectStore) => ReactorResponse | undefined | Promise<ReactorResponse | undefined>;

/** Options of {@link startFakeKube}. */
export interface FakeKubeOptions {
  /** Objects to seed (each needs `kind`, `apiVersion` and `metadata.name`; `kubectl get -o json` items work). */
  objects?: object[];
  /** Extra resource types to serve (e.g. a CRD), added to {@link DEFAULT_RESOURCES}. */
  resources?: ResourceDef[];
  /** Username in Forbidden messages (default `system:serviceaccount:tokenwatch:tokenwatch`). */
  user?: string;
  /** When given, only requests these rules allow succeed; others get 403 as from real RBAC. */
  rbac?: PolicyRule[];
  /**
   * Text served at `GET /metrics` (the API server's Prometheus metrics; see {@link apiServerMetricsText}), or a
   * function called per request (e.g. to alternate replicas). Without it `/metrics` answers 404.
   */
  metrics?: string | (() => string);
  /** Watch events kept for watches resuming from a resourceVersion (default 10,000); older → 410 Expired. */
  watchHistory?: number;
  /**
   * Interval of `BOOKMARK` events on watches asking `allowWatchBookmarks=true`, ms (default 60,000, as kube-apiserver's
   * watch cache: `defaultBookmarkFrequency = time.Minute` in `staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go`).
   */
  bookmarkIntervalMs?: number;
}

/** A running fake API server. */
export interface FakeKube {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  readonly port: number;
  readonly store: ObjectStore;
  /** Every request received, in order (also those answered by faults). */
  readonly requests: RecordedRequest[];
  /**
   * A client-node KubeConfig for this server (`loadFromOptions`, `skipTLSVerify: true`, bearer `token`,
   * context namespace `default`).
   */
  kubeConfig(opts?: { token?: string }): KubeConfig;
  /** Answer the next `times` (default 1) matching requests with `fault` instead of handling them. */
  failNext(match: RequestMatch, fault: Fault, times?: number): void;
  /** Hold matching requests (all when `match` omitted) `ms` milliseconds before handling; `delay(0)` clears all delays. */
  delay(ms: number, match?: RequestMatch): void;
  /** Deny matching requests with 403 and the real RBAC message until {@link clearFaults}. */
  forbid(match: RequestMatch): void;
  /** Add a reactor (see {@link Reactor}); returns a function removing it. */
  addReactor(reactor: Reactor): () => void;
  /** Drop pending faults, delays and forbid rules. */
  clearFaults(): void;
  /** Requests matching `match`. */
  requestsMatching(match: RequestMatch): RecordedRequest[];
  /** Replaces what `GET /metrics` serves (undefined → 404). */
  setMetrics(metrics: string | (() => string) | undefined): void;
  /** Watch streams open now, with what they watch (`resource`, `namespace` when namespaced). */
  openWatches(): { resource: string; group: string; namespace?: string }[];
  /** Cut every open watch connection (socket destroyed, no final chunk); returns how many were cut. */
  dropWatches(): number;
  /** Forget the watch history: a watch from any resourceVersion before now gets `410 Expired`. */
  compactHistory(): void;
  /** TCP connections accepted so far (one per client connection; keep-alive reuses one). */
  readonly connections: number;
  /** Stop listening, drop open connections, cancel pending delays. */
  close(): Promise<void>;
}

/** One write as watch history keeps it. */
interface WatchRecord {
  rv: number;
  type: WriteEvent['type'];
  def: ResourceDef;
  object: KubeObject;
}

/** An open watch stream. */
interface OpenWatch {
  resource: string;
  group: string;
  namespace?: string;
  /** Send the record when it matches the watch. */
  offer(rec: WatchRecord): void;
  /** Stop sending (timers cleared, unsubscribed). */
  close(): void;
  socket(): Socket | null;
}

/**
 * A KubeConfig for the fake API server at `url` (what {@link FakeKube.kubeConfig} returns): context `fake`, bearer
 * `token` (default `fake-token`), TLS verification off. For a caller in another thread than the fake's, which has its
 * URL only.
 */
export function fakeKubeConfig(url: string, token = 'fake-token'): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'fake', server: url, skipTLSVerify: true }],
    users: [{ name: 'fake-user', token }],
    contexts: [{ name: 'fake', cluster: 'fake', user: 'fake-user', namespace: 'default' }],
    currentContext: 'fake',
  });
  return kc;
}

/** Whether a request matches a {@link RequestMatch}. */
export function matchesRequest(req: RecordedRequest, match: RequestMatch): boolean {
  if (typeof match === 'function') return match(req);
  if (match.method !== undefined && match.method.toUpperCase() !== req.method) return false;
  if (match.path !== undefined) {
    if (typeof match.path === 'string' ? match.path !== req.path : !match.path.test(req.path)) return false;
  }
  for (const k of ['verb', 'group', 'resource', 'subresource', 'namespace', 'name'] as const) {
    if (match[k] !== undefined && match[k] !== req[k]) return false;
  }
  return true;
}

function rbacAllows(rules: PolicyRule[], req: RecordedRequest): boolean {
  const has = (list: string[], v: string | undefined): boolean => list.includes('*') || (v !== undefined && list.includes(v));
  const resource = req.subresource ? `${req.resource}/${req.subresource}` : req.resource;
  return rules.some(
    (r) =>
      has(r.apiGroups, req.group) &&
      has(r.resources, resource) &&
      has(r.verbs, req.verb) &&
      (r.namespaces === undefined || (req.namespace !== undefined && r.namespaces.includes(req.namespace))),
  );
}

/** The 403 the real authorizer returns (apiserver `endpoints/handlers/responsewriters/errors.go` `ForbiddenStatusError`). */
function forbidden(req: RecordedRequest, user: string): ReactorResponse {
  const resource = req.subresource ? `${req.resource}/${req.subresource}` : (req.resource ?? '');
  const what = req.name ? `${req.resource}${req.group ? `.${req.group}` : ''} "${req.name}"` : `${req.resource}${req.group ? `.${req.group}` : ''}`;
  const scope = req.namespace ? `in the namespace "${req.namespace}"` : 'at the cluster scope';
  const message = `${what} is forbidden: User "${user}" cannot ${req.verb ?? req.method.toLowerCase()} resource "${resource}" in API group "${req.group ?? ''}" ${scope}`;
  const details: Obj = { kind: req.resource ?? '' };
  if (req.name) details['name'] = req.name;
  if (req.group) details['group'] = req.group;
  return { code: 403, body: statusObject(403, message, 'Forbidden', details) };
}

interface Route {
  kind: 'resource' | 'discovery' | 'version' | 'unknown';
  def?: ResourceDef;
  body?: unknown;
}

function parseBody(raw: string, contentType: string | undefined): unknown {
  if (raw === '') return undefined;
  if (contentType === undefined || /json/i.test(contentType)) {
    try {
      return JSON.parse(raw);
    } catch {
      return raw;
    }
  }
  return raw;
}

/** Fill verb/resource/namespace/name of a request from its path; returns the route. */
function classify(req: RecordedRequest, store: ObjectStore): Route {
  const segs = req.path.split('/').filter(Boolean);
  if (segs[0] === 'version' && segs.length === 1) return { kind: 'version' };
  let group: string;
  let version: string;
  let rest: string[];
  if (segs[0] === 'api') {
    if (segs.length === 1) return { kind: 'discovery', body: { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] } };
    group = '';
    version = segs[1] ?? '';
    rest = segs.slice(2);
  } else if (segs[0] === 'apis') {
    if (segs.length === 1) {
      const groups = [...new Set(store.resources.filter((d) => d.group).map((d) => d.group))].map((g) => {
        const versions = [...new Set(store.resources.filter((d) => d.group === g).map((d) => d.version))].map((v) => ({ groupVersion: `${g}/${v}`, version: v }));
        return { name: g, versions, preferredVersion: versions[0] };
      });
      return { kind: 'discovery', body: { kind: 'APIGroupList', apiVersion: 'v1', groups } };
    }
    group = segs[1] ?? '';
    version = segs[2] ?? '';
    rest = segs.slice(3);
  } else return { kind: 'unknown' };
  if (!version) return { kind: 'unknown' };
  req.group = group;
  req.version = version;
  if (rest.length === 0) {
    const defs = store.resources.filter((d) => d.group === group && d.version === version);
    if (defs.length === 0) return { kind: 'unknown' };
    const resources = defs.flatMap((d) => {
      const verbs = ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'];
      const main = { name: d.resource, singularName: d.kind.toLowerCase(), namespaced: d.namespaced, kind: d.kind, verbs };
      return d.statusSubresource ? [main, { name: `${d.resource}/status`, singularName: '', namespaced: d.namespaced, kind: d.kind, verbs: ['get', 'patch', 'update'] }] : [main];
    });
    return { kind: 'discovery', body: { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: group ? `${group}/${version}` : version, resources } };
  }
  let namespace: string | undefined;
  let resource: string;
  let name: string | undefined;
  let sub: string | undefined;
  const nsNamed = rest[0] === 'namespaces' && rest.length >= 3 && !(group === '' && rest.length === 3 && (rest[2] === 'status' || rest[2] === 'finalize'));
  if (nsNamed) {
    namespace = rest[1];
    resource = rest[2] ?? '';
    name = rest[3];
    sub = rest[4];
    if (rest.length > 5) return { kind: 'unknown' };
  } else {
    resource = rest[0] ?? '';
    name = rest[1];
    sub = rest[2];
    if (rest.length > 3) return { kind: 'unknown' };
  }
  const def = store.defForResource(group, version, resource);
  if (!def || (namespace !== undefined && !def.namespaced) || (namespace === undefined && name !== undefined && def.namespaced)) {
    return { kind: 'unknown' };
  }
  req.resource = resource;
  if (namespace !== undefined) req.namespace = namespace;
  if (name !== undefined) req.name = name;
  if (sub !== undefined) req.subresource = sub;
  const watch = req.query['watch'] === 'true' || req.query['watch'] === '1';
  const m = req.method;
  if (name === undefined) {
    req.verb = m === 'GET' ? (watch ? 'watch' : 'list') : m === 'POST' ? 'create' : m === 'DELETE' ? 'deletecollection' : undefined;
  } else {
    req.verb = m === 'GET' ? 'get' : m === 'PUT' ? 'update' : m === 'PATCH' ? 'patch' : m === 'DELETE' ? 'delete' : undefined;
  }
  return { kind: 'resource', def };
}

const PATCH_TYPES = ['application/json-patch+json', 'application/merge-patch+json', 'application/apply-patch+yaml', 'application/strategic-merge-patch+json'];

function mediaType(contentType: string | undefined): string {
  return (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
}

/** Handles one classified resource request against the store. */
class ResourceHandler {
  constructor(private readonly store: ObjectStore) {}

  handle(req: RecordedRequest, def: ResourceDef): ReactorResponse {
    const dryRunParam = req.query['dryRun'];
    if (dryRunParam !== undefined && dryRunParam !== 'All') {
      throw new StatusError(400, 'BadRequest', `dryRun: Unsupported value: "${dryRunParam}": supported values: "All"`);
    }
    if (req.subresource !== undefined && req.subresource !== 'status') {
      throw new StatusError(404, 'NotFound', 'the server could not find the requested resource');
    }
    if (req.subresource === 'status' && !def.statusSubresource) {
      throw new StatusError(404, 'NotFound', 'the server could not find the requested resource');
    }
    switch (req.verb) {
      case 'list':
        return this.list(req, def);
      case 'get':
        return { code: 200, body: this.metadataOnly(req, this.mustGet(req, def), false) };
      case 'create':
        return this.create(req, def);
      case 'update':
        return this.update(req, def);
      case 'patch':
        return this.patch(req, def);
      case 'delete':
        return this.delete(req, def);
      case 'watch':
        throw new StatusError(405, 'MethodNotAllowed', 'watch streams are served by startFakeKube, not by ResourceHandler');
      default:
        throw new StatusError(405, 'MethodNotAllowed', `the server does not allow this method on the requested resource`);
    }
  }

  private wantsMetadata(req: RecordedRequest, list: boolean): boolean {
    const accept = req.accept ?? '';
    return list ? /as=PartialObjectMetadataList/.test(accept) : /as=PartialObjectMetadata(?!List)/.test(accept);
  }

  private metadataOnly(req: RecordedRequest, obj: KubeObject, list: boolean): KubeObject {
    if (!this.wantsMetadata(req, list)) return obj;
    return { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: obj.metadata ?? {} };
  }

  private list(req: RecordedRequest, def: ResourceDef): ReactorResponse {
    const opts: ListOptions = {};
    if (req.namespace !== undefined) opts.namespace = req.namespace;
    if (req.query['fieldSelector']) opts.fieldSelector = req.query['fieldSelector'];
    if (req.query['labelSelector']) opts.labelSelector = req.query['labelSelector'];
    let items = this.store.listDef(def, opts);
    const start = req.query['continue'] ? Number(Buffer.from(req.query['continue'], 'base64url').toString('utf8')) : 0;
    if (!Number.isInteger(start) || start < 0) throw new StatusError(400, 'BadRequest', 'continue key is not valid');
    const limit = req.query['limit'] ? Number(req.query['limit']) : 0;
    const listMeta: Obj = { resourceVersion: this.store.resourceVersion };
    items = items.slice(start);
    if (limit > 0 && items.length > limit) {
      items = items.slice(0, limit);
      listMeta['continue'] = Buffer.from(String(start + limit), 'utf8').toString('base64url');
    }
    const metadataOnly = this.wantsMetadata(req, true);
    const body = {
      kind: metadataOnly ? 'PartialObjectMetadataList' : `${def.kind}List`,
      apiVersion: metadataOnly ? 'meta.k8s.io/v1' : apiVersionOf(def),
      metadata: listMeta,
      items: items.map((o) => {
        if (metadataOnly) return { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata ?? {} };
        const { kind: _k, apiVersion: _a, ...rest } = o;
        return rest;
      }),
    };
    const headers: Record<string, string> = metadataOnly ? { 'content-type': 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1' } : {};
    return { code: 200, body, headers };
  }

  private mustGet(req: RecordedRequest, def: ResourceDef): KubeObject {
    const name = req.name ?? '';
    const o = this.store.raw(def, req.namespace, name);
    if (!o) throw new StatusError(404, 'NotFound', `${qualifiedResource(def)} "${name}" not found`, notFoundDetails(def, name));
    return clone(o);
  }

  private bodyObject(req: RecordedRequest): KubeObject {
    if (!isObj(req.body)) throw new StatusError(400, 'BadRequest', 'the request body must be a JSON object');
    return req.body as KubeObject;
  }

  private requireJson(req: RecordedRequest): void {
    const mt = mediaType(req.contentType);
    if (mt !== 'application/json' && mt !== '') {
      throw new StatusError(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf`);
    }
  }

  private checkIdentity(def: ResourceDef, req: RecordedRequest, obj: KubeObject): void {
    if (obj.kind !== undefined && obj.kind !== def.kind) {
      throw new StatusError(400, 'BadRequest', `the API version in the data (${String(obj.apiVersion)}) does not match the expected API version (${apiVersionOf(def)}) or kind ${String(obj.kind)} is not ${def.kind}`);
    }
    const ns = metaStr(obj, 'namespace');
    if (def.namespaced && ns !== undefined && ns !== '' && ns !== req.namespace) {
      throw new StatusError(400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request');
    }
  }

  private create(req: RecordedRequest, def: ResourceDef): ReactorResponse {
    this.requireJson(req);
    if (req.subresource) throw new StatusError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
    const obj = clone(this.bodyObject(req));
    this.checkIdentity(def, req, obj);
    const m = meta(obj);
    if (def.namespaced) m['namespace'] = req.namespace;
    let name = metaStr(obj, 'name');
    if (!name && metaStr(obj, 'generateName')) {
      name = `${metaStr(obj, 'generateName')}${randomUUID().replace(/-/g, '').slice(0, 5)}`;
      m['name'] = name;
    }
    if (!name) {
      throw new StatusError(422, 'Invalid', `${def.kind} "" is invalid: metadata.name: Required value: name or generateName is required`, {
        kind: def.kind,
        causes: [{ reason: 'FieldValueRequired', message: 'Required value: name or generateName is required', field: 'metadata.name' }],
      });
    }
    if (this.store.raw(def, req.namespace, name)) {
      throw new StatusError(409, 'AlreadyExists', `${qualifiedResource(def)} "${name}" already exists`, notFoundDetails(def, name));
    }
    delete m['resourceVersion'];
    delete m['uid'];
    const prepared = this.store.prepare(def, obj);
    if (req.dryRun) return { code: 201, body: prepared };
    return { code: 201, body: this.store.store(def, prepared) };
  }

  /** Shared tail of update and patch: preconditions, status handling, generation, dry run. */
  private write(req: RecordedRequest, def: ResourceDef, current: KubeObject, next: KubeObject): ReactorResponse {
    const name = req.name ?? '';
    if (metaStr(next, 'name') !== name) {
      throw new StatusError(400, 'BadRequest', `the name of the object (${String(metaStr(next, 'name'))}) does not match the name on the URL (${name})`);
    }
    const rv = metaStr(next, 'resourceVersion');
    if (rv !== undefined && rv !== '' && rv !== metaStr(current, 'resourceVersion')) {
      throw new StatusError(409, 'Conflict', `Operation cannot be fulfilled on ${qualifiedResource(def)} "${name}": the object has been modified; please apply your changes to the latest version and try again`, notFoundDetails(def, name));
    }
    let result = clone(next);
    if (def.statusSubresource) {
      if (req.subresource === 'status') {
        result = clone(current);
        if (next['status'] === undefined) delete result['status'];
        else result['status'] = clone(next['status']);
      } else if (current['status'] === undefined) delete result['status'];
      else result['status'] = clone(current['status']);
    }
    const m = meta(result);
    m['uid'] = metaStr(current, 'uid');
    m['creationTimestamp'] = current.metadata?.['creationTimestamp'];
    if (def.namespaced) m['namespace'] = req.namespace;
    const prepared = this.store.prepare(def, result, current);
    if (req.dryRun) {
      meta(prepared)['resourceVersion'] = metaStr(current, 'resourceVersion');
      return { code: 200, body: prepared };
    }
    return { code: 200, body: this.store.store(def, prepared) };
  }

  private update(req: RecordedRequest, def: ResourceDef): ReactorResponse {
    this.requireJson(req);
    const current = this.mustGet(req, def);
    const obj = clone(this.bodyObject(req));
    this.checkIdentity(def, req, obj);
    // The uid of a PUT body is a precondition (`rest.defaultUpdatedObjectInfo.Preconditions`), checked as DELETE's is.
    const bodyUid = metaStr(obj, 'uid');
    const currentUid = metaStr(current, 'uid');
    if (bodyUid !== undefined && bodyUid !== '' && bodyUid !== currentUid) {
      const name = req.name ?? '';
      throw new StatusError(409, 'Conflict', `Operation cannot be fulfilled on ${qualifiedResource(def)} "${name}": Precondition failed: UID in precondition: ${bodyUid}, UID in object meta: ${currentUid ?? ''}`, notFoundDetails(def, name));
    }
    return this.write(req, def, current, obj);
  }

  private patch(req: RecordedRequest, def: ResourceDef): ReactorResponse {
    const mt = mediaType(req.contentType);
    if (!PATCH_TYPES.includes(mt) || mt === 'application/apply-patch+yaml') {
      const detail = mt === 'application/apply-patch+yaml' ? ' (server-side apply is not implemented by the fake API server)' : '';
      throw new StatusError(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: ${PATCH_TYPES.join(', ')}${detail}`);
    }
    const current = this.mustGet(req, def);
    let next: unknown;
    if (mt === 'application/json-patch+json') {
      if (!Array.isArray(req.body)) {
        const found = isObj(req.body) ? 'object' : typeof req.body;
        throw new StatusError(400, 'BadRequest', `json: cannot unmarshal ${found} into Go value of type jsonpatch.Patch`);
      }
      try {
        next = applyJsonPatch(current, req.body);
      } catch {
        // kube-apiserver answers any failed op (a `test` that does not match, say) with the generic 422 of
        // `errors.NewGenericServerResponse(422, …, isUnexpectedResponse=false)`: the op's own message is not sent.
        throw new StatusError(422, 'Invalid', 'the server rejected our request due to an error in our request', {});
      }
    } else {
      if (!isObj(req.body)) throw new StatusError(400, 'BadRequest', 'the patch body must be a JSON object');
      next = applyMergePatch(current, req.body, mt === 'application/strategic-merge-patch+json');
    }
    if (!isObj(next)) throw new StatusError(422, 'Invalid', 'the patched object is not a JSON object');
    const patched = next as KubeObject;
    // A patch that sets another uid is refused by validation (`metadata.uid` is immutable), whatever the patch type.
    const patchedUid = metaStr(patched, 'uid');
    const currentUid = metaStr(current, 'uid');
    if (patchedUid !== undefined && patchedUid !== '' && patchedUid !== currentUid) throw immutableUid(def, req.name ?? '', patchedUid);
    // A resourceVersion in the patch acts as a precondition; otherwise the current one is kept.
    const patchRv = isObj(req.body) && isObj(req.body['metadata']) ? req.body['metadata']['resourceVersion'] : undefined;
    if (typeof patchRv !== 'string') meta(patched)['resourceVersion'] = metaStr(current, 'resourceVersion');
    return this.write(req, def, current, patched);
  }

  private delete(req: RecordedRequest, def: ResourceDef): ReactorResponse {
    const current = this.mustGet(req, def);
    const name = req.name ?? '';
    const opts = isObj(req.body) ? req.body : {};
    const pre = isObj(opts['preconditions']) ? opts['preconditions'] : {};
    const bodyDryRun = Array.isArray(opts['dryRun']) && opts['dryRun'].includes('All');
    const uid = metaStr(current, 'uid');
    const rv = metaStr(current, 'resourceVersion');
    if (typeof pre['uid'] === 'string' && pre['uid'] !== uid) {
      throw new StatusError(409, 'Conflict', `Operation cannot be fulfilled on ${qualifiedResource(def)} "${name}": Precondition failed: UID in precondition: ${pre['uid']}, UID in object meta: ${uid ?? ''}`, notFoundDetails(def, name));
    }
    if (typeof pre['resourceVersion'] === 'string' && pre['resourceVersion'] !== rv) {
      throw new StatusError(409, 'Conflict', `Operation cannot be fulfilled on ${qualifiedResource(def)} "${name}": Precondition failed: ResourceVersion in precondition: ${pre['resourceVersion']}, ResourceVersion in object meta: ${rv ?? ''}`, notFoundDetails(def, name));
    }
    if (!(req.dryRun || bodyDryRun)) this.store.remove(def, req.namespace, name);
    // Pods answer with the object (graceful deletion); most registries answer with a Success Status.
    if (def.kind === 'Pod') return { code: 200, body: current };
    const details: Obj = { name, kind: def.resource, uid };
    if (def.group) details['group'] = def.group;
    return { code: 200, body: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details } };
  }
}

/**
 * Start a fake API server on 127.0.0.1 (random port). See the module doc for what it serves.
 * @returns the running {@link FakeKube}; call `close()` when done.
 */
export async function startFakeKube(opts: FakeKubeOptions = {}): Promise<FakeKube> {
  const store = new ObjectStore([...DEFAULT_RESOURCES, ...(opts.resources ?? [])]);
  for (const o of opts.objects ?? []) store.put(o);
  const user = opts.user ?? 'system:serviceaccount:tokenwatch:tokenwatch';
  const requests: RecordedRequest[] = [];
  const faults: { match: RequestMatch; fault: Fault; remaining: number }[] = [];
  const delays: { match: RequestMatch | undefined; ms: number }[] = [];
  const denials: RequestMatch[] = [];
  const reactors: Reactor[] = [];
  const timers = new Set<NodeJS.Timeout>();
  const handler = new ResourceHandler(store);
  let metricsText = opts.metrics;
  const historyLimit = opts.watchHistory ?? 10_000;
  const bookmarkMs = opts.bookmarkIntervalMs ?? 60_000;
  /** Watch history: every write with the resourceVersion it made; `oldestRv` is the last one forgotten. */
  const history: WatchRecord[] = [];
  let oldestRv = Number(store.resourceVersion);
  const watchers = new Set<OpenWatch>();
  let connections = 0;
  store.onWrite((e) => {
    const rv = store.resourceVersion;
    const object = e.object;
    meta(object)['resourceVersion'] = rv; // a DELETED event carries the deletion's resourceVersion
    const rec: WatchRecord = { rv: Number(rv), type: e.type, def: e.def, object };
    history.push(rec);
    while (history.length > historyLimit) oldestRv = history.shift()?.rv ?? oldestRv;
    for (const w of watchers) w.offer(rec);
  });

  const sleep = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      const t = setTimeout(() => {
        timers.delete(t);
        resolve();
      }, ms);
      timers.add(t);
    });

  /** The recorded request of each answer being written (to note a compressed answer on it). */
  const answering = new WeakMap<ServerResponse, RecordedRequest>();
  const send = (res: ServerResponse, r: ReactorResponse): void => {
    if (res.destroyed || res.writableEnded) return;
    const text = r.body === undefined ? '' : JSON.stringify(r.body);
    const headers = { 'content-type': 'application/json', ...(r.headers ?? {}) };
    // kube-apiserver gzips answers over 128 KiB to clients that accept it (APIResponseCompression; k8s.io/apiserver
    // pkg/endpoints/handlers/responsewriters/writers.go, defaultGzipThresholdBytes).
    if (Buffer.byteLength(text) > GZIP_THRESHOLD_BYTES && /\bgzip\b/i.test(String(res.req.headers['accept-encoding'] ?? ''))) {
      const rec = answering.get(res);
      if (rec) rec.responseEncoding = 'gzip';
      res.writeHead(r.code, { ...headers, 'content-encoding': 'gzip', vary: 'Accept-Encoding' });
      res.end(gzipSync(text));
      return;
    }
    res.writeHead(r.code, headers);
    res.end(text);
  };

  const respond = async (req: RecordedRequest, res: ServerResponse): Promise<void> => {
    answering.set(res, req);
    const route = classify(req, store);
    const totalDelay = delays.filter((d) => d.match === undefined || matchesRequest(req, d.match)).reduce((a, d) => a + d.ms, 0);
    if (totalDelay > 0) await sleep(totalDelay);
    for (const reactor of reactors) {
      const r = await reactor(req, store);
      if (r) return send(res, r);
    }
    const fault = faults.find((f) => f.remaining > 0 && matchesRequest(req, f.match));
    if (fault) {
      fault.remaining -= 1;
      const f = fault.fault;
      if (f === 'disconnect') {
        res.socket?.destroy();
        return;
      }
      if (typeof f === 'number') return send(res, { code: f, body: statusObject(f, `injected fault: HTTP ${f}`) });
      return send(res, { code: f.code, body: f.body ?? statusObject(f.code, f.message ?? `injected fault: HTTP ${f.code}`, f.reason) });
    }
    if (req.path === '/metrics' && req.method === 'GET') {
      const allowed = !opts.rbac || opts.rbac.some((r) => (r.nonResourceURLs ?? []).includes('/metrics') && (r.verbs.includes('get') || r.verbs.includes('*')));
      if (denials.some((m) => matchesRequest(req, m)) || !allowed) {
        return send(res, { code: 403, body: statusObject(403, `forbidden: User "${user}" cannot get path "/metrics"`, 'Forbidden', {}) });
      }
      const text = typeof metricsText === 'function' ? metricsText() : metricsText;
      if (text === undefined) return send(res, { code: 404, body: statusObject(404, 'the server could not find the requested resource', 'NotFound', {}) });
      if (!res.destroyed && !res.writableEnded) res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' }).end(text);
      return;
    }
    if (route.kind === 'version' && req.method === 'GET') {
      return send(res, { code: 200, body: { major: '1', minor: '30', gitVersion: 'v1.30.0-fake', platform: 'linux/amd64' } });
    }
    if (route.kind === 'discovery' && req.method === 'GET') return send(res, { code: 200, body: route.body });
    if (route.kind !== 'resource' || !route.def) {
      return send(res, { code: 404, body: statusObject(404, 'the server could not find the requested resource', 'NotFound', {}) });
    }
    if (denials.some((m) => matchesRequest(req, m)) || (opts.rbac && !rbacAllows(opts.rbac, req))) {
      return send(res, forbidden(req, user));
    }
    if (req.verb === 'watch') {
      try {
        serveWatch(req, route.def, res);
      } catch (err) {
        if (err instanceof StatusError) return send(res, { code: err.httpStatus, body: err.toStatus() });
        throw err;
      }
      return;
    }
    try {
      send(res, handler.handle(req, route.def));
    } catch (err) {
      if (err instanceof StatusError) return send(res, { code: err.httpStatus, body: err.toStatus() });
      const message = err instanceof Error ? err.message : String(err);
      send(res, { code: 500, body: statusObject(500, `fake API server error: ${message}`) });
    }
  };

  /** Serve one watch stream (see the module doc); selectors are checked before the 200 is sent. */
  const serveWatch = (req: RecordedRequest, def: ResourceDef, res: ServerResponse): void => {
    const fields = req.query['fieldSelector'] ? parseFieldSelector(req.query['fieldSelector'], def) : [];
    const labels = req.query['labelSelector'] ? parseLabelSelector(req.query['labelSelector']) : [];
    const rvParam = req.query['resourceVersion'] ?? '';
    const from = rvParam === '' || rvParam === '0' ? undefined : Number(rvParam);
    if (from !== undefined && !Number.isInteger(from)) throw new StatusError(400, 'BadRequest', `invalid resource version: ${rvParam}`);
    const matches = (o: KubeObject): boolean =>
      (req.namespace === undefined || metaStr(o, 'namespace') === req.namespace) && matchesFields(o, fields) && matchesLabels(o, labels);
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    res.flushHeaders(); // as the API server does: the client sees the 200 before the first event
    const line = (type: string, object: KubeObject): void => {
      if (!res.destroyed && !res.writableEnded) res.write(`${JSON.stringify({ type, object })}\n`);
    };
    const withType = (o: KubeObject): KubeObject => ({ ...o, apiVersion: apiVersionOf(def), kind: def.kind });
    const timers: NodeJS.Timeout[] = [];
    const w: OpenWatch = {
      resource: def.resource,
      group: def.group,
      ...(req.namespace !== undefined ? { namespace: req.namespace } : {}),
      offer: (rec) => {
        if (rec.def === def && matches(rec.object)) line(rec.type, withType(rec.object));
      },
      close: () => {
        watchers.delete(w);
        for (const t of timers) clearInterval(t);
      },
      socket: () => res.socket,
    };
    res.on('close', w.close);
    if (from !== undefined && from < oldestRv) {
      // apiserver storage: errors.NewResourceExpired("too old resource version: %d (%d)"), sent as an ERROR event.
      line('ERROR', statusObject(410, `too old resource version: ${from} (${oldestRv + 1})`, 'Expired'));
      res.end();
      return;
    }
    if (from === undefined) {
      for (const o of store.listDef(def, req.namespace !== undefined ? { namespace: req.namespace } : {})) if (matches(o)) line('ADDED', withType(o));
    } else {
      for (const rec of history) if (rec.rv > from) w.offer(rec);
    }
    watchers.add(w);
    if (req.query['allowWatchBookmarks'] === 'true') {
      timers.push(setInterval(() => line('BOOKMARK', { kind: def.kind, apiVersion: apiVersionOf(def), metadata: { resourceVersion: store.resourceVersion } }), bookmarkMs));
    }
    const timeout = Number(req.query['timeoutSeconds'] ?? '');
    if (Number.isFinite(timeout) && timeout > 0) {
      timers.push(
        setTimeout(() => {
          w.close();
          res.end();
        }, timeout * 1000),
      );
    }
  };

  const server = createServer((inc: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    inc.on('data', (c: Buffer) => chunks.push(c));
    inc.on('end', () => {
      const url = new URL(inc.url ?? '/', 'http://127.0.0.1');
      const query: Record<string, string> = {};
      for (const [k, v] of url.searchParams) query[k] = v;
      const contentType = inc.headers['content-type'];
      const rec: RecordedRequest = {
        method: (inc.method ?? 'GET').toUpperCase(),
        path: url.pathname,
        query,
        headers: inc.headers,
        dryRun: query['dryRun'] === 'All',
      };
      if (contentType !== undefined) rec.contentType = contentType;
      if (inc.headers.accept !== undefined) rec.accept = inc.headers.accept;
      const body = parseBody(Buffer.concat(chunks).toString('utf8'), contentType);
      if (body !== undefined) rec.body = body;
      requests.push(rec);
      respond(rec, res).catch((err: unknown) => {
        send(res, { code: 500, body: statusObject(500, `fake API server error: ${err instanceof Error ? err.message : String(err)}`) });
      });
    });
  });
  server.on('connection', () => {
    connections += 1;
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}`;

  return {
    url,
    port,
    store,
    requests,
    kubeConfig(o: { token?: string } = {}): KubeConfig {
      return fakeKubeConfig(url, o.token);
    },
    failNext(match, fault, times = 1) {
      faults.push({ match, fault, remaining: times });
    },
    delay(ms, match) {
      if (ms <= 0) delays.length = 0;
      else delays.push({ match, ms });
    },
    forbid(match) {
      denials.push(match);
    },
    addReactor(reactor) {
      reactors.push(reactor);
      return () => {
        const i = reactors.indexOf(reactor);
        if (i >= 0) reactors.splice(i, 1);
      };
    },
    clearFaults() {
      faults.length = 0;
      delays.length = 0;
      denials.length = 0;
    },
    setMetrics(m) {
      metricsText = m;
    },
    requestsMatching(match) {
      return requests.filter((r) => matchesRequest(r, match));
    },
    openWatches() {
      return [...watchers].map((w) => ({ resource: w.resource, group: w.group, ...(w.namespace !== undefined ? { namespace: w.namespace } : {}) }));
    },
    dropWatches() {
      const open = [...watchers];
      for (const w of open) {
        w.close();
        w.socket()?.destroy();
      }
      return open.length;
    },
    compactHistory() {
      history.length = 0;
      oldestRv = Number(store.resourceVersion);
    },
    get connections() {
      return connections;
    },
    async close() {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      for (const w of [...watchers]) w.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
