import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { parseConfig } from '../../src/config/index.js';
import { MANIFEST_SCOPES } from '../../src/sandbox/fakes/slack.js';
import { MANIFESTS, idOf, kustomizationOf, nonResourceFiles, readDocs, render, yamlFiles, type K8sObject } from './kustomize.js';
import { modelName, restrictedViolations, unknownFields, validateObject } from './schema.js';

/** The kustomizations a user applies (`kubectl apply -k manifests/<entry>`). */
const ENTRIES = ['.', 'base', 'writer', 'overlays/eks', 'overlays/postgres', 'overlays/writer-namespaces', 'overlays/writer-cluster-wide', 'probe', 'admission-policy-remote'];
/** The optional components (`components:` of a kustomization). */
const COMPONENTS = ['components/admission-policy', 'components/namespace-labels', 'components/prometheus', 'components/secret-metadata'];
/** Entries with every component added, as a user's kustomization listing them renders. */
const WITH_COMPONENTS = ['.', 'overlays/writer-cluster-wide'];
const rendered = new Map(ENTRIES.map((e) => [e, render(join(MANIFESTS, e))]));
for (const e of WITH_COMPONENTS) rendered.set(`${e}+components`, render(join(MANIFESTS, e), COMPONENTS.map((c) => join(MANIFESTS, c))));
const install = rendered.get('.')!;

function find<T = K8sObject>(objs: K8sObject[], kind: string, name: string): T {
  const o = objs.find((x) => x.kind === kind && x.metadata.name === name);
  if (!o) throw new Error(`${kind} ${name} not rendered`);
  return o as unknown as T;
}

interface Container {
  name: string;
  image: string;
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[];
  envFrom?: { secretRef?: { name: string; optional?: boolean } }[];
  ports?: { name: string; containerPort: number }[];
  livenessProbe?: { httpGet?: { path: string; port: string | number } };
  readinessProbe?: { httpGet?: { path: string; port: string | number } };
  startupProbe?: { httpGet?: { path: string; port: string | number } };
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
  securityContext?: Record<string, unknown>;
}
interface PodSpec {
  serviceAccountName?: string;
  containers: Container[];
  volumes: { name: string; persistentVolumeClaim?: { claimName: string }; projected?: { sources: { configMap?: { name: string }; secret?: { name: string } }[] }; emptyDir?: object }[];
  affinity?: { podAffinity?: { requiredDuringSchedulingIgnoredDuringExecution?: { labelSelector: { matchLabels: Record<string, string> }; topologyKey: string }[] } };
  securityContext?: Record<string, unknown>;
}
interface DeploymentLike {
  metadata: { namespace: string };
  spec: { replicas: number; selector: { matchLabels: Record<string, string> }; template: { metadata: { labels: Record<string, string> }; spec: PodSpec } };
}

const deployment = find<DeploymentLike>(install, 'Deployment', 'tokenwatch');
const pod = deployment.spec.template.spec;
const container = pod.containers[0]!;
const podLabels = deployment.spec.template.metadata.labels;
const matches = (selector: Record<string, string>) => Object.entries(selector).every(([k, v]) => podLabels[k] === v);

