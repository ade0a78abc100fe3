import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError } from '../../src/errors.js';
import { loadSnapshot, SnapshotClusterState } from '../../src/cluster/snapshot.js';
import { EXPECTED_MULTUS, FIXTURE } from './fixture.js';

describe('loadSnapshot', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tokenwatch-snapshot-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('describes a ServiceAccount with its DaemonSet pods and legacy Secrets', async () => {
    const state = await loadSnapshot(FIXTURE);
    expect(await state.describeServiceAccount('kube-system', 'multus')).toEqual(EXPECTED_MULTUS);
  });

  it('resolves Deployment, CronJob, StatefulSet and bare-pod workloads', async () => {
    const state = await loadSnapshot(FIXTURE);
    const ms = await state.describeServiceAccount('monitoring', 'metrics-server');
    expect(ms.pods.map((p) => [p.name, p.ownerChain.map((o) => `${o.kind}/${o.name}`)])).toEqual([
      ['metrics-server-6d4cf56db6-h7x2m', ['ReplicaSet/metrics-server-6d4cf56db6', 'Deployment/metrics-server']],
      ['metrics-server-6d4cf56db6-p9r4s', ['ReplicaSet/metrics-server-6d4cf56db6', 'Deployment/metrics-server']],
    ]);
    expect(ms.workloads).toEqual([
      {
        kind: 'Deployment',
        namespace: 'monitoring',
        name: 'metrics-server',
        uid: 'dep-ms-uid',
        updateStrategy: 'RollingUpdate',
        paused: false,
        desired: 2,
        images: ['registry.example.com:5000/metrics/metrics-server@sha256:1111111111111111111111111111111111111111111111111111111111111111'],
        args: ['--kubelet-insecure-tls'],
        serviceAccount: 'metrics-server',
      },
    ]);
    expect(ms.pods[0]?.containers[0]).toMatchObject({ imageRegistry: 'registry.example.com:5000', imageRepository: 'metrics/metrics-server', imageDigest: 'sha256:1111111111111111111111111111111111111111111111111111111111111111' });
    expect(ms.pods[0]?.containers[0]?.imageTag).toBeUndefined();

    const backup = await state.describeServiceAccount('ops', 'backup');
    expect(backup.pods.map((p) => p.ownerChain.map((o) => `${o.kind}/${o.name}`))).toEqual([['Job/backup-29410560', 'CronJob/backup']]);
    expect(backup.pods[0]?.projectedToken).toBe(false);
    expect(backup.serviceAccount?.automountServiceAccountToken).toBe(false);
    expect(backup.workloads.map((w) => [w.kind, w.name, w.images])).toEqual([['CronJob', 'backup', ['busybox:1.36']]]);

    const fluentd = await state.describeServiceAccount('logging', 'fluentd');
    expect(fluentd.workloads.map((w) => [w.kind, w.name, w.updateStrategy, w.desired])).toEqual([
      ['Pod', 'fluentd-debug', undefined, undefined],
      ['StatefulSet', 'fluentd-aggregator', 'OnDelete', 1],
    ]);
    expect(fluentd.pods.map((p) => [p.name, p.phase, p.hostPaths])).toEqual([
      ['fluentd-aggregator-0', 'Running', ['/var/log']],
      ['fluentd-debug', 'Succeeded', []],
    ]);
  });

  it('answers an unknown ServiceAccount with empty, available state', async () => {
    const state = await loadSnapshot(FIXTURE);
    expect(await state.describeServiceAccount('kube-system', 'nobody')).toEqual({ available: true, pods: [], workloads: [], legacySecrets: [] });
  });

  it('getPod returns the pod with its owner chain, or undefined', async () => {
    const state = await loadSnapshot(FIXTURE);
    expect(await state.getPod('kube-system', 'kube-multus-ds-zwh6w')).toEqual(EXPECTED_MULTUS.pods[1]);
    expect(await state.getPod('kube-system', 'gone')).toBeUndefined();
  });

  it('keeps no Secret data in memory', async () => {
    const state = await loadSnapshot(FIXTURE);
    // Every field, Map contents included (JSON.stringify would print Maps as {}).
    const dump = inspect(state, { depth: null, maxArrayLength: null, maxStringLength: null });
    expect(dump).not.toContain('ZXlKaGJHY2lPaUpTVXpJMU5pSXNJbXRwWkNJNklrWkJTMFV0VkU5TFJVNGlmUQ==');
    expect(dump).not.toContain('U0VDT05ELVRPS0VO');
    expect(dump).not.toContain('TOKEN-IN-LAST-APPLIED');
    expect(dump).not.toContain('aHVudGVyMg==');
    expect(dump).toContain('multus-token-4xv9q');
  });

  it('accepts a List of Lists and typed lists (items without kind) with the same answers', async () => {
    const flat = JSON.parse(await readFile(FIXTURE, 'utf8')) as { items: { kind: string }[] };
    const pods = flat.items.filter((i) => i.kind === 'Pod').map(({ kind: _k, ...rest }) => rest);
    const others = flat.items.filter((i) => i.kind !== 'Pod');
    const nested = {
      apiVersion: 'v1',
      kind: 'List',
      items: [
        { apiVersion: 'v1', kind: 'PodList', items: pods },
        { apiVersion: 'v1', kind: 'List', items: others },
      ],
    };
    const file = join(dir, 'nested.json');
    await writeFile(file, JSON.stringify(nested));
    const state = await loadSnapshot(file);
    expect(await state.describeServiceAccount('kube-system', 'multus')).toEqual(EXPECTED_MULTUS);
  });

  it('fromList strips Secret data from the object it is given', () => {
    const list = {
      kind: 'List',
      items: [
        {
          kind: 'Secret',
          type: 'kubernetes.io/service-account-token',
          metadata: { name: 't', namespace: 'n', annotations: { 'kubernetes.io/service-account.name': 'sa' } },
          data: { token: 'c2VjcmV0' },
        },
      ],
    };
    SnapshotClusterState.fromList(list);
    expect(list.items[0]).not.toHaveProperty('data');
  });

  it.each([
    ['bad.json', '{"kind":"List","items":[', /^cluster snapshot .*bad\.json: invalid JSON: /],
    ['pod.json', '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}', /^cluster snapshot .*pod\.json: not a Kubernetes List \(found kind "Pod" without items\); produce it with kubectl get pods,/],
    ['array.json', '[{"kind":"Pod"}]', /not a Kubernetes List \(found a JSON array\)/],
    ['null.json', 'null', /not a Kubernetes List \(found a JSON null\)/],
  ])('%s → InputError naming the file', async (name, content, message) => {
    const file = join(dir, name);
    await writeFile(file, content);
    const err = await loadSnapshot(file).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InputError);
    expect((err as InputError).file).toBe(file);
    expect((err as InputError).message).toMatch(message);
  });

  it('a missing file → InputError naming the file', async () => {
    const file = join(dir, 'does-not-exist.json');
    const err = await loadSnapshot(file).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InputError);
    expect((err as InputError).file).toBe(file);
    expect((err as InputError).message).toMatch(/cannot read: ENOENT/);
  });
});
