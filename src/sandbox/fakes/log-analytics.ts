/**
 * A loopback fake of the Azure Monitor Logs Query API (https://learn.microsoft.com/azure/azure-monitor/logs/api/request-format),
 * over HTTPS with a caller-given certificate (`@azure/core-rest-pipeline` refuses bearer tokens over plain HTTP):
 * `POST /v1/workspaces/{workspaceId}/query` with body `{"query","timespan":"<start>/<end>"}` and
 * `Authorization: Bearer <token>` → `{"tables":[{"name":"PrimaryResult","columns":[{name,type}],"rows":[[…]]}]}`
 * (dynamic cells as JSON text, datetimes as ISO strings, as the service sends them), or with an `error` next to the
 * tables when the answer was cut at `maxRows` (the SDK then reports `PartialFailure`); 429 with `Retry-After` when
 * told to throttle; 401 without a bearer token; 403 for a workspace the token may not read.
 *
 * It does not run KQL: it reads what tokenwatch's query (src/sources/log-analytics.ts) asks — the window (the body's
 * `timespan`), the table (`AKSAudit` or `AzureDiagnostics`) and the `_ResourceId in~ (…)` list — and answers with the
 * rows it holds that match the same token-use terms, plus the per-cluster count rows the query asks for, as the
 * CloudWatch fakes answer their query subset. Rows are visible from when they are {@link FakeLogAnalytics.add}ed
 * (a row added late is a row ingested late).
 */
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';

/** A row held by the fake: the table's columns (dynamic ones as objects), `Type` naming its table. */
export interface FakeLogRow {
  /** `AKSAudit`, `AKSAuditAdmin` or `AzureDiagnostics`. */
  Type: 'AKSAudit' | 'AKSAuditAdmin' | 'AzureDiagnostics';
  /** ISO-8601 UTC. */
  TimeGenerated: string;
  _ResourceId: string;
  [column: string]: unknown;
}

/** One request the fake received. */
export interface FakeLogQuery {
  workspaceId: string;
  query: string;
  timespan: string;
  /** The answer's status code. */
  status: number;
  /** Rows answered (count rows included). */
  rows: number;
  /** When the request arrived, wall-clock epoch ms. */
  receivedAt: number;
}

/** A running fake. */
export interface FakeLogAnalytics {
  /** `https://127.0.0.1:<port>/v1` (the SDK's `endpoint`). */
  endpoint: string;
  /** Every query received, in order. */
  queries: FakeLogQuery[];
  /** The most queries that were being answered at once. */
  maxInFlight(): number;
  /** Adds rows to a workspace (visible to the next query). */
  add(workspaceId: string, rows: FakeLogRow[]): void;
  /** Answers the next `n` queries 429 with `Retry-After: <retryAfterSeconds>`. */
  throttle(n: number, retryAfterSeconds: number): void;
  /** Answers queries of `workspaceId` 403 (the identity has no read role) until called with `false`. */
  forbid(workspaceId: string, forbidden?: boolean): void;
  close(): Promise<void>;
}

/** Options of {@link startFakeLogAnalytics}. */
export interface FakeLogAnalyticsOptions {
  /** PEM certificate and key for 127.0.0.1. */
  cert: Buffer | string;
  key: Buffer | string;
  /** Bearer tokens accepted; default any non-empty token. */
  acceptToken?: (token: string) => boolean;
  /** Most token-use rows in one answer; more → the answer is cut with a `PartialError`. Default 500,000 (the service's limit). */
  maxRows?: number;
  /** Each query is answered this long after it arrived (a query that runs), ms. Default 0. */
  answerDelayMs?: number;
}

const DATETIME = new Set(['TimeGenerated', 'RequestReceivedTime', 'StageReceivedTime']);
const DYNAMIC = new Set(['User', 'SourceIps', 'ResponseStatus', 'Annotations', 'ObjectRef']);
const AKS_COLUMNS = ['TimeGenerated', '_ResourceId', 'AuditId', 'Stage', 'Level', 'Verb', 'RequestUri', 'User', 'SourceIps', 'UserAgent', 'ResponseStatus', 'Annotations', 'ObjectRef', 'RequestReceivedTime', 'StageReceivedTime', 'Type'];
const DIAG_COLUMNS = ['TimeGenerated', '_ResourceId', 'Category', 'log_s', 'Type'];

