import { describe, expect, it } from 'vitest';
import { approvalEvent as ev, canRequest, createApproval, decide, voidApprovals, type ActionTarget, type Approval, type ApprovalEvent, type ApprovalState, type Decision, type RefusalReason } from '../../src/approvals/machine.js';
import { applyTransition } from './helpers.js';
import type { ApprovalPolicy } from '../../src/approvals/policy.js';
import { definePolicy } from './helpers.js';
import { refusalText } from '../../src/slack/blocks/refusal.js';

const T0 = Date.parse('2026-11-29T12:00:00Z');
const MIN = 60_000;

const target: ActionTarget = { cluster: 'prod-eks', kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds', findingId: 'f1' };
const policy = definePolicy({ approvers: ['U0APPROVE1', 'U0APPROVE2', 'S0OPS00001'], requesters: ['*'], actions: ['restart', 'recreate-serviceaccount', 'snooze'] });
const REQ = 'U0REQUEST1';

function request(p: ApprovalPolicy = policy, t: ActionTarget = target, requester = REQ): Approval {
  const r = createApproval({ id: 'appr_0000001', action: 'restart', target: t, requester, requesterGroups: [] }, p, T0);
  if (!r.ok) throw new Error(refusalText(r));
  return r.approval;
}

/** Applies events in order; every one must be accepted. */
function run(a: Approval, steps: Array<[ApprovalEvent, number]>, p: ApprovalPolicy = policy): Approval {
  let cur = a;
  for (const [e, at] of steps) {
    const d = decide(cur, e, p, at);
    if (!d.ok) throw new Error(`refused ${e.type}: ${d.reason} ${refusalText(d)}`);
    cur = applyTransition(cur, d);
  }
  return cur;
}

/** The refusal's code and its Slack wording (`refusalText`, src/slack/blocks/refusal.ts). */
function refusal(d: Decision): { reason: RefusalReason; message: string } {
  if (d.ok) throw new Error(`expected a refusal, got → ${d.next}`);
  return { reason: d.reason, message: refusalText(d) };
}

/** A `canRequest` result with a refusal worded as Slack shows it. */
function worded(r: ReturnType<typeof canRequest>): { ok: true } | { ok: false; reason: RefusalReason; message: string } {
  return r.ok ? r : { ok: false, reason: r.reason, message: refusalText(r) };
}

describe('createApproval', () => {
  it('creates a requested approval expiring after the policy expiry (default 30 min)', () => {
    const a = request();
    expect(a).toEqual({
      id: 'appr_0000001',
      action: 'restart',
      target,
      requester: REQ,
      createdAt: T0,
      expiresAt: T0 + 30 * MIN,
      requiredApprovals: 1,
      votes: [],
      state: 'requested',
      dryRun: null,
      error: null,
      updatedAt: T0,
    });
  });

  it('needs two approvals in a protected namespace', () => {
    expect(request(definePolicy({ ...policy, protectedNamespaces: ['kube-*'] })).requiredApprovals).toBe(2);
    expect(request(definePolicy({ ...policy, protectedNamespaces: ['monitoring'] })).requiredApprovals).toBe(1);
  });

  it('logs the request and emits a Kubernetes Event with reason TokenwatchRestart', () => {
    const r = createApproval({ id: 'appr_0000001', action: 'restart', target, requester: REQ, requesterGroups: [] }, policy, T0);
    expect(r.ok && r.effects).toEqual([
      { type: 'action-log', from: null, to: 'requested', actor: REQ, summary: 'restart of DaemonSet kube-system/kube-multus-ds in prod-eks requested' },
      {
        type: 'kube-event',
        reason: 'TokenwatchRestart',
        eventType: 'Normal',
        message: 'restart of DaemonSet kube-system/kube-multus-ds in prod-eks requested by U0REQUEST1; expires 2026-11-29 12:30 UTC (tokenwatch approval appr_0000001)',
      },
    ]);
  });
});

describe('canRequest', () => {
  const cases: Array<{ name: string; user: string; groups: string[]; p: Partial<ApprovalPolicy>; action?: 'restart' | 'recreate-serviceaccount' | 'snooze'; t?: Partial<ActionTarget>; want: RefusalReason | 'ok' }> = [
    { name: 'wildcard requester', user: 'U0ANYONE01', groups: [], p: { requesters: ['*'] }, want: 'ok' },
    { name: 'listed user', user: 'U0ANYONE01', groups: [], p: { requesters: ['U0ANYONE01'] }, want: 'ok' },
    { name: 'member of a listed group', user: 'U0ANYONE01', groups: ['S0SRE00001'], p: { requesters: ['S0SRE00001'] }, want: 'ok' },
    { name: 'unlisted user', user: 'U0ANYONE01', groups: ['S0OTHER001'], p: { requesters: ['S0SRE00001'] }, want: 'not-a-requester' },
    { name: 'action not in allow-list', user: REQ, groups: [], p: { actions: ['snooze'] }, want: 'action-not-allowed' },
    { name: 'restart of a ServiceAccount', user: REQ, groups: [], p: {}, t: { kind: 'ServiceAccount' }, want: 'action-not-allowed' },
    { name: 'recreate of a DaemonSet', user: REQ, groups: [], p: {}, action: 'recreate-serviceaccount', want: 'action-not-allowed' },
    { name: 'denied namespace', user: REQ, groups: [], p: { namespaces: { allow: [], deny: ['kube-system'] } }, want: 'namespace-not-allowed' },
    { name: 'namespace outside allow-list', user: REQ, groups: [], p: { namespaces: { allow: ['monitoring'], deny: [] } }, want: 'namespace-not-allowed' },
    { name: 'namespace in allow-list prefix', user: REQ, groups: [], p: { namespaces: { allow: ['kube-*'], deny: [] } }, want: 'ok' },
    { name: 'deny wins over allow', user: REQ, groups: [], p: { namespaces: { allow: ['kube-*'], deny: ['kube-system'] } }, want: 'namespace-not-allowed' },
  ];
  for (const c of cases) {
    it(`${c.name} → ${c.want}`, () => {
      const r = canRequest(c.user, c.action ?? 'restart', { ...target, ...c.t }, definePolicy({ ...policy, ...c.p }), c.groups);
      expect(r.ok ? 'ok' : r.reason).toBe(c.want);
    });
  }

  it('explains refusals in a sentence', () => {
    expect(worded(canRequest('U0ANYONE01', 'restart', target, definePolicy({ ...policy, requesters: ['S0SRE00001'] }), []))).toEqual({
      ok: false,
      reason: 'not-a-requester',
      message: 'You are not allowed to request actions in prod-eks; ask someone on the tokenwatch requester list.',
    });
    expect(worded(canRequest(REQ, 'recreate-serviceaccount', { ...target, kind: 'ServiceAccount', name: 'multus' }, definePolicy({ ...policy, actions: ['restart', 'snooze'] }), []))).toEqual({
      ok: false,
      reason: 'action-not-allowed',
      message: 'A ServiceAccount recreation is not allowed here: the policy for prod-eks allows restart and snooze.',
    });
    expect(worded(canRequest(REQ, 'recreate-serviceaccount', target, policy, []))).toEqual({
      ok: false,
      reason: 'action-not-allowed',
      message: 'A ServiceAccount recreation cannot target a DaemonSet.',
    });
  });
});

describe('decide: votes', () => {
  it('approve by an allowed approver → approved, with execute', () => {
    const a = request();
    const d = decide(a, ev.approve('U0APPROVE1'), policy, T0 + MIN);
    expect(d.ok && d.next).toBe('approved');
    expect(d.ok && d.patch).toEqual({ state: 'approved', updatedAt: T0 + MIN, votes: [{ user: 'U0APPROVE1', vote: 'approve', at: T0 + MIN }] });
    expect(d.ok && d.effects.map((e) => e.type)).toEqual(['action-log', 'kube-event', 'update-approval-message', 'execute']);
  });

  it('approve by a member of an approver user group → approved', () => {
    const d = decide(request(), ev.approve('U0GROUPIE1', ['S0OPS00001']), policy, T0 + MIN);
    expect(d.ok && d.next).toBe('approved');
  });

  const refusals: Array<{ name: string; prep?: Array<[ApprovalEvent, number]>; p?: ApprovalPolicy; requestedUnder?: ApprovalPolicy; event: ApprovalEvent; at: number; reason: RefusalReason; message: string }> = [
    {
      name: 'self-approval',
      event: ev.approve(REQ),
      at: T0 + MIN,
      reason: 'self-approval',
      message: 'You requested this restart, so someone else must approve it (no self-approval).',
    },
    {
      name: 'self-approval even when the requester is an approver',
      p: definePolicy({ ...policy, approvers: [REQ, 'U0APPROVE1'] }),
      event: ev.approve(REQ),
      at: T0 + MIN,
      reason: 'self-approval',
      message: 'You requested this restart, so someone else must approve it (no self-approval).',
    },
    {
      name: 'non-approver',
      event: ev.approve('U0OUTSIDE1', ['S0OTHER001']),
      at: T0 + MIN,
      reason: 'not-an-approver',
      message: 'You are not an approver for prod-eks, so you cannot approve this restart; approvers: <@U0APPROVE1>, <@U0APPROVE2> and <!subteam^S0OPS00001>.',
    },
    {
      name: 'non-approver rejecting',
      event: ev.reject('U0OUTSIDE1'),
      at: T0 + MIN,
      reason: 'not-an-approver',
      message: 'You are not an approver for prod-eks, so you cannot reject this restart.',
    },
    {
      name: 'approve at exactly expiresAt',
      event: ev.approve('U0APPROVE1'),
      at: T0 + 30 * MIN,
      reason: 'expired',
      message: 'This restart request expired at 2026-11-29 12:30 UTC, so it can no longer be approved; request it again if it is still needed.',
    },
    {
      name: 'reject after expiry',
      event: ev.reject('U0APPROVE1'),
      at: T0 + 31 * MIN,
      reason: 'expired',
      message: 'This restart request expired at 2026-11-29 12:30 UTC, so it can no longer be rejected; request it again if it is still needed.',
    },
    {
      name: 'approve after the expire event',
      prep: [[ev.expire(), T0 + 30 * MIN]],
      event: ev.approve('U0APPROVE1'),
      at: T0 + 31 * MIN,
      reason: 'expired',
      message: 'This restart request expired at 2026-11-29 12:30 UTC, so it can no longer be approved; request it again if it is still needed.',
    },
    {
      name: 'double vote (two approvals needed)',
      p: definePolicy({ ...policy, protectedNamespaces: ['kube-system'] }),
      prep: [[ev.approve('U0APPROVE1'), T0 + MIN]],
      event: ev.approve('U0APPROVE1'),
      at: T0 + 2 * MIN,
      reason: 'already-voted',
      message: 'You already approved this restart; it needs 1 more approval from someone else.',
    },
    {
      name: 'reject after own approval (one vote per user)',
      p: definePolicy({ ...policy, protectedNamespaces: ['kube-system'] }),
      prep: [[ev.approve('U0APPROVE1'), T0 + MIN]],
      event: ev.reject('U0APPROVE1'),
      at: T0 + 2 * MIN,
      reason: 'already-voted',
      message: 'You already approved this restart, so you cannot reject it now; another approver still can.',
    },
    {
      name: 'approve after approval (second click)',
      prep: [[ev.approve('U0APPROVE1'), T0 + MIN]],
      event: ev.approve('U0APPROVE2'),
      at: T0 + 2 * MIN,
      reason: 'already-decided',
      message: 'This restart was already approved by <@U0APPROVE1> at 2026-11-29 12:01 UTC and is about to run; it no longer takes votes.',
    },
    {
      name: 'approve while running',
      prep: [
        [ev.approve('U0APPROVE1'), T0 + MIN],
        [ev.start(), T0 + MIN],
      ],
      event: ev.approve('U0APPROVE2'),
      at: T0 + 2 * MIN,
      reason: 'already-decided',
      message: 'This restart was already approved by <@U0APPROVE1> at 2026-11-29 12:01 UTC and is now running; it no longer takes votes.',
    },
    {
      name: 'reject after success',
      prep: [
        [ev.approve('U0APPROVE1'), T0 + MIN],
        [ev.start(), T0 + MIN],
        [ev.succeed(), T0 + 5 * MIN],
      ],
      event: ev.reject('U0APPROVE2'),
      at: T0 + 6 * MIN,
      reason: 'already-decided',
      message: 'This restart was already approved by <@U0APPROVE1> at 2026-11-29 12:01 UTC and has succeeded; it no longer takes votes.',
    },
    {
      name: 'approve after a reject (reject wins)',
      prep: [[ev.reject('U0APPROVE2', 'not during business hours'), T0 + MIN]],
      event: ev.approve('U0APPROVE1'),
      at: T0 + 2 * MIN,
      reason: 'already-decided',
      message: 'This restart was already rejected by <@U0APPROVE2> at 2026-11-29 12:01 UTC (“not during business hours”); it no longer takes votes.',
    },
    {
      name: 'approve after failure',
      prep: [
        [ev.approve('U0APPROVE1'), T0 + MIN],
        [ev.start(), T0 + MIN],
        [ev.fail('daemonsets.apps "kube-multus-ds" not found'), T0 + 2 * MIN],
      ],
      event: ev.approve('U0APPROVE2'),
      at: T0 + 3 * MIN,
      reason: 'already-decided',
      message:
        'This restart was already approved by <@U0APPROVE1> at 2026-11-29 12:01 UTC and has failed (daemonsets.apps "kube-multus-ds" not found); it no longer takes votes.',
    },
    {
      name: 'policy changed: namespace now denied',
      requestedUnder: policy,
      p: definePolicy({ ...policy, namespaces: { allow: [], deny: ['kube-system'] } }),
      event: ev.approve('U0APPROVE1'),
      at: T0 + MIN,
      reason: 'namespace-not-allowed',
      message: 'Actions on namespace kube-system are not allowed by the policy for prod-eks.',
    },
    {
      name: 'policy changed: action no longer allowed',
      requestedUnder: policy,
      p: definePolicy({ ...policy, actions: ['snooze'] }),
      event: ev.approve('U0APPROVE1'),
      at: T0 + MIN,
      reason: 'action-not-allowed',
      message: 'A restart is not allowed here: the policy for prod-eks allows snooze.',
    },
  ];
  for (const c of refusals) {
    it(`refuses: ${c.name} → ${c.reason}`, () => {
      const p = c.p ?? policy;
      const a = run(request(c.requestedUnder ?? p), c.prep ?? [], p);
      expect(refusal(decide(a, c.event, p, c.at))).toEqual({ reason: c.reason, message: c.message });
    });
  }

  it('accepts a vote one millisecond before expiry', () => {
    const d = decide(request(), ev.approve('U0APPROVE1'), policy, T0 + 30 * MIN - 1);
    expect(d.ok && d.next).toBe('approved');
  });

  it('allows self-approval when the policy says so', () => {
    const p = definePolicy({ ...policy, approvers: [REQ], allowSelfApproval: true });
    const d = decide(request(p), ev.approve(REQ), p, T0 + MIN);
    expect(d.ok && d.next).toBe('approved');
  });

  it('a protected namespace needs two distinct approvers', () => {
    const p = definePolicy({ ...policy, protectedNamespaces: ['kube-system'] });
    const a = request(p);
    const first = decide(a, ev.approve('U0APPROVE1'), p, T0 + MIN);
    expect(first.ok && first.next).toBe('requested');
    expect(first.ok && first.effects.map((e) => e.type)).toEqual(['action-log', 'update-approval-message']);
    expect(first.ok && first.effects.find((e) => e.type === 'action-log')).toEqual({
      type: 'action-log',
      from: 'requested',
      to: 'requested',
      actor: 'U0APPROVE1',
      summary: 'restart of DaemonSet kube-system/kube-multus-ds in prod-eks: approval 1 of 2',
    });
    const a1 = applyTransition(a, first as Extract<Decision, { ok: true }>);
    const second = decide(a1, ev.approve('U0APPROVE2'), p, T0 + 2 * MIN);
    expect(second.ok && second.next).toBe('approved');
    expect(second.ok && second.patch.votes?.map((v) => v.user)).toEqual(['U0APPROVE1', 'U0APPROVE2']);
    expect(second.ok && second.effects.some((e) => e.type === 'execute')).toBe(true);
  });

  it('one reject rejects, even after a first approval', () => {
    const p = definePolicy({ ...policy, protectedNamespaces: ['kube-system'] });
    const a = run(request(p), [[ev.approve('U0APPROVE1'), T0 + MIN]], p);
    const d = decide(a, ev.reject('U0APPROVE2', 'wait for the CNI upgrade'), p, T0 + 2 * MIN);
    expect(d.ok && d.next).toBe('rejected');
    expect(d.ok && d.patch.votes).toEqual([
      { user: 'U0APPROVE1', vote: 'approve', at: T0 + MIN },
      { user: 'U0APPROVE2', vote: 'reject', at: T0 + 2 * MIN, reason: 'wait for the CNI upgrade' },
    ]);
    expect(d.ok && d.effects.map((e) => e.type)).toEqual(['action-log', 'kube-event', 'update-approval-message']);
  });

  it('the requester may withdraw (reject) their own request', () => {
    const d = decide(request(), ev.reject(REQ), policy, T0 + MIN);
    expect(d.ok && d.next).toBe('rejected');
    expect(d.ok && d.effects.find((e) => e.type === 'action-log')).toEqual({
      type: 'action-log',
      from: 'requested',
      to: 'rejected',
      actor: REQ,
      summary: 'restart of DaemonSet kube-system/kube-multus-ds in prod-eks withdrawn',
    });
  });

  it('of ten simultaneous approve clicks on the same snapshot, each is accepted alone; the store CAS lets one win and the rest are refused on re-read', () => {
    const a = request();
    const clicks = Array.from({ length: 10 }, (_, i) => decide(a, ev.approve(i % 2 ? 'U0APPROVE1' : 'U0APPROVE2'), policy, T0 + MIN));
    expect(clicks.every((d) => d.ok && d.next === 'approved' && d.from === 'requested')).toBe(true);
    // The first CAS (requested → approved) wins; the other nine re-read the approved row:
    const winner = applyTransition(a, clicks[0] as Extract<Decision, { ok: true }>);
    const reread = clicks.slice(1).map((_, i) => decide(winner, ev.approve(i % 2 ? 'U0APPROVE1' : 'U0APPROVE2'), policy, T0 + MIN));
    expect(reread.map((d) => (d.ok ? 'ok' : d.reason))).toEqual(Array(9).fill('already-decided'));
  });
});

describe('decide: system events', () => {
  const approved = (): Approval => run(request(), [[ev.approve('U0APPROVE1'), T0 + MIN]]);

  const table: Array<{ from: () => Approval; event: ApprovalEvent; at: number; want: ApprovalState | RefusalReason }> = [
    { from: () => request(), event: ev.expire(), at: T0 + 30 * MIN, want: 'expired' },
    { from: () => request(), event: ev.expire(), at: T0 + 30 * MIN - 1, want: 'invalid-transition' },
    { from: approved, event: ev.expire(), at: T0 + 60 * MIN, want: 'already-decided' },
    { from: () => request(), event: ev.start(), at: T0 + MIN, want: 'invalid-transition' },
    { from: approved, event: ev.start(), at: T0 + MIN, want: 'running' },
    { from: () => run(approved(), [[ev.start(), T0 + MIN]]), event: ev.start(), at: T0 + MIN, want: 'already-decided' },
    { from: () => run(approved(), [[ev.start(), T0 + MIN]]), event: ev.succeed(), at: T0 + 2 * MIN, want: 'succeeded' },
    { from: () => run(approved(), [[ev.start(), T0 + MIN]]), event: ev.fail('timeout'), at: T0 + 2 * MIN, want: 'failed' },
    { from: approved, event: ev.succeed(), at: T0 + MIN, want: 'invalid-transition' },
    { from: approved, event: ev.fail('precondition failed'), at: T0 + MIN, want: 'failed' },
    { from: () => request(), event: ev.fail('dry run: forbidden'), at: T0, want: 'failed' },
    { from: () => run(approved(), [[ev.start(), T0 + MIN], [ev.succeed(), T0 + 2 * MIN]]), event: ev.fail('late'), at: T0 + 3 * MIN, want: 'invalid-transition' },
    { from: () => run(request(), [[ev.reject('U0APPROVE1'), T0 + MIN]]), event: ev.start(), at: T0 + 2 * MIN, want: 'already-decided' },
  ];
  for (const c of table) {
    it(`${c.from().state} + ${c.event.type} at +${(c.at - T0) / MIN} min → ${c.want}`, () => {
      const d = decide(c.from(), c.event, policy, c.at);
      expect(d.ok ? d.next : d.reason).toBe(c.want);
    });
  }

  it('success starts verification and logs; failure records the error and a Warning event', () => {
    const running = run(approved(), [[ev.start(), T0 + MIN]]);
    const ok = decide(running, ev.succeed(), policy, T0 + 4 * MIN);
    expect(ok.ok && ok.effects.map((e) => e.type)).toEqual(['action-log', 'kube-event', 'update-approval-message']);
    const bad = decide(running, ev.fail('rollout timed out after 10 min'), policy, T0 + 11 * MIN);
    expect(bad.ok && bad.patch).toEqual({ state: 'failed', updatedAt: T0 + 11 * MIN, error: 'rollout timed out after 10 min' });
    expect(bad.ok && bad.effects[1]).toEqual({
      type: 'kube-event',
      reason: 'TokenwatchRestart',
      eventType: 'Warning',
      message: 'restart of DaemonSet kube-system/kube-multus-ds in prod-eks failed: rollout timed out after 10 min (tokenwatch approval appr_0000001)',
    });
  });

  it('expire message for a request that is not yet due names the expiry', () => {
    expect(refusal(decide(request(), ev.expire(), policy, T0))).toEqual({
      reason: 'invalid-transition',
      message: 'This restart request does not expire until 2026-11-29 12:30 UTC.',
    });
  });

  it('keeps Kubernetes Event messages within 1024 characters', () => {
    const running = run(approved(), [[ev.start(), T0 + MIN]]);
    const d = decide(running, ev.fail('x'.repeat(5000)), policy, T0 + 2 * MIN);
    const k = d.ok ? d.effects.find((e) => e.type === 'kube-event') : undefined;
    expect(k && k.type === 'kube-event' && k.message.length).toBe(1024);
  });
});

describe('votes re-checked against the approvers in force at the decision', () => {
  const protectedPolicy = (approvers: string[]) => definePolicy({ approvers, requesters: ['*'], actions: ['restart'], protectedNamespaces: ['kube-system'], protectedApprovals: 2 });

  it('a removed approver’s earlier vote is void: the quorum is not reached, and the action log says why', () => {
    const before = protectedPolicy(['U0BOB00001', 'U0DAVE0001', 'S0OPS00001']);
    const a = run(request(before), [[ev.approve('U0BOB00001'), T0 + MIN]], before);
    const after = protectedPolicy(['U0DAVE0001', 'S0OPS00001']);
    const d = decide(a, ev.approve('U0DAVE0001', [], {}), after, T0 + 2 * MIN);
    if (!d.ok) throw new Error('refused');
    expect(d.next).toBe('requested');
    expect(d.effects.find((e) => e.type === 'action-log')).toMatchObject({ summary: expect.stringContaining('approval 1 of 2; void (no longer allowed to approve): U0BOB00001') });
    expect(d.effects.some((e) => e.type === 'execute')).toBe(false);
  });

  it('an earlier vote through a user group counts only while its voter is in the group now', () => {
    const p = protectedPolicy(['U0DAVE0001', 'S0OPS00001']);
    const a = run(request(p), [[ev.approve('U0CARL0001', ['S0OPS00001']), T0 + MIN]], p);
    expect(voidApprovals(a, p, { U0CARL0001: ['S0OPS00001'] })).toEqual([]);
    expect(voidApprovals(a, p, {})).toEqual(['U0CARL0001']);
    const still = decide(a, ev.approve('U0DAVE0001', [], { U0CARL0001: ['S0OPS00001'] }), p, T0 + 2 * MIN);
    expect(still.ok && still.next).toBe('approved');
    const left = decide(a, ev.approve('U0DAVE0001', [], {}), p, T0 + 2 * MIN);
    expect(left.ok && left.next).toBe('requested');
  });
});
