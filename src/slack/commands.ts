/**
 * `/tokens` (slash command): `status [cluster]`, `scan <cluster>`, `history <cluster>`, `help`. Answers are
 * ephemeral (visible to the caller only). The Bolt listener acknowledges first (`ack()`, well within Slack's 3 s)
 * and then calls {@link TokensCommand.handle}.
 *
 * A command about cluster X works only from X's alert channel (per-team clusters: a channel reaches only its own
 * clusters; others get a polite refusal naming the right channel). `status` without a cluster shows the clusters of
 * the current channel. Unknown subcommands and clusters get a reply listing what exists. Cluster names match
 * case-insensitively when only one configured name fits ({@link resolveClusterName}).
 */
import { approvalsOf, formatUtc, type ActionKind, type ActionTarget } from '../approvals/index.js';
import type { ClusterEvent } from '../findings/cluster-events.js';
import type { Finding, Severity } from '../findings/types.js';
import { readinessVerdict, type Readiness } from '../findings/readiness.js';
import { ignoredTimesText, type IgnoredEventTimes } from '../findings/clock-skew.js';
import { compareFindings } from '../findings/build.js';
import { groupFindings } from '../findings/groups.js';
import { scrubSecrets, type Logger } from '../observability/logger.js';
import { accessText } from '../observability/health.js';
import type { Store } from '../store/index.js';
import type { SlackApi } from './api.js';
import {
  helpMessage,
  historyMessage,
  refusalMessage,
  statusMessage,
  type StatusAlert,
  unknownCommandMessage,
  type ClusterStatus,
  type HistoryEntry,
  type SlackMessage,
  type SourceHealth,
} from './blocks/index.js';
import { targetOf } from './buttons.js';
import type { ChannelMap, ChannelRef } from './channels.js';
import type { RunNowResult, SlackCluster, SlackPollHealth } from './context.js';
import { scanLimitedMessage, scanMessage, wrongChannelText } from './messages.js';
import type { Notifier } from './notifier.js';
import { metricsNotes } from './metrics-status.js';

/** Dependencies of {@link TokensCommand}. */
export interface CommandDeps {
  store: Store;
  api: SlackApi;
  notifier: Notifier;
  channels: ChannelMap;
  clusters: ReadonlyMap<string, SlackCluster>;
  runNow(cluster: string): RunNowResult | Promise<RunNowResult>;
  clock: () => number;
  logger: Logger;
  /** `findings.activeWindow`, ms: 401s seen within it read "401s now". Default 1 h. */
  activeWindowMs?: number;
  /** `slack.commands.scanInterval`, ms: one `/tokens scan` per user and cluster within it (0 = no limit). Default 2 min. */
  scanIntervalMs?: number;
  /** `findings.readinessMinWindow`, ms: the shortest window for a "safe" readiness verdict. Default 7 days. */
  readinessMinWindowMs?: number;
  /** The Slack notification queue's backlog (src/slack/drainer.ts): shown as one line when not empty. */
  backlog?: () => { depth: number; oldestEnqueuedAt: number | null };
  /**
   * With clusters shared out across replicas: the replica that owns `cluster` as last read (null: none right now) and
   * whether it is this one. A cluster polled by another replica shows that replica and the poll health from the
   * shared store. Absent otherwise.
   */
  ownerOf?: (cluster: string) => { owner: string | null; self: boolean };
  /**
   * Checks that the bot can post in each channel of a cluster (its own and every channel its rules route to;
   * src/slack/channel-health.ts) before `/tokens status` reads the channels' problems. Absent: only problems
   * seen by earlier posts are shown.
   */
  checkChannels?: (cluster: string) => Promise<void>;
}

/** Default of {@link CommandDeps.scanIntervalMs}, ms. */
export const DEFAULT_SCAN_INTERVAL_MS = 120_000;

