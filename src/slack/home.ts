/**
 * Publishing the App Home tab (`./blocks/home.ts`) with `views.publish` (docs.slack.dev/reference/methods/views.publish,
 * Tier 4 rate limit): at once when a user opens the tab (`app_home_opened`), and again after something it shows
 * changed (a poll, a vote, an expiry) — debounced across polls and clusters, per user.
 *
 * - The users who opened Home are kept in memory (at most {@link HomeOptions.maxUsers}, the least recently opened
 *   dropped first) with the hash (SHA-256) of the view last published to each and when it was published.
 * - {@link HomePublisher.changed} only marks the view stale; it is cheap, so every poll of every cluster may call it.
 * - {@link HomePublisher.tick} (every `tickMs`) renders the view once when it has been stale for `debounceMs`, and
 *   publishes it to each user whose last view differs, at most once per `debounceMs` per user. A poll that changes
 *   nothing shown renders the same hash and publishes nothing; a fleet of 1,000 clusters polling every minute costs one
 *   render per `debounceMs` and one `views.publish` per user only when the view really changed.
 * - The view is the same for every user (the fleet's calendar, not a personal one), so it is rendered once per change.
 * - Each replica knows only the users whose `app_home_opened` it received; a replica that does not poll (HA standby)
 *   republishes after votes it handles, not after polls.
 */
import { createHash } from 'node:crypto';
import { approvalsOf } from '../approvals/index.js';
import { compareFindings } from '../findings/build.js';
import { groupFindings } from '../findings/groups.js';
import type { Readiness } from '../findings/readiness.js';
import type { Finding } from '../findings/types.js';
import { ACCESS_LABELS, accessText } from '../observability/health.js';
import type { Logger } from '../observability/logger.js';
import type { StoredApproval, StorePart } from '../store/index.js';
import { slackErrorCode } from './api.js';
import { homeView, rankAlerts, type HomeAlert, type HomeApproval, type HomeCluster, type HomeSource, type HomeView } from './blocks/home.js';
import { LIMITS } from './blocks/limits.js';
import type { SlackCluster } from './context.js';

/** Tuning of {@link HomePublisher}. */
export interface HomeOptions {
  /** Minimum ms between a change and its republish, and between two publishes to one user (default 30,000). */
  debounceMs?: number;
  /** How often {@link HomePublisher.tick} runs, ms (default 1,000; 0 = never by itself, tests call it). */
  tickMs?: number;
  /** Users remembered at most (default 10,000). */
  maxUsers?: number;
}

/** Default of {@link HomeOptions.debounceMs}. */
export const HOME_DEBOUNCE_MS = 30_000;

/** Dependencies of {@link HomePublisher}. */
export interface HomeDeps {
  store: StorePart<{ findings: 'list'; approvals: 'list' }>;
  clusters: ReadonlyMap<string, Pick<SlackCluster, 'config' | 'poller' | 'probe' | 'kubeError' | 'blind' | 'access'>>;
  /** Where a group's alert message is (`Notifier.messageOfGroup`). */
  messageOfGroup(groupId: string): Promise<{ channel: string; ts: string } | undefined>;
  /** `chat.getPermalink`; may throw (the line is then shown without a link). */
  permalink(channel: string, ts: string): Promise<string>;
  /** Whether channel id `channel` is `cluster`'s own channel; an alert elsewhere (routing rules) says where it is. Absent = always. */
  isClusterChannel?(cluster: string, channel: string): boolean;
  /** The users who may approve an approval, requester excluded unless self-approval is allowed (`ApprovalFlow.approversOf`). */
  approversOf(a: StoredApproval): Promise<string[]>;
  /** `views.publish` of `view` to `user`; throws on a Slack error. */
  publish(user: string, view: HomeView): Promise<void>;
  /** Service clock, epoch ms. */
  clock(): number;
  logger: Logger;
  /** `findings.activeWindow`, ms. */
  activeWindowMs?: number;
  /**
   * The cluster's readiness verdict ("is it safe to turn token extension off?", `TokensCommand.readiness`) from its
   * open findings; absent: no readiness on Home.
   */
  readiness?(cluster: string, findings: readonly Finding[]): Promise<Pick<Readiness, 'verdict' | 'clients'>>;
}

/** What one user was last shown. */
interface UserState {
  hash: string | undefined;
  /** When the last publish to this user was made (or failed), epoch ms; -Infinity before any. */
  at: number;
}

/** A Slack user id as events carry it. */
const USER_ID = /^[UW][A-Z0-9]{2,}$/;

