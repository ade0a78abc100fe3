/**
 * Cluster-level credential events (signing-key rotation, issuer change; `src/findings/cluster-events.ts`) said once per
 * cluster in Slack: one message in its channel, before its 401 alerts. The onset last said is kept in the store under
 * the cursor key {@link announcedKey} (a restart does not say it again); a post Slack refuses is tried again at the
 * next poll. Each one said is written to the action log (`cluster.credential-event`).
 */
import type { ClusterEvent } from '../findings/cluster-events.js';
import type { Logger } from '../observability/logger.js';
import type { StorePart } from '../store/index.js';
import type { SlackApi } from './api.js';
import type { ChannelMap } from './channels.js';
import { clusterEventMessage } from './messages.js';

/** The store's cursor key holding the onset (epoch ms) of `cluster`'s last announced event. */
export function announcedKey(cluster: string): string {
  return `slack:cluster-event:${cluster}`;
}

/** What {@link ClusterEventAnnouncer} posts through and records in. */
export interface ClusterEventAnnouncerDeps {
  store: StorePart<{ polls: 'getCursor' | 'setCursor'; actions: 'log' }>;
  api: Pick<SlackApi, 'post'>;
  channels: Pick<ChannelMap, 'channelOf'>;
  /** Service clock, epoch ms (the action log's time). */
  clock: () => number;
  logger: Logger;
}

/** Posts each cluster-level event once (see the module doc). */
export class ClusterEventAnnouncer {
  constructor(private readonly deps: ClusterEventAnnouncerDeps) {}

  /**
   * Posts each of `events` of `cluster` not said yet in the cluster's channel (none without one). A refused post is
   * logged and left for the next poll.
   * @throws when the store cannot be read or written
   */
  async announce(cluster: string, events: readonly ClusterEvent[]): Promise<void> {
    const { store, api, channels, clock, logger } = this.deps;
    const channel = channels.channelOf(cluster);
    if (channel === undefined) return;
    for (const e of events) {
      if ((await store.polls.getCursor(announcedKey(cluster))) === e.at) continue;
      try {
        await api.post(channel, clusterEventMessage(e));
      } catch (err) {
        logger.warn({ err, cluster }, 'could not post the cluster-level credential event; trying again at the next poll');
        continue;
      }
      await store.polls.setCursor(announcedKey(cluster), e.at);
      await store.actions.log({ at: clock(), cluster, actor: null, action: 'cluster.credential-event', target: cluster, result: 'reported', detail: e.summary });
    }
  }
}
