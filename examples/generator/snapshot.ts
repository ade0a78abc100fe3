/**
 * The cluster snapshot: what `kubectl get pods,daemonsets,deployments,statefulsets,replicasets,serviceaccounts,secrets
 * -A -o json` prints for the example cluster at the reference time — a `v1 List`, items grouped by resource in
 * the order asked for, each group sorted by namespace then name (the API server's list order), keys sorted and
 * 4-space indented like kubectl's JSON printer. Pod specs carry the defaults the API server adds (tolerations,
 * `kube-api-access-xxxxx` projected volume, DaemonSet `matchFields` node affinity, ...).
 */
import type { Rng } from './rng.js';
import { MINUTE, SECOND, kubectlJson, rfc3339 } from './format.js';
import type { ClusterModel, PodModel, SaModel, WorkloadModel } from './model.js';

type Obj = Record<string, unknown>;

/** Obviously fake Secret data (base64 of readable placeholders): never a real token or certificate. */
export const FAKE_SECRET_DATA = {
  'ca.crt': Buffer.from('FAKE-CA-CERTIFICATE-PLACEHOLDER-NOT-A-REAL-CERT\n').toString('base64'),
  namespace: Buffer.from('ci').toString('base64'),
  token: Buffer.from('FAKE-SERVICE-ACCOUNT-TOKEN-PLACEHOLDER-NOT-A-JWT').toString('base64'),
} as const;

const DAEMONSET_TOLERATIONS = [
  { effect: 'NoExecute', key: 'node.kubernetes.io/not-ready', operator: 'Exists' },
  { effect: 'NoExecute', key: 'node.kubernetes.io/unreachable', operator: 'Exists' },
  { effect: 'NoSchedule', key: 'node.kubernetes.io/disk-pressure', operator: 'Exists' },
  { effect: 'NoSchedule', key: 'node.kubernetes.io/memory-pressure', operator: 'Exists' },
  { effect: 'NoSchedule', key: 'node.kubernetes.io/pid-pressure', operator: 'Exists' },
  { effect: 'NoSchedule', key: 'node.kubernetes.io/unschedulable', operator: 'Exists' },
];
const HOSTNETWORK_DS_TOLERATION = { effect: 'NoSchedule', key: 'node.kubernetes.io/network-unavailable', operator: 'Exists' };
const DEFAULT_POD_TOLERATIONS = [
  { effect: 'NoExecute', key: 'node.kubernetes.io/not-ready', operator: 'Exists', tolerationSeconds: 300 },
  { effect: 'NoExecute', key: 'node.kubernetes.io/unreachable', operator: 'Exists', tolerationSeconds: 300 },
];
const PRIORITY: Record<string, number> = { 'system-node-critical': 2000001000, 'system-cluster-critical': 2000000000 };

function clone<T>(v: T): T {
  return structuredClone(v);
}

function resourceVersion(r: Rng): string {
  return String(r.int(40_000_000, 49_999_999));
}

/** Container with the API server's defaults filled in. */
function defaultContainer(c: Obj): Obj {
  const out: Obj = {
    imagePullPolicy: 'IfNotPresent',
    resources: {},
    terminationMessagePath: '/dev/termination-log',
    terminationMessagePolicy: 'File',
    ...clone(c),
  };
  for (const probe of ['livenessProbe', 'readinessProbe']) {
    const p = out[probe] as Obj | undefined;
    if (p && 'httpGet' in p) out[probe] = p;
  }
  if (Array.isArray(out['ports'])) out['ports'] = (out['ports'] as Obj[]).map((p) => ({ protocol: 'TCP', ...p }));
  return out;
}

