/**
 * The drainer of the Slack notification queue (docs/slack.md "Notification queue"): a poll enqueues its alert work
 * ({@link NotificationDrainer.enqueue}: rows of `slack_outbox`, merged per alert group) and returns; this loop sends
 * the items one at a time, most urgent first, at Slack's rates (src/slack/outbox.ts `RateGate`: one post per second
 * per channel, `chat.update` 50 per minute; a 429's `Retry-After` pauses the method — the WebClient itself waits it
 * out and retries, per its `retryConfig` in src/slack/app.ts). Items are rows, so a restart resumes the queue; a row
 * is deleted only after its work is recorded. A crash between `chat.postMessage` and saving the alert's ref is covered
 * by the alert intent (the notifier), and one between a digest's post and its record by the digest's `postingAt` and
 * its message metadata ({@link DIGEST_EVENT_TYPE}): the next process finds the message instead of posting it again
 * (docs/slack.md "Crash safety"). Thread replies of an alert item are at least once (the same section says why).
 *
 * Notices (reminders, escalations, outcomes told to the requester, pages; src/slack/notices.ts) are items too, sent
 * in queue order at the same rates; each does its own intent, send and record ({@link DrainerSender.sendNotice}).
 *
 * Ordering: one item per alert, sent one at a time, so an alert's edits never come before its post. A reply that needs
 * an alert (the verifier's) waits with {@link NotificationDrainer.settle}, which sends that alert's item next.
 *
 * Digest first: when the pending new alerts of one channel are more than `digestThreshold` (default
 * {@link DEFAULT_DIGEST_THRESHOLD}), one digest message listing them, ranked by days to rejection, is posted before
 * them; each line is marked posted as its alert goes out, the digest being edited at most every
 * `digestEditIntervalMs`, and once more when the last one is out.
 *
 * Failures: an item whose send fails is put off (5 s doubling to 5 min, src/slack/outbox.ts `retryDelayMs`) and
 * tried again; a channel Slack refuses (bot not invited, archived) puts every item of that channel off by the same.
 */
import { setTimeout as sleepTimer } from 'node:timers/promises';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { MessageLocation } from '../store/index.js';
import type { MessageMetadata } from './api.js';
import type { OutboxItem, OutboxPayload, OutboxRepository, OutboxStats } from '../store/outbox.js';
import { CHANNEL_ERRORS, SlackCallError } from './api.js';
import { digestMessage, type SlackMessage } from './blocks/index.js';
import { digestCandidates, nextItem, type RateGate, retryDelayMs, URGENCY_LAST } from './outbox.js';

/** New alerts for one channel above which a drain posts a digest first. */
export const DEFAULT_DIGEST_THRESHOLD = 10;
/** Minimum time between two edits of one digest, ms. */
export const DEFAULT_DIGEST_EDIT_INTERVAL_MS = 30_000;

/** The queue's rows as the drainer uses them ({@link OutboxRepository}). */
export type OutboxQueue = Pick<OutboxRepository, 'enqueue' | 'list' | 'get' | 'complete' | 'reschedule' | 'update' | 'remove'>;

/** What the drainer sends with (the notifier and the Slack API wrapper). */
export interface DrainerSender {
  /** Sends an alert item; returns where the group's alert is afterwards. @throws SlackCallError */
  sendItem(item: OutboxItem): Promise<MessageLocation | undefined>;
  /** The digest line of a group, or undefined when nothing of it is live. */
  digestLine(cluster: string, groupId: string, now: number): Promise<NonNullable<OutboxPayload['digest']>['lines'][number] | undefined>;
  /** `chat.postMessage` with message metadata (`SlackApi.post`). @throws SlackCallError */
  post(channel: string, msg: SlackMessage, metadata?: MessageMetadata): Promise<MessageLocation>;
  update(channel: string, ts: string, msg: SlackMessage): Promise<void>;
  /**
   * The message of `channel` posted after `oldestMs` (epoch ms) whose metadata is {@link DIGEST_EVENT_TYPE} with
   * `digest_key` = `key` (`SlackApi.findByMetadata`): a digest posted by a process that died before recording it.
   * @throws SlackCallError
   */
  findDigest(channel: string, key: string, oldestMs: number): Promise<MessageLocation | undefined>;
  /**
   * Sends a `notice` item (a reminder, an escalation, an outcome, a page) and records it, deleting its row
   * (src/slack/notices.ts `NoticeSender.send`). Absent: notice rows are left alone. @throws on failure (kept, retried).
   */
  sendNotice?(item: OutboxItem): Promise<void>;
}

