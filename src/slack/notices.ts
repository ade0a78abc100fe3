/**
 * The sender of follow-up notices (src/store/notices.ts): reminders and escalations in an alert's thread, outcomes
 * sent to the requester by direct message, and pages (src/slack/paging.ts). The drainer (src/slack/drainer.ts) hands
 * it each `notice` item of the notification queue at Slack's rates; it sends it once across restarts and failovers:
 *
 * 1. the row exists (the intent, stored by the scan that decided the notice);
 * 2. before the call, the row's `postingAt` is set; the Slack message carries metadata
 *    ({@link NOTICE_EVENT_TYPE}, `event_payload.notice_key`), a page its `dedup_key` (PagerDuty) or `Idempotency-Key`
 *    header (the webhook);
 * 3. after it, the key is recorded and the row deleted in one transaction.
 *
 * A row found with `postingAt` set was tried by a process that may have died after the call and before 3: a Slack
 * notice is then looked up by its metadata (`conversations.replies` of the thread, or `conversations.history` of the
 * direct-message channel) and only recorded when found. A page is sent again with the same `dedup_key`: PagerDuty
 * folds a trigger with the `dedup_key` of an open alert into it (https://developer.pagerduty.com/docs/events-api-v2-overview#alert-de-duplication),
 * and a webhook receiver can do the same with the `Idempotency-Key` header.
 */
import type { Logger } from '../observability/logger.js';
import type { NoticeRepository } from '../store/notices.js';
import type { OutboxItem, OutboxNotice, OutboxRepository } from '../store/outbox.js';
import type { SlackApi } from './api.js';
import type { KnownBlock } from './blocks/index.js';
import type { Pager } from './pager.js';

/** Slack message metadata `event_type` of a notice; its `event_payload.notice_key` is the notice's key. */
export const NOTICE_EVENT_TYPE = 'tokenwatch_notice';
/** How far before a notice's recorded `postingAt` Slack is searched (clock skew with Slack), ms. */
const LOOKBACK_MS = 10 * 60_000;

/** Dependencies of {@link NoticeSender}. */
export interface NoticeSenderDeps {
  notices: NoticeRepository;
  queue: Pick<OutboxRepository, 'get' | 'update'>;
  api: Pick<SlackApi, 'post' | 'findReplyByMetadata' | 'findByMetadata' | 'openDm'>;
  /** Where pages go; undefined when paging is off (a page item left from an earlier config is then dropped, logged). */
  pager?: Pager;
  /** Epoch ms. */
  clock: () => number;
  logger: Logger;
}

/** See the module docstring. */
export class NoticeSender {
  constructor(private readonly deps: NoticeSenderDeps) {}

  /**
   * Sends one notice item (steps 2–3 of the module docstring), or finds it sent by an earlier process.
   * @throws SlackCallError, `PageError` (src/slack/pager.ts) or `StoreError`: the drainer keeps the row and tries again later.
   */
  async send(item: OutboxItem): Promise<void> {
    const { notices, queue, clock, logger } = this.deps;
    const row = (await queue.get(item.key)) ?? item;
    const n = row.payload.notice;
    if (!n) {
      logger.warn({ key: item.key }, 'dropped a notice item without its notice');
      await notices.record(item.key, clock());
      return;
    }
    if (n.to === 'page' && !this.deps.pager) {
      logger.warn({ key: item.key }, 'dropped a page: paging is not configured (slack.paging) any more');
      await notices.record(item.key, clock());
      return;
    }
    let at: { channel: string; ts: string } | undefined;
    if (n.postingAt !== undefined && n.to !== 'page') at = await this.find(row, n);
    if (!at) {
      n.postingAt = clock();
      await queue.update(row.key, { call: row.call, payload: row.payload, notBefore: row.notBefore });
      at = await this.deliver(row, n);
    }
    await notices.record(row.key, clock(), at);
  }

  private async deliver(item: OutboxItem, n: OutboxNotice): Promise<{ channel: string; ts: string } | undefined> {
    if (n.to === 'page') {
      await this.deps.pager!.send(n.event!, item.key);
      return undefined;
    }
    const msg = { text: n.message?.text ?? '', ...(n.message?.textFormat ? { textFormat: n.message.textFormat } : {}), blocks: (n.message?.blocks ?? []) as KnownBlock[] };
    return this.deps.api.post(item.channel, msg, n.to === 'thread' ? n.threadTs : undefined, { event_type: NOTICE_EVENT_TYPE, event_payload: { notice_key: item.key } });
  }

  /** A notice an earlier process posted but did not record, if Slack has it; undefined when not found or the lookup fails. */
  private async find(item: OutboxItem, n: OutboxNotice): Promise<{ channel: string; ts: string } | undefined> {
    const { api, logger } = this.deps;
    const oldest = (n.postingAt ?? 0) - LOOKBACK_MS;
    try {
      let at: { channel: string; ts: string } | undefined;
      if (n.to === 'thread' && n.threadTs) {
        const ts = await api.findReplyByMetadata(item.channel, n.threadTs, NOTICE_EVENT_TYPE, 'notice_key', item.key, oldest);
        if (ts) at = { channel: item.channel, ts };
      } else if (n.to === 'dm') {
        const dm = await api.openDm(item.channel);
        const ts = await api.findByMetadata(dm, NOTICE_EVENT_TYPE, 'notice_key', item.key, oldest);
        if (ts) at = { channel: dm, ts };
      }
      if (at) logger.info({ key: item.key, channel: at.channel, ts: at.ts }, 'found a notice posted before a restart; not posting it again');
      return at;
    } catch (err) {
      logger.warn(
        { err, key: item.key },
        'could not look for a notice posted before a restart (scopes channels:history / groups:history, or im:write and im:history for a direct message?); posting it',
      );
      return undefined;
    }
  }
}
