/**
 * Audit webhook benchmark (docs/live-mode.md#audit-webhook): a flood of EventList batches POSTed over TLS on loopback
 * to one {@link WebhookSource}, as the API server's webhook backend sends them (bearer token, application/json), with
 * a concurrent poller draining the spool. Prints accepted events/s, batches shed (429) and the process's peak RSS.
 *
 * Usage: `npm run bench:webhook -- [--batches N] [--batch-size N] [--concurrency N] [--max-spool-mib N]`
 *   --batches N        batches sent (default 2000)
 *   --batch-size N     events per batch (default 400, the backend's default --audit-webhook-batch-max-size)
 *   --concurrency N    batches in flight (default 8)
 *   --max-spool-mib N  audit.webhook.maxSpoolBytes in MiB (default 256)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { WebhookSource } from '../src/sources/webhook.js';
import { emptyStats } from '../src/sources/types.js';
import { auditEvent } from '../test/sources/events.js';
import { eventList, postBatch, selfSignedCert } from '../test/sources/webhook-client.js';
import { benchArgs } from './args.js';

const args = benchArgs('bench:webhook', 'usage: npm run bench:webhook -- [--batches N] [--batch-size N] [--concurrency N] [--max-spool-mib N]', {
  batches: { type: 'string', default: '2000' },
  'batch-size': { type: 'string', default: '400' },
  concurrency: { type: 'string', default: '8' },
  'max-spool-mib': { type: 'string', default: '256' },
});
const batches = args.whole('batches');
const batchSize = args.whole('batch-size');
const concurrency = args.whole('concurrency');
const maxSpoolMiB = args.whole('max-spool-mib');
const TOKEN = 'bench-webhook-token';
const T = Date.parse('2026-11-29T12:00:00Z');

const dir = mkdtempSync(join(tmpdir(), 'tw-bench-webhook-'));
let peakRss = process.memoryUsage.rss();
const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage.rss())), 50);
try {
  const cert = selfSignedCert(dir);
  const source = new WebhookSource({
    cluster: 'bench',
    host: '127.0.0.1',
    port: 0,
    cert: cert.cert,
    key: cert.key,
    token: TOKEN,
    spoolPath: join(dir, 'webhook-bench.spool'),
    maxSpoolBytes: maxSpoolMiB * 1024 * 1024,
  });
  const port = await source.start();
  // A 401 flood: token-less failed authentications, each a distinct auditID (what the prefilter passes on).
  const body = (b: number): string =>
    eventList(Array.from({ length: batchSize }, (_, i) => auditEvent({ auditID: `b${b}-${i}`, time: T, kind: i % 50 === 0 ? 'stale' : 'unauthorized', pod: 'p', secondsAfterWarning: 100 })));
  let polled = 0;
  let cursor: string | undefined;
  let sending = true;
  const poller = (async () => {
    while (sending || source.webhookStatus().unconsumedBytes > 0) {
      const gen = source.poll(cursor, { now: T, lookbackMs: 0, stats: emptyStats() });
      for (;;) {
        const r = await gen.next();
        if (r.done) {
          cursor = r.value;
          break;
        }
        polled++;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  let next = 0;
  let accepted = 0;
  let shed = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < batches) {
        const b = next++;
        const res = await postBatch({ port, ca: cert.cert, token: TOKEN, body: body(b) });
        if (res.status === 200) accepted += batchSize;
        else if (res.status === 429) shed++;
        else throw new Error(`unexpected HTTP ${res.status}: ${res.body}`);
      }
    }),
  );
  const secs = (performance.now() - start) / 1000;
  sending = false;
  await poller;
  source.close();
  console.log(`batches: ${batches} × ${batchSize} events, ${concurrency} in flight`);
  console.log(`accepted: ${accepted} events in ${secs.toFixed(2)} s = ${Math.round(accepted / secs)} events/s (each batch fsync'd before its 200)`);
  console.log(`shed (429): ${shed} batches`);
  console.log(`polled: ${polled} events`);
  console.log(`peak RSS: ${(peakRss / 1048576).toFixed(1)} MiB`);
} finally {
  clearInterval(sampler);
  rmSync(dir, { recursive: true, force: true });
}
