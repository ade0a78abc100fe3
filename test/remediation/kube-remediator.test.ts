import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeKube, type FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import { KubeRemediator, RESTARTED_AT, progressOf, recreatedServiceAccount, restartPatch } from '../../src/remediation/kube-remediator.js';

const NOW = new Date('2026-11-20T12:00:00.123Z');

function daemonSet(name: string, extra: { onDelete?: boolean } = {}) {
  return {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name, namespace: 'kube-system', uid: `uid-${name}`, generation: 3 },
    spec: {
      selector: { matchLabels: { app: name } },
      updateStrategy: { type: extra.onDelete ? 'OnDelete' : 'RollingUpdate' },
      template: { metadata: { labels: { app: name } }, spec: { serviceAccountName: 'multus', containers: [{ name: 'c', image: 'multus-cni:v3.7.2-eksbuild.1' }] } },
    },
    status: { observedGeneration: 3, desiredNumberScheduled: 4, updatedNumberScheduled: 4, numberAvailable: 4, numberReady: 4, currentNumberScheduled: 4 },
  };
}

const pausedDeployment = {
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name: 'helm-controller', namespace: 'flux-system', uid: 'uid-hc', generation: 1 },
  spec: { replicas: 1, paused: true, selector: { matchLabels: { app: 'hc' } }, template: { metadata: { labels: { app: 'hc' } }, spec: { containers: [{ name: 'm', image: 'x' }] } } },
};

