/**
 * The token-extension readiness verdict of `scan` (safe / not safe / unknown) and the plausibility of the default
 * reference time, over real audit JSON-lines files. The facts: a projected token past its one-hour exp is annotated
 * `authentication.k8s.io/stale-token` while extension is on, and is refused with 401 once it is off
 * (kubernetes pkg/serviceaccount/claims.go); CIS Kubernetes Benchmark 1.2.30 asks for extension off.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readinessVerdict } from '../../src/findings/readiness.js';
import { runScan } from '../../src/scan/run.js';
import { EventTimeDensity, judgeEventTimes } from '../../src/findings/clock-skew.js';
import { jsonDocument } from '../../src/cli/commands/scan.js';
import { renderScanTable } from '../../src/cli/format.js';
import { auditEvent, type EventSpec } from '../sources/events.js';

const dir = mkdtempSync(join(tmpdir(), 'tw-readiness-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const START = Date.parse('2026-11-01T00:00:00Z');
const CLOCK = () => Date.parse('2026-12-01T00:00:00Z');

function file(name: string, specs: EventSpec[]): string {
  const p = join(dir, name);
  writeFileSync(p, `${specs.map(auditEvent).join('\n')}\n`);
  return p;
}

/** One plain (non-token) request every 6 hours for `days` days from START. */
function quiet(days: number): EventSpec[] {
  const out: EventSpec[] = [];
  for (let t = START; t <= START + days * DAY; t += 6 * HOUR) out.push({ auditID: `q-${t}`, time: t, kind: 'plain' });
  return out;
}

const scan = (files: string[], extra: Partial<Parameters<typeof runScan>[0]> = {}) =>
  runScan({ files, cluster: 'prod', maxTokenAge: { mode: 'eks' }, clock: CLOCK, ...extra });

describe('readiness verdict in scan', () => {
  it('safe: 8 days of audit events without a stale use, with the window and the events it relied on', async () => {
    const r = await scan([file('safe.log', quiet(8))]);
    expect(r.readiness.verdict).toBe('safe');
    expect(r.readiness.window).toEqual({ start: '2026-11-01T00:00:00.000Z', end: '2026-11-09T00:00:00.000Z', seconds: 8 * 86_400, minimumSeconds: 7 * 86_400 });
    expect(r.readiness.coverage.events).toBe(8 * 4 + 1);
    expect(r.readiness.summary).toBe('safe: no stale token use in 8 days of audit data (2026-11-01T00:00:00.000Z to 2026-11-09T00:00:00.000Z); 33 audit events read');
    expect(r.readiness.clients).toEqual([]);
  });

  it('not safe: the client that presented a stale token would break, with its last use and fix', async () => {
    const stale: EventSpec = { auditID: 's-1', time: START + 5 * DAY, kind: 'stale', namespace: 'logging', serviceAccount: 'fluent-bit', pod: 'fluent-bit-x1', secondsAfterWarning: 20 * 86_400, userAgent: 'fluent-bit/1.8.3' };
    const r = await scan([file('not-safe.log', [...quiet(8), stale])]);
    expect(r.readiness.verdict).toBe('not-safe');
    expect(r.readiness.summary).toMatch(/^not safe: 1 client would break/);
    expect(r.readiness.clients).toHaveLength(1);
    expect(r.readiness.clients[0]).toMatchObject({ namespace: 'logging', serviceAccount: 'fluent-bit', lastUse: '2026-11-06T00:00:00.000Z', cause: 'client-caches-token' });
    expect(r.readiness.clients[0]!.fix).toContain('1.9.4');
    const doc = jsonDocument(r, 'prod') as { readiness: { verdict: string }; findings: unknown[] };
    expect(doc.readiness.verdict).toBe('not-safe');
    expect(doc.findings).toHaveLength(1);
  });

  it('unknown: a window shorter than the minimum says so, and a configured minimum applies', async () => {
    const f = file('short.log', quiet(2));
    const r = await scan([f]);
    expect(r.readiness.verdict).toBe('unknown');
    expect(r.readiness.reasons).toEqual([
      'the audit window (2 days) is shorter than the minimum of 7 days: clients that refresh a cached token daily or weekly may not show up yet',
    ]);
    expect((await scan([f], { readinessMinWindowMs: DAY })).readiness.verdict).toBe('safe');
  });

  it('unknown: a blind log (no audit events) and incomplete data', () => {
    const blind = readinessVerdict({ cluster: 'prod', findings: [], coverage: { events: 0, gaps: [] } });
    expect(blind.verdict).toBe('unknown');
    expect(blind.reasons).toEqual(['the audit log is blind: no audit events were read', 'the audit window is unknown (no event times)']);
    const partial = readinessVerdict({ cluster: 'prod', findings: [], coverage: { windowStart: START, windowEnd: START + 10 * DAY, events: 5000, gaps: ['2 polls failed'] } });
    expect(partial.verdict).toBe('unknown');
    expect(partial.reasons).toEqual(['the audit data is incomplete: 2 polls failed']);
  });
});

