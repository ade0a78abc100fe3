/**
 * The admission policy (manifests/components/admission-policy) applied to allowed and forbidden requests of
 * tokenwatch's ServiceAccount, with @bufbuild/cel. The allowed workload updates are the objects before and after a
 * real `KubeRemediator.restart` against the fake API server, so the policy is checked against the patch the code sends.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeKube, type FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import { KubeRemediator, RESTARTED_AT } from '../../src/remediation/kube-remediator.js';
import type { RestartableKind } from '../../src/core/actions.js';
import { FIXTURE } from '../cluster/fixture.js';
import { CEL_CORE_FUNCTIONS, admit, expressionsOf, functionsOf, policyObjects, type AdmissionInput } from './admission.js';
import { MANIFESTS, render, type K8sObject } from './kustomize.js';

const SA_USER = 'system:serviceaccount:tokenwatch:tokenwatch';
const NOW = new Date('2026-11-20T12:00:00Z');

const component = render(MANIFESTS, [join(MANIFESTS, 'components/admission-policy')]);
const { policy, binding } = policyObjects(component);
/** The params ConfigMap the component installs (the binding's paramRef). */
const PARAMS = component.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'tokenwatch-admission')! as K8sObject & { data: Record<string, string> };
/** The policy for one request, with the component's params unless the input says otherwise. */
const check = (input: AdmissionInput) => admit(policy, { params: PARAMS, ...input });

type Obj = Record<string, unknown> & { metadata: Record<string, unknown>; spec: Record<string, unknown> & { template: { metadata?: { annotations?: Record<string, string>; labels?: Record<string, string> }; spec: { serviceAccountName?: string; containers: { image: string }[] } } } };

