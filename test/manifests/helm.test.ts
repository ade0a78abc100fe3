/**
 * charts/tokenwatch rendered by a real helm 3.17 (test/manifests/helm.ts): lint and template for the defaults and
 * combinations, every object validated like the kustomize manifests, the default render equal to
 * `manifests/` (kustomize), the admission policy and Prometheus objects equal to the kustomize components, the node
 * probe (`probe.enabled`) equal to `manifests/probe`, the
 * values schema refusing bad values, and the chart README generated from values.yaml.
 * The RBAC = code-calls checks run on the chart's roles in rbac.test.ts.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { parseConfig } from '../../src/config/index.js';
import { Metrics } from '../../src/observability/metrics.js';
import { CHART, helmBinary, helmLint, helmTemplate, SITE_APPROVERS, SITE_CHANNEL, type ChartValues } from './helm.js';
import { MANIFESTS, idOf, render, type K8sObject } from './kustomize.js';
import { modelName, restrictedViolations, unknownFields, validateObject } from './schema.js';

const { path: helmPath, skip } = helmBinary();
const ENV = { SLACK_BOT_TOKEN: 'xoxb-x', SLACK_APP_TOKEN: 'xapp-x', SLACK_SIGNING_SECRET: '8f742231b10e8888abcd99yyyzzz85a5', PGPASSWORD: 'x' };

/** Labels and annotations only Helm adds (release bookkeeping, the config checksum). */
const HELM_ONLY_LABELS = ['app.kubernetes.io/instance', 'app.kubernetes.io/managed-by', 'app.kubernetes.io/version', 'helm.sh/chart'];

/**
 * An object without what only Helm adds, and with the config file parsed (the chart renders it with toYaml, the
 * kustomize install from a commented file), so the two installs compare field by field.
 */
function comparable(o: K8sObject): unknown {
  const c = structuredClone(o) as K8sObject & { data?: Record<string, string>; spec?: { template?: { metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> } } } };
  for (const l of HELM_ONLY_LABELS) delete c.metadata.labels?.[l];
  const tm = c.spec?.template?.metadata;
  if (tm) {
    for (const l of HELM_ONLY_LABELS) delete tm.labels?.[l];
    delete tm.annotations?.['checksum/config'];
  }
  // The chart's install sets a real channel and approvers (the schema refuses values.yaml's placeholders, which the
  // kustomize base keeps for the user to edit): compare them as the placeholders.
  if (c.kind === 'ConfigMap' && c.data?.['tokenwatch.yaml'])
    (c.data as Record<string, unknown>)['tokenwatch.yaml'] = parseYaml(c.data['tokenwatch.yaml'].replaceAll(SITE_CHANNEL, 'C0123456789').replaceAll(SITE_APPROVERS, 'S0123456789'));
  return c;
}
/** Objects by id, comparable; without Helm hooks (the `helm test` pod has no kustomize counterpart). */
const byId = (objs: K8sObject[]) => Object.fromEntries(objs.filter((o) => !o.metadata.annotations?.['helm.sh/hook']).map((o) => [idOf(o), comparable(o)]));

/** `config.store.postgres` of the PostgreSQL combinations (the Secret mounted at /etc/tokenwatch-postgres). */
const PG_CONFIG = {
  url: 'postgres://tokenwatch@db.example.com/tokenwatch',
  passwordFrom: { file: '/etc/tokenwatch/password' },
  caFile: '/etc/tokenwatch/ca.crt',
};

