/**
 * A continuous week of audit events whose first day holds 1,000 stale-token uses (a client calling every 40 s for 11
 * hours): the first day's token uses and first lines (1,000 + ~330) outnumber the events of the file's last 256 KiB
 * (~330 of 793 bytes) 4 to 1,
 * so before the clock-skew rule sampled the middle of files (docs/clock-skew.md rule 2) the last day was a small group
 * more than 24 h after the first and left out as a "wrong clock": the reference time days early, the finding a warning,
 * `--fail-on critical` exit 0. With the samples, the week is one group: its last event is the reference time. And a
 * group of ordinary events stamped days ahead in the middle of the file, which the rule could not see, is caught (a
 * group of less than 256 KiB of lines is caught only when a sample falls in it).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { runScan } from '../../src/scan/run.js';
import { auditEvent, type EventSpec } from '../sources/events.js';
import { runCli } from '../cli/run-cli.js';

const dir = mkdtempSync(join(tmpdir(), 'tw-busy-week-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const MINUTE = 60_000;
const DAY = 86_400_000;
const START = Date.parse('2026-11-13T12:00:00Z');
/** One ordinary request every 2 minutes for 7 days (5,040 events). */
const LAST = START + 7 * DAY - 2 * MINUTE;
/** EKS rejects a stale token 90 days after its warnafter (docs/scan.md --max-token-age). */
const REJECTION = Date.parse('2026-11-25T00:00:00Z');
const WARN_AFTER = REJECTION - 90 * DAY;
/** The host clock: a week after the log (an old export), so rule 1 (host clock + 24 h) plays no part. */
const CLOCK = () => LAST + 7 * DAY;
const STALE_USES = 1000;
const USES_FROM = START + 11.5 * 3_600_000;
/**
 * Where the skewed events are written: after ordinary event 1,800 (day 2.5), ~2.5–2.9 MB into the file. Their 475 KB
 * hold at least one sample (the first line at or after every 256 KiB of the file, serially and in the ranges of a
 * parallel read alike).
 */
const SKEWED_AT = 1800;
const SKEWED = 600;

/** The week; `skewed` ordinary events stamped 10 days ahead are written in its middle (a node's wrong clock). */
function week(skewed = 0): EventSpec[] {
  const specs: EventSpec[] = [];
  let stale = 0;
  for (let i = 0, t = START; t <= LAST; i++, t += 2 * MINUTE) {
    specs.push({ auditID: `p${i}`, time: t, kind: 'plain' });
    // Day 1: 1,000 stale uses of one token, one every 40 s from hour 11.5 (after the file's first 256 KiB) to hour 22.6.
    for (; stale < STALE_USES && USES_FROM + stale * 40_000 <= t; stale++) {
      const u = USES_FROM + stale * 40_000 + 1000;
      specs.push({ auditID: `b${stale}`, time: u, kind: 'stale', namespace: 'team-b', serviceAccount: 'batch', pod: 'batch-0', secondsAfterWarning: Math.floor((u - WARN_AFTER) / 1000) });
    }
    if (i === SKEWED_AT) for (let k = 0; k < skewed; k++) specs.push({ auditID: `s${k}`, time: t + 10 * DAY + k * 1000, kind: 'plain' });
  }
  return specs;
}

const text = (specs: EventSpec[]) => `${specs.map(auditEvent).join('\n')}\n`;
const weekText = text(week());
const plain = join(dir, 'week.log');
writeFileSync(plain, weekText);
const gz = join(dir, 'week.log.gz');
writeFileSync(gz, gzipSync(weekText));
const skewedText = text(week(SKEWED));
const skewedPlain = join(dir, 'skewed.log');
writeFileSync(skewedPlain, skewedText);
const skewedGz = join(dir, 'skewed.log.gz');
writeFileSync(skewedGz, gzipSync(skewedText));

/** Serially, and by worker threads (a plain file in ranges, a gzip file whole). */
const modes = [
  ['serial', {}],
  ['worker threads', { jobs: 2, parallelPlan: { minBytes: 0, minPlainBytes: 0, partBytes: 1024 * 1024, maxHitsPerMiB: Number.POSITIVE_INFINITY } }],
] as const;

const scan = (files: string[], extra: Partial<Parameters<typeof runScan>[0]> = {}) =>
  runScan({ files, cluster: 'prod', maxTokenAge: { mode: 'eks' }, clock: CLOCK, ...extra });

