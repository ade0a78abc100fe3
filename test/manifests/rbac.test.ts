import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { startFakeKube, type FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import type { PolicyRule, RecordedRequest } from '../../src/sandbox/fakes/kubernetes/types.js';
import { KubeClusterState } from '../../src/cluster/kube.js';
import { ClusterWatchCache } from '../../src/cluster/cache.js';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { KubeMetricsScraper } from '../../src/sources/apiserver-metrics.js';
import {
  KUBE_API_CALLS,
  NAMESPACE_LABELS_API_CALLS,
  NON_RESOURCE_CALLS,
  REMEDIATION_API_CALLS,
  SECRET_METADATA_API_CALLS,
  nonResourceRulesFor,
  callKey,
  expandRules,
  isReadVerb,
  readCalls,
  rulesFor,
  secretMetadataCalls,
  uniqueCalls,
  writeCalls,
  type RbacRule,
} from './rbac-calls.js';
import { KubeRemediator, recreatedServiceAccount } from '../../src/remediation/kube-remediator.js';
import type { RestartableKind } from '../../src/core/actions.js';
import { FIXTURE } from '../cluster/fixture.js';
import { helmBinary, helmTemplate } from './helm.js';
import { MANIFESTS, render, type K8sObject } from './kustomize.js';

const SA = { namespace: 'tokenwatch', name: 'tokenwatch' };
const NOW = new Date('2026-11-20T12:00:00Z');
let items: object[];
let fake: FakeKube | undefined;

beforeAll(async () => {
  items = (JSON.parse(await readFile(FIXTURE, 'utf8')) as { items: object[] }).items;
});
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

type Role = K8sObject & { rules: RbacRule[] };
type Binding = K8sObject & { roleRef: { kind: string; name: string }; subjects: { kind: string; name: string; namespace?: string }[] };

function roles(objs: K8sObject[]): Role[] {
  return objs.filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role') as Role[];
}

/** A rule as the fake API server applies it, plus the resourceNames restriction the fake does not know. */
interface GrantedRule extends PolicyRule {
  resourceNames?: string[];
}

/** The rules granted to tokenwatch's ServiceAccount by the bindings among `objs` (RoleBindings: in their namespace). */
function grantedRules(objs: K8sObject[]): GrantedRule[] {
  const bindings = objs.filter((o) => o.kind === 'ClusterRoleBinding' || o.kind === 'RoleBinding') as Binding[];
  return bindings
    .filter((b) => b.subjects.some((s) => s.kind === 'ServiceAccount' && s.name === SA.name && s.namespace === SA.namespace))
    .flatMap((b) => {
      const role = roles(objs).find((r) => r.kind === b.roleRef.kind && r.metadata.name === b.roleRef.name && (r.kind === 'ClusterRole' || r.metadata.namespace === b.metadata.namespace));
      if (!role) throw new Error(`${b.kind} ${b.metadata.name}: role ${b.roleRef.kind} ${b.roleRef.name} not in the manifests`);
      return role.rules.map((r) => ({
        apiGroups: r.apiGroups ?? [],
        resources: r.resources ?? [],
        verbs: r.verbs,
        ...((r as { nonResourceURLs?: string[] }).nonResourceURLs ? { nonResourceURLs: (r as { nonResourceURLs?: string[] }).nonResourceURLs } : {}),
        ...(r.resourceNames ? { resourceNames: r.resourceNames } : {}),
        ...(b.kind === 'RoleBinding' ? { namespaces: [b.metadata.namespace!] } : {}),
      }));
    });
}

/** RBAC evaluation including resourceNames (Kubernetes docs "Referring to resources": a create is never matched by them). */
function allowed(rules: GrantedRule[], req: RecordedRequest): boolean {
  return rules.some(
    (r) =>
      r.apiGroups.includes(req.group ?? '') &&
      r.resources.includes(req.subresource ? `${req.resource}/${req.subresource}` : (req.resource ?? '')) &&
      r.verbs.includes(req.verb ?? '') &&
      (r.namespaces === undefined || r.namespaces.includes(req.namespace ?? '')) &&
      (r.resourceNames === undefined || (req.verb !== 'create' && r.resourceNames.includes(req.name ?? ''))),
  );
}

/** A fake API server with the fixture objects that authorizes like a cluster with these manifests applied. */
async function clusterWith(objs: K8sObject[]): Promise<FakeKube> {
  const rules = grantedRules(objs);
  const f = await startFakeKube({ objects: items, rbac: rules.map(({ resourceNames: _r, ...rest }) => rest) });
  f.forbid((req) => req.verb !== undefined && !allowed(rules, req));
  return f;
}

function made(f: FakeKube): string[] {
  return [...new Set(f.requests.filter((r) => r.verb).map((r) => callKey({ verb: r.verb!, resource: r.resource!, apiGroup: r.group ?? '' })))].sort();
}

const TARGETS: { kind: RestartableKind; namespace: string; name: string }[] = [
  { kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds' },
  { kind: 'Deployment', namespace: 'monitoring', name: 'metrics-server' },
  { kind: 'StatefulSet', namespace: 'logging', name: 'fluentd-aggregator' },
];

/** Every remediation operation once. Returns what each returned (errors as their message). */
async function remediateAll(rem: KubeRemediator, targets = TARGETS): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  const attempt = async (key: string, fn: () => Promise<unknown>) => {
    try {
      out[key] = await fn();
    } catch (err) {
      out[key] = `throws: ${err instanceof Error ? err.message : String(err)}`;
    }
  };
  for (const t of targets) {
    await attempt(`preflight ${t.kind}`, () => rem.preflightRestart(t, NOW));
    await attempt(`restart ${t.kind}`, () => rem.restart(t, NOW));
    await attempt(`progress ${t.kind}`, () => rem.rolloutProgress(t));
    await attempt(`event ${t.kind}`, () => rem.recordEvent(t, { reason: 'TokenwatchRestart', message: 'restarted by tokenwatch', at: NOW }));
  }
  const sa = { kind: 'ServiceAccount' as const, namespace: 'kube-system', name: 'multus' };
  await attempt('preflight ServiceAccount', () => rem.preflightRecreateServiceAccount(sa));
  // The executor's recreation steps (src/remediation/executor.ts): read, delete with preconditions, create.
  await attempt('recreate ServiceAccount', async () => {
    const old = await rem.readServiceAccount(sa);
    if (!old) throw new Error('ServiceAccount kube-system/multus is missing');
    await rem.deleteServiceAccount(sa, { uid: old.metadata?.uid, resourceVersion: old.metadata?.resourceVersion });
    return rem.createServiceAccount(sa.namespace, recreatedServiceAccount(old));
  });
  return out;
}

describe('API call lists match what the code sends', () => {
  it('REMEDIATION_API_CALLS = the calls KubeRemediator makes in every operation', async () => {
    fake = await startFakeKube({ objects: items });
    const results = await remediateAll(new KubeRemediator(fake.kubeConfig()));
    expect(Object.values(results).filter((r) => typeof r === 'string' && r.startsWith('throws'))).toEqual([]);
    expect(made(fake)).toEqual(uniqueCalls(REMEDIATION_API_CALLS).map(callKey).sort());
    expect(fake.requests.some((r) => r.dryRun && r.verb === 'patch')).toBe(true);
    expect(fake.requests.some((r) => r.dryRun && r.verb === 'delete')).toBe(true);
  });
});

/** The installs whose roles are checked: kustomize default, cluster-wide writes, and both with every component. */
const COMPONENTS = ['components/admission-policy', 'components/namespace-labels', 'components/secret-metadata'].map((c) => join(MANIFESTS, c));
const INSTALLS: [string, K8sObject[]][] = [
  ['kustomize default', render(MANIFESTS)],
  ['kustomize default + components', render(MANIFESTS, COMPONENTS)],
  ['kustomize writer-cluster-wide', render(join(MANIFESTS, 'overlays/writer-cluster-wide'))],
  ['kustomize writer-cluster-wide + components', render(join(MANIFESTS, 'overlays/writer-cluster-wide'), COMPONENTS)],
];
/** The Helm chart's roles, where the helm binary runs (test/manifests/helm.ts; helm.test.ts reports a skip). */
const HELM = helmBinary().path !== undefined;
if (HELM) {
  INSTALLS.push(
    ['helm default', helmTemplate()],
    ['helm components (rbac.secretMetadata, rbac.namespaces, admissionPolicy)', helmTemplate({ set: { 'rbac.secretMetadata': true, 'rbac.namespaces': true, 'admissionPolicy.enabled': true } })],
    ['helm writer-cluster-wide', helmTemplate({ set: { 'rbac.writer.clusterWide': true } })],
    ['helm writer-cluster-wide + components (rbac.secretMetadata, rbac.namespaces)', helmTemplate({ set: { 'rbac.writer.clusterWide': true, 'rbac.secretMetadata': true, 'rbac.namespaces': true } })],
    // The probe's own Roles are checked against its calls in test/probe/manifests.test.ts; here: serve's roles stay exact.
    ['helm probe on', helmTemplate({ set: { 'probe.enabled': true } })],
  );
}

describe.each(INSTALLS)('ClusterRoles and Roles of %s grant exactly the calls', (name, install) => {
  const role = (n: string) => roles(install).find((r) => r.metadata.name === n)!;
  const withSecrets = name.includes('components');
  const withProbe = name.includes('probe');

  it('only the reader and writer roles (+ secret-metadata and namespace-labels with the components, the probe\'s with the probe)', () => {
    expect(roles(install).map((r) => `${r.kind} ${r.metadata.name}`).sort()).toEqual([
      ...(withSecrets ? ['ClusterRole tokenwatch-namespace-labels'] : []),
      ...(withProbe ? ['ClusterRole tokenwatch-probe-reviewer'] : []),
      'ClusterRole tokenwatch-reader',
      ...(withSecrets ? ['ClusterRole tokenwatch-secret-metadata'] : []),
      'ClusterRole tokenwatch-writer',
      ...(withProbe ? ['Role tokenwatch-probe', 'Role tokenwatch-probe-reader'] : []),
    ]);
    // Serve gets exactly the probe reports' list and the probe pods' get in the probe namespace on top (the pods
    // check which node wrote a report), and TokenReview create cluster-wide (the reports' proofs).
    expect(grantedRules(install).filter((r) => r.namespaces?.includes('tokenwatch-probe'))).toEqual(
      withProbe
        ? [
            { apiGroups: [''], resources: ['configmaps'], verbs: ['list'], namespaces: ['tokenwatch-probe'] },
            { apiGroups: [''], resources: ['pods'], verbs: ['get'], namespaces: ['tokenwatch-probe'] },
          ]
        : [],
    );
    expect(grantedRules(install).filter((r) => r.resources.includes('tokenreviews'))).toEqual(withProbe ? [expect.objectContaining({ apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] })] : []);
  });

  it('no Secret access but through tokenwatch-secret-metadata, which grants exactly the opt-in Secret list', () => {
    for (const r of roles(install)) if (r.metadata.name !== 'tokenwatch-secret-metadata') expect(expandRules(r.rules).filter((k) => k.includes('secrets')), r.metadata.name).toEqual([]);
    if (withSecrets) {
      expect(expandRules(role('tokenwatch-secret-metadata').rules)).toEqual(secretMetadataCalls().map(callKey));
      expect(grantedRules(install).some((r) => r.resources.includes('secrets') && r.namespaces === undefined)).toBe(true);
    }
  });

  it('no access to namespaces but through tokenwatch-namespace-labels, which grants exactly get, list and watch of namespaces', () => {
    for (const r of roles(install)) if (r.metadata.name !== 'tokenwatch-namespace-labels') expect(expandRules(r.rules).filter((k) => k.includes('namespaces')), r.metadata.name).toEqual([]);
    if (withSecrets) {
      expect(role('tokenwatch-namespace-labels').rules).toEqual(rulesFor(uniqueCalls(NAMESPACE_LABELS_API_CALLS)));
      const bound = (install.filter((o) => o.kind === 'ClusterRoleBinding') as Binding[]).find((b) => b.roleRef.name === 'tokenwatch-namespace-labels');
      expect(bound?.subjects).toEqual([{ kind: 'ServiceAccount', name: 'tokenwatch', namespace: 'tokenwatch' }]);
    }
  });

  it('writes bound per namespace unless the install is cluster-wide', () => {
    const writer = (install.filter((o) => o.kind === 'RoleBinding' || o.kind === 'ClusterRoleBinding') as Binding[]).filter((b) => b.roleRef.name === 'tokenwatch-writer');
    if (name.includes('cluster-wide')) expect(writer.map((b) => b.kind)).toEqual(['ClusterRoleBinding']);
    else expect(writer.map((b) => `${b.kind} ${b.metadata.namespace}`)).toEqual(['RoleBinding kube-system']);
  });

  it('tokenwatch-reader = the read calls (cluster state + remediation reads), read verbs only', () => {
    const all = role('tokenwatch-reader').rules as (RbacRule & { nonResourceURLs?: string[] })[];
    const rules = all.filter((r) => r.nonResourceURLs === undefined);
    expect(all.filter((r) => r.nonResourceURLs !== undefined)).toEqual(nonResourceRulesFor(NON_RESOURCE_CALLS));
    expect(expandRules(rules)).toEqual(readCalls().map(callKey).sort());
    expect(rules).toEqual(rulesFor(readCalls()));
    expect(rules.flatMap((r) => r.verbs).every(isReadVerb)).toBe(true);
    for (const c of KUBE_API_CALLS) expect(expandRules(rules)).toContain(callKey(c));
  });

  it('tokenwatch-writer = the remediation writes, write verbs only', () => {
    const rules = role('tokenwatch-writer').rules;
    expect(expandRules(rules)).toEqual(writeCalls().map(callKey).sort());
    expect(rules).toEqual(rulesFor(writeCalls()));
    expect(rules.flatMap((r) => r.verbs).some(isReadVerb)).toBe(false);
  });

  it('no access to Leases: ownership is the store poller lock (SQLite) or shards in the database (PostgreSQL)', () => {
    expect(grantedRules(install).filter((r) => r.apiGroups.includes('coordination.k8s.io') || r.resources.includes('leases'))).toEqual([]);
  });

  it('every call of the code is granted by exactly one kind of role', () => {
    const all = uniqueCalls([...KUBE_API_CALLS, ...REMEDIATION_API_CALLS, ...(withSecrets ? [...SECRET_METADATA_API_CALLS, ...NAMESPACE_LABELS_API_CALLS] : [])]).map(callKey).sort();
    const granted = [
      ...expandRules(role('tokenwatch-reader').rules),
      ...expandRules(role('tokenwatch-writer').rules),
      ...(withSecrets ? expandRules(role('tokenwatch-secret-metadata').rules) : []),
      ...(withSecrets ? expandRules(role('tokenwatch-namespace-labels').rules) : []),
    ].sort();
    expect(granted).toEqual(all);
  });

  it('a wildcard rule is refused by the check', () => {
    expect(() => expandRules([{ apiGroups: ['apps'], resources: ['*'], verbs: ['get'] }])).toThrow(/wildcard/);
  });
});

