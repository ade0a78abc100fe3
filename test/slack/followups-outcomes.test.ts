/**
 * The outcomes a requester is told (src/slack/followups.ts `outcomesOf`) for every way a request ends, and the words
 * of the messages: pure, no Slack.
 */
import { describe, expect, it } from 'vitest';
import type { StoredApproval } from '../../src/store/index.js';
import { escalationNotice, outcomeMessage, outcomesOf, reminderMessage } from '../../src/slack/followups.js';

const T0 = Date.parse('2026-11-20T12:00:00Z');
const MIN = 60_000;

function approval(over: Partial<StoredApproval>): StoredApproval {
  return {
    id: 'a1',
    action: 'restart',
    target: { cluster: 'prod-eks', kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds', findingId: 'f1' },
    requester: 'U0REQ',
    createdAt: T0,
    expiresAt: T0 + 30 * MIN,
    requiredApprovals: 1,
    votes: [],
    state: 'requested',
    dryRun: null,
    updatedAt: T0,
    message: null,
    ...over,
  };
}

const approved = { votes: [{ user: 'U0APP', vote: 'approve' as const, at: T0 + MIN }] };

describe('outcomesOf', () => {
  it('follows each ending', () => {
    expect(outcomesOf(approval({}))).toEqual([]);
    expect(outcomesOf(approval({ ...approved, state: 'running' }))).toEqual(['approved']);
    expect(outcomesOf(approval({ ...approved, state: 'succeeded' }))).toEqual(['approved', 'done']);
    expect(outcomesOf(approval({ ...approved, state: 'failed', error: 'rollout timed out' }))).toEqual(['approved', 'failed']);
    // A dry run that failed never reached approval: the requester was told at the click.
    expect(outcomesOf(approval({ state: 'failed', error: 'forbidden' }))).toEqual([]);
    expect(outcomesOf(approval({ state: 'expired' }))).toEqual(['expired']);
    // Two needed, one given: expired, not approved.
    expect(outcomesOf(approval({ ...approved, requiredApprovals: 2, state: 'expired' }))).toEqual(['expired']);
    expect(outcomesOf(approval({ state: 'rejected', votes: [{ user: 'U0APP', vote: 'reject', at: T0 + MIN }] }))).toEqual(['rejected']);
    expect(outcomesOf(approval({ state: 'rejected', votes: [{ user: 'U0REQ', vote: 'reject', at: T0 + MIN }] }))).toEqual([]);
    for (const [v, o] of [['resolved', 'verified'], ['recurrence', 'recurred'], ['persisting', 'persisting']] as const) {
      expect(outcomesOf(approval({ ...approved, state: 'succeeded', verification: { outcome: v, at: T0 + 3 * 60 * MIN } }))).toEqual(['approved', 'done', o]);
    }
    // A verification superseded by a later action is not told (the later one is).
    expect(outcomesOf(approval({ ...approved, state: 'succeeded', verification: { outcome: 'superseded', at: T0 } }))).toEqual(['approved', 'done']);
  });
});

describe('messages', () => {
  it('escape what the cluster and people wrote, and say what happened', () => {
    const a = approval({ ...approved, state: 'failed', error: 'pods <forbidden> & more', target: { cluster: 'prod-eks', kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds', findingId: 'f1' } });
    expect(outcomeMessage(a, 'failed', undefined).text).toBe('⚠️ Your restart request for DaemonSet `kube-system/kube-multus-ds` in *prod-eks* failed: pods &lt;forbidden&gt; &amp; more.');
    expect(outcomeMessage(approval({ ...approved, state: 'succeeded' }), 'recurred', { channel: 'C1', ts: '1.2' }).text).toContain('⚠️ Recurred: after your restart request');
    expect(outcomeMessage(approval({ ...approved, state: 'succeeded' }), 'persisting', undefined).text).toContain('⚠️ Not fixed yet');
    expect(reminderMessage(approval({}), ['U0APP', 'U0APQ'], T0 + 15 * MIN + 1).text).toContain('it expires in 15 min. <@U0APP> <@U0APQ>: you can approve or reject it.');
    expect(reminderMessage(approval({}), [], T0 + 15 * MIN).text).toContain('Nobody else may approve it');
    expect(escalationNotice(approval({ state: 'expired' }), 'S0ESC').text).toContain('<!subteam^S0ESC>: nobody acted');
    expect(escalationNotice(approval({ state: 'expired' }), undefined).text).not.toContain('subteam');
  });
});
