/**
 * Fleet Logs Insights mode: one Logs Insights query over the audit log groups of up to 50 clusters (StartQuery's
 * per-query limit, "You can include up to 50 log groups", https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_StartQuery.html),
 * grouped by `@log` (the log group of each event), so that each cluster gets exactly the rows one-log-group insights
 * mode (`insights.ts`, {@link buildInsightsQuery}) would give it: one row per (log group → cluster, subject — the
 * ServiceAccount —, pod, warnAfter minute — the token's age bucket —, legacy-token markers, 401 marker, user agent,
 * source IP), not one per event. More clusters, more queries.
 *
 * Why: FilterLogEvents transfers every matching event and costs one request (of 5 per second per account and
 * Region) per page per cluster; the fleet query costs one StartQuery and a few GetQueryResults per 50 clusters, and
 * its result grows with the number of stale clients, not with audit volume. Logs Insights bills by bytes scanned:
 * every event of the named log groups in the window, matching or not (docs/live-mode.md#fleet-insights-mode).
 *
 * Quotas: concurrent Logs Insights queries per account ("up to 30 concurrent CloudWatch Logs Insights queries,
 * including queries that have been added to dashboards", StartQuery API reference above) are shared with the users'
 * own dashboards: at most {@link FleetInsightsOptions.maxConcurrentQueries} (default 10, a third of the quota) run at
 * once from one {@link FleetInsightsSource}, and a StartQuery refused with `LimitExceededException` waits with
 * exponential backoff (full jitter) and tries again until the query's deadline. Every HTTP attempt takes a token of the
 * shared account/Region budget (`rate-limit.ts`) when one is given.
 *
 * Cross-account: through a CloudWatch monitoring account (cross-account observability), members name their log
 * groups by ARN (`arn:aws:logs:<region>:<account>:log-group:<name>`) and the client's credentials are the monitoring
 * account's; `@log` then carries the source account, which tells apart groups of the same name in two accounts.
 *
 * Windows and cursors are those of insights mode (`cloudwatch.ts`): `[until, now − overlapMs)`, cursor
 * `{"v":1,"until":…}`, so a cluster can switch between insights and fleet mode without reading an event twice.
 * Members whose cursors differ are queried separately (each query has one window); after one poll they line up.
 */
import { backoffDelay } from '../core/backoff.js';
import { ErrorCode, TokenwatchError } from '../errors.js';
import { CloudWatchLogsClient, StartQueryCommand, type CloudWatchLogsClientConfig, type GetQueryResultsCommandOutput } from '@aws-sdk/client-cloudwatch-logs';
import pLimit from 'p-limit';
import { awaitInsightsResults, encodeCloudWatchCursor, parseCloudWatchCursorDoc, withCounting, type Budget } from './cloudwatch.js';
import { buildInsightsQuery, rowToAggregate, type TokenUseAggregate } from './insights.js';
import type { CloudWatchRateLimiter } from './rate-limit.js';
import { DEFAULT_RETRY_POLICY, RetryBudget, errorCode, sleep, type RetryPolicy } from './retry.js';
import { GroupQuery } from './group-query.js';
import { SourceError, type AuditSource, type PollOptions, type SourceStats } from './types.js';

/** StartQuery's most log groups per query (API reference, see the module doc). */
export const MAX_LOG_GROUPS_PER_QUERY = 50;

/** One cluster of a fleet poll. */
export interface FleetInsightsMember {
  /**
   * The cluster's CloudWatch source id (`cloudwatch:<region>:<logGroup>`, as `CloudWatchSource.id`): the aggregates'
   * `source` and the input of their ids, so rows equal those of that cluster's own insights-mode source.
   */
  sourceId: string;
  /** Log group name, or ARN for a log group of another account (monitoring account). */
  logGroup: string;
  /** The cursor this member's last poll returned (insights-mode format); undefined on the first poll. */
  cursor?: string;
}

