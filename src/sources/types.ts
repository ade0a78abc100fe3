/**
 * Live audit sources: where `tokenwatch serve` reads new audit events from on every poll.
 *
 * Two implementations share {@link AuditSource}: the CloudWatch Logs source (`cloudwatch.ts`, EKS control-plane
 * audit logs) and the file source (`file.ts`, `--audit-log-path` of a self-managed API server).
 * All times are epoch milliseconds, UTC.
 */
import type { PlatformHints } from './platform-hints.js';
import { ErrorCode, TokenwatchError } from '../errors.js';

/**
 * Counters of one poll. The source adds to them (it never resets them), so a caller can pass one object per poll
 * or one per cluster.
 */
export interface SourceStats {
  /** Requests made: CloudWatch HTTP attempts (SDK retries included); for the file source, files opened. */
  requests: number;
  /** Bytes received: CloudWatch response bodies (`content-length`); for the file source, bytes read. */
  bytes: number;
  /** Records received: CloudWatch log events or Logs Insights rows; for the file source, complete lines read. */
  records: number;
  /** Throttling responses received (`ThrottlingException`, `LimitExceededException`), retried or not. */
  throttled: number;
  /**
   * The Logs Insights query whose rows this poll read, when it read one: bytes it scanned (GetQueryResults
   * `statistics.bytesScanned`; Logs Insights bills by these) and how many log groups it covered (1 in insights mode,
   * up to 50 in fleet Insights mode, where one query serves every cluster of its batch and each of their polls reports
   * it). FilterLogEvents reports no searched bytes, so filter mode leaves this unset (`bytes` received is its figure).
   */
  insights?: { bytesScanned: number; logGroups: number };
  /**
   * When present, the file source adds the platform markers of every complete line it reads — before its prefilter
   * drops most lines — so `serve` can tell an AKS `kube-audit-admin`-only or GKE Admin-Activity-only export
   * (`./platform-hints.ts`).
   */
  platformHints?: PlatformHints;
}

/** Options of one {@link AuditSource.poll}. */
export interface PollOptions {
  /** The poll's reference time, epoch ms UTC (the scheduler's clock; sources do not read the clock themselves). */
  now: number;
  /** How far back the first poll (cursor undefined) reads, in ms (config `lookback`, default 24 h). */
  lookbackMs: number;
  /** Aborts the poll (SIGTERM); the generator then throws the signal's reason. */
  signal?: AbortSignal;
  /** Counters the source adds to. */
  stats: SourceStats;
  /**
   * Progress commits, so that a poll's memory does not grow with its window (docs/live-mode.md#bounded-polls). A source
   * that supports them calls this with a cursor that resumes right after the last text it yielded, at the latest after
   * every `checkpointEvents` yielded texts (the CloudWatch source at page boundaries, its pages then hold at most
   * `checkpointEvents` events). The caller stores what it was yielded so far and this cursor together before it
   * resolves; a poll that fails later keeps that progress. Sources that cannot resume mid-poll (Logs Insights) never
   * call it.
   */
  checkpoint?: (cursor: string) => void | Promise<void>;
  /** Yielded texts between two {@link checkpoint} calls, at most. Default 10,000 ({@link DEFAULT_CHECKPOINT_EVENTS}). */
  checkpointEvents?: number;
}

/** Default {@link PollOptions.checkpointEvents}: 10,000 events, one full CloudWatch FilterLogEvents page. */
export const DEFAULT_CHECKPOINT_EVENTS = 10_000;

/** A place audit events come from, read incrementally. */
export interface AuditSource {
  /** Stable id for the cursor, e.g. `cloudwatch:us-west-2:/aws/eks/prod/cluster` or `file:/var/log/audit.log`. */
  readonly id: string;
  /**
   * Reads what is new since `cursor` (opaque string from a previous poll, undefined on the first poll).
   * Yields raw audit event JSON texts (one audit event each). Returns the new cursor; the caller persists it only
   * after it has stored what was yielded (so a crash mid-poll re-reads, and dedupe by auditID makes that safe).
   *
   * Exception: a CloudWatch source in `insights` mode yields `TokenUseAggregate` JSON documents instead
   * (see `insights.ts`, `isTokenUseAggregateText`); they carry no auditID, so the caller must store them and
   * the returned cursor in one transaction.
   *
   * @throws {SourceError} when the source cannot be read (after its retry budget for transient errors); the poller
   *   marks the cluster degraded and keeps its cursor.
   */
  poll(cursor: string | undefined, opts: PollOptions): AsyncGenerator<string, string>;
}

/** Creates zeroed {@link SourceStats}. */
export function emptyStats(): SourceStats {
  return { requests: 0, bytes: 0, records: 0, throttled: 0 };
}

/**
 * Error raised by a source that gave up: a non-retryable error (access denied, log group not found, bad parameter)
 * or a transient one (throttling, 5xx, network) that outlasted the retry budget.
 */
export class SourceError extends TokenwatchError {
  constructor(
    message: string,
    /** The source's id. */
    readonly sourceId: string,
    /** AWS error code (e.g. `ThrottlingException`, `AccessDeniedException`) or Node error code (`ENOENT`). */
    readonly awsCode: string,
    /** Whether the error is transient (a later poll may succeed). */
    readonly retryable: boolean,
    /**
     * `blind`: the source was refused the read of its audit log (no read permission), so the log is blind until a
     * poll succeeds — why, and the fix, in words (src/runtime/blind.ts reason `no-read-access`).
     */
    options?: { cause?: unknown; blind?: string },
  ) {
    super(ErrorCode.SourceFailed, message, options?.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = 'SourceError';
    if (options?.blind !== undefined) this.blind = options.blind;
  }

  /** Set when the error means the audit log cannot be read at all (see the constructor's `options.blind`). */
  readonly blind?: string;
}