/** Slack message metadata `event_type` of a digest; its `event_payload.digest_key` is the queue item's key. */
export const DIGEST_EVENT_TYPE = 'tokenwatch_digest';
/** How far before a digest's recorded intent the channel history is searched (clock skew with Slack), ms. */
const DIGEST_LOOKBACK_MS = 10 * 60_000;

/** Dependencies of {@link NotificationDrainer}. */
export interface DrainerDeps {
  queue: OutboxQueue;
  sender: DrainerSender;
  gate: RateGate;
  /** Epoch ms; the gate's clock too. */
  clock: () => number;
  logger: Logger;
  metrics?: Metrics;
  /** Whether this replica sends at all (it owns a cluster, `Ownership.ownsAny`); others leave the rows alone. Default always. */
  ownsAny?: () => boolean;
  /**
   * Whether this replica sends the items of `cluster`: with clusters shared out across replicas, each sends its own
   * clusters' items (the rows are shared; two replicas sending one alert's item could both post it). Default all.
   */
  owns?: (cluster: string) => boolean;
  /** See the module docstring. Default {@link DEFAULT_DIGEST_THRESHOLD}. */
  digestThreshold?: number;
  /** Default {@link DEFAULT_DIGEST_EDIT_INTERVAL_MS}. */
  digestEditIntervalMs?: number;
  /** Waits `ms` or until `signal` aborts (tests pass one that moves an injected clock). Default: a timer. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** How long a replica that owns no cluster, or an idle loop, waits before looking again, ms. Default 5000. */
  idleCheckMs?: number;
  /** Told after each item was sent (the Home tab shows alert links: it republishes). */
  onSent?: (item: OutboxItem) => void;
}

const realSleep = async (ms: number, signal: AbortSignal): Promise<void> => {
  await sleepTimer(ms, undefined, { signal }).catch(() => undefined);
};

/** See the module docstring. */
export class NotificationDrainer {
  private items: OutboxItem[] = [];
  private dirty = true;
  /** Reading the rows or sending an item: not idle. */
  private busy = false;
  private running: Promise<void> | undefined;
  private wake = new AbortController();
  private stopped = false;
  private readonly idleWaiters: Array<() => void> = [];
  /** Keys whose pending item something waits for ({@link settle}), with their waiters. */
  private readonly settling = new Map<string, Array<() => void>>();
  private readonly threshold: number;
  private readonly editIntervalMs: number;
  private readonly sleep: (ms: number, signal: AbortSignal) => Promise<void>;

  constructor(private readonly deps: DrainerDeps) {
    this.threshold = deps.digestThreshold ?? DEFAULT_DIGEST_THRESHOLD;
    this.editIntervalMs = deps.digestEditIntervalMs ?? DEFAULT_DIGEST_EDIT_INTERVAL_MS;
    this.sleep = deps.sleep ?? realSleep;
    if (deps.metrics) deps.metrics.slackQueueOldestOf = () => this.oldestAgeSeconds();
  }

  /** Age of the oldest pending item on the queue's clock, seconds (0 when empty). */
  private oldestAgeSeconds(): number {
    const oldest = this.backlog().oldestEnqueuedAt;
    return oldest === null ? 0 : Math.max(0, (this.deps.clock() - oldest) / 1000);
  }

  /** Stores items (merged per key) and wakes the loop. Returns once they are rows. */
  async enqueue(items: readonly OutboxItem[]): Promise<void> {
    if (items.length === 0) return;
    await this.deps.queue.enqueue(items);
    this.dirty = true;
    this.kick();
  }

