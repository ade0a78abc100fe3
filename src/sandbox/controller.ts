/**
 * A small simulation of the Kubernetes workload controllers, on the fake API server's object store
 * (`src/sandbox/fakes/kubernetes.ts` `ObjectStore`), so that a rollout restart really rolls in the sandbox.
 *
 * When a write raises the `metadata.generation` of a DaemonSet, Deployment or StatefulSet (a change of
 * `spec.template`, e.g. the `kubectl.kubernetes.io/restartedAt` annotation of a rollout restart; the fake API server
 * bumps generation on spec changes), the controller:
 * 1. records `status.observedGeneration = generation` and zero updated pods;
 * 2. replaces the workload's pods one at a time, each in two steps of `stepMs / 2`: the old pod is deleted (ready
 *    and available counts drop), then a new pod is created on the same node — a new name (`<name>-<5 chars>` as the
 *    DaemonSet / ReplicaSet controllers generate them; StatefulSet pods keep their ordinal name), a new uid,
 *    creation and start time = sandbox now, the template's labels, annotations and images — and counted updated,
 *    ready and available;
 * 3. ends with a status that `progressOf` (src/remediation/kube-remediator.ts) reads as complete: DaemonSet
 *    `updatedNumberScheduled == numberAvailable == desiredNumberScheduled` (docs/design/domain.md §7); Deployment
 *    `updatedReplicas == availableReplicas == replicas` with a new ReplicaSet (old one scaled to 0); StatefulSet
 *    `updatedReplicas == readyReplicas == replicas`.
 * A DaemonSet or StatefulSet with `updateStrategy: OnDelete` only records `observedGeneration` (its pods are not
 * replaced on a template change), and a paused Deployment is left alone, as the real controllers do.
 *
 * A rollout in progress is marked by the annotation {@link ROLLOUT_ANNOTATION} on the workload (and a pod deleted but
 * not yet replaced by {@link REPLACING_ANNOTATION}), so a restarted sandbox (objects reloaded from disk) resumes it
 * with {@link WorkloadController.resume}.
 * Timestamps written are sandbox time (the injected clock), RFC 3339 without fraction, as the API server writes them.
 */
import { createHash } from 'node:crypto';
import { objectLabel, RESTARTABLE_KINDS } from '../core/actions.js';
import type { KubeObject, ObjectStore, WriteEvent } from './fakes/index.js';

/** Annotation holding the template hash a rollout is moving to, while it runs. */
export const ROLLOUT_ANNOTATION = 'sandbox.tokenwatch.dev/rolling-to';
/** Annotation holding the pod (JSON) deleted by the current step until its replacement exists. */
export const REPLACING_ANNOTATION = 'sandbox.tokenwatch.dev/replacing';

