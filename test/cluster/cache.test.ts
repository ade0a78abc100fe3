/**
 * The watch cache (src/cluster/cache.ts) with the real client-node KubeConfig and undici against the loopback fake API
 * server, which speaks list + watch as kube-apiserver does (chunked JSON lines, bookmarks, 410 Expired).
 */
import { readFile } from 'node:fs/promises';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createTlsServer } from 'node:tls';
import { KubeConfig } from '@kubernetes/client-node';
import pLimit from 'p-limit';
import fc from 'fast-check';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ClusterWatchCache, type WatchCacheOptions } from '../../src/cluster/cache.js';
import { KubeClusterState } from '../../src/cluster/kube.js';
import { poolConnections } from '../../src/cluster/pool.js';
import { startFakeKube, type FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import { loopbackCert } from '../../src/sandbox/fakes/tls.js';
import { EXPECTED_MULTUS, FIXTURE } from './fixture.js';

const SUBJECTS: [string, string][] = [
  ['kube-system', 'multus'],
  ['kube-system', 'aws-node'],
  ['monitoring', 'metrics-server'],
  ['ops', 'backup'],
  ['logging', 'fluentd'],
  ['kube-system', 'nobody'],
];
/** Fast retries for tests; the defaults are 1 s doubling to 30 s. */
const FAST: WatchCacheOptions = { backoffMs: { initial: 10, max: 50 } };

let items: { kind: string; metadata: { namespace: string; name: string } }[];
let fake: FakeKube | undefined;
const caches: ClusterWatchCache[] = [];

beforeAll(async () => {
  items = (JSON.parse(await readFile(FIXTURE, 'utf8')) as { items: typeof items }).items;
});
afterEach(async () => {
  for (const c of caches.splice(0)) c.stop();
  await fake?.close();
  fake = undefined;
});

function startCache(f: FakeKube, opts: WatchCacheOptions = {}): ClusterWatchCache {
  const c = new ClusterWatchCache(f.kubeConfig(), { ...FAST, ...opts });
  caches.push(c);
  c.start();
  return c;
}

/** Resolves when every resource's watch stream is open on the fake (8: pods, serviceaccounts, 6 owner kinds). */
async function watching(f: FakeKube, n = 8): Promise<void> {
  await vi.waitFor(() => expect(f.openWatches().length).toBe(n), { timeout: 10_000, interval: 10 });
}

const pod = (ns: string, name: string, sa: string, owner?: { kind: string; name: string; apiVersion?: string }, image = 'registry.example/app:1') => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: {
    namespace: ns,
    name,
    uid: `uid-${ns}-${name}`,
    labels: { app: name },
    ...(owner ? { ownerReferences: [{ apiVersion: owner.apiVersion ?? (owner.kind === 'Job' ? 'batch/v1' : 'apps/v1'), kind: owner.kind, name: owner.name, controller: true, uid: 'x' }] } : {}),
  },
  spec: {
    serviceAccountName: sa,
    nodeName: 'node-1',
    containers: [{ name: 'main', image, args: ['--flag'] }],
    volumes: [{ name: 'kube-api-access-x', projected: { sources: [{ serviceAccountToken: { path: 'token' } }] } }],
  },
  status: { phase: 'Running', startTime: '2026-11-01T10:00:00Z', podIP: '10.0.0.9' },
});

const workload = (kind: string, ns: string, name: string, owner?: { kind: string; name: string }) => ({
  apiVersion: kind === 'Job' || kind === 'CronJob' ? 'batch/v1' : 'apps/v1',
  kind,
  metadata: {
    namespace: ns,
    name,
    uid: `uid-${kind}-${name}`,
    ...(owner ? { ownerReferences: [{ apiVersion: owner.kind === 'CronJob' ? 'batch/v1' : 'apps/v1', kind: owner.kind, name: owner.name, controller: true, uid: 'y' }] } : {}),
  },
  spec:
    kind === 'CronJob'
      ? { schedule: '* * * * *', jobTemplate: { spec: { template: { spec: { serviceAccountName: 'sa-a', containers: [{ name: 'c', image: 'cron:1' }] } } } } }
      : { replicas: 2, strategy: kind === 'Deployment' ? { type: 'RollingUpdate' } : undefined, template: { spec: { serviceAccountName: 'sa-a', containers: [{ name: 'c', image: `${kind.toLowerCase()}:1`, args: ['-v'] }] } } },
  status: { desiredNumberScheduled: 3 },
});

