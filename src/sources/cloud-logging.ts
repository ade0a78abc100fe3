/**
 * The live GKE audit source: Cloud Logging `POST /v2/entries:list` over REST
 * (https://cloud.google.com/logging/docs/reference/v2/rest/v2/entries/list), authenticated with Application Default
 * Credentials through `google-auth-library` (Workload Identity on GKE, a key or external-account file named by
 * `GOOGLE_APPLICATION_CREDENTIALS` elsewhere), loaded on first use so `scan` never loads it.
 *
 * One query per Google Cloud project per poll for all its clusters: the clusters of a project (config
 * `audit.gcp.project`) are grouped as fleet Logs Insights groups log groups (`fleet-insights.ts`): a cluster's poll runs
 * one query for every registered cluster of the project — one filter naming all their `cluster_name`s, one time
 * window — and keeps the other clusters' entries for their own polls, which then send no request. Each page is one
 * request; paging goes on to the end, over empty pages that carry a `nextPageToken` (the API returns those when "the
 * search … did not have time to search all the possible log entries", reference above).
 *
 * Why one query per project: Cloud Logging allows 60 to 120 read requests per minute per project
 * (`ReadRequestsPerMinutePerProject`, https://cloud.google.com/logging/quotas), so polling each cluster on its own
 * does not scale. Every request takes a token of the deployment's shared budget per quota project (src/core/token-bucket.ts,
 * on the store's `rate_buckets` with replicas — the mechanism of the CloudWatch budget); a 429 `RESOURCE_EXHAUSTED`
 * halves that budget's rate and the request is retried after a backoff; when retries run out the poll fails and the
 * cursor stays, so the next poll reads the same window: no window is lost.
 *
 * Window and cursor: `[until − overlap, now − lag)` (the first poll: `[now − lookback, now − lag)`); the cursor
 * `{"v":1,"until":…}` is returned to the poller, which stores it only with the rows. Entries of the overlap read again
 * are dropped by the poller as seen auditIDs (`gkeEntryToEvent`: `operation.id`, else `gke:<insertId>`); within one
 * query, entries are deduplicated on `insertId` + `timestamp` (Logging's own duplicate rule, `LogEntry.insertId`),
 * never cut "after the last timestamp", which would lose entries sharing a timestamp.
 *
 * Blind detection: reads (get, list, watch) are logged only as Data Access entries, off by default and readable only
 * with `roles/logging.privateLogViewer`. A cluster whose polls saw no Data Access entry for `blindCheckMs` gets, at
 * most once per `blindCheckMs`, a probe (one-entry queries): Data Access entries of the last `blindCheckMs`, and
 * when there are none, Admin Activity entries. What the queries and probes saw goes to the poll's platform hints
 * (`platform-hints.ts`), from which `src/runtime/blind.ts` reports "Data Access off" with the fix.
 */
import type { GoogleAuth } from 'google-auth-library';
import { backoffDelay } from '../core/backoff.js';
import { ErrorCode, TokenwatchError } from '../errors.js';
import { TokenBucketLimiter, type BucketStateStore } from '../core/token-bucket.js';
import { sleep } from './retry.js';
import { GroupQuery } from './group-query.js';
import { SourceError, type AuditSource, type PollOptions, type SourceStats } from './types.js';

/** OAuth scope of Cloud Logging reads (https://developers.google.com/identity/protocols/oauth2/scopes#logging). */
export const LOGGING_READ_SCOPE = 'https://www.googleapis.com/auth/logging.read';
/** Default API endpoint. */
export const DEFAULT_LOGGING_ENDPOINT = 'https://logging.googleapis.com';
/** The backend's largest `pageSize` ("The backend has an upper limit of 1000", gcloud `api_lib/logging/common.py`). */
export const MAX_PAGE_SIZE = 1000;
/** Audit annotations (entry labels on GKE) a query selects; 401s are `protoPayload.status.code=16` (UNAUTHENTICATED). */
export const GKE_TOKEN_LABELS = ['authentication.k8s.io/stale-token', 'authentication.k8s.io/legacy-token', 'authentication.k8s.io/legacy-token-invalidated'] as const;

/** Returns the HTTP headers that authenticate one request (`Authorization: Bearer …`). */
export type AuthHeaders = () => Promise<Record<string, string>>;

