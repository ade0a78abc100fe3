/**
 * The Slack integration of `tokenwatch serve`, built in flow order: the Bolt app (`src/slack/app.ts`
 * {@link createSlackApp}), then the parts on its Web API client (`SlackApi`, channel map, button ids, user-group
 * directory, the notifier of alerts, the approval flow, `/tokens`, the Home tab), the listeners registered on the app
 * ({@link registerSlackListeners}), the transport started ({@link startSlackApp}), then the timers (approval expiry,
 * pick-up of approved actions and scan requests, Home tab). After each poll the poll pipeline's notify step calls its `afterPoll` (alerts),
 * then its verifier reports through its `verificationReporter` (docs/design/architecture.md "How serve is put together").
 */
import type { TokenKind } from '../findings/types.js';
import type { StoredFinding } from '../store/index.js';
import type { App } from '@slack/bolt';
import { approvalPolicyFor } from '../approvals/from-config.js';
import type { ClusterEvent } from '../findings/cluster-events.js';
import type { ProbeCheckReport, SupersededReport, VerificationReport } from '../remediation/verify.js';
import { SlackApi } from '../slack/api.js';
import { createSlackApp, registerSlackListeners, startSlackApp, type SlackOptions } from '../slack/app.js';
import { probeCheckMessage, supersededMessage, verificationMessage } from '../slack/blocks/index.js';
import { ButtonIds } from '../slack/buttons.js';
import { ChannelMap } from '../slack/channels.js';
import { DEFAULT_SCAN_INTERVAL_MS, TokensCommand } from '../slack/commands.js';
import type { Integration, SlackContext } from '../slack/context.js';
import { Directory } from '../slack/directory.js';
import { ApprovalFlow } from '../slack/flow.js';
import { HomePublisher } from '../slack/home.js';
import { clusterEventMessage, persistingMessage } from '../slack/messages.js';
import { DIGEST_EVENT_TYPE, NotificationDrainer } from '../slack/drainer.js';
import { Notifier } from '../slack/notifier.js';
import { DEFAULT_SLACK_RATES, RateGate } from '../slack/outbox.js';
import { groupIdOf } from '../findings/groups.js';
import type { SocketWatchdog } from '../slack/watchdog.js';
import { warmSlack, type WarmResult } from '../slack/warm.js';
import { ChannelHealth } from '../slack/channel-health.js';
import { slackBudget } from '../slack/budget.js';
import { SqlBucketStateStore } from '../store/rate-buckets.js';
import { budgetStoreError } from './budgets.js';
import { NoticeRepository } from '../store/notices.js';
import { NoticeSender } from '../slack/notices.js';
import { FollowUps } from '../slack/followups.js';
import { PagingScan } from '../slack/paging.js';
import { httpPager, type PageTarget } from '../slack/pager.js';

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
export async function startSlackWith(ctx: SlackContext, opts: SlackOptions = {}): Promise<SlackIntegration> {
  const { config, store, clock, metrics, clusters } = ctx;
  const created = await createSlackApp(ctx, opts);
  const { app, log } = created;
  const tasks = new Tasks();
  let stopped = false;
  // Any tracked work (a poll's alerts, a click, a vote, a sweep) may change what the Home tab shows: mark it stale
  // (cheap; republishing is debounced in home.ts).
  let home: HomePublisher | undefined;
  const track = <T>(p: Promise<T>): Promise<T> =>
    tasks.track(
      p.finally(() => {
        home?.changed();
        scanFollowUps();
      }),
    );
  const abort = new AbortController();
  const channels = new ChannelMap(config);
  // Slack's rates, for the notification queue: told of every call, and of every 429 the WebClient waits out.
  const queueClock = opts.queueClock ?? Date.now;
  const gate = new RateGate({ ...DEFAULT_SLACK_RATES, postIntervalMs: opts.channelIntervalMs ?? DEFAULT_SLACK_RATES.postIntervalMs }, queueClock);
  const api = new SlackApi({
    client: app.client,
    logger: log,
    metrics,
    channelIntervalMs: opts.channelIntervalMs ?? 1000,
    clustersOf: (ch) => channels.clustersPostingTo(ch),
    // Replicas on PostgreSQL: one budget per workspace and method for all of them (src/slack/budget.ts).
    ...(store.sql.dialect === 'postgres' && {
      budget: slackBudget({ team: created.auth.team_id ?? 'workspace', rates: DEFAULT_SLACK_RATES, store: new SqlBucketStateStore(store.sql), onStoreError: budgetStoreError('slack', metrics, log) }),
    }),
    onCall: (method, channel) => gate.record(method, channel),
    onRateLimited: (method, retryAfterMs) => gate.pause(method, retryAfterMs),
  });
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
  // The notification queue (docs/slack.md "Notification queue"): polls enqueue their alert work as rows of the store's
  // `slack_outbox`; the drainer sends it at Slack's rates, on a replica that owns the cluster (`ctx.ownership`).
  // Follow-up notices (reminders, escalations, outcomes to the requester, pages) go through the same queue as rows
  // with their own intent and record (src/slack/notices.ts).
  const notices = new NoticeRepository(store.sql);
  const paging = config.slack?.paging;
  const pageTargets: PageTarget[] = [...(paging?.pagerduty ? (['pagerduty'] as const) : []), ...(paging?.webhook ? (['webhook'] as const) : [])];
  const pager =
    paging && pageTargets.length > 0
      ? httpPager(
          {
            ...(paging.pagerduty ? { pagerduty: { url: paging.pagerduty.url, routingKey: config.slack?.pagerdutyRoutingKey ?? '' } } : {}),
            ...(paging.webhook ? { webhook: { url: paging.webhook.url } } : {}),
          },
          clock,
        )
      : undefined;
  // The service clock (approvals' and findings' times are on it; the sandbox runs it faster than the wall clock).
  const noticeSender = new NoticeSender({ notices, queue: store.outbox, api, ...(pager ? { pager } : {}), clock, logger: log.child({ component: 'slack-notices' }) });
  const drainer = new NotificationDrainer({
    queue: store.outbox,
    sender: {
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
    },
    gate,
    clock: queueClock,
    logger: log.child({ component: 'slack-queue' }),
    metrics,
    ownsAny: () => ctx.ownership.ownsAny(),
    owns: (cluster) => ctx.ownership.owns(cluster),
    onSent: () => home?.changed(),
  });
  let pagingScan: PagingScan | undefined;
  /** A finding's alert item, if one is pending, is sent before a reply goes in its thread (the reply needs the alert). */
  const alertSent = async (f: { cluster: string; namespace: string; serviceAccount: string }): Promise<void> => {
    await drainer.settle(`alert:${groupIdOf(f)}`);
  };
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
    owns: (cluster) => ctx.ownership.owns(cluster),
    ignoredEventTimesOf: (cluster) => clusters.get(cluster)?.poller.health().ignoredEventTimes,
    onActed: (f) => pagingScan?.acted(f) ?? Promise.resolve(),
  });
  const approvals = config.slack?.approvals;
  const followUps = new FollowUps({
    store,
    notices,
    approversOf: (a) => flow.approversOf(a),
    threadOf: (a) => flow.threadOf(a),
    clock,
    logger: log.child({ component: 'slack-follow-ups' }),
    settings: {
      reminders: approvals?.reminders ?? true,
      ...(approvals?.remindAfter !== undefined ? { remindAfterMs: approvals.remindAfter } : {}),
      ...(approvals?.escalateTo !== undefined ? { escalateTo: approvals.escalateTo } : {}),
      notifyRequester: approvals?.notifyRequester ?? true,
    },
    owns: (cluster) => ctx.ownership.owns(cluster),
    enqueued: () => drainer.kick(),
  });
  if (paging && pager) {
    pagingScan = new PagingScan({
      store,
      notices,
      clusters: () => clusters.keys(),
      owns: (cluster) => ctx.ownership.owns(cluster),
      afterMs: paging.after,
      targets: pageTargets,
      linkOf: async (g) => {
        const at = await notifier.messageOfGroup(g);
        return at ? api.permalink(at.channel, at.ts) : undefined;
      },
      clock,
      logger: log.child({ component: 'paging' }),
      enqueued: () => drainer.kick(),
    });
  }
  // The follow-up scans run after any tracked work (a click, a vote, a sweep, a poll, a rollout) and on the sweep timer;
  // one at a time, once more when asked during one. Tracked without `track`, so a scan does not schedule another.
  let scanning: Promise<void> | undefined;
  let scanAgain = false;
  const scanFollowUps = (): void => {
    if (stopped) return;
    if (scanning) {
      scanAgain = true;
      return;
    }
    scanning = tasks.track(
      (async () => {
        do {
          scanAgain = false;
          await followUps.scan();
          await pagingScan?.scan();
        } while (scanAgain && !stopped);
      })()
        .catch((err: unknown) => log.error({ err }, 'the follow-up scan (reminders, escalations, outcomes, paging) failed'))
        .finally(() => {
          scanning = undefined;
        }),
    );
  };
  // `/tokens scan` may reach a replica that does not poll the cluster (HA): it leaves a request in the shared store
  // (src/store/scan-requests.ts) for the replica that owns the cluster, which takes it at its next pick-up tick.
  const runNow = async (cluster: string) => {
    if (ctx.ownership.owns(cluster)) return ctx.runNow(cluster);
    if (!clusters.has(cluster)) return 'unknown-job' as const;
    await store.scanRequests.request(cluster, clock());
    return 'started' as const;
  };
  const pickUpScans = async () => {
    for (const cluster of clusters.keys()) {
      if (!ctx.ownership.owns(cluster)) continue;
      const requestedAt = await store.scanRequests.take(cluster);
      if (requestedAt === undefined) continue;
      log.info({ cluster, requestedAt: new Date(requestedAt).toISOString() }, '/tokens scan requested on another replica: polling now');
      ctx.runNow(cluster);
    }
  };
  const command = new TokensCommand({
    store,
    api,
    notifier,
    channels,
    clusters,
    runNow,
    clock,
    logger: log,
    activeWindowMs: config.findings.activeWindow,
    scanIntervalMs: config.slack?.commands.scanInterval ?? DEFAULT_SCAN_INTERVAL_MS,
    readinessMinWindowMs: config.findings.readinessMinWindow,
    // Items waiting for a channel Slack refuses are not "behind": status shows that channel's problem instead.
    backlog: () => drainer.backlog((channel) => api.channelProblem(channel) === undefined),
    ...(ctx.ownerOf ? { ownerOf: (cluster: string) => ({ owner: ctx.ownerOf!(cluster), self: ctx.ownership.owns(cluster) }) } : {}),
    checkChannels: (cluster) => channelHealth.check([cluster]),
  });
  home = new HomePublisher(
    {
      store,
      clusters,
      messageOfGroup: (g) => notifier.messageOfGroup(g),
      permalink: (channel, ts) => api.permalink(channel, ts),
      isClusterChannel: (cluster, channel) => channels.matches(channels.channelOf(cluster) ?? '', { id: channel }),
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
  registerSlackListeners(app, {
    store,
    metrics,
    ...(opts.wallClock ? { wallClock: opts.wallClock } : {}),
    command,
    flow,
    api,
    logger: log,
    track,
    home: { home: homePublisher, logger: log, track: (p) => tasks.track(p) },
  });

  // The verifier's reports go in their alert's thread, after the poll's pending work on that alert (alertSent).
  const report = async (r: VerificationReport): Promise<void> => {
    scanFollowUps(); // the requester is told the verification's outcome
    const f = r.finding.finding;
    const o = r.outcome;
    await alertSent(f);
    if (o.outcome === 'resolved') {
      await notifier.refresh(f.id);
      const signals = [...new Set([f.kind, ...r.resolved.map((m) => m.finding.kind)])].filter((k): k is TokenKind => k !== 'cluster-credential');
      await notifier.reply(f, verificationMessage({ outcome: 'resolved', finding: f, action: r.approval.action, actionAt: r.completedAt, now: r.now, settleMs: r.settleMs, signals }));
    } else if (o.outcome === 'recurrence') {
      await notifier.reply(f, verificationMessage({ outcome: 'recurrence', finding: f, action: r.approval.action, actionAt: r.completedAt, now: r.now, staleRequests: o.requests, lastSeen: o.lastSeen }));
      // The restart is a stop-gap now: the alert's headline fix becomes the cause's, its Restart says it will recur.
      await notifier.refresh(f.id);
    } else {
      await notifier.reply(f, persistingMessage(f, r.approval.action, o, r.completedAt));
    }
  };
  const reportSuperseded = async (r: SupersededReport): Promise<void> => {
    await alertSent(r.finding.finding);
    await notifier.reply(r.finding.finding, supersededMessage(r.finding.finding, r.approval.action, r.approval.updatedAt, r.by.action, r.by.updatedAt));
  };
  // The node probe's check of a restart: the token file rewritten with a token issued after it, or not.
  const reportProbe = async (r: ProbeCheckReport): Promise<void> => {
    const o = r.outcome;
    await alertSent(r.finding.finding);
    await notifier.reply(r.finding.finding, probeCheckMessage({ outcome: o.outcome, finding: r.finding.finding, action: r.approval.action, startedAt: r.startedAt, completedAt: r.completedAt, now: r.now, files: o.files, silent: o.silent }));
    // A file not rewritten keeps a token that goes stale again: the alert says the restart is a stop-gap.
    if (o.outcome === 'not-rewritten') await notifier.refresh(r.finding.finding.id);
  };

  // A cluster-level credential event (signing-key rotation, issuer change) is said once per cluster: one message in its
  // channel, before its 401 alerts. Its onset is kept in the store (a restart does not say it again); a post Slack
  // refuses is tried again at the next poll.
  const announcedKey = (cluster: string) => `slack:cluster-event:${cluster}`;
  const announceClusterEvents = async (cluster: string, events: readonly ClusterEvent[]): Promise<void> => {
    const channel = channels.channelOf(cluster);
    if (channel === undefined) return;
    for (const e of events) {
      if (await store.getCursor(announcedKey(cluster)) === e.at) continue;
      try {
        await api.post(channel, clusterEventMessage(e));
      } catch (err) {
        log.warn({ err, cluster }, 'could not post the cluster-level credential event; trying again at the next poll');
        continue;
      }
      await store.setCursor(announcedKey(cluster), e.at);
      await store.logAction({ at: clock(), cluster, actor: null, action: 'cluster.credential-event', target: cluster, result: 'reported', detail: e.summary });
    }
  };

  // Called by the runtime after each successful poll, before its verifier (Integration.afterPoll).
  const afterPoll: NonNullable<Integration['afterPoll']> = async (rt, findings, outcome) => {
    if (stopped) return;
    await track(
      (async () => {
        await announceClusterEvents(rt.config.name, outcome.clusterEvents ?? []);
        // Off the poll path: the work is stored and the poll returns; the drainer sends it at Slack's rates. Findings
        // resolved as quiet without records any more (retention) get their group's item too (resolved variant, no buttons).
        const concluded: string[] = [];
        for (const id of outcome.concluded) {
          const f = await store.getFinding(id);
          if (f) concluded.push(groupIdOf(f.finding));
        }
        await drainer.enqueue(await notifier.workItems(rt.config.name, findings, outcome.changes, queueClock(), concluded));
      })(),
    );
  };

  const { eventsUrl, watchdog } = await startSlackApp(created, ctx, opts);
  // The first request after a start is acked as fast as the next ones: its paths are compiled and prepared now.
  const warm = await warmSlack({
    store,
    command,
    cluster: clusters.keys().next().value,
    ...(eventsUrl && config.slack?.signingSecret ? { http: { eventsUrl, signingSecret: config.slack.signingSecret } } : {}),
    clock,
    logger: log,
  });
  log.debug({ steps: warm.done, ms: Math.round(warm.ms) }, 'Slack request paths warmed up');

  const sweepTimer = setInterval(() => {
    void track(flow.sweepExpired()).catch((err: unknown) => log.error({ err }, 'approval expiry sweep failed'));
  }, opts.sweepIntervalMs ?? 30_000);
  sweepTimer.unref();
  const pickupTimer = setInterval(() => {
    if (stopped) return;
    // Not `track`: a tick changes nothing by itself, so it schedules no follow-up scan (the actions it runs do, when they end).
    void tasks.track(flow.pickUp().finally(() => home?.changed())).catch((err: unknown) => log.error({ err }, 'picking up approved actions failed'));
    pickUpScans().catch((err: unknown) => log.error({ err }, 'picking up scan requests failed'));
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
  // rather than at the next poll. Only the cluster's owner posts its alerts.
  for (const name of [...clusters.keys()].filter((c) => ctx.ownership.owns(c))) {
    if (channels.channelOf(name) === undefined) continue;
    const pending: StoredFinding[] = [];
    for (const f of await store.listFindings(name, { status: ['open'] })) if ((await notifier.messageOf(f.finding.id)) === undefined) pending.push(f);
    if (pending.length === 0) continue;
    log.info({ cluster: name, alerts: pending.length }, 'posting alerts found while Slack was not connected');
    await drainer.enqueue(await notifier.workItems(name, pending.map((f) => f.finding), [], queueClock()));
  }
  // The queue's rows left by an earlier run are resumed too, and follow-ups due meanwhile are stored.
  drainer.start();
  scanFollowUps();
  // Each channel alerts may go to (the clusters' own and those their routing rules name) is checked now, so that a
  // channel the bot is not in shows in /tokens status and the health model before the first alert fails there.
  void track(channelHealth.check(clusters.keys()));

  return {
    name: 'slack',
    busy: (cluster) => flow.isExecuting(cluster),
    // The cluster's channel, then each channel its routing rules send alerts to.
    channelProblem: (cluster) => {
      for (const ch of channels.channelsOf(cluster)) {
        const p = api.channelProblem(ch) ?? api.channelProblem(channels.idOf(ch));
        if (p) return p;
      }
      return undefined;
    },
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
    afterPoll,
    verificationReporter: { report, reportProbe, reportSuperseded },
    parts: { api, notifier, flow, ids, command, app, home: homePublisher, drainer },
    async stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(sweepTimer);
      clearInterval(pickupTimer);
      await drainer.stop(opts.stopTimeoutMs ?? 10_000);
      if (homeTimer) clearInterval(homeTimer);
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