const GROUP = { group: 'apps', version: 'v1' };
const RESOURCE: Record<RestartableKind, string> = { DaemonSet: 'daemonsets', Deployment: 'deployments', StatefulSet: 'statefulsets' };
const TARGETS: { kind: RestartableKind; namespace: string; name: string }[] = [
  { kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds' },
  { kind: 'Deployment', namespace: 'monitoring', name: 'metrics-server' },
  { kind: 'StatefulSet', namespace: 'logging', name: 'fluentd-aggregator' },
];

let fake: FakeKube;
/** Before/after of one real rollout restart per kind, and of a second restart (restartedAt already set). */
const restarts: { kind: RestartableKind; before: Obj; after: Obj; again: Obj }[] = [];

beforeAll(async () => {
  const items = (JSON.parse(await readFile(FIXTURE, 'utf8')) as { items: object[] }).items;
  fake = await startFakeKube({ objects: items });
  const rem = new KubeRemediator(fake.kubeConfig());
  for (const t of TARGETS) {
    const before = structuredClone(fake.store.get(t.kind, t.namespace, t.name)) as unknown as Obj;
    await rem.restart(t, NOW);
    const after = structuredClone(fake.store.get(t.kind, t.namespace, t.name)) as unknown as Obj;
    await rem.restart(t, new Date(NOW.getTime() + 3_600_000));
    const again = structuredClone(fake.store.get(t.kind, t.namespace, t.name)) as unknown as Obj;
    restarts.push({ kind: t.kind, before, after, again });
  }
});
afterAll(async () => {
  await fake.close();
});

function update(kind: RestartableKind, oldObject: Obj, object: Obj, extra: Partial<AdmissionInput> = {}): AdmissionInput {
  return {
    operation: 'UPDATE',
    resource: { ...GROUP, resource: RESOURCE[kind] },
    namespace: oldObject.metadata['namespace'] as string,
    name: oldObject.metadata['name'] as string,
    username: SA_USER,
    object,
    oldObject,
    ...extra,
  };
}

describe('admission policy: the expressions', () => {
  it('use CEL core only (no Kubernetes CEL library functions) and parse', () => {
    for (const { at, expression } of expressionsOf(policy)) {
      const extra = functionsOf(expression).filter((f) => !CEL_CORE_FUNCTIONS.has(f));
      expect(extra, at).toEqual([]);
    }
    // The check sees library functions and the evaluator lacks them (so a policy using one cannot pass here).
    expect(functionsOf("request.name.lowerAscii() == 'x' && [1, 2].isSorted()").filter((f) => !CEL_CORE_FUNCTIONS.has(f))).toEqual(['isSorted', 'lowerAscii']);
    expect(admit({ ...policy, spec: { ...policy.spec, validations: [{ expression: "request.operation.lowerAscii() == 'update'" }] } }, { operation: 'DELETE', resource: { group: '', version: 'v1', resource: 'pods' }, username: SA_USER }).denied).toEqual([
      expect.stringMatching(/^error: .*lowerAscii/),
    ]);
  });

  it('the binding denies (not only warns/audits) and names the policy; failures close', () => {
    expect(binding.spec).toEqual({
      policyName: policy.metadata.name,
      validationActions: ['Deny'],
      paramRef: { name: PARAMS.metadata.name, namespace: PARAMS.metadata.namespace, parameterNotFoundAction: 'Allow' },
    });
    expect(policy.spec.paramKind).toEqual({ apiVersion: 'v1', kind: 'ConfigMap' });
    expect(policy.spec.failurePolicy).toBe('Fail');
  });
});

describe('admission policy: allowed', () => {
  it.each(TARGETS.map((t) => t.kind))('the real rollout restart of a %s (first and second time), also as a dry run', (kind) => {
    const r = restarts.find((x) => x.kind === kind)!;
    expect(r.after.spec.template.metadata?.annotations?.[RESTARTED_AT]).toBe('2026-11-20T12:00:00Z');
    expect(check(update(kind, r.before, r.after))).toEqual({ applies: true, allowed: true, denied: [] });
    expect(check(update(kind, r.after, r.again))).toEqual({ applies: true, allowed: true, denied: [] });
  });

  it('ServiceAccount recreation (delete + create), Events; no Lease, not even in its own namespace', () => {
    const sa = { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'multus', namespace: 'kube-system' } };
    const core = (resource: string) => ({ group: '', version: 'v1', resource });
    const ok = { applies: true, allowed: true, denied: [] };
    expect(check({ operation: 'DELETE', resource: core('serviceaccounts'), namespace: 'kube-system', name: 'multus', username: SA_USER, oldObject: sa })).toEqual(ok);
    expect(check({ operation: 'CREATE', resource: core('serviceaccounts'), namespace: 'kube-system', name: 'multus', username: SA_USER, object: sa })).toEqual(ok);
    const event = { apiVersion: 'v1', kind: 'Event', metadata: { name: 'x.1', namespace: 'kube-system' }, reason: 'TokenwatchRestart' };
    expect(check({ operation: 'CREATE', resource: core('events'), namespace: 'kube-system', name: 'x.1', username: SA_USER, object: event })).toEqual(ok);
    const lease = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'tokenwatch', namespace: 'tokenwatch' }, spec: { holderIdentity: 'pod-a' } };
    const leaseRes = { group: 'coordination.k8s.io', version: 'v1', resource: 'leases' };
    // The Lease election is gone (ownership is the store's poller lock or shards): the policy refuses the Lease it once allowed.
    expect(check({ operation: 'CREATE', resource: leaseRes, namespace: 'tokenwatch', name: 'tokenwatch', username: SA_USER, object: lease }).denied).toEqual([
      expect.stringMatching(/refused: CREATE leases$/),
    ]);
    expect(check({ operation: 'UPDATE', resource: leaseRes, namespace: 'tokenwatch', name: 'tokenwatch', username: SA_USER, object: lease, oldObject: lease }).denied).toEqual([
      expect.stringMatching(/refused: UPDATE leases$/),
    ]);
  });

  it('does not apply to anyone else (a person may still change the image)', () => {
    const r = restarts.find((x) => x.kind === 'Deployment')!;
    const changed = structuredClone(r.before);
    changed.spec.template.spec.containers[0]!.image = 'evil:latest';
    expect(check(update('Deployment', r.before, changed, { username: 'kubernetes-admin' }))).toEqual({ applies: false, allowed: true, denied: [] });
    expect(check(update('Deployment', r.before, changed, { username: 'system:serviceaccount:other:tokenwatch' })).applies).toBe(false);
  });
});

