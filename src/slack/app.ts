/**
 * The Slack integration of `tokenwatch serve`: a Bolt 5 app (`@slack/bolt`) that posts alerts, answers `/tokens`,
 * and runs the approval-gated remediation flow with verification.
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
 * - After every poll: alerts (`notifier.ts`), then verification of finished actions (`src/remediation/verify.ts`).
 *   A periodic sweep expires undecided approvals.
 * - High availability (`ctx.isLeader()`): every replica takes clicks and commits votes in the shared store; only
 *   the leader polls and executes. The leader picks up approved actions (approved on another replica, or left
 *   `approved`/`running` by a process that stopped) every `pickupIntervalMs`.
 *
 * Scopes used (bot token): `chat:write`, `commands`, `usergroups:read`; optionally `chat:write.public` to post in
 * public channels without being invited.
 */
import { ErrorCode, TokenwatchError } from '../errors.js';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { App, HTTPReceiver, LogLevel, SocketModeReceiver, webApi, type Logger as BoltLogger } from '@slack/bolt';
import { approvalPolicyFor } from '../approvals/from-config.js';
import type { ClusterEvent } from '../findings/cluster-events.js';
import { LogRateLimit } from '../observability/log-limit.js';
import { maskUrl, type Logger } from '../observability/logger.js';
import type { ProbeCheckReport, VerificationReport } from '../remediation/verify.js';
import { registerListeners } from './listeners/index.js';
import { slackErrorCode, SlackApi } from './api.js';
import { probeCheckMessage, verificationMessage } from './blocks/index.js';
import { ButtonIds } from './buttons.js';
import { ChannelMap } from './channels.js';
import { DEFAULT_SCAN_INTERVAL_MS, TokensCommand } from './commands.js';
import { IntegrationUnavailableError, type Integration, type SlackContext } from './context.js';
import { Directory } from './directory.js';
import { ApprovalFlow } from './flow.js';
import { clusterEventMessage, persistingMessage } from './messages.js';
import { httpReplayProperties, replayGuard, socketReplayProperties } from './replay.js';
import { Notifier } from './notifier.js';
import { HomePublisher, type HomeOptions } from './home.js';
import { register as registerHome } from './listeners/home.js';
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
  /** Socket Mode watchdog: check interval and restart threshold, ms. */
  watchdog?: { intervalMs?: number; staleMs?: number };
  /**
   * Socket Mode: how long the client waits for a pong before it drops the connection, ms; also the base of its
   * reconnect delay (@slack/socket-mode default 5,000).
   */
  socketClientPingTimeoutMs?: number;
  /**
   * How often the leader looks for approved actions to run (approved on another replica, or left by a stopped
   * process) and for `/tokens scan` requests taken by another replica, ms (default 2,000).
   */
  pickupIntervalMs?: number;
  /** How long `stop()` waits for work after an ack or a poll, ms (default 10,000). */
  stopTimeoutMs?: number;
  /** The App Home tab's republish debounce and tick (`home.ts`). */
  home?: HomeOptions;
}

/** The running integration; the extra members serve tests, benchmarks and the sandbox. */
export interface SlackIntegration extends Integration {
  /** HTTP mode: the events URL, e.g. `http://127.0.0.1:3000/slack/events`. */
  eventsUrl?: string;
  /** Resolves when no work started by a Slack request or a poll is pending (rollouts included). */
  idle(): Promise<void>;
  /** Runs the expiry sweep now; returns how many approvals expired. */
  sweep(): Promise<number>;
  /** Socket Mode only: the connection watchdog. */
  watchdog?: SocketWatchdog;
  /** The parts, for tests. */
  parts: { api: SlackApi; notifier: Notifier; flow: ApprovalFlow; ids: ButtonIds; command: TokensCommand; app: App; home: HomePublisher };
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

/** Tracks promises of work done after an ack or a poll. */
class Tasks {
  private readonly pending = new Set<Promise<unknown>>();

