/** `Store.approvals.claim`: one open action per target, decided in one write transaction. */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { definePolicy } from '../approvals/helpers.js';
import { createLogger } from '../../src/observability/logger.js';
import { claimRequest } from '../../src/remediation/executor.js';
import type { Store } from '../../src/store/types.js';
import { storeBackends } from './backends.js';
import { approval, finding, MIN, T0 } from './helpers.js';

const F401 = finding({ id: 'f-multus-401', kind: 'unauthorized' });
const SA = { cluster: 'prod', kind: 'ServiceAccount' as const, namespace: 'kube-system', name: 'multus', findingId: 'f-multus' };

describe.each(storeBackends())('claimApproval (%s)', (_name, backend) => {
  afterEach(backend.cleanup);
  afterAll(backend.dispose);

  /** Two stores on the same data (two connections / two pools, as two replicas). */
  async function twoConnections(): Promise<[Store, Store]> {
    const a = await backend.openShared();
    await a.findings.save('prod', [finding(), F401], T0);
    return [a, await backend.peer()];
  }

  it('refuses a second restart of the same workload from another finding and another connection, naming the open one', async () => {
    const [s1, s2] = await twoConnections();
    const first = await s1.approvals.claim(approval({ id: 'a1' }), T0);
    expect(first.ok).toBe(true);
    const second = await s2.approvals.claim(approval({ id: 'a2', target: { ...approval().target, findingId: 'f-multus-401' } }), T0 + 1000);
    expect(second).toMatchObject({ ok: false, open: { id: 'a1', state: 'requested' }, expired: [] });
    expect((await s1.approvals.list()).map((a) => a.id)).toEqual(['a1']);
    // Approved and running block too; a final state frees the target.
    await s1.approvals.transition('a1', 'requested', 'running', {}, T0 + 2000);
    expect((await s2.approvals.openFor('restart', approval().target, T0 + 3000))?.id).toBe('a1');
    await s1.approvals.transition('a1', 'running', 'succeeded', {}, T0 + 4000);
    expect((await s2.approvals.claim(approval({ id: 'a3' }), T0 + 5000)).ok).toBe(true);
  });

  it('a restart and a recreation of its ServiceAccount block each other; restarts of two workloads of one ServiceAccount do not', async () => {
    const [s1] = await twoConnections();
    expect((await s1.approvals.claim(approval({ id: 'r1', action: 'recreate-serviceaccount', target: SA }), T0)).ok).toBe(true);
    expect(await s1.approvals.claim(approval({ id: 'r2' }), T0)).toMatchObject({ ok: false, open: { id: 'r1' } });
    await s1.approvals.transition('r1', 'requested', 'rejected', {}, T0 + 1);
    expect((await s1.approvals.claim(approval({ id: 'r3' }), T0 + 2)).ok).toBe(true);
    expect((await s1.approvals.claim(approval({ id: 'r4', target: { ...approval().target, kind: 'Deployment', name: 'multus-admission' } }), T0 + 3)).ok).toBe(true);
    expect(await s1.approvals.claim(approval({ id: 'r5', action: 'recreate-serviceaccount', target: SA }), T0 + 4)).toMatchObject({ ok: false, open: { id: 'r3' } });
  });

  /** The executor's claim: stale requests expire through the state machine, applied by the store's compare-and-set. */
  const claimVia = (store: Store, a: ReturnType<typeof approval>, now: number) =>
    claimRequest({ store, remediatorFor: () => undefined, policyFor: () => definePolicy({ approvers: ['U0APP'] }), logger: createLogger({ level: 'silent' }) }, a, now);

  it('expires a stale request of the same target in the same transaction (with an action-log row) so it never blocks', async () => {
    const [s1, s2] = await twoConnections();
    await s1.approvals.claim(approval({ id: 'old' }), T0);
    const res = await claimVia(s2, approval({ id: 'new', createdAt: T0 + 30 * MIN, expiresAt: T0 + 60 * MIN, updatedAt: T0 + 30 * MIN }), T0 + 30 * MIN);
    expect(res.ok).toBe(true);
    expect(res.expired.map((a) => [a.id, a.state])).toEqual([['old', 'expired']]);
    expect((await s1.actions.ofApproval('old')).map((r) => [r.action, r.result, r.actor])).toEqual([['restart.expired', 'expired', null]]);
    expect((await s1.approvals.list()).map((a) => [a.id, a.state])).toEqual([
      ['old', 'expired'],
      ['new', 'requested'],
    ]);
  });

  it('applies only the decision the caller computed: none leaves a stale request as it is, a lost compare-and-set writes no row', async () => {
    const [s1, s2] = await twoConnections();
    await s1.approvals.claim(approval({ id: 'old' }), T0);
    // Without a decision the stale request stays `requested` but does not block.
    const res = await s2.approvals.claim(approval({ id: 'new' }), T0 + 30 * MIN);
    expect(res).toMatchObject({ ok: true, expired: [] });
    expect((await s1.approvals.get('old'))?.state).toBe('requested');
    await s1.approvals.transition('new', 'requested', 'rejected', {}, T0 + 30 * MIN);
    // A decision computed from a state the request has left (here `approved`) loses: no change, no action-log row.
    const lost = await s2.approvals.claim(approval({ id: 'third' }), T0 + 31 * MIN, (stale) => ({
      from: 'approved',
      to: 'expired',
      patch: {},
      log: [{ at: T0 + 31 * MIN, cluster: 'prod', approvalId: stale.id, actor: null, action: 'restart.expired', target: 'x', result: 'expired' }],
    }));
    expect(lost).toMatchObject({ ok: true, expired: [] });
    expect((await s1.approvals.get('old'))?.state).toBe('requested');
    expect(await s1.actions.ofApproval('old')).toEqual([]);
    // The decision the caller returns is what is applied, with its rows.
    await s1.approvals.transition('third', 'requested', 'rejected', {}, T0 + 31 * MIN);
    const applied = await s2.approvals.claim(approval({ id: 'fourth' }), T0 + 32 * MIN, (stale) => ({
      from: stale.state,
      to: 'expired',
      patch: { state: 'expired' },
      log: [{ at: T0 + 32 * MIN, cluster: 'prod', approvalId: stale.id, actor: null, action: 'restart.expired', target: 'x', result: 'expired', detail: 'by the caller' }],
    }));
    expect(applied.expired.map((a) => [a.id, a.state, a.updatedAt])).toEqual([['old', 'expired', T0 + 32 * MIN]]);
    expect((await s1.actions.ofApproval('old')).map((r) => r.detail)).toEqual(['by the caller']);
  });
});
