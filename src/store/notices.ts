/**
 * Follow-up notices of the notification queue (docs/slack.md "Reminders, escalation and paging"): a reminder, an
 * escalation, an outcome told to the requester, a page or its resolve. Each has a stable key (e.g.
 * `reminder:<approvalId>`); it is sent exactly once by the intent-row pattern the alerts use:
 * 1. **intent**: a `notice` row of `slack_outbox` is stored ({@link NoticeRepository.enqueue}) — only while no row and
 *    no record of the key exist, so a scan that runs again enqueues nothing twice;
 * 2. **post**: the drainer marks the row (`postingAt`, before the call) and sends it, carrying the key (Slack message
 *    metadata, the PagerDuty `dedup_key`, the webhook's `Idempotency-Key`);
 * 3. **record**: {@link NoticeRepository.record} stores the key in `slack_notices` and deletes the row, in one
 *    transaction. A process that died between 2 and 3 finds the row with `postingAt` set, and looks the message up by
 *    its key before sending again.
 * `alert_pages` holds each alert group's paging episode (src/slack/paging.ts). Times are epoch ms UTC.
 * Written against {@link SqlExecutor} in the portable SQL of src/store/sql.ts; every method may throw `StoreError`.
 */
import type { OutboxItem } from './outbox.js';
import type { SqlExecutor } from './sql.js';

/** Where a sent notice is (a Slack message), when it is one. */
export interface NoticeRecord {
  key: string;
  sentAt: number;
  channel: string | null;
  ts: string | null;
}

/** An alert group's paging episode (one per time it turns critical after having resolved). */
export interface PageEpisode {
  groupId: string;
  cluster: string;
  /** 1, 2, …: part of the page's `dedup_key`, so a group critical again after resolving pages again. */
  episode: number;
  /** When the paging scan first saw it critical in this episode; null while never critical. */
  criticalSince: number | null;
  /** When someone first acted on it (an approval request, a snooze, a Details view); null while nobody did. */
  actedAt: number | null;
  /** When it resolved (no live finding left); null while live. */
  resolvedAt: number | null;
}

type PageRow = { group_id: string; cluster: string; episode: number; critical_since: number | null; acted_at: number | null; resolved_at: number | null };

const num = (v: number | null): number | null => (v === null || v === undefined ? null : Number(v));

function pageOf(r: PageRow): PageEpisode {
  return { groupId: r.group_id, cluster: r.cluster, episode: Number(r.episode), criticalSince: num(r.critical_since), actedAt: num(r.acted_at), resolvedAt: num(r.resolved_at) };
}

/** `slack_notices`, the `notice` rows of `slack_outbox`, and `alert_pages`. */
export class NoticeRepository {
  constructor(private readonly sql: SqlExecutor) {}

  /**
   * Stores the intent of a notice: its queue row, unless a row or a record of `item.key` exists already (then nothing
   * changes: a pending row keeps its `postingAt`). @returns whether a row was added.
   */
  async enqueue(item: OutboxItem): Promise<boolean> {
    return this.sql.transaction(async (tx) => {
      await tx.lock(`notice:${item.key}`);
      if (await tx.get('SELECT 1 AS one FROM slack_notices WHERE notice_key = ?', [item.key])) return false;
      if (await tx.get('SELECT 1 AS one FROM slack_outbox WHERE item_key = ?', [item.key])) return false;
      await tx.run(
        `INSERT INTO slack_outbox (item_key, kind, cluster, channel, first_call, urgency, enqueued_at, not_before, attempts, version, payload)
         VALUES (?, 'notice', ?, ?, 'post', ?, ?, ?, 0, 0, ?)`,
        [item.key, item.cluster, item.channel, item.urgency, item.enqueuedAt, item.notBefore, JSON.stringify(item.payload)],
      );
      return true;
    });
  }

  /** Whether a notice of `key` is pending or was sent. */
  async known(key: string): Promise<boolean> {
    if (await this.sql.get('SELECT 1 AS one FROM slack_notices WHERE notice_key = ?', [key])) return true;
    return (await this.sql.get('SELECT 1 AS one FROM slack_outbox WHERE item_key = ?', [key])) !== undefined;
  }

