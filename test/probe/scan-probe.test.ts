import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { probeHost } from '../../src/probe/host.js';
import { PROBE_NAMESPACE, probeConfigMap } from '../../src/probe/objects.js';
import { runCli } from '../cli/run-cli.js';
import { boundToken, multusKubeconfig } from './jwt.js';

const DAY = 86_400;

describe('tokenwatch scan --probe-report', () => {
  it('turns saved probe ConfigMaps into findings naming file, node and rejection date; exit 2 on a bad file', { timeout: 120_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-scan-probe-'));
    const now = Date.parse('2026-11-20T12:00:00Z');
    const iat = now / 1000 - 80 * DAY;
    const file = join(dir, 'host', 'etc/cni/net.d/multus.d/multus.kubeconfig');
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, multusKubeconfig(boundToken({ iat })));
    const report = await probeHost({ node: 'ip-10-0-1-5.ec2.internal', hostRoot: join(dir, 'host'), now });
    const list = { apiVersion: 'v1', kind: 'List', items: [probeConfigMap(report, PROBE_NAMESPACE), { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'other' }, data: { x: '1' } }] };
    const saved = join(dir, 'probe.json');
    writeFileSync(saved, JSON.stringify(list));

    const run = await runCli(['scan', '--probe-report', saved, '--now', '2026-11-20T12:00:00Z', '--format', 'json', '--cluster', 'prod']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const doc = JSON.parse(run.stdout) as { findings: { namespace: string; serviceAccount: string; kind: string; severity: string; rejectionAt: string; cause: { id: string; evidence: string[] } }[] };
    expect(doc.findings).toHaveLength(1);
    const f = doc.findings[0]!;
    expect(f).toMatchObject({ namespace: 'kube-system', serviceAccount: 'multus', kind: 'stale-token', severity: 'info', rejectionAt: new Date((iat + 7_776_000) * 1000).toISOString() });
    expect(f.cause.id).toBe('static-token-file');
    // The probe's finding is grouped like any other: every finding is in exactly one group.
    const groups = (JSON.parse(run.stdout) as { groups: { namespace: string; serviceAccount: string; findings: string[] }[] }).groups;
    expect(groups).toEqual([expect.objectContaining({ namespace: 'kube-system', serviceAccount: 'multus', findings: [(f as unknown as { id: string }).id] })]);
    expect(f.cause.evidence[0]).toMatch(/^node probe: \/etc\/cni\/net\.d\/multus\.d\/multus\.kubeconfig on node ip-10-0-1-5\.ec2\.internal, file written /);

    writeFileSync(join(dir, 'bad.json'), '{"kind":"Pod"}');
    const bad = await runCli(['scan', '--probe-report', join(dir, 'bad.json')]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('not a ConfigMap list');
    // A list of other objects (a cluster snapshot given to the wrong flag) is refused too, not read as no report.
    const snapshot = await runCli(['scan', '--probe-report', 'examples/cluster-snapshot.json']);
    expect(snapshot.code).toBe(2);
    expect(snapshot.stderr).toContain('not a ConfigMap list: it holds a "Pod" item');
    expect(snapshot.stderr).toContain('a cluster snapshot goes to --cluster-snapshot');
  });
});
