/**
 * Cluster state as tokenwatch needs it to explain a finding: the pods that run as a
 * ServiceAccount, the workloads that own them, their images and mounts, the ServiceAccount
 * itself and its legacy token Secrets.
 *
 * Two implementations share the {@link ClusterStateSource} interface: the offline snapshot reader
 * (`kubectl get ... -A -o json` output, `src/cluster/snapshot.ts`) and the live Kubernetes API reader
 * (`src/cluster/kube.ts`). All times are epoch milliseconds, UTC.
 */

/** A reference to a workload object. */
export interface WorkloadRef {
  /** `DaemonSet | Deployment | StatefulSet | ReplicaSet | Job | CronJob | Pod` or another owner kind. */
  kind: string;
  namespace: string;
  name: string;
  /**
   * `apiVersion` of an owner reference whose kind is a built-in workload kind but whose API group is not the built-in
   * one: a custom resource reusing the kind name (OpenKruise `apps.kruise.io/v1beta1` StatefulSet). Absent otherwise
   * (built-in owners, other custom resources), and in findings output and store targets.
   */
  apiVersion?: string;
  /**
   * Findings only (additive to the `scan` JSON contract): the object that owns this workload, e.g. the custom
   * resource an operator created the StatefulSet for. Actions (restart) target the workload itself.
   */
  owner?: { kind: string; namespace: string; name: string };
}

/** One container of a pod (init containers included, flagged). */
export interface ContainerInfo {
  name: string;
  /** Full image reference, e.g. `602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/multus-cni:v3.7.2-eksbuild.1`. */
  image: string;
  /** Tag part of the image (`v3.7.2-eksbuild.1`), undefined for digests/untagged. */
  imageTag?: string;
  /** Repository part without registry host and tag (`eks/multus-cni`). */
  imageRepository: string;
  /** Registry host (and port) when the reference names one (`602401143452.dkr.ecr.us-west-2.amazonaws.com`, `localhost:5000`); undefined for Docker Hub short names. */
  imageRegistry?: string;
  /** Digest part (`sha256:…`) of `repo@sha256:…` or `repo:tag@sha256:…` references. */
  imageDigest?: string;
  command: string[];
  args: string[];
  /**
   * `env[]` entries with a literal `value` (name → value); entries taken from ConfigMaps, Secrets or fields
   * (`valueFrom`) are left out, their value is not in the pod spec. Absent when the source does not read env.
   */
  env?: Record<string, string>;
  init: boolean;
}

/** A pod as seen in cluster state. */
export interface PodInfo {
  namespace: string;
  name: string;
  uid?: string;
  node?: string;
  serviceAccount: string;
  /** `status.startTime`, epoch ms UTC. */
  startTime?: number;
  phase?: string;
  containers: ContainerInfo[];
  /** `hostPath.path` of every hostPath volume (e.g. `/etc/cni/net.d`). */
  hostPaths: string[];
  /** Whether a projected `serviceAccountToken` volume (or the automatic `kube-api-access-*`) is mounted. */
  projectedToken: boolean;
  /** Owner chain from the direct owner up to the top (e.g. ReplicaSet → Deployment). Empty for bare pods. */
  ownerChain: WorkloadRef[];
  labels: Record<string, string>;
  /** The annotations routing rules name (`slack.routes[].match.annotations`), when the source keeps them; absent otherwise. */
  annotations?: Record<string, string>;
  /** `status.podIPs[].ip` (else `status.podIP`); a hostNetwork pod's IP is its node's. */
  ips?: string[];
  /** `status.hostIP`: the node's IP. */
  hostIP?: string;
  /** `spec.hostNetwork`: the pod shares its node's network namespace (and IP). */
  hostNetwork?: boolean;
}

/** A workload (top of an owner chain) with the facts remediation and cause analysis need. */
export interface WorkloadInfo extends WorkloadRef {
  uid?: string;
  /** DaemonSet `spec.updateStrategy.type` (`RollingUpdate | OnDelete`); Deployment `spec.strategy.type`. */
  updateStrategy?: string;
  /** Deployment `spec.paused`. */
  paused?: boolean;
  /** Desired pods (DaemonSet `status.desiredNumberScheduled`, else `spec.replicas`). */
  desired?: number;
  /** Container images of the pod template. */
  images: string[];
  /** Container args of the pod template, flattened. */
  args: string[];
  serviceAccount?: string;
  /** The labels routing rules name (`slack.routes[].match.labels`), when the source keeps them; absent otherwise. */
  labels?: Record<string, string>;
  /** The annotations routing rules name (`slack.routes[].match.annotations`), when the source keeps them; absent otherwise. */
  annotations?: Record<string, string>;
  /**
   * The object above this workload in its pods' owner chain, when there is one (e.g. the custom resource an operator
   * created a StatefulSet for, or the custom resource owning a CronJob). Informational: actions target the workload.
   */
  owner?: { kind: string; namespace: string; name: string };
}

