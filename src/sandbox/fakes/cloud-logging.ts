/**
 * A loopback Cloud Logging API: `POST /v2/entries:list` over REST
 * (https://cloud.google.com/logging/docs/reference/v2/rest/v2/entries/list), the subset the GKE audit source
 * (src/sources/cloud-logging.ts) uses, for tests and the sandbox.
 *
 * - Auth: `Authorization: Bearer <token>` must be one of `tokens` (else 401 `UNAUTHENTICATED`, Google's JSON error);
 *   a project of `forbiddenProjects` answers 403 `PERMISSION_DENIED`.
 * - Body: `resourceNames` (`projects/P`), `filter`, `orderBy` (`timestamp asc` | `timestamp desc`), `pageSize`
 *   (1 to 1,000, default 50), `pageToken`.
 * - Filter: the fake does not implement the Logging query language. It understands the clauses the source sends,
 *   joined by `AND`: `logName=("…" OR "…")`, `resource.type="…"`, `resource.labels.cluster_name=("…" OR "…")`,
 *   `(labels."<key>":* OR … OR protoPayload.status.code=<n>)` and `timestamp>="<RFC 3339>"` / `timestamp<"…"`; a
 *   filter with anything else is refused with 400 `INVALID_ARGUMENT`, so a change of the source's filter shows.
 * - Paging: `nextPageToken` while entries are left; {@link FakeCloudLoggingOptions.emptyPages} empty pages that still
 *   carry a token come first (the API does that when "the search … did not have time to search all the possible log
 *   entries", entries.list reference).
 * - Quota: {@link FakeCloudLogging.throttle} answers the next N requests 429 `RESOURCE_EXHAUSTED` with an `ErrorInfo`
 *   naming `ReadRequestsPerMinutePerProject`, as Cloud Logging does (no `Retry-After`).
 * - Late ingestion: an entry added with `visibleAt` is not returned before the fake's clock reaches it.
 * Every request is recorded ({@link FakeCloudLogging.requests}).
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ErrorCode, TokenwatchError } from '../../errors.js';

/** A LogEntry as the REST API returns it (JSON); only the fields the fake reads are typed. */
export interface FakeLogEntry {
  insertId: string;
  logName: string;
  timestamp: string;
  resource: { type: string; labels: Record<string, string> };
  labels?: Record<string, string>;
  protoPayload?: Record<string, unknown>;
  [k: string]: unknown;
}

/** One request the fake answered. */
export interface FakeLoggingRequest {
  resourceNames: string[];
  filter: string;
  orderBy?: string;
  pageSize?: number;
  pageToken?: string;
  /** HTTP status answered. */
  status: number;
  /** Entries answered. */
  entries: number;
  /** When the request arrived, epoch ms (wall clock). */
  receivedAt: number;
}

/** Options of {@link startFakeCloudLogging}. */
export interface FakeCloudLoggingOptions {
  /** Bearer tokens accepted. Default `['ya29.fake-token']` (the metadata fake's default). */
  tokens?: string[];
  /** The fake's clock for {@link FakeCloudLogging.add}'s `visibleAt`, epoch ms. Default `Date.now`. */
  now?: () => number;
  /** Empty pages (no entries, a `nextPageToken`) answered before the first entries of every query. Default 0. */
  emptyPages?: number;
  /** Projects the caller may not read: 403 `PERMISSION_DENIED` (a reader without the needed role). */
  forbiddenProjects?: string[];
}

/** A running fake. */
export interface FakeCloudLogging {
  /** Base URL, `http://127.0.0.1:<port>` (the source's `endpoint`). */
  url: string;
  /** Adds entries; each is returned once the fake's clock reaches `visibleAt` (default: at once). */
  add(entries: FakeLogEntry[], opts?: { visibleAt?: number }): void;
  /** Answers the next `n` requests 429 RESOURCE_EXHAUSTED. */
  throttle(n: number): void;
  /** From now on answers queries of `project` 403 `PERMISSION_DENIED` (`on` false: reads them again). */
  forbid(project: string, on?: boolean): void;
  /** Requests answered so far. */
  requests(): FakeLoggingRequest[];
  close(): Promise<void>;
}

interface Query {
  logNames?: Set<string>;
  resourceType?: string;
  clusters?: Set<string>;
  labelKeys?: string[];
  statusCodes?: number[];
  from?: number;
  to?: number;
}

const QUOTED = /"((?:[^"\\]|\\.)*)"/g;
const quotedValues = (s: string): string[] => [...s.matchAll(QUOTED)].map((m) => JSON.parse(`"${m[1] as string}"`) as string);

/**
 * Parses the clauses the source sends (see the module doc).
 * @throws Error naming the first clause not understood
 */
