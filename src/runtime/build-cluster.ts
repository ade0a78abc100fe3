/**
 * The per-cluster part of `tokenwatch serve`, built in the order data flows through it
 * (docs/design/architecture.md "How serve is put together"): the audit source (`src/sources/`), Kubernetes access
 * (EKS, in-cluster or kubeconfig; one keep-alive pool), the watch cache and cluster state (`src/cluster/`), the node
 * probe reader (`src/probe/`), the blind-log monitor (`blind.ts`), the remediator
 * (`src/remediation/kube-remediator.ts`) and the poll pipeline (`src/pipeline/poll.ts`) with its token-metrics monitor.
 */
import { keysRulesName, ruleMayMatchCluster } from '../slack/routing.js';
import { ErrorCode, TokenwatchError } from '../errors.js';
import type { KubeConfig } from '@kubernetes/client-node';
import { ClusterWatchCache, type WatchCacheOptions } from '../cluster/cache.js';
import { KubeClusterState, kubeConfigFor, type KubeconfigFiles } from '../cluster/kube.js';
import { poolConnections } from '../cluster/pool.js';
import type { ClusterStateSource } from '../cluster/types.js';
import type { ClusterConfig, Config } from '../config/types.js';
import { HOUR_MS } from '../core/units.js';
import type { Finding } from '../findings/types.js';
import { scrubSecrets, type Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { KubeProbeReports, PROBE_NAMESPACE, type ProbeReportSource } from '../probe/objects.js';
import { KubeRemediator } from '../remediation/kube-remediator.js';
import { KubeMetricsScraper } from '../sources/apiserver-metrics.js';
import { createAuditSource, type ClosableAuditSource, type CloudWatchClients, type FleetInsightsRegistry } from '../sources/index.js';
import type { CloudLoggingRegistry } from '../sources/cloud-logging.js';
import type { CloudWatchRateLimiter } from '../sources/rate-limit.js';
import type { WebhookBatchStore } from '../sources/webhook-batches.js';
import type { Store } from '../store/index.js';
import { BlindLogMonitor, EksLoggingRecheck } from './blind.js';
import { ClusterHealth, type SlackAccessOf } from './health.js';
import type { ClusterAccess } from '../observability/health.js';
import { ClusterPoller, type PollOutcome } from '../pipeline/poll.js';
import { TokenMetricsMonitor } from './token-metrics-monitor.js';
import type { LogAnalyticsSources } from './log-analytics.js';

/** Everything serve runs for one cluster. */
export interface ClusterRuntime {
  config: ClusterConfig;
  source: ClosableAuditSource;
  /** Whether the audit log is blind (fed after every successful poll). */
  blind: BlindLogMonitor;
  poller: ClusterPoller;
  /** Undefined with `kubernetes: { none: true }`. */
  state?: ClusterStateSource;
  /** The cluster's watch cache (undefined without Kubernetes access or with `kubernetes.watch: false`). */
  watchCache?: ClusterWatchCache;
  /** Undefined with `kubernetes: { none: true }`: no remediation possible. */
  kubeConfig?: KubeConfig;
  /** The node-probe reports of the cluster; undefined without Kubernetes access. */
  probe?: ProbeReportSource;
  remediator?: KubeRemediator;
  /** Why Kubernetes access could not be set up (shown in `/tokens status`), if it could not. */
  kubeError?: string;
  /** The bound port of the cluster's audit webhook listener (`audit.webhook`), once started. */
  webhookPort?: number;
  /** The cluster's accesses (src/runtime/health.ts); its Kubernetes API is checked after every poll. */
  health: ClusterHealth;
  /** Every access of the cluster now, epoch ms (the health model, src/observability/health.ts). */
  access(now: number): ClusterAccess;
}

/** What {@link buildCluster} needs from the service besides the cluster's config. */
export interface BuildClusterDeps {
  /** The service config: `poll` (request timeout, chunking), `findings` and `retention` apply to every cluster. */
  config: Config;
  store: Store;
  logger: Logger;
  metrics: Metrics;
  /** The service clock, epoch ms. */
  clock: () => number;
  /** One CloudWatch Logs budget per account and Region, shared by every cluster (src/sources/rate-limit.ts). */
  rateLimiter: CloudWatchRateLimiter;
  /** Fleet Logs Insights queries shared by insights-mode clusters (`poll.cloudwatchFleetInsights`, src/sources/fleet-insights.ts). */
  fleetInsights?: FleetInsightsRegistry;
  /** How long a poll may run, ms of `clock`, before the cluster shows degraded as slow. */
  slowPollAfterMs: number;
  /** CloudWatch Logs clients shared by every cluster (one per Region and endpoint). */
  cloudwatchClients?: CloudWatchClients;
  /** Cloud Logging reads shared by GKE clusters (one query per project, one budget per quota project). */
  gcpLogging?: CloudLoggingRegistry;
  /** The bound the watch caches of every cluster share for processing list pages ({@link WatchCacheOptions.listLimit}). */
  watchListLimit?: WatchCacheOptions['listLimit'];
  /** Starts the cluster's watch cache (serve staggers the starts of many clusters); default: at once. */
  startWatchCache?: (cache: ClusterWatchCache) => void;
  /** Called when the cluster's blind-log state may have changed (the EKS logging setup was re-read). */
  onBlindChange(rt: ClusterRuntime): void;
  /** The poll pipeline's "notify" step after every successful poll of the cluster (`PollerDeps.notify`). */
  notify(rt: ClusterRuntime, findings: Finding[], outcome: PollOutcome): Promise<void>;
  /** The poll pipeline's "verify" step, after {@link notify} (`PollerDeps.verify`). */
  verify(rt: ClusterRuntime, outcome: PollOutcome): Promise<void>;
  /** Audit webhook batches in the shared store (clusters shared out across replicas): any replica takes a batch, the owner polls it. */
  webhookBatches?: WebhookBatchStore;
  /** Fencing of the cluster's poll commits (clusters shared out across replicas; see `PollerDeps.fence`). */
  fence?: (cluster: string, tx: Store) => Promise<void>;
  /** Slack's state for the cluster in the health model; default: Slack not enabled. */
  slackAccess?: SlackAccessOf;
  /** Kubeconfig files shared by the fleet, each parsed once while unchanged (default: each cluster reads its file itself). */
  kubeconfigFiles?: KubeconfigFiles;
  /** Builds `audit.azure` sources (src/runtime/log-analytics.ts; loads the Log Analytics client on first use). */
  logAnalytics?: LogAnalyticsSources;
}

async function buildKube(
  c: ClusterConfig,
  clock: () => number,
  requestTimeoutMs: number,
  files?: KubeconfigFiles,
): Promise<{ kubeConfig?: KubeConfig; error?: string; eksAuditLogging?: boolean; eksDescribedAt?: number }> {
  const k = c.kubernetes;
  if ('none' in k) return {};
  try {
    if ('eks' in k) {
      const { eksKubeConfig } = await import('../cluster/eks-auth.js');
      let eksAuditLogging: boolean | undefined;
      const describedAt = clock();
      const kubeConfig = await eksKubeConfig({
        clusterName: k.eks.clusterName,
        region: k.eks.region,
        requestTimeoutMs,
        onClusterInfo: (info) => {
          eksAuditLogging = info.auditLogging;
        },
      });
      return { kubeConfig, eksDescribedAt: describedAt, ...(eksAuditLogging !== undefined ? { eksAuditLogging } : {}) };
    }
    if ('inCluster' in k) return { kubeConfig: kubeConfigFor({ inCluster: true }) };
    return { kubeConfig: kubeConfigFor({ kubeconfig: k.kubeconfig, context: k.context }, files) };
  } catch (err) {
    // Scrubbed: shown in `/tokens status` (Slack).
    return { error: scrubSecrets(`Kubernetes access for cluster ${c.name} failed: ${err instanceof Error ? err.message : String(err)}`) };
  }
}

/**
 * Start a cluster's watch cache, logging its syncs, relists and failures (scrubbed: reasons may quote the server).
 * Its pod-IP history is stamped with the service clock and kept for the cluster's `lookback` (the 401s it explains).
 */
function startWatchCache(
  kc: KubeConfig,
  cluster: string,
  logger: Logger,
  ip: { eventClock: () => number; ipHistoryMs: number; metaKeys?: WatchCacheOptions['metaKeys'] },
  listLimit: WatchCacheOptions['listLimit'],
  start: (cache: ClusterWatchCache) => void,
): ClusterWatchCache {
  const cache = new ClusterWatchCache(kc, {
    ...ip,
    ...(listLimit ? { listLimit } : {}),
    onEvent: (e) => {
      const fields = { cluster, resource: e.resource, ...(e.reason ? { reason: scrubSecrets(e.reason) } : {}) };
      if (e.kind === 'synced') logger.debug(fields, 'watch cache: listed, now watching');
      else if (e.kind === 'relist') logger.info(fields, 'watch cache: relisting (resourceVersion too old)');
      else if (e.kind === 'watch-failed') logger.warn(fields, 'watch cache: watch failed, retrying with backoff');
      else logger.error(fields, 'watch cache disabled: reading the API directly');
    },
  });
  start(cache);
  return cache;
}

/**
 * Builds one cluster's runtime in flow order (see the module docstring). Starts its watch cache (when Kubernetes access
 * and `kubernetes.watch` allow); the webhook listener of a webhook source is started later by serve.
 * Kubernetes access that cannot be set up does not throw: the runtime has no state, probe or remediator, and
 * `kubeError` says why (scrubbed, logged here).
 */
export async function buildCluster(c: ClusterConfig, deps: BuildClusterDeps): Promise<ClusterRuntime> {
  const { config, store, logger, metrics, clock, rateLimiter, fleetInsights, onBlindChange, notify, verify } = deps;
  if ('azure' in c.audit && !deps.logAnalytics) throw new TokenwatchError(ErrorCode.Internal, 'buildCluster: audit.azure needs deps.logAnalytics');
  const source = 'azure' in c.audit ? await deps.logAnalytics!(c.audit.azure) : createAuditSource(c.audit, {
    cluster: c.name,
    onShed: () => metrics.webhookShed.inc({ cluster: c.name }),
    ...(deps.webhookBatches ? { webhookBatches: deps.webhookBatches, onWebhookStoreError: (err: unknown) => logger.warn({ err, cluster: c.name }, 'audit webhook batch not stored (answered 503, the API server re-sends it)') } : {}),
    rateLimiter,
    requestTimeoutMs: config.poll.requestTimeout,
    ...(fleetInsights ? { fleetInsights } : {}),
    ...(deps.cloudwatchClients ? { clients: deps.cloudwatchClients } : {}),
    ...(deps.gcpLogging ? { gcpLogging: deps.gcpLogging } : {}),
  });
  const kube = await buildKube(c, clock, config.poll.requestTimeout, deps.kubeconfigFiles);
  if (kube.error) logger.error({ cluster: c.name }, kube.error);
  // One keep-alive connection pool per cluster for every call below (state, probe, metrics, remediation, watches).
  if (kube.kubeConfig) poolConnections(kube.kubeConfig);
  const secretMetadata = 'secretMetadata' in c.kubernetes && c.kubernetes.secretMetadata === true;
  const watch = !('watch' in c.kubernetes && c.kubernetes.watch === false);
  const timeoutMs = config.poll.requestTimeout;
  // Only the label/annotation keys the Slack routing rules name are kept of workloads and pods (memory stays bounded).
  // Namespaces are watched only when a rule that can match this cluster names namespace labels (a watch and RBAC more).
  const routes = config.slack?.enabled ? (config.slack.routes ?? []) : [];
  const named = keysRulesName(routes);
  const nsLabels = [...keysRulesName(routes.filter((r) => ruleMayMatchCluster(r, c.name))).namespaceLabels];
  const metaKeys =
    named.labels.size + named.annotations.size + nsLabels.length > 0
      ? { labels: [...named.labels], annotations: [...named.annotations], ...(nsLabels.length > 0 ? { namespaceLabels: nsLabels } : {}) }
      : undefined;
  const watchCache = kube.kubeConfig && watch ? startWatchCache(kube.kubeConfig, c.name, logger, { eventClock: clock, ipHistoryMs: c.lookback, ...(metaKeys ? { metaKeys } : {}) }, deps.watchListLimit, deps.startWatchCache ?? ((cache) => cache.start())) : undefined;
  const state = kube.kubeConfig
    ? new KubeClusterState(kube.kubeConfig, {
        secretMetadata,
        timeoutMs,
        ...(metaKeys ? { metaKeys } : {}),
        ...(watchCache
          ? {
              cache: watchCache,
              onFallback: (f?: { state: string; reason: string }) => {
                if (f === undefined) logger.info({ cluster: c.name }, 'cluster state: reading the watch cache again');
                else logger[f.state === 'syncing' ? 'info' : 'warn']({ cluster: c.name, reason: scrubSecrets(f.reason) }, `cluster state read from the API directly: ${scrubSecrets(f.reason)}`);
              },
            }
          : {}),
      })
    : undefined;
  const probe = kube.kubeConfig ? new KubeProbeReports(kube.kubeConfig, PROBE_NAMESPACE, (what, reason, n) => metrics.probeDropped.inc({ cluster: c.name, what, reason }, n), timeoutMs) : undefined;
  const blind = new BlindLogMonitor({
    source: 'cloudwatch' in c.audit ? 'cloudwatch' : 'gcp' in c.audit ? 'gcp' : 'file' in c.audit || 'webhook' in c.audit ? 'file' : 'azure' in c.audit ? 'log-analytics' : 'none',
    ...(c.blindLog ? { silentAfterMs: c.blindLog.silentAfter, silentPolls: c.blindLog.silentPolls } : {}),
    startedAt: clock(),
    otherSignals: kube.kubeConfig !== undefined, // token metrics and the node probe need Kubernetes access
  });
  blind.setEksAuditLogging(kube.eksAuditLogging);
  // The logging setup can change while serve runs: read again before a poll once the last reading is an hour old
  // (src/runtime/blind.ts). Not read at start (Kubernetes access failed): the first poll reads it.
  const k = c.kubernetes;
  const eksRecheck =
    'eks' in k
      ? new EksLoggingRecheck({
          monitor: blind,
          readAt: kube.eksDescribedAt,
          read: async () => {
            const { describeEksCluster } = await import('../cluster/eks-auth.js');
            const info = await describeEksCluster({ clusterName: k.eks.clusterName, region: k.eks.region, abortSignal: AbortSignal.timeout(config.poll.requestTimeout) });
            return info.auditLogging;
          },
          onRead: (err) => {
            // Scrubbed like the start-up error: the SDK's message may quote a request.
            if (err !== undefined) logger.warn({ cluster: c.name }, scrubSecrets(`EKS audit logging setup not re-read (the last reading stands): ${err instanceof Error ? err.message : String(err)}`));
            onBlindChange(runtime);
          },
        })
      : undefined;
  // The remediator of approved actions, then the poller: source → cluster state → findings → the store.
  const runtime: ClusterRuntime = {
    config: c,
    source,
    blind,
    state,
    ...(watchCache ? { watchCache } : {}),
    kubeConfig: kube.kubeConfig,
    probe,
    remediator: kube.kubeConfig ? new KubeRemediator(kube.kubeConfig) : undefined,
    kubeError: kube.error,
    poller: undefined as unknown as ClusterPoller,
    health: undefined as unknown as ClusterHealth,
    access: (now) => runtime.health.access(now),
  };
  runtime.health = new ClusterHealth(runtime, clock(), { requestTimeoutMs: config.poll.requestTimeout, ...(deps.slackAccess ? { slack: deps.slackAccess } : {}) });
  runtime.poller = new ClusterPoller({
    cluster: c,
    source,
    store,
    state,
    logger,
    metrics,
    clock,
    ...(kube.kubeConfig ? { tokenMetrics: new TokenMetricsMonitor({ cluster: c.name, scraper: new KubeMetricsScraper(kube.kubeConfig, { timeoutMs: config.poll.requestTimeout }), store, logger }) } : {}),
    ...(probe ? { probe } : {}),
    seenRetentionMs: Math.max(2 * HOUR_MS, 'cloudwatch' in c.audit ? c.audit.cloudwatch.overlap * 2 : 'azure' in c.audit ? (c.audit.azure.overlap + c.audit.azure.lag) * 2 : 0),
    chunkEvents: config.poll.chunkEvents,
    slowAfterMs: deps.slowPollAfterMs,
    activeWindowMs: config.findings.activeWindow,
    quietPeriodMs: config.findings.quietPeriod,
    retention: { tokenRecordsMs: config.retention.tokenRecords, pollRunsMs: config.retention.pollRuns, actionLogMs: config.retention.actionLog },
    blind,
    ...(eksRecheck ? { beforePoll: (at: number) => eksRecheck.due(at) } : {}),
    notify: (findings: Finding[], outcome: PollOutcome) => notify(runtime, findings, outcome),
    verify: (outcome: PollOutcome) => verify(runtime, outcome),
    // The Kubernetes API of the health model: checked after every poll, even one that read no cluster state. A failed
    // poll may have made the log blind (a refused read, src/runtime/blind.ts): the gauge is set now, not at the next success.
    after: (outcome: PollOutcome) => {
      if (outcome.error !== undefined) onBlindChange(runtime);
      return runtime.health.afterPoll(clock());
    },
    ...(deps.fence ? { fence: (tx: Store) => deps.fence!(c.name, tx) } : {}),
  });
  return runtime;
}
