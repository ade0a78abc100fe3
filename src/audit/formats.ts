/**
 * Input format detection by content (never by file name). Pure.
 */
import type { InputFormat } from './types.js';
import { isAuditEvent } from './token-use.js';
import { closestShapeHint, describeJsonValue, KUBE_LIST_HINT, unwrapAuditEvents } from './shapes.js';

/** Bytes of (decompressed) input that {@link detectFormat} wants to see: 64 KiB. */
export const DETECT_HEAD_BYTES = 64 * 1024;

/** True when the bytes start with the gzip magic `1f 8b` (RFC 1952 §2.3.1). */
export function isGzip(head: Buffer): boolean {
  return head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b;
}

// `aws logs filter-log-events` (and get-log-events) output: an object whose first key is one of these.
const FILTER_LOG_EVENTS_RE = /^\{\s*"(?:events|searchedLogStreams|nextToken|nextForwardToken|nextBackwardToken)"\s*:/;
// `aws logs get-query-results` output: an object whose first key is one of the GetQueryResults response members
// (AWS CloudWatch Logs API reference, GetQueryResults: queryLanguage, results, statistics, status, encryptionKey).
const QUERY_RESULTS_RE = /^\{\s*"(?:results|status|statistics|queryLanguage|encryptionKey)"\s*:/;
// CloudWatch Logs export to S3 (`aws logs create-export-task`): `<ISO-8601 timestamp> <message>` per line.
const S3_EXPORT_LINE_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})[ \t]+\S/;
// Markers of an audit.k8s.io Event in its first line (Go encodes kind, apiVersion, level, auditID first).
const AUDIT_EVENT_MARKERS = ['"auditID"', '"audit.k8s.io/', '"kind":"Event"'];
// Markers of the wrapper shapes of `shapes.ts` (GKE LogEntry, AKS records and Log Analytics rows, Loki lines).
const WRAPPER_MARKERS = ['"protoPayload"', '"properties"', '"AuditId"', '"log_s"', '"records"', '"line"', '"EventList"'];
// `aws logs tail` text: `<ISO-8601 timestamp> <log stream> {…}`.
const TAIL_LINE_RE = /^\d{4}-\d{2}-\d{2}T\S{1,40}[ \t]+[^\s{]\S{0,511}[ \t]+\{/;
// A document whose events sit in a big array member: an EventList (Go and jq keep `kind` first) or Event Hubs records.
const BATCH_DOCUMENT_RE = /^\{\s*(?:"kind"\s*:\s*"EventList"|"apiVersion"\s*:\s*"audit\.k8s\.io\/[^"]*"\s*,\s*"kind"\s*:\s*"EventList"|"records"\s*:)/;

function hasMarker(text: string, markers: readonly string[]): boolean {
  return markers.some((m) => text.includes(m));
}

/** The first line of a JSON-lines head starting at `i`: parsed, too long for the head, or not one JSON value. */
type FirstLine = { kind: 'value'; value: unknown } | { kind: 'long' } | { kind: 'unfinished'; cut: boolean } | { kind: 'bad' };

function firstLine(text: string, i: number, complete: boolean): FirstLine {
  const nl = text.indexOf('\n', i);
  if (nl === -1 && !complete) return { kind: 'long' };
  const line = text.slice(i, nl === -1 ? text.length : nl).trim();
  try {
    return { kind: 'value', value: JSON.parse(line) };
  } catch {
    // `cut`: a whole line that may be a record cut short rather than the opening of a multi-line document.
    if (!line.endsWith('}')) return { kind: 'unfinished', cut: nl !== -1 && line !== '{' };
    return startsWithWholeObject(line) ? { kind: 'unfinished', cut: false } : { kind: 'bad' };
  }
}

/** Does the line start with one whole JSON object followed by another (`{…}{…}`: documents concatenated)? */
function startsWithWholeObject(line: string): boolean {
  const m = /\}\s*\{/g;
  for (let k = 0; k < 16; k++) {
    const hit = m.exec(line);
    if (!hit) return false;
    try {
      JSON.parse(line.slice(0, hit.index + 1));
      return true;
    } catch {
      // a `}{` inside the first object (in a string): try the next one
    }
  }
  return false;
}

/** Lines of the head after the first that {@link detectFormat} looks at when the first is no known record. */
const MORE_LINES = 4;

/** The shape of the first few complete lines after an unknown first one: an audit event, a wrapper, or neither. */
function laterLines(text: string, i: number): 'audit-jsonl' | 'wrapped-jsonl' | undefined {
  let from = text.indexOf('\n', i);
  for (let k = 0; k < MORE_LINES && from !== -1; k++) {
    const nl = text.indexOf('\n', from + 1);
    if (nl === -1) return undefined;
    const line = text.slice(from + 1, nl).trim();
    from = nl;
    if (line === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      continue;
    }
    if (isAuditEvent(value)) return 'audit-jsonl';
    if (unwrapAuditEvents(value)) return 'wrapped-jsonl';
  }
  return undefined;
}

/**
 * The format of a JSON-lines head whose first line (at `i`) is not a whole record — cut at either end (`tail -c`, a
 * `copytruncate` rotation or a partial write before more lines were appended) or junk — when the lines after it are:
 * `audit-jsonl` when each of the next few complete, non-blank lines (up to {@link MORE_LINES}) is an audit event,
 * `wrapped-jsonl` when each is an audit event or a wrapper shape (`shapes.ts`) and one is a wrapper, otherwise
 * `undefined`. Strict (every line must be a record) so that a pretty-printed or JSON-array document, whose inner
 * lines do not parse alone, keeps its own detection. The scanner counts the first line in `stats.malformed`.
 */
function afterCutFirstLine(text: string, i: number, complete: boolean): 'audit-jsonl' | 'wrapped-jsonl' | undefined {
  let from = text.indexOf('\n', i);
  if (from === -1) return undefined;
  let events = 0;
  let wrapped = 0;
  for (let k = 0; k < MORE_LINES && from < text.length; k++) {
    let nl = text.indexOf('\n', from + 1);
    if (nl === -1) {
      if (!complete) break; // the head ends inside this line
      nl = text.length;
    }
    const line = text.slice(from + 1, nl).trim();
    from = nl;
    if (line === '') {
      k--;
      continue;
    }
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      return undefined;
    }
    if (isAuditEvent(value)) events++;
    else if (unwrapAuditEvents(value)) wrapped++;
    else return undefined;
  }
  if (wrapped > 0) return 'wrapped-jsonl';
  return events > 0 ? 'audit-jsonl' : undefined;
}

/** Does the line at `i` (up to its newline) parse as JSON on its own? */
function lineParses(text: string, i: number): boolean {
  const nl = text.indexOf('\n', i);
  try {
    JSON.parse(text.slice(i, nl === -1 ? text.length : nl));
    return true;
  } catch {
    return false;
  }
}

function skipWs(text: string, i: number): number {
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d && c !== 0xfeff) break;
    i++;
  }
  return i;
}

