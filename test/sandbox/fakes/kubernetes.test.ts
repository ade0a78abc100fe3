/**
 * The loopback fake API server itself: read semantics over raw HTTP, write semantics through client-node 1.4
 * exactly as remediation code will call it.
 */
import { ApiException, AppsV1Api, CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeKube, type FakeKube } from '../../../src/sandbox/fakes/kubernetes.js';
import type { KubeObject } from '../../../src/sandbox/fakes/kubernetes/types.js';

const ds = (name: string): object => ({
  apiVersion: 'apps/v1',
  kind: 'DaemonSet',
  metadata: { name, namespace: 'kube-system', labels: { app: name } },
  spec: {
    selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'main', image: 'img:1' }, { name: 'side', image: 'side:1' }] } },
  },
  status: { desiredNumberScheduled: 3, numberAvailable: 3 },
});
const pod = (name: string, ns: string, sa: string, node: string, labels: Record<string, string> = {}): object => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: ns, labels },
  spec: { serviceAccountName: sa, nodeName: node, containers: [{ name: 'c', image: 'x' }] },
});
const sa = (name: string, ns = 'kube-system'): object => ({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace: ns } });

let fake: FakeKube;
beforeEach(async () => {
  fake = await startFakeKube({
    objects: [
      ds('kube-multus-ds'),
      sa('multus'),
      pod('a', 'kube-system', 'multus', 'node-1', { app: 'multus', tier: 'net' }),
      pod('b', 'kube-system', 'aws-node', 'node-2', { app: 'aws-node', tier: 'net' }),
      pod('c', 'monitoring', 'multus', 'node-1', { app: 'other' }),
      {
        apiVersion: 'v1',
        kind: 'Secret',
        type: 'kubernetes.io/service-account-token',
        metadata: { name: 'multus-token', namespace: 'kube-system', annotations: { 'kubernetes.io/service-account.name': 'multus' } },
        data: { token: 'c2VjcmV0' },
      },
      { apiVersion: 'v1', kind: 'Secret', type: 'Opaque', metadata: { name: 'plain', namespace: 'kube-system' }, data: { k: 'dg==' } },
    ],
  });
});
afterEach(async () => {
  await fake.close();
});

async function get(path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: KubeObject; contentType: string | null }> {
  const res = await fetch(`${fake.url}${path}`, { headers });
  return { status: res.status, body: (await res.json()) as KubeObject, contentType: res.headers.get('content-type') };
}

const names = (body: KubeObject): string[] => (body['items'] as KubeObject[]).map((i) => String(i.metadata?.['name']));