describe('event times that survive a wrong clock (src/findings/clock-skew.ts)', () => {
  it('one event stamped 9999-12-31 does not move the reference time, and is named', async () => {
    const forged: EventSpec = { auditID: 'forged', time: Date.parse('9999-12-31T00:00:00Z'), kind: 'plain' };
    const r = await scan([file('forged.log', [...quiet(8), forged])]);
    expect(new Date(r.now).toISOString()).toBe('2026-11-09T00:00:00.000Z');
    expect(r.readiness.window.end).toBe('2026-11-09T00:00:00.000Z');
  });

  it('rule: host clock + 24 h; groups more than 24 h apart from the bulk with at most a quarter of its times; a sparse input is kept', () => {
    const d = (times: number[]) => {
      const x = new EventTimeDensity();
      for (const t of times) x.add(t);
      return judgeEventTimes(x, CLOCK());
    };
    const bulk = Array.from({ length: 40 }, (_, i) => START + i * 90_000); // an hour
    for (const skew of [2 * DAY, 8 * DAY, -3 * DAY]) {
      const skewed = Array.from({ length: 10 }, (_, i) => START + skew + i * 60_000);
      const j = d([...bulk, ...skewed]);
      expect(j.latest).toBe(START + 39 * 90_000);
      expect(j.earliest).toBe(START);
      expect(j.ignored).toEqual([expect.objectContaining({ time: new Date(skewed[0]!).toISOString(), until: new Date(skewed[9]!).toISOString(), count: 10 })]);
      expect(j.inconsistent(skewed[3]!)).toBe(true);
      expect(j.inconsistent(bulk[3]!)).toBe(false);
    }
    // 11 of 40 (more than a quarter) 2 days later: a real second burst, kept.
    expect(d([...bulk, ...Array.from({ length: 11 }, (_, i) => START + 2 * DAY + i * 60_000)]).ignored).toEqual([]);
    // Under 24 h apart: one group.
    expect(d([...bulk, START + 20 * HOUR]).ignored).toEqual([]);
    // A sparse input (bulk under 10 times): no bulk to compare with.
    expect(d([START, START + 30 * DAY]).latest).toBe(START + 30 * DAY);
  });

  for (const [name, skew] of [['2 days', 2 * DAY], ['8 days', 8 * DAY]] as const) {
    it(`10 events stamped ${name} ahead of an hour of normal events: reference time, window and rejection dates ignore them, readiness is never safe`, async () => {
      // An hour of normal events: 60 stale uses of one token (EKS rejects 90 days after warnAfter) and plain events.
      const warnAfter = START - 80 * DAY;
      const normal: EventSpec[] = Array.from({ length: 60 }, (_, i) => {
        const time = START + i * 60_000;
        return { auditID: `n${i}`, time, kind: 'stale', namespace: 'logging', serviceAccount: 'fluent-bit', pod: 'fluent-bit-x1', secondsAfterWarning: Math.floor((time - warnAfter) / 1000) };
      });
      // The same client through a control-plane node whose clock runs ahead: event time + skew, same real warnAfter.
      const skewed: EventSpec[] = Array.from({ length: 10 }, (_, i) => {
        const real = START + 30 * 60_000 + i * 60_000;
        return { auditID: `k${i}`, time: real + skew, kind: 'stale', namespace: 'logging', serviceAccount: 'fluent-bit', pod: 'fluent-bit-x1', secondsAfterWarning: Math.floor((real - warnAfter) / 1000) };
      });
      const f = file(`skew-${name}.log`, [...normal.slice(0, 30), ...skewed, ...normal.slice(30)]);
      // With the host clock long after the log (an old export) and with it right after the log: the same result.
      for (const clock of [CLOCK, () => START + 2 * HOUR]) {
        const r = await scan([f], { clock });
        expect(new Date(r.now).toISOString()).toBe(new Date(START + 59 * 60_000).toISOString());
        expect(r.readiness.window.end).toBe(new Date(START + 59 * 60_000).toISOString());
        expect(r.readiness.verdict).not.toBe('safe');
        const fb = r.report.findings.filter((x) => x.kind === 'stale-token');
        expect(fb).toHaveLength(1);
        // One token, its real rejection date: no phantom token at warnAfter + skew.
        expect(fb[0]!.tokens.map((t) => t.rejectionAt)).toEqual([new Date(warnAfter + 90 * DAY).toISOString()]);
        expect(fb[0]!.requests).toBe(60);
        expect(r.ignoredEventTimes).toEqual([
          expect.objectContaining({ time: new Date(skewed[0]!.time).toISOString(), until: new Date(skewed[9]!.time).toISOString(), count: 10, source: f }),
        ]);
      }
      // A quiet hour-long log (no stale use): never "safe" on a window the skewed times would stretch.
      const quietSkewed = file(`quiet-skew-${name}.log`, [
        ...Array.from({ length: 60 }, (_, i): EventSpec => ({ auditID: `q${i}`, time: START + i * 60_000, kind: 'legacy', namespace: 'ci', serviceAccount: 'jenkins' })),
        ...Array.from({ length: 10 }, (_, i): EventSpec => ({ auditID: `qs${i}`, time: START + skew + i * 60_000, kind: 'legacy', namespace: 'ci', serviceAccount: 'jenkins' })),
      ]);
      const q = await scan([quietSkewed], { readinessMinWindowMs: 0 });
      expect(q.readiness.verdict).toBe('unknown');
      expect(q.readiness.summary).toMatch(/^unknown: audit timestamps inconsistent: 10 event times left out/);
      expect(q.readiness.window.seconds).toBe(59 * 60);
    });
  }
});