/** Pod template spec with defaults (as stored in a workload's `spec.template`). */
function templateSpec(w: WorkloadModel): Obj {
  const s = clone(w.template.spec);
  const spec: Obj = {
    dnsPolicy: s['hostNetwork'] === true ? 'ClusterFirstWithHostNet' : 'ClusterFirst',
    restartPolicy: 'Always',
    schedulerName: 'default-scheduler',
    securityContext: {},
    serviceAccount: w.sa.name,
    serviceAccountName: w.sa.name,
    terminationGracePeriodSeconds: 30,
    ...s,
  };
  spec['containers'] = (s['containers'] as Obj[]).map(defaultContainer);
  if (Array.isArray(s['initContainers'])) spec['initContainers'] = (s['initContainers'] as Obj[]).map(defaultContainer);
  return spec;
}

function templateObj(w: WorkloadModel): Obj {
  const metadata: Obj = { creationTimestamp: null, labels: clone(w.template.labels) };
  if (w.template.annotations) metadata['annotations'] = clone(w.template.annotations);
  return { metadata, spec: templateSpec(w) };
}

function ownerRef(w: WorkloadModel): Obj {
  return { apiVersion: 'apps/v1', blockOwnerDeletion: true, controller: true, kind: w.kind, name: w.name, uid: w.uid };
}

/** `spec.selector` as the manifests write it (a subset of the template labels). */
const SELECTORS: Record<string, Record<string, string>> = {
  'kube-system/kube-multus-ds': { name: 'multus' },
  'kube-system/aws-node': { 'k8s-app': 'aws-node' },
  'kube-system/kube-proxy': { 'k8s-app': 'kube-proxy' },
  'kube-system/coredns': { 'eks.amazonaws.com/component': 'coredns', 'k8s-app': 'kube-dns' },
};

function selectorOf(w: WorkloadModel): Obj {
  return { matchLabels: clone(SELECTORS[`${w.namespace}/${w.name}`] ?? w.template.labels) };
}

/** Image digest reference as containerd reports it in `imageID`. */
function imageId(image: string, r: Rng): string {
  const repo = image.replace(/:[^/:]+$/, '');
  return `${repo}@sha256:${r.hex(64)}`;
}

