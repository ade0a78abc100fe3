/**
 * The Slack Web API calls tokenwatch makes, over Bolt's `WebClient` (@slack/web-api 8 via `@slack/bolt` 5), with:
 * - per-channel serialization of `chat.postMessage` and a minimum interval between posts to one channel (Slack
 *   allows about one message per second per channel, short bursts aside; api.slack.com/apis/rate-limits). HTTP 429
 *   answers are retried by the WebClient after `Retry-After` (its `retryConfig`, set in `app.ts`);
 * - errors turned into {@link SlackCallError} with Slack's error code, counted in
 *   `tokenwatch_slack_api_errors_total{method,error}`;
 * - channel problems (`not_in_channel`, `channel_not_found`, `is_archived`, …) remembered per channel, logged once
 *   per change (one clear line, not one per message) and shown by `/tokens status`; found by a failed call, or
 *   before any post by {@link SlackApi.checkChannel} (src/slack/channel-health.ts).
 * Scopes: `chat:write` (postMessage, update, postEphemeral), `usergroups:read` (usergroups.users.list),
 * `channels:history` / `groups:history` (conversations.history, conversations.replies: crash recovery of alerts and
 * notices; with `limit: 1`, the channel check), `im:write` / `im:history` (conversations.open, conversations.history of a direct-message channel: crash
 * recovery of a direct message only); chat.getPermalink and views.open need none.
 */
import { KeyedLock } from '../core/keyed-lock.js';
import { ErrorCode, TokenwatchError } from '../errors.js';
import { webApi } from '@slack/bolt';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { wireText, type KnownBlock } from './blocks/index.js';

type WebClient = InstanceType<typeof webApi.WebClient>;

/** A failed Web API call: `slackError` is Slack's error (`not_in_channel`, `ratelimited`, `http_500`, `request_error`). */
export class SlackCallError extends TokenwatchError {
  constructor(
    readonly method: string,
    readonly slackError: string,
    cause?: unknown,
  ) {
    super(ErrorCode.SlackCallFailed, `Slack ${method} failed: ${slackError}`, { cause });
    this.name = 'SlackCallError';
  }
}

/** Slack's error code of a WebClient error (web-api `ErrorCode` classes). */
export function slackErrorCode(err: unknown): string {
  const e = err as { code?: string; data?: { error?: string }; statusCode?: number; retryAfter?: number };
  switch (e?.code) {
    case webApi.ErrorCode.PlatformError:
      return e.data?.error ?? 'platform_error';
    case webApi.ErrorCode.RateLimitedError:
      return 'ratelimited';
    case webApi.ErrorCode.HTTPError:
      return `http_${e.statusCode ?? 'error'}`;
    case webApi.ErrorCode.RequestError:
      return 'request_error';
    default:
      return err instanceof SlackCallError ? err.slackError : 'unknown_error';
  }
}

/** Errors that say the channel itself is unusable (not a problem of one message). */
export const CHANNEL_ERRORS: ReadonlySet<string> = new Set([
  'not_in_channel',
  'channel_not_found',
  'is_archived',
  'restricted_action',
  'restricted_action_read_only_channel',
  'missing_scope',
  'not_authed',
  'invalid_auth',
  'account_inactive',
  'team_access_not_granted',
]);

/** Human explanation of a channel error, for the log line. */
export function explainChannelError(code: string): string {
  switch (code) {
    case 'not_in_channel':
      return 'the bot is not a member of this channel: invite it with /invite @tokenwatch (or add the chat:write.public scope for public channels)';
    case 'channel_not_found':
      return 'channel not found: check the channel id in the config, or invite the bot to the private channel';
    case 'is_archived':
      return 'the channel is archived: unarchive it or configure another channel';
    case 'missing_scope':
      return 'the Slack app lacks a scope (chat:write); reinstall it from manifests/slack-app.yaml';
    case 'not_authed':
    case 'invalid_auth':
    case 'account_inactive':
      return 'the bot token is invalid or revoked: check SLACK_BOT_TOKEN';
    default:
      return `Slack answered ${code}`;
  }
}

/** A message to post or update. */
export interface OutgoingMessage {
  text: string;
  /** See `SlackMessage.textFormat` (blocks/text.ts). */
  textFormat?: 'plain' | 'mrkdwn';
  blocks: KnownBlock[];
}

