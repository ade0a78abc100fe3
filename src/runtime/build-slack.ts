/**
 * The Slack integration of `tokenwatch serve`, built in flow order: the Bolt app (`src/slack/app.ts`
 * {@link createSlackApp}), then the parts on its Web API client (`SlackApi`, channel map, button ids, user-group
 * directory, the notifier of alerts, the approval flow, `/tokens`, the Home tab), the listeners registered on the app
 * ({@link registerSlackListeners}), the transport started ({@link startSlackApp}), then the timers (approval expiry,
 * pick-up of approved actions and scan requests, Home tab). It only builds and wires: what happens after a poll lives
 * in `src/slack/` — the poll's alerts and the start-up posting of unposted ones (`poll-alerts.ts`), cluster-level
 * events (`cluster-events.ts`), `/tokens scan` requests across replicas (`scan-requests.ts`), the verifier's thread
 * replies (`verification-replies.ts`), the follow-up scans (`follow-up-scans.ts`) — and why a cluster cannot be
 * remediated in `src/remediation/availability.ts`. After each poll the poll pipeline's notify step calls its
 * `afterPoll` (alerts), then its verifier reports through its `verificationReporter` (docs/design/architecture.md
 * "How serve is put together").
 */
import type { App } from '@slack/bolt';
import { approvalPolicyFor } from '../approvals/from-config.js';
import type { Config } from '../config/types.js';
import { groupIdOf } from '../findings/groups.js';
import type { Logger } from '../observability/logger.js';
import { remediationProblem } from '../remediation/availability.js';
import { SlackApi } from '../slack/api.js';
import { createSlackApp, registerSlackListeners, startSlackApp, type SlackApp as CreatedSlackApp, type SlackOptions } from '../slack/app.js';
import { slackBudget } from '../slack/budget.js';
import { ButtonIds } from '../slack/buttons.js';
import { ChannelMap } from '../slack/channels.js';
import { ClusterEventAnnouncer } from '../slack/cluster-events.js';
import { DEFAULT_SCAN_INTERVAL_MS, TokensCommand } from '../slack/commands.js';
import type { Integration, SlackContext } from '../slack/context.js';
import { Directory } from '../slack/directory.js';
import { DIGEST_EVENT_TYPE, NotificationDrainer } from '../slack/drainer.js';
import { ApprovalFlow } from '../slack/flow.js';
import { FollowUpScans } from '../slack/follow-up-scans.js';
import { FollowUps } from '../slack/followups.js';
import { HomePublisher } from '../slack/home.js';
import { NoticeSender } from '../slack/notices.js';
import { Notifier } from '../slack/notifier.js';
import { DEFAULT_SLACK_RATES, RateGate } from '../slack/outbox.js';
import { httpPager, type Pager, type PageTarget } from '../slack/pager.js';
import { PagingScan } from '../slack/paging.js';
import { PollAlerts } from '../slack/poll-alerts.js';
import { ScanRequests } from '../slack/scan-requests.js';
import { Tasks } from '../slack/tasks.js';
import { verificationReplies } from '../slack/verification-replies.js';
import type { SocketWatchdog } from '../slack/watchdog.js';
import { warmSlack, type WarmResult } from '../slack/warm.js';
import { ChannelHealth } from '../slack/channel-health.js';
import { NoticeRepository } from '../store/notices.js';
import { SqlBucketStateStore } from '../store/rate-buckets.js';
import { budgetStoreError } from './budgets.js';

/** The running integration; the extra members serve tests, benchmarks and the sandbox. */
export interface SlackIntegration extends Integration {
  /** HTTP mode: the events URL, e.g. `http://127.0.0.1:3000/slack/events`. */
  eventsUrl?: string;
  /** Resolves when no work started by a Slack request or a poll is pending (rollouts and the notification queue included). */
  idle(): Promise<void>;
  /** Runs the expiry sweep now; returns how many approvals expired. */
  sweep(): Promise<number>;
  /** Socket Mode only: the connection watchdog. */
  watchdog?: SocketWatchdog;
  /** What the start-up warm-up of the request paths did (`src/slack/warm.ts`). */
  warmUp: WarmResult;
  /** The parts, for tests. */
  parts: { api: SlackApi; notifier: Notifier; flow: ApprovalFlow; ids: ButtonIds; command: TokensCommand; app: App; home: HomePublisher; drainer: NotificationDrainer };
}