  /** Starts the loop (idempotent); it runs until {@link stop}. */
  start(): void {
    if (this.running || this.stopped) return;
    this.running = this.loop().catch((err: unknown) => {
      this.deps.logger.error({ err }, 'the Slack notification queue stopped; it resumes at the next start');
    });
  }

  /** Wakes the loop (new items, or this replica came to own a cluster). */
  kick(): void {
    this.dirty = true;
    this.wake.abort();
  }

  /**
   * Pending items in this process's view, and the oldest's enqueue time (the queue's metrics, `/tokens status`).
   * @param counts which channels' items count (default all; `/tokens status` leaves out channels Slack refuses).
   */
  backlog(counts: (channel: string) => boolean = () => true): OutboxStats {
    const items = this.items.filter((i) => counts(i.channel));
    const oldest = items.reduce<number | null>((m, i) => (m === null || i.enqueuedAt < m ? i.enqueuedAt : m), null);
    return { depth: items.length, oldestEnqueuedAt: oldest };
  }

  /**
   * Resolves when the queue is empty or every pending item waits for later than `withinMs` from now; at once when
   * the loop is not running or this replica does not send (it owns no cluster). An item that became due while the loop
   * sleeps (the clock moved) wakes it.
   */
  idle(withinMs = 0): Promise<void> {
    return new Promise((resolve) => {
      const check = () => {
        const now = this.deps.clock();
        const sends = this.running !== undefined && !this.stopped && (this.deps.ownsAny?.() ?? true);
        if (!sends || (!this.dirty && !this.busy && this.items.every((i) => i.notBefore > now + withinMs))) return resolve();
        this.idleWaiters.push(check);
        // The clock moved past an item's time while the loop sleeps (a test's clock jumps): wake it to send that item.
        if (!this.dirty && !this.busy && 'item' in nextItem(this.items, this.deps.gate, now)) this.kick();
      };
      check();
    });
  }

  /**
   * Sends the pending item of `key` next, ahead of the queue order but within Slack's rates (a digest of its channel
   * not yet posted goes before it), and resolves once it was tried: sent, or failed and put off. At once when no item
   * of `key` is pending, when the loop does not run or this replica does not send, and when the item is backing off
   * after a failure. The verifier's thread replies wait for their alert's pending item this way, so a reply follows
   * the alert (and the poll's edit of it) it replies to.
   */
  settle(key: string): Promise<void> {
    const sends = this.running !== undefined && !this.stopped && (this.deps.ownsAny?.() ?? true);
    if (!sends) return Promise.resolve();
    return new Promise((resolve) => {
      const waiters = this.settling.get(key) ?? [];
      waiters.push(resolve);
      this.settling.set(key, waiters);
      this.kick();
    });
  }

  private settled(key: string): void {
    for (const w of this.settling.get(key) ?? []) w();
    this.settling.delete(key);
  }

  /** Items the loop picks from: those something waits for ({@link settle}) and the unposted digests of their channels, if any; else all. */
  private candidates(now: number): OutboxItem[] {
    if (this.settling.size === 0) return this.items;
    for (const key of [...this.settling.keys()]) {
      const item = this.items.find((i) => i.key === key);
      if (!item || (item.attempts > 0 && item.notBefore > now)) this.settled(key);
    }
    const wanted = this.items.filter((i) => this.settling.has(i.key));
    if (wanted.length === 0) return this.items;
    const channels = new Set(wanted.map((i) => i.channel));
    return [...wanted, ...this.items.filter((i) => i.kind === 'digest' && !i.payload.digest?.message && channels.has(i.channel))];
  }

