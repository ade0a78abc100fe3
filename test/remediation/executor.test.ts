import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeKube, type FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import { approvalEvent } from '../../src/approvals/index.js';
import { definePolicy } from '../approvals/helpers.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { commitEvent, executeApproval, type ExecutorDeps } from '../../src/remediation/executor.js';
import { KubeRemediator, RESTARTED_AT, type RolloutProgress } from '../../src/remediation/kube-remediator.js';
import { refusalText } from '../../src/slack/blocks/refusal.js';
import { openStore, type Store } from '../../src/store/index.js';
import { approval, finding } from '../store/helpers.js';

const T = Date.UTC(2026, 10, 20, 12, 0, 0);

function daemonSet(updated = 4) {
  return {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name: 'kube-multus-ds', namespace: 'kube-system', uid: 'uid-ds', generation: 3 },
    spec: { selector: { matchLabels: { app: 'm' } }, updateStrategy: { type: 'RollingUpdate' }, template: { metadata: { labels: { app: 'm' } }, spec: { containers: [{ name: 'c', image: 'multus' }] } } },
    status: { observedGeneration: 3, desiredNumberScheduled: 4, updatedNumberScheduled: updated, numberAvailable: 4, numberReady: 4 },
  };
}

let kube: FakeKube;
let store: Store;
let now: number;
let metrics: Metrics;
const approvers = Array.from({ length: 10 }, (_, i) => `U0APP${String(i).padStart(5, '0')}`);
const policy = definePolicy({ approvers });

function deps(over: Partial<ExecutorDeps> = {}): ExecutorDeps {
  const rem = new KubeRemediator(kube.kubeConfig());
  return {
    store,
    remediatorFor: () => rem,
    policyFor: () => policy,
    clock: () => now,
    rolloutTimeoutMs: 60_000,
    pollIntervalMs: 5,
    logger: createLogger({ level: 'silent' }),
    metrics,
    ...over,
  };
}

beforeEach(async () => {
  kube = await startFakeKube({ objects: [daemonSet()] });
  store = await openStore(':memory:');
  await store.findings.save('prod', [finding()], T);
  await store.approvals.create(approval({ createdAt: T, expiresAt: T + 1_800_000, updatedAt: T }));
  now = T + 60_000;
  metrics = new Metrics();
});
afterEach(async () => {
  await store.close();
  await kube.close();
});

/** The fake DaemonSet controller: after the restart patch, one more pod updated per status read. */
function progressOnReads(): void {
  let step = 0;
  kube.addReactor((req, s) => {
    if (req.method === 'GET' && req.resource === 'daemonsets') {
      const gen = (s.get('DaemonSet', 'kube-system', 'kube-multus-ds')!.metadata!['generation'] as number) ?? 3;
      if (gen > 3) {
        s.update('DaemonSet', 'kube-system', 'kube-multus-ds', (o) => {
          o['status'] = { observedGeneration: gen, desiredNumberScheduled: 4, updatedNumberScheduled: Math.min(4, step), numberAvailable: 4, numberReady: 4 };
        });
        step++;
      }
    }
    return undefined;
  });
}

describe('commitEvent', () => {
  it('of ten concurrent approvals by ten approvers exactly one commits; the others are refused as already decided', async () => {
    const results = await Promise.all(approvers.map((u) => commitEvent(deps(), 'appr-1', approvalEvent.approve(u))));
    const won = results.filter((r) => r.ok);
    expect(won).toHaveLength(1);
    expect(results.filter((r) => !r.ok).map((r) => (r.ok ? '' : r.refusal.reason))).toEqual(Array(9).fill('already-decided'));
    expect((await store.approvals.get('appr-1'))!.state).toBe('approved');
    expect((await store.approvals.get('appr-1'))!.votes).toHaveLength(1);
    expect((await store.actions.ofApproval('appr-1')).map((r) => r.action)).toEqual(['restart.approved']);
    expect(kube.requestsMatching({ method: 'POST', resource: 'events' }).map((r) => (r.body as { reason: string }).reason)).toEqual(['TokenwatchRestart']);
  });

  it('refuses an unknown approval id', async () => {
    const r = await commitEvent(deps(), 'nope', approvalEvent.approve(approvers[0]!));
    expect(r).toMatchObject({ ok: false, refusal: { reason: 'invalid-transition', detail: { type: 'approval-missing' } } });
    expect(!r.ok && refusalText(r.refusal)).toBe('This approval request no longer exists.');
  });
});