describe('admission policy: forbidden', () => {
  const ONLY_RESTART = /only by the pod-template annotation kubectl\.kubernetes\.io\/restartedAt/;
  /** A restart patch plus one more change made by `edit` to the patched object. */
  const tampered = (kind: RestartableKind, edit: (o: Obj) => void) => {
    const r = restarts.find((x) => x.kind === kind)!;
    const o = structuredClone(r.after);
    edit(o);
    return check(update(kind, r.before, o));
  };

  it.each([
    ['another image', (o: Obj) => void (o.spec.template.spec.containers[0]!.image = 'attacker.example.com/x:1')],
    ['another ServiceAccount', (o: Obj) => void (o.spec.template.spec.serviceAccountName = 'cluster-admin-sa')],
    ['hostPID', (o: Obj) => void ((o.spec.template.spec as Record<string, unknown>)['hostPID'] = true)],
    ['another pod-template annotation', (o: Obj) => void (o.spec.template.metadata!.annotations!['x'] = '1')],
    ['a pod-template label', (o: Obj) => void (o.spec.template.metadata!.labels = { ...o.spec.template.metadata!.labels, extra: 'x' })],
    ['a pod-template label removed', (o: Obj) => void delete o.spec.template.metadata!.labels],
    ['the update strategy / another top-level spec field', (o: Obj) => void (o.spec['minReadySeconds'] = 600)],
    ['the object labels', (o: Obj) => void (o.metadata['labels'] = { ...(o.metadata['labels'] as object), owner: 'me' })],
    ['the object annotations', (o: Obj) => void (o.metadata['annotations'] = { ...(o.metadata['annotations'] as object), x: 'y' })],
    ['owner references', (o: Obj) => void (o.metadata['ownerReferences'] = [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'x', uid: '1' }])],
  ])('a restart that also changes %s', (_what, edit) => {
    for (const { kind } of TARGETS) {
      const res = tampered(kind, edit);
      expect(res.allowed, kind).toBe(false);
      expect(res.denied, kind).toEqual([expect.stringMatching(ONLY_RESTART)]);
    }
  });

  it('scaling a Deployment or StatefulSet (replicas) or pausing a Deployment', () => {
    expect(tampered('Deployment', (o) => void (o.spec['replicas'] = 0)).denied).toEqual([expect.stringMatching(ONLY_RESTART)]);
    expect(tampered('StatefulSet', (o) => void (o.spec['replicas'] = 50)).denied).toEqual([expect.stringMatching(ONLY_RESTART)]);
    expect(tampered('Deployment', (o) => void (o.spec['paused'] = true)).denied).toEqual([expect.stringMatching(ONLY_RESTART)]);
  });

  it('removing an existing pod-template annotation, while setting restartedAt', () => {
    const r = restarts.find((x) => x.kind === 'Deployment')!;
    const before = structuredClone(r.before);
    before.spec.template.metadata = { ...before.spec.template.metadata, annotations: { 'prometheus.io/scrape': 'true' } };
    const after = structuredClone(before);
    after.spec.template.metadata!.annotations = { [RESTARTED_AT]: '2026-11-20T12:00:00Z' };
    expect(check(update('Deployment', before, after)).denied).toEqual([expect.stringMatching(ONLY_RESTART)]);
    after.spec.template.metadata!.annotations = { 'prometheus.io/scrape': 'true', [RESTARTED_AT]: '2026-11-20T12:00:00Z' };
    expect(check(update('Deployment', before, after)).allowed).toBe(true);
  });

  const OTHER = /tokenwatch may only create ServiceAccounts and Events, delete ServiceAccounts, and update DaemonSets\/Deployments\/StatefulSets \(admission policy tokenwatch-writes\); refused: /;
  const d = { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'x', namespace: 'default' }, spec: { template: { spec: { containers: [] } } } };
  it.each<[string, AdmissionInput, string]>([
    ['delete a Deployment', { operation: 'DELETE', resource: { ...GROUP, resource: 'deployments' }, namespace: 'default', name: 'x', username: SA_USER, oldObject: d }, 'DELETE deployments'],
    ['create a Deployment', { operation: 'CREATE', resource: { ...GROUP, resource: 'deployments' }, namespace: 'default', name: 'x', username: SA_USER, object: d }, 'CREATE deployments'],
    ['scale through the subresource', { operation: 'UPDATE', resource: { ...GROUP, resource: 'deployments' }, subResource: 'scale', namespace: 'default', name: 'x', username: SA_USER, object: {}, oldObject: {} }, 'UPDATE deployments/scale'],
    ['create a Secret', { operation: 'CREATE', resource: { group: '', version: 'v1', resource: 'secrets' }, namespace: 'default', name: 's', username: SA_USER, object: { metadata: {} } }, 'CREATE secrets'],
    ['delete a pod', { operation: 'DELETE', resource: { group: '', version: 'v1', resource: 'pods' }, namespace: 'default', name: 'p', username: SA_USER, oldObject: { metadata: {} } }, 'DELETE pods'],
    ['request a token for another ServiceAccount', { operation: 'CREATE', resource: { group: '', version: 'v1', resource: 'serviceaccounts' }, subResource: 'token', namespace: 'kube-system', name: 'admin', username: SA_USER, object: {} }, 'CREATE serviceaccounts/token'],
    ['update a ServiceAccount (e.g. add an imagePullSecret)', { operation: 'UPDATE', resource: { group: '', version: 'v1', resource: 'serviceaccounts' }, namespace: 'kube-system', name: 'multus', username: SA_USER, object: { metadata: {} }, oldObject: { metadata: {} } }, 'UPDATE serviceaccounts'],
    ['create a ClusterRoleBinding', { operation: 'CREATE', resource: { group: 'rbac.authorization.k8s.io', version: 'v1', resource: 'clusterrolebindings' }, name: 'pwn', username: SA_USER, object: { metadata: {} } }, 'CREATE clusterrolebindings'],
    ['exec into a pod', { operation: 'CONNECT', resource: { group: '', version: 'v1', resource: 'pods' }, subResource: 'exec', namespace: 'default', name: 'p', username: SA_USER, object: {} }, 'CONNECT pods/exec'],
    ['update another Lease', { operation: 'UPDATE', resource: { group: 'coordination.k8s.io', version: 'v1', resource: 'leases' }, namespace: 'kube-system', name: 'kube-controller-manager', username: SA_USER, object: { metadata: {} }, oldObject: { metadata: {} } }, 'UPDATE leases'],
    ['update a ConfigMap', { operation: 'UPDATE', resource: { group: '', version: 'v1', resource: 'configmaps' }, namespace: 'kube-system', name: 'aws-auth', username: SA_USER, object: { metadata: {} }, oldObject: { metadata: {} } }, 'UPDATE configmaps'],
  ])('%s', (_what, input, refused) => {
    const res = check(input);
    expect(res.applies).toBe(true);
    expect(res.denied).toEqual([expect.stringMatching(new RegExp(`${OTHER.source}${refused}$`))]);
  });
});