describe('a week of events, 1,000 stale uses on day 1', () => {
  it('the input is a few MB, most of it the middle of the file', () => {
    expect(weekText.length).toBeGreaterThan(2 * 1024 * 1024);
    expect(weekText.length).toBeLessThan(8 * 1024 * 1024);
  });

  for (const [mode, extra] of modes) {
    for (const [name, file] of [['plain', plain], ['gzip', gz]] as const) {
      it(`${name}, ${mode}: the reference time is the last event, the finding critical, no time left out`, async () => {
        const r = await scan([file], extra);
        expect(r.ignoredEventTimes).toEqual([]);
        expect(r.nowSource).toBe('latest-event');
        expect(new Date(r.now).toISOString()).toBe(new Date(LAST).toISOString());
        expect(r.readiness.window.start).toBe(new Date(START).toISOString());
        expect(r.readiness.window.end).toBe(new Date(LAST).toISOString());
        expect(r.report.stats.tokenUses).toBe(STALE_USES);
        expect(r.report.findings.map((f) => [`${f.namespace}/${f.serviceAccount}`, f.kind, f.severity, f.rejectionAt])).toEqual([
          ['team-b/batch', 'stale-token', 'critical', new Date(REJECTION).toISOString()],
        ]);
      });
    }
  }

  for (const [name, file] of [['plain', plain], ['gzip', gz]] as const) {
    for (const jobs of ['1', '2']) {
      it(`the CLI, ${name}, --jobs ${jobs}: --fail-on critical exits 1, the JSON now is the last event`, async () => {
        const run = await runCli(['scan', file, '--jobs', jobs, '--fail-on', 'critical', '--format', 'json']);
        expect(run.stderr).toBe('');
        expect(run.code).toBe(1);
        const doc = JSON.parse(run.stdout) as { now: string; ignoredEventTimes: unknown[]; findings: { severity: string }[] };
        expect(Date.parse(doc.now)).toBe(LAST);
        expect(doc.ignoredEventTimes).toEqual([]);
        expect(doc.findings.map((f) => f.severity)).toEqual(['critical']);
      });
    }
  }
});

describe('standard input (read once), 1,000 stale uses on day 1', () => {
  for (const f of [plain, gz]) {
    it(`piped to scan -, ${f.endsWith('.gz') ? 'gzip' : 'plain'}: --fail-on critical exits 1, now is the last event`, async () => {
      const run = await runCli(['scan', '-', '--format', 'json', '--fail-on', 'critical'], {}, { input: readFileSync(f) });
      expect(run.stderr).toBe('');
      expect(run.code).toBe(1);
      const doc = JSON.parse(run.stdout) as { now: string; ignoredEventTimes: unknown[]; findings: { severity: string }[] };
      expect(Date.parse(doc.now)).toBe(LAST);
      expect(doc.ignoredEventTimes).toEqual([]);
      expect(doc.findings.map((x) => x.severity)).toEqual(['critical']);
    });
  }
});

describe('600 ordinary events stamped 10 days ahead in the middle of the file (no token use among them)', () => {
  for (const [mode, extra] of modes) {
    for (const [name, file] of [['plain', skewedPlain], ['gzip', skewedGz]] as const) {
      it(`${name}, ${mode}: caught by the samples and listed; the reference time and window are the week's`, async () => {
        const r = await scan([file], extra);
        expect(new Date(r.now).toISOString()).toBe(new Date(LAST).toISOString());
        expect(r.readiness.window.end).toBe(new Date(LAST).toISOString());
        expect(r.ignoredEventTimes).toHaveLength(1);
        const [t] = r.ignoredEventTimes;
        const skewedFrom = START + SKEWED_AT * 2 * MINUTE + 10 * DAY;
        expect(Date.parse(t!.time)).toBeGreaterThanOrEqual(skewedFrom);
        expect(Date.parse(t!.until ?? t!.time)).toBeLessThanOrEqual(skewedFrom + SKEWED * 1000);
        // A sample stands for the lines up to the next one, 256 KiB (~330 lines) later: the group is counted within that
        // many lines (here 661: its two samples, the second's lines running on past it), far under a quarter of the week.
        expect(t!.count).toBeGreaterThanOrEqual(SKEWED - 331);
        expect(t!.count).toBeLessThanOrEqual(SKEWED + 331);
        expect(t!.reason).toMatch(/after the bulk of the input/);
        expect(r.readiness.verdict).toBe('not-safe'); // stale use was seen: certain however the window
        expect(r.report.findings.map((f) => f.severity)).toEqual(['critical']);
      });
    }
  }
});