/**
 * Application Default Credentials with the Logging read scope; `google-auth-library` is imported on the first call
 * (the serve path only). The library caches and refreshes the token.
 *
 * `project`, the project whose logs are read, is given to the library as its project id: without one, its first
 * token waits for a project lookup — the environment, the credentials file, then `gcloud config config-helper
 * --format json` run through a shell (a Python CLI start, about a second of CPU, where gcloud is installed), then the
 * metadata server (google-auth-library `GoogleAuth.findAndCacheProjectId`). The reads name their project in every
 * request, so nothing depends on that lookup.
 */
export function adcAuthHeaders(project?: string): AuthHeaders {
  let auth: Promise<GoogleAuth> | undefined;
  return async () => {
    auth ??= import('google-auth-library').then(({ GoogleAuth }) => new GoogleAuth({ scopes: [LOGGING_READ_SCOPE], ...(project ? { projectId: project } : {}) }));
    const headers = await (await auth).getRequestHeaders();
    return Object.fromEntries(headers.entries());
  };
}

const LOG_IDS = { activity: 'cloudaudit.googleapis.com%2Factivity', data_access: 'cloudaudit.googleapis.com%2Fdata_access' } as const;
type GkeLog = keyof typeof LOG_IDS;

const q = (s: string): string => JSON.stringify(s);
const iso = (ms: number): string => new Date(ms).toISOString();

/**
 * The filter of one project query: both audit logs, `k8s_cluster` entries of the named clusters, token annotations
 * or a 401, in `[fromMs, toMs)` (epoch ms). Label keys with `/` and `.` are quoted (Logging query language,
 * https://cloud.google.com/logging/docs/view/logging-query-language).
 */
export function buildGkeFilter(project: string, clusters: readonly string[], fromMs: number, toMs: number): string {
  const logs = (Object.values(LOG_IDS) as string[]).map((id) => q(`projects/${project}/logs/${id}`)).join(' OR ');
  const names = clusters.map(q).join(' OR ');
  const tokens = [...GKE_TOKEN_LABELS.map((k) => `labels.${q(k)}:*`), 'protoPayload.status.code=16'].join(' OR ');
  return `logName=(${logs}) AND resource.type="k8s_cluster" AND resource.labels.cluster_name=(${names}) AND (${tokens}) AND timestamp>=${q(iso(fromMs))} AND timestamp<${q(iso(toMs))}`;
}

/** The filter of a blind-log probe: entries of one audit log of one cluster in `[fromMs, toMs)`. */
function probeFilter(project: string, log: GkeLog, cluster: string, fromMs: number, toMs: number): string {
  return `logName=${q(`projects/${project}/logs/${LOG_IDS[log]}`)} AND resource.type="k8s_cluster" AND resource.labels.cluster_name=${q(cluster)} AND timestamp>=${q(iso(fromMs))} AND timestamp<${q(iso(toMs))}`;
}

/** `{"v":1,"until":…}` (epoch ms, the end of the last window read). */
export function encodeGkeCursor(until: number): string {
  return JSON.stringify({ v: 1, until });
}

/**
 * The `until` of a cursor (undefined for none).
 * @throws TokenwatchError (`internal`) for a cursor of another shape
 */
export function parseGkeCursor(cursor: string | undefined): number | undefined {
  if (cursor === undefined) return undefined;
  let doc: unknown;
  try {
    doc = JSON.parse(cursor);
  } catch {
    doc = undefined;
  }
  const until = (doc as { v?: unknown; until?: unknown } | undefined)?.until;
  if ((doc as { v?: unknown } | undefined)?.v !== 1 || typeof until !== 'number' || !Number.isFinite(until)) {
    throw new TokenwatchError(ErrorCode.Internal, `not a Cloud Logging cursor: ${cursor.slice(0, 80)}`);
  }
  return until;
}

