import { afterEach, describe, expect, it } from 'vitest';
import { startFakeKube, type FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import type { KubeObject } from '../../src/sandbox/fakes/kubernetes/types.js';
import { KubeRemediator, RESTARTED_AT, type RolloutProgress } from '../../src/remediation/kube-remediator.js';
import { seedObjects } from '../../src/sandbox/cluster.js';
import { ROLLOUT_ANNOTATION, WorkloadController } from '../../src/sandbox/controller.js';
import { loadBundle } from '../../src/sandbox/replay.js';

const bundle = loadBundle(new URL('../../examples/', import.meta.url).pathname);
const SIM_NOW = Date.parse('2026-11-20T12:34:56Z');
const NAME_SUFFIX = /^[bcdfghjklmnpqrstvwxz2456789]{5}$/;

let kube: FakeKube | undefined;
let controller: WorkloadController | undefined;
afterEach(async () => {
  controller?.stop();
  controller = undefined;
  await kube?.close();
  kube = undefined;
});

async function setup(mutate: (items: Record<string, unknown>[]) => void = () => undefined, stepMs = 20) {
  const items = structuredClone(seedObjects(bundle.snapshotItems));
  mutate(items);
  kube = await startFakeKube({ objects: items });
  controller = new WorkloadController({ store: kube.store, clock: () => SIM_NOW, stepMs });
  controller.start();
  return { kube, controller, rem: new KubeRemediator(kube.kubeConfig()) };
}

type Pod = KubeObject & { metadata: { name: string; uid: string; creationTimestamp: string; labels: Record<string, string>; ownerReferences: Array<{ kind: string; name: string }> }; spec: { nodeName: string }; status: { startTime: string; phase: string } };

function podsOwnedBy(k: FakeKube, namespace: string, kind: string, prefix: string): Pod[] {
  return (k.store.list('Pod', { namespace }) as Pod[]).filter((p) => p.metadata.ownerReferences?.some((o) => o.kind === kind && o.name.startsWith(prefix)));
}

/** Polls rollout progress through the API (as tokenwatch does) until done; returns every distinct state seen. */
async function follow(rem: KubeRemediator, target: { kind: 'DaemonSet' | 'Deployment' | 'StatefulSet'; namespace: string; name: string }): Promise<RolloutProgress[]> {
  const seen: RolloutProgress[] = [];
  const deadline = Date.now() + 10_000;
  for (;;) {
    const p = await rem.rolloutProgress(target);
    if (JSON.stringify(seen.at(-1)) !== JSON.stringify(p)) seen.push(p);
    if (p.done || Date.now() > deadline) return seen;
    await new Promise((r) => setTimeout(r, 3));
  }
}

describe('workload controller simulation', () => {
  it('a rollout restart of the Multus DaemonSet replaces its 6 pods one by one on the same nodes, and the status progresses to complete', async () => {
    const { kube, controller, rem } = await setup();
    const before = podsOwnedBy(kube, 'kube-system', 'DaemonSet', 'kube-multus-ds');
    expect(before).toHaveLength(6);
    const target = { kind: 'DaemonSet' as const, namespace: 'kube-system', name: 'kube-multus-ds' };
    await rem.restart(target, new Date(SIM_NOW));
    const seen = await follow(rem, target);
    await controller.idle();

    const last = seen.at(-1)!;
    expect(last).toEqual({ desired: 6, updated: 6, ready: 6, available: 6, observed: true, done: true });
    // Progress went through intermediate states with fewer updated pods.
    const updatedCounts = [...new Set(seen.map((p) => p.updated))];
    expect(updatedCounts.length).toBeGreaterThanOrEqual(3);
    expect(updatedCounts).toEqual([...updatedCounts].sort((a, b) => a - b));
    expect(seen.some((p) => p.available < 6)).toBe(true);

    const after = podsOwnedBy(kube, 'kube-system', 'DaemonSet', 'kube-multus-ds');
    expect(after).toHaveLength(6);
    const oldNames = new Set(before.map((p) => p.metadata.name));
    const oldUids = new Set(before.map((p) => p.metadata.uid));
    for (const p of after) {
      expect(oldNames.has(p.metadata.name)).toBe(false);
      expect(oldUids.has(p.metadata.uid)).toBe(false);
      expect(p.metadata.name.slice('kube-multus-ds-'.length)).toMatch(NAME_SUFFIX);
      expect(p.metadata.creationTimestamp).toBe('2026-11-20T12:34:56Z');
      expect(p.status.startTime).toBe('2026-11-20T12:34:56Z');
      expect(p.status.phase).toBe('Running');
      expect(p.metadata.labels['pod-template-generation']).toBe('2');
    }
    expect(new Set(after.map((p) => p.metadata.labels['controller-revision-hash'])).size).toBe(1);
    expect(after.map((p) => p.spec.nodeName).sort()).toEqual(before.map((p) => p.spec.nodeName).sort());
    const ds = kube.store.get('DaemonSet', 'kube-system', 'kube-multus-ds') as { metadata: { generation: number; annotations?: Record<string, string> }; spec: { template: { metadata: { annotations: Record<string, string> } } }; status: Record<string, number> };
    expect(ds.metadata.generation).toBe(2);
    expect(ds.status.observedGeneration).toBe(2);
    expect(ds.metadata.annotations?.[ROLLOUT_ANNOTATION]).toBeUndefined();
    // The new pods carry the template's restartedAt annotation.
    expect(after[0]!.metadata as Record<string, unknown>).toMatchObject({ annotations: { [RESTARTED_AT]: ds.spec.template.metadata.annotations[RESTARTED_AT] } });
    // Exactly one PATCH reached the API server.
    expect(kube.requestsMatching({ method: 'PATCH' })).toHaveLength(1);
  });

  it('a Deployment rolls through a new ReplicaSet; the old one is scaled to 0', async () => {
    const { kube, controller, rem } = await setup();
    const target = { kind: 'Deployment' as const, namespace: 'flux-system', name: 'helm-controller' };
    const before = podsOwnedBy(kube, 'flux-system', 'ReplicaSet', 'helm-controller-');
    expect(before.map((p) => p.metadata.name)).toEqual(['helm-controller-zzvh4jwxc-v78tn']);
    await rem.restart(target, new Date(SIM_NOW));
    const seen = await follow(rem, target);
    await controller.idle();
    expect(seen.at(-1)).toEqual({ desired: 1, updated: 1, ready: 1, available: 1, observed: true, done: true });
    const after = podsOwnedBy(kube, 'flux-system', 'ReplicaSet', 'helm-controller-');
    expect(after).toHaveLength(1);
    const rsName = after[0]!.metadata.ownerReferences[0]!.name;
    expect(rsName).not.toBe('helm-controller-zzvh4jwxc');
    expect(after[0]!.metadata.name.startsWith(`${rsName}-`)).toBe(true);
    expect(after[0]!.metadata.name.slice(rsName.length + 1)).toMatch(NAME_SUFFIX);
    const oldRs = kube.store.get('ReplicaSet', 'flux-system', 'helm-controller-zzvh4jwxc') as { spec: { replicas: number }; status: { replicas: number } };
    expect(oldRs.spec.replicas).toBe(0);
    expect(oldRs.status.replicas).toBe(0);
    const newRs = kube.store.get('ReplicaSet', 'flux-system', rsName) as { metadata: { ownerReferences: Array<{ name: string }>; annotations: Record<string, string> }; spec: { replicas: number } };
    expect(newRs.metadata.ownerReferences[0]!.name).toBe('helm-controller');
    expect(newRs.spec.replicas).toBe(1);
    expect(newRs.metadata.annotations['deployment.kubernetes.io/revision']).toBe('3');
  });

  it('an OnDelete DaemonSet only records the observed generation; its pods stay', async () => {
    const { kube, controller } = await setup((items) => {
      const ds = items.find((i) => i.kind === 'DaemonSet' && (i.metadata as { name: string }).name === 'kube-proxy') as { spec: { updateStrategy: unknown } };
      ds.spec.updateStrategy = { type: 'OnDelete' };
    });
    const before = podsOwnedBy(kube, 'kube-system', 'DaemonSet', 'kube-proxy').map((p) => p.metadata.uid).sort();
    kube.store.update('DaemonSet', 'kube-system', 'kube-proxy', (o) => {
      ((o.spec as { template: { metadata: { annotations?: Record<string, string> } } }).template.metadata.annotations ??= {})[RESTARTED_AT] = 'now';
    });
    await new Promise((r) => setTimeout(r, 100));
    await controller.idle();
    expect(podsOwnedBy(kube, 'kube-system', 'DaemonSet', 'kube-proxy').map((p) => p.metadata.uid).sort()).toEqual(before);
    const ds = kube.store.get('DaemonSet', 'kube-system', 'kube-proxy') as { metadata: { generation: number }; status: { observedGeneration: number } };
    expect(ds.status.observedGeneration).toBe(ds.metadata.generation);
  });

  it('a rollout interrupted by a stop is resumed by the next controller', async () => {
    const { kube, controller, rem } = await setup(undefined, 200);
    const target = { kind: 'DaemonSet' as const, namespace: 'kube-system', name: 'kube-multus-ds' };
    await rem.restart(target, new Date(SIM_NOW));
    await new Promise((r) => setTimeout(r, 250));
    controller.stop();
    const mid = await rem.rolloutProgress(target);
    expect(mid.done).toBe(false);
    expect((kube.store.get('DaemonSet', 'kube-system', 'kube-multus-ds')!.metadata as { annotations: Record<string, string> }).annotations[ROLLOUT_ANNOTATION]).toBeDefined();
    const nodes = (kube.store.list('Pod', { namespace: 'kube-system' }) as Pod[]).length;
    expect(nodes).toBeGreaterThan(0);
    const next = new WorkloadController({ store: kube.store, clock: () => SIM_NOW, stepMs: 10 });
    next.start();
    try {
      await next.idle();
      expect(await rem.rolloutProgress(target)).toMatchObject({ updated: 6, available: 6, done: true });
      const after = podsOwnedBy(kube, 'kube-system', 'DaemonSet', 'kube-multus-ds');
      expect(new Set(after.map((p) => p.spec.nodeName)).size).toBe(6);
    } finally {
      next.stop();
    }
  });
});
