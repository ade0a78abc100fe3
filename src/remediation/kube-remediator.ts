/**
 * Remediation against the Kubernetes API (@kubernetes/client-node 1.x): rollout restart of a
 * DaemonSet / Deployment / StatefulSet, recreation of a ServiceAccount, rollout progress, and
 * Kubernetes Events on the target. Every write can run as a server-side dry run (`?dryRun=All`).
 *
 * Facts (docs/design/domain.md §7):
 * - `kubectl rollout restart` sets `spec.template.metadata.annotations["kubectl.kubernetes.io/restartedAt"]`
 *   to the current time (RFC 3339) with a strategic-merge patch and refuses paused Deployments
 *   (kubectl `polymorphichelpers/objectrestarter.go`). A DaemonSet or StatefulSet with
 *   `updateStrategy: OnDelete` does not roll on a template change.
 * - client-node 1.x sends `application/json-patch+json` unless told otherwise, so the patch is sent with
 *   `setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch)` (client-node `src/patch.ts`).
 * - Recreating a ServiceAccount changes its UID, which invalidates every token issued for it; labels,
 *   annotations (e.g. `eks.amazonaws.com/role-arn` for IRSA), `imagePullSecrets` and
 *   `automountServiceAccountToken` are preserved; RoleBindings reference the SA by name and keep applying.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { ErrorCode, TokenwatchError } from '../errors.js';
import { objectLabel, type RestartableKind } from '../core/actions.js';
import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type V1ServiceAccount,
} from '@kubernetes/client-node';

/** A workload tokenwatch can rollout-restart. */

/** What a remediation acts on. */
export interface RemediationTarget {
  kind: RestartableKind | 'ServiceAccount';
  namespace: string;
  name: string;
}

/** Outcome of a preflight (checks + server-side dry run). */
export type Preflight =
  | { ok: true; detail: string; uid?: string; resourceVersion?: string }
  | { ok: false; reason: 'not-found' | 'paused' | 'on-delete' | 'finalizers' | 'forbidden' | 'dry-run-failed' | 'unsupported'; message: string };

/** Rollout progress of a workload, read from its status. */
export interface RolloutProgress {
  desired: number;
  updated: number;
  ready: number;
  available: number;
  /** True when the rollout is complete (see {@link rolloutComplete}). */
  done: boolean;
  /** `status.observedGeneration >= metadata.generation`. */
  observed: boolean;
  timedOut?: boolean;
}

/** Result of a ServiceAccount recreation. */
export interface RecreateResult {
  oldUid?: string;
  newUid?: string;
  preserved: { labels: number; annotations: string[]; imagePullSecrets: number; automountServiceAccountToken?: boolean; ownerReferences?: number };
}

/** What a recreation keeps of `body` (the object it creates), for {@link RecreateResult.preserved}. */
export function preservedOf(body: V1ServiceAccount): RecreateResult['preserved'] {
  return {
    labels: Object.keys(body.metadata?.labels ?? {}).length,
    annotations: Object.keys(body.metadata?.annotations ?? {}),
    imagePullSecrets: body.imagePullSecrets?.length ?? 0,
    automountServiceAccountToken: body.automountServiceAccountToken,
    ...(body.metadata?.ownerReferences?.length ? { ownerReferences: body.metadata.ownerReferences.length } : {}),
  };
}

/** Annotation `kubectl rollout restart` sets (kubectl `polymorphichelpers/objectrestarter.go`). */
export const RESTARTED_AT = 'kubectl.kubernetes.io/restartedAt';

/**
 * Error from a failed Kubernetes call, with the HTTP status, the API server's Status `reason` and message, and the
 * fields its `details.causes` name (e.g. `metadata.uid` for a write refused because the uid changed).
 */
export class KubeCallError extends TokenwatchError {
  constructor(
    message: string,
    readonly status: number | undefined,
    readonly reason?: string,
    options?: { cause?: unknown; fields?: readonly string[] },
  ) {
    super(ErrorCode.KubeCallFailed, message, options);
    this.name = 'KubeCallError';
    this.fields = options?.fields ?? [];
  }

  /** `details.causes[].field` of the API server's Status (empty when it named none). */
  readonly fields: readonly string[];
}