/** Header columns of the EKS user guide's stale-token query (`parse @message … as subject, elapsedtime`). */
export const GUIDE_QUERY_FIELDS = ['subject', 'elapsedtime'] as const;

/** The formats {@link detectFormat} knows, for error messages (one phrase each, with the command that makes it). */
export const KNOWN_FORMATS_TEXT =
  'audit JSON lines (--audit-log-path files), audit webhook batches (EventList), pretty-printed, concatenated or ' +
  'JSON-array events (`jq .`, `jq -s .`), CloudWatch export to S3 (`aws logs create-export-task`, ' +
  '"<timestamp> <event>" lines), `aws logs tail` text, `aws logs filter-log-events --output json`, ' +
  '`aws logs get-query-results --output json`, a Logs Insights console export (JSON or CSV) with @message or with ' +
  "the EKS guide query's subject and elapsedtime, GKE Cloud Audit Logs (`gcloud logging read --format=json`, or " +
  'one LogEntry per line from Cloud Storage), AKS kube-audit diagnostic records (storage account, Event Hubs ' +
  '`{"records":[…]}`, Log Analytics AKSAudit/AzureDiagnostics rows) and Loki `logcli query --output=jsonl`';

/**
 * Detects the input format from the first bytes of a file (already decompressed, leading NUL bytes already
 * skipped; give it up to {@link DETECT_HEAD_BYTES}):
 * - `filter-log-events`: a JSON object whose first key is `events` (or `searchedLogStreams`, `nextToken`):
 *   `aws logs filter-log-events` output, pretty-printed or compact;
 * - `insights-query-results`: a JSON object whose first key is `results`, `status`, `statistics`,
 *   `queryLanguage` or `encryptionKey`: `aws logs get-query-results --output json`;
 * - `insights-query-rows`: a JSON array of arrays of `{field, value}`: `get-query-results --query results` output;
 * - `insights-json-fields`: a JSON array of objects whose head names `subject` and `elapsedtime` but not
 *   `@message`: a Logs Insights console export of the EKS guide query (`@timestamp`, `subject`, `elapsedtime`);
 * - `insights-json`: any other JSON array (`[` then `{` or `]`): a CloudWatch Logs Insights console export
 *   of rows with `@timestamp` and `@message`;
 * - `cw-s3-export`: a first line `<ISO-8601 timestamp> <text>` and audit-event markers in the head: a CloudWatch
 *   Logs export to S3 (lines of other log streams in it are counted malformed);
 * - `json-documents` (array): a JSON array of objects without `@message` whose head holds audit-event or wrapper
 *   markers: events, GKE entries (`gcloud logging read --format=json`), Log Analytics rows, EventLists;
 * - `cw-s3-export` / `aws-logs-tail`: see below;
 * - `audit-jsonl`: a JSON object on the first line that is an audit event, or (an odd first line, e.g. a rotated
 *   file's cut-off record) audit-event markers (`"auditID"`, `audit.k8s.io/`, `"kind":"Event"`) in the head;
 * - `wrapped-jsonl`: a first line that is one JSON object of a wrapper shape (`shapes.ts`: EventList, GKE LogEntry,
 *   AKS record, Event Hubs records, Log Analytics row, Loki line), or longer than the head and starting as an
 *   EventList or `{"records":`;
 * - `audit-jsonl` / `wrapped-jsonl` also for a first line that is not a whole record — the tail of one (`tail -c`,
 *   a `copytruncate` rotation mid-line), the head of one (a partial write, then whole lines appended) or junk —
 *   when each of the next few complete lines is an audit event (or a wrapper record); the scanner counts that first
 *   line in `stats.malformed`. A first line that opens a document (a lone `{` or `[`, an EventList's
 *   `…"items":[`, concatenated objects) keeps the rules for documents, since its inner lines are not all records;
 * - `json-documents` (objects): an object that goes on past its first line (pretty-printed, `jq .`; several
 *   documents concatenated) with audit-event or wrapper markers in the head;
 * - `aws-logs-tail`: like `cw-s3-export`, but `<timestamp> <log stream> <event JSON>` (`aws logs tail`);
 * - `insights-csv`: a first line (header) naming `@timestamp` and `@message`, or `subject` and `elapsedtime`.
 *
 * @param complete the head is the whole input (default: it is shorter than {@link DETECT_HEAD_BYTES}).
 * @returns the format, or `undefined` for anything else, including binary data (NUL bytes outside whole lines of a
 *   JSON-lines log, which are left out of the detection and skipped by the scanner), empty input and a first
 *   JSON record of no known shape (see {@link describeUnknownContent} for the reason).
 */
