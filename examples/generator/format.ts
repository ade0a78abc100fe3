/**
 * Serialisation helpers that reproduce what the real producers print, byte for byte where it matters:
 * Go's `encoding/json` (audit log lines, kubectl output), the AWS CLI's JSON output and the CloudWatch Logs
 * Insights console's timestamp format.
 */

/** Milliseconds per second / minute / hour / day. */
export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

/** Parses an ISO-8601 UTC instant to epoch ms; throws on a malformed value (generator constants only). */
export function ms(iso: string): number {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) throw new Error(`bad time constant ${iso}`);
  return t;
}

/**
 * RFC 3339 with microseconds, UTC, as Go's `metav1.MicroTime` marshals (`2026-11-20T11:59:58.123456Z`).
 * @param us epoch microseconds (integer).
 */
export function microTime(us: number): string {
  const msPart = Math.floor(us / 1000);
  const iso = new Date(msPart).toISOString();
  const frac = String(((us % 1_000_000) + 1_000_000) % 1_000_000).padStart(6, '0');
  return `${iso.slice(0, 19)}.${frac}Z`;
}

/** RFC 3339 without fraction, as `metav1.Time` marshals (`2026-11-20T11:59:58Z`). @param t epoch ms. */
export function rfc3339(t: number): string {
  return new Date(Math.floor(t / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

/** ISO-8601 with milliseconds (`2026-11-20T11:59:58.123Z`), the form tokenwatch's JSON contract uses. */
export function iso(t: number): string {
  return new Date(t).toISOString();
}

/** Logs Insights console timestamp, UTC: `2026-11-20 11:59:00.123`. @param t epoch ms. */
export function insightsTime(t: number): string {
  return new Date(t).toISOString().replace('T', ' ').replace('Z', '');
}

/**
 * Go `encoding/json` escapes `<`, `>`, `&`, U+2028 and U+2029 inside strings (HTML-safe by default), which is
 * why real audit logs show `\u0026` in request URIs. Applied to a JSON text produced by `JSON.stringify`;
 * safe because these characters can only occur inside string literals there.
 */
export function goEscape(json: string): string {
  return json.replace(/[<>&\u2028\u2029]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

/** Compact JSON as Go's `json.Marshal` prints it (key order = insertion order of `v`). */
export function goJson(v: unknown): string {
  return goEscape(JSON.stringify(v));
}

/** Deep copy of `v` with every object's keys sorted (Go marshals `map[string]interface{}` sorted). */
export function sortKeysDeep(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeysDeep);
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) out[k] = sortKeysDeep((v as Record<string, unknown>)[k]);
    return out;
  }
  return v;
}

/** `kubectl get -o json` output: unstructured objects (keys sorted), 4-space `json.MarshalIndent`, newline. */
export function kubectlJson(v: unknown): string {
  return goEscape(JSON.stringify(sortKeysDeep(v), null, 4)) + '\n';
}

/** AWS CLI v2 `--output json`: Python `json.dumps(indent=4)`, key order as returned, newline. */
export function awsCliJson(v: unknown): string {
  return JSON.stringify(v, null, 4) + '\n';
}

/** One RFC 4180 CSV field: quoted (inner quotes doubled) when it holds a quote, comma or line break. */
export function csvField(s: string): string {
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}
