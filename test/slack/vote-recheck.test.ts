/**
 * Votes are re-checked when the quorum is reached: in a namespace needing two approvals, an approver removed from
 * `approvers` (config change, restart) no longer counts, and the thread says the vote is void. Real `tokenwatch
 * serve` + Bolt (HTTP mode) against the fake Slack and the fake Kubernetes API server (harness.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/index.js';
import { APPROVER, ONCALL, ONCALL_APPROVER, OPS, REQUESTER, startHarness, type Harness } from './harness.js';

const DAVE = 'U0DAVE0001';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

const realPatches = (x: Harness) => x.kube.requestsMatching({ method: 'PATCH', resource: 'daemonsets' }).filter((r) => !r.dryRun);
const protect = (approvers: string[]) => (c: Config) => {
  const s = c.clusters[0]!.slack!;
  s.protectedNamespaces = ['kube-system'];
  s.protectedApprovals = 2;
  s.approvers = approvers;
};

describe('votes re-checked at the decision', () => {
  it('a removed approver’s vote is void after a restart with the changed config: no PATCH until two allowed approvers agree', async () => {
    h = await startHarness({ oncall: [DAVE], tweak: protect([APPROVER, ONCALL]) });
    const alert = await h.alert('kube-system', 'multus');
    await h.click(REQUESTER, alert, 'tw_restart');
    const approval = h.slack.thread(OPS, alert.ts).find((m) => m.text.includes('approval needed'))!;
    expect(approval).toBeDefined();
    await h.click(APPROVER, approval, 'tw_approve');
    expect(realPatches(h)).toHaveLength(0);

    // APPROVER is removed from the approvers; tokenwatch restarts with that config on the same store and fakes.
    const { dir, slack, kube } = h;
    await h.stop({ keepFakes: true });
    h = await startHarness({ dir, fakeSlack: slack, kube, oncall: [DAVE], tweak: protect([ONCALL]) });

    await h.click(DAVE, approval, 'tw_approve');
    await h.bot.idle();
    expect(realPatches(h)).toHaveLength(0);
    expect((await h.serve.context.store.approvals.list()).map((a) => a.state)).toEqual(['requested']);
    const thread = h.slack.thread(OPS, alert.ts).map((m) => m.text);
    const note = thread.find((t) => t.includes('is void'));
    expect(note).toContain(APPROVER);
    expect(note).toContain('is void: no longer allowed to approve the restart of DaemonSet kube-system/kube-multus-ds (not among the approvers in force now)');
    expect(thread).toContainEqual(expect.stringContaining('1 of 2 approvals count'));

    // A second approver in force completes the quorum: one PATCH.
    await h.click(ONCALL_APPROVER, approval, 'tw_approve');
    await h.bot.idle();
    for (let i = 0; i < 300 && realPatches(h).length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(realPatches(h)).toHaveLength(1);
  });
});