describe('ordinary events stamped days ahead at the end of a quiet log', () => {
  for (const [name, skew] of [['2 days', 2 * DAY], ['8 days', 8 * DAY]] as const) {
    it(`an hour of events, then 10 stamped ${name} ahead: the window stays one hour, the times are listed, never "safe"`, async () => {
      const specs: EventSpec[] = [];
      for (let i = 0; i < 120; i++) specs.push({ auditID: `p${i}`, time: START + i * 30_000, kind: 'plain' });
      for (let i = 0; i < 10; i++) specs.push({ auditID: `s${i}`, time: START + 60 * 60_000 + skew + i * 1000, kind: 'plain' });
      const f = file(`quiet-plain-skew-${name}.log`, specs);
      for (const min of [undefined, 0]) {
        const r = await scan([f], min === undefined ? {} : { readinessMinWindowMs: min });
        expect(r.readiness.window.end).toBe(new Date(START + 119 * 30_000).toISOString());
        expect(r.readiness.verdict).toBe('unknown');
        expect(r.readiness.summary).toMatch(/^unknown: audit timestamps inconsistent: 10 event times left out/);
        expect(r.ignoredEventTimes).toEqual([expect.objectContaining({ time: new Date(START + 60 * 60_000 + skew).toISOString(), count: 10, source: f })]);
        expect(new Date(r.now).toISOString()).toBe(new Date(START + 119 * 30_000).toISOString());
      }
    });
  }
});

describe('the density counts each ordinary event of a file\'s first and last 256 KiB once', () => {
  // Ordinary events over an hour, then 10 token uses stamped 3 days later: the uses are judged against the events.
  for (const [name, minBytes] of [['whole file in both ends', 0], ['first and last 256 KiB overlapping', 400 * 1024]] as const) {
    for (const gz of [false, true]) {
      it(`${name}${gz ? ', gzip' : ''}: the bulk is the number of ordinary events`, async () => {
        const specs: EventSpec[] = [];
        let bytes = 0;
        for (let i = 0; i < 40 || bytes < minBytes; i++) {
          const s: EventSpec = { auditID: `o${i}`, time: START + i * 1000, kind: 'plain' };
          bytes += auditEvent(s).length + 1;
          specs.push(s);
        }
        const n = specs.length;
        for (let i = 0; i < 10; i++) specs.push({ auditID: `k${i}`, time: START + 3 * DAY + i * 60_000, kind: 'legacy', namespace: 'ci', serviceAccount: 'jenkins' });
        const text = `${specs.map(auditEvent).join('\n')}\n`;
        const p = join(dir, `edges-${n}${gz ? '.log.gz' : '.log'}`);
        writeFileSync(p, gz ? gzipSync(text) : text);
        const r = await scan([p]);
        expect(r.ignoredEventTimes).toEqual([expect.objectContaining({ time: new Date(START + 3 * DAY).toISOString(), count: 10, source: p })]);
        expect(r.ignoredEventTimes[0]!.reason).toContain(`the bulk of the input (${n} times, `);
        expect(new Date(r.now).toISOString()).toBe(new Date(START + (n - 1) * 1000).toISOString());
      });
    }
  }
});

