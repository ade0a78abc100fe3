import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { toFileForm } from '../../src/config/render.js';
import { applyProbeReports } from '../../src/probe/findings.js';
import type { ProbeReport } from '../../src/probe/host.js';

const NOW = Date.parse('2026-11-20T12:00:00Z');
const DAY = 86_400_000;
const iso = (ms: number) => new Date(ms).toISOString();

function report(issued: number): ProbeReport {
  return {
    version: 1,
    node: 'node-a',
    probedAt: iso(NOW),
    globs: [],
    entries: [
      {
        path: '/etc/cni/net.d/multus.d/multus.kubeconfig',
        pathHash: '0123456789abcdef',
        mtime: iso(issued),
        status: 'token',
        tokenKind: 'bound',
        namespace: 'kube-system',
        serviceAccount: 'multus',
        pod: 'kube-multus-ds-a',
        issuedAt: iso(issued),
        warnAfter: iso(issued + 3_607_000),
        rejectionAt: iso(issued + 3_607_000 + 90 * DAY),
      },
      { path: '/etc/cni/net.d/fresh.kubeconfig', pathHash: 'fedcba9876543210', mtime: iso(NOW - 60_000), status: 'token', tokenKind: 'bound', namespace: 'x', serviceAccount: 'fresh', warnAfter: iso(NOW + 3_000_000), rejectionAt: iso(NOW + 90 * DAY) },
      { path: '/etc/cni/net.d/secret.kubeconfig', pathHash: 'aaaaaaaaaaaaaaaa', mtime: null, status: 'unreadable', error: 'EACCES' },
    ],
  };
}

describe('applyProbeReports', () => {
  it('a probe-only token is info without metrics, and follows its rejection date when metrics show stale use', () => {
    const issued = NOW - 88 * DAY; // rejection in ~2 days
    const quiet = applyProbeReports({ cluster: 'prod', reports: [report(issued)], findings: [], now: NOW, metricsShowUse: false });
    expect(quiet.map((f) => [f.serviceAccount, f.kind, f.severity])).toEqual([['multus', 'stale-token', 'info']]); // the fresh token says nothing yet
    expect(quiet[0]!.cause.evidence).toContain('no use seen yet (no audit event, no rise in API-server metrics): the file may be left over from an uninstalled plugin');
    const used = applyProbeReports({ cluster: 'prod', reports: [report(issued)], findings: [], now: NOW, metricsShowUse: true });
    expect(used[0]!.severity).toBe('critical');
    expect(used[0]!.tokens).toEqual([{ pod: 'kube-multus-ds-a', podUid: null, node: 'node-a', warnAfter: iso(issued + 3_607_000), rejectionAt: iso(issued + 3_607_000 + 90 * DAY), requests: 0, lastSeen: iso(issued) }]);
  });
});

describe('applyProbeReports: rejection date from the cluster\'s maxTokenAge', () => {
  // A real bound token: exp one year after issue (upstream extension), warnafter 3607 s after issue. EKS rejects it
  // 90 days after warnafter, so a token 92 days past warnafter is already rejected there (found in a new-user trial:
  // the finding said "rejected in 272 d" from exp, whatever --max-token-age said).
  const issued = NOW - 92 * DAY - 3_607_000;
  const warnAfter = issued + 3_607_000;
  const oneYearToken = (): ProbeReport => {
    const r = report(issued);
    r.entries = r.entries.map((e) => (e.serviceAccount === 'multus' ? { ...e, rejectionAt: iso(issued + 365 * DAY) } : e));
    return r;
  };
  it('EKS: warnafter + 90 days, and critical when metrics show use', () => {
    const [f] = applyProbeReports({ cluster: 'prod', reports: [oneYearToken()], findings: [], now: NOW, metricsShowUse: true, maxTokenAge: { mode: 'eks' } });
    expect(f!.rejectionAt).toBe(iso(warnAfter + 90 * DAY));
    expect(f!.tokens[0]!.rejectionAt).toBe(iso(warnAfter + 90 * DAY));
    expect(f!.severity).toBe('critical');
    expect(f!.cause.evidence.some((l) => l.includes(`rejected from ${iso(warnAfter + 90 * DAY)}`))).toBe(true);
  });
  it('upstream: never later than the token\'s own exp', () => {
    const [f] = applyProbeReports({ cluster: 'prod', reports: [oneYearToken()], findings: [], now: NOW, metricsShowUse: true, maxTokenAge: { mode: 'upstream' } });
    expect(f!.rejectionAt).toBe(iso(issued + 365 * DAY));
  });
});

describe('config audit: { none: true }', () => {
  it('parses, renders back, and is refused together with another form', () => {
    const c = parseConfig({ clusters: [{ name: 'dark', audit: { none: true }, kubernetes: { inCluster: true } }] }, {});
    expect(c.clusters[0]!.audit).toEqual({ none: true });
    expect((toFileForm(c)['clusters'] as { audit: unknown }[])[0]!.audit).toEqual({ none: true });
    expect(() => parseConfig({ clusters: [{ name: 'dark', audit: { none: true, file: { path: '/x' } } }] }, {})).toThrow(/expected exactly one of cloudwatch, file, webhook, gcp, none, azure \(got file, none\)/);
  });
});

describe('applyProbeReports: the token file corroborates 401s attributed by address alone', () => {
  const unauthorized = (firstSeen: number) => ({
    id: 'f401',
    cluster: 'prod',
    namespace: 'kube-system',
    serviceAccount: 'multus',
    kind: 'unauthorized' as const,
    severity: 'warning' as const,
    requests: 3,
    firstSeen: iso(firstSeen),
    lastSeen: iso(firstSeen + 120_000),
    maxSecondsAfterWarning: null,
    rejectionAt: null,
    tokens: [],
    pods: [],
    workloads: [],
    userAgents: ['multus/v0.0.0 (linux/amd64) kubernetes/$Format'],
    sourceIPs: ['10.0.5.5'],
    cause: { id: 'client-caches-token' as const, component: null, summary: 's', fix: 'f', evidence: ['401s attributed by source address and user agent only, not corroborated (…)'], sources: [] },
    attribution: { basis: 'address-only' as const, text: '401s attributed by source address and user agent only, not corroborated (…)' },
  });

  it('a file whose token was past rejection when the 401s started: corroborated, critical', () => {
    const issued = NOW - 95 * DAY; // rejected ~5 days ago
    const [f] = applyProbeReports({ cluster: 'prod', reports: [report(issued)], findings: [unauthorized(NOW - 3_600_000)], now: NOW, metricsShowUse: false }).filter((x) => x.kind === 'unauthorized');
    expect(f!.attribution?.basis).toBe('corroborated');
    expect(f!.attribution?.text).toContain('corroborated by the node probe: /etc/cni/net.d/multus.d/multus.kubeconfig on node node-a');
    expect(f!.severity).toBe('critical');
    expect(f!.cause.evidence.some((e) => e.includes('not corroborated'))).toBe(false);
  });

  it('a file whose token is still valid corroborates nothing', () => {
    const issued = NOW - 10 * DAY;
    const [f] = applyProbeReports({ cluster: 'prod', reports: [report(issued)], findings: [unauthorized(NOW - 3_600_000)], now: NOW, metricsShowUse: false }).filter((x) => x.kind === 'unauthorized');
    expect(f!.attribution?.basis).toBe('address-only');
    expect(f!.severity).toBe('warning');
  });
});