/** Options of {@link CloudLoggingProject}. */
export interface CloudLoggingOptions {
  /** Google Cloud project id whose logs are read. */
  project: string;
  /** API base URL. Default {@link DEFAULT_LOGGING_ENDPOINT}. */
  endpoint?: string;
  /** Re-read before the cursor, for late ingestion, ms. Default 600,000 (10 min). */
  overlapMs?: number;
  /** The window ends this long before `now`, ms. Default 60,000. */
  lagMs?: number;
  /** Entries per page, 1 to 1,000. Default 1,000. */
  pageSize?: number;
  /** Request headers (default {@link adcAuthHeaders}). */
  auth?: AuthHeaders;
  /** The deployment's budget of read requests, and the key of this project's quota project in it. */
  budget?: { limiter: TokenBucketLimiter; key: string };
  /** Longest wait for one HTTP request, ms. Default 10,000. */
  requestTimeoutMs?: number;
  /** Attempts per request (throttling, 5xx, network), and their backoff: base · 2^n ms, capped, equal jitter. */
  retry?: { maxAttempts?: number; baseDelayMs?: number; maxDelayMs?: number };
  /** A poll reuses entries another cluster's poll fetched this recently, ms (about the poll interval). Default 300,000. */
  reuseMs?: number;
  /** Blind-log probe interval per cluster, ms (see the module doc). Default 3,600,000 (1 h). */
  blindCheckMs?: number;
  /** Jitter source (tests). Default `Math.random`. */
  random?: () => number;
  /** Told of every 429 answer. */
  onThrottle?: (project: string) => void;
}

/** What one project query gives one cluster. */
/** A member's part of the project query, as the group query keeps it. */
type Cached = { from: string | undefined; now: number; result: MemberResult };

type MemberResult = { ok: true; texts: string[]; cursor: string; logs: Set<GkeLog> } | { ok: false; error: SourceError };

interface Member {
  cluster: string;
  location: string | undefined;
  cursor: string | undefined;
  /** Its own poll has told its cursor (in this process). */
  polled: boolean;
  dataAccessAt?: number;
  probedAt?: number;
  /** What the last blind-log probe found; reported with every poll until the next probe. */
  probeLogs?: Set<GkeLog>;
}

interface GoogleErrorBody {
  error?: { code?: number; status?: string; message?: string; details?: Array<{ metadata?: Record<string, string> }> };
}

/** Advice for a non-retryable answer. */
function advice(status: number, project: string): string {
  if (status === 401) return 'the credentials were refused: check Application Default Credentials (Workload Identity, or GOOGLE_APPLICATION_CREDENTIALS)';
  if (status === 403) return `grant the reader roles/logging.privateLogViewer on project ${project} (Data Access entries are private logs)`;
  if (status === 404) return `check audit.gcp.project (${project}) and audit.gcp.endpoint`;
  return 'see docs/live-mode.md#gke';
}

/**
 * Why a cluster read from a project whose logs the identity may not read (`entries:list` answered 403) is blind, and
 * the fix: Data Access audit entries are private logs, readable with `roles/logging.privateLogViewer`
 * (https://cloud.google.com/logging/docs/access-control). Reported by the blind-log monitor (src/runtime/blind.ts,
 * reason `no-read-access`) until a poll succeeds.
 */
export function noReadAccessText(project: string, status: string): string {
  return (
    `tokenwatch's identity may not read the logs of project ${project} (entries:list answered HTTP 403 ${status}), so no audit event of this cluster can be read: ` +
    `grant it roles/logging.privateLogViewer on project ${project} (Data Access audit entries are private logs; https://cloud.google.com/logging/docs/access-control)`
  );
}

/**
 * One project's query for all its clusters, and the per-cluster {@link AuditSource}s backed by it (see the module
 * doc). Share one per (project, endpoint, overlap, lag).
 */
export class CloudLoggingProject {
  private readonly members = new Map<string, Member>();
  private readonly group: GroupQuery<Cached>;
  private readonly endpoint: string;
  private readonly overlapMs: number;
  private readonly lagMs: number;
  private readonly pageSize: number;
  private readonly auth: AuthHeaders;
  private readonly blindCheckMs: number;

