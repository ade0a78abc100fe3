import { describe, expect, it } from 'vitest';
import {
  assembleSubjectState,
  controllerRef,
  parseImageRef,
  resolveOwnerChain,
  toContainerInfo,
  toLegacySecretInfo,
  toPodInfo,
  toServiceAccountInfo,
  toWorkloadInfo,
  type OwnerLookup,
} from '../../src/cluster/convert.js';
import type { WorkloadRef } from '../../src/cluster/types.js';

const owner = (kind: string, name: string, controller?: boolean) => ({
  apiVersion: kind === 'Job' || kind === 'CronJob' ? 'batch/v1' : 'apps/v1',
  kind,
  name,
  uid: `${name}-uid`,
  ...(controller === undefined ? {} : { controller }),
});

const obj = (kind: string, name: string, owners: object[] = [], extra: object = {}) => ({
  kind,
  metadata: { name, namespace: 'ns1', ...(owners.length ? { ownerReferences: owners } : {}) },
  ...extra,
});

/** A lookup over a fixed set of objects, recording what it was asked. */
function lookupOver(objects: ReturnType<typeof obj>[]): { lookup: OwnerLookup; asked: string[] } {
  const asked: string[] = [];
  const lookup: OwnerLookup = (ref: WorkloadRef) => {
    asked.push(`${ref.kind}/${ref.name}`);
    return objects.find((o) => o.kind === ref.kind && o.metadata.name === ref.name && o.metadata.namespace === ref.namespace);
  };
  return { lookup, asked };
}

describe('parseImageRef', () => {
  it.each([
    [
      '602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/multus-cni:v3.7.2-eksbuild.1',
      { registry: '602401143452.dkr.ecr.us-west-2.amazonaws.com', repository: 'eks/multus-cni', tag: 'v3.7.2-eksbuild.1' },
    ],
    ['nginx', { repository: 'nginx' }],
    ['nginx:1.25', { repository: 'nginx', tag: '1.25' }],
    ['fluent/fluent-bit:1.9.3', { repository: 'fluent/fluent-bit', tag: '1.9.3' }],
    ['docker.io/library/busybox:1.36', { registry: 'docker.io', repository: 'library/busybox', tag: '1.36' }],
    ['localhost:5000/app:v1', { registry: 'localhost:5000', repository: 'app', tag: 'v1' }],
    ['localhost/app', { registry: 'localhost', repository: 'app' }],
    ['myregistry:5000/team/app', { registry: 'myregistry:5000', repository: 'team/app' }],
    [
      'registry.example.com:8443/team/app@sha256:abc123',
      { registry: 'registry.example.com:8443', repository: 'team/app', digest: 'sha256:abc123' },
    ],
    ['quay.io/org/app:v2@sha256:def456', { registry: 'quay.io', repository: 'org/app', tag: 'v2', digest: 'sha256:def456' }],
    ['app@sha256:0f0f', { repository: 'app', digest: 'sha256:0f0f' }],
  ])('%s', (image, expected) => {
    expect(parseImageRef(image)).toEqual(expected);
  });

  it('fills ContainerInfo image fields, leaving imageTag undefined for a digest-only reference', () => {
    expect(toContainerInfo({ name: 'c', image: 'registry.example.com:8443/team/app@sha256:abc' }, true)).toEqual({
      name: 'c',
      image: 'registry.example.com:8443/team/app@sha256:abc',
      imageRepository: 'team/app',
      imageRegistry: 'registry.example.com:8443',
      imageDigest: 'sha256:abc',
      command: [],
      args: [],
      init: true,
    });
  });
});

