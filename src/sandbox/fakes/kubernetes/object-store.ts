/** The in-memory object storage of the fake Kubernetes API server (`src/sandbox/fakes/kubernetes.ts`). */
import { ErrorCode, TokenwatchError } from '../../../errors.js';
import { randomUUID } from 'node:crypto';
import { apiVersionOf, clone, meta, metaStr, nowRfc3339, specJson } from './json.js';
import { matchesFields, matchesLabels, parseFieldSelector, parseLabelSelector } from './selectors.js';
import type { KubeObject, ResourceDef, WriteEvent } from './types.js';

/** Options of {@link ObjectStore.list}. */
export interface ListOptions {
  /** Only this namespace (namespaced resources); omitted = all. */
  namespace?: string;
  fieldSelector?: string;
  labelSelector?: string;
}

/**
 * In-memory object storage with Kubernetes semantics for `resourceVersion` (one global counter, bumped on every
 * write), `uid`/`creationTimestamp` (set on first write) and `metadata.generation` (1 on create, +1 when `spec`
 * changes). Objects are addressed by `kind` (`'DaemonSet'`; for a kind served in two groups, such as `Event`, the
 * core one unless an `apiVersion`-qualified kind `'events.k8s.io/v1/Event'` is given). Every read returns a copy.
 */
export class ObjectStore {
  private readonly data = new Map<string, Map<string, KubeObject>>();
  private readonly listeners = new Set<(e: WriteEvent) => void>();
  private rv = 1000;

  constructor(readonly resources: ResourceDef[]) {}

  /** The current (last written) resourceVersion. */
  get resourceVersion(): string {
    return String(this.rv);
  }

  /** Take and return the next resourceVersion (used by writes; dry runs do not call it). */
  nextResourceVersion(): string {
    this.rv += 1;
    return String(this.rv);
  }

  /** The definition for a kind (`'Pod'`, or `'<apiVersion>/<Kind>'`), or undefined. */
  defForKind(kind: string, apiVersion?: string): ResourceDef | undefined {
    let k = kind;
    let av = apiVersion;
    const slash = kind.lastIndexOf('/');
    if (slash >= 0) {
      av = kind.slice(0, slash);
      k = kind.slice(slash + 1);
    }
    const matches = this.resources.filter((d) => d.kind === k);
    return matches.find((d) => apiVersionOf(d) === av) ?? matches.find((d) => d.group === '') ?? matches[0];
  }

  /** The definition for a group and plural resource name, or undefined. */
  defForResource(group: string, version: string, resource: string): ResourceDef | undefined {
    return this.resources.find((d) => d.group === group && d.version === version && d.resource === resource);
  }

