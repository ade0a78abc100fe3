/**
 * The sandbox's simulated cluster: the fake Kubernetes API server (`src/sandbox/fakes/kubernetes.ts`) seeded from the bundled
 * cluster snapshot (timestamps shifted like the audit log), the workload controller simulation
 * (`controller.ts`), a kubeconfig file pointing at it, and saving/loading its objects so that a second sandbox run
 * continues with the same pods.
 */
import { ErrorCode, TokenwatchError } from '../errors.js';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { stringify } from 'yaml';
import type { KubeObject, ObjectStore } from './fakes/index.js';
import type { ClusterView, PodView } from './replay.js';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const obj = (v: unknown): Obj => (isObj(v) ? v : {});
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** Kinds the sandbox keeps across runs. */
const SAVED_KINDS = ['Namespace', 'Node', 'Pod', 'ServiceAccount', 'Secret', 'ConfigMap', 'Event', 'DaemonSet', 'Deployment', 'StatefulSet', 'ReplicaSet', 'Lease'];

/** A pod of the store as {@link PodView}. Start time is `status.startTime`, else the creation time, else 0. */
export function podView(p: KubeObject): PodView | undefined {
  const m = obj(p.metadata);
  const name = str(m.name);
  const uid = str(m.uid);
  if (!name || !uid) return undefined;
  const spec = obj(p.spec);
  const status = obj(p.status);
  const started = Date.parse(str(status.startTime) ?? str(m.creationTimestamp) ?? '');
  const containers = Array.isArray(spec.containers) ? spec.containers : [];
  return {
    namespace: str(m.namespace) ?? 'default',
    name,
    uid,
    serviceAccount: str(spec.serviceAccountName) ?? str(spec.serviceAccount) ?? 'default',
    ...(str(spec.nodeName) ? { node: str(spec.nodeName)! } : {}),
    ...(str(status.hostIP) ? { hostIP: str(status.hostIP)! } : {}),
    startedAt: Number.isNaN(started) ? 0 : started,
    images: containers.filter(isObj).map((c) => str(c.image) ?? ''),
  };
}

/** The live traffic's view of the fake API server's store (read at each tick). */
export function clusterView(store: ObjectStore): ClusterView {
  return {
    pods: () => store.list('Pod').map(podView).filter((p): p is PodView => p !== undefined),
    serviceAccount: (namespace, name) => {
      const sa = store.get('ServiceAccount', namespace, name);
      const m = obj(sa?.metadata);
      const uid = str(m.uid);
      if (!sa || !uid) return undefined;
      const created = Date.parse(str(m.creationTimestamp) ?? '');
      return { uid, createdAt: Number.isNaN(created) ? 0 : created };
    },
  };
}

/** Objects to seed the fake from: snapshot items with their `kind`/`apiVersion` (a `v1 List` item has both). */
export function seedObjects(items: readonly Obj[]): Obj[] {
  return items.filter((i) => typeof i.kind === 'string' && isObj(i.metadata) && typeof obj(i.metadata).name === 'string');
}

/** The store's objects worth keeping (see {@link SAVED_KINDS}). */
export function savedObjects(store: ObjectStore): KubeObject[] {
  return SAVED_KINDS.flatMap((k) => {
    try {
      return store.list(k);
    } catch {
      return [];
    }
  });
}

/** Writes objects as JSON (a `v1 List`), atomically (temp file + rename). */
export async function saveObjects(path: string, objects: readonly KubeObject[]): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.tmp`;
  await writeFile(tmp, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }), 'utf8');
  await rename(tmp, path);
}

/** Reads objects saved by {@link saveObjects}; undefined when the file is missing. @throws Error when it is corrupt. */
export function loadObjects(path: string): Obj[] | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
  const v: unknown = JSON.parse(text);
  if (!isObj(v) || !Array.isArray(v.items)) throw new TokenwatchError(ErrorCode.SandboxFailed, `sandbox: ${path} is not a saved object list`);
  return v.items.filter(isObj);
}

/**
 * A kubeconfig (YAML) for the fake API server at `server` (`http://127.0.0.1:<port>`): `insecure-skip-tls-verify`
 * because client-node 1.4 refuses an `http://` server otherwise (docs/design/stack.md §2, §8), a static bearer token.
 */
export function kubeconfigYaml(server: string, cluster = 'sandbox'): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: cluster, cluster: { server, 'insecure-skip-tls-verify': true } }],
    users: [{ name: 'tokenwatch-sandbox', user: { token: 'sandbox-token' } }],
    contexts: [{ name: cluster, context: { cluster, user: 'tokenwatch-sandbox', namespace: 'default' } }],
    'current-context': cluster,
  });
}

/** A workload as the page's cluster panel shows it. */
export interface WorkloadSummary {
  kind: string;
  namespace: string;
  name: string;
  desired: number;
  updated: number;
  ready: number;
  rolling: boolean;
  pods: Array<{ name: string; node?: string; startedAt: number }>;
}

/** Summaries of the given workloads (`Kind namespace/name`), for the page. Pods of a Deployment via its ReplicaSets. */
export function summarizeWorkloads(store: ObjectStore, refs: ReadonlyArray<{ kind: string; namespace: string; name: string }>, rollingAnnotation: string): WorkloadSummary[] {
  const out: WorkloadSummary[] = [];
  for (const ref of refs) {
    const w = store.get(ref.kind, ref.namespace, ref.name);
    if (!w) continue;
    const s = obj(w.status);
    const num = (v: unknown): number => (typeof v === 'number' ? v : 0);
    const owners = new Set<string>([`${ref.kind}/${ref.name}`]);
    if (ref.kind === 'Deployment') {
      for (const rs of store.list('ReplicaSet', { namespace: ref.namespace })) {
        const c = (obj(rs.metadata).ownerReferences as unknown[] | undefined)?.find(isObj);
        if (isObj(c) && c.kind === 'Deployment' && c.name === ref.name) owners.add(`ReplicaSet/${str(obj(rs.metadata).name)}`);
      }
    }
    const pods = store
      .list('Pod', { namespace: ref.namespace })
      .filter((p) => {
        const c = (obj(p.metadata).ownerReferences as unknown[] | undefined)?.find(isObj);
        return isObj(c) && owners.has(`${String(c.kind)}/${String(c.name)}`);
      })
      .map((p) => podView(p))
      .filter((p): p is PodView => p !== undefined)
      .map((p) => ({ name: p.name, ...(p.node ? { node: p.node } : {}), startedAt: p.startedAt }));
    const ds = ref.kind === 'DaemonSet';
    out.push({
      ...ref,
      desired: ds ? num(s.desiredNumberScheduled) : num(obj(w.spec).replicas ?? 1),
      updated: ds ? num(s.updatedNumberScheduled) : num(s.updatedReplicas),
      ready: ds ? num(s.numberReady) : num(s.readyReplicas),
      rolling: typeof obj(obj(w.metadata).annotations)[rollingAnnotation] === 'string',
      pods,
    });
  }
  return out;
}
