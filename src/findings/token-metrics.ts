/**
 * API-server ServiceAccount token counters: extraction from `/metrics` text, comparison of two scrapes, the
 * cluster-level finding they justify, and the `/tokens status` line. Pure (no I/O; time is a parameter).
 *
 * Facts (kubernetes `pkg/serviceaccount/metrics.go`, all ALPHA counters **without labels**, registered in the API
 * server's legacy registry):
 * - `serviceaccount_stale_tokens_total` — projected tokens used after their `warnafter` (since 1.20);
 * - `serviceaccount_valid_tokens_total` — projected tokens used before `warnafter`;
 * - `serviceaccount_legacy_tokens_total` — Secret-based (legacy) tokens used;
 * - `serviceaccount_legacy_auto_token_uses_total`, `serviceaccount_legacy_manual_token_uses_total` — legacy uses
 *   split by auto-generated / manually created Secret (1.28+);
 * - `serviceaccount_invalid_legacy_auto_token_uses_total` — uses of auto-generated legacy tokens that were
 *   invalidated by the legacy-token cleaner (1.29+; the request is rejected; Kubernetes docs "Legacy
 *   ServiceAccount token cleaner").
 * `process_start_time_seconds` (client_golang process collector, epoch seconds as a float) identifies the API-server
 * process: the counters are per process and start from 0 when it restarts, and behind a load balancer (EKS)
 * successive scrapes reach different replicas. So a rate is computed only between two scrapes of the same process
 * (same start time), and a counter that went down is a reset, never a negative rate.
 */
import { DAY_MS, HOUR_SECONDS } from '../core/units.js';
import { countOf } from '../core/plural.js';
import { ErrorCode, TokenwatchError } from '../errors.js';
import { findingId } from './build.js';
import type { Finding, FindingKind, Severity } from './types.js';
import { parsePrometheusText } from './prometheus-text.js';

/** The counters tokenwatch reads, by short key. */
export const TOKEN_COUNTERS = {
  stale: 'serviceaccount_stale_tokens_total',
  valid: 'serviceaccount_valid_tokens_total',
  legacy: 'serviceaccount_legacy_tokens_total',
  legacyAuto: 'serviceaccount_legacy_auto_token_uses_total',
  legacyManual: 'serviceaccount_legacy_manual_token_uses_total',
  invalidLegacyAuto: 'serviceaccount_invalid_legacy_auto_token_uses_total',
} as const;

/** Short key of a token counter. */
export type TokenCounter = keyof typeof TOKEN_COUNTERS;

/** Counter values by key; a key is absent when the API server does not export that counter (older version). */
export type TokenCounters = Partial<Record<TokenCounter, number>>;

/** The metric naming the API-server process (epoch seconds, float). */
export const PROCESS_START_METRIC = 'process_start_time_seconds';

/** Namespace and ServiceAccount of a cluster-level finding (no Kubernetes name can be `*`). */
export const CLUSTER_WIDE = '*';

/** One scrape of one API-server process. Times are epoch ms UTC. */
export interface TokenMetricsSample {
  /** When the scrape was taken (or, for a saved file, the reference time `--now`). */
  scrapedAt: number;
  /** `process_start_time_seconds` × 1000, rounded; null when the text lacks it (then no rate can be computed). */
  processStartAt: number | null;
  counters: TokenCounters;
}

/** The text is not usable: no token counters at all (wrong endpoint, not Prometheus text, too old a server). */
export class TokenMetricsError extends TokenwatchError {
  constructor(message: string) {
    super(ErrorCode.TokenMetricsInvalid, message);
    this.name = 'TokenMetricsError';
  }
}

/**
 * Extracts the token counters and the process start time from `/metrics` text. Several samples of one counter
 * (labels added by a future version) are summed.
 * @param scrapedAt epoch ms UTC.
 * @throws {TokenMetricsError} when no `serviceaccount_*` token counter is present (message says what was found).
 */
