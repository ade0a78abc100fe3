/**
 * `tokenwatch scan` end to end on the bundled examples (the Multus CNI thin-plugin story on EKS),
 * run as a child process and checked against `examples/expected.json` (written by the examples
 * generator from its own model, not from tokenwatch's output).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Finding, ScanReport } from '../../src/findings/types.js';
import { ROOT, runCli, type CliRun } from './run-cli.js';

interface ExpectedFinding {
  story: string;
  cluster: string;
  namespace: string;
  serviceAccount: string;
  kind: Finding['kind'];
  severity: Finding['severity'];
  requests: number;
  firstSeen: string;
  lastSeen: string;
  maxSecondsAfterWarning: number | null;
  rejectionAt: string | null;
  daysLeft: number | null;
  pods: string[];
  missingPods: string[];
  workloads: Finding['workloads'];
  userAgents?: string[];
  sourceIPs?: string[];
  component: string | null;
  tokens?: { pod: string; rejectionAt: string; warnAfter: string; requests: number; lastSeen: string }[];
}
interface Expected {
  cluster: string;
  referenceTime: string;
  inputs: Record<
    string,
    {
      files: string[];
      referenceTime: string;
      stats: { files: number; lines: number; auditEvents: number; malformed: number; tokenUses: number; duplicates: number };
      findings: ExpectedFinding[];
    }
  >;
}

const expected = JSON.parse(readFileSync(join(ROOT, 'examples/expected.json'), 'utf8')) as Expected;
const all = expected.inputs['audit-all'];
if (!all) throw new Error('examples/expected.json has no audit-all input');
const SNAPSHOT = 'examples/cluster-snapshot.json';
const demoArgs = ['scan', '--audit-log', ...all.files, '--cluster', expected.cluster, '--cluster-snapshot', SNAPSHOT];

/** Contract keys (docs/design/contracts.md "--format json") and the documented additive ones. */
const CONTRACT = {
  top: ['findings', 'stats'],
  topAdditive: ['now', 'cluster', 'warnings', 'ignoredEventTimes', 'readiness', 'clusterEvents', 'groups'],
  finding: ['id', 'cluster', 'namespace', 'serviceAccount', 'kind', 'severity', 'requests', 'firstSeen', 'lastSeen',
    'maxSecondsAfterWarning', 'rejectionAt', 'tokens', 'pods', 'workloads', 'userAgents', 'sourceIPs', 'cause'],
  findingAdditive: ['missingPods', 'clusterState', 'forwardedIPs', 'attribution'],
  token: ['pod', 'podUid', 'node', 'warnAfter', 'rejectionAt', 'requests', 'lastSeen'],
  workload: ['kind', 'namespace', 'name'],
  cause: ['id', 'component', 'summary', 'fix', 'evidence', 'sources'],
  stats: ['files', 'lines', 'events', 'tokenUses', 'malformed', 'duplicates'],
  statsAdditive: ['truncated'],
};
const SEVERITY_RANK = { info: 0, warning: 1, critical: 2 } as const;