function isTokenUse(text: string): boolean {
  return text.includes('authentication.k8s.io/stale-token') || text.includes('authentication.k8s.io/legacy-token') || /"code":\s*401\b/.test(text);
}

function typeOf(col: string): string {
  if (DATETIME.has(col)) return 'datetime';
  if (DYNAMIC.has(col)) return 'dynamic';
  if (col === 'Rows') return 'long';
  return 'string';
}

function cell(col: string, v: unknown): unknown {
  if (v === undefined || v === null) return null;
  if (DYNAMIC.has(col)) return typeof v === 'string' ? v : JSON.stringify(v);
  return v;
}

/** Starts the fake on 127.0.0.1, an ephemeral port. */
export async function startFakeLogAnalytics(opts: FakeLogAnalyticsOptions): Promise<FakeLogAnalytics> {
  const rows = new Map<string, FakeLogRow[]>();
  const queries: FakeLogQuery[] = [];
  let throttled = 0;
  let retryAfter = 1;
  const forbidden = new Set<string>();
  const maxRows = opts.maxRows ?? 500_000;
  let inFlight = 0;
  let peak = 0;

  const answer = (workspaceId: string, query: string, timespan: string): { status: number; body: unknown; headers?: Record<string, string>; rows: number } => {
    const [from, to] = timespan.split('/').map((t) => Date.parse(t));
    if (from === undefined || to === undefined || !Number.isFinite(from) || !Number.isFinite(to)) {
      return { status: 400, body: { error: { code: 'BadArgumentError', message: `timespan ${timespan} is not start/end` } }, rows: 0 };
    }
    const list = /_ResourceId in~ \(([^)]*)\)/.exec(query)?.[1] ?? '';
    const ids = new Set([...list.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!.toLowerCase()));
    const diag = /^\(AzureDiagnostics/m.test(query);
    const inWindow = (r: FakeLogRow) => {
      const t = Date.parse(r.TimeGenerated);
      return t >= from && t < to && ids.has(r._ResourceId.toLowerCase());
    };
    const all = (rows.get(workspaceId.toLowerCase()) ?? []).filter(inWindow);
    const base = diag ? DIAG_COLUMNS : AKS_COLUMNS;
    const columns = [...base, ...(base.includes('Category') ? [] : ['Category']), 'Rows'];
    const matching = all
      .filter((r) => (diag ? r.Type === 'AzureDiagnostics' && r.Category === 'kube-audit' && isTokenUse(String(r.log_s ?? '')) : r.Type === 'AKSAudit' && isTokenUse(JSON.stringify([r.Annotations, r.ResponseStatus]))))
      .sort((a, b) => Date.parse(a.TimeGenerated) - Date.parse(b.TimeGenerated));
    const cut = matching.length > maxRows;
    const objects: Array<Record<string, unknown>> = (cut ? matching.slice(0, maxRows) : matching).map((r) => ({ ...r, Category: diag ? r.Category : undefined }));
    // Count rows: per cluster and category, every row of the window (of the tables the query names).
    const counts = new Map<string, number>();
    for (const r of all) {
      if (diag !== (r.Type === 'AzureDiagnostics')) continue;
      const category = r.Type === 'AKSAudit' ? 'kube-audit' : r.Type === 'AKSAuditAdmin' ? 'kube-audit-admin' : String(r.Category ?? '');
      const k = JSON.stringify([r._ResourceId, category]);
      counts.set(k, (counts.get(k) ?? 0) + 1);
    }
    for (const [k, n] of counts) {
      const [rid, category] = JSON.parse(k) as [string, string];
      objects.push({ _ResourceId: rid, Category: category, Rows: n, Type: 'TokenwatchCount' });
    }
    const out = objects.map((o) => columns.map((c) => cell(c, o[c])));
    const allColumns = columns.map((name) => ({ name, type: typeOf(name) }));
    const body: Record<string, unknown> = { tables: [{ name: 'PrimaryResult', columns: allColumns, rows: out }] };
    if (cut) body.error = { code: 'PartialError', message: 'There were some errors when processing your query.', details: [{ code: 'EngineError', message: `Query result set has exceeded the internal record count limit ${maxRows}` }] };
    return { status: 200, body, rows: out.length };
  };

  const server: Server = createServer({ cert: opts.cert, key: opts.key }, (req, res) => {
    const receivedAt = Date.now();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
        res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
        res.end(JSON.stringify(body));
      };
      const m = /^\/v1\/workspaces\/([^/]+)\/query$/.exec(req.url ?? '');
      if (req.method !== 'POST' || !m) return send(404, { error: { code: 'PathNotFoundError', message: `no route ${req.method} ${req.url}` } });
      const workspaceId = decodeURIComponent(m[1]!);
      let body: { query?: string; timespan?: string };
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof body;
      } catch {
        return send(400, { error: { code: 'BadArgumentError', message: 'body is not JSON' } });
      }
      const record = (status: number, n = 0) => queries.push({ workspaceId, query: body.query ?? '', timespan: body.timespan ?? '', status, rows: n, receivedAt });
      const auth = req.headers.authorization ?? '';
      const token = auth.startsWith('Bearer ') ? auth.slice(7) : '';
      if (!token || (opts.acceptToken && !opts.acceptToken(token))) {
        record(401);
        return send(401, { error: { code: 'AuthorizationRequiredError', message: 'Valid authentication was not provided' } });
      }
      if (forbidden.has(workspaceId.toLowerCase())) {
        record(403);
        return send(403, { error: { code: 'InsufficientAccessError', message: 'The provided credentials have insufficient access to perform the requested operation' } });
      }
      if (throttled > 0) {
        throttled--;
        record(429);
        return send(429, { error: { code: 'TooManyRequests', message: 'Too many requests' } }, { 'retry-after': String(retryAfter) });
      }
      const a = answer(workspaceId, body.query ?? '', body.timespan ?? '');
      record(a.status, a.rows);
      inFlight++;
      peak = Math.max(peak, inFlight);
      setTimeout(() => {
        inFlight--;
        send(a.status, a.body, a.headers);
      }, opts.answerDelayMs ?? 0);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    endpoint: `https://127.0.0.1:${port}/v1`,
    queries,
    maxInFlight: () => peak,
    add(workspaceId, r) {
      const k = workspaceId.toLowerCase();
      rows.set(k, [...(rows.get(k) ?? []), ...r]);
    },
    throttle(n, seconds) {
      throttled = n;
      retryAfter = seconds;
    },
    forbid(workspaceId, f = true) {
      if (f) forbidden.add(workspaceId.toLowerCase());
      else forbidden.delete(workspaceId.toLowerCase());
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * The `AKSAudit` row of an audit.k8s.io/v1 event as the AKS diagnostic setting writes it (column names of
 * https://learn.microsoft.com/azure/azure-monitor/reference/tables/aksaudit), for seeding the fake; `TimeGenerated`
 * is the event's `stageTimestamp` unless given.
 */
export function aksAuditRow(event: Record<string, unknown>, resourceId: string, o: { type?: 'AKSAudit' | 'AKSAuditAdmin'; timeGenerated?: string } = {}): FakeLogRow {
  const time = o.timeGenerated ?? String(event.stageTimestamp ?? event.requestReceivedTimestamp ?? '');
  const row: FakeLogRow = { Type: o.type ?? 'AKSAudit', TimeGenerated: time, _ResourceId: resourceId };
  const map: Array<[string, string]> = [
    ['auditID', 'AuditId'],
    ['stage', 'Stage'],
    ['level', 'Level'],
    ['verb', 'Verb'],
    ['requestURI', 'RequestUri'],
    ['user', 'User'],
    ['sourceIPs', 'SourceIps'],
    ['userAgent', 'UserAgent'],
    ['responseStatus', 'ResponseStatus'],
    ['annotations', 'Annotations'],
    ['objectRef', 'ObjectRef'],
    ['requestReceivedTimestamp', 'RequestReceivedTime'],
    ['stageTimestamp', 'StageReceivedTime'],
  ];
  for (const [from, to] of map) if (event[from] !== undefined) row[to] = event[from];
  return row;
}
