/**
 * Paging for critical alerts nobody acts on (docs/slack.md "Paging"): a scan of each owned cluster's alert groups that
 * stores page events as intent rows of the notification queue (src/store/notices.ts), sent by the drainer through the
 * {@link Pager} (src/slack/pager.ts):
 *
 * - a group is **critical** when the worst of its open findings is `critical` (warning and info never page); the
 *   first scan that sees it so starts its episode (`alert_pages`);
 * - it is **acted on** by an approval request, a snooze or a Details view ({@link PagingScan.acted}, called by the
 *   flow); a critical episode nobody acted on within `after` pages once per target:
 *   `page:<groupId>:<episode>:trigger:<target>`, `dedup_key` `tokenwatch/<groupId>/<episode>`;
 * - when no open finding of the group is left (resolved), the episode ends and, where a trigger was sent or is
 *   pending, one resolve goes to each target with the same `dedup_key`. A group critical again later starts the next
 *   episode (a new `dedup_key`).
 */
import { groupIdOf, worstSeverity } from '../findings/groups.js';
import type { Logger } from '../observability/logger.js';
import type { StoredFinding, StorePart } from '../store/index.js';
import type { NoticeRepository, PageEpisode } from '../store/notices.js';
import type { PageEvent, PageTarget } from './pager.js';

/** Dependencies of {@link PagingScan}. */
export interface PagingDeps {
  store: StorePart<{ findings: 'list' }>;
  notices: Pick<NoticeRepository, 'enqueue' | 'known' | 'critical' | 'acted' | 'resolved' | 'livePages'>;
  /** Clusters to scan (those this replica owns are scanned). */
  clusters: () => Iterable<string>;
  owns?: (cluster: string) => boolean;
  /** `slack.paging.after`, ms. */
  afterMs: number;
  targets: readonly PageTarget[];
  /** A link to the group's alert in Slack, best effort. */
  linkOf?: (groupId: string) => Promise<string | undefined>;
  /** Epoch ms. */
  clock: () => number;
  logger: Logger;
  enqueued?: () => void;
}

/** The `dedup_key` of an episode: one alert pages once, its resolve closes that page. */
export function dedupKeyOf(groupId: string, episode: number): string {
  return `tokenwatch/${groupId}/${episode}`;
}

/** See the module docstring. */
export class PagingScan {
  private running: Promise<number> | undefined;

  constructor(private readonly deps: PagingDeps) {}

  /** Someone acted on the alert of `f`'s group: it pages no more in this episode. */
  async acted(f: { cluster: string; namespace: string; serviceAccount: string }): Promise<void> {
    await this.deps.notices.acted(groupIdOf(f), f.cluster, this.deps.clock());
  }

  /** Runs one scan (one at a time). @returns how many page events it enqueued. */
  scan(): Promise<number> {
    this.running ??= this.scan0().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async scan0(): Promise<number> {
    const { clock, notices, owns } = this.deps;
    const now = clock();
    let added = 0;
    const seen = new Set<string>();
    // Every cluster's open findings in one statement (this scan runs after every poll: a statement per cluster made
    // each poll's cost grow with the fleet), in the store's order within each cluster.
    const openOf = new Map<string, StoredFinding[]>();
    for (const f of await this.deps.store.findings.list(undefined, { status: ['open'] })) {
      const of = openOf.get(f.cluster);
      if (of) of.push(f);
      else openOf.set(f.cluster, [f]);
    }
    // Live episodes, read once: a critical group whose episode is live and critical already needs no write.
    const live = await notices.livePages();
    const liveOf = new Map(live.map((ep) => [ep.groupId, ep]));
    for (const cluster of this.deps.clusters()) {
      if (owns?.(cluster) === false) continue;
      const groups = new Map<string, StoredFinding[]>();
      for (const f of openOf.get(cluster) ?? []) {
        const g = groupIdOf(f.finding);
        groups.set(g, [...(groups.get(g) ?? []), f]);
      }
      for (const [g, members] of groups) {
        seen.add(g);
        if (worstSeverity(members) !== 'critical') continue;
        const known = liveOf.get(g);
        const ep = known && known.criticalSince !== null ? known : await notices.critical(g, cluster, now);
        if (ep.actedAt !== null || ep.criticalSince === null || now - ep.criticalSince < this.deps.afterMs) continue;
        added += await this.page(ep, 'trigger', members[0]!, now);
      }
    }
    // Episodes whose group has no open finding any more: resolved.
    for (const ep of live) {
      if (seen.has(ep.groupId) || owns?.(ep.cluster) === false) continue;
      const members = (await this.deps.store.findings.list(ep.cluster)).filter((f) => groupIdOf(f.finding) === ep.groupId);
      if (members.some((f) => f.status !== 'resolved')) continue;
      const ended = await notices.resolved(ep.groupId, now);
      if (ended) added += await this.page(ended, 'resolve', members[0], now);
    }
    if (added > 0) this.deps.enqueued?.();
    return added;
  }

  private async page(ep: PageEpisode, action: 'trigger' | 'resolve', f: StoredFinding | undefined, now: number): Promise<number> {
    let added = 0;
    for (const target of this.deps.targets) {
      const base = `page:${ep.groupId}:${ep.episode}`;
      const key = `${base}:${action}:${target}`;
      if (await this.deps.notices.known(key)) continue;
      // A resolve only closes a page that was (or is being) sent.
      if (action === 'resolve' && !(await this.deps.notices.known(`${base}:trigger:${target}`))) continue;
      const subject = f ? `${f.finding.namespace}/${f.finding.serviceAccount}` : '';
      const link = action === 'trigger' ? await this.deps.linkOf?.(ep.groupId).catch(() => undefined) : undefined;
      const event: PageEvent = {
        action,
        dedupKey: dedupKeyOf(ep.groupId, ep.episode),
        summary:
          action === 'trigger'
            ? `[${ep.cluster}] critical: ServiceAccount ${subject} — stale or rejected tokens; nobody acted on the alert within ${Math.round(this.deps.afterMs / 60_000)} min`
            : `[${ep.cluster}] resolved: ServiceAccount ${subject || ep.groupId}`,
        source: ep.cluster,
        severity: 'critical',
        groupId: ep.groupId,
        cluster: ep.cluster,
        subject,
        ...(link ? { link } : {}),
      };
      const ok = await this.deps.notices.enqueue({
        key,
        kind: 'notice',
        cluster: ep.cluster,
        channel: target,
        call: 'post',
        // Pages go before other work of the queue; a resolve after its trigger.
        urgency: action === 'trigger' ? -1 : 0,
        enqueuedAt: now,
        notBefore: 0,
        attempts: 0,
        version: 0,
        payload: { notice: { to: 'page', event } },
      });
      if (ok) {
        added++;
        this.deps.logger.info({ cluster: ep.cluster, groupId: ep.groupId, episode: ep.episode, target, action }, action === 'trigger' ? 'paging: a critical alert nobody acted on' : 'paging: the alert resolved');
      }
    }
    return added;
  }
}