describe('reads', () => {
  it('lists a namespace as a typed List with the current resourceVersion', async () => {
    const { status, body } = await get('/api/v1/namespaces/kube-system/pods');
    expect(status).toBe(200);
    expect(body.kind).toBe('PodList');
    expect(body.apiVersion).toBe('v1');
    expect(body.metadata).toEqual({ resourceVersion: fake.store.resourceVersion });
    expect(names(body)).toEqual(['a', 'b']);
    expect((body['items'] as KubeObject[])[0]).not.toHaveProperty('kind');
  });

  it('lists across namespaces, filtered by fieldSelector and labelSelector', async () => {
    expect(names((await get('/api/v1/pods')).body)).toEqual(['a', 'b', 'c']);
    expect(names((await get('/api/v1/pods?fieldSelector=spec.serviceAccountName%3Dmultus')).body)).toEqual(['a', 'c']);
    expect(names((await get('/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1,metadata.namespace%21%3Dmonitoring')).body)).toEqual(['a']);
    expect(names((await get('/api/v1/namespaces/kube-system/pods?fieldSelector=metadata.name%3D%3Db')).body)).toEqual(['b']);
    expect(names((await get('/api/v1/pods?labelSelector=tier%3Dnet,app%21%3Daws-node')).body)).toEqual(['a']);
    expect(names((await get('/api/v1/pods?labelSelector=app%20in%20(other,aws-node)')).body)).toEqual(['b', 'c']);
    expect(names((await get('/api/v1/pods?labelSelector=!tier')).body)).toEqual(['c']);
    expect(names((await get('/api/v1/namespaces/kube-system/secrets?fieldSelector=type%3Dkubernetes.io%2Fservice-account-token')).body)).toEqual(['multus-token']);
  });

  it('rejects a field selector the real API server does not support', async () => {
    const { status, body } = await get('/api/v1/pods?fieldSelector=spec.containers%3Dx');
    expect(status).toBe(400);
    expect(body).toMatchObject({ kind: 'Status', status: 'Failure', reason: 'BadRequest', code: 400, message: 'field label not supported: spec.containers' });
  });

  it('pages with limit and continue', async () => {
    const first = await get('/api/v1/pods?limit=2');
    expect(names(first.body)).toEqual(['a', 'b']);
    const cont = String(first.body.metadata?.['continue']);
    const second = await get(`/api/v1/pods?limit=2&continue=${cont}`);
    expect(names(second.body)).toEqual(['c']);
    expect(second.body.metadata).not.toHaveProperty('continue');
  });

  it('gets an object, and answers a missing one with a NotFound Status', async () => {
    const found = await get('/apis/apps/v1/namespaces/kube-system/daemonsets/kube-multus-ds');
    expect(found.body).toMatchObject({ apiVersion: 'apps/v1', kind: 'DaemonSet', metadata: { name: 'kube-multus-ds', generation: 1 } });
    const missing = await get('/apis/apps/v1/namespaces/kube-system/daemonsets/nope');
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'daemonsets.apps "nope" not found',
      reason: 'NotFound',
      details: { name: 'nope', kind: 'daemonsets', group: 'apps' },
      code: 404,
    });
    expect((await get('/apis/apps/v1/namespaces/kube-system/widgets')).status).toBe(404);
  });

  it('serves metadata-only lists when asked, without Secret data', async () => {
    const { body, contentType } = await get('/api/v1/namespaces/kube-system/secrets', {
      accept: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json',
    });
    expect(contentType).toBe('application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1');
    expect(body.kind).toBe('PartialObjectMetadataList');
    expect(JSON.stringify(body)).not.toContain('c2VjcmV0');
    expect(names(body)).toEqual(['multus-token', 'plain']);
  });

  it('serves discovery for client-node generic clients', async () => {
    const { body } = await get('/apis/apps/v1');
    expect(body).toMatchObject({ kind: 'APIResourceList', groupVersion: 'apps/v1' });
    expect((body['resources'] as { name: string }[]).map((r) => r.name)).toContain('daemonsets/status');
  });
});

