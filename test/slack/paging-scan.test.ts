/**
 * The paging scan (src/slack/paging.ts) over many clusters, on the real store: it runs after every poll, so what it
 * asks of the store must not grow with the fleet — the open findings of every cluster in one statement, and no write
 * for a critical group whose episode is live already. Pages as before: once per critical group of an owned cluster
 * and target, after `after`; one resolve per target when the group's findings resolve.
 */
import { afterEach, expect, it, vi } from 'vitest';
import { groupIdOf } from '../../src/findings/groups.js';
import { createLogger } from '../../src/observability/logger.js';
import { PagingScan } from '../../src/slack/paging.js';
import { openStore, type Store } from '../../src/store/index.js';
import { NoticeRepository } from '../../src/store/notices.js';
import { finding } from '../store/helpers.js';

const T = Date.UTC(2026, 10, 20, 12, 0, 0);
const MIN = 60_000;
const CLUSTERS = Array.from({ length: 50 }, (_, i) => `c${i}`);

let store: Store | undefined;
afterEach(async () => {
  await store?.close();
  store = undefined;
});

it('a scan of 50 clusters reads their open findings in one statement, writes nothing for live episodes, and pages each critical group of an owned cluster once per target', async () => {
  store = await openStore(':memory:');
  // Odd clusters have a critical group (multus) and a warning one (other); even ones warnings only.
  for (const [i, cluster] of CLUSTERS.entries()) {
    await store.findings.save(
      cluster,
      [
        finding({ id: `${cluster}-multus`, cluster, severity: i % 2 === 1 ? 'critical' : 'warning' }),
        finding({ id: `${cluster}-other`, cluster, serviceAccount: 'other', severity: 'warning' }),
      ],
      T,
    );
  }
  const notices = new NoticeRepository(store.sql);
  const now = { t: T };
  // c40…c49 belong to another replica.
  const owns = (c: string) => Number(c.slice(1)) < 40;
  const scan = new PagingScan({ store, notices, clusters: () => CLUSTERS, owns, afterMs: 10 * MIN, targets: ['pagerduty', 'webhook'], clock: () => now.t, logger: createLogger({ level: 'silent' }) });
  const lists = vi.spyOn(store.findings, 'list');
  const critical = vi.spyOn(notices, 'critical');
  const paged = async () => (await notices.livePages()).map((ep) => ep.groupId).sort();
  const criticalOwned = CLUSTERS.filter((c, i) => i % 2 === 1 && owns(c)).map((c) => groupIdOf({ cluster: c, namespace: 'kube-system', serviceAccount: 'multus' }));

  // First scan: the 20 owned critical groups start their episodes; nothing pages within `after`.
  expect(await scan.scan()).toBe(0);
  expect(lists).toHaveBeenCalledTimes(1);
  expect(critical).toHaveBeenCalledTimes(20);
  expect(await paged()).toEqual([...criticalOwned].sort());

  // After `after`: one trigger per group and target; the live episodes are read, not written.
  now.t = T + 11 * MIN;
  expect(await scan.scan()).toBe(40);
  expect(critical).toHaveBeenCalledTimes(20);
  expect(lists).toHaveBeenCalledTimes(2);
  // Paged once: nothing more on the next scan.
  expect(await scan.scan()).toBe(0);

  // c1's findings resolve: one resolve per target for its group, and its episode ends.
  await store.findings.setStatus('c1-multus', { status: 'resolved', reason: 'quiet' }, now.t);
  await store.findings.setStatus('c1-other', { status: 'resolved', reason: 'quiet' }, now.t);
  expect(await scan.scan()).toBe(2);
  expect(await paged()).toEqual(criticalOwned.slice(1).sort());
});