const multusSA = {
  apiVersion: 'v1',
  kind: 'ServiceAccount',
  metadata: {
    name: 'multus',
    namespace: 'kube-system',
    uid: 'sa-uid-1',
    labels: { app: 'multus', 'app.kubernetes.io/managed-by': 'eks' },
    annotations: { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/multus' },
  },
  imagePullSecrets: [{ name: 'ecr-pull' }],
  automountServiceAccountToken: true,
  secrets: [{ name: 'multus-token-abcde' }],
};

let kube: FakeKube;
let rem: KubeRemediator;
beforeEach(async () => {
  kube = await startFakeKube({ objects: [daemonSet('kube-multus-ds'), daemonSet('legacy-ds', { onDelete: true }), pausedDeployment, multusSA] });
  rem = new KubeRemediator(kube.kubeConfig());
});
afterEach(async () => kube.close());

describe('rollout restart', () => {
  it('preflight runs a server-side dry run that changes nothing, then restart sends one strategic-merge patch', async () => {
    const target = { kind: 'DaemonSet' as const, namespace: 'kube-system', name: 'kube-multus-ds' };
    const pre = await rem.preflightRestart(target, NOW);
    expect(pre).toMatchObject({ ok: true, uid: 'uid-kube-multus-ds' });
    const dry = kube.requestsMatching({ method: 'PATCH' });
    expect(dry).toHaveLength(1);
    expect(dry[0]!.dryRun).toBe(true);
    const afterDry = kube.store.get('DaemonSet', 'kube-system', 'kube-multus-ds') as any;
    expect(afterDry.spec.template.metadata.annotations?.[RESTARTED_AT]).toBeUndefined();

    const res = await rem.restart(target, NOW);
    const patches = kube.requestsMatching({ method: 'PATCH' });
    expect(patches).toHaveLength(2);
    const real = patches[1]!;
    expect(real.dryRun).toBe(false);
    expect(real.contentType).toBe('application/strategic-merge-patch+json');
    expect(real.query.fieldManager).toBe('tokenwatch');
    expect(real.body).toEqual({ spec: { template: { metadata: { annotations: { [RESTARTED_AT]: '2026-11-20T12:00:00Z' } } } } });
    const obj = kube.store.get('DaemonSet', 'kube-system', 'kube-multus-ds') as any;
    expect(obj.spec.template.metadata.annotations[RESTARTED_AT]).toBe('2026-11-20T12:00:00Z');
    expect(obj.spec.template.metadata.labels).toEqual({ app: 'kube-multus-ds' }); // merge kept the rest of the template
    expect(res.generation).toBe(4);
  });

  it('refuses a paused Deployment and an OnDelete DaemonSet with an explanation, without any write', async () => {
    const paused = await rem.preflightRestart({ kind: 'Deployment', namespace: 'flux-system', name: 'helm-controller' }, NOW);
    expect(paused).toMatchObject({ ok: false, reason: 'paused' });
    expect((paused as { message: string }).message).toContain('rollout resume deployment/helm-controller');
    const onDelete = await rem.preflightRestart({ kind: 'DaemonSet', namespace: 'kube-system', name: 'legacy-ds' }, NOW);
    expect(onDelete).toMatchObject({ ok: false, reason: 'on-delete' });
    expect((onDelete as { message: string }).message).toContain('OnDelete');
    expect(kube.requestsMatching({ method: 'PATCH' })).toHaveLength(0);
  });

  it('reports a forbidden dry run (RBAC) and a missing workload', async () => {
    kube.forbid({ method: 'PATCH', resource: 'daemonsets' });
    const pre = await rem.preflightRestart({ kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds' }, NOW);
    expect(pre).toMatchObject({ ok: false, reason: 'forbidden' });
    expect((pre as { message: string }).message).toMatch(/403 .*patch/);
    const gone = await rem.preflightRestart({ kind: 'DaemonSet', namespace: 'kube-system', name: 'nope' }, NOW);
    expect(gone).toMatchObject({ ok: false, reason: 'not-found' });
  });

  it('waits for the rollout, reporting progress as the DaemonSet status advances', async () => {
    const target = { kind: 'DaemonSet' as const, namespace: 'kube-system', name: 'kube-multus-ds' };
    await rem.restart(target, NOW);
    // the fake bumped generation to 4; the "controller" catches up one pod per read
    let step = 0;
    kube.addReactor((req, store) => {
      if (req.method === 'GET' && req.resource === 'daemonsets' && req.name === 'kube-multus-ds') {
        store.update('DaemonSet', 'kube-system', 'kube-multus-ds', (o: any) => {
          o.status = { ...o.status, observedGeneration: 4, updatedNumberScheduled: Math.min(4, step), numberAvailable: 4 - (step < 4 ? 1 : 0) };
        });
        step++;
      }
      return undefined;
    });
    const seen: number[] = [];
    const final = await rem.waitForRollout(target, { timeoutMs: 5000, intervalMs: 5, onProgress: (p) => void seen.push(p.updated) });
    expect(final.done).toBe(true);
    expect(final.updated).toBe(4);
    expect(seen).toEqual([0, 1, 2, 3, 4]);
  });

  it('times out a rollout that never completes', async () => {
    kube.store.update('DaemonSet', 'kube-system', 'kube-multus-ds', (o: any) => {
      o.status.updatedNumberScheduled = 1;
    });
    const p = await rem.waitForRollout({ kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds' }, { timeoutMs: 50, intervalMs: 10 });
    expect(p).toMatchObject({ done: false, timedOut: true, updated: 1, desired: 4 });
  });
});

describe('recreate ServiceAccount', () => {
  it('preflight dry-runs delete and create (409 on create means allowed) and writes nothing', async () => {
    const pre = await rem.preflightRecreateServiceAccount({ kind: 'ServiceAccount', namespace: 'kube-system', name: 'multus' });
    expect(pre).toMatchObject({ ok: true, uid: 'sa-uid-1' });
    expect((kube.store.get('ServiceAccount', 'kube-system', 'multus') as any).metadata.uid).toBe('sa-uid-1');
    expect(kube.requestsMatching({ method: 'DELETE' })[0]!.dryRun).toBe(true);
  });

  // The executor's steps (src/remediation/executor.ts): read, delete with preconditions, create the recreated body.
  it('deletes with uid/resourceVersion preconditions and recreates preserving the IRSA annotation, labels, pull secrets, automount', async () => {
    const target = { kind: 'ServiceAccount' as const, namespace: 'kube-system', name: 'multus' };
    const before = (await rem.readServiceAccount(target))!;
    await rem.deleteServiceAccount(target, { uid: before.metadata?.uid, resourceVersion: before.metadata?.resourceVersion });
    const created = await rem.createServiceAccount(target.namespace, recreatedServiceAccount(before));
    const del = kube.requestsMatching({ method: 'DELETE' });
    expect(del).toHaveLength(1);
    expect((del[0]!.body as any).preconditions).toEqual({ uid: 'sa-uid-1', resourceVersion: before.metadata?.resourceVersion });
    const after = kube.store.get('ServiceAccount', 'kube-system', 'multus') as any;
    expect(after.metadata.uid).not.toBe('sa-uid-1');
    expect(created.metadata?.uid).toBe(after.metadata.uid);
    expect(after.metadata.annotations['eks.amazonaws.com/role-arn']).toBe('arn:aws:iam::111122223333:role/multus');
    expect(after.metadata.labels).toEqual({ app: 'multus', 'app.kubernetes.io/managed-by': 'eks' });
    expect(after.imagePullSecrets).toEqual([{ name: 'ecr-pull' }]);
    expect(after.automountServiceAccountToken).toBe(true);
    expect(after.secrets).toBeUndefined();
  });

  it('a delete whose uid precondition no longer holds is refused (409): nothing deleted', async () => {
    const target = { kind: 'ServiceAccount' as const, namespace: 'kube-system', name: 'multus' };
    await expect(rem.deleteServiceAccount(target, { uid: 'other-uid' })).rejects.toMatchObject({ status: 409 });
    expect((kube.store.get('ServiceAccount', 'kube-system', 'multus') as any).metadata.uid).toBe('sa-uid-1');
  });
});

describe('events and pure helpers', () => {
  it('records a core/v1 Event on the target', async () => {
    const ok = await rem.recordEvent({ kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds', uid: 'uid-kube-multus-ds' }, { reason: 'TokenwatchRestart', message: 'approved by U2', at: NOW });
    expect(ok).toBe(true);
    const evs = kube.store.list('Event', { namespace: 'kube-system' }) as any[];
    expect(evs).toHaveLength(1);
    expect(evs[0].reason).toBe('TokenwatchRestart');
    expect(evs[0].involvedObject).toMatchObject({ kind: 'DaemonSet', name: 'kube-multus-ds', uid: 'uid-kube-multus-ds' });
  });

  it('recordEvent returns false when events cannot be created', async () => {
    kube.forbid({ resource: 'events' });
    expect(await rem.recordEvent({ kind: 'DaemonSet', namespace: 'kube-system', name: 'x' }, { reason: 'R', message: 'm', at: NOW })).toBe(false);
  });

  it('progressOf reads Deployment status, old replicas keep it unfinished', () => {
    const obj = { metadata: { generation: 2 }, spec: { replicas: 2 }, status: { observedGeneration: 2, replicas: 3, updatedReplicas: 2, readyReplicas: 3, availableReplicas: 3 } };
    expect(progressOf('Deployment', obj).done).toBe(false);
    obj.status.replicas = 2;
    expect(progressOf('Deployment', obj)).toEqual({ desired: 2, updated: 2, ready: 3, available: 3, observed: true, done: true });
    expect(restartPatch(new Date('2026-01-02T03:04:05.678Z'))).toEqual({ spec: { template: { metadata: { annotations: { [RESTARTED_AT]: '2026-01-02T03:04:05Z' } } } } });
  });
});