describe('owner chains', () => {
  const deployment = obj('Deployment', 'web');
  const replicaSet = obj('ReplicaSet', 'web-5d8f', [owner('Deployment', 'web', true)]);
  const cronJob = obj('CronJob', 'nightly');
  const job = obj('Job', 'nightly-2941', [owner('CronJob', 'nightly', true)]);
  const daemonSet = obj('DaemonSet', 'agent');
  const statefulSet = obj('StatefulSet', 'db');
  const all = [deployment, replicaSet, cronJob, job, daemonSet, statefulSet];

  it.each([
    ['ReplicaSet → Deployment', [owner('ReplicaSet', 'web-5d8f', true)], [['ReplicaSet', 'web-5d8f'], ['Deployment', 'web']]],
    ['Job → CronJob', [owner('Job', 'nightly-2941', true)], [['Job', 'nightly-2941'], ['CronJob', 'nightly']]],
    ['DaemonSet', [owner('DaemonSet', 'agent', true)], [['DaemonSet', 'agent']]],
    ['StatefulSet', [owner('StatefulSet', 'db', true)], [['StatefulSet', 'db']]],
    ['bare pod', [], []],
  ])('pod owned via %s', async (_label, owners, expected) => {
    const { lookup } = lookupOver(all);
    const chain = await resolveOwnerChain(obj('Pod', 'p', owners), lookup);
    expect(chain).toEqual(expected.map(([kind, name]) => ({ kind, namespace: 'ns1', name })));
  });

  it('works with an asynchronous lookup', async () => {
    const { lookup } = lookupOver(all);
    const asyncLookup: OwnerLookup = async (ref) => lookup(ref);
    expect(await resolveOwnerChain(obj('Pod', 'p', [owner('ReplicaSet', 'web-5d8f', true)]), asyncLookup)).toEqual([
      { kind: 'ReplicaSet', namespace: 'ns1', name: 'web-5d8f' },
      { kind: 'Deployment', namespace: 'ns1', name: 'web' },
    ]);
  });

  it('follows the controller reference, not the first one', () => {
    const pod = obj('Pod', 'p', [owner('ConfigMap', 'not-a-controller'), owner('DaemonSet', 'agent', true)]);
    expect(controllerRef(pod)).toEqual({ kind: 'DaemonSet', namespace: 'ns1', name: 'agent' });
  });

  it('keeps an owner whose object is gone, and stops there', async () => {
    const { lookup, asked } = lookupOver([]);
    const chain = await resolveOwnerChain(obj('Pod', 'p', [owner('ReplicaSet', 'orphan-rs', true)]), lookup);
    expect(chain).toEqual([{ kind: 'ReplicaSet', namespace: 'ns1', name: 'orphan-rs' }]);
    expect(asked).toEqual(['ReplicaSet/orphan-rs']);
  });

  it('cuts an ownership cycle', async () => {
    const a = obj('ReplicaSet', 'a', [owner('ReplicaSet', 'b', true)]);
    const b = obj('ReplicaSet', 'b', [owner('ReplicaSet', 'a', true)]);
    const { lookup } = lookupOver([a, b]);
    const chain = await resolveOwnerChain(obj('Pod', 'p', [owner('ReplicaSet', 'a', true)]), lookup);
    expect(chain.map((r) => r.name)).toEqual(['a', 'b']);
  });

  it('gives a Node owner (static mirror pod) an empty namespace', () => {
    const pod = obj('Pod', 'kube-proxy-node1', [{ apiVersion: 'v1', kind: 'Node', name: 'node1', uid: 'n', controller: true }]);
    expect(controllerRef(pod)).toEqual({ kind: 'Node', namespace: '', name: 'node1' });
  });
});