function podObject(p: PodModel, r: Rng): Obj {
  const w = p.owner;
  const isDs = w.kind === 'DaemonSet';
  const spec = templateSpec(w);
  const apiAccess = `kube-api-access-${p.apiAccessSuffix}`;
  const automount = spec['automountServiceAccountToken'] !== false;
  const hostNetwork = spec['hostNetwork'] === true;
  const mount = { mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', name: apiAccess, readOnly: true };
  if (automount) {
    spec['containers'] = (spec['containers'] as Obj[]).map((c) => ({ ...c, volumeMounts: [...((c['volumeMounts'] as Obj[]) ?? []), mount] }));
    if (Array.isArray(spec['initContainers']))
      spec['initContainers'] = (spec['initContainers'] as Obj[]).map((c) => ({ ...c, volumeMounts: [...((c['volumeMounts'] as Obj[]) ?? []), mount] }));
    spec['volumes'] = [
      ...((spec['volumes'] as Obj[]) ?? []),
      {
        name: apiAccess,
        projected: {
          defaultMode: 420,
          sources: [
            { serviceAccountToken: { expirationSeconds: 3607, path: 'token' } },
            { configMap: { items: [{ key: 'ca.crt', path: 'ca.crt' }], name: 'kube-root-ca.crt' } },
            { downwardAPI: { items: [{ fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' }, path: 'namespace' }] } },
          ],
        },
      },
    ];
  }
  spec['nodeName'] = p.node.name;
  spec['enableServiceLinks'] = true;
  spec['preemptionPolicy'] = 'PreemptLowerPriority';
  const pc = spec['priorityClassName'];
  spec['priority'] = typeof pc === 'string' ? (PRIORITY[pc] ?? 0) : 0;
  const tolerations = (spec['tolerations'] as Obj[] | undefined) ?? [];
  if (isDs) {
    spec['tolerations'] = [...tolerations, ...DAEMONSET_TOLERATIONS, ...(hostNetwork ? [HOSTNETWORK_DS_TOLERATION] : [])];
    // The DaemonSet controller pins each pod to its node (ReplaceDaemonSetPodNodeNameNodeAffinity).
    spec['affinity'] = {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'In', values: [p.node.name] }] }],
        },
      },
    };
  } else {
    spec['tolerations'] = [...tolerations, ...DEFAULT_POD_TOLERATIONS];
  }

  const labels: Record<string, string> = { ...w.template.labels };
  if (isDs) {
    labels['controller-revision-hash'] = w.revisionHash ?? '';
    labels['pod-template-generation'] = String(w.generation);
  } else if (w.kind === 'StatefulSet') {
    labels['apps.kubernetes.io/pod-index'] = '0';
    labels['controller-revision-hash'] = w.revisionHash ?? '';
    labels['statefulset.kubernetes.io/pod-name'] = p.name;
  }
  const metadata: Obj = {
    creationTimestamp: rfc3339(p.createdAt),
    labels,
    name: p.name,
    namespace: p.namespace,
    ownerReferences: [ownerRef(w)],
    resourceVersion: resourceVersion(r),
    uid: p.uid,
  };
  if (w.kind !== 'StatefulSet') metadata['generateName'] = `${w.kind === 'ReplicaSet' ? w.name : w.name}-`;
  else metadata['generateName'] = `${w.name}-`;
  if (w.template.annotations) metadata['annotations'] = clone(w.template.annotations);

  const started = p.phase === 'Running';
  const readyAt = p.startTime + r.int(4, 25) * SECOND;
  const cond = (type: string, status: boolean, at: number, reason?: string): Obj => {
    const c: Obj = { lastProbeTime: null, lastTransitionTime: rfc3339(at), status: status ? 'True' : 'False', type };
    if (reason) c['reason'] = reason;
    return c;
  };
  const containerStatus = (c: Obj, init: boolean): Obj => {
    const image = c['image'] as string;
    const base: Obj = { image, imageID: started ? imageId(image, r) : '', lastState: {}, name: c['name'] };
    if (!started) return { ...base, ready: false, restartCount: 0, started: false, state: { waiting: { reason: init ? 'PodInitializing' : 'ContainerCreating' } } };
    if (init)
      return {
        ...base,
        containerID: `containerd://${r.hex(64)}`,
        ready: true,
        restartCount: 0,
        started: false,
        state: { terminated: { containerID: '', exitCode: 0, finishedAt: rfc3339(p.startTime + 3 * SECOND), reason: 'Completed', startedAt: rfc3339(p.startTime + 2 * SECOND) } },
      };
    return {
      ...base,
      containerID: `containerd://${r.hex(64)}`,
      ready: true,
      restartCount: 0,
      started: true,
      state: { running: { startedAt: rfc3339(p.startTime + r.int(2, 9) * SECOND) } },
    };
  };
  const status: Obj = {
    conditions: started
      ? [
          cond('PodReadyToStartContainers', true, p.startTime + 2 * SECOND),
          cond('Initialized', true, p.startTime + 3 * SECOND),
          cond('Ready', true, readyAt),
          cond('ContainersReady', true, readyAt),
          cond('PodScheduled', true, p.createdAt),
        ]
      : [
          cond('PodReadyToStartContainers', false, p.startTime),
          cond('Initialized', true, p.startTime),
          { ...cond('Ready', false, p.startTime, 'ContainersNotReady'), message: `containers with unready status: [${((spec['containers'] as Obj[])[0] as Obj)['name'] as string}]` },
          { ...cond('ContainersReady', false, p.startTime, 'ContainersNotReady'), message: `containers with unready status: [${((spec['containers'] as Obj[])[0] as Obj)['name'] as string}]` },
          cond('PodScheduled', true, p.createdAt),
        ],
    containerStatuses: (spec['containers'] as Obj[]).map((c) => containerStatus(c, false)),
    hostIP: p.node.ip,
    hostIPs: [{ ip: p.node.ip }],
    phase: p.phase,
    qosClass: qosClass(spec),
    startTime: rfc3339(p.startTime),
  };
  if (Array.isArray(spec['initContainers'])) status['initContainerStatuses'] = (spec['initContainers'] as Obj[]).map((c) => containerStatus(c, true));
  if (started) {
    status['podIP'] = p.ip;
    status['podIPs'] = [{ ip: p.ip }];
  }
  return { apiVersion: 'v1', kind: 'Pod', metadata, spec, status };
}

