/**
 * What the Slack integration needs from the runtime that starts it, and what it gives back: small interfaces, so
 * that `slack/` never imports the wiring (`src/runtime/`). The runtime's own context (`ServeContext`) satisfies
 * {@link SlackContext}; tests hand in a plain object.
 */
import { ErrorCode, TokenwatchError } from '../errors.js';
import type { ClusterStateSource } from '../cluster/types.js';
import type { Ownership } from '../core/ownership.js';
import type { ClusterConfig, Config } from '../config/types.js';
import type { ClusterEvent } from '../findings/cluster-events.js';
import type { IgnoredEventTimes } from '../findings/clock-skew.js';
import type { Finding } from '../findings/types.js';
import type { Logger } from '../observability/logger.js';
import type { ClusterAccess } from '../observability/health.js';
import type { Metrics } from '../observability/metrics.js';
import type { ProbeReportSource } from '../probe/objects.js';
import type { Remediator } from '../remediation/executor.js';
import type { VerifierDeps } from '../remediation/verify.js';
import type { FindingChange, Store } from '../store/index.js';

/** What `/tokens status` shows of a cluster's last poll (the runtime's `PollHealth` extends it). */
export interface SlackPollHealth {
  /** `ok` after a successful poll, `degraded` after a failed one, `pending` before the first. */
  status: 'ok' | 'degraded' | 'pending';
  lastPollAt?: number;
  lastSuccessAt?: number;
  lastError?: string;
  /** When the polls started failing (the first failed poll since the last success), epoch ms UTC; absent while they succeed. */
  failingSince?: number;
  /** Cluster-state problem of the last poll (e.g. a forbidden verb), if any. */
  stateError?: string;
  /** Why the last API-server `/metrics` read failed, if it did. */
  metricsError?: string;
  /** Why the last read of the node-probe reports failed, if it did. */
  probeError?: string;
  /** Cluster-level credential events in the last successful poll's findings (`src/findings/cluster-events.ts`). */
  clusterEvents?: readonly ClusterEvent[];
  /** Token uses the last successful poll left out as stamped later than the host clock plus 24 h (`src/findings/clock-skew.ts`). */
  ignoredEventTimes?: IgnoredEventTimes;
  /** When the poll running now started, epoch ms UTC; absent when none runs. */
  runningSince?: number;
  /** Set (with status `degraded`) while the running poll has taken longer than expected: since when, and for how long (ms). */
  slow?: { since: number; forMs: number };
  /** Scheduled polls of this cluster that did not run since start: how many, and the latest (due time epoch ms UTC, reason). */
  missed?: { count: number; lastDueAt: number; lastReason: string };
  /**
   * What the last successful poll's audit source cost: requests made, bytes received, and the Logs Insights query
   * behind it (bytes scanned, log groups covered; `SourceStats.insights`), when it read one.
   */
  lastPollCost?: { requests: number; bytes: number; insights?: { bytesScanned: number; logGroups: number } };
}

/** What Slack uses of one watched cluster. */
export interface SlackCluster {
  config: ClusterConfig;
  /**
   * The audit source (its id names it in `/tokens status`); the audit webhook source also reports its counters
   * (`src/sources/webhook.ts`), one status line.
   */
  source: { id: string; webhookStatus?(): { acceptedEvents: number; shedBatches: number; unconsumedBytes: number } };
  /** The cluster's poller, for its health. */
  poller: { health(): SlackPollHealth };
  /** Undefined with `kubernetes: { none: true }`. */
  state?: ClusterStateSource;
  /** Undefined with `kubernetes: { none: true }`: no remediation possible. */
  remediator?: Remediator;
  /** The node-probe reports (restart verification by the probe); undefined without Kubernetes access. */
  probe?: ProbeReportSource;
  /** Why Kubernetes access could not be set up (shown in `/tokens status`), if it could not. */
  kubeError?: string;
  /** The cluster's watch cache (`src/cluster/cache.ts`), when on: one `/tokens status` line while reads bypass it. */
  watchCache?: { freshness(): { ok: true } | { ok: false; state: string; reason: string } };
  /** Whether the audit log is blind (`src/runtime/blind.ts`): one line for `/tokens status` when it is. */
  blind?: { state(now: number): { blind: false } | { blind: true; reason?: string; text: string } };
  /**
   * The cluster's accesses now (the health model, src/observability/health.ts): what `/tokens status` and the Home tab
   * show for the Kubernetes API, the watch cache and Slack. Absent in tests that build clusters by hand.
   */
  access?(now: number): ClusterAccess;
}

