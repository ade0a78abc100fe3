/**
 * Offline cluster state from a snapshot file: the output of
 * `kubectl get pods,daemonsets,deployments,statefulsets,replicasets,jobs,cronjobs,serviceaccounts,secrets -A -o json`
 * (a `v1 List` whose `items` carry `kind`). Also accepted: a `List` whose items are themselves Lists (several
 * `kubectl get` outputs combined), and typed lists such as `PodList` as the API returns them (items without
 * `kind`; the kind is taken from the list kind minus `List`).
 *
 * Secrets are reduced to their metadata while the file is parsed: `data`, `stringData` and the
 * `kubectl.kubernetes.io/last-applied-configuration` annotation (which repeats `data`) are dropped, and only
 * ServiceAccount token Secrets are kept, as {@link LegacySecretInfo}.
 */
import { readFile } from 'node:fs/promises';
import { InputError } from '../errors.js';
import {
  assembleSubjectState,
  objectKey,
  resolveOwnerChain,
  toLegacySecretInfo,
  toPodInfo,
  toServiceAccountInfo,
} from './convert.js';
import type { ClusterStateSource, LegacySecretInfo, LegacySecretOwner, PodInfo, SubjectState, WorkloadRef } from './types.js';

/** Kinds kept from a snapshot; everything else is ignored. */
const KEPT_KINDS = new Set([
  'Pod',
  'DaemonSet',
  'Deployment',
  'StatefulSet',
  'ReplicaSet',
  'Job',
  'CronJob',
  'ServiceAccount',
  'Secret',
]);

/** Deepest List nesting accepted (kubectl never nests more than once). */
const MAX_LIST_DEPTH = 4;

const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

/** The command whose output a snapshot is. */
export const SNAPSHOT_COMMAND =
  'kubectl get pods,daemonsets,deployments,statefulsets,replicasets,jobs,cronjobs,serviceaccounts,secrets -A -o json';

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isList(v: unknown): v is Obj & { items: unknown[] } {
  return isObj(v) && typeof v['kind'] === 'string' && v['kind'].endsWith('List') && Array.isArray(v['items']);
}

/** `JSON.parse` reviver that strips token material from Secrets as soon as each object is built. */
function dropSecretData(_key: string, value: unknown): unknown {
  if (isObj(value) && value['kind'] === 'Secret') stripSecret(value);
  return value;
}

function stripSecret(secret: Obj): void {
  delete secret['data'];
  delete secret['stringData'];
  const annotations = isObj(secret['metadata']) ? secret['metadata']['annotations'] : undefined;
  if (isObj(annotations)) delete annotations[LAST_APPLIED];
}

/**
 * Cluster state read from a snapshot (see module doc). Immutable after construction; answers from in-memory
 * indexes. Never throws from {@link describeServiceAccount} / {@link getPod}.
 */
export class SnapshotClusterState implements ClusterStateSource {
  /** Non-Secret objects by `kind/namespace/name`. */
  private readonly objects = new Map<string, unknown>();
  /** Pods by `namespace/serviceAccount`. */
  private readonly podsBySa = new Map<string, unknown[]>();
  /** ServiceAccount token Secrets (metadata facts only) by `namespace/serviceAccount`. */
  private readonly secretsBySa = new Map<string, LegacySecretInfo[]>();
  /** ServiceAccount token Secrets by `namespace/secretName`. */
  private readonly secretsByName = new Map<string, LegacySecretInfo>();
  /** ServiceAccount name by `namespace/secretName` for every Secret listed in a ServiceAccount's `.secrets[]`. */
  private readonly saBySecret = new Map<string, string>();
  /** Pods by pod IP, and hostNetwork pods also by node IP. */
  private readonly podsByIp = new Map<string, unknown[]>();

  private constructor(items: unknown[]) {
    for (const item of items) this.add(item);
  }

  /**
   * Build from a parsed snapshot. Secrets in `obj` are stripped of `data` in place.
   * @param obj a Kubernetes List (`kind` ending in `List`, with `items`), possibly of Lists.
   * @param source name used in errors (the file it came from), default `<snapshot>`.
   * @throws InputError when `obj` is not such a List (message says what was found and how to produce one).
   */
  static fromList(obj: unknown, source = '<snapshot>'): SnapshotClusterState {
    if (!isList(obj)) {
      const found = Array.isArray(obj)
        ? 'a JSON array'
        : isObj(obj)
          ? typeof obj['kind'] === 'string'
            ? `kind ${JSON.stringify(obj['kind'])}${Array.isArray(obj['items']) ? '' : ' without items'}`
            : 'an object without kind'
          : `a JSON ${obj === null ? 'null' : typeof obj}`;
      throw new InputError(source, `not a Kubernetes List (found ${found}); produce it with ${SNAPSHOT_COMMAND}`, {
        subject: `cluster snapshot ${source}`,
      });
    }
    return new SnapshotClusterState(flatten(obj, 0));
  }

  /** Number of objects kept (Secrets counted once per token Secret kept). */
  get size(): number {
    let secrets = 0;
    for (const list of this.secretsBySa.values()) secrets += list.length;
    return this.objects.size + secrets;
  }