export function parseFakeFilter(filter: string): Query {
  const q: Query = {};
  const clauses: Array<[RegExp, (m: RegExpExecArray) => void]> = [
    [/^logName=\(([^)]*)\)$|^logName=("[^"]*")$/, (m) => (q.logNames = new Set(quotedValues(m[1] ?? m[2] ?? '')))],
    [/^resource\.type="([^"]*)"$/, (m) => (q.resourceType = m[1] as string)],
    [/^resource\.labels\.cluster_name=\(([^)]*)\)$|^resource\.labels\.cluster_name=("[^"]*")$/, (m) => (q.clusters = new Set(quotedValues(m[1] ?? m[2] ?? '')))],
    [/^timestamp>="([^"]+)"$/, (m) => (q.from = Date.parse(m[1] as string))],
    [/^timestamp<"([^"]+)"$/, (m) => (q.to = Date.parse(m[1] as string))],
    [
      /^\(((?:labels\."[^"]+":\*|protoPayload\.status\.code=\d+)(?: OR (?:labels\."[^"]+":\*|protoPayload\.status\.code=\d+))*)\)$/,
      (m) => {
        const parts = (m[1] as string).split(' OR ');
        q.labelKeys = parts.filter((p) => p.startsWith('labels.')).map((p) => quotedValues(p)[0] as string);
        q.statusCodes = parts.filter((p) => p.startsWith('protoPayload.')).map((p) => Number(p.slice(p.indexOf('=') + 1)));
      },
    ],
  ];
  for (const raw of filter.split(/\s+AND\s+/)) {
    const clause = raw.trim();
    const hit = clauses.find(([re]) => re.test(clause));
    if (!hit) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, `fake Cloud Logging: unsupported filter clause: ${clause}`);
    hit[1](hit[0].exec(clause) as RegExpExecArray);
  }
  return q;
}

function matches(q: Query, e: FakeLogEntry): boolean {
  if (q.logNames && !q.logNames.has(e.logName)) return false;
  if (q.resourceType !== undefined && e.resource.type !== q.resourceType) return false;
  if (q.clusters && !q.clusters.has(e.resource.labels['cluster_name'] ?? '')) return false;
  const t = Date.parse(e.timestamp);
  if (q.from !== undefined && t < q.from) return false;
  if (q.to !== undefined && t >= q.to) return false;
  if (q.labelKeys || q.statusCodes) {
    const code = (e.protoPayload?.['status'] as { code?: number } | undefined)?.code;
    const byLabel = (q.labelKeys ?? []).some((k) => e.labels?.[k] !== undefined);
    if (!byLabel && !(code !== undefined && (q.statusCodes ?? []).includes(code))) return false;
  }
  return true;
}

