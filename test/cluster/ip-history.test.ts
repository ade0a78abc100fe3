/**
 * The watch cache's pod-IP index and history (src/cluster/cache.ts `podsByIP`) with the real client-node KubeConfig
 * against the loopback fake API server: who held an IP at a given time, bounded history, and no answer (so no
 * attribution) while the cache is not fresh.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ClusterWatchCache, type WatchCacheOptions } from '../../src/cluster/cache.js';
import { KubeClusterState } from '../../src/cluster/kube.js';
import { TokenAggregator } from '../../src/findings/aggregate.js';
import { buildFindings } from '../../src/findings/build.js';
import { startFakeKube, type FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import { unauthorizedUse } from '../findings/helpers.js';

const MIN = 60_000;
const T0 = Date.parse('2026-11-20T12:00:00Z');
let fake: FakeKube | undefined;
const caches: ClusterWatchCache[] = [];
afterEach(async () => {
  for (const c of caches.splice(0)) c.stop();
  await fake?.close();
  fake = undefined;
});

/** An event clock the test moves. */
function eventClock() {
  let now = T0;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

function startCache(f: FakeKube, opts: WatchCacheOptions = {}): ClusterWatchCache {
  const c = new ClusterWatchCache(f.kubeConfig(), { backoffMs: { initial: 10, max: 50 }, ...opts });
  caches.push(c);
  c.start();
  return c;
}

const pod = (ns: string, name: string, sa: string, ip: string, start: number, o: { hostNetwork?: boolean; phase?: string } = {}) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { namespace: ns, name, uid: `uid-${name}` },
  spec: { serviceAccountName: sa, nodeName: 'node-1', ...(o.hostNetwork ? { hostNetwork: true } : {}), containers: [{ name: 'main', image: 'quay.io/keycloak/keycloak:26.0' }] },
  status: { phase: o.phase ?? 'Running', startTime: new Date(start).toISOString(), podIP: ip, podIPs: [{ ip }], hostIP: o.hostNetwork ? ip : '10.20.0.5' },
});

const names = (pods: { namespace: string; name: string }[]) => pods.map((p) => `${p.namespace}/${p.name}`);

