import { describe, expect, it } from 'vitest';
import { approvalEvent as ev, createApproval, decide, type Approval } from '../../../src/approvals/machine.js';
import { applyTransition } from '../../approvals/helpers.js';
import { definePolicy } from '../../approvals/helpers.js';
import { ACTION_IDS, approvalDecidedMessage, approvalRequestMessage, detailsMessage, escalationMessage, findingMessage, helpMessage, historyMessage, progressMessage, refusalMessage, statusMessage, unknownCommandMessage, verificationMessage, type ClusterStatus, type SlackMessage } from '../../../src/slack/blocks/index.js';
import { validateMessage } from './validate.js';
import { allText, buttonsIn, HOUR, idMinter, multusFinding, NOW } from './fixtures.js';

function valid(m: SlackMessage): SlackMessage {
  expect(validateMessage(m)).toEqual([]);
  return m;
}

describe('findingMessage', () => {
  it('renders the Multus alert: header, fields, cause, sparkline, buttons', () => {
    const { buttonsFor, minted } = idMinter();
    const hourly = { [String(NOW - HOUR)]: 40, [String(NOW - 3 * HOUR)]: 10 };
    const m = valid(findingMessage(multusFinding(), { now: NOW, buttonsFor, hourly, podsTotal: 12 }));
    expect(m.text).toBe('🔴 [prod-eks] critical: stale token used by kube-system/multus — rejected by the API server on 2026-12-04 (4 days left)');
    expect(m.blocks.map((b) => b.type)).toEqual(['header', 'section', 'section', 'context', 'actions']);
    expect(m.blocks[0]).toEqual({ type: 'header', text: { type: 'plain_text', text: '🔴 Critical · prod-eks · kube-system/multus', emoji: true } });
    const section = m.blocks[1] as { text: { text: string }; fields: Array<{ text: string }> };
    expect(section.text.text).toBe('*Stale token* used by ServiceAccount `kube-system/multus` in *prod-eks*: the API server will reject it in *4 days*.');
    expect(section.fields.map((f) => f.text)).toEqual([
      '*Workload*\nDaemonSet `kube-system/kube-multus-ds`',
      '*Pods affected*\n2 of 12\n`kube-multus-ds-zwh6w`, `kube-multus-ds-k2x8p`',
      // oldest warnAfter 2026-09-05T10:00Z, issued 3607 s earlier; now 2026-11-29T12:00Z → 85 d 3 h
      '*Oldest token age*\n85 d 3 h',
      '*Rejection*\n<!date^1796378400^{date_short_pretty} {time}|2026-12-04 10:00 UTC> (*4 days left*)',
      '*Requests*\n1,234 · first <!date^1793491200^{date_short_pretty} {time}|2026-11-01 00:00 UTC> · last <!date^1795950000^{date_short_pretty} {time}|2026-11-29 11:00 UTC>',
      '*User agent*\n`multus/v0.0.0 (linux/amd64) kubernetes/$Format`',
    ]);
    expect((m.blocks[2] as { text: { text: string } }).text.text).toBe(
      '*Cause* (`multus-thin`): The Multus thin plugin copies the ServiceAccount token once into /etc/cni/net.d/multus.d/multus.kubeconfig on the host; the multus binary keeps presenting it.\n' +
        '*Fix:* Move to the thick plugin (multus-daemon, v4) or run v4 thin with --cleanup-config-on-exit=true and --multus-conf-file=auto.\n' +
        '*Sources:* <https://github.com/aws/amazon-vpc-cni-k8s/issues/1868|aws/amazon-vpc-cni-k8s#1868> · <https://github.com/k8snetworkplumbingwg/multus-cni/issues/852|k8snetworkplumbingwg/multus-cni#852>',
    );
    expect((m.blocks[3] as { elements: Array<{ text: string }> }).elements.map((e) => e.text)).toEqual([
      // hours 13:00 yesterday … 12:00 today: 09:00 → 10 (level 1+round(6·10/40)=3 ▄), 11:00 → 40 (█), the rest 0
      'Requests per hour, last 24 h: `▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▄▁█▁` (max 40/h, 50 total)',
      'Finding `f3c1a9e07b2d`',
    ]);
    const buttons = buttonsIn(m.blocks);
    expect(buttons.map((b) => [b.action_id, (b.text as { text: string }).text, b.style ?? null, b.confirm ? 'confirm' : null])).toEqual([
      [ACTION_IDS.restart, 'Restart DaemonSet kube-multus-ds', 'danger', 'confirm'],
      [ACTION_IDS.recreateServiceAccount, 'Recreate ServiceAccount', 'danger', 'confirm'],
      [ACTION_IDS.snooze1d, 'Snooze 1d', null, null],
      [ACTION_IDS.snooze7d, 'Snooze 7d', null, null],
      [ACTION_IDS.details, 'Details', null, null],
    ]);
    // values are the minted opaque ids, in order, and the target stays server-side
    expect(buttons.map((b) => b.value)).toEqual(['btn_00000001', 'btn_00000002', 'btn_00000003', 'btn_00000004', 'btn_00000005']);
    expect([...minted.values()]).toEqual([
      { action: 'restart', workload: { kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds' } },
      { action: 'recreate-serviceaccount' },
      { action: 'snooze', days: 1 },
      { action: 'snooze', days: 7 },
      { action: 'details' },
    ]);
    expect(buttons[0]!.confirm).toEqual({
      title: { type: 'plain_text', text: 'Restart DaemonSet?', emoji: true },
      text: {
        type: 'plain_text',
        text: 'Ask for approval to restart DaemonSet kube-system/kube-multus-ds in prod-eks. Its pods are replaced and get fresh tokens. Nothing changes until an approver agrees.',
        emoji: true,
      },
      confirm: { type: 'plain_text', text: 'Request restart', emoji: true },
      deny: { type: 'plain_text', text: 'Cancel', emoji: true },
      style: 'danger',
    });
  });

  it('leaves out buttons buttonsFor declines, and workloads that cannot be restarted', () => {
    const f = multusFinding({
      workloads: [
        { kind: 'Job', namespace: 'kube-system', name: 'once' },
        { kind: 'Deployment', namespace: 'kube-system', name: 'helper' },
      ],
    });
    const m = valid(findingMessage(f, { now: NOW, buttonsFor: (a) => (a.action === 'restart' || a.action === 'details' ? 'opaque_id_1' : undefined) }));
    expect(buttonsIn(m.blocks).map((b) => (b.text as { text: string }).text)).toEqual(['Restart Deployment helper', 'Details']);
  });

  it('refuses a button value that is not an opaque id', () => {
    expect(() => findingMessage(multusFinding(), { now: NOW, buttonsFor: () => 'kube-system/kube-multus-ds' })).toThrow(
      'button value must be an opaque id',
    );
  });

  it('resolved variant: ✅ header, no buttons, resolution note', () => {
    const { buttonsFor } = idMinter();
    const m = valid(findingMessage(multusFinding(), { now: NOW, buttonsFor, resolved: { at: NOW, note: 'no stale use for 2 h after the restart' } }));
    expect(m.text).toBe('✅ [prod-eks] resolved: stale token used by kube-system/multus');
    expect((m.blocks[0] as { text: { text: string } }).text.text).toBe('✅ Resolved · prod-eks · kube-system/multus');
    expect(m.blocks.some((b) => b.type === 'actions')).toBe(false);
    expect((m.blocks[1] as { text: { text: string } }).text.text.split('\n')[0]).toBe(
      '✅ *Resolved* <!date^1795953600^{date_short_pretty} {time}|2026-11-29 12:00 UTC>: no stale use for 2 h after the restart',
    );
  });

  it('escapes user-supplied text and shows snooze, missing pods and cluster-state notes', () => {
    const f = multusFinding({
      userAgents: ['evil <!channel> & co'],
      cause: { ...multusFinding().cause, summary: 'uses <script> & stuff', sources: [] },
      missingPods: ['gone-1', 'gone-2', 'gone-3', 'gone-4'],
      clusterState: 'cluster state unavailable: connect ECONNREFUSED <x>',
    });
    const m = valid(findingMessage(f, { now: NOW, buttonsFor: () => undefined, snoozedUntil: NOW + 24 * HOUR }));
    const s = allText(m.blocks);
    expect(s).not.toContain('<!channel>');
    expect(s).toContain('`evil &lt;!channel&gt; &amp; co`');
    expect(s).toContain('uses &lt;script&gt; &amp; stuff');
    expect((m.blocks[3] as { elements: Array<{ text: string }> }).elements.map((e) => e.text)).toEqual([
      '😴 Snoozed until <!date^1796040000^{date_short_pretty} {time}|2026-11-30 12:00 UTC>',
      'Pods not in cluster state: `gone-1`, `gone-2`, `gone-3`, …and 1 more',
      '⚠️ cluster state unavailable: connect ECONNREFUSED &lt;x&gt;',
      'Finding `f3c1a9e07b2d`',
    ]);
    expect(m.blocks.some((b) => b.type === 'actions')).toBe(false);
  });

  it('a past rejection date and a 401 finding say so', () => {
    const past = valid(findingMessage(multusFinding({ rejectionAt: '2026-11-20T00:00:00.000Z' }), { now: NOW, buttonsFor: () => undefined }));
    expect(past.text).toBe('🔴 [prod-eks] critical: stale token used by kube-system/multus — rejection date 2026-11-20 has passed');
    const u = valid(findingMessage(multusFinding({ kind: 'unauthorized', rejectionAt: null }), { now: NOW, buttonsFor: () => undefined }));
    expect((u.blocks[1] as { text: { text: string } }).text.text).toBe(
      '*401 Unauthorized* used by ServiceAccount `kube-system/multus` in *prod-eks*: requests are already *rejected with 401*.',
    );
  });
});

describe('approval messages', () => {
  const policy = definePolicy({ approvers: ['U0APPROVE1', 'S0OPS00001'], protectedNamespaces: ['kube-system'] });
  const T0 = NOW;
  function requested(): Approval {
    const r = createApproval(
      {
        id: 'appr_0000001',
        action: 'restart',
        target: { cluster: 'prod-eks', kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds', findingId: 'f3c1a9e07b2d' },
        requester: 'U0REQUEST1',
        requesterGroups: [],
        dryRun: { ok: true, message: 'patch accepted (dryRun=All)', at: T0 },
      },
      policy,
      T0,
    );
    if (!r.ok) throw new Error(`refused: ${r.reason}`);
    return r.approval;
  }
  const step = (a: Approval, e: Parameters<typeof decide>[1], at: number): Approval => {
    const d = decide(a, e, policy, at);
    if (!d.ok) throw new Error(`refused: ${d.reason}`);
    return applyTransition(a, d);
  };

  it('request names requester, target, approvers, approvals, expiry and dry run, with Approve/Reject', () => {
    const m = valid(approvalRequestMessage(requested(), { desired: 12, updateStrategy: 'RollingUpdate' }, ['U0APPROVE1', 'S0OPS00001'], { now: T0, approveId: 'approve_0001', rejectId: 'reject_00001' }));
    expect(m.text).toBe(
      '🔐 [prod-eks] approval needed: restart of DaemonSet kube-system/kube-multus-ds, requested by U0REQUEST1, expires 2026-11-29 12:30 UTC',
    );
    expect((m.blocks[0] as { text: { text: string } }).text.text).toBe('🔐 Approval needed: Restart DaemonSet kube-multus-ds');
    const s = m.blocks[1] as { text: { text: string }; fields: Array<{ text: string }> };
    expect(s.text.text).toBe('<@U0REQUEST1> asks for a *restart* of DaemonSet `kube-system/kube-multus-ds` in *prod-eks*.\n12 pods · update strategy `RollingUpdate`');
    expect(s.fields.map((f) => f.text)).toEqual([
      '*Requested by*\n<@U0REQUEST1>',
      '*Approvers*\n<@U0APPROVE1>, <!subteam^S0OPS00001>',
      '*Approvals*\n0 of 2 · kube-system is protected: 2 approvals',
      '*Expires*\n<!date^1795955400^{date_short_pretty} {time}|2026-11-29 12:30 UTC>',
    ]);
    expect((m.blocks[2] as { text: { text: string } }).text.text).toBe('✅ Server-side dry run passed: patch accepted (dryRun=All)');
    const buttons = buttonsIn(m.blocks);
    expect(buttons.map((b) => [b.action_id, b.value, b.style ?? null, b.confirm ? 'confirm' : null])).toEqual([
      [ACTION_IDS.approve, 'approve_0001', 'primary', 'confirm'],
      [ACTION_IDS.reject, 'reject_00001', null, null],
    ]);
  });

  it('shows votes so far and hides buttons once expired or when the dry run failed', () => {
    const one = step(requested(), ev.approve('U0APPROVE1'), T0 + 60_000);
    const m = valid(approvalRequestMessage(one, undefined, ['U0APPROVE1'], { now: T0 + 60_000, approveId: 'approve_0001', rejectId: 'reject_00001' }));
    expect(allText(m.blocks)).toContain('✔︎ <@U0APPROVE1> approved <!date^1795953660^{date_short_pretty} {time}|2026-11-29 12:01 UTC>');
    expect(allText(m.blocks)).toContain('1 of 2 · kube-system is protected: 2 approvals');
    expect(buttonsIn(m.blocks)).toHaveLength(2);
    const late = valid(approvalRequestMessage(one, undefined, [], { now: T0 + 30 * 60_000, approveId: 'approve_0001', rejectId: 'reject_00001' }));
    expect(buttonsIn(late.blocks)).toHaveLength(0);
    expect(allText(late.blocks)).toContain('(*expired*)');
    const failedDry = { ...requested(), dryRun: { ok: false, message: 'daemonsets.apps "kube-multus-ds" is forbidden: User "system:serviceaccount:tokenwatch:tokenwatch" cannot patch', at: T0 } };
    const d = valid(approvalRequestMessage(failedDry, undefined, [], { now: T0, approveId: 'approve_0001', rejectId: 'reject_00001' }));
    expect(buttonsIn(d.blocks)).toHaveLength(0);
    expect(allText(d.blocks)).toContain('❌ Server-side dry run failed: daemonsets.apps \\"kube-multus-ds\\" is forbidden');
  });

  it('decided messages have no buttons and say who decided and when', () => {
    const approved = step(step(requested(), ev.approve('U0APPROVE1'), T0 + 60_000), ev.approve('U0GROUPIE1', ['S0OPS00001']), T0 + 120_000);
    const m = valid(approvalDecidedMessage(approved, ['U0APPROVE1'], { now: T0 + 120_000 }));
    expect(buttonsIn(m.blocks)).toHaveLength(0);
    expect(m.text).toBe('✅ Approved [prod-eks]: restart of DaemonSet kube-system/kube-multus-ds (approved by U0APPROVE1, U0GROUPIE1)');
    expect(allText(m.blocks)).toContain(
      'Approved by <@U0APPROVE1> <!date^1795953660^{date_short_pretty} {time}|2026-11-29 12:01 UTC>, <@U0GROUPIE1> <!date^1795953720^{date_short_pretty} {time}|2026-11-29 12:02 UTC>.',
    );
    // approvalRequestMessage renders the decided form for any state but requested
    expect(approvalRequestMessage(approved, undefined, ['U0APPROVE1'], { now: T0, approveId: 'approve_0001', rejectId: 'reject_00001' })).toEqual(m);

    const rejected = step(requested(), ev.reject('U0APPROVE1', 'not <now>'), T0 + 60_000);
    const r = valid(approvalDecidedMessage(rejected, [], { now: T0 }));
    expect(r.text).toBe('❌ Rejected [prod-eks]: restart of DaemonSet kube-system/kube-multus-ds by U0APPROVE1');
    expect(allText(r.blocks)).toContain('Rejected by <@U0APPROVE1> <!date^1795953660^{date_short_pretty} {time}|2026-11-29 12:01 UTC>: “not &lt;now&gt;”. Nothing was changed.');

    const expired = step(requested(), ev.expire(), T0 + 30 * 60_000);
    const x = valid(approvalDecidedMessage(expired, [], { now: T0 }));
    expect((x.blocks[0] as { text: { text: string } }).text.text).toBe('⌛ Expired: Restart DaemonSet kube-multus-ds');
    expect(allText(x.blocks)).toContain('without 2 approvals. Nothing was changed.');
  });
});

describe('progress and verification', () => {
  const target = { cluster: 'prod-eks', kind: 'DaemonSet' as const, namespace: 'kube-system', name: 'kube-multus-ds', findingId: 'f3c1a9e07b2d' };

  it('progress, done and timed out', () => {
    const p = valid(progressMessage({ desired: 12, updated: 3, ready: 2, available: 2, done: false, timedOut: false }, { target, now: NOW + 90_000, startedAt: NOW }));
    expect((p.blocks[0] as { text: { text: string } }).text.text).toBe(
      '⏳ Rolling out DaemonSet `kube-system/kube-multus-ds` in *prod-eks*: 3 of 12 updated, 2 ready, 2 available\n`▰▰▰▱▱▱▱▱▱▱` 25 %',
    );
    expect(p.text).toBe('⏳ [prod-eks] rolling out DaemonSet kube-system/kube-multus-ds: 3/12 updated');
    const d = valid(progressMessage({ desired: 12, updated: 12, ready: 12, available: 12, done: true, timedOut: false }, { target, now: NOW + 180_000, startedAt: NOW }));
    expect((d.blocks[0] as { text: { text: string } }).text.text).toBe(
      '✅ Rollout of DaemonSet `kube-system/kube-multus-ds` in *prod-eks* complete: 12 of 12 updated, 12 ready, 12 available (took 3 min).',
    );
    const t = valid(
      progressMessage({ desired: 12, updated: 5, ready: 4, available: 4, done: false, timedOut: true }, { target, now: NOW + 600_000, startedAt: NOW, timeoutMs: 600_000 }),
    );
    expect((t.blocks[0] as { text: { text: string } }).text.text).toBe(
      '⚠️ Rollout of DaemonSet `kube-system/kube-multus-ds` in *prod-eks* did not complete within 10 min: 5 of 12 updated, 4 ready, 4 available. Look at it with `kubectl -n kube-system rollout status daemonset/kube-multus-ds`.',
    );
  });

  it('resolved and recurrence (static token file: a restart only buys time)', () => {
    const ok = valid(verificationMessage({ outcome: 'resolved', finding: multusFinding(), action: 'restart', actionAt: NOW - 2 * HOUR, now: NOW, settleMs: HOUR }));
    expect((ok.blocks[0] as { text: { text: string } }).text.text).toBe(
      '✅ *Verified*: no stale token use by `kube-system/multus` in *prod-eks* for 2 h since the restart (<!date^1795946400^{date_short_pretty} {time}|2026-11-29 10:00 UTC>), longer than the 1 h settle period. The alert is resolved.',
    );
    // Every signal of the alert that stayed quiet is named.
    const both = valid(verificationMessage({ outcome: 'resolved', finding: multusFinding(), action: 'restart', actionAt: NOW - 2 * HOUR, now: NOW, settleMs: HOUR, signals: ['unauthorized', 'stale-token'] }));
    expect(both.text).toBe('✅ [prod-eks] verified: no stale token use or 401 Unauthorized responses by kube-system/multus since the restart; alert resolved');
    const bad = valid(
      verificationMessage({ outcome: 'recurrence', finding: multusFinding(), action: 'restart', actionAt: NOW - 3 * HOUR, now: NOW, staleRequests: 17, lastSeen: NOW - HOUR }),
    );
    const text = (bad.blocks[0] as { text: { text: string } }).text.text;
    expect(text.split('\n').slice(0, 3)).toEqual([
      '⚠️ *Recurrence*: stale token use by `kube-system/multus` in *prod-eks* came back 2 h after the restart (17 requests, last <!date^1795950000^{date_short_pretty} {time}|2026-11-29 11:00 UTC>).',
      'A restart only rewrites the copied token, which buys one more token lifetime (90 days on EKS); it does not fix the cause.',
      '*Cause* (`multus-thin`): The Multus thin plugin copies the ServiceAccount token once into /etc/cni/net.d/multus.d/multus.kubeconfig on the host; the multus binary keeps presenting it.',
    ]);
    expect(bad.text).toBe(
      '⚠️ [prod-eks] recurrence: stale token use by kube-system/multus came back after the restart; fix: Move to the thick plugin (multus-daemon, v4) or run v4 thin with --cleanup-config-on-exit=true and --multus-conf-file=auto.',
    );
    const generic = verificationMessage({ outcome: 'recurrence', finding: multusFinding({ cause: { ...multusFinding().cause, id: 'client-caches-token' } }), action: 'restart', actionAt: NOW - HOUR, now: NOW });
    expect(allText(generic.blocks)).not.toContain('A restart only rewrites');
  });

  it('escalation replies', () => {
    const e = valid(escalationMessage(multusFinding(), { type: 'severity', from: 'warning', to: 'critical' }, { now: NOW }));
    expect(e.text).toBe('[prod-eks] kube-system/multus escalated from warning to critical');
    const u = valid(escalationMessage(multusFinding(), { type: 'first-401', requests: 3 }, { now: NOW }));
    expect((u.blocks[0] as { text: { text: string } }).text.text).toBe(
      '🚫 First *401 Unauthorized* responses for `kube-system/multus` in *prod-eks* (3 requests): its clients are already being rejected.',
    );
  });
});

describe('status, help, history, refusal, details', () => {
  const health = [
    { name: 'audit: cloudwatch /aws/eks/prod-eks/cluster', ok: true, lastSuccess: NOW - 60_000 },
    { name: 'kubernetes API', ok: false, detail: 'connect ECONNREFUSED 10.0.0.1:443' },
  ];

  it('one cluster: poll, health, channel problem, one line per alert with its link and no buttons', () => {
    const c: ClusterStatus = {
      name: 'prod-eks',
      lastPoll: NOW - 60_000,
      health,
      alertsBySeverity: { critical: 1, warning: 0, info: 0 },
      channel: { id: 'C0OPS00001', error: 'not_in_channel' },
      alerts: [{ live: [multusFinding()], severity: 'critical', permalink: 'https://tw.slack.com/archives/C0OPS00001/p1795953540000100' }],
    };
    const m = valid(statusMessage([c], { now: NOW }));
    expect(m.text).toBe('Tokenwatch status — prod-eks: 1 critical, 0 warning, 0 info');
    expect(m.blocks.map((b) => b.type)).toEqual(['header', 'section', 'section']);
    expect((m.blocks[1] as { text: { text: string } }).text.text).toBe(
      [
        '*prod-eks* · last poll <!date^1795953540^{date_short_pretty} {time}|2026-11-29 11:59 UTC> (<!date^1795953540^{ago}|2026-11-29 11:59 UTC>)',
        '🔴 1 critical · 🟠 0 warning · 🔵 0 info',
        '✅ audit: cloudwatch /aws/eks/prod-eks/cluster · last success <!date^1795953540^{date_short_pretty} {time}|2026-11-29 11:59 UTC>',
        '❌ kubernetes API: connect ECONNREFUSED 10.0.0.1:443',
        '⚠️ Alerts channel <#C0OPS00001>: the bot is not in this channel; invite it with `/invite @tokenwatch`',
      ].join('\n'),
    );
    expect((m.blocks[2] as { text: { text: string } }).text.text).toBe('🔴 critical · <https://tw.slack.com/archives/C0OPS00001/p1795953540000100|kube-system/multus> — rejected in 4 days · stale tokens');
    expect(buttonsIn(m.blocks)).toHaveLength(0);
  });

  it('many clusters and findings stay within 50 blocks and say what was left out', () => {
    const findings = Array.from({ length: 40 }, (_, i) => multusFinding({ id: `f${i}`, serviceAccount: `sa-${i}` }));
    const clusters: ClusterStatus[] = Array.from({ length: 14 }, (_, i) => ({
      name: `cluster-${i}`,
      lastPoll: null,
      health,
      alertsBySeverity: { critical: 40, warning: 0, info: 0 },
      alerts: findings.map((f) => ({ live: [f], severity: f.severity })),
    }));
    const m = valid(statusMessage(clusters, { now: NOW }));
    expect(m.blocks.length).toBeLessThanOrEqual(50);
    expect((m.blocks[0] as { text: { text: string } }).text.text).toBe('Tokenwatch status · 14 clusters');
    expect(allText(m.blocks)).toContain('…and 4 more clusters');
    expect(allText(m.blocks)).toContain('…and 35 more alerts not listed here');
  });

  it('no clusters', () => {
    expect(valid(statusMessage([], { now: NOW })).text).toBe('Tokenwatch status: no clusters configured');
  });

  it('help, unknown command and refusal', () => {
    const h = valid(helpMessage(['prod-eks', 'staging']));
    expect(h.text).toBe('tokenwatch help: /tokens status [cluster], /tokens scan <cluster>, /tokens history <cluster>, /tokens help');
    const u = valid(unknownCommandMessage({ kind: 'cluster', value: 'prdo' }, ['prod-eks', 'staging']));
    expect((u.blocks[0] as { text: { text: string } }).text.text).toBe('🤔 Unknown cluster `prdo`. Known clusters: `prod-eks`, `staging`.');
    expect(u.text).toBe('Unknown cluster "prdo". Known clusters: prod-eks, staging.');
    const r = valid(refusalMessage('You requested this restart, so someone else must approve it (no self-approval).'));
    expect(r.text).toBe('⛔ You requested this restart, so someone else must approve it (no self-approval).');
  });

  it('history lists actions and summarises long histories', () => {
    const entry = {
      at: NOW,
      action: 'restart' as const,
      target: { cluster: 'prod-eks', kind: 'DaemonSet' as const, namespace: 'kube-system', name: 'kube-multus-ds', findingId: 'f' },
      requester: 'U0REQUEST1',
      approvers: ['U0APPROVE1'],
      state: 'succeeded' as const,
    };
    const one = valid(historyMessage('prod-eks', [entry], { now: NOW }));
    expect((one.blocks[1] as { text: { text: string } }).text.text).toBe(
      '✅ <!date^1795953600^{date_short_pretty} {time}|2026-11-29 12:00 UTC> *restart* DaemonSet `kube-system/kube-multus-ds` by <@U0REQUEST1>, approved by <@U0APPROVE1> · *succeeded*',
    );
    const many = valid(historyMessage('prod-eks', Array(500).fill(entry), { now: NOW }));
    expect(many.text).toBe('tokenwatch history for prod-eks: 500 actions');
    const last = many.blocks[many.blocks.length - 1] as { type: string; elements: Array<{ text: string }> };
    expect(last.type).toBe('context');
    expect(last.elements[0]!.text).toMatch(/^…and \d+ more$/);
    const shownLines = many.blocks.filter((b) => b.type === 'section').reduce((n, b) => n + (b as { text: { text: string } }).text.text.split('\n').length, 0);
    expect(last.elements[0]!.text).toBe(`…and ${500 - shownLines} more`);
  });

  it("details shows the severity of the alert, with the signal's own beside it when it differs", () => {
    const ctxText = (m: SlackMessage) => ((m.blocks.at(-1) as { elements: Array<{ text: string }> }).elements[0]!.text);
    const info = multusFinding({ severity: 'info' });
    expect(ctxText(valid(detailsMessage(info, undefined, { now: NOW, alertSeverity: 'warning' })))).toMatch(/^🟠 alert warning \(this signal: info\) · stale-token · finding /);
    expect(ctxText(valid(detailsMessage(info, undefined, { now: NOW, alertSeverity: 'info' })))).toMatch(/^🔵 info · stale-token · finding /);
    expect(ctxText(valid(detailsMessage(info, undefined, { now: NOW })))).toMatch(/^🔵 info · /);
  });

  it('details lists the cause with its sources, the sparkline, tokens newest first and evidence', () => {
    const m = valid(detailsMessage(multusFinding(), undefined, { now: NOW, hourly: { [String(NOW - 3_600_000)]: 3, [String(NOW)]: 1 } }));
    expect(m.text).toBe('Details for kube-system/multus in prod-eks (critical): 2 tokens, 1,234 requests');
    expect((m.blocks[0] as { text: { text: string } }).text.text).toBe('🔎 Details · prod-eks · kube-system/multus · stale-token');
    expect((m.blocks[1] as { text: { text: string } }).text.text).toMatch(/^\*Cause\* \(`multus-thin`\): .*\n\*Fix:\* .*\n\*Sources:\* /s);
    expect((m.blocks[2] as { elements: Array<{ text: string }> }).elements[0]!.text).toContain('(max 3/h, 4 total; 1,234 requests in all)');
    m.blocks.splice(1, 2);
    const tokens = (m.blocks[1] as { text: { text: string } }).text.text.split('\n');
    expect(tokens[0]).toBe('*2 tokens*');
    expect(tokens[1]).toMatch(/^• `kube-multus-ds-zwh6w` · on `ip-192-168-1-10.ec2.internal` · stale since /);
    expect((m.blocks[2] as { text: { text: string } }).text.text).toBe(
      '*Evidence* (cause `static-token-file`)\n• image 602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/multus-cni:v3.7.2-eksbuild.1\n• user agent multus/v0.0.0',
    );
  });
});
