/**
 * What the watch cache's open streams cost (src/cluster/cache.ts; docs/performance.md "Watch streams through undici's
 * request"): starts CLUSTERS loopback fake API servers (src/sandbox/fakes/kubernetes.ts) with PODS pods each, then one
 * watch cache per cluster (8 list+watch streams each: pods, ServiceAccounts and the six owner kinds), and prints
 *
 * - the V8 heap the caches hold once every stream is open: heap used after a full GC, minus the same before the caches
 *   started, per cluster and per stream (the fakes' side of each stream is in the same process, so this is an upper
 *   bound of the cache's own share; run with the same arguments to compare two trees);
 * - the process's CPU per watch event: ROUNDS times, one pod of every cluster is modified and the time until every
 *   cache saw it is measured with `process.cpuUsage()` (the fakes' work of sending it included), median of the rounds.
 *
 * Needs `--expose-gc`. Usage: `node --expose-gc --import tsx bench/watch-streams.ts [CLUSTERS=200] [PODS=20] [ROUNDS=5]`
 */
import { ClusterWatchCache } from '../src/cluster/cache.js';
import { poolConnections } from '../src/cluster/pool.js';
import { startFakeKube, type FakeKube } from '../src/sandbox/fakes/kubernetes.js';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) {
  process.stderr.write('run with node --expose-gc --import tsx bench/watch-streams.ts\n');
  process.exit(2);
}
const [clusters, pods, rounds] = [200, 20, 5].map((d, i) => Number(process.argv[2 + i] ?? d)) as [number, number, number];
if (![clusters, pods, rounds].every((n) => Number.isInteger(n) && n > 0)) {
  process.stderr.write('usage: node --expose-gc --import tsx bench/watch-streams.ts [CLUSTERS=200] [PODS=20] [ROUNDS=5] (whole numbers > 0)\n');
  process.exit(2);
}

const pod = (c: number, i: number, image: string) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { namespace: 'apps', name: `web-${i}`, uid: `c${c}-p${i}`, labels: { app: 'web' }, ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d9f', controller: true, uid: 'rs' }] },
  spec: { serviceAccountName: 'web', nodeName: `node-${i % 5}`, containers: [{ name: 'main', image }] },
  status: { phase: 'Running', startTime: '2026-11-01T10:00:00Z', podIP: `10.0.${c % 250}.${i}` },
});

/** Heap used after two full collections, bytes. */
function heapUsed(): number {
  gc!();
  gc!();
  return process.memoryUsage().heapUsed;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const fakes: FakeKube[] = [];
for (let c = 0; c < clusters; c++) fakes.push(await startFakeKube({ objects: Array.from({ length: pods }, (_, i) => pod(c, i, 'registry.example/web:1')) }));
const before = heapUsed();
const caches = fakes.map((f) => new ClusterWatchCache(poolConnections(f.kubeConfig()), { backoffMs: { initial: 100, max: 1000 } }));
for (const cache of caches) cache.start();
await Promise.all(caches.map((c) => c.synced()));
while (fakes.some((f) => f.openWatches().length < 8)) await new Promise((r) => setTimeout(r, 20));
const held = heapUsed() - before;

const cpu: number[] = [];
for (let r = 1; r <= rounds; r++) {
  const image = `registry.example/web:${r + 1}`;
  const start = process.cpuUsage();
  for (const [c, f] of fakes.entries()) f.store.put(pod(c, 0, image));
  const seen = () => caches.every((cache) => cache.contents().pods.some((p) => p.info.name === 'web-0' && p.info.containers[0]?.image === image));
  while (!seen()) await new Promise((res) => setImmediate(res));
  const used = process.cpuUsage(start);
  cpu.push((used.user + used.system) / clusters);
}

process.stdout.write(
  `${clusters} clusters × ${pods} pods, 8 watch streams each (Node ${process.version})\n` +
    `  heap held by the caches and their streams: ${(held / 1048576).toFixed(1)} MiB — ${(held / clusters / 1024).toFixed(1)} KiB per cluster, ${(held / clusters / 8 / 1024).toFixed(1)} KiB per stream (fakes' side included)\n` +
    `  CPU per watch event (a pod modified, seen by the cache; fakes included): median ${median(cpu).toFixed(0)} µs of ${rounds} rounds (${cpu.map((x) => x.toFixed(0)).join(', ')})\n`,
);
for (const cache of caches) cache.stop();
await Promise.all(fakes.map((f) => f.close()));