describe('toPodInfo', () => {
  const pod = {
    metadata: { name: 'kube-multus-ds-zwh6w', namespace: 'kube-system', uid: 'u-1', labels: { app: 'multus', n: 3 } },
    spec: {
      serviceAccountName: 'multus',
      nodeName: 'node-a',
      containers: [{ name: 'kube-multus', image: 'multus:v3.7', command: ['/entrypoint.sh'], args: ['--a', 7, '--b'] }],
      initContainers: [{ name: 'install', image: 'multus:v3.7' }],
      volumes: [
        { name: 'cni', hostPath: { path: '/etc/cni/net.d' } },
        { name: 'kube-api-access-x', projected: { sources: [{ configMap: { name: 'ca' } }, { serviceAccountToken: { path: 'token' } }] } },
      ],
    },
    status: { phase: 'Running', startTime: '2026-08-01T10:00:00Z' },
  };

  it('reads every field, init containers last and flagged', () => {
    expect(toPodInfo(pod, [{ kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds' }])).toEqual({
      namespace: 'kube-system',
      name: 'kube-multus-ds-zwh6w',
      uid: 'u-1',
      node: 'node-a',
      serviceAccount: 'multus',
      startTime: Date.UTC(2026, 7, 1, 10, 0, 0),
      phase: 'Running',
      containers: [
        { name: 'kube-multus', image: 'multus:v3.7', imageRepository: 'multus', imageTag: 'v3.7', command: ['/entrypoint.sh'], args: ['--a', '--b'], init: false },
        { name: 'install', image: 'multus:v3.7', imageRepository: 'multus', imageTag: 'v3.7', command: [], args: [], init: true },
      ],
      hostPaths: ['/etc/cni/net.d'],
      projectedToken: true,
      ownerChain: [{ kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds' }],
      labels: { app: 'multus' },
    });
  });

  it('accepts client-node models whose timestamps are Date objects', () => {
    const typed = { ...pod, status: { startTime: new Date('2026-08-01T10:00:00Z') } };
    expect(toPodInfo(typed).startTime).toBe(Date.UTC(2026, 7, 1, 10, 0, 0));
  });

  it('sees no projected token when only a Secret volume holds the token, and defaults the ServiceAccount', () => {
    const info = toPodInfo({ metadata: { name: 'p', namespace: 'n' }, spec: { volumes: [{ name: 't', secret: { secretName: 'x-token' } }] } });
    expect(info.projectedToken).toBe(false);
    expect(info.serviceAccount).toBe('default');
    expect(info.ownerChain).toEqual([]);
    expect(info.startTime).toBeUndefined();
  });
});

describe('toWorkloadInfo', () => {
  const template = {
    spec: {
      serviceAccountName: 'sa1',
      containers: [{ name: 'a', image: 'img/a:1', args: ['--x'] }],
      initContainers: [{ name: 'i', image: 'img/i:2', args: ['--y'] }],
    },
  };

  it('DaemonSet: update strategy and desired from status', () => {
    const ds = { kind: 'DaemonSet', metadata: { name: 'ds', namespace: 'n', uid: 'u' }, spec: { updateStrategy: { type: 'OnDelete' }, template }, status: { desiredNumberScheduled: 4 } };
    expect(toWorkloadInfo(ds)).toEqual({
      kind: 'DaemonSet',
      namespace: 'n',
      name: 'ds',
      uid: 'u',
      updateStrategy: 'OnDelete',
      desired: 4,
      images: ['img/a:1', 'img/i:2'],
      args: ['--x', '--y'],
      serviceAccount: 'sa1',
    });
  });

  it('Deployment: strategy, paused, replicas', () => {
    const d = { metadata: { name: 'd', namespace: 'n' }, spec: { replicas: 3, paused: true, strategy: { type: 'Recreate' }, template } };
    expect(toWorkloadInfo(d, 'Deployment')).toMatchObject({ kind: 'Deployment', updateStrategy: 'Recreate', paused: true, desired: 3 });
  });

  it('CronJob: images of the job template', () => {
    const cj = { kind: 'CronJob', metadata: { name: 'c', namespace: 'n' }, spec: { jobTemplate: { spec: { template } } } };
    expect(toWorkloadInfo(cj)).toEqual({ kind: 'CronJob', namespace: 'n', name: 'c', images: ['img/a:1', 'img/i:2'], args: ['--x', '--y'], serviceAccount: 'sa1' });
  });

  it('bare Pod: its own containers', () => {
    const p = { metadata: { name: 'p', namespace: 'n' }, spec: template.spec };
    expect(toWorkloadInfo(p, 'Pod')).toEqual({ kind: 'Pod', namespace: 'n', name: 'p', images: ['img/a:1', 'img/i:2'], args: ['--x', '--y'], serviceAccount: 'sa1' });
  });
});

describe('ServiceAccount and legacy Secret', () => {
  it('toServiceAccountInfo', () => {
    const sa = {
      metadata: {
        name: 'multus',
        namespace: 'kube-system',
        uid: 'sa-u',
        creationTimestamp: '2023-02-01T09:30:00Z',
        labels: { a: 'b' },
        annotations: { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::1:role/r' },
      },
      automountServiceAccountToken: false,
      imagePullSecrets: [{ name: 'pull' }],
      secrets: [{ name: 'multus-token-x' }, {}],
    };
    expect(toServiceAccountInfo(sa)).toEqual({
      namespace: 'kube-system',
      name: 'multus',
      uid: 'sa-u',
      labels: { a: 'b' },
      annotations: { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::1:role/r' },
      automountServiceAccountToken: false,
      imagePullSecrets: ['pull'],
      secrets: ['multus-token-x'],
      createdAt: Date.UTC(2023, 1, 1, 9, 30, 0),
    });
  });

  const secret = (type: string | undefined, annotations: Record<string, string>, labels: Record<string, string> = {}) => ({
    ...(type ? { type } : {}),
    metadata: { name: 's', namespace: 'kube-system', annotations, labels, creationTimestamp: '2024-03-05T12:00:00Z' },
    data: { token: 'c2VjcmV0' },
  });

  it('reads the legacy-token labels', () => {
    const s = secret(
      'kubernetes.io/service-account-token',
      { 'kubernetes.io/service-account.name': 'multus' },
      { 'kubernetes.io/legacy-token-last-used': '2026-11-20', 'kubernetes.io/legacy-token-invalid-since': '2026-11-28' },
    );
    expect(toLegacySecretInfo(s)).toEqual({
      namespace: 'kube-system',
      name: 's',
      serviceAccount: 'multus',
      lastUsed: '2026-11-20',
      invalidSince: '2026-11-28',
      createdAt: Date.UTC(2024, 2, 5, 12, 0, 0),
    });
  });

  it('accepts a metadata-only Secret (no type) but rejects other types and unannotated ones', () => {
    expect(toLegacySecretInfo(secret(undefined, { 'kubernetes.io/service-account.name': 'x' }))?.serviceAccount).toBe('x');
    expect(toLegacySecretInfo(secret('Opaque', { 'kubernetes.io/service-account.name': 'x' }))).toBeUndefined();
    expect(toLegacySecretInfo(secret('kubernetes.io/service-account-token', {}))).toBeUndefined();
  });
});

describe('assembleSubjectState', () => {
  it('deduplicates workloads, makes a bare pod its own workload, keeps only this SA’s Secrets', async () => {
    const ds = { kind: 'DaemonSet', metadata: { name: 'agent', namespace: 'ns1' }, spec: { template: { spec: { containers: [{ name: 'a', image: 'a:1' }] } } } };
    const podOf = (name: string, owners: object[]) => ({ metadata: { name, namespace: 'ns1', ...(owners.length ? { ownerReferences: owners } : {}) }, spec: { serviceAccountName: 'sa' } });
    const { lookup } = lookupOver([ds as never]);
    const state = await assembleSubjectState(
      'ns1',
      'sa',
      {
        pods: [podOf('agent-b', [owner('DaemonSet', 'agent', true)]), podOf('agent-a', [owner('DaemonSet', 'agent', true)]), podOf('debug', [])],
        legacySecrets: [
          { namespace: 'ns1', name: 'z-token', serviceAccount: 'sa' },
          { namespace: 'ns1', name: 'other-token', serviceAccount: 'other' },
          { namespace: 'ns1', name: 'a-token', serviceAccount: 'sa' },
        ],
      },
      lookup,
    );
    expect(state.available).toBe(true);
    expect(state.serviceAccount).toBeUndefined();
    expect(state.pods.map((p) => p.name)).toEqual(['agent-a', 'agent-b', 'debug']);
    expect(state.workloads.map((w) => `${w.kind}/${w.name}:${w.images.join(',')}`)).toEqual(['DaemonSet/agent:a:1', 'Pod/debug:']);
    expect(state.legacySecrets.map((s) => s.name)).toEqual(['a-token', 'z-token']);
  });

  it('lists an unreadable top owner by reference only', async () => {
    const pod = { metadata: { name: 'p', namespace: 'ns1', ownerReferences: [{ kind: 'Rollout', name: 'canary', controller: true }] }, spec: {} };
    const state = await assembleSubjectState('ns1', 'default', { pods: [pod], legacySecrets: [] }, () => undefined);
    expect(state.workloads).toEqual([{ kind: 'Rollout', namespace: 'ns1', name: 'canary', images: [], args: [] }]);
  });
});
