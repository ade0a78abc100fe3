/**
 * The notification queue's scheduling, pure (no I/O; the time is a parameter): which pending Slack work item to send
 * next, within Slack's rates (docs/slack.md "Notification queue").
 *
 * A poll stores its findings and enqueues one work item per alert group it touched; the drainer
 * (`src/slack/drainer.ts`) sends them. This module decides:
 * - **coalescing**: one pending item per key (an alert group, a digest); a later poll's item for the same key is
 *   merged into the pending one (`mergeOutboxItem`, src/store/outbox.ts), so ten polls' edits of one alert are one
 *   `chat.update`;
 * - **order**: most urgent first — the earliest rejection time among the group's live findings (401s now come before
 *   any rejection date; resolutions and findings without a date last), then the oldest item ({@link compareItems});
 * - **rates** ({@link RateGate}): `chat.postMessage` at most one per second per channel (Slack: "1 message per second
 *   per channel, short bursts allowed"), and per-method limits per workspace, e.g. `chat.update` Tier 3, 50 per
 *   minute (https://docs.slack.dev/apis/web-api/rate-limits); a 429's `Retry-After` pauses the method;
 * - **digest first** ({@link digestCandidates}): when a drain would post more than `digestThreshold` new alerts to one
 *   channel, one digest message listing them (ranked by days to rejection) is posted first.
 */
import type { OutboxCall, OutboxItem } from '../store/outbox.js';

/** Urgency of findings without a rejection date (legacy tokens) and of resolutions: after every dated one. */
export const URGENCY_LAST = Number.MAX_SAFE_INTEGER;

/** How far before its first sighting a live 401 finding ranks (2⁵⁰ ms ≈ 35,000 years: before every rejection date). */
const REFUSED_BEFORE_MS = 2 ** 50;

/**
 * The urgency of an alert group's item: the earliest `rejectionAt` (epoch ms) among its live findings; a live 401
 * finding counts as rejected at its first sighting (already refused, so before any future date); none live or no
 * date → {@link URGENCY_LAST}.
 */
export function urgencyOf(live: ReadonlyArray<{ kind: string; rejectionAt: string | null; firstSeen: string }>): number {
  let u = URGENCY_LAST;
  for (const f of live) {
    const at = f.kind === 'unauthorized' ? Date.parse(f.firstSeen) - REFUSED_BEFORE_MS : f.rejectionAt ? Date.parse(f.rejectionAt) : NaN;
    if (Number.isFinite(at) && at < u) u = at;
  }
  return u;
}

/** Queue order: urgency, then the oldest item, then the key (a total order, so the drain is deterministic). */
export function compareItems(a: OutboxItem, b: OutboxItem): number {
  return a.urgency - b.urgency || a.enqueuedAt - b.enqueuedAt || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
}

/** Slack's rates as tokenwatch paces itself by them. */
export interface SlackRates {
  /** Minimum time between two `chat.postMessage` calls to one channel, ms. Default 1000. */
  postIntervalMs: number;
  /** Calls per minute per workspace, per method (Slack's tiers: Tier 2 = 20, Tier 3 = 50, Tier 4 = 100). */
  perMinute: Readonly<Record<string, number>>;
  /** Calls of one method allowed back to back before the per-minute pace applies. Default 5. */
  burst: number;
}

/**
 * Default rates: one post per second per channel (chat.postMessage's "special" tier), `chat.update` Tier 3
 * (50/min), `chat.getPermalink` and `conversations.history` as documented (Tier 4 / Tier 3), per
 * https://docs.slack.dev/apis/web-api/rate-limits and each method's reference page.
 */
export const DEFAULT_SLACK_RATES: SlackRates = {
  postIntervalMs: 1000,
  perMinute: { 'chat.update': 50, 'conversations.history': 50, 'chat.getPermalink': 100 },
  burst: 5,
};

/** The Web API method of an item's first call. */
export function methodOf(call: OutboxCall): string {
  return call === 'post' ? 'chat.postMessage' : 'chat.update';
}

