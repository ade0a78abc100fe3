/**
 * Blind-log detection for `serve`: an audit input that cannot see stale tokens is the most dangerous failure, because
 * everything looks green. A {@link BlindLogMonitor} per cluster watches the successful polls of its audit source and
 * what the platform says of its audit logging, and names the first reason the log is blind:
 * - `eks-audit-log-off`: EKS `DescribeCluster` reports the cluster's `audit` control-plane log type not enabled
 *   (`cluster.logging.clusterLogging[].types`/`enabled`,
 *   https://docs.aws.amazon.com/eks/latest/APIReference/API_DescribeCluster.html,
 *   https://docs.aws.amazon.com/eks/latest/userguide/control-plane-logs.html): the log group receives no audit event;
 * - `no-events-for-polls`: a CloudWatch log group that returned no event for `silentPolls` successful polls in a row
 *   (the API server logs its own requests all the time, so a silent log group is not a quiet cluster);
 * - `no-events-for-time`: a file source that delivered no event for `silentAfterMs`;
 * - `aks-admin-only` / `gke-no-data-access`: a file source following an AKS or GKE export whose records of the last
 *   `silentAfterMs` carry only the `kube-audit-admin` category, or only Admin Activity log names
 *   (`src/sources/platform-hints.ts`): the export leaves out the reads where most stale-token uses are; likewise a
 *   live GKE source (src/sources/cloud-logging.ts) whose queries and probes of the last `silentAfterMs` found Admin
 *   Activity entries but no Data Access entry;
 * - `no-read-access`: the last poll failed because the source was refused the read of the audit log itself — a
 *   Log Analytics workspace that answers 403 to tokenwatch's identity (src/sources/log-analytics.ts) — with the
 *   source's words for the fix (`SourceError.blind`); cleared by the next successful poll.
 *
 * Reported in `/tokens status`, the `/readyz` body (`blind`) and the `tokenwatch_audit_log_blind` metric. Pure state:
 * the caller feeds it poll results and the clock (all times epoch ms UTC).
 *
 * The EKS logging setup is read when `serve` starts and again before a poll once {@link EKS_LOGGING_RECHECK_MS} has
 * passed since the last reading ({@link EksLoggingRecheck}), so audit logging switched off while `serve` runs is
 * reported within an hour (plus one poll interval), at the cost of one `DescribeCluster` call an hour per cluster.
 */

import { AKS_ADMIN_ONLY_LOG_ANALYTICS_TEXT, AKS_ADMIN_ONLY_TEXT, aksAdminOnly, GKE_NO_DATA_ACCESS_TEXT, gkeWithoutDataAccess, type PlatformHints } from '../sources/platform-hints.js';

/** Why a cluster's audit log is blind. */
export type BlindReason = 'eks-audit-log-off' | 'no-read-access' | 'aks-admin-only' | 'gke-no-data-access' | 'no-events-for-polls' | 'no-events-for-time';

/** Every {@link BlindReason}, for metric labels. */
export const BLIND_REASONS: readonly BlindReason[] = ['eks-audit-log-off', 'no-read-access', 'aks-admin-only', 'gke-no-data-access', 'no-events-for-polls', 'no-events-for-time'];

/** Defaults of {@link BlindLogOptions}: 1 h without an event (file), 6 empty polls (CloudWatch: 30 min at the default schedule). */
export const BLIND_DEFAULTS = { silentAfterMs: 60 * 60 * 1000, silentPolls: 6 } as const;

/** Options of a {@link BlindLogMonitor}. */
export interface BlindLogOptions {
  /**
   * What kind of audit source the cluster reads (`none`: audit logging off by configuration, never "blind"; `gcp`:
   * Cloud Logging, whose query returns only token entries, so only the Data Access markers tell it blind;
   * `log-analytics`: AKS in Log Analytics, blind only by the categories its rows carry — `aks-admin-only`).
   */
  source: 'cloudwatch' | 'file' | 'gcp' | 'log-analytics' | 'none';
  /** File source: blind after this long without an event, ms. Default {@link BLIND_DEFAULTS}. */
  silentAfterMs?: number;
  /** CloudWatch source: blind after this many successful polls in a row without an event. Default {@link BLIND_DEFAULTS}. */
  silentPolls?: number;
  /** When the monitor started (the file source's clock starts here before its first event), epoch ms UTC. */
  startedAt: number;
  /** API-server token metrics or the node probe are configured: findings still come from them while the log is blind. */
  otherSignals?: boolean;
}