/**
 * Whether a write was refused because the object's uid is not the one it carried: a patch setting `metadata.uid`
 * to another value → 422 Invalid on field `metadata.uid` (immutable, apimachinery `ValidateObjectMetaUpdate`); a
 * DELETE or PUT with a uid precondition → 409 Conflict "Precondition failed: UID in precondition: …"
 * (apiserver `storage.Preconditions.Check`).
 */
export function isUidMismatch(err: unknown): boolean {
  if (!(err instanceof KubeCallError)) return false;
  if (err.status === 422) return err.fields.includes('metadata.uid');
  return err.status === 409 && err.message.includes('Precondition failed: UID in precondition');
}

/** Converts a client-node error into a {@link KubeCallError} with the API server's message. */
export function toKubeError(err: unknown, what: string): KubeCallError {
  if (err instanceof ApiException) {
    let message = String(err.message);
    let reason: string | undefined;
    let fields: string[] = [];
    const body: unknown = typeof err.body === 'string' ? safeJson(err.body) : err.body;
    if (body && typeof body === 'object') {
      const b = body as { message?: unknown; reason?: unknown; details?: { causes?: unknown } };
      if (typeof b.message === 'string') message = b.message;
      if (typeof b.reason === 'string') reason = b.reason;
      const causes = b.details?.causes;
      if (Array.isArray(causes)) fields = causes.map((c) => (c as { field?: unknown })?.field).filter((f): f is string => typeof f === 'string');
    }
    return new KubeCallError(`${what}: ${err.code} ${message}`, err.code, reason, { fields });
  }
  const e = err as { message?: string; code?: string };
  // A Node/network error's own code (`ECONNREFUSED`); never the ErrorCode of one of ours.
  return new KubeCallError(`${what}: ${e?.message ?? String(err)}`, undefined, err instanceof TokenwatchError ? undefined : e?.code);
}

function safeJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}

/**
 * Whether a rollout is complete, per kind:
 * DaemonSet: observedGeneration ≥ generation, updatedNumberScheduled = numberAvailable = desiredNumberScheduled
 * (docs/design/domain.md §7); Deployment: updatedReplicas = availableReplicas = replicas and no old replicas;
 * StatefulSet: updatedReplicas = readyReplicas = replicas (kubectl `rollout status` logic).
 */
export function rolloutComplete(p: Omit<RolloutProgress, 'done'>): boolean {
  return p.observed && p.updated >= p.desired && p.available >= p.desired && p.ready >= p.desired;
}

/** Reads a workload's rollout progress from its object (pure). */
export function progressOf(kind: RestartableKind, obj: { metadata?: { generation?: number }; spec?: { replicas?: number }; status?: Record<string, unknown> }): RolloutProgress {
  const s = (obj.status ?? {}) as Record<string, number | undefined>;
  const observed = (s.observedGeneration ?? 0) >= (obj.metadata?.generation ?? 0);
  let p: Omit<RolloutProgress, 'done'>;
  if (kind === 'DaemonSet') {
    const desired = s.desiredNumberScheduled ?? 0;
    p = { desired, updated: s.updatedNumberScheduled ?? 0, ready: s.numberReady ?? 0, available: s.numberAvailable ?? 0, observed };
  } else {
    const desired = obj.spec?.replicas ?? 1;
    const updated = s.updatedReplicas ?? 0;
    const ready = s.readyReplicas ?? 0;
    const available = kind === 'Deployment' ? (s.availableReplicas ?? 0) : ready;
    const total = s.replicas ?? 0;
    p = { desired, updated, ready, available, observed: observed && (kind !== 'Deployment' || total <= desired) };
  }
  return { ...p, done: rolloutComplete(p) };
}

/** Options of {@link KubeRemediator}. */
export interface KubeRemediatorOptions {
  /** `fieldManager` of writes; default `tokenwatch`. */
  fieldManager?: string;
  /** `source.component` / `reportingComponent` of Events; default `tokenwatch`. */
  component?: string;
}

/** Performs remediations on one cluster. All methods throw {@link KubeCallError} on API failures unless stated. */
export class KubeRemediator {
  private readonly apps: AppsV1Api;
  private readonly core: CoreV1Api;
  private readonly fieldManager: string;
  private readonly component: string;

  constructor(kc: KubeConfig, opts: KubeRemediatorOptions = {}) {
    this.apps = kc.makeApiClient(AppsV1Api);
    this.core = kc.makeApiClient(CoreV1Api);
    this.fieldManager = opts.fieldManager ?? 'tokenwatch';
    this.component = opts.component ?? 'tokenwatch';
  }

