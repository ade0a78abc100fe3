/**
 * The audit webhook with two `serve` replicas on one PostgreSQL store (src/sources/webhook.ts "Shared store"): a batch
 * acknowledged by the replica that does not own the cluster is in the shared store, so the owner counts it at its next
 * poll even after that replica is gone with its data directory; batches spread over both replicas are counted once.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { composeServe } from '../../src/runtime/compose.js';
import type { ServeHandle } from '../../src/runtime/serve-options.js';
import { desiredOwner } from '../../src/runtime/shards.js';
import { auditEvent } from '../sources/events.js';
import { eventList, postBatch, selfSignedCert } from '../sources/webhook-client.js';
import { createTestDatabase, postgresServer, type TestDatabase } from '../support/postgres.js';
import { until } from '../support/until.js';

const pgServer = postgresServer();
const T0 = Date.parse('2026-11-20T12:00:00Z');
const TOKEN = 'replica-webhook-token-5be1';
const silent = createLogger({ level: 'silent' });

const handles: ServeHandle[] = [];
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const h of handles.splice(0)) await h.stop();
  for (const f of cleanups.splice(0).reverse()) await f();
});

const stale = (id: string, sa: string, pod: string) => auditEvent({ auditID: id, time: T0 - 60_000, kind: 'stale', namespace: 'apps', serviceAccount: sa, pod, secondsAfterWarning: 100 });

async function twoReplicas() {
  const db: TestDatabase = await createTestDatabase();
  cleanups.push(() => db.drop());
  const certDir = mkdtempSync(join(tmpdir(), 'tw-wh-replicas-'));
  cleanups.push(() => rmSync(certDir, { recursive: true, force: true }));
  const cert = selfSignedCert(certDir);
  writeFileSync(join(certDir, 'token'), TOKEN);
  const start = async (name: string) => {
    const dataDir = mkdtempSync(join(tmpdir(), `tw-wh-${name}-`));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const config = parseConfig(
      {
        store: { path: join(dataDir, 'tw.db'), postgres: { host: db.options.host, port: db.options.port, database: db.options.database, user: db.options.user, sslmode: 'disable', poolSize: 4 } },
        http: { host: '127.0.0.1', port: 0 },
        clusters: [{ name: 'prod', audit: { webhook: { host: '127.0.0.1', port: 0, certFile: cert.certFile, keyFile: cert.keyFile, tokenFile: join(certDir, 'token') } }, schedule: '0 0 1 1 *' }],
      },
      {},
    );
    const h = await composeServe(config, { logger: silent, metrics: new Metrics(), jitterMs: 0, clock: () => T0, sharding: { name, heartbeatMs: 200, ttlMs: 5000 } });
    handles.push(h);
    return { h, dataDir, port: h.context.clusters.get('prod')!.webhookPort! };
  };
  const a = await start('tw-a');
  const b = await start('tw-b');
  // Both live; prod settles on its desired owner (a hands it over to b when b should own it).
  const want = desiredOwner('prod', [a.h.context.shards!.id, b.h.context.shards!.id]);
  const [owner, other] = want === a.h.context.shards!.id ? [a, b] : [b, a];
  await until('prod owned by its desired owner only', () => owner.h.context.ownership.owns('prod') && !other.h.context.ownership.owns('prod') && other.h.context.shards!.status().replicas.length === 2);
  return { owner, other, cert };
}

/**
 * Runs the owner's next poll (as its schedule would) and waits for it to finish. Asked again while none has ended: on
 * a busy machine a heartbeat can come late, and a poll asked for while the renewal is stale does not start.
 */
async function nextPoll(h: ServeHandle): Promise<void> {
  const runs = async () => Number((await h.context.store.sql.get<{ n: number }>("SELECT count(*) AS n FROM poll_runs WHERE cluster = 'prod' AND ended_at IS NOT NULL"))?.n ?? 0);
  const before = await runs();
  await until('the owner\'s poll to end', async () => {
    if ((await runs()) > before) return true;
    h.context.runNow('prod'); // 'busy' while one runs
    await new Promise((r) => setTimeout(r, 250));
    return false;
  });
}

const requests = async (h: ServeHandle): Promise<Record<string, number>> =>
  Object.fromEntries((await h.context.store.findings.list('prod', { status: ['open'] })).map((f) => [f.finding.serviceAccount, f.finding.requests]));

describe.skipIf(!pgServer.available)('audit webhook with two replicas on PostgreSQL', () => {
  it('a batch acknowledged by the non-owner is counted at the owner\'s next poll, after the non-owner and its data directory are gone', { timeout: 180_000 }, async () => {
    const { owner, other, cert } = await twoReplicas();
    const events = Array.from({ length: 10 }, (_, i) => stale(`n-${i}`, 'fluent-bit', `fb-${i}`));
    const res = await postBatch({ port: other.port, ca: cert.cert, token: TOKEN, body: eventList(events) });
    expect(res.status).toBe(200);
    // The non-owner is replaced: stopped, its data directory (spool included) deleted.
    await other.h.stop();
    handles.splice(handles.indexOf(other.h), 1);
    rmSync(other.dataDir, { recursive: true, force: true });
    await nextPoll(owner.h);
    expect(await requests(owner.h)).toEqual({ 'fluent-bit': 10 });
    // Read once: the rows are deleted once committed, and a later poll counts nothing again.
    await nextPoll(owner.h);
    expect(await requests(owner.h)).toEqual({ 'fluent-bit': 10 });
    expect(await owner.h.context.store.sql.get<{ n: number }>('SELECT count(*) AS n FROM webhook_batches')).toEqual({ n: 0 });
  });

  it('50 batches of 100 events spread over both replicas are all counted once', { timeout: 180_000 }, async () => {
    const { owner, other, cert } = await twoReplicas();
    const sas = ['alpha', 'bravo', 'charlie', 'delta', 'echo'];
    const sends: Promise<number>[] = [];
    for (let b = 0; b < 50; b++) {
      const events = Array.from({ length: 100 }, (_, i) => stale(`m-${b}-${i}`, sas[(b * 100 + i) % sas.length]!, `pod-${i % 7}`));
      const port = b % 2 === 0 ? owner.port : other.port;
      sends.push(postBatch({ port, ca: cert.cert, token: TOKEN, body: eventList(events) }).then((r) => r.status));
      // A poll of the owner while batches arrive: rows committed after it read are read by the next one.
      if (b === 25) await nextPoll(owner.h);
    }
    expect(new Set(await Promise.all(sends))).toEqual(new Set([200]));
    await nextPoll(owner.h);
    await nextPoll(owner.h);
    expect(await requests(owner.h)).toEqual(Object.fromEntries(sas.map((s) => [s, 1000])));
    // The same batches re-sent (an answer lost on the way back): not counted again.
    const again = await postBatch({ port: other.port, ca: cert.cert, token: TOKEN, body: eventList(Array.from({ length: 100 }, (_, i) => stale(`m-0-${i}`, sas[i % sas.length]!, `pod-${i % 7}`))) });
    expect(again.status).toBe(200);
    await nextPoll(owner.h);
    expect(await requests(owner.h)).toEqual(Object.fromEntries(sas.map((s) => [s, 1000])));
  });
});