/**
 * The configured cluster a user meant by `typed`: the exact name, else the one name equal ignoring case (`Prod-EKS` →
 * `prod-eks`). Undefined when none matches, or when several differ only by case (ambiguous: the exact name is needed).
 */
export function resolveClusterName(typed: string, names: Iterable<string>): string | undefined {
  const all = [...names];
  if (all.includes(typed)) return typed;
  const folded = typed.toLowerCase();
  const matches = all.filter((n) => n.toLowerCase() === folded);
  return matches.length === 1 ? matches[0] : undefined;
}

/** `notes` of a cluster's status with the readiness line added last. */
function withReadiness(m: { notes?: string[] }, line: string): { notes: string[] } {
  return { notes: [...(m.notes ?? []), line] };
}

/**
 * Adds one status line per cluster-level credential event of the last poll (`src/findings/cluster-events.ts`), e.g.
 * `cluster event: 6 ServiceAccounts refused at once at 2026-11-20 11:30 UTC (signing-key rotation or issuer change), not
 * clients caching tokens; still failing: apps/reporter`.
 */
function withClusterEvents(m: { notes: string[] }, events: readonly ClusterEvent[]): { notes: string[] } {
  const lines = events.map((e) => {
    const still = e.stillFailing.length ? `; still failing: ${e.stillFailing.slice(0, 5).join(', ')}${e.stillFailing.length > 5 ? ` and ${e.stillFailing.length - 5} more` : ''}` : '';
    return `cluster event: ${e.serviceAccounts} ServiceAccounts refused at once at ${formatUtc(Date.parse(e.at))} (signing-key rotation or issuer change), not clients caching tokens${still}`;
  });
  return { notes: [...m.notes, ...lines] };
}

/** Adds one status line naming the token uses the last poll left out for inconsistent timestamps (`src/findings/clock-skew.ts`). */
function withIgnoredTimes(m: { notes: string[] }, ignored: IgnoredEventTimes | undefined): { notes: string[] } {
  return ignored ? { notes: [...m.notes, `audit timestamps inconsistent: ${ignoredTimesText(ignored)}`] } : m;
}

/** The parsed text of a `/tokens` command. */
export type TokensCommandText =
  | { sub: 'help' }
  | { sub: 'status'; cluster?: string }
  | { sub: 'scan' | 'history'; cluster?: string }
  | { sub: 'unknown'; word: string };

/** Parses the text after `/tokens` (case-insensitive subcommand; empty = help). */
export function parseTokensCommand(text: string): TokensCommandText {
  const words = text.trim().split(/\s+/).filter(Boolean);
  const sub = (words[0] ?? 'help').toLowerCase();
  const cluster = words[1];
  switch (sub) {
    case 'help':
      return { sub: 'help' };
    case 'status':
    case 'scan':
    case 'history':
      return cluster === undefined ? { sub } : { sub, cluster };
    default:
      return { sub: 'unknown', word: words[0]! };
  }
}

/** See the module docstring. */
export class TokensCommand {
  /** When each user last started a poll of each cluster with `/tokens scan` (key `user\0cluster`), epoch ms. */
  private readonly scans = new Map<string, number>();

  constructor(private readonly deps: CommandDeps) {}

