/**
 * The node probe's verification reply (`probeCheckMessage`): nodes that have not reported since the rollout completed
 * are named with that time — only reports made after completion count (a report during a rollout may still see an
 * old pod's file), so the reply must not say "since the restart" (when it started).
 */
import { describe, expect, it } from 'vitest';
import { probeCheckMessage } from '../../../src/slack/blocks/progress.js';
import { validateMessage } from './validate.js';
import { allText, HOUR, multusFinding, NOW } from './fixtures.js';

describe('probe check reply', () => {
  it('names the silent nodes since the rollout completed, with its time', () => {
    const startedAt = NOW - 2 * HOUR;
    const completedAt = NOW - HOUR;
    const msg = probeCheckMessage({
      outcome: 'rewritten',
      finding: multusFinding(),
      action: 'restart',
      startedAt,
      completedAt,
      now: NOW,
      files: [{ path: '/etc/cni/net.d/multus.d/multus.kubeconfig', node: 'ip-10-0-1-5.ec2.internal', issuedAt: new Date(completedAt - 60_000).toISOString(), rewritten: true }],
      silent: ['ip-10-0-1-6.ec2.internal'],
    });
    expect(validateMessage(msg)).toEqual([]);
    const text = allText(msg.blocks ?? []) + msg.text;
    expect(text).toContain(`No probe report since the restart completed (<!date^${completedAt / 1000}^`);
    expect(text).toContain('from node(s) `ip-10-0-1-6.ec2.internal`');
    expect(text).not.toContain('since the restart from');
  });
});