describe('admission policy: every identity tokenwatch uses (params usernames and groups)', () => {
  const r = () => restarts.find((x) => x.kind === 'Deployment')!;
  const imageChange = () => {
    const o = structuredClone(r().after);
    o.spec.template.spec.containers[0]!.image = 'attacker.example.com/x:1';
    return o;
  };
  const withData = (data: Record<string, string>) => ({ ...PARAMS, data: { ...PARAMS.data, ...data } });

  it('an EKS access entry identity (its group) is held to the same rules once listed; unlisted users and groups are not matched', () => {
    const remote = { username: 'arn:aws:sts::111122223333:assumed-role/tokenwatch/1700000000000', groups: ['tokenwatch-reader', 'tokenwatch-writer', 'system:authenticated'] };
    const params = withData({ groups: 'tokenwatch-writer\n' });
    const tampered = check(update('Deployment', r().before, imageChange(), { ...remote, params }));
    expect(tampered.applies).toBe(true);
    expect(tampered.denied).toEqual([expect.stringMatching(/only by the pod-template annotation kubectl\.kubernetes\.io\/restartedAt/)]);
    expect(check(update('Deployment', r().before, r().after, { ...remote, params }))).toEqual({ applies: true, allowed: true, denied: [] });
    // The default params list no remote identity; a group that merely contains the listed name does not match.
    expect(check(update('Deployment', r().before, imageChange(), remote)).applies).toBe(false);
    expect(check(update('Deployment', r().before, imageChange(), { ...remote, groups: ['tokenwatch-writer-old'], params })).applies).toBe(false);
  });

  it('a listed username (e.g. an aws-auth mapRoles username) is matched exactly', () => {
    const params = withData({ usernames: 'tokenwatch\nsomeone-else\n' });
    expect(check(update('Deployment', r().before, imageChange(), { username: 'tokenwatch', params })).allowed).toBe(false);
    expect(check(update('Deployment', r().before, imageChange(), { username: 'tokenwatch2', params })).applies).toBe(false);
  });
});