function qosClass(spec: Obj): string {
  const containers = spec['containers'] as Obj[];
  const res = containers.map((c) => (c['resources'] ?? {}) as { requests?: Obj; limits?: Obj });
  if (res.every((x) => !x.requests && !x.limits)) return 'BestEffort';
  const guaranteed = res.every(
    (x) => x.limits && x.requests && x.limits['cpu'] !== undefined && x.limits['memory'] !== undefined && x.limits['cpu'] === x.requests['cpu'] && x.limits['memory'] === x.requests['memory'],
  );
  return guaranteed ? 'Guaranteed' : 'Burstable';
}

function workloadObject(w: WorkloadModel, model: ClusterModel, r: Rng): Obj {
  const metadata: Obj = {
    annotations: clone(w.annotations),
    creationTimestamp: rfc3339(w.createdAt),
    generation: w.generation,
    labels: clone(w.labels),
    name: w.name,
    namespace: w.namespace,
    resourceVersion: resourceVersion(r),
    uid: w.uid,
  };
  const livePods = model.pods.filter((p) => p.owner === w && p.deletedAt === undefined);
  const ready = livePods.filter((p) => p.phase === 'Running').length;
  switch (w.kind) {
    case 'DaemonSet': {
      const n = model.nodes.length;
      return {
        apiVersion: 'apps/v1',
        kind: 'DaemonSet',
        metadata,
        spec: {
          revisionHistoryLimit: 10,
          selector: selectorOf(w),
          template: templateObj(w),
          updateStrategy: { rollingUpdate: { maxSurge: 0, maxUnavailable: w.name === 'aws-node' ? '10%' : 1 }, type: 'RollingUpdate' },
        },
        status: {
          currentNumberScheduled: n,
          desiredNumberScheduled: n,
          numberAvailable: ready,
          numberMisscheduled: 0,
          numberReady: ready,
          observedGeneration: w.generation,
          updatedNumberScheduled: n,
        },
      };
    }
    case 'Deployment': {
      const rss = model.workloads.filter((x) => x.kind === 'ReplicaSet' && x.owner === w);
      const allPods = model.pods.filter((p) => p.deletedAt === undefined && rss.includes(p.owner));
      const readyAll = allPods.filter((p) => p.phase === 'Running').length;
      const newest = rss.reduce((a, b) => (b.createdAt > a.createdAt ? b : a));
      const updated = allPods.filter((p) => p.owner === newest).length;
      const stalled = updated > 0 && allPods.some((p) => p.phase !== 'Running');
      const status: Obj = {
        availableReplicas: readyAll,
        conditions: [
          {
            lastTransitionTime: rfc3339(w.createdAt + 45 * SECOND),
            lastUpdateTime: rfc3339(w.createdAt + 45 * SECOND),
            message: 'Deployment has minimum availability.',
            reason: 'MinimumReplicasAvailable',
            status: 'True',
            type: 'Available',
          },
          stalled
            ? {
                lastTransitionTime: rfc3339(newest.createdAt + 10 * MINUTE + SECOND),
                lastUpdateTime: rfc3339(newest.createdAt + 10 * MINUTE + SECOND),
                message: `ReplicaSet "${newest.name}" has timed out progressing.`,
                reason: 'ProgressDeadlineExceeded',
                status: 'False',
                type: 'Progressing',
              }
            : {
                lastTransitionTime: rfc3339(newest.createdAt),
                lastUpdateTime: rfc3339(newest.createdAt + 40 * SECOND),
                message: `ReplicaSet "${newest.name}" has successfully progressed.`,
                reason: 'NewReplicaSetAvailable',
                status: 'True',
                type: 'Progressing',
              },
        ],
        observedGeneration: w.generation,
        readyReplicas: readyAll,
        replicas: allPods.length,
        updatedReplicas: updated,
      };
      if (allPods.length > readyAll) status['unavailableReplicas'] = allPods.length - readyAll;
      return {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata,
        spec: {
          progressDeadlineSeconds: 600,
          replicas: w.replicas,
          revisionHistoryLimit: 10,
          selector: selectorOf(w),
          strategy: { rollingUpdate: { maxSurge: '25%', maxUnavailable: '25%' }, type: 'RollingUpdate' },
          template: templateObj(w),
        },
        status,
      };
    }
    case 'ReplicaSet': {
      const dep = w.owner as WorkloadModel;
      metadata['ownerReferences'] = [ownerRef(dep)];
      const status: Obj = { observedGeneration: w.generation, replicas: livePods.length };
      if (livePods.length > 0) {
        status['fullyLabeledReplicas'] = livePods.length;
        if (ready > 0) {
          status['availableReplicas'] = ready;
          status['readyReplicas'] = ready;
        }
      }
      const selector = { matchLabels: { ...(selectorOf(dep)['matchLabels'] as Obj), 'pod-template-hash': w.templateHash } };
      return {
        apiVersion: 'apps/v1',
        kind: 'ReplicaSet',
        metadata,
        spec: { replicas: w.replicas, selector, template: templateObj(w) },
        status,
      };
    }
    case 'StatefulSet':
      return {
        apiVersion: 'apps/v1',
        kind: 'StatefulSet',
        metadata,
        spec: {
          persistentVolumeClaimRetentionPolicy: { whenDeleted: 'Retain', whenScaled: 'Retain' },
          podManagementPolicy: 'OrderedReady',
          replicas: w.replicas,
          revisionHistoryLimit: 10,
          selector: selectorOf(w),
          serviceName: 'redis-headless',
          template: templateObj(w),
          updateStrategy: { rollingUpdate: { partition: 0 }, type: 'RollingUpdate' },
          volumeClaimTemplates: [
            {
              apiVersion: 'v1',
              kind: 'PersistentVolumeClaim',
              metadata: { creationTimestamp: null, labels: { 'app.kubernetes.io/instance': 'redis', 'app.kubernetes.io/name': 'redis' }, name: 'redis-data' },
              spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '8Gi' } }, volumeMode: 'Filesystem' },
              status: { phase: 'Pending' },
            },
          ],
        },
        status: {
          availableReplicas: ready,
          collisionCount: 0,
          currentReplicas: livePods.length,
          currentRevision: w.revisionHash,
          observedGeneration: w.generation,
          readyReplicas: ready,
          replicas: livePods.length,
          updateRevision: w.revisionHash,
          updatedReplicas: livePods.length,
        },
      };
  }
}