  private async readWorkload(kind: RestartableKind, namespace: string, name: string) {
    const p = { name, namespace };
    if (kind === 'DaemonSet') return this.apps.readNamespacedDaemonSet(p);
    if (kind === 'Deployment') return this.apps.readNamespacedDeployment(p);
    return this.apps.readNamespacedStatefulSet(p);
  }

  private async patchWorkload(kind: RestartableKind, namespace: string, name: string, body: object, dryRun: boolean) {
    const p = { name, namespace, body, fieldManager: this.fieldManager, ...(dryRun ? { dryRun: 'All' } : {}) };
    const o = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);
    if (kind === 'DaemonSet') return this.apps.patchNamespacedDaemonSet(p, o);
    if (kind === 'Deployment') return this.apps.patchNamespacedDeployment(p, o);
    return this.apps.patchNamespacedStatefulSet(p, o);
  }

  /**
   * Checks that a rollout restart can run and would be accepted: the workload exists, is not a paused
   * Deployment, does not use `OnDelete`, and a server-side dry-run patch passes (admission, RBAC).
   * Never throws: every problem is a `{ ok: false, reason, message }`.
   */
  async preflightRestart(target: RemediationTarget, now: Date): Promise<Preflight> {
    if (target.kind === 'ServiceAccount') return { ok: false, reason: 'unsupported', message: 'A ServiceAccount cannot be rollout-restarted; recreate it instead.' };
    const ref = objectLabel(target);
    let obj;
    try {
      obj = await this.readWorkload(target.kind, target.namespace, target.name);
    } catch (err) {
      return this.preflightError(err, `read ${ref}`);
    }
    const spec = (obj.spec ?? {}) as { paused?: boolean; updateStrategy?: { type?: string } };
    if (target.kind === 'Deployment' && spec.paused) {
      return { ok: false, reason: 'paused', message: `${ref} is paused; a rollout restart would not roll it (kubectl refuses too). Resume it first: kubectl -n ${target.namespace} rollout resume deployment/${target.name}.` };
    }
    if ((target.kind === 'DaemonSet' || target.kind === 'StatefulSet') && spec.updateStrategy?.type === 'OnDelete') {
      return {
        ok: false,
        reason: 'on-delete',
        message: `${ref} uses updateStrategy OnDelete: a template change does not replace its pods, so a rollout restart would not give them fresh tokens. Delete its pods one at a time (kubectl -n ${target.namespace} delete pod <pod>) or switch it to RollingUpdate.`,
      };
    }
    try {
      await this.patchWorkload(target.kind, target.namespace, target.name, restartPatch(now, obj.metadata?.uid), true);
    } catch (err) {
      return this.preflightError(err, `dry-run restart of ${ref}`);
    }
    return { ok: true, detail: `dry run of the rollout restart of ${ref} passed`, uid: obj.metadata?.uid, resourceVersion: obj.metadata?.resourceVersion };
  }

  private preflightError(err: unknown, what: string): Preflight {
    const e = toKubeError(err, what);
    if (e.status === 404) return { ok: false, reason: 'not-found', message: e.message };
    if (e.status === 403) return { ok: false, reason: 'forbidden', message: e.message };
    return { ok: false, reason: 'dry-run-failed', message: e.message };
  }

  /**
   * Rollout restart: one strategic-merge patch setting `kubectl.kubernetes.io/restartedAt` to `now` (RFC 3339).
   * @param uid when given, the patch also carries `metadata.uid`: the API server applies the patch to the object it
   *   stores, and validation refuses to change the immutable uid, so an object deleted and recreated under the same
   *   name is not patched (422 Invalid on `metadata.uid`, see {@link isUidMismatch}).
   * @returns the workload's new `metadata.generation`.
   * @throws {KubeCallError}
   */
  async restart(target: RemediationTarget & { kind: RestartableKind }, now: Date, uid?: string): Promise<{ generation?: number }> {
    try {
      const obj = await this.patchWorkload(target.kind, target.namespace, target.name, restartPatch(now, uid), false);
      return { generation: obj.metadata?.generation };
    } catch (err) {
      throw toKubeError(err, `rollout restart of ${objectLabel(target)}`);
    }
  }

  /**
   * The raw `kubectl.kubernetes.io/restartedAt` annotation of a workload's pod template (undefined when absent) and
   * the workload's uid. Used to establish whether tokenwatch's own restart PATCH reached the API server before a
   * crash: only an exact match of the value it sent proves that. @throws {KubeCallError}
   */
  async restartedAt(target: RemediationTarget & { kind: RestartableKind }): Promise<{ value?: string; uid?: string }> {
    let obj;
    try {
      obj = await this.readWorkload(target.kind, target.namespace, target.name);
    } catch (err) {
      throw toKubeError(err, `read ${objectLabel(target)}`);
    }
    const value = obj.spec?.template?.metadata?.annotations?.[RESTARTED_AT];
    return { ...(value !== undefined ? { value } : {}), ...(obj.metadata?.uid !== undefined ? { uid: obj.metadata.uid } : {}) };
  }

  /** Reads the rollout progress of a workload. */
  async rolloutProgress(target: RemediationTarget & { kind: RestartableKind }): Promise<RolloutProgress> {
    try {
      const obj = await this.readWorkload(target.kind, target.namespace, target.name);
      return progressOf(target.kind, obj as Parameters<typeof progressOf>[1]);
    } catch (err) {
      throw toKubeError(err, `read ${objectLabel(target)}`);
    }
  }

  /**
   * Polls rollout progress every `intervalMs` until complete or `timeoutMs` passed, calling `onProgress`
   * whenever the figures change. Resolves with the last progress (`timedOut: true` on timeout).
   */
  async waitForRollout(
    target: RemediationTarget & { kind: RestartableKind },
    opts: { timeoutMs: number; intervalMs: number; onProgress?: (p: RolloutProgress) => void | Promise<void>; signal?: AbortSignal },
  ): Promise<RolloutProgress> {
    const deadline = Date.now() + opts.timeoutMs;
    let last = '';
    for (;;) {
      const p = await this.rolloutProgress(target);
      const key = JSON.stringify(p);
      if (key !== last) {
        last = key;
        await opts.onProgress?.(p);
      }
      if (p.done) return p;
      if (Date.now() >= deadline || opts.signal?.aborted) return { ...p, timedOut: true };
      await sleep(opts.intervalMs);
    }
  }

  /**
   * Checks that the ServiceAccount exists and that deleting and recreating it would be allowed:
   * a dry-run delete with uid/resourceVersion preconditions, and a dry-run create (which the API server
   * authorizes before it answers 409 AlreadyExists — so a 409 means "allowed"). Never throws.
   */
  async preflightRecreateServiceAccount(target: RemediationTarget): Promise<Preflight> {
    const ref = `ServiceAccount ${target.namespace}/${target.name}`;
    let sa: V1ServiceAccount;
    try {
      sa = await this.core.readNamespacedServiceAccount({ name: target.name, namespace: target.namespace });
    } catch (err) {
      return this.preflightError(err, `read ${ref}`);
    }
    const finalizers = sa.metadata?.finalizers ?? [];
    if (finalizers.length > 0) {
      return {
        ok: false,
        reason: 'finalizers',
        message: `${ref} has finalizers (${finalizers.join(', ')}): a DELETE would leave it Terminating until they are removed, and creating it again would fail, so tokenwatch does not recreate it. Remove the finalizers (or let their controller finish) and request again.`,
      };
    }
    try {
      await this.core.deleteNamespacedServiceAccount({
        name: target.name,
        namespace: target.namespace,
        dryRun: 'All',
        body: { preconditions: { uid: sa.metadata?.uid, resourceVersion: sa.metadata?.resourceVersion } },
      });
    } catch (err) {
      return this.preflightError(err, `dry-run delete of ${ref}`);
    }
    try {
      await this.core.createNamespacedServiceAccount({ namespace: target.namespace, body: recreatedServiceAccount(sa), dryRun: 'All' });
    } catch (err) {
      const e = toKubeError(err, `dry-run create of ${ref}`);
      if (e.status !== 409) return this.preflightError(err, `dry-run create of ${ref}`);
    }
    const owners = sa.metadata?.ownerReferences ?? [];
    const keeps = owners.length ? `; the new ServiceAccount keeps its ownerReferences (${owners.map((o) => `${o.kind}/${o.name}`).join(', ')})` : '';
    return { ok: true, detail: `dry run of deleting and recreating ${ref} passed${keeps}`, uid: sa.metadata?.uid, resourceVersion: sa.metadata?.resourceVersion };
  }

  /** Reads a ServiceAccount; undefined when it does not exist (404). @throws {KubeCallError} on other failures. */
  async readServiceAccount(target: RemediationTarget): Promise<V1ServiceAccount | undefined> {
    try {
      return await this.core.readNamespacedServiceAccount({ name: target.name, namespace: target.namespace });
    } catch (err) {
      const e = toKubeError(err, `read ServiceAccount ${target.namespace}/${target.name}`);
      if (e.status === 404) return undefined;
      throw e;
    }
  }

  /**
   * Deletes a ServiceAccount only if it still has `uid` and `resourceVersion` (API-server preconditions: 409
   * Conflict otherwise). @throws {KubeCallError}
   */
  async deleteServiceAccount(target: RemediationTarget, preconditions: { uid?: string; resourceVersion?: string }): Promise<void> {
    try {
      await this.core.deleteNamespacedServiceAccount({ name: target.name, namespace: target.namespace, body: { preconditions } });
    } catch (err) {
      throw toKubeError(err, `delete ServiceAccount ${target.namespace}/${target.name}`);
    }
  }

  /** Creates a ServiceAccount from `body`. @throws {KubeCallError} (409 when it exists). */
  async createServiceAccount(namespace: string, body: V1ServiceAccount): Promise<V1ServiceAccount> {
    try {
      return await this.core.createNamespacedServiceAccount({ namespace, body, fieldManager: this.fieldManager });
    } catch (err) {
      throw toKubeError(err, `create ServiceAccount ${namespace}/${body.metadata?.name}`);
    }
  }

  /**
   * Records a core/v1 Event on the target (e.g. reason `TokenwatchRestart`). Best effort: returns false
   * instead of throwing when the Event cannot be written (missing `create events` permission, say).
   */
  async recordEvent(
    target: RemediationTarget & { uid?: string },
    ev: { reason: string; message: string; type?: 'Normal' | 'Warning'; at: Date },
  ): Promise<boolean> {
    const apiVersion = target.kind === 'ServiceAccount' ? 'v1' : 'apps/v1';
    const ts = ev.at;
    try {
      await this.core.createNamespacedEvent({
        namespace: target.namespace,
        body: {
          metadata: { generateName: `${target.name}.tokenwatch-`, namespace: target.namespace },
          involvedObject: { kind: target.kind, namespace: target.namespace, name: target.name, uid: target.uid, apiVersion },
          reason: ev.reason,
          message: ev.message.slice(0, 1024),
          type: ev.type ?? 'Normal',
          source: { component: this.component },
          reportingComponent: this.component,
          reportingInstance: this.component,
          firstTimestamp: ts,
          lastTimestamp: ts,
          count: 1,
        },
      });
      return true;
    } catch {
      return false;
    }
  }
}