  /** The reply to `/tokens <text>` sent by `user` from `channel`. */
  async handle(text: string, user: string, channel: ChannelRef): Promise<SlackMessage> {
    const parsed = parseTokensCommand(text);
    const names = [...this.deps.clusters.keys()];
    // Cluster names match case-insensitively where that is unambiguous.
    const cmd = 'cluster' in parsed && parsed.cluster !== undefined ? { ...parsed, cluster: resolveClusterName(parsed.cluster, names) ?? parsed.cluster } : parsed;
    this.deps.logger.info({ user, channel: channel.id, command: text.slice(0, 200) }, '/tokens');
    switch (cmd.sub) {
      case 'help':
        return helpMessage(names);
      case 'unknown':
        return unknownCommandMessage({ kind: 'subcommand', value: cmd.word }, names);
      case 'status': {
        if (cmd.cluster === undefined) {
          const mine = this.deps.channels.clustersIn(channel).map((c) => c.name);
          if (mine.length === 0) return refusalMessage(this.noClusterHere());
          return statusMessage(await Promise.all(mine.map((n) => this.clusterStatus(n))), this.statusContext());
        }
        const problem = this.check(cmd.cluster, channel);
        if (problem) return problem;
        return statusMessage([await this.clusterStatus(cmd.cluster)], this.statusContext());
      }
      case 'scan':
      case 'history': {
        if (cmd.cluster === undefined) {
          const mine = this.deps.channels.clustersIn(channel).map((c) => c.name);
          if (mine.length !== 1) {
            return refusalMessage(`Usage: \`/tokens ${cmd.sub} <cluster>\`. ${mine.length ? `Clusters of this channel: ${mine.map((n) => `\`${n}\``).join(', ')}.` : this.noClusterHere()}`);
          }
          return this.run(cmd.sub, mine[0]!, user);
        }
        const problem = this.check(cmd.cluster, channel);
        return problem ?? this.run(cmd.sub, cmd.cluster, user);
      }
    }
  }

  private async run(sub: 'scan' | 'history', cluster: string, user: string): Promise<SlackMessage> {
    if (sub === 'scan') return this.scan(cluster, user);
    return historyMessage(cluster, await this.history(cluster), { now: this.deps.clock() });
  }

  /**
   * `/tokens scan`: at most one poll started per user and cluster within `scanIntervalMs` (a poll that was already
   * running, or not started, does not count); a refused one says when the next is allowed.
   */
  private async scan(cluster: string, user: string): Promise<SlackMessage> {
    const interval = this.deps.scanIntervalMs ?? DEFAULT_SCAN_INTERVAL_MS;
    const now = this.deps.clock();
    const key = `${user}\0${cluster}`;
    const last = this.scans.get(key);
    if (interval > 0 && last !== undefined && now - last < interval) {
      this.deps.logger.info({ user, cluster }, '/tokens scan refused by the per-user rate limit');
      return scanLimitedMessage(cluster, last, last + interval, now);
    }
    const result = await this.deps.runNow(cluster);
    if (result === 'started' && interval > 0) {
      // Bounded by users × clusters; entries past their interval are dropped as new ones come.
      for (const [k, at] of this.scans) if (now - at >= interval) this.scans.delete(k);
      this.scans.set(key, now);
    }
    return scanMessage(cluster, result, this.deps.channels.mention(cluster));
  }

  private noClusterHere(): string {
    const where = [...this.deps.clusters.keys()]
      .filter((n) => this.deps.channels.channelOf(n) !== undefined)
      .map((n) => `\`${n}\` in ${this.deps.channels.mention(n)}`);
    return `This channel is not the alert channel of any cluster.${where.length ? ` Clusters report to: ${where.slice(0, 20).join(', ')}.` : ' No cluster has a Slack channel configured.'}`;
  }

  /** Unknown cluster → what exists; wrong channel → where to ask. */
  private check(cluster: string, channel: ChannelRef): SlackMessage | undefined {
    if (!this.deps.clusters.has(cluster)) return unknownCommandMessage({ kind: 'cluster', value: cluster }, [...this.deps.clusters.keys()]);
    if (!this.deps.channels.allows(cluster, channel)) {
      return refusalMessage(wrongChannelText(cluster, this.deps.channels.channelOf(cluster) ? this.deps.channels.mention(cluster) : undefined));
    }
    return undefined;
  }

  /** The context of a status reply: the time, the active window, the notification backlog when there is one. */
  private statusContext(): { now: number; activeWindowMs?: number; backlog?: { depth: number; oldestEnqueuedAt: number | null } } {
    const backlog = this.deps.backlog?.();
    return {
      now: this.deps.clock(),
      ...(this.deps.activeWindowMs !== undefined ? { activeWindowMs: this.deps.activeWindowMs } : {}),
      ...(backlog && backlog.depth > 0 ? { backlog } : {}),
    };
  }

