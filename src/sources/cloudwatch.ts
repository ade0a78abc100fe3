/**
 * CloudWatch Logs audit source: reads EKS API-server audit events (log group `/aws/eks/<cluster>/cluster`, streams
 * `kube-apiserver-audit-*`, EKS user guide "control-plane-logs") incrementally.
 *
 * Modes:
 * - `filter` (default): FilterLogEvents over the audit streams with one quoted-term OR filter pattern
 *   ({@link TOKEN_USE_FILTER_PATTERN}) that selects stale-token, legacy-token and 401 events server-side, all pages
 *   (pages can be empty yet carry a `nextToken`, docs/design/stack.md §3). Yields each event's message (the audit event JSON).
 * - `insights`: one Logs Insights query per poll that aggregates server-side ({@link buildInsightsQuery}); yields
 *   one `TokenUseAggregate` JSON document per result row (see `insights.ts`).
 *
 * Cursor: JSON `{"v":1,"until":<epoch ms>}`, the end of the last window read.
 * - filter: window `[until − overlapMs, now]` (first poll `[now − lookbackMs, now]`); the overlap re-reads events
 *   delivered late (EKS delivers "within a few minutes", best effort), and the caller dedupes by auditID. A poll with
 *   nothing new is one FilterLogEvents request (if the overlap window's matches fit one page). The cursor moves to
 *   `now` even when nothing matched, so a quiet cluster is not rescanned from its last match.
 * - insights: window `[until, now − overlapMs)` (first poll from `now − lookbackMs`): aggregates cannot be deduped by
 *   auditID, so instead of re-reading, the window trails `now` by `overlapMs` and late events have landed before it
 *   is read. Findings lag by `overlapMs`. Store the rows and the cursor in one transaction.
 * Events delivered later than `overlapMs` are missed in both modes.
 * - Progress commits (filter mode, `PollOptions.checkpoint`): pages then hold at most `checkpointEvents` events, and
 *   between pages the source hands out `{"v":1,"until":…,"resume":{"start","end","nextToken"}}` (see
 *   {@link CloudWatchResume}); a poll starting from it reads the rest of that window only, so a window too large for
 *   one poll (a 401 flood) is read in committed chunks and never from its start again (docs/live-mode.md#bounded-polls).
 *
 * Credentials: the SDK's default provider chain (env, IRSA web identity, EKS Pod Identity, profile, IMDS) unless
 * `credentials` is given; the endpoint: `endpoint`, else `AWS_ENDPOINT_URL_CLOUDWATCH_LOGS` / `AWS_ENDPOINT_URL`
 * (SDK "service-specific endpoints"), else the Region's.
 *
 * Retries: SDK `maxAttempts` (default 6, standard mode) per request, then the source's own bounded backoff
 * (`retry.ts`); a poll that still fails throws a {@link SourceError} and the poller marks the cluster degraded.
 * IAM: `logs:FilterLogEvents` (filter), `logs:StartQuery`, `logs:GetQueryResults`, `logs:StopQuery` (insights) on
 * the log group.
 */
import { backoffDelay } from '../core/backoff.js';
import { ErrorCode, TokenwatchError } from '../errors.js';
import {
  CloudWatchLogsClient,
  GetQueryResultsCommand,
  StartQueryCommand,
  StopQueryCommand,
  paginateFilterLogEvents,
  type CloudWatchLogsClientConfig,
  type FilterLogEventsCommandInput,
  type GetQueryResultsCommandOutput,
} from '@aws-sdk/client-cloudwatch-logs';
import { ConfiguredRetryStrategy } from '@smithy/core/retry';
import { buildInsightsQuery, rowToAggregate } from './insights.js';
import { accountOfLogGroup, type CloudWatchRateLimiter } from './rate-limit.js';
import { DEFAULT_RETRY_POLICY, RetryBudget, isThrottling, sleep, type RetryPolicy } from './retry.js';
import { TOKEN_USE_FILTER_PATTERN } from './terms.js';
import { DEFAULT_CHECKPOINT_EVENTS, SourceError, type AuditSource, type PollOptions, type SourceStats } from './types.js';