  /** @throws TokenwatchError (`internal`) for a page size out of range */
  constructor(private readonly opts: CloudLoggingOptions) {
    this.endpoint = (opts.endpoint ?? DEFAULT_LOGGING_ENDPOINT).replace(/\/+$/, '');
    this.overlapMs = opts.overlapMs ?? 600_000;
    this.lagMs = opts.lagMs ?? 60_000;
    this.pageSize = opts.pageSize ?? MAX_PAGE_SIZE;
    if (!Number.isInteger(this.pageSize) || this.pageSize < 1 || this.pageSize > MAX_PAGE_SIZE) throw new TokenwatchError(ErrorCode.Internal, `CloudLoggingProject: pageSize must be 1 to ${MAX_PAGE_SIZE}`);
    this.auth = opts.auth ?? adcAuthHeaders(opts.project);
    this.group = new GroupQuery(opts.reuseMs ?? 300_000);
    this.blindCheckMs = opts.blindCheckMs ?? 3_600_000;
  }

  /**
   * The audit source of one GKE cluster (`location` tells apart clusters of one name in two locations).
   * @throws TokenwatchError (`config_invalid`) when another cluster of the project is read under the same name
   */
  add(cluster: string, location?: string): AuditSource & { close(): void } {
    const id = `gcp:${this.opts.project}:${location ? `${location}/` : ''}${cluster}`;
    for (const m of this.members.values()) {
      if (m.cluster === cluster && (m.location === undefined || location === undefined || m.location === location)) {
        throw new TokenwatchError(ErrorCode.ConfigInvalid, `audit.gcp: two clusters read GKE cluster '${cluster}' of project ${this.opts.project}${location ? '' : ' (set audit.gcp.location on both)'}`);
      }
    }
    this.members.set(id, { cluster, location, cursor: undefined, polled: false });
    return {
      id,
      poll: (cursor, o) => this.pollMember(id, cursor, o),
      close: () => {
        this.members.delete(id);
        this.group.results.delete(id);
      },
    };
  }

  private async *pollMember(id: string, cursor: string | undefined, o: PollOptions): AsyncGenerator<string, string> {
    const m = this.members.get(id);
    if (!m) throw new SourceError(`Cloud Logging: source '${id}' was closed`, id, 'Closed', false);
    m.cursor = cursor;
    m.polled = true;
    // One project query at a time: a cluster that finds one running waits for it, then looks again.
    const hit = await this.group.take(id, cursor, o.now, () => this.refresh(cursor, o));
    if (!hit) throw new SourceError(`Cloud Logging: no result for '${id}'`, id, 'NoProjectResult', true);
    if (!hit.result.ok) throw hit.result.error;
    for (const log of hit.result.logs) o.stats.platformHints?.gkeLogs.add(log);
    for (const t of hit.result.texts) yield t;
    m.cursor = hit.result.cursor;
    return hit.result.cursor;
  }

  /** Runs the project's queries (one per window: members whose cursors differ) and blind probes; caches per member. */
  private async refresh(trigger: string | undefined, o: PollOptions): Promise<void> {
    const end = o.now - this.lagMs;
    const groups = new Map<string, { start: number; floor: number; list: Array<[string, Member]> }>();
    const from = new Map<string, string | undefined>();
    for (const [id, m] of this.members) {
      // A member that has not polled yet in this process is assumed to be where the triggering one is (as fleet
      // Insights does); a wrong guess costs one more query when it polls, never a wrong window.
      const cursor = m.polled ? m.cursor : trigger;
      from.set(id, cursor);
      let until: number | undefined;
      try {
        until = parseGkeCursor(cursor);
      } catch (err) {
        this.group.results.set(id, { from: cursor, now: o.now, result: { ok: false, error: new SourceError((err as Error).message, id, 'InvalidCursor', false, { cause: err }) } });
        continue;
      }
      const key = until === undefined ? 'first' : String(until);
      const g = groups.get(key) ?? { start: until === undefined ? o.now - o.lookbackMs : until - this.overlapMs, floor: until ?? o.now - o.lookbackMs, list: [] };
      g.list.push([id, m]);
      groups.set(key, g);
    }
    for (const g of groups.values()) {
      const results = await this.queryGroup(g.list, g.start, end, g.floor, o);
      for (const [id] of g.list) this.group.results.set(id, { from: from.get(id), now: o.now, result: results.get(id) as MemberResult });
    }
  }

