/**
 * Per-record building blocks shared by the file reader and the live sources (file tail, CloudWatch):
 * the cheap prefilter, parsing one audit event's JSON text, and the `ReadStats` counting rules.
 *
 * Pure: no I/O. Counting rules for one record (a JSON line, a CloudWatch log event's `message`, an
 * export row), applied by the caller after it counts the record in `stats.lines`:
 * - prefilter says "no token signal" → `events++` when the text looks like a JSON object, else `malformed++`;
 * - otherwise it is parsed: unparsable JSON, not an object with an `auditID`, or a token signal that cannot
 *   be read (e.g. a garbled stale-token value, no valid timestamp) → `malformed++`; else `events++`.
 * `tokenUses` and `duplicates` are counted by whoever dedupes by `auditID`.
 */
import type { ReadStats, TokenUse } from './types.js';
import { hasTokenSignal, isAuditEvent, toTokenUse } from './token-use.js';
import { unwrapAuditEvents } from './shapes.js';
import { PREFILTER_ANCHORS, PREFILTER_NEEDLES } from './terms.js';
import { needleSearch, type NeedleSearch } from './needle-search.js';

/**
 * The prefilter's needles ({@link PREFILTER_NEEDLES}, derived from the one list of terms in `terms.ts`): the token
 * annotations' key prefix `authentication.k8s.io/` and the two marks of a rejected request's audit event,
 * `Authentication failed` (upstream's message) and `Unauthorized` (the `reason`/`message` of the other forms). None
 * contains `"` or `\`, so they also match inside a JSON-string-escaped (CloudWatch) or CSV-quoted message.
 */
export const PREFILTER_NEEDLE_BUFFERS: readonly Buffer[] = PREFILTER_NEEDLES.map((n) => Buffer.from(n, 'latin1'));

/**
 * This thread's search for the prefilter's needles, tested on their {@link PREFILTER_ANCHORS} (`needle-search.ts`:
 * one per thread, shared by every reader of it).
 */
export function prefilterSearch(): NeedleSearch {
  return needleSearch(PREFILTER_NEEDLE_BUFFERS, { anchors: PREFILTER_ANCHORS });
}

/**
 * Cheap prefilter: can this text (an audit event's JSON, possibly still escaped inside a CloudWatch
 * export) hold a token use? False positives are fine (the event is parsed and dropped); there are no
 * false negatives for events the API server writes (see {@link PREFILTER_NEEDLES}).
 */
export function mayHoldTokenUse(text: string | Buffer): boolean {
  if (typeof text === 'string') return PREFILTER_NEEDLES.some((n) => text.includes(n));
  return PREFILTER_NEEDLE_BUFFERS.some((n) => text.indexOf(n) !== -1);
}

/** True when the text, trimmed of whitespace, starts with `{` and ends with `}`. */
export function looksLikeJsonObject(text: string): boolean {
  let s = 0;
  let e = text.length;
  while (s < e && isWs(text.charCodeAt(s))) s++;
  while (e > s && isWs(text.charCodeAt(e - 1))) e--;
  return e - s >= 2 && text.charCodeAt(s) === 0x7b && text.charCodeAt(e - 1) === 0x7d;
}

function isWs(c: number): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0d || c === 0x0a;
}

/**
 * Counts a record the prefilter rejected: `events++` if it looks like a JSON object, else `malformed++`.
 * (The record itself is counted in `lines` by the caller.)
 */
export function countUnparsedRecord(text: string, stats: ReadStats): void {
  if (looksLikeJsonObject(text)) stats.events++;
  else stats.malformed++;
}

/**
 * Classifies an already-parsed JSON value as an audit event and token use, counting it in `stats`
 * (`events` or `malformed`, see the module doc).
 */
export function tokenUseFromValue(value: unknown, stats: ReadStats): TokenUse | undefined {
  if (!isAuditEvent(value)) {
    stats.malformed++;
    return undefined;
  }
  const use = toTokenUse(value);
  if (use === undefined && hasTokenSignal(value)) {
    stats.malformed++;
    return undefined;
  }
  stats.events++;
  return use;
}

/**
 * Parses one audit event's JSON text and returns its token use, if any. Counts the record in
 * `stats.events` or `stats.malformed` (never `lines`, `tokenUses` or `duplicates`). Never throws.
 */
export function tokenUseFromJson(text: string, stats: ReadStats): TokenUse | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    stats.malformed++;
    return undefined;
  }
  return tokenUseFromValue(value, stats);
}

/**
 * Handles one record's text the way every reader does: prefilter, then parse only when needed.
 * Counts `events`/`malformed` (not `lines`). Never throws.
 */
export function tokenUseFromRecordText(text: string, stats: ReadStats): TokenUse | undefined {
  if (!mayHoldTokenUse(text)) {
    countUnparsedRecord(text, stats);
    return undefined;
  }
  return tokenUseFromJson(text, stats);
}

/** What the wrapped-shape readers saw of the platforms' wrappers (for notices: GKE's missing fields, AKS categories). */
export interface ShapeTally {
  /** GKE `LogEntry`s parsed. */
  gkeEntries: number;
  /** AKS diagnostic categories seen (on parsed records, and in the file's head). */
  aksCategories: Set<string>;
  /** GKE Cloud Audit Logs seen in the file's head: `activity`, `data_access`. */
  gkeLogs: Set<string>;
}

/** A fresh, empty {@link ShapeTally}. */
export function createShapeTally(): ShapeTally {
  return { gkeEntries: 0, aksCategories: new Set(), gkeLogs: new Set() };
}

/**
 * Parses one record of any shape of `shapes.ts` (an event, an EventList, a GKE entry, an AKS record, a Loki line, …)
 * and pushes the token uses of the events inside to `out`. The caller counted the record once in `stats.lines`; a
 * record holding n > 1 events adds n − 1 (so `lines = events + malformed` still holds), each event counted
 * in `events` or `malformed` as {@link tokenUseFromValue} does. Unparsable JSON, an unknown shape or a wrapper whose
 * inner event is unreadable → `malformed`; an empty batch → one event. Never throws.
 */
export function tokenUsesFromWrappedText(text: string, stats: ReadStats, out: TokenUse[], tally?: ShapeTally): void {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    stats.malformed++;
    return;
  }
  tokenUsesFromWrappedValue(value, stats, out, tally);
}

/** {@link tokenUsesFromWrappedText} for an already-parsed value (same counting). */
export function tokenUsesFromWrappedValue(value: unknown, stats: ReadStats, out: TokenUse[], tally?: ShapeTally): void {
  const u = unwrapAuditEvents(value);
  if (!u) {
    stats.malformed++;
    return;
  }
  if (tally) {
    if (u.gke) tally.gkeEntries++;
    for (const c of u.aksCategories ?? []) tally.aksCategories.add(c);
  }
  if (u.events.length === 0) {
    if (u.shape === 'event-list' || u.shape === 'event-hubs' || u.shape === 'array') stats.events++;
    else stats.malformed++;
    return;
  }
  stats.lines += u.events.length - 1;
  for (const e of u.events) {
    const use = tokenUseFromValue(e, stats);
    if (use) out.push(use);
  }
}