type Doc = ScanReport & { now: string; cluster: string };
let json: CliRun;
let table: CliRun;
let failOnRepeated: CliRun;
let emptyFailOn: CliRun;
let withNow: CliRun;
let doc: Doc;
const dir = mkdtempSync(join(tmpdir(), 'tokenwatch-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const maxSeverity = all.findings.reduce<Finding['severity']>(
  (m, f) => (SEVERITY_RANK[f.severity] > SEVERITY_RANK[m] ? f.severity : m),
  'info',
);
const NOW_OVERRIDE = '2026-11-01T00:00:00Z';

beforeAll(async () => {
  // An audit log whose only event uses a fresh token: no finding.
  const quiet = join(dir, 'quiet.log');
  writeFileSync(
    quiet,
    `${JSON.stringify({
      kind: 'Event', apiVersion: 'audit.k8s.io/v1', level: 'Metadata', auditID: 'q1', stage: 'ResponseComplete',
      verb: 'get', requestURI: '/api/v1/namespaces/kube-system/pods',
      user: { username: 'system:serviceaccount:kube-system:coredns', groups: ['system:serviceaccounts'] },
      sourceIPs: ['10.0.0.1'], responseStatus: { code: 200 },
      requestReceivedTimestamp: '2026-11-20T12:00:00.000000Z', stageTimestamp: '2026-11-20T12:00:00.000000Z',
      annotations: { 'authorization.k8s.io/decision': 'allow' },
    })}\n`,
  );
  const [f1, f2] = all.files;
  [json, table, failOnRepeated, emptyFailOn, withNow] = await Promise.all([
    runCli([...demoArgs, '--format', 'json']),
    // The full table: one line per row holds every column (the default fitted table wraps them).
    runCli([...demoArgs, '--wide']),
    // --audit-log repeated instead of variadic, and --fail-on at the highest expected severity.
    runCli(['scan', '--audit-log', f1 ?? '', '--audit-log', f2 ?? '', '--cluster', expected.cluster,
      '--cluster-snapshot', SNAPSHOT, '--format', 'json', '--fail-on', maxSeverity]),
    runCli(['scan', '--audit-log', quiet, '--fail-on', 'info']),
    runCli([...demoArgs, '--format', 'json', '--now', NOW_OVERRIDE]),
  ]);
  doc = JSON.parse(json.stdout) as Doc;
}, 60_000);

describe('scan --format json on the bundled examples', () => {
  it('exits 0 with nothing on stderr', () => {
    expect(json.code).toBe(0);
    expect(json.stderr).toBe('');
  });

  it('prints exactly the contract keys (plus the documented additive now/cluster/warnings/ignoredEventTimes/readiness/clusterEvents/stats.truncated/missingPods/clusterState/forwardedIPs/attribution)', () => {
    expect(Object.keys(doc).sort()).toEqual([...CONTRACT.top, ...CONTRACT.topAdditive].sort());
    expect(Object.keys(doc.stats).sort()).toEqual([...CONTRACT.stats, ...CONTRACT.statsAdditive].sort());
    expect(doc.findings.length).toBeGreaterThan(0);
    for (const f of doc.findings) {
      const keys = Object.keys(f);
      expect(keys.filter((k) => !CONTRACT.finding.includes(k)).every((k) => CONTRACT.findingAdditive.includes(k))).toBe(true);
      expect(CONTRACT.finding.every((k) => keys.includes(k))).toBe(true);
      for (const t of f.tokens) expect(Object.keys(t).sort()).toEqual([...CONTRACT.token].sort());
      for (const w of f.workloads) expect(Object.keys(w).sort()).toEqual([...CONTRACT.workload].sort());
      expect(Object.keys(f.cause).sort()).toEqual([...CONTRACT.cause].sort());
    }
  });

  it('groups the findings per ServiceAccount (one entry per alert, each naming its finding ids; every finding in one group)', () => {
    const groups = (doc as unknown as { groups: Array<{ id: string; cluster: string; namespace: string; serviceAccount: string; severity: string; kinds: string[]; findings: string[] }> }).groups;
    for (const g of groups) expect(Object.keys(g).sort()).toEqual(['cluster', 'findings', 'id', 'kinds', 'namespace', 'serviceAccount', 'severity']);
    // Every finding is in exactly one group, and a group's findings share its ServiceAccount.
    const ids = groups.flatMap((g) => g.findings);
    expect(ids.slice().sort()).toEqual(doc.findings.map((f) => f.id).sort());
    const byId = new Map(doc.findings.map((f) => [f.id, f]));
    for (const g of groups) {
      for (const id of g.findings) expect(byId.get(id)).toMatchObject({ cluster: g.cluster, namespace: g.namespace, serviceAccount: g.serviceAccount });
    }
    // The Multus stale tokens and the 401s they cause are one group (one alert): critical, the failing signal first.
    const multus = groups.find((g) => g.namespace === 'kube-system' && g.serviceAccount === 'multus')!;
    expect(multus.kinds).toEqual(['unauthorized', 'stale-token']);
    expect(multus.severity).toBe('critical');
    expect(groups).toHaveLength(new Set(doc.findings.map((f) => `${f.namespace}/${f.serviceAccount}`)).size);
    expect(groups.length).toBeLessThan(doc.findings.length);
  });

  it('says which cluster and reference time it used (the latest event in the input)', () => {
    expect(doc.cluster).toBe(expected.cluster);
    expect(Date.parse(doc.now)).toBe(Date.parse(all.referenceTime));
  });

  it('reads the stats the generator expects', () => {
    expect(doc.stats).toEqual({
      files: all.stats.files,
      lines: all.stats.lines,
      events: all.stats.auditEvents,
      tokenUses: all.stats.tokenUses,
      malformed: all.stats.malformed,
      duplicates: all.stats.duplicates,
      truncated: [],
    });
  });

  it('finds exactly the expected findings, in the expected order', () => {
    expect(doc.findings.map((f) => `${f.kind} ${f.namespace}/${f.serviceAccount}`)).toEqual(
      all.findings.map((f) => `${f.kind} ${f.namespace}/${f.serviceAccount}`),
    );
  });

  it.each(all.findings.map((e) => [`${e.kind} ${e.namespace}/${e.serviceAccount}`, e] as const))(
    '%s matches expected.json',
    (_name, e) => {
      const f = doc.findings.find((x) => x.kind === e.kind && x.namespace === e.namespace && x.serviceAccount === e.serviceAccount);
      expect(f).toBeDefined();
      if (!f) return;
      expect(f.cluster).toBe(e.cluster);
      expect(f.severity).toBe(e.severity);
      expect(f.requests).toBe(e.requests);
      expect(Date.parse(f.firstSeen)).toBe(Date.parse(e.firstSeen));
      expect(Date.parse(f.lastSeen)).toBe(Date.parse(e.lastSeen));
      expect(f.maxSecondsAfterWarning).toBe(e.maxSecondsAfterWarning);
      expect(f.rejectionAt === null ? null : Date.parse(f.rejectionAt)).toBe(e.rejectionAt === null ? null : Date.parse(e.rejectionAt));
      expect([...f.pods].sort()).toEqual([...e.pods].sort());
      expect([...(f.missingPods ?? [])].sort()).toEqual([...e.missingPods].sort());
      expect(f.workloads).toEqual(e.workloads);
      expect(f.cause.component).toBe(e.component);
      if (e.userAgents) expect([...f.userAgents].sort()).toEqual([...e.userAgents].sort());
      if (e.sourceIPs) expect([...f.sourceIPs].sort()).toEqual([...e.sourceIPs].sort());
      for (const et of e.tokens ?? []) {
        const t = f.tokens.find((x) => x.pod === et.pod && x.warnAfter !== null && Date.parse(x.warnAfter) === Date.parse(et.warnAfter));
        expect(t, `token of ${et.pod}`).toBeDefined();
        expect(Date.parse(t?.rejectionAt ?? '')).toBe(Date.parse(et.rejectionAt));
        expect(t?.requests).toBe(et.requests);
      }
    },
  );

  it('names the Multus DaemonSet, its pods and the static-token-file cause with the thick-plugin fix', () => {
    const multus = doc.findings.find((f) => f.kind === 'stale-token' && f.serviceAccount === 'multus');
    const e = all.findings.find((f) => f.story === 'multus');
    expect(multus?.workloads).toEqual([{ kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds' }]);
    expect([...(multus?.pods ?? [])].sort()).toEqual([...(e?.pods ?? [])].sort());
    expect(multus?.cause.id).toBe('static-token-file');
    expect(multus?.cause.component).toBe('multus-thin');
    expect(multus?.cause.fix).toMatch(/thick plugin/);
  });

  it('sorts by severity (critical first), then rejection time (soonest first, none last)', () => {
    for (let i = 1; i < doc.findings.length; i++) {
      const a = doc.findings[i - 1];
      const b = doc.findings[i];
      if (!a || !b) continue;
      const bySeverity = SEVERITY_RANK[b.severity] - SEVERITY_RANK[a.severity];
      expect(bySeverity).toBeLessThanOrEqual(0);
      if (bySeverity === 0 && b.rejectionAt !== null) {
        expect(a.rejectionAt).not.toBeNull();
        expect(Date.parse(a.rejectionAt ?? '')).toBeLessThanOrEqual(Date.parse(b.rejectionAt));
      }
    }
  });

  it('--now changes the reference time, not the token arithmetic', () => {
    expect(withNow.code).toBe(0);
    const other = JSON.parse(withNow.stdout) as Doc;
    expect(Date.parse(other.now)).toBe(Date.parse(NOW_OVERRIDE));
    const rejections = (d: Doc) => d.findings.map((f) => [f.id, f.rejectionAt]).sort();
    expect(rejections(other)).toEqual(rejections(doc));
  });
});

describe('scan table on the bundled examples', () => {
  it('prints one row per ServiceAccount (an alert group) with its kinds, workload, pods, rejection date and cause, without colour', () => {
    expect(table.code).toBe(0);
    expect(table.stderr).toBe('');
    expect(table.stdout).not.toMatch(/\u001b\[/);
    const lines = table.stdout.split('\n');
    const end = lines.findIndex((l) => l.startsWith('└'));
    const starts = lines.map((l, i) => (/^│ \d+ /.test(l) ? i : -1)).filter((i) => i >= 0);
    const blocks = starts.map((start, j) => lines.slice(start, starts[j + 1] ?? end).join('\n'));
    // One row per group of findings of one ServiceAccount, in the order of their first finding.
    const subjects = [...new Set(all.findings.map((e) => `${e.namespace}/${e.serviceAccount}`))];
    expect(blocks).toHaveLength(subjects.length);
    const rank = { info: 0, warning: 1, critical: 2 } as const;
    for (const [i, subject] of subjects.entries()) {
      const members = all.findings.filter((e) => `${e.namespace}/${e.serviceAccount}` === subject);
      const block = blocks[i]!;
      expect(block).toContain(`${members[0]!.namespace}/`);
      for (const e of members) expect(block).toContain(e.kind);
      // The row's severity is the worst of its findings'.
      const worst = members.reduce((a, e) => (rank[e.severity as keyof typeof rank] > rank[a.severity as keyof typeof rank] ? e : a));
      expect(block).toContain(worst.severity);
      const dated = members.filter((e) => e.rejectionAt !== null && e.daysLeft !== null);
      if (dated.length === 1) {
        const e = dated[0]!;
        const left = e.daysLeft! >= 1 ? `in ${Math.floor(e.daysLeft!)} d` : 'REJECTED';
        expect(block).toContain(`${e.rejectionAt!.slice(0, 10)} (${left}`);
      }
    }
    expect(blocks[0]).toContain('DaemonSet kube-system/kube-multus-ds');
    expect(table.stdout).toContain('static-token-file');
    expect(table.stdout).toMatch(/^#1 kube-system\/multus unauthorized, stale-token: fix: .*thick plugin/m);
  });

  it('ends with the reference time and the read stats', () => {
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines.at(-2)).toBe('as of 2026-11-20T12:00:00Z (latest event in input; override with --now)');
    expect(lines.at(-1)).toBe(
      `read ${all.stats.files} files: ${all.stats.lines.toLocaleString('en-US')} lines, ${all.stats.auditEvents.toLocaleString('en-US')} events, ` +
        `${all.stats.tokenUses} token uses, ${all.stats.malformed} malformed, ${all.stats.duplicates} duplicates`,
    );
  });
});

describe('--fail-on', () => {
  it(`exits 1 when a finding reaches the threshold (${maxSeverity}), with --audit-log repeated`, () => {
    expect(failOnRepeated.code).toBe(1);
    const other = JSON.parse(failOnRepeated.stdout) as Doc;
    expect(other.stats).toEqual(doc.stats);
    expect(other.findings.map((f) => f.id)).toEqual(doc.findings.map((f) => f.id));
  });

  it('exits 0 when nothing reaches it, and says nothing was found', () => {
    expect(emptyFailOn.code).toBe(0);
    expect(emptyFailOn.stdout.split('\n')[0]).toBe('no stale, legacy or unauthorized token use found in 1 event');
  });
});
