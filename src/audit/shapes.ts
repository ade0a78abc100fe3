/**
 * The shapes other platforms and tools wrap audit events in, unwrapped to audit.k8s.io/v1 Events. Pure: no I/O.
 *
 * Each shape, with the public source of its field layout:
 * - `event-list`: an `audit.k8s.io/v1` `EventList` (`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[…]}`),
 *   the batch the API server's audit webhook backend POSTs
 *   (https://kubernetes.io/docs/tasks/debug/debug-cluster/audit/#webhook-backend; type in kubernetes
 *   `staging/src/k8s.io/apiserver/pkg/apis/audit/v1/types.go`);
 * - `gke`: a Cloud Logging `LogEntry` of GKE's Kubernetes audit logs (`protoPayload` an `AuditLog`): the user in
 *   `protoPayload.authenticationInfo.principalEmail`, the source in `requestMetadata.callerIp`, the user agent in
 *   `requestMetadata.callerSuppliedUserAgent`, the verb at the end of `methodName` (`io.k8s.core.v1.pods.get`), the
 *   Kubernetes audit annotations in the entry's `labels`, the time in `timestamp`, the Kubernetes `auditID` in
 *   `operation.id` (https://cloud.google.com/kubernetes-engine/docs/how-to/audit-logging,
 *   https://cloud.google.com/logging/docs/reference/v2/rest/v2/LogEntry,
 *   https://cloud.google.com/logging/docs/reference/audit/auditlog/rest/Shared.Types/AuditLog). Entries carry no
 *   `user.extra` (no pod claims) and no `requestURI`;
 * - `aks`: an Azure Monitor resource-log record of an AKS `kube-audit` / `kube-audit-admin` diagnostic setting, the
 *   event's JSON as a string in `properties.log` and the API-server replica in `properties.pod`
 *   (https://learn.microsoft.com/azure/aks/monitor-aks-reference,
 *   https://learn.microsoft.com/azure/azure-monitor/essentials/resource-logs-schema); Event Hubs deliver them as
 *   `{"records":[…]}` (https://learn.microsoft.com/azure/azure-monitor/essentials/stream-monitoring-data-event-hubs);
 * - `aks-log-analytics`: a row of a Log Analytics export: the `AKSAudit` / `AKSAuditAdmin` table (`AuditId`, `User`,
 *   `SourceIps`, `UserAgent`, `Verb`, `RequestUri`, `ResponseStatus`, `Annotations`, `RequestReceivedTime`,
 *   `StageReceivedTime`; https://learn.microsoft.com/azure/azure-monitor/reference/tables/aksaudit) or an
 *   `AzureDiagnostics` row with the event's JSON in `log_s`
 *   (https://learn.microsoft.com/azure/azure-monitor/reference/tables/azurediagnostics);
 * - `loki`: a line of `logcli query --output=jsonl` (`{"labels":{…},"line":"<log line>","timestamp":"…"}`, grafana/loki
 *   `pkg/logcli/output/jsonl.go`, https://grafana.com/docs/loki/latest/query/logcli/), the line holding an event or
 *   any shape above.
 */
import type { AuditEvent } from './types.js';
import { isAuditEvent } from './token-use.js';

/** A shape {@link unwrapAuditEvents} recognises. */
export type WrapperShape = 'event' | 'event-list' | 'gke' | 'aks' | 'aks-log-analytics' | 'loki' | 'event-hubs' | 'array';

/** What {@link unwrapAuditEvents} found in one JSON value. */
export interface Unwrapped {
  /** The outermost shape. */
  shape: WrapperShape;
  /** The audit events inside (each still to be narrowed: only `isAuditEvent` is known of them). */
  events: AuditEvent[];
  /** Set when a GKE entry was among them (its events lack pod claims and request URIs). */
  gke?: boolean;
  /** AKS diagnostic categories seen (`kube-audit`, `kube-audit-admin`). */
  aksCategories?: string[];
}

/** Nesting levels {@link unwrapAuditEvents} follows (Loki line → Event Hubs records → AKS record → event). */
const MAX_DEPTH = 4;

function obj(v: unknown): Record<string, unknown> | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** A Log Analytics `dynamic` column: an object, or its JSON text (CSV and some JSON exports hold it as a string). */
function dynamic(v: unknown): unknown {
  return typeof v === 'string' && (v.startsWith('{') || v.startsWith('[')) ? parseJson(v) : v;
}

/** Google RPC status code (https://cloud.google.com/apis/design/errors#handling_errors) → HTTP status, where one fits. */
const RPC_TO_HTTP: Record<number, number> = { 0: 200, 3: 400, 5: 404, 6: 409, 7: 403, 16: 401 };