describe('executeApproval', () => {
  it('runs once when started twice at the same time: one PATCH, progress reported from 0, succeeded', async () => {
    progressOnReads();
    await commitEvent(deps(), 'appr-1', approvalEvent.approve(approvers[0]!));
    const seen: RolloutProgress[] = [];
    const d = deps({ hooks: { onProgress: async (_a, p) => void seen.push(p) } });
    const [a, b] = await Promise.all([executeApproval(d, 'appr-1'), executeApproval(d, 'appr-1')]);
    expect([a?.state, b?.state].sort()).toEqual(['succeeded', undefined].sort());
    expect(kube.requestsMatching({ method: 'PATCH' })).toHaveLength(1);
    expect(seen.map((p) => p.updated)).toEqual([0, 1, 2, 3, 4]);
    expect(seen.at(-1)!.done).toBe(true);
    expect((await store.actions.ofApproval('appr-1')).map((r) => r.action)).toEqual(['restart.approved', 'restart.running', 'restart.succeeded']);
    expect(await metrics.text()).toContain('tokenwatch_remediations_total{cluster="prod",action="restart",outcome="succeeded"} 1');
    expect(await metrics.text()).toContain('tokenwatch_approvals_total{cluster="prod",outcome="succeeded"} 1');
  });

  it('fails with a clear error when the rollout does not complete within the timeout', async () => {
    await commitEvent(deps(), 'appr-1', approvalEvent.approve(approvers[0]!));
    let t = now;
    const d = deps({ clock: () => (t += 1000), rolloutTimeoutMs: 5000 });
    const a = await executeApproval(d, 'appr-1');
    expect(a!.state).toBe('failed');
    expect(a!.error).toBe('the rollout did not complete within 5 s (0 of 4 pods updated, 4 ready)');
    const events = kube.requestsMatching({ method: 'POST', resource: 'events' }).map((r) => (r.body as { type: string }).type);
    expect(events.at(-1)).toBe('Warning');
    expect(await metrics.text()).toContain('tokenwatch_remediations_total{cluster="prod",action="restart",outcome="failed"} 1');
  });

  it('a rejected PATCH ends in failed with the API server message', async () => {
    await commitEvent(deps(), 'appr-1', approvalEvent.approve(approvers[0]!));
    kube.failNext({ method: 'PATCH' }, { code: 422, message: 'admission webhook "policy" denied the request' });
    const a = await executeApproval(deps(), 'appr-1');
    expect(a!.state).toBe('failed');
    expect(a!.error).toBe('rollout restart of DaemonSet kube-system/kube-multus-ds: 422 admission webhook "policy" denied the request');
  });

  it('without Kubernetes access the approved action fails instead of hanging', async () => {
    await commitEvent(deps(), 'appr-1', approvalEvent.approve(approvers[0]!));
    const a = await executeApproval(deps({ remediatorFor: () => undefined }), 'appr-1');
    expect(a).toMatchObject({ state: 'failed', error: 'no Kubernetes access to cluster prod' });
  });

  it('on shutdown a followed rollout stays running; resume follows it without patching again', async () => {
    await commitEvent(deps(), 'appr-1', approvalEvent.approve(approvers[0]!));
    const abort = new AbortController();
    const first = await executeApproval(
      deps({
        signal: abort.signal,
        hooks: {
          onProgress: async () => abort.abort(),
        },
      }),
      'appr-1',
    );
    expect(first!.state).toBe('running');
    expect(kube.requestsMatching({ method: 'PATCH' })).toHaveLength(1);
    progressOnReads();
    const resumed = await executeApproval(deps(), 'appr-1', { resume: true });
    expect(resumed!.state).toBe('succeeded');
    expect(kube.requestsMatching({ method: 'PATCH' })).toHaveLength(1);
    // Resume of an approval that is not running does nothing.
    expect(await executeApproval(deps(), 'appr-1', { resume: true })).toBeUndefined();
  });

});

/** The pod template's restartedAt annotation of the fake's DaemonSet. */
const templateRestartedAt = (): string | undefined =>
  (kube.store.get('DaemonSet', 'kube-system', 'kube-multus-ds')!['spec'] as { template: { metadata: { annotations?: Record<string, string> } } }).template.metadata.annotations?.[RESTARTED_AT];

