import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { approvalEvent, decide } from '../../src/approvals/machine.js';
import { applyTransition } from '../approvals/helpers.js';
import { definePolicy } from '../approvals/helpers.js';
import { newApprovalId, openStore } from '../../src/store/db.js';
import { StoreError } from '../../src/store/errors.js';
import type { Store } from '../../src/store/types.js';
import { storeBackends } from './backends.js';
import { bundleStore } from './bundle.js';
import { approval, MIN, T0, tempDir } from './helpers.js';

const open: Store[] = [];
function track(s: Store): Store {
  open.push(s);
  return s;
}
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

it('newApprovalId gives distinct opaque 22-character base64url ids', () => {
  const ids = new Set(Array.from({ length: 1000 }, newApprovalId));
  expect(ids.size).toBe(1000);
  for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9_-]{22}$/);
});

describe.each(storeBackends())('on each backend (%s)', (_name, backend) => {
afterEach(backend.cleanup);
afterAll(backend.dispose);

describe('approvals', () => {
  it('creates and reads back an approval exactly, refusing a duplicate id', async () => {
    const store = await backend.open();
    const a = approval({ votes: [{ user: 'U0X', vote: 'approve', at: T0 }] });
    expect(await store.approvals.create(a)).toEqual({ ...a, message: null });
    expect(await store.approvals.get('appr-1')).toEqual({ ...a, message: null });
    expect(await store.approvals.get('nope')).toBeUndefined();
    await expect(store.approvals.create(a)).rejects.toThrow(new StoreError('createApproval: approval appr-1 already exists'));
    const withMessage = await store.approvals.create({ ...approval({ id: 'appr-2', dryRun: null }), message: { channel: 'C0OPS', ts: '1.2' } });
    expect(withMessage.message).toEqual({ channel: 'C0OPS', ts: '1.2' });
    expect(withMessage.dryRun).toBeNull();
  });

  it('transitions only from the expected state, writing the patch', async () => {
    const store = await backend.open();
    await store.approvals.create(approval());
    expect(await store.approvals.transition('appr-1', 'approved', 'running', {}, T0 + MIN)).toBe(false);
    expect(await store.approvals.transition('nope', 'requested', 'approved', {}, T0 + MIN)).toBe(false);
    // same state: store the approval message location
    expect(await store.approvals.transition('appr-1', 'requested', 'requested', { message: { channel: 'C0OPS', ts: '9.9' } }, T0 + MIN)).toBe(true);
    const vote = { user: 'U0APP', vote: 'approve' as const, at: T0 + 2 * MIN };
    expect(await store.approvals.transition('appr-1', 'requested', 'approved', { state: 'approved', votes: [vote], updatedAt: 0 }, T0 + 2 * MIN)).toBe(true);
    expect(await store.approvals.transition('appr-1', 'approved', 'running', {}, T0 + 3 * MIN)).toBe(true);
    expect(await store.approvals.transition('appr-1', 'running', 'failed', { error: 'daemonsets.apps "x" not found' }, T0 + 4 * MIN)).toBe(true);
    expect(await store.approvals.get('appr-1')).toEqual({
      ...approval(),
      state: 'failed',
      votes: [vote],
      error: 'daemonsets.apps "x" not found',
      updatedAt: T0 + 4 * MIN,
      message: { channel: 'C0OPS', ts: '9.9' },
    });
    await expect(store.approvals.transition('appr-1', 'failed', 'running', { state: 'succeeded' }, T0)).rejects.toThrow(StoreError);
  });

  it('a vote patch computed from a stale read loses', async () => {
    const store = await backend.open();
    await store.approvals.create(approval({ requiredApprovals: 2 }));
    const alice = { user: 'U0ALICE', vote: 'approve' as const, at: T0 + MIN };
    const bob = { user: 'U0BOB', vote: 'approve' as const, at: T0 + MIN };
    expect(await store.approvals.transition('appr-1', 'requested', 'requested', { votes: [alice] }, T0 + MIN)).toBe(true);
    expect(await store.approvals.transition('appr-1', 'requested', 'requested', { votes: [bob] }, T0 + MIN)).toBe(false);
    expect(await store.approvals.transition('appr-1', 'requested', 'approved', { votes: [alice, bob] }, T0 + MIN)).toBe(true);
    expect((await store.approvals.get('appr-1'))!.votes).toEqual([alice, bob]);
  });

  it('lists approvals by cluster, state, expiry and finding', async () => {
    const store = await backend.open();
    await store.approvals.create(approval({ id: 'a', createdAt: T0, expiresAt: T0 + 30 * MIN }));
    await store.approvals.create(approval({ id: 'b', createdAt: T0 + MIN, expiresAt: T0 + 31 * MIN, state: 'approved' }));
    await store.approvals.create(
      approval({ id: 'c', createdAt: T0 + 2 * MIN, expiresAt: T0 + 10 * MIN, target: { ...approval().target, cluster: 'staging', findingId: 'f2' } }),
    );
    expect((await store.approvals.list()).map((a) => a.id)).toEqual(['a', 'b', 'c']);
    expect((await store.approvals.list({ cluster: 'prod' })).map((a) => a.id)).toEqual(['a', 'b']);
    expect((await store.approvals.list({ states: ['requested'], expiresAtOrBefore: T0 + 30 * MIN })).map((a) => a.id)).toEqual(['a', 'c']);
    expect((await store.approvals.list({ findingId: 'f2' })).map((a) => a.id)).toEqual(['c']);
    expect(await store.approvals.list({ states: [] })).toEqual([]);
  });
});

describe('compare-and-set under concurrency', () => {
  /** Ten stores on the same data: ten connections to one SQLite file, or ten pools (replicas) on one database. */
  async function tenConnections(): Promise<Store[]> {
    const first = await backend.openShared();
    return [first, ...(await Promise.all(Array.from({ length: 9 }, () => backend.peer())))];
  }

  it('of 10 connections moving approved → running, exactly one wins', async () => {
    const stores = await tenConnections();
    await stores[0]!.approvals.create(approval({ state: 'approved' }));
    const results = await Promise.all(stores.map((s, i) => s.approvals.transition('appr-1', 'approved', 'running', {}, T0 + i)));
    expect(results.filter(Boolean)).toHaveLength(1);
    // SQLite: the one connection that asks first wins (BEGIN IMMEDIATE in arrival order); PostgreSQL: any one.
    if (backend.name === 'sqlite') expect(results[0]).toBe(true);
    expect(await stores[9]!.approvals.get('appr-1')).toMatchObject({ state: 'running', updatedAt: T0 + results.indexOf(true) });
  });

  it('ten approvers clicking at once through the state machine: one approval, one execute', async () => {
    const policy = definePolicy({ approvers: Array.from({ length: 10 }, (_, i) => `U0AP${i}`) });
    const stores = await tenConnections();
    await stores[0]!.approvals.create(approval());
    // every click handler reads the approval before any of them writes
    const reads = await Promise.all(stores.map(async (s) => (await s.approvals.get('appr-1'))!));
    let executes = 0;
    const won = await Promise.all(reads.map(async (a, i) => {
      const d = decide(a, approvalEvent.approve(`U0AP${i}`), policy, T0 + MIN);
      if (!d.ok) throw new Error(`refused: ${d.reason}`);
      const ok = await stores[i]!.approvals.transition(a.id, d.from, d.next, d.patch, T0 + MIN);
      if (ok) executes += d.effects.filter((e) => e.type === 'execute').length;
      return ok;
    }));
    expect(won.filter(Boolean)).toHaveLength(1);
    expect(executes).toBe(1);
    const final = (await stores[5]!.approvals.get('appr-1'))!;
    expect(final.state).toBe('approved');
    expect(final.votes.map((v) => v.user)).toEqual([`U0AP${won.indexOf(true)}`]);
    // a loser re-reads and is told it is already decided
    const again = decide(final, approvalEvent.approve('U0AP7'), policy, T0 + MIN);
    expect(again.ok).toBe(false);
  });

  it('two approvals racing on a protected namespace: no vote is lost', async () => {
    const policy = definePolicy({ approvers: ['U0ALICE', 'U0BOB'], protectedNamespaces: ['kube-system'] });
    const a = await backend.openShared();
    const b = await backend.peer();
    await a.approvals.create(approval({ requiredApprovals: 2 }));
    const readA = (await a.approvals.get('appr-1'))!;
    const readB = (await b.approvals.get('appr-1'))!;
    const dA = decide(readA, approvalEvent.approve('U0ALICE'), policy, T0 + MIN);
    const dB = decide(readB, approvalEvent.approve('U0BOB'), policy, T0 + MIN);
    if (!dA.ok || !dB.ok) throw new Error('refused');
    expect(await a.approvals.transition('appr-1', dA.from, dA.next, dA.patch, T0 + MIN)).toBe(true);
    expect(await b.approvals.transition('appr-1', dB.from, dB.next, dB.patch, T0 + MIN)).toBe(false);
    // Bob's handler re-reads and decides again: now the quorum is reached
    const reread = (await b.approvals.get('appr-1'))!;
    const retry = decide(reread, approvalEvent.approve('U0BOB'), policy, T0 + MIN);
    if (!retry.ok) throw new Error(`refused: ${retry.reason}`);
    expect(retry.next).toBe('approved');
    expect(await b.approvals.transition('appr-1', retry.from, retry.next, retry.patch, T0 + MIN)).toBe(true);
    const final = (await a.approvals.get('appr-1'))!;
    expect(final.state).toBe('approved');
    expect(final.votes.map((v) => v.user)).toEqual(['U0ALICE', 'U0BOB']);
    expect({ ...applyTransition(reread, retry), message: null }).toEqual(final);
  });
});
});

