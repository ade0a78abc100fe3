/**
 * Prometheus metrics of tokenwatch (prom-client 15), served at `/metrics`.
 *
 * One {@link Metrics} object per process, with its own `Registry` so tests can create
 * independent instances. Metric names follow Prometheus naming conventions
 * (https://prometheus.io/docs/practices/naming/): `tokenwatch_` prefix, `_total` counters, `_seconds` units.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** The metric set. Labels are bounded: cluster names from config, fixed enums otherwise. */
export class Metrics {
  readonly registry = new Registry();
  /** Polls by cluster and outcome (`ok` | `error` | `skipped-overlap`). */
  readonly polls = new Counter({ name: 'tokenwatch_polls_total', help: 'Polls by cluster and outcome.', labelNames: ['cluster', 'outcome'] as const, registers: [this.registry] });
  /** Scheduled polls that did not run, by reason (`overlap` | `coalesced`, src/runtime/scheduler.ts `MissReason`). */
  readonly pollsMissed = new Counter({ name: 'tokenwatch_polls_missed_total', help: 'Scheduled polls that did not run, by cluster and reason (overlap: the previous poll was still running; coalesced: folded into a late poll; unowned: no replica could start it while the cluster changed hands; store-unavailable: its poll failed with the store unreachable, recorded as missed once the store answers).', labelNames: ['cluster', 'reason'] as const, registers: [this.registry] });
  /** Scheduled polls whose timer fired past node-cron's tolerance (a blocked event loop) and that ran late. */
  readonly pollsLate = new Counter({ name: 'tokenwatch_polls_late_total', help: 'Scheduled polls that ran late because their timer fired late.', labelNames: ['cluster'] as const, registers: [this.registry] });
  /**
   * 1 while the last poll of a cluster failed (source, cluster state or store) or one of its Kubernetes reads timed out
   * (a slow or hung API server), 0 after a successful one.
   */
  readonly pollFailing = new Gauge({ name: 'tokenwatch_poll_failing', help: '1 when the last poll of the cluster failed or a Kubernetes read of it timed out, 0 when it succeeded.', labelNames: ['cluster'] as const, registers: [this.registry] });
  /**
   * Per cluster, how long its running poll has been running, seconds (0 when none runs): read from
   * {@link Metrics.pollRunningOf} (serve sets it) each time the registry is collected.
   */
  pollRunningOf: (() => Iterable<readonly [cluster: string, seconds: number]>) | undefined;
  /** How long the running poll of a cluster has been running, seconds (0 when none runs); see {@link pollRunningOf}. */
  readonly pollRunning: Gauge<'cluster'> = new Gauge({
    name: 'tokenwatch_poll_running_seconds',
    help: 'How long the running poll of the cluster has been running (0 when none runs).',
    labelNames: ['cluster'] as const,
    registers: [this.registry],
    collect: () => {
      for (const [cluster, seconds] of this.pollRunningOf?.() ?? []) this.pollRunning.set({ cluster }, seconds);
    },
  });
  /**
   * Per cluster and access (`audit`, `kubernetes`, `watchCache`, `slack`; src/observability/health.ts), 1 when its last
   * attempt failed, else 0: read from {@link Metrics.accessFailingOf} (serve sets it) each time the registry is collected.
   */
  accessFailingOf: (() => Iterable<readonly [cluster: string, access: string, failing: boolean]>) | undefined;
  /** Whether each access a cluster's poll needs is failing; see {@link accessFailingOf}. */
  readonly accessFailing: Gauge<'cluster' | 'access'> = new Gauge({
    name: 'tokenwatch_access_failing',
    help: "1 when the cluster's access (audit, kubernetes, watchCache, slack) failed at its last attempt, else 0 (ok, pending or not used).",
    labelNames: ['cluster', 'access'] as const,
    registers: [this.registry],
    collect: () => {
      for (const [cluster, access, failing] of this.accessFailingOf?.() ?? []) this.accessFailing.set({ cluster, access }, failing ? 1 : 0);
    },
  });
  /** When the last successful poll of a cluster started, epoch seconds. */
  readonly pollLastSuccess = new Gauge({ name: 'tokenwatch_poll_last_success_timestamp_seconds', help: 'Start of the last successful poll of the cluster (Unix time, seconds).', labelNames: ['cluster'] as const, registers: [this.registry] });
  /** CloudWatch Logs `ThrottlingException` answers, per account, Region and operation (the shared budget then slows down). */
  readonly cloudwatchThrottled = new Counter({ name: 'tokenwatch_cloudwatch_throttled_total', help: 'CloudWatch Logs ThrottlingException answers by account, Region and operation.', labelNames: ['account', 'region', 'operation'] as const, registers: [this.registry] });
  /** The shared budget's current rate after its last throttling answer, requests per second (src/sources/rate-limit.ts). */
  readonly cloudwatchRate = new Gauge({ name: 'tokenwatch_cloudwatch_budget_rate', help: 'Current CloudWatch Logs request rate of the shared budget after the last throttling (requests per second).', labelNames: ['account', 'region', 'operation'] as const, registers: [this.registry] });
  /** Cloud Logging 429 RESOURCE_EXHAUSTED answers per quota project (src/sources/cloud-logging.ts; the shared read budget then slows down). */
  readonly gcpLoggingThrottled = new Counter({ name: 'tokenwatch_gcp_logging_throttled_total', help: 'Cloud Logging 429 RESOURCE_EXHAUSTED answers by quota project.', labelNames: ['project'] as const, registers: [this.registry] });
  /** The Cloud Logging read budget's current rate after its last 429, requests per second. */
  readonly gcpLoggingRate = new Gauge({ name: 'tokenwatch_gcp_logging_budget_rate', help: 'Current Cloud Logging read rate of the shared budget after the last 429 (requests per second), by quota project.', labelNames: ['project'] as const, registers: [this.registry] });
  /** Bytes scanned by fleet Logs Insights queries, per Region (Logs Insights bills by these; docs/live-mode.md#fleet-insights-mode). */
  /** Calls whose shared request budget (PostgreSQL `rate_buckets`) could not be read, so they took a token of this replica's own bucket (src/core/token-bucket.ts). */
  readonly rateBudgetStoreErrors = new Counter({ name: 'tokenwatch_rate_budget_store_errors_total', help: 'Calls that took a token of the replica\'s own budget because the shared one in the store could not be read, by budget (cloudwatch, slack).', labelNames: ['budget'] as const, registers: [this.registry] });
  readonly cloudwatchInsightsBytes = new Counter({ name: 'tokenwatch_cloudwatch_insights_bytes_scanned_total', help: 'Bytes scanned by fleet Logs Insights queries (billed per GB scanned), by Region.', labelNames: ['region'] as const, registers: [this.registry] });
  /**
   * Bytes scanned by the Logs Insights query behind a cluster's last successful poll (insights mode: its own query;
   * fleet Insights mode: the one query shared by its batch of up to 50 log groups, so clusters of one batch show the
   * same figure). FilterLogEvents reports no searched bytes: filter-mode clusters have no sample.
   */
  readonly pollInsightsBytes = new Gauge({ name: 'tokenwatch_poll_insights_bytes_scanned', help: 'Bytes scanned by the Logs Insights query behind the last successful poll of a cluster (fleet mode: the shared query of its batch).', labelNames: ['cluster'] as const, registers: [this.registry] });
  /** Slack notification work items waiting in the queue (docs/slack.md "Notification queue"). */
  readonly slackQueueDepth = new Gauge({ name: 'tokenwatch_slack_queue_depth', help: 'Slack notification work items waiting in the queue (alert posts, edits, digests).', registers: [this.registry] });
  /**
   * The age of the oldest waiting Slack queue item, seconds (0 when empty), read by {@link slackQueueOldest} each time
   * the registry is collected (the drainer, src/slack/drainer.ts, sets it), so the age grows while nothing is sent.
   */
  slackQueueOldestOf: (() => number) | undefined;
  /** Age of the oldest waiting item, seconds (0 when the queue is empty); see {@link slackQueueOldestOf}. */
  readonly slackQueueOldest: Gauge = new Gauge({
    name: 'tokenwatch_slack_queue_oldest_seconds',
    help: 'Age of the oldest Slack notification work item waiting in the queue, in seconds (0 when empty).',
    registers: [this.registry],
    collect: () => {
      const age = this.slackQueueOldestOf?.();
      if (age !== undefined) this.slackQueueOldest.set(age);
    },
  });
  /** Fleet Logs Insights queries completed, per Region. */
  readonly cloudwatchInsightsQueries = new Counter({ name: 'tokenwatch_cloudwatch_insights_queries_total', help: 'Fleet Logs Insights queries completed, by Region.', labelNames: ['region'] as const, registers: [this.registry] });
  /** Log Analytics queries sent (`audit.azure`), by workspace id and answer (`ok`, `partial`, or the HTTP status: `429` throttled). */
  readonly logAnalyticsQueries = new Counter({ name: 'tokenwatch_log_analytics_queries_total', help: 'Log Analytics queries sent, by workspace and answer (ok, partial, or the HTTP status).', labelNames: ['workspace', 'status'] as const, registers: [this.registry] });
  /** Slack requests or Socket Mode envelopes dropped as replays/redeliveries, by transport (`http` | `socket`). */
  readonly slackDuplicates = new Counter({ name: 'tokenwatch_slack_duplicate_requests_total', help: 'Slack requests (HTTP replays, Socket Mode redeliveries) acknowledged but not handled again.', labelNames: ['transport'] as const, registers: [this.registry] });
  /**
   * Slack HTTP requests refused before any handler ran, by reason (`signature`: signature or timestamp did not
   * verify; `body-too-large`). Their log lines are rate-limited; this counts every one.
   */
  readonly slackRejectedRequests = new Counter({ name: 'tokenwatch_slack_rejected_requests_total', help: 'Slack HTTP requests refused before handling (bad signature or timestamp, body too large).', labelNames: ['reason'] as const, registers: [this.registry] });
  /**
   * Node-probe input not believed or over a cap: `what` = `report` (a whole ConfigMap), `entry` (a file of a believed
   * report) or `finding` (probe-only findings over the per-poll cap); `reason` as in src/probe/verify.ts
   * (`no-proof`, `wrong-node`, `invalid-name`, `over-cap`, …).
   */
  readonly probeDropped = new Counter({ name: 'tokenwatch_probe_dropped_total', help: 'Node-probe reports, entries and findings dropped (not believed, or over a cap).', labelNames: ['cluster', 'what', 'reason'] as const, registers: [this.registry] });
  /** Poll duration in seconds. */
  readonly pollDuration = new Histogram({ name: 'tokenwatch_poll_duration_seconds', help: 'Duration of one poll of one cluster.', labelNames: ['cluster'] as const, buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120], registers: [this.registry] });
  /** Audit event records read from sources (after the source-side filter). */
  readonly auditEvents = new Counter({ name: 'tokenwatch_audit_events_total', help: 'Audit event records read from sources.', labelNames: ['cluster'] as const, registers: [this.registry] });
  /** New token uses (each auditID once) by kind (`stale` | `legacy` | `unauthorized`). */
  readonly tokenUses = new Counter({ name: 'tokenwatch_token_uses_total', help: 'New token uses by kind.', labelNames: ['cluster', 'kind'] as const, registers: [this.registry] });
  /** Open findings by severity. */
  readonly openFindings = new Gauge({ name: 'tokenwatch_open_findings', help: 'Open findings by cluster and severity.', labelNames: ['cluster', 'severity'] as const, registers: [this.registry] });
  /** Days until the nearest rejection of a live stale token (negative when already past). */
  readonly daysToRejection = new Gauge({ name: 'tokenwatch_days_to_nearest_rejection', help: 'Days until the API server rejects the nearest live stale token, per cluster.', labelNames: ['cluster'] as const, registers: [this.registry] });
  /** Slack Web API errors by method and error code. */
  readonly slackErrors = new Counter({ name: 'tokenwatch_slack_api_errors_total', help: 'Slack Web API errors.', labelNames: ['method', 'error'] as const, registers: [this.registry] });
  /** Approvals reaching a final state (`succeeded` | `failed` | `rejected` | `expired`). */
  readonly approvals = new Counter({ name: 'tokenwatch_approvals_total', help: 'Approvals by final outcome.', labelNames: ['cluster', 'outcome'] as const, registers: [this.registry] });
  /** Remediations by action and outcome. */
  readonly remediations = new Counter({ name: 'tokenwatch_remediations_total', help: 'Remediations by action and outcome.', labelNames: ['cluster', 'action', 'outcome'] as const, registers: [this.registry] });
  /** 1 while the Slack Socket Mode connection is open, else 0. */
  readonly socketConnected = new Gauge({ name: 'tokenwatch_slack_socket_connected', help: 'Slack Socket Mode connection state (1 = connected).', registers: [this.registry] });
  /** 1 while a cluster's audit log is blind (src/runtime/blind.ts), by reason; 0 otherwise. */
  readonly auditLogBlind = new Gauge({ name: 'tokenwatch_audit_log_blind', help: '1 when the audit log of the cluster cannot see stale tokens (audit log type off, no events), by reason.', labelNames: ['cluster', 'reason'] as const, registers: [this.registry] });
  /** Audit webhook batches answered 429 because the unconsumed spool passed `audit.webhook.maxSpoolBytes`. */
  readonly webhookShed = new Counter({ name: 'tokenwatch_webhook_shed_batches_total', help: 'Audit webhook batches shed with HTTP 429 (spool over its bound).', labelNames: ['cluster'] as const, registers: [this.registry] });
  /** 1 while this process holds the SQLite store's poller lock (it owns every cluster), else 0; not set with shards. */
  readonly leader = new Gauge({ name: 'tokenwatch_leader', help: '1 when this replica is the active leader.', registers: [this.registry] });
  /** Clusters this replica owns (polls and remediates) when clusters are shared out across replicas (PostgreSQL store). */
  readonly clustersOwned = new Gauge({ name: 'tokenwatch_clusters_owned', help: 'Clusters this replica owns (polls and remediates) when clusters are shared out across replicas.', registers: [this.registry] });
  /** Changes of a cluster's owner seen by this replica: `taken` (it took the cluster), `released` (handed over), `lost` (taken by another, or lapsed). */
  readonly clusterOwnershipChanges = new Counter({ name: 'tokenwatch_cluster_ownership_changes_total', help: 'Changes of cluster ownership on this replica by cluster and change (taken, released, lost).', labelNames: ['cluster', 'change'] as const, registers: [this.registry] });

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    if (opts.defaultMetrics) collectDefaultMetrics({ register: this.registry, prefix: 'tokenwatch_' });
  }

  /** Prometheus text exposition format. */
  async text(): Promise<string> {
    return this.registry.metrics();
  }
}
