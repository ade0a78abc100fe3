/**
 * The Slack harness's fake DaemonSet controller (`progressDaemonSets` in test/slack/harness.ts), which the restart tests
 * rely on: like the real controller it works on the latest generation only, so `observedGeneration` never goes back.
 * Two spec changes while the controller is held (a test that sets a template annotation, then tokenwatch's rollout
 * restart PATCH) used to leave two rollouts that both resumed; when the older one's last step came after the newer
 * one's, the DaemonSet read "not observed" for good and the restart timed out (`test/slack/crash.test.ts` on a busy
 * machine).
 */
import { afterEach, expect, it } from 'vitest';
import { startFakeKube, type FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import { until } from '../support/until.js';
import { progressDaemonSets } from './harness.js';

let kube: FakeKube | undefined;
afterEach(async () => {
  await kube?.close();
  kube = undefined;
});

type Status = { observedGeneration?: number; updatedNumberScheduled?: number; desiredNumberScheduled?: number };

it('a spec change while an older rollout is held supersedes it: every status written observes the latest generation', async () => {
  kube = await startFakeKube({
    objects: [
      {
        apiVersion: 'apps/v1',
        kind: 'DaemonSet',
        metadata: { name: 'ds', namespace: 'kube-system', generation: 1 },
        spec: { template: { metadata: { annotations: {} } } },
        status: { observedGeneration: 1, desiredNumberScheduled: 6, updatedNumberScheduled: 6, numberReady: 6, numberAvailable: 6 },
      },
    ],
  });
  let held = true;
  progressDaemonSets(kube, 5, 2, () => held);
  const observed: number[] = [];
  kube.store.onWrite((e) => {
    if (e.def.kind === 'DaemonSet' && e.type === 'MODIFIED') observed.push((e.object['status'] as Status).observedGeneration ?? 0);
  });
  const bump = (value: string) =>
    kube!.store.update('DaemonSet', 'kube-system', 'ds', (o) => {
      (o['spec'] as { template: { metadata: { annotations: Record<string, string> } } }).template.metadata.annotations['kubectl.kubernetes.io/restartedAt'] = value;
    });
  expect(bump('2026-11-21T09:00:00Z').metadata!['generation']).toBe(2);
  expect(bump('2026-11-20T12:00:00Z').metadata!['generation']).toBe(3);
  observed.length = 0; // the two spec changes themselves
  held = false;
  const done = await until('the rollout of generation 3', () => {
    const s = kube!.store.get('DaemonSet', 'kube-system', 'ds')!['status'] as Status;
    return s.observedGeneration === 3 && s.updatedNumberScheduled === 6 && s;
  });
  expect(done).toMatchObject({ observedGeneration: 3, updatedNumberScheduled: 6, desiredNumberScheduled: 6 });
  // Generation 2's rollout, held as long, stopped: it wrote nothing once released (3 steps of 2 pods for generation 3).
  expect(observed).toEqual([3, 3, 3]);
});