describe('ClusterWatchCache', () => {
  it('lists then watches pods, ServiceAccounts and the six owner kinds, cluster-wide, with bookmarks', { timeout: 60_000 }, async () => {
    fake = await startFakeKube({ objects: items });
    const cache = startCache(fake);
    await cache.synced();
    await watching(fake);
    const watches = fake.requestsMatching({ verb: 'watch' });
    expect(watches.map((r) => `${r.group}/${r.resource}`).sort()).toEqual(
      ['/pods', '/serviceaccounts', 'apps/daemonsets', 'apps/deployments', 'apps/replicasets', 'apps/statefulsets', 'batch/cronjobs', 'batch/jobs'].sort(),
    );
    for (const w of watches) {
      expect(w.namespace).toBeUndefined();
      expect(w.query['allowWatchBookmarks']).toBe('true');
      expect(w.query['resourceVersion']).toMatch(/^\d+$/);
      expect(Number(w.query['timeoutSeconds'])).toBeGreaterThanOrEqual(1800);
      expect(Number(w.query['timeoutSeconds'])).toBeLessThan(3600);
    }
    expect(fake.requestsMatching({ verb: 'list' }).every((r) => r.query['limit'] === '500')).toBe(true);
  });

  it('gives the same SubjectState and pods as direct reads on the shared fixture, and a steady-state poll makes 0 requests', { timeout: 60_000 }, async () => {
    fake = await startFakeKube({ objects: items });
    const cache = startCache(fake);
    await cache.synced();
    await watching(fake);
    const cached = new KubeClusterState(fake.kubeConfig(), { cache });
    const direct = new KubeClusterState(fake.kubeConfig());
    const before = fake.requests.length;
    const fromCache = [];
    for (const [ns, name] of SUBJECTS) fromCache.push(await cached.describeServiceAccount(ns, name));
    const pods = items.filter((i) => i.kind === 'Pod');
    const podsFromCache = [];
    for (const p of pods) podsFromCache.push(await cached.getPod(p.metadata.namespace, p.metadata.name));
    expect(await cached.getPod('kube-system', 'gone')).toBeUndefined();
    expect(await cached.legacySecretOwner('kube-system', 'multus-token-4xv9q')).toEqual({
      serviceAccount: 'multus',
      via: 'ServiceAccount kube-system/multus lists Secret multus-token-4xv9q in .secrets[]',
    });
    expect(fake.requests.length - before).toBe(0); // no request at all while the cache is fresh
    expect(cached.readSource()).toEqual({ source: 'cache' });
    expect(fromCache[0]).toEqual({ ...EXPECTED_MULTUS, legacySecrets: [] });
    for (const [i, [ns, name]] of SUBJECTS.entries()) expect(fromCache[i], `${ns}/${name}`).toEqual(await direct.describeServiceAccount(ns, name));
    for (const [i, p] of pods.entries()) expect(podsFromCache[i]).toEqual(await direct.getPod(p.metadata.namespace, p.metadata.name));
  });

  it('converges to the direct reads over random pod and owner sets (property)', { timeout: 120_000 }, async () => {
    const ownerKind = fc.constantFrom('Deployment', 'DaemonSet', 'StatefulSet', 'CronJob', 'bare', 'orphan-rs', 'kruise');
    const podSpec = fc.record({ ns: fc.constantFrom('a', 'b'), sa: fc.constantFrom('sa-a', 'sa-b', 'default'), owner: ownerKind, w: fc.integer({ min: 0, max: 2 }) });
    await fc.assert(
      fc.asyncProperty(fc.array(podSpec, { minLength: 1, maxLength: 12 }), async (specs) => {
        const objects: object[] = [
          { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { namespace: 'a', name: 'sa-a', uid: 'u1', annotations: { k: 'v' } } },
          { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { namespace: 'b', name: 'sa-b', uid: 'u2' }, secrets: [{ name: 'sa-b-token-abcde' }] },
        ];
        const seen = new Set<string>();
        const add = (o: { kind: string; metadata: { namespace: string; name: string } }) => {
          const k = `${o.kind}/${o.metadata.namespace}/${o.metadata.name}`;
          if (seen.has(k)) return;
          objects.push(o);
          seen.add(k);
        };
        specs.forEach((s, i) => {
          const w = `w${s.w}`;
          switch (s.owner) {
            case 'Deployment':
              add(workload('Deployment', s.ns, w));
              add(workload('ReplicaSet', s.ns, `${w}-rs`, { kind: 'Deployment', name: w }));
              add(pod(s.ns, `p${i}`, s.sa, { kind: 'ReplicaSet', name: `${w}-rs` }));
              break;
            case 'CronJob':
              add(workload('CronJob', s.ns, w));
              add(workload('Job', s.ns, `${w}-1`, { kind: 'CronJob', name: w }));
              add(pod(s.ns, `p${i}`, s.sa, { kind: 'Job', name: `${w}-1` }));
              break;
            case 'bare':
              add(pod(s.ns, `p${i}`, s.sa, undefined, `bare:${i}`));
              break;
            case 'orphan-rs': // a ReplicaSet whose Deployment is gone
              add(workload('ReplicaSet', s.ns, `${w}-orphan`, { kind: 'Deployment', name: `${w}-gone` }));
              add(pod(s.ns, `p${i}`, s.sa, { kind: 'ReplicaSet', name: `${w}-orphan` }));
              break;
            case 'kruise': // a custom resource reusing a built-in kind name: not read
              add(pod(s.ns, `p${i}`, s.sa, { kind: 'StatefulSet', name: w, apiVersion: 'apps.kruise.io/v1beta1' }));
              break;
            default:
              add(workload(s.owner, s.ns, `${s.owner.toLowerCase()}-${w}`));
              add(pod(s.ns, `p${i}`, s.sa, { kind: s.owner, name: `${s.owner.toLowerCase()}-${w}` }));
          }
        });
        const f = await startFakeKube({ objects });
        const cache = new ClusterWatchCache(f.kubeConfig(), FAST);
        try {
          cache.start();
          await cache.synced();
          const cached = new KubeClusterState(f.kubeConfig(), { cache });
          const direct = new KubeClusterState(f.kubeConfig());
          for (const ns of ['a', 'b']) {
            for (const sa of ['sa-a', 'sa-b', 'default']) {
              expect(await cached.describeServiceAccount(ns, sa)).toEqual(await direct.describeServiceAccount(ns, sa));
            }
          }
          for (const [i, s] of specs.entries()) expect(await cached.getPod(s.ns, `p${i}`)).toEqual(await direct.getPod(s.ns, `p${i}`));
          expect(cached.readSource()).toEqual({ source: 'cache' });
        } finally {
          cache.stop();
          await f.close();
        }
      }),
      { numRuns: 8 },
    );
  });

  it('sees a pod created and one deleted between polls, without a request of its own', { timeout: 60_000 }, async () => {
    fake = await startFakeKube({ objects: items });
    const cache = startCache(fake);
    await cache.synced();
    await watching(fake);
    const kube = new KubeClusterState(fake.kubeConfig(), { cache });
    const names = async () => (await kube.describeServiceAccount('kube-system', 'multus')).pods.map((p) => p.name);
    const initial = await names();
    expect(initial.length).toBeGreaterThan(0);
    const requests = fake.requests.length;
    fake.store.put({ ...pod('kube-system', 'kube-multus-ds-new01', 'multus', { kind: 'DaemonSet', name: 'kube-multus-ds' }) });
    fake.store.delete('Pod', 'kube-system', initial[0]!);
    await vi.waitFor(async () => expect(await names()).toEqual([...initial.slice(1), 'kube-multus-ds-new01'].sort()), { timeout: 10_000, interval: 10 });
    const added = (await kube.describeServiceAccount('kube-system', 'multus')).pods.find((p) => p.name === 'kube-multus-ds-new01');
    expect(added?.ownerChain).toEqual([{ kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds' }]);
    expect(await kube.getPod('kube-system', initial[0]!)).toBeUndefined();
    expect(fake.requests.length).toBe(requests);
  });

  it('410 Gone on resuming a watch → relists and replaces the cache (objects gone meanwhile are dropped)', { timeout: 60_000 }, async () => {
    fake = await startFakeKube({ objects: items });
    const events: string[] = [];
    const cache = startCache(fake, { onEvent: (e) => events.push(`${e.kind} ${e.resource ?? ''}`) });
    await cache.synced();
    await watching(fake);
    const kube = new KubeClusterState(fake.kubeConfig(), { cache });
    const podLists = () => fake!.requestsMatching({ verb: 'list', resource: 'pods' }).length;
    expect(podLists()).toBe(1);
    // The connections go down; meanwhile the history expires and the cluster changes.
    fake.delay(200, { verb: 'watch' });
    fake.dropWatches();
    const victim = (await kube.describeServiceAccount('kube-system', 'multus')).pods[0]!.name;
    fake.store.delete('Pod', 'kube-system', victim);
    fake.store.put(pod('kube-system', 'kube-multus-ds-after', 'multus', { kind: 'DaemonSet', name: 'kube-multus-ds' }));
    fake.compactHistory(); // the changes above are no longer in the history: resuming from before them is "too old"
    fake.clearFaults();
    await vi.waitFor(() => expect(podLists()).toBe(2), { timeout: 10_000, interval: 10 });
    await watching(fake);
    await vi.waitFor(() => expect(cache.freshness()).toEqual({ ok: true }), { timeout: 10_000, interval: 10 });
    const resumed = fake.requestsMatching({ verb: 'watch', resource: 'pods' });
    expect(resumed.length).toBeGreaterThanOrEqual(3); // first watch, the resume answered 410, the one after the relist
    expect(events).toContain('relist pods');
    const direct = new KubeClusterState(fake.kubeConfig());
    expect(await kube.describeServiceAccount('kube-system', 'multus')).toEqual(await direct.describeServiceAccount('kube-system', 'multus'));
    expect(await kube.getPod('kube-system', victim)).toBeUndefined();
  });

  it.each([
    ['answers 410 even right after a relist', { code: 410, body: { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Expired', code: 410, message: 'too old resource version' } }, 'list'],
    ['ends at once without an event (200, empty)', { code: 200 }, 'watch'],
  ] as const)('a pods watch that %s is retried with backoff, not in a tight loop', { timeout: 60_000 }, async (_what, answer, verb) => {
    fake = await startFakeKube({ objects: items });
    // A server whose pods watch never works (a broken watch cache behind a proxy).
    fake.addReactor((req) => (req.verb === 'watch' && req.resource === 'pods' ? answer : undefined));
    startCache(fake, { backoffMs: { initial: 500, max: 500 } });
    const count = () => fake!.requestsMatching({ verb, resource: 'pods' }).length;
    await vi.waitFor(() => expect(count()).toBeGreaterThanOrEqual(2), { timeout: 20_000, interval: 10 });
    const before = count();
    await new Promise((r) => setTimeout(r, 2_000));
    // 250–500 ms between tries: at most 8 more in 2 s (a slower machine makes fewer). Without the backoff, hundreds.
    expect(count() - before).toBeLessThanOrEqual(9);
    // The other resources are not held back.
    expect(fake.openWatches().filter((w) => w.resource !== 'pods').length).toBe(7);
  });

  it('a dropped watch connection is reopened from its resourceVersion (no relist) and changes keep arriving', { timeout: 60_000 }, async () => {
    fake = await startFakeKube({ objects: items });
    const cache = startCache(fake);
    await cache.synced();
    await watching(fake);
    const lists = fake.requestsMatching({ verb: 'list' }).length;
    const firstPodWatch = fake.requestsMatching({ verb: 'watch', resource: 'pods' })[0]!;
    expect(fake.dropWatches()).toBe(8);
    fake.store.put(pod('ops', 'late-pod', 'backup'));
    await watching(fake);
    const kube = new KubeClusterState(fake.kubeConfig(), { cache });
    await vi.waitFor(async () => expect((await kube.getPod('ops', 'late-pod'))?.serviceAccount).toBe('backup'), { timeout: 10_000, interval: 10 });
    const again = fake.requestsMatching({ verb: 'watch', resource: 'pods' })[1]!;
    expect(Number(again.query['resourceVersion'])).toBeGreaterThanOrEqual(Number(firstPodWatch.query['resourceVersion']));
    expect(fake.requestsMatching({ verb: 'list' }).length).toBe(lists);
  });

  it('a watch quiet for idleTimeoutMs is reopened from its resourceVersion; bookmarks keep it open', { timeout: 60_000 }, async () => {
    fake = await startFakeKube({ objects: items });
    const cache = startCache(fake, { idleTimeoutMs: 150 });
    await cache.synced();
    const podWatches = () => fake!.requestsMatching({ verb: 'watch', resource: 'pods' });
    await vi.waitFor(() => expect(podWatches().length).toBeGreaterThanOrEqual(3), { timeout: 10_000, interval: 10 });
    expect(new Set(podWatches().map((r) => r.query['resourceVersion'])).size).toBe(1); // same rv: nothing happened
    expect(fake.requestsMatching({ verb: 'list' }).length).toBe(8); // no relist
    expect(cache.freshness()).toEqual({ ok: true });

    const chatty = await startFakeKube({ objects: items, bookmarkIntervalMs: 20 });
    try {
      const kept = new ClusterWatchCache(chatty.kubeConfig(), { ...FAST, idleTimeoutMs: 1500 });
      caches.push(kept);
      kept.start();
      await kept.synced();
      await watching(chatty);
      const opened = chatty.requestsMatching({ verb: 'watch' }).length;
      await new Promise((r) => setTimeout(r, 3000)); // two idle timeouts, bridged by bookmarks 75 times as frequent
      expect(chatty.requestsMatching({ verb: 'watch' }).length).toBe(opened);
    } finally {
      await chatty.close();
    }
  });

  it('a watch that gets no answer (black-holed API server) counts as a failure with the reason', { timeout: 60_000 }, async () => {
    fake = await startFakeKube({ objects: items });
    fake.delay(60_000, { verb: 'watch', resource: 'pods' });
    const cache = startCache(fake, { listTimeoutMs: 100, maxStaleMs: 0 });
    await cache.synced();
    await vi.waitFor(() => expect(cache.freshness()).toMatchObject({ ok: false, state: 'broken', reason: expect.stringMatching(/^watch of pods down for \d+ s \(no answer to watch pods within 100 ms\)$/) }), {
      timeout: 10_000,
      interval: 10,
    });
  });

  it('watches namespaces only when routing rules name namespace labels, keeping only those keys; direct reads as fallback', { timeout: 60_000 }, async () => {
    const ns = (name: string, labels: Record<string, string>) => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } });
    fake = await startFakeKube({ objects: [...items, ns('net', { team: 'network', 'kubernetes.io/metadata.name': 'net' }), ns('ops', {})] });
    const metaKeys = { labels: [], annotations: [], namespaceLabels: ['team'] };
    const cache = startCache(fake, { metaKeys });
    await cache.synced();
    await watching(fake, 9);
    expect(cache.watchedResources).toContain('namespaces');
    expect(fake.requestsMatching({ verb: 'watch', resource: 'namespaces' })[0]?.query['allowWatchBookmarks']).toBe('true');
    expect(cache.getNamespaceLabels('net')).toEqual({ team: 'network' });
    expect(cache.getNamespaceLabels('ops')).toEqual({});
    expect(cache.getNamespaceLabels('nope')).toBeUndefined();
    fake.store.update('Namespace', undefined, 'ops', (o) => {
      (o['metadata'] as { labels: Record<string, string> }).labels = { team: 'ops' };
    });
    await vi.waitFor(() => expect(cache.getNamespaceLabels('ops')).toEqual({ team: 'ops' }), { timeout: 10_000, interval: 10 });
    const kube = new KubeClusterState(fake.kubeConfig(), { cache, metaKeys });
    const before = fake.requests.length;
    expect(await kube.namespaceLabels('net')).toEqual({ available: true, labels: { team: 'network' } });
    expect(fake.requests.length).toBe(before); // from the cache
    // Without a cache: one get; a 403 (no namespaces RBAC) makes it unavailable with the reason and the rule needed.
    const direct = new KubeClusterState(fake.kubeConfig(), { metaKeys });
    expect(await direct.namespaceLabels('net')).toEqual({ available: true, labels: { team: 'network' } });
    expect(fake.requestsMatching({ verb: 'get', resource: 'namespaces' }).map((r) => r.name)).toEqual(['net']);
    fake.forbid({ verb: 'get', resource: 'namespaces' });
    expect(await direct.namespaceLabels('net')).toEqual({ available: false, error: expect.stringContaining('resources ["namespaces"], verbs ["get"]') });
    expect(await new KubeClusterState(fake.kubeConfig()).namespaceLabels('net')).toMatchObject({ available: false });
    // Without namespace label keys: no namespace watch (the first test lists the eight resources watched then).
    expect(startCache(fake, { metaKeys: { labels: ['team'], annotations: [] } }).watchedResources).not.toContain('namespaces');
  });

  it('a watch broken beyond the bound → direct reads, and the reason is told; back on the cache once it reconnects', { timeout: 60_000 }, async () => {
    fake = await startFakeKube({ objects: items });
    const cache = startCache(fake, { maxStaleMs: 0 });
    await cache.synced();
    await watching(fake);
    const reasons: (string | undefined)[] = [];
    const kube = new KubeClusterState(fake.kubeConfig(), { cache, onFallback: (f) => reasons.push(f && `${f.state}: ${f.reason}`) });
    expect((await kube.describeServiceAccount('kube-system', 'multus')).pods.length).toBeGreaterThan(0);
    fake.forbid({ verb: 'watch', resource: 'pods' });
    fake.dropWatches();
    await vi.waitFor(() => expect(fake!.requestsMatching({ verb: 'watch', resource: 'pods' }).length).toBeGreaterThanOrEqual(2), { timeout: 10_000, interval: 10 });
    // The dropped stream's own error ("other side closed") comes first; the refused re-watch's reason replaces it once
    // its 403 is read (after the request is recorded).
    await vi.waitFor(() => expect(cache.freshness()).toMatchObject({ ok: false, reason: expect.stringContaining('forbidden') }), { timeout: 10_000, interval: 10 });
    const before = fake.requestsMatching({ verb: 'list', resource: 'pods' }).length;
    const state = await kube.describeServiceAccount('kube-system', 'multus');
    expect(state).toEqual(await new KubeClusterState(fake.kubeConfig()).describeServiceAccount('kube-system', 'multus'));
    expect(fake.requestsMatching({ verb: 'list', resource: 'pods' }).filter((r) => r.namespace === 'kube-system').length).toBeGreaterThan(0);
    expect(fake.requestsMatching({ verb: 'list', resource: 'pods' }).length).toBeGreaterThan(before);
    expect(reasons.at(-1)).toMatch(/^broken: watch of pods down for \d+ s \(forbidden: no permission to watch pods \(cluster-wide\): pods is forbidden: User ".*" cannot watch resource "pods" in API group "" at the cluster scope\)$/);
    expect(kube.readSource()).toMatchObject({ source: 'direct' });
    fake.clearFaults();
    await vi.waitFor(() => expect(cache.freshness()).toEqual({ ok: true }), { timeout: 10_000, interval: 10 });
    await kube.describeServiceAccount('kube-system', 'multus');
    expect(reasons.at(-1)).toBeUndefined();
  });

  it('before the first sync reads go to the API and say the cache is not synced yet', { timeout: 60_000 }, async () => {
    fake = await startFakeKube({ objects: items });
    fake.delay(300, { verb: 'list', resource: 'pods', namespace: undefined, path: '/api/v1/pods' });
    const reasons: (string | undefined)[] = [];
    const cache = startCache(fake);
    const kube = new KubeClusterState(fake.kubeConfig(), { cache, waitForSyncMs: 0, onFallback: (f) => reasons.push(f && `${f.state}: ${f.reason}`) });
    const state = await kube.describeServiceAccount('kube-system', 'multus');
    expect(state).toEqual({ ...EXPECTED_MULTUS, legacySecrets: [] });
    expect(reasons[0]).toMatch(/^syncing: watch cache not synced yet \(.*pods.*\)$/);
    expect(fake.requestsMatching({ verb: 'list', resource: 'pods', namespace: 'kube-system' }).length).toBe(1); // the direct read
    await cache.synced();
  });

  it('a first read waits (bounded) for the syncing cache instead of reading the API as well', { timeout: 60_000 }, async () => {
    fake = await startFakeKube({ objects: items });
    fake.delay(200, { path: '/api/v1/pods' });
    const reasons: unknown[] = [];
    const cache = startCache(fake);
    const kube = new KubeClusterState(fake.kubeConfig(), { cache, onFallback: (f) => reasons.push(f) });
    expect(await kube.describeServiceAccount('kube-system', 'multus')).toEqual({ ...EXPECTED_MULTUS, legacySecrets: [] });
    expect(reasons).toEqual([]);
    expect(fake.requests.filter((r) => r.namespace !== undefined)).toEqual([]); // no direct (namespaced) read at all
    // A cache that cannot sync: the wait ends after waitForSyncMs and the read goes to the API.
    const f2 = await startFakeKube({ objects: items });
    try {
      f2.forbid({ verb: 'list', path: '/api/v1/serviceaccounts' });
      const stuck = new ClusterWatchCache(f2.kubeConfig(), FAST);
      caches.push(stuck);
      stuck.start();
      const k2 = new KubeClusterState(f2.kubeConfig(), { cache: stuck, waitForSyncMs: 100, onFallback: (f) => reasons.push(f?.state) });
      expect((await k2.describeServiceAccount('kube-system', 'multus')).pods.length).toBeGreaterThan(0);
      expect(reasons).toEqual(['syncing']);
    } finally {
      await f2.close();
    }
  });

  it('keeps only the converted fields: no raw object, no metadata/spec/status; past maxObjects it disables itself', { timeout: 60_000 }, async () => {
    fake = await startFakeKube({ objects: items });
    const cache = startCache(fake);
    await cache.synced();
    const { pods, serviceAccounts, owners } = cache.contents();
    expect(pods.length).toBe(items.filter((i) => i.kind === 'Pod').length);
    expect(serviceAccounts.length).toBe(items.filter((i) => i.kind === 'ServiceAccount').length);
    const podKeys = new Set(['namespace', 'name', 'uid', 'node', 'serviceAccount', 'startTime', 'phase', 'containers', 'hostPaths', 'projectedToken', 'ownerChain', 'labels', 'ips', 'hostIP', 'hostNetwork']);
    for (const p of pods) {
      expect(Object.keys(p).every((k) => k === 'info' || k === 'controller')).toBe(true);
      expect(Object.keys(p.info).filter((k) => !podKeys.has(k))).toEqual([]);
      expect(p.info.ownerChain).toEqual([]);
    }
    for (const o of owners) expect(Object.keys(o.info).filter((k) => ['metadata', 'spec', 'status', 'apiVersion'].includes(k))).toEqual([]);
    const raw = JSON.stringify(items.filter((i) => i.kind !== 'Secret')).length;
    expect(JSON.stringify(cache.contents()).length).toBeLessThan(raw);

    const events: string[] = [];
    const small = startCache(fake, { maxObjects: 3, onEvent: (e) => events.push(e.kind) });
    await vi.waitFor(() => expect(small.freshness()).toEqual({ ok: false, state: 'disabled', reason: 'watch cache disabled: more than 3 objects (pods, ServiceAccounts, workloads) in the cluster' }), { timeout: 10_000, interval: 10 });
    expect(small.size).toBe(0);
    expect(events).toContain('disabled');
    const kube = new KubeClusterState(fake.kubeConfig(), { cache: small });
    expect((await kube.describeServiceAccount('kube-system', 'multus')).pods.length).toBeGreaterThan(0);
  });
});

describe('ClusterWatchCache list compression', () => {
  it('asks for gzip on lists, and decodes a page the API server compressed (over 128 KiB); watch streams ask for none', { timeout: 60_000 }, async () => {
    const many = Array.from({ length: 600 }, (_, i) => pod('apps', `web-${String(i).padStart(4, '0')}`, 'web', { kind: 'ReplicaSet', name: 'web-5d9f' }));
    fake = await startFakeKube({ objects: [...items, ...many] });
    const cache = startCache(fake);
    await cache.synced();
    await watching(fake);
    const podLists = fake.requestsMatching({ verb: 'list', resource: 'pods' });
    expect(podLists.length).toBe(2); // 500 per page
    expect(podLists.every((r) => r.headers['accept-encoding'] === 'gzip')).toBe(true);
    expect(podLists[0]!.responseEncoding).toBe('gzip');
    const watches = fake.requestsMatching({ verb: 'watch' });
    expect(watches.some((r) => r.headers['accept-encoding'] !== undefined)).toBe(false);
    const kube = new KubeClusterState(fake.kubeConfig(), { cache });
    expect((await kube.describeServiceAccount('apps', 'web')).pods.map((p) => p.name)).toEqual(many.map((p) => p.metadata.name));
    expect(kube.readSource()).toEqual({ source: 'cache' });
  });
});

describe('ClusterWatchCache behind a redirecting proxy', () => {
  it('follows a redirect of its lists and watches (as client-node\'s fetch does), keeping the token on the same origin', { timeout: 60_000 }, async () => {
    fake = await startFakeKube({ objects: items });
    // Every pods request without the marker is sent elsewhere on the same server, as a path-rewriting proxy would.
    fake.addReactor((req) => {
      if (req.resource !== 'pods' || req.query['moved'] === '1') return undefined;
      const query = new URLSearchParams({ ...req.query, moved: '1' });
      return { code: 307, headers: { location: `${req.path}?${query}` } };
    });
    const cache = startCache(fake);
    await cache.synced();
    await watching(fake);
    const pods = fake.requestsMatching({ resource: 'pods' });
    expect(pods.filter((r) => r.query['moved'] === '1').map((r) => r.verb).sort()).toEqual(['list', 'watch']);
    expect(pods.every((r) => r.headers.authorization === 'Bearer fake-token')).toBe(true);
    const kube = new KubeClusterState(fake.kubeConfig(), { cache });
    expect((await kube.describeServiceAccount('kube-system', 'multus')).pods.length).toBeGreaterThan(0);
    expect(kube.readSource()).toEqual({ source: 'cache' });
  });

  it('does not send the token along a redirect to another origin', { timeout: 60_000 }, async () => {
    fake = await startFakeKube({ objects: items });
    const seen: (string | undefined)[] = [];
    const other = createHttpServer((req, res) => {
      seen.push(req.headers.authorization);
      res.writeHead(403, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'Status', status: 'Failure', message: 'no credentials', code: 403 }));
    });
    await new Promise<void>((ok) => other.listen(0, '127.0.0.1', ok));
    try {
      const elsewhere = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
      fake.addReactor((req) => (req.resource === 'serviceaccounts' ? { code: 307, headers: { location: `${elsewhere}${req.path}` } } : undefined));
      const events: string[] = [];
      startCache(fake, { onEvent: (e) => events.push(`${e.kind} ${e.resource ?? ''} ${e.reason ?? ''}`) });
      await vi.waitFor(() => expect(events.some((e) => e.startsWith('watch-failed serviceaccounts forbidden'))).toBe(true), { timeout: 10_000, interval: 10 });
      expect(seen.length).toBeGreaterThan(0);
      expect(seen.every((a) => a === undefined)).toBe(true);
      expect(fake.requestsMatching({ resource: 'serviceaccounts' }).every((r) => r.headers.authorization === 'Bearer fake-token')).toBe(true);
    } finally {
      other.closeAllConnections();
      await new Promise((ok) => other.close(ok));
    }
  });
});

describe('ClusterWatchCache over TLS', () => {
  it('verifies the API server against the kubeconfig CA (the pooled dispatcher) and joins UTF-8 characters split across chunks', { timeout: 60_000 }, async () => {
    fake = await startFakeKube({ objects: items });
    // A TLS front of the fake, as a real API server is: each forwarded chunk of the server's answers is written one
    // byte at a time once `split` is set, so an event's multi-byte characters arrive cut across chunks.
    const { cert, key } = loopbackCert();
    let split = false;
    const sockets: Socket[] = [];
    const front = createTlsServer({ cert, key }, (client) => {
      sockets.push(client);
      const upstream = connect(fake!.port, '127.0.0.1');
      client.pipe(upstream);
      // Bytes go out in order, each after the previous one was flushed to the client's socket.
      let queue = Promise.resolve();
      upstream.on('data', (chunk: Buffer) => {
        const pieces = split ? [...chunk].map((b) => Buffer.of(b)) : [chunk];
        queue = queue.then(async () => {
          for (const piece of pieces) await new Promise((ok) => client.write(piece, ok));
        });
      });
      const end = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on('error', end).on('close', end);
      upstream.on('error', end).on('close', end);
    });
    await new Promise<void>((ok) => front.listen(0, '127.0.0.1', ok));
    try {
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [{ name: 'tls', server: `https://127.0.0.1:${(front.address() as AddressInfo).port}`, caData: Buffer.from(cert).toString('base64') }],
        users: [{ name: 'u', token: 'fake-token' }],
        contexts: [{ name: 'tls', cluster: 'tls', user: 'u' }],
        currentContext: 'tls',
      });
      const cache = new ClusterWatchCache(poolConnections(kc), FAST);
      caches.push(cache);
      cache.start();
      await cache.synced();
      await watching(fake);
      split = true;
      const label = 'café ☃ 東京 🚀';
      fake.store.put({ ...pod('kube-system', 'kube-multus-ds-utf8', 'multus', { kind: 'DaemonSet', name: 'kube-multus-ds' }), metadata: { ...pod('kube-system', 'kube-multus-ds-utf8', 'multus', { kind: 'DaemonSet', name: 'kube-multus-ds' }).metadata, labels: { app: label } } });
      const kube = new KubeClusterState(kc, { cache });
      await vi.waitFor(async () => expect((await kube.getPod('kube-system', 'kube-multus-ds-utf8'))?.labels).toEqual({ app: label }), { timeout: 20_000, interval: 20 });
      expect(kube.readSource()).toEqual({ source: 'cache' });
    } finally {
      for (const c of caches.splice(0)) c.stop();
      for (const c of sockets) c.destroy();
      await new Promise((ok) => front.close(ok));
    }
  });
});

