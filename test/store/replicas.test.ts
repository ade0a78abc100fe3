/**
 * The one-winner guarantees between replicas, on every backend (test/store/backends.ts): two stores on the same data
 * (SQLite: two connections to one file; PostgreSQL: two pools, as two replicas on different nodes) racing in the same
 * event-loop turn ("the same millisecond"): one open action per target, one transition out of a state, one claim of
 * a Slack request key, one verification conclusion per action, one
 * taker of a scan request, and an alert intent seen by the other replica.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/types.js';
import { storeBackends } from './backends.js';
import { approval, finding, T0 } from './helpers.js';

const ROUNDS = 20;

describe.each(storeBackends())('replicas on one store (%s)', (_name, backend) => {
  afterEach(backend.cleanup);
  afterAll(backend.dispose);

  async function replicas(n = 2): Promise<Store[]> {
    const first = await backend.openShared();
    await first.findings.save('prod', [finding()], T0);
    const rest: Store[] = [];
    for (let i = 1; i < n; i++) rest.push(await backend.peer());
    return [first, ...rest];
  }

  it('two replicas requesting an action on the same target at once: exactly one request, every round', async () => {
    const [a, b] = await replicas();
    for (let r = 0; r < ROUNDS; r++) {
      const target = { cluster: 'prod', kind: 'Deployment' as const, namespace: 'kube-system', name: `web-${r}`, findingId: 'f-multus' };
      const results = await Promise.all([
        a!.approvals.claim(approval({ id: `a-${r}`, target }), T0),
        b!.approvals.claim(approval({ id: `b-${r}`, target }), T0),
      ]);
      expect(results.filter((x) => x.ok), `round ${r}`).toHaveLength(1);
      const [first, second] = results;
      const winnerId = first!.ok ? first!.approval.id : second!.ok ? second!.approval.id : undefined;
      const loserOpen = !first!.ok ? first!.open.id : !second!.ok ? second!.open.id : undefined;
      expect(loserOpen, `round ${r}: the loser names the winner's request`).toBe(winnerId);
    }
    expect(await a!.approvals.list()).toHaveLength(ROUNDS);
  });

  it('ten replicas moving one approval approved → running at once: exactly one wins', async () => {
    const stores = await replicas(10);
    await stores[0]!.approvals.claim(approval({ id: 'x' }), T0);
    await stores[0]!.approvals.transition('x', 'requested', 'approved', {}, T0 + 1);
    const won = await Promise.all(stores.map((s, i) => s.approvals.transition('x', 'approved', 'running', { startedAt: T0 + 2 + i } as never, T0 + 2)));
    expect(won.filter(Boolean)).toHaveLength(1);
    expect((await stores[5]!.approvals.get('x'))?.state).toBe('running');
  });

  it('a Slack request key is claimed once across replicas (replay cache and envelope dedupe shared)', async () => {
    const [a, b] = await replicas();
    for (let r = 0; r < ROUNDS; r++) {
      const keys = [`sig:${r}`, `env:${r}`];
      const claims = await Promise.all([a!.replay.claim(keys, T0, T0 + 360_000), b!.replay.claim([...keys].reverse(), T0, T0 + 360_000)]);
      expect(claims.filter(Boolean), `round ${r}`).toHaveLength(1);
    }
    // Another replica sees a key claimed by the first; an expired one may be claimed again.
    expect(await b!.replay.claim(['sig:0'], T0 + 1, T0 + 360_000)).toBe(false);
    expect(await b!.replay.claim(['sig:0'], T0 + 360_001, T0 + 720_000)).toBe(true);
  });

  it('a verification or probe-check conclusion is recorded once across replicas racing for it', async () => {
    const [a, b] = await replicas();
    for (let r = 0; r < ROUNDS; r++) {
      await a!.approvals.create(approval({ id: `v-${r}`, state: 'succeeded' }));
      const verified = await Promise.all([a!.approvals.concludeVerification(`v-${r}`, 'resolved', T0 + r), b!.approvals.concludeVerification(`v-${r}`, 'recurrence', T0 + r)]);
      expect(verified.filter(Boolean), `round ${r}`).toHaveLength(1);
      const probed = await Promise.all([b!.approvals.concludeProbeCheck(`v-${r}`, 'rewritten', T0 + r), a!.approvals.concludeProbeCheck(`v-${r}`, 'not-rewritten', T0 + r)]);
      expect(probed.filter(Boolean), `round ${r}`).toHaveLength(1);
      const stored = await b!.approvals.get(`v-${r}`);
      expect(stored?.verification).toEqual({ outcome: verified[0] ? 'resolved' : 'recurrence', at: T0 + r });
      expect(stored?.probeCheck).toEqual({ outcome: probed[0] ? 'rewritten' : 'not-rewritten', at: T0 + r });
    }
  });

  it('a scan request left by one replica is taken once by the replicas racing for it, keeping its first time', async () => {
    const [a, b] = await replicas();
    for (let r = 0; r < ROUNDS; r++) {
      await Promise.all([a!.scanRequests.request('prod', T0 + r), b!.scanRequests.request('prod', T0 + r + 1)]);
      await a!.scanRequests.request('prod', T0 + r + 2);
      const taken = await Promise.all([a!.scanRequests.take('prod'), b!.scanRequests.take('prod')]);
      const got = taken.filter((t) => t !== undefined);
      expect(got, `round ${r}`).toHaveLength(1);
      expect([T0 + r, T0 + r + 1]).toContain(got[0]);
      expect(await b!.scanRequests.take('prod')).toBeUndefined();
    }
    // One cluster's request is not another's.
    await a!.scanRequests.request('prod', T0);
    expect(await b!.scanRequests.take('staging')).toBeUndefined();
    expect(await b!.scanRequests.take('prod')).toBe(T0);
  });

  it('an alert intent written by one replica is seen by the other, which then does not post again', async () => {
    const [a, b] = await replicas();
    await a!.slackRefs.recordGroupIntent('g1', 'C0OPS', T0);
    await a!.slackRefs.recordAlertIntent('f-multus', 'C0OPS', T0);
    expect(await b!.slackRefs.getGroupIntent('g1')).toEqual({ channel: 'C0OPS', at: T0 });
    expect(await b!.slackRefs.getAlertIntent('f-multus')).toEqual({ channel: 'C0OPS', at: T0 });
  });
});
