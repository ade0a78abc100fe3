import { describe, expect, it } from 'vitest';
import { approvalPolicyFor } from '../../src/approvals/from-config.js';
import { parseConfig } from '../../src/config/schema.js';
import { decide, createApproval, approvalEvent } from '../../src/approvals/machine.js';

const env = { SLACK_BOT_TOKEN: 'xoxb-1111111111-2222222222222-AbCdEfGhIjKl', SLACK_APP_TOKEN: 'xapp-1-A01-333-0123456789abcdef' };

describe('approvalPolicyFor', () => {
  const config = parseConfig(
    {
      slack: { enabled: true, approvals: { expiresAfter: '15m' } },
      clusters: [
        {
          name: 'prod',
          audit: { file: { path: 'a.log' } },
          slack: {
            channel: 'C0AAA',
            approvers: ['U0ALICE', 'U0BOB', 'S0SRE'],
            protectedNamespaces: ['kube-*'],
            protectedApprovals: 3,
            namespaces: { deny: ['kube-public'] },
          },
        },
        { name: 'dev', audit: { file: { path: 'b.log' } } },
      ],
    },
    env,
  );

  it('maps the cluster slack section and the top-level expiry', () => {
    expect(approvalPolicyFor(config.clusters[0]!, config)).toEqual({
      requesters: ['*'],
      approvers: ['U0ALICE', 'U0BOB', 'S0SRE'],
      allowSelfApproval: false,
      protectedNamespaces: ['kube-*'],
      protectedApprovals: 3,
      actions: ['restart', 'recreate-serviceaccount', 'snooze'],
      namespaces: { allow: [], deny: ['kube-public'] },
      expiryMs: 900_000,
    });
    expect(approvalPolicyFor(config.clusters[1]!, config)).toBeUndefined();
  });

  it('drives the approval state machine as configured', () => {
    const policy = approvalPolicyFor(config.clusters[0]!, config)!;
    const created = createApproval(
      {
        id: 'a1',
        action: 'restart',
        target: { cluster: 'prod', kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds', findingId: 'f1' },
        requester: 'U0CAROL',
        requesterGroups: [],
      },
      policy,
      1_000,
    );
    if (!created.ok) throw new Error(`refused: ${created.reason}`);
    expect(created.approval.requiredApprovals).toBe(3);
    expect(created.approval.expiresAt).toBe(901_000);
    const refused = decide(created.approval, approvalEvent.approve('U0MALLORY'), policy, 2_000);
    expect(refused.ok).toBe(false);
  });
});