  /** Poll health of a cluster another replica polls: from the latest poll run in the shared store. */
  private async healthFromStore(name: string): Promise<SlackPollHealth> {
    const [last] = await this.deps.store.polls.lastRuns(name);
    if (!last) return { status: 'pending' };
    return {
      // A poll running there now: as good as the last one that succeeded.
      status: last.endedAt === null ? (last.lastSuccessAt !== null ? 'ok' : 'pending') : last.error ? 'degraded' : 'ok',
      lastPollAt: last.startedAt,
      ...(last.lastSuccessAt !== null ? { lastSuccessAt: last.lastSuccessAt } : {}),
      ...(last.error ? { lastError: last.error } : {}),
    };
  }

  /**
   * `/tokens status` data of one cluster: poll health per source, Kubernetes access, channel, and its open alerts
   * (one per ServiceAccount: its live findings grouped, src/findings/groups.ts), each with the `chat.getPermalink` of
   * its message (best effort: a failed lookup leaves the line without a link).
   */
  async clusterStatus(name: string): Promise<ClusterStatus> {
    const rt = this.deps.clusters.get(name)!;
    const own = this.deps.ownerOf?.(name);
    const h = own && !own.self ? await this.healthFromStore(name) : rt.poller.health();
    const blind = rt.blind?.state(this.deps.clock());
    // A source refused the read of its audit log (no read permission) is blind, with the fix — as /readyz and the Home tab say.
    const refused = h.status === 'degraded' && blind?.blind === true && blind.reason === 'no-read-access';
    const health: SourceHealth[] = [
      {
        name: `audit source ${rt.source.id}`,
        ok: h.status !== 'degraded',
        ...(h.slow
          ? { detail: `degraded: a poll has been running for ${Math.round(h.slow.forMs / 1000)} s (since ${new Date(h.slow.since).toISOString()}): the cluster's APIs are slow or not answering` }
          : refused
            ? { detail: `blind: ${blind.text.replace(/^audit log blind: /, '')}` }
            : h.status === 'degraded'
            ? { detail: `degraded: ${h.lastError ?? 'last poll failed'}` }
            : h.status === 'pending'
              ? { detail: 'no poll yet' }
              : {}),
        lastSuccess: h.lastSuccessAt ?? null,
      },
    ];
    if (own) {
      health.push(
        own.owner === null
          ? { name: 'polled by: no replica owns this cluster right now', ok: false, detail: 'another replica takes it over within the ownership TTL (docs/design/architecture.md "Clusters shared out across replicas")' }
          : { name: `polled by replica ${own.owner}${own.self ? ' (the one answering)' : ''}`, ok: true },
      );
    }
    if (h.missed) {
      const why = h.missed.lastReason === 'overlap' ? 'the previous poll was still running' : 'folded into a late poll';
      health.push({ name: `scheduled polls missed: ${h.missed.count}`, ok: false, detail: `last due ${new Date(h.missed.lastDueAt).toISOString()}, ${why}` });
    }
    if (blind?.blind && !refused) health.push({ name: blind.text, ok: false });
    const wh = rt.source.webhookStatus?.();
    if (wh) {
      const waiting = (wh.unconsumedBytes / 1048576).toFixed(1);
      health.push({ name: `audit webhook: ${wh.acceptedEvents} events accepted, ${wh.shedBatches} batches shed (429), ${waiting} MiB waiting`, ok: wh.shedBatches === 0 });
    }
    const k = rt.config.kubernetes;
    const access = rt.access?.(this.deps.clock());
    if ('none' in k) {
      health.push({ name: 'Kubernetes API: not configured (kubernetes: none): no workloads in findings, no actions', ok: true });
    } else if (access) {
      // The health model (src/observability/health.ts): the same words as /readyz and the Home tab.
      for (const a of ['kubernetes', 'watchCache', 'slack'] as const) {
        if (access[a].state === 'off' && a !== 'kubernetes') continue;
        health.push({ name: accessText(a, access[a], this.deps.clock()), ok: access[a].state !== 'failing' });
      }
    } else if (rt.kubeError) {
      health.push({ name: 'Kubernetes API', ok: false, detail: rt.kubeError });
    } else if (h.stateError) {
      health.push({ name: 'Kubernetes API', ok: false, detail: h.stateError });
    } else {
      health.push({ name: 'Kubernetes API', ok: true });
    }
    const cache = access ? undefined : rt.watchCache?.freshness();
    if (cache && !cache.ok) {
      health.push(
        // Syncing with a failure of its lists is failing, as in the health model (src/runtime/health.ts).
        cache.state === 'syncing' && !cache.reason.includes(': ')
          ? { name: 'Kubernetes watch cache: syncing, cluster state read from the API directly', ok: true }
          : { name: 'Kubernetes watch cache', ok: false, detail: `cluster state read from the API directly: ${scrubSecrets(cache.reason)}` },
      );
    }
    const open = await this.deps.store.findings.list(name, { status: ['open'] });
    const counts: Record<Severity, number> = { critical: 0, warning: 0, info: 0 };
    const groups = groupFindings(open.map((f) => f.finding).sort(compareFindings));
    const alerts: StatusAlert[] = [];
    for (const g of groups) {
      counts[g.severity]++;
      const at = await this.deps.notifier.messageOfGroup(g.id);
      const permalink = at ? await this.deps.api.permalink(at.channel, at.ts).catch(() => undefined) : undefined;
      // An alert the routing rules sent to another channel than the cluster's says where it is.
      const routed = at && !this.deps.channels.matches(this.deps.channels.channelOf(name) ?? '', { id: at.channel });
      alerts.push({ live: g.members, severity: g.severity, ...(permalink ? { permalink } : {}), ...(routed ? { channel: at.channel } : {}) });
    }
    // Each channel is checked now (membership), not only after a failed post.
    await this.deps.checkChannels?.(name);
    const configured = this.deps.channels.channelOf(name);
    const problem = configured !== undefined ? this.deps.api.channelProblem(configured) ?? this.deps.api.channelProblem(this.deps.channels.channelIdOf(name) ?? '') : undefined;
    // Each channel the routing rules send this cluster's alerts to is checked too (the bot must be a member).
    const routedProblems = this.deps.channels
      .channelsOf(name)
      .slice(1)
      .flatMap((ch) => {
        const p = this.deps.api.channelProblem(ch) ?? this.deps.api.channelProblem(this.deps.channels.idOf(ch));
        return p ? [{ id: this.deps.channels.idOf(ch), error: p.error }] : [];
      });
    return {
      name,
      lastPoll: h.lastPollAt ?? null,
      ...(routedProblems.length ? { routedProblems } : {}),
      health,
      alertsBySeverity: counts,
      ...(configured !== undefined ? { channel: { id: this.deps.channels.channelIdOf(name) ?? configured.replace(/^#/, ''), ...(problem ? { error: problem.error } : {}) } } : {}),
      alerts,
      ...withIgnoredTimes(withClusterEvents(withReadiness(await metricsNotes(this.deps.store, rt, h, this.deps.clock()), await this.readinessLine(name, open.map((f) => f.finding), h)), h.clusterEvents ?? []), h.ignoredEventTimes),
    };
  }

  /**
   * The status line answering "is it safe to turn token extension off?" (`src/findings/readiness.ts`): the window runs
   * from the cluster's first successful poll to its latest; the polls since then are the coverage. Live sources read
   * only matching events, so a quiet source is not blind; a cluster without an audit source is, and failing polls
   * leave the verdict unknown.
   */
  private async readinessLine(name: string, findings: Finding[], h: { status: string; lastSuccessAt?: number; ignoredEventTimes?: IgnoredEventTimes }): Promise<string> {
    return `Token extension off (--service-account-extend-token-expiration=false)? ${(await this.readiness(name, findings, h)).summary}`;
  }

  /**
   * The readiness verdict of cluster `name` (`src/findings/readiness.ts`) from its open `findings` and its poller health
   * `h`, as `/tokens status` and the Home tab show it. The window runs from the cluster's first successful poll to its
   * latest; the polls since then are the coverage.
   */
  async readiness(name: string, findings: readonly Finding[], h: { status: string; lastSuccessAt?: number; ignoredEventTimes?: IgnoredEventTimes }): Promise<Readiness> {
    const rt = this.deps.clusters.get(name)!;
    // A blind log (e.g. GKE without Data Access entries) cannot show stale uses: the verdict is unknown, never "safe".
    const blindNow = rt.blind?.state(this.deps.clock());
    const since = await this.deps.store.polls.watchedSince(name);
    const polls = since !== undefined ? await this.deps.store.polls.coverage(name, since) : undefined;
    const r = readinessVerdict({
      cluster: name,
      findings,
      coverage: {
        ...(since !== undefined ? { windowStart: since } : {}),
        ...(h.lastSuccessAt !== undefined ? { windowEnd: h.lastSuccessAt } : {}),
        ...(polls ? { polls: { succeeded: polls.succeeded, failed: polls.failed } } : {}),
        ...('none' in rt.config.audit ? { blind: 'no audit source is configured (audit: none)' } : blindNow?.blind ? { blind: blindNow.text.replace(/^audit log blind: /, '') } : {}),
        gaps: h.status === 'degraded' ? ['the latest poll failed'] : [],
        ...(h.ignoredEventTimes ? { inconsistentTimes: ignoredTimesText(h.ignoredEventTimes) } : {}),
      },
      ...(this.deps.readinessMinWindowMs !== undefined ? { minWindowMs: this.deps.readinessMinWindowMs } : {}),
      ...('azure' in rt.config.audit && rt.config.audit.azure.tokenExtension === 'off' ? { extensionOff: true } : {}),
    });
    return r;
  }

  /** `/tokens history` entries: approvals (with their verification) and snoozes, newest first. */
  async history(cluster: string): Promise<HistoryEntry[]> {
    const { store } = this.deps;
    const entries: HistoryEntry[] = [];
    for (const a of (await store.approvals.list({ cluster })).slice(-100)) {
      const outcome = a.verification?.outcome;
      const rejected = a.votes.find((v) => v.vote === 'reject');
      const verification = outcome === undefined ? undefined : outcome === 'superseded' ? 'verification: superseded by a later action on the same finding' : `verification: ${outcome}`;
      const detail = [a.error ?? undefined, rejected?.reason, verification].filter((x): x is string => !!x).join('; ');
      entries.push({ at: a.updatedAt, action: a.action, target: a.target, requester: a.requester, approvers: approvalsOf(a), state: a.state, ...(detail ? { detail } : {}), ...(a.state === 'rejected' && rejected ? { rejectedBy: rejected.user } : {}) });
    }
    for (const row of await store.actions.list(cluster, 200)) {
      if (row.action !== 'snooze' || row.actor === null || row.findingId === null) continue;
      const f = await store.findings.get(row.findingId);
      const target: ActionTarget = f ? targetOf(f.finding, { action: 'snooze', days: 1 }) : { cluster, kind: 'ServiceAccount', namespace: '?', name: row.target, findingId: row.findingId };
      entries.push({ at: row.at, action: 'snooze' as ActionKind, target, requester: row.actor, approvers: [], state: 'succeeded', ...(row.detail ? { detail: row.detail } : {}) });
    }
    return entries.sort((x, y) => y.at - x.at).slice(0, 50);
  }
}
