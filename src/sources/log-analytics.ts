/**
 * AKS audit logs from a Log Analytics workspace: the `AKSAudit` resource-specific table (a diagnostic setting in
 * resource-specific mode, https://learn.microsoft.com/azure/azure-monitor/reference/tables/aksaudit) or the
 * `AzureDiagnostics` table's `kube-audit` rows (Azure diagnostics mode, the event's JSON in `log_s`), read through the
 * Logs Query API (`POST {endpoint}/workspaces/{id}/query`) with `@azure/monitor-query-logs` and a workload identity
 * token (`azure-token.ts`). Loaded only by `serve` (a dynamic import in src/runtime/build-cluster.ts).
 *
 * One query per workspace per poll: the clusters of a workspace (`audit.azure.workspaceId`) are read together, rows
 * split by `_ResourceId` (the AKS cluster's resource id, compared without case), as fleet Logs Insights reads many log
 * groups with one query (`fleet-insights.ts`). A cluster's poll runs the query for every cluster of its workspace and
 * keeps the others' rows for their polls, which then send nothing.
 *
 * Window: `[cursor − overlap, now − lag)`; `lag` ≥ 5 min because ingestion takes 20 s to 3 min ("Log data ingestion
 * time in Azure Monitor", https://learn.microsoft.com/azure/azure-monitor/logs/data-ingestion-time), `overlap` re-reads
 * rows ingested later still: a row arriving up to `lag + overlap` (15 min by default) after its `TimeGenerated` is
 * read, which covers AKS's "up to 15 minutes" (https://learn.microsoft.com/azure/aks/monitor-apiserver). The cursor (the window's end) is returned to the poller, which stores it only with the
 * rows. Rows read twice (overlap) are dropped by the poller's auditID dedupe; within one answer the source drops
 * repeats of one (`AuditId`, `Stage`).
 *
 * Limits (per identity, "Log Analytics workspaces" in https://learn.microsoft.com/azure/azure-monitor/service-limits):
 * 200 queries per 30 s, 5 running at once, 500,000 rows or about 100 MB per answer. Every query takes a token of the
 * store-backed budget (src/core/token-bucket.ts; shared by replicas with PostgreSQL), at most
 * `maxConcurrentQueries` run at once, a 429 halves the budget's rate and waits `Retry-After` (seconds or an HTTP date)
 * before the same window is asked again, until the poll's deadline; an answer cut at a limit (`PartialFailure`) is
 * asked again as two halves of its window.
 *
 * What the cluster can tell: the query also counts every row of the window per cluster in `AKSAudit` and
 * `AKSAuditAdmin` (or per `Category` in `AzureDiagnostics`), so the blind-log monitor sees a diagnostic setting that
 * exports only `kube-audit-admin` (`platform-hints.ts`); a workspace the identity may not read (403) fails the poll
 * with a `blind` {@link SourceError} ({@link noReadAccessText}: the role to grant and the diagnostic setting to check),
 * which the blind-log monitor reports as blind (src/runtime/blind.ts, `no-read-access`) until a poll succeeds.
 */
import https from 'node:https';
import { rootCertificates } from 'node:tls';
import { LogsQueryClient, type LogsQueryResult, type LogsTable } from '@azure/monitor-query-logs';
import pLimit from 'p-limit';
import type { TokenBucketLimiter } from '../core/token-bucket.js';
import { ErrorCode, TokenwatchError } from '../errors.js';
import { GroupQuery } from './group-query.js';
import { SourceError, type AuditSource, type PollOptions, type SourceStats } from './types.js';
import type { WorkloadIdentityCredential } from './azure-token.js';

/** Annotation keys (docs/design/domain.md §1–2). */
const STALE_TOKEN_ANNOTATION = 'authentication.k8s.io/stale-token';
const LEGACY_TOKEN_ANNOTATION = 'authentication.k8s.io/legacy-token';

/** The Log Analytics tables the source reads. */
export type LogAnalyticsTable = 'AKSAudit' | 'AzureDiagnostics';

