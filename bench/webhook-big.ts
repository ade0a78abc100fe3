/**
 * Audit webhook memory under large batches (docs/live-mode.md#audit-webhook "Bounded memory"): a child process runs one
 * {@link WebhookSource} (spool mode) under the chart's heap cap (`--max-old-space-size`, default 384 = the chart's
 * `heapMiB`); this process POSTs N batches of about `--mib` MiB each at once over TLS on loopback, as the API server's
 * webhook backend would, and prints how many were answered 200 and 429 (with their `Retry-After`) and the child's
 * peak RSS (sampled every 20 ms by the child itself).
 *
 * Usage: `npm run bench:webhook-big -- [--batches N] [--mib X] [--heap-mib N]` (defaults 10, 15.9, 384)
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebhookSource } from '../src/sources/webhook.js';
import { auditEvent } from '../test/sources/events.js';
import { eventList, postBatch, selfSignedCert } from '../test/sources/webhook-client.js';
import { benchArgs, usageError } from './args.js';

const TOKEN = 'bench-webhook-big-token';
const T = Date.parse('2026-11-29T12:00:00Z');
const SCRIPT = 'bench:webhook-big';
const USAGE = 'usage: npm run bench:webhook-big -- [--batches N] [--mib X] [--heap-mib N]';

if (process.argv[2] === '--serve') {
  // The child: listener only; prints its port, then its peak RSS when told to stop (stdin closed).
  const [, , , dir, certFile, keyFile] = process.argv;
  if (!dir || !certFile || !keyFile) {
    usageError(SCRIPT, USAGE, '--serve is the bench\'s own child mode (started with a folder, a certificate and a key), not a flag to give');
  }
  const { readFileSync } = await import('node:fs');
  const source = new WebhookSource({ cluster: 'bench', host: '127.0.0.1', port: 0, cert: readFileSync(certFile), key: readFileSync(keyFile), token: TOKEN, spoolPath: join(dir, 'webhook-bench.spool') });
  let peak = process.memoryUsage.rss();
  setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 20).unref();
  console.log(`port ${await source.start()}`);
  process.stdin.resume();
  process.stdin.on('end', () => {
    console.log(`peak ${Math.max(peak, process.memoryUsage.rss())}`);
    source.close();
    process.exit(0);
  });
} else {
  const args = benchArgs(SCRIPT, USAGE, { batches: { type: 'string', default: '10' }, mib: { type: 'string', default: '15.9' }, 'heap-mib': { type: 'string', default: '384' } });
  const batchCount = args.whole('batches');
  const heapMiB = args.whole('heap-mib');
  const mib = Number(args.values.mib);
  if (!(Number.isFinite(mib) && mib > 0)) args.fail(`--mib takes a number of MiB > 0 (got '${args.values.mib}')`);
  const dir = mkdtempSync(join(tmpdir(), 'tw-bench-webhook-big-'));
  try {
    const cert = selfSignedCert(dir);
    const child = spawn(process.execPath, [`--max-old-space-size=${heapMiB}`, '--import', 'tsx', import.meta.filename, '--serve', dir, cert.certFile, cert.keyFile], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const port = await new Promise<number>((resolve) => {
      const check = setInterval(() => {
        const m = /port (\d+)/.exec(out);
        if (m) {
          clearInterval(check);
          resolve(Number(m[1]));
        }
      }, 20);
    });
    // One batch of about --mib MiB: token-use events (stale-token annotation) padded by a long user agent.
    const one = auditEvent({ auditID: 'x', time: T, kind: 'stale', pod: 'p', secondsAfterWarning: 100 });
    const target = mib * 1024 * 1024;
    const perEvent = one.length + 2000;
    const count = Math.floor(target / perEvent) - 1;
    const body = (b: number) => {
      const s = eventList(Array.from({ length: count }, (_, i) => auditEvent({ auditID: `b${b}-${i}`, time: T, kind: 'stale', pod: 'p', secondsAfterWarning: 100 }).replace('"auditID"', `"pad":"${'x'.repeat(2000)}","auditID"`)));
      return Buffer.from(s);
    };
    const bodies = Array.from({ length: batchCount }, (_, b) => body(b));
    const sizes = bodies.map((b) => b.length / 1024 / 1024);
    const results = await Promise.all(bodies.map((b) => postBatch({ port, ca: cert.cert, token: TOKEN, body: b }).catch((err: Error) => ({ status: 0, body: err.message, headers: {} as Record<string, unknown> }))));
    for (const r of results) if (r.status === 0) console.log(`no answer: ${r.body}`);
    child.stdin.end();
    await new Promise((r) => child.once('exit', r));
    const peak = Number(/peak (\d+)/.exec(out)?.[1] ?? 0);
    const by = (s: number) => results.filter((r) => r.status === s).length;
    console.log(`batches: ${bodies.length} of ${sizes[0]!.toFixed(2)} MiB at once; heap cap ${heapMiB} MiB`);
    console.log(`answered 200: ${by(200)}, 429: ${by(429)} (Retry-After ${results.find((r) => r.status === 429)?.headers['retry-after'] ?? '-'}), other: ${results.filter((r) => r.status !== 200 && r.status !== 429).map((r) => r.status || 'no answer').join(', ') || 0}`);
    console.log(`listener peak RSS: ${(peak / 1024 / 1024).toFixed(0)} MiB`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
