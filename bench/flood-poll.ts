/**
 * Child of `npm run bench:flood` (bench/flood.ts): one `serve` poll — `ClusterPoller.pollOnce`, what the Deployment runs —
 * of a whole flood window into a fresh SQLite store, in this process, which the parent starts with the Deployment's
 * `--max-old-space-size`. Prints one JSON line: peak RSS (`process.resourceUsage().maxRSS`, KiB), the V8 heap limit,
 * and the poll's counts.
 *
 * Usage: `node --max-old-space-size=384 --import tsx bench/flood-poll.ts NOW_MS file PATH` or
 * `… bench/flood-poll.ts NOW_MS cloudwatch ENDPOINT LOG_GROUP` (NOW_MS: the poll's clock, epoch ms).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getHeapStatistics } from 'node:v8';
import { parseConfig } from '../src/config/index.js';
import { createLogger } from '../src/observability/logger.js';
import { ClusterPoller } from '../src/pipeline/poll.js';
import { CloudWatchSource } from '../src/sources/cloudwatch.js';
import { FileSource } from '../src/sources/file.js';
import type { AuditSource } from '../src/sources/types.js';
import { openStore } from '../src/store/index.js';

process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] = 'true';
const [nowArg, kind, a, b] = process.argv.slice(2);
let source: AuditSource & { close?(): void };
let audit: object;
const now = Number(nowArg);
if (!(now > 0)) {
  process.stderr.write('usage: flood-poll.ts NOW_MS file PATH | NOW_MS cloudwatch ENDPOINT LOG_GROUP\n');
  process.exit(2);
}
if (kind === 'file' && a) {
  source = new FileSource({ path: a });
  audit = { file: { path: a } };
} else if (kind === 'cloudwatch' && a && b) {
  source = new CloudWatchSource({ region: 'us-east-1', logGroup: b, streamPrefix: 'kube-apiserver-audit-', endpoint: a, credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' } });
  audit = { cloudwatch: { region: 'us-east-1', logGroup: b } };
} else {
  process.stderr.write('usage: flood-poll.ts NOW_MS file PATH | NOW_MS cloudwatch ENDPOINT LOG_GROUP\n');
  process.exit(2);
}
const config = parseConfig({ clusters: [{ name: 'bench', audit }] }, {});
const cluster = config.clusters[0]!;
const dir = mkdtempSync(join(tmpdir(), 'tokenwatch-flood-poll-'));
try {
  const store = await openStore(join(dir, 'flood.db'));
  const poller = new ClusterPoller({ cluster, source, store, logger: createLogger({ level: 'silent' }), clock: () => now, chunkEvents: config.poll.chunkEvents });
  const started = performance.now();
  const out = await poller.pollOnce();
  const seconds = (performance.now() - started) / 1000;
  const records = await store.tokenRecords.list('bench');
  process.stdout.write(
    `${JSON.stringify({
      maxRssKiB: process.resourceUsage().maxRSS,
      heapLimitMiB: getHeapStatistics().heap_size_limit / 2 ** 20,
      error: out.error ?? null,
      records: out.records,
      newUses: out.newUses,
      commits: out.commits,
      maxHeld: out.maxHeld,
      chunkEvents: config.poll.chunkEvents,
      tokenRecords: records.length,
      requests: records.reduce((n, r) => n + r.requests, 0),
      findings: out.findings.length,
      seconds,
    })}\n`,
  );
  await store.close();
  source.close?.();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