/** Approves and stores the start of appr-1 (as executeApproval does before its PATCH), without sending anything. */
async function startedWithoutPatch(dryRunUid?: string): Promise<number> {
  if (dryRunUid) {
    await store.close();
    store = await openStore(':memory:');
    await store.findings.save('prod', [finding()], T);
    await store.approvals.create(approval({ createdAt: T, expiresAt: T + 1_800_000, updatedAt: T, dryRun: { ok: true, message: 'dry run ok', at: T, uid: dryRunUid } as never }));
  }
  await commitEvent(deps(), 'appr-1', approvalEvent.approve(approvers[0]!));
  const startedAt = Math.floor(now / 1000) * 1000;
  const started = await commitEvent(deps(), 'appr-1', { type: 'start' }, { startedAt });
  expect(started.ok && started.approval.state).toBe('running');
  return startedAt;
}

describe('resume proves its own PATCH by the exact restartedAt value it sends', () => {
  it('a later restartedAt already on the pod template (fast clock, someone with edit rights) proves nothing: the PATCH is sent', async () => {
    progressOnReads();
    const startedAt = await startedWithoutPatch();
    const later = '2026-11-21T08:00:00Z';
    expect(Date.parse(later)).toBeGreaterThan(startedAt);
    kube.store.update('DaemonSet', 'kube-system', 'kube-multus-ds', (o) => {
      (o['spec'] as { template: { metadata: Record<string, unknown> } }).template.metadata['annotations'] = { [RESTARTED_AT]: later };
    });
    const generation = kube.store.get('DaemonSet', 'kube-system', 'kube-multus-ds')!.metadata!['generation'] as number;
    const a = await executeApproval(deps(), 'appr-1', { resume: true });
    expect(a!.state).toBe('succeeded');
    const patches = kube.requestsMatching({ method: 'PATCH' }).filter((r) => !r.dryRun);
    expect(patches).toHaveLength(1);
    expect(templateRestartedAt()).toBe(new Date(startedAt).toISOString().replace('.000Z', 'Z'));
    expect(kube.store.get('DaemonSet', 'kube-system', 'kube-multus-ds')!.metadata!['generation']).toBe(generation + 1);
  });

  it('the exact value this approval sends, on the same object, proves the PATCH: not sent again', async () => {
    progressOnReads();
    const startedAt = await startedWithoutPatch('uid-ds');
    kube.store.update('DaemonSet', 'kube-system', 'kube-multus-ds', (o) => {
      (o['spec'] as { template: { metadata: Record<string, unknown> } }).template.metadata['annotations'] = { [RESTARTED_AT]: new Date(startedAt).toISOString().replace('.000Z', 'Z') };
      (o.metadata as Record<string, unknown>)['generation'] = 4;
    });
    const a = await executeApproval(deps(), 'appr-1', { resume: true });
    expect(a!.state).toBe('succeeded');
    expect(kube.requestsMatching({ method: 'PATCH' })).toHaveLength(0);
  });
});

describe('uid precondition on the restart PATCH', () => {
  it('a DaemonSet deleted and recreated under the same name since the approval is not patched: "replaced since it was approved"', async () => {
    await startedWithoutPatch('uid-ds');
    // Replaced between the dry run and the execution: same name, new uid, another image.
    kube.store.delete('DaemonSet', 'kube-system', 'kube-multus-ds');
    const replacement = daemonSet();
    replacement.metadata.uid = 'uid-replacement';
    replacement.spec.template.spec.containers[0]!.image = 'attacker/multus';
    kube.store.put(replacement);
    const before = structuredClone(kube.store.get('DaemonSet', 'kube-system', 'kube-multus-ds'));
    const a = await executeApproval(deps(), 'appr-1', { resume: true });
    expect(a!.state).toBe('failed');
    expect(a!.error).toBe(
      'the DaemonSet kube-system/kube-multus-ds was replaced since it was approved (the approvers saw uid uid-ds; the API server holds another object under that name), so nothing was patched. Request it again to review the current object.',
    );
    // The PATCH carried the approved uid, and the API server (the fake, as kube-apiserver) refused it.
    const patch = kube.requestsMatching({ method: 'PATCH' })[0]!;
    expect((patch.body as { metadata: { uid: string } }).metadata.uid).toBe('uid-ds');
    expect(kube.store.get('DaemonSet', 'kube-system', 'kube-multus-ds')).toEqual(before);
  });

  it('the same object is patched as before: the uid in the patch changes nothing', async () => {
    progressOnReads();
    await startedWithoutPatch('uid-ds');
    const a = await executeApproval(deps(), 'appr-1', { resume: true });
    expect(a!.state).toBe('succeeded');
    const ds = kube.store.get('DaemonSet', 'kube-system', 'kube-multus-ds')!;
    expect(ds.metadata!['uid']).toBe('uid-ds');
    expect(templateRestartedAt()).toBeDefined();
  });
});