/** A ServiceAccount. */
export interface ServiceAccountInfo {
  namespace: string;
  name: string;
  uid?: string;
  labels: Record<string, string>;
  /** e.g. `eks.amazonaws.com/role-arn`. */
  annotations: Record<string, string>;
  automountServiceAccountToken?: boolean;
  imagePullSecrets: string[];
  /** `secrets[].name` (legacy token Secrets listed on the SA, pre-1.24). */
  secrets: string[];
  /** `metadata.creationTimestamp`, epoch ms UTC. */
  createdAt?: number;
}

/** A `kubernetes.io/service-account-token` Secret. */
export interface LegacySecretInfo {
  namespace: string;
  name: string;
  serviceAccount: string;
  /** Label `kubernetes.io/legacy-token-last-used` (`YYYY-MM-DD`, UTC; GA 1.28). */
  lastUsed?: string;
  /** Label `kubernetes.io/legacy-token-invalid-since` (`YYYY-MM-DD`; GA 1.30). */
  invalidSince?: string;
  createdAt?: number;
}

/** Everything known about one ServiceAccount in one cluster. */
export interface SubjectState {
  /** False when cluster state could not be read (unreachable API server, no snapshot given). */
  available: boolean;
  /** Why state is unavailable or partial, e.g. `cluster state unavailable: connect ECONNREFUSED`. */
  error?: string;
  serviceAccount?: ServiceAccountInfo;
  /** Pods now running as this ServiceAccount. */
  pods: PodInfo[];
  /** Top-level workloads owning those pods (deduplicated). */
  workloads: WorkloadInfo[];
  legacySecrets: LegacySecretInfo[];
}

/** Read access to a cluster's state. Implementations must not throw for a missing object; they return empty state. */
export interface ClusterStateSource {
  /**
   * True when every answer describes the cluster as it is at the time of the call (the live API reader): an object
   * absent from it is gone now. Absent/false for snapshots, whose time is unknown.
   */
  readonly readsCurrentState?: boolean;
  /**
   * State of one ServiceAccount: the SA, the pods using it, their workloads, its legacy Secrets.
   * @throws never for "not found"; an implementation that cannot reach the cluster returns `{available:false, error}`.
   */
  describeServiceAccount(namespace: string, name: string): Promise<SubjectState>;
  /** A pod by namespace and name (or undefined when gone), for pods named in audit events. */
  getPod(namespace: string, name: string): Promise<PodInfo | undefined>;
  /**
   * Optional: the ServiceAccount a legacy token Secret belongs to, for requests whose audit event names only the
   * Secret (`authentication.k8s.io/legacy-token-invalidated: <secret>/<namespace>`, Kubernetes 1.29+). Found from the
   * ServiceAccount whose `.secrets[]` lists the Secret (auto-generated tokens; needs only ServiceAccount reads) or the
   * Secret's `kubernetes.io/service-account.name` annotation (needs Secret metadata).
   * @returns undefined when no ServiceAccount is known to own the Secret. Never throws for "not found".
   */
  legacySecretOwner?(namespace: string, secretName: string): Promise<LegacySecretOwner | undefined>;
  /**
   * Optional: pods whose pod IP or (for hostNetwork pods) node IP is `ip`, in every namespace the source sees; used to
   * attribute 401s by source IP. `during` (epoch ms, both ends included) is the time of the requests to explain: a
   * source that knows when pods held an IP (the live watch cache) answers with every pod that held it at some time in
   * that range, also pods gone since; a source without that history (a snapshot, whose time is unknown) ignores it and
   * answers with the pods it has on that IP. Undefined when the source cannot answer (then nothing is attributed by IP).
   */
  podsByIP?(ip: string, during?: { from: number; to: number }): Promise<PodInfo[] | undefined>;
  /**
   * Optional: the labels of namespace `name` that the Slack routing rules name (`slack.routes[].match.namespaceLabels`),
   * for routing. `{available: false, error}` when the namespace could not be read (no RBAC, unreachable, no such
   * namespace): then rules on namespace labels do not match. A source without it: such rules never match.
   * @throws never for cluster errors.
   */
  namespaceLabels?(name: string): Promise<NamespaceLabelsState>;
}

/** Result of {@link ClusterStateSource.namespaceLabels}. */
export type NamespaceLabelsState = { available: true; labels: Readonly<Record<string, string>> } | { available: false; error: string };

/** Result of {@link ClusterStateSource.legacySecretOwner}. */
export interface LegacySecretOwner {
  /** The ServiceAccount's name (same namespace as the Secret). */
  serviceAccount: string;
  /** How it was found, e.g. `ServiceAccount ops/backup-runner lists it in .secrets[]`. */
  via: string;
  /** The Secret's metadata facts, when Secret metadata was readable. */
  secret?: LegacySecretInfo;
}
