/**
 * The Bolt 5 app (`@slack/bolt`) of the Slack integration of `tokenwatch serve`: this module creates the app
 * ({@link createSlackApp}), registers its listeners on the parts the runtime built ({@link registerSlackListeners})
 * and starts its transport ({@link startSlackApp}). The integration itself (notifier, approval flow, directory,
 * `/tokens`, Home tab, timers) is put together by `src/runtime/build-slack.ts`.
 *
 * - Transport: Socket Mode by default (`slack.mode: socket`, `SLACK_APP_TOKEN` xapp-… with `connections:write`; no
 *   inbound port), or HTTP (`slack.mode: http`: Bolt's `HTTPReceiver` on `slack.port`, endpoint `/slack/events`,
 *   requests verified with `SLACK_SIGNING_SECRET`: HMAC-SHA256 `v0:<timestamp>:<body>`, 5-minute window, else 401;
 *   bolt-js `src/receivers/verify-request.ts`).
 * - Web API: `slack.apiUrl` (GovSlack `https://slack-gov.com/api/`, a loopback fake in tests) as the WebClient's
 *   `slackApiUrl`. HTTP 429 answers are retried after `Retry-After` (WebClient `retryConfig`, default 5 retries in
 *   about 5 minutes), counted in `tokenwatch_slack_api_errors_total{error="ratelimited"}`.
 * - The bot token is checked with `auth.test` at start (a bad token fails the start with a clear message); its bot
 *   and user ids are handed to Bolt so no request waits for `auth.test` before `ack()`.
 * - Socket Mode: connection state in `tokenwatch_slack_socket_connected`, and a watchdog restarting a socket that
 *   stays down (bolt-js#1906); see `watchdog.ts`.
 * - After every poll (called by the runtime): alerts (`notifier.ts`), then verification of finished actions
 *   (`src/remediation/verify.ts`). A periodic sweep expires undecided approvals.
 * - Ownership (`ctx.ownership`, `src/core/ownership.ts`): every replica takes clicks and commits votes in the shared
 *   store; only a cluster's owner polls it and executes its actions. The owner picks up approved actions (approved on another replica, or left
 *   `approved`/`running` by a process that stopped) every `pickupIntervalMs`.
 *
 * Scopes used (bot token): `chat:write`, `commands`, `usergroups:read`; optionally `chat:write.public` to post in
 * public channels without being invited.
 */