describe('the real code against an API server with these manifests applied', () => {
  it('cluster-wide writes + the secret-metadata component: cluster state with Secrets, and every remediation succeed without a 403', async () => {
    const objs = render(join(MANIFESTS, 'overlays/writer-cluster-wide'), COMPONENTS);
    fake = await clusterWith(objs);
    // The watch cache's list + watch of every watched resource, under these roles (a 403 would leave it unsynced).
    const cache = new ClusterWatchCache(fake.kubeConfig());
    cache.start();
    await cache.synced();
    await vi.waitFor(() => expect(fake!.openWatches().length).toBe(8), { timeout: 10_000, interval: 10 });
    const cached = new KubeClusterState(fake.kubeConfig(), { cache, secretMetadata: true });
    expect(cached.readSource()).toEqual({ source: 'cache' });
    expect((await cached.describeServiceAccount('kube-system', 'multus')).error).toBeUndefined();
    cache.stop();
    const kube = new KubeClusterState(fake.kubeConfig(), { secretMetadata: true });
    for (const [ns, name] of [
      ['kube-system', 'multus'],
      ['monitoring', 'metrics-server'],
      ['ops', 'backup'],
      ['logging', 'fluentd'],
    ] as const) {
      const state = await kube.describeServiceAccount(ns, name);
      expect(state.available, `${ns}/${name}`).toBe(true);
      expect(state.error, `${ns}/${name}`).toBeUndefined();
    }
    fake.setMetrics('serviceaccount_stale_tokens_total 3\n');
    expect(await new KubeMetricsScraper(fake.kubeConfig()).scrape()).toBe('serviceaccount_stale_tokens_total 3\n');
    const results = await remediateAll(new KubeRemediator(fake.kubeConfig()));
    expect(results['preflight DaemonSet']).toMatchObject({ ok: true });
    expect(results['preflight ServiceAccount']).toMatchObject({ ok: true });
    expect(results['event StatefulSet']).toBe(true);
    expect(Object.values(results).filter((r) => typeof r === 'string')).toEqual([]);
    expect(fake.requests.filter((r) => r.verb && !allowed(grantedRules(objs), r)).map((r) => `${r.verb} ${r.resource}`)).toEqual([]);
    expect(fake.requestsMatching({ resource: 'secrets' }).length).toBeGreaterThan(0);
  });

  it('default install: complete cluster state without reading Secrets; the opt-in without its RBAC is a partial state naming the fix', async () => {
    fake = await clusterWith(render(MANIFESTS));
    const state = await new KubeClusterState(fake.kubeConfig()).describeServiceAccount('kube-system', 'multus');
    expect(state.available).toBe(true);
    expect(state.error).toBeUndefined();
    expect(fake.requestsMatching({ resource: 'secrets' })).toEqual([]);
    const optIn = await new KubeClusterState(fake.kubeConfig(), { secretMetadata: true }).describeServiceAccount('kube-system', 'multus');
    expect(optIn.available).toBe(true);
    expect(optIn.error).toMatch(/^cluster state partial: forbidden: no permission to list secrets in namespace kube-system .*apply the secret-metadata RBAC \(kustomize component manifests\/components\/secret-metadata, Helm rbac.secretMetadata=true\), or turn it off$/);
  });

  it('read-only install (writer dropped): findings still work, every write fails with a 403 naming the verb', async () => {
    fake = await clusterWith(render(join(MANIFESTS, 'base')));
    const state = await new KubeClusterState(fake.kubeConfig()).describeServiceAccount('kube-system', 'multus');
    expect(state.available).toBe(true);
    expect(state.error).toBeUndefined();
    const rem = new KubeRemediator(fake.kubeConfig());
    expect(await rem.preflightRestart(TARGETS[0]!, NOW)).toEqual({
      ok: false,
      reason: 'forbidden',
      message:
        'dry-run restart of DaemonSet kube-system/kube-multus-ds: 403 daemonsets.apps "kube-multus-ds" is forbidden: User "system:serviceaccount:tokenwatch:tokenwatch" cannot patch resource "daemonsets" in API group "apps" in the namespace "kube-system"',
    });
    expect(await rem.preflightRecreateServiceAccount({ kind: 'ServiceAccount', namespace: 'kube-system', name: 'multus' })).toEqual({
      ok: false,
      reason: 'forbidden',
      message:
        'dry-run delete of ServiceAccount kube-system/multus: 403 serviceaccounts "multus" is forbidden: User "system:serviceaccount:tokenwatch:tokenwatch" cannot delete resource "serviceaccounts" in API group "" in the namespace "kube-system"',
    });
    expect(await rem.recordEvent(TARGETS[0]!, { reason: 'TokenwatchRestart', message: 'x', at: NOW })).toBe(false);
    await expect(rem.restart(TARGETS[0]!, NOW)).rejects.toThrow(/cannot patch resource "daemonsets"/);
    expect((fake.store.get('DaemonSet', 'kube-system', 'kube-multus-ds') as { spec: { template: { metadata?: { annotations?: object } } } }).spec.template.metadata?.annotations).toBeUndefined();
  });

  const defaults: [string, () => K8sObject[]][] = [['kustomize', () => render(MANIFESTS)]];
  if (HELM) defaults.push(['helm', () => helmTemplate()]);
  it.each(defaults)('%s default install, writer limited to the listed namespaces: writes there, 403 elsewhere', async (_name, objs) => {
    fake = await clusterWith(objs());
    const rem = new KubeRemediator(fake.kubeConfig());
    expect(await rem.preflightRestart(TARGETS[0]!, NOW)).toMatchObject({ ok: true }); // kube-system
    // monitoring: no RoleBinding by default (it may not exist; the defaults bind only kube-system, which always does).
    expect(await rem.preflightRestart(TARGETS[1]!, NOW)).toMatchObject({ ok: false, reason: 'forbidden' });
    await expect(rem.restart(TARGETS[2]!, NOW)).rejects.toThrow(
      'rollout restart of StatefulSet logging/fluentd-aggregator: 403 statefulsets.apps "fluentd-aggregator" is forbidden: User "system:serviceaccount:tokenwatch:tokenwatch" cannot patch resource "statefulsets" in API group "apps" in the namespace "logging"',
    );
    expect(await rem.preflightRecreateServiceAccount({ kind: 'ServiceAccount', namespace: 'logging', name: 'fluentd' })).toMatchObject({ ok: false, reason: 'forbidden' });
    expect(await rem.preflightRecreateServiceAccount({ kind: 'ServiceAccount', namespace: 'kube-system', name: 'multus' })).toMatchObject({ ok: true });
    expect((await new KubeClusterState(fake.kubeConfig()).describeServiceAccount('logging', 'fluentd')).available).toBe(true);
  });

  it('a Lease is out of reach in the default install, in tokenwatch\'s own namespace too', async () => {
    fake = await clusterWith(render(MANIFESTS));
    const leases = fake.kubeConfig().makeApiClient(CoordinationV1Api);
    const err = await leases.readNamespacedLease({ name: 'tokenwatch', namespace: 'tokenwatch' }).then(() => undefined, (e: unknown) => e as { code?: number });
    expect(err?.code).toBe(403);
    const created = await leases
      .createNamespacedLease({ namespace: 'tokenwatch', body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'tokenwatch' }, spec: { holderIdentity: 'pod-a' } } })
      .then(() => undefined, (e: unknown) => e as { code?: number });
    expect(created?.code).toBe(403);
  });
});