/** What {@link BlindLogMonitor.state} says. */
export type BlindState = { blind: false } | { blind: true; reason: BlindReason; text: string };

/** See the module doc. */
export class BlindLogMonitor {
  private lastEventAt: number | undefined;
  private emptyPolls = 0;
  private polls = 0;
  private eksAuditLogging: boolean | undefined;
  /** The source's refusal of the last poll(s) (`SourceError.blind`), until a poll succeeds. */
  private noReadAccess: { text: string; since: number } | undefined;
  /** When each platform marker (`aks:<category>`, `gke:<log>`) was last seen in a successful poll, epoch ms UTC. */
  private readonly markerSeenAt = new Map<string, number>();
  private readonly silentAfterMs: number;
  private readonly silentPolls: number;

  constructor(private readonly opts: BlindLogOptions) {
    this.silentAfterMs = opts.silentAfterMs ?? BLIND_DEFAULTS.silentAfterMs;
    this.silentPolls = opts.silentPolls ?? BLIND_DEFAULTS.silentPolls;
    if (!(this.silentAfterMs > 0) || !(this.silentPolls >= 1)) throw new RangeError('silentAfterMs and silentPolls must be positive');
  }

  /**
   * A failed poll at `at`: `blind` is the source's reason the log cannot be read at all (`SourceError.blind`), or
   * undefined for any other failure, which proves nothing and leaves the state as it is.
   */
  observeFailedPoll(at: number, blind: string | undefined): void {
    if (blind !== undefined) this.noReadAccess = { text: blind, since: this.noReadAccess?.since ?? at };
  }

  /** Since when the source has been refused the read of its audit log (epoch ms UTC), while it is. */
  noReadAccessSince(): number | undefined {
    return this.noReadAccess?.since;
  }

  /** A successful poll at `at` that read `records` audit records (failed polls go to {@link observeFailedPoll}). */
  observePoll(at: number, records: number): void {
    this.noReadAccess = undefined;
    this.polls++;
    if (records > 0) {
      this.lastEventAt = at;
      this.emptyPolls = 0;
    } else {
      this.emptyPolls++;
    }
  }

  /** The platform markers a successful poll at `at` read (`SourceStats.platformHints` of the file source). */
  observePlatformHints(at: number, hints: PlatformHints): void {
    for (const c of hints.aksCategories) this.markerSeenAt.set(`aks:${c}`, at);
    for (const l of hints.gkeLogs) this.markerSeenAt.set(`gke:${l}`, at);
  }

  /** The markers seen in the last `silentAfterMs` before `now`. */
  private recentMarkers(now: number, prefix: 'aks' | 'gke'): Set<string> {
    const out = new Set<string>();
    for (const [k, at] of this.markerSeenAt) if (k.startsWith(`${prefix}:`) && now - at < this.silentAfterMs) out.add(k.slice(prefix.length + 1));
    return out;
  }

  /** What EKS `DescribeCluster` says of the `audit` log type (undefined: not known, e.g. not an EKS cluster). */
  setEksAuditLogging(enabled: boolean | undefined): void {
    this.eksAuditLogging = enabled;
  }