describe('admission policy: restartedAt only as an RFC 3339 time', () => {
  const restartWith = (value: string) => {
    const r = restarts.find((x) => x.kind === 'DaemonSet')!;
    const o = structuredClone(r.after);
    o.spec.template.metadata!.annotations![RESTARTED_AT] = value;
    return check(update('DaemonSet', r.before, o));
  };

  it.each(['pwn', '', '2026-11-20', '2026-11-20 12:00:00Z', '2026-13-20T12:00:00Z', '2026-11-20T12:00:00Z; rm -rf /', '1700000000'])('refuses %j', (value) => {
    expect(restartWith(value).denied).toEqual([expect.stringMatching(/^tokenwatch may set kubectl\.kubernetes\.io\/restartedAt only to an RFC 3339 time/)]);
  });

  it.each(['2026-11-20T12:00:00Z', '2026-11-20T13:00:00+01:00', '2026-11-20T12:00:00.123456789Z'])('allows %j (tokenwatch and kubectl formats)', (value) => {
    expect(restartWith(value)).toEqual({ applies: true, allowed: true, denied: [] });
  });
});

describe('admission policy: ServiceAccount recreation only as the admin allowed (params)', () => {
  const core = { group: '', version: 'v1', resource: 'serviceaccounts' };
  const ATTACKER = 'arn:aws:iam::999999999999:role/attacker';
  const ALLOWED = 'arn:aws:iam::111122223333:role/multus';
  const sa = (namespace: string, name: string, annotations?: Record<string, string>) => ({
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: { name, namespace, ...(annotations ? { annotations } : {}) },
  });
  const create = (o: ReturnType<typeof sa>, params: unknown = PARAMS) =>
    check({ operation: 'CREATE', resource: core, namespace: o.metadata.namespace, name: o.metadata.name, username: SA_USER, object: o, params });
  const del = (o: ReturnType<typeof sa>, params: unknown = PARAMS) =>
    check({ operation: 'DELETE', resource: core, namespace: o.metadata.namespace, name: o.metadata.name, username: SA_USER, oldObject: o, params });
  const withArns = { ...PARAMS, data: { ...PARAMS.data, 'role-arns.kube-system': `${ALLOWED}\narn:aws:iam::111122223333:role/other\n` } };
  const ok = { applies: true, allowed: true, denied: [] };

  it('creating one with an IAM role nobody allowed is refused, naming where to allow it', () => {
    expect(create(sa('kube-system', 'multus', { 'eks.amazonaws.com/role-arn': ATTACKER }))).toEqual({
      applies: true,
      allowed: false,
      denied: [
        'tokenwatch may create ServiceAccount kube-system/multus only with annotations the params ConfigMap allows (eks.amazonaws.com/role-arn as listed in role-arns.kube-system, other keys in allowed-annotations) (admission policy tokenwatch-writes)',
      ],
    });
    expect(create(sa('kube-system', 'multus', { 'eks.amazonaws.com/role-arn': ATTACKER }), withArns).allowed).toBe(false);
    // A listed ARN is matched whole, not as a prefix of a longer one.
    expect(create(sa('kube-system', 'multus', { 'eks.amazonaws.com/role-arn': `${ALLOWED}-admin` }), withArns).allowed).toBe(false);
  });

  it('the allow-listed role of the namespace, allowed annotation keys, or none at all pass; delete + create of the same body pass', () => {
    const body = sa('kube-system', 'multus', { 'eks.amazonaws.com/role-arn': ALLOWED, 'eks.amazonaws.com/sts-regional-endpoints': 'true' });
    expect(create(body, withArns)).toEqual(ok);
    expect(del(body, withArns)).toEqual(ok);
    expect(create(sa('kube-system', 'multus'))).toEqual(ok);
    expect(create(sa('kube-system', 'multus', { 'example.com/owner': 'team-a' })).allowed).toBe(false);
  });

  it("the namespace's list does not apply to another namespace", () => {
    const params = { ...withArns, data: { ...withArns.data, 'serviceaccount-namespaces': 'kube-system\nlogging\n' } };
    expect(create(sa('logging', 'fluentd', { 'eks.amazonaws.com/role-arn': ALLOWED }), params).allowed).toBe(false);
    expect(create(sa('logging', 'fluentd'), params)).toEqual(ok);
  });

  it("deleting CoreDNS's ServiceAccount (protected), one in an unlisted namespace, or one with an unallowed role is refused", () => {
    expect(del(sa('kube-system', 'coredns')).denied).toEqual([
      'tokenwatch may delete ServiceAccount kube-system/coredns only if it is not listed in protected-serviceaccounts of the params ConfigMap (admission policy tokenwatch-writes)',
    ]);
    expect(del(sa('payments', 'api')).denied).toEqual([
      'tokenwatch may delete ServiceAccount payments/api only in a namespace listed in serviceaccount-namespaces of the params ConfigMap (admission policy tokenwatch-writes)',
    ]);
    expect(del(sa('kube-system', 'ebs-csi-controller-sa', { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/ebs' }), withArns).allowed).toBe(false);
    expect(create(sa('kube-system', 'coredns')).allowed).toBe(false);
  });
});

describe('admission policy for remote clusters (manifests/admission-policy-remote and the chart)', () => {
  const remote = render(join(MANIFESTS, 'admission-policy-remote'));

  it('kustomize: the same policy and binding, params naming the EKS access entry group, nothing else', () => {
    expect(remote.map((o) => `${o.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}`).sort()).toEqual([
      'ConfigMap tokenwatch/tokenwatch-admission',
      'Namespace /tokenwatch',
      'ValidatingAdmissionPolicy /tokenwatch-writes',
      'ValidatingAdmissionPolicyBinding /tokenwatch-writes',
    ]);
    const r = policyObjects(remote);
    expect(r.policy).toEqual(policy);
    expect(r.binding).toEqual(binding);
    const params = remote.find((o) => o.kind === 'ConfigMap')! as K8sObject & { data: Record<string, string> };
    expect(params.data).toEqual({ ...PARAMS.data, groups: 'tokenwatch-writer\n' });
    // The access entry's identity (docs/install.md: groups tokenwatch-reader, tokenwatch-writer) is held to the rules.
    const sa = { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'multus', namespace: 'kube-system', annotations: { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::999999999999:role/attacker' } } };
    const res = admit(policy, {
      operation: 'CREATE',
      resource: { group: '', version: 'v1', resource: 'serviceaccounts' },
      namespace: 'kube-system',
      name: 'multus',
      username: 'arn:aws:sts::111122223333:assumed-role/tokenwatch/1700000000000',
      groups: ['tokenwatch-reader', 'tokenwatch-writer', 'system:authenticated'],
      object: sa,
      params,
    });
    expect(res).toMatchObject({ applies: true, allowed: false });
  });
});
