/**
 * A fake CloudWatch Logs service on loopback, for tests, benchmarks and the sandbox.
 *
 * Speaks the AWS JSON 1.1 protocol the real `@aws-sdk/client-cloudwatch-logs` client uses: `POST /`,
 * `content-type: application/x-amz-json-1.1`, `x-amz-target: Logs_20140328.<Operation>`, JSON bodies, errors as
 * `{"__type":"<Code>","message":"..."}` with an `x-amzn-errortype` header. Request signing headers are accepted and
 * ignored (any static credentials work). Point the client at it with
 * `new CloudWatchLogsClient({ region, endpoint: fake.url, credentials: { accessKeyId: 'x', secretAccessKey: 'x' } })`.
 *
 * Operations:
 * - `FilterLogEvents`: `logGroupName` | `logGroupIdentifier` (exactly one), `logStreamNames` | `logStreamNamePrefix`
 *   (not both), `startTime`/`endTime` epoch ms (both inclusive: "events with a timestamp before startTime / later than
 *   endTime are not returned", SDK doc comments), `filterPattern` (term subset: empty, `term`, `"quoted term"`,
 *   AND of terms, `?`-prefixed OR terms, `-term` exclusions; substring, case-sensitive), `limit` (≤ 10,000),
 *   `nextToken`. Pages hold at most `pageSize` events and examine at most `scanPerPage` stored events, so a page can
 *   be empty yet carry a `nextToken`, as CloudWatch's can; {@link FakeCloudWatch.emptyPagesNext} forces such pages.
 *   `searchedLogStreams` lists the streams searched.
 * - `StartQuery` / `GetQueryResults` / `StopQuery`: a small Logs Insights QL interpreter that computes results from
 *   the stored events: commands `fields`, `display`, `filter`, `parse` (regex with named groups, or glob + `as`),
 *   `stats` (`count`, `count_distinct`, `min`, `max`, `sum`, `avg`, with `by`), `sort`, `limit`; expressions with
 *   arithmetic, comparisons, `and`/`or`/`not`, `like`/`=~` (regex or substring) and the functions `toMillis`,
 *   `fromMillis`, `floor`, `ceil`, `abs`, `coalesce`, `ispresent`, `isempty`, `strlen`, `concat`, `tolower`,
 *   `toupper`, `greatest`, `least`. Start/end times are epoch **seconds** (both inclusive). A query is `Scheduled`,
 *   then `Running` for `queryRunningPolls` GetQueryResults calls, then `Complete`; results page by `maxItems` with
 *   `nextToken`. One StartQuery may name up to 50 log groups (`logGroupName`, `logGroupNames` or
 *   `logGroupIdentifiers`, names or ARNs); every record has `@log` = `<accountId>:<logGroupName>`, so `stats … by @log`
 *   splits the result per log group. With {@link FakeCloudWatchOptions.maxConcurrentQueries}, a StartQuery while that
 *   many queries are `Scheduled`/`Running` gets `LimitExceededException`; {@link FakeCloudWatch.peakConcurrentQueries}
 *   tells the most that ran at once.
 * - `DescribeLogGroups` (`logGroupNamePrefix`).
 *
 * Rate limits like AWS's ({@link FakeCloudWatchOptions.tps}): a token bucket per operation for the whole fake (one
 * account and Region), `rate` requests per second with a burst of `rate`; a request over it gets
 * `400 ThrottlingException: Rate exceeded` (CloudWatch Logs quotas: FilterLogEvents 5 TPS per account and Region,
 * https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/cloudwatch_limits_cwl.html). Each request records when it
 * arrived (`receivedAt`), so a test can count requests per second.
 *
 * Test controls: {@link FakeCloudWatch.throttleNext}, {@link FakeCloudWatch.failNext}, {@link FakeCloudWatch.emptyPagesNext},
 * the {@link FakeCloudWatch.requests} log, and late delivery (an event's `ingestionTime` may be later than its
 * `timestamp`; with the `now` option, events ingested after `now()` are not visible yet).
 *
 * Strictness beyond AWS (to catch unit mistakes): StartQuery rejects `startTime`/`endTime` above 10^11 (that is
 * milliseconds, not seconds) with `InvalidParameterException`.
 */
import { ErrorCode, TokenwatchError } from '../../src/errors.js';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';

/** An event to store. */
export interface FakeLogEventInput {
  /** Event time, epoch ms. */
  timestamp: number;
  message: string;
  /** When CloudWatch received it, epoch ms (default: `now()` of the fake, i.e. at `putEvents`). Later than `timestamp` simulates late delivery. */
  ingestionTime?: number;
}

/** A stored event. */
export interface FakeStoredEvent {
  group: string;
  stream: string;
  timestamp: number;
  message: string;
  ingestionTime: number;
  eventId: string;
  seq: number;
}

/** One request the fake received. */
export interface FakeRequestRecord {
  /** Operation from `x-amz-target`, e.g. `FilterLogEvents`. */
  op: string;
  /** Parsed JSON body (`{}` if unparsable). */
  body: Record<string, unknown>;
  /** Request body size in bytes. */
  bytes: number;
  /** Response body size in bytes. */
  responseBytes: number;
  /** HTTP status sent. */
  status: number;
  /** Error code sent, if any. */
  error?: string;
  /** The response payload sent (parsed form). */
  response?: unknown;
  headers: IncomingHttpHeaders;
  /** When it arrived, ms on the fake's rate clock ({@link FakeCloudWatchOptions.rateClock}). */
  receivedAt: number;
}

/** Options of {@link startFakeCloudWatch}. */
export interface FakeCloudWatchOptions {
  /** Max events per FilterLogEvents page (the request's `limit` also applies). Default 10,000. */
  pageSize?: number;
  /** Max stored events examined per FilterLogEvents page (matching or not). Default unlimited. */
  scanPerPage?: number;
  /** GetQueryResults calls answered `Running` before `Complete`. Default 1. */
  queryRunningPolls?: number;
  /**
   * Logs Insights queries that may be `Scheduled` or `Running` at once (the account's concurrent-query quota: "up to 30
   * concurrent CloudWatch Logs Insights queries, including queries that have been added to dashboards", StartQuery API
   * reference, https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_StartQuery.html). A StartQuery
   * over it gets `LimitExceededException`. Default: no limit.
   */
  maxConcurrentQueries?: number;
  /** The fake's clock (epoch ms) for default `ingestionTime` and visibility. Default `Date.now`. */
  now?: () => number;
  /**
   * Requests per second per operation (e.g. `{ FilterLogEvents: 5 }`, AWS's quota), enforced with a token bucket of
   * that rate and a burst of the same size; over it: `ThrottlingException`. Default: no limit.
   */
  tps?: Record<string, number>;
  /** The clock of `tps` and `receivedAt`, ms (monotonic). Default `performance.now`. */
  rateClock?: () => number;
  /** Region and account used in ARNs. Defaults `us-east-1`, `123456789012`. */
  region?: string;
  accountId?: string;
}

