/**
 * The one error base of tokenwatch: every error the product throws is a {@link TokenwatchError} with a stable
 * string {@link ErrorCode} (what went wrong, for code to branch on), the standard `cause` (what it came from) and,
 * for the CLI, an exit code derived from the code. Messages are for people; code never parses them.
 *
 * Module errors extend the base with their own fields (`InputError.file`, `KubeCallError.status`, …); fields that
 * carry another system's code are named for it (`SourceError.awsCode`, `SlackCallError.slackError`,
 * `InputError.errno`), so `code` always means an {@link ErrorCode}.
 *
 * Modelled on bolt-js `src/errors.ts` (`CodedError`, `ErrorCode`).
 */

/** Every error code tokenwatch uses (closed set; values are stable, do not rename them). */
export const ErrorCode = {
  /** A thrown value that was not a {@link TokenwatchError} (kept in the closed set; the CLI reports those as internal errors). */
  Unknown: 'unknown',
  /** A broken invariant or a misuse of an internal API: a bug, not a user or environment problem. */
  Internal: 'internal',
  /** Bad command-line arguments or flag combinations. */
  Usage: 'usage',
  /** The configuration (file or environment) is unusable. */
  ConfigInvalid: 'config_invalid',
  /** A duration string is not in the accepted grammar. */
  DurationInvalid: 'duration_invalid',
  /** An input file (audit log, snapshot, metrics, probe report) cannot be read or is not what it should be. */
  InputUnreadable: 'input_unreadable',
  /** An audit event source (file, CloudWatch) gave up. */
  SourceFailed: 'source_failed',
  /** The SQLite store is unusable or a write broke a reference. */
  StoreFailed: 'store_failed',
  /** A Kubernetes API call failed (HTTP status and Status reason on the error). */
  KubeCallFailed: 'kube_call_failed',
  /** No usable Kubernetes client configuration (kubeconfig, context, in-cluster, EKS settings). */
  KubeConfigInvalid: 'kube_config_invalid',
  /** The cluster state cannot be read right now. */
  ClusterUnavailable: 'cluster_unavailable',
  /** One read of cluster state failed (other than 404). */
  ClusterReadFailed: 'cluster_read_failed',
  /** EKS authentication (describe cluster, token) failed. */
  EksAuthFailed: 'eks_auth_failed',
  /** A Slack Web API call failed (Slack's own error on the error). */
  SlackCallFailed: 'slack_call_failed',
  /** A page (PagerDuty Events API v2 or the paging webhook) was not accepted. */
  PageFailed: 'page_failed',
  /** Slack cannot be started with this configuration or credentials. */
  SlackStartFailed: 'slack_start_failed',
  /** An integration is not reachable at start; serve retries it. */
  IntegrationUnavailable: 'integration_unavailable',
  /** An API server `/metrics` read failed. */
  MetricsScrapeFailed: 'metrics_scrape_failed',
  /** `/metrics` text holds no token counters. */
  TokenMetricsInvalid: 'token_metrics_invalid',
  /** The node probe or its report ConfigMaps failed. */
  ProbeFailed: 'probe_failed',
  /** This replica no longer owns the cluster (clusters shared out across replicas): its write was refused (fencing). */
  ClusterNotOwned: 'cluster_not_owned',
  /** A parallel scan worker failed outside the reader's own errors. */
  ScanWorkerFailed: 'scan_worker_failed',
  /** The sandbox cannot start (data folder locked, bundled example missing, …). */
  SandboxFailed: 'sandbox_failed',
  /** A request to one of the sandbox's fake services (Kubernetes, Slack, CloudWatch) is invalid. */
  FakeRequestInvalid: 'fake_request_invalid',
  /** A value (a flag's argument, a setting) is not in its accepted form. */
  ValueInvalid: 'value_invalid',
  /** A source cursor is not one this source wrote. */
  CursorInvalid: 'cursor_invalid',
  /** An operation was aborted. */
  Aborted: 'aborted',
  /** Something did not happen in the time allowed. */
  Timeout: 'timeout',
} as const;

/** One of the {@link ErrorCode} values. */
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/**
 * Exit code of the `tokenwatch` CLI for the error codes it reports as a user error (one line `tokenwatch: …`).
 * Any other code reaching the CLI is unexpected (`tokenwatch: internal error: …`, exit 2).
 */
export const CLI_EXIT_CODES: Readonly<Partial<Record<ErrorCode, number>>> = {
  [ErrorCode.Usage]: 2,
  [ErrorCode.InputUnreadable]: 2,
  [ErrorCode.ConfigInvalid]: 2,
};

/** Options of {@link TokenwatchError}. */
export interface TokenwatchErrorOptions {
  /** What the error came from (standard `Error.cause`). */
  cause?: unknown;
  /** CLI exit code, overriding {@link CLI_EXIT_CODES}. */
  exitCode?: number;
}

/**
 * The base of every tokenwatch error. `name` is set by subclasses (a plain `TokenwatchError` keeps `Error`, so
 * messages and logs read as before).
 */
export class TokenwatchError extends Error {
  /** What went wrong, stable across releases. */
  readonly code: ErrorCode;
  /** CLI exit code when this error reaches the CLI; undefined: not a user error (reported as internal). */
  readonly exitCode: number | undefined;

  constructor(code: ErrorCode, message: string, options: TokenwatchErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.exitCode = options.exitCode ?? CLI_EXIT_CODES[code];
  }
}

/** Whether `err` is a {@link TokenwatchError} (optionally with the given code). */
export function isTokenwatchError(err: unknown, code?: ErrorCode): err is TokenwatchError {
  return err instanceof TokenwatchError && (code === undefined || err.code === code);
}

/**
 * The reason of a failure in words for an error message: the error's message, prefixed by its `code` (`ENOENT: …`,
 * `Z_DATA_ERROR: …`) unless the message starts with it already; `String(err)` for a thrown non-Error.
 */
export function errorReason(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    return code && !err.message.startsWith(code) ? `${code}: ${err.message}` : err.message;
  }
  return String(err);
}

/** The Node errno code (`ENOENT`, `EACCES`, …) of an error, if it has one. */
export function errnoOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' && /^E[A-Z0-9]+$/.test(code) ? code : undefined;
}

/** Options of {@link InputError}. */
export interface InputErrorOptions {
  /** The underlying failure (e.g. the Node error of `open`); its errno code becomes {@link InputError.errno}. */
  cause?: unknown;
  /** Node errno code (`ENOENT`, `EACCES`, …), when the cause is not at hand (e.g. a worker thread's reply). */
  errno?: string;
  /** How the input is named in messages when not by its path alone, e.g. `cluster snapshot <file>`. */
  subject?: string;
}

/**
 * Error thrown for input that cannot be read at all (missing file, unknown format, corrupt gzip). The message is
 * `<subject>: <reason>`; the CLI words it from the fields (`errno`, `subject`, `reason`), never from the message.
 */
export class InputError extends TokenwatchError {
  /** Node errno code of the failure (`ENOENT`, `EACCES`, …), when it was a system call that failed. */
  readonly errno: string | undefined;
  /** How the input is named: the file, or e.g. `cluster snapshot <file>`. */
  readonly subject: string;

  constructor(
    /** The file the error is about. */
    readonly file: string,
    /** What is wrong with it, without the file name. */
    readonly reason: string,
    options: InputErrorOptions = {},
  ) {
    const subject = options.subject ?? file;
    super(ErrorCode.InputUnreadable, `${subject}: ${reason}`, { cause: options.cause });
    this.name = 'InputError';
    this.subject = subject;
    this.errno = options.errno ?? errnoOf(options.cause);
  }
}