/** Slack message metadata (api.slack.com/metadata): an event type and a small JSON payload, readable by the app. */
export interface MessageMetadata {
  event_type: string;
  event_payload: Record<string, string | number | boolean>;
}

/** Options of {@link SlackApi}. */
export interface SlackApiOptions {
  client: WebClient;
  logger: Logger;
  metrics?: Metrics;
  /** Minimum time between two `chat.postMessage` calls to one channel, ms (default 1000). */
  channelIntervalMs?: number;
  /** Names of the clusters that alert in a channel, for log lines. */
  clustersOf?: (channel: string) => string[];
  /**
   * Awaited before every Web API call (method, channel when it has one): the request budget replicas share
   * (src/slack/budget.ts). Default none.
   */
  budget?: (method: string, channel: string | undefined) => Promise<void>;
  /** Told of every Web API call as it is made (method, channel when it has one): the notification queue's rate gate. */
  onCall?: (method: string, channel: string | undefined) => void;
  /**
   * Told of every HTTP 429 the WebClient got, with the method and its `Retry-After` in ms (the WebClient's
   * `rate_limited` event; it waits that long and retries by itself, per its `retryConfig`).
   */
  onRateLimited?: (method: string, retryAfterMs: number) => void;
}

/** A channel's current problem. `at` is epoch ms (wall clock). */
export interface ChannelProblem {
  error: string;
  at: number;
}

/** How many message permalinks {@link SlackApi.permalink} keeps (about 150 bytes each). */
export const PERMALINK_CACHE_SIZE = 10_000;

/** See the module docstring. */
export class SlackApi {
  readonly client: WebClient;
  private readonly queues = new KeyedLock();
  private readonly lastPost = new Map<string, number>();
  private readonly problems = new Map<string, ChannelProblem>();
  /** Permalinks by `channel/ts` (a message's permalink never changes), oldest first; at most {@link PERMALINK_CACHE_SIZE}. */
  private readonly permalinks = new Map<string, string>();
  private readonly interval: number;

