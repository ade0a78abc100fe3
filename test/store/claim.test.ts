/** `Store.claimApproval`: one open action per target, decided in one write transaction. */
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/db.js';
import type { Store } from '../../src/store/types.js';
import { approval, finding, MIN, T0, tempDir } from './helpers.js';

const opened: Store[] = [];
afterEach(async () => {
  for (const s of opened.splice(0)) await s.close();
});
const track = (s: Store) => {
  opened.push(s);
  return s;
};

const F401 = finding({ id: 'f-multus-401', kind: 'unauthorized' });
const SA = { cluster: 'prod', kind: 'ServiceAccount' as const, namespace: 'kube-system', name: 'multus', findingId: 'f-multus' };

async function twoConnections(): Promise<[Store, Store]> {
  const path = join(tempDir(), 'claim.db');
  const a = track(await openStore(path));
  await a.saveFindings('prod', [finding(), F401], T0);
  return [a, track(await openStore(path))];
}

describe('claimApproval', () => {
  it('refuses a second restart of the same workload from another finding and another connection, naming the open one', async () => {
    const [s1, s2] = await twoConnections();
    const first = await s1.claimApproval(approval({ id: 'a1' }), T0);
    expect(first.ok).toBe(true);
    const second = await s2.claimApproval(approval({ id: 'a2', target: { ...approval().target, findingId: 'f-multus-401' } }), T0 + 1000);
    expect(second).toMatchObject({ ok: false, open: { id: 'a1', state: 'requested' }, expired: [] });
    expect((await s1.listApprovals()).map((a) => a.id)).toEqual(['a1']);
    // Approved and running block too; a final state frees the target.
    await s1.transitionApproval('a1', 'requested', 'running', {}, T0 + 2000);
    expect((await s2.openApprovalFor('restart', approval().target, T0 + 3000))?.id).toBe('a1');
    await s1.transitionApproval('a1', 'running', 'succeeded', {}, T0 + 4000);
    expect((await s2.claimApproval(approval({ id: 'a3' }), T0 + 5000)).ok).toBe(true);
  });

  it('a restart and a recreation of its ServiceAccount block each other; restarts of two workloads of one ServiceAccount do not', async () => {
    const [s1] = await twoConnections();
    expect((await s1.claimApproval(approval({ id: 'r1', action: 'recreate-serviceaccount', target: SA }), T0)).ok).toBe(true);
    expect(await s1.claimApproval(approval({ id: 'r2' }), T0)).toMatchObject({ ok: false, open: { id: 'r1' } });
    await s1.transitionApproval('r1', 'requested', 'rejected', {}, T0 + 1);
    expect((await s1.claimApproval(approval({ id: 'r3' }), T0 + 2)).ok).toBe(true);
    expect((await s1.claimApproval(approval({ id: 'r4', target: { ...approval().target, kind: 'Deployment', name: 'multus-admission' } }), T0 + 3)).ok).toBe(true);
    expect(await s1.claimApproval(approval({ id: 'r5', action: 'recreate-serviceaccount', target: SA }), T0 + 4)).toMatchObject({ ok: false, open: { id: 'r3' } });
  });

  it('expires a stale request of the same target in the same transaction (with an action-log row) so it never blocks', async () => {
    const [s1, s2] = await twoConnections();
    await s1.claimApproval(approval({ id: 'old' }), T0);
    const res = await s2.claimApproval(approval({ id: 'new', createdAt: T0 + 30 * MIN, expiresAt: T0 + 60 * MIN, updatedAt: T0 + 30 * MIN }), T0 + 30 * MIN);
    expect(res.ok).toBe(true);
    expect(res.expired.map((a) => [a.id, a.state])).toEqual([['old', 'expired']]);
    expect((await s1.listApprovalActions('old')).map((r) => [r.action, r.result, r.actor])).toEqual([['restart.expired', 'expired', null]]);
    expect((await s1.listApprovals()).map((a) => [a.id, a.state])).toEqual([
      ['old', 'expired'],
      ['new', 'requested'],
    ]);
  });
});
