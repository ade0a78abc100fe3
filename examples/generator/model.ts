/**
 * The example cluster `prod-eks` (EKS 1.31, us-west-2): nodes, ServiceAccounts, workloads and pods, and the
 * bound tokens the stories hinge on. Everything the audit traffic and the cluster snapshot share lives here, so
 * the two cannot disagree. All times are epoch ms UTC.
 */
import { Rng } from './rng.js';
import { SECOND, ms } from './format.js';

/** Cluster name used by the demo (`npm run demo -- --cluster prod-eks`). */
export const CLUSTER = 'prod-eks';
/** AWS account of the example (the account id AWS documentation uses for examples). */
export const ACCOUNT = '111122223333';
/** The reference time: the latest event time in the bundled logs (`requestReceivedTimestamp` of the last line). */
export const REFERENCE_TIME = ms('2026-11-20T12:00:00Z');
/** When the API server rotated its audit log (`--audit-log-path` backup name `kube-apiserver-audit-2026-11-19T06-00-00.000.log.gz`). */
export const ROTATION_TIME = ms('2026-11-19T06:00:00Z');
/** First event of the rotated (older) file. */
export const WINDOW_START = ms('2026-11-18T12:00:00Z');
/** Lifetime the kubelet asks for bound tokens; `warnafter = iat + 3607 s` (kubernetes `pkg/serviceaccount/claims.go`). */
export const WARN_ONLY_SECONDS = 3607;
/** EKS rejects a stale token 90 days after its `warnafter` point (EKS user guide, service-accounts). */
export const EKS_MAX_SECONDS_AFTER_WARNING = 7_776_000;
/** Upstream extended expiry: 1 year after issue (kubernetes `storage/token.go`, `ExpirationExtensionSeconds`). */
export const UPSTREAM_EXTENSION_SECONDS = 31_536_000;
/** The kubelet refreshes a projected token once it is 80 % through its lifetime (kubelet token manager). */
export const KUBELET_REFRESH_SECONDS = 2886;

/** EKS control-plane build of the example (server `v1.31.2-eks-7f9249a`). */
export const CONTROL_PLANE = { gitVersion: 'v1.31.2-eks-7f9249a', commit: '7f9249a' } as const;
/** Source IPs of the EKS-managed control-plane hosts (controller manager, scheduler). */
export const CONTROL_PLANE_IPS = ['172.16.108.23', '172.16.77.150'] as const;

const ECR = '602401143452.dkr.ecr.us-west-2.amazonaws.com';

/** Container images used by the example workloads. */
export const IMAGES = {
  multus: `${ECR}/eks/multus-cni:v3.7.2-eksbuild.1`,
  awsNode: `${ECR}/amazon-k8s-cni:v1.19.2-eksbuild.1`,
  awsNodeInit: `${ECR}/amazon-k8s-cni-init:v1.19.2-eksbuild.1`,
  networkPolicyAgent: `${ECR}/amazon/aws-network-policy-agent:v1.1.6-eksbuild.1`,
  kubeProxy: `${ECR}/eks/kube-proxy:v1.31.2-minimal-eksbuild.3`,
  coredns: `${ECR}/eks/coredns:v1.11.3-eksbuild.2`,
  helmController: 'ghcr.io/fluxcd/helm-controller:v0.21.0',
  sourceController: 'ghcr.io/fluxcd/source-controller:v0.24.4',
  fluentBit: 'cr.fluentbit.io/fluent/fluent-bit:1.8.12',
  checkoutOld: `${ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com/shop/checkout:2026.11.12-2`,
  checkoutNew: `${ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com/shop/checkout:2026.11.20-1`,
  redis: 'docker.io/bitnami/redis:7.2.5-debian-12-r4',
  cartCleanup: `${ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com/shop/cart-cleanup:2026.10.02-1`,
} as const;

/** User agents, as client-go and the other clients build them (domain.md §5). */
export const UA = {
  multus: 'multus/v0.0.0 (linux/amd64) kubernetes/$Format',
  helmController: 'helm-controller/v0.0.0 (linux/amd64) kubernetes/$Format',
  sourceController: 'source-controller/v0.0.0 (linux/amd64) kubernetes/$Format',
  fluentBit: 'Fluent-Bit',
  awsNode: 'aws-k8s-agent/v0.0.0 (linux/amd64) kubernetes/$Format',
  networkPolicyAgent: 'aws-network-policy-agent/v0.0.0 (linux/amd64) kubernetes/$Format',
  kubeProxy: 'kube-proxy/v1.31.2-eks-5864a46 (linux/amd64) kubernetes/5864a46',
  coredns: 'coredns/1.11.3 git_commit:a6338e9 (linux/amd64/go1.22.8)',
  kcm: `kube-controller-manager/${CONTROL_PLANE.gitVersion} (linux/amd64) kubernetes/${CONTROL_PLANE.commit}`,
  scheduler: `kube-scheduler/${CONTROL_PLANE.gitVersion} (linux/amd64) kubernetes/${CONTROL_PLANE.commit}`,
  adminKubectl: 'kubectl/v1.31.1 (darwin/arm64) kubernetes/948afe5',
  ciKubectl: 'kubectl/v1.30.2 (linux/amd64) kubernetes/3968350',
  metrics: 'Go-http-client/1.1',
  cloudController: 'aws-cloud-controller-manager/v1.31.1 (linux/amd64) kubernetes/$Format',
} as const;

/** A worker node. */
export interface NodeModel {
  /** Story label: A–C old nodes, D joined 12 days ago, E the batch node whose Multus token expired, F the replaced pod. */
  label: 'A' | 'B' | 'C' | 'D' | 'E' | 'F';
  name: string;
  ip: string;
  uid: string;
  zone: string;
  nodegroup: string;
  instanceId: string;
  createdAt: number;
  kubeletUserAgent: string;
  /** Third octet range of the node's /19 subnet, for pod IPs. */
  subnetBase: number;
}

