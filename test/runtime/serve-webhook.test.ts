/**
 * `serve` with an `audit.webhook` source: config → HTTPS listener → spool → poll → findings, the 429 metric, and
 * the bearer token kept out of the config rendering and the answers.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { composeServe } from '../../src/runtime/compose.js';
import { auditEvent } from '../sources/events.js';
import { eventList, postBatch, selfSignedCert } from '../sources/webhook-client.js';

const T0 = Date.parse('2026-11-20T12:00:00Z');
const TOKEN = 'serve-webhook-token-41d2';

describe('serve with an audit webhook source', () => {
  it('turns POSTed batches into findings, and counts batches shed past maxSpoolBytes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-serve-webhook-'));
    const cert = selfSignedCert(dir);
    writeFileSync(join(dir, 'token'), `${TOKEN}\n`);
    const config = parseConfig(
      {
        store: { path: join(dir, 'data', 'tw.db') },
        http: { host: '127.0.0.1', port: 0 },
        clusters: [
          {
            name: 'prod',
            audit: { webhook: { host: '127.0.0.1', port: 0, certFile: cert.certFile, keyFile: cert.keyFile, tokenFile: join(dir, 'token'), maxSpoolBytes: 2048 } },
            schedule: '0 0 1 1 *',
          },
        ],
      },
      {},
    );
    expect(config.clusters[0]!.audit).toMatchObject({ webhook: { spool: join(dir, 'data', 'webhook-prod.spool'), maxBodyBytes: 16 * 1024 * 1024 } });
    const metrics = new Metrics();
    const handle = await composeServe(config, { logger: createLogger({ level: 'silent' }), metrics, jitterMs: 0, clock: () => T0 });
    try {
      await handle.firstPolls;
      const rt = handle.context.clusters.get('prod')!;
      const port = rt.webhookPort!;
      const events = Array.from({ length: 4 }, (_, i) =>
        auditEvent({ auditID: `w-${i}`, time: T0 - 60_000, kind: 'stale', namespace: 'kube-system', serviceAccount: 'multus', pod: `multus-${i}`, secondsAfterWarning: 100 }),
      );
      const ok = await postBatch({ port, ca: cert.cert, token: TOKEN, body: eventList(events) });
      expect(ok.status).toBe(200);
      const shed = await postBatch({ port, ca: cert.cert, token: TOKEN, body: eventList(events.slice(0, 1)) });
      expect(shed.status).toBe(429);
      expect(shed.body).not.toContain(TOKEN);
      expect(await metrics.text()).toContain('tokenwatch_webhook_shed_batches_total{cluster="prod"} 1');

      await rt.poller.pollOnce();
      const open = await handle.context.store.findings.list('prod', { status: ['open'] });
      expect(open.map((f) => `${f.finding.namespace}/${f.finding.serviceAccount}`)).toEqual(['kube-system/multus']);
      expect(open[0]!.finding.requests).toBe(4);
      // once polled the spool is consumed: a re-sent batch is accepted and its auditIDs are not counted again
      await rt.poller.pollOnce();
      expect((await postBatch({ port, ca: cert.cert, token: TOKEN, body: eventList(events) })).status).toBe(200);
      await rt.poller.pollOnce();
      expect((await handle.context.store.findings.list('prod', { status: ['open'] }))[0]!.finding.requests).toBe(4);
    } finally {
      await handle.stop();
    }
  }, 60_000);
});
