/**
 * The one health model of `tokenwatch serve` (docs/live-mode.md "Health"): per cluster, the state of each access its
 * poll needs — the audit source, the Kubernetes API, the watch cache and Slack — as the last attempt left it. Every
 * place that reports health (`/readyz`, `/tokens status`, the Home tab, the `tokenwatch_access_failing` metric) reads
 * this model and says it in the same words ({@link accessText}):
 *
 * - `Kubernetes API: ok`;
 * - `Kubernetes API unreachable: connect ECONNREFUSED 127.0.0.1:6443, since 09:12 UTC` (a failure in words, with the
 *   time the access started failing; the date too when that was not today, UTC);
 * - `watch cache: pending (…)` before a first attempt finished, `watch cache: not used (…)` when the config turns it
 *   off.
 *
 * A cluster is `ok` only when none of its accesses fails ({@link clusterVerdict}). Failure text is scrubbed of
 * secrets ({@link scrubSecrets}) where it enters the model, so no health output can carry a token.
 * Pure state: the clock is passed in; times are epoch ms UTC.
 */
import { scrubSecrets } from './logger.js';

/** The accesses a cluster's poll needs, in the order they are shown. */
export const ACCESSES = ['audit', 'kubernetes', 'watchCache', 'slack'] as const;

/** One access of {@link ACCESSES}. */
export type Access = (typeof ACCESSES)[number];

/** How each access is named in words (and the `access` label of the metric uses the key). */
export const ACCESS_LABELS: Readonly<Record<Access, string>> = {
  audit: 'audit source',
  kubernetes: 'Kubernetes API',
  watchCache: 'watch cache',
  slack: 'Slack',
};

/**
 * The state of one access from its last attempt:
 * - `ok`: the last attempt (at `at`, when known) succeeded;
 * - `failing`: the last attempt failed; `problem` says how in words, starting with a verb or adjective that reads after
 *   the access's name ("unreachable: connect ECONNREFUSED …", "failed to start: …"), or with `: ` when it is a
 *   clause of its own (": poll failed: database or disk is full"); `since`: when
 *   the access started failing (the first failed attempt after the last success);
 * - `pending`: no attempt has finished yet (`detail`: what it waits for);
 * - `off`: the config does not use this access (`detail`: why, e.g. `kubernetes: none`).
 */
export type AccessState =
  | { state: 'ok'; at?: number }
  | { state: 'failing'; problem: string; since: number; at?: number }
  | { state: 'pending'; detail?: string }
  | { state: 'off'; detail?: string };

/** The accesses of one cluster. */
export type ClusterAccess = Record<Access, AccessState>;

/** `ok` when no access fails and one has been tried, `failing` when one fails, `pending` before any attempt finished. */
export type ClusterVerdict = 'ok' | 'failing' | 'pending';

/** The verdict of a cluster: any failing access makes it `failing` (never `ok`); all pending or off → `pending`. */
export function clusterVerdict(a: ClusterAccess): ClusterVerdict {
  const states = ACCESSES.map((k) => a[k].state);
  if (states.includes('failing')) return 'failing';
  if (a.audit.state === 'pending' || !states.includes('ok')) return 'pending';
  return 'ok';
}

/** `HH:MM UTC` when `at` is on the UTC day of `now`, else `YYYY-MM-DD HH:MM UTC`. */
export function shortUtc(at: number, now: number): string {
  const iso = new Date(at).toISOString();
  const sameDay = iso.slice(0, 10) === new Date(now).toISOString().slice(0, 10);
  return `${sameDay ? '' : `${iso.slice(0, 10)} `}${iso.slice(11, 16)} UTC`;
}

/**
 * One access in words, the same everywhere: `Kubernetes API: ok`, `Kubernetes API unreachable: …, since 09:12 UTC`,
 * `watch cache: pending (…)`, `watch cache: not used (…)`.
 */
export function accessText(access: Access, s: AccessState, now: number): string {
  const name = ACCESS_LABELS[access];
  switch (s.state) {
    case 'ok':
      return `${name}: ok`;
    case 'failing':
      // Scrubbed again here: states built outside the tracker (start-up errors, the shared store's) pass through too.
      return `${name}${s.problem.startsWith(':') ? '' : ' '}${scrubSecrets(s.problem)}, since ${shortUtc(s.since, now)}`;
    case 'pending':
      return `${name}: pending${s.detail ? ` (${s.detail})` : ''}`;
    case 'off':
      return `${name}: not used${s.detail ? ` (${s.detail})` : ''}`;
  }
}

/** Every access of a cluster in words, keyed by {@link Access} (the `/readyz` body's `access` entry of a cluster). */
export function clusterAccessTexts(a: ClusterAccess, now: number): Record<Access, string> {
  return Object.fromEntries(ACCESSES.map((k) => [k, accessText(k, a[k], now)])) as Record<Access, string>;
}

/** Longest failure text kept, characters: an error that quotes a whole answer is cut. */
const MAX_PROBLEM_CHARS = 400;

/** Secrets masked, whitespace folded, cut at {@link MAX_PROBLEM_CHARS}. */
function cleanProblem(problem: string): string {
  const one = scrubSecrets(problem).replace(/\s+/g, ' ').trim();
  return one.length > MAX_PROBLEM_CHARS ? `${one.slice(0, MAX_PROBLEM_CHARS - 1)}…` : one;
}

/**
 * The state of one access kept across attempts, so that a failure keeps the time it started (`since`) while later
 * attempts fail too, and a success clears it. Attempts are reported with their time; the problem is scrubbed here.
 */
export class AccessTracker {
  private current: AccessState;

  constructor(initial: AccessState = { state: 'pending' }) {
    this.current = initial;
  }

  /** The last attempt, at `at`, succeeded. */
  ok(at: number): void {
    this.current = { state: 'ok', at };
  }

  /** The last attempt, at `at`, failed: `problem` in words (see {@link AccessState}); `since` stays while it fails. */
  fail(problem: string, at: number): void {
    const since = this.current.state === 'failing' ? this.current.since : at;
    this.current = { state: 'failing', problem: cleanProblem(problem), since, at };
  }

  /** Not tried yet (again), e.g. a cache that is still listing. */
  pending(detail?: string): void {
    this.current = { state: 'pending', ...(detail ? { detail } : {}) };
  }

  /** The state now. */
  state(): AccessState {
    return this.current;
  }
}

/**
 * What went wrong with a network access, in words that read after the access's name: `unreachable: <cause>` for
 * connection failures (refused, no route, DNS, TLS, timeout), `rejected the credentials (HTTP 401)` and the like;
 * otherwise `failed: <message>`. Scrubbed by the tracker.
 */
export function problemOf(err: unknown): string {
  const cause = err instanceof Error && err.cause instanceof Error ? err.cause : undefined;
  const message = err instanceof Error ? err.message : String(err);
  const code = (cause as NodeJS.ErrnoException | undefined)?.code ?? (err as NodeJS.ErrnoException | undefined)?.code;
  const text = cause && message === 'fetch failed' ? cause.message : message;
  if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) return `unreachable: no answer (${text})`;
  if (code !== undefined && /^(ECONNREFUSED|ECONNRESET|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|EPIPE|UND_ERR_.*|CERT_.*|DEPTH_ZERO_SELF_SIGNED_CERT|UNABLE_TO_VERIFY_LEAF_SIGNATURE|ERR_TLS_.*)$/.test(code)) {
    return `unreachable: ${text}`;
  }
  return `failed: ${text}`;
}
