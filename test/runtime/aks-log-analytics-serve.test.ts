/**
 * `serve` reading AKS audit logs from one Log Analytics workspace holding two clusters: the real
 * `@azure/monitor-query-logs` client against the loopback HTTPS Logs Query fake (src/sandbox/fakes/log-analytics.ts,
 * test CA) and the workload identity token exchange against the loopback Entra token fake
 * (src/sandbox/fakes/entra-token.ts), the real poller, store and Slack bot (test/slack/harness.ts).
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startFakeEntraToken, type FakeEntraToken } from '../../src/sandbox/fakes/entra-token.js';
import { aksAuditRow, startFakeLogAnalytics, type FakeLogAnalytics, type FakeLogRow } from '../../src/sandbox/fakes/log-analytics.js';
import { parseConfig } from '../../src/config/index.js';
import type { AuditSourceConfig } from '../../src/config/types.js';
import { sourcesOf } from '../../src/slack/home.js';
import { auditEvent } from '../sources/events.js';
import { selfSignedCert } from '../sources/webhook-client.js';
import { APPROVER, blockText, CLUSTER, OPS, REF, REQUESTER, startHarness, staleLine, type Harness } from '../slack/harness.js';

const MIN = 60_000;
const WORKSPACE = '0b4a3c2d-1e5f-4a6b-8c7d-9e0f1a2b3c4d';
const TENANT = '72f988bf-86f1-41af-91ab-2d7cd011db47';
const CLIENT = '5f1c2d3e-4b5a-6978-8a9b-0c1d2e3f4a5b';
const RID_ON = '/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg-prod/providers/Microsoft.ContainerService/managedClusters/prod-aks';
const RID_OFF = '/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg-prod/providers/Microsoft.ContainerService/managedClusters/oidc-aks';
const OFF = 'staging-eks'; // the harness's second cluster, here an AKS cluster with token extension off

let h: Harness | undefined;
let logs: FakeLogAnalytics | undefined;
let entra: FakeEntraToken | undefined;
afterEach(async () => {
  await h?.stop();
  await logs?.close();
  await entra?.close();
  h = logs = entra = undefined;
  vi.unstubAllEnvs();
});

/** The example Multus audit log (stale tokens) as AKSAudit rows of `rid` (upper case, as Azure often writes `_ResourceId`). */
function exampleRows(rid: string): FakeLogRow[] {
  return readFileSync('examples/audit/kube-apiserver-audit.log', 'utf8')
    .split('\n')
    .flatMap((l) => {
      try {
        return [aksAuditRow(JSON.parse(l) as Record<string, unknown>, rid.toUpperCase())];
      } catch {
        return []; // the example's malformed lines (its scan demo counts them)
      }
    });
}

const row = (line: string, rid: string, type?: 'AKSAudit' | 'AKSAuditAdmin') => aksAuditRow(JSON.parse(line) as Record<string, unknown>, rid, type ? { type } : {});

