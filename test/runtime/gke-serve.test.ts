/**
 * `serve` reading GKE audit logs live from Cloud Logging (src/sources/cloud-logging.ts): one Google Cloud project
 * holding two clusters, the real `google-auth-library` (Application Default Credentials) against the loopback metadata
 * server (`GCE_METADATA_HOST`, `METADATA_SERVER_DETECTION=assume-present`) and the loopback `entries:list`
 * (src/sandbox/fakes/), the real Slack and Kubernetes fakes of test/slack/harness.ts (the harness's two clusters read
 * GKE clusters `gke-a` and `gke-b` instead of their files).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { gkeAuditEntry, startFakeCloudLogging, type FakeCloudLogging, type FakeLogEntry } from '../../src/sandbox/fakes/cloud-logging.js';
import { startFakeGceMetadata, type FakeGceMetadata } from '../../src/sandbox/fakes/gce-metadata.js';
import { startFakeKube, type FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import type { KubeObject } from '../../src/sandbox/fakes/kubernetes/types.js';
import type { Config } from '../../src/config/index.js';
import { RESTARTED_AT } from '../../src/remediation/kube-remediator.js';
import { sourcesOf } from '../../src/slack/home.js';
import { APPROVER, CLUSTER, OPS, progressDaemonSets, REF, REQUESTER, startHarness, type Harness } from '../slack/harness.js';

const MIN = 60_000;
const PROJECT = 'tokenwatch-fake';
const STAGING = 'staging-eks';
const MULTUS = 'system:serviceaccount:kube-system:multus';
const MULTUS_UA = 'multus/v0.0.0 (linux/amd64) kubernetes/$Format';
/** Node IPs of kube-multus-ds pods in examples/cluster-snapshot.json (hostNetwork). */
const NODE_IPS = ['192.168.14.201', '192.168.23.87', '192.168.58.113'];

