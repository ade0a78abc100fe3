/**
 * "Is it safe to turn token extension off?" — the readiness verdict of one cluster.
 *
 * CIS Kubernetes Benchmark 1.2.30 asks for `--service-account-extend-token-expiration=false`
 * (https://www.cisecurity.org/benchmark/kubernetes). With extension on (the default since Kubernetes 1.20), the API
 * server accepts a projected token past its one-hour `exp` and annotates the request
 * `authentication.k8s.io/stale-token` (kubernetes `pkg/serviceaccount/claims.go`,
 * https://github.com/kubernetes/kubernetes/blob/master/pkg/serviceaccount/claims.go); with extension off, the same
 * request fails with 401. So every client with a stale-token finding would break the moment extension is off, and a
 * cluster is safe only when a long enough, fully read audit window shows no stale use at all.
 *
 * Verdicts (docs/design/contracts.md "--format json", docs/scan.md "Is it safe to turn token extension off?"):
 * - `not-safe`: N clients (stale-token findings, one per ServiceAccount) presented a stale token in the window — each
 *   with its workloads, last use and the fix of its cause. Seen stale use is certain however short the window;
 * - `unknown`: no stale use seen, but the audit data cannot prove it: the log is blind (no audit events read, or
 *   a source says it cannot see token annotations), the data is incomplete (a partial, capped or truncated input,
 *   failed polls), or the window is shorter than the minimum (default {@link DEFAULT_READINESS_MIN_WINDOW_MS}, 7 days:
 *   a client that refreshes a cached token only daily or weekly shows up only in a window that long);
 *   Also when event times were left out as inconsistent (a wrong clock; the summary starts
 *   `unknown: audit timestamps inconsistent`): the window cannot be trusted;
 * - `safe`: no stale use in a window at least that long, with the window and the coverage it relied on;
 * - `extension-already-off`: the cluster does not extend tokens (AKS with the OIDC issuer enabled, Azure/AKS#4373:
 *   config `audit.azure.tokenExtension: off`). The question is moot: no stale-token annotation is ever written there,
 *   and a client that caches its token already fails with 401 an hour after its pod starts — its 401 findings say so.
 *
 * Pure: no I/O, times passed in (epoch ms UTC).
 */
import { DAY_MS } from '../core/units.js';
import { groupedNumber } from '../core/plural.js';
import type { WorkloadRef } from '../cluster/types.js';
import type { Finding } from './types.js';

/** Default minimum audit window for a `safe` verdict: 7 days (clients that refresh a cached token weekly are seen). */
export const DEFAULT_READINESS_MIN_WINDOW_MS = 7 * DAY_MS;

/** The verdict values (contract, additive). */
export type ReadinessVerdict = 'safe' | 'not-safe' | 'unknown' | 'extension-already-off';

/** What the audit data behind a verdict covered. Times are epoch ms UTC. */
export interface ReadinessCoverage {
  /** Earliest event time of the data; undefined when unknown. */
  windowStart?: number;
  /** Latest event time of the data; undefined when unknown. */
  windowEnd?: number;
  /**
   * Audit events (lines, rows or records) read in the window; 0 means the log showed nothing (blind). Leave it out
   * when the source reads only matching events (live mode's filtered CloudWatch queries: none is what a safe cluster
   * gives).
   */
  events?: number;
  /** Live mode: polls of the window that succeeded and failed. */
  polls?: { succeeded: number; failed: number };
  /** Why the audit log cannot show stale-token annotations at all (a blind log), when known. */
  blind?: string;
  /** Why the data may be incomplete (partial or truncated inputs, failed polls); empty when complete. */
  gaps: string[];
  /**
   * Set when event times were left out as inconsistent (a wrong clock on a control-plane node, forged stamps;
   * `src/findings/clock-skew.ts`): what was left out. The window may then be wrong, so the verdict is never `safe`.
   */
  inconsistentTimes?: string;
}

/** One client that would break (contract, additive: the `readiness.clients[]` entries of the `scan` JSON). */
export interface ReadinessClient {
  /** Id of its stale-token finding. */
  findingId: string;
  namespace: string;
  serviceAccount: string;
  workloads: WorkloadRef[];
  /** Last stale use, ISO-8601 UTC. */
  lastUse: string;
  /** Cause id and fix of the finding. */
  cause: string;
  fix: string;
}

/** The readiness verdict of one cluster (the `readiness` object of the `scan` JSON; contract, additive). */
export interface Readiness {
  cluster: string;
  verdict: ReadinessVerdict;
  /** One line for people: the verdict with its reason, window and coverage. */
  summary: string;
  /** Why the verdict is `unknown` (empty otherwise). */
  reasons: string[];
  window: { start: string | null; end: string | null; seconds: number | null; minimumSeconds: number };
  coverage: { events: number | null; polls: { succeeded: number; failed: number } | null; blind: string | null; gaps: string[] };
  /** Clients that would break (stale-token findings), most recent last use first; empty unless `not-safe`. */
  clients: ReadinessClient[];
}

/** Input of {@link readinessVerdict}. */
export interface ReadinessInput {
  cluster: string;
  /** Findings of the cluster; only `stale-token` ones count (legacy tokens are not extended, 401s already fail). */
  findings: readonly Finding[];
  coverage: ReadinessCoverage;
  /** Minimum window for `safe`, ms; default {@link DEFAULT_READINESS_MIN_WINDOW_MS}. */
  minWindowMs?: number;
  /** The cluster does not extend tokens (known from its config): verdict `extension-already-off`. */
  extensionOff?: boolean;
}

