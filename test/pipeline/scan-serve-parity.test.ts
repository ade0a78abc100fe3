/**
 * One input, two commands, the same findings: `tokenwatch scan` (src/scan/run.ts) and serve's poll
 * (src/pipeline/poll.ts) both derive findings through `deriveFindings` (src/pipeline/derive.ts). The scan reads the
 * audit log, a cluster snapshot and saved node-probe reports; the poll reads the same audit log through its file
 * source, the same objects from the loopback fake Kubernetes API server and the same probe reports.
 */
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KubeClusterState } from '../../src/cluster/kube.js';
import { parseConfig, type ClusterConfig } from '../../src/config/index.js';
import { DAY_MS } from '../../src/core/units.js';
import type { Finding } from '../../src/findings/types.js';
import { createLogger } from '../../src/observability/logger.js';
import { ClusterPoller } from '../../src/pipeline/poll.js';
import { probeHost, type ProbeReport } from '../../src/probe/host.js';
import { startFakeKube, type FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import { runScan } from '../../src/scan/run.js';
import { FileSource } from '../../src/sources/file.js';
import { openStore, type Store } from '../../src/store/index.js';
import { boundToken, multusKubeconfig } from '../probe/jwt.js';

const AUDIT_LOG = 'examples/audit/kube-apiserver-audit.log';
const SNAPSHOT = 'examples/cluster-snapshot.json';
const CLUSTER = 'prod-eks';
const quiet = createLogger({ level: 'silent' });

let dir: string;
let store: Store;
let fake: FakeKube;
beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tw-parity-'));
  store = await openStore(join(dir, 'tw.db'));
  const items = (JSON.parse(readFileSync(SNAPSHOT, 'utf8')) as { items: object[] }).items;
  fake = await startFakeKube({ objects: items });
});
afterEach(async () => {
  await store.close();
  await fake.close();
});

/** A node-probe report finding the multus token in a CNI kubeconfig on a node, written `ageDays` before `now`. */
async function probeReport(now: number, ageDays: number): Promise<ProbeReport> {
  const file = join(dir, 'host', 'etc/cni/net.d/multus.d/multus.kubeconfig');
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, multusKubeconfig(boundToken({ iat: (now - ageDays * DAY_MS) / 1000 })));
  return await probeHost({ node: 'ip-10-0-1-5.ec2.internal', hostRoot: join(dir, 'host'), now });
}

/** Findings as the `scan` JSON and the store hold them (plain data, in the derivation's order). */
const plain = (fs: readonly Finding[]): unknown => JSON.parse(JSON.stringify(fs));

describe('scan and serve derive the same findings from the same input', () => {
  it('audit log, cluster state and node-probe reports give equal findings through `scan` and through the poll', async () => {
    // The scan's reference time is the latest event of its input; the poll runs at that time.
    const first = await runScan({ files: [AUDIT_LOG], cluster: CLUSTER, maxTokenAge: { mode: 'eks' } });
    const now = first.now;
    const reports = [await probeReport(now, 80)];

    const scanned = await runScan({ files: [AUDIT_LOG], cluster: CLUSTER, snapshot: SNAPSHOT, maxTokenAge: { mode: 'eks' }, now, probeReports: reports });
    expect(scanned.report.findings.length).toBeGreaterThan(3);
    expect(scanned.report.findings.some((f) => f.cause.id === 'static-token-file')).toBe(true);

    // serve's view of the same cluster: every 401 in the file counts as current (scan treats its input as one window),
    // the thresholds and the EKS rejection rule are the defaults `scan` uses.
    const cluster: ClusterConfig = parseConfig({ clusters: [{ name: CLUSTER, audit: { file: { path: AUDIT_LOG } }, maxTokenAge: 'eks' }] }, {}).clusters[0]!;
    const poller = new ClusterPoller({
      cluster,
      source: new FileSource({ path: AUDIT_LOG }),
      store,
      // Secret metadata (labels such as kubernetes.io/legacy-token-last-used) as a snapshot holds it: `kubernetes.secretMetadata`.
      state: new KubeClusterState(fake.kubeConfig(), { secretMetadata: true }),
      probe: { read: async () => reports },
      logger: quiet,
      clock: () => now,
      activeWindowMs: 3650 * DAY_MS,
    });
    const polled = await poller.pollOnce();
    expect(polled.error).toBeUndefined();
    expect(plain(polled.findings)).toEqual(plain(scanned.report.findings));
    expect(polled.clusterEvents).toEqual(scanned.clusterEvents);
    // And what the poll stored is what it derived.
    const stored = (await store.findings.list(CLUSTER)).map((s) => s.finding.id).sort();
    expect(stored).toEqual(scanned.report.findings.map((f) => f.id).sort());
  });
});