export function detectFormat(head: Buffer, complete = head.length < DETECT_HEAD_BYTES): InputFormat | undefined {
  if (head.length > DETECT_HEAD_BYTES) {
    head = head.subarray(0, DETECT_HEAD_BYTES);
    complete = false;
  }
  if (head.length === 0 || isGzip(head)) return undefined;
  if (head.indexOf(0) !== -1) {
    // Binary data and UTF-16/32 text hold NUL bytes, and so does a JSON-lines log with a zeroed block in it (a crash
    // mid-write): such a log is detected from its other lines, and the scanner skips the NUL-bearing ones
    // (`stats.nulLines`). Only line formats: a NUL in one JSON document breaks the document.
    if (utf16Or32(head) !== undefined) return undefined;
    const format = detectFormat(withoutNulLines(head), complete);
    return format !== undefined && NUL_TOLERANT_FORMATS.has(format) ? format : undefined;
  }
  const text = head.toString('utf8');
  const i = skipWs(text, 0);
  if (i >= text.length) return undefined;
  const c = text[i];
  if (c === '[') {
    const j = skipWs(text, i + 1);
    // A cut first line that happens to start with `[` (e.g. `tail -c` landing in an event's array), before lines of
    // audit JSON: the lines after it decide. A lone `[` opens a JSON array and is left to the rules below.
    const nl = text.indexOf('\n', i);
    if (nl !== -1 && text.slice(i, nl).trim() !== '[' && !lineParses(text, i)) {
      const after = afterCutFirstLine(text, i, complete);
      if (after) return after;
    }
    if (j >= text.length || text[j] === ']') return 'insights-json';
    // `get-query-results --query results`: just the rows, each an array of {field, value}.
    if (text[j] === '[' && /^\[\s*\{\s*"(?:field|value)"\s*:/.test(text.slice(j, j + 256))) return 'insights-query-rows';
    if (text[j] === '{') {
      const atMessage = text.includes('"@message"');
      const guide = !atMessage && GUIDE_QUERY_FIELDS.every((f) => text.includes(`"${f}"`));
      if (guide) return 'insights-json-fields';
      // A JSON array of events (or of GKE entries, AKS rows, EventLists): `gcloud logging read --format=json`, a Log
      // Analytics export, `jq -s .` output.
      if (!atMessage && (hasMarker(text, AUDIT_EVENT_MARKERS) || hasMarker(text, WRAPPER_MARKERS))) return 'json-documents';
      return 'insights-json';
    }
    return undefined;
  }
  if (c === '{') {
    const start = text.slice(i, i + 4096);
    if (FILTER_LOG_EVENTS_RE.test(start)) return 'filter-log-events';
    if (QUERY_RESULTS_RE.test(start)) return 'insights-query-results';
    const audit = hasMarker(text, AUDIT_EVENT_MARKERS);
    const first = firstLine(text, i, complete);
    if (first.kind === 'value') {
      if (isAuditEvent(first.value)) return 'audit-jsonl';
      if (unwrapAuditEvents(first.value)) return 'wrapped-jsonl';
      // A JSON object of no known shape: unknown, unless events follow an odd first line (counted malformed).
      return laterLines(text, i);
    }
    if (first.kind === 'long') {
      if (BATCH_DOCUMENT_RE.test(start)) return 'wrapped-jsonl'; // a webhook batch longer than the head, one per line
      return audit ? 'audit-jsonl' : undefined;
    }
    if (first.kind === 'unfinished') {
      // A record cut short (a partial write, then whole lines appended) before lines of audit JSON: they decide.
      const after = first.cut ? afterCutFirstLine(text, i, complete) : undefined;
      if (after) return after;
      // An object that goes on past its first line: pretty-printed (`jq .`) or concatenated documents.
      return audit || hasMarker(text, WRAPPER_MARKERS) ? 'json-documents' : undefined;
    }
    return afterCutFirstLine(text, i, complete) ?? (audit ? 'audit-jsonl' : undefined);
  }
  const nl = text.indexOf('\n', i);
  const header = text.slice(i, nl === -1 ? text.length : nl);
  // An export of the whole log group may start with another stream's line (`<ts> I0510 …`): the audit markers
  // anywhere in the head decide.
  if (S3_EXPORT_LINE_RE.test(header) && AUDIT_EVENT_MARKERS.some((m) => text.includes(m))) {
    return TAIL_LINE_RE.test(header) ? 'aws-logs-tail' : 'cw-s3-export';
  }
  if (header.includes('@timestamp') && header.includes('@message')) return 'insights-csv';
  if (GUIDE_QUERY_FIELDS.every((f) => header.includes(f))) return 'insights-csv';
  // A first line that is not a whole record (the tail of one cut by `tail -c` or a `copytruncate` rotation, or junk)
  // before lines of audit JSON: the lines after it decide.
  return afterCutFirstLine(text, i, complete);
}

/** Number of leading NUL bytes in `b` (the hole `logrotate copytruncate` leaves at the start of a file). */
export function leadingNulBytes(b: Buffer): number {
  let i = 0;
  while (i < b.length && b[i] === 0) i++;
  return i;
}

/**
 * Says why a head {@link detectFormat} rejected is not readable, for the error message: UTF-16 / UTF-32 text
 * (by byte-order mark, or by the NUL byte every other byte that ASCII text in UTF-16 has), binary data, or
 * unknown text.
 */
export function describeUnknownContent(head: Buffer): { what: string; hint?: string } {
  const utf = utf16Or32(head);
  if (utf) {
    return {
      what: `${utf} text`,
      hint: `tokenwatch reads UTF-8; convert it first, e.g. \`iconv -f ${utf.replace(' ', '')} -t UTF-8 FILE > FILE.utf8\`` +
        ' (PowerShell: `Get-Content FILE | Set-Content -Encoding utf8 FILE.utf8`)',
    };
  }
  if (head.indexOf(0) !== -1) return { what: 'binary data' };
  const first = describeFirstRecord(head);
  if (first) return { what: `its first record is ${first.what}`, ...(first.hint ? { hint: first.hint } : {}) };
  return { what: 'unknown content' };
}

/**
 * What the first record of a JSON head looks like, for messages: its top-level keys (never its values) and the
 * closest known shape with the command that makes it readable. Undefined when the head does not start with JSON.
 */
export function describeFirstRecord(head: Buffer): { what: string; hint?: string } | undefined {
  const text = head.subarray(0, DETECT_HEAD_BYTES).toString('utf8');
  const i = skipWs(text, 0);
  if (text[i] !== '{' && text[i] !== '[') return undefined;
  const first = firstLine(text, i, head.length < DETECT_HEAD_BYTES);
  let value: unknown;
  let pretty = false;
  if (first.kind === 'value') value = first.value;
  else {
    try {
      value = JSON.parse(text.slice(i));
      pretty = true;
    } catch {
      // A pretty-printed document longer than the head cannot be parsed from it: say so (it may be valid JSON), and
      // name a Kubernetes object list by its opening keys.
      const cut = head.length >= DETECT_HEAD_BYTES;
      if (cut && first.kind !== 'long' && /^\{\s*"apiVersion"\s*:\s*"v1"\s*,\s*"items"\s*:\s*\[|"kind"\s*:\s*"\w*List"/.test(text.slice(i, i + 4096)) && /"items"\s*:\s*\[/.test(text)) {
        return { what: 'pretty-printed JSON longer than 64 KiB', hint: KUBE_LIST_HINT };
      }
      if (cut && first.kind !== 'long') return { what: 'pretty-printed JSON longer than 64 KiB that is not an audit event in a known shape' };
      return { what: first.kind === 'long' ? 'a JSON record longer than 64 KiB' : 'JSON that does not parse' };
    }
  }
  const hint = closestShapeHint(value);
  return { what: `${pretty ? 'pretty-printed JSON: ' : ''}${describeJsonValue(value)}`, ...(hint ? { hint } : {}) };
}

/**
 * Whether `head` (the first bytes of a record, leading whitespace removed) opens a batch document whose records are
 * its `items` or `records` array: an EventList (audit webhook batch) or an Event Hubs `{"records":[…]}` document.
 */
export function startsAsBatchDocument(head: Buffer): boolean {
  return BATCH_DOCUMENT_RE.test(head.subarray(0, 4096).toString('utf8'));
}

/** Line formats in which a line holding a NUL byte is skipped alone (see `detectFormat`). */
const NUL_TOLERANT_FORMATS: ReadonlySet<InputFormat> = new Set<InputFormat>(['audit-jsonl', 'wrapped-jsonl', 'cw-s3-export', 'aws-logs-tail']);

/** `b` without its lines (`\n`-separated) that hold a NUL byte. */
function withoutNulLines(b: Buffer): Buffer {
  const kept: Buffer[] = [];
  let pos = 0;
  while (pos < b.length) {
    const nl = b.indexOf(0x0a, pos);
    const end = nl === -1 ? b.length : nl + 1;
    const line = b.subarray(pos, end);
    if (line.indexOf(0) === -1) kept.push(line);
    pos = end;
  }
  return Buffer.concat(kept);
}

/** @streamparser/json paths of a `json-documents` input's records, chosen from its head (see `detectFormat`). */
export function documentPaths(head: Buffer): string[] {
  const text = head.subarray(0, 4096).toString('utf8');
  const i = skipWs(text, 0);
  if (text[i] === '[') return ['$.*'];
  return BATCH_DOCUMENT_RE.test(text.slice(i)) ? ['$.items.*', '$.records.*'] : ['$'];
}

function utf16Or32(b: Buffer): string | undefined {
  if (b.length >= 4 && b[0] === 0xff && b[1] === 0xfe && b[2] === 0 && b[3] === 0) return 'UTF-32LE';
  if (b.length >= 4 && b[0] === 0 && b[1] === 0 && b[2] === 0xfe && b[3] === 0xff) return 'UTF-32BE';
  if (b.length >= 2 && b[0] === 0xff && b[1] === 0xfe) return 'UTF-16LE';
  if (b.length >= 2 && b[0] === 0xfe && b[1] === 0xff) return 'UTF-16BE';
  // No BOM: ASCII in UTF-16 has a NUL in every other byte.
  const n = Math.min(b.length, 64) & ~1;
  if (n < 4) return undefined;
  let evenNul = 0;
  let oddNul = 0;
  for (let k = 0; k < n; k += 2) {
    if (b[k] === 0 && b[k + 1] !== 0) evenNul++;
    if (b[k] !== 0 && b[k + 1] === 0) oddNul++;
  }
  if (oddNul === n / 2) return 'UTF-16LE';
  if (evenNul === n / 2) return 'UTF-16BE';
  return undefined;
}