/** Options of {@link FleetInsightsSource}. */
export interface FleetInsightsOptions {
  region: string;
  /** Stream name prefix, the same for every member (EKS: `kube-apiserver-audit-`). */
  streamPrefix: string;
  /** A ready client; else one is built from `region`, `endpoint`, `credentials`, `maxAttempts`, `requestTimeoutMs`. */
  client?: CloudWatchLogsClient;
  endpoint?: string;
  credentials?: CloudWatchLogsClientConfig['credentials'];
  /** SDK attempts per request. Default 6. */
  maxAttempts?: number;
  /** Longest wait for one HTTP request, ms. Default 10,000. */
  requestTimeoutMs?: number;
  /** Late-delivery window, ms (the window trails `now` by it). Default 600,000 (10 min), as insights mode. */
  overlapMs?: number;
  /** Log groups per query, 1 to 50. Default 50. */
  maxLogGroupsPerQuery?: number;
  /** Queries running at once (leave the rest of the account's quota of 30 to dashboards). Default 10. */
  maxConcurrentQueries?: number;
  /** Delay between GetQueryResults calls, ms. Default 1,000. */
  pollIntervalMs?: number;
  /** Give up on a query (StopQuery) after this long, ms, `LimitExceededException` waits included. Default 300,000. */
  timeoutMs?: number;
  /** Max result rows per query, all its log groups together (≤ 100,000). Default 10,000; reaching it fails the query. */
  limit?: number;
  /** Backoff after `LimitExceededException`, ms: base · 2^n with full jitter, capped. Default `{ baseMs: 1000, maxMs: 30000 }`. */
  limitBackoff?: { baseMs: number; maxMs: number };
  /** The retry layer for other retryable errors (throttling, 5xx). */
  retry?: Partial<RetryPolicy>;
  /** The deployment's shared request budget per account and Region. */
  rateLimiter?: CloudWatchRateLimiter;
  /** The account whose budget the requests take (the credentials' account). Default `self`. */
  account?: string;
  /** Jitter source (tests). Default `Math.random`. */
  random?: () => number;
  /** Monotonic clock for deadlines, ms. Default `performance.now`. */
  clock?: () => number;
  /** Told of every completed query: its Region, log groups, and the statistics GetQueryResults gave (bytes, events scanned). */
  onQuery?: (q: { region: string; logGroups: number; bytesScanned: number; recordsScanned: number }) => void;
}

/** What one fleet poll gives one member. */
export type FleetMemberResult =
  | {
      ok: true;
      /** The member's rows, as one-log-group insights mode gives them (same ids). */
      aggregates: TokenUseAggregate[];
      /** The member's next cursor; store it with the aggregates in one transaction. */
      cursor: string;
      /** Bytes the member's query scanned (all its log groups together), as GetQueryResults' statistics say. */
      queryBytesScanned: number;
      /** Log groups in the member's query. */
      queryLogGroups: number;
    }
  | { ok: false; error: SourceError };

/** Options of {@link FleetInsightsSource.poll}. */
export interface FleetPollOptions {
  /** Reference time, epoch ms. */
  now: number;
  /** How far back a member's first poll reads, ms. */
  lookbackMs: number;
  signal?: AbortSignal;
  /** Counters the source adds to (requests, bytes, rows as records, throttling answers). */
  stats: SourceStats;
}

/** The result of {@link FleetInsightsSource.poll}. */
export interface FleetPollResult {
  /** Per member source id. */
  members: Map<string, FleetMemberResult>;
  /** StartQuery calls that got a query id. */
  queries: number;
  /** Bytes scanned by all queries of this poll (Logs Insights bills by these). */
  bytesScanned: number;
  /** Log events scanned by all queries. */
  recordsScanned: number;
}

interface Batch {
  windowStart: number;
  members: FleetInsightsMember[];
}

function groupName(logGroup: string): string {
  const m = /^arn:[^:]+:logs:[^:]*:\d{12}:log-group:([^:]+)/.exec(logGroup);
  return m ? (m[1] as string) : logGroup;
}

function groupAccount(logGroup: string): string | undefined {
  return /^arn:[^:]+:logs:[^:]*:(\d{12}):/.exec(logGroup)?.[1];
}

/**
 * Splits members into queries: one window per query, at most `max` log groups, never two members with the same log
 * group name in one query unless both are ARNs of different accounts (`@log` tells those apart).
 * @throws TokenwatchError (`config_invalid`) when two members name the same log group
 */