describe('every manifest validates offline', () => {
  const files = yamlFiles(MANIFESTS);
  const patchesAndInputs = new Set(ENTRIES.flatMap((e) => nonResourceFiles(join(MANIFESTS, e))));
  const objectFiles = files.filter((f) => !f.endsWith('kustomization.yaml') && !patchesAndInputs.has(f) && !f.endsWith('slack-app.yaml'));

  it('finds the expected files (resources, patches, generator inputs)', () => {
    expect(objectFiles.map((f) => relative(MANIFESTS, f))).toEqual([
      'admission-policy-remote/namespace.yaml',
      'base/deployment.yaml',
      'base/namespace.yaml',
      'base/networkpolicy.yaml',
      'base/pvc.yaml',
      'base/rbac-reader.yaml',
      'base/secret.example.yaml',
      'base/service.yaml',
      'base/serviceaccount.yaml',
      'components/admission-policy/admission-policy.yaml',
      'components/admission-policy/params.yaml',
      'components/namespace-labels/rbac-namespace-labels.yaml',
      'components/prometheus/prometheusrule.yaml',
      'components/prometheus/servicemonitor.yaml',
      'components/secret-metadata/rbac-secret-metadata.yaml',
      'overlays/eks/networkpolicy-pod-identity.yaml',
      'overlays/eks/storageclass.yaml',
      'overlays/postgres/pdb.yaml',
      'overlays/writer-namespaces/rolebindings.yaml',
      'probe/daemonset.yaml',
      'probe/namespace.yaml',
      'probe/rbac.yaml',
      'probe/serviceaccount.yaml',
      'writer/rbac-writer.yaml',
    ]);
    expect([...patchesAndInputs].map((f) => relative(MANIFESTS, f)).sort()).toEqual([
      'admission-policy-remote/params-remote.yaml',
      'base/tokenwatch.yaml',
      'overlays/eks/pvc-gp3.yaml',
      'overlays/eks/serviceaccount-irsa.yaml',
      'overlays/postgres/delete-pvc.yaml',
      'overlays/postgres/deployment.yaml',
      'overlays/postgres/networkpolicy.yaml',
      'overlays/writer-namespaces/delete-writer-clusterrolebinding.yaml',
    ]);
  });

  it.each(objectFiles.map((f) => relative(MANIFESTS, f)))('%s: schema (kubernetes-models 4.5) and no unknown fields', (file) => {
    const docs = readDocs(join(MANIFESTS, file)) as K8sObject[];
    expect(docs.length).toBeGreaterThan(0);
    for (const d of docs) {
      expect(validateObject(d), idOf(d)).toBe('');
      expect(unknownFields(d, modelName(d)), idOf(d)).toEqual([]);
    }
  });

  it.each([...rendered.keys()])('kustomization %s renders objects that all validate, with unique identities', (entry) => {
    const objs = rendered.get(entry)!;
    expect(objs.length).toBeGreaterThan(0);
    for (const o of objs) {
      expect(validateObject(o), idOf(o)).toBe('');
      expect(unknownFields(o, modelName(o)), idOf(o)).toEqual([]);
    }
    expect(new Set(objs.map(idOf)).size).toBe(objs.length);
  });

  it('the validators fail on bad input (so the checks above can fail)', () => {
    const bad = structuredClone(deployment) as unknown as K8sObject & { spec: { replicas: unknown; template: { spec: PodSpec } } };
    bad.spec.replicas = '2';
    bad.spec.template.spec.containers[0]!.securityContext!['readOnlyRootFileSystem'] = true;
    expect(validateObject(bad)).toBe('data/spec/replicas must be integer');
    expect(unknownFields(bad, modelName(bad))).toEqual(['spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem: unknown field of V1SecurityContext']);
    expect(validateObject({ apiVersion: 'example.com/v1', kind: 'Widget' })).toBe('no schema for example.com/v1/Widget');
  });

  const kubectl = (() => {
    try {
      execFileSync('kubectl', ['version', '--client'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  })();
  it.skipIf(!kubectl).each([...rendered.keys()])('the test renderer agrees with `kubectl kustomize` for %s', (entry) => {
    let dir = join(MANIFESTS, entry);
    if (entry.endsWith('+components')) {
      // A user's kustomization that lists the components (kustomize refuses absolute paths: a git-ignored folder).
      dir = join(MANIFESTS, '../test/artifacts/kustomize', entry.replace(/[^a-z]+/g, '-'));
      mkdirSync(dir, { recursive: true });
      const up = relative(dir, MANIFESTS);
      const e = entry.slice(0, -'+components'.length);
      writeFileSync(join(dir, 'kustomization.yaml'), `resources:\n  - ${join(up, e)}\ncomponents:\n${COMPONENTS.map((c) => `  - ${join(up, c)}\n`).join('')}`);
    }
    const out = execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8' });
    const real = parseAllDocuments(out).map((d) => d.toJS() as K8sObject);
    const byId = (objs: K8sObject[]) => Object.fromEntries(objs.map((o) => [idOf(o), o]));
    expect(byId(rendered.get(entry)!)).toEqual(byId(real));
  });
});

describe('install layout', () => {
  it('`kubectl apply -k manifests/` installs base + writer bound per namespace; the Secret example is not applied', () => {
    expect(kustomizationOf(MANIFESTS)['resources']).toEqual(['overlays/writer-namespaces']);
    expect(kustomizationOf(MANIFESTS)['components']).toBeUndefined();
    expect(install.map(idOf).sort()).toEqual(
      [
        'v1 Namespace /tokenwatch',
        'v1 ServiceAccount tokenwatch/tokenwatch',
        'rbac.authorization.k8s.io/v1 ClusterRole /tokenwatch-reader',
        'rbac.authorization.k8s.io/v1 ClusterRoleBinding /tokenwatch-reader',
        'rbac.authorization.k8s.io/v1 ClusterRole /tokenwatch-writer',
        'rbac.authorization.k8s.io/v1 RoleBinding kube-system/tokenwatch-writer',
        'v1 ConfigMap tokenwatch/tokenwatch-config',
        'v1 PersistentVolumeClaim tokenwatch/tokenwatch-data',
        'apps/v1 Deployment tokenwatch/tokenwatch',
        'v1 Service tokenwatch/tokenwatch-metrics',
        'networking.k8s.io/v1 NetworkPolicy tokenwatch/tokenwatch',
      ].sort(),
    );
    for (const objs of rendered.values()) expect(objs.some((o) => o.kind === 'Secret')).toBe(false);
  });

  it('the read-only install (base alone) has no write role; cluster-wide writes only in overlays/writer-cluster-wide', () => {
    const base = rendered.get('base')!;
    const added = (objs: K8sObject[]) => objs.filter((o) => !base.some((b) => idOf(b) === idOf(o))).map(idOf);
    expect(base.filter((o) => o.metadata.name === 'tokenwatch-writer')).toEqual([]);
    expect(added(install)).toEqual([
      'rbac.authorization.k8s.io/v1 ClusterRole /tokenwatch-writer',
      'rbac.authorization.k8s.io/v1 RoleBinding kube-system/tokenwatch-writer',
    ]);
    expect(added(rendered.get('overlays/writer-cluster-wide')!)).toEqual([
      'rbac.authorization.k8s.io/v1 ClusterRole /tokenwatch-writer',
      'rbac.authorization.k8s.io/v1 ClusterRoleBinding /tokenwatch-writer',
    ]);
    expect(rendered.get('overlays/writer-namespaces')!).toEqual(install);
    for (const [entry, objs] of rendered) {
      if (entry.startsWith('overlays/writer-cluster-wide') || entry === 'writer') continue;
      expect(objs.filter((o) => o.kind === 'ClusterRoleBinding' && o.metadata.name === 'tokenwatch-writer'), entry).toEqual([]);
    }
  });

  it('no install but the secret-metadata component grants any access to Secrets', () => {
    for (const [entry, objs] of rendered) {
      const secretRoles = objs.filter((o) => (o.kind === 'ClusterRole' || o.kind === 'Role') && JSON.stringify(o['rules']).includes('secrets')).map(idOf);
      expect(secretRoles, entry).toEqual(entry.endsWith('+components') ? ['rbac.authorization.k8s.io/v1 ClusterRole /tokenwatch-secret-metadata'] : []);
    }
  });

  it('the components add exactly their objects', () => {
    expect(rendered.get('.+components')!.filter((o) => !install.some((b) => idOf(b) === idOf(o))).map(idOf)).toEqual([
      'admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy /tokenwatch-writes',
      'admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding /tokenwatch-writes',
      'v1 ConfigMap tokenwatch/tokenwatch-admission',
      'rbac.authorization.k8s.io/v1 ClusterRole /tokenwatch-namespace-labels',
      'rbac.authorization.k8s.io/v1 ClusterRoleBinding /tokenwatch-namespace-labels',
      'monitoring.coreos.com/v1 ServiceMonitor tokenwatch/tokenwatch',
      'monitoring.coreos.com/v1 PrometheusRule tokenwatch/tokenwatch',
      'rbac.authorization.k8s.io/v1 ClusterRole /tokenwatch-secret-metadata',
      'rbac.authorization.k8s.io/v1 ClusterRoleBinding /tokenwatch-secret-metadata',
    ]);
  });

  it('the namespace enforces the restricted Pod Security Standard', () => {
    expect(find(install, 'Namespace', 'tokenwatch').metadata.labels).toMatchObject({ 'pod-security.kubernetes.io/enforce': 'restricted' });
    for (const o of install) {
      if (o.kind === 'Namespace' || o.kind.startsWith('Cluster')) continue;
      if (o.kind === 'RoleBinding' && o.metadata.name === 'tokenwatch-writer') continue; // in the namespaces written to
      expect(o.metadata.namespace, idOf(o)).toBe('tokenwatch');
    }
  });

  it('overlays/eks: ECR image, IRSA role annotation, gp3 StorageClass', () => {
    const eks = rendered.get('overlays/eks')!;
    expect(find<DeploymentLike>(eks, 'Deployment', 'tokenwatch').spec.template.spec.containers[0]!.image).toBe('111122223333.dkr.ecr.us-east-1.amazonaws.com/tokenwatch:0.1.0');
    expect(find(eks, 'ServiceAccount', 'tokenwatch').metadata.annotations).toEqual({ 'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/tokenwatch' });
    expect(find<{ spec: { storageClassName: string } }>(eks, 'PersistentVolumeClaim', 'tokenwatch-data').spec.storageClassName).toBe('tokenwatch-gp3');
    expect(find<{ provisioner: string }>(eks, 'StorageClass', 'tokenwatch-gp3').provisioner).toBe('ebs.csi.aws.com');
    expect(find(install, 'ServiceAccount', 'tokenwatch').metadata.annotations).toBeUndefined();
  });
});

describe('Deployment', () => {
  it('meets the restricted Pod Security Standard and has a read-only root filesystem', () => {
    expect(restrictedViolations(pod as never)).toEqual([]);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 10001, seccompProfile: { type: 'RuntimeDefault' } });
    expect(container.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 10001,
      runAsGroup: 10001,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
  });

  it('the restricted check reports each missing hardening field', () => {
    const weak = structuredClone(pod) as PodSpec & { hostNetwork?: boolean };
    weak.hostNetwork = true;
    weak.securityContext = {};
    weak.containers[0]!.securityContext = { capabilities: { add: ['SYS_ADMIN'] } };
    weak.volumes.push({ name: 'host', hostPath: { path: '/' } } as never);
    expect(restrictedViolations(weak as never)).toEqual([
      'host namespaces: hostNetwork/hostPID/hostIPC must be unset or false',
      'volume host: type hostPath is not allowed',
      'container tokenwatch: allowPrivilegeEscalation must be false',
      'container tokenwatch: runAsNonRoot must be true (container or pod)',
      'container tokenwatch: seccompProfile.type must be RuntimeDefault or Localhost (container or pod)',
      'container tokenwatch: capabilities.drop must include ALL',
      'container tokenwatch: capability SYS_ADMIN may not be added',
      'container tokenwatch: readOnlyRootFilesystem must be true',
    ]);
  });

  it('one replica (the embedded SQLite store), requests and limits, probes on /healthz and /readyz, the http port', () => {
    expect(deployment.spec.replicas).toBe(1);
    expect(matches(deployment.spec.selector.matchLabels)).toBe(true);
    expect(container.args).toEqual(['serve']);
    expect(container.resources).toEqual({ requests: { cpu: '50m', memory: '192Mi' }, limits: { cpu: '1', memory: '512Mi' } });
    expect(container.ports).toEqual([{ name: 'http', containerPort: 8080, protocol: 'TCP' }]);
    expect(container.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(container.startupProbe?.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(container.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'http' });
  });

  it('volumes: the PVC at /data, the config read-only, an emptyDir /tmp', () => {
    const mounts = Object.fromEntries((container.volumeMounts ?? []).map((m) => [m.mountPath, m]));
    const vol = (name: string) => pod.volumes.find((v) => v.name === name)!;
    expect(vol(mounts['/data']!.name).persistentVolumeClaim?.claimName).toBe('tokenwatch-data');
    expect(find(install, 'PersistentVolumeClaim', 'tokenwatch-data').spec).toEqual({ accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } });
    expect(vol(mounts['/etc/tokenwatch']!.name).projected?.sources).toEqual([{ configMap: { name: 'tokenwatch-config' } }]);
    expect(mounts['/etc/tokenwatch']!.readOnly).toBe(true);
    expect(vol(mounts['/tmp']!.name).emptyDir).toEqual({ sizeLimit: '64Mi' });
    expect(pod.serviceAccountName).toBe('tokenwatch');
  });

  it('SQLite: replaced with strategy Recreate (the old pod releases the volume first), no pod affinity, no PodDisruptionBudget that could block a drain', () => {
    expect((deployment.spec as { strategy?: unknown }).strategy).toEqual({ type: 'Recreate' });
    expect(pod.affinity).toBeUndefined();
    expect(install.filter((o) => o.kind === 'PodDisruptionBudget')).toEqual([]);
  });

  it('overlays/postgres: two replicas spread across zones and nodes, RollingUpdate, no PVC, a PDB of one pod, egress to 5432, the password Secret in the config directory', () => {
    const pgObjs = rendered.get('overlays/postgres')!;
    const d = find<DeploymentLike & { spec: { strategy: unknown; template: { spec: { topologySpreadConstraints: { topologyKey: string; whenUnsatisfiable: string; labelSelector: { matchLabels: Record<string, string> } }[] } } } }>(pgObjs, 'Deployment', 'tokenwatch');
    expect(d.spec.replicas).toBe(2);
    expect(d.spec.strategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
    const spread = d.spec.template.spec.topologySpreadConstraints;
    expect(spread.map((c) => [c.topologyKey, c.whenUnsatisfiable])).toEqual([
      ['topology.kubernetes.io/zone', 'ScheduleAnyway'],
      ['kubernetes.io/hostname', 'ScheduleAnyway'],
    ]);
    for (const c of spread) expect(matches(c.labelSelector.matchLabels)).toBe(true);
    expect(d.spec.template.spec.volumes.find((v) => v.name === 'data')).toEqual({ name: 'data', emptyDir: {} });
    expect(d.spec.template.spec.volumes.find((v) => v.name === 'config')?.projected?.sources).toEqual([{ configMap: { name: 'tokenwatch-config' } }, { secret: { name: 'tokenwatch-postgres' } }]);
    expect(pgObjs.filter((o) => o.kind === 'PersistentVolumeClaim')).toEqual([]);
    const pdb = find<{ spec: { maxUnavailable: number; selector: { matchLabels: Record<string, string> } } }>(pgObjs, 'PodDisruptionBudget', 'tokenwatch');
    expect(pdb.spec.maxUnavailable).toBe(1);
    expect(matches(pdb.spec.selector.matchLabels)).toBe(true);
    const np = find<{ spec: { egress: unknown[] } }>(pgObjs, 'NetworkPolicy', 'tokenwatch');
    expect(np.spec.egress).toContainEqual({ ports: [{ protocol: 'TCP', port: 5432 }] });
  });

  it('Service and NetworkPolicy select the pods', () => {
    const svc = find<{ spec: { selector: Record<string, string>; ports: { port: number; targetPort: string }[] } }>(install, 'Service', 'tokenwatch-metrics');
    expect(matches(svc.spec.selector)).toBe(true);
    expect(svc.spec.ports).toEqual([{ name: 'http-metrics', port: 8080, targetPort: 'http', protocol: 'TCP' }]);
    const np = find<{ spec: { podSelector: { matchLabels: Record<string, string> } } }>(install, 'NetworkPolicy', 'tokenwatch');
    expect(matches(np.spec.podSelector.matchLabels)).toBe(true);
  });
});

describe('NetworkPolicy', () => {
  const np = find<{ spec: { policyTypes: string[]; ingress: { from: unknown[]; ports: { protocol: string; port: number }[] }[]; egress: { to?: unknown[]; ports: { protocol: string; port: number }[] }[] } }>(
    install,
    'NetworkPolicy',
    'tokenwatch',
  );
  it('no ingress but metrics scraping on 8080 (and the Helm chart\'s `helm test` pod, by its labels, on the same port)', () => {
    expect(np.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(np.spec.ingress).toEqual([
      { from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'tokenwatch', 'app.kubernetes.io/component': 'test', 'app.kubernetes.io/instance': 'tokenwatch' } } }], ports: [{ protocol: 'TCP', port: 8080 }] },
      { from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }], ports: [{ protocol: 'TCP', port: 8080 }] },
    ]);
  });
  it('egress only to DNS and HTTPS / the API server port', () => {
    expect(np.spec.egress.flatMap((e) => e.ports.map((p) => `${p.protocol}/${p.port}`)).sort()).toEqual(['TCP/443', 'TCP/53', 'TCP/6443', 'UDP/53']);
  });
});

