/**
 * Defaults that install on a cluster with only the standard namespaces, and Slack buttons that follow the writer
 * RBAC: the chart derives each in-cluster cluster's `slack.namespaces.allow` from `rbac.writer.namespaces` (or
 * refuses an allow list that names a namespace without a RoleBinding, naming both), offers only snooze without
 * writes; the kustomize install lists the same namespaces in its config as in its RoleBindings.
 */
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { namespaceAllowed } from '../../src/approvals/policy.js';
import { definePolicy } from '../approvals/helpers.js';
import { parseConfig } from '../../src/config/index.js';
import type { Config } from '../../src/config/types.js';
import { helmBinary, helmTemplate, SITE_APPROVERS, SITE_CHANNEL, type ChartValues } from './helm.js';
import { MANIFESTS, render, type K8sObject } from './kustomize.js';

const { skip } = helmBinary();
const ENV = { SLACK_BOT_TOKEN: 'xoxb-x', SLACK_APP_TOKEN: 'xapp-x' };
/** Namespaces every Kubernetes cluster has (https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/#initial-namespaces). */
const STANDARD_NAMESPACES = ['default', 'kube-system', 'kube-public', 'kube-node-lease'];

/** The tokenwatch config an install renders (its ConfigMap), validated as serve would. */
function configOf(objs: K8sObject[]): Config {
  const cm = objs.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'tokenwatch-config') as (K8sObject & { data: Record<string, string> }) | undefined;
  if (!cm) throw new Error('no tokenwatch-config ConfigMap rendered');
  return parseConfig(parseYaml(cm.data['tokenwatch.yaml']!), ENV);
}

/** Namespaces holding a writer RoleBinding. */
function writerNamespaces(objs: K8sObject[]): string[] {
  return objs
    .filter((o) => o.kind === 'RoleBinding' && (o as K8sObject & { roleRef: { name: string } }).roleRef.name === 'tokenwatch-writer')
    .map((o) => o.metadata.namespace!)
    .sort();
}

/** Whether the cluster's Slack policy offers actions in `ns`. */
function offersActionsIn(config: Config, ns: string): boolean {
  const ns0 = config.clusters[0]!.slack!.namespaces;
  return namespaceAllowed(ns, definePolicy({ namespaces: { allow: ns0?.allow ?? [], deny: ns0?.deny ?? [] } }));
}

/** Every namespace an install puts an object in, except the namespace it creates itself. */
function namespacesUsed(objs: K8sObject[], created: string[]): string[] {
  return [...new Set(objs.map((o) => o.metadata.namespace).filter((n): n is string => n !== undefined && !created.includes(n)))].sort();
}

describe('the kustomize default install', () => {
  const objs = render(MANIFESTS);

  it('puts objects only in standard namespaces and the tokenwatch namespace it creates', () => {
    const created = objs.filter((o) => o.kind === 'Namespace').map((o) => o.metadata.name);
    expect(created).toEqual(['tokenwatch']);
    expect(namespacesUsed(objs, created).filter((n) => !STANDARD_NAMESPACES.includes(n))).toEqual([]);
  });

  it('offers actions exactly where its RoleBindings allow writes', () => {
    const config = configOf(objs);
    expect(writerNamespaces(objs)).toEqual(['kube-system']);
    expect(config.clusters[0]!.slack!.namespaces!.allow).toEqual(writerNamespaces(objs));
    expect(offersActionsIn(config, 'kube-system')).toBe(true);
    expect(offersActionsIn(config, 'monitoring')).toBe(false);
  });
});

describe.skipIf(skip !== undefined)('the chart: buttons follow rbac.writer', () => {
  const render = (v: ChartValues = {}) => helmTemplate(v);

  it('defaults: objects only in standard namespaces and the release namespace; actions only in kube-system, as the RoleBinding', () => {
    const objs = render();
    expect(namespacesUsed(objs, ['tokenwatch']).filter((n) => !STANDARD_NAMESPACES.includes(n))).toEqual([]);
    const config = configOf(objs);
    expect(writerNamespaces(objs)).toEqual(['kube-system']);
    expect(config.clusters[0]!.slack!.namespaces).toEqual({ allow: ['kube-system'] });
    expect(offersActionsIn(config, 'monitoring')).toBe(false);
  });

  it('more writer namespaces: the allow list is derived from them', () => {
    const objs = render({ values: { rbac: { writer: { namespaces: ['kube-system', 'logging', 'payments'] } } } });
    const config = configOf(objs);
    expect(writerNamespaces(objs)).toEqual(['kube-system', 'logging', 'payments']);
    expect(config.clusters[0]!.slack!.namespaces!.allow).toEqual(['kube-system', 'logging', 'payments']);
    expect(offersActionsIn(config, 'payments')).toBe(true);
    expect(offersActionsIn(config, 'default')).toBe(false);
  });

  it('an allow list inside the writer namespaces is kept, with its deny list', () => {
    const objs = render({
      values: {
        rbac: { writer: { namespaces: ['kube-system', 'logging'] } },
        config: { clusters: [{ name: 'c', audit: { none: true }, kubernetes: { inCluster: true }, slack: { channel: SITE_CHANNEL, approvers: [SITE_APPROVERS], namespaces: { allow: ['logging'], deny: ['kube-system'] } } }] },
      },
    });
    expect(configOf(objs).clusters[0]!.slack!.namespaces).toEqual({ allow: ['logging'], deny: ['kube-system'] });
  });

  it('an allow list naming a namespace without a RoleBinding is refused, naming both', () => {
    const cluster = { name: 'c', audit: { none: true }, kubernetes: { inCluster: true }, slack: { channel: SITE_CHANNEL, approvers: [SITE_APPROVERS], namespaces: { allow: ['kube-system', 'monitoring'] } } };
    expect(() => render({ values: { config: { clusters: [cluster] } } })).toThrow(
      'config.clusters[0].slack.namespaces.allow offers actions in "monitoring", but rbac.writer.namespaces [kube-system] has no RoleBinding there',
    );
  });

  it('read-only (writer off) or no writer namespaces: only snooze is offered', () => {
    for (const v of [{ set: { 'rbac.writer.enabled': false } }, { values: { rbac: { writer: { namespaces: [] } } } }] as ChartValues[]) {
      const objs = render(v);
      expect(writerNamespaces(objs)).toEqual([]);
      expect(configOf(objs).clusters[0]!.slack!.actions).toEqual(['snooze']);
    }
  });

  it('cluster-wide writes: the config is left as written (every namespace)', () => {
    const config = configOf(render({ set: { 'rbac.writer.clusterWide': true } }));
    expect(config.clusters[0]!.slack!.namespaces).toBeUndefined();
    expect(offersActionsIn(config, 'monitoring')).toBe(true);
  });

  it('a remote cluster (kubeconfig or EKS access) keeps its own namespaces: the chart RBAC binds only this cluster', () => {
    const cluster = { name: 'remote', audit: { none: true }, kubernetes: { eks: { clusterName: 'other', region: 'us-east-1' } }, slack: { channel: SITE_CHANNEL, approvers: [SITE_APPROVERS] } };
    const config = configOf(render({ values: { config: { clusters: [cluster] } } }));
    expect(config.clusters[0]!.slack!.namespaces).toBeUndefined();
    expect(config.clusters[0]!.slack!.actions).toEqual(['restart', 'recreate-serviceaccount', 'snooze']);
  });
});