  /** One window's query for `list`: entries split per member, then the probes of members due one. */
  private async queryGroup(list: Array<[string, Member]>, start: number, end: number, floor: number, o: PollOptions): Promise<Map<string, MemberResult>> {
    const out = new Map<string, MemberResult>();
    if (end <= floor) {
      for (const [id] of list) out.set(id, { ok: true, texts: [], cursor: encodeGkeCursor(floor), logs: new Set() });
      return out;
    }
    const texts = new Map<string, string[]>(list.map(([id]) => [id, []]));
    const logs = new Map<string, Set<GkeLog>>(list.map(([id]) => [id, new Set()]));
    const seen = new Set<string>();
    try {
      const filter = buildGkeFilter(this.opts.project, [...new Set(list.map(([, m]) => m.cluster))], start, end);
      await this.pages(filter, this.pageSize, o, (e) => {
        const key = `${String(e['insertId'])}\u0000${String(e['timestamp'])}`;
        if (seen.has(key)) return false;
        seen.add(key);
        const labels = (e['resource'] as { labels?: Record<string, string> } | undefined)?.labels ?? {};
        const hit = list.find(([, m]) => m.cluster === labels['cluster_name'] && (m.location === undefined || m.location === labels['location']));
        if (!hit) return false;
        texts.get(hit[0])!.push(JSON.stringify(e));
        const log = logOf(e['logName']);
        if (log) logs.get(hit[0])!.add(log);
        if (log === 'data_access') hit[1].dataAccessAt = o.now;
        return false;
      });
      for (const [id, m] of list) {
        await this.probeIfDue(m, o);
        for (const log of m.probeLogs ?? []) logs.get(id)!.add(log);
      }
    } catch (err) {
      if (o.signal?.aborted) throw o.signal.reason;
      const error = err instanceof SourceError ? err : new SourceError(`Cloud Logging query of project ${this.opts.project} failed: ${(err as Error).message}`, `gcp:${this.opts.project}`, 'QueryFailed', true, { cause: err });
      for (const [id] of list) out.set(id, { ok: false, error });
      return out;
    }
    for (const [id] of list) out.set(id, { ok: true, texts: texts.get(id)!, cursor: encodeGkeCursor(end), logs: logs.get(id)! });
    return out;
  }

  /**
   * Blind-log probe of one cluster (module doc): Data Access entries of the last interval, else Admin Activity ones.
   * A probe that fails (quota, network) is not the poll's failure: it is tried again at the next interval.
   */
  private async probeIfDue(m: Member, o: PollOptions): Promise<void> {
    const due = (at: number | undefined) => at === undefined || o.now - at >= this.blindCheckMs;
    if (!due(m.dataAccessAt) || !due(m.probedAt)) return;
    m.probedAt = o.now;
    const to = o.now - this.lagMs;
    const from = o.now - this.blindCheckMs;
    const found = new Set<GkeLog>();
    try {
      for (const log of ['data_access', 'activity'] as const) {
        await this.pages(probeFilter(this.opts.project, log, m.cluster, from, to), 1, o, () => {
          found.add(log);
          return true;
        });
        if (found.size > 0) break;
      }
    } catch {
      if (o.signal?.aborted) throw o.signal.reason;
      return;
    }
    m.probeLogs = found;
    if (found.has('data_access')) m.dataAccessAt = o.now;
  }

  /** Pages a query to its end (or until `onEntry` returns true), one request per page. */
  private async pages(filter: string, pageSize: number, o: PollOptions, onEntry: (e: Record<string, unknown>) => boolean): Promise<void> {
    let pageToken: string | undefined;
    do {
      const body = { resourceNames: [`projects/${this.opts.project}`], filter, orderBy: 'timestamp desc', pageSize, ...(pageToken !== undefined && { pageToken }) };
      const page = await this.request(body, o.stats, o.signal);
      for (const e of page.entries ?? []) {
        o.stats.records++;
        if (e && typeof e === 'object' && onEntry(e)) return;
      }
      pageToken = typeof page.nextPageToken === 'string' && page.nextPageToken !== '' ? page.nextPageToken : undefined;
    } while (pageToken !== undefined);
  }