/**
 * Starts the Slack integration of `tokenwatch serve` (`composeServe` starts it when `config.slack.enabled`), tuned by
 * `opts`; see the module docstring for what it builds.
 * @throws Error when Slack is not enabled, a secret is missing, the bot token is rejected (`auth.test` answers an
 *   error such as `invalid_auth`), or the HTTP port is taken; `IntegrationUnavailableError` (src/slack/context.ts) when Slack cannot
 *   be reached (network error, timeout, HTTP 5xx, rate limit): serve then retries in the background.
 */
/** The Slack Web API wrapper on the app's client, told of every call and 429 (the queue's rate gate). */
function buildApi(ctx: SlackContext, created: CreatedSlackApp, channels: ChannelMap, gate: RateGate, opts: SlackOptions): SlackApi {
  const { store, metrics } = ctx;
  return new SlackApi({
    client: created.app.client,
    logger: created.log,
    metrics,
    channelIntervalMs: opts.channelIntervalMs ?? 1000,
    clustersOf: (ch) => channels.clustersPostingTo(ch),
    // Replicas on PostgreSQL: one budget per workspace and method for all of them (src/slack/budget.ts).
    ...(store.sql.dialect === 'postgres' && {
      budget: slackBudget({ team: created.auth.team_id ?? 'workspace', rates: DEFAULT_SLACK_RATES, store: new SqlBucketStateStore(store.sql), onStoreError: budgetStoreError('slack', metrics, created.log) }),
    }),
    onCall: (method, channel) => gate.record(method, channel),
    onRateLimited: (method, retryAfterMs) => gate.pause(method, retryAfterMs),
  });
}

/** The pager of `slack.paging` (PagerDuty and/or a webhook) and its targets; none when paging is off. */
function buildPager(config: Config, clock: () => number): { pager?: Pager; targets: PageTarget[] } {
  const paging = config.slack?.paging;
  const targets: PageTarget[] = [...(paging?.pagerduty ? (['pagerduty'] as const) : []), ...(paging?.webhook ? (['webhook'] as const) : [])];
  if (!paging || targets.length === 0) return { targets };
  const pager = httpPager(
    {
      ...(paging.pagerduty ? { pagerduty: { url: paging.pagerduty.url, routingKey: config.slack?.pagerdutyRoutingKey ?? '' } } : {}),
      ...(paging.webhook ? { webhook: { url: paging.webhook.url } } : {}),
    },
    clock,
  );
  return { pager, targets };
}

/** The sender of the notification queue's rows: alert items through the notifier, digests and notices through the API. */
function queueSender(api: SlackApi, notifier: Notifier, channels: ChannelMap, noticeSender: NoticeSender): ConstructorParameters<typeof NotificationDrainer>[0]['sender'] {
  return {
    sendItem: (i) => notifier.sendItem(i),
    digestLine: (c, g, now) => notifier.digestLine(c, g, now),
    post: (c, m, metadata) => api.post(c, m, undefined, metadata),
    update: (c, ts, m) => api.update(c, ts, m),
    findDigest: async (c, key, oldestMs) => {
      const at = channels.idOf(c);
      const ts = await api.findByMetadata(at, DIGEST_EVENT_TYPE, 'digest_key', key, oldestMs);
      return ts === undefined ? undefined : { channel: at, ts };
    },
    sendNotice: (i) => noticeSender.send(i),
  };
}

/** The follow-up notices' settings of `slack.approvals` (docs/slack.md). */
function followUpSettings(config: Config): ConstructorParameters<typeof FollowUps>[0]['settings'] {
  const approvals = config.slack?.approvals;
  return {
    reminders: approvals?.reminders ?? true,
    ...(approvals?.remindAfter !== undefined ? { remindAfterMs: approvals.remindAfter } : {}),
    ...(approvals?.escalateTo !== undefined ? { escalateTo: approvals.escalateTo } : {}),
    notifyRequester: approvals?.notifyRequester ?? true,
  };
}

