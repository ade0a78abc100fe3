/**
 * `/tokens status` of a cluster with an audit webhook source: one line with accepted events and shed batches.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { auditEvent } from '../sources/events.js';
import { eventList, postBatch, selfSignedCert, type TestCert } from '../sources/webhook-client.js';
import { REQUESTER, STAGING, blockText, startHarness, type Harness } from './harness.js';

const TOKEN = 'status-webhook-token-9b1e';

describe('/tokens status with an audit webhook source', () => {
  let h: Harness | undefined;
  afterAll(async () => {
    await h?.stop();
  });

  it('shows accepted events and the batches shed with 429 in one line', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-status-webhook-'));
    const cert: TestCert = selfSignedCert(dir);
    writeFileSync(join(dir, 'token'), TOKEN);
    h = await startHarness({
      tweak: (c) => {
        c.clusters[1]!.audit = {
          webhook: { host: '127.0.0.1', port: 0, certFile: cert.certFile, keyFile: cert.keyFile, tokenFile: join(dir, 'token'), spool: join(dir, 'stg.spool'), maxBodyBytes: 1 << 20, maxSpoolBytes: 1024, maxInflightBytes: 64 << 20, maxConnections: 256 },
        };
      },
    });
    const port = h.serve.context.clusters.get('staging-eks')!.webhookPort!;
    const events = Array.from({ length: 3 }, (_, i) => auditEvent({ auditID: `st-${i}`, time: Date.now(), kind: 'stale', namespace: 'logging', serviceAccount: 'fluent-bit', pod: `fb-${i}`, secondsAfterWarning: 100 }));
    expect((await postBatch({ port, ca: cert.cert, token: TOKEN, body: eventList(events) })).status).toBe(200);
    expect((await postBatch({ port, ca: cert.cert, token: TOKEN, body: eventList(events.slice(0, 1)) })).status).toBe(429);
    await h.command('status staging-eks', REQUESTER, STAGING);
    const text = blockText(h.slack.ephemerals({ user: REQUESTER }).at(-1)!);
    expect(text).toMatch(/❌ audit webhook: 3 events accepted, 1 batches shed \(429\), \d+\.\d MiB waiting/);
    expect(text).not.toContain(TOKEN);
  }, 60_000);
});
