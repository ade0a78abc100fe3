/**
 * The alert's overflow menu (`tw_more`) never starts an action that needs confirmation: its options are Details, Snooze
 * and Recreate ServiceAccount… (which opens its own confirm modal); a restart is a button with a Slack `confirm`
 * dialog. A crafted block_action choosing an overflow option whose value is a Restart button's id is refused with a
 * clear answer and changes nothing. Real `serve`, Bolt (HTTP mode), the loopback Slack and Kubernetes fakes.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { buttonValue, OPS, overflowOption, REQUESTER, startHarness, type Harness } from './harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

describe('overflow menu and confirmation', () => {
  it('an overflow choice carrying a Restart button’s id opens no restart request, says why and changes nothing', async () => {
    h = await startHarness();
    const alert = await h.alert('kube-system', 'multus');
    const restartId = buttonValue(alert, 'tw_restart');
    expect(overflowOption(alert, 'Details')).toBeDefined();
    const kubeBefore = h.kube.requests.length;
    const callsBefore = h.slack.calls.length;

    // `tw_details` is chosen from the overflow menu (action_id tw_more), with selected_option.value = the restart id.
    const res = await h.click(REQUESTER, alert, 'tw_details', { value: restartId });
    expect(res.status).toBe(200);

    expect(h.ephemerals(REQUESTER)).toEqual([
      '⛔ A restart is requested only from the alert’s Restart button, which asks for confirmation first; the ⋯ menu has no such step, so nothing was requested. Use the Restart button on the alert.',
    ]);
    expect(h.kube.requests.length).toBe(kubeBefore); // not even a dry run
    expect(await h.serve.context.store.approvals.list()).toEqual([]);
    expect(h.slack.thread(OPS, alert.ts)).toEqual([]);
    expect(h.slack.calls.slice(callsBefore).filter((c) => ['chat.postMessage', 'chat.update', 'views.open'].includes(c.method))).toEqual([]);
    expect((await h.alert('kube-system', 'multus')).edits).toEqual(alert.edits);

    // The same id on the Restart button itself still asks for approval (after Slack's confirm dialog).
    await h.click(REQUESTER, alert, 'tw_restart');
    expect(h.slack.thread(OPS, alert.ts).map((m) => m.text)).toEqual([
      '🔐 [prod-eks] approval needed: restart of DaemonSet kube-system/kube-multus-ds, requested by U0REQUEST1, expires 2026-11-20 12:30 UTC',
    ]);
  });
});
