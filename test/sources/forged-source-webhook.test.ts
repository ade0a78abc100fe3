/**
 * Forged X-Forwarded-For through the audit webhook receiver (real TLS on loopback, an EventList as the API server's
 * webhook backend sends it): the 401s are attributed to the connection's address, never to the pod a client-set
 * entry names; a trusted proxy's appended address counts.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebhookSource } from '../../src/sources/webhook.js';
import { emptyStats } from '../../src/sources/types.js';
import { createReadStats } from '../../src/sources/reader.js';
import { tokenUseFromJson } from '../../src/audit/records.js';
import { TokenAggregator } from '../../src/findings/aggregate.js';
import { parseTrustedProxies, type TrustedProxies } from '../../src/core/source-address.js';
import { auditEvent, drain, type EventSpec } from './events.js';
import { eventList, postBatch, selfSignedCert, type TestCert } from './webhook-client.js';

const T = Date.parse('2026-11-29T12:00:00Z');
const MIN = 60_000;
const TOKEN = 'webhook-token-forged-xff';
const UA = 'billing-api/1.4';

let certDir: string;
let server: TestCert;
const dirs: string[] = [];
const sources: WebhookSource[] = [];

beforeAll(() => {
  certDir = mkdtempSync(join(tmpdir(), 'tw-webhook-xff-certs-'));
  server = selfSignedCert(certDir, 'server');
});

afterEach(async () => {
  for (const s of sources.splice(0)) s.close();
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function received(specs: EventSpec[], trusted?: TrustedProxies) {
  const d = mkdtempSync(join(tmpdir(), 'tw-webhook-xff-'));
  dirs.push(d);
  const source = new WebhookSource({ cluster: 'prod', host: '127.0.0.1', port: 0, cert: server.cert, key: server.key, token: TOKEN, spoolPath: join(d, 'webhook-prod.spool') });
  sources.push(source);
  const port = await source.start();
  expect((await postBatch({ port, ca: server.cert, token: TOKEN, body: eventList(specs.map(auditEvent)) })).status).toBe(200);
  const { items } = await drain(source.poll(undefined, { now: T, lookbackMs: 86_400_000, stats: emptyStats() }));
  const agg = new TokenAggregator({ cluster: 'prod', maxTokenAge: { mode: 'eks' }, ...(trusted ? { trustedProxies: trusted } : {}) });
  const stats = createReadStats();
  for (const m of items) {
    const use = tokenUseFromJson(m, stats);
    if (use) agg.add(use);
  }
  return agg.records();
}

const staleFrom = (ips: string[]): EventSpec[] =>
  [40, 30, 20].map((m, i) => ({ auditID: `s${i}`, time: T - m * MIN, kind: 'stale', namespace: 'payments', serviceAccount: 'billing-api', pod: 'billing-api-0', secondsAfterWarning: 86_400 + i, sourceIPs: ips, userAgent: UA }));
const unauthorizedFrom = (ips: string[]): EventSpec[] =>
  Array.from({ length: 12 }, (_, i) => ({ auditID: `u${i}`, time: T - 35 * MIN + i * 1000, kind: 'unauthorized', sourceIPs: ips, userAgent: UA }));

describe('forged X-Forwarded-For through the audit webhook', () => {
  it('12 token-less requests claiming the pod’s IP stay at the sender’s address, unattributed', async () => {
    const records = await received([...staleFrom(['10.1.1.5']), ...unauthorizedFrom(['10.1.1.5', '10.9.9.9'])]);
    const u = records.filter((r) => r.kind === 'unauthorized');
    expect(u).toHaveLength(1);
    expect(u[0]).toMatchObject({ subject: '(unattributed)', sourceIPs: ['10.9.9.9'], forwardedIPs: ['10.1.1.5'], requests: 12 });
  });

  it('behind a trusted proxy, the address it appended is the client', async () => {
    const records = await received(
      [...staleFrom(['10.1.1.5', '10.0.0.4']), ...unauthorizedFrom(['6.6.6.6', '10.1.1.5', '10.0.0.4'])],
      parseTrustedProxies(['10.0.0.4']),
    );
    const u = records.find((r) => r.kind === 'unauthorized')!;
    expect(u).toMatchObject({ serviceAccount: 'billing-api', sourceIPs: ['10.1.1.5'], forwardedIPs: ['6.6.6.6'] });
    expect(u.attribution).toMatch(/^inferred: same source IP 10\.1\.1\.5/);
  });
});