export function planFleetQueries(members: readonly FleetInsightsMember[], windowStartOf: (m: FleetInsightsMember) => number, max: number): Batch[] {
  const seen = new Set<string>();
  for (const m of members) {
    const key = `${groupAccount(m.logGroup) ?? 'self'}:${groupName(m.logGroup)}`;
    if (seen.has(key)) throw new TokenwatchError(ErrorCode.ConfigInvalid, `fleet Insights: two clusters read log group '${m.logGroup}'`);
    seen.add(key);
  }
  const byWindow = new Map<number, FleetInsightsMember[]>();
  for (const m of members) {
    const w = windowStartOf(m);
    const list = byWindow.get(w) ?? [];
    list.push(m);
    byWindow.set(w, list);
  }
  const batches: Batch[] = [];
  for (const [windowStart, list] of [...byWindow.entries()].sort((a, b) => a[0] - b[0])) {
    type Open = { names: Map<string, string | undefined>; members: FleetInsightsMember[] };
    const open: Open[] = [];
    for (const m of list) {
      const name = groupName(m.logGroup);
      const account = groupAccount(m.logGroup);
      const fits = open.find((b) => {
        if (b.members.length >= max) return false;
        if (!b.names.has(name)) return true;
        const other = b.names.get(name);
        return account !== undefined && other !== undefined && other !== account;
      });
      const b: Open = fits ?? { names: new Map(), members: [] };
      if (!fits) open.push(b);
      b.names.set(name, account);
      b.members.push(m);
    }
    for (const b of open) batches.push({ windowStart, members: b.members });
  }
  return batches;
}

/** Runs fleet Logs Insights polls; share one per account and Region (its concurrency limit is per instance). */
export class FleetInsightsSource {
  private readonly client: CloudWatchLogsClient;
  private readonly overlapMs: number;
  private readonly perQuery: number;
  private readonly limiter: ReturnType<typeof pLimit>;
  private readonly pollMs: number;
  private readonly timeoutMs: number;
  private readonly rowLimit: number;
  private readonly retryPolicy: RetryPolicy;
  private readonly random: () => number;
  private readonly clock: () => number;

  /** @throws TokenwatchError (`internal`) on out-of-range options. */
  constructor(private readonly opts: FleetInsightsOptions) {
    if (!opts.region && !opts.client) throw new TokenwatchError(ErrorCode.Internal, 'FleetInsightsSource: region is required');
    this.overlapMs = opts.overlapMs ?? 600_000;
    this.perQuery = opts.maxLogGroupsPerQuery ?? MAX_LOG_GROUPS_PER_QUERY;
    if (!Number.isInteger(this.perQuery) || this.perQuery < 1 || this.perQuery > MAX_LOG_GROUPS_PER_QUERY) {
      throw new TokenwatchError(ErrorCode.Internal, `FleetInsightsSource: maxLogGroupsPerQuery must be 1 to ${MAX_LOG_GROUPS_PER_QUERY}`);
    }
    const conc = opts.maxConcurrentQueries ?? 10;
    if (!Number.isInteger(conc) || conc < 1) throw new TokenwatchError(ErrorCode.Internal, 'FleetInsightsSource: maxConcurrentQueries must be a positive integer');
    this.limiter = pLimit(conc);
    this.pollMs = opts.pollIntervalMs ?? 1_000;
    this.timeoutMs = opts.timeoutMs ?? 300_000;
    this.rowLimit = Math.min(100_000, opts.limit ?? 10_000);
    this.retryPolicy = { ...DEFAULT_RETRY_POLICY, ...opts.retry };
    this.random = opts.random ?? Math.random;
    this.clock = opts.clock ?? (() => performance.now());
    if (opts.client) {
      this.client = opts.client;
    } else {
      const timeout = opts.requestTimeoutMs ?? 10_000;
      const config: CloudWatchLogsClientConfig = {
        region: opts.region,
        maxAttempts: opts.maxAttempts ?? 6,
        requestHandler: { connectionTimeout: timeout, requestTimeout: timeout, throwOnRequestTimeout: true },
      };
      if (opts.endpoint) config.endpoint = opts.endpoint;
      if (opts.credentials) config.credentials = opts.credentials;
      this.client = new CloudWatchLogsClient(config);
    }
  }