async function start(o: { extra?: (fake: FakeLogAnalytics) => void; logs?: Array<Record<string, unknown>> } = {}): Promise<Harness> {
  const dir = mkdtempSync(join(tmpdir(), 'tw-aks-'));
  const tls = selfSignedCert(dir);
  const tokenFile = join(dir, 'azure-identity-token');
  writeFileSync(tokenFile, 'eyJhbGciOiJSUzI1NiJ9.federated.sa-token');
  entra = await startFakeEntraToken({ cert: tls.cert, key: tls.key, tenantId: TENANT, clientId: CLIENT, assertion: 'eyJhbGciOiJSUzI1NiJ9.federated.sa-token' });
  const fake = await startFakeLogAnalytics({ cert: tls.cert, key: tls.key, acceptToken: (t) => entra!.issued(t) });
  logs = fake;
  fake.add(WORKSPACE, exampleRows(RID_ON));
  o.extra?.(fake);
  vi.stubEnv('AZURE_CLIENT_ID', CLIENT);
  vi.stubEnv('AZURE_TENANT_ID', TENANT);
  vi.stubEnv('AZURE_FEDERATED_TOKEN_FILE', tokenFile);
  const azure = (resourceId: string, tokenExtension: 'on' | 'off'): AuditSourceConfig => {
    const c = parseConfig({
      clusters: [{ name: 'x', audit: { azure: { workspaceId: WORKSPACE, resourceId, endpoint: fake.endpoint, authorityHost: entra!.authorityHost, caFile: tls.certFile, tokenExtension } } }],
    }, {});
    return c.clusters[0]!.audit;
  };
  h = await startHarness({
    ...(o.logs && { logs: o.logs, logLevel: 'warn' }),
    tweak: (c) => {
      c.clusters[0]!.audit = azure(RID_ON, 'on');
      c.clusters[1]!.audit = azure(RID_OFF, 'off');
      c.clusters[1]!.kubernetes = c.clusters[0]!.kubernetes;
      c.clusters[1]!.slack = { ...c.clusters[0]!.slack! };
      c.poll.logAnalytics.timeout = 120_000;
    },
  });
  return h;
}

/** Polls both clusters as one scheduler tick does (each cluster its own poll). */
async function pollBoth(x: Harness): Promise<void> {
  await Promise.all([x.poll(CLUSTER), x.poll(OFF)]);
}

