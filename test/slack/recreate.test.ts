/**
 * A ServiceAccount recreation keeps what it found (ownerReferences included, and says so), or refuses:
 * in the dry run when the ServiceAccount has finalizers, and at execution when it changed since the approvers saw
 * it. Real Bolt app (HTTP mode), fake Slack, fake Kubernetes API server.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { auditEvent } from '../sources/events.js';
import { APPROVER, blockText, OPS, REQUESTER, startHarness, type Harness } from './harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

const realDeletes = (x: Harness) => x.kube.requestsMatching({ method: 'DELETE', resource: 'serviceaccounts' }).filter((r) => !r.dryRun);
const OWNER = { apiVersion: 'example.com/v1', kind: 'NetworkAddon', name: 'multus', uid: 'owner-uid-1', controller: true };

/**
 * Requests a recreation of `logging/fluent-bit` from its alert's overflow menu and confirm modal. Its clients also use
 * a legacy Secret token (one audit line added), the cause where recreating the ServiceAccount is offered.
 */
async function requestRecreation(x: Harness) {
  x.appendAudit([auditEvent({ auditID: 'legacy-fb-1', time: x.now() - 60_000, kind: 'legacy', namespace: 'logging', serviceAccount: 'fluent-bit' })]);
  await x.poll();
  const alert = await x.alert('logging', 'fluent-bit');
  await x.click(REQUESTER, alert, 'tw_recreate_sa');
  await x.submitView(REQUESTER, 'tw_recreate_confirm');
  return { alert, thread: () => x.slack.thread(OPS, alert.ts) };
}

describe('ServiceAccount recreation', () => {
  it('keeps ownerReferences and says so, in the approval message and in the result', async () => {
    h = await startHarness();
    h.kube.store.update('ServiceAccount', 'logging', 'fluent-bit', (o) => {
      (o.metadata as Record<string, unknown>)['ownerReferences'] = [OWNER];
    });
    const { thread } = await requestRecreation(h);
    const approval = thread().find((m) => m.text.includes('approval needed'))!;
    expect(blockText(approval)).toContain('the new ServiceAccount keeps its ownerReferences (NetworkAddon/multus)');
    await h.click(APPROVER, approval, 'tw_approve');
    const sa = h.kube.store.get('ServiceAccount', 'logging', 'fluent-bit')!;
    expect((sa.metadata as { ownerReferences: unknown[] }).ownerReferences).toEqual([OWNER]);
    const done = thread().find((m) => m.text.includes('recreated'))!;
    expect(blockText(done)).toContain('1 ownerReference');
    expect((await h.serve.context.store.approvals.list())[0]!.state).toBe('succeeded');
  });

  it('refuses in the dry run when the ServiceAccount has finalizers, with the reason; nothing is deleted', async () => {
    h = await startHarness();
    h.kube.store.update('ServiceAccount', 'logging', 'fluent-bit', (o) => {
      (o.metadata as Record<string, unknown>)['finalizers'] = ['example.com/protect'];
    });
    const { thread } = await requestRecreation(h);
    // The thread: the legacy token's signal starting (added by requestRecreation), then the failed request.
    const msgs = thread().filter((m) => !m.text.endsWith('legacy Secret token started'));
    expect(msgs.map((m) => m.text)).toEqual(['❌ Failed [prod-eks]: ServiceAccount recreation of ServiceAccount logging/fluent-bit']);
    expect(blockText(msgs[0]!)).toContain('has finalizers (example.com/protect): a DELETE would leave it Terminating');
    expect(h.ephemerals(REQUESTER).at(-1)).toContain('has finalizers (example.com/protect)');
    expect(h.kube.requestsMatching({ method: 'DELETE', resource: 'serviceaccounts' })).toEqual([]);
    expect((await h.serve.context.store.approvals.list())[0]!.state).toBe('failed');
  });

  it('refuses with "changed since it was approved" when the ServiceAccount changed after the dry run; nothing is deleted', async () => {
    h = await startHarness();
    const { thread } = await requestRecreation(h);
    const approval = thread().find((m) => m.text.includes('approval needed'))!;
    // Someone adds an IRSA role after the approvers saw the dry run (same uid, new resourceVersion).
    const NEW_ROLE = 'arn:aws:iam::111122223333:role/new';
    h.kube.store.update('ServiceAccount', 'logging', 'fluent-bit', (o) => {
      const md = o.metadata as { annotations?: Record<string, string> };
      md.annotations = { ...(md.annotations ?? {}), 'eks.amazonaws.com/role-arn': NEW_ROLE };
    });
    await h.click(APPROVER, approval, 'tw_approve');
    const a = (await h.serve.context.store.approvals.list())[0]!;
    expect(a.state).toBe('failed');
    expect(a.error).toMatch(/^ServiceAccount logging\/fluent-bit changed since it was approved \(resourceVersion \S+ ≠ \S+\); nothing was deleted/);
    expect(blockText(h.slack.message(OPS, approval.ts)!)).toContain('changed since it was approved');
    expect(realDeletes(h)).toEqual([]);
    expect((h.kube.store.get('ServiceAccount', 'logging', 'fluent-bit')!.metadata as { annotations: Record<string, string> }).annotations['eks.amazonaws.com/role-arn']).toBe(NEW_ROLE);
  });
});
