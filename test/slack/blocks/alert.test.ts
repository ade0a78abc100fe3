/**
 * The alert of one root cause (src/slack/blocks/alert.ts): header with the worst fact, the signals named, four
 * fields with bucketed counts, the fix in one line, one primary Restart button and an overflow menu; within Slack's
 * Block Kit limits (validateMessage / validateView).
 */
import { describe, expect, it } from 'vitest';
import { alertView, bucket, buysDays, mergedAlertMessage, podCounts, recreateConfirmModal, renderAlert, restartLabel, signalChangeMessage, worstFact } from '../../../src/slack/blocks/alert.js';

const alertMessage = (...a: Parameters<typeof alertView>) => renderAlert(alertView(...a));
import { validateView } from '../../../src/slack/blocks/limits.js';
import { validateMessage } from './validate.js';
import { allText, HOUR, multusFinding, NOW } from './fixtures.js';

/** Every interactive element of the actions blocks (buttons and overflow menus). */
function buttonsIn(blocks: unknown[]): Array<Record<string, unknown>> {
  return (blocks as Array<Record<string, unknown>>).filter((b) => b.type === 'actions').flatMap((b) => b.elements as Array<Record<string, unknown>>);
}

const DAY = 24 * HOUR;
const valid = <T extends { text: string; blocks: unknown[] }>(m: T): T => {
  expect(validateMessage(m)).toEqual([]);
  return m;
};
const ID = (n: number) => `opaque_id_${n}`.padEnd(12, 'x');
const ds = { kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds' } as const;

describe('alert message of a group', () => {
  const stale = multusFinding({ severity: 'critical', missingPods: ['kube-multus-ds-k2x8p'] });
  const unauth = multusFinding({ id: 'f401', kind: 'unauthorized', severity: 'critical', rejectionAt: null, tokens: [], pods: [], requests: 37, lastSeen: new Date(NOW - 10 * 60_000).toISOString() });
  const ctx = {
    now: NOW,
    restarts: [{ workload: ds, id: ID(1), buysDays: 90 }],
    overflow: [
      { action: 'snooze' as const, label: 'Snooze 1 day', id: ID(2) },
      { action: 'details' as const, label: 'Details', id: ID(3) },
    ],
    podsTotal: 6,
  };

  it('stale tokens then 401s: one message whose header says the worst fact and whose fields name each signal', () => {
    const m = valid(alertMessage([unauth, stale], [unauth, stale], ctx));
    expect((m.blocks[0] as { text: { text: string } }).text.text).toBe('🔴 Critical · prod-eks · kube-system/multus — requests now fail with 401');
    const section = m.blocks[1] as { text: { text: string }; fields: Array<{ text: string }> };
    expect(section.text.text).toContain('*Signals:* requests rejected with 401 · stale tokens');
    // Pods come from the stale signal (the 401 signal names none): 1 live of 6, 1 gone — never "0 of 6".
    expect(section.fields.map((f) => f.text)).toEqual([
      '*Workload*\nDaemonSet `kube-system/kube-multus-ds`',
      '*Pods*\n1 of 6 live · 1 gone',
      '*Rejection*\n*Now*: requests fail with 401',
      '*Requests*\n20+ rejected · 1,000+ with stale tokens\nstill coming in',
    ]);
    expect((m.blocks[2] as { text: { text: string } }).text.text).toMatch(/^\*Fix:\* restart DaemonSet `kube-system\/kube-multus-ds`: its pods get fresh tokens, valid for 90 days\./);
    const buttons = buttonsIn(m.blocks);
    expect(buttons.map((b) => [b.type, b.action_id, b.style])).toEqual([
      ['button', 'tw_restart', 'primary'],
      ['overflow', 'tw_more', undefined],
    ]);
    expect((buttons[0]!.text as { text: string }).text).toBe('Restart DaemonSet kube-multus-ds — buys 90 days');
    // No confirm on the overflow menu (Slack would show it for every option).
    expect(buttons[1]!.confirm).toBeUndefined();
    // Calm: header, impact + fields, fix, actions — nothing else before or after the buttons.
    expect(m.blocks.map((b) => b.type)).toEqual(['header', 'section', 'section', 'actions']);
    expect(allText(m.blocks)).not.toMatch(/Sources|Observed, not inferred|Finding `|▁|Oldest token age/);
  });

  it('a new use does not change the message; a stopped signal does', () => {
    const a = alertMessage([stale], [stale], ctx);
    const b = alertMessage([{ ...stale, requests: stale.requests + 1 }], [{ ...stale, requests: stale.requests + 1 }], ctx);
    expect(JSON.stringify(b)).toBe(JSON.stringify(a));
    const both = alertMessage([unauth, stale], [unauth, stale], ctx);
    expect(JSON.stringify(both)).not.toBe(JSON.stringify(a));
  });

  it('resolved variant: ✅ header naming the group, every signal, no buttons, only Details in its menu', () => {
    const m = valid(alertMessage([unauth, stale], [], { ...ctx, resolved: { at: NOW, note: 'no stale token use and no 401s after the fix for the settle period' } }));
    expect((m.blocks[0] as { text: { text: string } }).text.text).toBe('✅ Resolved · prod-eks · kube-system/multus');
    expect(allText(m.blocks)).toContain('*Signals:* requests rejected with 401 · stale tokens');
    const menu = buttonsIn(m.blocks);
    expect(menu.map((b) => b.type)).toEqual(['overflow']);
    expect((menu[0]!.options as Array<{ text: { text: string } }>).map((o) => o.text.text)).toEqual(['Details']);
  });

  it('resolved variant tells the state now: the pods running now with fresh tokens, what fixed it and when; gone pods only in Details', () => {
    const fixAt = NOW - 3 * HOUR;
    const fb = multusFinding({ namespace: 'logging', serviceAccount: 'fluent-bit', severity: 'warning', workloads: [{ kind: 'DaemonSet', namespace: 'logging', name: 'fluent-bit' }], pods: ['fb-1', 'fb-2', 'fb-3', 'fb-4', 'fb-5', 'fb-6'], missingPods: ['fb-1', 'fb-2', 'fb-3', 'fb-4', 'fb-5', 'fb-6'] });
    const resolved = { at: NOW, note: 'no stale token use and no 401s after the fix for the settle period', fix: { label: 'restart of DaemonSet logging/fluent-bit', at: fixAt }, pods: { running: 6, fresh: 6 } };
    const m = valid(alertMessage([fb], [], { ...ctx, resolved }));
    const fields = (m.blocks[1] as { fields: Array<{ text: string }> }).fields.map((f) => f.text);
    expect(fields[0]).toBe('*Workload*\nDaemonSet `logging/fluent-bit`');
    expect(fields[1]).toBe('*Pods now*\n6 pods with fresh tokens');
    expect(fields[2]).toBe(`*Fixed*\nrestart of DaemonSet logging/fluent-bit, <!date^${fixAt / 1000}^{date_short_pretty} {time}|2026-11-29 09:00 UTC>`);
    expect(fields[3]).toMatch(/^\*Before\*\n1,000\+ with stale tokens\nlast /);
    const text = allText(m.blocks);
    expect(text).not.toMatch(/gone|live|Rejection|unknown/);
    // Some pods not restarted since the fix: said apart; cluster state not read: said so, never "0".
    const mixed = valid(alertMessage([fb], [], { ...ctx, resolved: { ...resolved, pods: { running: 6, fresh: 4 } } }));
    expect(allText(mixed.blocks)).toContain('*Pods now*\\n4 pods with fresh tokens · 2 started before the fix, no stale token use since');
    const unread = valid(alertMessage([fb], [], { ...ctx, resolved: { at: NOW, note: 'quiet' } }));
    expect(allText(unread.blocks)).toContain('*Pods now*\\nunknown: cluster state not read');
    expect(allText(unread.blocks)).toContain('*Fixed*\\nno action by tokenwatch; quiet since');
  });

  it('a known stop-gap (after a recurrence, or a token file the node probe saw): the headline fix is the cause\'s, Restart says it will recur', () => {
    const m = valid(alertMessage([unauth, stale], [unauth, stale], { ...ctx, stopGap: { reason: 'recurrence', at: NOW - HOUR } }));
    const fix = (m.blocks[2] as { text: { text: string } }).text.text;
    expect(fix).toMatch(/^\*Fix:\* Move to the thick plugin \(multus-daemon, v4\) or run v4 thin with --cleanup-config-on-exit=true and --multus-conf-file=auto\.\n/);
    expect(fix).toContain('*Stop-gap:* restart DaemonSet `kube-system/kube-multus-ds`: fresh tokens for 90 days, then it recurs (the stale tokens came back after a restart (recurrence ');
    const button = buttonsIn(m.blocks)[0]!;
    expect((button.text as { text: string }).text).toBe('Restart DaemonSet kube-multus-ds — buys 90 days, will recur');
    expect(JSON.stringify(button.confirm)).toContain('A stop-gap: the cause stays, so the stale tokens come back.');
    // The probe's observation alone (the finding's cause, observed) does the same.
    const observed = { ...stale, cause: { ...stale.cause, id: 'static-token-file' as const, evidence: ['node probe: /etc/cni/net.d/multus.d/multus.kubeconfig on node n1, token issued 2026-10-01T00:00:00Z'] } };
    const p = valid(alertMessage([observed], [observed], ctx));
    expect(allText(p.blocks)).toContain('the node probe found its token copied into a file on the node');
    expect((buttonsIn(p.blocks)[0]!.text as { text: string }).text).toBe('Restart DaemonSet kube-multus-ds — buys 90 days, will recur');
    // Without either: the restart is the fix shown.
    expect((alertMessage([stale], [stale], ctx).blocks[2] as { text: { text: string } }).text.text).toMatch(/^\*Fix:\* restart DaemonSet/);
  });

  it('no restartable workload: no Restart, the fix from the cause in one line', () => {
    const legacy = multusFinding({ kind: 'legacy-token', namespace: 'ci', serviceAccount: 'deployer', workloads: [], rejectionAt: null, tokens: [], pods: [], severity: 'info' });
    const m = valid(alertMessage([legacy], [legacy], { now: NOW, restarts: [], overflow: [{ action: 'recreate-serviceaccount', label: 'Recreate ServiceAccount…', id: ID(4) }] }));
    expect((m.blocks[0] as { text: { text: string } }).text.text).toBe('🔵 Info · prod-eks · ci/deployer — legacy Secret token in use');
    expect(buttonsIn(m.blocks).map((b) => b.type)).toEqual(['overflow']);
    expect(allText(m.blocks)).toContain('*Rejection*\\nnone: a legacy Secret token does not expire');
  });

  it('401s alone: pods unknown (a rejected request names no pod), never "0 of 6"', () => {
    const m = valid(alertMessage([unauth], [unauth], ctx));
    expect(allText(m.blocks)).toContain('*Pods*\\nunknown: rejected requests name no pod');
    expect(allText(m.blocks)).not.toContain('0 of 6');
  });

  it('worst fact in words: days left, passed, 401s past', () => {
    expect(worstFact([multusFinding({ rejectionAt: new Date(NOW + 12 * DAY + HOUR).toISOString() })], NOW)).toBe('rejected in 12 days');
    expect(worstFact([multusFinding({ rejectionAt: new Date(NOW - HOUR).toISOString() })], NOW)).toBe('rejection date passed');
    expect(worstFact([{ ...unauth, lastSeen: new Date(NOW - 5 * HOUR).toISOString() }], NOW)).toBe('requests failed with 401');
  });

  it('the last day before rejection in hours, never "rejected in 0 days"', () => {
    const at = (ms: number) => [multusFinding({ rejectionAt: new Date(NOW + ms).toISOString() })];
    expect(worstFact(at(DAY + HOUR), NOW)).toBe('rejected in 1 day');
    expect(worstFact(at(DAY - 1000), NOW)).toBe('rejected in 23 hours');
    expect(worstFact(at(5 * HOUR + 59 * 60_000), NOW)).toBe('rejected in 5 hours');
    expect(worstFact(at(HOUR), NOW)).toBe('rejected in 1 hour');
    expect(worstFact(at(59 * 60_000), NOW)).toBe('rejected in under an hour');
    const m = alertMessage(at(5 * HOUR), at(5 * HOUR), ctx);
    expect(allText(m.blocks)).toContain('will reject in *5 hours*');
  });

  it('stays within Block Kit limits for long names and many workloads', () => {
    const long = 'x'.repeat(300);
    const f = multusFinding({ cluster: long, namespace: long, serviceAccount: long, workloads: Array.from({ length: 40 }, (_, i) => ({ kind: 'Deployment', namespace: long, name: `${long}${i}` })) });
    const m = valid(alertMessage([f], [f], { now: NOW, restarts: f.workloads.slice(0, 3).map((w, i) => ({ workload: w, id: ID(i), buysDays: 365 })), overflow: ctx.overflow }));
    for (const b of buttonsIn(m.blocks).filter((x) => x.type === 'button')) expect((b.text as { text: string }).text.length).toBeLessThanOrEqual(75);
  });
});

describe('alert helpers', () => {
  it('bucket rounds down to 1, 2, 5 × 10ⁿ', () => {
    expect([0, 1, 2, 3, 5, 6, 10, 19, 20, 49, 137, 1234, 5000].map(bucket)).toEqual(['0', '1', '2', '2+', '5', '5+', '10', '10+', '20', '20+', '100+', '1,000+', '5,000']);
  });

  it('buysDays is rejection − warnafter of a stale token (EKS: 90 days)', () => {
    expect(buysDays([multusFinding()])).toBe(90);
    expect(buysDays([multusFinding({ tokens: [] })])).toBeNull();
  });

  it('restartLabel fits a button and says what it buys', () => {
    expect(restartLabel({ workload: ds, buysDays: 90 })).toBe('Restart DaemonSet kube-multus-ds — buys 90 days');
    expect(restartLabel({ workload: { ...ds, name: 'n'.repeat(100) }, buysDays: 90 }).length).toBeLessThanOrEqual(75);
    expect(restartLabel({ workload: ds, buysDays: null })).toBe('Restart DaemonSet kube-multus-ds');
    expect(restartLabel({ workload: ds, buysDays: 90, stopGap: true })).toBe('Restart DaemonSet kube-multus-ds — buys 90 days, will recur');
    expect(restartLabel({ workload: { ...ds, name: 'n'.repeat(100) }, buysDays: 365, stopGap: true })).toMatch(/^Restart DaemonSet n+… — buys 365 days, will recur$/);
    expect(restartLabel({ workload: { ...ds, name: 'n'.repeat(100) }, buysDays: 365, stopGap: true }).length).toBeLessThanOrEqual(75);
    expect(restartLabel({ workload: ds, buysDays: null, stopGap: true })).toBe('Restart DaemonSet kube-multus-ds — stop-gap, will recur');
  });

  it('podCounts: gone pods apart from live ones, over every signal', () => {
    expect(podCounts([multusFinding({ pods: ['a', 'b', 'c'], missingPods: ['c'] }), multusFinding({ pods: ['a'] })])).toEqual({ live: 2, gone: 1 });
  });

  it('thread replies, merged pointer and the recreate confirm modal are valid', () => {
    const change = valid(signalChangeMessage('prod-eks', 'kube-system/multus', { started: ['unauthorized'], stopped: ['stale-token'] }, { requests: { unauthorized: 3 } }));
    expect(change.text).toBe('[prod-eks] kube-system/multus: requests rejected with 401 started, stale tokens stopped');
    valid(mergedAlertMessage('prod-eks', 'kube-system/multus', 'https://x.slack.com/archives/C1/p1'));
    const modal = recreateConfirmModal({ cluster: 'prod-eks', namespace: 'ci', serviceAccount: 'deployer' }, '{"id":"x"}', 2);
    expect(validateView(modal)).toEqual([]);
    expect(JSON.stringify(modal)).toContain('2 running pods of it loses its token');
    expect(validateView({ ...modal, title: { type: 'plain_text', text: 'A title far longer than twenty-four' } })).toEqual(['/view/title/text: 35 chars > 24']);
  });
});

describe('401s tied to a ServiceAccount by address and user agent alone', () => {
  const ctx = { now: NOW, restarts: [], overflow: [] };
  const text = 'source address 10.0.5.5 and user agent multus/v0.0.0 only, not corroborated';
  const weak = multusFinding({ id: 'f401', kind: 'unauthorized', severity: 'warning', rejectionAt: null, tokens: [], pods: [], requests: 3, lastSeen: new Date(NOW - 60_000).toISOString(), attribution: { basis: 'address-only', text } });

  it('never say requests now fail, and say on what the attribution rests', () => {
    const view = alertView([weak], [weak], ctx);
    expect(view.header).not.toContain('now fail');
    expect(view.header).toContain('401s from its address, not confirmed');
    expect(view.fields[2]).not.toContain('Now');
    expect(view.context.join('\n')).toContain(text);
    expect(allText(valid(renderAlert(view)).blocks)).not.toContain('refused by the API server now');
  });

  it('with a corroborated attribution, current 401s say requests now fail', () => {
    const strong = { ...weak, severity: 'critical' as const, attribution: { basis: 'corroborated' as const, text: 'corroborated: the stale-token uses from there stopped where the 401s started' } };
    const view = alertView([strong], [strong], ctx);
    expect(view.header).toContain('requests now fail with 401');
    expect(view.context.join('\n')).toContain('corroborated: the stale-token uses');
  });

  it('a finding with client-set X-Forwarded-For entries lists them in Details as ignored', async () => {
    const { detailsMessage } = await import('../../../src/slack/blocks/misc.js');
    const m = valid(detailsMessage({ ...weak, forwardedIPs: ['10.1.1.5'] }, [], { now: NOW }));
    expect(allText(m.blocks)).toContain('Forwarded-for entries (client-set, ignored)');
    expect(allText(m.blocks)).toContain('10.1.1.5');
  });
});
