/**
 * A continuous week of audit events whose only stale-token uses are on its first day: the clock-skew rule
 * (docs/clock-skew.md) must weigh the ordinary events of each file's first and last 256 KiB, so the week's genuine
 * last event time is the reference time (docs/scan.md "--now": the latest audit event in the input), not a "wrong
 * clock" outweighed by the first day's token uses. The shape a new user's 7-day log had: its token uses rejected 4 days
 * after its last event (critical), taken for 11 days before it (warning) when the last event was left out.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { runScan } from '../../src/scan/run.js';
import { closePlan, planParallelRead } from '../../src/scan/parallel.js';
import { auditEvent, type EventSpec } from '../sources/events.js';
import { runCli } from '../cli/run-cli.js';

const dir = mkdtempSync(join(tmpdir(), 'tw-early-stale-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const MINUTE = 60_000;
const DAY = 86_400_000;
const START = Date.parse('2026-11-13T12:00:00Z');
/** One ordinary request every 2 minutes for 7 days (5,040 events, ~3 MB: far more than 256 KiB at each end). */
const LAST = START + 7 * DAY - 2 * MINUTE;
/** EKS rejects a stale token 90 days after its warnafter (docs/scan.md --max-token-age). */
const REJECTION = Date.parse('2026-11-25T00:00:00Z');
const WARN_AFTER = REJECTION - 90 * DAY;
/** The host clock: a week after the log (an old export), so rule 1 (host clock + 24 h) plays no part. */
const CLOCK = () => LAST + 7 * DAY;

function week(): EventSpec[] {
  const specs: EventSpec[] = [];
  for (let i = 0, t = START; t <= LAST; i++, t += 2 * MINUTE) {
    specs.push({ auditID: `p${i}`, time: t, kind: 'plain' });
    // 20 stale uses of one token on day 1, about 10 hours after the start.
    if (i >= 300 && i < 320) {
      specs.push({ auditID: `b${i}`, time: t + 1000, kind: 'stale', namespace: 'team-b', serviceAccount: 'batch', pod: 'batch-0', secondsAfterWarning: Math.floor((t + 1000 - WARN_AFTER) / 1000) });
    }
  }
  return specs;
}

const text = (specs: EventSpec[]) => `${specs.map(auditEvent).join('\n')}\n`;
const specs = week();
const plain = join(dir, 'week.log');
writeFileSync(plain, text(specs));
const gz = join(dir, 'week.log.gz');
writeFileSync(gz, gzipSync(text(specs)));
// The same week rotated into two gzip files (days 1–4 and 4–7), as a parallel read hands them to worker threads.
const half = specs.findIndex((s) => s.time >= START + 3.5 * DAY);
const rotated = [specs.slice(0, half), specs.slice(half)].map((part, n) => {
  const f = join(dir, `week-${n + 1}.log.gz`);
  writeFileSync(f, gzipSync(text(part)));
  return f;
});

const scan = (files: string[], extra: Partial<Parameters<typeof runScan>[0]> = {}) =>
  runScan({ files, cluster: 'prod', maxTokenAge: { mode: 'eks' }, clock: CLOCK, ...extra });

describe('a week of events, stale uses only on day 1', () => {
  for (const [name, files] of [['plain', [plain]], ['gzip', [gz]], ['two rotated gzip files', rotated]] as const) {
    it(`${name}: the reference time and the window end are the last event, the finding critical, no time left out`, async () => {
      const r = await scan([...files]);
      expect(r.nowSource).toBe('latest-event');
      expect(new Date(r.now).toISOString()).toBe(new Date(LAST).toISOString());
      expect(r.ignoredEventTimes).toEqual([]);
      expect(r.readiness.window.start).toBe(new Date(START).toISOString());
      expect(r.readiness.window.end).toBe(new Date(LAST).toISOString());
      expect(r.report.findings.map((f) => [`${f.namespace}/${f.serviceAccount}`, f.kind, f.severity, f.rejectionAt])).toEqual([
        ['team-b/batch', 'stale-token', 'critical', new Date(REJECTION).toISOString()],
      ]);
    });
  }

  it('read by worker threads (the gzip tails they keep): the serial result', async () => {
    const plan = await planParallelRead(rotated, { jobs: 2, minBytes: 0, maxHitsPerMiB: Number.POSITIVE_INFINITY });
    expect(plan?.tasks.map((t) => t.kind)).toEqual(['gzip', 'gzip']);
    if (plan) await closePlan(plan);
    const serial = await scan(rotated);
    const parallel = await scan(rotated, { jobs: 2, parallelPlan: { minBytes: 0, maxHitsPerMiB: Number.POSITIVE_INFINITY } });
    expect(parallel).toEqual(serial);
    expect(new Date(parallel.now).toISOString()).toBe(new Date(LAST).toISOString());
  });

  it('the CLI: --fail-on critical exits 1, the JSON now is the last event', async () => {
    const run = await runCli(['scan', plain, '--fail-on', 'critical', '--format', 'json']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(1);
    const doc = JSON.parse(run.stdout) as { now: string; ignoredEventTimes: unknown[]; findings: { severity: string }[] };
    expect(Date.parse(doc.now)).toBe(LAST);
    expect(doc.ignoredEventTimes).toEqual([]);
    expect(doc.findings.map((f) => f.severity)).toEqual(['critical']);
  });
});

describe('standard input (read once): the event times of its first and last lines, as for the file', () => {
  for (const f of [plain, gz]) {
    it(`piped to scan -, ${f.endsWith('.gz') ? 'gzip' : 'plain'}: the same now, readiness and findings as scan FILE`, async () => {
      const args = ['scan', '--format', 'json', '--fail-on', 'critical'];
      const [fromFile, fromPipe] = await Promise.all([runCli([...args, f]), runCli([...args, '-'], {}, { input: readFileSync(f) })]);
      expect(fromPipe.stderr).toBe('');
      expect(fromPipe.code).toBe(1);
      const a = JSON.parse(fromFile.stdout) as Record<string, unknown>;
      const b = JSON.parse(fromPipe.stdout) as Record<string, unknown>;
      expect(Date.parse(b.now as string)).toBe(LAST);
      expect(b.readiness).toEqual(a.readiness);
      expect((b.readiness as { window: { start: string } }).window.start).toBe(new Date(START).toISOString());
      expect(b.ignoredEventTimes).toEqual([]);
      expect(b.findings).toEqual(a.findings);
    });
  }
});
