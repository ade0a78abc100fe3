/**
 * `actionHistory` (src/slack/notifier.ts): what the succeeded actions on one alert say about it — a restart is a
 * stop-gap once a restart was followed by a recurrence (or the node probe found its token file not rewritten), until a
 * later action is verified as the fix; the last verified fix is what the resolved alert names.
 */
import { describe, expect, it } from 'vitest';
import type { StoredApproval } from '../../src/store/index.js';
import { actionHistory } from '../../src/slack/notifier.js';

const T = Date.parse('2026-11-20T12:00:00Z');
const HOUR = 3_600_000;

function approval(id: string, over: Partial<StoredApproval> = {}): StoredApproval {
  return {
    id,
    action: 'restart',
    target: { cluster: 'prod-eks', kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds', findingId: 'f1' },
    requester: 'U1',
    createdAt: T,
    expiresAt: T + HOUR,
    requiredApprovals: 1,
    votes: [],
    state: 'succeeded',
    dryRun: null,
    updatedAt: T,
    message: null,
    subject: { namespace: 'kube-system', serviceAccount: 'multus' },
    ...over,
  };
}

describe('actionHistory', () => {
  it('no concluded action: nothing known', () => {
    expect(actionHistory([])).toEqual({});
    expect(actionHistory([approval('a1')])).toEqual({});
  });

  it('a recurrence makes the restart a stop-gap, dated by its conclusion', () => {
    expect(actionHistory([approval('a1', { verification: { outcome: 'recurrence', at: T + 2 * HOUR } })])).toEqual({ stopGap: { reason: 'recurrence', at: T + 2 * HOUR } });
  });

  it('a token file the probe found not rewritten does too; the later of the two is named', () => {
    const probe = approval('a1', { probeCheck: { outcome: 'not-rewritten', at: T + HOUR } });
    expect(actionHistory([probe])).toEqual({ stopGap: { reason: 'copied-token', at: T + HOUR } });
    const both = approval('a1', { probeCheck: { outcome: 'not-rewritten', at: T + HOUR }, verification: { outcome: 'recurrence', at: T + 2 * HOUR } });
    expect(actionHistory([both]).stopGap).toEqual({ reason: 'recurrence', at: T + 2 * HOUR });
    // A file rewritten, a persisting or superseded outcome: not a stop-gap by themselves.
    expect(actionHistory([approval('a2', { probeCheck: { outcome: 'rewritten', at: T }, verification: { outcome: 'persisting', at: T } })])).toEqual({});
    expect(actionHistory([approval('a3', { verification: { outcome: 'superseded', at: T } })])).toEqual({});
  });

  it('a later verified fix clears an earlier recurrence and is what fixed it (its start time)', () => {
    const recurred = approval('a1', { verification: { outcome: 'recurrence', at: T + 2 * HOUR } });
    const fixed = approval('a2', { startedAt: T + 3 * HOUR, updatedAt: T + 3.5 * HOUR, verification: { outcome: 'resolved', at: T + 6 * HOUR } });
    expect(actionHistory([recurred, fixed])).toEqual({ fix: { label: 'restart of DaemonSet kube-system/kube-multus-ds', at: T + 3 * HOUR } });
    // A recurrence after that fix (a new cycle) is a stop-gap again; the fix stays the last verified one.
    const again = approval('a3', { verification: { outcome: 'recurrence', at: T + 30 * 24 * HOUR } });
    expect(actionHistory([recurred, fixed, again])).toEqual({
      stopGap: { reason: 'recurrence', at: T + 30 * 24 * HOUR },
      fix: { label: 'restart of DaemonSet kube-system/kube-multus-ds', at: T + 3 * HOUR },
    });
  });

  it('a ServiceAccount recreation is named as such', () => {
    const recreated = approval('a1', {
      action: 'recreate-serviceaccount',
      target: { cluster: 'prod-eks', kind: 'ServiceAccount', namespace: 'ci', name: 'deployer', findingId: 'f2' },
      subject: { namespace: 'ci', serviceAccount: 'deployer' },
      verification: { outcome: 'resolved', at: T + 3 * HOUR },
    });
    expect(actionHistory([recreated]).fix?.label).toBe('ServiceAccount recreation of ServiceAccount ci/deployer');
  });
});