/**
 * A GKE Cloud Audit Logs `LogEntry` as the audit event it records (see the module doc for the field mapping).
 * `auditID` is `operation.id` when GKE set it (the Kubernetes audit ID), else `gke:<insertId>` (the entry's own id).
 *
 * @returns the event, or `undefined` when the entry has no `protoPayload` or no id at all.
 */
export function gkeEntryToEvent(entry: Record<string, unknown>): AuditEvent | undefined {
  const p = obj(entry.protoPayload);
  if (!p) return undefined;
  const auditID = str(obj(entry.operation)?.id) ?? (str(entry.insertId) ? `gke:${entry.insertId as string}` : undefined);
  if (!auditID) return undefined;
  const annotations: Record<string, string> = {};
  for (const [k, v] of Object.entries(obj(entry.labels) ?? {})) if (typeof v === 'string') annotations[k] = v;
  const meta = obj(p.requestMetadata);
  const principal = str(obj(p.authenticationInfo)?.principalEmail);
  const method = str(p.methodName);
  const rpc = obj(p.status)?.code;
  const code = typeof rpc === 'number' ? RPC_TO_HTTP[rpc] : 200; // an absent status is OK (proto3 default 0)
  const ip = str(meta?.callerIp);
  const ua = str(meta?.callerSuppliedUserAgent);
  const time = str(entry.timestamp);
  return {
    auditID,
    stage: 'ResponseComplete',
    ...(method ? { verb: method.slice(method.lastIndexOf('.') + 1) } : {}),
    user: principal ? { username: principal } : {},
    sourceIPs: ip ? [ip] : [],
    ...(ua ? { userAgent: ua } : {}),
    ...(code !== undefined ? { responseStatus: { code } } : {}),
    ...(time ? { requestReceivedTimestamp: time } : {}),
    annotations,
  };
}

/** An `AKSAudit` Log Analytics row as its audit event; `undefined` without an `AuditId`. */
function aksAuditRowToEvent(row: Record<string, unknown>): AuditEvent | undefined {
  const auditID = str(row.AuditId);
  if (!auditID) return undefined;
  const e: AuditEvent = { auditID };
  const fields: Array<[keyof AuditEvent, string]> = [
    ['verb', 'Verb'],
    ['requestURI', 'RequestUri'],
    ['userAgent', 'UserAgent'],
    ['stage', 'Stage'],
    ['level', 'Level'],
    ['requestReceivedTimestamp', 'RequestReceivedTime'],
    ['stageTimestamp', 'StageReceivedTime'],
    ['user', 'User'],
    ['sourceIPs', 'SourceIps'],
    ['responseStatus', 'ResponseStatus'],
    ['annotations', 'Annotations'],
    ['objectRef', 'ObjectRef'],
  ];
  for (const [key, column] of fields) {
    const v = dynamic(row[column]);
    if (v !== undefined && v !== null && v !== '') (e as unknown as Record<string, unknown>)[key] = v;
  }
  return e;
}

function merge(into: Unwrapped, from: Unwrapped): void {
  into.events.push(...from.events);
  if (from.gke) into.gke = true;
  if (from.aksCategories) into.aksCategories = [...new Set([...(into.aksCategories ?? []), ...from.aksCategories])];
}

/**
 * The audit events inside one parsed JSON value of any shape of the module doc (an event itself included), nested
 * up to 4 levels deep (e.g. a Loki line holding an AKS record).
 *
 * @returns what was found, or `undefined` when the value is no known shape (then it is not an audit record at all).
 *   A known wrapper whose inner event cannot be read (e.g. `properties.log` that is not JSON) yields no events for it.
 */
