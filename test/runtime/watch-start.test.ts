/**
 * serve starts the watch caches of many clusters a few at a time (each takes its turn until it has synced, at most a
 * bounded time), so a large fleet does not send every first list at once, and a hung cluster does not hold up the
 * others. Real serve and client-node against loopback fake API servers and a black hole.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { composeServe } from '../../src/runtime/compose.js';
import type { ServeHandle } from '../../src/runtime/serve-options.js';
import { startFakeKube, type FakeKube } from '../../src/sandbox/fakes/kubernetes.js';

const kubeconfig = (dir: string, name: string, server: string): string => {
  const path = join(dir, `${name}.yaml`);
  writeFileSync(
    path,
    `apiVersion: v1
kind: Config
clusters: [{ name: ${name}, cluster: { server: '${server}', insecure-skip-tls-verify: true } }]
users: [{ name: u, user: { token: t } }]
contexts: [{ name: ${name}, context: { cluster: ${name}, user: u } }]
current-context: ${name}
`,
  );
  return path;
};

let cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

describe('watch caches start a few at a time', () => {
  it('one at a time: the next starts once the previous has synced; a hung cluster only holds its turn', { timeout: 120_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-watch-start-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const a: FakeKube = await startFakeKube({ objects: [] });
    const b: FakeKube = await startFakeKube({ objects: [] });
    cleanup.push(() => a.close(), () => b.close());
    const sockets = new Set<Socket>();
    const hole = createServer((s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((r) => hole.listen(0, '127.0.0.1', r));
    cleanup.push(() => {
      for (const s of sockets) s.destroy();
      hole.close();
    });
    writeFileSync(join(dir, 'audit.log'), '');
    const cluster = (name: string, server: string) => ({
      name,
      audit: { file: { path: join(dir, 'audit.log') } },
      kubernetes: { kubeconfig: kubeconfig(dir, name, server) },
      schedule: '0 0 1 1 *',
    });
    const config = parseConfig(
      {
        store: { path: join(dir, 'tw.db') },
        http: { host: '127.0.0.1', port: 0 },
        log: { level: 'silent' },
        clusters: [cluster('hung', `http://127.0.0.1:${(hole.address() as AddressInfo).port}`), cluster('a', a.url), cluster('b', b.url)],
      },
      {},
    );
    let serve: ServeHandle | undefined;
    cleanup.push(() => serve?.stop());
    // Sampled while the caches start: b's cache has listed only once a's has synced (one turn at a time). A cache's
    // lists are cluster-wide (no namespace); the first polls' own reads (probe ConfigMaps, /metrics) are not.
    const cacheLists = (k: FakeKube) => k.requests.filter((r) => r.verb === 'list' && r.namespace === undefined && r.resource !== 'configmaps').length;
    let violations = 0;
    let sampled = 0;
    const sampler = setInterval(() => {
      const cacheA = serve?.context.clusters.get('a')?.watchCache;
      if (!cacheA) return;
      sampled++;
      if (cacheLists(b) > 0 && !cacheA.freshness().ok) violations++;
    }, 1);
    cleanup.push(() => clearInterval(sampler));
    serve = await composeServe(config, { logger: createLogger({ level: 'silent' }), metrics: new Metrics(), jitterMs: 0, watchStart: { concurrency: 1, turnMs: 15_000 } });
    const cache = (name: string) => serve!.context.clusters.get(name)!.watchCache!;
    await cache('a').synced();
    await cache('b').synced();
    expect(cache('hung').freshness()).toMatchObject({ ok: false, state: 'syncing' });
    expect(cache('a').freshness()).toEqual({ ok: true });
    expect(sampled).toBeGreaterThan(0);
    expect(violations).toBe(0);
    expect(cacheLists(a)).toBeGreaterThanOrEqual(8);
    await vi.waitFor(() => expect(b.openWatches().length).toBe(8), { timeout: 10_000, interval: 10 });
  });
});
