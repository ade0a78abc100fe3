/**
 * Missed polls end to end: `serve` on a per-second schedule, node-cron's heartbeat firing late (the fake `Date`
 * moved forward stands for a blocked event loop), and what an operator sees: the late poll run, the ticks folded
 * into it in the log, `tokenwatch_polls_missed_total{cluster,reason}` and a `/tokens status` line.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CLUSTER, REQUESTER, blockText, startHarness, type Harness } from '../slack/harness.js';

const X = Date.parse('2026-12-01T10:00:00.000Z');

async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await sleep(20); // real timers: only Date is faked (vi.waitFor would move the fake clock)
}

describe('missed polls (serve)', () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.stop();
    h = undefined;
    vi.useRealTimers();
  });

  it('runs the late tick, records the folded ones in the log, the metric and /tokens status', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: X });
    const logs: Array<Record<string, unknown>> = [];
    h = await startHarness({
      logs,
      tweak: (c) => {
        c.clusters[0]!.schedule = '* * * * * *';
      },
    });
    await h.command(`status ${CLUSTER}`, REQUESTER);
    expect(blockText(h.slack.ephemerals({ user: REQUESTER }).at(-1)!)).not.toContain('scheduled polls missed');
    // Blocked from 10:00:00 to 10:00:03.5: the :01 and :02 ticks fired past node-cron's 1 s tolerance.
    vi.setSystemTime(X + 3_500);
    await until(() => logs.some((l) => l.msg === 'scheduled poll ran late: its timer fired late (event loop busy)'));
    const late = logs.find((l) => String(l.msg).startsWith('scheduled poll ran late'))!;
    expect(late).toMatchObject({ cluster: CLUSTER, dueAt: '2026-12-01T10:00:01.000Z', lateMs: 2_500 });
    await until(() => logs.some((l) => l.msg === 'scheduled poll missed: folded into a late poll of this cluster that is still running'));
    const missed = logs.filter((l) => String(l.msg).startsWith('scheduled poll missed'));
    expect(missed[0]).toMatchObject({ cluster: CLUSTER, dueAt: '2026-12-01T10:00:02.000Z', reason: 'coalesced' });
    await h.serve.context.scheduler.current(CLUSTER);
    const text = await h.metrics.text();
    const count = Number(/tokenwatch_polls_missed_total\{cluster="prod-eks",reason="coalesced"\} (\d+)/.exec(text)?.[1]);
    expect(count).toBe(missed.length); // one count per log line
    expect(text).toContain('tokenwatch_polls_late_total{cluster="prod-eks"} 1');
    await h.command(`status ${CLUSTER}`, REQUESTER);
    const status = blockText(h.slack.ephemerals({ user: REQUESTER }).at(-1)!);
    expect(status).toContain(`❌ scheduled polls missed: ${count}: last due 2026-12-01T10:00:0`);
    expect(status).toContain('folded into a late poll');
  });
});