export function unwrapAuditEvents(value: unknown, depth = 0): Unwrapped | undefined {
  if (depth > MAX_DEPTH) return undefined;
  if (Array.isArray(value)) {
    const out: Unwrapped = { shape: 'array', events: [] };
    for (const v of value) {
      const u = unwrapAuditEvents(v, depth + 1);
      if (u) merge(out, u);
    }
    return out;
  }
  const o = obj(value);
  if (!o) return undefined;
  if (isAuditEvent(o)) return { shape: 'event', events: [o] };
  if (o.kind === 'EventList' || (Array.isArray(o.items) && String(o.apiVersion ?? '').startsWith('audit.k8s.io/'))) {
    const items = Array.isArray(o.items) ? o.items : [];
    return { shape: 'event-list', events: items.filter(isAuditEvent) };
  }
  if (obj(o.protoPayload)) {
    const e = gkeEntryToEvent(o);
    return { shape: 'gke', events: e ? [e] : [], gke: true };
  }
  const props = obj(o.properties);
  if (props && typeof props.log === 'string') {
    const inner = unwrapAuditEvents(parseJson(props.log), depth + 1);
    const category = str(o.category) ?? str(o.Category);
    return {
      shape: 'aks',
      events: inner?.shape === 'event' ? inner.events : [],
      ...(category ? { aksCategories: [category] } : {}),
    };
  }
  if (Array.isArray(o.records)) {
    const out: Unwrapped = { shape: 'event-hubs', events: [] };
    for (const r of o.records) {
      const u = unwrapAuditEvents(r, depth + 1);
      if (u) merge(out, u);
    }
    return out;
  }
  if (typeof o.AuditId === 'string') {
    const e = aksAuditRowToEvent(o);
    const category = str(o.Category) ?? (typeof o.Type === 'string' && o.Type === 'AKSAuditAdmin' ? 'kube-audit-admin' : 'kube-audit');
    return { shape: 'aks-log-analytics', events: e ? [e] : [], aksCategories: [category] };
  }
  if (typeof o.log_s === 'string') {
    const inner = unwrapAuditEvents(parseJson(o.log_s), depth + 1);
    const category = str(o.Category);
    return {
      shape: 'aks-log-analytics',
      events: inner?.shape === 'event' ? inner.events : [],
      ...(category ? { aksCategories: [category] } : {}),
    };
  }
  if (typeof o.line === 'string' && ('labels' in o || 'timestamp' in o)) {
    const inner = unwrapAuditEvents(parseJson(o.line), depth + 1);
    return inner ? { ...inner, shape: 'loki' } : { shape: 'loki', events: [] };
  }
  return undefined;
}

/** Top-level keys of a JSON value, for messages (never its values): `{a, b, c}`, `[…]`, or the JSON type. */
export function describeJsonValue(value: unknown): string {
  if (Array.isArray(value)) {
    const first = value.find((v) => v !== null && typeof v === 'object');
    return first === undefined ? 'a JSON array' : `a JSON array of ${describeJsonValue(first)}`;
  }
  const o = obj(value);
  if (!o) return `a JSON ${value === null ? 'null' : typeof value}`;
  const keys = Object.keys(o);
  const shown = keys.slice(0, 8).map((k) => (k.length > 40 ? `${k.slice(0, 40)}…` : k));
  return `an object with keys ${shown.join(', ')}${keys.length > 8 ? `, … (${keys.length} keys)` : ''}`;
}

/**
 * The closest known shape to an unrecognised JSON record, as a hint with the command that makes it readable; undefined
 * when nothing is close.
 */
export function closestShapeHint(value: unknown): string | undefined {
  const o = obj(Array.isArray(value) ? value[0] : value);
  if (!o) return undefined;
  if (typeof o.log === 'string') {
    return 'it looks like a container or Fluent Bit log record holding the event as text in `log`: extract it with ' +
      "`jq -c '.log | fromjson' FILE`";
  }
  if (typeof o.message === 'string' && ('timestamp' in o || 'ingestionTime' in o)) {
    return 'it looks like CloudWatch log events without their `events` wrapper: use the whole ' +
      '`aws logs filter-log-events --output json` output';
  }
  if (obj(o._source)) return "it looks like an Elasticsearch/OpenSearch hit: extract the event with `jq -c '._source' FILE`";
  if (typeof o.textPayload === 'string' || obj(o.jsonPayload)) {
    return 'it looks like a Cloud Logging entry without `protoPayload`: read the Cloud Audit Logs instead ' +
      "(`gcloud logging read 'logName:\"cloudaudit.googleapis.com\"' --format=json`)";
  }
  if (obj(o.properties)) {
    return 'it looks like an Azure resource-log record without `properties.log`: export the AKS `kube-audit` diagnostic category';
  }
  if (typeof o.kind === 'string' && /List$/.test(o.kind) && Array.isArray(o.items)) return KUBE_LIST_HINT;
  return undefined;
}

/**
 * The hint for a Kubernetes object list (`kubectl get … -o json`: `{"kind":"List","items":[…]}`) given as an audit log:
 * the other inputs `scan` takes that users confuse with it.
 */
export const KUBE_LIST_HINT =
  'it looks like a Kubernetes object list (`kubectl get … -o json`), not an audit log: a cluster snapshot goes to ' +
  '`--cluster-snapshot`, probe-report ConfigMaps to `--probe-report`';
