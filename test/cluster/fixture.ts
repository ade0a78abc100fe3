/**
 * The shared cluster fixture (`test/fixtures/cluster/snapshot.json`, a `kubectl get … -A -o json` List) and the
 * hand-written state both ClusterStateSource implementations must produce for kube-system/multus.
 */
import { join } from 'node:path';
import type { SubjectState } from '../../src/cluster/types.js';

export const FIXTURE = join(import.meta.dirname, '../fixtures/cluster/snapshot.json');

const MULTUS_IMAGE = '602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/multus-cni:v3.7.2-eksbuild.1';
const multusContainers = [
  {
    name: 'kube-multus',
    image: MULTUS_IMAGE,
    imageRepository: 'eks/multus-cni',
    imageTag: 'v3.7.2-eksbuild.1',
    imageRegistry: '602401143452.dkr.ecr.us-west-2.amazonaws.com',
    command: ['/entrypoint.sh'],
    args: ['--multus-conf-file=auto', '--cni-version=0.3.1'],
    init: false,
  },
  {
    name: 'install-cni',
    image: MULTUS_IMAGE,
    imageRepository: 'eks/multus-cni',
    imageTag: 'v3.7.2-eksbuild.1',
    imageRegistry: '602401143452.dkr.ecr.us-west-2.amazonaws.com',
    command: ['/install_multus'],
    args: ['--type', 'thin'],
    init: true,
  },
];
const multusPod = (name: string, uid: string, node: string, startTime: number) => ({
  namespace: 'kube-system',
  name,
  uid,
  node,
  serviceAccount: 'multus',
  startTime,
  phase: 'Running',
  containers: multusContainers,
  hostPaths: ['/etc/cni/net.d', '/opt/cni/bin'],
  projectedToken: true,
  ownerChain: [{ kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds' }],
  labels: { app: 'multus', 'controller-revision-hash': '5b7c9d' },
  ips: ['10.0.1.10'],
  hostNetwork: true,
});

/** Hand-written expectation for kube-system/multus in the fixture. */
export const EXPECTED_MULTUS: SubjectState = {
  available: true,
  serviceAccount: {
    namespace: 'kube-system',
    name: 'multus',
    uid: 'sa-multus-uid',
    labels: { app: 'multus' },
    annotations: { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/multus' },
    automountServiceAccountToken: true,
    imagePullSecrets: ['ecr-pull'],
    secrets: ['multus-token-4xv9q'],
    createdAt: Date.UTC(2023, 1, 1, 9, 30, 0),
  },
  pods: [
    multusPod('kube-multus-ds-8kq2t', 'pod-8kq2t-uid', 'ip-10-0-2-20.us-west-2.compute.internal', Date.UTC(2026, 7, 2, 11, 30, 0)),
    multusPod('kube-multus-ds-zwh6w', 'pod-zwh6w-uid', 'ip-10-0-1-10.us-west-2.compute.internal', Date.UTC(2026, 7, 1, 10, 0, 0)),
  ],
  workloads: [
    {
      kind: 'DaemonSet',
      namespace: 'kube-system',
      name: 'kube-multus-ds',
      uid: 'ds-multus-uid',
      updateStrategy: 'RollingUpdate',
      desired: 3,
      images: [MULTUS_IMAGE, MULTUS_IMAGE],
      args: ['--multus-conf-file=auto', '--cni-version=0.3.1', '--type', 'thin'],
      serviceAccount: 'multus',
    },
  ],
  legacySecrets: [
    { namespace: 'kube-system', name: 'multus-manual-token', serviceAccount: 'multus', createdAt: Date.UTC(2024, 2, 5, 12, 0, 0) },
    {
      namespace: 'kube-system',
      name: 'multus-token-4xv9q',
      serviceAccount: 'multus',
      lastUsed: '2026-11-20',
      invalidSince: '2026-11-28',
      createdAt: Date.UTC(2023, 1, 1, 9, 30, 5),
    },
  ],
};