  /** Releases the SDK client's sockets (only a client this source built). */
  close(): void {
    if (!this.opts.client) this.client.destroy();
  }

  /**
   * Polls every member: one query per window and 50 log groups, at most `maxConcurrentQueries` at once. A failed
   * query fails only its members (`ok: false`, their cursors stay); an invalid cursor fails only its member.
   * @throws TokenwatchError (`config_invalid`) when two members name the same log group; the signal's reason on abort
   */
  async poll(members: readonly FleetInsightsMember[], o: FleetPollOptions): Promise<FleetPollResult> {
    const result: FleetPollResult = { members: new Map(), queries: 0, bytesScanned: 0, recordsScanned: 0 };
    const valid: FleetInsightsMember[] = [];
    const starts = new Map<string, number>();
    for (const m of members) {
      try {
        const { until } = parseCloudWatchCursorDoc(m.cursor);
        starts.set(m.sourceId, until ?? o.now - o.lookbackMs);
        valid.push(m);
      } catch (err) {
        result.members.set(m.sourceId, { ok: false, error: new SourceError((err as Error).message, m.sourceId, 'InvalidCursor', false, { cause: err }) });
      }
    }
    const windowEnd = o.now - this.overlapMs;
    const batches = planFleetQueries(valid, (m) => starts.get(m.sourceId) as number, this.perQuery);
    await Promise.all(
      batches.map((b) =>
        this.limiter(async () => {
          if (windowEnd <= b.windowStart) {
            for (const m of b.members) {
              result.members.set(m.sourceId, { ok: true, aggregates: [], cursor: encodeCloudWatchCursor(b.windowStart), queryBytesScanned: 0, queryLogGroups: 0 });
            }
            return;
          }
          try {
            const q = await this.runQuery(b, windowEnd, o);
            result.queries++;
            result.bytesScanned += q.bytesScanned;
            result.recordsScanned += q.recordsScanned;
            this.opts.onQuery?.({ region: this.opts.region, logGroups: b.members.length, bytesScanned: q.bytesScanned, recordsScanned: q.recordsScanned });
            for (const m of b.members) {
              result.members.set(m.sourceId, {
                ok: true,
                aggregates: q.rows.get(m.sourceId) ?? [],
                cursor: encodeCloudWatchCursor(windowEnd),
                queryBytesScanned: q.bytesScanned,
                queryLogGroups: b.members.length,
              });
            }
          } catch (err) {
            if (o.signal?.aborted) throw o.signal.reason;
            const error =
              err instanceof SourceError ? err : new SourceError(`fleet Logs Insights query failed: ${errorCode(err)}`, 'cloudwatch-fleet', errorCode(err), true, { cause: err });
            for (const m of b.members) result.members.set(m.sourceId, { ok: false, error });
          }
        }),
      ),
    );
    return result;
  }

  private describe(b: Batch): string {
    const first = b.members[0]?.logGroup ?? '';
    return `CloudWatch Logs Insights fleet query over ${b.members.length} log group(s) ('${first}'${b.members.length > 1 ? ', …' : ''}) (${this.opts.region})`;
  }

  private budget(o: FleetPollOptions): Budget | undefined {
    const limiter = this.opts.rateLimiter;
    return limiter ? { limiter, account: this.opts.account ?? 'self', region: this.opts.region, signal: o.signal } : undefined;
  }

  private async send<T>(make: () => { input: unknown }, retry: RetryBudget, o: FleetPollOptions): Promise<T> {
    for (;;) {
      try {
        const out = await this.client.send(withCounting(make(), o.stats, this.budget(o)) as never, { abortSignal: o.signal });
        retry.onSuccess();
        return out as T;
      } catch (err) {
        await retry.onError(err, o.signal);
      }
    }
  }

