/**
 * The node probe end to end: a real `tokenwatch probe` process reads a temporary host directory holding real
 * kubeconfigs with test JWTs signed here, publishes its ConfigMap to the loopback Kubernetes fake, and the real
 * poller turns it into findings.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseConfig, type ClusterConfig } from '../../src/config/index.js';
import { apiServerMetricsText } from '../../src/sandbox/fakes/kubernetes/metrics.js';
import { startFakeKube, type FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import { TokenMetricsMonitor } from '../../src/runtime/token-metrics-monitor.js';
import { NoAuditSource } from '../../src/sources/no-audit.js';
import { KubeMetricsScraper } from '../../src/sources/apiserver-metrics.js';
import { createLogger } from '../../src/observability/logger.js';
import { ClusterPoller } from '../../src/pipeline/poll.js';
import { tokenClaims } from '../../src/probe/claims.js';
import { probeVerifiesRestart } from '../../src/probe/findings.js';
import { probeHost, type ProbeReport } from '../../src/probe/host.js';
import { KubeProbeReports, PROBE_NAMESPACE, reportOf } from '../../src/probe/objects.js';
import { PROBE_AUDIENCE } from '../../src/probe/verify.js';
import { serveTokenReviews } from '../../src/sandbox/fakes/token-review.js';
import { FileSource } from '../../src/sources/file.js';
import { openStore, type Store } from '../../src/store/index.js';
import { ROOT } from '../cli/run-cli.js';
import { auditEvent } from '../sources/events.js';
import { boundToken, legacyToken, multusKubeconfig } from './jwt.js';
import { cliMain } from '../support/build.js';

const DAY = 86_400;
const NOW = Math.floor(Date.now() / 1000) * 1000; // file mtimes are real, so the reference time is too
const NOW_S = NOW / 1000;
const MULTUS = '/etc/cni/net.d/multus.d/multus.kubeconfig';
const quiet = createLogger({ level: 'silent' });

let host: string;
let kube: FakeKube;
let store: Store;
let multusToken: string;
/** The probe pod's projected token (audience tokenwatch-probe), as the kubelet writes it. */
let proofFile: string;
const NODE = 'ip-192-168-14-201.ec2.internal';
let legacy: string;

function put(path: string, text: string, mode = 0o600): void {
  const full = join(host, path);
  mkdirSync(dirname(full), { recursive: true });
  writeFileSync(full, text, { mode });
  chmodSync(full, mode);
}

