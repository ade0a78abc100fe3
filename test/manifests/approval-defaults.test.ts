/**
 * The shipped defaults agree on what the seed's Multus fix needs: the Helm chart (rendered with `helm template`), the
 * kustomize base under `manifests/`, `config.example.yaml` and the sandbox's config all make a restart of DaemonSet
 * `kube-system/kube-multus-ds` need the same number of approvals (kube-system is a protected namespace: 2), and the
 * sandbox has enough approvers besides the requester to complete it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { requiredApprovalsFor, namespaceAllowed, canRequest } from '../../src/approvals/index.js';
import { approvalPolicyFor } from '../../src/approvals/from-config.js';
import { parseConfig, type Config } from '../../src/config/index.js';
import { sandboxConfigFile, SANDBOX_CLUSTER, SANDBOX_USERS } from '../../src/sandbox/sandbox.js';
import { helmBinary, helmTemplate } from './helm.js';
import { MANIFESTS, render, type K8sObject } from './kustomize.js';

const ENV = { SLACK_BOT_TOKEN: 'xoxb-x', SLACK_APP_TOKEN: 'xapp-x', SLACK_SIGNING_SECRET: '8f742231b10e8888abcd99yyyzzz85a5' };
/** The seed's fix: the Multus DaemonSet in kube-system (examples/cluster-snapshot.json). */
const MULTUS = { kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds' } as const;
const { path: helmPath, skip } = helmBinary();

function configIn(objs: K8sObject[]): Config {
  const cm = objs.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'tokenwatch-config') as (K8sObject & { data: Record<string, string> }) | undefined;
  if (!cm) throw new Error('no ConfigMap tokenwatch-config');
  return parseConfig(parseYaml(cm.data['tokenwatch.yaml']!), ENV);
}

/** Approvals the first cluster's policy of `config` needs for the Multus restart. */
function multusApprovals(config: Config, cluster = config.clusters[0]!.name): number {
  const c = config.clusters.find((x) => x.name === cluster)!;
  const policy = approvalPolicyFor(c, config)!;
  expect(namespaceAllowed(MULTUS.namespace, policy)).toBe(true);
  return requiredApprovalsFor(MULTUS.namespace, policy);
}

function sandboxConfig(): Config {
  return parseConfig(sandboxConfigFile({ dataDir: '/tmp/x', auditLog: '/tmp/x/audit.log', kubeconfig: '/tmp/x/kubeconfig', speed: 60, pollEverySeconds: 10, apiUrl: 'http://127.0.0.1:1/api/' }), ENV);
}

describe('approvals the seed’s Multus restart needs', () => {
  it('kustomize base, config.example.yaml and the sandbox: 2 (kube-system is protected)', () => {
    expect(multusApprovals(configIn(render(MANIFESTS)))).toBe(2);
    expect(multusApprovals(parseConfig(parseYaml(readFileSync(join(MANIFESTS, '../config.example.yaml'), 'utf8')), ENV))).toBe(2);
    expect(multusApprovals(sandboxConfig(), SANDBOX_CLUSTER)).toBe(2);
  });

  it.skipIf(!helmPath)(`the Helm chart's defaults: the same 2${skip ? ` (skipped: ${skip})` : ''}`, () => {
    expect(multusApprovals(configIn(helmTemplate()))).toBe(2);
  });

  it('the sandbox can complete it: its requester may request, and two other people may approve', () => {
    const config = sandboxConfig();
    const policy = approvalPolicyFor(config.clusters.find((c) => c.name === SANDBOX_CLUSTER)!, config)!;
    const requester = SANDBOX_USERS.find((u) => u.role === 'requester')!;
    expect(canRequest(requester.id, 'restart', { cluster: SANDBOX_CLUSTER, findingId: 'f', ...MULTUS }, policy, []).ok).toBe(true);
    const others = SANDBOX_USERS.filter((u) => u.id !== requester.id && policy.approvers.includes(u.id));
    expect(policy.allowSelfApproval).toBe(false);
    expect(others.length).toBeGreaterThanOrEqual(requiredApprovalsFor(MULTUS.namespace, policy));
  });
});