/** An error to inject. */
export interface FakeError {
  /** AWS error code, e.g. `ThrottlingException`, `ResourceNotFoundException`, `AccessDeniedException`, `ServiceUnavailableException`. */
  type: string;
  /** HTTP status; default 400 (500 for `ServiceUnavailableException`/`InternalFailure`). */
  status?: number;
  message?: string;
}

/** A running fake. */
export interface FakeCloudWatch {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  readonly port: number;
  /** Every request received, in order. */
  readonly requests: FakeRequestRecord[];
  /** Creates a log group (no-op if present). `putEvents` creates groups as needed. */
  createLogGroup(group: string): void;
  /** Stores events in `group`/`stream`. */
  putEvents(group: string, stream: string, events: FakeLogEventInput[]): void;
  /** Number of stored events in a group. */
  eventCount(group: string): number;
  /** The next `n` requests (of `op`, or of any operation) get `400 ThrottlingException: Rate exceeded`. */
  throttleNext(n: number, op?: string): void;
  /** The next `n` requests (of `op`, or any) get `error`. `n` may be `Infinity`. */
  failNext(n: number, error: FakeError, op?: string): void;
  /** The next `n` FilterLogEvents pages come back empty with a `nextToken` that resumes where the page began. */
  emptyPagesNext(n: number): void;
  /** Forgets injected errors and empty pages. */
  clearFaults(): void;
  /** Requests of one operation. */
  requestsOf(op: string): FakeRequestRecord[];
  /** The most Logs Insights queries that were `Scheduled` or `Running` at once since the fake started. */
  peakConcurrentQueries(): number;
  close(): Promise<void>;
}

class ApiError extends TokenwatchError {
  constructor(
    readonly type: string,
    message: string,
    readonly status = 400,
  ) {
    super(ErrorCode.FakeRequestInvalid, message);
  }
}

interface Group {
  name: string;
  creationTime: number;
  events: FakeStoredEvent[];
  sorted: boolean;
  /** Names of the streams that hold events (so a page does not scan every event to list them). */
  streams: Set<string>;
}

interface Fault {
  left: number;
  op?: string;
  error: FakeError;
}

interface QueryState {
  id: string;
  status: 'Scheduled' | 'Running' | 'Complete' | 'Cancelled';
  polls: number;
  rows: ResultRow[];
  statistics: { recordsMatched: number; recordsScanned: number; bytesScanned: number };
}

type ResultRow = { field: string; value: string }[];

const MAX_LIMIT = 10_000;