  /** Whether the log is blind at `now`, why, and one line saying so (with what findings still come from). */
  state(now: number): BlindState {
    if (this.opts.source === 'none') return { blind: false };
    const tail = this.opts.otherSignals
      ? '; findings now come from API-server token metrics and the node probe only'
      : '; no stale-token findings can come from it';
    if (this.eksAuditLogging === false) {
      return {
        blind: true,
        reason: 'eks-audit-log-off',
        text: 'audit log blind: the EKS cluster\'s "audit" control-plane log type is not enabled (aws eks ' +
          'update-cluster-config --logging \'{"clusterLogging":[{"types":["audit"],"enabled":true}]}\')' + tail,
      };
    }
    if (this.noReadAccess) return { blind: true, reason: 'no-read-access', text: `audit log blind: ${this.noReadAccess.text}${tail}` };
    if (aksAdminOnly(this.recentMarkers(now, 'aks'))) {
      return { blind: true, reason: 'aks-admin-only', text: `audit log blind: ${this.opts.source === 'log-analytics' ? AKS_ADMIN_ONLY_LOG_ANALYTICS_TEXT : AKS_ADMIN_ONLY_TEXT}${tail}` };
    }
    if (gkeWithoutDataAccess(this.recentMarkers(now, 'gke'))) return { blind: true, reason: 'gke-no-data-access', text: `audit log blind: ${GKE_NO_DATA_ACCESS_TEXT}${tail}` };
    if (this.opts.source === 'cloudwatch' && this.polls >= this.silentPolls && this.emptyPolls >= this.silentPolls) {
      return {
        blind: true,
        reason: 'no-events-for-polls',
        text: `audit log blind: the log group returned no audit event in the last ${this.emptyPolls} polls${tail}`,
      };
    }
    if (this.opts.source === 'file' && this.polls > 0) {
      const since = this.lastEventAt ?? this.opts.startedAt;
      if (now - since >= this.silentAfterMs) {
        const minutes = Math.floor((now - since) / 60_000);
        return {
          blind: true,
          reason: 'no-events-for-time',
          text: `audit log blind: no audit event for ${minutes} min (since ${new Date(since).toISOString()})${tail}`,
        };
      }
    }
    return { blind: false };
  }
}

/** How long a reading of the EKS logging setup is used before {@link EksLoggingRecheck} reads it again: 1 h, in ms. */
export const EKS_LOGGING_RECHECK_MS = 60 * 60 * 1000;

/** Options of an {@link EksLoggingRecheck}. */
export interface EksLoggingRecheckOptions {
  /** The monitor told what each reading says ({@link BlindLogMonitor.setEksAuditLogging}). */
  monitor: Pick<BlindLogMonitor, 'setEksAuditLogging'>;
  /**
   * Reads whether the `audit` log type is enabled (EKS `DescribeCluster`; undefined: EKS returned no logging setup).
   * Throws when it cannot tell (access denied, network); the last reading is then kept.
   */
  read: () => Promise<boolean | undefined>;
  /** When the setup was last read (at start), epoch ms UTC; undefined: never (the first {@link EksLoggingRecheck.due} check reads it). */
  readAt: number | undefined;
  /** How long a reading is used, ms. Default {@link EKS_LOGGING_RECHECK_MS}. */
  intervalMs?: number;
  /** Called after each reading attempt, with the error when it failed (e.g. to update the metric, to log). */
  onRead?: (err?: unknown) => void;
}

/**
 * Re-reads an EKS cluster's audit logging setup at most once per interval (see the module doc): call
 * {@link EksLoggingRecheck.due} before each poll. A failed reading keeps the last known value (a cluster is not
 * called blind, or seeing, on a guess) and is retried after the next interval.
 */
export class EksLoggingRecheck {
  private readAt: number | undefined;
  private running: Promise<void> | undefined;
  private readonly intervalMs: number;

  constructor(private readonly opts: EksLoggingRecheckOptions) {
    this.readAt = opts.readAt;
    this.intervalMs = opts.intervalMs ?? EKS_LOGGING_RECHECK_MS;
    if (!(this.intervalMs > 0)) throw new RangeError('intervalMs must be positive');
  }

  /** Reads the setup when the last reading is `intervalMs` old at `now` (epoch ms UTC) or there was none; never throws. */
  due(now: number): Promise<void> {
    if (this.running) return this.running;
    if (this.readAt !== undefined && now - this.readAt < this.intervalMs) return Promise.resolve();
    this.readAt = now;
    this.running = (async () => {
      try {
        this.opts.monitor.setEksAuditLogging(await this.opts.read());
        this.opts.onRead?.();
      } catch (err) {
        this.opts.onRead?.(err);
      } finally {
        this.running = undefined;
      }
    })();
    return this.running;
  }
}
