/**
 * The Log Analytics source on its own: the real `@azure/monitor-query-logs` client and the workload identity
 * exchange against the loopback HTTPS fakes (test CA). Answers cut at the row limit are asked again by halves of
 * their window; the `AzureDiagnostics` variant reads `log_s`; the token exchange says what failed without the
 * federated token or an access token in its message.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeEntraToken, type FakeEntraToken } from '../../src/sandbox/fakes/entra-token.js';
import { aksAuditRow, startFakeLogAnalytics, type FakeLogAnalytics } from '../../src/sandbox/fakes/log-analytics.js';
import { WorkloadIdentityCredential } from '../../src/sources/azure-token.js';
import { LogAnalyticsMembers, LogAnalyticsRegistry, LogAnalyticsWorkspace } from '../../src/sources/log-analytics.js';
import { createPlatformHints } from '../../src/sources/platform-hints.js';
import { emptyStats } from '../../src/sources/types.js';
import { auditEvent } from './events.js';
import { selfSignedCert } from './webhook-client.js';

const MIN = 60_000;
const NOW = Date.parse('2026-12-01T12:00:00Z');
const WS = '0b4a3c2d-1e5f-4a6b-8c7d-9e0f1a2b3c4d';
const TENANT = '72f988bf-86f1-41af-91ab-2d7cd011db47';
const CLIENT = '5f1c2d3e-4b5a-6978-8a9b-0c1d2e3f4a5b';
const RID = '/subscriptions/s/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/a';
const SA_TOKEN = 'eyJhbGciOiJSUzI1NiJ9.the-federated-sa-token.sig';

let fake: FakeLogAnalytics | undefined;
let entra: FakeEntraToken | undefined;
afterEach(async () => {
  await fake?.close();
  await entra?.close();
  fake = entra = undefined;
});

async function setup(o: { maxRows?: number; assertion?: string; answerDelayMs?: number } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'tw-la-'));
  const tls = selfSignedCert(dir);
  const tokenFile = join(dir, 'token');
  writeFileSync(tokenFile, `${SA_TOKEN}\n`);
  entra = await startFakeEntraToken({ cert: tls.cert, key: tls.key, tenantId: TENANT, clientId: CLIENT, assertion: o.assertion ?? SA_TOKEN });
  fake = await startFakeLogAnalytics({ cert: tls.cert, key: tls.key, acceptToken: (t) => entra!.issued(t), ...(o.maxRows !== undefined && { maxRows: o.maxRows }), ...(o.answerDelayMs !== undefined && { answerDelayMs: o.answerDelayMs }) });
  const credential = new WorkloadIdentityCredential({ clientId: CLIENT, tenantId: TENANT, tokenFile, authorityHost: entra.authorityHost, ca: tls.cert });
  return { credential, ca: tls.cert };
}

const stale = (id: string, time: number) => auditEvent({ auditID: id, time, kind: 'stale', namespace: 'kube-system', serviceAccount: 'multus', pod: 'kube-multus-ds-x', secondsAfterWarning: 7_000_000 });

async function drain(gen: AsyncGenerator<string, string>): Promise<{ texts: string[]; cursor: string }> {
  const texts: string[] = [];
  for (;;) {
    const n = await gen.next();
    if (n.done) return { texts, cursor: n.value };
    texts.push(n.value);
  }
}

describe('Log Analytics source', () => {
  it('an answer cut at the row limit is asked again as two halves of its window; every row arrives once', async () => {
    const { credential, ca } = await setup({ maxRows: 3 });
    const rows = Array.from({ length: 5 }, (_, i) => aksAuditRow(JSON.parse(stale(`s-${i}`, NOW - 50 * MIN + i * 8 * MIN)) as Record<string, unknown>, RID));
    fake!.add(WS, rows);
    const ws = new LogAnalyticsWorkspace({ workspaceId: WS, table: 'AKSAudit', endpoint: fake!.endpoint, credential, ca, lagMs: 5 * MIN, overlapMs: 10 * MIN, concurrency: (fn) => fn() });
    const src = new LogAnalyticsMembers(ws).add('azure:a', RID);
    const { texts, cursor } = await drain(src.poll(undefined, { now: NOW, lookbackMs: 60 * MIN, stats: emptyStats() }));
    expect(texts.map((t) => (JSON.parse(t) as { AuditId: string }).AuditId).sort()).toEqual(['s-0', 's-1', 's-2', 's-3', 's-4']);
    expect(JSON.parse(cursor)).toEqual({ v: 1, until: NOW - 5 * MIN });
    // The first answer was cut (5 rows > 3), then the halves: 55 min → 27.5 min each.
    const spans = fake!.queries.map((q) => q.timespan.split('/').map((t) => Date.parse(t)));
    expect(spans[0]).toEqual([NOW - 60 * MIN, NOW - 5 * MIN]);
    expect(spans.length).toBeGreaterThanOrEqual(3);
    expect(spans[1]![1]).toBe(spans[2]![0]);
    src.close();
  });

  it('at most maxConcurrentQueries queries of one identity run at once, across its workspaces', async () => {
    const { credential, ca } = await setup({ answerDelayMs: 300 });
    const registry = new LogAnalyticsRegistry({ settings: { queriesPerSecond: 5, maxConcurrentQueries: 2, reuse: 5 * MIN, timeout: 60_000 }, credential, ca });
    // Six clusters, each in a workspace of its own: six queries asked at once.
    const sources = Array.from({ length: 6 }, (_, i) =>
      registry.source({ workspaceId: WS.replace(/d$/, String(i)), resourceId: `${RID}${i}`, table: 'AKSAudit', endpoint: fake!.endpoint, lag: 5 * MIN, overlap: 10 * MIN }),
    );
    await Promise.all(sources.map((s) => drain(s.poll(undefined, { now: NOW, lookbackMs: 60 * MIN, stats: emptyStats() }))));
    expect(fake!.queries.filter((q) => q.status === 200)).toHaveLength(6);
    expect(fake!.maxInFlight()).toBeLessThanOrEqual(2); // 6 without the limit: every query waits 300 ms at the fake
    for (const s of sources) s.close();
  });

  it('the AzureDiagnostics variant reads kube-audit rows (the event in log_s) and reports the categories it saw', async () => {
    const { credential, ca } = await setup();
    const event = stale('d-1', NOW - 20 * MIN);
    fake!.add(WS, [
      { Type: 'AzureDiagnostics', TimeGenerated: new Date(NOW - 20 * MIN).toISOString(), _ResourceId: RID.toLowerCase(), Category: 'kube-audit', log_s: event },
      { Type: 'AzureDiagnostics', TimeGenerated: new Date(NOW - 19 * MIN).toISOString(), _ResourceId: RID.toLowerCase(), Category: 'kube-audit-admin', log_s: '{"kind":"Event","auditID":"x"}' },
    ]);
    const ws = new LogAnalyticsWorkspace({ workspaceId: WS, table: 'AzureDiagnostics', endpoint: fake!.endpoint, credential, ca, lagMs: 5 * MIN, overlapMs: 10 * MIN, concurrency: (fn) => fn() });
    const src = new LogAnalyticsMembers(ws).add('azure:a', RID);
    const stats = { ...emptyStats(), platformHints: createPlatformHints() };
    const { texts } = await drain(src.poll(undefined, { now: NOW, lookbackMs: 60 * MIN, stats }));
    expect(fake!.queries[0]!.query).toContain('AzureDiagnostics | where Category == "kube-audit"');
    expect(texts).toHaveLength(1);
    expect(JSON.parse(texts[0]!)).toMatchObject({ Category: 'kube-audit', log_s: event });
    expect([...stats.platformHints.aksCategories].sort()).toEqual(['kube-audit', 'kube-audit-admin']);
    src.close();
  });

  it('a refused token exchange names the authority’s error, never the federated token; the access token is cached', async () => {
    const { credential } = await setup({ assertion: 'another-token' });
    const err = await credential.getToken('https://api.loganalytics.io/.default').catch((e: Error) => e);
    expect(String((err as Error).message)).toContain('AADSTS700213');
    expect(String((err as Error).message)).toContain('api://AzureADTokenExchange');
    expect(String((err as Error).message)).not.toContain(SA_TOKEN);
  });

  it('caches the access token until 5 minutes before it expires', async () => {
    const { credential } = await setup();
    const a = await credential.getToken('https://api.loganalytics.io/.default');
    const b = await credential.getToken(['https://api.loganalytics.io/.default']);
    expect(b.token).toBe(a.token);
    expect(entra!.requests.filter((r) => r.status === 200)).toHaveLength(1);
    expect(entra!.issued(a.token)).toBe(true);
  });
});