describe('a skewed control-plane clock that explains 401s', () => {
  it('is named on the one cluster-level finding, and the table footer lists the times left out', async () => {
    const items: unknown[] = [];
    const specs: EventSpec[] = [];
    // An hour of normal events: a legacy-token client.
    for (let i = 0; i < 60; i++) specs.push({ auditID: `l${i}`, time: START + i * 60_000, kind: 'legacy', namespace: 'ci', serviceAccount: 'jenkins' });
    // 6 ServiceAccounts refused from minute 30, staggered by 40 s, without end: attributed by their pods' addresses.
    for (let c = 0; c < 6; c++) {
      const ip = `10.5.0.${10 + c}`;
      items.push({ kind: 'Pod', apiVersion: 'v1', metadata: { namespace: `ns${c % 3}`, name: `app${c}-x1`, uid: `app${c}-uid` }, spec: { serviceAccountName: `app${c}`, containers: [{ name: 'app', image: 'acme/app:1.0' }] }, status: { phase: 'Running', startTime: '2026-10-01T00:00:00Z', podIP: ip, hostIP: '10.0.0.1' } });
      for (let t = START + 30 * 60_000 + c * 40_000; t < START + 60 * 60_000; t += 5 * 60_000) specs.push({ auditID: `u${c}-${t}`, time: t, kind: 'unauthorized', sourceIP: ip, userAgent: `app${c}/1.0` });
    }
    // The node with the skewed clock: 10 token uses stamped 2 days ahead.
    for (let i = 0; i < 10; i++) specs.push({ auditID: `k${i}`, time: START + 2 * DAY + i * 60_000, kind: 'legacy', namespace: 'ci', serviceAccount: 'jenkins' });
    const snap = join(dir, 'skew-snapshot.json');
    writeFileSync(snap, JSON.stringify({ kind: 'List', apiVersion: 'v1', items }));
    const r = await scan([file('skew-401.log', specs)], { snapshot: snap });
    const cluster = r.report.findings.filter((f) => f.kind === 'cluster-credential');
    expect(cluster).toHaveLength(1);
    expect(cluster[0]!.cause.evidence.join('\n')).toContain('audit timestamps inconsistent in the same data: 10 event times left out');
    const table = renderScanTable(r.report, { now: r.now, nowSource: r.nowSource, color: false, readiness: r.readiness, ignoredEventTimes: r.ignoredEventTimes });
    expect(table).toContain(`left out: 10 event times ${new Date(START + 2 * DAY).toISOString()} to ${new Date(START + 2 * DAY + 9 * 60_000).toISOString()}`);
  });
});

describe('a repeated auditID does not hide a token use', () => {
  const stale: EventSpec = { auditID: 'req-42', time: START + DAY, kind: 'stale', namespace: 'apps', serviceAccount: 'worker', pod: 'worker-1', secondsAfterWarning: 86_400, userAgent: 'Go-http-client/1.1' };

  it('an earlier forged record with the same auditID and stage but other annotations: both kept, conflict counted and warned', async () => {
    const forged: EventSpec = { ...stale, time: START + DAY - HOUR, namespace: 'decoy', serviceAccount: 'nobody', pod: 'decoy-1' };
    const r = await scan([file('conflict.log', [...quiet(8), forged, stale])]);
    expect(r.report.findings.map((f) => `${f.namespace}/${f.serviceAccount}`).sort()).toEqual(['apps/worker', 'decoy/nobody']);
    expect(r.report.stats.auditIdConflicts).toBe(1);
    expect(r.notices.filter((n) => n.code === 'auditid-conflict')).toHaveLength(1);
    expect(r.notices.find((n) => n.code === 'auditid-conflict')!.message).toContain('auditID req-42 and stage ResponseComplete');
  });

  it('the same request at two stages is still counted once', async () => {
    const lines = [auditEvent(stale), auditEvent(stale).replace('"stage":"ResponseComplete"', '"stage":"ResponseStarted"'), auditEvent(stale)];
    const p = join(dir, 'stages.log');
    writeFileSync(p, `${lines.join('\n')}\n`);
    const r = await scan([p]);
    expect(r.report.stats.tokenUses).toBe(1);
    expect(r.report.stats.duplicates).toBe(2);
    expect(r.report.stats.auditIdConflicts).toBeUndefined();
  });
});