/** The combinations rendered, linted and validated. */
const COMBOS: [string, ChartValues][] = [
  ['defaults', {}],
  ['HTTP mode', { set: { 'config.slack.mode': 'http' } }],
  ['writer namespaces', { values: { rbac: { writer: { namespaces: ['kube-system', 'logging', 'payments'] } } } }],
  ['writer cluster-wide', { set: { 'rbac.writer.clusterWide': true } }],
  ['read-only', { set: { 'rbac.writer.enabled': false } }],
  ['IRSA', { set: { 'aws.irsaRoleArn': 'arn:aws:iam::111122223333:role/tokenwatch' } }],
  ['EKS Pod Identity + AWS Secret', { set: { 'aws.podIdentity': true, 'aws.existingSecret': 'tokenwatch-aws' } }],
  ['admission policy on', { set: { 'admissionPolicy.enabled': true } }],
  ['probe on', { set: { 'probe.enabled': true } }],
  ['secret metadata on', { set: { 'rbac.secretMetadata': true } }],
  ['namespace labels on', { set: { 'rbac.namespaces': true } }],
  ['PostgreSQL store', { values: { config: { store: { path: '/data/tokenwatch.db', postgres: PG_CONFIG } }, postgres: { existingSecret: 'tokenwatch-postgres' } } }],
  ['PostgreSQL store, 3 replicas, port 6543', { values: { replicas: 3, config: { store: { postgres: { url: 'postgres://tokenwatch@db.example.com:6543/tokenwatch', passwordFrom: { env: 'PGPASSWORD' } } } } } }],
  ['Prometheus Operator', { set: { 'serviceMonitor.enabled': true, 'prometheusRule.enabled': true }, values: { serviceMonitor: { labels: { release: 'kps' } } } }],
  [
    'scheduling, labels, image digest, no persistence',
    {
      values: {
        image: { digest: `sha256:${'a'.repeat(64)}`, pullSecrets: ['regcred'] },
        persistence: { enabled: false },
        replicas: 1,
        nodeSelector: { 'kubernetes.io/os': 'linux' },
        tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'ops', effect: 'NoSchedule' }],
        affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'role', operator: 'In', values: ['ops'] }] }] } } },
        commonLabels: { team: 'platform' },
        commonAnnotations: { owner: 'platform@example.com' },
        podLabels: { 'sidecar.istio.io/inject': 'false' },
        podAnnotations: { 'example.com/x': 'y' },
      },
    },
  ],
];