  /**
   * Stops the loop after the item being sent (its row stays if it was not finished), waiting for that item at most
   * `timeoutMs` (a Slack call retrying a 429 may take minutes; the row and the alert intent cover a send cut short).
   */
  async stop(timeoutMs = Number.POSITIVE_INFINITY): Promise<void> {
    this.stopped = true;
    this.wake.abort();
    for (const key of [...this.settling.keys()]) this.settled(key);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.running, ...(Number.isFinite(timeoutMs) ? [new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))] : [])]);
    clearTimeout(timer);
  }

  private notifyIdle(): void {
    for (const w of this.idleWaiters.splice(0)) w();
  }

  private updateMetrics(): void {
    this.deps.metrics?.slackQueueDepth.set(this.items.length);
    this.deps.metrics?.slackQueueOldest.set(this.oldestAgeSeconds());
  }

  private async loop(): Promise<void> {
    const idleMs = this.deps.idleCheckMs ?? 5000;
    while (!this.stopped) {
      if (this.wake.signal.aborted) this.wake = new AbortController();
      if (this.deps.ownsAny && !this.deps.ownsAny()) {
        for (const key of [...this.settling.keys()]) this.settled(key);
        this.dirty = true; // another replica sends meanwhile: read the rows again once this one sends
        this.notifyIdle();
        await this.sleep(idleMs, this.wake.signal);
        continue;
      }
      this.busy = true;
      try {
        if (this.dirty) {
          this.dirty = false;
          const owns = this.deps.owns;
          this.items = (await this.deps.queue.list()).filter((i) => owns === undefined || owns(i.cluster));
          this.updateMetrics();
        }
        const next = nextItem(this.candidates(this.deps.clock()), this.deps.gate, this.deps.clock());
        if ('item' in next) {
          if (await this.process(next.item)) this.settled(next.item.key);
          this.updateMetrics();
          continue;
        }
        if (this.dirty) continue;
        this.busy = false;
        this.notifyIdle();
        await this.sleep('waitMs' in next ? next.waitMs : idleMs, this.wake.signal);
        // Idle and not woken: read the rows again (a cluster taken over brings the rows its previous owner left).
        if (!('waitMs' in next) && !this.wake.signal.aborted) this.dirty = true;
      } finally {
        this.busy = false;
      }
    }
    this.notifyIdle();
  }

  private drop(key: string): void {
    this.items = this.items.filter((i) => i.key !== key);
  }

  private async replace(key: string): Promise<void> {
    const row = await this.deps.queue.get(key);
    this.drop(key);
    if (row) this.items.push(row);
  }

  /** Sends one item (or plans a digest before it). @returns whether the item itself was tried (sent or put off). */
  private async process(item: OutboxItem): Promise<boolean> {
    const { queue, clock, logger } = this.deps;
    try {
      if (item.kind === 'digest') {
        await this.processDigest(item);
        return true;
      }
      if (item.kind === 'notice') {
        if (!this.deps.sender.sendNotice) {
          this.drop(item.key);
          return true;
        }
        // Its own intent, send and record (src/slack/notices.ts): the row is gone once it is recorded.
        await this.deps.sender.sendNotice(item);
        this.drop(item.key);
        this.deps.onSent?.(item);
        return true;
      }
      if (item.call === 'post' && (await this.digestFirst(item))) return false;
      const at = await this.deps.sender.sendItem(item);
      await this.markListed(item, at);
      this.deps.onSent?.(item);
      if (await queue.complete(item.key, item.version)) this.drop(item.key);
      else await this.replace(item.key); // a poll merged newer facts meanwhile: sent again, at its turn
      return true;
    } catch (err) {
      const now = clock();
      const attempts = item.attempts + 1;
      const notBefore = now + retryDelayMs(attempts);
      const channelDown = err instanceof SlackCallError && CHANNEL_ERRORS.has(err.slackError);
      logger.warn({ err, key: item.key, cluster: item.cluster, attempts, retryInMs: notBefore - now }, 'a Slack notification failed; it stays queued and is tried again');
      const affected = channelDown ? this.items.filter((i) => i.channel === item.channel) : [item];
      for (const i of affected) {
        await queue.reschedule(i.key, notBefore, i === item ? attempts : i.attempts);
        i.notBefore = notBefore;
        if (i === item) i.attempts = attempts;
      }
      return true;
    }
  }

  /** Plans and enqueues a digest when `item`'s channel has more new alerts waiting than the threshold. @returns whether it did. */
  private async digestFirst(item: OutboxItem): Promise<boolean> {
    const listed = new Set<string>();
    for (const i of this.items) for (const l of i.payload.digest?.lines ?? []) listed.add(`alert:${l.groupId}`);
    const candidates = digestCandidates(this.items, item.channel, this.threshold, listed);
    if (candidates.length === 0) return false;
    const now = this.deps.clock();
    const lines: NonNullable<OutboxPayload['digest']>['lines'] = [];
    for (const c of candidates) {
      const line = await this.deps.sender.digestLine(c.cluster, c.key.slice('alert:'.length), now);
      if (line) lines.push(line);
    }
    if (lines.length <= this.threshold) return false;
    const digest: OutboxItem = {
      key: `digest:${item.channel}:${now}`,
      kind: 'digest',
      cluster: candidates[0]!.cluster,
      channel: item.channel,
      call: 'post',
      urgency: Math.min(...candidates.map((c) => c.urgency)) - 1,
      enqueuedAt: now,
      notBefore: 0,
      attempts: 0,
      version: 0,
      payload: { digest: { createdAt: now, lines, shownPosted: 0 } },
    };
    await this.deps.queue.enqueue([digest]);
    this.items.push({ ...digest });
    this.deps.logger.info({ channel: item.channel, alerts: lines.length }, 'many new alerts for one channel: posting a digest first');
    return true;
  }

  /** After an alert item: its line in a pending digest is marked posted (or dropped when nothing was open to post). */
  private async markListed(item: OutboxItem, at: MessageLocation | undefined): Promise<void> {
    const gid = item.key.slice('alert:'.length);
    for (const d of this.items) {
      const state = d.payload.digest;
      const line = state?.lines.find((l) => l.groupId === gid && !l.posted);
      if (!state || !line) continue;
      if (at) line.posted = { channel: at.channel, ts: at.ts };
      else state.lines = state.lines.filter((l) => l !== line);
      await this.deps.queue.update(d.key, { call: d.call, payload: d.payload, notBefore: d.notBefore });
    }
  }

  /** A digest a process that died left posted but unrecorded, if Slack has it; undefined when the lookup fails. */
  private async findDigest(item: OutboxItem, postingAt: number): Promise<MessageLocation | undefined> {
    try {
      const found = await this.deps.sender.findDigest(item.channel, item.key, postingAt - DIGEST_LOOKBACK_MS);
      if (found) this.deps.logger.info({ key: item.key, channel: found.channel, ts: found.ts }, 'found the digest posted before a restart; editing it instead of posting again');
      return found;
    } catch (err) {
      this.deps.logger.warn({ err, key: item.key }, 'could not look for a digest posted before a restart (channels:history / groups:history scope?); posting it');
      return undefined;
    }
  }

  private async processDigest(item: OutboxItem): Promise<void> {
    const { queue, clock, sender } = this.deps;
    const state = item.payload.digest;
    if (!state) {
      await queue.remove(item.key);
      this.drop(item.key);
      return;
    }
    const posted = state.lines.filter((l) => l.posted).length;
    const msg = digestMessage(state.lines, state.createdAt);
    if (!state.message) {
      // Exactly once across a kill -9: the intent (when the post was tried) is a row before the post; a process that
      // died between the post and recording its ts finds the digest by its metadata instead of posting it again.
      if (state.postingAt !== undefined) state.message = await this.findDigest(item, state.postingAt);
      if (!state.message) {
        state.postingAt = clock();
        await queue.update(item.key, { call: item.call, payload: item.payload, notBefore: item.notBefore });
        state.message = await sender.post(item.channel, msg, { event_type: DIGEST_EVENT_TYPE, event_payload: { digest_key: item.key } });
      } else {
        await sender.update(state.message.channel, state.message.ts, msg);
      }
      state.shownPosted = posted;
    } else if (posted > state.shownPosted) {
      await sender.update(state.message.channel, state.message.ts, msg);
      state.shownPosted = posted;
    }
    if (state.shownPosted >= state.lines.length) {
      await queue.remove(item.key);
      this.drop(item.key);
      return;
    }
    // Edited again (every line marked as its alert goes out) no more often than the edit interval, after the alerts.
    item.call = 'edit';
    item.urgency = URGENCY_LAST;
    item.notBefore = clock() + this.editIntervalMs;
    await queue.update(item.key, { call: item.call, payload: item.payload, notBefore: item.notBefore, urgency: item.urgency });
  }
}