describe('poolConnections', () => {
  it('direct reads share keep-alive connections instead of one TCP connection per request', { timeout: 60_000 }, async () => {
    fake = await startFakeKube({ objects: items });
    const unpooled = new KubeClusterState(fake.kubeConfig(), { concurrency: 1 });
    for (const [ns, name] of SUBJECTS) await unpooled.describeServiceAccount(ns, name);
    const perRequest = fake.connections;
    expect(perRequest).toBe(fake.requests.length); // client-node 2: a new undici Agent, hence connection, per request
    const requests = fake.requests.length;
    const kc = poolConnections(fake.kubeConfig());
    expect(poolConnections(kc)).toBe(kc);
    const pooled = new KubeClusterState(kc, { concurrency: 1 });
    for (const [ns, name] of SUBJECTS) await pooled.describeServiceAccount(ns, name);
    expect(fake.requests.length - requests).toBeGreaterThan(10);
    expect(fake.connections - perRequest).toBeLessThanOrEqual(2);
  });
});

describe('a list bound shared by many caches (listLimit)', () => {
  it('bounds the list pages processed at once across caches; a cluster that never answers holds no slot', { timeout: 60_000 }, async () => {
    fake = await startFakeKube({ objects: items });
    const second = await startFakeKube({ objects: items });
    // A black hole: accepts connections, never answers (a hung API server).
    const sockets = new Set<Socket>();
    const hole = createServer((s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((r) => hole.listen(0, '127.0.0.1', r));
    try {
      let running = 0;
      let most = 0;
      let pages = 0;
      const limit = pLimit(1);
      const listLimit = <T>(fn: () => Promise<T>): Promise<T> =>
        limit(async () => {
          running++;
          most = Math.max(most, running);
          pages++;
          try {
            return await fn();
          } finally {
            running--;
          }
        });
      const hung = new KubeConfig();
      hung.loadFromOptions({
        clusters: [{ name: 'hole', server: `http://127.0.0.1:${(hole.address() as AddressInfo).port}`, skipTLSVerify: true }],
        users: [{ name: 'u', token: 't' }],
        contexts: [{ name: 'hole', cluster: 'hole', user: 'u' }],
        currentContext: 'hole',
      });
      // The hung cluster's cache starts first: were its requests inside the bound, it would hold the one slot.
      const stuck = new ClusterWatchCache(hung, { ...FAST, listLimit, listTimeoutMs: 60_000 });
      caches.push(stuck);
      stuck.start();
      const a = startCache(fake, { listLimit });
      const b = startCache(second, { listLimit });
      await Promise.all([a.synced(), b.synced()]);
      expect(a.freshness()).toEqual({ ok: true });
      expect(b.freshness()).toEqual({ ok: true });
      expect(stuck.freshness()).toMatchObject({ ok: false, state: 'syncing' });
      expect(most).toBe(1);
      expect(pages).toBeGreaterThanOrEqual(16); // 8 resources, two caches
      expect(a.contents().pods.length).toBe(items.filter((i) => i.kind === 'Pod').length);
    } finally {
      for (const s of sockets) s.destroy();
      hole.close();
      await second.close();
    }
  });
});