describe('ConfigMap and Secret', () => {
  const cm = find<{ data: Record<string, string> }>(install, 'ConfigMap', 'tokenwatch-config');
  const secret = readDocs(join(MANIFESTS, 'base/secret.example.yaml'))[0] as { metadata: { name: string }; stringData: Record<string, string> };
  /** The environment the pod gets: literal env values, the Downward API, and the Secret's keys (envFrom). */
  const podEnv: NodeJS.ProcessEnv = {
    ...Object.fromEntries((container.env ?? []).map((e) => [e.name, e.value ?? `<${e.valueFrom?.fieldRef?.fieldPath}>`])),
    ...secret.stringData,
  };

  it('the config parses with the real parseConfig, using the env the pod gets', () => {
    const config = parseConfig(parseYaml(cm.data['tokenwatch.yaml']!), podEnv);
    expect(config.store.path).toBe('/data/tokenwatch.db');
    expect(config.http).toEqual({ host: '0.0.0.0', port: 8080 });
    expect(config.slack?.mode).toBe('socket');
    expect(config.clusters.map((c) => [c.name, c.kubernetes, c.audit])).toEqual([
      [
        'my-cluster',
        { inCluster: true },
        { cloudwatch: { region: 'us-east-1', logGroup: '/aws/eks/my-cluster/cluster', streamPrefix: 'kube-apiserver-audit-', mode: 'filter', overlap: 600_000 } },
      ],
    ]);
  });

  it('the pod points TOKENWATCH_CONFIG at the mounted key, and the store path is on the volume', () => {
    const mount = container.volumeMounts!.find((m) => m.name === pod.volumes.find((v) => v.projected?.sources[0]?.configMap?.name === 'tokenwatch-config')!.name)!;
    expect(podEnv['TOKENWATCH_CONFIG']).toBe(`${mount.mountPath}/tokenwatch.yaml`);
    expect(Object.keys(cm.data)).toEqual(['tokenwatch.yaml']);
    expect(readFileSync(join(MANIFESTS, 'base/tokenwatch.yaml'), 'utf8')).toBe(cm.data['tokenwatch.yaml']);
    expect(podEnv['POD_NAME']).toBe('<metadata.name>');
    expect(podEnv['POD_NAMESPACE']).toBeUndefined(); // only the Lease election read it
  });

  it('the Secret example holds placeholders only, under the names the pod reads', () => {
    expect(container.envFrom).toEqual([{ secretRef: { name: secret.metadata.name } }]);
    expect(secret.stringData).toEqual({ SLACK_BOT_TOKEN: 'xoxb-REPLACE-ME', SLACK_APP_TOKEN: 'xapp-REPLACE-ME' });
    // Without the Secret, the config check names the missing variables (one clear error, exit 2).
    expect(() => parseConfig(parseYaml(cm.data['tokenwatch.yaml']!), { ...podEnv, SLACK_BOT_TOKEN: '', SLACK_APP_TOKEN: '' })).toThrow(/SLACK_BOT_TOKEN[\s\S]*SLACK_APP_TOKEN/);
  });
});