/**
 * The verdict for one cluster (see the module docstring for the rules).
 * @throws never; a negative or non-finite `minWindowMs` counts as the default.
 */
export function readinessVerdict(input: ReadinessInput): Readiness {
  const min = input.minWindowMs !== undefined && Number.isFinite(input.minWindowMs) && input.minWindowMs >= 0 ? input.minWindowMs : DEFAULT_READINESS_MIN_WINDOW_MS;
  const { coverage: c } = input;
  const length = c.windowStart !== undefined && c.windowEnd !== undefined ? Math.max(0, c.windowEnd - c.windowStart) : undefined;
  const clients = input.findings
    .filter((f) => f.kind === 'stale-token' && f.cluster === input.cluster)
    .map(
      (f): ReadinessClient => ({
        findingId: f.id,
        namespace: f.namespace,
        serviceAccount: f.serviceAccount,
        workloads: f.workloads.map((w) => ({ kind: w.kind, namespace: w.namespace, name: w.name })),
        lastUse: f.lastSeen,
        cause: f.cause.id,
        fix: f.cause.fix,
      }),
    )
    .sort((a, b) => (a.lastUse < b.lastUse ? 1 : a.lastUse > b.lastUse ? -1 : 0) || cmp(`${a.namespace}/${a.serviceAccount}`, `${b.namespace}/${b.serviceAccount}`));
  const windowText = length === undefined ? 'window unknown' : `${durationText(length)} of audit data (${iso(c.windowStart!)} to ${iso(c.windowEnd!)})`;
  const coverageText = [
    ...(c.events !== undefined ? [`${groupedNumber(c.events)} audit event${c.events === 1 ? '' : 's'} read`] : []),
    ...(c.polls ? [`${groupedNumber(c.polls.succeeded)} successful poll${c.polls.succeeded === 1 ? '' : 's'}${c.polls.failed > 0 ? `, ${groupedNumber(c.polls.failed)} failed and retried` : ''}`] : []),
  ].join(', ');

  const reasons: string[] = [];
  let verdict: ReadinessVerdict;
  let summary: string;
  if (input.extensionOff) {
    verdict = 'extension-already-off';
    const failing = input.findings.filter((f) => f.kind === 'unauthorized' && f.cluster === input.cluster).length;
    summary =
      'extension already off: this cluster does not extend ServiceAccount tokens, so no stale-token warning comes first — a client that caches its token fails with 401 an hour after its pod starts' +
      (failing > 0 ? `; ${failing} ServiceAccount${failing === 1 ? ' is' : 's are'} failing now (see the 401 alerts)` : '; no 401s of cached tokens seen');
  } else if (clients.length > 0) {
    verdict = 'not-safe';
    const short = length === undefined || length < min ? `; the window is shorter than ${durationText(min)}, more clients may exist` : '';
    summary = `not safe: ${clients.length} client${clients.length === 1 ? '' : 's'} would break (stale tokens in ${windowText}${short})`;
  } else {
    if (c.blind !== undefined) reasons.push(`the audit log is blind: ${c.blind}`);
    else if (c.events === 0) reasons.push('the audit log is blind: no audit events were read');
    reasons.push(...c.gaps.map((g) => `the audit data is incomplete: ${g}`));
    if (c.inconsistentTimes !== undefined) reasons.unshift(`audit timestamps inconsistent: ${c.inconsistentTimes}`);
    if (length === undefined) reasons.push('the audit window is unknown (no event times)');
    else if (length < min) reasons.push(`the audit window (${durationText(length)}) is shorter than the minimum of ${durationText(min)}: clients that refresh a cached token daily or weekly may not show up yet`);
    if (reasons.length > 0) {
      verdict = 'unknown';
      summary = `unknown: ${reasons.join('; ')}`;
    } else {
      verdict = 'safe';
      summary = `safe: no stale token use in ${windowText}${coverageText ? `; ${coverageText}` : ''}`;
    }
  }
  return {
    cluster: input.cluster,
    verdict,
    summary,
    reasons,
    window: {
      start: c.windowStart === undefined ? null : iso(c.windowStart),
      end: c.windowEnd === undefined ? null : iso(c.windowEnd),
      seconds: length === undefined ? null : Math.floor(length / 1000),
      minimumSeconds: Math.floor(min / 1000),
    },
    coverage: { events: c.events ?? null, polls: c.polls ? { ...c.polls } : null, blind: c.blind ?? null, gaps: [...c.gaps] },
    clients: verdict === 'not-safe' ? clients : [],
  };
}

/** `7 days`, `2 days 3 hours`, `5 hours`, `12 minutes` (whole units, rounded down). */
function durationText(ms: number): string {
  const d = Math.floor(ms / DAY_MS);
  const h = Math.floor((ms % DAY_MS) / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const unit = (n: number, u: string) => `${n} ${u}${n === 1 ? '' : 's'}`;
  if (d > 0) return h > 0 ? `${unit(d, 'day')} ${unit(h, 'hour')}` : unit(d, 'day');
  if (h > 0) return unit(h, 'hour');
  return unit(m, 'minute');
}

function iso(t: number): string {
  return new Date(t).toISOString();
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