export function tokenMetricsFromText(text: string, scrapedAt: number): TokenMetricsSample {
  const parsed = parsePrometheusText(text);
  const byName = new Map<string, TokenCounter>(Object.entries(TOKEN_COUNTERS).map(([k, v]) => [v, k as TokenCounter]));
  const counters: TokenCounters = {};
  let processStartAt: number | null = null;
  for (const s of parsed.samples) {
    const key = byName.get(s.name);
    if (key !== undefined) {
      if (Number.isFinite(s.value)) counters[key] = (counters[key] ?? 0) + s.value;
    } else if (s.name === PROCESS_START_METRIC && Number.isFinite(s.value) && s.value > 0) {
      processStartAt = Math.round(s.value * 1000);
    }
  }
  if (Object.keys(counters).length === 0) {
    const what =
      parsed.samples.length === 0
        ? `not Prometheus text (${countOf(parsed.malformed, 'unreadable line')}${parsed.malformedLines.length ? `, first at line ${parsed.malformedLines[0]}` : ''})`
        : `${countOf(parsed.samples.length, 'sample')} but no serviceaccount_* token counter (is this the API server's /metrics?)`;
    throw new TokenMetricsError(what);
  }
  return { scrapedAt, processStartAt, counters };
}

/** Whether two samples come from the same API-server process (same known start time). */
export function sameProcess(a: TokenMetricsSample, b: TokenMetricsSample): boolean {
  return a.processStartAt !== null && a.processStartAt === b.processStartAt;
}

/** Result of {@link compareSamples}. */
export type SampleComparison =
  /** No earlier scrape of this process is known (first scrape, another replica, or a restart). */
  | { kind: 'first' }
  /** Same process, counters did not go down: `deltas` over `seconds`. */
  | { kind: 'increase'; previous: TokenMetricsSample; seconds: number; deltas: TokenCounters }
  /** Same start time but a counter went down: treated as a reset, no rate. */
  | { kind: 'reset'; previous: TokenMetricsSample };

/**
 * Compares a scrape with the previous scrape of the same process (`previous` may be any sample or undefined;
 * one of another process, or an earlier-or-equal scrape time, gives `first`).
 */
export function compareSamples(previous: TokenMetricsSample | undefined, next: TokenMetricsSample): SampleComparison {
  if (previous === undefined || !sameProcess(previous, next) || next.scrapedAt <= previous.scrapedAt) return { kind: 'first' };
  const deltas: TokenCounters = {};
  for (const key of Object.keys(next.counters) as TokenCounter[]) {
    const a = previous.counters[key];
    const b = next.counters[key]!;
    if (a === undefined) continue;
    if (b < a) return { kind: 'reset', previous };
    deltas[key] = b - a;
  }
  return { kind: 'increase', previous, seconds: (next.scrapedAt - previous.scrapedAt) / 1000, deltas };
}

/** Totals since the process started and their average rates. */
export interface SinceStart {
  /** Epoch ms UTC, or null when unknown (then `uptimeSeconds` and rates are null). */
  processStartAt: number | null;
  /** Reference time, epoch ms UTC. */
  at: number;
  uptimeSeconds: number | null;
  totals: TokenCounters;
  /** Average uses per hour since the process started, per counter. */
  perHour: TokenCounters | null;
}

/**
 * Totals since the API-server process started and their average hourly rate as of `at` (epoch ms).
 * @throws {TokenMetricsError} when `at` is before the process start.
 */
export function sinceStart(sample: TokenMetricsSample, at: number): SinceStart {
  if (sample.processStartAt === null) return { processStartAt: null, at, uptimeSeconds: null, totals: { ...sample.counters }, perHour: null };
  const uptimeSeconds = (at - sample.processStartAt) / 1000;
  if (uptimeSeconds < 0) {
    throw new TokenMetricsError(`reference time ${new Date(at).toISOString()} is before the API-server process started (${new Date(sample.processStartAt).toISOString()})`);
  }
  const perHour: TokenCounters = {};
  for (const [k, v] of Object.entries(sample.counters) as [TokenCounter, number][]) perHour[k] = uptimeSeconds > 0 ? (v / uptimeSeconds) * HOUR_SECONDS : 0;
  return { processStartAt: sample.processStartAt, at, uptimeSeconds, totals: { ...sample.counters }, perHour };
}