/** A ServiceAccount. */
export interface SaModel {
  namespace: string;
  name: string;
  uid: string;
  createdAt: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

/** A pod template as written in a workload manifest (defaults are added by the snapshot builder). */
export interface PodTemplate {
  labels: Record<string, string>;
  annotations?: Record<string, string>;
  /** Pod spec fields as in the manifest: containers, volumes, hostNetwork, tolerations, ... (no serviceAccountName). */
  spec: Record<string, unknown>;
}

/** A DaemonSet, Deployment, StatefulSet or ReplicaSet. */
export interface WorkloadModel {
  kind: 'DaemonSet' | 'Deployment' | 'StatefulSet' | 'ReplicaSet';
  namespace: string;
  name: string;
  uid: string;
  createdAt: number;
  generation: number;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  sa: SaModel;
  template: PodTemplate;
  /** Deployment/StatefulSet/ReplicaSet replicas. */
  replicas?: number;
  /** ReplicaSet: its Deployment; `pod-template-hash` value. */
  owner?: WorkloadModel;
  templateHash?: string;
  /** DaemonSet / StatefulSet `controller-revision-hash` of the current template. */
  revisionHash?: string;
}

/** A pod (current or, for the replaced Multus pod, deleted before the snapshot). */
export interface PodModel {
  namespace: string;
  name: string;
  uid: string;
  node: NodeModel;
  owner: WorkloadModel;
  sa: SaModel;
  createdAt: number;
  startTime: number;
  /** Pod IP (the node IP for hostNetwork pods). */
  ip: string;
  phase: 'Running' | 'Pending';
  /** Image of the pod's main container (for ReplicaSets whose template changed). */
  template: PodTemplate;
  /** Suffix of the automatic `kube-api-access-xxxxx` volume. */
  apiAccessSuffix: string;
  /** Set for the replaced pod: when it was deleted (it is absent from the snapshot). */
  deletedAt?: number;
}

/** A bound (projected, pod-bound) token as issued by the kubelet's TokenRequest. */
export interface BoundToken {
  pod: PodModel;
  /** `iat`, whole seconds (epoch ms). */
  issuedAt: number;
  /** `kubernetes.io/warnafter` = iat + 3607 s (epoch ms). */
  warnAfter: number;
  /** `JTI=<uuid>` credential id. */
  credentialId: string;
}

/** The whole example cluster. */
export interface ClusterModel {
  nodes: NodeModel[];
  serviceAccounts: SaModel[];
  workloads: WorkloadModel[];
  /** All pods, the replaced (deleted) Multus pod included. */
  pods: PodModel[];
  /** Handy references for the stories. */
  ref: {
    node: Record<NodeModel['label'], NodeModel>;
    sa: Record<string, SaModel>;
    multusPod: Record<NodeModel['label'], PodModel>;
    multusReplacedPod: PodModel;
    fluentBitPod: Record<NodeModel['label'], PodModel>;
    awsNodePod: Record<NodeModel['label'], PodModel>;
    kubeProxyPod: Record<NodeModel['label'], PodModel>;
    corednsPods: PodModel[];
    helmControllerPod: PodModel;
    sourceControllerPod: PodModel;
    checkoutStuckPod: PodModel;
    checkoutNewRs: WorkloadModel;
    checkoutOldRs: WorkloadModel;
    deployerSecret: { name: string; uid: string; createdAt: number };
  };
  /** When the replaced Multus pod on node F was deleted by the operator. */
  multusReplacedAt: number;
  /** When the CI pipeline rolled `shop/checkout` (legacy token), creating the pod stuck on node E. */
  checkoutRolloutAt: number;
}

/** Deterministic projected-token credential id for a pod's k-th token. */
export function tokenFor(pod: PodModel, k: number): BoundToken {
  const issuedAt = Math.floor((pod.startTime + SECOND) / SECOND) * SECOND + k * KUBELET_REFRESH_SECONDS * SECOND;
  const jti = new Rng(`jti/${pod.uid}/${k}`).uuid();
  return { pod, issuedAt, warnAfter: issuedAt + WARN_ONLY_SECONDS * SECOND, credentialId: `JTI=${jti}` };
}

/** The token the kubelet has mounted into `pod` at time `t` (rotated every 2886 s). */
export function currentToken(pod: PodModel, t: number): BoundToken {
  const k = Math.max(0, Math.floor((t - (pod.startTime + SECOND)) / (KUBELET_REFRESH_SECONDS * SECOND)));
  return tokenFor(pod, k);
}

/** `system:serviceaccount:<ns>:<name>`. */
export function saUsername(sa: SaModel): string {
  return `system:serviceaccount:${sa.namespace}:${sa.name}`;
}

/** Builds the example cluster. Deterministic for a given `rng` seed. */
export function buildCluster(rng: Rng): ClusterModel {
  const r = rng.fork('cluster');
  const nodeDefs: Array<[NodeModel['label'], string, string, string, number, string]> = [
    ['A', '192.168.14.201', 'us-west-2a', 'ng-general', 0, '2026-08-28T09:37:55Z'],
    ['B', '192.168.37.18', 'us-west-2b', 'ng-general', 32, '2026-08-28T09:38:02Z'],
    ['C', '192.168.58.113', 'us-west-2b', 'ng-general', 32, '2026-08-28T09:38:10Z'],
    ['D', '192.168.71.9', 'us-west-2c', 'ng-general', 64, '2026-11-08T14:19:40Z'],
    ['E', '192.168.90.44', 'us-west-2c', 'ng-batch', 64, '2026-08-22T03:45:50Z'],
    ['F', '192.168.23.87', 'us-west-2a', 'ng-general', 0, '2026-08-28T09:38:21Z'],
  ];
  const nodes: NodeModel[] = nodeDefs.map(([label, ip, zone, nodegroup, subnetBase, created]) => ({
    label,
    name: `ip-${ip.replace(/\./g, '-')}.us-west-2.compute.internal`,
    ip,
    uid: r.uuid(),
    zone,
    nodegroup,
    instanceId: `i-0${r.hex(16)}`,
    createdAt: ms(created),
    kubeletUserAgent:
      nodegroup === 'ng-batch'
        ? 'kubelet/v1.30.6-eks-7f9249a (linux/amd64) kubernetes/7f9249a'
        : 'kubelet/v1.31.2-eks-94953ac (linux/amd64) kubernetes/94953ac',
    subnetBase,
  }));
  const node = Object.fromEntries(nodes.map((n) => [n.label, n])) as Record<NodeModel['label'], NodeModel>;
  const podIp = (n: NodeModel): string => `192.168.${n.subnetBase + r.int(0, 31)}.${r.int(2, 254)}`;

  // ---------------------------------------------------------------- ServiceAccounts
  const sas: SaModel[] = [];
  const sa = (
    namespace: string,
    name: string,
    created: string,
    labels?: Record<string, string>,
    annotations?: Record<string, string>,
  ): SaModel => {
    const s: SaModel = { namespace, name, uid: r.uuid(), createdAt: ms(created) };
    if (labels) s.labels = labels;
    if (annotations) s.annotations = annotations;
    sas.push(s);
    return s;
  };
  const clusterBirth = '2026-03-04T15:02:11Z';
  for (const ns of ['default', 'kube-node-lease', 'kube-public', 'kube-system']) sa(ns, 'default', clusterBirth);
  const kubeSystemControllers = [
    'cronjob-controller',
    'daemon-set-controller',
    'deployment-controller',
    'endpointslice-controller',
    'generic-garbage-collector',
    'job-controller',
    'replicaset-controller',
    'ttl-after-finished-controller',
  ];
  for (const name of kubeSystemControllers) sa('kube-system', name, '2026-03-04T15:02:13Z');
  const awsNodeSa = sa(
    'kube-system',
    'aws-node',
    '2026-03-04T15:05:40Z',
    {
      'app.kubernetes.io/instance': 'aws-vpc-cni',
      'app.kubernetes.io/managed-by': 'Helm',
      'app.kubernetes.io/name': 'aws-node',
      'app.kubernetes.io/version': 'v1.19.2',
      'helm.sh/chart': 'aws-vpc-cni-1.19.2',
    },
    { 'eks.amazonaws.com/role-arn': `arn:aws:iam::${ACCOUNT}:role/AmazonEKSVPCCNIRole-prod-eks` },
  );
  const kubeProxySa = sa('kube-system', 'kube-proxy', '2026-03-04T15:05:41Z', {
    'eks.amazonaws.com/component': 'kube-proxy',
    'k8s-app': 'kube-proxy',
  });
  const corednsSa = sa('kube-system', 'coredns', '2026-03-04T15:05:41Z', {
    'eks.amazonaws.com/component': 'coredns',
    'k8s-app': 'kube-dns',
  });
  const multusSa = sa(
    'kube-system',
    'multus',
    '2026-03-18T10:22:47Z',
    { app: 'multus', tier: 'node' },
    {
      'kubectl.kubernetes.io/last-applied-configuration':
        '{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"annotations":{},"labels":{"app":"multus","tier":"node"},"name":"multus","namespace":"kube-system"}}\n',
    },
  );
  const fluxLabels = {
    'app.kubernetes.io/instance': 'flux-system',
    'app.kubernetes.io/part-of': 'flux',
    'app.kubernetes.io/version': 'v0.30.2',
    'kustomize.toolkit.fluxcd.io/name': 'flux-system',
    'kustomize.toolkit.fluxcd.io/namespace': 'flux-system',
  };
  sa('flux-system', 'default', '2026-04-07T08:41:02Z');
  const helmControllerSa = sa('flux-system', 'helm-controller', '2026-04-07T08:41:05Z', { ...fluxLabels });
  const sourceControllerSa = sa('flux-system', 'source-controller', '2026-04-07T08:41:05Z', { ...fluxLabels });
  const fluentBitHelmLabels = {
    'app.kubernetes.io/instance': 'fluent-bit',
    'app.kubernetes.io/managed-by': 'Helm',
    'app.kubernetes.io/name': 'fluent-bit',
    'app.kubernetes.io/version': '1.8.12',
    'helm.sh/chart': 'fluent-bit-0.19.19',
  };
  const helmAnnotations = (rel: string, ns: string): Record<string, string> => ({
    'meta.helm.sh/release-name': rel,
    'meta.helm.sh/release-namespace': ns,
  });
  sa('logging', 'default', '2026-04-07T09:02:40Z');
  const fluentBitSa = sa('logging', 'fluent-bit', '2026-04-07T09:02:44Z', { ...fluentBitHelmLabels }, helmAnnotations('fluent-bit', 'logging'));
  sa('ci', 'default', '2026-03-05T11:15:00Z');
  sa('ci', 'deployer', '2026-03-05T11:15:03Z', { 'app.kubernetes.io/part-of': 'ci' });
  sa('shop', 'default', '2026-03-05T11:20:30Z');
  const checkoutSa = sa('shop', 'checkout', '2026-03-05T11:20:34Z', { app: 'checkout' });
  const redisSa = sa(
    'shop',
    'redis',
    '2026-04-07T09:03:10Z',
    {
      'app.kubernetes.io/instance': 'redis',
      'app.kubernetes.io/managed-by': 'Helm',
      'app.kubernetes.io/name': 'redis',
      'helm.sh/chart': 'redis-19.6.4',
    },
    helmAnnotations('redis', 'shop'),
  );

  // ---------------------------------------------------------------- workloads
  const workloads: WorkloadModel[] = [];
  const wl = (w: Omit<WorkloadModel, 'uid'>): WorkloadModel => {
    const full: WorkloadModel = { ...w, uid: r.uuid() };
    workloads.push(full);
    return full;
  };

  const multusDs = wl({
    kind: 'DaemonSet',
    namespace: 'kube-system',
    name: 'kube-multus-ds',
    createdAt: ms('2026-03-18T10:22:47Z'),
    generation: 1,
    labels: { app: 'multus', name: 'multus', tier: 'node' },
    annotations: { 'deprecated.daemonset.template.generation': '1' },
    sa: multusSa,
    revisionHash: r.suffix(9),
    template: {
      labels: { app: 'multus', name: 'multus', tier: 'node' },
      // Source: aws/amazon-vpc-cni-k8s config/multus/v3.7.2-eksbuild.1/aws-k8s-multus.yaml
      spec: {
        affinity: {
          nodeAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: {
              nodeSelectorTerms: [
                {
                  matchExpressions: [
                    { key: 'kubernetes.io/os', operator: 'In', values: ['linux'] },
                    { key: 'kubernetes.io/arch', operator: 'In', values: ['amd64'] },
                    { key: 'eks.amazonaws.com/compute-type', operator: 'NotIn', values: ['fargate'] },
                  ],
                },
              ],
            },
          },
        },
        hostNetwork: true,
        tolerations: [{ operator: 'Exists', effect: 'NoSchedule' }],
        containers: [
          {
            name: 'kube-multus',
            image: IMAGES.multus,
            command: ['/entrypoint.sh'],
            args: [
              '--multus-conf-file=auto',
              '--cni-version=0.3.1',
              '--multus-master-cni-file-name=10-aws.conflist',
              '--multus-log-level=debug',
              '--multus-log-file=/var/log/aws-routed-eni/multus.log',
            ],
            resources: { requests: { cpu: '100m', memory: '50Mi' }, limits: { cpu: '100m', memory: '50Mi' } },
            securityContext: { privileged: true },
            volumeMounts: [
              { name: 'cni', mountPath: '/host/etc/cni/net.d' },
              { name: 'cnibin', mountPath: '/host/opt/cni/bin' },
              { name: 'multus-cfg', mountPath: '/tmp/multus-conf' },
            ],
          },
        ],
        terminationGracePeriodSeconds: 10,
        volumes: [
          { name: 'cni', hostPath: { path: '/etc/cni/net.d', type: '' } },
          { name: 'cnibin', hostPath: { path: '/opt/cni/bin', type: '' } },
          {
            name: 'multus-cfg',
            configMap: { name: 'multus-cni-config', items: [{ key: 'cni-conf.json', path: '70-multus.conf' }], defaultMode: 420 },
          },
        ],
      },
    },
  });

