import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createApproval } from '../../src/approvals/index.js';
import { definePolicy } from '../approvals/helpers.js';
import type { TokenRecord } from '../../src/findings/types.js';
import { createLogger } from '../../src/observability/logger.js';
import { assessVerification, issuedAt, Verifier, type SupersededReport, type VerificationReport } from '../../src/remediation/verify.js';
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
  const base = { startedAt: T, completedAt: T + 2 * MIN, settleMs: SETTLE };
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
      { outcome: 'persisting', tokens: 1, lastSeen: T + 20 * MIN, signals: ['stale-token'] },
    ],
    [
      'an old token used within a minute after completion (clock skew) only delays the decision',
      { now: T + 30 * MIN, records: [token(T - 86_400_000, T - HOUR, T + 2 * MIN + 30_000)] },
      { outcome: 'pending', decideAt: T + 2 * MIN + SETTLE },
    ],
  ])('%s', (_name, input, expected) => {
    expect(assessVerification({ ...base, ...input })).toEqual(expected);
  });

  const r401 = (last: number): TokenRecord => ({ ...staleRecord(), kind: 'unauthorized', warnAfter: undefined, rejectionAt: undefined, lastSeen: last });

  it('401s after a restart are persisting; none for the settle period is resolved', () => {
    expect(assessVerification({ ...base, now: T + HOUR, records: [r401(T + 10 * MIN)] })).toEqual({ outcome: 'persisting', tokens: 1, lastSeen: T + 10 * MIN, signals: ['unauthorized'] });
    expect(assessVerification({ ...base, now: T + 3 * HOUR, records: [r401(T - MIN)] })).toEqual({ outcome: 'resolved', quietMs: 3 * HOUR - 2 * MIN });
  });

  it('judges every signal of the alert: 401s stopped but a new token is used stale → recurrence, not resolved', () => {
    const records = [r401(T - MIN), old, token(T + 20_000, T + 70 * MIN, T + 2 * HOUR + 3 * MIN, 5, 'kube-multus-ds-new')];
    expect(assessVerification({ ...base, now: T + 2 * MIN + SETTLE, records })).toMatchObject({ outcome: 'recurrence', tokens: 1, requests: 5 });
  });

  it('judges every signal of the alert: stale tokens stopped but 401s and legacy use continue → persisting naming both', () => {
    const legacy: TokenRecord = { ...staleRecord(), kind: 'legacy-token', warnAfter: undefined, rejectionAt: undefined, lastSeen: T + 40 * MIN };
    expect(assessVerification({ ...base, now: T + 3 * HOUR, records: [old, r401(T + 30 * MIN), legacy] })).toEqual({ outcome: 'persisting', tokens: 2, lastSeen: T + 40 * MIN, signals: ['unauthorized', 'legacy-token'] });
  });

  it('a token file the node probe saw after the action (a copy) keeps a quiet alert pending past the settle period', () => {
    expect(assessVerification({ ...base, now: T + 3 * HOUR, records: [old], copiedToken: true })).toEqual({ outcome: 'pending', decideAt: T + 2 * MIN + SETTLE, copiedToken: true });
    expect(assessVerification({ ...base, now: T + 3 * HOUR, records: [old], copiedToken: false })).toEqual({ outcome: 'resolved', quietMs: 3 * HOUR - 2 * MIN });
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
    await store.findings.save('prod', [finding({ lastSeen: new Date(T - 10 * MIN).toISOString() })], T - 5 * MIN);
    await store.tokenRecords.replace('prod', [token(T - 80 * 86_400_000, T - 5 * HOUR, T - 10 * MIN)]);
    const created = createApproval(
      { id: 'approval-0001', action: 'restart', target: { cluster: 'prod', kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds', findingId: 'f-multus' }, requester: 'U0REQ', requesterGroups: [] },
      definePolicy({ approvers: ['U0APP'] }),
      T - 4 * MIN,
    );
    if (!created.ok) throw new Error(`refused: ${created.reason}`);
    await store.approvals.create(created.approval);
    const id = created.approval.id;
    const log = (at: number, result: string) => store.actions.log({ at, cluster: 'prod', findingId: 'f-multus', approvalId: id, actor: null, action: `restart.${result}`, target: 'DaemonSet kube-system/kube-multus-ds', result });
    await store.approvals.transition(id, 'requested', 'approved', { votes: [{ user: 'U0APP', vote: 'approve', at: T - MIN }] }, T - MIN);
    await store.approvals.transition(id, 'approved', 'running', {}, T);
    await log(T, 'running');
    await store.approvals.transition(id, 'running', 'succeeded', {}, T + 2 * MIN);
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
    expect(await store.findings.get('f-multus')).toMatchObject({ status: 'resolved', resolvedAt: now });
    expect((await store.actions.ofApproval(approvalId)).at(-1)).toMatchObject({ action: 'verification.resolved', result: 'resolved', actor: null });
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
    expect((await peer.approvals.get(approvalId))!.verification).toEqual({ outcome: 'resolved', at: now });
    expect((await store.actions.ofApproval(approvalId)).filter((r) => r.action === 'verification.resolved')).toHaveLength(1);
    await peer.close();
    await store.close();
  });

  it('reports a recurrence when a token issued after the restart is used stale, and keeps the finding open', async () => {
    const { store } = await setup();
    await store.tokenRecords.replace('prod', [token(T - 80 * 86_400_000, T - 5 * HOUR, T - 10 * MIN), token(T + 30_000, T + 65 * MIN, T + 70 * MIN, 4, 'kube-multus-ds-new')]);
    const v = new Verifier({ store, clock: () => T + 75 * MIN, settleMs: SETTLE, logger: quiet });
    const [r] = await v.verifyCluster('prod');
    expect(r!.outcome).toEqual({ outcome: 'recurrence', tokens: 1, requests: 4, firstSeen: T + 65 * MIN, lastSeen: T + 70 * MIN });
    expect((await store.findings.get('f-multus'))!.status).toBe('open');
    await store.close();
  });

  it('after a ServiceAccount recreation, 401s of the subject mean its pods still use old tokens (persisting), not resolved', async () => {
    const { store, approvalId } = await setup();
    await store.approvals.transition(approvalId, 'succeeded', 'succeeded', {}, T + 2 * MIN);
    // Same store rows, but as a recreation: rewrite the action through a second approval on the same finding.
    const created = createApproval(
      { id: 'approval-0003', action: 'recreate-serviceaccount', target: { cluster: 'prod', kind: 'ServiceAccount', namespace: 'kube-system', name: 'multus', findingId: 'f-multus' }, requester: 'U0REQ', requesterGroups: [] },
      definePolicy({ approvers: ['U0APP'], actions: ['recreate-serviceaccount'] }),
      T + 3 * MIN,
    );
    if (!created.ok) throw new Error(`refused: ${created.reason}`);
    await store.approvals.create(created.approval);
    await store.approvals.transition('approval-0003', 'requested', 'approved', { votes: [{ user: 'U0APP', vote: 'approve', at: T + 4 * MIN }] }, T + 4 * MIN);
    await store.approvals.transition('approval-0003', 'approved', 'running', {}, T + 5 * MIN);
    await store.approvals.transition('approval-0003', 'running', 'succeeded', {}, T + 6 * MIN);
    await store.actions.log({ at: T + 6 * MIN, cluster: 'prod', findingId: 'f-multus', approvalId: 'approval-0003', actor: null, action: 'recreate-serviceaccount.succeeded', target: 'x', result: 'succeeded' });
    await store.tokenRecords.replace('prod', [
      token(T - 80 * 86_400_000, T - 5 * HOUR, T - 10 * MIN),
      { ...staleRecord(), kind: 'unauthorized', warnAfter: undefined, rejectionAt: undefined, firstSeen: T + 20 * MIN, lastSeen: T + 30 * MIN, requests: 12 },
    ]);
    const v = new Verifier({ store, clock: () => T + 3 * HOUR, settleMs: SETTLE, logger: quiet });
    const reports = await v.verifyCluster('prod');
    expect(reports.map((r) => [r.approval.id, r.outcome])).toEqual([['approval-0003', { outcome: 'persisting', tokens: 1, lastSeen: T + 30 * MIN, signals: ['unauthorized'] }]]);
    expect((await store.findings.get('f-multus'))!.status).toBe('open');
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
    await store.approvals.create(created.approval);
    await store.approvals.transition('approval-0002', 'requested', 'approved', { votes: [{ user: 'U0APP', vote: 'approve', at: T + 11 * MIN }] }, T + 11 * MIN);
    await store.approvals.transition('approval-0002', 'approved', 'running', {}, T + 12 * MIN);
    await store.actions.log({ at: T + 12 * MIN, cluster: 'prod', findingId: 'f-multus', approvalId: 'approval-0002', actor: null, action: 'restart.running', target: 'x', result: 'running' });
    await store.approvals.transition('approval-0002', 'running', 'succeeded', {}, T + 13 * MIN);
    await store.actions.log({ at: T + 13 * MIN, cluster: 'prod', findingId: 'f-multus', approvalId: 'approval-0002', actor: null, action: 'restart.succeeded', target: 'x', result: 'succeeded' });
    const v = new Verifier({ store, clock: () => T + 30 * MIN, settleMs: SETTLE, logger: quiet });
    expect(await v.verifyCluster('prod')).toEqual([]);
    expect((await store.actions.ofApproval(approvalId)).at(-1)).toMatchObject({ action: 'verification.superseded' });
    expect((await store.actions.ofApproval('approval-0002')).some((r) => r.action.startsWith('verification.'))).toBe(false);
    await store.close();
  });

  describe('verifies the alert (the ServiceAccount), whichever of its findings the approval names', () => {
    /** The Multus alert's two findings (stale tokens, 401s) and a succeeded restart approved on the 401 finding. */
    async function alertSetup(): Promise<{ store: Store; approvalId: string }> {
      const store = await openStore(':memory:');
      await store.findings.save('prod', [finding({ lastSeen: new Date(T - 10 * MIN).toISOString() }), finding({ id: 'f-multus-401', kind: 'unauthorized', severity: 'critical', rejectionAt: null, lastSeen: new Date(T - 10 * MIN).toISOString() })], T - 5 * MIN);
      const approvalId = await succeededRestart(store, 'approval-0401', 'f-multus-401', T, T + 2 * MIN);
      return { store, approvalId };
    }
    async function succeededRestart(store: Store, id: string, findingId: string, runningAt: number, doneAt: number): Promise<string> {
      const created = createApproval(
        { id, action: 'restart', target: { cluster: 'prod', kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds', findingId }, requester: 'U0REQ', requesterGroups: [] },
        definePolicy({ approvers: ['U0APP'] }),
        runningAt - 4 * MIN,
      );
      if (!created.ok) throw new Error(`refused: ${created.reason}`);
      await store.approvals.create(created.approval);
      await store.approvals.transition(id, 'requested', 'approved', { votes: [{ user: 'U0APP', vote: 'approve', at: runningAt - MIN }] }, runningAt - MIN);
      await store.approvals.transition(id, 'approved', 'running', {}, runningAt);
      await store.actions.log({ at: runningAt, cluster: 'prod', findingId, approvalId: id, actor: null, action: 'restart.running', target: 'x', result: 'running' });
      await store.approvals.transition(id, 'running', 'succeeded', {}, doneAt);
      await store.actions.log({ at: doneAt, cluster: 'prod', findingId, approvalId: id, actor: null, action: 'restart.succeeded', target: 'x', result: 'succeeded' });
      return id;
    }
    const r401 = (first: number, last: number): TokenRecord => ({ ...staleRecord(), kind: 'unauthorized', warnAfter: undefined, rejectionAt: undefined, firstSeen: first, lastSeen: last, requests: 7 });

    it('the approval records the alert it was requested on (subject_key)', async () => {
      const { store, approvalId } = await alertSetup();
      expect((await store.approvals.get(approvalId))!.subject).toEqual({ namespace: 'kube-system', serviceAccount: 'multus' });
      await store.close();
    });

    it('401s stop but the new pods still send stale tokens: a recurrence (said by the stale-token finding), never resolved', async () => {
      const { store } = await alertSetup();
      await store.tokenRecords.replace('prod', [r401(T - HOUR, T - 10 * MIN), token(T - 80 * 86_400_000, T - 5 * HOUR, T - 10 * MIN), token(T + 30_000, T + 65 * MIN, T + 2 * HOUR + 5 * MIN, 4, 'kube-multus-ds-new')]);
      const reports: VerificationReport[] = [];
      const v = new Verifier({ store, clock: () => T + 2 * MIN + SETTLE + MIN, settleMs: SETTLE, logger: quiet, report: async (r) => void reports.push(r) });
      await v.verifyCluster('prod');
      expect(reports.map((r) => [r.outcome.outcome, r.finding.id, r.resolved.length])).toEqual([['recurrence', 'f-multus', 0]]);
      expect((await store.findings.get('f-multus'))!.status).toBe('open');
      expect((await store.findings.get('f-multus-401'))!.status).toBe('open');
      await store.close();
    });

    it('stale tokens stop but 401s continue: persisting, not resolved', async () => {
      const { store } = await alertSetup();
      await store.tokenRecords.replace('prod', [r401(T - HOUR, T + 30 * MIN), token(T - 80 * 86_400_000, T - 5 * HOUR, T - 10 * MIN)]);
      const v = new Verifier({ store, clock: () => T + 3 * HOUR, settleMs: SETTLE, logger: quiet });
      expect((await v.verifyCluster('prod')).map((r) => r.outcome)).toEqual([{ outcome: 'persisting', tokens: 1, lastSeen: T + 30 * MIN, signals: ['unauthorized'] }]);
      expect((await store.findings.get('f-multus'))!.status).toBe('open');
      await store.close();
    });

    it('resolves once, for the alert, only when every signal stayed quiet for the settle period: both findings, one report', async () => {
      const { store, approvalId } = await alertSetup();
      await store.tokenRecords.replace('prod', [r401(T - HOUR, T - 10 * MIN), token(T - 80 * 86_400_000, T - 5 * HOUR, T - 10 * MIN)]);
      let now = T + HOUR;
      const reports: VerificationReport[] = [];
      const v = new Verifier({ store, clock: () => now, settleMs: SETTLE, logger: quiet, report: async (r) => void reports.push(r) });
      expect(await v.verifyCluster('prod')).toEqual([]);
      now = T + 2 * MIN + SETTLE;
      await v.verifyCluster('prod');
      now += HOUR;
      await v.verifyCluster('prod');
      expect(reports).toHaveLength(1);
      expect(reports[0]!.outcome.outcome).toBe('resolved');
      expect(reports[0]!.finding.id).toBe('f-multus-401');
      expect(reports[0]!.resolved.map((m) => [m.id, m.status]).sort()).toEqual([['f-multus', 'resolved'], ['f-multus-401', 'resolved']]);
      expect((await store.actions.ofApproval(approvalId)).filter((r) => r.action === 'verification.resolved').map((r) => r.findingId).sort()).toEqual(['f-multus', 'f-multus-401']);
      await store.close();
    });

    it('a node-probe check that found the token in a host file (a copy) keeps a quiet alert unresolved', async () => {
      const { store, approvalId } = await alertSetup();
      await store.approvals.concludeProbeCheck(approvalId, 'rewritten', T + 20 * MIN);
      const v = new Verifier({ store, clock: () => T + 3 * HOUR, settleMs: SETTLE, logger: quiet });
      expect(await v.verifyCluster('prod')).toEqual([]);
      expect((await store.approvals.get(approvalId))!.verification).toBeUndefined();
      await store.close();
    });

    it('a later restart on another finding of the same alert supersedes the earlier pending verification, reported once', async () => {
      const { store, approvalId } = await alertSetup();
      const later = await succeededRestart(store, 'approval-0402', 'f-multus', T + 20 * MIN, T + 22 * MIN);
      const superseded: SupersededReport[] = [];
      const v = new Verifier({ store, clock: () => T + 30 * MIN, settleMs: SETTLE, logger: quiet, reportSuperseded: async (r) => void superseded.push(r) });
      await v.verifyCluster('prod');
      await v.verifyCluster('prod');
      expect(superseded.map((r) => [r.approval.id, r.by.id, r.finding.id])).toEqual([[approvalId, later, 'f-multus-401']]);
      expect((await store.approvals.get(approvalId))!.verification?.outcome).toBe('superseded');
      expect((await store.approvals.get(later))!.verification).toBeUndefined();
      await store.close();
    });
  });
});