/** Starts the fake on 127.0.0.1, port 0. */
export async function startFakeCloudWatch(opts: FakeCloudWatchOptions = {}): Promise<FakeCloudWatch> {
  const now = opts.now ?? Date.now;
  const region = opts.region ?? 'us-east-1';
  const accountId = opts.accountId ?? '123456789012';
  const pageSize = opts.pageSize ?? MAX_LIMIT;
  const scanPerPage = opts.scanPerPage ?? Number.POSITIVE_INFINITY;
  const runningPolls = opts.queryRunningPolls ?? 1;
  const groups = new Map<string, Group>();
  const requests: FakeRequestRecord[] = [];
  const faults: Fault[] = [];
  const queries = new Map<string, QueryState>();
  let emptyPages = 0;
  let seq = 0;
  let peakQueries = 0;
  const activeQueries = (): number => [...queries.values()].filter((q) => q.status === 'Scheduled' || q.status === 'Running').length;
  const rateClock = opts.rateClock ?? (() => performance.now());
  const buckets = new Map<string, { tokens: number; at: number }>();
  /** Takes a token of `op`'s bucket; false when it is empty (the request is throttled). */
  const takeToken = (op: string, at: number): boolean => {
    const rate = opts.tps?.[op];
    if (rate === undefined) return true;
    const b = buckets.get(op) ?? { tokens: rate, at };
    b.tokens = Math.min(rate, b.tokens + ((at - b.at) / 1000) * rate);
    b.at = at;
    buckets.set(op, b);
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  };

  const groupOf = (name: string, create: boolean): Group | undefined => {
    let g = groups.get(name);
    if (!g && create) {
      g = { name, creationTime: now(), events: [], sorted: true, streams: new Set() };
      groups.set(name, g);
    }
    return g;
  };
  const sortedEvents = (g: Group): FakeStoredEvent[] => {
    if (!g.sorted) {
      g.events.sort(compareEvents);
      g.sorted = true;
    }
    return g.events;
  };
  const visible = (e: FakeStoredEvent): boolean => e.ingestionTime <= now();
  const resolveGroup = (body: Record<string, unknown>, nameKey: string, idKey: string): Group => {
    const name = optString(body, nameKey);
    const ident = optString(body, idKey);
    if ((name === undefined) === (ident === undefined)) {
      throw new ApiError('InvalidParameterException', `Exactly one of ${nameKey} or ${idKey} must be specified`);
    }
    const g = groups.get(groupNameFromIdentifier((name ?? ident) as string));
    if (!g) throw new ApiError('ResourceNotFoundException', 'The specified log group does not exist.');
    return g;
  };

  function filterLogEvents(body: Record<string, unknown>): unknown {
    const g = resolveGroup(body, 'logGroupName', 'logGroupIdentifier');
    const streamNames = body['logStreamNames'];
    const prefix = optString(body, 'logStreamNamePrefix');
    if (streamNames !== undefined && prefix !== undefined) {
      throw new ApiError('InvalidParameterException', 'logStreamNames and logStreamNamePrefix are mutually exclusive');
    }
    const names = Array.isArray(streamNames) ? new Set(streamNames.map(String)) : undefined;
    const streamOk = (s: string): boolean => (names ? names.has(s) : prefix === undefined || s.startsWith(prefix));
    const startTime = optNumber(body, 'startTime') ?? 0;
    const endTime = optNumber(body, 'endTime') ?? Number.MAX_SAFE_INTEGER;
    const limit = optNumber(body, 'limit') ?? MAX_LIMIT;
    if (limit < 1 || limit > MAX_LIMIT) throw new ApiError('InvalidParameterException', 'limit must be between 1 and 10000');
    const pattern = compileFilterPattern(optString(body, 'filterPattern') ?? '');
    const events = sortedEvents(g);
    const queryKey = JSON.stringify([g.name, prefix, [...(names ?? [])], startTime, endTime, body['filterPattern'] ?? '']);
    let from = lowerBound(events, startTime, -1);
    const tokenIn = optString(body, 'nextToken');
    if (tokenIn !== undefined) {
      const tok = decodeToken(tokenIn);
      if (!tok || tok.q !== queryKey) throw new ApiError('InvalidParameterException', 'The specified nextToken is invalid.');
      from = lowerBound(events, tok.ts, tok.seq);
    }
    const searched = [...g.streams].filter(streamOk).sort();
    const searchedLogStreams = searched.map((logStreamName) => ({ logStreamName, searchedCompletely: true }));
    if (emptyPages > 0) {
      emptyPages--;
      const at = events[from];
      const nextToken = at ? encodeToken({ q: queryKey, ts: at.timestamp, seq: at.seq - 1 }) : encodeToken({ q: queryKey, ts: endTime + 1, seq: -1 });
      return { events: [], searchedLogStreams, nextToken };
    }
    const out: FakeStoredEvent[] = [];
    let i = from;
    let scanned = 0;
    const max = Math.min(limit, pageSize);
    for (; i < events.length; i++) {
      const e = events[i] as FakeStoredEvent;
      if (e.timestamp > endTime) {
        i = events.length;
        break;
      }
      if (scanned >= scanPerPage || out.length >= max) break;
      scanned++;
      if (!visible(e) || !streamOk(e.stream) || !pattern(e.message)) continue;
      out.push(e);
    }
    const res: Record<string, unknown> = {
      events: out.map((e) => ({
        logStreamName: e.stream,
        timestamp: e.timestamp,
        message: e.message,
        ingestionTime: e.ingestionTime,
        eventId: e.eventId,
      })),
      searchedLogStreams,
    };
    if (i < events.length) {
      const last = events[i - 1];
      const resume = last ?? events[i];
      if (resume) {
        res['nextToken'] = last
          ? encodeToken({ q: queryKey, ts: last.timestamp, seq: last.seq })
          : encodeToken({ q: queryKey, ts: resume.timestamp, seq: resume.seq - 1 });
      }
    }
    return res;
  }

  function startQuery(body: Record<string, unknown>): unknown {
    const names: string[] = [];
    const one = optString(body, 'logGroupName');
    const many = body['logGroupNames'];
    const idents = body['logGroupIdentifiers'];
    const given = [one !== undefined, Array.isArray(many), Array.isArray(idents)].filter(Boolean).length;
    if (given !== 1) {
      throw new ApiError('InvalidParameterException', 'Exactly one of logGroupName, logGroupNames or logGroupIdentifiers must be specified');
    }
    if (one !== undefined) names.push(one);
    if (Array.isArray(many)) names.push(...many.map(String));
    if (Array.isArray(idents)) names.push(...idents.map((x) => groupNameFromIdentifier(String(x))));
    if (names.length > 50) throw new ApiError('InvalidParameterException', 'At most 50 log groups can be queried');
    const startTime = optNumber(body, 'startTime');
    const endTime = optNumber(body, 'endTime');
    if (startTime === undefined || endTime === undefined) {
      throw new ApiError('InvalidParameterException', 'startTime and endTime are required');
    }
    if (startTime > 1e11 || endTime > 1e11) {
      throw new ApiError('InvalidParameterException', 'startTime and endTime are epoch seconds (value looks like milliseconds)');
    }
    if (endTime < startTime) throw new ApiError('InvalidParameterException', 'endTime must be >= startTime');
    const queryString = optString(body, 'queryString');
    if (!queryString) throw new ApiError('InvalidParameterException', 'queryString is required');
    const limit = optNumber(body, 'limit');
    if (limit !== undefined && (limit < 1 || limit > 100_000)) {
      throw new ApiError('InvalidParameterException', 'limit must be between 1 and 100000');
    }
    let program: Program;
    try {
      program = parseQuery(queryString);
    } catch (err) {
      throw new ApiError('MalformedQueryException', (err as Error).message);
    }
    if (opts.maxConcurrentQueries !== undefined && activeQueries() >= opts.maxConcurrentQueries) {
      throw new ApiError('LimitExceededException', `Too many concurrent queries (limit ${opts.maxConcurrentQueries})`);
    }
    const records: InsightsRecord[] = [];
    let bytesScanned = 0;
    for (const name of names) {
      const g = groups.get(name);
      if (!g) throw new ApiError('ResourceNotFoundException', `Log group '${name}' does not exist`);
      for (const e of sortedEvents(g)) {
        if (e.timestamp < startTime * 1000 || e.timestamp >= (endTime + 1) * 1000 || !visible(e)) continue;
        bytesScanned += Buffer.byteLength(e.message) + 26;
        records.push(baseRecord(e, accountId));
      }
    }
    const { rows, matched } = runProgram(program, records, limit ?? MAX_LIMIT);
    const id = randomUUID();
    queries.set(id, {
      id,
      status: 'Scheduled',
      polls: 0,
      rows,
      statistics: { recordsMatched: matched, recordsScanned: records.length, bytesScanned },
    });
    peakQueries = Math.max(peakQueries, activeQueries());
    return { queryId: id };
  }

  function getQueryResults(body: Record<string, unknown>): unknown {
    const id = optString(body, 'queryId');
    const q = id ? queries.get(id) : undefined;
    if (!q) throw new ApiError('ResourceNotFoundException', 'Query does not exist');
    q.polls++;
    if (q.status === 'Scheduled' || q.status === 'Running') {
      q.status = q.polls > runningPolls ? 'Complete' : 'Running';
    }
    if (q.status !== 'Complete') {
      return { status: q.status, results: [], statistics: { recordsMatched: 0, recordsScanned: 0, bytesScanned: 0 } };
    }
    const maxItems = Math.min(optNumber(body, 'maxItems') ?? MAX_LIMIT, MAX_LIMIT);
    const tok = optString(body, 'nextToken');
    const offset = tok ? Number(Buffer.from(tok, 'base64url').toString('utf8').replace(`${q.id}:`, '')) : 0;
    if (!Number.isInteger(offset) || offset < 0) throw new ApiError('InvalidParameterException', 'The specified nextToken is invalid.');
    const page = q.rows.slice(offset, offset + maxItems);
    const res: Record<string, unknown> = { status: 'Complete', results: page, statistics: q.statistics };
    if (offset + maxItems < q.rows.length) {
      res['nextToken'] = Buffer.from(`${q.id}:${offset + maxItems}`, 'utf8').toString('base64url');
    }
    return res;
  }

  function stopQuery(body: Record<string, unknown>): unknown {
    const id = optString(body, 'queryId');
    const q = id ? queries.get(id) : undefined;
    if (!q) throw new ApiError('ResourceNotFoundException', 'Query does not exist');
    if (q.status === 'Complete' || q.status === 'Cancelled') return { success: false };
    q.status = 'Cancelled';
    return { success: true };
  }

  function describeLogGroups(body: Record<string, unknown>): unknown {
    const prefix = optString(body, 'logGroupNamePrefix') ?? '';
    const logGroups = [...groups.values()]
      .filter((g) => g.name.startsWith(prefix))
      .sort((a, b) => a.name.localeCompare(b.name))
      .map((g) => ({
        logGroupName: g.name,
        creationTime: g.creationTime,
        arn: `arn:aws:logs:${region}:${accountId}:log-group:${g.name}:*`,
        logGroupArn: `arn:aws:logs:${region}:${accountId}:log-group:${g.name}`,
        storedBytes: g.events.reduce((n, e) => n + Buffer.byteLength(e.message), 0),
      }));
    return { logGroups };
  }

  const handlers: Record<string, (body: Record<string, unknown>) => unknown> = {
    FilterLogEvents: filterLogEvents,
    StartQuery: startQuery,
    GetQueryResults: getQueryResults,
    StopQuery: stopQuery,
    DescribeLogGroups: describeLogGroups,
  };

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const target = String(req.headers['x-amz-target'] ?? '');
      const op = target.startsWith('Logs_20140328.') ? target.slice('Logs_20140328.'.length) : target;
      let body: Record<string, unknown> = {};
      const record: FakeRequestRecord = { op, body, bytes: raw.length, responseBytes: 0, status: 200, headers: req.headers, receivedAt: rateClock() };
      requests.push(record);
      const send = (status: number, payload: unknown, errorType?: string): void => {
        const buf = Buffer.from(JSON.stringify(payload), 'utf8');
        record.status = status;
        record.responseBytes = buf.length;
        record.response = payload;
        if (errorType) record.error = errorType;
        const headers: Record<string, string | number> = {
          'content-type': 'application/x-amz-json-1.1',
          'content-length': buf.length,
          'x-amzn-requestid': randomUUID(),
        };
        if (errorType) headers['x-amzn-errortype'] = errorType;
        res.writeHead(status, headers);
        res.end(buf);
      };
      const sendError = (e: ApiError): void => send(e.status, { __type: e.type, message: e.message }, e.type);
      try {
        if (req.method !== 'POST' || (req.url ?? '/').split('?')[0] !== '/') {
          throw new ApiError('UnknownOperationException', `Unsupported ${req.method} ${req.url}`, 404);
        }
        if (!target.startsWith('Logs_20140328.')) throw new ApiError('UnknownOperationException', `Unknown target '${target}'`);
        const ctype = String(req.headers['content-type'] ?? '');
        if (!ctype.startsWith('application/x-amz-json-1.1')) {
          throw new ApiError('SerializationException', `Expected content-type application/x-amz-json-1.1, got '${ctype}'`);
        }
        try {
          const parsed: unknown = raw.length ? JSON.parse(raw.toString('utf8')) : {};
          if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, 'not an object');
          body = parsed as Record<string, unknown>;
          record.body = body;
        } catch {
          throw new ApiError('SerializationException', 'Request body is not a JSON object');
        }
        const fault = faults.find((f) => f.left > 0 && (f.op === undefined || f.op === op));
        if (fault) {
          fault.left--;
          const e = fault.error;
          const status = e.status ?? (e.type === 'ServiceUnavailableException' || e.type === 'InternalFailure' ? 500 : 400);
          throw new ApiError(e.type, e.message ?? defaultMessage(e.type), status);
        }
        if (!takeToken(op, record.receivedAt)) throw new ApiError('ThrottlingException', 'Rate exceeded');
        const handler = handlers[op];
        if (!handler) throw new ApiError('UnknownOperationException', `Operation ${op} is not supported by the fake`);
        send(200, handler(body));
      } catch (err) {
        if (err instanceof ApiError) sendError(err);
        else sendError(new ApiError('InternalFailure', (err as Error).message, 500));
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    createLogGroup(group) {
      groupOf(group, true);
    },
    putEvents(group, stream, events) {
      const g = groupOf(group, true) as Group;
      if (events.length > 0) g.streams.add(stream);
      for (const e of events) {
        seq++;
        g.events.push({
          group,
          stream,
          timestamp: e.timestamp,
          message: e.message,
          ingestionTime: e.ingestionTime ?? now(),
          eventId: String(seq).padStart(56, '0'),
          seq,
        });
      }
      g.sorted = false;
    },
    eventCount(group) {
      return groups.get(group)?.events.length ?? 0;
    },
    throttleNext(n, op) {
      faults.push({ left: n, ...(op !== undefined && { op }), error: { type: 'ThrottlingException', message: 'Rate exceeded' } });
    },
    failNext(n, error, op) {
      faults.push({ left: n, ...(op !== undefined && { op }), error });
    },
    emptyPagesNext(n) {
      emptyPages += n;
    },
    clearFaults() {
      faults.length = 0;
      emptyPages = 0;
    },
    requestsOf(op) {
      return requests.filter((r) => r.op === op);
    },
    peakConcurrentQueries() {
      return peakQueries;
    },
    close() {
      return new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((err) => (err ? reject(err) : resolve()));
      });
    },
  };
}