  private requireDef(kind: string): ResourceDef {
    const def = this.defForKind(kind);
    if (!def) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, `fake kube: unknown kind ${kind}; register it with the resources option`);
    return def;
  }

  private bucket(def: ResourceDef): Map<string, KubeObject> {
    const key = `${def.group}/${def.resource}`;
    let b = this.data.get(key);
    if (!b) {
      b = new Map();
      this.data.set(key, b);
    }
    return b;
  }

  private static key(def: ResourceDef, namespace: string | undefined, name: string): string {
    return `${def.namespaced ? (namespace ?? '') : ''}/${name}`;
  }

  /** Subscribe to writes (put, update, delete and the HTTP writes built on them). Returns an unsubscribe function. */
  onWrite(listener: (e: WriteEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private emit(e: WriteEvent): void {
    for (const l of [...this.listeners]) l({ ...e, object: clone(e.object), ...(e.previous ? { previous: clone(e.previous) } : {}) });
  }

  /**
   * Prepare an object for storage without storing it (used by dry runs and by {@link put}): fills `apiVersion`,
   * `kind`, namespace (`default` for namespaced kinds without one), `uid`, `creationTimestamp`, `generation`.
   */
  prepare(def: ResourceDef, obj: KubeObject, previous?: KubeObject): KubeObject {
    const o = clone(obj);
    o.apiVersion = apiVersionOf(def);
    o.kind = def.kind;
    const m = meta(o);
    if (def.namespaced) m['namespace'] = typeof m['namespace'] === 'string' && m['namespace'] ? m['namespace'] : 'default';
    else delete m['namespace'];
    const prevMeta = previous?.metadata ?? {};
    m['uid'] = typeof m['uid'] === 'string' && m['uid'] ? m['uid'] : (prevMeta['uid'] ?? randomUUID());
    m['creationTimestamp'] = m['creationTimestamp'] ?? prevMeta['creationTimestamp'] ?? nowRfc3339();
    const prevGen = typeof prevMeta['generation'] === 'number' ? prevMeta['generation'] : undefined;
    if (previous === undefined) m['generation'] = typeof m['generation'] === 'number' ? m['generation'] : 1;
    else m['generation'] = (prevGen ?? 1) + (specJson(previous) !== specJson(o) ? 1 : 0);
    return o;
  }

  /**
   * Create or replace an object (no preconditions; for seeding and tests). The object needs `kind` (and `apiVersion`
   * to disambiguate) and `metadata.name`. Returns the stored copy with its new resourceVersion.
   */
  put(obj: object): KubeObject {
    const o = obj as KubeObject;
    const def = this.requireDef(String(o.kind ?? ''));
    const name = metaStr(o, 'name');
    if (!name) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, `fake kube: ${def.kind} without metadata.name`);
    const ns = def.namespaced ? (metaStr(o, 'namespace') || 'default') : undefined;
    return this.store(def, this.prepare(def, o, this.raw(def, ns, name)));
  }

  /** Store a prepared object under a new resourceVersion and notify listeners. */
  store(def: ResourceDef, prepared: KubeObject): KubeObject {
    const name = String(meta(prepared)['name']);
    const key = ObjectStore.key(def, metaStr(prepared, 'namespace'), name);
    const previous = this.bucket(def).get(key);
    const o = clone(prepared);
    meta(o)['resourceVersion'] = this.nextResourceVersion();
    this.bucket(def).set(key, o);
    this.emit({ type: previous ? 'MODIFIED' : 'ADDED', def, object: o, ...(previous ? { previous } : {}) });
    return clone(o);
  }

  /** The stored object itself (no copy), for internal use. */
  raw(def: ResourceDef, namespace: string | undefined, name: string): KubeObject | undefined {
    return this.bucket(def).get(ObjectStore.key(def, namespace, name));
  }

  /** A copy of an object, or undefined. `namespace` is ignored for cluster-scoped kinds. */
  get(kind: string, namespace: string | undefined, name: string): KubeObject | undefined {
    const o = this.raw(this.requireDef(kind), namespace, name);
    return o ? clone(o) : undefined;
  }

  /**
   * Change an object in place through `mutate` (which may edit its argument or return a replacement), as a
   * controller would (e.g. progress `status`). Bumps resourceVersion, and generation when `spec` changed.
   * @throws Error when the object does not exist.
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: `mutate` may return nothing (edits in place) or a replacement
  update(kind: string, namespace: string | undefined, name: string, mutate: (obj: KubeObject) => KubeObject | void): KubeObject {
    const def = this.requireDef(kind);
    const current = this.raw(def, namespace, name);
    if (!current) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, `fake kube: ${def.kind} ${namespace ?? ''}/${name} not found`);
    const draft = clone(current);
    const next = mutate(draft) ?? draft;
    return this.store(def, this.prepare(def, next, current));
  }

  /** Remove an object; returns it (as it was) or undefined when absent. Bumps resourceVersion. */
  delete(kind: string, namespace: string | undefined, name: string): KubeObject | undefined {
    return this.remove(this.requireDef(kind), namespace, name);
  }

  /** {@link delete} by definition. */
  remove(def: ResourceDef, namespace: string | undefined, name: string): KubeObject | undefined {
    const key = ObjectStore.key(def, namespace, name);
    const o = this.bucket(def).get(key);
    if (!o) return undefined;
    this.bucket(def).delete(key);
    this.nextResourceVersion();
    this.emit({ type: 'DELETED', def, object: o });
    return clone(o);
  }

  /**
   * Copies of the objects of a kind, sorted by namespace then name, filtered by namespace and selectors.
   * @throws StatusError 400 for a malformed or unsupported selector.
   */
  list(kind: string, opts: ListOptions = {}): KubeObject[] {
    return this.listDef(this.requireDef(kind), opts);
  }

  /** {@link list} by definition. */
  listDef(def: ResourceDef, opts: ListOptions = {}): KubeObject[] {
    const fields = opts.fieldSelector ? parseFieldSelector(opts.fieldSelector, def) : [];
    const labels = opts.labelSelector ? parseLabelSelector(opts.labelSelector) : [];
    return [...this.bucket(def).values()]
      .filter((o) => !def.namespaced || opts.namespace === undefined || metaStr(o, 'namespace') === opts.namespace)
      .filter((o) => matchesFields(o, fields) && matchesLabels(o, labels))
      .sort((a, b) => (metaStr(a, 'namespace') ?? '').localeCompare(metaStr(b, 'namespace') ?? '') || (metaStr(a, 'name') ?? '').localeCompare(metaStr(b, 'name') ?? ''))
      .map(clone);
  }

  /** Copies of every stored object. */
  all(): KubeObject[] {
    return [...this.data.values()].flatMap((b) => [...b.values()].map(clone));
  }
}
