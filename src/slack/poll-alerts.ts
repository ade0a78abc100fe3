/**
 * What the Slack integration does with a poll's results: after each successful poll, the cluster-level events
 * ({@link ClusterEventAnnouncer}), then the alerts' posts and edits stored as work items of the notification queue
 * (docs/slack.md "Notification queue"; the drainer sends them at Slack's rates, off the poll path). At start-up, the
 * alerts of open findings stored while Slack was unreachable (or before a restart) and never posted are queued at once
 * rather than at the next poll.
 */
import type { Finding } from '../findings/types.js';
import { groupIdOf } from '../findings/groups.js';
import type { Logger } from '../observability/logger.js';
import type { StoredFinding, StorePart } from '../store/index.js';
import type { ChannelMap } from './channels.js';
import type { ClusterEventAnnouncer } from './cluster-events.js';
import type { SlackContext, SlackPollOutcome } from './context.js';
import type { NotificationDrainer } from './drainer.js';
import type { Notifier } from './notifier.js';

/** What {@link PollAlerts} reads and queues through. */
export interface PollAlertsDeps {
  store: StorePart<{ findings: 'get' | 'list' }>;
  notifier: Pick<Notifier, 'workItems' | 'messageOf'>;
  drainer: Pick<NotificationDrainer, 'enqueue'>;
  announcer: Pick<ClusterEventAnnouncer, 'announce'>;
  channels: Pick<ChannelMap, 'channelOf'>;
  /** The notification queue's clock, epoch ms (the work items' time). */
  queueClock: () => number;
  logger: Logger;
}

/** A poll's alerts into the notification queue (see the module doc). */
export class PollAlerts {
  constructor(private readonly deps: PollAlertsDeps) {}

  /**
   * After a successful poll of `cluster`: its cluster-level events, then the work items of its `findings` and
   * `outcome.changes`. Findings resolved as quiet that have no records any more (retention) get their group's item too
   * (resolved variant, no buttons).
   * @throws when the store cannot be read or written
   */
  async afterPoll(cluster: string, findings: Finding[], outcome: SlackPollOutcome): Promise<void> {
    const { store, notifier, drainer, announcer, queueClock } = this.deps;
    await announcer.announce(cluster, outcome.clusterEvents ?? []);
    const concluded: string[] = [];
    for (const id of outcome.concluded) {
      const f = await store.findings.get(id);
      if (f) concluded.push(groupIdOf(f.finding));
    }
    await drainer.enqueue(await notifier.workItems(cluster, findings, outcome.changes, queueClock(), concluded));
  }

  /**
   * At start-up: queues the alerts of the open findings of each owned cluster with a channel that have no Slack
   * message yet. Only the cluster's owner posts its alerts.
   * @throws when the store cannot be read or written
   */
  async queueUnposted(clusters: Iterable<string>, ownership: SlackContext['ownership']): Promise<void> {
    const { store, notifier, drainer, channels, queueClock, logger } = this.deps;
    for (const name of [...clusters].filter((c) => ownership.owns(c))) {
      if (channels.channelOf(name) === undefined) continue;
      const pending: StoredFinding[] = [];
      for (const f of await store.findings.list(name, { status: ['open'] })) if ((await notifier.messageOf(f.finding.id)) === undefined) pending.push(f);
      if (pending.length === 0) continue;
      logger.info({ cluster: name, alerts: pending.length }, 'posting alerts found while Slack was not connected');
      await drainer.enqueue(await notifier.workItems(name, pending.map((f) => f.finding), [], queueClock()));
    }
  }
}