  /** The record of a sent notice, if any. */
  async sent(key: string): Promise<NoticeRecord | undefined> {
    const r = await this.sql.get<{ notice_key: string; sent_at: number; channel: string | null; ts: string | null }>('SELECT notice_key, sent_at, channel, ts FROM slack_notices WHERE notice_key = ?', [key]);
    return r ? { key: r.notice_key, sentAt: Number(r.sent_at), channel: r.channel, ts: r.ts } : undefined;
  }

  /** Records a sent notice and deletes its queue row, in one transaction (a second record of the key changes nothing). */
  async record(key: string, at: number, where?: { channel: string; ts: string }): Promise<void> {
    await this.sql.transaction(async (tx) => {
      await tx.run('INSERT INTO slack_notices (notice_key, sent_at, channel, ts) VALUES (?, ?, ?, ?) ON CONFLICT (notice_key) DO NOTHING', [key, at, where?.channel ?? null, where?.ts ?? null]);
      await tx.run('DELETE FROM slack_outbox WHERE item_key = ?', [key]);
    });
  }

  /** The paging episode of an alert group, if any. */
  async page(groupId: string): Promise<PageEpisode | undefined> {
    const r = await this.sql.get<PageRow>('SELECT group_id, cluster, episode, critical_since, acted_at, resolved_at FROM alert_pages WHERE group_id = ?', [groupId]);
    return r ? pageOf(r) : undefined;
  }

  /** Every group's paging episode that has not resolved. */
  async livePages(): Promise<PageEpisode[]> {
    const rows = await this.sql.all<PageRow>('SELECT group_id, cluster, episode, critical_since, acted_at, resolved_at FROM alert_pages WHERE resolved_at IS NULL ORDER BY group_id');
    return rows.map(pageOf);
  }

  /**
   * The group is critical now: starts its episode (the first, or the next after a resolved one) at `now`, or sets
   * `criticalSince` of a live episode that has none. @returns the episode as it stands after.
   */
  async critical(groupId: string, cluster: string, now: number): Promise<PageEpisode> {
    return this.sql.transaction(async (tx) => {
      await tx.lock(`alert-page:${groupId}`);
      const repo = new NoticeRepository(tx);
      const cur = await repo.page(groupId);
      if (!cur) {
        await tx.run('INSERT INTO alert_pages (group_id, cluster, episode, critical_since, acted_at, resolved_at) VALUES (?, ?, 1, ?, NULL, NULL)', [groupId, cluster, now]);
      } else if (cur.resolvedAt !== null) {
        await tx.run('UPDATE alert_pages SET episode = episode + 1, critical_since = ?, acted_at = NULL, resolved_at = NULL WHERE group_id = ?', [now, groupId]);
      } else if (cur.criticalSince === null) {
        await tx.run('UPDATE alert_pages SET critical_since = ? WHERE group_id = ?', [now, groupId]);
      }
      return (await repo.page(groupId))!;
    });
  }

  /**
   * Someone acted on the group's alert at `now` (an approval request, a snooze, a Details view): its live episode (a
   * new one, not critical yet, if none) records the first such time, and pages no more.
   */
  async acted(groupId: string, cluster: string, now: number): Promise<void> {
    await this.sql.transaction(async (tx) => {
      await tx.lock(`alert-page:${groupId}`);
      const cur = await new NoticeRepository(tx).page(groupId);
      if (!cur) await tx.run('INSERT INTO alert_pages (group_id, cluster, episode, critical_since, acted_at, resolved_at) VALUES (?, ?, 1, NULL, ?, NULL)', [groupId, cluster, now]);
      else if (cur.resolvedAt !== null) await tx.run('UPDATE alert_pages SET episode = episode + 1, critical_since = NULL, acted_at = ?, resolved_at = NULL WHERE group_id = ?', [now, groupId]);
      else if (cur.actedAt === null) await tx.run('UPDATE alert_pages SET acted_at = ? WHERE group_id = ?', [now, groupId]);
    });
  }

  /** The group's live episode ended at `now` (no live finding left). @returns the episode ended, if one was live. */
  async resolved(groupId: string, now: number): Promise<PageEpisode | undefined> {
    return this.sql.transaction(async (tx) => {
      await tx.lock(`alert-page:${groupId}`);
      const repo = new NoticeRepository(tx);
      const cur = await repo.page(groupId);
      if (!cur || cur.resolvedAt !== null) return undefined;
      await tx.run('UPDATE alert_pages SET resolved_at = ? WHERE group_id = ? AND resolved_at IS NULL', [now, groupId]);
      return { ...cur, resolvedAt: now };
    });
  }
}