  constructor(private readonly opts: SlackApiOptions) {
    this.client = opts.client;
    this.interval = opts.channelIntervalMs ?? 1000;
    const onRateLimited = opts.onRateLimited;
    if (onRateLimited) {
      this.client.on(webApi.WebClientEvent.RATE_LIMITED, (retrySec: number, req: { url?: string } | undefined) => {
        const method = String(req?.url ?? '').replace(/^.*\//, '');
        if (method) onRateLimited(method, retrySec * 1000);
      });
    }
  }

  /** The current problem of a channel (by the id or `#name` used to post), if any. */
  channelProblem(channel: string): ChannelProblem | undefined {
    return this.problems.get(channel);
  }

  /**
   * `chat.postMessage` (serialized per channel, spaced by `channelIntervalMs`).
   * @returns the channel id and `ts` of the new message.
   * @throws SlackCallError
   */
  post(channel: string, msg: OutgoingMessage, threadTs?: string, metadata?: MessageMetadata): Promise<{ channel: string; ts: string }> {
    return this.inChannel(channel, async () => {
      const wait = (this.lastPost.get(channel) ?? 0) + this.interval - Date.now();
      if (wait > 0) await sleep(wait);
      try {
        const res = await this.call('chat.postMessage', channel, () =>
          this.client.chat.postMessage({
            channel,
            text: wireText(msg.text, msg.textFormat),
            blocks: msg.blocks,
            unfurl_links: false,
            unfurl_media: false,
            ...(threadTs ? { thread_ts: threadTs } : {}),
            ...(metadata ? { metadata } : {}),
          }),
        );
        return { channel: typeof res.channel === 'string' ? res.channel : channel, ts: String(res.ts) };
      } finally {
        this.lastPost.set(channel, Date.now());
      }
    });
  }

  /** `chat.update` of one of the bot's messages. @throws SlackCallError */
  async update(channel: string, ts: string, msg: OutgoingMessage): Promise<void> {
    await this.call('chat.update', channel, () => this.client.chat.update({ channel, ts, text: wireText(msg.text, msg.textFormat), blocks: msg.blocks }));
  }

  /**
   * `chat.getPermalink` (no scope needed): a link to one message, e.g. `https://acme.slack.com/archives/C…/p…`.
   * A message's link does not change, so each is asked once and kept (the newest {@link PERMALINK_CACHE_SIZE}); a
   * failed call is not kept.
   * @throws SlackCallError
   */
  async permalink(channel: string, ts: string): Promise<string> {
    const key = `${channel}/${ts}`;
    const known = this.permalinks.get(key);
    if (known !== undefined) return known;
    const res = await this.call('chat.getPermalink', undefined, () => this.client.chat.getPermalink({ channel, message_ts: ts }));
    const link = String(res.permalink);
    this.permalinks.set(key, link);
    if (this.permalinks.size > PERMALINK_CACHE_SIZE) this.permalinks.delete(this.permalinks.keys().next().value as string);
    return link;
  }

  /**
   * Finds the newest top-level message in `channel` posted after `oldestMs` (epoch ms) whose message metadata has
   * `event_type` and `event_payload[key] === value` (`conversations.history` with `include_all_metadata`, scopes
   * `channels:history` / `groups:history`; at most `limit` messages are read).
   * @returns its `ts`, or undefined. @throws SlackCallError
   */
  async findByMetadata(channel: string, eventType: string, key: string, value: string, oldestMs: number, limit = 200): Promise<string | undefined> {
    const res = await this.call('conversations.history', channel, () =>
      this.client.conversations.history({ channel, oldest: (oldestMs / 1000).toFixed(6), limit, include_all_metadata: true }),
    );
    for (const m of res.messages ?? []) {
      const md = (m as { metadata?: { event_type?: string; event_payload?: Record<string, unknown> } }).metadata;
      if (md?.event_type === eventType && md.event_payload?.[key] === value && typeof m.ts === 'string') return m.ts;
    }
    return undefined;
  }

  /**
   * Finds a reply in the thread `threadTs` of `channel` posted after `oldestMs` (epoch ms) whose message metadata has
   * `event_type` and `event_payload[key] === value` (`conversations.replies` with `include_all_metadata`, scopes
   * `channels:history` / `groups:history`, or `im:history` in a direct-message channel).
   * @returns its `ts`, or undefined. @throws SlackCallError
   */
  async findReplyByMetadata(channel: string, threadTs: string, eventType: string, key: string, value: string, oldestMs: number): Promise<string | undefined> {
    const res = await this.call('conversations.replies', channel, () =>
      this.client.conversations.replies({ channel, ts: threadTs, oldest: (oldestMs / 1000).toFixed(6), limit: 200, include_all_metadata: true }),
    );
    for (const m of res.messages ?? []) {
      const md = (m as { metadata?: { event_type?: string; event_payload?: Record<string, unknown> } }).metadata;
      if (md?.event_type === eventType && md.event_payload?.[key] === value && typeof m.ts === 'string') return m.ts;
    }
    return undefined;
  }

  /**
   * Checks that the bot can post in `channel` (an id, `C…`/`G…`) before any alert needs it: `conversations.history`
   * with `limit: 1` (scopes `channels:history` / `groups:history`, already held for crash recovery; no other scope),
   * which Slack answers `not_in_channel` (public channel, bot not a member), `channel_not_found` (no such channel, or
   * a private one the bot is not in), `missing_scope`, `invalid_auth`, ….
   * A channel error is remembered as the channel's problem ({@link channelProblem}) and logged once per change, as a
   * failed post is; `not_in_channel` is no problem when `publicPosting` (the token holds `chat:write.public`, which
   * posts in public channels without membership; docs.slack.dev/reference/scopes/chat.write.public). A success clears
   * a problem this check can see (`not_in_channel`, `channel_not_found`), not one only posting shows (e.g. `is_archived`).
   * @returns the problem now, or undefined when the channel passed. Never throws: a failure that is not about the channel
   * (`ratelimited`, `request_error`, …) leaves the channel's state as it was and is returned as `{ error, unchecked: true }`.
   */
  async checkChannel(channel: string, publicPosting: boolean): Promise<(ChannelProblem & { unchecked?: true }) | undefined> {
    try {
      await this.call('conversations.history', undefined, () => this.client.conversations.history({ channel, limit: 1 }));
    } catch (err) {
      const code = slackErrorCode(err);
      if (code === 'not_in_channel' && publicPosting) return this.clearSeen(channel);
      if (!CHANNEL_ERRORS.has(code)) return { error: code, at: Date.now(), unchecked: true };
      const before = this.problems.get(channel);
      const now = { error: code, at: Date.now() };
      this.problems.set(channel, now);
      if (before?.error !== code) {
        this.opts.logger.error({ channel, clusters: this.opts.clustersOf?.(channel), error: code }, `cannot post to Slack channel ${channel}: ${explainChannelError(code)}`);
      }
      return now;
    }
    return this.clearSeen(channel);
  }

  /** Clears a problem of `channel` that a membership check sees; returns the problem left, if any. */
  private clearSeen(channel: string): ChannelProblem | undefined {
    const p = this.problems.get(channel);
    if (p && (p.error === 'not_in_channel' || p.error === 'channel_not_found')) {
      this.problems.delete(channel);
      this.opts.logger.info({ channel, clusters: this.opts.clustersOf?.(channel) }, 'Slack channel works again');
      return undefined;
    }
    return p;
  }

  /** `conversations.open` with one user (scope `im:write`): the id of the bot's direct-message channel with `user`. @throws SlackCallError */
  async openDm(user: string): Promise<string> {
    const res = await this.call('conversations.open', undefined, () => this.client.conversations.open({ users: user }));
    const id = (res.channel as { id?: string } | undefined)?.id;
    if (typeof id !== 'string') throw new SlackCallError('conversations.open', 'no_channel');
    return id;
  }

  /** `views.open` (no scope needed; `trigger_id` from an interaction, valid 3 s). @throws SlackCallError */
  async openView(triggerId: string, view: object): Promise<void> {
    await this.call('views.open', undefined, () => this.client.views.open({ trigger_id: triggerId, view: view as never }));
  }

  /**
   * `views.publish` of a Home tab view to `user` (no scope needed; the Home tab must be enabled in the app's
   * configuration, else `not_enabled`; docs.slack.dev/reference/methods/views.publish). @throws SlackCallError
   */
  async publishHome(user: string, view: object): Promise<void> {
    await this.call('views.publish', undefined, () => this.client.views.publish({ user_id: user, view: view as never }));
  }

  /** `chat.postEphemeral` to `user` in `channel`. @throws SlackCallError */
  async ephemeral(channel: string, user: string, msg: OutgoingMessage, threadTs?: string): Promise<void> {
    await this.call('chat.postEphemeral', undefined, () =>
      this.client.chat.postEphemeral({ channel, user, text: wireText(msg.text, msg.textFormat), blocks: msg.blocks, ...(threadTs ? { thread_ts: threadTs } : {}) }),
    );
  }

  /** `usergroups.users.list`: member user ids of a user group. @throws SlackCallError */
  async usergroupMembers(groupId: string): Promise<string[]> {
    const res = await this.call('usergroups.users.list', undefined, () => this.client.usergroups.users.list({ usergroup: groupId }));
    return (res.users ?? []).filter((u): u is string => typeof u === 'string');
  }

  /** Counts an error of a call made elsewhere (e.g. `respond` to a response_url). */
  countError(method: string, code: string): void {
    this.opts.metrics?.slackErrors.inc({ method, error: code });
  }

  private inChannel<T>(channel: string, fn: () => Promise<T>): Promise<T> {
    return this.queues.run(channel, fn);
  }

  private async call<T>(method: string, channel: string | undefined, fn: () => Promise<T>): Promise<T> {
    if (this.opts.budget) await this.opts.budget(method, channel);
    this.opts.onCall?.(method, channel);
    try {
      const res = await fn();
      if (channel !== undefined && this.problems.has(channel)) {
        this.problems.delete(channel);
        this.opts.logger.info({ channel, clusters: this.opts.clustersOf?.(channel) }, 'Slack channel works again');
      }
      return res;
    } catch (err) {
      const code = slackErrorCode(err);
      this.opts.metrics?.slackErrors.inc({ method, error: code });
      if (channel !== undefined && CHANNEL_ERRORS.has(code)) {
        const before = this.problems.get(channel);
        this.problems.set(channel, { error: code, at: Date.now() });
        if (before?.error !== code) {
          this.opts.logger.error({ channel, clusters: this.opts.clustersOf?.(channel), error: code }, `cannot post to Slack channel ${channel}: ${explainChannelError(code)}`);
        }
      }
      throw new SlackCallError(method, code, err);
    }
  }
}
