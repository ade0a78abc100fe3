/**
 * The Log Analytics part of `serve` (clusters with `audit.azure`, src/sources/log-analytics.ts), built on first use
 * so that a deployment without AKS clusters — and `scan` — never loads `@azure/monitor-query-logs`: one registry of
 * workspaces per deployment, one workload-identity credential per (authority host, CA file), one query budget per
 * identity on the shared bucket store (src/core/token-bucket.ts; the store's `rate_buckets` with replicas, as the
 * CloudWatch budget).
 */
import { readFileSync } from 'node:fs';
import type { AzureAuditConfig, Config } from '../config/types.js';
import { type BucketStateStore, TokenBucketLimiter } from '../core/token-bucket.js';
import { ErrorCode, TokenwatchError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { AccessToken, WorkloadIdentityCredential } from '../sources/azure-token.js';
import type { AuditSource } from '../sources/types.js';
import { budgetStoreError } from './budgets.js';

/** The budget key prefix of Log Analytics queries: `loganalytics/<client id>`. */
const KEY_PREFIX = 'loganalytics/';

/** Builds the audit source of a cluster's `audit.azure` (see the module docstring). */
export type LogAnalyticsSources = (cfg: AzureAuditConfig) => Promise<AuditSource & { close(): void }>;

/**
 * The {@link LogAnalyticsSources} of a deployment. The credential comes from the workload identity environment
 * (`AZURE_CLIENT_ID`, `AZURE_TENANT_ID`, `AZURE_FEDERATED_TOKEN_FILE`, `AZURE_AUTHORITY_HOST`).
 * The returned function throws TokenwatchError (`config_invalid`) when those are missing or `caFile` cannot be read.
 */
export function logAnalyticsSources(deps: { config: Config; metrics: Metrics; logger: Logger; env?: NodeJS.ProcessEnv; buckets?: BucketStateStore }): { sources: LogAnalyticsSources; close(): void } {
  const env = deps.env ?? process.env;
  const closers: Array<() => void> = [];
  let loaded: Promise<{ mod: typeof import('../sources/log-analytics.js'); token: typeof import('../sources/azure-token.js') }> | undefined;
  const registries = new Map<string, import('../sources/log-analytics.js').LogAnalyticsRegistry>();
  const settings = deps.config.poll.logAnalytics;
  let limiter: TokenBucketLimiter | undefined;
  const sources: LogAnalyticsSources = async (cfg) => {
    loaded ??= Promise.all([import('../sources/log-analytics.js'), import('../sources/azure-token.js')]).then(([mod, token]) => ({ mod, token }));
    const { mod, token } = await loaded;
    const wi = token.workloadIdentityFromEnv(env);
    if (!('settings' in wi)) {
      throw new TokenwatchError(ErrorCode.ConfigInvalid, `audit.azure: the workload identity environment is incomplete (${wi.missing.join(', ')} not set): label the pod azure.workload.identity/use: "true" and annotate its ServiceAccount with azure.workload.identity/client-id (docs/install.md#aks)`);
    }
    const key = JSON.stringify([cfg.authorityHost ?? null, cfg.caFile ?? null]);
    let registry = registries.get(key);
    if (!registry) {
      let ca: Buffer | undefined;
      if (cfg.caFile !== undefined) {
        try {
          ca = readFileSync(cfg.caFile);
        } catch (err) {
          throw new TokenwatchError(ErrorCode.ConfigInvalid, `audit.azure.caFile: cannot read ${cfg.caFile}: ${(err as Error).message}`, { cause: err });
        }
      }
      const credential: WorkloadIdentityCredential = new token.WorkloadIdentityCredential({ ...wi.settings, ...(cfg.authorityHost !== undefined && { authorityHost: cfg.authorityHost }), ...(ca && { ca }) });
      closers.push(() => credential.close());
      limiter ??= new TokenBucketLimiter({
        limitsOf: (k) => (k.startsWith(KEY_PREFIX) ? { rate: settings.queriesPerSecond, burst: 1, adaptive: true } : undefined),
        ...(deps.buckets && { store: deps.buckets, clock: Date.now, onStoreError: budgetStoreError('log-analytics', deps.metrics, deps.logger) }),
        onThrottle: (k, rate) => deps.logger.warn({ key: k, rate }, 'Log Analytics answered 429: query rate lowered'),
      });
      registry = new mod.LogAnalyticsRegistry({
        settings,
        credential: { getToken: (scopes: string | string[]): Promise<AccessToken> => credential.getToken(scopes) },
        budget: { limiter, key: `${KEY_PREFIX}${wi.settings.clientId}` },
        ...(ca && { ca }),
        onQuery: (q) => {
          deps.metrics.logAnalyticsQueries.inc({ workspace: q.workspaceId, status: String(q.status) });
        },
      });
      registries.set(key, registry);
    }
    return registry.source(cfg);
  };
  return {
    sources,
    close: () => {
      for (const c of closers) c();
    },
  };
}