/** See the module docstring. */
export class HomePublisher {
  private readonly users = new Map<string, UserState>();
  private readonly permalinks = new Map<string, string>();
  private readonly debounceMs: number;
  private readonly maxUsers: number;
  /** Since when the view is stale (epoch ms), or undefined when the current render is up to date. */
  private staleSince: number | undefined;
  private current: { view: HomeView; hash: string } | undefined;
  /** Whether some user may still be behind {@link current}. */
  private behind = false;
  private queue: Promise<unknown> = Promise.resolve();
  private warnedNotEnabled = false;
  /** Number of `views.publish` calls made (answered ok or not), for metrics and tests. */
  publishes = 0;

  constructor(
    private readonly deps: HomeDeps,
    opts: HomeOptions = {},
  ) {
    this.debounceMs = opts.debounceMs ?? HOME_DEBOUNCE_MS;
    this.maxUsers = opts.maxUsers ?? 10_000;
  }

  /** Users who opened Home (known to this process). */
  get userCount(): number {
    return this.users.size;
  }

  /** Marks the view stale (something it may show changed); the next due {@link tick} re-renders it. */
  changed(): void {
    this.staleSince ??= this.deps.clock();
  }

  /**
   * `app_home_opened` by `user` on the Home tab: publishes the current view now (rendered fresh when stale) unless
   * this user was already shown exactly this view. Errors are logged, never thrown.
   */
  opened(user: string): Promise<void> {
    return this.serial(async () => {
      if (!USER_ID.test(user)) {
        this.deps.logger.warn({ user: user.slice(0, 40) }, 'app_home_opened without a valid user id ignored');
        return;
      }
      const state = this.users.get(user) ?? { hash: undefined, at: -Infinity };
      this.users.delete(user);
      this.users.set(user, state);
      while (this.users.size > this.maxUsers) this.users.delete(this.users.keys().next().value!);
      if (!this.current || this.staleSince !== undefined) await this.render();
      if (state.hash !== this.current!.hash) await this.publishTo(user, state);
    });
  }

  /**
   * Renders the view when it has been stale for the debounce period, then publishes it to every user who was shown a
   * different one and was not published to within the period. @returns how many users were published to.
   */
  tick(): Promise<number> {
    return this.serial(async () => {
      // Nobody opened Home (in this process): nothing to render or publish; the view stays stale until someone does.
      if (this.users.size === 0) return 0;
      const now = this.deps.clock();
      if (this.staleSince !== undefined && now - this.staleSince >= this.debounceMs) await this.render();
      if (!this.current || !this.behind) return 0;
      let n = 0;
      let waiting = false;
      for (const [user, state] of this.users) {
        if (state.hash === this.current.hash) continue;
        if (now - state.at < this.debounceMs) {
          waiting = true;
          continue;
        }
        await this.publishTo(user, state);
        n++;
        if (state.hash !== this.current.hash) waiting = true;
      }
      this.behind = waiting;
      return n;
    });
  }