function defaultMessage(type: string): string {
  switch (type) {
    case 'ThrottlingException':
      return 'Rate exceeded';
    case 'ResourceNotFoundException':
      return 'The specified log group does not exist.';
    case 'AccessDeniedException':
      return 'User: arn:aws:sts::123456789012:assumed-role/tokenwatch/x is not authorized to perform: logs:FilterLogEvents';
    case 'ServiceUnavailableException':
      return 'The service cannot complete the request.';
    case 'LimitExceededException':
      return 'Account maximum query concurrency limit of [100] reached.';
    default:
      return type;
  }
}

function compareEvents(a: FakeStoredEvent, b: FakeStoredEvent): number {
  return a.timestamp - b.timestamp || a.seq - b.seq;
}

/** First index whose (timestamp, seq) is strictly after (ts, seq). */
function lowerBound(events: FakeStoredEvent[], ts: number, seq: number): number {
  let lo = 0;
  let hi = events.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const e = events[mid] as FakeStoredEvent;
    if (e.timestamp < ts || (e.timestamp === ts && e.seq <= seq)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

interface PageToken {
  q: string;
  ts: number;
  seq: number;
}

function encodeToken(t: PageToken): string {
  return Buffer.from(JSON.stringify(t), 'utf8').toString('base64url');
}

function decodeToken(s: string): PageToken | undefined {
  try {
    const v: unknown = JSON.parse(Buffer.from(s, 'base64url').toString('utf8'));
    if (v && typeof v === 'object' && 'q' in v && 'ts' in v && 'seq' in v) {
      const { q, ts, seq } = v as Record<string, unknown>;
      if (typeof q === 'string' && typeof ts === 'number' && typeof seq === 'number') return { q, ts, seq };
    }
  } catch {
    /* invalid */
  }
  return undefined;
}

function optString(body: Record<string, unknown>, key: string): string | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new ApiError('SerializationException', `${key} must be a string`);
  return v;
}

function optNumber(body: Record<string, unknown>, key: string): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new ApiError('SerializationException', `${key} must be a number`);
  return v;
}

