/**
 * `/tokens scan` across replicas (src/slack/scan-requests.ts) on every store backend: a request left for another
 * replica is polled by the cluster's owner at its next pick-up tick, exactly once, and a tick with nothing pending
 * costs one store query whatever the number of clusters (the tick runs every 2 s).
 */
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import type { Ownership } from '../../src/core/ownership.js';
import { createLogger } from '../../src/observability/logger.js';
import type { SlackCluster } from '../../src/slack/context.js';
import { ScanRequests } from '../../src/slack/scan-requests.js';
import type { Store } from '../../src/store/types.js';
import { storeBackends } from '../store/backends.js';

const T0 = Date.UTC(2026, 11, 7, 12, 0, 0);
const N = 1000;

function fleet(n: number): Map<string, SlackCluster> {
  return new Map(Array.from({ length: n }, (_, i) => [`c${i}`, {} as SlackCluster]));
}

/** A replica over `store` owning the clusters `owned` accepts; `polled` records its polls. */
function replica(store: Store, clusters: Map<string, SlackCluster>, owned: (c: string) => boolean) {
  const polled: string[] = [];
  const ownership: Ownership = { owns: owned, ownsAny: () => true };
  const scans = new ScanRequests({
    store,
    clusters,
    ownership,
    clock: () => T0,
    logger: createLogger({ level: 'silent' }),
    runNow: (c) => {
      polled.push(c);
      return 'started';
    },
  });
  return { scans, polled };
}

describe.each(storeBackends())('scan requests across replicas (%s)', (_name, backend) => {
  afterEach(backend.cleanup);
  afterAll(backend.dispose);

  it('a pick-up tick with nothing pending reads the store once and takes nothing, at 1,000 clusters', async () => {
    const store = await backend.open();
    const { scans, polled } = replica(store, fleet(N), () => true);
    const pending = vi.spyOn(store.scanRequests, 'pending');
    const take = vi.spyOn(store.scanRequests, 'take');
    await scans.pickUp();
    expect(pending).toHaveBeenCalledTimes(1);
    expect(take).not.toHaveBeenCalled();
    expect(polled).toEqual([]);
  });

  it("the owner polls each cluster requested on another replica once; others' requests stay for their owner", async () => {
    const a = await backend.openShared();
    const b = await backend.peer();
    const clusters = fleet(N);
    // Replica A owns the even clusters, B the odd ones.
    const ra = replica(a, clusters, (c) => Number(c.slice(1)) % 2 === 0);
    const rb = replica(b, clusters, (c) => Number(c.slice(1)) % 2 === 1);
    // Requests left (by a replica that does not own them) for c1 and c998, and one for a cluster nobody here watches.
    expect(await rb.scans.runNow('c998')).toBe('started');
    expect(await ra.scans.runNow('c1')).toBe('started');
    await a.scanRequests.request('gone', T0);
    expect(ra.polled).toEqual([]);
    expect(rb.polled).toEqual([]);

    const take = vi.spyOn(a.scanRequests, 'take');
    await ra.scans.pickUp();
    expect(ra.polled).toEqual(['c998']);
    expect(take).toHaveBeenCalledTimes(1);
    await rb.scans.pickUp();
    expect(rb.polled).toEqual(['c1']);
    // Taken once: later ticks poll nothing more; the unwatched cluster's request is left in the store.
    await ra.scans.pickUp();
    await rb.scans.pickUp();
    expect(ra.polled).toEqual(['c998']);
    expect(rb.polled).toEqual(['c1']);
    expect(await a.scanRequests.pending()).toEqual(['gone']);
  });

  it('lists pending clusters oldest request first; a second request keeps the first time', async () => {
    const store = await backend.open();
    await store.scanRequests.request('late', T0 + 2);
    await store.scanRequests.request('early', T0);
    await store.scanRequests.request('late', T0 - 5);
    expect(await store.scanRequests.pending()).toEqual(['early', 'late']);
  });
});