/** Options of {@link buildLogAnalyticsQuery}. */
export interface LogAnalyticsQueryOptions {
  table: LogAnalyticsTable;
  /** The clusters' resource ids. */
  resourceIds: readonly string[];
  /** Window, epoch ms: [startMs, endMs). */
  startMs: number;
  endMs: number;
}

function kqlString(s: string): string {
  return `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

/** The `Type` of the count rows of {@link buildLogAnalyticsQuery}. */
export const COUNT_ROW_TYPE = 'TokenwatchCount';

/**
 * The KQL of one window over some clusters of a workspace (`union isfuzzy=true`: a table the workspace lacks — no
 * diagnostic setting sends to it — is left out instead of failing the query):
 * - the token-use rows: a `stale-token` or `legacy-token` annotation, or response code 401 (the terms of
 *   src/sources/terms.ts), with the `AKSAudit` columns the converter of src/audit/shapes.ts reads;
 * - one count row (`Type == "TokenwatchCount"`) per cluster and diagnostic category (`kube-audit`, `kube-audit-admin`):
 *   every row of the window, matching or not.
 * The column list follows the tables' references (https://learn.microsoft.com/azure/azure-monitor/reference/tables/aksaudit,
 * …/aksauditadmin), and the `AzureDiagnostics` variant the Azure diagnostics mode of the diagnostic setting
 * (https://learn.microsoft.com/azure/aks/monitor-apiserver: `kube-audit` rows in `AzureDiagnostics`); checked against
 * those docs only, never a real workspace (docs/live-mode.md#aks-log-analytics says which columns the docs confirm).
 * Times are `datetime()` literals in UTC with ms.
 */
export function buildLogAnalyticsQuery(o: LogAnalyticsQueryOptions): string {
  const from = new Date(o.startMs).toISOString();
  const to = new Date(o.endMs).toISOString();
  const window = `TimeGenerated >= datetime(${from}) and TimeGenerated < datetime(${to})`;
  const ids = `_ResourceId in~ (${o.resourceIds.map(kqlString).join(', ')})`;
  if (o.table === 'AKSAudit') {
    return [
      'union isfuzzy=true',
      `(AKSAudit | where ${window} | where ${ids}`,
      `  | where Annotations has ${kqlString(STALE_TOKEN_ANNOTATION)} or Annotations has ${kqlString(LEGACY_TOKEN_ANNOTATION)} or toint(ResponseStatus.code) == 401`,
      '  | project TimeGenerated, _ResourceId, AuditId, Stage, Level, Verb, RequestUri, User, SourceIps, UserAgent, ResponseStatus, Annotations, ObjectRef, RequestReceivedTime, StageReceivedTime, Type = "AKSAudit"),',
      `(AKSAudit | where ${window} | where ${ids} | summarize Rows = count() by _ResourceId | extend Category = "kube-audit", Type = "${COUNT_ROW_TYPE}"),`,
      `(AKSAuditAdmin | where ${window} | where ${ids} | summarize Rows = count() by _ResourceId | extend Category = "kube-audit-admin", Type = "${COUNT_ROW_TYPE}")`,
      '| order by TimeGenerated asc',
    ].join('\n');
  }
  return [
    'union isfuzzy=true',
    `(AzureDiagnostics | where Category == "kube-audit" and ${window} | where ${ids}`,
    `  | where log_s has ${kqlString(STALE_TOKEN_ANNOTATION)} or log_s has ${kqlString(LEGACY_TOKEN_ANNOTATION)} or log_s contains "\\"code\\":401"`,
    '  | project TimeGenerated, _ResourceId, Category, log_s, Type = "AzureDiagnostics"),',
    `(AzureDiagnostics | where Category in ("kube-audit", "kube-audit-admin") and ${window} | where ${ids} | summarize Rows = count() by _ResourceId, Category | extend Type = "${COUNT_ROW_TYPE}")`,
    '| order by TimeGenerated asc',
  ].join('\n');
}

/**
 * Why a cluster read from a Log Analytics workspace the identity may not read (the query answered 403) is blind, and
 * the fix: the Log Analytics Reader role on the workspace (the role that grants `Microsoft.OperationalInsights/
 * workspaces/query/read`, https://learn.microsoft.com/azure/azure-monitor/logs/manage-access), and the cluster's
 * diagnostic setting sending the `kube-audit` category to that workspace in the mode `table` expects
 * (https://learn.microsoft.com/azure/aks/monitor-aks-reference).
 */
export function noReadAccessText(workspaceId: string, table: LogAnalyticsTable, code?: string): string {
  const mode = table === 'AKSAudit' ? 'resource-specific mode (the AKSAudit table)' : 'Azure diagnostics mode (the AzureDiagnostics table, audit.azure.table)';
  return (
    `tokenwatch's identity may not read Log Analytics workspace ${workspaceId} (the query answered HTTP 403${code ? `, ${code}` : ''}), so no audit event of this cluster can be read: ` +
    `give the identity (AZURE_CLIENT_ID) the Log Analytics Reader role on the workspace (az role assignment create --role "Log Analytics Reader" --assignee <client id> --scope <workspace resource id>), ` +
    `and check that the cluster's diagnostic setting sends the kube-audit category (not only kube-audit-admin) to this workspace in ${mode}`
  );
}

/** The cursor of a Log Analytics member: the end of the last window read, epoch ms. */
export function encodeLogAnalyticsCursor(until: number): string {
  return JSON.stringify({ v: 1, until });
}

/** @throws {TokenwatchError} `cursor_invalid` when `cursor` is not one of {@link encodeLogAnalyticsCursor} */
export function parseLogAnalyticsCursor(cursor: string): number {
  const v = JSON.parse(cursor) as { v?: unknown; until?: unknown };
  if (v.v !== 1 || typeof v.until !== 'number' || !Number.isFinite(v.until)) throw new TokenwatchError(ErrorCode.CursorInvalid, 'not a Log Analytics cursor');
  return v.until;
}

/** The id of a member's source (its cursor key): `azure:<workspaceId>:<resource id, lower case>`. */
export function logAnalyticsSourceId(workspaceId: string, resourceId: string): string {
  return `azure:${workspaceId.toLowerCase()}:${resourceId.toLowerCase()}`;
}

/** The settings a workspace's query needs. */
export interface LogAnalyticsWorkspaceOptions {
  workspaceId: string;
  table: LogAnalyticsTable;
  /** Logs Query API base, with its version path. Default `https://api.loganalytics.io/v1`. */
  endpoint?: string;
  /** The token source (`getToken(scopes)`). */
  credential: Pick<WorkloadIdentityCredential, 'getToken'>;
  /** Extra PEM CA certificates trusted for `endpoint`. */
  ca?: Buffer;
  /** ms */
  lagMs: number;
  /** ms */
  overlapMs: number;
  /** The query budget and the key of this identity's bucket. */
  budget?: { limiter: TokenBucketLimiter; key: string };
  /** Limits the queries running at once (shared by the workspaces of one identity). */
  concurrency: <T>(fn: () => Promise<T>) => Promise<T>;
  /** Longest time one poll's query may take, 429 waits included, ms. Default 300,000. */
  timeoutMs?: number;
  /** Smallest window an over-limit answer is split to, ms. Default 60,000. */
  minSplitMs?: number;
  /** Told of every query sent (metrics). */
  onQuery?: (q: { workspaceId: string; status: number | 'ok' | 'partial'; retryAfterMs?: number }) => void;
  /** Monotonic clock for deadlines, ms. Default `performance.now`. */
  clock?: () => number;
}

/** One cluster of a workspace poll. */
interface Member {
  sourceId: string;
  resourceId: string;
  cursor: string | undefined;
}

/** What a workspace poll gives one member. */
type MemberResult =
  | { ok: true; rows: Record<string, unknown>[]; cursor: string; categories: Set<string>; rowsInWindow: number }
  | { ok: false; error: SourceError };

/** `ms` later, or the signal's reason. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason as Error);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** `Retry-After` in ms: delta seconds or an HTTP date (RFC 9110 §10.2.3); undefined when absent or unreadable. */
export function retryAfterMs(value: string | null | undefined, now = Date.now()): number | undefined {
  if (!value) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isFinite(at) ? Math.max(0, at - now) : undefined;
}

interface RestErrorLike {
  statusCode?: number;
  code?: string;
  message?: string;
  response?: { headers?: { get(name: string): string | undefined } };
}

/** A table's rows as objects keyed by column name (`datetime` cells, `Date`s from the SDK, as ISO strings). */
function tableRows(t: LogsTable): Record<string, unknown>[] {
  const names = t.columnDescriptors.map((c) => c.name ?? '');
  return t.rows.map((r) => {
    const o: Record<string, unknown> = {};
    r.forEach((v, i) => {
      const name = names[i];
      if (name && v !== null && v !== undefined && v !== '') o[name] = v instanceof Date ? v.toISOString() : v;
    });
    return o;
  });
}

/**
 * The query of one workspace for its members, one poll at a time (see the module docstring).
 */
export class LogAnalyticsWorkspace {
  private readonly client: LogsQueryClient;
  private readonly clock: () => number;
  private readonly agent: https.Agent | undefined;

  constructor(private readonly o: LogAnalyticsWorkspaceOptions) {
    const endpoint = (o.endpoint ?? 'https://api.loganalytics.io/v1').replace(/\/+$/, '');
    this.agent = o.ca ? new https.Agent({ ca: [...rootCertificates, o.ca.toString('utf8')], keepAlive: true }) : undefined;
    this.client = new LogsQueryClient(o.credential, {
      endpoint,
      // The API's audience is the endpoint's origin (https://api.loganalytics.io for the public cloud).
      credentials: { scopes: [`${new URL(endpoint).origin}/.default`] },
      retryOptions: { maxRetries: 0 }, // 429 and 5xx are handled below, with the budget
      ...(this.agent ? { agent: this.agent } : {}),
    });
    this.clock = o.clock ?? (() => performance.now());
  }

  /** Releases the sockets of the CA agent (the SDK's own pool closes with the process). */
  close(): void {
    this.agent?.destroy();
  }

  /**
   * Reads the window of every member in one query (two or more when an answer is split). A failure fails every member
   * (their cursors stay). @throws the signal's reason on abort
   */
  async poll(members: readonly Member[], opts: { now: number; lookbackMs: number; stats: SourceStats; signal?: AbortSignal }): Promise<Map<string, MemberResult>> {
    const out = new Map<string, MemberResult>();
    const starts = new Map<string, number>();
    for (const m of members) {
      try {
        const until = m.cursor === undefined ? opts.now - opts.lookbackMs : parseLogAnalyticsCursor(m.cursor);
        starts.set(m.sourceId, m.cursor === undefined ? until : until - this.o.overlapMs);
      } catch (err) {
        out.set(m.sourceId, { ok: false, error: new SourceError(`Log Analytics: invalid cursor: ${(err as Error).message}`, m.sourceId, 'InvalidCursor', false) });
      }
    }
    const valid = members.filter((m) => starts.has(m.sourceId));
    if (valid.length === 0) return out;
    const end = opts.now - this.o.lagMs;
    const start = Math.min(...valid.map((m) => starts.get(m.sourceId)!));
    if (end <= start) {
      for (const m of valid) out.set(m.sourceId, { ok: true, rows: [], cursor: m.cursor ?? encodeLogAnalyticsCursor(start), categories: new Set(), rowsInWindow: 0 });
      return out;
    }
    const byId = new Map(valid.map((m) => [m.resourceId.toLowerCase(), m]));
    let rows: Record<string, unknown>[];
    try {
      rows = await this.window(valid.map((m) => m.resourceId), start, end, opts, this.clock() + (this.o.timeoutMs ?? 300_000));
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason;
      const error = err instanceof SourceError ? err : new SourceError(`Log Analytics query failed: ${(err as Error).message}`, `azure:${this.o.workspaceId}`, 'QueryFailed', true, { cause: err });
      for (const m of valid) out.set(m.sourceId, { ok: false, error });
      return out;
    }
    const results = new Map<string, { rows: Record<string, unknown>[]; categories: Set<string>; rowsInWindow: number; seen: Set<string> }>();
    for (const m of valid) results.set(m.sourceId, { rows: [], categories: new Set(), rowsInWindow: 0, seen: new Set() });
    for (const row of rows) {
      const m = byId.get(String(row._ResourceId ?? '').toLowerCase());
      if (!m) continue;
      const r = results.get(m.sourceId)!;
      if (row.Type === COUNT_ROW_TYPE) {
        const n = Number(row.Rows ?? 0);
        if (n > 0 && typeof row.Category === 'string') r.categories.add(row.Category);
        if (row.Category === 'kube-audit') r.rowsInWindow += n;
        continue;
      }
      const t = Date.parse(String(row.TimeGenerated ?? ''));
      if (Number.isFinite(t) && t < starts.get(m.sourceId)!) continue; // before this member's own window
      if (typeof row.AuditId === 'string') {
        const key = `${row.AuditId}\u0000${String(row.Stage ?? '')}`;
        if (r.seen.has(key)) continue; // the same (AuditId, Stage) ingested twice
        r.seen.add(key);
      }
      r.rows.push(row);
    }
    for (const m of valid) {
      const r = results.get(m.sourceId)!;
      out.set(m.sourceId, { ok: true, rows: r.rows, cursor: encodeLogAnalyticsCursor(end), categories: r.categories, rowsInWindow: r.rowsInWindow });
    }
    return out;
  }

  /** The rows of [start, end), split in two when the answer hit a limit. */
  private async window(resourceIds: string[], start: number, end: number, opts: { stats: SourceStats; signal?: AbortSignal }, deadline: number): Promise<Record<string, unknown>[]> {
    const res = await this.query(resourceIds, start, end, opts, deadline);
    if (res.status === 'Success') return res.tables.flatMap(tableRows);
    const minSplit = this.o.minSplitMs ?? 60_000;
    if (end - start < 2 * minSplit) {
      throw new SourceError(
        `Log Analytics workspace ${this.o.workspaceId}: the answer for ${new Date(start).toISOString()}–${new Date(end).toISOString()} was cut (${res.partialError.code ?? 'PartialError'}: ${res.partialError.message ?? ''}) and the window is already ${Math.round((end - start) / 1000)} s: poll more often`,
        `azure:${this.o.workspaceId}`,
        'PartialFailure',
        true,
      );
    }
    const mid = start + Math.floor((end - start) / 2);
    return [...(await this.window(resourceIds, start, mid, opts, deadline)), ...(await this.window(resourceIds, mid, end, opts, deadline))];
  }

  private async query(resourceIds: string[], start: number, end: number, opts: { stats: SourceStats; signal?: AbortSignal }, deadline: number): Promise<LogsQueryResult> {
    const id = `azure:${this.o.workspaceId}`;
    const what = `Log Analytics workspace ${this.o.workspaceId}`;
    const query = buildLogAnalyticsQuery({ table: this.o.table, resourceIds, startMs: start, endMs: end });
    for (let attempt = 0; ; attempt++) {
      if (opts.signal?.aborted) throw opts.signal.reason;
      if (this.o.budget) await this.o.budget.limiter.acquire(this.o.budget.key, opts.signal);
      opts.stats.requests++;
      try {
        const res = await this.o.concurrency(() =>
          this.client.queryWorkspace(this.o.workspaceId, query, { startTime: new Date(start), endTime: new Date(end) }, { serverTimeoutInSeconds: 180, abortSignal: opts.signal }),
        );
        this.o.onQuery?.({ workspaceId: this.o.workspaceId, status: res.status === 'Success' ? 'ok' : 'partial' });
        return res;
      } catch (err) {
        if (opts.signal?.aborted) throw opts.signal.reason;
        const e = err as RestErrorLike;
        const status = e.statusCode;
        if (status === 401 || status === 403) {
          this.o.onQuery?.({ workspaceId: this.o.workspaceId, status });
          // 403: the token is valid but may not read the workspace — the audit log is blind until the role is granted.
          // 401: the token itself was not accepted (audience, expiry): a failing credential, said as such.
          throw new SourceError(
            `${what}: access denied (HTTP ${status}${e.code ? `, ${e.code}` : ''}): grant the identity the Log Analytics Reader role on the workspace (or on the cluster's resource group with resource-context access)`,
            id,
            status === 401 ? 'Unauthorized' : 'Forbidden',
            false,
            { cause: err, ...(status === 403 && { blind: noReadAccessText(this.o.workspaceId, this.o.table, e.code) }) },
          );
        }
        const transient = status === undefined || status === 429 || status === 408 || status >= 500;
        if (!transient) {
          this.o.onQuery?.({ workspaceId: this.o.workspaceId, status });
          throw new SourceError(`${what}: query refused (HTTP ${status}${e.code ? `, ${e.code}` : ''}): ${(e.message ?? '').split('\n')[0]}`, id, e.code ?? `HTTP${status}`, false, { cause: err });
        }
        let delay = Math.min(30_000, 1000 * 2 ** Math.min(attempt, 5));
        if (status === 429) {
          opts.stats.throttled++;
          if (this.o.budget) await this.o.budget.limiter.throttled(this.o.budget.key);
          const after = retryAfterMs(e.response?.headers?.get('retry-after'));
          if (after !== undefined) delay = after;
          this.o.onQuery?.({ workspaceId: this.o.workspaceId, status, ...(after !== undefined && { retryAfterMs: after }) });
        } else {
          this.o.onQuery?.({ workspaceId: this.o.workspaceId, status: status ?? 0 });
        }
        if (this.clock() + delay > deadline) {
          throw new SourceError(`${what}: ${status === 429 ? 'throttled (429)' : `failed (${status ?? e.code ?? e.message})`} until the poll's deadline; the window is read again at the next poll`, id, status === 429 ? 'Throttled' : (e.code ?? 'QueryFailed'), true, { cause: err });
        }
        await sleep(delay, opts.signal);
      }
    }
  }
}

/** Options of {@link LogAnalyticsMembers}. */
export interface LogAnalyticsMembersOptions {
  /** A member's poll reuses rows fetched for it by another member's poll at most this long before its own `now`, ms. Default 300,000. */
  reuseMs?: number;
}

interface Cached {
  from: string | undefined;
  now: number;
  result: MemberResult;
}

/**
 * Per-cluster {@link AuditSource}s backed by one {@link LogAnalyticsWorkspace}: a cluster's poll runs the workspace's
 * query for every registered cluster (each from the cursor its own last poll returned) and keeps the other clusters'
 * rows for their polls (as `FleetInsightsMembers` does for fleet Logs Insights).
 */
export class LogAnalyticsMembers {
  private readonly members = new Map<string, { resourceId: string; cursor: string | undefined; polled: boolean }>();
  private readonly group: GroupQuery<Cached>;

  constructor(
    readonly workspace: LogAnalyticsWorkspace,
    opts: LogAnalyticsMembersOptions = {},
  ) {
    this.group = new GroupQuery(opts.reuseMs ?? 300_000);
  }

  /**
   * The audit source of one cluster.
   * @throws TokenwatchError (`config_invalid`) when another cluster of the workspace has the same resource id
   */
  add(sourceId: string, resourceId: string): AuditSource & { close(): void } {
    if (this.members.has(sourceId)) throw new TokenwatchError(ErrorCode.ConfigInvalid, `audit.azure: two clusters read resource ${resourceId} of one workspace`);
    this.members.set(sourceId, { resourceId, cursor: undefined, polled: false });
    return {
      id: sourceId,
      poll: (cursor, o) => this.pollMember(sourceId, cursor, o),
      close: () => {
        this.members.delete(sourceId);
        this.group.results.delete(sourceId);
        if (this.members.size === 0) this.workspace.close();
      },
    };
  }

  private async refresh(trigger: string | undefined, o: PollOptions): Promise<void> {
    // A member that has not polled in this process (a restart) is assumed to be where the triggering member is; a wrong
    // guess costs that member one more query at its poll, never a wrong window.
    const members: Member[] = [...this.members].map(([sourceId, m]) => ({ sourceId, resourceId: m.resourceId, cursor: m.polled ? m.cursor : trigger }));
    const from = new Map(members.map((m) => [m.sourceId, m.cursor]));
    const out = await this.workspace.poll(members, { now: o.now, lookbackMs: o.lookbackMs, stats: o.stats, ...(o.signal && { signal: o.signal }) });
    for (const [id, result] of out) this.group.results.set(id, { from: from.get(id), now: o.now, result });
  }

  private async *pollMember(sourceId: string, cursor: string | undefined, o: PollOptions): AsyncGenerator<string, string> {
    const m = this.members.get(sourceId);
    if (!m) throw new SourceError(`Log Analytics: source '${sourceId}' was closed`, sourceId, 'Closed', false);
    m.cursor = cursor;
    m.polled = true;
    const hit = await this.group.take(sourceId, cursor, o.now, () => this.refresh(cursor, o));
    if (!hit) throw new SourceError(`Log Analytics: no result for '${sourceId}'`, sourceId, 'NoResult', true);
    if (!hit.result.ok) throw hit.result.error;
    const hints = o.stats.platformHints;
    if (hints) for (const c of hit.result.categories) hints.aksCategories.add(c);
    o.stats.records += hit.result.rows.length;
    for (const row of hit.result.rows) yield JSON.stringify(row);
    m.cursor = hit.result.cursor;
    return hit.result.cursor;
  }
}

/** Settings shared by the workspaces of a deployment (config `poll.logAnalytics`). */
export interface LogAnalyticsSettings {
  queriesPerSecond: number;
  maxConcurrentQueries: number;
  /** ms */
  reuse: number;
  /** ms */
  timeout: number;
}

/** One cluster's `audit.azure` config, as the registry needs it. */
export interface AzureSourceConfig {
  workspaceId: string;
  resourceId: string;
  table: LogAnalyticsTable;
  endpoint?: string;
  authorityHost?: string;
  /** ms */
  lag: number;
  /** ms */
  overlap: number;
}

/**
 * The deployment's Log Analytics workspaces: one {@link LogAnalyticsMembers} per (workspace, table, endpoint, lag,
 * overlap) — clusters that one query reads together —, one credential and one budget bucket for the identity.
 */
export class LogAnalyticsRegistry {
  private readonly workspaces = new Map<string, LogAnalyticsMembers>();
  private readonly concurrency: ReturnType<typeof pLimit>;

  constructor(
    private readonly deps: {
      settings: LogAnalyticsSettings;
      credential: Pick<WorkloadIdentityCredential, 'getToken'>;
      /** The budget (limits of key {@link budgetKey}) and the identity's key. */
      budget?: { limiter: TokenBucketLimiter; key: string };
      ca?: Buffer;
      onQuery?: LogAnalyticsWorkspaceOptions['onQuery'];
    },
  ) {
    this.concurrency = pLimit(deps.settings.maxConcurrentQueries);
  }

  /** The source of one cluster. @throws TokenwatchError (`config_invalid`) when two clusters name one resource in one workspace */
  source(cfg: AzureSourceConfig): AuditSource & { close(): void } {
    const key = JSON.stringify([cfg.workspaceId.toLowerCase(), cfg.table, cfg.endpoint ?? null, cfg.lag, cfg.overlap]);
    let members = this.workspaces.get(key);
    if (!members) {
      const ws = new LogAnalyticsWorkspace({
        workspaceId: cfg.workspaceId,
        table: cfg.table,
        ...(cfg.endpoint !== undefined && { endpoint: cfg.endpoint }),
        credential: this.deps.credential,
        ...(this.deps.ca && { ca: this.deps.ca }),
        lagMs: cfg.lag,
        overlapMs: cfg.overlap,
        ...(this.deps.budget && { budget: this.deps.budget }),
        concurrency: this.concurrency,
        timeoutMs: this.deps.settings.timeout,
        ...(this.deps.onQuery && { onQuery: this.deps.onQuery }),
      });
      members = new LogAnalyticsMembers(ws, { reuseMs: this.deps.settings.reuse });
      this.workspaces.set(key, members);
    }
    return members.add(logAnalyticsSourceId(cfg.workspaceId, cfg.resourceId), cfg.resourceId);
  }
}
