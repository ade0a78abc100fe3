/**
 * Memory a namespace watch costs per cluster (routing rules on namespace labels, docs/slack.md "Namespace labels"):
 * starts CLUSTERS loopback fake API servers with NAMESPACES labelled namespaces each (label values distinct per
 * cluster, so nothing is shared across clusters that would not be in a real fleet), then the watch caches of all
 * clusters without and with `metaKeys.namespaceLabels`, and prints the heap used after a full GC in each
 * phase (alternating five times), and the median difference per cluster. It includes the fake servers' side of the
 * watch (same process), so it is an upper bound. Needs `--expose-gc`.
 *
 * Usage: `node --expose-gc --import tsx bench/namespace-watch.ts [CLUSTERS=50] [NAMESPACES=100]`
 */
import { ClusterWatchCache } from '../src/cluster/cache.js';
import { startFakeKube, type FakeKube } from '../src/sandbox/fakes/kubernetes.js';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) {
  process.stderr.write('run with node --expose-gc\n');
  process.exit(2);
}
const clusters = Number(process.argv[2] ?? 50);
const namespaces = Number(process.argv[3] ?? 100);

const fakes: FakeKube[] = [];
for (let c = 0; c < clusters; c++) {
  const objects = Array.from({ length: namespaces }, (_, i) => ({
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: {
      name: `ns-${i}`,
      labels: { team: `c${c}-team-${i % 10}`, 'kubernetes.io/metadata.name': `ns-${i}`, env: 'prod', 'app.kubernetes.io/part-of': `c${c}-app-${i}` },
    },
  }));
  fakes.push(await startFakeKube({ objects }));
}

async function heapWith(namespaceLabels: string[] | undefined): Promise<number> {
  const caches = fakes.map((f) => new ClusterWatchCache(f.kubeConfig(), { metaKeys: { labels: [], annotations: [], ...(namespaceLabels ? { namespaceLabels } : {}) } }));
  for (const c of caches) c.start();
  await Promise.all(caches.map((c) => c.synced()));
  for (const f of fakes) f.requests.length = 0;
  await new Promise((r) => setTimeout(r, 500));
  for (let i = 0; i < 3; i++) gc!();
  const used = process.memoryUsage().heapUsed;
  for (const c of caches) c.stop();
  return used;
}

// Once each before measuring (warms modules and connection pools), then ROUNDS alternations; the median difference.
await heapWith(undefined);
await heapWith(['team']);
const ROUNDS = 5;
const diffs: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  const without = await heapWith(undefined);
  const withNs = await heapWith(['team']);
  diffs.push((withNs - without) / clusters / 1024);
}
diffs.sort((a, b) => a - b);
process.stdout.write(
  `${clusters} clusters × ${namespaces} namespaces: heap used with minus without the namespace watch, per cluster: ` +
    `median ${diffs[Math.floor(ROUNDS / 2)]!.toFixed(1)} KiB (rounds: ${diffs.map((d) => d.toFixed(1)).join(', ')} KiB)\n`,
);
await Promise.all(fakes.map((f) => f.close()));
process.exit(0);
