/**
 * Message edits coalesced (src/core/keyed-lock.ts `runLatest`, used for approval messages and alert refreshes):
 * through `tokenwatch serve`, the real Bolt app and the loopback fake Slack, a burst of edit requests for one approval
 * message — as a burst of votes and state changes asks for — becomes one `chat.update`, counted at the fake, and the
 * message shows the latest state.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { OPS, REQUESTER, startHarness, type Harness } from './harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

describe('edit coalescing', () => {
  it('a burst of edits of one approval message is one chat.update', { timeout: 60_000 }, async () => {
    h = await startHarness();
    const alert = await h.alert('kube-system', 'multus');
    await h.click(REQUESTER, alert, 'tw_restart');
    const approvalMsg = h.slack.thread(OPS, alert.ts).find((m) => m.text.includes('approval needed'))!;
    expect(approvalMsg).toBeDefined();
    const [approval] = await h.serve.context.store.approvals.list();
    expect(approval?.message?.ts).toBe(approvalMsg.ts);
    const updatesOf = () => h!.slack.callsTo('chat.update').filter((c) => c.args.ts === approvalMsg.ts).length;
    const before = updatesOf();

    const flow = h.bot.parts.flow;
    await Promise.all(Array.from({ length: 8 }, () => flow.updateApprovalMessage(approval!)));
    await h.bot.idle();
    expect(updatesOf() - before).toBe(1);
    expect(h.slack.message(OPS, approvalMsg.ts)!.text).toContain('approval needed');
  });
});