describe('writes through client-node', () => {
  it('creates (201), then refuses a duplicate with 409 AlreadyExists; dryRun=All stores nothing', async () => {
    const core = fake.kubeConfig().makeApiClient(CoreV1Api);
    const rv = fake.store.resourceVersion;
    const dry = await core.createNamespacedServiceAccount({ namespace: 'kube-system', body: { metadata: { name: 'new-sa' } }, dryRun: 'All' });
    expect(dry.metadata?.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(fake.store.get('ServiceAccount', 'kube-system', 'new-sa')).toBeUndefined();
    expect(fake.store.resourceVersion).toBe(rv);

    const created = await core.createNamespacedServiceAccount({ namespace: 'kube-system', body: { metadata: { name: 'new-sa' } } });
    expect(created.metadata?.resourceVersion).toBe(String(Number(rv) + 1));
    const err = await core.createNamespacedServiceAccount({ namespace: 'kube-system', body: { metadata: { name: 'new-sa' } } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiException);
    expect((err as ApiException<unknown>).code).toBe(409);
    expect(JSON.parse(String((err as ApiException<unknown>).body))).toMatchObject({ reason: 'AlreadyExists', message: 'serviceaccounts "new-sa" already exists' });
  });

  it('deletes with preconditions: 409 on a wrong uid or resourceVersion, success when they match', async () => {
    const core = fake.kubeConfig().makeApiClient(CoreV1Api);
    const current = fake.store.get('ServiceAccount', 'kube-system', 'multus');
    const uid = String(current?.metadata?.['uid']);
    const resourceVersion = String(current?.metadata?.['resourceVersion']);

    for (const preconditions of [{ uid: 'other-uid' }, { uid, resourceVersion: '1' }]) {
      const err = await core.deleteNamespacedServiceAccount({ name: 'multus', namespace: 'kube-system', body: { preconditions } }).catch((e: unknown) => e);
      expect((err as ApiException<unknown>).code).toBe(409);
    }
    const conflict = fake.requests.filter((r) => r.method === 'DELETE')[0];
    expect(conflict?.body).toEqual({ preconditions: { uid: 'other-uid' } });
    expect(fake.store.get('ServiceAccount', 'kube-system', 'multus')).toBeDefined();

    await core.deleteNamespacedServiceAccount({ name: 'multus', namespace: 'kube-system', dryRun: 'All', body: { preconditions: { uid, resourceVersion } } });
    expect(fake.store.get('ServiceAccount', 'kube-system', 'multus')).toBeDefined();
    await core.deleteNamespacedServiceAccount({ name: 'multus', namespace: 'kube-system', body: { preconditions: { uid, resourceVersion } } });
    expect(fake.store.get('ServiceAccount', 'kube-system', 'multus')).toBeUndefined();
  });

  it('reports the precondition mismatch as the API server words it', async () => {
    const res = await fetch(`${fake.url}/api/v1/namespaces/kube-system/serviceaccounts/multus`, {
      method: 'DELETE',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ preconditions: { uid: 'stale' } }),
    });
    const uid = String(fake.store.get('ServiceAccount', 'kube-system', 'multus')?.metadata?.['uid']);
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({
      reason: 'Conflict',
      message: `Operation cannot be fulfilled on serviceaccounts "multus": Precondition failed: UID in precondition: stale, UID in object meta: ${uid}`,
    });
  });

  it('applies a strategic-merge rollout restart: generation bumps, containers merge by name, status kept', async () => {
    const apps = fake.kubeConfig().makeApiClient(AppsV1Api);
    const globalRv = Number(fake.store.resourceVersion);
    const restartedAt = '2026-11-29T10:00:00Z';
    const out = await apps.patchNamespacedDaemonSet(
      {
        name: 'kube-multus-ds',
        namespace: 'kube-system',
        body: {
          spec: { template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': restartedAt } }, spec: { containers: [{ name: 'side', image: 'side:2' }] } } },
          status: { numberAvailable: 0 },
        },
        fieldManager: 'tokenwatch',
      },
      setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
    );
    expect(out.metadata?.generation).toBe(2);
    // One global counter, bumped once per write (the object's own old resourceVersion was lower).
    expect(out.metadata?.resourceVersion).toBe(String(globalRv + 1));
    expect(out.spec?.template.metadata?.annotations).toEqual({ 'kubectl.kubernetes.io/restartedAt': restartedAt });
    expect(out.spec?.template.spec?.containers.map((c) => `${c.name}=${c.image}`)).toEqual(['main=img:1', 'side=side:2']);
    expect(out.status?.numberAvailable).toBe(3);
    const req = fake.requests.find((r) => r.method === 'PATCH');
    expect(req).toMatchObject({ contentType: 'application/strategic-merge-patch+json', verb: 'patch', resource: 'daemonsets', group: 'apps', query: { fieldManager: 'tokenwatch' } });
  });

  it('does not bump generation for a metadata-only change; merge-patch null deletes a key', async () => {
    const apps = fake.kubeConfig().makeApiClient(AppsV1Api);
    const options = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
    const out = await apps.patchNamespacedDaemonSet({ name: 'kube-multus-ds', namespace: 'kube-system', body: { metadata: { labels: { app: null, team: 'net' } } } }, options);
    expect(out.metadata?.labels).toEqual({ team: 'net' });
    expect(out.metadata?.generation).toBe(1);
  });

  it('answers an object sent as json-patch (client-node default content type) with 400, as kube-apiserver does', async () => {
    const apps = fake.kubeConfig().makeApiClient(AppsV1Api);
    const err = await apps
      .patchNamespacedDaemonSet({ name: 'kube-multus-ds', namespace: 'kube-system', body: { spec: { template: { metadata: { annotations: { a: 'b' } } } } } })
      .catch((e: unknown) => e);
    expect((err as ApiException<unknown>).code).toBe(400);
    expect(fake.requests.at(-1)?.contentType).toBe('application/json-patch+json');
    expect(fake.store.get('DaemonSet', 'kube-system', 'kube-multus-ds')?.metadata?.['generation']).toBe(1);
  });

  it('applies a real RFC 6902 json-patch; a failing test op → 422', async () => {
    const apps = fake.kubeConfig().makeApiClient(AppsV1Api);
    const options = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
    const out = await apps.patchNamespacedDaemonSet(
      { name: 'kube-multus-ds', namespace: 'kube-system', body: [{ op: 'replace', path: '/spec/template/spec/containers/0/image', value: 'img:2' }] },
      options,
    );
    expect(out.spec?.template.spec?.containers[0]?.image).toBe('img:2');
    expect(out.metadata?.generation).toBe(2);
    const err = await apps
      .patchNamespacedDaemonSet({ name: 'kube-multus-ds', namespace: 'kube-system', body: [{ op: 'test', path: '/spec/template/spec/containers/0/image', value: 'img:1' }] }, options)
      .catch((e: unknown) => e);
    expect((err as ApiException<unknown>).code).toBe(422);
    // kube-apiserver's generic 422 for a failed op (apimachinery `NewGenericServerResponse`): the op's text is not sent.
    expect(JSON.parse(String((err as ApiException<unknown>).body))).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'the server rejected our request due to an error in our request',
      reason: 'Invalid',
      details: {},
      code: 422,
    });
  });

  it('a JSON Patch `test` of /metadata/uid is a uid precondition: 422 on another object, applied on the same', async () => {
    const apps = fake.kubeConfig().makeApiClient(AppsV1Api);
    const options = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
    const uid = String(fake.store.get('DaemonSet', 'kube-system', 'kube-multus-ds')?.metadata?.['uid']);
    const add = { op: 'add', path: '/metadata/labels/checked', value: 'yes' };
    const err = await apps
      .patchNamespacedDaemonSet({ name: 'kube-multus-ds', namespace: 'kube-system', body: [{ op: 'test', path: '/metadata/uid', value: 'approved-uid' }, add] }, options)
      .catch((e: unknown) => e);
    expect((err as ApiException<unknown>).code).toBe(422);
    expect(fake.store.get('DaemonSet', 'kube-system', 'kube-multus-ds')?.metadata?.['labels']).toEqual({ app: 'kube-multus-ds' });
    const out = await apps.patchNamespacedDaemonSet({ name: 'kube-multus-ds', namespace: 'kube-system', body: [{ op: 'test', path: '/metadata/uid', value: uid }, add] }, options);
    expect(out.metadata?.labels).toEqual({ app: 'kube-multus-ds', checked: 'yes' });
  });

  it('a patch that sets another metadata.uid is refused as the immutable field it is (422 Invalid on metadata.uid); the same uid passes', async () => {
    const apps = fake.kubeConfig().makeApiClient(AppsV1Api);
    const uid = String(fake.store.get('DaemonSet', 'kube-system', 'kube-multus-ds')?.metadata?.['uid']);
    const body = (u: string) => ({ metadata: { uid: u }, spec: { template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': '2026-11-29T10:00:00Z' } } } } });
    for (const strategy of [PatchStrategy.StrategicMergePatch, PatchStrategy.MergePatch]) {
      const err = await apps
        .patchNamespacedDaemonSet({ name: 'kube-multus-ds', namespace: 'kube-system', body: body('approved-uid') }, setHeaderOptions('Content-Type', strategy))
        .catch((e: unknown) => e);
      expect((err as ApiException<unknown>).code).toBe(422);
      expect(JSON.parse(String((err as ApiException<unknown>).body))).toMatchObject({
        reason: 'Invalid',
        message: 'DaemonSet.apps "kube-multus-ds" is invalid: metadata.uid: Invalid value: "approved-uid": field is immutable',
        details: { name: 'kube-multus-ds', group: 'apps', kind: 'DaemonSet', causes: [{ reason: 'FieldValueInvalid', field: 'metadata.uid' }] },
      });
    }
    expect(fake.store.get('DaemonSet', 'kube-system', 'kube-multus-ds')?.metadata?.['generation']).toBe(1);
    const out = await apps.patchNamespacedDaemonSet({ name: 'kube-multus-ds', namespace: 'kube-system', body: body(uid) }, setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch));
    expect(out.metadata?.uid).toBe(uid);
    expect(out.metadata?.generation).toBe(2);
  });

  it('a PUT whose metadata.uid differs is a failed precondition: 409 Conflict', async () => {
    const core = fake.kubeConfig().makeApiClient(CoreV1Api);
    const current = await core.readNamespacedServiceAccount({ name: 'multus', namespace: 'kube-system' });
    const uid = current.metadata!.uid!;
    const err = await core
      .replaceNamespacedServiceAccount({ name: 'multus', namespace: 'kube-system', body: { ...current, metadata: { ...current.metadata, uid: 'approved-uid' } } })
      .catch((e: unknown) => e);
    expect((err as ApiException<unknown>).code).toBe(409);
    expect(JSON.parse(String((err as ApiException<unknown>).body))).toMatchObject({
      reason: 'Conflict',
      message: `Operation cannot be fulfilled on serviceaccounts "multus": Precondition failed: UID in precondition: approved-uid, UID in object meta: ${uid}`,
    });
  });

  it('answers an unsupported patch content type with 415', async () => {
    const res = await fetch(`${fake.url}/apis/apps/v1/namespaces/kube-system/daemonsets/kube-multus-ds`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json' },
      body: '{"metadata":{"labels":{"x":"y"}}}',
    });
    expect(res.status).toBe(415);
    expect(await res.json()).toMatchObject({ kind: 'Status', reason: 'UnsupportedMediaType', code: 415 });
  });

  it('dryRun=All on patch answers the patched object and stores nothing', async () => {
    const apps = fake.kubeConfig().makeApiClient(AppsV1Api);
    const rv = fake.store.resourceVersion;
    const out = await apps.patchNamespacedDaemonSet(
      { name: 'kube-multus-ds', namespace: 'kube-system', dryRun: 'All', body: { spec: { template: { metadata: { annotations: { r: '1' } } } } } },
      setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
    );
    expect(out.spec?.template.metadata?.annotations).toEqual({ r: '1' });
    expect(out.metadata?.generation).toBe(2);
    expect(fake.store.resourceVersion).toBe(rv);
    expect(fake.store.get('DaemonSet', 'kube-system', 'kube-multus-ds')?.metadata?.['generation']).toBe(1);
    expect(fake.requests.at(-1)?.dryRun).toBe(true);
  });

  it('refuses an update with a stale resourceVersion (409) and accepts the current one', async () => {
    const apps = fake.kubeConfig().makeApiClient(AppsV1Api);
    const current = await apps.readNamespacedDaemonSet({ name: 'kube-multus-ds', namespace: 'kube-system' });
    fake.store.update('DaemonSet', 'kube-system', 'kube-multus-ds', (o) => {
      (o['status'] as Record<string, unknown>)['numberAvailable'] = 2;
    });
    const err = await apps.replaceNamespacedDaemonSet({ name: 'kube-multus-ds', namespace: 'kube-system', body: current }).catch((e: unknown) => e);
    expect((err as ApiException<unknown>).code).toBe(409);
    const fresh = await apps.readNamespacedDaemonSet({ name: 'kube-multus-ds', namespace: 'kube-system' });
    const replaced = await apps.replaceNamespacedDaemonSet({ name: 'kube-multus-ds', namespace: 'kube-system', body: fresh });
    expect(replaced.status?.numberAvailable).toBe(2);
  });

  it('lets a test progress status over time through onWrite and the status subresource', async () => {
    const apps = fake.kubeConfig().makeApiClient(AppsV1Api);
    const stop = fake.store.onWrite((e) => {
      if (e.type === 'MODIFIED' && e.def.kind === 'DaemonSet' && e.object.metadata?.['generation'] !== e.previous?.metadata?.['generation']) {
        setTimeout(() => {
          fake.store.update('DaemonSet', 'kube-system', 'kube-multus-ds', (o) => {
            o['status'] = { ...(o['status'] as object), observedGeneration: o.metadata?.['generation'], updatedNumberScheduled: 3 };
          });
        }, 10);
      }
    });
    await apps.patchNamespacedDaemonSet(
      { name: 'kube-multus-ds', namespace: 'kube-system', body: { spec: { template: { metadata: { annotations: { r: '2' } } } } } },
      setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
    );
    await new Promise((r) => setTimeout(r, 50));
    stop();
    const after = await apps.readNamespacedDaemonSetStatus({ name: 'kube-multus-ds', namespace: 'kube-system' });
    expect(after.status).toMatchObject({ observedGeneration: 2, updatedNumberScheduled: 3, numberAvailable: 3 });
    await apps.patchNamespacedDaemonSetStatus(
      { name: 'kube-multus-ds', namespace: 'kube-system', body: { status: { numberAvailable: 1 }, spec: { minReadySeconds: 9 } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const stored = fake.store.get('DaemonSet', 'kube-system', 'kube-multus-ds');
    expect((stored!['status'] as Record<string, unknown>)['numberAvailable']).toBe(1);
    expect((stored!['spec'] as Record<string, unknown>)['minReadySeconds']).toBeUndefined();
  });
});

describe('fault injection', () => {
  it('failNext answers the next matching request only, with a Status of that code', async () => {
    fake.failNext({ verb: 'list', resource: 'pods' }, 503);
    const first = await get('/api/v1/pods');
    expect(first.status).toBe(503);
    expect(first.body).toMatchObject({ kind: 'Status', reason: 'ServiceUnavailable', code: 503 });
    expect((await get('/api/v1/pods')).status).toBe(200);
  });

  it('forbid answers 403 with the RBAC message; the rbac option denies whatever it does not allow', async () => {
    fake.forbid({ resource: 'secrets' });
    const denied = await get('/api/v1/namespaces/kube-system/secrets');
    expect(denied.status).toBe(403);
    expect(denied.body['message']).toBe(
      'secrets is forbidden: User "system:serviceaccount:tokenwatch:tokenwatch" cannot list resource "secrets" in API group "" in the namespace "kube-system"',
    );
    const strict = await startFakeKube({ rbac: [{ apiGroups: [''], resources: ['pods'], verbs: ['list'] }] });
    try {
      expect((await fetch(`${strict.url}/api/v1/namespaces/x/pods`)).status).toBe(200);
      const res = await fetch(`${strict.url}/apis/apps/v1/namespaces/x/daemonsets/d`);
      expect(res.status).toBe(403);
      expect(((await res.json()) as KubeObject)['message']).toBe(
        'daemonsets.apps "d" is forbidden: User "system:serviceaccount:tokenwatch:tokenwatch" cannot get resource "daemonsets" in API group "apps" in the namespace "x"',
      );
    } finally {
      await strict.close();
    }
  });

  it('records every request with verb, resource, namespace, name, query and body', async () => {
    await get('/api/v1/namespaces/kube-system/pods?labelSelector=app%3Dmultus');
    expect(fake.requests.at(-1)).toMatchObject({
      method: 'GET',
      path: '/api/v1/namespaces/kube-system/pods',
      query: { labelSelector: 'app=multus' },
      verb: 'list',
      group: '',
      version: 'v1',
      resource: 'pods',
      namespace: 'kube-system',
      dryRun: false,
    });
  });
});

/** Read a watch stream's JSON lines until `n` events arrived or the stream ended; returns them and whether it ended. */
async function readEvents(res: Response, n: number, onOpen?: () => void): Promise<{ events: { type: string; object: KubeObject }[]; ended: boolean }> {
  const events: { type: string; object: KubeObject }[] = [];
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  onOpen?.();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return { events, ended: true };
    buf += decoder.decode(value, { stream: true });
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      events.push(JSON.parse(line) as { type: string; object: KubeObject });
      if (events.length >= n) {
        await reader.cancel();
        return { events, ended: false };
      }
    }
  }
}

describe('watch (Kubernetes API concepts, "Efficient detection of changes")', () => {
  const rv = (o: KubeObject): number => Number((o.metadata as { resourceVersion: string }).resourceVersion);

  it('from a list resourceVersion: ADDED, MODIFIED, DELETED as chunked JSON lines, objects with kind and apiVersion, each with its new resourceVersion', async () => {
    const list = (await (await fetch(`${fake.url}/api/v1/namespaces/kube-system/pods`)).json()) as KubeObject & { metadata: { resourceVersion: string } };
    const res = await fetch(`${fake.url}/api/v1/namespaces/kube-system/pods?watch=1&resourceVersion=${list.metadata.resourceVersion}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(res.headers.get('transfer-encoding')).toBe('chunked');
    const { events } = await readEvents(res, 3, () => {
      fake.store.put(pod('new', 'kube-system', 'multus', 'node-3'));
      fake.store.put(pod('elsewhere', 'monitoring', 'multus', 'node-3')); // another namespace: not in this watch
      fake.store.update('Pod', 'kube-system', 'new', (o) => void ((o.metadata as { labels: Record<string, string> }).labels = { v: '2' }));
      fake.store.delete('Pod', 'kube-system', 'new');
    });
    expect(events.map((e) => `${e.type} ${e.object.kind} ${e.object.apiVersion} ${(e.object.metadata as { name: string }).name}`)).toEqual([
      'ADDED Pod v1 new',
      'MODIFIED Pod v1 new',
      'DELETED Pod v1 new',
    ]);
    const rvs = events.map((e) => rv(e.object));
    expect(rvs[0]).toBeGreaterThan(Number(list.metadata.resourceVersion));
    expect(rvs[1]).toBeGreaterThan(rvs[0]!);
    expect(rvs[2]).toBeGreaterThan(rvs[1]!); // the deletion's own resourceVersion
    expect(fake.requests.at(-1)).toMatchObject({ verb: 'watch', resource: 'pods', namespace: 'kube-system' });
  });

  it('without a resourceVersion: a synthetic ADDED per current object first, honouring selectors', async () => {
    const res = await fetch(`${fake.url}/api/v1/pods?watch=true&labelSelector=tier%3Dnet`);
    const { events } = await readEvents(res, 2);
    expect(events.map((e) => `${e.type} ${(e.object.metadata as { name: string }).name}`)).toEqual(['ADDED a', 'ADDED b']);
  });

  it('a resourceVersion older than the history → one ERROR event with a 410 Expired Status, then the stream ends', async () => {
    const old = fake.store.resourceVersion;
    fake.store.put(pod('later', 'kube-system', 'multus', 'node-1'));
    fake.compactHistory();
    const res = await fetch(`${fake.url}/api/v1/pods?watch=1&resourceVersion=${old}`);
    expect(res.status).toBe(200);
    const { events, ended } = await readEvents(res, 2);
    expect(ended).toBe(true);
    expect(events).toEqual([
      {
        type: 'ERROR',
        object: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: `too old resource version: ${old} (${Number(fake.store.resourceVersion) + 1})`, reason: 'Expired', code: 410 },
      },
    ]);
  });

  it('allowWatchBookmarks=true → BOOKMARK events carrying only the current resourceVersion; timeoutSeconds ends the stream', async () => {
    const f = await startFakeKube({ objects: [ds('d')], bookmarkIntervalMs: 20 });
    try {
      const res = await fetch(`${f.url}/apis/apps/v1/daemonsets?watch=1&resourceVersion=${f.store.resourceVersion}&allowWatchBookmarks=true`);
      const { events } = await readEvents(res, 1);
      expect(events).toEqual([{ type: 'BOOKMARK', object: { kind: 'DaemonSet', apiVersion: 'apps/v1', metadata: { resourceVersion: f.store.resourceVersion } } }]);
      const timed = await fetch(`${f.url}/apis/apps/v1/daemonsets?watch=1&resourceVersion=${f.store.resourceVersion}&timeoutSeconds=1`);
      expect(await readEvents(timed, 1)).toEqual({ events: [], ended: true });
      expect(f.openWatches()).toEqual([]);
    } finally {
      await f.close();
    }
  });

  it('openWatches lists open streams; dropWatches cuts them; RBAC applies to the watch verb', async () => {
    const res = await fetch(`${fake.url}/api/v1/namespaces/kube-system/serviceaccounts?watch=1&resourceVersion=${fake.store.resourceVersion}`);
    expect(fake.openWatches()).toEqual([{ resource: 'serviceaccounts', group: '', namespace: 'kube-system' }]);
    expect(fake.dropWatches()).toBe(1);
    await expect(res.body!.getReader().read()).rejects.toThrow();
    expect(fake.openWatches()).toEqual([]);
    fake.forbid({ verb: 'watch' });
    const denied = await fetch(`${fake.url}/api/v1/pods?watch=1`);
    expect(denied.status).toBe(403);
    expect(((await denied.json()) as { message: string }).message).toBe('pods is forbidden: User "system:serviceaccount:tokenwatch:tokenwatch" cannot watch resource "pods" in API group "" at the cluster scope');
  });
});