describe('serve: AKS audit logs from Log Analytics', () => {
  it('extension on: the Multus stale tokens of the example give one alert; one query per workspace per poll, authorised by the workload identity token', { timeout: 120_000 }, async () => {
    const x = await start();
    // The start-up polls of both clusters: one query for the workspace, both clusters' resource ids in it.
    expect(logs!.queries.filter((q) => q.status === 200)).toHaveLength(1);
    const q = logs!.queries[0]!;
    expect(q.workspaceId).toBe(WORKSPACE);
    expect(q.query).toContain(`"${RID_ON}"`);
    expect(q.query).toContain(`"${RID_OFF}"`);
    // The window ends 5 minutes (the lag) before the poll (the service clock runs from REF in real time).
    const end = Date.parse(q.timespan.split('/')[1]!);
    expect(end).toBeGreaterThanOrEqual(REF - 5 * MIN);
    expect(end).toBeLessThanOrEqual(x.now() - 5 * MIN);
    expect(entra!.requests.filter((r) => r.status === 200).map((r) => r.scope)).toEqual([`${new URL(logs!.endpoint).origin}/.default`]);
    const alert = await x.alert('kube-system', 'multus', 'stale-token');
    expect(alert.text).toMatch(/multus/);
    // One alert for the ServiceAccount (one root cause), none on the other cluster.
    expect((await x.serve.context.store.findings.list(OFF, { status: ['open'] })).length).toBe(0);

    // The next tick: both clusters poll again, still one query for the workspace.
    x.advance(5 * MIN);
    await pollBoth(x);
    expect(logs!.queries.filter((q2) => q2.status === 200)).toHaveLength(2);
  });

  it('a row ingested late, inside the overlap, is counted once; the rows read again in the overlap are not counted again', { timeout: 120_000 }, async () => {
    const x = await start();
    const findingOf = async () => (await x.serve.context.store.findings.list(CLUSTER, { status: ['open'] })).map((f) => f.finding).find((f) => f.serviceAccount === 'multus' && f.kind === 'stale-token')!;
    const before = (await findingOf()).requests;
    // A stale use 3 minutes before the first window's end (REF − 5 min), ingested only now, after the first poll read
    // that window: the next poll's overlap (10 min) reads it.
    const late = staleLine('late-1', REF - 8 * MIN, 'kube-multus-ds-b4j4z', 7_000_000);
    logs!.add(WORKSPACE, [row(late, RID_ON)]);
    x.advance(5 * MIN);
    await x.poll(CLUSTER);
    expect((await findingOf()).requests).toBe(before + 1);
    // The next poll's overlap reads the late row again: it is not counted again.
    x.advance(5 * MIN);
    await x.poll(CLUSTER);
    const [from, to] = logs!.queries.at(-1)!.timespan.split('/').map((t) => Date.parse(t));
    expect(from! <= REF - 8 * MIN && REF - 8 * MIN < to!).toBe(true);
    expect((await findingOf()).requests).toBe(before + 1);
    const windows = logs!.queries.filter((q) => q.status === 200).map((q) => q.timespan.split('/').map((t) => Date.parse(t)));
    // Each window starts 10 minutes (the overlap) before the end of the previous one.
    expect(windows[1]![0]).toBe(windows[0]![1]! - 10 * MIN);
  });

  it('a 429 with Retry-After slows the source and loses no window', { timeout: 120_000 }, async () => {
    const lines: Array<Record<string, unknown>> = [];
    const x = await start({ logs: lines });
    const ends = () => logs!.queries.filter((q) => q.status === 200).map((q) => q.timespan);
    logs!.throttle(1, 1);
    const late = staleLine('throttled-1', REF - 2 * MIN, 'kube-multus-ds-b4j4z', 7_000_000);
    logs!.add(WORKSPACE, [row(late, RID_ON)]);
    x.advance(5 * MIN);
    await x.poll(CLUSTER);
    const answered = logs!.queries.slice(1).map((q) => q.status);
    expect(answered).toEqual([429, 200]);
    // The retried query asked the same window the 429 refused.
    expect(logs!.queries[1]!.timespan).toBe(logs!.queries[2]!.timespan);
    expect(ends()).toHaveLength(2);
    expect((await x.serve.context.store.findings.list(CLUSTER, { status: ['open'] })).map((f) => f.finding).find((f) => f.serviceAccount === 'multus')!.lastSeen).toBe(new Date(REF - 2 * MIN).toISOString());
    // The query budget halved its rate (5 → 2.5 queries/s; it climbs back on its own), and the 429 is counted.
    expect(lines.filter((l) => l.msg === 'Log Analytics answered 429: query rate lowered').map((l) => l.rate)).toEqual([2.5]);
    expect(await x.metrics.text()).toMatch(/tokenwatch_log_analytics_queries_total\{workspace="[^"]+",status="429"\} 1/);
  });
});

describe('serve: an AKS cluster with token extension off', () => {
  it('Multus 401s an hour after its pod started give one alert saying requests fail now; readiness says extension is already off', { timeout: 120_000 }, async () => {
    const x = await start();
    // kube-multus-ds-452jg (hostNetwork, 192.168.23.87) started 11:22:19Z: its cached token expires 3607 s later.
    const podStart = Date.parse('2026-11-20T11:22:19Z');
    const first = podStart + 3607_000;
    x.advance(first + 10 * MIN - x.now());
    const lines = Array.from({ length: 6 }, (_, i) => auditEvent({ auditID: `m401-${i}`, time: first + i * 30_000, kind: 'unauthorized', sourceIP: '192.168.23.87', userAgent: 'multus/v0.0.0 (linux/amd64) kubernetes/$Format' }));
    logs!.add(WORKSPACE, lines.map((l) => row(l, RID_OFF)));
    await x.poll(OFF);
    const found = (await x.serve.context.store.findings.list(OFF, { status: ['open'] })).map((f) => f.finding);
    expect(found.map((f) => `${f.namespace}/${f.serviceAccount}/${f.kind}`)).toEqual(['kube-system/multus/unauthorized']);
    expect(found[0]!.attribution).toMatchObject({ basis: 'corroborated' });
    expect(found[0]!.attribution!.text).toContain('token extension is off on this cluster');
    // One alert on that cluster's channel, saying the requests fail now.
    const alerts = x.slack.messages(OPS).filter((m) => m.text.includes('multus') && JSON.stringify(m.blocks ?? []).includes('staging-eks'));
    expect(alerts).toHaveLength(1);
    const alert = await x.alert('kube-system', 'multus', 'unauthorized', OFF);
    expect(blockText(alert)).toContain('requests fail with 401');
    expect(`${alert.text} ${blockText(alert)}`).toMatch(/requests now fail with 401|being refused by the API server now/);
    // Readiness: neither safe nor blind — extension is already off.
    await x.command(`status ${OFF}`, REQUESTER, OPS);
    const e = x.slack.ephemerals({ user: REQUESTER }).filter((m) => m.channel === OPS).at(-1)!;
    const line = blockText(e).split('\n').find((l) => l.includes('Token extension off'));
    expect(line).toContain('extension already off');
    expect(line).toContain('1 ServiceAccount is failing now');
    expect(line).not.toMatch(/\bsafe:|blind/);
    // The extension-on cluster's readiness is not affected.
    await x.command(`status ${CLUSTER}`, REQUESTER, OPS);
    const on = blockText(x.slack.ephemerals({ user: REQUESTER }).filter((m) => m.channel === OPS).at(-1)!).split('\n').find((l) => l.includes('Token extension off'));
    expect(on).toMatch(/not safe: \d+ clients? would break/);
  });
});

describe('serve: what an AKS cluster in Log Analytics can tell', () => {
  it('a cluster whose diagnostic setting sends only kube-audit-admin (AKSAuditAdmin rows, no AKSAudit) is blind, with the fix', { timeout: 120_000 }, async () => {
    const x = await start();
    // The extension-off cluster's workspace rows: admin events only (no get/list), as AKSAuditAdmin holds them.
    const admin = Array.from({ length: 4 }, (_, i) => auditEvent({ auditID: `adm-${i}`, time: x.now() - 8 * MIN + i * 1000, kind: 'plain' }));
    logs!.add(WORKSPACE, admin.map((l) => row(l, RID_OFF, 'AKSAuditAdmin')));
    x.advance(5 * MIN);
    await x.poll(OFF);
    const off = x.serve.context.clusters.get(OFF)!.blind.state(x.now());
    expect(off).toMatchObject({ blind: true, reason: 'aks-admin-only' });
    const text = (off as { text: string }).text;
    expect(text).toContain('AKSAuditAdmin');
    expect(text).toContain('kube-audit category');
    expect(text).toContain('resource-specific');
    expect(text).toContain('Log Analytics Reader');
    // The cluster whose AKSAudit rows arrive is not blind.
    await x.poll(CLUSTER);
    expect(x.serve.context.clusters.get(CLUSTER)!.blind.state(x.now())).toEqual({ blind: false });
  });

  it('a workspace the identity may not read (403) is blind, with the fix, in /readyz, /tokens status, the Home tab and the metrics; the cursor stays; a granted role clears it', { timeout: 120_000 }, async () => {
    const x = await start();
    const id = x.serve.context.clusters.get(CLUSTER)!.source.id;
    const before = await x.serve.context.store.polls.getCursor(id);
    logs!.forbid(WORKSPACE);
    x.advance(5 * MIN);
    const failedAt = x.now();
    await x.poll(CLUSTER);
    expect(logs!.queries.at(-1)!.status).toBe(403);
    // The blind-log monitor: blind for want of read access, with the fix (the role, the diagnostic setting, its mode).
    const b = x.serve.context.clusters.get(CLUSTER)!.blind.state(x.now());
    expect(b).toMatchObject({ blind: true, reason: 'no-read-access' });
    const text = (b as { text: string }).text;
    expect(text).toContain(`may not read Log Analytics workspace ${WORKSPACE} (the query answered HTTP 403, InsufficientAccessError)`);
    expect(text).toContain('Log Analytics Reader');
    expect(text).toContain('kube-audit category');
    expect(text).toContain('resource-specific mode (the AKSAudit table)');
    // /readyz: the audit access says blind with the fix, the blind map names the reason; the pod stays in the Service.
    const res = await fetch(`http://127.0.0.1:${x.serve.port}/readyz`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { polls: Record<string, string>; access: Record<string, Record<string, string>>; blind: Record<string, string> };
    expect(body.blind).toEqual({ [CLUSTER]: 'no-read-access' });
    expect(body.polls[CLUSTER]).toBe('degraded');
    const hhmm = new Date(failedAt).toISOString().slice(11, 16);
    expect(body.access[CLUSTER]!.audit).toMatch(new RegExp(`^audit source blind: tokenwatch's identity may not read Log Analytics workspace ${WORKSPACE} .*Log Analytics Reader.*, since (\\d{4}-\\d{2}-\\d{2} )?${hhmm} UTC$`));
    expect(body.access[CLUSTER]!.audit).not.toContain('poll failed');
    // The other cluster of the workspace, polled later, is refused too: blind alike.
    await x.poll(OFF);
    expect(x.serve.context.clusters.get(OFF)!.blind.state(x.now())).toMatchObject({ blind: true, reason: 'no-read-access' });
    // /tokens status: the audit source line says blind with the fix, once.
    await x.command(`status ${CLUSTER}`, REQUESTER, OPS);
    const status = blockText(x.slack.ephemerals({ user: REQUESTER }).filter((m) => m.channel === OPS).at(-1)!);
    expect(status).toContain(`audit source ${id}`);
    expect(status).toContain(`blind: tokenwatch's identity may not read Log Analytics workspace ${WORKSPACE}`);
    expect(status.split('Log Analytics Reader role on the workspace (az role').length - 1).toBe(1);
    // The readiness line: never "safe" while blind (here "not safe": stale clients were seen before).
    expect(status).toMatch(/Token extension off \(--service-account-extend-token-expiration=false\)\? not safe: /);
    // The Home tab's data: the audit log failing with the same text.
    const home = sourcesOf(x.serve.context.clusters.get(CLUSTER)!, x.now());
    expect(home.find((s) => s.name === 'audit log')).toMatchObject({ state: 'failing', detail: text });
    // The metrics: the audit access failing, the log blind for that reason.
    const metrics = await x.metrics.text();
    expect(metrics).toContain(`tokenwatch_access_failing{cluster="${CLUSTER}",access="audit"} 1`);
    expect(metrics).toContain(`tokenwatch_audit_log_blind{cluster="${CLUSTER}",reason="no-read-access"} 1`);
    expect(metrics).toMatch(/tokenwatch_log_analytics_queries_total\{workspace="[^"]+",status="403"\} 1/);
    // The cursor stays where the store had it.
    expect(await x.serve.context.store.polls.getCursor(id)).toEqual(before);

    // The role granted: the next poll reads, the cluster is no longer blind, the gauge drops.
    logs!.forbid(WORKSPACE, false);
    x.advance(5 * MIN);
    await x.poll(CLUSTER);
    expect(x.serve.context.clusters.get(CLUSTER)!.blind.state(x.now())).toEqual({ blind: false });
    expect(x.serve.context.clusters.get(CLUSTER)!.access(x.now()).audit.state).toBe('ok');
    expect(await x.metrics.text()).toContain(`tokenwatch_audit_log_blind{cluster="${CLUSTER}",reason="no-read-access"} 0`);
    expect(await x.serve.context.store.polls.getCursor(id)).not.toEqual(before);
  });

  it('a restart approved for an AKS cluster PATCHes that cluster\'s API server once', { timeout: 120_000 }, async () => {
    const x = await start();
    const alert = await x.alert('kube-system', 'multus');
    await x.click(REQUESTER, alert, 'tw_restart');
    const approval = x.slack.thread(OPS, alert.ts).find((m) => m.text.includes('approval needed'))!;
    expect(approval.text).toContain('[prod-eks] approval needed: restart of DaemonSet kube-system/kube-multus-ds');
    await x.click(APPROVER, approval, 'tw_approve');
    const patches = x.kube.requestsMatching({ method: 'PATCH', resource: 'daemonsets' }).filter((r) => !r.dryRun);
    expect(patches).toHaveLength(1);
    expect(patches[0]!.contentType).toBe('application/strategic-merge-patch+json');
  });
});