import { ErrorCode, TokenwatchError } from '../errors.js';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { App, HTTPReceiver, LogLevel, SocketModeReceiver, webApi, type Logger as BoltLogger } from '@slack/bolt';
import { LogRateLimit } from '../observability/log-limit.js';
import { maskUrl, type Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { Store } from '../store/index.js';
import { registerListeners, type ListenerDeps } from './listeners/index.js';
import { slackErrorCode } from './api.js';
import { IntegrationUnavailableError, type SlackContext } from './context.js';
import { httpReplayProperties, replayGuard, socketReplayProperties } from './replay.js';
import type { HomeOptions } from './home.js';
import { register as registerHome, type HomeListenerDeps } from './listeners/home.js';
import { SocketWatchdog } from './watchdog.js';

type WebClientOptions = NonNullable<ConstructorParameters<typeof webApi.WebClient>[1]>;
type RetryOptions = NonNullable<WebClientOptions['retryConfig']>;

/**
 * WebClient retries: 5 retries, backoff factor 3.86 from 1 s (about 5 minutes in all), as web-api's
 * `fiveRetriesInFiveMinutes`; a 429 waits its `Retry-After` first.
 */
export const DEFAULT_RETRY: RetryOptions = { retries: 5, factor: 3.86, randomize: true };

/** Tuning knobs, mostly for tests and benchmarks; defaults suit production. */
export interface SlackOptions {
  /** Minimum ms between two posts to one channel (default 1000: Slack's ~1 message/s per channel). */
  channelIntervalMs?: number;
  /** How often undecided approvals are checked for expiry, ms (default 30,000). */
  sweepIntervalMs?: number;
  /** Interval between rollout progress reads, ms (default 5,000). */
  rolloutPollMs?: number;
  /** First wait before retrying the final progress edit, ms; doubles per attempt (default 1,000). */
  progressRetryMs?: number;
  /** WebClient retry policy (default {@link DEFAULT_RETRY}). */
  retryConfig?: RetryOptions;
  /** Timeout of one Web API request, ms (default 30,000). */
  requestTimeoutMs?: number;
  /** HTTP mode: listen address; overrides `slack.host` (default `http.host`). */
  host?: string;
  /** Timeout of the start-up `auth.test` call, ms (default 10,000); it is not retried inside the call. */
  authTimeoutMs?: number;
  /**
   * How long the members of an approver user group stay usable when `usergroups.users.list` fails, ms
   * (default 900,000 = 15 min after they were last read); after that the group counts as empty (fail closed).
   */
  approverGroupsMaxStaleMs?: number;
  /** Wall clock for the replay cache and the log limit of refused requests, epoch ms (default `Date.now`, the clock Bolt checks signatures with). */
  wallClock?: () => number;
  /**
   * The notification queue's clock, epoch ms: Slack's rates, `Retry-After` pauses and the backoff of failed sends
   * (src/slack/drainer.ts). Default `Date.now`; tests pass the service clock they move forward.
   */
  queueClock?: () => number;
  /** Socket Mode watchdog: check interval and restart threshold, ms. */
  watchdog?: { intervalMs?: number; staleMs?: number };
  /**
   * Socket Mode: how long the client waits for a pong before it drops the connection, ms; also the base of its
   * reconnect delay (@slack/socket-mode default 5,000).
   */
  socketClientPingTimeoutMs?: number;
  /**
   * How often the clusters' owner looks for approved actions to run (approved on another replica, or left by a stopped
   * process) and for `/tokens scan` requests taken by another replica, ms (default 2,000).
   */
  pickupIntervalMs?: number;
  /** How long `stop()` waits for work after an ack or a poll, ms (default 10,000). */
  stopTimeoutMs?: number;
  /** The App Home tab's republish debounce and tick (`home.ts`). */
  home?: HomeOptions;
}

/**
 * Warnings Bolt's `HTTPReceiver` logs once per refused request (`@slack/bolt` dist/receivers/HTTPReceiver.js): a
 * signature or timestamp that does not verify, and a body over the size limit. Anyone who can reach the port can send
 * these at will, so they are counted in a metric and logged at most once per {@link REJECTED_LOG_INTERVAL_MS}.
 */
const REJECTED_REQUEST: ReadonlyArray<[RegExp, 'signature' | 'body-too-large']> = [
  [/^Failed to parse and verify the request data/, 'signature'],
  [/^Request body exceeded the maximum allowed size/, 'body-too-large'],
];

/** At most one log line per this many ms for refused Slack requests of one reason (their count is a metric). */
export const REJECTED_LOG_INTERVAL_MS = 60_000;

/** Options of {@link boltLogger}. */
export interface BoltLoggerOptions {
  /** Counts every refused request (see {@link REJECTED_REQUEST}), logged or not. */
  onRejected?: (reason: 'signature' | 'body-too-large') => void;
  /** Clock of the log limiter, epoch ms (default `Date.now`). */
  now?: () => number;
}

/**
 * Bolt's Logger interface over pino (component `slack`). Warnings about refused HTTP requests are rate-limited per
 * reason ({@link LogRateLimit}: one line per minute, saying how many were left out) and each one is reported to
 * `onRejected`.
 */
export function boltLogger(log: Logger, opts: BoltLoggerOptions = {}): BoltLogger {
  let level = log.isLevelEnabled('debug') ? LogLevel.DEBUG : LogLevel.INFO;
  const text = (msg: unknown[]): string => msg.map((m) => (m instanceof Error ? m.message : typeof m === 'string' ? m : JSON.stringify(m))).join(' ');
  const limits = new Map(REJECTED_REQUEST.map(([, reason]) => [reason, new LogRateLimit(REJECTED_LOG_INTERVAL_MS, opts.now)]));
  const warn = (line: string): void => {
    const reason = REJECTED_REQUEST.find(([re]) => re.test(line))?.[1];
    if (reason === undefined) {
      log.warn(line);
      return;
    }
    opts.onRejected?.(reason);
    const left = limits.get(reason)!.take();
    if (left === undefined) return;
    log.warn({ reason, suppressedSinceLastLine: left, logIntervalSeconds: REJECTED_LOG_INTERVAL_MS / 1000 }, `${line} (refused Slack requests are logged at most once a minute; all are counted in tokenwatch_slack_rejected_requests_total)`);
  };
  return {
    debug: (...msg: unknown[]) => log.debug(text(msg)),
    info: (...msg: unknown[]) => log.info(text(msg)),
    warn: (...msg: unknown[]) => warn(text(msg)),
    error: (...msg: unknown[]) => log.error(text(msg)),
    setLevel: (l: LogLevel) => {
      level = l;
    },
    getLevel: () => level,
    setName: () => undefined,
  };
}

/** The network-level cause of a failed Web API call, e.g. `ECONNREFUSED`, `timeout`, `http_503` (no secrets). */
function networkCause(err: unknown): string {
  const e = err as { code?: string; original?: { code?: string; name?: string; message?: string; cause?: { code?: string; message?: string } } };
  if (e?.code === webApi.ErrorCode.RequestError) {
    const o = e.original;
    // A fetch timeout is a DOMException `TimeoutError` whose numeric `code` (23) says nothing: its name goes first.
    const timedOut = o?.name === 'TimeoutError' || o?.name === 'AbortError' ? 'timeout' : undefined;
    const inner = o?.cause?.code ?? timedOut ?? o?.code ?? o?.cause?.message ?? o?.message;
    return inner ? `network error ${inner}` : 'network error';
  }
  return slackErrorCode(err);
}

/** The Bolt app of the Slack integration, created by {@link createSlackApp} and not started yet. */
export interface SlackApp {
  app: App;
  receiver: HTTPReceiver | SocketModeReceiver;
  /** The bot's identity as `auth.test` answered it. */
  auth: { user_id?: string; bot_id?: string; user?: string; team?: string; team_id?: string };
  /** The bot token's scopes as Slack reported them with `auth.test` (its `x-oauth-scopes` header); undefined when not reported. */
  scopes?: string[];
  /** The bot token (`SLACK_BOT_TOKEN`), checked by `auth.test`; never logged. */
  botToken: string;
  /** The integration's logger (component `slack`). */
  log: Logger;
}

/**
 * Checks the Slack settings, checks the bot token with `auth.test` and creates the Bolt app with its receiver (HTTP
 * or Socket Mode; see the module docstring); listeners are registered by {@link registerSlackListeners}.
 * @throws Error when Slack is not enabled, a secret is missing or the bot token is rejected (`auth.test` answers an
 *   error such as `invalid_auth`); {@link IntegrationUnavailableError} when Slack cannot be reached (network error,
 *   timeout, HTTP 5xx, rate limit).
 */
export async function createSlackApp(ctx: Pick<SlackContext, 'config' | 'metrics' | 'logger'>, opts: SlackOptions = {}): Promise<SlackApp> {
  const { config, metrics } = ctx;
  const cfg = config.slack;
  if (!cfg?.enabled) throw new TokenwatchError(ErrorCode.SlackStartFailed, 'Slack is not enabled (slack.enabled is false)');
  if (!cfg.botToken) throw new TokenwatchError(ErrorCode.SlackStartFailed, 'SLACK_BOT_TOKEN is required when slack.enabled is true');
  if (cfg.mode === 'http' && !cfg.signingSecret) throw new TokenwatchError(ErrorCode.SlackStartFailed, 'SLACK_SIGNING_SECRET is required in slack.mode http');
  if (cfg.mode === 'socket' && !cfg.appToken) throw new TokenwatchError(ErrorCode.SlackStartFailed, 'SLACK_APP_TOKEN is required in slack.mode socket');
  const log = ctx.logger.child({ component: 'slack' });
  const bolt = boltLogger(log, { onRejected: (reason) => metrics.slackRejectedRequests.inc({ reason }), ...(opts.wallClock ? { now: opts.wallClock } : {}) });
  const clientOptions: WebClientOptions = {
    ...(cfg.apiUrl ? { slackApiUrl: cfg.apiUrl } : {}),
    retryConfig: opts.retryConfig ?? DEFAULT_RETRY,
    timeout: opts.requestTimeoutMs ?? 30_000,
    logger: bolt,
  };

  const apiShown = maskUrl(cfg.apiUrl ?? 'https://slack.com/api/');
  if (cfg.apiUrl && /^[a-z][a-z0-9+.-]*:\/\/[^/]*@/i.test(cfg.apiUrl)) {
    // fetch (under WebClient) refuses URLs with credentials, so this can never work; say so instead of retrying.
    throw new TokenwatchError(
      ErrorCode.SlackStartFailed,
      `slack.apiUrl ${apiShown} contains user:password@, which the Slack Web API client cannot send (fetch refuses URLs with credentials): remove them; for an authenticating proxy, configure the proxy outside the URL`,
    );
  }
  let auth: { user_id?: string; bot_id?: string; user?: string; team?: string; team_id?: string; response_metadata?: { scopes?: string[] } };
  try {
    // No retries here: serve retries an unreachable Slack in the background while polling goes on.
    auth = await new webApi.WebClient(cfg.botToken, { ...clientOptions, retryConfig: { retries: 0 }, timeout: opts.authTimeoutMs ?? 10_000 }).auth.test();
  } catch (err) {
    const code = slackErrorCode(err);
    if ((err as { code?: string }).code === webApi.ErrorCode.PlatformError) {
      throw new TokenwatchError(ErrorCode.SlackStartFailed, `Slack rejected the bot token (auth.test: ${code}): check SLACK_BOT_TOKEN${cfg.apiUrl ? ` and slack.apiUrl ${apiShown}` : ''}`, { cause: err });
    }
    throw new IntegrationUnavailableError(
      `cannot reach Slack at ${apiShown} (auth.test: ${networkCause(err)}); polling and findings go on without Slack and alerts are posted once it answers`,
      { cause: err },
    );
  }

  const receiver =
    cfg.mode === 'http'
      ? new HTTPReceiver({ signingSecret: cfg.signingSecret!, endpoints: '/slack/events', port: cfg.port, logger: bolt, processBeforeResponse: false, customPropertiesExtractor: (req) => httpReplayProperties(req) })
      : new SocketModeReceiver({
          appToken: cfg.appToken!,
          logger: bolt,
          ...(opts.socketClientPingTimeoutMs ? { clientPingTimeout: opts.socketClientPingTimeoutMs } : {}),
          installerOptions: { clientOptions: { ...(cfg.apiUrl ? { slackApiUrl: cfg.apiUrl } : {}) } },
          customPropertiesExtractor: (args) => socketReplayProperties(args as { envelope_id?: string; body?: unknown }),
        });
  const app = new App({
    token: cfg.botToken,
    ...(auth.bot_id ? { botId: auth.bot_id } : {}),
    ...(auth.user_id ? { botUserId: auth.user_id } : {}),
    receiver,
    clientOptions,
    logger: bolt,
    convoStore: false,
  });
  app.client.on(webApi.WebClientEvent.RATE_LIMITED, (retrySec: number, info: { url?: string }) => {
    const method = String(info?.url ?? '').split('/').pop() ?? 'unknown';
    metrics.slackErrors.inc({ method, error: 'ratelimited' });
    log.warn({ method, retryAfterSeconds: retrySec }, 'Slack rate limit: waiting Retry-After, then retrying');
  });
  app.error(async (err) => {
    metrics.slackErrors.inc({ method: 'bolt', error: slackErrorCode(err) });
    log.error({ err }, 'Slack listener error');
  });

  const scopes = auth.response_metadata?.scopes;
  return { app, receiver, auth, ...(scopes ? { scopes } : {}), botToken: cfg.botToken, log };
}

/** What {@link registerSlackListeners} registers on the app: the parts built by the runtime. */
export interface SlackListenerParts extends ListenerDeps {
  store: Store;
  metrics: Metrics;
  /** Wall clock of the replay cache, epoch ms (default `Date.now`). */
  wallClock?: () => number;
  /** The App Home tab and the tracking of its work. */
  home: HomeListenerDeps;
}

/**
 * Registers every listener on `app`: first the tracking of each request's work (`home.track`), then the replay guard
 * (a replayed HTTP request or a redelivered envelope is acknowledged and dropped, replay.ts), then `/tokens`, the buttons, modals and events (`listeners/`), then the Home tab.
 */
export function registerSlackListeners(app: App, parts: SlackListenerParts): void {
  const { store, metrics, wallClock, home, ...deps } = parts;
  // Each request's work is tracked from the first middleware on, so that `idle()` waits for it: the replay guard's
  // store transaction may still be under way (in the SQLite store's worker thread, or on PostgreSQL) after the ack.
  app.use(async ({ next }) => {
    await home.track(next());
  });
  app.use(replayGuard({ store, logger: deps.logger, metrics, ...(wallClock ? { now: wallClock } : {}) }));
  registerListeners(app, deps);
  registerHome(app, home);
}

/**
 * Starts the app's transport: HTTP mode listens on `slack.port` (resolves once listening, with the events URL);
 * Socket Mode starts its watchdog and connects in the background (a failed connect is logged; the watchdog retries).
 * @throws when the HTTP port cannot be bound.
 */
export async function startSlackApp(
  s: SlackApp,
  ctx: Pick<SlackContext, 'config' | 'metrics'>,
  opts: Pick<SlackOptions, 'host' | 'watchdog'> = {},
): Promise<{ eventsUrl?: string; watchdog?: SocketWatchdog }> {
  const { app, receiver, auth, log } = s;
  const { metrics } = ctx;
  const cfg = ctx.config.slack!;
  const slackHost = opts.host ?? cfg.host;
  let eventsUrl: string | undefined;
  let watchdog: SocketWatchdog | undefined;
  if (receiver instanceof HTTPReceiver) {
    const server = (await app.start({ port: cfg.port, host: slackHost })) as Server;
    const addr = server.address() as AddressInfo;
    const shown = slackHost === '0.0.0.0' || slackHost === '::' ? '127.0.0.1' : slackHost;
    eventsUrl = `http://${shown.includes(':') ? `[${shown}]` : shown}:${addr.port}/slack/events`;
    log.info({ host: slackHost, port: addr.port, bot: auth.user, team: auth.team }, 'Slack HTTP receiver listening on /slack/events');
  } else {
    watchdog = new SocketWatchdog(receiver.client, { logger: log, metrics, ...(opts.watchdog ?? {}) });
    watchdog.start();
    void app.start().then(
      () => log.info({ bot: auth.user, team: auth.team }, 'Slack Socket Mode started'),
      (err: unknown) => log.error({ err }, 'Slack Socket Mode could not connect; the watchdog retries'),
    );
  }

  return { ...(eventsUrl ? { eventsUrl } : {}), ...(watchdog ? { watchdog } : {}) };
}