function googleError(code: number, status: string, message: string, details?: unknown[]): string {
  return JSON.stringify({ error: { code, message, status, ...(details ? { details } : {}) } });
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Starts the fake on 127.0.0.1 (port `port`, default any free one). */
export async function startFakeCloudLogging(opts: FakeCloudLoggingOptions = {}, port = 0): Promise<FakeCloudLogging> {
  const tokens = new Set(opts.tokens ?? ['ya29.fake-token']);
  const now = opts.now ?? Date.now;
  const stored: Array<{ entry: FakeLogEntry; visibleAt: number }> = [];
  const log: FakeLoggingRequest[] = [];
  let throttled = 0;
  const forbidden = new Set(opts.forbiddenProjects ?? []);

  const server: Server = createServer((req, res) => {
    const receivedAt = Date.now();
    void (async () => {
      const text = await readBody(req);
      const answer = (status: number, body: string, rec?: Omit<FakeLoggingRequest, 'status' | 'entries' | 'receivedAt'>, entries = 0): void => {
        if (rec) log.push({ ...rec, status, entries, receivedAt });
        res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8' }).end(body);
      };
      if (req.method !== 'POST' || req.url !== '/v2/entries:list') return answer(404, googleError(404, 'NOT_FOUND', `no route ${req.method} ${req.url}`));
      let body: { resourceNames?: string[]; filter?: string; orderBy?: string; pageSize?: number; pageToken?: string };
      try {
        body = JSON.parse(text) as typeof body;
      } catch {
        return answer(400, googleError(400, 'INVALID_ARGUMENT', 'Invalid JSON payload received.'));
      }
      const rec = {
        resourceNames: body.resourceNames ?? [],
        filter: body.filter ?? '',
        ...(body.orderBy !== undefined && { orderBy: body.orderBy }),
        ...(body.pageSize !== undefined && { pageSize: body.pageSize }),
        ...(body.pageToken !== undefined && { pageToken: body.pageToken }),
      };
      const auth = req.headers.authorization ?? '';
      if (!auth.startsWith('Bearer ') || !tokens.has(auth.slice(7))) {
        return answer(401, googleError(401, 'UNAUTHENTICATED', 'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.'), rec);
      }
      if (throttled > 0) {
        throttled--;
        const project = (rec.resourceNames[0] ?? 'projects/unknown').replace(/^projects\//, '');
        return answer(
          429,
          googleError(429, 'RESOURCE_EXHAUSTED', "Quota exceeded for quota metric 'Read requests' and limit 'Read requests per minute' of service 'logging.googleapis.com'.", [
            { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'RATE_LIMIT_EXCEEDED', domain: 'googleapis.com', metadata: { service: 'logging.googleapis.com', consumer: `projects/${project}`, quota_limit: 'ReadRequestsPerMinutePerProject', quota_limit_value: '60' } },
          ]),
          rec,
        );
      }
      const denied = rec.resourceNames.find((r) => forbidden.has(r.replace(/^projects\//, '')));
      if (denied) return answer(403, googleError(403, 'PERMISSION_DENIED', `Permission denied for all log views of ${denied}`), rec);
      const pageSize = rec.pageSize ?? 50;
      if (!rec.resourceNames.length || rec.resourceNames.some((r) => !/^projects\/[^/]+$/.test(r)) || pageSize < 1 || pageSize > 1000) {
        return answer(400, googleError(400, 'INVALID_ARGUMENT', 'resourceNames must name projects/P; pageSize must be 1 to 1000'), rec);
      }
      let q: Query;
      try {
        q = parseFakeFilter(rec.filter);
      } catch (err) {
        return answer(400, googleError(400, 'INVALID_ARGUMENT', `Invalid filter: ${(err as Error).message}`), rec);
      }
      const projects = new Set(rec.resourceNames.map((r) => r.slice('projects/'.length)));
      const t = now();
      const hits = stored
        .filter((s) => s.visibleAt <= t && projects.has(s.entry.logName.split('/')[1] ?? '') && matches(q, s.entry))
        .map((s) => s.entry)
        .sort((a, b) => Date.parse(a.timestamp) - Date.parse(b.timestamp) || a.insertId.localeCompare(b.insertId));
      if (rec.orderBy === 'timestamp desc') hits.reverse();
      // Page tokens: `<step>` counts pages; the first `emptyPages` steps are empty.
      const step = rec.pageToken ? Number(Buffer.from(rec.pageToken, 'base64url').toString('utf8')) : 0;
      if (!Number.isInteger(step) || step < 0) return answer(400, googleError(400, 'INVALID_ARGUMENT', 'invalid page token'), rec);
      const empty = opts.emptyPages ?? 0;
      const token = (n: number) => Buffer.from(String(n), 'utf8').toString('base64url');
      if (step < empty) return answer(200, JSON.stringify({ nextPageToken: token(step + 1) }), rec);
      const offset = (step - empty) * pageSize;
      const page = hits.slice(offset, offset + pageSize);
      const more = offset + pageSize < hits.length;
      return answer(200, JSON.stringify({ ...(page.length ? { entries: page } : {}), ...(more ? { nextPageToken: token(step + 1) } : {}) }), rec, page.length);
    })().catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(googleError(500, 'INTERNAL', (err as Error).message));
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    add(entries, o = {}) {
      for (const entry of entries) stored.push({ entry, visibleAt: o.visibleAt ?? Number.NEGATIVE_INFINITY });
    },
    throttle(n) {
      throttled += n;
    },
    forbid(project, on = true) {
      if (on) forbidden.add(project);
      else forbidden.delete(project);
    },
    requests: () => log.map((r) => ({ ...r })),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Options of {@link gkeAuditEntry}. */
export interface GkeAuditEntryOptions {
  project: string;
  cluster: string;
  /** Default `us-central1`. */
  location?: string;
  insertId: string;
  /** Epoch ms. */
  time: number;
  /** `data_access` (reads, default) or `activity` (writes). */
  log?: 'data_access' | 'activity';
  /** Kubernetes method, e.g. `io.k8s.core.v1.pods.list`. Default `io.k8s.core.v1.pods.get`. */
  method?: string;
  /** `system:serviceaccount:ns:name`; absent for a token-less 401. */
  principal?: string;
  callerIp?: string;
  userAgent?: string;
  /** Entry labels: the audit annotations (e.g. `authentication.k8s.io/stale-token`). */
  labels?: Record<string, string>;
  /** google.rpc code: 16 (UNAUTHENTICATED) for a 401. Absent = OK. */
  rpcCode?: number;
  /** `operation.id`: the Kubernetes audit ID when GKE sets it. */
  operationId?: string;
}

/**
 * A GKE Cloud Audit Logs entry in the shape the REST API returns (`protoPayload` an `AuditLog` with `@type`,
 * `resource.type` `k8s_cluster`, annotations as entry labels; https://cloud.google.com/kubernetes-engine/docs/how-to/audit-logging).
 */
export function gkeAuditEntry(o: GkeAuditEntryOptions): FakeLogEntry {
  const iso = new Date(o.time).toISOString();
  return {
    insertId: o.insertId,
    logName: `projects/${o.project}/logs/cloudaudit.googleapis.com%2F${o.log ?? 'data_access'}`,
    timestamp: iso,
    receiveTimestamp: iso,
    resource: { type: 'k8s_cluster', labels: { project_id: o.project, location: o.location ?? 'us-central1', cluster_name: o.cluster } },
    severity: 'INFO',
    ...(o.labels ? { labels: o.labels } : {}),
    ...(o.operationId ? { operation: { id: o.operationId, producer: 'k8s.io', first: true, last: true } } : {}),
    protoPayload: {
      '@type': 'type.googleapis.com/google.cloud.audit.AuditLog',
      serviceName: 'k8s.io',
      methodName: o.method ?? 'io.k8s.core.v1.pods.get',
      resourceName: 'core/v1/namespaces/kube-system/pods',
      authenticationInfo: o.principal ? { principalEmail: o.principal } : {},
      requestMetadata: { ...(o.callerIp ? { callerIp: o.callerIp } : {}), ...(o.userAgent ? { callerSuppliedUserAgent: o.userAgent } : {}) },
      ...(o.rpcCode !== undefined ? { status: { code: o.rpcCode, message: o.rpcCode === 16 ? 'UNAUTHENTICATED' : '' } } : { status: {} }),
    },
  };
}

/** Kubernetes verbs GKE logs as Data Access (reads); every other verb goes to Admin Activity. */
const READ_VERBS = new Set(['get', 'list', 'watch']);

/**
 * One audit event (audit.k8s.io/v1 JSON) as the GKE Cloud Audit Logs entry GKE would write for it, so the sandbox can
 * feed the same traffic to a GKE cluster: reads to `data_access`, writes to `activity`; annotations as entry labels,
 * the user as `principalEmail`, the last source IP as `callerIp`, a 401 as `status.code` 16 (UNAUTHENTICATED), the audit
 * ID as `operation.id` (the inverse of `gkeEntryToEvent`, src/audit/shapes.ts). GKE writes one entry per request:
 * `RequestReceived` events give none.
 * @returns the entry, or undefined for a `RequestReceived` event or text that is not an event
 */
export function auditEventToGkeEntry(text: string, o: { project: string; cluster: string; location?: string }): FakeLogEntry | undefined {
  let e: Record<string, unknown>;
  try {
    e = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  const auditID = typeof e['auditID'] === 'string' ? e['auditID'] : undefined;
  const time = Date.parse(String(e['requestReceivedTimestamp'] ?? e['stageTimestamp'] ?? ''));
  if (!auditID || e['stage'] === 'RequestReceived' || !Number.isFinite(time)) return undefined;
  const verb = typeof e['verb'] === 'string' ? e['verb'] : 'get';
  const ref = (e['objectRef'] ?? {}) as { resource?: string; apiGroup?: string; apiVersion?: string };
  const user = (e['user'] ?? {}) as { username?: string };
  const ips = Array.isArray(e['sourceIPs']) ? (e['sourceIPs'] as string[]) : [];
  const code = ((e['responseStatus'] ?? {}) as { code?: number }).code;
  return gkeAuditEntry({
    project: o.project,
    cluster: o.cluster,
    ...(o.location !== undefined && { location: o.location }),
    insertId: auditID,
    operationId: auditID,
    time,
    log: READ_VERBS.has(verb) ? 'data_access' : 'activity',
    method: `io.k8s.${ref.apiGroup || 'core'}.${ref.apiVersion ?? 'v1'}.${ref.resource ?? 'unknown'}.${verb}`,
    ...(user.username ? { principal: user.username } : {}),
    ...(ips.length ? { callerIp: ips[ips.length - 1]! } : {}),
    ...(typeof e['userAgent'] === 'string' ? { userAgent: e['userAgent'] } : {}),
    ...(e['annotations'] && typeof e['annotations'] === 'object' ? { labels: e['annotations'] as Record<string, string> } : {}),
    ...(code === 401 ? { rpcCode: 16 } : code !== undefined && code >= 400 ? { rpcCode: code === 403 ? 7 : code === 404 ? 5 : 3 } : {}),
  });
}