/** `arn:aws:logs:<region>:<acct>:log-group:<name>[:*]` or a plain name → the name. */
function groupNameFromIdentifier(ident: string): string {
  const m = /^arn:[^:]+:logs:[^:]*:[^:]*:log-group:(.+?)(:\*)?$/.exec(ident);
  return m ? (m[1] as string) : ident;
}

// ---------------------------------------------------------------------------------------------------------------
// Filter patterns (term subset)

/**
 * Compiles the term subset of the CloudWatch filter pattern syntax ("Filter pattern syntax for metric filters,
 * subscription filters, filter log events, and Live Tail"): empty (all events), bare or double-quoted terms
 * (all must occur), `?term` (any of them must occur), `-term` (must not occur). Matching is a case-sensitive
 * substring test. JSON (`{...}`), space-delimited (`[...]`) and regex (`%...%`) patterns, and mixing `?` terms with
 * plain terms, are rejected with `InvalidParameterException` (not needed by tokenwatch).
 */
export function compileFilterPattern(pattern: string): (message: string) => boolean {
  const p = pattern.trim();
  if (p === '') return () => true;
  if (p.startsWith('{') || p.startsWith('[') || p.startsWith('%')) {
    throw new ApiError('InvalidParameterException', 'The fake supports term filter patterns only');
  }
  const terms: { kind: 'and' | 'or' | 'not'; text: string }[] = [];
  let i = 0;
  while (i < p.length) {
    while (p[i] === ' ') i++;
    if (i >= p.length) break;
    let kind: 'and' | 'or' | 'not' = 'and';
    if (p[i] === '?') {
      kind = 'or';
      i++;
    } else if (p[i] === '-') {
      kind = 'not';
      i++;
    }
    let text = '';
    if (p[i] === '"') {
      i++;
      let closed = false;
      while (i < p.length) {
        const c = p[i] as string;
        if (c === '\\' && i + 1 < p.length) {
          text += p[i + 1];
          i += 2;
          continue;
        }
        if (c === '"') {
          closed = true;
          i++;
          break;
        }
        text += c;
        i++;
      }
      if (!closed) throw new ApiError('InvalidParameterException', 'Invalid filter pattern: unterminated quote');
    } else {
      while (i < p.length && p[i] !== ' ') text += p[i++];
    }
    if (text === '') throw new ApiError('InvalidParameterException', 'Invalid filter pattern: empty term');
    terms.push({ kind, text });
  }
  const ors = terms.filter((t) => t.kind === 'or');
  if (ors.length > 0 && ors.length !== terms.length) {
    throw new ApiError('InvalidParameterException', 'The fake does not support mixing ?terms with other terms');
  }
  if (ors.length > 0) return (m) => ors.some((t) => m.includes(t.text));
  return (m) => terms.every((t) => (t.kind === 'not' ? !m.includes(t.text) : m.includes(t.text)));
}

// ---------------------------------------------------------------------------------------------------------------
// Logs Insights QL interpreter (subset)

/** A timestamp value (`@timestamp`, `fromMillis`): shown as `YYYY-MM-DD HH:MM:SS.mmm` in results. */
interface TimeValue {
  ts: number;
}
type Value = string | number | boolean | null | TimeValue;
type InsightsRecord = Map<string, Value>;

type Expr =
  | { k: 'num'; v: number }
  | { k: 'str'; v: string }
  | { k: 'field'; name: string }
  | { k: 'star' }
  | { k: 'call'; fn: string; args: Expr[] }
  | { k: 'bin'; op: string; a: Expr; b: Expr }
  | { k: 'not'; e: Expr }
  | { k: 'neg'; e: Expr }
  | { k: 'like'; e: Expr; re: RegExp | string };

interface NamedExpr {
  e: Expr;
  name: string;
}

type Command =
  | { c: 'fields'; items: NamedExpr[] }
  | { c: 'display'; names: string[] }
  | { c: 'filter'; e: Expr }
  | { c: 'parse'; field: string; re: RegExp; names: string[] }
  | { c: 'stats'; aggs: NamedExpr[]; by: NamedExpr[] }
  | { c: 'sort'; keys: { e: Expr; desc: boolean }[] }
  | { c: 'limit'; n: number };

type Program = Command[];

type Tok =
  | { t: 'id'; v: string; quoted: boolean }
  | { t: 'num'; v: number }
  | { t: 'str'; v: string }
  | { t: 're'; v: RegExp }
  | { t: 'op'; v: string }
  | { t: 'pipe' };

const AGGS = new Set(['count', 'count_distinct', 'min', 'max', 'sum', 'avg']);

function toRegExp(src: string): RegExp {
  let flags = '';
  let body = src;
  if (body.startsWith('(?i)')) {
    flags = 'i';
    body = body.slice(4);
  }
  if (body.includes('(?i)')) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, 'Inline (?i) is supported only at the start of a regex');
  try {
    return new RegExp(body, flags);
  } catch (err) {
    throw new TokenwatchError(ErrorCode.FakeRequestInvalid, `Invalid regex /${src}/: ${(err as Error).message}`);
  }
}

