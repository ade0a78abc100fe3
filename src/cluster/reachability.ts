/**
 * Whether a cluster's Kubernetes API answers with tokenwatch's credentials: one `GET /version` per poll (the
 * `system:public-info-viewer` ClusterRole lets every caller read it, so it needs no RBAC of its own, while a rejected
 * token is still answered 401: https://kubernetes.io/docs/reference/access-authn-authz/rbac/#discovery-roles). It is
 * the attempt behind the "Kubernetes API" access of the health model (src/observability/health.ts): a poll that reads
 * no cluster state (no finding to enrich) still finds out that the API is unreachable.
 */
import { ApiException, VersionApi, type KubeConfig } from '@kubernetes/client-node';
import { problemOf } from '../observability/health.js';
import { timeoutOptions } from './kube.js';

/**
 * Reads `/version` within `timeoutMs`. Resolves undefined when the API answered, else the problem in words that read
 * after "Kubernetes API" (`unreachable: connect ECONNREFUSED 127.0.0.1:6443`, `rejected the credentials (HTTP 401)`,
 * `failed: HTTP 503 …`). Never rejects; the text may quote the server and is scrubbed where the model keeps it.
 */
export async function kubeApiProblem(kc: KubeConfig, timeoutMs: number): Promise<string | undefined> {
  try {
    if (!kc.getCurrentCluster()) return 'not set up: the kubeconfig has no current cluster';
    await kc.makeApiClient(VersionApi).getCode({}, timeoutOptions(timeoutMs));
    return undefined;
  } catch (err) {
    if (err instanceof ApiException) {
      const code = (err as ApiException<unknown>).code;
      if (code === 401) return 'rejected the credentials (HTTP 401): the token or client certificate is invalid or expired';
      if (code === 403) return undefined; // answered: authenticated, /version not allowed by a custom RBAC
      return `failed: HTTP ${code} on GET /version`;
    }
    if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) return `unreachable: no answer to GET /version within ${timeoutMs} ms`;
    return problemOf(err);
  }
}