  private add(item: unknown): void {
    if (!isObj(item)) return;
    const { kind, namespace, name } = objectKey(item);
    if (!KEPT_KINDS.has(kind) || !name) return;
    if (kind === 'Secret') {
      stripSecret(item);
      const info = toLegacySecretInfo(item);
      if (!info) return;
      const key = `${info.namespace}/${info.serviceAccount}`;
      const list = this.secretsBySa.get(key) ?? [];
      list.push(info);
      this.secretsBySa.set(key, list);
      this.secretsByName.set(`${info.namespace}/${info.name}`, info);
      return;
    }
    this.objects.set(`${kind}/${namespace}/${name}`, item);
    if (kind === 'ServiceAccount') {
      for (const secret of toServiceAccountInfo(item).secrets) this.saBySecret.set(`${namespace}/${secret}`, name);
    }
    if (kind === 'Pod') {
      const sa = toPodInfo(item).serviceAccount;
      const key = `${namespace}/${sa}`;
      const list = this.podsBySa.get(key) ?? [];
      list.push(item);
      this.podsBySa.set(key, list);
      const info = toPodInfo(item);
      const ips = new Set(info.ips ?? []);
      if (info.hostNetwork && info.hostIP) ips.add(info.hostIP);
      for (const ip of ips) {
        const byIp = this.podsByIp.get(ip) ?? [];
        byIp.push(item);
        this.podsByIp.set(ip, byIp);
      }
    }
  }

  private readonly lookup = (ref: WorkloadRef): unknown => this.objects.get(`${ref.kind}/${ref.namespace}/${ref.name}`);

  /** See {@link ClusterStateSource.describeServiceAccount}; always `available: true`. */
  async describeServiceAccount(namespace: string, name: string): Promise<SubjectState> {
    const key = `${namespace}/${name}`;
    return assembleSubjectState(
      namespace,
      name,
      {
        serviceAccount: this.objects.get(`ServiceAccount/${namespace}/${name}`),
        pods: this.podsBySa.get(key) ?? [],
        legacySecrets: this.secretsBySa.get(key) ?? [],
      },
      this.lookup,
    );
  }

  /**
   * See {@link ClusterStateSource.legacySecretOwner}: the ServiceAccount whose `.secrets[]` lists the Secret, else the
   * Secret's `kubernetes.io/service-account.name` annotation.
   */
  async legacySecretOwner(namespace: string, secretName: string): Promise<LegacySecretOwner | undefined> {
    const key = `${namespace}/${secretName}`;
    const secret = this.secretsByName.get(key);
    const listed = this.saBySecret.get(key);
    if (listed !== undefined) {
      const owner: LegacySecretOwner = {
        serviceAccount: listed,
        via: `ServiceAccount ${namespace}/${listed} lists Secret ${secretName} in .secrets[]`,
      };
      if (secret && secret.serviceAccount === listed) owner.secret = secret;
      return owner;
    }
    if (secret) {
      return {
        serviceAccount: secret.serviceAccount,
        via: `Secret ${namespace}/${secretName} is annotated kubernetes.io/service-account.name: ${secret.serviceAccount}`,
        secret,
      };
    }
    return undefined;
  }

  /** See {@link ClusterStateSource.podsByIP}: every snapshot pod with that pod IP (or node IP, for hostNetwork pods). */
  async podsByIP(ip: string): Promise<PodInfo[]> {
    const out: PodInfo[] = [];
    for (const pod of this.podsByIp.get(ip) ?? []) out.push(toPodInfo(pod, await resolveOwnerChain(pod, this.lookup)));
    return out;
  }

  /** See {@link ClusterStateSource.getPod}. */
  async getPod(namespace: string, name: string): Promise<PodInfo | undefined> {
    const pod = this.objects.get(`Pod/${namespace}/${name}`);
    if (pod === undefined) return undefined;
    return toPodInfo(pod, await resolveOwnerChain(pod, this.lookup));
  }
}

/** Items of a List, recursing into nested Lists; items of typed lists (`PodList`) get their kind filled in. */
function flatten(list: Obj & { items: unknown[] }, depth: number): unknown[] {
  const listKind = String(list['kind']);
  const itemKind = listKind === 'List' ? undefined : listKind.slice(0, -'List'.length);
  const out: unknown[] = [];
  for (const item of list.items) {
    if (isList(item) && depth < MAX_LIST_DEPTH) {
      out.push(...flatten(item, depth + 1));
    } else if (isObj(item)) {
      if (itemKind && typeof item['kind'] !== 'string') item['kind'] = itemKind;
      out.push(item);
    }
  }
  return out;
}

/**
 * Read a snapshot file (see module doc) into a {@link SnapshotClusterState}.
 * @param file path of the JSON file.
 * @throws InputError (naming `file`) when the file cannot be read, is not JSON, or is not a Kubernetes List.
 */
export async function loadSnapshot(file: string): Promise<SnapshotClusterState> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new InputError(file, `cannot read: ${reason}`, { cause: err, subject: `cluster snapshot ${file}` });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text, dropSecretData);
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new InputError(file, `invalid JSON: ${reason}`, { cause: err, subject: `cluster snapshot ${file}` });
  }
  return SnapshotClusterState.fromList(parsed, file);
}