describe('watch cache: pods by IP over time', () => {
  it('a deleted pod is found by its IP for the time it held it, not after; the IP’s next pod from its start', { timeout: 60_000 }, async () => {
    fake = await startFakeKube({ objects: [pod('keycloak', 'keycloak-0', 'keycloak', '10.1.2.3', T0 - 60 * MIN)] });
    const clock = eventClock();
    const cache = startCache(fake, { eventClock: clock.now });
    await cache.synced();
    expect(names(cache.podsByIP('10.1.2.3'))).toEqual(['keycloak/keycloak-0']);
    clock.advance(10 * MIN);
    fake.store.delete('Pod', 'keycloak', 'keycloak-0'); // held 10.1.2.3 from T0−60 min to T0+10 min
    await vi.waitFor(() => expect(cache.getPod('keycloak', 'keycloak-0')).toBeUndefined(), { timeout: 10_000, interval: 10 });
    clock.advance(5 * MIN);
    fake.store.put(pod('monitoring', 'grafana-6d9f-abcde', 'grafana', '10.1.2.3', T0 + 15 * MIN));
    await vi.waitFor(() => expect(cache.getPod('monitoring', 'grafana-6d9f-abcde')).toBeDefined(), { timeout: 10_000, interval: 10 });
    expect(names(cache.podsByIP('10.1.2.3'))).toEqual(['monitoring/grafana-6d9f-abcde']); // now
    expect(names(cache.podsByIP('10.1.2.3', { from: T0 - 5 * MIN, to: T0 }))).toEqual(['keycloak/keycloak-0']);
    expect(names(cache.podsByIP('10.1.2.3', { from: T0 + 16 * MIN, to: T0 + 17 * MIN }))).toEqual(['monitoring/grafana-6d9f-abcde']);
    expect(names(cache.podsByIP('10.1.2.3', { from: T0 + 11 * MIN, to: T0 + 14 * MIN }))).toEqual([]); // between the two
    // 401s spanning the reuse: both pods (ambiguous), never one of them alone.
    expect(names(cache.podsByIP('10.1.2.3', { from: T0, to: T0 + 20 * MIN }))).toEqual(['keycloak/keycloak-0', 'monitoring/grafana-6d9f-abcde']);
    expect(cache.getPod('keycloak', 'keycloak-0')).toBeUndefined(); // gone from the pods, only in the IP history
  });

  it('a pod that started before its IP was freed holds it from the watch event that gave it the IP, not from its start', { timeout: 60_000 }, async () => {
    fake = await startFakeKube({ objects: [pod('keycloak', 'keycloak-0', 'keycloak', '10.1.2.3', T0 - 60 * MIN)] });
    const clock = eventClock();
    const cache = startCache(fake, { eventClock: clock.now });
    await cache.synced();
    await vi.waitFor(() => expect(fake!.openWatches().length).toBe(8), { timeout: 10_000, interval: 10 });
    // grafana starts at T0−2 min, Pending without an IP; keycloak-0 goes at T0+5 min and its IP goes to grafana a minute later.
    const pending = pod('monitoring', 'grafana-6d9f-abcde', 'grafana', '10.1.2.3', T0 - 2 * MIN);
    const status = pending.status as Record<string, unknown>;
    delete status['podIP'];
    delete status['podIPs'];
    status['phase'] = 'Pending';
    fake.store.put(pending);
    await vi.waitFor(() => expect(cache.getPod('monitoring', 'grafana-6d9f-abcde')).toBeDefined(), { timeout: 10_000, interval: 10 });
    clock.advance(5 * MIN);
    fake.store.delete('Pod', 'keycloak', 'keycloak-0');
    await vi.waitFor(() => expect(cache.getPod('keycloak', 'keycloak-0')).toBeUndefined(), { timeout: 10_000, interval: 10 });
    clock.advance(MIN);
    fake.store.update('Pod', 'monitoring', 'grafana-6d9f-abcde', (o) => {
      Object.assign(o['status'] as object, { phase: 'Running', podIP: '10.1.2.3', podIPs: [{ ip: '10.1.2.3' }] });
    });
    await vi.waitFor(() => expect(cache.getPod('monitoring', 'grafana-6d9f-abcde')?.ips).toEqual(['10.1.2.3']), { timeout: 10_000, interval: 10 });
    // 401s at T0−1 min to T0: after grafana's start, but keycloak-0 alone had the IP then.
    expect(names(cache.podsByIP('10.1.2.3', { from: T0 - MIN, to: T0 }))).toEqual(['keycloak/keycloak-0']);
    expect(names(cache.podsByIP('10.1.2.3', { from: T0 + 7 * MIN, to: T0 + 8 * MIN }))).toEqual(['monitoring/grafana-6d9f-abcde']);
  });

  it('a Succeeded pod frees its IP (status.podIP stays on the object); hostNetwork pods are indexed by the node IP', { timeout: 60_000 }, async () => {
    fake = await startFakeKube({
      objects: [pod('ops', 'backup-29000', 'backup', '10.1.9.9', T0 - 30 * MIN), pod('kube-system', 'node-agent-x1', 'node-agent', '10.20.0.5', T0 - 60 * MIN, { hostNetwork: true })],
    });
    const clock = eventClock();
    const cache = startCache(fake, { eventClock: clock.now });
    await cache.synced();
    expect(names(cache.podsByIP('10.20.0.5'))).toEqual(['kube-system/node-agent-x1']);
    expect(cache.podsByIP('10.20.0.5')[0]!.hostNetwork).toBe(true);
    clock.advance(MIN);
    fake.store.update('Pod', 'ops', 'backup-29000', (o) => {
      (o['status'] as Record<string, unknown>)['phase'] = 'Succeeded';
    });
    await vi.waitFor(() => expect(cache.getPod('ops', 'backup-29000')?.phase).toBe('Succeeded'), { timeout: 10_000, interval: 10 });
    expect(cache.podsByIP('10.1.9.9')).toEqual([]);
    expect(names(cache.podsByIP('10.1.9.9', { from: T0 - MIN, to: T0 }))).toEqual(['ops/backup-29000']);
    expect(cache.podsByIP('10.1.9.9', { from: T0 - MIN, to: T0 })[0]!.phase).toBe('Running'); // as it was while it held the IP
  });

  it('several hostNetwork pods share their node IP: all are holders, and each leaves the others holding it', { timeout: 60_000 }, async () => {
    const agent = (name: string, start: number) => pod('kube-system', name, 'node-agent', '10.20.0.5', start, { hostNetwork: true });
    fake = await startFakeKube({ objects: [agent('node-agent-x1', T0 - 60 * MIN), agent('log-shipper-x1', T0 - 50 * MIN)] });
    const clock = eventClock();
    const cache = startCache(fake, { eventClock: clock.now });
    await cache.synced();
    expect(names(cache.podsByIP('10.20.0.5'))).toEqual(['kube-system/log-shipper-x1', 'kube-system/node-agent-x1']);
    clock.advance(MIN);
    fake.store.put(agent('csi-node-x1', T0 + MIN));
    await vi.waitFor(() => expect(cache.podsByIP('10.20.0.5').length).toBe(3), { timeout: 10_000, interval: 10 });
    clock.advance(MIN);
    fake.store.delete('Pod', 'kube-system', 'node-agent-x1');
    await vi.waitFor(() => expect(names(cache.podsByIP('10.20.0.5'))).toEqual(['kube-system/csi-node-x1', 'kube-system/log-shipper-x1']), { timeout: 10_000, interval: 10 });
    clock.advance(MIN);
    fake.store.delete('Pod', 'kube-system', 'csi-node-x1');
    await vi.waitFor(() => expect(names(cache.podsByIP('10.20.0.5'))).toEqual(['kube-system/log-shipper-x1']), { timeout: 10_000, interval: 10 });
    clock.advance(MIN);
    fake.store.delete('Pod', 'kube-system', 'log-shipper-x1');
    await vi.waitFor(() => expect(cache.podsByIP('10.20.0.5')).toEqual([]), { timeout: 10_000, interval: 10 });
    // The history keeps every hold: at T0 two pods held the IP; from T0 + 1 min, three.
    expect(names(cache.podsByIP('10.20.0.5', { from: T0, to: T0 }))).toEqual(['kube-system/log-shipper-x1', 'kube-system/node-agent-x1']);
    expect(names(cache.podsByIP('10.20.0.5', { from: T0 + MIN, to: T0 + MIN }))).toEqual(['kube-system/csi-node-x1', 'kube-system/log-shipper-x1', 'kube-system/node-agent-x1']);
    expect(names(cache.podsByIP('10.20.0.5', { from: T0 + 3 * MIN + 1, to: T0 + 4 * MIN }))).toEqual(['kube-system/log-shipper-x1']);
  });

  it('a pod deleted while the watch was down (410, relist) ends its hold when the relist misses it, not silently', { timeout: 60_000 }, async () => {
    fake = await startFakeKube({ objects: [pod('keycloak', 'keycloak-0', 'keycloak', '10.1.2.3', T0 - 60 * MIN)] });
    const clock = eventClock();
    const cache = startCache(fake, { eventClock: clock.now });
    await cache.synced();
    await vi.waitFor(() => expect(fake!.openWatches().length).toBe(8), { timeout: 10_000, interval: 10 });
    const podLists = () => fake!.requestsMatching({ verb: 'list', resource: 'pods' }).length;
    fake.delay(200, { verb: 'watch' });
    fake.dropWatches();
    clock.advance(5 * MIN);
    fake.store.delete('Pod', 'keycloak', 'keycloak-0');
    fake.compactHistory(); // the deletion is no longer in the watch history: the resume gets 410 and relists
    fake.clearFaults();
    await vi.waitFor(() => expect(podLists()).toBe(2), { timeout: 10_000, interval: 10 });
    await vi.waitFor(() => expect(cache.getPod('keycloak', 'keycloak-0')).toBeUndefined(), { timeout: 10_000, interval: 10 });
    expect(cache.podsByIP('10.1.2.3')).toEqual([]);
    expect(names(cache.podsByIP('10.1.2.3', { from: T0 - MIN, to: T0 }))).toEqual(['keycloak/keycloak-0']);
    expect(cache.podsByIP('10.1.2.3', { from: T0 + 6 * MIN, to: T0 + 7 * MIN })).toEqual([]);
  });

  it('the history is bounded: by count (oldest first) and by ipHistoryMs', { timeout: 60_000 }, async () => {
    const ips = ['10.1.0.1', '10.1.0.2', '10.1.0.3'];
    fake = await startFakeKube({ objects: ips.map((ip, i) => pod('apps', `app-${i}`, 'app', ip, T0 - 60 * MIN)) });
    const clock = eventClock();
    const cache = startCache(fake, { eventClock: clock.now, maxIpHistory: 2, ipHistoryMs: 30 * MIN });
    await cache.synced();
    for (let i = 0; i < 3; i++) {
      clock.advance(MIN);
      fake.store.delete('Pod', 'apps', `app-${i}`);
      await vi.waitFor(() => expect(cache.getPod('apps', `app-${i}`)).toBeUndefined(), { timeout: 10_000, interval: 10 });
    }
    expect(cache.ipHistorySize).toBe(2);
    const during = { from: T0 - 10 * MIN, to: T0 };
    expect(ips.map((ip) => names(cache.podsByIP(ip, during)))).toEqual([[], ['apps/app-1'], ['apps/app-2']]);
    clock.advance(31 * MIN); // app-1 ended at T0+2 min, app-2 at T0+3 min: both older than 30 min now
    expect(ips.map((ip) => names(cache.podsByIP(ip, during)))).toEqual([[], [], []]);
    expect(cache.ipHistorySize).toBe(0);
  });

  it('while the cache is not synced, podsByIP answers undefined and a Java/17 401 from a pod IP stays unattributed', { timeout: 60_000 }, async () => {
    fake = await startFakeKube({ objects: [pod('keycloak', 'keycloak-0', 'keycloak', '10.1.2.3', T0 - 60 * MIN)] });
    fake.delay(1500, { verb: 'list', resource: 'pods' });
    const cache = startCache(fake);
    const kube = new KubeClusterState(fake.kubeConfig(), { cache, waitForSyncMs: 0 });
    const build = async () => {
      const agg = new TokenAggregator({ cluster: 'prod', maxTokenAge: { mode: 'eks' } });
      for (let i = 0; i < 3; i++) agg.add(unauthorizedUse({ time: T0 - 10 * MIN + i * MIN, ip: '10.1.2.3', ua: 'Java/17', auditID: `u-${i}` }));
      return (await buildFindings(agg.records(), { now: T0, state: kube })).filter((f) => f.kind === 'unauthorized').map((f) => `${f.namespace}/${f.serviceAccount}`);
    };
    expect(cache.freshness().ok).toBe(false);
    expect(await kube.podsByIP('10.1.2.3', { from: T0 - 10 * MIN, to: T0 })).toBeUndefined();
    expect(await build()).toEqual(['(unattributed)/(unattributed)']);
    await cache.synced();
    expect(await build()).toEqual(['keycloak/keycloak']); // the same input once the cache is fresh
    cache.stop();
    expect(await kube.podsByIP('10.1.2.3')).toBeUndefined(); // stopped: not fresh
    expect(await build()).toEqual(['(unattributed)/(unattributed)']);
  });
});
