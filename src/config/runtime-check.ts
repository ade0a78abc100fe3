/**
 * The checks `tokenwatch config check --runtime` and `serve` (at start) make beyond the schema: that every file the
 * configuration references exists and is readable, and every environment variable it names is set. The plain
 * `config check` skips them, so it keeps working on a workstation against a pod's config (docs/install.md), where
 * the mounted Secrets and the pod's variables are absent.
 *
 * Checked: `store.postgres.passwordFrom.file` and `caFile`; per cluster, the audit webhook's `certFile`, `keyFile`,
 * `tokenFile`, `clientCaFile` and `tokenEnv`; the kubeconfig (`kubernetes.kubeconfig`, else each file of
 * `$KUBECONFIG`, else `~/.kube/config`); with `kubernetes.inCluster`, `KUBERNETES_SERVICE_HOST`/`_PORT` and the
 * pod's ServiceAccount token and CA files. Not checked: an audit log file (`audit.file.path`), which the API server
 * may create or rotate later (a poll that cannot read it shows as the audit source failing, docs/live-mode.md "Health"),
 * and whether a readable file's content is valid (a malformed kubeconfig shows as the Kubernetes API failing).
 * Every problem is named with its cluster, all at once; the values of variables are never read into a message.
 */
import { accessSync, constants, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import type { ConfigIssue } from './schema.js';
import type { Config } from './types.js';

/** Where a pod's ServiceAccount credentials are mounted (https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/). */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** Why `path` cannot be read as a file, or undefined when it can. */
function fileProblem(path: string): string | undefined {
  try {
    if (statSync(path).isDirectory()) return 'is a directory, not a file';
    accessSync(path, constants.R_OK);
    return undefined;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return 'does not exist';
    if (code === 'EACCES' || code === 'EPERM') return 'is not readable (permission denied)';
    return `cannot be read (${code ?? (err as Error).message})`;
  }
}

/** Empty strings count as unset, as the schema's own environment checks do. */
function isSet(env: NodeJS.ProcessEnv, name: string): boolean {
  const v = env[name];
  return v !== undefined && v !== '';
}

/**
 * The files and environment variables of `config` that cannot be used here (see the module doc).
 * @param env the process environment (injected for tests)
 * @param home the home directory of `~/.kube/config` (default `os.homedir()`)
 * @param serviceAccountDir where in-cluster credentials are looked for (default {@link SERVICE_ACCOUNT_DIR}; tests)
 * @returns one issue per problem: path into the config (or `env.NAME`), message naming the cluster and the file
 */
export function runtimeIssues(config: Config, env: NodeJS.ProcessEnv, opts: { home?: string; serviceAccountDir?: string } = {}): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const file = (path: (string | number)[], what: string, target: string, who: string) => {
    const problem = fileProblem(target);
    if (problem !== undefined) issues.push({ path, message: `${who}: ${what} ${target} ${problem}` });
  };
  const pg = config.store.postgres;
  if (pg) {
    if (pg.passwordFrom && 'file' in pg.passwordFrom) file(['store', 'postgres', 'passwordFrom', 'file'], 'the PostgreSQL password file', pg.passwordFrom.file, 'store');
    if (pg.caFile !== undefined) file(['store', 'postgres', 'caFile'], 'the PostgreSQL CA file', pg.caFile, 'store');
  }
  config.clusters.forEach((c, i) => {
    const who = `cluster ${c.name}`;
    const wh = 'webhook' in c.audit ? c.audit.webhook : undefined;
    if (wh) {
      const at = (k: string) => ['clusters', i, 'audit', 'webhook', k];
      file(at('certFile'), 'the audit webhook certificate file', wh.certFile, who);
      file(at('keyFile'), 'the audit webhook key file', wh.keyFile, who);
      if (wh.tokenFile !== undefined) file(at('tokenFile'), 'the audit webhook token file', wh.tokenFile, who);
      if (wh.clientCaFile !== undefined) file(at('clientCaFile'), 'the audit webhook client CA file', wh.clientCaFile, who);
      if (wh.tokenEnv !== undefined && !isSet(env, wh.tokenEnv)) {
        issues.push({ path: ['env', wh.tokenEnv], message: `${who}: not set, required by clusters[${i}].audit.webhook.tokenEnv (the audit webhook's bearer token)` });
      }
    }
    if ('azure' in c.audit) {
      const az = c.audit.azure;
      if (az.caFile !== undefined) file(['clusters', i, 'audit', 'azure', 'caFile'], 'the Log Analytics CA file', az.caFile, who);
      // Workload identity (set in the pod by the Azure workload identity webhook; docs/install.md#aks).
      for (const name of ['AZURE_CLIENT_ID', 'AZURE_TENANT_ID', 'AZURE_FEDERATED_TOKEN_FILE']) {
        if (!isSet(env, name)) issues.push({ path: ['env', name], message: `${who}: not set, required by clusters[${i}].audit.azure (workload identity: label the pod azure.workload.identity/use: "true")` });
      }
      if (isSet(env, 'AZURE_FEDERATED_TOKEN_FILE')) file(['env', 'AZURE_FEDERATED_TOKEN_FILE'], 'the workload identity token file', env.AZURE_FEDERATED_TOKEN_FILE!, who);
    }
    const k = c.kubernetes;
    const at = (key: string) => ['clusters', i, 'kubernetes', key];
    if ('inCluster' in k) {
      for (const name of ['KUBERNETES_SERVICE_HOST', 'KUBERNETES_SERVICE_PORT']) {
        if (!isSet(env, name)) issues.push({ path: ['env', name], message: `${who}: not set, required by clusters[${i}].kubernetes.inCluster (set by Kubernetes in a pod)` });
      }
      const dir = opts.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
      file(at('inCluster'), "the pod's ServiceAccount token", join(dir, 'token'), who);
      file(at('inCluster'), "the pod's ServiceAccount CA file", join(dir, 'ca.crt'), who);
    } else if (!('eks' in k) && !('none' in k)) {
      if (k.kubeconfig !== undefined) file(at('kubeconfig'), 'the kubeconfig', k.kubeconfig, who);
      else if (isSet(env, 'KUBECONFIG')) {
        for (const p of env.KUBECONFIG!.split(delimiter).filter((x) => x !== '')) file(['env', 'KUBECONFIG'], 'the kubeconfig (from KUBECONFIG)', p, who);
      } else file(at('context'), 'the default kubeconfig', join(opts.home ?? homedir(), '.kube', 'config'), who);
    }
  });
  return issues;
}