/** Options of {@link CloudWatchSource}. */
export interface CloudWatchSourceOptions {
  region: string;
  /** Log group name or ARN (EKS: `/aws/eks/<cluster>/cluster`). */
  logGroup: string;
  /** Stream name prefix (EKS: `kube-apiserver-audit-`). */
  streamPrefix: string;
  /** Endpoint override (VPC endpoint, tests). Default: SDK resolution (honours `AWS_ENDPOINT_URL_CLOUDWATCH_LOGS`). */
  endpoint?: string;
  /** Default `filter`. */
  mode?: 'filter' | 'insights';
  /** Late-delivery window, ms. Default 600,000 (10 min). */
  overlapMs?: number;
  /** A ready client (then `region`, `endpoint`, `credentials` and the SDK retry options are not used to build one). */
  client?: CloudWatchLogsClient;
  /** Static credentials or a provider; default: the SDK's default chain. */
  credentials?: CloudWatchLogsClientConfig['credentials'];
  /** SDK attempts per request (first try included). Default 6. */
  maxAttempts?: number;
  /** SDK retry mode. Default `standard`. */
  retryMode?: 'standard' | 'adaptive';
  /** Fixed SDK backoff base, ms (delay = base · 2^(attempt−1)); for tests. Default: the SDK's. */
  sdkRetryDelayMs?: number;
  /** The source's own retry layer. */
  retry?: Partial<RetryPolicy>;
  /** FilterLogEvents `limit` per page (≤ 10,000). Default 10,000. */
  pageSize?: number;
  /** Filter pattern. Default {@link TOKEN_USE_FILTER_PATTERN}. */
  filterPattern?: string;
  /** Logs Insights mode settings. */
  insights?: {
    /** Delay between GetQueryResults calls, ms. Default 1,000. */
    pollIntervalMs?: number;
    /** Give up (StopQuery) after this long, ms. Default 300,000. */
    timeoutMs?: number;
    /** Max result rows (≤ 100,000). Default 10,000. Reaching it is an error (results would be incomplete). */
    limit?: number;
  };
  /** Jitter source for backoff (tests). Default `Math.random`. */
  random?: () => number;
  /**
   * The deployment's shared request budget per account and Region (`rate-limit.ts`); every HTTP attempt of
   * FilterLogEvents, StartQuery and GetQueryResults takes a token. Default: none (no shared budget).
   */
  rateLimiter?: CloudWatchRateLimiter;
  /**
   * Longest wait for one HTTP request, ms: the SDK's `NodeHttpHandler` `connectionTimeout` (TCP connect) and
   * `requestTimeout` (no answer), https://docs.aws.amazon.com/sdk-for-javascript/v3/developer-guide/node-configuring-maxsockets.html
   * and the `@smithy/node-http-handler` options. A timed-out attempt fails with `TimeoutError` (retried like a
   * 5xx). Default 10,000 (`poll.requestTimeout` in serve).
   */
  requestTimeoutMs?: number;
}

interface CursorDoc {
  v: 1;
  until: number;
  /** A filter-mode window read in part (see {@link CloudWatchResume}). */
  resume?: CloudWatchResume;
}

/**
 * Where a filter-mode poll stopped inside its window (a progress commit, `PollOptions.checkpoint`): the window
 * `[start, end]` (epoch ms UTC, as sent to FilterLogEvents) and the `nextToken` of its next page. CloudWatch's
 * tokens expire after 24 hours (FilterLogEvents API reference,
 * https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_FilterLogEvents.html); one it refuses
 * makes the window start over (the auditIDs already stored are dropped as seen).
 */
export interface CloudWatchResume {
  start: number;
  end: number;
  nextToken: string;
}

