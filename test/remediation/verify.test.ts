import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createApproval } from '../../src/approvals/index.js';
import { definePolicy } from '../approvals/helpers.js';
import type { TokenRecord } from '../../src/findings/types.js';
import { createLogger } from '../../src/observability/logger.js';
import { assessVerification, issuedAt, Verifier, type VerificationReport } from '../../src/remediation/verify.js';
import { openStore, type Store } from '../../src/store/index.js';
import { finding, staleRecord, tempDir } from '../store/helpers.js';

const T = Date.UTC(2026, 10, 20, 12, 0, 0);
const MIN = 60_000;
const HOUR = 60 * MIN;
const SETTLE = 2 * HOUR;

/** A stale record of a token issued at `issued`, used from `first` to `last`. */
function token(issued: number, first: number, last: number, requests = 3, pod = 'kube-multus-ds-a'): TokenRecord {
  return staleRecord({ pod, podUid: `uid-${pod}-${issued}`, warnAfter: issued + 3607_000, firstSeen: first, lastSeen: last, requests });
}

describe('assessVerification (pure)', () => {
  const base = { kind: 'stale-token' as const, startedAt: T, completedAt: T + 2 * MIN, settleMs: SETTLE };
  const old = token(T - 80 * 86_400_000, T - 5 * HOUR, T - 10 * MIN, 40);

  it.each([
    ['only uses before the action, settle not over', { now: T + HOUR, records: [old] }, { outcome: 'pending', decideAt: T + 2 * MIN + SETTLE }],
    ['only uses before the action, settle over', { now: T + 2 * MIN + SETTLE, records: [old] }, { outcome: 'resolved', quietMs: SETTLE }],
    ['no records at all, settle over', { now: T + 3 * HOUR, records: [] }, { outcome: 'resolved', quietMs: 3 * HOUR - 2 * MIN }],
    [
      'a token issued at the restart is stale 70 min later: recurrence',
      { now: T + 75 * MIN, records: [old, token(T + 20_000, T + 70 * MIN, T + 74 * MIN, 2, 'kube-multus-ds-new')] },
      { outcome: 'recurrence', tokens: 1, requests: 2, firstSeen: T + 70 * MIN, lastSeen: T + 74 * MIN },
    ],
    [
      'a token issued 59 s before the restart started counts as new (±60 s)',
      { now: T + 75 * MIN, records: [token(T - 59_000, T + 70 * MIN, T + 70 * MIN, 1, 'x')] },
      { outcome: 'recurrence', tokens: 1, requests: 1, firstSeen: T + 70 * MIN, lastSeen: T + 70 * MIN },
    ],
    [
      'an old token still used after the action completed: persisting, before the settle period ends',
      { now: T + 30 * MIN, records: [token(T - 86_400_000, T - HOUR, T + 20 * MIN, 9)] },
      { outcome: 'persisting', tokens: 1, lastSeen: T + 20 * MIN },
    ],
    [
      'an old token used within a minute after completion (clock skew) only delays the decision',
      { now: T + 30 * MIN, records: [token(T - 86_400_000, T - HOUR, T + 2 * MIN + 30_000)] },
      { outcome: 'pending', decideAt: T + 2 * MIN + SETTLE },
    ],
  ])('%s', (_name, input, expected) => {
    expect(assessVerification({ ...base, ...input })).toEqual(expected);
  });

  it('401s after a restart are persisting; none for the settle period is resolved', () => {
    const r401 = (last: number): TokenRecord => ({ ...staleRecord(), kind: 'unauthorized', warnAfter: undefined, rejectionAt: undefined, lastSeen: last });
    expect(assessVerification({ ...base, kind: 'unauthorized', now: T + HOUR, records: [r401(T + 10 * MIN)] })).toEqual({ outcome: 'persisting', tokens: 1, lastSeen: T + 10 * MIN });
    expect(assessVerification({ ...base, kind: 'unauthorized', now: T + 3 * HOUR, records: [r401(T - MIN)] })).toEqual({ outcome: 'resolved', quietMs: 3 * HOUR - 2 * MIN });
  });

  it('issuedAt is warnAfter − 3607 s', () => {
    expect(issuedAt({ warnAfter: T })).toBe(T - 3_607_000);
    expect(issuedAt({})).toBeUndefined();
  });
});

