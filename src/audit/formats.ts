/**
 * Input format detection by content (never by file name). Pure.
 */
import type { InputFormat } from './types.js';

/** Bytes of (decompressed) input that {@link detectFormat} wants to see: 64 KiB. */
export const DETECT_HEAD_BYTES = 64 * 1024;

/** True when the bytes start with the gzip magic `1f 8b` (RFC 1952 §2.3.1). */
export function isGzip(head: Buffer): boolean {
  return head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b;
}

// `aws logs filter-log-events` (and get-log-events) output: an object whose first key is one of these.
const FILTER_LOG_EVENTS_RE = /^\{\s*"(?:events|searchedLogStreams|nextToken|nextForwardToken|nextBackwardToken)"\s*:/;
// Markers of an audit.k8s.io Event in its first line (Go encodes kind, apiVersion, level, auditID first).
const AUDIT_EVENT_MARKERS = ['"auditID"', '"audit.k8s.io/', '"kind":"Event"'];

function skipWs(text: string, i: number): number {
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d && c !== 0xfeff) break;
    i++;
  }
  return i;
}

/**
 * Detects the input format from the first bytes of a file (already decompressed; give it up to
 * {@link DETECT_HEAD_BYTES}):
 * - `filter-log-events`: a JSON object whose first key is `events` (or `searchedLogStreams`, `nextToken`):
 *   `aws logs filter-log-events` output, pretty-printed or compact;
 * - `insights-json`: a JSON array (`[` then `{` or `]`): a CloudWatch Logs Insights export of rows
 *   with `@timestamp` and `@message`;
 * - `audit-jsonl`: a JSON object with audit-event markers (`"auditID"`, `audit.k8s.io/`, `"kind":"Event"`);
 * - `insights-csv`: a first line (header) naming both `@timestamp` and `@message`.
 *
 * @returns the format, or `undefined` for anything else, including binary data (a NUL byte) and empty input.
 */
export function detectFormat(head: Buffer): InputFormat | undefined {
  if (head.length > DETECT_HEAD_BYTES) head = head.subarray(0, DETECT_HEAD_BYTES);
  if (head.length === 0 || isGzip(head)) return undefined;
  if (head.indexOf(0) !== -1) return undefined; // binary: text formats never hold NUL
  const text = head.toString('utf8');
  const i = skipWs(text, 0);
  if (i >= text.length) return undefined;
  const c = text[i];
  if (c === '[') {
    const j = skipWs(text, i + 1);
    if (j >= text.length || text[j] === '{' || text[j] === ']') return 'insights-json';
    return undefined;
  }
  if (c === '{') {
    if (FILTER_LOG_EVENTS_RE.test(text.slice(i, i + 4096))) return 'filter-log-events';
    return AUDIT_EVENT_MARKERS.some((m) => text.includes(m)) ? 'audit-jsonl' : undefined;
  }
  const nl = text.indexOf('\n', i);
  const header = text.slice(i, nl === -1 ? text.length : nl);
  if (header.includes('@timestamp') && header.includes('@message')) return 'insights-csv';
  return undefined;
}