/** Parses a cursor into its `until` and, if present, its {@link CloudWatchResume}. @throws like {@link parseCloudWatchCursor}. */
export function parseCloudWatchCursorDoc(cursor: string | undefined): { until: number | undefined; resume?: CloudWatchResume } {
  const until = parseCloudWatchCursor(cursor);
  if (until === undefined || cursor === undefined || /^\s*\d+\s*$/.test(cursor)) return { until };
  const r = (JSON.parse(cursor) as CursorDoc).resume as Partial<CloudWatchResume> | undefined;
  if (r === undefined) return { until };
  if (typeof r !== 'object' || r === null || typeof r.start !== 'number' || typeof r.end !== 'number' || typeof r.nextToken !== 'string' || r.end < r.start) {
    throw new TokenwatchError(ErrorCode.CursorInvalid, `not a CloudWatch source cursor (bad resume): ${cursor.slice(0, 100)}`);
  }
  return { until, resume: { start: r.start, end: r.end, nextToken: r.nextToken } };
}

/** Parses a cursor (`{"v":1,"until":ms}` or a bare epoch-ms number). @throws Error on anything else. */
export function parseCloudWatchCursor(cursor: string | undefined): number | undefined {
  if (cursor === undefined || cursor === '') return undefined;
  const trimmed = cursor.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const v: unknown = JSON.parse(trimmed);
  if (v && typeof v === 'object' && typeof (v as CursorDoc).until === 'number') return (v as CursorDoc).until;
  throw new TokenwatchError(ErrorCode.CursorInvalid, `not a CloudWatch source cursor: ${cursor.slice(0, 100)}`);
}

/** Encodes a cursor; `resume` when a filter-mode window was read in part. */
export function encodeCloudWatchCursor(until: number, resume?: CloudWatchResume): string {
  const doc: CursorDoc = resume ? { v: 1, until, resume } : { v: 1, until };
  return JSON.stringify(doc);
}

function isInvalidToken(err: unknown): boolean {
  const e = err as { name?: unknown; message?: unknown } | undefined;
  return e?.name === 'InvalidParameterException' && typeof e.message === 'string' && /nextToken/i.test(e.message);
}

type Middleware = (next: (args: unknown) => Promise<unknown>) => (args: unknown) => Promise<unknown>;
type ContextMiddleware = (next: (args: unknown) => Promise<unknown>, context: { commandName?: string }) => (args: unknown) => Promise<unknown>;

function contentLength(response: unknown): number {
  if (response && typeof response === 'object') {
    const headers = (response as { headers?: Record<string, string | undefined> }).headers;
    const v = headers?.['content-length'];
    const n = v === undefined ? NaN : Number(v);
    if (Number.isFinite(n)) return n;
  }
  return 0;
}

/** Counts every HTTP attempt (placed after the retry middleware), its response bytes and throttling responses. */
function countingMiddleware(stats: SourceStats): Middleware {
  return (next) => async (args) => {
    stats.requests++;
    try {
      const out = await next(args);
      stats.bytes += contentLength((out as { response?: unknown }).response);
      return out;
    } catch (err) {
      stats.bytes += contentLength((err as { $response?: unknown }).$response);
      if (isThrottling(err)) stats.throttled++;
      throw err;
    }
  };
}

interface CommandLike {
  middlewareStack: { add: (mw: never, opts: { step: 'finalizeRequest'; priority: 'low'; name: string }) => void };
}

/**
 * The account/Region budget in front of every HTTP attempt (after the SDK's retry middleware): a token, then the
 * request. The operation is the SDK's `commandName` in the handler context (`FilterLogEventsCommand` → `FilterLogEvents`).
 */
function budgetMiddleware(b: Budget): ContextMiddleware {
  return (next, context) => async (args) => {
    const key = b.limiter.keyOf(b.account, b.region, String(context.commandName ?? '').replace(/Command$/, ''));
    if (key === undefined) return next(args);
    const { limiter, signal } = b;
    await limiter.acquire(key, signal);
    try {
      return await next(args);
    } catch (err) {
      if (isThrottling(err)) void limiter.throttled(key);
      throw err;
    }
  };
}