/** The Slack error of `cluster`'s channel, then of each channel its routing rules send alerts to; undefined when none. */
function channelProblemOf(cluster: string, channels: ChannelMap, api: SlackApi): ReturnType<SlackApi['channelProblem']> {
  for (const ch of channels.channelsOf(cluster)) {
    const p = api.channelProblem(ch) ?? api.channelProblem(channels.idOf(ch));
    if (p) return p;
  }
  return undefined;
}

/** The integration's timers: approval expiry sweep, pick-up of approved actions and scan requests, Home tab ticks. */
function startTimers(o: { opts: SlackOptions; log: Logger; tasks: Tasks; track: <T>(p: Promise<T>) => Promise<T>; flow: ApprovalFlow; scans: ScanRequests; home: HomePublisher; stopped: () => boolean }): () => void {
  const { opts, log, tasks, track, flow, home, stopped } = o;
  const sweepTimer = setInterval(() => {
    void track(flow.sweepExpired()).catch((err: unknown) => log.error({ err }, 'approval expiry sweep failed'));
  }, opts.sweepIntervalMs ?? 30_000);
  sweepTimer.unref();
  const pickupTimer = setInterval(() => {
    if (stopped()) return;
    // Not `track`: a tick changes nothing by itself, so it schedules no follow-up scan (the actions it runs do, when they end).
    void tasks.track(flow.pickUp().finally(() => home.changed())).catch((err: unknown) => log.error({ err }, 'picking up approved actions failed'));
    o.scans.pickUp().catch((err: unknown) => log.error({ err }, 'picking up scan requests failed'));
  }, opts.pickupIntervalMs ?? 2000);
  pickupTimer.unref();
  const homeTickMs = opts.home?.tickMs ?? 1000;
  const homeTimer =
    homeTickMs > 0
      ? setInterval(() => {
          if (stopped()) return;
          void tasks.track(home.tick()).catch((err: unknown) => log.error({ err }, 'republishing the Home tab failed'));
        }, homeTickMs)
      : undefined;
  homeTimer?.unref();
  return () => {
    clearInterval(sweepTimer);
    clearInterval(pickupTimer);
    if (homeTimer) clearInterval(homeTimer);
  };
}

/**
 * Starts the Slack integration of `tokenwatch serve` (`composeServe` starts it when `config.slack.enabled`), tuned by
 * `opts`; see the module docstring for what it builds.
 * @throws Error when Slack is not enabled, a secret is missing, the bot token is rejected (`auth.test` answers an
 *   error such as `invalid_auth`), or the HTTP port is taken; `IntegrationUnavailableError` (src/slack/context.ts) when Slack cannot
 *   be reached (network error, timeout, HTTP 5xx, rate limit): serve then retries in the background.
 */
