/**
 * Test helper: offline validation of Kubernetes objects.
 *
 * - {@link validateObject}: the JSON schemas of `kubernetes-models` 4.5 (types, required fields, formats; Kubernetes
 *   1.27 OpenAPI). Those schemas allow unknown fields, so
 * - {@link unknownFields} walks the object against the model classes of `@kubernetes/client-node` 2
 *   (`getAttributeTypeMap()`: every field name and type of the Kubernetes 1.32 OpenAPI), catching typos such as
 *   `readOnlyRootFileSystem` that the API server would drop (or reject with `fieldValidation=Strict`).
 */
import * as k8s from '@kubernetes/client-node';
import { DaemonSet, Deployment } from 'kubernetes-models/apps/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { ClusterRole, ClusterRoleBinding, Role, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { StorageClass } from 'kubernetes-models/storage.k8s.io/v1';
import { ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding } from 'kubernetes-models/admissionregistration.k8s.io/v1';
import { PrometheusRule, ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { ConfigMap, Namespace, PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount } from 'kubernetes-models/v1';

interface Validatable {
  validate(): void;
}
type ModelCtor = new (data: never) => Validatable;

/** `apiVersion/kind` → kubernetes-models class. A kind missing here fails validation (so nothing goes unchecked). */
const MODELS: Record<string, ModelCtor> = {
  'v1/Namespace': Namespace as unknown as ModelCtor,
  'v1/ServiceAccount': ServiceAccount as unknown as ModelCtor,
  'v1/ConfigMap': ConfigMap as unknown as ModelCtor,
  'v1/Secret': Secret as unknown as ModelCtor,
  'v1/Service': Service as unknown as ModelCtor,
  'v1/Pod': Pod as unknown as ModelCtor,
  'v1/PersistentVolumeClaim': PersistentVolumeClaim as unknown as ModelCtor,
  'apps/v1/Deployment': Deployment as unknown as ModelCtor,
  'apps/v1/DaemonSet': DaemonSet as unknown as ModelCtor,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget as unknown as ModelCtor,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy as unknown as ModelCtor,
  'rbac.authorization.k8s.io/v1/ClusterRole': ClusterRole as unknown as ModelCtor,
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': ClusterRoleBinding as unknown as ModelCtor,
  'rbac.authorization.k8s.io/v1/Role': Role as unknown as ModelCtor,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding as unknown as ModelCtor,
  'storage.k8s.io/v1/StorageClass': StorageClass as unknown as ModelCtor,
  'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy': ValidatingAdmissionPolicy as unknown as ModelCtor,
  'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding': ValidatingAdmissionPolicyBinding as unknown as ModelCtor,
  // Prometheus Operator CRDs (@kubernetes-models/prometheus-operator); unknownFields() cannot check these (no client-node model).
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor as unknown as ModelCtor,
  'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule as unknown as ModelCtor,
};

/**
 * Validates one object with kubernetes-models. Returns '' when valid, else the validation message (e.g.
 * `data/spec/replicas must be integer`), or `no schema for <apiVersion>/<kind>`.
 */
export function validateObject(obj: { apiVersion?: unknown; kind?: unknown }): string {
  const Model = MODELS[`${String(obj.apiVersion)}/${String(obj.kind)}`];
  if (!Model) return `no schema for ${String(obj.apiVersion)}/${String(obj.kind)}`;
  try {
    new Model(obj as never).validate();
    return '';
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

type AttributeMap = { name: string; baseName: string; type: string }[];
const models = k8s as unknown as Record<string, { getAttributeTypeMap?: () => AttributeMap } | undefined>;

/** The client-node model name of a top-level object (`V1Deployment`, `V1PodDisruptionBudget`, …). */
export function modelName(obj: { apiVersion?: unknown; kind?: unknown }): string {
  const version = String(obj.apiVersion).split('/').pop() ?? '';
  return `${version.charAt(0).toUpperCase()}${version.slice(1)}${String(obj.kind)}`;
}

/**
 * Paths of fields that the Kubernetes schema does not define (e.g. `spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem`).
 * `$patch` directives and free-form maps (labels, data, …) are not checked.
 */
export function unknownFields(value: unknown, type: string, path = ''): string[] {
  if (value === null || value === undefined) return [];
  const t = type.replace(/ \| (null|undefined)$/, '');
  if (t.startsWith('Array<')) {
    const inner = t.slice(6, -1);
    return Array.isArray(value) ? value.flatMap((v, i) => unknownFields(v, inner, `${path}[${i}]`)) : [];
  }
  if (t.startsWith('{ [key: string]: ')) {
    const inner = t.slice('{ [key: string]: '.length, -'; }'.length);
    return typeof value === 'object' ? Object.entries(value as object).flatMap(([k, v]) => unknownFields(v, inner, `${path}.${k}`)) : [];
  }
  const model = models[t];
  if (!model?.getAttributeTypeMap) return []; // string, number, boolean, IntOrString, Date, object, any
  if (typeof value !== 'object' || Array.isArray(value)) return [`${path || '.'}: expected an object (${t})`];
  const attrs = new Map(model.getAttributeTypeMap().map((a) => [a.baseName, a.type]));
  return Object.entries(value as Record<string, unknown>).flatMap(([k, v]) => {
    if (k === '$patch') return [];
    const at = path ? `${path}.${k}` : k;
    const ft = attrs.get(k);
    return ft === undefined ? [`${at}: unknown field of ${t}`] : unknownFields(v, ft, at);
  });
}

/** A container or pod securityContext, the fields Pod Security Standards look at. */
interface SecurityContext {
  privileged?: boolean;
  allowPrivilegeEscalation?: boolean;
  runAsNonRoot?: boolean;
  runAsUser?: number;
  readOnlyRootFilesystem?: boolean;
  procMount?: string;
  capabilities?: { add?: string[]; drop?: string[] };
  seccompProfile?: { type?: string };
  seLinuxOptions?: { type?: string; user?: string; role?: string };
  appArmorProfile?: { type?: string };
  sysctls?: { name: string }[];
}

interface PodSpecLike {
  hostNetwork?: boolean;
  hostPID?: boolean;
  hostIPC?: boolean;
  securityContext?: SecurityContext;
  containers?: ({ name: string; ports?: { hostPort?: number }[]; securityContext?: SecurityContext })[];
  initContainers?: ({ name: string; ports?: { hostPort?: number }[]; securityContext?: SecurityContext })[];
  volumes?: Record<string, unknown>[];
}

/** Volume types the restricted profile allows. */
const RESTRICTED_VOLUMES = new Set(['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim', 'projected', 'secret']);
/** Sysctls the baseline profile allows. */
const SAFE_SYSCTLS = new Set([
  'kernel.shm_rmid_forced',
  'net.ipv4.ip_local_port_range',
  'net.ipv4.ip_unprivileged_port_start',
  'net.ipv4.tcp_syncookies',
  'net.ipv4.ping_group_range',
  'net.ipv4.ip_local_reserved_ports',
  'net.ipv4.tcp_keepalive_time',
  'net.ipv4.tcp_fin_timeout',
  'net.ipv4.tcp_keepalive_intvl',
  'net.ipv4.tcp_keepalive_probes',
]);

/**
 * Violations of the Pod Security Standards "restricted" profile (kubernetes.io/docs/concepts/security/
 * pod-security-standards, baseline + restricted controls, v1.30), plus `readOnlyRootFilesystem: true` on every
 * container (tokenwatch's own rule). Returns one line per violation; `[]` = compliant.
 */
export function restrictedViolations(spec: PodSpecLike): string[] {
  const v: string[] = [];
  const pod = spec.securityContext ?? {};
  if (spec.hostNetwork || spec.hostPID || spec.hostIPC) v.push('host namespaces: hostNetwork/hostPID/hostIPC must be unset or false');
  for (const vol of spec.volumes ?? []) {
    const kind = Object.keys(vol).find((k) => k !== 'name');
    if (kind === undefined || !RESTRICTED_VOLUMES.has(kind)) v.push(`volume ${String(vol['name'])}: type ${String(kind)} is not allowed`);
  }
  for (const s of pod.sysctls ?? []) if (!SAFE_SYSCTLS.has(s.name)) v.push(`sysctl ${s.name} is not allowed`);
  const podSeccomp = pod.seccompProfile?.type;
  if (podSeccomp !== undefined && podSeccomp !== 'RuntimeDefault' && podSeccomp !== 'Localhost') v.push(`pod: seccompProfile.type ${podSeccomp} is not allowed`);
  if (pod.runAsUser === 0) v.push('pod: runAsUser must not be 0');
  for (const c of [...(spec.containers ?? []), ...(spec.initContainers ?? [])]) {
    const sc = c.securityContext ?? {};
    const at = `container ${c.name}`;
    if (sc.privileged) v.push(`${at}: privileged must be false`);
    if (sc.allowPrivilegeEscalation !== false) v.push(`${at}: allowPrivilegeEscalation must be false`);
    if (!(sc.runAsNonRoot === true || (sc.runAsNonRoot === undefined && pod.runAsNonRoot === true))) v.push(`${at}: runAsNonRoot must be true (container or pod)`);
    if (sc.runAsUser === 0) v.push(`${at}: runAsUser must not be 0`);
    const seccomp = sc.seccompProfile?.type ?? podSeccomp;
    if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost') v.push(`${at}: seccompProfile.type must be RuntimeDefault or Localhost (container or pod)`);
    if (!(sc.capabilities?.drop ?? []).includes('ALL')) v.push(`${at}: capabilities.drop must include ALL`);
    for (const cap of sc.capabilities?.add ?? []) if (cap !== 'NET_BIND_SERVICE') v.push(`${at}: capability ${cap} may not be added`);
    if (sc.procMount !== undefined && sc.procMount !== 'Default') v.push(`${at}: procMount must be Default`);
    if (sc.appArmorProfile?.type === 'Unconfined') v.push(`${at}: appArmorProfile Unconfined is not allowed`);
    if (sc.seLinuxOptions?.user || sc.seLinuxOptions?.role) v.push(`${at}: seLinuxOptions user/role may not be set`);
    for (const p of c.ports ?? []) if (p.hostPort) v.push(`${at}: hostPort ${p.hostPort} is not allowed`);
    if (sc.readOnlyRootFilesystem !== true) v.push(`${at}: readOnlyRootFilesystem must be true`);
  }
  return v;
}
