/**
 * Replay and redelivery protection for Slack requests, shared by every replica through the store.
 *
 * - **HTTP mode.** Bolt's `HTTPReceiver` accepts a correctly signed request whose `x-slack-request-timestamp` is at
 *   most 5 minutes old (bolt-js `src/receivers/verify-request.ts`), so a byte-identical request captured on the way
 *   (a proxy log, a mirrored port) would run again within that window. Each verified request's signature
 *   (`x-slack-signature`, an HMAC-SHA256 over timestamp and body) is claimed in the store; a second request with the
 *   same signature is acknowledged (HTTP 200, empty) and not handled. Keys live until 6 minutes after the later of
 *   the request timestamp and its arrival (the 5-minute window plus 1 minute of clock skew), then Bolt itself
 *   rejects the request.
 * - **Socket Mode.** Slack redelivers an envelope it thinks was not acknowledged (same `envelope_id`, or the same
 *   payload with a higher `retry_attempt`; api.slack.com/apis/socket-mode). Each envelope's id and the SHA-256 of
 *   its payload are claimed; a redelivery is acknowledged and not handled again. Keys live 15 minutes.
 *
 * - **Timestamps in the future.** Bolt refuses an HTTP request timestamped more than 5 minutes ago; one timestamped
 *   more than 5 minutes ahead of this host's clock is refused here (acknowledged, not handled, counted in
 *   `tokenwatch_slack_rejected_requests_total{reason="timestamp-in-future"}`).
 *
 * The check is a global Bolt middleware, so it runs before any listener (slash command, button, view). Keys are
 * claimed when the request arrives: a request whose handling then failed is not run again by a redelivery (the
 * user clicks again, which is a new request).
 *
 * - **Acks never wait on the store.** Slack cuts a request off after 3 s (docs "Acknowledging requests"), and the
 *   claim is a store transaction (a delete and one insert per key: several round trips, which a slow or stalled
 *   database stretches past that). So the guard first answers from this replica's memory (keys it has seen and whose
 *   time has not run out: a redelivery to the same replica is acknowledged and dropped without a store trip), then
 *   acknowledges the request itself, and only then claims the keys in the store, shared by every replica; the
 *   listener runs once the claim says the request is new. Handling is idempotent after the ack: a request another
 *   replica already claimed is dropped there. Listeners acknowledge through {@link ackOnce}, which is a no-op once
 *   the guard has acknowledged (so every listener acknowledges without a response body).
 */
import { createHash } from 'node:crypto';
import type { AnyMiddlewareArgs, Middleware } from '@slack/bolt';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { StorePart } from '../store/index.js';

/** Bolt's signature window: requests with an older timestamp are refused by Bolt itself (verify-request.ts). */
export const SLACK_SIGNATURE_WINDOW_MS = 5 * 60_000;
/** Allowed clock difference between Slack and this host when keeping HTTP keys. */
export const CLOCK_SKEW_MS = 60_000;
/** How long Socket Mode envelope keys are kept, ms. */
export const SOCKET_KEY_TTL_MS = 15 * 60_000;

/** Context property carrying the request's replay keys (set by the receivers' `customPropertiesExtractor`). */
const KEYS_PROP = 'twReplayKeys';
/** Context property: HTTP request timestamp, epoch seconds. */
const TS_PROP = 'twRequestTimestampSec';
/** Context property: transport. */
const TRANSPORT_PROP = 'twTransport';

/** The headers part of Bolt's buffered HTTP request. */
interface RequestLike {
  headers: Record<string, string | string[] | undefined>;
}

/**
 * `customPropertiesExtractor` for Bolt's `HTTPReceiver` (called after the signature was verified): the signature as
 * replay key, and the request timestamp.
 */
export function httpReplayProperties(req: RequestLike): Record<string, unknown> {
  const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);
  const sig = one(req.headers['x-slack-signature']);
  const ts = Number(one(req.headers['x-slack-request-timestamp']));
  return { [KEYS_PROP]: sig ? [`http-sig:${sig}`] : [], [TS_PROP]: Number.isFinite(ts) ? ts : undefined, [TRANSPORT_PROP]: 'http' };
}

/** What `@slack/socket-mode` emits as `slack_event` (the part used here). */
interface SocketEventLike {
  envelope_id?: string;
  body?: unknown;
}

/** `customPropertiesExtractor` for Bolt's `SocketModeReceiver`: the envelope id and the payload hash as keys. */
export function socketReplayProperties(args: SocketEventLike): Record<string, unknown> {
  const keys: string[] = [];
  if (args.envelope_id) keys.push(`socket-env:${args.envelope_id}`);
  if (args.body !== undefined) keys.push(`socket-payload:${createHash('sha256').update(JSON.stringify(args.body)).digest('hex')}`);
  return { [KEYS_PROP]: keys, [TRANSPORT_PROP]: 'socket' };
}

/** Context property: set (true) once the guard has acknowledged the request itself (see {@link ackOnce}). */
const ACKED_PROP = 'twAcked';

/**
 * Acknowledges a request unless the replay guard already did (a Bolt `ack` may be called once: a second call throws
 * `ReceiverMultipleAckError`). Listeners call this instead of `ack()`, without a response body.
 */
export async function ackOnce(ack: () => Promise<void>, context: Record<string, unknown> | undefined): Promise<void> {
  if (context?.[ACKED_PROP] === true) return;
  await ack();
}