function tokenize(q: string): Tok[] {
  const toks: Tok[] = [];
  let i = 0;
  const regexAllowed = (): boolean => {
    const prev = toks[toks.length - 1];
    const prev2 = toks[toks.length - 2];
    if (!prev || prev.t === 'pipe') return true;
    if (prev.t === 'op') return prev.v !== ')';
    if (prev.t === 'id' && !prev.quoted && ['like', 'and', 'or', 'not'].includes(prev.v.toLowerCase())) return true;
    if (prev.t === 'id' && prev2?.t === 'id' && prev2.v.toLowerCase() === 'parse') return true;
    return false;
  };
  while (i < q.length) {
    const c = q[i] as string;
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    if (c === '#') {
      while (i < q.length && q[i] !== '\n') i++;
      continue;
    }
    if (c === '|') {
      toks.push({ t: 'pipe' });
      i++;
      continue;
    }
    if (c === '"' || c === "'") {
      let s = '';
      i++;
      while (i < q.length && q[i] !== c) {
        if (q[i] === '\\' && i + 1 < q.length) {
          s += q[i + 1];
          i += 2;
        } else s += q[i++];
      }
      if (i >= q.length) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, 'Unterminated string');
      i++;
      toks.push({ t: 'str', v: s });
      continue;
    }
    if (c === '`') {
      const end = q.indexOf('`', i + 1);
      if (end < 0) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, 'Unterminated backtick');
      toks.push({ t: 'id', v: q.slice(i + 1, end), quoted: true });
      i = end + 1;
      continue;
    }
    if (c === '/' && regexAllowed()) {
      let s = '';
      i++;
      while (i < q.length && q[i] !== '/') {
        if (q[i] === '\\' && i + 1 < q.length) {
          s += q[i] + (q[i + 1] as string);
          i += 2;
        } else s += q[i++];
      }
      if (i >= q.length) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, 'Unterminated regex');
      i++;
      toks.push({ t: 're', v: toRegExp(s) });
      continue;
    }
    const num = /^\d+(\.\d+)?/.exec(q.slice(i));
    if (num) {
      toks.push({ t: 'num', v: Number(num[0]) });
      i += num[0].length;
      continue;
    }
    const id = /^[@A-Za-z_][\w.@$]*/.exec(q.slice(i));
    if (id) {
      toks.push({ t: 'id', v: id[0], quoted: false });
      i += id[0].length;
      continue;
    }
    const op = /^(!=|<=|>=|=~|[=<>+\-*/%^(),])/.exec(q.slice(i));
    if (op) {
      toks.push({ t: 'op', v: op[0] });
      i += op[0].length;
      continue;
    }
    throw new TokenwatchError(ErrorCode.FakeRequestInvalid, `Unexpected character '${c}' at ${i}`);
  }
  return toks;
}

class Parser {
  private i = 0;
  constructor(private readonly toks: Tok[]) {}
  done(): boolean {
    return this.i >= this.toks.length;
  }
  peek(): Tok | undefined {
    return this.toks[this.i];
  }
  next(): Tok {
    const t = this.toks[this.i++];
    if (!t) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, 'Unexpected end of query');
    return t;
  }
  isKw(v: string): boolean {
    const t = this.peek();
    return !!t && t.t === 'id' && !t.quoted && t.v.toLowerCase() === v;
  }
  isOp(v: string): boolean {
    const t = this.peek();
    return !!t && t.t === 'op' && t.v === v;
  }
  expectOp(v: string): void {
    const t = this.next();
    if (t.t !== 'op' || t.v !== v) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, `Expected '${v}'`);
  }
  field(): string {
    const t = this.next();
    if (t.t !== 'id') throw new TokenwatchError(ErrorCode.FakeRequestInvalid, 'Expected a field name');
    return t.v;
  }
  expr(): Expr {
    let a = this.and();
    while (this.isKw('or')) {
      this.next();
      a = { k: 'bin', op: 'or', a, b: this.and() };
    }
    return a;
  }
  and(): Expr {
    let a = this.not();
    while (this.isKw('and')) {
      this.next();
      a = { k: 'bin', op: 'and', a, b: this.not() };
    }
    return a;
  }
  not(): Expr {
    if (this.isKw('not')) {
      this.next();
      return { k: 'not', e: this.not() };
    }
    return this.cmp();
  }
  cmp(): Expr {
    const a = this.add();
    const t = this.peek();
    if (t && t.t === 'op' && ['=', '!=', '<', '<=', '>', '>='].includes(t.v)) {
      this.next();
      return { k: 'bin', op: t.v, a, b: this.add() };
    }
    let negate = false;
    if (this.isKw('not') && this.toks[this.i + 1]?.t === 'id') {
      const n = this.toks[this.i + 1] as { v: string };
      if (n.v.toLowerCase() === 'like') {
        this.next();
        negate = true;
      }
    }
    if (this.isKw('like') || this.isOp('=~')) {
      this.next();
      const r = this.next();
      let like: Expr;
      if (r.t === 're') like = { k: 'like', e: a, re: r.v };
      else if (r.t === 'str') like = { k: 'like', e: a, re: r.v };
      else throw new TokenwatchError(ErrorCode.FakeRequestInvalid, 'Expected a regex or string after like');
      return negate ? { k: 'not', e: like } : like;
    }
    return a;
  }
  add(): Expr {
    let a = this.mul();
    for (;;) {
      const t = this.peek();
      if (t && t.t === 'op' && (t.v === '+' || t.v === '-')) {
        this.next();
        a = { k: 'bin', op: t.v, a, b: this.mul() };
      } else return a;
    }
  }
  mul(): Expr {
    let a = this.unary();
    for (;;) {
      const t = this.peek();
      if (t && t.t === 'op' && (t.v === '*' || t.v === '/' || t.v === '%' || t.v === '^')) {
        this.next();
        a = { k: 'bin', op: t.v, a, b: this.unary() };
      } else return a;
    }
  }
  unary(): Expr {
    if (this.isOp('-')) {
      this.next();
      return { k: 'neg', e: this.unary() };
    }
    return this.primary();
  }
  primary(): Expr {
    const t = this.next();
    if (t.t === 'num') return { k: 'num', v: t.v };
    if (t.t === 'str') return { k: 'str', v: t.v };
    if (t.t === 'op' && t.v === '(') {
      const e = this.expr();
      this.expectOp(')');
      return e;
    }
    if (t.t === 'op' && t.v === '*') return { k: 'star' };
    if (t.t === 'id') {
      if (!t.quoted && this.isOp('(')) {
        this.next();
        const args: Expr[] = [];
        if (!this.isOp(')')) {
          for (;;) {
            args.push(this.expr());
            if (this.isOp(',')) {
              this.next();
              continue;
            }
            break;
          }
        }
        this.expectOp(')');
        return { k: 'call', fn: t.v.toLowerCase(), args };
      }
      return { k: 'field', name: t.v };
    }
    throw new TokenwatchError(ErrorCode.FakeRequestInvalid, 'Unexpected token in expression');
  }
  named(): NamedExpr {
    const e = this.expr();
    let name = exprText(e);
    if (this.isKw('as')) {
      this.next();
      name = this.field();
    }
    return { e, name };
  }
  list<T>(item: () => T): T[] {
    const out = [item()];
    while (this.isOp(',')) {
      this.next();
      out.push(item());
    }
    return out;
  }
}

function exprText(e: Expr): string {
  switch (e.k) {
    case 'num':
      return String(e.v);
    case 'str':
      return JSON.stringify(e.v);
    case 'field':
      return e.name;
    case 'star':
      return '*';
    case 'call':
      return `${e.fn}(${e.args.map(exprText).join(', ')})`;
    case 'bin':
      return `${exprText(e.a)} ${e.op} ${exprText(e.b)}`;
    case 'not':
      return `not ${exprText(e.e)}`;
    case 'neg':
      return `-${exprText(e.e)}`;
    case 'like':
      return `${exprText(e.e)} like ${typeof e.re === 'string' ? JSON.stringify(e.re) : String(e.re)}`;
  }
}