  private async runQuery(b: Batch, windowEnd: number, o: FleetPollOptions): Promise<{ rows: Map<string, TokenUseAggregate[]>; bytesScanned: number; recordsScanned: number }> {
    const id = 'cloudwatch-fleet';
    const what = this.describe(b);
    const deadline = this.clock() + this.timeoutMs;
    const queryString = buildInsightsQuery({ streamPrefix: this.opts.streamPrefix, startMs: b.windowStart, endMs: windowEnd, limit: this.rowLimit, byLogGroup: true });
    const retry = new RetryBudget(this.retryPolicy, id, what, this.random);
    const backoff = this.opts.limitBackoff ?? { baseMs: 1_000, maxMs: 30_000 };
    let queryId: string | undefined;
    for (let attempt = 0; ; attempt++) {
      try {
        const out = await this.client.send(
          withCounting(
            new StartQueryCommand({
              logGroupIdentifiers: b.members.map((m) => m.logGroup),
              startTime: Math.floor(b.windowStart / 1000),
              endTime: Math.ceil(windowEnd / 1000),
              queryString,
              limit: this.rowLimit,
            }),
            o.stats,
            this.budget(o),
          ),
          { abortSignal: o.signal },
        );
        queryId = out.queryId;
        break;
      } catch (err) {
        if (errorCode(err) !== 'LimitExceededException') {
          await retry.onError(err, o.signal);
          continue;
        }
        // The account's concurrent-query quota is full (dashboards share it): wait, full jitter, until the deadline.
        const delay = Math.round(backoffDelay(backoff.baseMs, attempt, backoff.maxMs) * this.random());
        if (this.clock() + delay > deadline) {
          throw new SourceError(`${what}: StartQuery refused with LimitExceededException until the ${this.timeoutMs} ms deadline (the account's concurrent-query quota is in use)`, id, 'LimitExceededException', true, { cause: err });
        }
        await sleep(delay, o.signal);
      }
    }
    if (!queryId) throw new SourceError(`${what}: StartQuery returned no queryId`, id, 'NoQueryId', true);
    const { rows: cells, statistics: stats } = await awaitInsightsResults({
      client: this.client,
      send: (make) => this.send<GetQueryResultsCommandOutput>(make, retry, o),
      queryId,
      what,
      id,
      now: this.clock,
      deadline,
      timeoutMs: this.timeoutMs,
      pollMs: this.pollMs,
      limit: this.rowLimit,
      limitAdvice: 'raise the limit up to 100000, or put fewer log groups in a query',
      ...(o.signal ? { signal: o.signal } : {}),
    });
    // `@log` is `<account>:<name>`; a bare-name member matches any account (the credentials' own).
    const byName = new Map<string, FleetInsightsMember[]>();
    for (const m of b.members) byName.set(groupName(m.logGroup), [...(byName.get(groupName(m.logGroup)) ?? []), m]);
    const rows = new Map<string, TokenUseAggregate[]>();
    for (const row of cells) {
      o.stats.records++;
      const log = row.find((c) => c.field === '@log')?.value ?? '';
      const colon = log.indexOf(':');
      const account = log.slice(0, colon);
      const candidates = byName.get(log.slice(colon + 1)) ?? [];
      const m = candidates.find((c) => groupAccount(c.logGroup) === account) ?? candidates.find((c) => groupAccount(c.logGroup) === undefined);
      if (!m) continue;
      const agg = rowToAggregate(
        row.filter((c) => c.field !== '@log'),
        { source: m.sourceId, windowStart: b.windowStart, windowEnd },
      );
      if (agg) rows.set(m.sourceId, [...(rows.get(m.sourceId) ?? []), agg]);
    }
    return { rows, bytesScanned: stats?.bytesScanned ?? 0, recordsScanned: stats?.recordsScanned ?? 0 };
  }
}

/** Options of {@link FleetInsightsSource.memberSource}. */
export interface MemberSourceOptions {
  /**
   * A member's poll reuses rows a fleet poll fetched for it (triggered by another member) when that fleet poll's
   * reference time is at most this much before the member's own `now`, ms. Polls of many clusters are spread over
   * the interval, so this is about the poll interval: one fleet query per interval then serves every member.
   * Default 300,000 (5 min).
   */
  reuseMs?: number;
}

interface Cached {
  /** The cursor the fleet poll started this member from. */
  from: string | undefined;
  now: number;
  result: FleetMemberResult;
}