const KINDS: ReadonlySet<string> = new Set(RESTARTABLE_KINDS);
/** Characters of generated name suffixes (apimachinery `util/rand` `alphanums`). */
const ALPHANUMS = 'bcdfghjklmnpqrstvwxz2456789';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const obj = (v: unknown): Obj => (isObj(v) ? v : {});
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** `2026-11-20T12:00:00Z` */
export function rfc3339(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** Short hash of a pod template (what `controller-revision-hash` / `pod-template-hash` stand for). */
export function templateHash(template: unknown): string {
  const hex = createHash('sha256').update(JSON.stringify(template ?? null)).digest();
  let out = '';
  for (let i = 0; i < 10; i++) out += ALPHANUMS[hex[i]! % ALPHANUMS.length];
  return out;
}

/** Options of {@link WorkloadController}. */
export interface WorkloadControllerOptions {
  store: ObjectStore;
  /** Sandbox clock for timestamps, epoch ms. */
  clock: () => number;
  /** Wall-clock ms per replaced pod (default 1200). */
  stepMs?: number;
  /** Uniform [0, 1) source for name suffixes (default `Math.random`). */
  random?: () => number;
  /** Called after each step of a rollout (tests, the sandbox page). */
  onStep?: (workload: { kind: string; namespace: string; name: string }) => void;
  /** Called when a rollout stops on an unexpected error (default: ignored; the workload keeps its annotation). */
  onError?: (err: unknown, workload: { kind: string; namespace: string; name: string }) => void;
}

interface Rollout {
  kind: string;
  namespace: string;
  name: string;
  hash: string;
  done: Promise<void>;
}

/** See the module docstring. */
export class WorkloadController {
  private readonly store: ObjectStore;
  private readonly stepMs: number;
  private readonly random: () => number;
  private readonly rollouts = new Map<string, Rollout>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private unsubscribe: (() => void) | undefined;
  private stopped = false;

  constructor(private readonly opts: WorkloadControllerOptions) {
    this.store = opts.store;
    this.stepMs = opts.stepMs ?? 1200;
    this.random = opts.random ?? Math.random;
  }

  /** Starts watching writes, and resumes rollouts that were in progress when the objects were saved. */
  start(): void {
    this.unsubscribe = this.store.onWrite((e) => this.onWrite(e));
    this.resume();
  }

  /** Stops: no further steps (a rollout in progress keeps its annotation and is resumed on the next start). */
  stop(): void {
    this.stopped = true;
    this.unsubscribe?.();
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }

  /** Workloads being rolled out now (`Kind namespace/name`). */
  active(): string[] {
    return [...this.rollouts.keys()];
  }

  /** Resolves when no rollout is running. */
  async idle(): Promise<void> {
    while (this.rollouts.size > 0) await Promise.all([...this.rollouts.values()].map((r) => r.done));
  }

  /** Restarts the rollouts marked with {@link ROLLOUT_ANNOTATION}, and starts those whose generation is unobserved. */
  resume(): void {
    for (const kind of KINDS) {
      for (const w of this.store.list(kind)) {
        const m = obj(w.metadata);
        const gen = typeof m.generation === 'number' ? m.generation : 1;
        const observed = obj(w.status).observedGeneration;
        if (str(obj(m.annotations)[ROLLOUT_ANNOTATION]) || (typeof observed === 'number' && observed < gen)) {
          this.begin(kind, str(m.namespace) ?? 'default', str(m.name) ?? '');
        }
      }
    }
  }

  private onWrite(e: WriteEvent): void {
    if (this.stopped || e.type !== 'MODIFIED' || !KINDS.has(e.def.kind) || !e.previous) return;
    const gen = obj(e.object.metadata).generation;
    const prevGen = obj(e.previous.metadata).generation;
    if (typeof gen === 'number' && typeof prevGen === 'number' && gen > prevGen) {
      const m = obj(e.object.metadata);
      // Defer: the write that triggered us is still being answered.
      const t = setTimeout(() => {
        this.timers.delete(t);
        this.begin(e.def.kind, str(m.namespace) ?? 'default', str(m.name) ?? '');
      }, 0);
      this.timers.add(t);
    }
  }

  private key(kind: string, namespace: string, name: string): string {
    return objectLabel({ kind, namespace, name });
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.timers.delete(t);
        resolve();
      }, ms);
      this.timers.add(t);
    });
  }

  private suffix(n = 5): string {
    let s = '';
    for (let i = 0; i < n; i++) s += ALPHANUMS[Math.floor(this.random() * ALPHANUMS.length)];
    return s;
  }

  private now(): string {
    return rfc3339(this.opts.clock());
  }

  /** Starts (or restarts with the newest template) the rollout of one workload. */
  private begin(kind: string, namespace: string, name: string): void {
    if (this.stopped) return;
    const key = this.key(kind, namespace, name);
    const w = this.store.get(kind, namespace, name);
    if (!w) return;
    const spec = obj(w.spec);
    const hash = templateHash(spec.template);
    const existing = this.rollouts.get(key);
    if (existing && existing.hash === hash) return;
    const gen = obj(w.metadata).generation;
    const strategy = str(obj(spec.updateStrategy).type);
    if ((kind !== 'Deployment' && strategy === 'OnDelete') || (kind === 'Deployment' && spec.paused === true)) {
      this.store.update(kind, namespace, name, (o) => {
        if (kind !== 'Deployment') o.status = { ...obj(o.status), observedGeneration: gen };
      });
      return;
    }
    const rollout: Rollout = { kind, namespace, name, hash, done: Promise.resolve() };
    this.rollouts.set(key, rollout);
    rollout.done = this.run(rollout)
      .catch((err: unknown) => this.opts.onError?.(err, rollout))
      .finally(() => {
        if (this.rollouts.get(key) === rollout) this.rollouts.delete(key);
      });
  }

  private current(r: Rollout): boolean {
    return !this.stopped && this.rollouts.get(this.key(r.kind, r.namespace, r.name)) === r;
  }

  private async run(r: Rollout): Promise<void> {
    const { kind, namespace, name, hash } = r;
    this.setAnnotation(r, ROLLOUT_ANNOTATION, hash);
    let owner = this.store.get(kind, namespace, name)!;
    let podOwner = owner; // Deployment pods belong to the new ReplicaSet
    if (kind === 'Deployment') podOwner = this.ensureReplicaSet(owner, hash);
    this.writeStatus(r);
    // A pod deleted by a previous run that stopped before creating its replacement.
    const pending = str(obj(obj(owner.metadata).annotations)[REPLACING_ANNOTATION]);
    if (pending) this.replace(r, owner, podOwner, JSON.parse(pending) as KubeObject);
    for (;;) {
      if (!this.current(r)) return;
      const old = this.podsOf(owner).find((p) => !this.isUpdated(r, p));
      if (!old) break;
      this.setAnnotation(r, REPLACING_ANNOTATION, JSON.stringify(old));
      this.store.delete('Pod', namespace, str(obj(old.metadata).name) ?? '');
      this.writeStatus(r);
      this.opts.onStep?.(r);
      await this.sleep(this.stepMs / 2);
      if (!this.current(r)) return;
      owner = this.store.get(kind, namespace, name) ?? owner;
      if (kind === 'Deployment') podOwner = this.store.get('ReplicaSet', namespace, str(obj(podOwner.metadata).name) ?? '') ?? podOwner;
      this.replace(r, owner, podOwner, old);
      this.opts.onStep?.(r);
      await this.sleep(this.stepMs / 2);
    }
    if (!this.current(r)) return;
    this.setAnnotation(r, ROLLOUT_ANNOTATION, undefined);
    this.writeStatus(r, true);
    this.opts.onStep?.(r);
  }

  /** Creates the replacement of `old` and clears the pending-replacement note. */
  private replace(r: Rollout, owner: KubeObject, podOwner: KubeObject, old: KubeObject): void {
    this.store.put(this.newPod(r, owner, podOwner, old));
    this.setAnnotation(r, REPLACING_ANNOTATION, undefined);
    this.writeStatus(r);
  }

  /** Sets (or with `undefined` removes) an annotation on the workload (metadata only: generation unchanged). */
  private setAnnotation(r: Rollout, key: string, value: string | undefined): void {
    this.store.update(r.kind, r.namespace, r.name, (o) => {
      const m = obj(o.metadata);
      const ann = { ...obj(m.annotations) };
      if (value === undefined) delete ann[key];
      else ann[key] = value;
      m.annotations = ann;
      o.metadata = m;
    });
  }

  /** Pods controlled by `owner` (a DaemonSet, StatefulSet, or a Deployment through its ReplicaSets). */
  private podsOf(owner: KubeObject): KubeObject[] {
    const m = obj(owner.metadata);
    const ns = str(m.namespace) ?? 'default';
    const ownerNames = new Set<string>();
    if (owner.kind === 'Deployment') {
      for (const rs of this.store.list('ReplicaSet', { namespace: ns })) {
        if (controllerOf(rs)?.name === m.name && controllerOf(rs)?.kind === 'Deployment') ownerNames.add(`ReplicaSet/${str(obj(rs.metadata).name)}`);
      }
    } else ownerNames.add(`${owner.kind}/${str(m.name)}`);
    return this.store.list('Pod', { namespace: ns }).filter((p) => {
      const c = controllerOf(p);
      return c !== undefined && ownerNames.has(`${c.kind}/${c.name}`);
    });
  }

  private hashLabel(kind: string): string {
    return kind === 'Deployment' ? 'pod-template-hash' : 'controller-revision-hash';
  }

  private revision(r: Rollout): string {
    return r.kind === 'StatefulSet' ? `${r.name}-${r.hash}` : r.hash;
  }

  private isUpdated(r: Rollout, pod: KubeObject): boolean {
    return str(obj(obj(pod.metadata).labels)[this.hashLabel(r.kind)]) === this.revision(r);
  }

  /** The Deployment's ReplicaSet for template `hash` (created when missing); other ReplicaSets get `replicas: 0`. */
  private ensureReplicaSet(deploy: KubeObject, hash: string): KubeObject {
    const m = obj(deploy.metadata);
    const ns = str(m.namespace) ?? 'default';
    const rsName = `${str(m.name)}-${hash}`;
    const spec = obj(deploy.spec);
    const replicas = typeof spec.replicas === 'number' ? spec.replicas : 1;
    const template = structuredClone(obj(spec.template));
    const tm = obj(template.metadata);
    tm.labels = { ...obj(tm.labels), 'pod-template-hash': hash };
    template.metadata = tm;
    const revision = 1 + Math.max(0, ...this.store.list('ReplicaSet', { namespace: ns }).map((rs) => Number(str(obj(obj(rs.metadata).annotations)['deployment.kubernetes.io/revision']) ?? 0)));
    for (const rs of this.store.list('ReplicaSet', { namespace: ns })) {
      const c = controllerOf(rs);
      if (c?.kind === 'Deployment' && c.name === m.name && obj(rs.metadata).name !== rsName) {
        this.store.update('ReplicaSet', ns, str(obj(rs.metadata).name)!, (o) => {
          o.spec = { ...obj(o.spec), replicas: 0 };
          o.status = { ...obj(o.status), replicas: 0, readyReplicas: 0, availableReplicas: 0, fullyLabeledReplicas: 0 };
        });
      }
    }
    const existing = this.store.get('ReplicaSet', ns, rsName);
    if (existing) return existing;
    const selector = obj(spec.selector);
    return this.store.put({
      apiVersion: 'apps/v1',
      kind: 'ReplicaSet',
      metadata: {
        name: rsName,
        namespace: ns,
        creationTimestamp: this.now(),
        labels: { ...obj(tm.labels) },
        annotations: {
          'deployment.kubernetes.io/desired-replicas': String(replicas),
          'deployment.kubernetes.io/max-replicas': String(replicas + 1),
          'deployment.kubernetes.io/revision': String(revision),
        },
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: m.name, uid: m.uid, controller: true, blockOwnerDeletion: true }],
      },
      spec: {
        replicas,
        selector: { ...selector, matchLabels: { ...obj(selector.matchLabels), 'pod-template-hash': hash } },
        template,
      },
      status: { replicas: 0, readyReplicas: 0, availableReplicas: 0, observedGeneration: 1 },
    });
  }

  /** A new pod replacing `old`, from the workload's current template. */
  private newPod(r: Rollout, workload: KubeObject, podOwner: KubeObject, old: KubeObject): KubeObject {
    const now = this.now();
    const oldMeta = obj(old.metadata);
    const ownerMeta = obj(podOwner.metadata);
    const template = obj(obj(workload.spec).template);
    const tMeta = obj(template.metadata);
    const tSpec = obj(template.spec);
    const name = r.kind === 'StatefulSet' ? str(oldMeta.name)! : `${str(ownerMeta.name)}-${this.suffix()}`;
    const labels: Obj = { ...obj(tMeta.labels), [this.hashLabel(r.kind)]: this.revision(r) };
    if (r.kind === 'DaemonSet') labels['pod-template-generation'] = String(obj(workload.metadata).generation ?? 1);
    if (r.kind === 'StatefulSet') labels['statefulset.kubernetes.io/pod-name'] = name;
    const spec = structuredClone(obj(old.spec));
    const images = new Map<string, unknown>();
    for (const c of Array.isArray(tSpec.containers) ? tSpec.containers : []) if (isObj(c) && typeof c.name === 'string') images.set(c.name, c.image);
    spec.containers = (Array.isArray(spec.containers) ? spec.containers : []).map((c) => (isObj(c) && images.has(String(c.name)) ? { ...c, image: images.get(String(c.name)) } : c));
    if (typeof tSpec.serviceAccountName === 'string') {
      spec.serviceAccountName = tSpec.serviceAccountName;
      spec.serviceAccount = tSpec.serviceAccountName;
    }
    const status = structuredClone(obj(old.status));
    status.phase = 'Running';
    status.startTime = now;
    status.conditions = ['PodReadyToStartContainers', 'Initialized', 'Ready', 'ContainersReady', 'PodScheduled'].map((type) => ({
      type,
      status: 'True',
      lastProbeTime: null,
      lastTransitionTime: now,
    }));
    status.containerStatuses = (Array.isArray(spec.containers) ? spec.containers : []).filter(isObj).map((c) => ({
      name: c.name,
      image: c.image,
      imageID: '',
      containerID: `containerd://${this.suffix(16)}`,
      ready: true,
      started: true,
      restartCount: 0,
      state: { running: { startedAt: now } },
      lastState: {},
    }));
    return {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name,
        namespace: oldMeta.namespace,
        ...(r.kind === 'StatefulSet' ? {} : { generateName: `${str(ownerMeta.name)}-` }),
        creationTimestamp: now,
        labels,
        ...(Object.keys(obj(tMeta.annotations)).length ? { annotations: { ...obj(tMeta.annotations) } } : {}),
        ownerReferences: [{ apiVersion: 'apps/v1', kind: podOwner.kind, name: ownerMeta.name, uid: ownerMeta.uid, controller: true, blockOwnerDeletion: true }],
      },
      spec,
      status,
    };
  }

  /** Recomputes the workload's (and for a Deployment its ReplicaSets') status from its pods. */
  private writeStatus(r: Rollout, final = false): void {
    const w = this.store.get(r.kind, r.namespace, r.name);
    if (!w) return;
    const pods = this.podsOf(w);
    const updated = pods.filter((p) => this.isUpdated(r, p)).length;
    const gen = obj(w.metadata).generation;
    const spec = obj(w.spec);
    const now = this.now();
    this.store.update(r.kind, r.namespace, r.name, (o) => {
      const s: Obj = { ...obj(o.status), observedGeneration: gen };
      if (r.kind === 'DaemonSet') {
        const desired = typeof s.desiredNumberScheduled === 'number' ? s.desiredNumberScheduled : pods.length;
        Object.assign(s, {
          desiredNumberScheduled: desired,
          currentNumberScheduled: pods.length,
          updatedNumberScheduled: updated,
          numberReady: pods.length,
          numberAvailable: pods.length,
          numberMisscheduled: 0,
        });
        if (pods.length < desired) s.numberUnavailable = desired - pods.length;
        else delete s.numberUnavailable;
      } else {
        const desired = typeof spec.replicas === 'number' ? spec.replicas : 1;
        Object.assign(s, { replicas: pods.length, updatedReplicas: updated, readyReplicas: pods.length, availableReplicas: pods.length });
        if (pods.length < desired) s.unavailableReplicas = desired - pods.length;
        else delete s.unavailableReplicas;
        if (r.kind === 'StatefulSet') {
          s.updateRevision = this.revision(r);
          s.currentReplicas = final ? pods.length : pods.length - updated;
          if (final) s.currentRevision = this.revision(r);
        }
        if (r.kind === 'Deployment') {
          const rsName = `${r.name}-${r.hash}`;
          s.conditions = [
            { type: 'Available', status: pods.length >= desired ? 'True' : 'False', reason: pods.length >= desired ? 'MinimumReplicasAvailable' : 'MinimumReplicasUnavailable', message: pods.length >= desired ? 'Deployment has minimum availability.' : 'Deployment does not have minimum availability.', lastUpdateTime: now, lastTransitionTime: now },
            final
              ? { type: 'Progressing', status: 'True', reason: 'NewReplicaSetAvailable', message: `ReplicaSet "${rsName}" has successfully progressed.`, lastUpdateTime: now, lastTransitionTime: now }
              : { type: 'Progressing', status: 'True', reason: 'ReplicaSetUpdated', message: `ReplicaSet "${rsName}" is progressing.`, lastUpdateTime: now, lastTransitionTime: now },
          ];
        }
      }
      o.status = s;
    });
    if (r.kind === 'Deployment') {
      for (const rs of this.store.list('ReplicaSet', { namespace: r.namespace })) {
        const c = controllerOf(rs);
        if (c?.kind !== 'Deployment' || c.name !== r.name) continue;
        const rsName = str(obj(rs.metadata).name)!;
        const n = this.store.list('Pod', { namespace: r.namespace }).filter((p) => controllerOf(p)?.name === rsName && controllerOf(p)?.kind === 'ReplicaSet').length;
        this.store.update('ReplicaSet', r.namespace, rsName, (o) => {
          o.status = { ...obj(o.status), replicas: n, readyReplicas: n, availableReplicas: n, fullyLabeledReplicas: n };
        });
      }
    }
  }
}

/** The controller owner reference of an object, if any. */
export function controllerOf(o: KubeObject): { kind: string; name: string } | undefined {
  const refs = obj(o.metadata).ownerReferences;
  if (!Array.isArray(refs)) return undefined;
  const c = refs.find((r) => isObj(r) && r.controller === true) ?? refs[0];
  return isObj(c) && typeof c.kind === 'string' && typeof c.name === 'string' ? { kind: c.kind, name: c.name } : undefined;
}