/** Parses a Logs Insights query (the subset in this file's header). @throws Error with a message on bad syntax. */
function parseQuery(q: string): Program {
  const toks = tokenize(q);
  const parts: Tok[][] = [[]];
  for (const t of toks) {
    if (t.t === 'pipe') parts.push([]);
    else (parts[parts.length - 1] as Tok[]).push(t);
  }
  const program: Program = [];
  for (const part of parts) {
    if (part.length === 0) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, 'Empty command');
    const p = new Parser(part);
    const head = p.next();
    if (head.t !== 'id') throw new TokenwatchError(ErrorCode.FakeRequestInvalid, 'Expected a command');
    const cmd = head.v.toLowerCase();
    switch (cmd) {
      case 'fields':
        program.push({ c: 'fields', items: p.list(() => p.named()) });
        break;
      case 'display':
        program.push({ c: 'display', names: p.list(() => p.field()) });
        break;
      case 'filter':
        program.push({ c: 'filter', e: p.expr() });
        break;
      case 'parse': {
        const field = p.field();
        const pat = p.next();
        if (pat.t === 're') {
          const names = [...pat.v.source.matchAll(/\(\?<([A-Za-z_]\w*)>/g)].map((m) => m[1] as string);
          if (names.length === 0) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, 'parse regex needs named groups');
          program.push({ c: 'parse', field, re: pat.v, names });
        } else if (pat.t === 'str') {
          if (!p.isKw('as')) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, 'parse with a glob needs "as"');
          p.next();
          const names = p.list(() => p.field());
          const pieces = pat.v.split('*');
          if (pieces.length - 1 !== names.length) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, 'parse: number of * and names differ');
          const esc = (x: string): string => x.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
          // Each * captures lazily; a * at the very end captures the rest of the field.
          const src = pieces
            .map((piece, i) => {
              if (i >= names.length) return esc(piece);
              const last = i === names.length - 1 && pieces[i + 1] === '';
              return `${esc(piece)}(?<${names[i] as string}>.*${last ? '' : '?'})`;
            })
            .join('');
          program.push({ c: 'parse', field, re: new RegExp(src), names });
        } else throw new TokenwatchError(ErrorCode.FakeRequestInvalid, 'parse needs a regex or a glob string');
        break;
      }
      case 'stats': {
        const aggs = p.list(() => p.named());
        for (const a of aggs) {
          if (a.e.k !== 'call' || !AGGS.has(a.e.fn)) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, `stats: unsupported aggregate '${a.name}'`);
        }
        let by: NamedExpr[] = [];
        if (p.isKw('by')) {
          p.next();
          by = p.list(() => p.named());
        }
        program.push({ c: 'stats', aggs, by });
        break;
      }
      case 'sort': {
        const keys = p.list(() => {
          const e = p.expr();
          let desc = false;
          if (p.isKw('desc')) {
            p.next();
            desc = true;
          } else if (p.isKw('asc')) p.next();
          return { e, desc };
        });
        program.push({ c: 'sort', keys });
        break;
      }
      case 'limit': {
        const n = p.next();
        if (n.t !== 'num') throw new TokenwatchError(ErrorCode.FakeRequestInvalid, 'limit needs a number');
        program.push({ c: 'limit', n: n.v });
        break;
      }
      default:
        throw new TokenwatchError(ErrorCode.FakeRequestInvalid, `Unsupported command '${head.v}'`);
    }
    if (!p.done()) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, `Unexpected tokens after ${cmd}`);
  }
  return program;
}

function baseRecord(e: FakeStoredEvent, accountId: string): InsightsRecord {
  return new Map<string, Value>([
    ['@timestamp', { ts: e.timestamp }],
    ['@ingestionTime', { ts: e.ingestionTime }],
    ['@message', e.message],
    ['@logStream', e.stream],
    ['@log', `${accountId}:${e.group}`],
  ]);
}

function isTime(v: Value): v is TimeValue {
  return typeof v === 'object' && v !== null;
}

function num(v: Value): number | null {
  if (v === null) return null;
  if (typeof v === 'number') return v;
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (isTime(v)) return v.ts;
  const s = v.trim();
  return s !== '' && /^[-+]?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(s) ? Number(s) : null;
}

function str(v: Value): string | null {
  if (v === null) return null;
  if (isTime(v)) return formatTs(v.ts);
  return String(v);
}

function truthy(v: Value): boolean {
  return v !== null && v !== false && v !== 0 && v !== '';
}

function formatTs(ms: number): string {
  return new Date(ms).toISOString().replace('T', ' ').replace('Z', '');
}

function compareValues(a: Value, b: Value): number {
  const na = num(a);
  const nb = num(b);
  if (na !== null && nb !== null) return na - nb;
  const sa = str(a) ?? '';
  const sb = str(b) ?? '';
  return sa < sb ? -1 : sa > sb ? 1 : 0;
}

function evaluate(e: Expr, r: InsightsRecord): Value {
  switch (e.k) {
    case 'num':
      return e.v;
    case 'str':
      return e.v;
    case 'star':
      return true;
    case 'field':
      return r.get(e.name) ?? null;
    case 'neg': {
      const n = num(evaluate(e.e, r));
      return n === null ? null : -n;
    }
    case 'not':
      return !truthy(evaluate(e.e, r));
    case 'like': {
      const s = str(evaluate(e.e, r));
      if (s === null) return false;
      return typeof e.re === 'string' ? s.includes(e.re) : e.re.test(s);
    }
    case 'bin': {
      if (e.op === 'and') return truthy(evaluate(e.a, r)) && truthy(evaluate(e.b, r));
      if (e.op === 'or') return truthy(evaluate(e.a, r)) || truthy(evaluate(e.b, r));
      const a = evaluate(e.a, r);
      const b = evaluate(e.b, r);
      if (['=', '!=', '<', '<=', '>', '>='].includes(e.op)) {
        if (a === null || b === null) return e.op === '!=' ? a !== b : false;
        const c = compareValues(a, b);
        return e.op === '=' ? c === 0 : e.op === '!=' ? c !== 0 : e.op === '<' ? c < 0 : e.op === '<=' ? c <= 0 : e.op === '>' ? c > 0 : c >= 0;
      }
      const x = num(a);
      const y = num(b);
      if (x === null || y === null) return null;
      switch (e.op) {
        case '+':
          return x + y;
        case '-':
          return x - y;
        case '*':
          return x * y;
        case '/':
          return y === 0 ? null : x / y;
        case '%':
          return y === 0 ? null : x % y;
        case '^':
          return x ** y;
      }
      return null;
    }
    case 'call':
      return callFn(e.fn, e.args, r);
  }
}