/**
 * Per-cluster {@link AuditSource}s backed by one {@link FleetInsightsSource}: a cluster's poll runs one fleet poll for
 * every registered cluster (each from the cursor its own last poll returned) and keeps the other clusters' rows for
 * their polls, which then send no request. Rows and cursors are those of insights mode, so the poller stores them
 * as it stores an insights-mode poll's.
 */
export class FleetInsightsMembers {
  /** `polled`: the member's own poll has told its cursor (in this process). */
  private readonly members = new Map<string, { logGroup: string; cursor: string | undefined; polled: boolean }>();
  private readonly group: GroupQuery<Cached>;

  constructor(
    private readonly fleet: FleetInsightsSource,
    opts: MemberSourceOptions = {},
  ) {
    this.group = new GroupQuery(opts.reuseMs ?? 300_000);
  }

  /**
   * The audit source of one cluster (`sourceId` as `CloudWatchSource.id`, so cursors carry over from insights mode).
   * @throws TokenwatchError (`config_invalid`) when another member already reads `logGroup`
   */
  add(sourceId: string, logGroup: string): AuditSource & { close(): void } {
    if (this.members.has(sourceId)) throw new TokenwatchError(ErrorCode.ConfigInvalid, `fleet Insights: two clusters read log group '${logGroup}'`);
    // The checks a poll's plan makes (no log group read twice), at registration rather than at the first poll.
    planFleetQueries([...[...this.members].map(([id, m]) => ({ sourceId: id, logGroup: m.logGroup })), { sourceId, logGroup }], () => 0, MAX_LOG_GROUPS_PER_QUERY);
    this.members.set(sourceId, { logGroup, cursor: undefined, polled: false });
    return {
      id: sourceId,
      poll: (cursor, o) => this.pollMember(sourceId, cursor, o),
      close: () => {
        this.members.delete(sourceId);
        this.group.results.delete(sourceId);
        if (this.members.size === 0) this.fleet.close();
      },
    };
  }

  private async refresh(trigger: string | undefined, o: PollOptions): Promise<void> {
    // A member that has not polled yet in this process (a restart) is assumed to be where the triggering member is:
    // members served by one fleet poll share its cursor, so after a restart their stored cursors are usually equal.
    // A wrong guess costs that member one more query when it polls, never a wrong window.
    const members: FleetInsightsMember[] = [...this.members].map(([sourceId, m]) => {
      const cursor = m.polled ? m.cursor : trigger;
      return { sourceId, logGroup: m.logGroup, ...(cursor !== undefined && { cursor }) };
    });
    const from = new Map(members.map((m) => [m.sourceId, m.cursor]));
    const out = await this.fleet.poll(members, { now: o.now, lookbackMs: o.lookbackMs, stats: o.stats, ...(o.signal && { signal: o.signal }) });
    for (const [id, result] of out.members) this.group.results.set(id, { from: from.get(id), now: o.now, result });
  }

  private async *pollMember(sourceId: string, cursor: string | undefined, o: PollOptions): AsyncGenerator<string, string> {
    const m = this.members.get(sourceId);
    if (!m) throw new SourceError(`fleet Insights: source '${sourceId}' was closed`, sourceId, 'Closed', false);
    m.cursor = cursor;
    m.polled = true;
    // One fleet poll at a time: a member that finds one running waits for it, then looks again.
    const hit = await this.group.take(sourceId, cursor, o.now, () => this.refresh(cursor, o));
    if (!hit) throw new SourceError(`fleet Insights: no result for '${sourceId}'`, sourceId, 'NoFleetResult', true);
    if (!hit.result.ok) throw hit.result.error;
    // Rows were counted in `stats.records` of the poll that ran the fleet query; the query's bytes go to every poll it served.
    if (hit.result.queryLogGroups > 0) o.stats.insights = { bytesScanned: hit.result.queryBytesScanned, logGroups: hit.result.queryLogGroups };
    for (const a of hit.result.aggregates) yield JSON.stringify(a);
    // The caller stores this cursor with the rows; the next fleet poll starts this member from it.
    m.cursor = hit.result.cursor;
    return hit.result.cursor;
  }
}
