/**
 * The Slack notification queue's rows (`slack_outbox`, docs/slack.md "Notification queue"): one pending work item
 * per key — an alert group's post/edit/replies, or a digest — so that a poll only stores its work and returns, the
 * drainer sends it at Slack's rates, and a restart resumes it. Enqueueing an item whose key is pending merges the two
 * ({@link mergeOutboxItem}): that is how ten polls' edits of one alert become one `chat.update`.
 * The repository is written against {@link SqlExecutor} in the portable SQL of src/store/sql.ts.
 */
import type { SqlExecutor } from './sql.js';

/** The Slack call an item starts with: a new message (`chat.postMessage`) or an edit of a posted one (`chat.update`). */
export type OutboxCall = 'post' | 'edit';

/** One line of a digest: an alert to be posted (the input of `digestMessage`, src/slack/blocks/digest.ts). */
export interface OutboxDigestLine {
  groupId: string;
  cluster: string;
  /** `namespace/serviceAccount`. */
  subject: string;
  severity: 'info' | 'warning' | 'critical';
  /** The header fact of the alert ("rejected in 12 days", "requests now fail with 401"). */
  fact: string;
  /** Set once its alert is posted: where. */
  posted?: { channel: string; ts: string };
}

/**
 * A follow-up notice (src/store/notices.ts): a Slack message in an alert's thread or to a user, or a paging event.
 * Rendered when enqueued; secrets (the PagerDuty routing key, the webhook URL) are added when sent, never stored.
 */
export interface OutboxNotice {
  /** `thread`: a reply in `threadTs` of the item's channel; `dm`: a direct message to the user id in the item's channel; `page`: a paging event. */
  to: 'thread' | 'dm' | 'page';
  threadTs?: string;
  /** `thread`/`dm`: the message (a `SlackMessage`, src/slack/blocks/text.ts). */
  message?: { text: string; textFormat?: 'plain' | 'mrkdwn'; blocks: unknown[] };
  /** `page`: the event, without the routing key (src/slack/paging.ts `PageEvent`). */
  event?: {
    action: 'trigger' | 'resolve';
    dedupKey: string;
    summary: string;
    source: string;
    severity: 'critical';
    groupId: string;
    cluster: string;
    subject: string;
    link?: string;
  };
  /** When the send was first tried (stored before the call): a restart looks the notice up before sending again. */
  postingAt?: number;
}

/** The facts of an item the rest of the store does not keep (JSON in the row), merged over coalesced polls. */
export interface OutboxPayload {
  /** Notice items only: see {@link OutboxNotice}. */
  notice?: OutboxNotice;
  /** Alert items: findings a poll reopened (resolved → open); `late` with when they had been resolved (a late use). */
  reopened?: Array<{ findingId: string; late: boolean; resolvedAt: number | null }>;
  /** Digest items: the alerts listed (ranked), where the digest was posted, and how many it showed as posted. */
  digest?: {
    createdAt: number;
    lines: OutboxDigestLine[];
    message?: { channel: string; ts: string };
    shownPosted: number;
    /** When its `chat.postMessage` was first tried (set before the call): a restart looks for it before posting. */
    postingAt?: number;
  };
}

/** One pending work item. Times are epoch ms UTC. */
export interface OutboxItem {
  /** Coalescing key: `alert:<groupId>`, `digest:<channel>:<createdAt>`, or a notice's key (src/store/notices.ts). */
  key: string;
  kind: 'alert' | 'digest' | 'notice';
  cluster: string;
  /** The channel its calls go to, as configured for the cluster (id or `#name`); a notice's: the thread's channel, the user id of a direct message, or `pagerduty` / `webhook`. */
  channel: string;
  /** The first call it makes (what the rate gate is asked about before it is picked). */
  call: OutboxCall;
  /** Sort key, smaller is more urgent (`urgencyOf`, src/slack/outbox.ts). */
  urgency: number;
  /** When the oldest of the merged items was enqueued. */
  enqueuedAt: number;
  /** Not sent before this time (backoff after a failure, a digest's edit interval). */
  notBefore: number;
  /** Failed sends so far. */
  attempts: number;
  /** Bumped by every merge: the drainer deletes an item only if no poll changed it while it was being sent. */
  version: number;
  payload: OutboxPayload;
}

/**
 * A pending item with a newer one of the same key merged in: the newer call, urgency, channel and facts (reopened
 * findings accumulate), the older `enqueuedAt`, the pending backoff (`notBefore`, `attempts`) kept, version bumped.
 */
export function mergeOutboxItem(pending: OutboxItem, next: OutboxItem): OutboxItem {
  const reopened = [...(pending.payload.reopened ?? [])];
  for (const r of next.payload.reopened ?? []) if (!reopened.some((x) => x.findingId === r.findingId)) reopened.push(r);
  return {
    ...next,
    enqueuedAt: Math.min(pending.enqueuedAt, next.enqueuedAt),
    notBefore: Math.max(pending.notBefore, next.notBefore),
    attempts: pending.attempts,
    version: pending.version + 1,
    payload: { ...pending.payload, ...next.payload, ...(reopened.length ? { reopened } : {}) },
  };
}