  track<T>(p: Promise<T>): Promise<T> {
    this.pending.add(p);
    void p.then(
      () => this.pending.delete(p),
      () => this.pending.delete(p),
    );
    return p;
  }

  async idle(timeoutMs = Infinity): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.pending.size > 0 && Date.now() < deadline) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...this.pending]),
        ...(Number.isFinite(timeoutMs) ? [new Promise<void>((r) => (timer = setTimeout(r, Math.max(0, deadline - Date.now()))))] : []),
      ]);
      if (timer) clearTimeout(timer);
    }
  }
}

/**
 * Starts the Slack integration for `tokenwatch serve` (called when `config.slack.enabled`).
 * @throws Error when Slack is not enabled, a secret is missing, the bot token is rejected (`auth.test` answers an
 *   error such as `invalid_auth`), or the HTTP port is taken; {@link IntegrationUnavailableError} when Slack cannot
 *   be reached (network error, timeout, HTTP 5xx, rate limit): serve then retries in the background.
 */
export function startSlack(ctx: SlackContext): Promise<Integration> {
  return startSlackWith(ctx);
}

/** {@link startSlack} with tuning options; returns the {@link SlackIntegration}. */
export async function startSlackWith(ctx: SlackContext, opts: SlackOptions = {}): Promise<SlackIntegration> {
  const { config, store, clock, metrics, clusters } = ctx;
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
  let auth: { user_id?: string; bot_id?: string; user?: string; team?: string };
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

  const slackHost = opts.host ?? cfg.host;
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

  const tasks = new Tasks();
  // Any tracked work (a poll's alerts, a click, a vote, a sweep) may change what the Home tab shows: mark it stale
  // (cheap; republishing is debounced in home.ts).
  let home: HomePublisher | undefined;
  const track = <T>(p: Promise<T>): Promise<T> => tasks.track(p.finally(() => home?.changed()));
  const abort = new AbortController();
  const channels = new ChannelMap(config);
  const api = new SlackApi({ client: app.client, logger: log, metrics, channelIntervalMs: opts.channelIntervalMs ?? 1000, clustersOf: (ch) => channels.clustersPostingTo(ch) });
  const ids = new ButtonIds(cfg.botToken, store);
  const directory = new Directory(api, { logger: log, ...(opts.approverGroupsMaxStaleMs !== undefined ? { maxStaleMs: opts.approverGroupsMaxStaleMs } : {}) });
  const policyFor = (cluster: string) => {
    const c = clusters.get(cluster)?.config;
    return c ? approvalPolicyFor(c, config) : undefined;
  };
  const remediatorFor = (cluster: string) => clusters.get(cluster)?.remediator;
  const stateOf = (cluster: string) => clusters.get(cluster)?.state;
  const notifier = new Notifier({
    api,
    store,
    ids,
    channels,
    clock,
    logger: log,
    policyFor,
    canRemediate: (c) => remediatorFor(c) !== undefined,
    stateOf,
    activeWindowMs: config.findings.activeWindow,
    quietPeriodMs: config.findings.quietPeriod,
  });
  const flow = new ApprovalFlow({
    store,
    api,
    notifier,
    directory,
    channels,
    ids,
    clock,
    logger: log,
    metrics,
    policyFor,
    remediatorFor,
    remediationProblem: (cluster) => {
      const rt = clusters.get(cluster);
      if (!rt) return 'unknown cluster';
      if (rt.kubeError) return rt.kubeError;
      return 'none' in rt.config.kubernetes ? 'Kubernetes access is not configured for this cluster (kubernetes: none)' : 'no Kubernetes access';
    },
    stateOf,
    rolloutTimeoutMs: config.remediation.rolloutTimeout,
    rolloutPollMs: opts.rolloutPollMs ?? 5000,
    ...(opts.progressRetryMs !== undefined ? { progressRetryMs: opts.progressRetryMs } : {}),
    track,
    signal: abort.signal,
    isLeader: () => ctx.isLeader(),
  });
  // `/tokens scan` may reach a standby replica (HA): it leaves a request in the shared store for the leader.
  const scanRequestKey = (cluster: string) => `slack:scan-request:${cluster}`;
  const runNow = (cluster: string) => {
    if (ctx.isLeader()) return ctx.runNow(cluster);
    if (!clusters.has(cluster)) return 'unknown-job' as const;
    store.setCursor(scanRequestKey(cluster), String(clock()));
    return 'started' as const;
  };
  const pickUpScans = () => {
    if (!ctx.isLeader()) return;
    for (const cluster of clusters.keys()) {
      if (Number(store.getCursor(scanRequestKey(cluster)) ?? 0) > 0) {
        store.setCursor(scanRequestKey(cluster), '0');
        log.info({ cluster }, '/tokens scan requested on another replica: polling now');
        ctx.runNow(cluster);
      }
    }
  };
  const command = new TokensCommand({ store, api, notifier, channels, clusters, runNow, clock, logger: log, activeWindowMs: config.findings.activeWindow, scanIntervalMs: config.slack?.commands.scanInterval ?? DEFAULT_SCAN_INTERVAL_MS, readinessMinWindowMs: config.findings.readinessMinWindow });
  // Before every listener: a replayed HTTP request or a redelivered envelope is acknowledged and dropped (replay.ts).
  app.use(replayGuard({ store, logger: log, metrics, ...(opts.wallClock ? { now: opts.wallClock } : {}) }));
  registerListeners(app, { command, flow, api, logger: log, track });
  home = new HomePublisher(
    {
      store,
      clusters,
      messageOfGroup: (g) => notifier.messageOfGroup(g),
      permalink: (channel, ts) => api.permalink(channel, ts),
      approversOf: (a) => flow.approversOf(a),
      publish: (user, view) => api.publishHome(user, view),
      readiness: (name, findings) => command.readiness(name, findings, clusters.get(name)!.poller.health()),
      clock,
      logger: log,
      activeWindowMs: config.findings.activeWindow,
    },
    opts.home,
  );
  const homePublisher = home;
  registerHome(app, { home: homePublisher, logger: log, track: (p) => tasks.track(p) });

  const report = async (r: VerificationReport): Promise<void> => {
    const f = r.finding.finding;
    const o = r.outcome;
    if (o.outcome === 'resolved') {
      await notifier.refresh(f.id);
      await notifier.reply(f, verificationMessage({ outcome: 'resolved', finding: f, action: r.approval.action, actionAt: r.completedAt, now: r.now, settleMs: r.settleMs }));
    } else if (o.outcome === 'recurrence') {
      await notifier.reply(f, verificationMessage({ outcome: 'recurrence', finding: f, action: r.approval.action, actionAt: r.completedAt, now: r.now, staleRequests: o.requests, lastSeen: o.lastSeen }));
    } else {
      await notifier.reply(f, persistingMessage(f, r.approval.action, o, r.completedAt));
    }
  };
  // The node probe's check of a restart: the token file rewritten with a token issued after it, or not.
  const reportProbe = async (r: ProbeCheckReport): Promise<void> => {
    const o = r.outcome;
    await notifier.reply(r.finding.finding, probeCheckMessage({ outcome: o.outcome, finding: r.finding.finding, action: r.approval.action, startedAt: r.startedAt, now: r.now, files: o.files, silent: o.silent }));
  };

  // A cluster-level credential event (signing-key rotation, issuer change) is said once per cluster: one message in its
  // channel, before its 401 alerts. Its onset is kept in the store (a restart does not say it again); a post Slack
  // refuses is tried again at the next poll.
  const announcedKey = (cluster: string) => `slack:cluster-event:${cluster}`;
  const announceClusterEvents = async (cluster: string, events: readonly ClusterEvent[]): Promise<void> => {
    const channel = channels.channelOf(cluster);
    if (channel === undefined) return;
    for (const e of events) {
      if (store.getCursor(announcedKey(cluster)) === e.at) continue;
      try {
        await api.post(channel, clusterEventMessage(e));
      } catch (err) {
        log.warn({ err, cluster }, 'could not post the cluster-level credential event; trying again at the next poll');
        continue;
      }
      store.setCursor(announcedKey(cluster), e.at);
      store.logAction({ at: clock(), cluster, actor: null, action: 'cluster.credential-event', target: cluster, result: 'reported', detail: e.summary });
    }
  };

  let stopped = false;
  // Called by the runtime after each successful poll, before its verifier (Integration.afterPoll).
  const afterPoll: NonNullable<Integration['afterPoll']> = async (rt, findings, outcome) => {
    if (stopped) return;
    await track(
      (async () => {
        await announceClusterEvents(rt.config.name, outcome.clusterEvents ?? []);
        await notifier.onFindings(rt.config.name, findings, outcome.changes);
        // Findings resolved as quiet that no longer have records (retention) are not among `findings`: update their
        // alerts too (resolved variant, buttons removed).
        const shown = new Set(findings.map((f) => f.id));
        for (const id of outcome.concluded) {
          if (shown.has(id)) continue;
          try {
            await notifier.refresh(id);
          } catch (err) {
            log.error({ err, finding: id }, 'could not update the alert of a finding resolved as quiet');
          }
        }
      })(),
    );
  };

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

  const sweepTimer = setInterval(() => {
    void track(flow.sweepExpired()).catch((err: unknown) => log.error({ err }, 'approval expiry sweep failed'));
  }, opts.sweepIntervalMs ?? 30_000);
  sweepTimer.unref();
  const pickupTimer = setInterval(() => {
    if (stopped) return;
    void track(flow.pickUp()).catch((err: unknown) => log.error({ err }, 'picking up approved actions failed'));
    try {
      pickUpScans();
    } catch (err) {
      log.error({ err }, 'picking up scan requests failed');
    }
  }, opts.pickupIntervalMs ?? 2000);
  pickupTimer.unref();
  const homeTickMs = opts.home?.tickMs ?? 1000;
  const homeTimer =
    homeTickMs > 0
      ? setInterval(() => {
          if (stopped) return;
          void tasks.track(homePublisher.tick()).catch((err: unknown) => log.error({ err }, 'republishing the Home tab failed'));
        }, homeTickMs)
      : undefined;
  homeTimer?.unref();
  await flow.pickUp();
  // Alerts of findings stored while Slack was unreachable (or before a restart) and never posted: post them now
  // rather than at the next poll. Only the leader posts alerts (HA).
  for (const name of ctx.isLeader() ? clusters.keys() : []) {
    if (channels.channelOf(name) === undefined) continue;
    const pending = store.listFindings(name, { status: ['open'] }).filter((f) => notifier.messageOf(f.finding.id) === undefined);
    if (pending.length === 0) continue;
    log.info({ cluster: name, alerts: pending.length }, 'posting alerts found while Slack was not connected');
    void track(notifier.onFindings(name, pending.map((f) => f.finding), [])).catch((err: unknown) => log.error({ err, cluster: name }, 'posting pending alerts failed'));
  }

  return {
    name: 'slack',
    state: () => (watchdog ? (watchdog.isConnected ? 'connected' : 'disconnected') : 'ok'),
    ...(eventsUrl ? { eventsUrl } : {}),
    ...(watchdog ? { watchdog } : {}),
    idle: async () => {
      await tasks.idle();
      flow.flushRefusals();
    },
    sweep: () => track(flow.sweepExpired()),
    afterPoll,
    verificationReporter: { report, reportProbe },
    parts: { api, notifier, flow, ids, command, app, home: homePublisher },
    async stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(sweepTimer);
      clearInterval(pickupTimer);
      if (homeTimer) clearInterval(homeTimer);
      watchdog?.stop();
      abort.abort();
      await tasks.idle(opts.stopTimeoutMs ?? 10_000);
      flow.flushRefusals();
      try {
        await app.stop();
      } catch (err) {
        log.warn({ err }, 'stopping the Slack app failed');
      }
    },
  };
}