function callFn(fn: string, args: Expr[], r: InsightsRecord): Value {
  const vals = (): Value[] => args.map((a) => evaluate(a, r));
  const one = (): Value => (args[0] ? evaluate(args[0], r) : null);
  switch (fn) {
    case 'tomillis': {
      const v = one();
      return v === null ? null : isTime(v) ? v.ts : num(v);
    }
    case 'frommillis': {
      const n = num(one());
      return n === null ? null : { ts: n };
    }
    case 'floor':
    case 'ceil':
    case 'abs': {
      const n = num(one());
      return n === null ? null : Math[fn](n);
    }
    case 'coalesce':
      return vals().find((v) => v !== null) ?? null;
    case 'ispresent':
      return one() !== null;
    case 'isempty': {
      const v = one();
      return v === null || v === '';
    }
    case 'strlen': {
      const s = str(one());
      return s === null ? null : [...s].length;
    }
    case 'concat': {
      const parts = vals().map(str);
      return parts.some((p) => p === null) ? null : parts.join('');
    }
    case 'tolower':
    case 'toupper': {
      const s = str(one());
      return s === null ? null : fn === 'tolower' ? s.toLowerCase() : s.toUpperCase();
    }
    case 'greatest':
    case 'least': {
      const ns = vals()
        .map(num)
        .filter((n): n is number => n !== null);
      return ns.length === 0 ? null : fn === 'greatest' ? Math.max(...ns) : Math.min(...ns);
    }
    default:
      throw new TokenwatchError(ErrorCode.FakeRequestInvalid, `Unsupported function '${fn}'`);
  }
}

interface AggState {
  count: number;
  distinct?: Set<string>;
  best: Value;
  sum: number;
  nums: number;
}

function runProgram(program: Program, input: InsightsRecord[], maxRows: number): { rows: ResultRow[]; matched: number } {
  let records = input;
  let outFields: string[] | undefined;
  let statsDone = false;
  let matched = 0;
  for (const cmd of program) {
    switch (cmd.c) {
      case 'fields':
        for (const r of records) {
          for (const it of cmd.items) {
            if (it.e.k === 'field' && it.e.name === it.name) continue;
            r.set(it.name, evaluate(it.e, r));
          }
        }
        outFields = [...new Set([...(outFields ?? []), ...cmd.items.map((i) => i.name)])];
        break;
      case 'display':
        outFields = cmd.names;
        break;
      case 'filter':
        records = records.filter((r) => truthy(evaluate(cmd.e, r)));
        break;
      case 'parse':
        for (const r of records) {
          const s = str(r.get(cmd.field) ?? null);
          const m = s === null ? null : cmd.re.exec(s);
          if (!m) continue;
          for (const n of cmd.names) {
            const v = m.groups?.[n];
            if (v !== undefined) r.set(n, v);
          }
        }
        break;
      case 'stats': {
        matched = records.length;
        const groups = new Map<string, { keys: Value[]; aggs: AggState[] }>();
        for (const r of records) {
          const keys = cmd.by.map((b) => evaluate(b.e, r));
          const k = JSON.stringify(keys);
          let g = groups.get(k);
          if (!g) {
            g = { keys, aggs: cmd.aggs.map(() => ({ count: 0, best: null, sum: 0, nums: 0 })) };
            groups.set(k, g);
          }
          cmd.aggs.forEach((a, idx) => {
            const call = a.e as { k: 'call'; fn: string; args: Expr[] };
            const st = g.aggs[idx] as AggState;
            const arg = call.args[0];
            const v = !arg || arg.k === 'star' ? true : evaluate(arg, r);
            if (v === null) return;
            st.count++;
            if (call.fn === 'count_distinct') (st.distinct ??= new Set()).add(JSON.stringify(v));
            if (call.fn === 'min' && (st.best === null || compareValues(v, st.best) < 0)) st.best = v;
            if (call.fn === 'max' && (st.best === null || compareValues(v, st.best) > 0)) st.best = v;
            const n = num(v);
            if (n !== null) {
              st.sum += n;
              st.nums++;
            }
          });
        }
        records = [...groups.values()].map((g) => {
          const rec: InsightsRecord = new Map();
          cmd.by.forEach((b, i) => {
            rec.set(b.name, g.keys[i] ?? null);
          });
          cmd.aggs.forEach((a, i) => {
            const call = a.e as { k: 'call'; fn: string };
            const st = g.aggs[i] as AggState;
            const v: Value =
              call.fn === 'count'
                ? st.count
                : call.fn === 'count_distinct'
                  ? (st.distinct?.size ?? 0)
                  : call.fn === 'sum'
                    ? st.nums
                      ? st.sum
                      : null
                    : call.fn === 'avg'
                      ? st.nums
                        ? st.sum / st.nums
                        : null
                      : st.best;
            rec.set(a.name, v);
          });
          return rec;
        });
        outFields = [...cmd.by.map((b) => b.name), ...cmd.aggs.map((a) => a.name)];
        statsDone = true;
        break;
      }
      case 'sort':
        records = [...records].sort((x, y) => {
          for (const k of cmd.keys) {
            const a = evaluate(k.e, x);
            const b = evaluate(k.e, y);
            const c = a === null ? (b === null ? 0 : 1) : b === null ? -1 : compareValues(a, b);
            if (c !== 0) return k.desc ? -c : c;
          }
          return 0;
        });
        break;
      case 'limit':
        records = records.slice(0, cmd.n);
        break;
    }
  }
  if (!statsDone) matched = records.length;
  const fields = outFields ?? ['@timestamp', '@message'];
  const rows = records.slice(0, maxRows).map((r) => {
    const row: ResultRow = [];
    for (const f of fields) {
      const s = str(r.get(f) ?? null);
      if (s !== null) row.push({ field: f, value: s });
    }
    return row;
  });
  return { rows, matched };
}

/** Runs a Logs Insights query over events directly (for unit tests of the interpreter). Values are result strings. */
export function runInsightsQuery(
  query: string,
  events: { timestamp: number; message: string; stream?: string; group?: string; ingestionTime?: number }[],
): Record<string, string>[] {
  const program = parseQuery(query);
  const records = events.map((e, i) =>
    baseRecord(
      {
        group: e.group ?? 'g',
        stream: e.stream ?? 's',
        timestamp: e.timestamp,
        message: e.message,
        ingestionTime: e.ingestionTime ?? e.timestamp,
        eventId: String(i),
        seq: i,
      },
      '123456789012',
    ),
  );
  return runProgram(program, records, 100_000).rows.map((row) => Object.fromEntries(row.map((c) => [c.field, c.value])));
}
