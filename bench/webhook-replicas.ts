/**
 * Audit webhook intake with two replicas on PostgreSQL (docs/live-mode.md#audit-webhook "Replicas"): a throwaway
 * PostgreSQL server (test/support/postgres-server.ts, Debian's postgresql; durability off as in the tests), two
 * {@link WebhookSource} listeners writing to its `webhook_batches` table (each with its own pool, as two replicas
 * would), and `--concurrency` batches in flight spread over both. Prints accepted events/s and the rows stored.
 *
 * Usage: `npm run bench:webhook-replicas -- [--batches N] [--batch-size N] [--concurrency N]` (defaults 500, 400, 8)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { WebhookSource } from '../src/sources/webhook.js';
import { migratePostgres } from '../src/store/migrations-postgres.js';
import { openPostgres } from '../src/store/postgres.js';
import { WebhookBatches } from '../src/store/webhook-batches.js';
import { auditEvent } from '../test/sources/events.js';
import { eventList, postBatch, selfSignedCert } from '../test/sources/webhook-client.js';
import { startPostgres } from '../test/support/postgres-server.js';
import { benchArgs } from './args.js';

const args = benchArgs('bench:webhook-replicas', 'usage: npm run bench:webhook-replicas -- [--batches N] [--batch-size N] [--concurrency N]', {
  batches: { type: 'string', default: '500' },
  'batch-size': { type: 'string', default: '400' },
  concurrency: { type: 'string', default: '8' },
});
const batches = args.whole('batches');
const batchSize = args.whole('batch-size');
const concurrency = args.whole('concurrency');
const TOKEN = 'bench-webhook-replicas-token';
const T = Date.parse('2026-11-29T12:00:00Z');

const server = await startPostgres();
if (!server.info.available) throw new Error(server.info.reason);
const dir = mkdtempSync(join(tmpdir(), 'tw-bench-webhook-replicas-'));
const info = server.info;
const opts = { host: info.host, port: info.port, database: 'postgres', user: info.superuser, sslmode: 'disable' as const, poolSize: 10 };
const pools = [openPostgres(opts), openPostgres(opts)];
try {
  await migratePostgres(pools[0]!);
  const cert = selfSignedCert(dir);
  const sources = pools.map((p, i) => new WebhookSource({ cluster: 'bench', host: '127.0.0.1', port: 0, cert: cert.cert, key: cert.key, token: TOKEN, spoolPath: join(dir, `unused-${i}.spool`), batches: new WebhookBatches(p) }));
  const ports = await Promise.all(sources.map((s) => s.start()));
  // What a busy cluster sends: mostly 401s (each may hold a token use, so each is stored), some stale-token uses.
  const body = (b: number): string =>
    eventList(Array.from({ length: batchSize }, (_, i) => auditEvent({ auditID: `b${b}-${i}`, time: T, kind: i % 50 === 0 ? 'stale' : 'unauthorized', pod: 'p', secondsAfterWarning: 100 })));
  const bodies = Array.from({ length: Math.min(batches, 50) }, (_, b) => body(b));
  let next = 0;
  let accepted = 0;
  let refused = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let b = next++; b < batches; b = next++) {
        const r = await postBatch({ port: ports[b % 2]!, ca: cert.cert, token: TOKEN, body: bodies[b % bodies.length]! });
        if (r.status === 200) accepted += batchSize;
        else refused++;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const rows = await pools[0]!.get<{ n: number; events: number }>('SELECT count(*) AS n, sum(event_count) AS events FROM webhook_batches');
  console.log(`two replicas on PostgreSQL: ${batches} batches of ${batchSize} events, ${concurrency} in flight`);
  console.log(`accepted ${accepted} events in ${seconds.toFixed(1)} s: ${Math.round(accepted / seconds)} events/s; refused batches ${refused}; rows stored ${rows?.n} (${rows?.events} events)`);
  for (const s of sources) s.close();
} finally {
  for (const p of pools) await p.close();
  server.stop();
  rmSync(dir, { recursive: true, force: true });
}