function serviceAccountObject(s: SaModel, r: Rng): Obj {
  const metadata: Obj = {
    creationTimestamp: rfc3339(s.createdAt),
    name: s.name,
    namespace: s.namespace,
    resourceVersion: resourceVersion(r),
    uid: s.uid,
  };
  if (s.labels) metadata['labels'] = clone(s.labels);
  if (s.annotations) metadata['annotations'] = clone(s.annotations);
  return { apiVersion: 'v1', kind: 'ServiceAccount', metadata };
}

function secretObjects(model: ClusterModel, r: Rng): Obj[] {
  const deployer = model.ref.sa['ci/deployer'] as SaModel;
  const sec = model.ref.deployerSecret;
  const helmRelease = (ns: string, rel: string, version: number, created: string, status: string): Obj => ({
    apiVersion: 'v1',
    data: { release: Buffer.from(`FAKE-HELM-RELEASE-PAYLOAD-PLACEHOLDER ${rel} v${version}`).toString('base64') },
    kind: 'Secret',
    metadata: {
      creationTimestamp: created,
      labels: { modifiedAt: String(Math.floor(Date.parse(created) / 1000)), name: rel, owner: 'helm', status, version: String(version) },
      name: `sh.helm.release.v1.${rel}.v${version}`,
      namespace: ns,
      resourceVersion: resourceVersion(r),
      uid: r.uuid(),
    },
    type: 'helm.sh/release.v1',
  });
  return [
    {
      apiVersion: 'v1',
      data: { ...FAKE_SECRET_DATA },
      kind: 'Secret',
      metadata: {
        annotations: {
          'kubernetes.io/service-account.name': deployer.name,
          'kubernetes.io/service-account.uid': deployer.uid,
        },
        creationTimestamp: rfc3339(sec.createdAt),
        labels: { 'kubernetes.io/legacy-token-last-used': '2026-11-20' },
        name: sec.name,
        namespace: deployer.namespace,
        resourceVersion: resourceVersion(r),
        uid: sec.uid,
      },
      type: 'kubernetes.io/service-account-token',
    },
    {
      apiVersion: 'v1',
      data: {
        identity: Buffer.from('FAKE-SSH-PRIVATE-KEY-PLACEHOLDER').toString('base64'),
        'identity.pub': Buffer.from('ssh-ed25519 FAKE-PUBLIC-KEY-PLACEHOLDER flux').toString('base64'),
        known_hosts: Buffer.from('github.com ecdsa-sha2-nistp256 FAKE-HOST-KEY-PLACEHOLDER').toString('base64'),
      },
      kind: 'Secret',
      metadata: {
        creationTimestamp: '2026-04-07T08:41:09Z',
        name: 'flux-system',
        namespace: 'flux-system',
        resourceVersion: resourceVersion(r),
        uid: r.uuid(),
      },
      type: 'Opaque',
    },
    helmRelease('logging', 'fluent-bit', 2, '2026-07-15T10:03:12Z', 'superseded'),
    helmRelease('logging', 'fluent-bit', 3, '2026-10-31T15:19:58Z', 'deployed'),
    helmRelease('shop', 'redis', 1, '2026-04-07T09:03:10Z', 'deployed'),
  ];
}

