import { describe, expect, it } from 'vitest';
import {
  atOrAbove,
  formatRejection,
  formatTimeLeft,
  isoSeconds,
  oldestTokenAgeDays,
  renderScanTable,
  shouldUseColor,
  statsLine,
} from '../../src/cli/format.js';
import { parseNow } from '../../src/cli/options.js';
import type { Finding, ScanReport } from '../../src/findings/types.js';

const NOW = Date.parse('2026-11-20T12:00:00Z');
const DAY = 86_400_000;
const HOUR = 3_600_000;

function finding(overrides: Partial<Finding> = {}): Finding {
  return {
    id: 'f1',
    cluster: 'prod-eks',
    namespace: 'kube-system',
    serviceAccount: 'multus',
    kind: 'stale-token',
    severity: 'critical',
    requests: 1234,
    firstSeen: '2026-11-20T00:00:00Z',
    lastSeen: '2026-11-20T12:00:00Z',
    maxSecondsAfterWarning: 7_300_000,
    rejectionAt: '2026-11-27T00:00:00.000Z',
    tokens: [
      {
        pod: 'kube-multus-ds-zwh6w',
        podUid: 'u1',
        node: 'n1',
        // rejection 90 d after warnAfter = 2026-11-27T00:00Z → warnAfter = 2026-08-29T00:00Z
        warnAfter: '2026-08-29T00:00:00.000Z',
        rejectionAt: '2026-11-27T00:00:00.000Z',
        requests: 1000,
        lastSeen: '2026-11-20T12:00:00Z',
      },
      {
        pod: 'kube-multus-ds-abcde',
        podUid: 'u2',
        node: 'n2',
        warnAfter: '2026-09-10T00:00:00.000Z',
        rejectionAt: '2026-12-09T00:00:00.000Z',
        requests: 234,
        lastSeen: '2026-11-20T11:00:00Z',
      },
    ],
    pods: ['kube-multus-ds-abcde', 'kube-multus-ds-zwh6w'],
    workloads: [{ kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds' }],
    userAgents: ['multus/v0.0.0 (linux/amd64) kubernetes/$Format'],
    sourceIPs: ['192.168.1.10'],
    cause: {
      id: 'static-token-file',
      component: 'multus-thin',
      summary: 'copies the token once',
      fix: 'Move to the Multus thick plugin.',
      evidence: [],
      sources: [],
    },
    ...overrides,
  };
}

const STATS: ScanReport['stats'] = { files: 2, lines: 1234, events: 1200, tokenUses: 57, malformed: 1, duplicates: 3 };

describe('formatTimeLeft', () => {
  it('counts whole days left, rounded down', () => {
    expect(formatTimeLeft(NOW + 6 * DAY + 23 * HOUR, NOW)).toBe('in 6 d');
    expect(formatTimeLeft(NOW + DAY, NOW)).toBe('in 1 d');
  });
  it('counts hours in the last day', () => {
    expect(formatTimeLeft(NOW + 5 * HOUR + 59 * 60_000, NOW)).toBe('in 5 h');
    expect(formatTimeLeft(NOW + 1000, NOW)).toBe('in 0 h');
  });
  it('says REJECTED with days or hours ago once passed', () => {
    expect(formatTimeLeft(NOW - 3 * DAY - HOUR, NOW)).toBe('REJECTED 3 d ago');
    expect(formatTimeLeft(NOW - 2 * HOUR, NOW)).toBe('REJECTED 2 h ago');
    expect(formatTimeLeft(NOW, NOW)).toBe('REJECTED 0 h ago');
  });
});

describe('formatRejection', () => {
  it('prints the UTC date and the time left', () => {
    expect(formatRejection('2026-11-27T00:00:00.000Z', NOW)).toBe('2026-11-27 (in 6 d)');
    expect(formatRejection('2026-11-17T06:00:00Z', NOW)).toBe('2026-11-17 (REJECTED 3 d ago)');
  });
  it('prints - for findings without a rejection time', () => {
    expect(formatRejection(null, NOW)).toBe('-');
  });
});

describe('oldestTokenAgeDays', () => {
  it('counts from the oldest token issue time (warnAfter − 3607 s)', () => {
    // 2026-08-29T00:00Z → 2026-11-20T12:00Z is 83.5 days; plus 3607 s → 83.54 → 83
    expect(oldestTokenAgeDays(finding(), NOW)).toBe(83);
  });
  it('falls back to maxSecondsAfterWarning when no token has warnAfter', () => {
    const f = finding({
      tokens: [{ pod: null, podUid: null, node: null, warnAfter: null, rejectionAt: null, requests: 1, lastSeen: '2026-11-20T12:00:00Z' }],
      maxSecondsAfterWarning: 10 * 86_400 - 3607,
    });
    expect(oldestTokenAgeDays(f, NOW)).toBe(10);
  });
  it('is undefined for legacy tokens', () => {
    const f = finding({ kind: 'legacy-token', tokens: [], maxSecondsAfterWarning: null, rejectionAt: null });
    expect(oldestTokenAgeDays(f, NOW)).toBeUndefined();
  });
});

describe('renderScanTable', () => {
  const report: ScanReport = {
    findings: [
      finding(),
      finding({
        id: 'f2',
        namespace: 'logging',
        serviceAccount: 'fluent-bit',
        severity: 'warning',
        requests: 12,
        rejectionAt: '2026-11-17T06:00:00Z',
        pods: ['fb-1', 'fb-2', 'fb-3', 'fb-4', 'fb-5'],
        missingPods: ['fb-2'],
        workloads: [],
        clusterState: 'cluster state unavailable',
        cause: { id: 'client-caches-token', component: null, summary: 's', fix: 'Upgrade Fluent Bit.', evidence: [], sources: [] },
      }),
    ],
    stats: STATS,
  };

  it('one row per ServiceAccount: its stale-token and unauthorized findings share a row, kinds and requests one a line', () => {
    const stale = report.findings[0]!;
    const unauth = finding({ id: 'f401', kind: 'unauthorized', severity: 'critical', requests: 37, rejectionAt: null, tokens: [], pods: [], maxSecondsAfterWarning: null });
    const grouped: ScanReport = { ...report, findings: [stale, unauth, report.findings[1]!] };
    for (const width of [undefined, 80]) {
      const out = renderScanTable(grouped, { now: NOW, nowSource: 'latest-event', color: false, ...(width ? { width } : {}) });
      const rowStarts = out.split('\n').filter((l) => /^│ \d+ /.test(l));
      expect(rowStarts).toHaveLength(2);
      expect(out).not.toContain('│ 3 ');
      expect(out.split('\n').find((l) => l.startsWith('│ 1 '))).toContain('unauthorized');
      expect(out).toMatch(/│ +│[^\n]*stale-token/); // the second kind on the row's next line
      expect(out).toContain('37');
    }
    const wide = renderScanTable(grouped, { now: NOW, nowSource: 'latest-event', color: false });
    expect(wide.split('\n')).toContain('#1 kube-system/multus unauthorized, stale-token: fix: Move to the Multus thick plugin.');
    expect(wide.split('\n')).toContain('#2 logging/fluent-bit stale-token: fix: Upgrade Fluent Bit.');
  });

  it("names the rows whose workloads are unknown, one note per reason, in both layouts", () => {
    const noWorkload = (id: string, sa: string, clusterState?: string) =>
      finding({ id, serviceAccount: sa, workloads: [], pods: [], ...(clusterState !== undefined ? { clusterState } : {}) });
    const findings = [noWorkload('a', 'a-sa'), finding({ id: 'b', serviceAccount: 'b-sa' }), noWorkload('c', 'c-sa'), noWorkload('d', 'd-sa', 'cluster state unavailable')];
    for (const width of [undefined, 80]) {
      const out = renderScanTable({ findings, stats: STATS }, { now: NOW, nowSource: 'latest-event', color: false, ...(width ? { width } : {}) });
      const lines = out.split('\n');
      // Rows are in the order the table shows them: read each ServiceAccount's row number from it.
      const rowOf = (sa: string) => {
        const m = width ? out.match(new RegExp(`#(\\d+) kube-system/${sa} `)) : out.match(new RegExp(`│ (\\d+) +│[^\\n]*kube-system/${sa}`));
        return Number(m?.[1]);
      };
      const [a, c, d] = [rowOf('a-sa'), rowOf('c-sa'), rowOf('d-sa')];
      expect([a, c, d].every((n) => n >= 1 && n <= 4), `rows ${a}, ${c}, ${d}`).toBe(true);
      const [first, second] = a < c ? [a, c] : [c, a];
      expect(lines).toContain(`workload ? (rows ${first}, ${second}): no pod of this ServiceAccount found in cluster state`);
      expect(lines).toContain(`workload ? (row ${d}): cluster state unavailable`);
      expect(lines.filter((l) => l.startsWith('workload ?'))).toHaveLength(2);
    }
  });

  it('prints one row per finding with the contract facts, fix lines and the footer', () => {
    const out = renderScanTable(report, { now: NOW, nowSource: 'latest-event', color: false });
    const lines = out.split('\n');
    const row1 = lines.find((l) => l.includes('kube-system/multus'));
    expect(row1).toBeDefined();
    for (const cell of ['│ 1 ', 'prod-eks', 'stale-token', 'critical', 'DaemonSet kube-system/kube-multus-ds', 'kube-multus-ds-abcde', '│ 83 ', '2026-11-27 (in 6 d)', '1,234', 'static-token-file']) {
      expect(row1).toContain(cell);
    }
    expect(out).toContain('(multus-thin)');
    expect(out).toContain('kube-multus-ds-zwh6w');
    const row2 = lines.find((l) => l.includes('logging/fluent-bit'));
    for (const cell of ['warning', '│ ? ', 'fb-1', '2026-11-17 (REJECTED 3 d ago)', 'client-caches-token']) {
      expect(row2).toContain(cell);
    }
    expect(out).toContain('+2 more');
    expect(out).toContain('fb-2 (gone)');
    expect(out).not.toContain('fb-1 (gone)');
    expect(out).not.toContain('fb-4');
    expect(lines).toContain('#1 kube-system/multus stale-token: fix: Move to the Multus thick plugin.');
    expect(lines).toContain('#2 logging/fluent-bit stale-token: fix: Upgrade Fluent Bit.');
    expect(lines).toContain('workload ? (row 2): cluster state unavailable');
    expect(lines).toContain('as of 2026-11-20T12:00:00Z (latest event in input; override with --now)');
    expect(lines).toContain('read 2 files: 1,234 lines, 1,200 events, 57 token uses, 1 malformed, 3 duplicates');
    expect(out).not.toMatch(/\u001b\[/);
    expect(out.endsWith('\n')).toBe(true);
  });

  it('keeps the report order (severity, then rejection)', () => {
    const out = renderScanTable(report, { now: NOW, nowSource: 'latest-event', color: false });
    expect(out.indexOf('kube-system/multus')).toBeLessThan(out.indexOf('logging/fluent-bit'));
  });

  it('colours severity and rejected tokens only when asked', () => {
    const out = renderScanTable(report, { now: NOW, nowSource: 'option', color: true });
    expect(out).toMatch(/\u001b\[31m\u001b\[1mcritical/);
    expect(out).toMatch(/\u001b\[31m2026-11-17 \(REJECTED 3 d ago\)/);
    expect(out).toContain('as of 2026-11-20T12:00:00Z (set with --now)');
  });

  it('prints a clear line when nothing was found', () => {
    const out = renderScanTable({ findings: [], stats: { ...STATS, events: 1200 } }, { now: NOW, nowSource: 'clock', color: false });
    expect(out.split('\n')).toEqual([
      'no stale, legacy or unauthorized token use found in 1,200 events',
      'as of 2026-11-20T12:00:00Z (current time: no event in input; override with --now)',
      'read 2 files: 1,234 lines, 1,200 events, 57 token uses, 1 malformed, 3 duplicates',
      '',
    ]);
  });
});

describe('helpers', () => {
  it('statsLine uses singular for one', () => {
    expect(statsLine({ files: 1, lines: 1, events: 1, tokenUses: 1, malformed: 0, duplicates: 1 })).toBe(
      'read 1 file: 1 line, 1 event, 1 token use, 0 malformed, 1 duplicate',
    );
  });
  it('isoSeconds drops zero milliseconds only', () => {
    expect(isoSeconds(NOW)).toBe('2026-11-20T12:00:00Z');
    expect(isoSeconds(NOW + 5)).toBe('2026-11-20T12:00:00.005Z');
  });
  it('atOrAbove orders info < warning < critical', () => {
    expect(atOrAbove('warning', 'info')).toBe(true);
    expect(atOrAbove('warning', 'warning')).toBe(true);
    expect(atOrAbove('warning', 'critical')).toBe(false);
    expect(atOrAbove('info', 'warning')).toBe(false);
  });
  it('shouldUseColor: TTY only, NO_COLOR wins', () => {
    expect(shouldUseColor({ isTTY: true }, {})).toBe(true);
    expect(shouldUseColor({ isTTY: false }, {})).toBe(false);
    expect(shouldUseColor({}, {})).toBe(false);
    expect(shouldUseColor({ isTTY: true }, { NO_COLOR: '1' })).toBe(false);
    expect(shouldUseColor({ isTTY: true }, { NO_COLOR: '' })).toBe(true);
  });
  it('parseNow accepts zoned ISO-8601 and refuses the rest', () => {
    expect(parseNow('2026-11-20T12:00:00Z')).toBe(NOW);
    expect(parseNow('2026-11-20T13:00:00+01:00')).toBe(NOW);
    expect(parseNow('2026-11-20T12:00:00.000Z')).toBe(NOW);
    expect(parseNow('2026-11-20')).toBe(Date.parse('2026-11-20T00:00:00Z'));
    for (const bad of ['2026-11-20T12:00:00', '2026-02-30T00:00:00Z', 'yesterday', '1763640000', '2026-13-45T00:00:00Z', '']) {
      expect(() => parseNow(bad)).toThrow(/ISO-8601/);
    }
  });
});

describe('readiness section', () => {
  it('names the flag, the verdict and each client with its finding number', async () => {
    const { readinessSection, READINESS_HEADING } = await import('../../src/cli/format.js');
    const lines = readinessSection(
      {
        cluster: 'prod',
        verdict: 'not-safe',
        summary: 'not safe: 1 client would break (stale tokens in 8 days of audit data)',
        reasons: [],
        window: { start: null, end: null, seconds: null, minimumSeconds: 604_800 },
        coverage: { events: 10, polls: null, blind: null, gaps: [] },
        clients: [{ findingId: 'x', namespace: 'logging', serviceAccount: 'fluent-bit', workloads: [{ kind: 'DaemonSet', namespace: 'logging', name: 'fluent-bit' }], lastUse: '2026-11-06T00:00:00.000Z', cause: 'client-caches-token', fix: 'Upgrade.' }],
      },
      [],
    );
    expect(READINESS_HEADING).toContain('--service-account-extend-token-expiration=false');
    expect(lines).toEqual([
      READINESS_HEADING,
      '  not safe: 1 client would break (stale tokens in 8 days of audit data)',
      '  - logging/fluent-bit (DaemonSet logging/fluent-bit): last stale use 2026-11-06T00:00:00.000Z; fix: Upgrade.',
    ]);
  });
});
