/**
 * One CloudWatch Logs Insights result row → token use. Pure: no I/O, no clock. Shared by every reader of
 * Insights results (console CSV / JSON exports, `aws logs get-query-results --output json`) and usable from a
 * worker thread (each call handles one row on its own).
 *
 * A row is a map of field name → value (strings as Logs Insights prints them). Two kinds of rows carry a token use:
 * - rows with `@message` (the whole audit event, e.g. `fields @timestamp, @message | …`): read like any other
 *   audit record (`tokenUseFromRecordText`);
 * - rows of the EKS user guide's stale-token query (AWS EKS user guide, "Managing service accounts", section on
 *   bound service account tokens: `fields @timestamp | filter @logStream like /kube-apiserver-audit/ | filter
 *   @message like /seconds after warning threshold/ | parse @message "subject: *, seconds after warning
 *   threshold:*\"" as subject, elapsedtime`): `@timestamp`, `subject` and `elapsedtime` (seconds after the token's
 *   warnafter point). Each gives a stale use with its time and `warnAfter = time − elapsedtime`, hence the
 *   rejection date — but no pod, user agent, source IP or auditID.
 */
import { tokenUseFromRecordText } from './records.js';
import { parseServiceAccountUsername } from './annotations.js';
import type { ReadStats, TokenUse } from './types.js';

/** The per-query row cap of Logs Insights (AWS CloudWatch Logs quotas: "Query results: 10,000 rows"). */
export const INSIGHTS_MAX_ROWS = 10_000;

/** What kinds of rows one input held, for notices (see `ReadNotice`). */
export interface InsightsRowTally {
  /** Rows with `@message`. */
  messageRows: number;
  /** Rows of the EKS guide query (`subject`, `elapsedtime`). */
  guideRows: number;
  /** Rows with `subject` but no readable `@timestamp` (e.g. the guide's `stats … by subject` variant). */
  guideRowsWithoutTime: number;
}

/** A fresh, all-zero tally. */
export function createRowTally(): InsightsRowTally {
  return { messageRows: 0, guideRows: 0, guideRowsWithoutTime: 0 };
}

// Logs Insights prints @timestamp as `2022-08-24 14:25:33.659` (UTC, no zone); console JSON exports and
// hand-made files may hold ISO-8601 with a zone, or epoch milliseconds.
const INSIGHTS_TIME_RE = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?\s?(Z|UTC|[+-]\d{2}:?\d{2})?$/i;

/**
 * Parses a Logs Insights `@timestamp`: `YYYY-MM-DD HH:MM:SS[.fff]` (UTC, as Logs Insights prints it), the same
 * with `T` and/or a zone (`Z`, `UTC`, `+01:00`, `+0000`, optionally after a space), or epoch milliseconds (digits).
 *
 * @returns epoch ms UTC, or `undefined` when the value is none of these.
 */
export function parseInsightsTimestamp(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined;
  if (typeof value !== 'string') return undefined;
  const s = value.trim();
  if (/^\d{10,16}$/.test(s)) return Number(s);
  const m = INSIGHTS_TIME_RE.exec(s);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, se, frac, zone] = m;
  const ms = frac ? Math.floor(Number(`0.${frac}`) * 1000) : 0;
  let t = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(se), ms);
  if (zone && zone.toUpperCase() !== 'Z' && zone.toUpperCase() !== 'UTC') {
    const sign = zone[0] === '-' ? -1 : 1;
    const digits = zone.slice(1).replace(':', '');
    t -= sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2, 4))) * 60_000;
  }
  return Number.isFinite(t) ? t : undefined;
}

/**
 * Turns one row of `aws logs get-query-results` (`[{"field": "@timestamp", "value": "…"}, …]`) into a field map.
 *
 * @returns the map, or `undefined` when the row is not an array of `{field, value}` objects.
 */
export function queryResultCells(row: unknown): Record<string, string> | undefined {
  if (!Array.isArray(row)) return undefined;
  const out: Record<string, string> = {};
  for (const cell of row) {
    if (cell === null || typeof cell !== 'object') return undefined;
    const { field, value } = cell as { field?: unknown; value?: unknown };
    if (typeof field !== 'string') return undefined;
    if (typeof value === 'string') out[field] = value;
    else if (typeof value === 'number') out[field] = String(value);
  }
  return out;
}

/**
 * Reads one Insights row (field → value). Counts the row in `stats.events` or `stats.malformed` (the caller
 * counts it in `lines`) and, when given, in `tally`. Never throws.
 *
 * - `@message` present: the audit event in it, prefiltered like every record.
 * - `subject` and `elapsedtime` present (EKS guide query): a `stale` use at `@timestamp` with
 *   `secondsAfterWarning = elapsedtime` and `warnAfter = time − elapsedtime·1000`; `auditID` is
 *   `guide:<subject>|<time ms>|<elapsedtime>` (not `@ptr`, which CSV exports lack), so the same row read twice —
 *   overlapping exports, or the CSV and the JSON of one query — counts once. Rows carry no auditID, so several
 *   audit stages of one request count separately. Malformed when the time or seconds do not parse.
 * - anything else: malformed.
 */
export function tokenUseFromInsightsRow(
  row: Readonly<Record<string, unknown>>,
  stats: ReadStats,
  tally?: InsightsRowTally,
): TokenUse | undefined {
  const message = row['@message'];
  if (typeof message === 'string') {
    if (tally) tally.messageRows++;
    return tokenUseFromRecordText(message, stats);
  }
  const subject = typeof row['subject'] === 'string' ? row['subject'].trim() : undefined;
  const elapsed = row['elapsedtime'] ?? row['max(elapsedtime)'];
  if (subject === undefined || (typeof elapsed !== 'string' && typeof elapsed !== 'number')) {
    if (tally && subject !== undefined && row['@timestamp'] === undefined) tally.guideRowsWithoutTime++;
    stats.malformed++;
    return undefined;
  }
  const secs = typeof elapsed === 'number' ? elapsed : /^\s*\d+\s*\.?\s*$/.test(elapsed) ? Number.parseInt(elapsed.trim(), 10) : NaN;
  const time = parseInsightsTimestamp(row['@timestamp']);
  if (subject === '' || !Number.isSafeInteger(secs) || secs < 0 || time === undefined) {
    if (tally && time === undefined) tally.guideRowsWithoutTime++;
    stats.malformed++;
    return undefined;
  }
  if (tally) tally.guideRows++;
  stats.events++;
  const use: TokenUse = {
    kind: 'stale',
    auditID: `guide:${subject}|${time}|${secs}`,
    time,
    subject,
    secondsAfterWarning: secs,
    warnAfter: time - secs * 1000,
    sourceIPs: [],
  };
  const sa = parseServiceAccountUsername(subject);
  if (sa) {
    use.namespace = sa.namespace;
    use.serviceAccount = sa.name;
  }
  return use;
}