describe('IAM policy (manifests/iam-policy.json)', () => {
  interface Statement {
    Effect: string;
    Action: string[];
    Resource: string | string[];
  }
  const policy = JSON.parse(readFileSync(join(MANIFESTS, 'iam-policy.json'), 'utf8')) as { Version: string; Statement: Statement[] };
  /** IAM ARN pattern match: `*` any characters, `?` one. */
  const arnMatches = (pattern: string, arn: string) => new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.')}$`).test(arn);

  /** IAM service prefix of each AWS SDK v3 client package the code may import. */
  const SERVICE_PREFIX: Record<string, string> = { 'client-cloudwatch-logs': 'logs', 'client-eks': 'eks', 'client-sts': 'sts' };

  /** IAM actions of the AWS operations the source code can send: every `…Command` / `paginate…` imported from an SDK client. */
  function sdkActions(): string[] {
    const actions = new Set<string>();
    const walk = (dir: string): void => {
      for (const name of readdirSync(dir, { withFileTypes: true })) {
        const p = join(dir, name.name);
        if (name.isDirectory()) walk(p);
        else if (p.endsWith('.ts')) {
          const text = readFileSync(p, 'utf8');
          for (const m of text.matchAll(/import\s*\{([^}]*)\}\s*from\s*'@aws-sdk\/(client-[a-z0-9-]+)'/g)) {
            const prefix = SERVICE_PREFIX[m[2]!];
            if (!prefix) throw new Error(`${p}: add the IAM prefix of @aws-sdk/${m[2]} to SERVICE_PREFIX`);
            for (const raw of m[1]!.split(',')) {
              const id = raw.trim();
              if (id.startsWith('type ')) continue;
              const op = /^([A-Z]\w+)Command$/.exec(id)?.[1] ?? /^paginate([A-Z]\w+)$/.exec(id)?.[1];
              if (op) actions.add(`${prefix}:${op}`);
            }
          }
        }
      }
    };
    walk(join(MANIFESTS, '../src'));
    return [...actions].sort();
  }

  it('allows exactly the CloudWatch Logs actions the code uses', () => {
    const actions = policy.Statement.flatMap((s) => s.Action).sort();
    expect(actions).toEqual(sdkActions().filter((a) => a.startsWith('logs:')));
    expect(actions).toEqual(['logs:FilterLogEvents', 'logs:GetQueryResults', 'logs:StartQuery', 'logs:StopQuery']);
    expect(policy.Statement.every((s) => s.Effect === 'Allow')).toBe(true);
  });

  it('every other AWS action the code uses is documented in docs/install.md (remote EKS clusters)', () => {
    const guide = readFileSync(join(MANIFESTS, '../docs/install.md'), 'utf8');
    for (const a of sdkActions().filter((x) => !x.startsWith('logs:'))) expect(guide, a).toContain(`"${a}"`);
  });

  it('scopes the log-group actions to EKS control-plane log groups; "*" only where AWS has no resource type', () => {
    const scoped = policy.Statement.find((s) => s.Action.includes('logs:FilterLogEvents'))!;
    expect(scoped.Action).toEqual(['logs:FilterLogEvents', 'logs:StartQuery']);
    const resources = [scoped.Resource].flat();
    const config = parseConfig(parseYaml(readFileSync(join(MANIFESTS, 'base/tokenwatch.yaml'), 'utf8')), { SLACK_BOT_TOKEN: 'xoxb-x', SLACK_APP_TOKEN: 'xapp-x' });
    const audit = config.clusters[0]!.audit;
    if (!('cloudwatch' in audit)) throw new Error('the in-cluster config reads CloudWatch');
    const cw = audit.cloudwatch;
    const arn = `arn:aws:logs:${cw.region}:111122223333:log-group:${cw.logGroup}`;
    expect(resources.some((r) => arnMatches(r, arn))).toBe(true);
    expect(resources.some((r) => arnMatches(r, `${arn}:*`))).toBe(true);
    expect(resources.some((r) => arnMatches(r, 'arn:aws:logs:us-east-1:111122223333:log-group:/aws/lambda/payments'))).toBe(false);
    const wildcard = policy.Statement.filter((s) => [s.Resource].flat().includes('*'));
    expect(wildcard.flatMap((s) => s.Action)).toEqual(['logs:GetQueryResults', 'logs:StopQuery']);
  });
});