/**
 * Slack's rates as a gate, on an injected clock: asked how long a call must wait ({@link RateGate.waitMs}), told of
 * every call made ({@link RateGate.record}) and of every 429 ({@link RateGate.pause}). Per-method limits are a
 * generic cell rate (GCRA): the calls of a minute are spaced `60 s / perMinute` apart after a burst of `burst`.
 */
export class RateGate {
  private readonly lastPost = new Map<string, number>();
  /** Per method: the theoretical arrival time of the next call (GCRA). */
  private readonly tat = new Map<string, number>();
  private readonly paused = new Map<string, number>();

  constructor(
    private readonly rates: SlackRates,
    private readonly clock: () => number,
  ) {}

  /** How long a call of `method` to `channel` must wait from now, ms (0: it may go now). */
  waitMs(method: string, channel: string | undefined): number {
    const now = this.clock();
    let wait = Math.max(0, (this.paused.get(method) ?? 0) - now);
    if (method === 'chat.postMessage' && channel !== undefined) {
      const last = this.lastPost.get(channel);
      if (last !== undefined) wait = Math.max(wait, last + this.rates.postIntervalMs - now);
      wait = Math.max(wait, (this.paused.get(`${method}\u001f${channel}`) ?? 0) - now);
    }
    const per = this.rates.perMinute[method];
    if (per !== undefined && per > 0) {
      const interval = 60_000 / per;
      const tat = this.tat.get(method) ?? now;
      wait = Math.max(wait, tat - (this.rates.burst - 1) * interval - now);
    }
    return Math.max(0, Math.ceil(wait));
  }

  /** Records a call of `method` to `channel` made now. */
  record(method: string, channel: string | undefined): void {
    const now = this.clock();
    if (method === 'chat.postMessage' && channel !== undefined) this.lastPost.set(channel, now);
    const per = this.rates.perMinute[method];
    if (per !== undefined && per > 0) this.tat.set(method, Math.max(this.tat.get(method) ?? now, now) + 60_000 / per);
  }

  /** A 429 said `Retry-After: retryAfterMs / 1000`: no call of `method` (to `channel`, when given) before then. */
  pause(method: string, retryAfterMs: number, channel?: string): void {
    const key = channel !== undefined ? `${method}\u001f${channel}` : method;
    this.paused.set(key, Math.max(this.paused.get(key) ?? 0, this.clock() + retryAfterMs));
  }
}

/** What {@link nextItem} decided. */
export type NextItem = { item: OutboxItem } | { waitMs: number } | { idle: true };

/**
 * The next item to send now: the most urgent ready one ({@link compareItems}; `notBefore` passed) whose first call
 * the gate allows now. A channel at its post rate does not hold up other channels' items. When none may go now:
 * how long until one may (`waitMs`); `idle` when there is nothing pending.
 */
export function nextItem(items: readonly OutboxItem[], gate: RateGate, now: number): NextItem {
  if (items.length === 0) return { idle: true };
  let wait = Number.POSITIVE_INFINITY;
  for (const item of [...items].sort(compareItems)) {
    const w = Math.max(item.notBefore - now, gate.waitMs(methodOf(item.call), item.channel), 0);
    if (w === 0) return { item };
    if (w < wait) wait = w;
  }
  return { waitMs: wait };
}

/**
 * The alert posts a digest should announce first: the pending `post` items of alert groups in `channel` not already
 * listed by a digest (`listed`), most urgent first — when there are more than `threshold` of them; else none.
 */
export function digestCandidates(items: readonly OutboxItem[], channel: string, threshold: number, listed: ReadonlySet<string>): OutboxItem[] {
  const posts = items.filter((i) => i.kind === 'alert' && i.call === 'post' && i.channel === channel && !listed.has(i.key)).sort(compareItems);
  return posts.length > threshold ? posts : [];
}

/** Backoff after a failed send: 5 s doubling per attempt, at most 5 minutes, ms. */
export function retryDelayMs(attempts: number): number {
  return Math.min(300_000, 5_000 * 2 ** Math.max(0, attempts - 1));
}