/** What {@link withCounting} adds besides counting: the shared budget of the command's operation, if any. */
export interface Budget {
  limiter: CloudWatchRateLimiter;
  account: string;
  region: string;
  signal: AbortSignal | undefined;
}

/**
 * Adds tokenwatch's middleware to an SDK command: every HTTP attempt is counted in `stats` (requests, response bytes,
 * throttling answers) and, with `budget`, first takes a token of the account/Region budget of its operation.
 * Returns the same command.
 */
export function withCounting<C>(command: C, stats: SourceStats, budget?: Budget): C {
  const stack = (command as unknown as CommandLike).middlewareStack;
  stack.add(countingMiddleware(stats) as never, {
    step: 'finalizeRequest',
    priority: 'low',
    name: 'tokenwatchRequestCounter',
  });
  if (budget) stack.add(budgetMiddleware(budget) as never, { step: 'finalizeRequest', priority: 'low', name: 'tokenwatchAccountBudget' });
  return command;
}

/** The SDK client settings a {@link CloudWatchSource} builds its client from (when it is given none). */
type ClientSettings = Pick<CloudWatchSourceOptions, 'region' | 'endpoint' | 'credentials' | 'maxAttempts' | 'retryMode' | 'requestTimeoutMs' | 'sdkRetryDelayMs'>;

/** A CloudWatch Logs SDK client: `maxAttempts` (6), `retryMode` (standard), connection and request timeouts (10 s). */
function cloudWatchClient(opts: ClientSettings): CloudWatchLogsClient {
  const maxAttempts = opts.maxAttempts ?? 6;
  const timeout = opts.requestTimeoutMs ?? 10_000;
  const config: CloudWatchLogsClientConfig = {
    region: opts.region,
    maxAttempts,
    retryMode: opts.retryMode ?? 'standard',
    requestHandler: { connectionTimeout: timeout, requestTimeout: timeout, throwOnRequestTimeout: true },
  };
  if (opts.endpoint) config.endpoint = opts.endpoint;
  if (opts.credentials) config.credentials = opts.credentials;
  if (opts.sdkRetryDelayMs !== undefined) {
    const base = opts.sdkRetryDelayMs;
    config.retryStrategy = new ConfiguredRetryStrategy(maxAttempts, (attempt) => backoffDelay(base, attempt - 1));
  }
  return new CloudWatchLogsClient(config);
}

/**
 * One CloudWatch Logs SDK client per Region and endpoint, shared by the sources of every cluster of a deployment
 * (`serve` makes one). A client per cluster costs about 100 KiB (its resolved config, middleware stack and credential
 * cache) and its own keep-alive socket pool, and resolves credentials on its own (with web identity: one STS call
 * per cluster); shared, a thousand clusters in one Region have one of each. Requests stay per source: the request
 * counter and the account budget are added to each command, not to the client ({@link withCounting}).
 */
export class CloudWatchClients {
  private readonly clients = new Map<string, CloudWatchLogsClient>();

  /** @param settings what every client gets (timeouts, retries, credentials), as a source would build it. */
  constructor(private readonly settings: Omit<ClientSettings, 'region' | 'endpoint'> = {}) {}

  /** The client of `region` and `endpoint` (none: AWS's), made on first use. */
  get(region: string, endpoint?: string): CloudWatchLogsClient {
    const key = `${region}\0${endpoint ?? ''}`;
    let c = this.clients.get(key);
    if (!c) {
      c = cloudWatchClient({ ...this.settings, region, ...(endpoint !== undefined ? { endpoint } : {}) });
      this.clients.set(key, c);
    }
    return c;
  }

  /** How many clients exist (tests, diagnostics). */
  get size(): number {
    return this.clients.size;
  }

  /** Releases every client's sockets (serve's stop, after the sources are closed). */
  destroy(): void {
    for (const c of this.clients.values()) c.destroy();
    this.clients.clear();
  }
}