describe('compare-and-set across threads (SQLite file)', () => {
  it('of 10 threads released at once, exactly one wins', async () => {
    const bundle = await bundleStore('cas');
    const path = join(tempDir(), 'cas-threads.db');
    const setup = await openStore(path);
    await setup.approvals.create(approval({ state: 'approved' }));
    await setup.close();
    const flag = new SharedArrayBuffer(4);
    const workers = Array.from(
      { length: 10 },
      (_, i) => new Worker(new URL('./cas-worker.mjs', import.meta.url), { workerData: { storeModule: bundle.url, path, flag, id: 'appr-1', at: T0 + i } }),
    );
    const ready = workers.map((w) => new Promise<void>((resolve) => w.once('message', () => resolve())));
    const results = workers.map(
      (w) =>
        new Promise<boolean>((resolve, reject) => {
          w.on('message', (m: { won?: boolean }) => {
            if (m.won !== undefined) resolve(m.won);
          });
          w.once('error', reject);
        }),
    );
    await Promise.all(ready);
    const go = new Int32Array(flag);
    Atomics.store(go, 0, 1);
    Atomics.notify(go, 0);
    const won = await Promise.all(results);
    await Promise.all(workers.map((w) => w.terminate()));
    bundle.cleanup();
    expect(won.filter(Boolean)).toHaveLength(1);
    const check = track(await openStore(path));
    const final = (await check.approvals.get('appr-1'))!;
    expect(final.state).toBe('running');
    expect(final.updatedAt).toBe(T0 + won.indexOf(true));
  });
});
