/**
 * `tokenwatch config check --runtime` and `serve`'s start check what the plain `config check` cannot on a workstation:
 * every referenced file exists and is readable, every named environment variable is set (src/config/runtime-check.ts).
 * Both name every problem, per cluster, in one run, and exit 2 (an invalid configuration, docs/design/contracts.md).
 */
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { runtimeIssues } from '../../src/config/runtime-check.js';
import { runCli } from './run-cli.js';

/** A pod's config on a machine without the pod's Secrets and variables. */
function podConfig(): { dir: string; cfg: string; missing: Record<string, string> } {
  const dir = mkdtempSync(join(tmpdir(), 'tw-runtime-check-'));
  const missing = {
    cert: join(dir, 'secrets', 'tls.crt'),
    key: join(dir, 'secrets', 'tls.key'),
    kubeconfig: join(dir, 'staging.kubeconfig'),
    password: join(dir, 'pg', 'password'),
  };
  const audit = join(dir, 'audit.log');
  writeFileSync(audit, '');
  const cfg = join(dir, 'tokenwatch.yaml');
  writeFileSync(
    cfg,
    [
      'store:',
      `  path: ${join(dir, 'tw.db')}`,
      '  postgres:',
      '    url: postgres://tokenwatch@127.0.0.1:1/tokenwatch',
      '    sslmode: disable',
      '    passwordFrom:',
      `      file: ${missing.password}`,
      'http:',
      '  host: 127.0.0.1',
      '  port: 0',
      'clusters:',
      '  - name: prod',
      '    audit:',
      '      webhook:',
      `        certFile: ${missing.cert}`,
      `        keyFile: ${missing.key}`,
      '        tokenEnv: TW_TEST_AUDIT_WEBHOOK_TOKEN',
      '  - name: staging',
      '    audit:',
      '      file:',
      `        path: ${audit}`,
      '    kubernetes:',
      `      kubeconfig: ${missing.kubeconfig}`,
      '',
    ].join('\n'),
  );
  return { dir, cfg, missing };
}

/** The environment of the child: the variable the config names is unset. */
const ENV = { TW_TEST_AUDIT_WEBHOOK_TOKEN: '' };

describe('config check --runtime and serve start checks', () => {
  it('plain config check passes; --runtime names every missing file and unset variable per cluster, exit 2', { timeout: 120_000 }, async () => {
    const { cfg, missing } = podConfig();
    const plain = await runCli(['config', 'check', '--config', cfg], ENV);
    expect(plain.stderr).toBe('');
    expect(plain.code).toBe(0);

    const r = await runCli(['config', 'check', '--config', cfg, '--runtime'], ENV);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('(5 problems)');
    expect(r.stderr).toContain(`cluster prod: the audit webhook certificate file ${missing.cert} does not exist`);
    expect(r.stderr).toContain('→ at clusters[0].audit.webhook.certFile');
    expect(r.stderr).toContain(`cluster prod: the audit webhook key file ${missing.key} does not exist`);
    expect(r.stderr).toContain('cluster prod: not set, required by clusters[0].audit.webhook.tokenEnv');
    expect(r.stderr).toContain('→ at env.TW_TEST_AUDIT_WEBHOOK_TOKEN');
    expect(r.stderr).toContain(`cluster staging: the kubeconfig ${missing.kubeconfig} does not exist`);
    expect(r.stderr).toContain('→ at clusters[1].kubernetes.kubeconfig');
    expect(r.stderr).toContain(`store: the PostgreSQL password file ${missing.password} does not exist`);

    // serve runs the same checks at start: the same five problems at once, exit 2, before it opens anything.
    const serve = await runCli(['serve', '--config', cfg], ENV);
    expect(serve.code).toBe(2);
    expect(serve.stderr).toContain('(5 problems)');
    for (const line of r.stderr.split('\n').filter((l) => l.includes('✖') || l.includes('→'))) expect(serve.stderr).toContain(line);
  });

  it('a file that exists but cannot be read, a directory for a file, in-cluster access outside a pod', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-runtime-check-'));
    const unreadable = join(dir, 'token');
    writeFileSync(unreadable, 'secret-token-value\n');
    chmodSync(unreadable, 0o000);
    const certDir = join(dir, 'cert-dir');
    mkdirSync(certDir);
    writeFileSync(join(dir, 'tls.key'), 'k');
    const config = parseConfig(
      {
        store: { path: join(dir, 'tw.db') },
        clusters: [
          { name: 'web', audit: { webhook: { certFile: certDir, keyFile: join(dir, 'tls.key'), tokenFile: unreadable } } },
          { name: 'pod', audit: { none: true }, kubernetes: { inCluster: true } },
        ],
      },
      {},
    );
    const issues = runtimeIssues(config, {}, { serviceAccountDir: join(dir, 'no-sa') });
    const messages = issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    expect(messages).toContain(`clusters.0.audit.webhook.certFile: cluster web: the audit webhook certificate file ${certDir} is a directory, not a file`);
    // root reads any file: the permission check means nothing then.
    if (process.getuid?.() !== 0) expect(messages).toContain(`clusters.0.audit.webhook.tokenFile: cluster web: the audit webhook token file ${unreadable} is not readable (permission denied)`);
    expect(messages).toContain('env.KUBERNETES_SERVICE_HOST: cluster pod: not set, required by clusters[1].kubernetes.inCluster (set by Kubernetes in a pod)');
    expect(messages).toContain('env.KUBERNETES_SERVICE_PORT: cluster pod: not set, required by clusters[1].kubernetes.inCluster (set by Kubernetes in a pod)');
    expect(messages).toContain(`clusters.1.kubernetes.inCluster: cluster pod: the pod's ServiceAccount token ${join(dir, 'no-sa', 'token')} does not exist`);
    expect(messages.join('\n')).not.toContain('secret-token-value');
    // Everything in place: nothing to say.
    const ok = parseConfig({ store: { path: join(dir, 'tw.db') }, clusters: [{ name: 'web', audit: { webhook: { certFile: join(dir, 'tls.key'), keyFile: join(dir, 'tls.key'), tokenEnv: 'TOK' } } }] }, {});
    expect(runtimeIssues(ok, { TOK: 'x' })).toEqual([]);
  });

  it('an AKS cluster read from Log Analytics: the workload identity variables and the CA file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-runtime-check-'));
    const config = parseConfig(
      {
        store: { path: join(dir, 'tw.db') },
        clusters: [{ name: 'aks', audit: { azure: { workspaceId: '0b4a3c2d-1e5f-4a6b-8c7d-9e0f1a2b3c4d', resourceId: '/subscriptions/s/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/aks', caFile: join(dir, 'no-ca.pem') } } }],
      },
      {},
    );
    const messages = runtimeIssues(config, { AZURE_CLIENT_ID: 'c', AZURE_FEDERATED_TOKEN_FILE: join(dir, 'no-token') }).map((i) => `${i.path.join('.')}: ${i.message}`);
    expect(messages).toEqual([
      `clusters.0.audit.azure.caFile: cluster aks: the Log Analytics CA file ${join(dir, 'no-ca.pem')} does not exist`,
      'env.AZURE_TENANT_ID: cluster aks: not set, required by clusters[0].audit.azure (workload identity: label the pod azure.workload.identity/use: "true")',
      `env.AZURE_FEDERATED_TOKEN_FILE: cluster aks: the workload identity token file ${join(dir, 'no-token')} does not exist`,
    ]);
  });
});