describe('Verifier', () => {
  const quiet = createLogger({ level: 'silent' });

  /** A store with finding f-multus and a succeeded restart of it: running at T, succeeded at T + 2 min. */
  async function setup(path = ':memory:'): Promise<{ store: Store; approvalId: string }> {
    const store = await openStore(path);
    await store.saveFindings('prod', [finding({ lastSeen: new Date(T - 10 * MIN).toISOString() })], T - 5 * MIN);
    await store.replaceTokenRecords('prod', [token(T - 80 * 86_400_000, T - 5 * HOUR, T - 10 * MIN)]);
    const created = createApproval(
      { id: 'approval-0001', action: 'restart', target: { cluster: 'prod', kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds', findingId: 'f-multus' }, requester: 'U0REQ', requesterGroups: [] },
      definePolicy({ approvers: ['U0APP'] }),
      T - 4 * MIN,
    );
    if (!created.ok) throw new Error(`refused: ${created.reason}`);
    await store.createApproval(created.approval);
    const id = created.approval.id;
    const log = (at: number, result: string) => store.logAction({ at, cluster: 'prod', findingId: 'f-multus', approvalId: id, actor: null, action: `restart.${result}`, target: 'DaemonSet kube-system/kube-multus-ds', result });
    await store.transitionApproval(id, 'requested', 'approved', { votes: [{ user: 'U0APP', vote: 'approve', at: T - MIN }] }, T - MIN);
    await store.transitionApproval(id, 'approved', 'running', {}, T);
    await log(T, 'running');
    await store.transitionApproval(id, 'running', 'succeeded', {}, T + 2 * MIN);
    await log(T + 2 * MIN, 'succeeded');
    return { store, approvalId: id };
  }

  it('resolves the finding after a quiet settle period, once, and reports it', async () => {
    const { store, approvalId } = await setup();
    let now = T + HOUR;
    const reports: VerificationReport[] = [];
    const v = new Verifier({ store, clock: () => now, settleMs: SETTLE, logger: quiet, report: async (r) => void reports.push(r) });
    expect(await v.verifyCluster('prod')).toEqual([]);
    now = T + 2 * MIN + SETTLE;
    const [r] = await v.verifyCluster('prod');
    expect(r).toMatchObject({ outcome: { outcome: 'resolved', quietMs: SETTLE }, startedAt: T, completedAt: T + 2 * MIN });
    expect(reports).toHaveLength(1);
    expect(await store.getFinding('f-multus')).toMatchObject({ status: 'resolved', resolvedAt: now });
    expect((await store.listApprovalActions(approvalId)).at(-1)).toMatchObject({ action: 'verification.resolved', result: 'resolved', actor: null });
    now += HOUR;
    expect(await v.verifyCluster('prod')).toEqual([]);
    expect(reports).toHaveLength(1);
    await store.close();
  });

  it('two replicas verifying the same cluster at once conclude and report it once (compare-and-set on the approval)', async () => {
    const path = join(tempDir(), 'shared.db');
    const { store, approvalId } = await setup(path);
    const peer = await openStore(path);
    const now = T + 2 * MIN + SETTLE;
    const reports: VerificationReport[] = [];
    const report = async (r: VerificationReport) => void reports.push(r);
    const [a, b] = [store, peer].map((s) => new Verifier({ store: s, clock: () => now, settleMs: SETTLE, logger: quiet, report }));
    const results = await Promise.all([a!.verifyCluster('prod'), b!.verifyCluster('prod')]);
    expect(results.flat().map((r) => r.outcome.outcome)).toEqual(['resolved']);
    expect(reports).toHaveLength(1);
    expect((await peer.getApproval(approvalId))!.verification).toEqual({ outcome: 'resolved', at: now });
    expect((await store.listApprovalActions(approvalId)).filter((r) => r.action === 'verification.resolved')).toHaveLength(1);
    await peer.close();
    await store.close();
  });

  it('reports a recurrence when a token issued after the restart is used stale, and keeps the finding open', async () => {
    const { store } = await setup();
    await store.replaceTokenRecords('prod', [token(T - 80 * 86_400_000, T - 5 * HOUR, T - 10 * MIN), token(T + 30_000, T + 65 * MIN, T + 70 * MIN, 4, 'kube-multus-ds-new')]);
    const v = new Verifier({ store, clock: () => T + 75 * MIN, settleMs: SETTLE, logger: quiet });
    const [r] = await v.verifyCluster('prod');
    expect(r!.outcome).toEqual({ outcome: 'recurrence', tokens: 1, requests: 4, firstSeen: T + 65 * MIN, lastSeen: T + 70 * MIN });
    expect((await store.getFinding('f-multus'))!.status).toBe('open');
    await store.close();
  });

  it('after a ServiceAccount recreation, 401s of the subject mean its pods still use old tokens (persisting), not resolved', async () => {
    const { store, approvalId } = await setup();
    await store.transitionApproval(approvalId, 'succeeded', 'succeeded', {}, T + 2 * MIN);
    // Same store rows, but as a recreation: rewrite the action through a second approval on the same finding.
    const created = createApproval(
      { id: 'approval-0003', action: 'recreate-serviceaccount', target: { cluster: 'prod', kind: 'ServiceAccount', namespace: 'kube-system', name: 'multus', findingId: 'f-multus' }, requester: 'U0REQ', requesterGroups: [] },
      definePolicy({ approvers: ['U0APP'], actions: ['recreate-serviceaccount'] }),
      T + 3 * MIN,
    );
    if (!created.ok) throw new Error(`refused: ${created.reason}`);
    await store.createApproval(created.approval);
    await store.transitionApproval('approval-0003', 'requested', 'approved', { votes: [{ user: 'U0APP', vote: 'approve', at: T + 4 * MIN }] }, T + 4 * MIN);
    await store.transitionApproval('approval-0003', 'approved', 'running', {}, T + 5 * MIN);
    await store.transitionApproval('approval-0003', 'running', 'succeeded', {}, T + 6 * MIN);
    await store.logAction({ at: T + 6 * MIN, cluster: 'prod', findingId: 'f-multus', approvalId: 'approval-0003', actor: null, action: 'recreate-serviceaccount.succeeded', target: 'x', result: 'succeeded' });
    await store.replaceTokenRecords('prod', [
      token(T - 80 * 86_400_000, T - 5 * HOUR, T - 10 * MIN),
      { ...staleRecord(), kind: 'unauthorized', warnAfter: undefined, rejectionAt: undefined, firstSeen: T + 20 * MIN, lastSeen: T + 30 * MIN, requests: 12 },
    ]);
    const v = new Verifier({ store, clock: () => T + 3 * HOUR, settleMs: SETTLE, logger: quiet });
    const reports = await v.verifyCluster('prod');
    expect(reports.map((r) => [r.approval.id, r.outcome])).toEqual([['approval-0003', { outcome: 'persisting', tokens: 1, lastSeen: T + 30 * MIN }]]);
    expect((await store.getFinding('f-multus'))!.status).toBe('open');
    await store.close();
  });

  it('only the latest succeeded action of a finding is verified; older ones are marked superseded', async () => {
    const { store, approvalId } = await setup();
    const created = createApproval(
      { id: 'approval-0002', action: 'restart', target: { cluster: 'prod', kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds', findingId: 'f-multus' }, requester: 'U0REQ', requesterGroups: [] },
      definePolicy({ approvers: ['U0APP'] }),
      T + 10 * MIN,
    );
    if (!created.ok) throw new Error(`refused: ${created.reason}`);
    await store.createApproval(created.approval);
    await store.transitionApproval('approval-0002', 'requested', 'approved', { votes: [{ user: 'U0APP', vote: 'approve', at: T + 11 * MIN }] }, T + 11 * MIN);
    await store.transitionApproval('approval-0002', 'approved', 'running', {}, T + 12 * MIN);
    await store.logAction({ at: T + 12 * MIN, cluster: 'prod', findingId: 'f-multus', approvalId: 'approval-0002', actor: null, action: 'restart.running', target: 'x', result: 'running' });
    await store.transitionApproval('approval-0002', 'running', 'succeeded', {}, T + 13 * MIN);
    await store.logAction({ at: T + 13 * MIN, cluster: 'prod', findingId: 'f-multus', approvalId: 'approval-0002', actor: null, action: 'restart.succeeded', target: 'x', result: 'succeeded' });
    const v = new Verifier({ store, clock: () => T + 30 * MIN, settleMs: SETTLE, logger: quiet });
    expect(await v.verifyCluster('prod')).toEqual([]);
    expect((await store.listApprovalActions(approvalId)).at(-1)).toMatchObject({ action: 'verification.superseded' });
    expect((await store.listApprovalActions('approval-0002')).some((r) => r.action.startsWith('verification.'))).toBe(false);
    await store.close();
  });
});