export async function startSlackWith(ctx: SlackContext, opts: SlackOptions = {}): Promise<SlackIntegration> {
  const { config, store, clock, metrics, clusters } = ctx;
  const created = await createSlackApp(ctx, opts);
  const { app, log } = created;
  const tasks = new Tasks();
  let stopped = false;
  // Any tracked work (a poll's alerts, a click, a vote, a sweep) may change what the Home tab shows: mark it stale
  // (cheap; republishing is debounced in home.ts), and may make follow-ups due.
  let home: HomePublisher | undefined;
  const track = <T>(p: Promise<T>): Promise<T> =>
    tasks.track(
      p.finally(() => {
        home?.changed();
        scans.request();
      }),
    );
  const abort = new AbortController();
  const channels = new ChannelMap(config);
  // Slack's rates, for the notification queue: told of every call, and of every 429 the WebClient waits out.
  const queueClock = opts.queueClock ?? Date.now;
  const gate = new RateGate({ ...DEFAULT_SLACK_RATES, postIntervalMs: opts.channelIntervalMs ?? DEFAULT_SLACK_RATES.postIntervalMs }, queueClock);
  const api = buildApi(ctx, created, channels, gate, opts);
  // Whether the bot can post in each cluster's channels, checked at start and by /tokens status (channel-health.ts).
  const channelHealth = new ChannelHealth(api, channels, created.scopes);
  const ids = new ButtonIds(created.botToken, store);
  const directory = new Directory(api, { logger: log, ...(opts.approverGroupsMaxStaleMs !== undefined ? { maxStaleMs: opts.approverGroupsMaxStaleMs } : {}) });
  const policyFor = (cluster: string) => {
    const c = clusters.get(cluster)?.config;
    return c ? approvalPolicyFor(c, config) : undefined;
  };
  const remediatorFor = (cluster: string) => clusters.get(cluster)?.remediator;
  const stateOf = (cluster: string) => clusters.get(cluster)?.state;
  const notifier = new Notifier({ api, store, ids, channels, clock, logger: log, policyFor, canRemediate: (c) => remediatorFor(c) !== undefined, stateOf, activeWindowMs: config.findings.activeWindow, quietPeriodMs: config.findings.quietPeriod });
  // The notification queue (docs/slack.md "Notification queue"): polls enqueue their alert work as rows of the store's
  // `slack_outbox`; the drainer sends it at Slack's rates, on a replica that owns the cluster (`ctx.ownership`).
  // Follow-up notices (reminders, escalations, outcomes to the requester, pages) go through the same queue as rows
  // with their own intent and record (src/slack/notices.ts). Notices are on the service clock (the sandbox runs it faster).
  const notices = new NoticeRepository(store.sql);
  const { pager, targets: pageTargets } = buildPager(config, clock);
  const noticeSender = new NoticeSender({ notices, queue: store.outbox, api, ...(pager ? { pager } : {}), clock, logger: log.child({ component: 'slack-notices' }) });
  const owns = (cluster: string) => ctx.ownership.owns(cluster);
  const drainer = new NotificationDrainer({ queue: store.outbox, sender: queueSender(api, notifier, channels, noticeSender), gate, clock: queueClock, logger: log.child({ component: 'slack-queue' }), metrics, ownsAny: () => ctx.ownership.ownsAny(), owns, onSent: () => home?.changed() });
  let pagingScan: PagingScan | undefined;
  /** A finding's alert item, if one is pending, is sent before a reply goes in its thread (the reply needs the alert). */
  const alertSent = async (f: { cluster: string; namespace: string; serviceAccount: string }): Promise<void> => {
    await drainer.settle(`alert:${groupIdOf(f)}`);
  };
  const flow = new ApprovalFlow({
    ...{ store, api, notifier, directory, channels, ids, clock, logger: log, metrics, policyFor, remediatorFor, stateOf, track, owns },
    remediationProblem: (cluster) => remediationProblem(clusters.get(cluster)),
    rolloutTimeoutMs: config.remediation.rolloutTimeout,
    rolloutPollMs: opts.rolloutPollMs ?? 5000,
    ...(opts.progressRetryMs !== undefined ? { progressRetryMs: opts.progressRetryMs } : {}),
    signal: abort.signal,
    ignoredEventTimesOf: (cluster) => clusters.get(cluster)?.poller.health().ignoredEventTimes,
    onActed: (f) => pagingScan?.acted(f) ?? Promise.resolve(),
  });
  const enqueued = () => drainer.kick();
  const followUps = new FollowUps({ store, notices, approversOf: (a) => flow.approversOf(a), threadOf: (a) => flow.threadOf(a), clock, logger: log.child({ component: 'slack-follow-ups' }), settings: followUpSettings(config), owns, enqueued });
  const paging = config.slack?.paging;
  if (paging && pager) {
    const linkOf = async (g: string) => {
      const at = await notifier.messageOfGroup(g);
      return at ? api.permalink(at.channel, at.ts) : undefined;
    };
    pagingScan = new PagingScan({ store, notices, clusters: () => clusters.keys(), owns, afterMs: paging.after, targets: pageTargets, linkOf, clock, logger: log.child({ component: 'paging' }), enqueued });
  }
  const scans = new FollowUpScans({ followUps, paging: () => pagingScan, tasks, stopped: () => stopped, logger: log });
  const scanRequests = new ScanRequests({ ...ctx, store, logger: log });
  const command = new TokensCommand({
    ...{ store, api, notifier, channels, clusters, clock, logger: log },
    runNow: (cluster) => scanRequests.runNow(cluster),
    activeWindowMs: config.findings.activeWindow,
    scanIntervalMs: config.slack?.commands.scanInterval ?? DEFAULT_SCAN_INTERVAL_MS,
    readinessMinWindowMs: config.findings.readinessMinWindow,
    // Items waiting for a channel Slack refuses are not "behind": status shows that channel's problem instead.
    backlog: () => drainer.backlog((channel) => api.channelProblem(channel) === undefined),
    ...(ctx.ownerOf ? { ownerOf: (cluster: string) => ({ owner: ctx.ownerOf!(cluster), self: ctx.ownership.owns(cluster) }) } : {}),
    checkChannels: (cluster) => channelHealth.check([cluster]),
  });
  const homePublisher = new HomePublisher(
    {
      ...{ store, clusters, clock, logger: log },
      messageOfGroup: (g) => notifier.messageOfGroup(g),
      permalink: (channel, ts) => api.permalink(channel, ts),
      isClusterChannel: (cluster, channel) => channels.matches(channels.channelOf(cluster) ?? '', { id: channel }),
      approversOf: (a) => flow.approversOf(a),
      publish: (user, view) => api.publishHome(user, view),
      readiness: (name, findings) => command.readiness(name, findings, clusters.get(name)!.poller.health()),
      activeWindowMs: config.findings.activeWindow,
    },
    opts.home,
  );
  home = homePublisher;
  registerSlackListeners(app, { store, metrics, ...(opts.wallClock ? { wallClock: opts.wallClock } : {}), command, flow, api, logger: log, track, home: { home: homePublisher, logger: log, track: (p) => tasks.track(p) } });
  const announcer = new ClusterEventAnnouncer({ store, api, channels, clock, logger: log });
  const alerts = new PollAlerts({ store, notifier, drainer, announcer, channels, queueClock, logger: log });

  const { eventsUrl, watchdog } = await startSlackApp(created, ctx, opts);
  // The first request after a start is acked as fast as the next ones: its paths are compiled and prepared now.
  const warm = await warmSlack({ store, command, cluster: clusters.keys().next().value, ...(eventsUrl && config.slack?.signingSecret ? { http: { eventsUrl, signingSecret: config.slack.signingSecret } } : {}), clock, logger: log });
  log.debug({ steps: warm.done, ms: Math.round(warm.ms) }, 'Slack request paths warmed up');
  const stopTimers = startTimers({ opts, log, tasks, track, flow, scans: scanRequests, home: homePublisher, stopped: () => stopped });
  await flow.pickUp();
  await alerts.queueUnposted(clusters.keys(), ctx.ownership);
  // The queue's rows left by an earlier run are resumed too, and follow-ups due meanwhile are stored.
  drainer.start();
  scans.request();
  // Each channel alerts may go to (the clusters' own and those their routing rules name) is checked now, so that a
  // channel the bot is not in shows in /tokens status and the health model before the first alert fails there.
  void track(channelHealth.check(clusters.keys()));

  return {
    name: 'slack',
    busy: (cluster) => flow.isExecuting(cluster),
    channelProblem: (cluster) => channelProblemOf(cluster, channels, api),
    state: () => (watchdog ? (watchdog.isConnected ? 'connected' : 'disconnected') : 'ok'),
    ...(eventsUrl ? { eventsUrl } : {}),
    ...(watchdog ? { watchdog } : {}),
    warmUp: warm,
    idle: async () => {
      await tasks.idle();
      await drainer.idle();
      await flow.flushRefusals();
    },
    sweep: () => track(flow.sweepExpired()),
    // Called by the runtime after each successful poll, before its verifier (Integration.afterPoll).
    afterPoll: async (rt, findings, outcome) => {
      if (!stopped) await track(alerts.afterPoll(rt.config.name, findings, outcome));
    },
    // The verifier's reports go in their alert's thread, after the poll's pending work on that alert (alertSent).
    verificationReporter: verificationReplies({ notifier, alertSent, onConcluded: () => scans.request() }),
    parts: { api, notifier, flow, ids, command, app, home: homePublisher, drainer },
    async stop() {
      if (stopped) return;
      stopped = true;
      stopTimers();
      await drainer.stop(opts.stopTimeoutMs ?? 10_000);
      watchdog?.stop();
      abort.abort();
      await tasks.idle(opts.stopTimeoutMs ?? 10_000);
      await flow.flushRefusals();
      try {
        await app.stop();
      } catch (err) {
        log.warn({ err }, 'stopping the Slack app failed');
      }
    },
  };
}