  /**
   * One page, retried on 429, 5xx, 408 and network errors (each attempt takes a budget token; a 429 halves the budget).
   * @throws SourceError when the answer is an error that retrying does not fix, or retries ran out (retryable)
   */
  private async request(body: Record<string, unknown>, stats: SourceStats, signal: AbortSignal | undefined): Promise<{ entries?: Array<Record<string, unknown>>; nextPageToken?: string }> {
    const { project } = this.opts;
    const id = `gcp:${project}`;
    const maxAttempts = this.opts.retry?.maxAttempts ?? 6;
    for (let attempt = 0; ; attempt++) {
      let failure: string;
      try {
        const headers = await this.auth().catch((err: unknown) => {
          throw new SourceError(`Cloud Logging (project ${project}): no Google credentials: ${(err as Error).message} (Application Default Credentials: Workload Identity, or GOOGLE_APPLICATION_CREDENTIALS)`, id, 'NoCredentials', true, { cause: err });
        });
        // The token is taken right before the request goes out (after the credentials, which may take a while).
        if (this.opts.budget) await this.opts.budget.limiter.acquire(this.opts.budget.key, signal);
        stats.requests++;
        const timeout = AbortSignal.timeout(this.opts.requestTimeoutMs ?? 10_000);
        const res = await fetch(`${this.endpoint}/v2/entries:list`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json' },
          body: JSON.stringify(body),
          signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
        });
        const text = await res.text();
        stats.bytes += Buffer.byteLength(text);
        if (res.ok) return JSON.parse(text) as { entries?: Array<Record<string, unknown>>; nextPageToken?: string };
        const err = parseGoogleError(text);
        const status = err?.status ?? String(res.status);
        failure = `HTTP ${res.status} ${status}${err?.message ? `: ${err.message}` : ''}`;
        if (res.status === 429) {
          stats.throttled++;
          this.opts.onThrottle?.(project);
          if (this.opts.budget) await this.opts.budget.limiter.throttled(this.opts.budget.key);
        } else if (res.status < 500 && res.status !== 408) {
          // 403: the credentials are valid but may not read the project's logs — blind until the role is granted.
          const blind = res.status === 403 ? { blind: noReadAccessText(project, status) } : undefined;
          throw new SourceError(`Cloud Logging entries:list (project ${project}): ${failure}; ${advice(res.status, project)}`, id, status, false, blind);
        }
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        if (err instanceof SourceError) throw err;
        failure = (err as Error).name === 'TimeoutError' ? `no answer within ${this.opts.requestTimeoutMs ?? 10_000} ms` : (err as Error).message;
      }
      if (attempt + 1 >= maxAttempts) {
        throw new SourceError(`Cloud Logging entries:list (project ${project}) failed ${maxAttempts} times, last: ${failure}; the window is read again at the next poll`, id, 'RetriesExhausted', true);
      }
      const delay = backoffDelay(this.opts.retry?.baseDelayMs ?? 1_000, attempt, this.opts.retry?.maxDelayMs ?? 30_000);
      await sleep(Math.round(delay / 2 + (delay / 2) * (this.opts.random ?? Math.random)()), signal);
    }
  }
}

function logOf(logName: unknown): GkeLog | undefined {
  if (typeof logName !== 'string') return undefined;
  if (logName.endsWith(`/${LOG_IDS.data_access}`)) return 'data_access';
  if (logName.endsWith(`/${LOG_IDS.activity}`)) return 'activity';
  return undefined;
}

function parseGoogleError(text: string): { status?: string; message?: string } | undefined {
  try {
    const e = (JSON.parse(text) as GoogleErrorBody).error;
    return e ? { ...(e.status !== undefined && { status: e.status }), ...(e.message !== undefined && { message: e.message.slice(0, 300) }) } : undefined;
  } catch {
    return undefined;
  }
}

/** The key of a quota project's bucket in the shared budget. */
export function gcpBudgetKey(quotaProject: string): string {
  return `gcp/${quotaProject}/entries.list`;
}

/** Most tokens a bucket of the read budget holds: 1, so requests are spaced `60 / readsPerMinute` s apart. */
const GCP_BUCKET_BURST = 1;

