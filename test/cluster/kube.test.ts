/**
 * KubeClusterState against the loopback fake API server, checked against the snapshot reader on one shared fixture.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { startFakeKube, type FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import { ClusterUnavailableError, KubeClusterState, kubeConfigFor } from '../../src/cluster/kube.js';
import { KUBE_API_CALLS, SECRET_METADATA_API_CALLS } from '../manifests/rbac-calls.js';
import { loadSnapshot, type SnapshotClusterState } from '../../src/cluster/snapshot.js';
import { ClusterWatchCache } from '../../src/cluster/cache.js';
import { EXPECTED_MULTUS, FIXTURE } from './fixture.js';

/** Every ServiceAccount referenced in the fixture, plus one that does not exist. */
const SUBJECTS: [string, string][] = [
  ['kube-system', 'multus'],
  ['kube-system', 'aws-node'],
  ['monitoring', 'metrics-server'],
  ['ops', 'backup'],
  ['logging', 'fluentd'],
  ['kube-system', 'nobody'],
];

let items: { kind: string; metadata: { namespace: string; name: string } }[];
let snapshot: SnapshotClusterState;
let fake: FakeKube;

beforeAll(async () => {
  items = (JSON.parse(await readFile(FIXTURE, 'utf8')) as { items: typeof items }).items;
  snapshot = await loadSnapshot(FIXTURE);
});
beforeEach(async () => {
  fake = await startFakeKube({ objects: items });
});
afterEach(async () => {
  await fake.close();
});