/** Uses per hour of `key` in an `increase` comparison, or null. */
export function ratePerHour(cmp: SampleComparison, key: TokenCounter): number | null {
  if (cmp.kind !== 'increase' || cmp.seconds <= 0) return null;
  const d = cmp.deltas[key];
  return d === undefined ? null : (d / cmp.seconds) * HOUR_SECONDS;
}

/** Options of {@link metricsFindings}. */
export interface MetricsFindingOptions {
  cluster: string;
  /** The fresh scrape. */
  sample: TokenMetricsSample;
  /** Its comparison with the previous scrape of the same process. */
  comparison: SampleComparison;
  /** The audit-derived findings of the same poll (may be empty: audit log off). */
  auditFindings: readonly Finding[];
  /**
   * An audit finding explains an increase when it was seen no earlier than this long before the previous scrape,
   * ms (audit delivery lags; CloudWatch "within a few minutes"). Default 15 min.
   */
  explainWindowMs?: number;
  /** Distinct API-server processes seen recently (for the "per replica" wording); default 1. */
  replicasSeen?: number;
}

const iso = (ms: number): string => new Date(ms).toISOString();

/** The "per replica" caveat shown with every metrics figure. */
export function replicaCaveat(replicasSeen: number): string {
  return replicasSeen > 1
    ? `per API-server replica reached (${replicasSeen} replicas seen; each counts only its own requests — not a cluster-wide figure)`
    : 'per API-server replica reached (a load balancer may spread requests over several; not a cluster-wide figure)';
}

/** {@link replicaCaveat} without parentheses, for the one-line status. */
export function flatReplicaCaveat(replicasSeen: number): string {
  return replicasSeen > 1
    ? `per API-server replica reached: ${replicasSeen} replicas seen, each counts only its own requests, not a cluster-wide figure`
    : 'per API-server replica reached: a load balancer may spread requests over several, not a cluster-wide figure';
}

/**
 * Cluster-level findings (namespace and ServiceAccount {@link CLUSTER_WIDE}) raised when, since the previous scrape
 * of the same API-server process, stale-token uses or invalidated-legacy-token uses increased and no audit-derived
 * finding of the same kind was seen in that interval. Empty for `first` and `reset` comparisons.
 * Severity: `critical` for invalidated legacy tokens (those requests are rejected now), `warning` for stale tokens
 * (they will be rejected; when is unknown without the token).
 */
export function metricsFindings(o: MetricsFindingOptions): Finding[] {
  if (o.comparison.kind !== 'increase') return [];
  const cmp = o.comparison;
  const window = o.explainWindowMs ?? 15 * 60_000;
  const since = cmp.previous.scrapedAt - window;
  const explained = (kind: FindingKind): boolean =>
    o.auditFindings.some((f) => f.kind === kind && f.namespace !== CLUSTER_WIDE && Date.parse(f.lastSeen) >= since);
  const caveat = replicaCaveat(o.replicasSeen ?? 1);
  const minutes = Math.max(1, Math.round(cmp.seconds / 60));
  const started = o.sample.processStartAt !== null ? iso(o.sample.processStartAt) : 'unknown';
  const out: Finding[] = [];
  const make = (kind: FindingKind, counter: TokenCounter, severity: Severity, what: string, fix: string): void => {
    const delta = cmp.deltas[counter] ?? 0;
    if (delta <= 0 || explained(kind)) return;
    const perHour = Math.round((delta / cmp.seconds) * HOUR_SECONDS);
    out.push({
      id: findingId(o.cluster, CLUSTER_WIDE, CLUSTER_WIDE, kind),
      cluster: o.cluster,
      namespace: CLUSTER_WIDE,
      serviceAccount: CLUSTER_WIDE,
      kind,
      severity,
      requests: delta,
      firstSeen: iso(cmp.previous.scrapedAt),
      lastSeen: iso(o.sample.scrapedAt),
      maxSecondsAfterWarning: null,
      rejectionAt: null,
      tokens: [],
      pods: [],
      workloads: [],
      userAgents: [],
      sourceIPs: [],
      cause: {
        id: 'unknown',
        component: null,
        summary: `API-server metrics: ${delta} ${what} in ${minutes} min (≈${perHour}/h), ${caveat}. No audit event names the clients.`,
        fix,
        evidence: [
          `${TOKEN_COUNTERS[counter]} rose by ${delta} between ${iso(cmp.previous.scrapedAt)} and ${iso(o.sample.scrapedAt)} on the API-server process started ${started}`,
          'no audit-derived finding of this kind in that interval (audit log off, or its events not delivered yet)',
        ],
        sources: ['kubernetes pkg/serviceaccount/metrics.go'],
      },
    });
  };
  make('stale-token', 'stale', 'warning', 'uses of stale bound tokens', 'Find the clients: enable API-server audit logging (EKS: the "audit" control-plane log type) or deploy the tokenwatch node probe (manifests/probe) to see token files on the nodes.');
  make('legacy-token', 'invalidLegacyAuto', 'critical', 'uses of invalidated legacy Secret tokens (rejected)', 'Find the clients (audit logging or the node probe) and move them to bound tokens; see Kubernetes docs "Legacy ServiceAccount token cleaner".');
  return out;
}