describe('Slack app manifest (manifests/slack-app.yaml)', () => {
  const text = readFileSync(join(MANIFESTS, 'slack-app.yaml'), 'utf8');
  interface AppManifest {
    features: { slash_commands: { command: string; url?: string; description: string; usage_hint: string }[]; bot_user: { display_name: string }; app_home?: Record<string, unknown> };
    oauth_config?: { scopes: { bot: string[] } };
    settings: { interactivity: { is_enabled: boolean; request_url?: string }; socket_mode_enabled: boolean; event_subscriptions?: { request_url?: string; bot_events?: string[] } };
  }
  const app = parseYaml(text) as AppManifest;
  const http = parseYaml(
    text
      .slice(text.indexOf('# features:'))
      .split('\n')
      .map((l) => l.replace(/^# ?/, ''))
      .join('\n'),
  ) as AppManifest;

  it('asks for exactly the bot scopes of the Web API methods src/slack calls (api.slack.com/methods), plus commands', () => {
    // Scope per method: api.slack.com/methods/<method> ("Required scopes"); auth.test needs none.
    const SCOPE: Record<string, string | string[] | null> = {
      'auth.test': null,
      'chat.postMessage': 'chat:write',
      'chat.update': 'chat:write',
      'chat.postEphemeral': 'chat:write',
      'chat.delete': 'chat:write',
      'usergroups.users.list': 'usergroups:read',
      'users.info': 'users:read',
      'conversations.info': 'channels:read',
      'views.open': null,
      // Home tab: api.slack.com/methods/views.publish needs no scope (the Home tab must be enabled).
      'views.publish': null,
      'chat.getPermalink': null,
      // Public and private channels: api.slack.com/methods/conversations.history.
      // im:history: the bot's direct-message channel (api.slack.com/methods/conversations.history), crash recovery of an outcome message.
      'conversations.history': ['channels:history', 'groups:history', 'im:history'],
      // A thread: api.slack.com/methods/conversations.replies (same history scopes).
      'conversations.replies': ['channels:history', 'groups:history'],
      // A direct-message channel with one user: api.slack.com/methods/conversations.open.
      'conversations.open': 'im:write',
    };
    const dir = join(MANIFESTS, '..', 'src', 'slack');
    const methods = new Set<string>();
    for (const f of readdirSync(dir, { recursive: true }) as string[]) {
      if (!f.endsWith('.ts')) continue;
      for (const m of readFileSync(join(dir, f), 'utf8').matchAll(/\bclient\.((?:chat|usergroups|users|conversations|views|auth)\.[a-zA-Z]+(?:\.[a-zA-Z]+)?)\(/g)) methods.add(m[1]!);
    }
    expect(methods.size).toBeGreaterThan(3);
    for (const m of methods) expect(SCOPE, `scope of ${m} unknown: add it to the table`).toHaveProperty([m]);
    const needed = new Set([...methods].flatMap((m) => [SCOPE[m] ?? []].flat()));
    needed.add('commands'); // the /tokens slash command
    expect([...(app.oauth_config?.scopes.bot ?? [])].sort()).toEqual([...needed].sort());
  });

  it('the fake Slack reports the manifest\'s scopes by default (x-oauth-scopes), so tests see what an install grants', () => {
    expect([...MANIFEST_SCOPES].sort()).toEqual([...(app.oauth_config?.scopes.bot ?? [])].sort());
  });

  it('Socket Mode: /tokens, interactivity', () => {
    expect(app.settings.socket_mode_enabled).toBe(true);
    expect(app.settings.interactivity).toEqual({ is_enabled: true });
    expect(app.features.slash_commands.map((c) => c.command)).toEqual(['/tokens']);
    const cmd = app.features.slash_commands[0]!;
    expect(cmd.url).toBeUndefined();
    // Slack limits (docs.slack.dev app manifest reference): command ≤ 32 chars, description ≤ 2000, usage hint ≤ 1000.
    expect(cmd.command.length).toBeLessThanOrEqual(32);
    expect(cmd.description.length).toBeLessThanOrEqual(2000);
    expect(cmd.usage_hint.length).toBeLessThanOrEqual(1000);
  });

  /** Event types src/slack listens to (`app.event('<type>', …)`). */
  const listenedEvents = (): string[] => {
    const dir = join(MANIFESTS, '..', 'src', 'slack');
    const out = new Set<string>();
    for (const f of readdirSync(dir, { recursive: true }) as string[]) {
      if (!f.endsWith('.ts')) continue;
      for (const m of readFileSync(join(dir, f), 'utf8').matchAll(/\bapp\.event\(\s*'([a-z_]+)'/g)) out.add(m[1]!);
    }
    return [...out].sort();
  };

  it('the Home tab is enabled and exactly the events tokenwatch listens to are subscribed (app_home_opened), nothing more', () => {
    expect(listenedEvents()).toEqual(['app_home_opened']);
    // docs.slack.dev app manifest reference: features.app_home.home_tab_enabled; settings.event_subscriptions.bot_events.
    expect(app.features.app_home).toEqual({ home_tab_enabled: true });
    expect(app.settings.event_subscriptions).toEqual({ bot_events: listenedEvents() });
    expect(http.features.app_home).toEqual({ home_tab_enabled: true });
    expect(http.settings.event_subscriptions).toEqual({ request_url: 'https://tokenwatch.example.com/slack/events', bot_events: listenedEvents() });
  });

  it('the commented HTTP-mode variant sends commands and interactions to /slack/events', () => {
    expect(http.settings.socket_mode_enabled).toBe(false);
    expect(http.settings.interactivity).toEqual({ is_enabled: true, request_url: 'https://tokenwatch.example.com/slack/events' });
    expect(http.features.slash_commands.map((c) => [c.command, c.url])).toEqual([['/tokens', 'https://tokenwatch.example.com/slack/events']]);
    expect(http.features.slash_commands[0]!.usage_hint).toBe(app.features.slash_commands[0]!.usage_hint);
  });
});