  const awsNodeDs = wl({
    kind: 'DaemonSet',
    namespace: 'kube-system',
    name: 'aws-node',
    createdAt: ms('2026-03-04T15:05:40Z'),
    generation: 4,
    labels: {
      'app.kubernetes.io/instance': 'aws-vpc-cni',
      'app.kubernetes.io/managed-by': 'Helm',
      'app.kubernetes.io/name': 'aws-node',
      'app.kubernetes.io/version': 'v1.19.2',
      'helm.sh/chart': 'aws-vpc-cni-1.19.2',
      'k8s-app': 'aws-node',
    },
    annotations: { 'deprecated.daemonset.template.generation': '4' },
    sa: awsNodeSa,
    revisionHash: r.suffix(10),
    template: {
      labels: { 'app.kubernetes.io/instance': 'aws-vpc-cni', 'app.kubernetes.io/name': 'aws-node', 'k8s-app': 'aws-node' },
      spec: {
        affinity: {
          nodeAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: {
              nodeSelectorTerms: [
                {
                  matchExpressions: [
                    { key: 'kubernetes.io/os', operator: 'In', values: ['linux'] },
                    { key: 'kubernetes.io/arch', operator: 'In', values: ['amd64', 'arm64'] },
                    { key: 'eks.amazonaws.com/compute-type', operator: 'NotIn', values: ['fargate', 'hybrid', 'auto'] },
                  ],
                },
              ],
            },
          },
        },
        hostNetwork: true,
        priorityClassName: 'system-node-critical',
        securityContext: {},
        terminationGracePeriodSeconds: 10,
        tolerations: [{ operator: 'Exists' }],
        initContainers: [
          {
            name: 'aws-vpc-cni-init',
            image: IMAGES.awsNodeInit,
            env: [{ name: 'DISABLE_TCP_EARLY_DEMUX', value: 'false' }],
            resources: { requests: { cpu: '25m' } },
            securityContext: { privileged: true },
            volumeMounts: [{ name: 'cni-bin-dir', mountPath: '/host/opt/cni/bin' }],
          },
        ],
        containers: [
          {
            name: 'aws-node',
            image: IMAGES.awsNode,
            env: [
              { name: 'AWS_VPC_K8S_CNI_LOGLEVEL', value: 'DEBUG' },
              { name: 'CLUSTER_NAME', value: CLUSTER },
              { name: 'MY_NODE_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'spec.nodeName' } } },
              { name: 'AWS_REGION', value: 'us-west-2' },
              { name: 'AWS_ROLE_ARN', value: `arn:aws:iam::${ACCOUNT}:role/AmazonEKSVPCCNIRole-prod-eks` },
              { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', value: '/var/run/secrets/eks.amazonaws.com/serviceaccount/token' },
            ],
            ports: [{ containerPort: 61678, name: 'metrics', protocol: 'TCP' }],
            resources: { requests: { cpu: '25m' } },
            securityContext: { capabilities: { add: ['NET_ADMIN', 'NET_RAW'] } },
            volumeMounts: [
              { name: 'cni-bin-dir', mountPath: '/host/opt/cni/bin' },
              { name: 'cni-net-dir', mountPath: '/host/etc/cni/net.d' },
              { name: 'log-dir', mountPath: '/host/var/log/aws-routed-eni' },
              { name: 'run-dir', mountPath: '/var/run/aws-node' },
              { name: 'xtables-lock', mountPath: '/run/xtables.lock' },
              { name: 'aws-iam-token', mountPath: '/var/run/secrets/eks.amazonaws.com/serviceaccount', readOnly: true },
            ],
          },
          {
            name: 'aws-eks-nodeagent',
            image: IMAGES.networkPolicyAgent,
            args: ['--enable-network-policy=false', '--metrics-bind-addr=:8162', '--health-probe-bind-addr=:8163'],
            env: [{ name: 'MY_NODE_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'spec.nodeName' } } }],
            resources: { requests: { cpu: '25m' } },
            securityContext: { capabilities: { add: ['NET_ADMIN'] }, privileged: true },
            volumeMounts: [
              { name: 'bpf-pin-path', mountPath: '/sys/fs/bpf' },
              { name: 'log-dir', mountPath: '/var/log/aws-routed-eni' },
              { name: 'run-dir', mountPath: '/var/run/aws-node' },
              { name: 'aws-iam-token', mountPath: '/var/run/secrets/eks.amazonaws.com/serviceaccount', readOnly: true },
            ],
          },
        ],
        volumes: [
          {
            name: 'aws-iam-token',
            projected: {
              defaultMode: 420,
              sources: [{ serviceAccountToken: { audience: 'sts.amazonaws.com', expirationSeconds: 86400, path: 'token' } }],
            },
          },
          { name: 'bpf-pin-path', hostPath: { path: '/sys/fs/bpf', type: '' } },
          { name: 'cni-bin-dir', hostPath: { path: '/opt/cni/bin', type: '' } },
          { name: 'cni-net-dir', hostPath: { path: '/etc/cni/net.d', type: '' } },
          { name: 'log-dir', hostPath: { path: '/var/log/aws-routed-eni', type: 'DirectoryOrCreate' } },
          { name: 'run-dir', hostPath: { path: '/var/run/aws-node', type: 'DirectoryOrCreate' } },
          { name: 'xtables-lock', hostPath: { path: '/run/xtables.lock', type: 'FileOrCreate' } },
        ],
      },
    },
  });

  const kubeProxyDs = wl({
    kind: 'DaemonSet',
    namespace: 'kube-system',
    name: 'kube-proxy',
    createdAt: ms('2026-03-04T15:05:41Z'),
    generation: 2,
    labels: { 'eks.amazonaws.com/component': 'kube-proxy', 'k8s-app': 'kube-proxy' },
    annotations: { 'deprecated.daemonset.template.generation': '2' },
    sa: kubeProxySa,
    revisionHash: r.suffix(10),
    template: {
      labels: { 'k8s-app': 'kube-proxy' },
      spec: {
        hostNetwork: true,
        priorityClassName: 'system-node-critical',
        tolerations: [{ operator: 'Exists' }],
        containers: [
          {
            name: 'kube-proxy',
            image: IMAGES.kubeProxy,
            command: ['kube-proxy', '--v=2', '--config=/var/lib/kube-proxy-config/config', '--hostname-override=$(NODE_NAME)'],
            env: [{ name: 'NODE_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'spec.nodeName' } } }],
            resources: { requests: { cpu: '100m' } },
            securityContext: { privileged: true },
            volumeMounts: [
              { name: 'varlog', mountPath: '/var/log' },
              { name: 'xtables-lock', mountPath: '/run/xtables.lock' },
              { name: 'lib-modules', mountPath: '/lib/modules', readOnly: true },
              { name: 'kubeconfig', mountPath: '/var/lib/kube-proxy/' },
              { name: 'config', mountPath: '/var/lib/kube-proxy-config/' },
            ],
          },
        ],
        volumes: [
          { name: 'varlog', hostPath: { path: '/var/log', type: '' } },
          { name: 'xtables-lock', hostPath: { path: '/run/xtables.lock', type: 'FileOrCreate' } },
          { name: 'lib-modules', hostPath: { path: '/lib/modules', type: '' } },
          { name: 'kubeconfig', configMap: { name: 'kube-proxy', defaultMode: 420 } },
          { name: 'config', configMap: { name: 'kube-proxy-config', defaultMode: 420 } },
        ],
      },
    },
  });

  const fluentBitDs = wl({
    kind: 'DaemonSet',
    namespace: 'logging',
    name: 'fluent-bit',
    createdAt: ms('2026-04-07T09:02:44Z'),
    generation: 3,
    labels: { ...fluentBitHelmLabels, 'helm.toolkit.fluxcd.io/name': 'fluent-bit', 'helm.toolkit.fluxcd.io/namespace': 'logging' },
    annotations: { 'deprecated.daemonset.template.generation': '3', ...helmAnnotations('fluent-bit', 'logging') },
    sa: fluentBitSa,
    revisionHash: r.suffix(10),
    template: {
      labels: { 'app.kubernetes.io/instance': 'fluent-bit', 'app.kubernetes.io/name': 'fluent-bit' },
      annotations: { 'checksum/config': r.hex(64), 'checksum/luascripts': r.hex(64) },
      spec: {
        dnsPolicy: 'ClusterFirst',
        containers: [
          {
            name: 'fluent-bit',
            image: IMAGES.fluentBit,
            imagePullPolicy: 'Always',
            ports: [{ containerPort: 2020, name: 'http', protocol: 'TCP' }],
            livenessProbe: { httpGet: { path: '/', port: 'http', scheme: 'HTTP' }, failureThreshold: 3, periodSeconds: 10, successThreshold: 1, timeoutSeconds: 1 },
            readinessProbe: { httpGet: { path: '/api/v1/health', port: 'http', scheme: 'HTTP' }, failureThreshold: 3, periodSeconds: 10, successThreshold: 1, timeoutSeconds: 1 },
            volumeMounts: [
              { name: 'config', mountPath: '/fluent-bit/etc/fluent-bit.conf', subPath: 'fluent-bit.conf' },
              { name: 'varlog', mountPath: '/var/log' },
              { name: 'varlibdockercontainers', mountPath: '/var/lib/docker/containers', readOnly: true },
              { name: 'etcmachineid', mountPath: '/etc/machine-id', readOnly: true },
            ],
          },
        ],
        volumes: [
          { name: 'config', configMap: { name: 'fluent-bit', defaultMode: 420 } },
          { name: 'varlog', hostPath: { path: '/var/log', type: '' } },
          { name: 'varlibdockercontainers', hostPath: { path: '/var/lib/docker/containers', type: '' } },
          { name: 'etcmachineid', hostPath: { path: '/etc/machine-id', type: 'File' } },
        ],
      },
    },
  });

  const deployment = (
    namespace: string,
    name: string,
    created: string,
    generation: number,
    replicas: number,
    labels: Record<string, string>,
    annotations: Record<string, string>,
    saModel: SaModel,
    template: PodTemplate,
  ): WorkloadModel =>
    wl({ kind: 'Deployment', namespace, name, createdAt: ms(created), generation, labels, annotations, sa: saModel, template, replicas });
  const replicaSet = (dep: WorkloadModel, created: string, revision: number, replicas: number, template: PodTemplate): WorkloadModel => {
    const hash = r.suffix(r.int(9, 10));
    return wl({
      kind: 'ReplicaSet',
      namespace: dep.namespace,
      name: `${dep.name}-${hash}`,
      createdAt: ms(created),
      generation: 1,
      labels: { ...template.labels, 'pod-template-hash': hash },
      annotations: {
        'deployment.kubernetes.io/desired-replicas': String(dep.replicas ?? 1),
        'deployment.kubernetes.io/max-replicas': String((dep.replicas ?? 1) + 1),
        'deployment.kubernetes.io/revision': String(revision),
      },
      sa: dep.sa,
      template: { ...template, labels: { ...template.labels, 'pod-template-hash': hash } },
      replicas,
      owner: dep,
      templateHash: hash,
    });
  };

  const corednsTemplate: PodTemplate = {
    labels: { 'eks.amazonaws.com/component': 'coredns', 'k8s-app': 'kube-dns' },
    spec: {
      priorityClassName: 'system-cluster-critical',
      dnsPolicy: 'Default',
      tolerations: [
        { key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule' },
        { key: 'CriticalAddonsOnly', operator: 'Exists' },
      ],
      containers: [
        {
          name: 'coredns',
          image: IMAGES.coredns,
          args: ['-conf', '/etc/coredns/Corefile'],
          ports: [
            { containerPort: 53, name: 'dns', protocol: 'UDP' },
            { containerPort: 53, name: 'dns-tcp', protocol: 'TCP' },
            { containerPort: 9153, name: 'metrics', protocol: 'TCP' },
          ],
          resources: { limits: { memory: '170Mi' }, requests: { cpu: '100m', memory: '70Mi' } },
          securityContext: { allowPrivilegeEscalation: false, capabilities: { add: ['NET_BIND_SERVICE'], drop: ['ALL'] }, readOnlyRootFilesystem: true },
          volumeMounts: [{ name: 'config-volume', mountPath: '/etc/coredns', readOnly: true }],
        },
      ],
      volumes: [{ name: 'config-volume', configMap: { name: 'coredns', items: [{ key: 'Corefile', path: 'Corefile' }], defaultMode: 420 } }],
    },
  };
  const corednsDep = deployment(
    'kube-system',
    'coredns',
    '2026-03-04T15:05:41Z',
    3,
    2,
    { 'eks.amazonaws.com/component': 'coredns', 'k8s-app': 'kube-dns', 'kubernetes.io/name': 'CoreDNS' },
    { 'deployment.kubernetes.io/revision': '2' },
    corednsSa,
    corednsTemplate,
  );
  const oldCorednsTemplate = structuredClone(corednsTemplate);
  ((oldCorednsTemplate.spec['containers'] as Array<Record<string, unknown>>)[0] as Record<string, unknown>)['image'] =
    `${ECR}/eks/coredns:v1.11.1-eksbuild.9`;
  replicaSet(corednsDep, '2026-03-04T15:05:41Z', 1, 0, oldCorednsTemplate);
  const corednsRs = replicaSet(corednsDep, '2026-10-14T10:12:25Z', 2, 2, corednsTemplate);

  const fluxControllerTemplate = (name: string, image: string, port: number, extraArgs: string[]): PodTemplate => ({
    labels: { app: name },
    annotations: { 'prometheus.io/port': '8080', 'prometheus.io/scrape': 'true' },
    spec: {
      nodeSelector: { 'kubernetes.io/os': 'linux' },
      securityContext: { fsGroup: 1337 },
      terminationGracePeriodSeconds: 600,
      containers: [
        {
          name: 'manager',
          image,
          args: [
            '--events-addr=http://notification-controller.flux-system.svc.cluster.local./',
            '--watch-all-namespaces=true',
            '--log-level=info',
            '--log-encoding=json',
            '--enable-leader-election',
            ...extraArgs,
          ],
          env: [{ name: 'RUNTIME_NAMESPACE', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } } }],
          ports: [
            { containerPort: port, name: 'http', protocol: 'TCP' },
            { containerPort: 8080, name: 'http-prom', protocol: 'TCP' },
            { containerPort: 9440, name: 'healthz', protocol: 'TCP' },
          ].filter((p, i, all) => all.findIndex((q) => q.containerPort === p.containerPort) === i),
          livenessProbe: { httpGet: { path: '/healthz', port: 'healthz', scheme: 'HTTP' }, failureThreshold: 3, periodSeconds: 10, successThreshold: 1, timeoutSeconds: 1 },
          readinessProbe: { httpGet: { path: '/readyz', port: 'healthz', scheme: 'HTTP' }, failureThreshold: 3, periodSeconds: 10, successThreshold: 1, timeoutSeconds: 1 },
          resources: { limits: { cpu: '1', memory: '1Gi' }, requests: { cpu: '100m', memory: '64Mi' } },
          securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, readOnlyRootFilesystem: true, runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
          volumeMounts: [{ name: 'temp', mountPath: '/tmp' }],
        },
      ],
      volumes: [{ name: 'temp', emptyDir: {} }],
    },
  });
  const helmControllerDep = deployment(
    'flux-system',
    'helm-controller',
    '2026-04-07T08:41:05Z',
    2,
    1,
    { ...fluxLabels, 'control-plane': 'controller' },
    { 'deployment.kubernetes.io/revision': '2' },
    helmControllerSa,
    fluxControllerTemplate('helm-controller', IMAGES.helmController, 8080, []),
  );
  const helmControllerRs = replicaSet(helmControllerDep, '2026-10-06T08:05:38Z', 2, 1, helmControllerDep.template);
  const sourceControllerDep = deployment(
    'flux-system',
    'source-controller',
    '2026-04-07T08:41:05Z',
    2,
    1,
    { ...fluxLabels, 'control-plane': 'controller' },
    { 'deployment.kubernetes.io/revision': '2' },
    sourceControllerSa,
    fluxControllerTemplate('source-controller', IMAGES.sourceController, 9090, [
      '--storage-path=/data',
      '--storage-adv-addr=source-controller.$(RUNTIME_NAMESPACE).svc.cluster.local.',
    ]),
  );
  const sourceControllerRs = replicaSet(sourceControllerDep, '2026-10-06T08:05:36Z', 2, 1, sourceControllerDep.template);

  const checkoutTemplate = (image: string): PodTemplate => ({
    labels: { app: 'checkout' },
    spec: {
      containers: [
        {
          name: 'checkout',
          image,
          ports: [{ containerPort: 8080, name: 'http', protocol: 'TCP' }],
          env: [{ name: 'REDIS_ADDR', value: 'redis-master.shop.svc.cluster.local:6379' }],
          resources: { limits: { memory: '512Mi' }, requests: { cpu: '250m', memory: '256Mi' } },
          readinessProbe: { httpGet: { path: '/healthz', port: 'http', scheme: 'HTTP' }, failureThreshold: 3, periodSeconds: 5, successThreshold: 1, timeoutSeconds: 1 },
        },
      ],
    },
  });
  const checkoutDep = deployment(
    'shop',
    'checkout',
    '2026-03-05T11:20:34Z',
    9,
    3,
    { app: 'checkout' },
    { 'deployment.kubernetes.io/revision': '8' },
    checkoutSa,
    checkoutTemplate(IMAGES.checkoutNew),
  );
  const checkoutOldRs = replicaSet(checkoutDep, '2026-11-12T16:40:07Z', 7, 3, checkoutTemplate(IMAGES.checkoutOld));
  const checkoutNewRs = replicaSet(checkoutDep, '2026-11-20T09:29:58Z', 8, 1, checkoutTemplate(IMAGES.checkoutNew));

  const redisSts = wl({
    kind: 'StatefulSet',
    namespace: 'shop',
    name: 'redis-master',
    createdAt: ms('2026-04-07T09:03:10Z'),
    generation: 1,
    labels: {
      'app.kubernetes.io/component': 'master',
      'app.kubernetes.io/instance': 'redis',
      'app.kubernetes.io/managed-by': 'Helm',
      'app.kubernetes.io/name': 'redis',
      'helm.sh/chart': 'redis-19.6.4',
    },
    annotations: helmAnnotations('redis', 'shop'),
    sa: redisSa,
    replicas: 1,
    revisionHash: `redis-master-${r.suffix(10)}`,
    template: {
      labels: { 'app.kubernetes.io/component': 'master', 'app.kubernetes.io/instance': 'redis', 'app.kubernetes.io/name': 'redis' },
      spec: {
        automountServiceAccountToken: false,
        securityContext: { fsGroup: 1001 },
        containers: [
          {
            name: 'redis',
            image: IMAGES.redis,
            command: ['/bin/bash'],
            args: ['-c', '/opt/bitnami/scripts/start-scripts/start-master.sh'],
            ports: [{ containerPort: 6379, name: 'redis', protocol: 'TCP' }],
            resources: { limits: { memory: '192Mi' }, requests: { cpu: '100m', memory: '128Mi' } },
            securityContext: { allowPrivilegeEscalation: false, runAsNonRoot: true, runAsUser: 1001 },
            volumeMounts: [
              { name: 'start-scripts', mountPath: '/opt/bitnami/scripts/start-scripts' },
              { name: 'redis-data', mountPath: '/data' },
            ],
          },
        ],
        volumes: [
          { name: 'start-scripts', configMap: { name: 'redis-scripts', defaultMode: 493 } },
          { name: 'redis-data', persistentVolumeClaim: { claimName: 'redis-data-redis-master-0' } },
        ],
      },
    },
  });

  // ---------------------------------------------------------------- pods
  const pods: PodModel[] = [];
  const pod = (
    owner: WorkloadModel,
    n: NodeModel,
    start: number,
    opts: { name?: string; phase?: PodModel['phase']; deletedAt?: number; createdAt?: string } = {},
  ): PodModel => {
    const hostNetwork = owner.template.spec['hostNetwork'] === true;
    const p: PodModel = {
      namespace: owner.namespace,
      name: opts.name ?? `${owner.name}-${r.suffix(5)}`,
      uid: r.uuid(),
      node: n,
      owner,
      sa: owner.sa,
      createdAt: opts.createdAt !== undefined ? ms(opts.createdAt) : start - r.int(1, 3) * SECOND,
      startTime: start,
      ip: hostNetwork ? n.ip : podIp(n),
      phase: opts.phase ?? 'Running',
      template: owner.template,
      apiAccessSuffix: r.suffix(5),
    };
    if (opts.deletedAt !== undefined) p.deletedAt = opts.deletedAt;
    pods.push(p);
    return p;
  };
  const byLabel = <T>(f: (n: NodeModel) => T): Record<NodeModel['label'], T> =>
    Object.fromEntries(nodes.map((n) => [n.label, f(n)])) as Record<NodeModel['label'], T>;

  const multusReplacedAt = ms('2026-11-20T11:22:07.418Z');
  const multusStarts: Record<NodeModel['label'], string> = {
    A: '2026-08-28T09:41:17Z',
    B: '2026-08-28T09:41:55Z',
    C: '2026-08-28T09:42:31Z',
    D: '2026-11-08T14:21:03Z',
    E: '2026-08-22T03:47:23Z',
    F: '2026-11-20T11:22:19Z',
  };
  const multusPod = byLabel((n) =>
    pod(multusDs, n, ms(multusStarts[n.label]), n.label === 'F' ? { createdAt: '2026-11-20T11:22:17Z' } : {}),
  );
  const multusReplacedPod = pod(multusDs, node.F, ms('2026-08-28T09:43:09Z'), { deletedAt: multusReplacedAt });

  const awsNodeStarts: Record<NodeModel['label'], string> = {
    A: '2026-10-14T10:08:04Z',
    B: '2026-10-14T10:08:49Z',
    C: '2026-10-14T10:09:31Z',
    D: '2026-11-08T14:20:02Z',
    E: '2026-10-14T10:10:14Z',
    F: '2026-10-14T10:10:58Z',
  };
  const awsNodePod = byLabel((n) => pod(awsNodeDs, n, ms(awsNodeStarts[n.label])));
  const kubeProxyPod = byLabel((n) => pod(kubeProxyDs, n, n.createdAt + 15 * SECOND));
  const fluentBitStarts: Record<NodeModel['label'], string> = {
    A: '2026-10-31T15:20:04Z',
    B: '2026-10-31T15:20:41Z',
    C: '2026-10-31T15:21:15Z',
    D: '2026-11-08T14:21:10Z',
    E: '2026-10-31T15:21:52Z',
    F: '2026-10-31T15:22:30Z',
  };
  const fluentBitPod = byLabel((n) => pod(fluentBitDs, n, ms(fluentBitStarts[n.label])));
  const corednsPods = [
    pod(corednsRs, node.A, ms('2026-10-14T10:12:31Z')),
    pod(corednsRs, node.B, ms('2026-10-14T10:12:58Z')),
  ];
  const sourceControllerPod = pod(sourceControllerRs, node.B, ms('2026-10-06T08:05:39Z'));
  const helmControllerPod = pod(helmControllerRs, node.C, ms('2026-10-06T08:05:41Z'));
  pod(checkoutOldRs, node.A, ms('2026-11-12T16:40:10Z'));
  pod(checkoutOldRs, node.B, ms('2026-11-12T16:40:35Z'));
  pod(checkoutOldRs, node.D, ms('2026-11-12T16:41:02Z'));
  const checkoutRolloutAt = ms('2026-11-20T09:29:58.204Z');
  const checkoutStuckPod = pod(checkoutNewRs, node.E, ms('2026-11-20T09:30:00Z'), { phase: 'Pending', createdAt: '2026-11-20T09:29:59Z' });
  pod(redisSts, node.C, ms('2026-09-02T10:00:07Z'), { name: 'redis-master-0' });

  const saRef = Object.fromEntries(sas.map((s) => [`${s.namespace}/${s.name}`, s]));
  return {
    nodes,
    serviceAccounts: sas,
    workloads,
    pods,
    ref: {
      node,
      sa: saRef,
      multusPod,
      multusReplacedPod,
      fluentBitPod,
      awsNodePod,
      kubeProxyPod,
      corednsPods,
      helmControllerPod,
      sourceControllerPod,
      checkoutStuckPod,
      checkoutNewRs,
      checkoutOldRs,
      deployerSecret: { name: 'deployer-token', uid: r.uuid(), createdAt: ms('2026-03-05T11:15:04Z') },
    },
    multusReplacedAt,
    checkoutRolloutAt,
  };
}