type OutboxRow = {
  item_key: string;
  kind: OutboxItem['kind'];
  cluster: string;
  channel: string;
  first_call: OutboxCall;
  urgency: number;
  enqueued_at: number;
  not_before: number;
  attempts: number;
  version: number;
  payload: string;
};

const COLUMNS = 'item_key, kind, cluster, channel, first_call, urgency, enqueued_at, not_before, attempts, version, payload';

function fromRow(r: OutboxRow): OutboxItem {
  let payload: OutboxPayload = {};
  try {
    const parsed = JSON.parse(r.payload) as unknown;
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) payload = parsed as OutboxPayload;
  } catch {
    payload = {};
  }
  return {
    key: r.item_key,
    kind: r.kind,
    cluster: r.cluster,
    channel: r.channel,
    call: r.first_call,
    urgency: Number(r.urgency),
    enqueuedAt: Number(r.enqueued_at),
    notBefore: Number(r.not_before),
    attempts: Number(r.attempts),
    version: Number(r.version),
    payload,
  };
}

/** The queue's size: items pending and the enqueue time of the oldest (epoch ms), null when empty. */
export interface OutboxStats {
  depth: number;
  oldestEnqueuedAt: number | null;
}

/** `slack_outbox` over a {@link SqlExecutor}. Every method may throw the executor's `StoreError`. */
export class OutboxRepository {
  constructor(private readonly sql: SqlExecutor) {}

  /** Adds items in one transaction, each merged into the pending item of its key if there is one ({@link mergeOutboxItem}). */
  async enqueue(items: readonly OutboxItem[]): Promise<void> {
    if (items.length === 0) return;
    await this.sql.transaction(async (tx) => {
      for (const item of items) {
        const row = await tx.get<OutboxRow>(`SELECT ${COLUMNS} FROM slack_outbox WHERE item_key = ?`, [item.key]);
        const next = row ? mergeOutboxItem(fromRow(row), item) : { ...item, version: 0 };
        await tx.run(
          `INSERT INTO slack_outbox (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (item_key) DO UPDATE SET kind = excluded.kind, cluster = excluded.cluster, channel = excluded.channel,
             first_call = excluded.first_call, urgency = excluded.urgency, enqueued_at = excluded.enqueued_at,
             not_before = excluded.not_before, attempts = excluded.attempts, version = excluded.version, payload = excluded.payload`,
          [next.key, next.kind, next.cluster, next.channel, next.call, next.urgency, next.enqueuedAt, next.notBefore, next.attempts, next.version, JSON.stringify(next.payload)],
        );
      }
    });
  }

  /** Every pending item, most urgent first (urgency, then enqueue time, then key). */
  async list(): Promise<OutboxItem[]> {
    const rows = await this.sql.all<OutboxRow>(`SELECT ${COLUMNS} FROM slack_outbox ORDER BY urgency, enqueued_at, item_key`);
    return rows.map(fromRow);
  }

  /** The pending item of `key`, if any. */
  async get(key: string): Promise<OutboxItem | undefined> {
    const row = await this.sql.get<OutboxRow>(`SELECT ${COLUMNS} FROM slack_outbox WHERE item_key = ?`, [key]);
    return row ? fromRow(row) : undefined;
  }

  /**
   * Removes a sent item, unless a poll merged a newer one into it meanwhile (its version moved on).
   * @returns whether it was removed.
   */
  async complete(key: string, version: number): Promise<boolean> {
    const r = await this.sql.run('DELETE FROM slack_outbox WHERE item_key = ? AND version = ?', [key, version]);
    return r.changes > 0;
  }

  /** Puts an item off until `notBefore` (epoch ms) after a failed send, with its failure count. */
  async reschedule(key: string, notBefore: number, attempts: number): Promise<void> {
    await this.sql.run('UPDATE slack_outbox SET not_before = ?, attempts = ? WHERE item_key = ?', [notBefore, attempts, key]);
  }

  /** Replaces an item's call, payload, `notBefore` and (when given) urgency — a digest after its post or an edit — keeping its version. */
  async update(key: string, change: { call: OutboxCall; payload: OutboxPayload; notBefore: number; urgency?: number }): Promise<void> {
    await this.sql.run('UPDATE slack_outbox SET first_call = ?, payload = ?, not_before = ?, urgency = COALESCE(?, urgency) WHERE item_key = ?', [
      change.call,
      JSON.stringify(change.payload),
      change.notBefore,
      change.urgency ?? null,
      key,
    ]);
  }

  /** Removes an item whatever its version (a digest whose every line is posted and shown). */
  async remove(key: string): Promise<void> {
    await this.sql.run('DELETE FROM slack_outbox WHERE item_key = ?', [key]);
  }

  /** Depth and oldest enqueue time (the queue's metrics and the `/tokens status` backlog line). */
  async stats(): Promise<OutboxStats> {
    const row = await this.sql.get<{ n: number; oldest: number | null }>('SELECT COUNT(*) AS n, MIN(enqueued_at) AS oldest FROM slack_outbox');
    return { depth: Number(row?.n ?? 0), oldestEnqueuedAt: row?.oldest === null || row?.oldest === undefined ? null : Number(row.oldest) };
  }
}
