/**
 * Where in a continuous week the stale-token uses sit must not decide whether they are believed: the clock-skew rule
 * (docs/clock-skew.md) weighs the input's own events — its first and last 256 KiB and times sampled across its middle —
 * so real token uses anywhere in the week keep their finding and the week's last event stays the reference time.
 * Layouts a tester found the rule misjudging when it weighed the edges alone: uses in the middle of the week, the log
 * behind a copytruncate hole of NUL bytes larger than 256 KiB, a file start stamped days behind by a wrong clock, and
 * the same file given twice.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runScan } from '../../src/scan/run.js';
import { auditEvent, type EventSpec } from '../sources/events.js';

const dir = mkdtempSync(join(tmpdir(), 'tw-stale-week-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const START = Date.parse('2026-11-13T12:00:00Z');
const LAST = START + 7 * DAY - 2 * MINUTE;
const REJECTION = Date.parse('2026-11-25T00:00:00Z'); // 90 days after warnafter (EKS): critical as of LAST
const WARN_AFTER = REJECTION - 90 * DAY;
const CLOCK = () => LAST + 7 * DAY; // an old export: rule 1 (host clock + 24 h) plays no part

/** One ordinary request every 2 minutes for a week; a stale use of team-b/batch at each time `stale(t)` accepts. */
function week(stale: (t: number) => boolean, shift: (i: number) => number = () => 0): EventSpec[] {
  const specs: EventSpec[] = [];
  for (let i = 0, t = START; t <= LAST; i++, t += 2 * MINUTE) {
    specs.push({ auditID: `p${i}`, time: t + shift(i), kind: 'plain' });
    if (stale(t)) {
      specs.push({ auditID: `b${i}`, time: t + 1000, kind: 'stale', namespace: 'team-b', serviceAccount: 'batch', pod: 'batch-0', secondsAfterWarning: Math.floor((t + 1000 - WARN_AFTER) / 1000) });
    }
  }
  return specs;
}
const text = (specs: EventSpec[]) => `${specs.map(auditEvent).join('\n')}\n`;
function file(name: string, body: string | Buffer): string {
  const f = join(dir, name);
  writeFileSync(f, body);
  return f;
}
const scan = (files: string[]) => runScan({ files, cluster: 'prod', maxTokenAge: { mode: 'eks' }, clock: CLOCK });
const finding = (r: Awaited<ReturnType<typeof scan>>) => r.report.findings.map((f) => [`${f.namespace}/${f.serviceAccount}`, f.severity, f.rejectionAt]);
const expected = [['team-b/batch', 'critical', new Date(REJECTION).toISOString()]];

describe('stale uses anywhere in a continuous week keep their finding and the last day', () => {
  // One stale use an hour for two days in the middle of the week (2–4 days from either end): 48 uses.
  const middle = text(week((t) => t >= START + 2.5 * DAY && t < START + 4.5 * DAY && (t - START) % HOUR === 0));

  it('uses in the middle of the week', async () => {
    const r = await scan([file('middle.log', middle)]);
    expect(r.report.stats.tokenUses).toBe(48);
    expect(finding(r)).toEqual(expected);
    expect(new Date(r.now).toISOString()).toBe(new Date(LAST).toISOString());
    expect(r.ignoredEventTimes).toEqual([]);
  });

  it('the same file given twice: the same answer as once', async () => {
    const f = file('middle-2.log', middle);
    const once = await scan([f]);
    const twice = await scan([f, file('middle-copy.log', middle)]);
    expect(finding(twice)).toEqual(finding(once));
    expect(twice.now).toBe(once.now);
    expect(twice.ignoredEventTimes).toEqual([]);
  });

  it('the log behind a copytruncate hole of NUL bytes larger than 256 KiB', async () => {
    const body = text(week((t) => t >= START + 10 * HOUR && t < START + 10 * HOUR + 40 * MINUTE));
    const r = await scan([file('hole.log', Buffer.concat([Buffer.alloc(300 * 1024), Buffer.from(body)]))]);
    expect(finding(r)).toEqual(expected);
    expect(new Date(r.now).toISOString()).toBe(new Date(LAST).toISOString());
  });

  it('a file start stamped 3 days behind (a wrong clock): those times are left out, the real uses kept', async () => {
    const specs = week((t) => t >= START + 10 * HOUR && t < START + 10 * HOUR + 40 * MINUTE, (i) => (i < 300 ? -3 * DAY : 0));
    const r = await scan([file('skewed-head.log', text(specs))]);
    expect(finding(r)).toEqual(expected);
    expect(new Date(r.now).toISOString()).toBe(new Date(LAST).toISOString());
    expect(r.ignoredEventTimes.length).toBeGreaterThan(0);
    // The wrong clock's 300 times are left out by the rule over the whole input.
    expect(r.ignoredEventTimes[0]).toMatchObject({ time: new Date(START - 3 * DAY).toISOString(), count: 300 });
    expect(r.readiness.window.end).toBe(new Date(LAST).toISOString());
  });
});