let metadata: FakeGceMetadata;
const savedEnv: Record<string, string | undefined> = {};
beforeAll(async () => {
  metadata = await startFakeGceMetadata({ projectId: PROJECT });
  for (const k of ['GCE_METADATA_HOST', 'METADATA_SERVER_DETECTION', 'GOOGLE_APPLICATION_CREDENTIALS', 'GOOGLE_CLOUD_PROJECT']) savedEnv[k] = process.env[k];
  Object.assign(process.env, metadata.env);
  delete process.env['GOOGLE_APPLICATION_CREDENTIALS'];
  delete process.env['GOOGLE_CLOUD_PROJECT'];
});
afterAll(async () => {
  for (const [k, v] of Object.entries(savedEnv)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  await metadata.close();
});

let h: Harness | undefined;
let logging: FakeCloudLogging | undefined;
let kubeB: FakeKube | undefined;
afterEach(async () => {
  await h?.stop();
  await logging?.close();
  await kubeB?.close();
  h = undefined;
  logging = undefined;
  kubeB = undefined;
});

/** A stale-token use of the Multus ServiceAccount in GKE's shape (annotation as entry label, no pod claims). */
function staleEntry(cluster: string, insertId: string, time: number, ip: string, log: 'data_access' | 'activity' = 'data_access'): FakeLogEntry {
  return gkeAuditEntry({
    project: PROJECT,
    cluster,
    insertId,
    time,
    log,
    method: 'io.k8s.core.v1.pods.get',
    principal: MULTUS,
    callerIp: ip,
    userAgent: MULTUS_UA,
    labels: { 'authentication.k8s.io/stale-token': `subject: ${MULTUS}, seconds after warning threshold: 7000000` },
  });
}

/** A token-less 401 in GKE's shape: no principal, `status.code` 16 (UNAUTHENTICATED). */
function unauthorizedEntry(cluster: string, insertId: string, time: number, ip: string): FakeLogEntry {
  return gkeAuditEntry({ project: PROJECT, cluster, insertId, time, method: 'io.k8s.core.v1.pods.list', callerIp: ip, userAgent: 'Java/17', rpcCode: 16 });
}

function kubeconfigFor(dir: string, name: string, url: string): string {
  const path = join(dir, `kubeconfig-${name}.yaml`);
  writeFileSync(path, `apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: ${url}\n    insecure-skip-tls-verify: true\nusers:\n- name: tokenwatch\n  user:\n    token: fake-token\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: tokenwatch\ncurrent-context: fake\n`);
  return path;
}

/** The harness's two clusters read GKE clusters gke-a (prod-eks) and gke-b (staging-eks) of one project. */
async function start(seed: FakeLogEntry[], o: { pageSize?: number; emptyPages?: number; retry?: { maxAttempts: number } } = {}): Promise<Harness> {
  let clock = (): number => REF;
  logging = await startFakeCloudLogging({ now: () => clock(), ...(o.emptyPages !== undefined && { emptyPages: o.emptyPages }) });
  logging.add(seed);
  const objects = (JSON.parse(readFileSync('examples/cluster-snapshot.json', 'utf8')) as { items: KubeObject[] }).items;
  kubeB = await startFakeKube({ objects });
  progressDaemonSets(kubeB);
  const endpoint = logging.url;
  const b = kubeB;
  const x = await startHarness({
    tweak: (c: Config) => {
      const gcp = (clusterName: string) => ({ gcp: { project: PROJECT, clusterName, endpoint, overlap: 10 * MIN, lag: MIN, pageSize: o.pageSize ?? 1000 } });
      c.poll.gcpLogging.readsPerMinute = 60_000;
      c.clusters[0]!.audit = gcp('gke-a');
      const staging = c.clusters[1]!;
      staging.audit = gcp('gke-b');
      staging.kubernetes = { kubeconfig: kubeconfigFor(join(c.store.path, '..'), 'b', b.url) };
      staging.slack = { ...staging.slack!, channel: OPS, requesters: ['*'] };
    },
    serveOptions: { gcpLogging: { retry: { maxAttempts: o.retry?.maxAttempts ?? 6, baseDelayMs: 10, maxDelayMs: 40 } } },
  });
  clock = x.now;
  return x;
}

/** Requests to the fake that were project queries (not blind-log probes). */
const queries = (f: FakeCloudLogging) => f.requests().filter((r) => r.filter.includes('labels."authentication.k8s.io/stale-token":*'));

/** One poll of a cluster through the real poller; its outcome. */
async function poll(x: Harness, cluster: string) {
  const outcome = await x.serve.context.clusters.get(cluster)!.poller.pollOnce();
  await x.bot.idle();
  return outcome;
}

const seed = (): FakeLogEntry[] => [
  ...NODE_IPS.map((ip, i) => staleEntry('gke-a', `a-stale-${i}`, REF - 60 * MIN + i * MIN, ip)),
  ...NODE_IPS.map((ip, i) => staleEntry('gke-b', `b-stale-${i}`, REF - 50 * MIN + i * MIN, ip)),
  unauthorizedEntry('gke-a', 'a-401-0', REF - 40 * MIN, '10.8.1.7'),
  unauthorizedEntry('gke-a', 'a-401-1', REF - 39 * MIN, '10.8.1.7'),
  // Another cluster of the project: not configured, not read.
  staleEntry('gke-other', 'o-stale-0', REF - 45 * MIN, NODE_IPS[0]!),
];

describe('serve: GKE audit logs from Cloud Logging, one project with two clusters', () => {
  it('Multus stale tokens give one alert per cluster, GKE 401s are read, one query per project per poll with requests = pages', { timeout: 120_000 }, async () => {
    h = await start(seed(), { pageSize: 2, emptyPages: 1 });
    // Both clusters polled at start: one query for the project (one filter naming both clusters, one window), paged.
    const q = queries(logging!);
    expect(new Set(q.map((r) => r.filter)).size).toBe(1);
    expect(q[0]!.filter).toContain('resource.labels.cluster_name=("gke-a" OR "gke-b")');
    expect(q[0]!.resourceNames).toEqual([`projects/${PROJECT}`]);
    // 8 matching entries at 2 a page after one empty page carrying a token: 1 + 4 pages, one request each.
    expect(q.map((r) => r.entries)).toEqual([0, 2, 2, 2, 2]);
    expect(q.every((r) => r.status === 200)).toBe(true);
    expect(q.slice(1).every((r) => r.pageToken !== undefined)).toBe(true);
    expect(metadata.tokensIssued()).toBeGreaterThan(0);

    // One alert per cluster for the Multus ServiceAccount.
    const alerts = await Promise.all([CLUSTER, STAGING].map((cluster) => h!.alert('kube-system', 'multus', 'stale-token', cluster)));
    expect(alerts.map((a) => a.channel)).toEqual([OPS, OPS]);
    expect(new Set(alerts.map((a) => a.ts)).size).toBe(2);

    // The GKE-shaped 401s (status.code 16) are read as 401s of gke-a only.
    const open = async (cluster: string) => (await h!.serve.context.store.findings.list(cluster, { status: ['open'] })).map((f) => f.finding);
    const a401 = (await open(CLUSTER)).filter((f) => f.kind === 'unauthorized');
    expect(a401.length).toBeGreaterThan(0);
    expect((await open(STAGING)).some((f) => f.kind === 'unauthorized')).toBe(false);

    // The next polls of both clusters: gke-a's poll queries for both, gke-b's reuses that result — one query (one
    // window), whose requests are its pages: the empty page that carries a token, then a last page without entries.
    const before = queries(logging!).length;
    h.advance(5 * MIN);
    expect((await poll(h, CLUSTER)).error).toBeUndefined();
    expect((await poll(h, STAGING)).error).toBeUndefined();
    const after = queries(logging!).slice(before);
    expect(new Set(after.map((r) => r.filter)).size).toBe(1);
    expect(after.map((r) => r.entries)).toEqual([0, 0]);
  });

  it('an entry ingested late inside the overlap is counted once; a same-timestamp pair split by a page boundary is two entries', { timeout: 120_000 }, async () => {
    h = await start(seed(), { pageSize: 2 });
    // The first polls ran at REF (window ends at REF − 1 min). An entry stamped REF − 3 min arrives only at REF + 2 min.
    logging!.add([staleEntry('gke-a', 'late-1', REF - 3 * MIN, NODE_IPS[0]!)], { visibleAt: REF + 2 * MIN });
    // A pair sharing a timestamp (two insertIds) and a newer entry: in `timestamp desc` order at 2 a page the pair is split.
    const t = REF + 2 * MIN;
    logging!.add([staleEntry('gke-a', 'pair-1', t, NODE_IPS[1]!), staleEntry('gke-a', 'pair-2', t, NODE_IPS[2]!), staleEntry('gke-a', 'newer', t + MIN, NODE_IPS[0]!)]);
    h.advance(5 * MIN);
    const before = queries(logging!).length;
    const second = await poll(h, CLUSTER);
    expect(second.error).toBeUndefined();
    const pages = queries(logging!).slice(before);
    expect(pages.map((r) => r.entries)).toEqual([2, 2]); // [newer, pair-2] [pair-1, late-1]
    expect(second.newUses).toBe(4); // late-1, pair-1, pair-2, newer
    // The next poll re-reads the overlap: the same four entries are dropped as seen, nothing counted twice.
    h.advance(5 * MIN);
    const third = await poll(h, CLUSTER);
    expect(third.newUses).toBe(0);
    expect(third.duplicates).toBe(4);
  });

  it('a 429 RESOURCE_EXHAUSTED slows the shared budget; retries that run out fail the poll and the next poll reads the same window', { timeout: 120_000 }, async () => {
    h = await start(seed(), { retry: { maxAttempts: 2 } });
    logging!.add([staleEntry('gke-a', 'during-429', REF + 2 * MIN, NODE_IPS[0]!)]);
    h.advance(5 * MIN);
    logging!.throttle(2);
    const failed = await poll(h, CLUSTER);
    expect(failed.error).toMatch(/429 RESOURCE_EXHAUSTED/);
    expect(failed.newUses).toBe(0);
    expect((await h.metrics.registry.getSingleMetric('tokenwatch_gcp_logging_throttled_total')!.get()).values.find((v) => v.labels['project'] === PROJECT)?.value).toBe(2);
    const rate = (await h.metrics.registry.getSingleMetric('tokenwatch_gcp_logging_budget_rate')!.get()).values.find((v) => v.labels['project'] === PROJECT)?.value;
    expect(rate).toBeLessThan(60_000 / 60); // halved from 1,000 requests per second
    // The quota recovers: the next poll reads the window the failed one did not (the cursor stayed).
    h.advance(MIN);
    const next = await poll(h, CLUSTER);
    expect(next.error).toBeUndefined();
    expect(next.newUses).toBe(1);
  });

  it('a restart approved for a GKE cluster PATCHes that cluster’s API server once', { timeout: 120_000 }, async () => {
    h = await start(seed());
    const alert = await h.alert('kube-system', 'multus', 'stale-token', STAGING);
    await h.click(REQUESTER, alert, 'tw_restart');
    const approval = h.slack.thread(OPS, alert.ts).find((m) => m.text.includes('approval needed'));
    expect(approval?.text).toContain('[staging-eks] approval needed: restart of DaemonSet kube-system/kube-multus-ds');
    await h.click(APPROVER, approval!, 'tw_approve');
    const real = (k: FakeKube) => k.requestsMatching({ method: 'PATCH', resource: 'daemonsets' }).filter((r) => !r.dryRun);
    await expect.poll(() => real(kubeB!).length, { timeout: 30_000 }).toBe(1);
    const annotations = (real(kubeB!)[0]!.body as { spec: { template: { metadata: { annotations: Record<string, string> } } } }).spec.template.metadata.annotations;
    expect(annotations[RESTARTED_AT]).toBeDefined();
    expect(real(h.kube)).toHaveLength(0); // gke-a's API server is not touched
  });
});

describe('serve: a GKE cluster without Data Access audit logs', () => {
  it('is reported blind with the fix in /tokens status, and its readiness verdict is unknown', { timeout: 120_000 }, async () => {
    // gke-a logs Data Access entries (its stale Multus uses); gke-b only Admin Activity ones (writes without token annotations).
    const writes = [0, 1, 2].map((i) => gkeAuditEntry({ project: PROJECT, cluster: 'gke-b', insertId: `b-write-${i}`, time: REF - 30 * MIN + i * MIN, log: 'activity', method: 'io.k8s.coordination.v1.leases.update', principal: 'system:kube-scheduler' }));
    h = await start([...NODE_IPS.map((ip, i) => staleEntry('gke-a', `a-stale-${i}`, REF - 60 * MIN + i * MIN, ip)), ...writes]);
    const blindOf = (cluster: string) => h!.serve.context.clusters.get(cluster)!.blind.state(h!.now());
    expect(blindOf(CLUSTER)).toEqual({ blind: false });
    const state = blindOf(STAGING);
    expect(state).toMatchObject({ blind: true, reason: 'gke-no-data-access' });
    // The probes: one-entry queries of gke-b's Data Access log (none), then of its Admin Activity log (found).
    const probes = logging!.requests().filter((r) => !r.filter.includes('stale-token'));
    expect(probes.map((r) => [r.pageSize, /cluster_name="(.*?)"/.exec(r.filter)?.[1], /%2F(\w+)"/.exec(r.filter)?.[1]])).toEqual([
      [1, 'gke-b', 'data_access'],
      [1, 'gke-b', 'activity'],
    ]);

    await h.command('status staging-eks', REQUESTER);
    const status = JSON.stringify(h.slack.ephemerals({ user: REQUESTER }).at(-1));
    expect(status).toContain('GKE Admin Activity audit entries but no Data Access entries');
    expect(status).toContain('https://cloud.google.com/logging/docs/audit/configure-data-access');
    expect(status).toContain('roles/logging.privateLogViewer');
    expect(status).toMatch(/Token extension off \(--service-account-extend-token-expiration=false\)\? [^"]*unknown/i);
    expect(status).not.toContain('ya29.'); // the access token never appears
  });
});

describe('serve: a GKE project whose logs the identity may not read', () => {
  it('a 403 PERMISSION_DENIED is blind with the fix (roles/logging.privateLogViewer) in /readyz, /tokens status, the Home tab and the metrics; the cursor stays; a granted role clears it', { timeout: 120_000 }, async () => {
    h = await start(NODE_IPS.map((ip, i) => staleEntry('gke-a', `a-stale-${i}`, REF - 60 * MIN + i * MIN, ip)));
    const x = h;
    const id = x.serve.context.clusters.get(CLUSTER)!.source.id;
    const before = await x.serve.context.store.polls.getCursor(id);
    logging!.forbid(PROJECT);
    x.advance(5 * MIN);
    const failedAt = x.now();
    await x.poll(CLUSTER);
    expect(logging!.requests().at(-1)!.status).toBe(403);
    const b = x.serve.context.clusters.get(CLUSTER)!.blind.state(x.now());
    expect(b).toMatchObject({ blind: true, reason: 'no-read-access' });
    const text = (b as { text: string }).text;
    expect(text).toContain(`may not read the logs of project ${PROJECT} (entries:list answered HTTP 403 PERMISSION_DENIED)`);
    expect(text).toContain(`grant it roles/logging.privateLogViewer on project ${PROJECT}`);
    // /readyz: the audit access says blind with the fix, not a bare failed poll; the pod stays in the Service.
    const res = await fetch(`http://127.0.0.1:${x.serve.port}/readyz`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { access: Record<string, Record<string, string>>; blind: Record<string, string> };
    expect(body.blind[CLUSTER]).toBe('no-read-access');
    const hhmm = new Date(failedAt).toISOString().slice(11, 16);
    expect(body.access[CLUSTER]!.audit).toMatch(new RegExp(`^audit source blind: tokenwatch's identity may not read the logs of project ${PROJECT} .*privateLogViewer.*, since (\\d{4}-\\d{2}-\\d{2} )?${hhmm} UTC$`));
    // /tokens status names it once.
    await x.command(`status ${CLUSTER}`, REQUESTER);
    const status = JSON.stringify(x.slack.ephemerals({ user: REQUESTER }).at(-1));
    expect(status.split(`grant it roles/logging.privateLogViewer on project ${PROJECT}`).length - 1).toBe(1);
    expect(status).not.toContain('ya29.');
    // The Home tab's data and the metrics.
    const home = sourcesOf(x.serve.context.clusters.get(CLUSTER)!, x.now());
    expect(home.find((s) => s.name === 'audit log')).toMatchObject({ state: 'failing', detail: text });
    const metrics = await x.metrics.text();
    expect(metrics).toContain(`tokenwatch_access_failing{cluster="${CLUSTER}",access="audit"} 1`);
    expect(metrics).toContain(`tokenwatch_audit_log_blind{cluster="${CLUSTER}",reason="no-read-access"} 1`);
    expect(await x.serve.context.store.polls.getCursor(id)).toEqual(before);

    // The role granted: the next poll reads, the cluster is no longer blind.
    logging!.forbid(PROJECT, false);
    x.advance(5 * MIN);
    await x.poll(CLUSTER);
    expect(x.serve.context.clusters.get(CLUSTER)!.blind.state(x.now())).toEqual({ blind: false });
    expect(x.serve.context.clusters.get(CLUSTER)!.access(x.now()).audit.state).toBe('ok');
    expect(await x.metrics.text()).toContain(`tokenwatch_audit_log_blind{cluster="${CLUSTER}",reason="no-read-access"} 0`);
  });
});
