/**
 * manifests/probe, and the Helm chart with `probe.enabled` (where the helm binary runs; test/manifests/helm.ts): the
 * DaemonSet's hardening, hostPath mounts of exactly the default glob directories, the namespace's Pod Security level,
 * and RBAC = the calls the probe and serve's reader make (checked against the fake API server authorizing with
 * exactly these rules).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeKube, type FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import type { PolicyRule } from '../../src/sandbox/fakes/kubernetes/types.js';
import { DEFAULT_PROBE_GLOBS, type ProbeReport } from '../../src/probe/host.js';
import { KubeProbeReports, PROBE_NAMESPACE, publishReport } from '../../src/probe/objects.js';
import { helmBinary, helmTemplate } from '../manifests/helm.js';
import { MANIFESTS, render, type K8sObject } from '../manifests/kustomize.js';

/** The probe's objects: everything in its namespace, and the namespace. */
const probeObjects = (all: K8sObject[]) => all.filter((o) => o.metadata.namespace === PROBE_NAMESPACE || (o.kind === 'Namespace' && o.metadata.name === PROBE_NAMESPACE));
/** Each install: its probe objects, and everything it renders (for the cluster-scoped reviewer role). */
const INSTALLS: [string, K8sObject[], K8sObject[]][] = [['kustomize manifests/probe', render(`${MANIFESTS}/probe`), render(`${MANIFESTS}/probe`)]];
if (helmBinary().path !== undefined) {
  const all = helmTemplate({ set: { 'probe.enabled': true } });
  INSTALLS.push(['helm probe.enabled=true', probeObjects(all), all]);
}

type Rule = { apiGroups: string[]; resources: string[]; verbs: string[] };

let kube: FakeKube | undefined;
afterEach(async () => {
  await kube?.close();
  kube = undefined;
});

const report: ProbeReport = { version: 1, node: 'node-a', probedAt: '2026-11-20T12:00:00.000Z', globs: [...DEFAULT_PROBE_GLOBS], entries: [] };

describe.each(INSTALLS)('%s', (_name, objs, allObjs) => {
  const find = (kind: string, name: string) => objs.find((o) => o.kind === kind && o.metadata.name === name)!;
  function rulesFor(sa: { namespace: string; name: string }): PolicyRule[] {
    return objs
      .filter((o) => o.kind === 'RoleBinding')
      .filter((b) => (b['subjects'] as { kind: string; name: string; namespace: string }[]).some((s) => s.kind === 'ServiceAccount' && s.name === sa.name && s.namespace === sa.namespace))
      .flatMap((b) => (find('Role', (b['roleRef'] as { name: string }).name)['rules'] as Rule[]).map((r) => ({ ...r, namespaces: [b.metadata.namespace!] })));
  }

  it('namespace enforces Pod Security "privileged" (hostPath), warns and audits at baseline', () => {
    expect(find('Namespace', PROBE_NAMESPACE).metadata.labels).toMatchObject({
      'pod-security.kubernetes.io/enforce': 'privileged',
      'pod-security.kubernetes.io/warn': 'baseline',
      'pod-security.kubernetes.io/audit': 'baseline',
    });
  });

  it('DaemonSet: read-only hostPath of the glob directories only, uid 0 with no capabilities, no escalation, read-only root', () => {
    const ds = find('DaemonSet', 'tokenwatch-probe') as K8sObject & { spec: { template: { spec: Record<string, unknown> } } };
    const pod = ds.spec.template.spec as {
      containers: { args: string[]; securityContext: Record<string, unknown>; volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[] }[];
      volumes: { name: string; hostPath?: { path: string } }[];
    };
    const c = pod.containers[0]!;
    expect(c.securityContext).toEqual({
      runAsUser: 0,
      runAsGroup: 0,
      runAsNonRoot: false,
      privileged: false,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    const hostPaths = pod.volumes.filter((v) => v.hostPath).map((v) => v.hostPath!.path);
    expect(hostPaths).toEqual(['/etc/cni/net.d']);
    // Every mounted host directory is the fixed prefix of a default glob; every host mount is read-only under /host.
    for (const p of hostPaths) expect(DEFAULT_PROBE_GLOBS.some((g) => g.startsWith(`${p}/`))).toBe(true);
    for (const m of c.volumeMounts.filter((m) => pod.volumes.find((v) => v.name === m.name)?.hostPath)) {
      expect(m.readOnly).toBe(true);
      expect(m.mountPath.startsWith('/host/')).toBe(true);
    }
    expect(c.args.slice(0, 3)).toEqual(['probe', '--host-root', '/host']);
  });

  it('RBAC: the probe may only create/update ConfigMaps in its namespace (no get); serve may list them and get pods there', async () => {
    const probeRules = rulesFor({ namespace: PROBE_NAMESPACE, name: 'tokenwatch-probe' });
    expect(probeRules).toEqual([{ apiGroups: [''], resources: ['configmaps'], verbs: ['create', 'update'], namespaces: [PROBE_NAMESPACE] }]);
    // Nothing cluster-wide for the probe; serve's TokenReview (create only) is the one cluster-scoped rule.
    const clusterRoles = allObjs.filter((o) => o.kind === 'ClusterRole' && o.metadata.name.endsWith('probe-reviewer'));
    expect(clusterRoles.map((o) => o['rules'])).toEqual([[{ apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] }]]);
    const reviewerSubjects = allObjs.filter((o) => o.kind === 'ClusterRoleBinding' && o.metadata.name.endsWith('probe-reviewer')).flatMap((b) => b['subjects'] as { name: string }[]);
    expect(reviewerSubjects.map((s) => s.name)).toEqual(['tokenwatch']);

    kube = await startFakeKube({ rbac: probeRules });
    expect(await publishReport(kube.kubeConfig(), report, PROBE_NAMESPACE)).toBe('created');
    expect(await publishReport(kube.kubeConfig(), report, PROBE_NAMESPACE)).toBe('updated');
    await expect(publishReport(kube.kubeConfig(), report, 'default')).rejects.toMatchObject({ code: 403 });
    expect(kube.requests.filter((r) => r.verb).map((r) => r.verb)).toEqual(['create', 'create', 'update', 'create']);
    await kube.close();

    const serveRules = rulesFor({ namespace: 'tokenwatch', name: 'tokenwatch' });
    kube = await startFakeKube({ rbac: serveRules });
    expect(await new KubeProbeReports(kube.kubeConfig()).read()).toEqual([]);
    await kube.close();
    kube = await startFakeKube({ rbac: [] });
    await expect(new KubeProbeReports(kube.kubeConfig()).read()).rejects.toThrow(
      'listing probe ConfigMaps in namespace tokenwatch-probe is forbidden: grant list configmaps there (manifests/probe)',
    );
  });
});