/** kubeconfig for the probe process, pointing at the fake. */
function probeKubeconfig(): string {
  const file = join(host, '..', `kc-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(
    file,
    `apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: ${kube.url}\n    insecure-skip-tls-verify: true\nusers:\n- name: probe\n  user:\n    token: probe-sa-token\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: probe\ncurrent-context: fake\n`,
    { mode: 0o644 },
  );
  return file;
}

/** Runs `tokenwatch probe` as a child process. */
function runProbe(args: string[], opts: { uid?: number } = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const withProof = args.includes('--dry-run') ? args : [...args, '--proof-token-file', proofFile];
    const child = spawn(process.execPath, [cliMain(), 'probe', ...withProof], {
      cwd: ROOT,
      env: { ...process.env, LOG_LEVEL: 'debug', NODE_NAME: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(opts.uid !== undefined ? { uid: opts.uid, gid: opts.uid } : {}),
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', (e) =>
      reject(opts.uid === undefined ? e : new Error(`uid ${opts.uid} must be able to run ${process.execPath} and read ${ROOT} (.ci/run opens both): ${e.message}`)),
    );
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() }));
  });
}

function cluster(audit: object = { none: true }): ClusterConfig {
  return parseConfig({ clusters: [{ name: 'prod', audit }] }, {}).clusters[0]!;
}

beforeEach(async () => {
  const base = mkdtempSync(join(tmpdir(), 'tw-probe-'));
  chmodSync(base, 0o755);
  host = join(base, 'host');
  mkdirSync(host, { mode: 0o755 });
  multusToken = boundToken({ iat: NOW_S - 40 * DAY });
  legacy = legacyToken({ namespace: 'ci', sa: 'deployer', secret: 'deployer-token-abcde' });
  put(MULTUS, multusKubeconfig(multusToken));
  put('/etc/cni/net.d/calico-kubeconfig', 'apiVersion: v1\nkind: Config\nusers:\n- name: calico\n  user:\n    tokenFile: /etc/cni/net.d/calico-token\n');
  put('/etc/cni/net.d/calico-token', `${legacy}\n`);
  put('/etc/cni/net.d/10-aws.conflist', '{"cniVersion":"0.4.0"}');
  put('/var/run/istio-cni/istio-cni.kubeconfig', 'not a kubeconfig at all: [', 0o644);
  kube = await startFakeKube({
    objects: [
      { apiVersion: 'v1', kind: 'Pod', metadata: { namespace: PROBE_NAMESPACE, name: 'tokenwatch-probe-x7k2p', uid: 'probe-pod-uid' }, spec: { nodeName: NODE, serviceAccountName: 'tokenwatch-probe' } },
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { namespace: 'kube-system', name: 'multus', uid: 'sa-uid-1' } },
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { namespace: 'ci', name: 'deployer', uid: 'legacy-sa-uid' } },
    ],
  });
  proofFile = join(base, 'proof-token');
  writeFileSync(proofFile, serveTokenReviews(kube).issue({ namespace: PROBE_NAMESPACE, pod: 'tokenwatch-probe-x7k2p', audience: PROBE_AUDIENCE }));
  store = await openStore(':memory:');
});
afterEach(async () => {
  await store.close();
  await kube.close();
});

describe('token claims', () => {
  it('reads bound and legacy claim shapes, and nothing from anything else', () => {
    expect(tokenClaims(multusToken)).toEqual({
      kind: 'bound',
      issuer: 'https://oidc.eks.us-east-1.amazonaws.com/id/TEST',
      namespace: 'kube-system',
      serviceAccount: 'multus',
      serviceAccountUid: 'sa-uid-1',
      pod: 'kube-multus-ds-zwh6w',
      podUid: 'pod-uid-1',
      node: 'ip-192-168-14-201.ec2.internal',
      secretName: null,
      issuedAt: (NOW_S - 40 * DAY) * 1000,
      expiresAt: (NOW_S - 40 * DAY + 7_776_000) * 1000,
      warnAfter: (NOW_S - 40 * DAY + 3607) * 1000,
    });
    expect(tokenClaims(legacy)).toMatchObject({ kind: 'legacy', namespace: 'ci', serviceAccount: 'deployer', secretName: 'deployer-token-abcde', expiresAt: null, warnAfter: null });
    expect(tokenClaims('abc.def.ghi')).toBeUndefined();
    expect(tokenClaims('not a token')).toBeUndefined();
  });
});

describe('probeHost', () => {
  it('finds tokens inline, via tokenFile and reports other matches as no-token; claims only', async () => {
    const r = await probeHost({ node: 'node-a', hostRoot: host, now: NOW });
    expect(r.entries.map((e) => [e.path, e.status, e.via, e.tokenKind, e.namespace, e.serviceAccount])).toEqual([
      ['/etc/cni/net.d/calico-kubeconfig', 'token', 'kubeconfig-tokenFile', 'legacy', 'ci', 'deployer'],
      [MULTUS, 'token', 'kubeconfig-token', 'bound', 'kube-system', 'multus'],
      ['/var/run/istio-cni/istio-cni.kubeconfig', 'no-token', undefined, undefined, undefined, undefined],
    ]);
    const m = r.entries[1]!;
    expect(m.rejectionAt).toBe(new Date((NOW_S - 40 * DAY + 7_776_000) * 1000).toISOString());
    expect(m.pathHash).toMatch(/^[0-9a-f]{16}$/);
    expect(r.entries[0]!.rejectionAt).toBeNull();
    const json = JSON.stringify(r);
    for (const t of [multusToken, legacy, multusToken.split('.')[2]!, legacy.split('.')[2]!]) expect(json).not.toContain(t);
  });
});

// Each test spawns the CLI once or twice; on a loaded shared machine one spawn takes over 15 s.
describe('tokenwatch probe (process) → ConfigMap → serve', { timeout: 120_000 }, () => {
  it('publishes tokenwatch-probe-<node> with claims only; the token and its signature appear nowhere', async () => {
    const run = await runProbe(['--once', '--host-root', host, '--node', 'ip-192-168-14-201.ec2.internal', '--kubeconfig', probeKubeconfig(), '--namespace', PROBE_NAMESPACE]);
    expect(run.stderr).toContain('probe report published');
    expect(run.code).toBe(0);
    const cm = kube.store.get('ConfigMap', PROBE_NAMESPACE, 'tokenwatch-probe-ip-192-168-14-201.ec2.internal') as { data: Record<string, string> };
    const report = reportOf(cm)!;
    expect(report.node).toBe('ip-192-168-14-201.ec2.internal');
    expect(report.entries.filter((e) => e.status === 'token').map((e) => e.path)).toEqual(['/etc/cni/net.d/calico-kubeconfig', MULTUS]);
    // Only the verbs its RBAC grants, only in its namespace.
    expect(kube.requests.filter((r) => r.verb).map((r) => `${r.verb} ${r.resource} ${r.namespace}`)).toEqual([`create configmaps ${PROBE_NAMESPACE}`]);
    expect(cm.data['proof']).toBe(readFileSync(proofFile, 'utf8'));
    const everything = [run.stdout, run.stderr, JSON.stringify(kube.store.list('ConfigMap')), JSON.stringify(kube.requests.map((r) => r.body))].join('\n');
    for (const t of [multusToken, legacy, multusToken.split('.')[2]!, legacy.split('.')[2]!]) expect(everything).not.toContain(t);

    const again = await runProbe(['--once', '--host-root', host, '--node', 'ip-192-168-14-201.ec2.internal', '--kubeconfig', probeKubeconfig()]);
    expect(again.code).toBe(0);
    expect(kube.requests.filter((r) => r.verb).map((r) => r.verb)).toEqual(['create', 'create', 'update']); // no get: a probe cannot read another's proof
  });

  it('reports a file it cannot read as EACCES, never as "no token"', async () => {
    const asNobody = process.getuid?.() === 0;
    if (!asNobody) chmodSync(join(host, MULTUS), 0o000); // non-root: make it unreadable for ourselves
    const run = await runProbe(['--dry-run', '--host-root', host, '--node', 'n1'], asNobody ? { uid: 65534 } : {});
    expect(run.code).toBe(0);
    const report = JSON.parse(run.stdout) as ProbeReport;
    expect(report.entries.find((e) => e.path === MULTUS)).toEqual({ path: MULTUS, pathHash: expect.any(String), mtime: null, status: 'unreadable', error: 'EACCES' });
    expect(run.stderr).toContain(`${MULTUS}: EACCES`);
  });

  it('probe only (no audit log, no metrics rise): a finding with file, node and rejection date, at info', async () => {
    expect((await runProbe(['--once', '--host-root', host, '--node', NODE, '--kubeconfig', probeKubeconfig()])).code).toBe(0);
    const poller = new ClusterPoller({ cluster: cluster(), source: new NoAuditSource(), store, logger: quiet, clock: () => NOW, probe: new KubeProbeReports(kube.kubeConfig()) });
    const out = await poller.pollOnce();
    expect(out.error).toBeUndefined();
    const multus = out.findings.find((f) => f.serviceAccount === 'multus')!;
    const rejection = new Date((NOW_S - 40 * DAY + 7_776_000) * 1000).toISOString();
    expect(multus).toMatchObject({ namespace: 'kube-system', kind: 'stale-token', severity: 'info', requests: 0, rejectionAt: rejection });
    expect(multus.cause.id).toBe('static-token-file');
    expect(multus.cause.summary).toMatch(/^Observed, not inferred: the node probe found/);
    expect(multus.cause.evidence[0]).toMatch(new RegExp(`^node probe: ${MULTUS} on node ${NODE}, file written 0 h ago .*, token issued .*, rejected from ${rejection.replace(/\./g, '\\.')}$`));
    expect(out.findings.find((f) => f.serviceAccount === 'deployer')).toMatchObject({ kind: 'legacy-token', severity: 'info', rejectionAt: null });
    expect((await store.findings.list('prod')).map((f) => f.finding.serviceAccount).sort()).toEqual(['deployer', 'multus']);
  });

  it('probe + audit + metrics: one finding for the ServiceAccount, its cause observed (static-token-file)', async () => {
    expect((await runProbe(['--once', '--host-root', host, '--node', NODE, '--kubeconfig', probeKubeconfig()])).code).toBe(0);
    const start = NOW - 3_600_000 * 5;
    let stale = 10;
    kube.setMetrics(() => apiServerMetricsText({ processStart: start, counters: { stale } }));
    const log = join(host, '..', 'audit.log');
    const secs = 40 * DAY - 3607;
    writeFileSync(log, `${auditEvent({ auditID: 'p1', time: NOW - 60_000, kind: 'stale', pod: 'kube-multus-ds-zwh6w', secondsAfterWarning: secs })}\n`);
    let now = NOW;
    const poller = new ClusterPoller({
      cluster: cluster({ file: { path: log } }),
      source: new FileSource({ path: log }),
      store,
      logger: quiet,
      clock: () => now,
      tokenMetrics: new TokenMetricsMonitor({ cluster: 'prod', scraper: new KubeMetricsScraper(kube.kubeConfig()), store, logger: quiet }),
      probe: new KubeProbeReports(kube.kubeConfig()),
    });
    await poller.pollOnce();
    stale = 25;
    now += 5 * 60_000;
    const out = await poller.pollOnce();
    const multus = out.findings.filter((f) => f.serviceAccount === 'multus' || f.namespace === '*');
    expect(multus).toHaveLength(1);
    expect(multus[0]).toMatchObject({ namespace: 'kube-system', kind: 'stale-token', requests: 1 });
    expect(multus[0]!.severity).toBe('info'); // from the audit events: rejection 50 days away
    expect(multus[0]!.cause.id).toBe('static-token-file');
    expect(multus[0]!.cause.evidence.some((e) => e.startsWith(`node probe: ${MULTUS} on node ${NODE}`))).toBe(true);
  });

  it('verifies a restart by the probe: the file rewritten with a token issued after the restart', async () => {
    const kc = probeKubeconfig();
    const args = ['--once', '--host-root', host, '--node', NODE, '--kubeconfig', kc];
    expect((await runProbe(args)).code).toBe(0);
    const reports = new KubeProbeReports(kube.kubeConfig());
    const restartedAt = NOW - 60_000;
    const before = probeVerifiesRestart(await reports.read(), { namespace: 'kube-system', serviceAccount: 'multus' }, restartedAt, NOW);
    expect(before).toMatchObject({ verified: false, stale: [`${MULTUS} on node ${NODE}`] });

    const rewritten = multusKubeconfig(boundToken({ iat: NOW_S - 30, pod: 'kube-multus-ds-new01' }));
    put(MULTUS, rewritten);
    expect((await runProbe(args)).code).toBe(0);
    const after = probeVerifiesRestart(await reports.read(), { namespace: 'kube-system', serviceAccount: 'multus' }, restartedAt, NOW);
    expect(after.verified).toBe(true);
    expect(after.stale).toEqual([]);
    expect(after.evidence[0]).toContain(`token issued ${new Date((NOW_S - 30) * 1000).toISOString()}`);
    expect(readFileSync(join(host, MULTUS), 'utf8')).toBe(rewritten); // the probe never writes the host
  });
});