describe('KubeClusterState', () => {
  it('gives the same answers as the snapshot reader for the same objects (with the opt-in Secret metadata)', async () => {
    const kube = new KubeClusterState(fake.kubeConfig(), { secretMetadata: true });
    expect(await kube.describeServiceAccount('kube-system', 'multus')).toEqual(EXPECTED_MULTUS);
    for (const [ns, name] of SUBJECTS) {
      expect(await kube.describeServiceAccount(ns, name), `${ns}/${name}`).toEqual(await snapshot.describeServiceAccount(ns, name));
    }
    for (const pod of items.filter((i) => i.kind === 'Pod')) {
      const { namespace, name } = pod.metadata;
      expect(await kube.getPod(namespace, name), `${namespace}/${name}`).toEqual(await snapshot.getPod(namespace, name));
    }
    expect(await kube.getPod('kube-system', 'gone')).toBeUndefined();
  });

  it('finds the owner of a legacy token Secret like the snapshot reader: .secrets[] with one SA get, else the annotation', async () => {
    const kube = new KubeClusterState(fake.kubeConfig());
    expect(await kube.legacySecretOwner('kube-system', 'multus-token-4xv9q')).toEqual({
      serviceAccount: 'multus',
      via: 'ServiceAccount kube-system/multus lists Secret multus-token-4xv9q in .secrets[]',
    });
    expect(fake.requests.map((r) => `${r.verb} ${r.resource} ${r.namespace}/${r.name ?? ''}`)).toEqual(['get serviceaccounts kube-system/multus']);
    const manual = await kube.legacySecretOwner('kube-system', 'multus-manual-token');
    expect(manual).toMatchObject({ serviceAccount: 'multus', via: 'Secret kube-system/multus-manual-token is annotated kubernetes.io/service-account.name: multus' });
    expect((await snapshot.legacySecretOwner('kube-system', 'multus-manual-token'))?.serviceAccount).toBe('multus');
    expect((await snapshot.legacySecretOwner('kube-system', 'multus-token-4xv9q'))?.serviceAccount).toBe('multus');
    expect(await kube.legacySecretOwner('kube-system', 'nobody-token-zzzzz')).toBeUndefined();
  });

  it('sends the field selectors, asks for Secrets metadata-only, and reads each owner once per call', async () => {
    const kube = new KubeClusterState(fake.kubeConfig(), { secretMetadata: true });
    await kube.describeServiceAccount('kube-system', 'multus');
    const calls = fake.requests.map((r) => `${r.verb} ${r.resource} ${r.namespace}/${r.name ?? ''} ${r.query['fieldSelector'] ?? ''}`);
    expect(calls.sort()).toEqual([
      'get daemonsets kube-system/kube-multus-ds ',
      'get serviceaccounts kube-system/multus ',
      'list pods kube-system/ spec.serviceAccountName=multus',
      'list secrets kube-system/ type=kubernetes.io/service-account-token',
    ]);
    const secrets = fake.requestsMatching({ resource: 'secrets' })[0];
    expect(secrets?.accept).toBe('application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json');
  });

  /** Sync a watch cache against the fake (its list + watch calls), then stop it. */
  const syncCache = async (): Promise<void> => {
    const cache = new ClusterWatchCache(fake.kubeConfig());
    cache.start();
    await cache.synced();
    await vi.waitFor(() => expect(fake.openWatches().length).toBe(8), { timeout: 10_000, interval: 10 });
    cache.stop();
  };

  it('direct reads plus the watch cache make exactly the API calls listed in KUBE_API_CALLS, and no Secret read by default', async () => {
    const kube = new KubeClusterState(fake.kubeConfig());
    for (const [ns, name] of SUBJECTS) await kube.describeServiceAccount(ns, name);
    await kube.getPod('kube-system', 'kube-multus-ds-zwh6w');
    await syncCache();
    const made = new Set(fake.requests.map((r) => `${r.verb} ${r.resource} ${r.group}`));
    const declared = new Set(KUBE_API_CALLS.map((c) => `${c.verb} ${c.resource} ${c.apiGroup}`));
    expect([...made].sort()).toEqual([...declared].sort());
    expect(fake.requestsMatching({ resource: 'secrets' })).toEqual([]);
  });

  it('secretMetadata: KUBE_API_CALLS plus SECRET_METADATA_API_CALLS', async () => {
    const kube = new KubeClusterState(fake.kubeConfig(), { secretMetadata: true });
    for (const [ns, name] of SUBJECTS) await kube.describeServiceAccount(ns, name);
    await kube.getPod('kube-system', 'kube-multus-ds-zwh6w');
    await syncCache();
    const made = new Set(fake.requests.map((r) => `${r.verb} ${r.resource} ${r.group}`));
    const declared = new Set([...KUBE_API_CALLS, ...SECRET_METADATA_API_CALLS].map((c) => `${c.verb} ${c.resource} ${c.apiGroup}`));
    expect([...made].sort()).toEqual([...declared].sort());
  });

  it('without Secret metadata the state is complete but has no legacy Secret labels', async () => {
    const withSecrets = await new KubeClusterState(fake.kubeConfig(), { secretMetadata: true }).describeServiceAccount('kube-system', 'multus');
    const without = await new KubeClusterState(fake.kubeConfig()).describeServiceAccount('kube-system', 'multus');
    expect(without.available).toBe(true);
    expect(without.error).toBeUndefined();
    expect(without).toEqual({ ...withSecrets, legacySecrets: [] });
  });

  it('403 on the pod list → unavailable, naming verb, resource, API group and namespace', async () => {
    fake.forbid({ verb: 'list', resource: 'pods' });
    const kube = new KubeClusterState(fake.kubeConfig());
    expect(await kube.describeServiceAccount('kube-system', 'multus')).toEqual({
      available: false,
      error:
        'cluster state unavailable: forbidden: no permission to list pods in namespace kube-system (RBAC rule needed: apiGroups [""], resources ["pods"], verbs ["list"])',
      pods: [],
      workloads: [],
      legacySecrets: [],
    });
  });

  it('403 on Secrets (opt-in on, RBAC missing) or owners → still available, with a partial-state error naming the fix', async () => {
    fake.forbid({ resource: 'secrets' });
    fake.forbid({ resource: 'daemonsets' });
    const kube = new KubeClusterState(fake.kubeConfig(), { secretMetadata: true });
    const state = await kube.describeServiceAccount('kube-system', 'multus');
    expect(state.available).toBe(true);
    expect(state.error).toBe(
      'cluster state partial: forbidden: no permission to list secrets in namespace kube-system (RBAC rule needed: apiGroups [""], resources ["secrets"], verbs ["list"]); ' +
        'kubernetes.secretMetadata is on but not granted: apply the secret-metadata RBAC (kustomize component manifests/components/secret-metadata, Helm rbac.secretMetadata=true), or turn it off; ' +
        'forbidden: no permission to get daemonsets in namespace kube-system (RBAC rule needed: apiGroups ["apps"], resources ["daemonsets"], verbs ["get"])',
    );
    expect(state.pods.map((p) => p.name)).toEqual(['kube-multus-ds-8kq2t', 'kube-multus-ds-zwh6w']);
    expect(state.legacySecrets).toEqual([]);
    expect(state.workloads).toEqual([{ kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds', images: [], args: [] }]);
  });

  it('a 5xx → unavailable with the server message', async () => {
    fake.failNext({ resource: 'serviceaccounts' }, { code: 500, message: 'etcdserver: request timed out' });
    const kube = new KubeClusterState(fake.kubeConfig());
    const state = await kube.describeServiceAccount('kube-system', 'multus');
    expect(state.available).toBe(false);
    expect(state.error).toBe('cluster state unavailable: HTTP 500 on get serviceaccounts in namespace kube-system: etcdserver: request timed out');
  });

  it('a 401 → unavailable, saying the credentials were rejected', async () => {
    fake.failNext({ resource: 'pods' }, 401);
    const state = await new KubeClusterState(fake.kubeConfig()).describeServiceAccount('kube-system', 'multus');
    expect(state.error).toBe('cluster state unavailable: unauthorized (HTTP 401) on list pods in namespace kube-system: credentials rejected or expired');
  });

  it('a closed server → unavailable, not a throw; getPod throws ClusterUnavailableError', async () => {
    const kube = new KubeClusterState(fake.kubeConfig());
    await fake.close();
    const state = await kube.describeServiceAccount('kube-system', 'multus');
    expect(state.available).toBe(false);
    expect(state.error).toMatch(/^cluster state unavailable: connect ECONNREFUSED 127\.0\.0\.1:\d+ \((get serviceaccounts|list pods) in namespace kube-system\)$/);
    const err = await kube.getPod('kube-system', 'kube-multus-ds-zwh6w').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ClusterUnavailableError);
    expect((err as Error).message).toMatch(/^cluster state unavailable: connect ECONNREFUSED/);
    fake = await startFakeKube(); // for afterEach
  });

  it('respects the per-request timeout', async () => {
    fake.delay(3_000, { resource: 'pods' });
    const kube = new KubeClusterState(fake.kubeConfig(), { timeoutMs: 150 });
    const started = Date.now();
    const state = await kube.describeServiceAccount('kube-system', 'multus');
    const elapsed = Date.now() - started;
    expect(state).toMatchObject({ available: false, error: 'cluster state unavailable: request timed out after 150 ms (list pods in namespace kube-system)' });
    expect(elapsed).toBeGreaterThanOrEqual(140); // a busy machine can only make it later; the error names the timeout
  });

  it('keeps at most `concurrency` requests in flight', async () => {
    let inFlight = 0;
    let peak = 0;
    fake.addReactor(async () => {
      inFlight += 1;
      peak = Math.max(peak, inFlight);
      await new Promise((r) => setTimeout(r, 30));
      inFlight -= 1;
      return undefined;
    });
    const kube = new KubeClusterState(fake.kubeConfig(), { concurrency: 2 });
    await Promise.all(SUBJECTS.map(([ns, name]) => kube.describeServiceAccount(ns, name)));
    expect(peak).toBe(2);
    expect(fake.requests.length).toBeGreaterThan(12);
  });
});

describe('kubeConfigFor', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tokenwatch-kubeconfig-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster: { server: 'https://prod.example:6443', insecure-skip-tls-verify: true }
- name: staging
  cluster: { server: 'https://staging.example:6443', insecure-skip-tls-verify: true }
users:
- name: u
  user: { token: t }
contexts:
- name: prod
  context: { cluster: prod, user: u }
- name: staging
  context: { cluster: staging, user: u }
current-context: prod
`;

  it('loads a kubeconfig file and selects a context', async () => {
    const file = join(dir, 'config');
    await writeFile(file, kubeconfig);
    expect(kubeConfigFor({ kubeconfig: file }).getCurrentCluster()?.server).toBe('https://prod.example:6443');
    expect(kubeConfigFor({ kubeconfig: file, context: 'staging' }).getCurrentCluster()?.server).toBe('https://staging.example:6443');
    expect(() => kubeConfigFor({ kubeconfig: file, context: 'dev' })).toThrow(`kubeconfig context "dev" not found in ${file} (contexts: prod, staging)`);
  });

  it('names the file it cannot load, and refuses in-cluster config outside a pod', () => {
    expect(() => kubeConfigFor({ kubeconfig: join(dir, 'missing') })).toThrow(/^cannot load kubeconfig .*missing: ENOENT/);
    vi.stubEnv('KUBERNETES_SERVICE_HOST', '');
    expect(() => kubeConfigFor({ inCluster: true })).toThrow('in-cluster Kubernetes config requested but KUBERNETES_SERVICE_HOST is not set (not running in a pod?)');
  });

  it('drives KubeClusterState from a kubeconfig pointing at the fake', async () => {
    const file = join(dir, 'fake-config');
    await writeFile(
      file,
      `apiVersion: v1\nkind: Config\nclusters:\n- name: f\n  cluster: { server: '${fake.url}', insecure-skip-tls-verify: true }\nusers:\n- name: u\n  user: { token: abc }\ncontexts:\n- name: f\n  context: { cluster: f, user: u }\ncurrent-context: f\n`,
    );
    const kube = new KubeClusterState(kubeConfigFor({ kubeconfig: file }));
    expect((await kube.getPod('ops', 'backup-29410560-q8w7e'))?.ownerChain.map((o) => o.kind)).toEqual(['Job', 'CronJob']);
    expect(fake.requests[0]?.headers.authorization).toBe('Bearer abc');
  });
});
