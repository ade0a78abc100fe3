/**
 * What the watch cache's open streams cost (src/cluster/cache.ts; docs/performance.md "Watch streams through undici's
 * request"): starts CLUSTERS loopback fake API servers (src/sandbox/fakes/kubernetes.ts) with PODS pods each in a
 * worker thread, then one watch cache per cluster on the main thread (8 list+watch streams each: pods,
 * ServiceAccounts and the six owner kinds), and prints
 *
 * - the V8 heap the caches hold once every stream is open and the lists' idle connections closed (6 s later): the
 *   main thread's heap used after a full GC, minus the same before the caches started, per cluster and per stream
 *   (the fakes run on their own thread, with a heap of their own, so this is the caches' share only);
 * - the process's CPU per watch event: ROUNDS times, one pod of every cluster is modified and the time until every
 *   cache saw it is measured with `process.cpuUsage()` (both threads, so the fakes' work of sending it included),
 *   median of the rounds.
 *
 * Needs `--expose-gc`. Usage: `node --expose-gc --import tsx bench/watch-streams.ts [CLUSTERS=200] [PODS=20] [ROUNDS=5]`
 */
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { ClusterWatchCache } from '../src/cluster/cache.js';
import { poolConnections } from '../src/cluster/pool.js';
import { fakeKubeConfig, startFakeKube, type FakeKube } from '../src/sandbox/fakes/kubernetes.js';

/** Messages between the main thread and the fakes' thread. */
type ToFakes = { put: string } | { watches: true } | { close: true };
type FromFakes = { urls: string[] } | { put: true } | { watches: number[] } | { closed: true };

const pod = (c: number, i: number, image: string) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { namespace: 'apps', name: `web-${i}`, uid: `c${c}-p${i}`, labels: { app: 'web' }, ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d9f', controller: true, uid: 'rs' }] },
  spec: { serviceAccountName: 'web', nodeName: `node-${i % 5}`, containers: [{ name: 'main', image }] },
  status: { phase: 'Running', startTime: '2026-11-01T10:00:00Z', podIP: `10.0.${c % 250}.${i}` },
});

if (!isMainThread) {
  // The fakes' thread: starts them, answers the main thread's requests.
  const { clusters, pods } = workerData as { clusters: number; pods: number };
  const fakes: FakeKube[] = [];
  for (let c = 0; c < clusters; c++) fakes.push(await startFakeKube({ objects: Array.from({ length: pods }, (_, i) => pod(c, i, 'registry.example/web:1')) }));
  const reply = (m: FromFakes): void => parentPort!.postMessage(m);
  parentPort!.on('message', async (m: ToFakes) => {
    if ('put' in m) {
      for (const [c, f] of fakes.entries()) f.store.put(pod(c, 0, m.put));
      reply({ put: true });
    } else if ('watches' in m) reply({ watches: fakes.map((f) => f.openWatches().length) });
    else {
      await Promise.all(fakes.map((f) => f.close()));
      reply({ closed: true });
    }
  });
  reply({ urls: fakes.map((f) => f.url) });
} else {
  await main();
}

async function main(): Promise<void> {
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

  /** Heap used after two full collections, bytes. */
  function heapUsed(): number {
    gc!();
    gc!();
    return process.memoryUsage().heapUsed;
  }

  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

  const worker = new Worker(new URL(import.meta.url), { workerData: { clusters, pods } });
  const replies: FromFakes[] = [];
  let wake: (() => void) | undefined;
  worker.on('message', (m: FromFakes) => {
    replies.push(m);
    wake?.();
  });
  worker.on('error', (err) => {
    process.stderr.write(`fakes' thread failed: ${err.stack ?? String(err)}\n`);
    process.exit(1);
  });
  /** The next reply of the fakes' thread. */
  const next = async (): Promise<FromFakes> => {
    while (replies.length === 0) await new Promise<void>((r) => (wake = r));
    return replies.shift()!;
  };
  const ask = async (m: ToFakes): Promise<FromFakes> => {
    worker.postMessage(m);
    return next();
  };
  const { urls } = (await next()) as { urls: string[] };
  const before = heapUsed();
  const caches = urls.map((url) => new ClusterWatchCache(poolConnections(fakeKubeConfig(url)), { backoffMs: { initial: 100, max: 1000 } }));
  for (const cache of caches) cache.start();
  await Promise.all(caches.map((c) => c.synced()));
  while (((await ask({ watches: true })) as { watches: number[] }).watches.some((n) => n < 8)) await new Promise((r) => setTimeout(r, 20));
  // The lists' connections stay open while idle for undici's keep-alive timeout (4 s by default); measure once they
  // closed, as a running serve holds them.
  await new Promise((r) => setTimeout(r, 6_000));
  const held = heapUsed() - before;

  const cpu: number[] = [];
  for (let r = 1; r <= rounds; r++) {
    const image = `registry.example/web:${r + 1}`;
    const start = process.cpuUsage();
    await ask({ put: image });
    const seen = () => caches.every((cache) => cache.contents().pods.some((p) => p.info.name === 'web-0' && p.info.containers[0]?.image === image));
    while (!seen()) await new Promise((res) => setImmediate(res));
    const used = process.cpuUsage(start);
    cpu.push((used.user + used.system) / clusters);
  }

  process.stdout.write(
    `${clusters} clusters × ${pods} pods, 8 watch streams each (Node ${process.version})\n` +
      `  heap held by the caches and their streams: ${(held / 1048576).toFixed(1)} MiB — ${(held / clusters / 1024).toFixed(1)} KiB per cluster, ${(held / clusters / 8 / 1024).toFixed(1)} KiB per stream (the fakes on their own thread)\n` +
      `  CPU per watch event (a pod modified, seen by the cache; fakes included): median ${median(cpu).toFixed(0)} µs of ${rounds} rounds (${cpu.map((x) => x.toFixed(0)).join(', ')})\n`,
  );
  for (const cache of caches) cache.stop();
  await ask({ close: true });
  await worker.terminate();
}