/** What a poll tells Slack besides the findings: the changes to alert on and the findings it resolved as quiet. */
export interface SlackPollOutcome {
  changes: FindingChange[];
  /** Ids of the findings resolved as quiet by this poll. */
  concluded: string[];
  /** Cluster-level credential events (signing-key rotation, issuer change) in this poll's findings. */
  clusterEvents?: readonly ClusterEvent[];
}

/** What `/tokens scan` answers: the poll started, one is already running, the cluster is unknown, or polling stopped. */
export type RunNowResult = 'started' | 'busy' | 'unknown-job' | 'stopped';

/** What the Slack integration gets from the runtime. */
export interface SlackContext {
  config: Config;
  store: Store;
  logger: Logger;
  metrics: Metrics;
  clusters: ReadonlyMap<string, SlackCluster>;
  clock: () => number;
  /** Starts a poll of `cluster` now (on this replica; the caller checks ownership). */
  runNow(cluster: string): RunNowResult;
  /**
   * Which clusters this replica polls and executes approved actions for (`src/core/ownership.ts`): every cluster while
   * it holds the SQLite store's poller lock, or with clusters shared out across replicas (PostgreSQL store) the ones
   * it owns.
   */
  ownership: Ownership;
  /**
   * With clusters shared out across replicas: the replica id that owns `cluster` as last read (null: none right
   * now), for `/tokens status`. Absent otherwise.
   */
  ownerOf?(cluster: string): string | null;
}

/** An integration started and stopped with serve. */
export interface Integration {
  name: string;
  stop(): Promise<void>;
  /**
   * A one-word state for `/readyz` (e.g. Socket Mode `connected` / `disconnected`); never error text.
   * Default `ok` while started.
   */
  state?(): string;
  /**
   * The Slack error that made the alert channel of `cluster` unusable, and when it was seen (epoch ms), while it lasts
   * (e.g. `not_in_channel`); undefined when the channel works or has not been tried. Read by the health model.
   */
  channelProblem?(cluster: string): { error: string; at: number } | undefined;
  /** Whether work of `cluster` (an approved action being executed or followed) runs in this integration now. */
  busy?(cluster: string): boolean;
  /**
   * Alerts on a successful poll of `cluster` (Slack: cluster-level events, then the alerts' posts and edits queued for
   * its drainer, src/slack/drainer.ts). The runtime awaits it after every such poll and only then runs its verifier
   * (see {@link verificationReporter}), whose replies have their alert's queued work sent first, so a verification
   * replies under an alert that already shows this poll's findings
   * (docs/design/architecture.md "How serve is put together").
   */
  afterPoll?(cluster: SlackCluster, findings: Finding[], outcome: SlackPollOutcome): Promise<void>;
  /**
   * Where the runtime's verifier reports its conclusions (Slack thread replies). An integration that has none gets
   * no verification: approvals, and so the actions to verify, exist only through it.
   */
  verificationReporter?: Pick<VerifierDeps, 'report' | 'reportProbe' | 'reportSuperseded'>;
}

/**
 * Thrown by an integration starter when the failure is transient (the service is unreachable, times out or answers
 * 5xx): serve keeps polling and retries the start in the background (`ServeOptions.integrationRetryMs`).
 * Any other error is final until serve restarts (e.g. Slack rejected the bot token).
 */
export class IntegrationUnavailableError extends TokenwatchError {
  readonly retryable = true;
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCode.IntegrationUnavailable, message, options);
  }
}