/** The `restartedAt` value of a restart at `now`: RFC 3339 UTC, whole seconds (as `kubectl rollout restart`). */
export function restartedAtValue(now: Date): string {
  return now.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * The strategic-merge patch body of a rollout restart at `now`; with `uid`, it also carries `metadata.uid`, which
 * the API server refuses to change (a uid precondition, see {@link KubeRemediator.restart}).
 */
export function restartPatch(now: Date, uid?: string): object {
  return { ...(uid ? { metadata: { uid } } : {}), spec: { template: { metadata: { annotations: { [RESTARTED_AT]: restartedAtValue(now) } } } } };
}

/**
 * The body to recreate a ServiceAccount with: same name, labels, annotations, ownerReferences (so garbage
 * collection by its owner, e.g. a Helm-less operator's CR, keeps working), imagePullSecrets, automount; no uid,
 * resourceVersion, finalizers or secrets.
 */
export function recreatedServiceAccount(sa: V1ServiceAccount): V1ServiceAccount {
  const md = sa.metadata ?? {};
  const body: V1ServiceAccount = {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: {
      name: md.name,
      namespace: md.namespace,
      ...(md.labels ? { labels: { ...md.labels } } : {}),
      ...(md.annotations ? { annotations: { ...md.annotations } } : {}),
      ...(md.ownerReferences?.length ? { ownerReferences: md.ownerReferences.map((o) => ({ ...o })) } : {}),
    },
  };
  if (sa.imagePullSecrets?.length) body.imagePullSecrets = sa.imagePullSecrets.map((s) => ({ name: s.name }));
  if (sa.automountServiceAccountToken !== undefined) body.automountServiceAccountToken = sa.automountServiceAccountToken;
  return body;
}