const byNsName = (a: Obj, b: Obj): number => {
  const ma = a['metadata'] as Obj;
  const mb = b['metadata'] as Obj;
  const ka = `${ma['namespace'] as string}/${ma['name'] as string}`;
  const kb = `${mb['namespace'] as string}/${mb['name'] as string}`;
  return ka < kb ? -1 : ka > kb ? 1 : 0;
};

/** The snapshot `v1 List` object (unsorted keys; {@link snapshotJson} prints it). */
export function buildSnapshot(model: ClusterModel, rng: Rng): Obj {
  const r = rng.fork('snapshot');
  const pods = model.pods.filter((p) => p.deletedAt === undefined).map((p) => podObject(p, r)).sort(byNsName);
  const of = (kind: WorkloadModel['kind']): Obj[] =>
    model.workloads.filter((w) => w.kind === kind).map((w) => workloadObject(w, model, r)).sort(byNsName);
  const items = [
    ...pods,
    ...of('DaemonSet'),
    ...of('Deployment'),
    ...of('StatefulSet'),
    ...of('ReplicaSet'),
    ...model.serviceAccounts.map((s) => serviceAccountObject(s, r)).sort(byNsName),
    ...secretObjects(model, r).sort(byNsName),
  ];
  return { apiVersion: 'v1', items, kind: 'List', metadata: { resourceVersion: '' } };
}

/** The snapshot file text. */
export function snapshotJson(model: ClusterModel, rng: Rng): string {
  return kubectlJson(buildSnapshot(model, rng));
}