/**
 * This replica's memory of the request keys it has seen, each until its expiry (epoch ms): answers a redelivery to
 * the same replica without a store trip. Expired keys are dropped at most once a minute; at most `maxKeys` are kept
 * (the oldest go first; the store still has them).
 */
export class SeenKeys {
  private readonly keys = new Map<string, number>();
  private nextPrune = 0;

  constructor(private readonly maxKeys = 100_000) {}

  /** Whether any of `keys` is remembered and not expired at `now`. */
  has(keys: readonly string[], now: number): boolean {
    return keys.some((k) => (this.keys.get(k) ?? -Infinity) > now);
  }

  /** Remembers `keys` until `expiresAt`. */
  add(keys: readonly string[], now: number, expiresAt: number): void {
    if (now >= this.nextPrune) {
      for (const [k, exp] of this.keys) if (exp <= now) this.keys.delete(k);
      this.nextPrune = now + 60_000;
    }
    for (const k of keys) {
      this.keys.delete(k);
      this.keys.set(k, expiresAt);
    }
    while (this.keys.size > this.maxKeys) this.keys.delete(this.keys.keys().next().value as string);
  }

  /** Number of remembered keys (expired ones included until the next prune). */
  get size(): number {
    return this.keys.size;
  }
}

/** Dependencies of {@link replayGuard}. */
export interface ReplayGuardDeps {
  store: StorePart<{ replay: 'claim' }>;
  logger: Logger;
  metrics?: Metrics;
  /** Wall clock, epoch ms: the clock Bolt checks request timestamps against (default `Date.now`). */
  now?: () => number;
  /** This replica's memory of seen keys (default: a new one). */
  seen?: SeenKeys;
}

/**
 * The global middleware: a request whose keys this replica remembers is acknowledged and dropped at once; any other
 * is acknowledged, then its keys are claimed in the store, and a replay/redelivery another replica handled is
 * dropped (both logged at warn, counted in `tokenwatch_slack_duplicate_requests_total`). Requests without keys pass.
 * A store failure lets the request through (logged): the approval state machine still refuses double decisions, and
 * a listener whose own store work fails says so in Slack (`listeners/deps.ts` `failureMessage`).
 */
export function replayGuard(deps: ReplayGuardDeps): Middleware<AnyMiddlewareArgs> {
  const now = deps.now ?? Date.now;
  const seen = deps.seen ?? new SeenKeys();
  return async (args) => {
    const context = args.context as Record<string, unknown>;
    const ack = (args as { ack?: () => Promise<void> }).ack;
    // Bolt refuses timestamps more than 5 minutes old but not ones in the future: a validly signed request dated
    // ahead would stay replayable for that long. Refused here, so the window is 5 minutes either side of now.
    const ahead = context[TRANSPORT_PROP] === 'http' && typeof context[TS_PROP] === 'number' ? (context[TS_PROP] as number) * 1000 - now() : 0;
    if (ahead > SLACK_SIGNATURE_WINDOW_MS) {
      deps.metrics?.slackRejectedRequests.inc({ reason: 'timestamp-in-future' });
      deps.logger.warn({ aheadMs: ahead, body: describe(args.body) }, 'Slack request timestamped more than 5 minutes in the future refused (not handled)');
      if (ack) await ack();
      return;
    }
    const keys = context[KEYS_PROP];
    if (!Array.isArray(keys) || keys.length === 0) {
      await args.next();
      return;
    }
    const transport = context[TRANSPORT_PROP] === 'http' ? 'http' : 'socket';
    const t = now();
    const tsMs = typeof context[TS_PROP] === 'number' ? (context[TS_PROP] as number) * 1000 : t;
    const expiresAt = transport === 'http' ? Math.max(t, tsMs) + SLACK_SIGNATURE_WINDOW_MS + CLOCK_SKEW_MS : t + SOCKET_KEY_TTL_MS;
    const duplicate = async (): Promise<void> => {
      deps.metrics?.slackDuplicates.inc({ transport });
      deps.logger.warn(
        { transport, body: describe(args.body) },
        transport === 'http' ? 'replayed Slack request (same signature) acknowledged and not handled again' : 'redelivered Socket Mode envelope acknowledged and not handled again',
      );
      if (ack && context[ACKED_PROP] !== true) await ack();
    };
    if (seen.has(keys as string[], t)) {
      await duplicate();
      return;
    }
    seen.add(keys as string[], t, expiresAt);
    // Acknowledged before any store round trip: the claim below may wait on a slow database.
    if (ack) {
      await ack();
      context[ACKED_PROP] = true;
    }
    let fresh = true;
    try {
      fresh = await deps.store.replay.claim(keys as string[], t, expiresAt);
    } catch (err) {
      deps.logger.error({ err }, 'the Slack replay cache is unavailable (store error); handling the request anyway');
    }
    if (!fresh) {
      await duplicate();
      return;
    }
    await args.next();
  };
}

/** A short, non-secret description of a request body for the log. */
function describe(body: unknown): Record<string, unknown> {
  const b = (body ?? {}) as Record<string, unknown>;
  const user = (b.user as { id?: string } | undefined)?.id ?? b.user_id;
  return { type: b.type ?? (b.command ? 'slash_command' : undefined), command: b.command, user };
}