/** Reads EKS audit events from CloudWatch Logs. See the module doc for modes, cursor and retries. */
export class CloudWatchSource implements AuditSource {
  readonly id: string;
  private readonly client: CloudWatchLogsClient;
  private readonly mode: 'filter' | 'insights';
  private readonly overlapMs: number;
  private readonly retryPolicy: RetryPolicy;
  private readonly pageSize: number;
  private readonly filterPattern: string;
  private readonly random: () => number;
  private readonly insightsPollMs: number;
  private readonly insightsTimeoutMs: number;
  private readonly insightsLimit: number;

  constructor(private readonly opts: CloudWatchSourceOptions) {
    if (!opts.logGroup) throw new TokenwatchError(ErrorCode.Internal, 'CloudWatchSource: logGroup is required');
    if (!opts.region && !opts.client) throw new TokenwatchError(ErrorCode.Internal, 'CloudWatchSource: region is required');
    this.id = `cloudwatch:${opts.region}:${opts.logGroup}`;
    this.mode = opts.mode ?? 'filter';
    this.overlapMs = opts.overlapMs ?? 600_000;
    this.retryPolicy = { ...DEFAULT_RETRY_POLICY, ...opts.retry };
    this.pageSize = Math.min(10_000, Math.max(1, opts.pageSize ?? 10_000));
    this.filterPattern = opts.filterPattern ?? TOKEN_USE_FILTER_PATTERN;
    this.random = opts.random ?? Math.random;
    this.insightsPollMs = opts.insights?.pollIntervalMs ?? 1_000;
    this.insightsTimeoutMs = opts.insights?.timeoutMs ?? 300_000;
    this.insightsLimit = Math.min(100_000, opts.insights?.limit ?? 10_000);
    this.client = opts.client ?? cloudWatchClient(opts);
  }

  /** Releases the SDK client's sockets (only a client this source built). */
  close(): void {
    if (!this.opts.client) this.client.destroy();
  }

  /** {@inheritDoc AuditSource.poll} */
  async *poll(cursor: string | undefined, opts: PollOptions): AsyncGenerator<string, string> {
    let doc: { until: number | undefined; resume?: CloudWatchResume };
    try {
      doc = parseCloudWatchCursorDoc(cursor);
    } catch (err) {
      throw new SourceError((err as Error).message, this.id, 'InvalidCursor', false, { cause: err });
    }
    // Insights mode never writes a resume point; one left by filter mode (a mode switch) is ignored there.
    return yield* this.mode === 'insights' ? this.pollInsights(doc.until, opts) : this.pollFilter(doc.until, opts, doc.resume);
  }

  private budget(o: PollOptions): Budget | undefined {
    const limiter = this.opts.rateLimiter;
    return limiter ? { limiter, account: accountOfLogGroup(this.opts.logGroup), region: this.opts.region, signal: o.signal } : undefined;
  }

  private describe(op: string): string {
    return `CloudWatch Logs ${op} on log group '${this.opts.logGroup}' (${this.opts.region})`;
  }