/** Inputs of {@link metricsStatusLine}. */
export interface MetricsStatusInput {
  /** Recent samples of the cluster, any order (e.g. the last 24 h). */
  samples: readonly TokenMetricsSample[];
  /** Whether an audit source is configured. */
  auditLog: boolean;
  /** Last scrape error, if the last scrape failed. */
  error?: string;
}

/** Formats a per-hour rate: integers above 10, one decimal below. */
function fmtRate(n: number): string {
  return n >= 10 ? String(Math.round(n)) : String(Math.round(n * 10) / 10);
}

/**
 * The `/tokens status` line about API-server token metrics, e.g.
 * `stale tokens in use: 42/h, audit log: off — which clients? enable audit logging or run the node probe
 * (per API-server replica reached …)`. The rate is the latest one between two scrapes of the same process, or else
 * the average since the newest process started. Undefined when there is no sample and no error.
 */
export function metricsStatusLine(input: MetricsStatusInput): string | undefined {
  const sorted = [...input.samples].sort((a, b) => a.scrapedAt - b.scrapedAt);
  const latest = sorted.at(-1);
  if (latest === undefined) return input.error ? `API-server token metrics: unavailable (${input.error})` : undefined;
  const previous = [...sorted.slice(0, -1)].reverse().find((s) => sameProcess(s, latest));
  const cmp = compareSamples(previous, latest);
  let stale = ratePerHour(cmp, 'stale');
  let how = `between the last two scrapes of one replica`;
  if (stale === null) {
    const avg = sinceStart(latest, latest.scrapedAt).perHour?.stale;
    stale = avg ?? null;
    how = 'average since that replica started';
  }
  const invalid = ratePerHour(cmp, 'invalidLegacyAuto');
  const replicas = new Set(sorted.map((s) => s.processStartAt).filter((x) => x !== null)).size || 1;
  const parts = [`stale tokens in use: ${stale === null ? 'unknown' : `${fmtRate(stale)}/h`}`];
  if (invalid !== null && invalid > 0) parts.push(`invalidated legacy tokens: ${fmtRate(invalid)}/h`);
  parts.push(`audit log: ${input.auditLog ? 'on' : 'off'}`);
  // One flat line of " · "-separated parts (no nested parentheses): it is read at a glance in `/tokens status`.
  let line = parts.join(' · ');
  if (!input.auditLog && (stale ?? 0) > 0) line += ' — which clients? enable audit logging or run the node probe';
  line += ` · ${how} · ${flatReplicaCaveat(replicas)}`;
  if (input.error) line += ` · last scrape failed: ${input.error}`;
  return line;
}

/** Window of recent scrapes used to count replicas for the status wording, ms (24 h). */
export const REPLICA_WINDOW_MS = DAY_MS;