  /** The view as it would be published now (rendered fresh), for tests and the sandbox. */
  async view(): Promise<HomeView> {
    return this.serial(async () => {
      await this.render();
      return this.current!.view;
    });
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async publishTo(user: string, state: UserState): Promise<void> {
    const { view, hash } = this.current!;
    state.at = this.deps.clock();
    this.publishes++;
    try {
      await this.deps.publish(user, view);
      state.hash = hash;
    } catch (err) {
      const code = slackErrorCode(err);
      if (code === 'not_enabled') {
        if (!this.warnedNotEnabled) this.deps.logger.error({ error: code }, 'Slack refused the Home tab (views.publish: not_enabled): enable it in the app manifest (features.app_home.home_tab_enabled: true)');
        this.warnedNotEnabled = true;
      } else {
        this.deps.logger.warn({ user, error: code }, 'publishing the Home tab failed; retried after the debounce period');
      }
      this.behind = true;
    }
  }

  private async render(): Promise<void> {
    const now = this.deps.clock();
    this.staleSince = undefined;
    const { store } = this.deps;
    const alerts: Array<HomeAlert & { groupId: string }> = [];
    const clusters: HomeCluster[] = [];
    for (const [name, rt] of this.deps.clusters) {
      const open = (await store.findings.list(name, { status: ['open'] })).map((f) => f.finding).sort(compareFindings);
      const r = await this.deps.readiness?.(name, open);
      // Only the verdict and how many clients: the window's length moves on every poll and would republish Home.
      clusters.push({ name, sources: sourcesOf(rt, now), ...(r ? { readiness: { verdict: r.verdict, clients: r.clients.length } } : {}) });
      for (const g of groupFindings(open)) alerts.push({ cluster: name, live: g.members, severity: g.severity, groupId: g.id });
    }
    // Links only for the alerts that can be shown (a view has at most 100 blocks); permalinks never change, so they
    // are cached.
    const ranked = rankAlerts(alerts, now, this.deps.activeWindowMs) as Array<HomeAlert & { groupId: string }>;
    for (const a of ranked.slice(0, LIMITS.viewBlocks)) {
      const at = await this.deps.messageOfGroup(a.groupId);
      const link = at ? await this.link(at.channel, at.ts) : undefined;
      if (link) a.permalink = link;
      if (at && this.deps.isClusterChannel && !this.deps.isClusterChannel(a.cluster, at.channel)) a.channel = at.channel;
    }
    const approvals: HomeApproval[] = [];
    for (const a of await store.approvals.list({ states: ['requested'] })) {
      if (a.expiresAt <= now) continue;
      const voted = new Set(a.votes.map((v) => v.user));
      const waitingOn = (await this.deps.approversOf(a).catch(() => [] as string[])).filter((u) => !voted.has(u) && u !== a.requester);
      const link = a.message ? await this.link(a.message.channel, a.message.ts) : undefined;
      approvals.push({
        action: a.action,
        target: a.target,
        requester: a.requester,
        needed: Math.max(1, a.requiredApprovals - approvalsOf(a).length),
        waitingOn,
        expiresAt: a.expiresAt,
        ...(link ? { permalink: link } : {}),
      });
    }
    const view = homeView({ now, ...(this.deps.activeWindowMs !== undefined ? { activeWindowMs: this.deps.activeWindowMs } : {}), alerts: ranked.map(({ groupId: _g, ...a }) => a), clusters, approvals });
    const hash = createHash('sha256').update(JSON.stringify(view)).digest('hex');
    if (hash !== this.current?.hash) this.behind = true;
    this.current = { view, hash };
  }

  private async link(channel: string, ts: string): Promise<string | undefined> {
    const key = `${channel}:${ts}`;
    const hit = this.permalinks.get(key);
    if (hit) return hit;
    try {
      const url = await this.deps.permalink(channel, ts);
      if (this.permalinks.size >= 10_000) this.permalinks.clear();
      this.permalinks.set(key, url);
      return url;
    } catch {
      return undefined;
    }
  }
}

/**
 * A cluster's inputs as the Home tab shows them: the audit log (off with `audit: none`; failing after a failed poll or
 * while blind), the API-server metrics and the node probe (off without Kubernetes access; failing when their last read
 * failed). Nothing that moves on every poll (no poll times), so an unchanged state keeps the view's hash.
 */
export function sourcesOf(rt: Pick<SlackCluster, 'config' | 'poller' | 'probe' | 'kubeError' | 'blind' | 'access'>, now: number): HomeSource[] {
  const h = rt.poller.health();
  const out: HomeSource[] = [];
  if ('none' in rt.config.audit) out.push({ name: 'audit log', state: 'off', detail: 'audit: none' });
  else if (h.status === 'degraded') {
    // Slow (still running) is not failed: say which, as `/tokens status` does; a refused read is blind, with the fix.
    const blind = rt.blind?.state(now);
    const refused = blind?.blind === true && blind.reason === 'no-read-access' ? blind.text : undefined;
    const detail = h.slow ? "a poll is taking long: the cluster's APIs are slow or not answering" : (refused ?? h.lastError ?? 'the last poll failed');
    out.push({ name: 'audit log', state: 'failing', detail, ...(h.lastSuccessAt ? { lastSuccess: h.lastSuccessAt } : {}) });
  }
  else if (h.status === 'pending') out.push({ name: 'audit log', state: 'pending', detail: 'no poll yet' });
  else {
    const blind = rt.blind?.state(now);
    out.push(blind?.blind ? { name: 'audit log', state: 'failing', detail: blind.text } : { name: 'audit log', state: 'ok' });
  }
  const kubeOff = 'none' in rt.config.kubernetes;
  for (const [name, error, present] of [
    ['API-server metrics', h.metricsError, true],
    ['node probe', h.probeError, rt.probe !== undefined],
  ] as const) {
    if (kubeOff) out.push({ name, state: 'off', detail: 'kubernetes: none' });
    else if (rt.kubeError) out.push({ name, state: 'failing', detail: rt.kubeError });
    else if (!present) out.push({ name, state: 'off' });
    else if (error !== undefined) out.push({ name, state: 'failing', detail: error });
    else if (h.status === 'pending') out.push({ name, state: 'pending' });
    else out.push({ name, state: 'ok' });
  }
  // The health model's Kubernetes API, watch cache and Slack (src/observability/health.ts), in its words: a failure
  // keeps the time it started, so an unchanged state keeps the view's hash.
  const access = rt.access?.(now);
  if (access) {
    for (const a of ['kubernetes', 'watchCache', 'slack'] as const) {
      const s = access[a];
      if (s.state === 'off' || (kubeOff && a !== 'slack')) continue;
      if (s.state === 'failing') out.push({ name: accessText(a, s, now), state: 'failing' });
      else out.push({ name: ACCESS_LABELS[a], state: s.state });
    }
  }
  return out;
}