  private async *pollFilter(until: number | undefined, o: PollOptions, resume?: CloudWatchResume): AsyncGenerator<string, string> {
    // A window read in part goes on from its next page, and this poll ends with it; the next poll reads on to `now`.
    const startTime = resume ? resume.start : until === undefined ? o.now - o.lookbackMs : Math.max(0, until - this.overlapMs);
    const endTime = resume ? resume.end : o.now;
    if (endTime < startTime) return encodeCloudWatchCursor(until ?? endTime);
    const every = Math.max(1, o.checkpointEvents ?? DEFAULT_CHECKPOINT_EVENTS);
    // With progress commits a page may not hold more than one chunk: a checkpoint can only fall between pages.
    const pageSize = o.checkpoint ? Math.min(this.pageSize, every) : this.pageSize;
    const untilOut = until ?? startTime;
    let sinceCheckpoint = 0;
    const input: FilterLogEventsCommandInput = {
      logGroupIdentifier: this.opts.logGroup,
      logStreamNamePrefix: this.opts.streamPrefix,
      startTime,
      endTime,
      filterPattern: this.filterPattern,
      limit: pageSize,
    };
    const budget = new RetryBudget(this.retryPolicy, this.id, this.describe('FilterLogEvents'), this.random);
    const pages = (token: string | undefined) =>
      paginateFilterLogEvents(
        {
          client: this.client,
          pageSize,
          ...(token !== undefined && { startingToken: token }),
          withCommand: (command) => withCounting(command, o.stats, this.budget(o)),
        },
        { ...input },
        { abortSignal: o.signal },
      );
    let token: string | undefined = resume?.nextToken;
    let iter = pages(token);
    for (;;) {
      let res: IteratorResult<{ events?: { message?: string }[]; nextToken?: string }>;
      try {
        res = await iter.next();
      } catch (err) {
        if (token !== undefined && token === resume?.nextToken && isInvalidToken(err)) {
          // The stored page token is refused (expired, or the filter changed): read the window from its start.
          token = undefined;
          iter = pages(undefined);
          continue;
        }
        await budget.onError(err, o.signal);
        iter = pages(token);
        continue;
      }
      budget.onSuccess();
      if (res.done) break;
      const page = res.value;
      for (const e of page.events ?? []) {
        if (typeof e.message !== 'string') continue;
        o.stats.records++;
        sinceCheckpoint++;
        yield e.message;
      }
      token = page.nextToken;
      if (!token) break;
      if (o.checkpoint && sinceCheckpoint > 0 && sinceCheckpoint + pageSize > every) {
        sinceCheckpoint = 0;
        await o.checkpoint(encodeCloudWatchCursor(untilOut, { start: startTime, end: endTime, nextToken: token }));
      }
    }
    return encodeCloudWatchCursor(endTime);
  }

  /** Sends one command through the retry budget. */
  private async send<T>(make: () => { input: unknown }, budget: RetryBudget, o: PollOptions): Promise<T> {
    for (;;) {
      try {
        const cmd = withCounting(make(), o.stats, this.budget(o));
        const out = await this.client.send(cmd as never, { abortSignal: o.signal });
        budget.onSuccess();
        return out as T;
      } catch (err) {
        await budget.onError(err, o.signal);
      }
    }
  }

  private async *pollInsights(until: number | undefined, o: PollOptions): AsyncGenerator<string, string> {
    const windowStart = until ?? o.now - o.lookbackMs;
    const windowEnd = o.now - this.overlapMs;
    if (windowEnd <= windowStart) return encodeCloudWatchCursor(windowStart);
    const queryString = buildInsightsQuery({
      streamPrefix: this.opts.streamPrefix,
      startMs: windowStart,
      endMs: windowEnd,
      limit: this.insightsLimit,
    });
    const budget = new RetryBudget(this.retryPolicy, this.id, this.describe('Logs Insights query'), this.random);
    const started = await this.send<{ queryId?: string }>(
      () =>
        new StartQueryCommand({
          logGroupIdentifiers: [this.opts.logGroup],
          startTime: Math.floor(windowStart / 1000),
          endTime: Math.ceil(windowEnd / 1000),
          queryString,
          limit: this.insightsLimit,
        }),
      budget,
      o,
    );
    const queryId = started.queryId;
    if (!queryId) throw new SourceError(`${this.describe('StartQuery')} returned no queryId`, this.id, 'NoQueryId', true);
    const deadline = performance.now() + this.insightsTimeoutMs;
    const { rows, statistics } = await awaitInsightsResults({
      client: this.client,
      send: (make) => this.send<GetQueryResultsCommandOutput>(make, budget, o),
      queryId,
      what: this.describe('Logs Insights query'),
      id: this.id,
      now: () => performance.now(),
      deadline,
      timeoutMs: this.insightsTimeoutMs,
      pollMs: this.insightsPollMs,
      limit: this.insightsLimit,
      limitAdvice: 'raise insights.limit up to 100000, poll more often, or use filter mode',
      ...(o.signal ? { signal: o.signal } : {}),
    });
    o.stats.insights = { bytesScanned: (o.stats.insights?.bytesScanned ?? 0) + (statistics?.bytesScanned ?? 0), logGroups: 1 };
    const ctx = { source: this.id, windowStart, windowEnd };
    for (const row of rows) {
      o.stats.records++;
      const agg = rowToAggregate(row, ctx);
      if (agg) yield JSON.stringify(agg);
    }
    return encodeCloudWatchCursor(windowEnd);
  }
}