describe.skipIf(!helmPath)(`Helm chart charts/tokenwatch${skip ? ` (skipped: ${skip})` : ''}`, () => {
  // Collected even when skipped: render only where helm runs.
  const rendered = new Map(helmPath ? COMBOS.map(([name, v]) => [name, helmTemplate(v)]) : []);
  const defaults = rendered.get('defaults') ?? [];
  const find = (objs: K8sObject[], kind: string, name: string) => {
    const o = objs.find((x) => x.kind === kind && x.metadata.name === name);
    if (!o) throw new Error(`${kind} ${name} not rendered`);
    return o as K8sObject & Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  };

  it.each(COMBOS)('%s: helm lint --strict passes', (_name, v) => {
    expect(helmLint(v)).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
  });

  it.each(COMBOS.map(([n]) => n))('%s: every object validates (kubernetes-models, no unknown fields), unique, restricted pods, config parses', (name) => {
    const objs = rendered.get(name)!;
    expect(objs.length).toBeGreaterThan(5);
    for (const o of objs) {
      expect(validateObject(o), idOf(o)).toBe('');
      expect(unknownFields(o, modelName(o)), idOf(o)).toEqual([]);
    }
    expect(new Set(objs.map(idOf)).size).toBe(objs.length);
    const pod = find(objs, 'Deployment', 'tokenwatch').spec.template.spec;
    expect(restrictedViolations(pod)).toEqual([]);
    const config = parseConfig(parseYaml(find(objs, 'ConfigMap', 'tokenwatch-config').data['tokenwatch.yaml']), ENV);
    expect(config.clusters.map((c) => c.name)).toEqual(['my-cluster']);
  });

  it('defaults: the same objects as `kubectl kustomize manifests/` (names, RBAC, security context, everything) but the Namespace', () => {
    const kustomize = render(MANIFESTS);
    expect(kustomize.filter((o) => o.kind === 'Namespace').map(idOf)).toEqual(['v1 Namespace /tokenwatch']);
    expect(byId(defaults)).toEqual(byId(kustomize.filter((o) => o.kind !== 'Namespace')));
    // Helm's own labels are there (and only those were ignored).
    expect(find(defaults, 'Deployment', 'tokenwatch').metadata.labels).toEqual({
      'app.kubernetes.io/name': 'tokenwatch',
      'app.kubernetes.io/component': 'server',
      'app.kubernetes.io/instance': 'tokenwatch',
      'app.kubernetes.io/managed-by': 'Helm',
      'app.kubernetes.io/version': '0.1.0',
      'helm.sh/chart': 'tokenwatch-0.1.0',
    });
  });

  const kubectl = (() => {
    try {
      execFileSync('kubectl', ['version', '--client'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  })();
  it.skipIf(!kubectl)('defaults: also equal to the output of the real `kubectl kustomize manifests/` (where kubectl is installed)', () => {
    const real = parseAllDocuments(execFileSync('kubectl', ['kustomize', MANIFESTS], { encoding: 'utf8' })).map((d) => d.toJS() as K8sObject);
    expect(byId(defaults)).toEqual(byId(real.filter((o) => o.kind !== 'Namespace')));
  });

  it('defaults (embedded SQLite): one replica, strategy Recreate, the PVC, no PodDisruptionBudget, no pod affinity; replicas ignored', () => {
    for (const objs of [defaults, helmTemplate({ set: { replicas: 5 } })]) {
      const d = find(objs, 'Deployment', 'tokenwatch');
      expect(d.spec.replicas).toBe(1);
      expect(d.spec.strategy).toEqual({ type: 'Recreate' });
      expect(d.spec.template.spec.affinity).toBeUndefined();
      expect(d.spec.template.spec.topologySpreadConstraints).toBeUndefined();
      expect(objs.filter((o) => o.kind === 'PodDisruptionBudget')).toEqual([]);
      expect(objs.filter((o) => o.kind === 'PersistentVolumeClaim').map((o) => o.metadata.name)).toEqual(['tokenwatch-data']);
    }
  });

  it('PostgreSQL store: no PVC, two replicas spread across zones and nodes (preferred), RollingUpdate, PDB maxUnavailable 1, the Secret in the config directory, egress to the server port', () => {
    const objs = rendered.get('PostgreSQL store')!;
    expect(objs.filter((o) => o.kind === 'PersistentVolumeClaim')).toEqual([]);
    const d = find(objs, 'Deployment', 'tokenwatch');
    expect(d.spec.replicas).toBe(2);
    expect(d.spec.strategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
    const pod = d.spec.template.spec;
    const selector = { matchLabels: { 'app.kubernetes.io/name': 'tokenwatch', 'app.kubernetes.io/component': 'server', 'app.kubernetes.io/instance': 'tokenwatch' } };
    expect(pod.topologySpreadConstraints).toEqual([
      { maxSkew: 1, topologyKey: 'topology.kubernetes.io/zone', whenUnsatisfiable: 'ScheduleAnyway', labelSelector: selector },
      { maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'ScheduleAnyway', labelSelector: selector },
    ]);
    expect(pod.affinity).toBeUndefined();
    expect(pod.volumes.find((v: { name: string }) => v.name === 'data')).toEqual({ name: 'data', emptyDir: {} });
    expect(pod.volumes.find((v: { name: string }) => v.name === 'config').projected.sources).toEqual([{ configMap: { name: 'tokenwatch-config' } }, { secret: { name: 'tokenwatch-postgres' } }]);
    expect(find(objs, 'PodDisruptionBudget', 'tokenwatch').spec.maxUnavailable).toBe(1);
    expect(find(objs, 'NetworkPolicy', 'tokenwatch').spec.egress).toContainEqual({ ports: [{ protocol: 'TCP', port: 5432 }] });
    const three = rendered.get('PostgreSQL store, 3 replicas, port 6543')!;
    expect(find(three, 'Deployment', 'tokenwatch').spec.replicas).toBe(3);
    expect(find(three, 'NetworkPolicy', 'tokenwatch').spec.egress).toContainEqual({ ports: [{ protocol: 'TCP', port: 6543 }] });
    expect(find(three, 'Deployment', 'tokenwatch').spec.template.spec.volumes.find((v: { name: string }) => v.name === 'config').projected.sources).toHaveLength(1);
  });

  it('PostgreSQL store: the same objects as `kubectl kustomize manifests/overlays/postgres` but the Namespace and the config', () => {
    const kustomize = render(join(MANIFESTS, 'overlays', 'postgres')).filter((o) => o.kind !== 'Namespace' && o.kind !== 'ConfigMap');
    const chart = rendered.get('PostgreSQL store')!.filter((o) => o.kind !== 'ConfigMap');
    expect(byId(chart)).toEqual(byId(kustomize));
  });

  it('heapMiB sets the Node heap cap (NODE_OPTIONS) of serve; the default is 384 MiB under the 512 MiB limit', () => {
    const nodeOptions = (objs: typeof defaults) =>
      find(objs, 'Deployment', 'tokenwatch').spec.template.spec.containers[0].env.find((e: { name: string }) => e.name === 'NODE_OPTIONS')?.value;
    expect(nodeOptions(defaults)).toBe('--max-old-space-size=384');
    expect(nodeOptions(helmTemplate({ set: { heapMiB: 768, 'resources.limits.memory': '1Gi' } }))).toBe('--max-old-space-size=768');
  });

  it('the comparison fails on a difference (so the check above can fail)', () => {
    const changed = helmTemplate({ set: { 'resources.limits.memory': '1Gi' } });
    expect(byId(changed)).not.toEqual(byId(defaults));
  });

  it('admission policy on = the kustomize component; for another release/namespace it names that ServiceAccount, and no Lease', () => {
    const kustomize = render(MANIFESTS, [join(MANIFESTS, 'components/admission-policy')]);
    expect(byId(rendered.get('admission policy on')!)).toEqual(byId(kustomize.filter((o) => o.kind !== 'Namespace')));
    const other = helmTemplate({ set: { 'admissionPolicy.enabled': true } }, 'tw', 'ops');
    const policy = find(other, 'ValidatingAdmissionPolicy', 'tw-tokenwatch-writes');
    expect(policy.spec.matchConditions).toHaveLength(1);
    expect(policy.spec.matchConditions[0].name).toBe('tokenwatch-identity');
    expect(policy.spec.matchConditions[0].expression.startsWith("request.userInfo.username == 'system:serviceaccount:ops:tw-tokenwatch' || (params != null")).toBe(true);
    expect(find(other, 'ValidatingAdmissionPolicyBinding', 'tw-tokenwatch-writes').spec.paramRef).toEqual({ name: 'tw-tokenwatch-admission', namespace: 'ops', parameterNotFoundAction: 'Allow' });
    expect(find(other, 'ConfigMap', 'tw-tokenwatch-admission').metadata.namespace).toBe('ops');
    expect(JSON.stringify(policy.spec)).not.toMatch(/lease|coordination\.k8s\.io/i);
    expect(find(other, 'Deployment', 'tw-tokenwatch').spec.template.spec.containers[0].env.map((e: { name: string }) => e.name)).not.toContain('TOKENWATCH_LEASE_NAME');
    // Kubernetes 1.30 minimum, said at install time.
    expect(helmTemplate({ set: { 'admissionPolicy.enabled': true } }, 'tokenwatch', 'tokenwatch', '1.30.0').some((o) => o.kind === 'ValidatingAdmissionPolicy')).toBe(true);
    expect(() => helmTemplate({ set: { 'admissionPolicy.enabled': true } }, 'tokenwatch', 'tokenwatch', '1.29.4')).toThrow(
      'admissionPolicy.enabled needs Kubernetes 1.30 or newer (ValidatingAdmissionPolicy v1); this cluster is v1.29.4: set admissionPolicy.enabled=false',
    );
  });

  it('admission policy for a remote cluster (remoteOnly) = manifests/admission-policy-remote but the Namespace; nothing else rendered', () => {
    const remote = helmTemplate({ values: { admissionPolicy: { enabled: true, remoteOnly: true, params: { groups: ['tokenwatch-writer'] } } } });
    const kustomize = render(join(MANIFESTS, 'admission-policy-remote'));
    expect(byId(remote)).toEqual(byId(kustomize.filter((o) => o.kind !== 'Namespace')));
    expect(() => helmTemplate({ set: { 'admissionPolicy.remoteOnly': true } })).toThrow('admissionPolicy.remoteOnly renders only the admission policy: set admissionPolicy.enabled=true too');
    // Fails closed: with its default (empty) params the remote policy would match no remote identity.
    expect(() => helmTemplate({ values: { admissionPolicy: { enabled: true, remoteOnly: true } } })).toThrow(
      'admissionPolicy.remoteOnly with empty admissionPolicy.params.groups and admissionPolicy.params.usernames would match no remote identity',
    );
    expect(helmTemplate({ values: { admissionPolicy: { enabled: true, remoteOnly: true, params: { usernames: ['tokenwatch'] } } } }).some((o) => o.kind === 'ValidatingAdmissionPolicy')).toBe(true);
    const arns = helmTemplate({ values: { admissionPolicy: { enabled: true, params: { roleArns: { 'kube-system': ['arn:aws:iam::111122223333:role/multus'] } } } } });
    expect(find(arns, 'ConfigMap', 'tokenwatch-admission').data['role-arns.kube-system']).toBe('arn:aws:iam::111122223333:role/multus\n');
  });

  it('probe on = `kubectl kustomize manifests/probe` (namespace, ServiceAccount, Roles, DaemonSet), the rest unchanged', () => {
    const objs = rendered.get('probe on')!;
    const defaultIds = new Set(defaults.map(idOf));
    const probe = objs.filter((o) => !defaultIds.has(idOf(o)));
    expect(byId(objs.filter((o) => defaultIds.has(idOf(o))))).toEqual(byId(defaults));
    expect(byId(probe)).toEqual(byId(render(join(MANIFESTS, 'probe'))));
    if (kubectl) {
      const real = parseAllDocuments(execFileSync('kubectl', ['kustomize', join(MANIFESTS, 'probe')], { encoding: 'utf8' })).map((d) => d.toJS() as K8sObject);
      expect(byId(probe)).toEqual(byId(real));
    }
  });

  it('probe values: interval, globs with their host paths, scheduling, pull secrets; serve of another release reads the reports; no namespace on request', () => {
    const objs = helmTemplate(
      {
        values: {
          image: { pullSecrets: ['regcred'] },
          probe: {
            enabled: true,
            createNamespace: false,
            interval: '1h',
            globs: ['/etc/cni/net.d/**/*kubeconfig*', '/var/run/istio-cni/*kubeconfig*'],
            hostPaths: [
              { name: 'cni-net-d', path: '/etc/cni/net.d' },
              { name: 'istio-cni', path: '/var/run/istio-cni' },
            ],
            nodeSelector: { 'kubernetes.io/os': 'linux' },
            tolerations: [{ key: 'dedicated', operator: 'Exists', effect: 'NoSchedule' }],
          },
        },
      },
      'tw',
      'ops',
    );
    expect(objs.filter((o) => o.kind === 'Namespace')).toEqual([]);
    const ds = find(objs, 'DaemonSet', 'tw-tokenwatch-probe');
    expect(ds.metadata.namespace).toBe('tokenwatch-probe');
    const pod = ds.spec.template.spec;
    expect(pod.serviceAccountName).toBe('tw-tokenwatch-probe');
    expect(pod.imagePullSecrets).toEqual([{ name: 'regcred' }]);
    expect(pod.nodeSelector).toEqual({ 'kubernetes.io/os': 'linux' });
    expect(pod.tolerations).toEqual([{ key: 'dedicated', operator: 'Exists', effect: 'NoSchedule' }]);
    expect(pod.containers[0].image).toBe('registry.example.com/tokenwatch:0.1.0');
    expect(pod.containers[0].args).toEqual(['probe', '--host-root', '/host', '--interval', '1h', '--glob', '/etc/cni/net.d/**/*kubeconfig*', '--glob', '/var/run/istio-cni/*kubeconfig*']);
    expect(pod.volumes.filter((v: { hostPath?: object }) => v.hostPath)).toEqual([
      { name: 'cni-net-d', hostPath: { path: '/etc/cni/net.d', type: 'Directory' } },
      { name: 'istio-cni', hostPath: { path: '/var/run/istio-cni', type: 'Directory' } },
    ]);
    expect(pod.containers[0].volumeMounts.filter((m: { name: string }) => m.name !== 'tmp')).toEqual([
      { name: 'cni-net-d', mountPath: '/host/etc/cni/net.d', readOnly: true },
      { name: 'istio-cni', mountPath: '/host/var/run/istio-cni', readOnly: true },
      { name: 'proof', mountPath: '/var/run/secrets/tokenwatch-probe', readOnly: true },
    ]);
    expect(find(objs, 'RoleBinding', 'tw-tokenwatch-probe-reader').subjects).toEqual([{ kind: 'ServiceAccount', name: 'tw-tokenwatch', namespace: 'ops' }]);
    for (const o of objs) {
      expect(validateObject(o), idOf(o)).toBe('');
      expect(unknownFields(o, modelName(o)), idOf(o)).toEqual([]);
    }
    expect(helmLint({ set: { 'probe.enabled': true, 'probe.createNamespace': false } })).toMatch(/0 chart\(s\) failed/);
  });

  it('Prometheus Operator on = the kustomize component (+ the extra selector label); the rule uses metrics tokenwatch exports', async () => {
    const kustomize = render(MANIFESTS, [join(MANIFESTS, 'components/prometheus')]);
    const helmObjs = rendered.get('Prometheus Operator')!;
    const sm = find(helmObjs, 'ServiceMonitor', 'tokenwatch');
    expect(sm.metadata.labels?.['release']).toBe('kps');
    delete sm.metadata.labels?.['release'];
    expect(byId(helmObjs)).toEqual(byId(kustomize.filter((o) => o.kind !== 'Namespace')));
    const rule = find(helmObjs, 'PrometheusRule', 'tokenwatch');
    const exprs: string[] = rule.spec.groups[0].rules.map((r: { expr: string }) => r.expr);
    expect(rule.spec.groups[0].rules.map((r: { alert: string }) => r.alert)).toEqual(['TokenwatchTokenRejectionSoon', 'TokenwatchPollsFailing']);
    expect(exprs[0]).toBe('min by (cluster) (tokenwatch_days_to_nearest_rejection) < 7');
    const m = new Metrics({ defaultMetrics: false });
    m.daysToRejection.set({ cluster: 'a' }, 3);
    m.polls.inc({ cluster: 'a', outcome: 'ok' });
    m.polls.inc({ cluster: 'a', outcome: 'error' });
    const exported = await m.registry.metrics();
    for (const name of exprs.flatMap((e) => [...e.matchAll(/tokenwatch_[a-z_]+/g)].map((x) => x[0]))) expect(exported, name).toContain(`# TYPE ${name} `);
    expect(exported).toContain('tokenwatch_polls_total{cluster="a",outcome="error"} 1');
    expect(exported).toContain('tokenwatch_polls_total{cluster="a",outcome="ok"} 1');
    expect(helmTemplate({ set: { 'prometheusRule.enabled': true, 'prometheusRule.daysToRejection': 14 } }).find((o) => o.kind === 'PrometheusRule')).toMatchObject({
      spec: { groups: [{ rules: [{ expr: 'min by (cluster) (tokenwatch_days_to_nearest_rejection) < 14' }, {}] }] },
    });
  });

  it('HTTP mode: a slack container port, a Service for the Ingress, and NetworkPolicy ingress on it', () => {
    const objs = rendered.get('HTTP mode')!;
    const c = find(objs, 'Deployment', 'tokenwatch').spec.template.spec.containers[0];
    expect(c.ports).toEqual([
      { name: 'http', containerPort: 8080, protocol: 'TCP' },
      { name: 'slack', containerPort: 3000, protocol: 'TCP' },
    ]);
    expect(find(objs, 'Service', 'tokenwatch-slack').spec.ports).toEqual([{ name: 'http-slack', port: 3000, targetPort: 'slack', protocol: 'TCP' }]);
    expect(find(objs, 'NetworkPolicy', 'tokenwatch').spec.ingress[2]).toEqual({
      from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } }],
      ports: [{ protocol: 'TCP', port: 3000 }],
    });
    expect(parseConfig(parseYaml(find(objs, 'ConfigMap', 'tokenwatch-config').data['tokenwatch.yaml']), ENV).slack?.mode).toBe('http');
    expect(defaults.some((o) => o.metadata.name === 'tokenwatch-slack')).toBe(false);
  });

  it('audit webhook on: a container port, a Service, the Secret mounted, NetworkPolicy ingress from the given peers only; off by default', () => {
    const peers = [{ ipBlock: { cidr: '10.0.0.0/16' } }];
    const objs = helmTemplate({ values: { webhook: { enabled: true, port: 9443, existingSecret: 'tw-webhook', from: peers } } });
    const pod = find(objs, 'Deployment', 'tokenwatch').spec.template.spec;
    expect(pod.containers[0].ports).toContainEqual({ name: 'webhook', containerPort: 9443, protocol: 'TCP' });
    expect(pod.containers[0].volumeMounts).toContainEqual({ name: 'webhook', mountPath: '/etc/tokenwatch-webhook', readOnly: true });
    expect(pod.volumes).toContainEqual({ name: 'webhook', secret: { secretName: 'tw-webhook' } });
    expect(find(objs, 'Service', 'tokenwatch-webhook').spec.ports).toEqual([{ name: 'https-webhook', port: 9443, targetPort: 'webhook', protocol: 'TCP' }]);
    expect(find(objs, 'NetworkPolicy', 'tokenwatch').spec.ingress).toContainEqual({ from: peers, ports: [{ protocol: 'TCP', port: 9443 }] });
    const closed = helmTemplate({ values: { webhook: { enabled: true } } });
    expect(find(closed, 'NetworkPolicy', 'tokenwatch').spec.ingress.some((r: { ports: { port: number }[] }) => r.ports[0]!.port === 8443)).toBe(false);
    expect(defaults.some((o) => o.metadata.name === 'tokenwatch-webhook')).toBe(false);
  });

  it('NetworkPolicy: an empty peer list closes its port, never opens it to every source (a rule with from: [] would)', () => {
    // Found in a new-user trial: the chart README shows these lists as [], and `from: []` admits everyone.
    // The first rule, always there, admits only the chart's own `helm test` pod.
    const only = (set: ChartValues) => find(helmTemplate(set), 'NetworkPolicy', 'tokenwatch').spec.ingress.slice(1);
    expect(only({ values: { networkPolicy: { metricsFrom: [], slackFrom: [] }, config: { slack: { mode: 'http' } } } })).toEqual([]);
    const slackOnly = only({ values: { networkPolicy: { metricsFrom: [] }, config: { slack: { mode: 'http' } } } });
    expect(slackOnly).toEqual([{ from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } }], ports: [{ protocol: 'TCP', port: 3000 }] }]);
    for (const rule of only({ values: { networkPolicy: { slackFrom: [] }, config: { slack: { mode: 'http' } } } })) expect(rule.from.length).toBeGreaterThan(0);
  });

  it('writer namespaces / cluster-wide / read-only', () => {
    const writerBindings = (objs: K8sObject[]) => objs.filter((o) => o.kind.endsWith('RoleBinding') && o.metadata.name === 'tokenwatch-writer').map(idOf);
    expect(writerBindings(defaults)).toEqual(['rbac.authorization.k8s.io/v1 RoleBinding kube-system/tokenwatch-writer']);
    expect(writerBindings(rendered.get('writer namespaces')!)).toEqual(['kube-system', 'logging', 'payments'].map((n) => `rbac.authorization.k8s.io/v1 RoleBinding ${n}/tokenwatch-writer`));
    expect(writerBindings(rendered.get('writer cluster-wide')!)).toEqual(['rbac.authorization.k8s.io/v1 ClusterRoleBinding /tokenwatch-writer']);
    expect(rendered.get('read-only')!.filter((o) => o.metadata.name === 'tokenwatch-writer')).toEqual([]);
  });

  it('IRSA annotation, Pod Identity egress, AWS Secret', () => {
    expect(find(rendered.get('IRSA')!, 'ServiceAccount', 'tokenwatch').metadata.annotations).toEqual({ 'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/tokenwatch' });
    const pi = rendered.get('EKS Pod Identity + AWS Secret')!;
    // The same policy as overlays/eks/networkpolicy-pod-identity.yaml (listed there only in a comment).
    const file = parseYaml(readFileSync(join(MANIFESTS, 'overlays/eks/networkpolicy-pod-identity.yaml'), 'utf8')) as K8sObject;
    expect(byId([find(pi, 'NetworkPolicy', 'tokenwatch-eks-pod-identity')])).toEqual(byId([file]));
    expect(find(pi, 'Deployment', 'tokenwatch').spec.template.spec.containers[0].envFrom).toEqual([{ secretRef: { name: 'tokenwatch-slack' } }, { secretRef: { name: 'tokenwatch-aws' } }]);
  });

  it('namespace labels on: a ClusterRole of get, list and watch namespaces, bound to tokenwatch; off by default', () => {
    const objs = rendered.get('namespace labels on')!;
    expect(find(objs, 'ClusterRole', 'tokenwatch-namespace-labels').rules).toEqual([{ apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list', 'watch'] }]);
    expect(find(objs, 'ClusterRoleBinding', 'tokenwatch-namespace-labels').roleRef.name).toBe('tokenwatch-namespace-labels');
    expect(JSON.stringify(defaults)).not.toContain('tokenwatch-namespace-labels');
  });

  it('secret metadata on: the ClusterRole and the config flag on every cluster with API access', () => {
    const objs = rendered.get('secret metadata on')!;
    expect(find(objs, 'ClusterRole', 'tokenwatch-secret-metadata').rules).toEqual([{ apiGroups: [''], resources: ['secrets'], verbs: ['list'] }]);
    const config = parseConfig(parseYaml(find(objs, 'ConfigMap', 'tokenwatch-config').data['tokenwatch.yaml']), ENV);
    expect(config.clusters[0]!.kubernetes).toEqual({ inCluster: true, secretMetadata: true });
    const none = helmTemplate({
      set: { 'rbac.secretMetadata': true, 'config.slack.enabled': false },
      values: { config: { clusters: [{ name: 'offline', audit: { file: { path: '/x' } }, kubernetes: { none: true } }] } },
    });
    expect(parseConfig(parseYaml(find(none, 'ConfigMap', 'tokenwatch-config').data['tokenwatch.yaml']), ENV).clusters[0]!.kubernetes).toEqual({ none: true });
    expect(JSON.stringify(defaults)).not.toContain('secrets');
  });

  it('scheduling, labels, digest, pull secrets; a user affinity as given', () => {
    const objs = rendered.get('scheduling, labels, image digest, no persistence')!;
    const d = find(objs, 'Deployment', 'tokenwatch');
    const pod = d.spec.template.spec;
    expect(pod.containers[0].image).toBe(`registry.example.com/tokenwatch@sha256:${'a'.repeat(64)}`);
    expect(pod.imagePullSecrets).toEqual([{ name: 'regcred' }]);
    expect(pod.nodeSelector).toEqual({ 'kubernetes.io/os': 'linux' });
    expect(pod.tolerations).toHaveLength(1);
    expect(Object.keys(pod.affinity).sort()).toEqual(['nodeAffinity']);
    expect(pod.volumes[0]).toEqual({ name: 'data', emptyDir: {} });
    expect(objs.some((o) => o.kind === 'PersistentVolumeClaim')).toBe(false);
    expect(d.spec.replicas).toBe(1);
    expect(d.spec.template.metadata.labels['sidecar.istio.io/inject']).toBe('false');
    expect(d.spec.template.metadata.annotations['example.com/x']).toBe('y');
    for (const o of objs) {
      expect(o.metadata.labels?.['team'], idOf(o)).toBe('platform');
      expect(o.metadata.annotations?.['owner'], idOf(o)).toBe('platform@example.com');
    }
  });

  it.each<[string, ChartValues, RegExp]>([
    ['a typo in a value name', { set: { replica: 3 } }, /Additional property replica is not allowed/],
    ['a bad namespace name', { values: { rbac: { writer: { namespaces: ['Kube_System'] } } } }, /rbac\.writer\.namespaces\.0: Does not match pattern/],
    ['a wrong type', { set: { 'rbac.secretMetadata': 'yes' } }, /rbac\.secretMetadata: Invalid type\. Expected: boolean, given: string/],
    ['an unknown Slack mode', { set: { 'config.slack.mode': 'webhook' } }, /config\.slack\.mode: config\.slack\.mode must be one of the following: "socket", "http"/],
    ['no clusters', { values: { config: { clusters: [] } } }, /config\.clusters: Array must have at least 1 items/],
    ['a bad IRSA role ARN', { set: { 'aws.irsaRoleArn': 'tokenwatch' } }, /aws\.irsaRoleArn: Does not match pattern/],
    ['a probe host path that is a glob', { values: { probe: { enabled: true, hostPaths: [{ name: 'cni', path: '/etc/cni/*' }] } } }, /probe\.hostPaths\.0\.path: Does not match pattern/],
    ['a bad probe interval', { set: { 'probe.interval': 'often' } }, /probe\.interval: Does not match pattern/],
  ])('values.schema.json refuses %s with a clear message', (_what, v, message) => {
    expect(() => helmTemplate(v)).toThrow(message);
  });

  it('the chart README is what @bitnami/readme-generator-for-helm generates from values.yaml (run it after editing values)', () => {
    const dir = resolve(import.meta.dirname, '../artifacts/readme');
    mkdirSync(dir, { recursive: true });
    const copy = join(dir, 'README.md');
    copyFileSync(join(CHART, 'README.md'), copy);
    const bin = join(createRequire(import.meta.url).resolve('@bitnami/readme-generator-for-helm/package.json'), '../bin/index.js');
    execFileSync(process.execPath, [bin, '--values', join(CHART, 'values.yaml'), '--readme', copy], { stdio: 'pipe' });
    expect(readFileSync(copy, 'utf8'), 'charts/tokenwatch/README.md is stale: npm run chart:readme').toBe(readFileSync(join(CHART, 'README.md'), 'utf8'));
  });
});

it.skipIf(!skip)(`Helm chart tests (runs only to report why they were skipped)${skip ? `: ${skip}` : ''}`, () => {
  expect(skip).toBeTruthy();
});