/** Options of {@link CloudLoggingRegistry}. */
export interface CloudLoggingRegistryOptions {
  /** Read requests per minute per quota project, all clusters and replicas together (`poll.gcpLogging.readsPerMinute`). */
  readsPerMinute: number;
  /** A cluster's poll reuses entries another cluster's poll of its project fetched this recently, ms. */
  reuseMs?: number;
  /** Where the budget's state lives (the store's `rate_buckets` with replicas); default in process. */
  store?: BucketStateStore;
  /** The budget's clock, ms (`Date.now` with a shared store). */
  clock?: () => number;
  /** Told of every 429 with the bucket's new rate (requests per second). */
  onThrottle?: (quotaProject: string, newRate: number) => void;
  /** Told when the shared store failed and a request took its token from the in-process bucket. */
  onStoreError?: (key: string, err: unknown) => void;
  /** Request headers (default Application Default Credentials, one client for the deployment). */
  auth?: AuthHeaders;
  requestTimeoutMs?: number;
  retry?: CloudLoggingOptions['retry'];
  blindCheckMs?: number;
  random?: () => number;
}

/** A cluster's `audit.gcp` settings (src/config/schema.ts). */
export interface GcpAuditSettings {
  project: string;
  /** The GKE cluster's name (`resource.labels.cluster_name`). */
  clusterName: string;
  location?: string;
  endpoint?: string;
  /** The project whose read quota the requests spend (default `project`). */
  quotaProject?: string;
  /** ms */
  overlap: number;
  /** ms */
  lag: number;
  pageSize: number;
}

/**
 * The deployment's Cloud Logging reads: one {@link CloudLoggingProject} per (project, endpoint, overlap, lag, page
 * size) — clusters one query can read together — and one read budget per quota project for all of them
 * (src/core/token-bucket.ts, adaptive: a 429 halves the rate).
 */
export class CloudLoggingRegistry {
  private readonly projects = new Map<string, CloudLoggingProject>();
  private readonly limiter: TokenBucketLimiter;
  private auth: AuthHeaders | undefined;

  constructor(private readonly opts: CloudLoggingRegistryOptions) {
    this.limiter = new TokenBucketLimiter({
      limitsOf: (key) => (key.startsWith('gcp/') ? { rate: opts.readsPerMinute / 60, burst: GCP_BUCKET_BURST, adaptive: true } : undefined),
      ...(opts.store !== undefined && { store: opts.store }),
      ...(opts.clock !== undefined && { clock: opts.clock }),
      ...(opts.onThrottle !== undefined && { onThrottle: (key: string, rate: number) => opts.onThrottle?.(key.split('/')[1] ?? '', rate) }),
      ...(opts.onStoreError !== undefined && { onStoreError: opts.onStoreError }),
    });
  }

  /**
   * The audit source of one GKE cluster.
   * @throws TokenwatchError (`config_invalid`) when another cluster reads the same GKE cluster of the project
   */
  source(gcp: GcpAuditSettings): AuditSource & { close(): void } {
    const key = JSON.stringify([gcp.project, gcp.endpoint ?? null, gcp.overlap, gcp.lag, gcp.pageSize]);
    let project = this.projects.get(key);
    if (!project) {
      // One ADC client for the deployment; the first project read is its project id (see adcAuthHeaders: it spares
      // the library's own lookup, and no request depends on it).
      this.auth ??= this.opts.auth ?? adcAuthHeaders(gcp.project);
      project = new CloudLoggingProject({
        project: gcp.project,
        ...(gcp.endpoint !== undefined && { endpoint: gcp.endpoint }),
        overlapMs: gcp.overlap,
        lagMs: gcp.lag,
        pageSize: gcp.pageSize,
        auth: this.auth,
        budget: { limiter: this.limiter, key: gcpBudgetKey(gcp.quotaProject ?? gcp.project) },
        ...(this.opts.requestTimeoutMs !== undefined && { requestTimeoutMs: this.opts.requestTimeoutMs }),
        ...(this.opts.retry !== undefined && { retry: this.opts.retry }),
        ...(this.opts.reuseMs !== undefined && { reuseMs: this.opts.reuseMs }),
        ...(this.opts.blindCheckMs !== undefined && { blindCheckMs: this.opts.blindCheckMs }),
        ...(this.opts.random !== undefined && { random: this.opts.random }),
      });
      this.projects.set(key, project);
    }
    return project.add(gcp.clusterName, gcp.location);
  }
}