/** What {@link awaitInsightsResults} needs of its caller. */
export interface InsightsResultsRun {
  client: Pick<CloudWatchLogsClient, 'send'>;
  /** Sends one GetQueryResults with the caller's retry budget, counting and rate budget. */
  send(make: () => GetQueryResultsCommand): Promise<GetQueryResultsCommandOutput>;
  queryId: string;
  /** Names the query in errors, e.g. `CloudWatch Logs Logs Insights query on log group '…' (us-east-1)`. */
  what: string;
  /** Source id carried by the {@link SourceError}s. */
  id: string;
  /** The caller's clock, ms, and the instant by which the query must have completed on it. */
  now(): number;
  deadline: number;
  timeoutMs: number;
  pollMs: number;
  /** The query's row limit: as many rows as this means the result is incomplete. */
  limit: number;
  /** What the user can do about a result at the limit (the end of its error). */
  limitAdvice: string;
  signal?: AbortSignal;
}

/**
 * Waits for a started Logs Insights query to complete (GetQueryResults every `pollMs` until `Complete`; any other
 * final status, or the deadline, fails), fetches every page before returning (a truncated result must fail the poll
 * before anything is stored), and refuses a result with `limit` rows. A query left unfinished (error, abort) is
 * stopped, best effort, to free its slot of the account's concurrent-query quota
 * (https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_GetQueryResults.html).
 * @returns the result rows and the query's statistics
 * @throws SourceError on a failed, timed-out or truncated query; what `send` throws
 */
export async function awaitInsightsResults(r: InsightsResultsRun): Promise<{ rows: NonNullable<GetQueryResultsCommandOutput['results']>; statistics: GetQueryResultsCommandOutput['statistics'] }> {
  const { queryId, what, id } = r;
  let finished = false;
  try {
    let out: GetQueryResultsCommandOutput;
    for (;;) {
      out = await r.send(() => new GetQueryResultsCommand({ queryId, maxItems: 10_000 }));
      const status = out.status ?? 'Unknown';
      if (status === 'Complete') break;
      if (status !== 'Scheduled' && status !== 'Running') {
        finished = true;
        throw new SourceError(`${what} ended with status ${status}`, id, `Query${status}`, status === 'Timeout');
      }
      if (r.now() + r.pollMs > r.deadline) throw new SourceError(`${what} did not complete within ${r.timeoutMs} ms (status ${status})`, id, 'QueryTimeout', true);
      await sleep(r.pollMs, r.signal);
    }
    finished = true;
    const statistics = out.statistics;
    const rows: NonNullable<GetQueryResultsCommandOutput['results']> = [...(out.results ?? [])];
    while (out.nextToken) {
      const next = out.nextToken;
      out = await r.send(() => new GetQueryResultsCommand({ queryId, nextToken: next, maxItems: 10_000 }));
      rows.push(...(out.results ?? []));
    }
    if (rows.length >= r.limit) throw new SourceError(`${what} returned ${rows.length} rows, the limit: results are incomplete (${r.limitAdvice})`, id, 'QueryResultLimit', false);
    return { rows, statistics };
  } finally {
    if (!finished) await r.client.send(new StopQueryCommand({ queryId })).catch(() => undefined);
  }
}
