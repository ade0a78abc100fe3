/**
 * A fake Slack on loopback, for tests, benchmarks and the sandbox: the Web API a bot calls, the `response_url`s
 * it answers on, and helpers that send signed slash commands, `block_actions` and `view_submission`s
 * ({@link viewSubmissionPayload}) to a bot's HTTP receiver.
 *
 * ## Web API (`POST /api/<method>`)
 * Speaks the wire protocol `@slack/web-api`'s WebClient uses (docs/design/stack.md §1): form-urlencoded bodies
 * with object arguments (e.g. `blocks`) as JSON strings, or JSON bodies; `authorization: Bearer xoxb-…` (or a
 * `token` field) checked against the configured tokens (`not_authed` without one, `invalid_auth` for an unknown
 * one). Answers are HTTP 200 `{ok:true,…}` or `{ok:false,error}` as Slack's are; a rate limit is HTTP 429 with
 * `Retry-After: <seconds>` and `{ok:false,error:'ratelimited'}` (api.slack.com/apis/rate-limits). Point a client at
 * it with `new WebClient(token, { slackApiUrl: fake.apiUrl, retryConfig: { retries: 0 } })` or Bolt's
 * `clientOptions: { slackApiUrl: fake.apiUrl }`.
 *
 * Methods: `auth.test`; `chat.postMessage` (`ts` unique and increasing; `thread_ts`; `not_in_channel` where the bot
 * is not a member; `no_text` without text and blocks); `chat.update` (own messages only: `cant_update_message`;
 * `message_not_found`); `chat.postEphemeral` (`user_not_in_channel` when the channel has a member list without the
 * user); `usergroups.users.list` (`no_such_subteam`); `users.info` (`user_not_found`); `conversations.info`
 * (`channel_not_found`); `conversations.history` (top-level messages newest first, `oldest`/`latest`/`limit`, message
 * `metadata` with `include_all_metadata`; `not_in_channel`); `chat.getPermalink`; `views.open` (a modal with a title, checked with `validateView`
 * and blocks; {@link FakeSlack.views} lists them; `invalid_trigger_id`, `invalid_arguments`); `views.publish` (a Home tab
 * view per user, checked with `validateHomeView`: `user_id` a user id and `view.type` `home`, at most 100 blocks, else
 * `invalid_arguments` with the violations in `response_metadata.messages` as Slack words them; over 250 kB
 * `view_too_large`; {@link FakeSlack.homeView} shows the latest per user). `chat.postMessage` keeps
 * `metadata` (`{event_type, event_payload}`, else `invalid_metadata_schema`). Messages breaking Block Kit limits get `invalid_blocks` with `errors` from
 * `validateBlocks` (src/slack/blocks/limits.ts); `chat.postMessage` to a user id (`U…`) posts in the bot's
 * direct-message channel with that user (`D…`, as Slack does), which `conversations.open` (`users`) names;
 * `conversations.replies` (a thread, parent first, `oldest`, metadata with `include_all_metadata`). A `blocks` value that is not a JSON array gets
 * `invalid_blocks_format`. Other methods answer `unknown_method`.
 *
 * Strictness beyond Slack (to catch bot mistakes): `thread_ts` must name a message of that channel
 * (`thread_not_found`).
 *
 * ## response_url (`POST /response/<id>`)
 * {@link FakeSlack.responseUrl} mints a URL for a slash command or action payload. A JSON body
 * `{text, blocks, response_type?, replace_original?, delete_original?, thread_ts?}` becomes an ephemeral to the user
 * (default; in the thread of the message acted on when that is a reply), an in-channel message
 * (`response_type: 'in_channel'`), or replaces/deletes the original message.
 * Each URL takes at most 5 responses (the documented limit), then answers 404 `used_url`.
 *
 * ## State and events
 * Channels → top-level messages (each with its edit history and thread replies) and ephemerals, all in memory.
 * Every change emits a {@link FakeSlackChange} (`fake.on('change', …)`), e.g. for a sandbox page to show live.
 */
import { ErrorCode, TokenwatchError } from '../../errors.js';
import { createHmac } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { LIMITS, validateBlocks, validateHomeView, validateView } from '../../slack/blocks/limits.js';

/** The identity behind a bot token (what `auth.test` answers). */
export interface FakeBotIdentity {
  teamId: string;
  team: string;
  userId: string;
  user: string;
  botId: string;
}

/** A configured channel. */
export interface FakeChannelInput {
  id: string;
  name?: string;
  /** Whether the bot is a member (default true). When false, posting answers `not_in_channel`. */
  botIsMember?: boolean;
  /** Human members; when given, ephemerals to anyone else answer `user_not_in_channel`. */
  members?: string[];
  isPrivate?: boolean;
}

/** A configured user. */
export interface FakeUserInput {
  id: string;
  name: string;
  realName?: string;
  isBot?: boolean;
  tz?: string;
}

/** Options of {@link startFakeSlack}. */
export interface FakeSlackOptions {
  /** Accepted tokens and their identities. Default: `{ 'xoxb-test-token': DEFAULT_BOT }`. */
  tokens?: Record<string, Partial<FakeBotIdentity>>;
  channels?: FakeChannelInput[];
  /** Create unknown channels on first post, with the bot as a member (default true). When false → `channel_not_found`. */
  autoCreateChannels?: boolean;
  users?: FakeUserInput[];
  /** User-group id (`S…`) → member user ids. */
  userGroups?: Record<string, string[]>;
  /** Clock for `ts` values and records, epoch ms (default `Date.now`). */
  now?: () => number;
  /**
   * The bot token's scopes, sent as the `x-oauth-scopes` header of every Web API answer, as Slack does
   * (docs.slack.dev/authentication/tokens: "x-oauth-scopes"). Default: the scopes of manifests/slack-app.yaml.
   */
  scopes?: string[];
}

/** The bot scopes of manifests/slack-app.yaml: the fake's default `x-oauth-scopes`. */
export const MANIFEST_SCOPES: readonly string[] = ['channels:history', 'chat:write', 'commands', 'groups:history', 'im:history', 'im:write', 'usergroups:read'];

/** An edit of a message (its content before the edit and when it was replaced). */
export interface FakeEdit {
  at: number;
  text: string;
  blocks: unknown[] | undefined;
}

/** A message in a channel (top level or a thread reply). */
export interface FakeMessage {
  channel: string;
  ts: string;
  /** Parent ts for thread replies. */
  threadTs?: string;
  /** Posting user: the bot's user id for bot messages. */
  user: string;
  botId?: string;
  text: string;
  blocks: unknown[] | undefined;
  /** Previous versions, oldest first. */
  edits: FakeEdit[];
  /** Thread replies (top-level messages only), oldest first. */
  replies: FakeMessage[];
  deleted?: boolean;
  postedAt: number;
  /** Message metadata given to chat.postMessage (`{ event_type, event_payload }`). */
  metadata?: { event_type: string; event_payload: Record<string, unknown> };
}

/** An ephemeral message (visible only to `user`). */
export interface FakeEphemeral {
  channel: string;
  user: string;
  text: string;
  blocks: unknown[] | undefined;
  messageTs: string;
  threadTs?: string;
  /** `api` = chat.postEphemeral, `response_url` = a response to a slash command or action. */
  via: 'api' | 'response_url';
  at: number;
}

/** One Web API call the fake received. */
export interface FakeCall {
  method: string;
  args: Record<string, unknown>;
  /** Token used (bearer or `token` field). */
  token: string | undefined;
  status: number;
  response: Record<string, unknown>;
  at: number;
  headers: IncomingHttpHeaders;
}

/** A change of the fake's state. */
export type FakeSlackChange =
  | { type: 'message'; message: FakeMessage }
  | { type: 'update'; message: FakeMessage }
  | { type: 'delete'; message: FakeMessage }
  | { type: 'ephemeral'; ephemeral: FakeEphemeral }
  | { type: 'call'; call: FakeCall }
  | { type: 'home'; home: FakeHomeView };

/** A response_url's binding. */
export interface ResponseTarget {
  channel: string;
  user: string;
  /** The message the action was on (for `replace_original` / `delete_original`). */
  messageTs?: string;
}

/** The running fake. */
export interface FakeSlack {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** `http://127.0.0.1:<port>/api/` (for `slackApiUrl`). */
  apiUrl: string;
  port: number;
  /** Every Web API call, in order. */
  calls: FakeCall[];
  callsTo(method: string): FakeCall[];
  /** Modals opened with `views.open`, oldest first (the parsed `view` plus the `trigger_id` and the id given). */
  views(): FakeView[];
  /** The Home tab view last published to `user` with `views.publish`, or undefined. */
  homeView(user: string): FakeHomeView | undefined;
  /** Every user's current Home tab view. */
  homeViews(): FakeHomeView[];
  /** Top-level messages of a channel (id or `#name`), oldest first, deleted ones excluded. */
  messages(channel: string): FakeMessage[];
  /** Thread replies of a message, oldest first. */
  thread(channel: string, ts: string): FakeMessage[];
  /** A message (top level or reply) by ts. */
  message(channel: string, ts: string): FakeMessage | undefined;
  /** Ephemerals, optionally those for one user and/or channel. */
  ephemerals(filter?: { user?: string; channel?: string }): FakeEphemeral[];
  /** Every channel with its info, for a UI. */
  channels(): Array<{ id: string; name: string; botIsMember: boolean; members?: string[] }>;
  /** JSON-safe snapshot of all state. */
  snapshot(): { channels: Array<{ id: string; name: string; botIsMember: boolean; messages: FakeMessage[] }>; ephemerals: FakeEphemeral[] };
  /** The next `times` calls to `method` get HTTP 429 with `Retry-After: seconds`. */
  rateLimitNext(method: string, seconds: number, times?: number): void;
  /**
   * The next `times` calls to `method` answer `{ok:false, error}` (e.g. `channel_not_found`); with `when`, only calls
   * whose arguments it accepts count (e.g. the `chat.update` that carries a given text).
   */
  failNext(method: string, error: string, times?: number, when?: (args: Record<string, unknown>) => boolean): void;
  addChannel(channel: FakeChannelInput): void;
  setBotMembership(channel: string, isMember: boolean): void;
  addUser(user: FakeUserInput): void;
  setUserGroup(groupId: string, members: string[]): void;
  /** A message by a human (the bot cannot chat.update it). */
  postAsUser(channel: string, user: string, text: string): FakeMessage;
  /** A response_url bound to a channel/user/message, for slash command and action payloads. */
  responseUrl(target: ResponseTarget): string;
  /** Subscribe to changes; returns an unsubscribe function. */
  on(event: 'change', listener: (change: FakeSlackChange) => void): () => void;
  close(): Promise<void>;
}

/** A modal opened with `views.open`. */
export interface FakeView {
  id: string;
  triggerId: string;
  view: { type: string; callback_id?: string; private_metadata?: string; title?: unknown; blocks?: unknown[] } & Record<string, unknown>;
}

/** A Home tab view published with `views.publish`. */
export interface FakeHomeView {
  id: string;
  user: string;
  view: { type: 'home'; blocks: unknown[] } & Record<string, unknown>;
  /** How many times a view was published to this user. */
  publishes: number;
}

/** Identity of the default token `xoxb-test-token`. */
export const DEFAULT_BOT: FakeBotIdentity = {
  teamId: 'T0FAKE0001',
  team: 'fake-workspace',
  userId: 'U0BOT00001',
  user: 'tokenwatch',
  botId: 'B0BOT00001',
};

/**
 * The token accepted when no `tokens` option is given.
 * @internal Exported for the tests that drive the fake with its default token (exempt from the production knip pass).
 */
export const DEFAULT_BOT_TOKEN = 'xoxb-test-token';

interface ChannelState {
  id: string;
  name: string;
  botIsMember: boolean;
  members?: string[];
  isPrivate: boolean;
  created: number;
  messages: FakeMessage[];
}

type Json = Record<string, unknown>;

/** Fields Slack sends JSON-encoded inside form bodies. */
const JSON_FIELDS = ['blocks', 'attachments', 'metadata'];

/** A Slack user id (`U…`, or `W…` on Enterprise Grid). */
const USER_ID = /^[UW][A-Z0-9]{2,}$/;

/** Starts the fake on 127.0.0.1, port 0 (an ephemeral port). */
export async function startFakeSlack(opts: FakeSlackOptions = {}): Promise<FakeSlack> {
  const now = opts.now ?? Date.now;
  const tokens = new Map<string, FakeBotIdentity>();
  for (const [tok, id] of Object.entries(opts.tokens ?? { [DEFAULT_BOT_TOKEN]: DEFAULT_BOT })) {
    tokens.set(tok, { ...DEFAULT_BOT, ...id });
  }
  const autoCreate = opts.autoCreateChannels ?? true;
  const scopes = opts.scopes ?? MANIFEST_SCOPES;
  const channels = new Map<string, ChannelState>();
  const users = new Map<string, FakeUserInput>();
  const groups = new Map<string, string[]>(Object.entries(opts.userGroups ?? {}));
  const ephemerals: FakeEphemeral[] = [];
  const calls: FakeCall[] = [];
  const openedViews: FakeView[] = [];
  const homeViews = new Map<string, FakeHomeView>();
  const rateLimits = new Map<string, Array<number>>();
  const failures = new Map<string, Array<{ error: string; when?: (args: Record<string, unknown>) => boolean }>>();
  const responseUrls = new Map<string, ResponseTarget & { uses: number }>();
  const emitter = new EventEmitter();
  emitter.setMaxListeners(0);
  let lastTsMicros = 0;
  let responseSeq = 0;

  const emit = (c: FakeSlackChange): void => {
    emitter.emit('change', c);
  };

  const addChannel = (c: FakeChannelInput): ChannelState => {
    const st: ChannelState = {
      id: c.id,
      name: c.name ?? c.id.toLowerCase(),
      botIsMember: c.botIsMember ?? true,
      isPrivate: c.isPrivate ?? false,
      created: Math.floor(now() / 1000),
      messages: [],
      ...(c.members ? { members: [...c.members] } : {}),
    };
    channels.set(c.id, st);
    return st;
  };
  for (const c of opts.channels ?? []) addChannel(c);
  for (const u of opts.users ?? []) users.set(u.id, u);

  const findChannel = (idOrName: string): ChannelState | undefined => {
    if (channels.has(idOrName)) return channels.get(idOrName);
    const name = idOrName.replace(/^#/, '');
    for (const c of channels.values()) if (c.name === name) return c;
    return undefined;
  };

  const nextTs = (): string => {
    let micros = now() * 1000;
    if (micros <= lastTsMicros) micros = lastTsMicros + 1;
    lastTsMicros = micros;
    const sec = Math.floor(micros / 1e6);
    return `${sec}.${String(micros % 1e6).padStart(6, '0')}`;
  };

  /** Adds a bot message to a channel (or to `parent`'s thread) and emits the change. */
  const postBotMessage = (
    ch: ChannelState,
    bot: { userId: string; botId: string },
    text: string,
    blocks: unknown[] | undefined,
    parent: FakeMessage | undefined,
    metadata?: FakeMessage['metadata'],
  ): FakeMessage => {
    const msg: FakeMessage = {
      ...(metadata ? { metadata } : {}),
      channel: ch.id,
      ts: nextTs(),
      user: bot.userId,
      botId: bot.botId,
      text,
      blocks,
      edits: [],
      replies: [],
      postedAt: now(),
      ...(parent ? { threadTs: parent.ts } : {}),
    };
    if (parent) parent.replies.push(msg);
    else ch.messages.push(msg);
    emit({ type: 'message', message: msg });
    return msg;
  };

  /** The bot's direct-message channel with `user` (`D` + the user id's tail), created at first use. */
  const dmChannel = (user: string): ChannelState => findChannel(`D${user.slice(1)}`) ?? addChannel({ id: `D${user.slice(1)}`, name: `dm-${user.toLowerCase()}`, isPrivate: true });

  const findMessage = (ch: ChannelState, ts: string): FakeMessage | undefined => {
    for (const m of ch.messages) {
      if (m.ts === ts) return m;
      const r = m.replies.find((x) => x.ts === ts);
      if (r) return r;
    }
    return undefined;
  };
  /** Message `ts` (not deleted) of channel `chId`, or the error Slack answers: `channel_not_found`, `message_not_found`. */
  const messageAt = (chId: string | undefined, ts: string | undefined): { ch: ChannelState; msg: FakeMessage } | { ok: false; error: string } => {
    const ch = chId ? findChannel(chId) : undefined;
    if (!ch) return { ok: false, error: 'channel_not_found' };
    const msg = ts ? findMessage(ch, ts) : undefined;
    if (!msg || msg.deleted) return { ok: false, error: 'message_not_found' };
    return { ch, msg };
  };

  const messageJson = (m: FakeMessage, teamId: string): Json => ({
    type: 'message',
    ...(m.botId ? { subtype: 'bot_message', bot_id: m.botId } : {}),
    text: m.text,
    user: m.user,
    ts: m.ts,
    team: teamId,
    ...(m.blocks ? { blocks: m.blocks } : {}),
    ...(m.threadTs ? { thread_ts: m.threadTs } : {}),
    ...(m.edits.length ? { edited: { user: m.user, ts: m.ts } } : {}),
  });

  /** Parses `blocks`: undefined when absent, an error code when malformed or invalid. */
  const parseBlocks = (args: Json): { blocks?: unknown[]; error?: Json } => {
    const raw = args.blocks;
    if (raw === undefined || raw === '') return {};
    let b: unknown = raw;
    if (typeof raw === 'string') {
      try {
        b = JSON.parse(raw);
      } catch {
        return { error: { ok: false, error: 'invalid_blocks_format' } };
      }
    }
    if (!Array.isArray(b)) return { error: { ok: false, error: 'invalid_blocks_format' } };
    const errs = validateBlocks(b);
    if (errs.length) {
      return { error: { ok: false, error: 'invalid_blocks', errors: errs, response_metadata: { messages: errs.map((e) => `[ERROR] ${e}`) } } };
    }
    return { blocks: b };
  };

  const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : typeof v === 'number' ? String(v) : undefined);

  // ---- Web API methods -------------------------------------------------------------------------------------------
  type Handler = (args: Json, bot: FakeBotIdentity) => Json;
  const methods: Record<string, Handler> = {
    'auth.test': (_a, bot) => ({
      ok: true,
      url: `https://${bot.team}.slack.com/`,
      team: bot.team,
      user: bot.user,
      team_id: bot.teamId,
      user_id: bot.userId,
      bot_id: bot.botId,
      is_enterprise_install: false,
    }),

    'chat.postMessage': (args, bot) => {
      const to = str(args.channel);
      if (!to) return { ok: false, error: 'channel_not_found' };
      // A user id as the channel: the message goes to the bot's direct-message channel with that user (`D…`).
      const chId = USER_ID.test(to) ? dmChannel(to).id : to;
      let ch = findChannel(chId);
      if (!ch) {
        if (!autoCreate || chId.startsWith('#')) return { ok: false, error: 'channel_not_found' };
        ch = addChannel({ id: chId });
      }
      if (!ch.botIsMember) return { ok: false, error: 'not_in_channel' };
      const text = str(args.text) ?? '';
      const pb = parseBlocks(args);
      if (pb.error) return pb.error;
      if (text === '' && !pb.blocks) return { ok: false, error: 'no_text' };
      const threadTs = str(args.thread_ts);
      let parent: FakeMessage | undefined;
      if (threadTs) {
        const target = findMessage(ch, threadTs);
        if (!target || target.deleted) return { ok: false, error: 'thread_not_found' };
        parent = target.threadTs ? ch.messages.find((m) => m.ts === target.threadTs) : target;
      }
      let metadata: FakeMessage['metadata'];
      if (args.metadata !== undefined) {
        try {
          metadata = (typeof args.metadata === 'string' ? JSON.parse(args.metadata) : args.metadata) as FakeMessage['metadata'];
        } catch {
          return { ok: false, error: 'invalid_metadata_format' };
        }
        if (!metadata || typeof metadata.event_type !== 'string' || typeof metadata.event_payload !== 'object') return { ok: false, error: 'invalid_metadata_schema' };
      }
      const msg = postBotMessage(ch, bot, text, pb.blocks, parent, metadata);
      return { ok: true, channel: ch.id, ts: msg.ts, message: messageJson(msg, bot.teamId) };
    },

    'chat.update': (args, bot) => {
      const at = messageAt(str(args.channel), str(args.ts));
      if ('error' in at) return at;
      const { ch, msg } = at;
      if (msg.user !== bot.userId) return { ok: false, error: 'cant_update_message' };
      const pb = parseBlocks(args);
      if (pb.error) return pb.error;
      const text = str(args.text);
      if ((text === undefined || text === '') && !pb.blocks) return { ok: false, error: 'no_text' };
      msg.edits.push({ at: now(), text: msg.text, blocks: msg.blocks });
      if (text !== undefined) msg.text = text;
      if (pb.blocks) msg.blocks = pb.blocks;
      emit({ type: 'update', message: msg });
      return { ok: true, channel: ch.id, ts: msg.ts, text: msg.text, message: messageJson(msg, bot.teamId) };
    },

    // https://api.slack.com/methods/conversations.open: `users` (one user id) → the bot's direct-message channel with
    // that user (scope im:write), the same id every time.
    'conversations.open': (args) => {
      const user = str(args.users);
      if (!user || !USER_ID.test(user)) return { ok: false, error: 'user_not_found' };
      return { ok: true, channel: { id: dmChannel(user).id } };
    },

    // https://api.slack.com/methods/conversations.replies: the parent message `ts` and its replies, oldest first,
    // after `oldest` (exclusive; the parent is always first); `metadata` only with `include_all_metadata`.
    'conversations.replies': (args, bot) => {
      const id = str(args.channel);
      const ch = id ? findChannel(id) : undefined;
      if (!ch) return { ok: false, error: 'channel_not_found' };
      if (!ch.botIsMember) return { ok: false, error: 'not_in_channel' };
      const ts = str(args.ts);
      const parent = ts ? ch.messages.find((m) => m.ts === ts && !m.deleted) : undefined;
      if (!parent) return { ok: false, error: 'thread_not_found' };
      const oldest = Number(str(args.oldest) ?? '0');
      const withMeta = args.include_all_metadata === true || args.include_all_metadata === 'true';
      const json = (m: FakeMessage) => ({ ...messageJson(m, bot.teamId), ...(withMeta && m.metadata ? { metadata: m.metadata } : {}) });
      return { ok: true, messages: [json(parent), ...parent.replies.filter((m) => !m.deleted && Number(m.ts) > oldest).map(json)], has_more: false };
    },

    // https://api.slack.com/methods/conversations.history: top-level messages of a channel, newest first, between
    // `oldest` and `latest` (exclusive, seconds as strings), at most `limit` (default 100); `metadata` only with
    // `include_all_metadata`. The bot must be a member (`not_in_channel`; `channel_not_found` for a private channel).
    'conversations.history': (args, bot) => {
      const id = str(args.channel);
      // An undeclared channel exists (bot a member) when channels are created on first use, as on a first post.
      const ch = id ? (findChannel(id) ?? (autoCreate && !id.startsWith('#') && !USER_ID.test(id) ? addChannel({ id }) : undefined)) : undefined;
      if (!ch) return { ok: false, error: 'channel_not_found' };
      // A private channel the bot is not in does not exist for it.
      if (!ch.botIsMember) return { ok: false, error: ch.isPrivate ? 'channel_not_found' : 'not_in_channel' };
      const oldest = Number(str(args.oldest) ?? '0');
      const latest = Number(str(args.latest) ?? 'Infinity');
      const limit = Number(str(args.limit) ?? '100');
      const withMeta = args.include_all_metadata === true || args.include_all_metadata === 'true';
      const msgs = ch.messages
        .filter((m) => !m.threadTs && !m.deleted && Number(m.ts) > oldest && Number(m.ts) < latest)
        .reverse()
        .slice(0, limit);
      return {
        ok: true,
        messages: msgs.map((m) => ({ ...messageJson(m, bot.teamId), ...(withMeta && m.metadata ? { metadata: m.metadata } : {}) })),
        has_more: false,
      };
    },

    // https://api.slack.com/methods/views.open: `trigger_id` (from an interaction) and a `view` (JSON) of type modal
    // with a title and blocks; errors `invalid_arguments` / `invalid_trigger_id`.
    'views.open': (args) => {
      const trigger = str(args.trigger_id);
      if (!trigger) return { ok: false, error: 'invalid_trigger_id' };
      let view: FakeView['view'] | undefined;
      try {
        view = (typeof args.view === 'string' ? JSON.parse(args.view) : args.view) as FakeView['view'];
      } catch {
        return { ok: false, error: 'invalid_arguments' };
      }
      if (view?.type !== 'modal' || !view.title || !Array.isArray(view.blocks)) return { ok: false, error: 'invalid_arguments' };
      // Slack's modal limits (title/submit/close ≤ 24 chars, ≤ 100 blocks, each block's own limits): `validateView`.
      const viewErrors = validateView(view);
      if (viewErrors.length) return { ok: false, error: 'invalid_arguments', response_metadata: { messages: viewErrors } };
      const v: FakeView = { id: `V${String(openedViews.length + 1).padStart(9, '0')}`, triggerId: trigger, view };
      openedViews.push(v);
      return { ok: true, view: { id: v.id, ...view, state: { values: {} } } };
    },

    // https://docs.slack.dev/reference/methods/views.publish: `user_id` and a `view` (JSON) of type home with at most
    // 100 blocks (docs.slack.dev/reference/views/home-tab-views); a malformed one answers `invalid_arguments` with
    // the violations (Slack words them "[ERROR] no more than 100 items allowed [json-pointer:/view/blocks]"); a view
    // over 250 kB answers `view_too_large`.
    'views.publish': (args) => {
      const user = str(args.user_id);
      if (!user || !/^[UW][A-Z0-9]{2,}$/.test(user)) return { ok: false, error: 'invalid_arguments', response_metadata: { messages: ['[ERROR] missing or invalid user_id [json-pointer:/user_id]'] } };
      const raw = typeof args.view === 'string' ? args.view : JSON.stringify(args.view ?? null);
      if (raw.length > 250_000) return { ok: false, error: 'view_too_large' };
      let view: FakeHomeView['view'] | undefined;
      try {
        view = JSON.parse(raw) as FakeHomeView['view'];
      } catch {
        return { ok: false, error: 'invalid_arguments', response_metadata: { messages: ['[ERROR] must provide an object [json-pointer:/view]'] } };
      }
      const errors = validateHomeView(view);
      if (errors.length) {
        const messages = errors.map((e) => (e.startsWith('/view/blocks: ') && /blocks > /.test(e) ? `[ERROR] no more than ${LIMITS.viewBlocks} items allowed [json-pointer:/view/blocks]` : `[ERROR] ${e}`));
        return { ok: false, error: 'invalid_arguments', response_metadata: { messages } };
      }
      const before = homeViews.get(user);
      const h: FakeHomeView = { id: before?.id ?? `VH${String(homeViews.size + 1).padStart(8, '0')}`, user, view: view!, publishes: (before?.publishes ?? 0) + 1 };
      homeViews.set(user, h);
      emit({ type: 'home', home: h });
      return { ok: true, view: { id: h.id, team_id: DEFAULT_BOT.teamId, ...view, state: { values: {} }, hash: `${Math.floor(now() / 1000)}.${h.publishes}` } };
    },

    // https://api.slack.com/methods/chat.getPermalink: no scope needed; `permalink` of a message in a channel.
    'chat.getPermalink': (args, bot) => {
      const at = messageAt(str(args.channel), str(args.message_ts));
      if ('error' in at) return at;
      const { ch, msg } = at;
      const thread = msg.threadTs ? `?thread_ts=${msg.threadTs}&cid=${ch.id}` : '';
      return { ok: true, channel: ch.id, permalink: `https://${bot.team}.slack.com/archives/${ch.id}/p${msg.ts.replace('.', '')}${thread}` };
    },

    'chat.postEphemeral': (args) => {
      const chId = str(args.channel);
      const user = str(args.user);
      const ch = chId ? findChannel(chId) : undefined;
      if (!ch) return { ok: false, error: 'channel_not_found' };
      if (!user) return { ok: false, error: 'user_not_found' };
      if (!ch.botIsMember) return { ok: false, error: 'not_in_channel' };
      if (ch.members && !ch.members.includes(user)) return { ok: false, error: 'user_not_in_channel' };
      const text = str(args.text) ?? '';
      const pb = parseBlocks(args);
      if (pb.error) return pb.error;
      if (text === '' && !pb.blocks) return { ok: false, error: 'no_text' };
      const threadTs = str(args.thread_ts);
      const e: FakeEphemeral = {
        channel: ch.id,
        user,
        text,
        blocks: pb.blocks,
        messageTs: nextTs(),
        via: 'api',
        at: now(),
        ...(threadTs ? { threadTs } : {}),
      };
      ephemerals.push(e);
      emit({ type: 'ephemeral', ephemeral: e });
      return { ok: true, message_ts: e.messageTs };
    },

    'usergroups.users.list': (args) => {
      const g = str(args.usergroup);
      const members = g ? groups.get(g) : undefined;
      if (!members) return { ok: false, error: 'no_such_subteam' };
      return { ok: true, users: [...members] };
    },

    'users.info': (args, bot) => {
      const id = str(args.user);
      const u = id ? users.get(id) : undefined;
      if (!u) return { ok: false, error: 'user_not_found' };
      return {
        ok: true,
        user: {
          id: u.id,
          team_id: bot.teamId,
          name: u.name,
          real_name: u.realName ?? u.name,
          deleted: false,
          is_bot: u.isBot ?? false,
          tz: u.tz ?? 'UTC',
          profile: { real_name: u.realName ?? u.name, display_name: u.name },
        },
      };
    },

    'conversations.info': (args) => {
      const id = str(args.channel);
      const ch = id ? findChannel(id) : undefined;
      if (!ch) return { ok: false, error: 'channel_not_found' };
      return {
        ok: true,
        channel: {
          id: ch.id,
          name: ch.name,
          is_channel: !ch.isPrivate,
          is_group: ch.isPrivate,
          is_private: ch.isPrivate,
          is_archived: false,
          is_member: ch.botIsMember,
          created: ch.created,
        },
      };
    },
  };

  // ---- HTTP plumbing ----------------------------------------------------------------------------------------------
  const readBody = (req: IncomingMessage): Promise<string> =>
    new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      req.on('error', reject);
    });

  const parseArgs = (req: IncomingMessage, body: string, query: URLSearchParams): Json => {
    const args: Json = {};
    for (const [k, v] of query) args[k] = v;
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (type === 'application/json' && body.trim() !== '') {
      const parsed: unknown = JSON.parse(body);
      if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) Object.assign(args, parsed);
    } else if (body !== '') {
      for (const [k, v] of new URLSearchParams(body)) args[k] = v;
    }
    for (const f of JSON_FIELDS) {
      const v = args[f];
      if (typeof v !== 'string' || f === 'blocks') continue; // blocks are parsed (and judged) per method
      try {
        args[f] = JSON.parse(v);
      } catch {
        /* keep the string */
      }
    }
    return args;
  };

  const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void => {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), ...headers });
    res.end(text);
  };

  const handleApi = async (req: IncomingMessage, res: ServerResponse, method: string, query: URLSearchParams): Promise<void> => {
    const body = await readBody(req);
    let args: Json;
    try {
      args = parseArgs(req, body, query);
    } catch {
      return send(res, 200, { ok: false, error: 'invalid_json' });
    }
    const auth = req.headers.authorization;
    const bearer = auth?.startsWith('Bearer ') ? auth.slice(7).trim() : undefined;
    const token = bearer ?? str(args.token);
    const record = (status: number, response: Json): void => {
      const { token: _omit, ...shown } = args;
      const call: FakeCall = { method, args: shown, token, status, response, at: now(), headers: req.headers };
      calls.push(call);
      emit({ type: 'call', call });
    };
    const limited = rateLimits.get(method);
    if (limited?.length) {
      const seconds = limited.shift()!;
      const response = { ok: false, error: 'ratelimited' };
      record(429, response);
      return send(res, 429, response, { 'retry-after': String(seconds) });
    }
    let response: Json;
    if (!token) response = { ok: false, error: 'not_authed' };
    else if (!tokens.has(token)) response = { ok: false, error: 'invalid_auth' };
    else {
      const failing = failures.get(method) ?? [];
      const handler = methods[method];
      const hit = failing.findIndex((f) => !f.when || f.when(args));
      if (hit >= 0) response = { ok: false, error: failing.splice(hit, 1)[0]!.error };
      else if (!handler) response = { ok: false, error: 'unknown_method' };
      else response = handler(args, tokens.get(token)!);
    }
    record(200, response);
    send(res, 200, response, token && tokens.has(token) ? { 'x-oauth-scopes': scopes.join(',') } : {});
  };

  const handleResponseUrl = async (req: IncomingMessage, res: ServerResponse, id: string): Promise<void> => {
    const body = await readBody(req);
    const target = responseUrls.get(id);
    if (!target) return send(res, 404, { ok: false, error: 'expired_url' });
    if (target.uses >= 5) return send(res, 404, { ok: false, error: 'used_url' });
    let args: Json;
    try {
      const parsed: unknown = JSON.parse(body);
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, 'not an object');
      args = parsed as Json;
    } catch {
      return send(res, 400, { ok: false, error: 'invalid_payload' });
    }
    target.uses++;
    const ch = findChannel(target.channel) ?? addChannel({ id: target.channel });
    const pb = parseBlocks(args);
    if (pb.error) return send(res, 400, pb.error);
    const text = str(args.text) ?? '';
    const bot = [...tokens.values()][0]!;
    if (args.delete_original === true && target.messageTs) {
      const m = findMessage(ch, target.messageTs);
      if (!m) return send(res, 404, { ok: false, error: 'message_not_found' });
      m.deleted = true;
      emit({ type: 'delete', message: m });
      return send(res, 200, { ok: true });
    }
    if (args.replace_original === true && target.messageTs) {
      const m = findMessage(ch, target.messageTs);
      if (!m) return send(res, 404, { ok: false, error: 'message_not_found' });
      m.edits.push({ at: now(), text: m.text, blocks: m.blocks });
      m.text = text;
      m.blocks = pb.blocks;
      emit({ type: 'update', message: m });
      return send(res, 200, { ok: true });
    }
    if (text === '' && !pb.blocks) return send(res, 400, { ok: false, error: 'no_text' });
    if (args.response_type === 'in_channel') {
      const threadTs = str(args.thread_ts);
      const parent = threadTs ? ch.messages.find((m) => m.ts === threadTs) : undefined;
      postBotMessage(ch, bot, text, pb.blocks, parent);
      return send(res, 200, { ok: true });
    }
    // An action's ephemeral response shows where the clicked message is: in its thread when it is a reply.
    const clicked = target.messageTs ? findMessage(ch, target.messageTs) : undefined;
    const e: FakeEphemeral = { channel: ch.id, user: target.user, text, blocks: pb.blocks, messageTs: nextTs(), ...(clicked?.threadTs ? { threadTs: clicked.threadTs } : {}), via: 'response_url', at: now() };
    ephemerals.push(e);
    emit({ type: 'ephemeral', ephemeral: e });
    send(res, 200, { ok: true });
  };

  const server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://127.0.0.1');
    const api = /^\/api\/([A-Za-z0-9_.]+)$/.exec(u.pathname);
    const resp = /^\/response\/([A-Za-z0-9_-]+)$/.exec(u.pathname);
    const done = (p: Promise<void>): void => {
      p.catch((err: unknown) => {
        if (!res.headersSent) send(res, 500, { ok: false, error: 'fatal_error', detail: String(err) });
      });
    };
    if (req.method === 'POST' && api) return done(handleApi(req, res, api[1]!, u.searchParams));
    if (req.method === 'GET' && api) return done(handleApi(req, res, api[1]!, u.searchParams));
    if (req.method === 'POST' && resp) return done(handleResponseUrl(req, res, resp[1]!));
    send(res, 404, { ok: false, error: 'not_found' });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}`;

  const requireChannel = (idOrName: string): ChannelState => {
    const ch = findChannel(idOrName);
    if (!ch) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, `fake Slack: unknown channel ${idOrName}`);
    return ch;
  };

  return {
    url,
    apiUrl: `${url}/api/`,
    port,
    calls,
    callsTo: (method) => calls.filter((c) => c.method === method),
    views: () => [...openedViews],
    homeView: (user) => homeViews.get(user),
    homeViews: () => [...homeViews.values()],
    messages: (channel) => (findChannel(channel)?.messages ?? []).filter((m) => !m.deleted),
    thread: (channel, ts) => (findChannel(channel)?.messages.find((m) => m.ts === ts)?.replies ?? []).filter((m) => !m.deleted),
    message: (channel, ts) => {
      const ch = findChannel(channel);
      return ch ? findMessage(ch, ts) : undefined;
    },
    ephemerals: (filter = {}) =>
      ephemerals.filter(
        (e) => (filter.user === undefined || e.user === filter.user) && (filter.channel === undefined || e.channel === (findChannel(filter.channel)?.id ?? filter.channel)),
      ),
    channels: () =>
      [...channels.values()].map((c) => ({ id: c.id, name: c.name, botIsMember: c.botIsMember, ...(c.members ? { members: [...c.members] } : {}) })),
    snapshot: () =>
      structuredClone({
        channels: [...channels.values()].map((c) => ({ id: c.id, name: c.name, botIsMember: c.botIsMember, messages: c.messages.filter((m) => !m.deleted) })),
        ephemerals,
      }),
    rateLimitNext: (method, seconds, times = 1) => {
      const q = rateLimits.get(method) ?? [];
      for (let i = 0; i < times; i++) q.push(seconds);
      rateLimits.set(method, q);
    },
    failNext: (method, error, times = 1, when) => {
      const q = failures.get(method) ?? [];
      for (let i = 0; i < times; i++) q.push(when ? { error, when } : { error });
      failures.set(method, q);
    },
    addChannel: (c) => {
      addChannel(c);
    },
    setBotMembership: (channel, isMember) => {
      requireChannel(channel).botIsMember = isMember;
    },
    addUser: (u) => {
      users.set(u.id, u);
    },
    setUserGroup: (g, members) => {
      groups.set(g, [...members]);
    },
    postAsUser: (channel, user, text) => {
      const ch = findChannel(channel) ?? addChannel({ id: channel });
      const msg: FakeMessage = { channel: ch.id, ts: nextTs(), user, text, blocks: undefined, edits: [], replies: [], postedAt: now() };
      ch.messages.push(msg);
      emit({ type: 'message', message: msg });
      return msg;
    },
    responseUrl: (target) => {
      const id = `r${++responseSeq}${Math.random().toString(36).slice(2, 10)}`;
      responseUrls.set(id, { ...target, uses: 0 });
      return `${url}/response/${id}`;
    },
    on: (_event, listener) => {
      emitter.on('change', listener);
      return () => {
        emitter.off('change', listener);
      };
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}

// ---- Sending requests to a bot as Slack would ------------------------------------------------------------------------

/**
 * Slack request-signing headers for `body` (docs "Verifying requests from Slack"; bolt-js
 * `src/receivers/verify-request.ts`): `x-slack-signature: v0=<hex HMAC-SHA256 of "v0:<ts>:<body>">` and
 * `x-slack-request-timestamp: <ts>` (epoch **seconds**; Bolt rejects timestamps older than 5 minutes).
 */
export function signSlackRequest(secret: string, body: string, timestampSec: number): { 'x-slack-signature': string; 'x-slack-request-timestamp': string } {
  const hex = createHmac('sha256', secret).update(`v0:${timestampSec}:${body}`).digest('hex');
  return { 'x-slack-signature': `v0=${hex}`, 'x-slack-request-timestamp': String(timestampSec) };
}

/** A bot's answer to a request sent with {@link sendSlashCommand} / {@link sendBlockAction}. */
export interface SendResult {
  status: number;
  body: string;
  headers: Headers;
}

/** Options for sending: the request time (epoch seconds, default now) and a signature override (for bad-signature tests). */
export interface SendOptions {
  timestampSec?: number;
  signature?: string;
}

/** Fields of a slash command (bolt `SlashCommand`); the required ones here, the rest get defaults. */
export interface SlashCommandFields {
  command?: string;
  text: string;
  user_id: string;
  channel_id: string;
  user_name?: string;
  channel_name?: string;
  team_id?: string;
  team_domain?: string;
  response_url?: string;
  trigger_id?: string;
  api_app_id?: string;
  token?: string;
  enterprise_id?: string;
  enterprise_name?: string;
  is_enterprise_install?: string;
}

/** The complete form fields of a slash command (docs/design/stack.md §1 payload shape), defaults filled in. */
export function slashCommandBody(f: SlashCommandFields): Record<string, string> {
  const out: Record<string, string> = {
    token: f.token ?? 'fake-verification-token',
    team_id: f.team_id ?? DEFAULT_BOT.teamId,
    team_domain: f.team_domain ?? DEFAULT_BOT.team,
    channel_id: f.channel_id,
    channel_name: f.channel_name ?? f.channel_id.toLowerCase(),
    user_id: f.user_id,
    user_name: f.user_name ?? f.user_id.toLowerCase(),
    command: f.command ?? '/tokens',
    text: f.text,
    api_app_id: f.api_app_id ?? 'A0FAKEAPP1',
    is_enterprise_install: f.is_enterprise_install ?? 'false',
    response_url: f.response_url ?? 'https://hooks.slack.com/commands/T0FAKE0001/1/fake',
    trigger_id: f.trigger_id ?? `${Date.now()}.1.fake`,
  };
  if (f.enterprise_id) out.enterprise_id = f.enterprise_id;
  if (f.enterprise_name) out.enterprise_name = f.enterprise_name;
  return out;
}

/** Input of {@link blockActionPayload}: one button click. */
export interface ButtonClick {
  user: string;
  userName?: string;
  actionId: string;
  /** The button's `value` (an opaque id for tokenwatch). */
  value: string;
  blockId?: string;
  /** Button label, as Slack echoes it. */
  text?: string;
  channel: string;
  channelName?: string;
  /** ts of the message the button is on. */
  messageTs: string;
  /** The message as Slack would include it (text, blocks). */
  message?: { text?: string; blocks?: unknown[] };
  teamId?: string;
  responseUrl?: string;
  /** Whether the message was ephemeral (`container.is_ephemeral`). */
  ephemeral?: boolean;
  /**
   * An overflow-menu choice instead of a button click: the action is `{ type: 'overflow', selected_option }` and
   * `value` is ignored (docs.slack.dev/reference/interaction-payloads/block_actions-payload).
   */
  selectedOption?: { text: string; value: string };
}

/** A `block_actions` payload for a button click (bolt `BlockAction`, docs/design/stack.md §1), at `nowSec` (epoch seconds). */
export function blockActionPayload(c: ButtonClick, nowSec = Date.now() / 1000): Record<string, unknown> {
  const teamId = c.teamId ?? DEFAULT_BOT.teamId;
  const blockId = c.blockId ?? 'actions';
  const actionTs = nowSec.toFixed(6);
  return {
    type: 'block_actions',
    user: { id: c.user, username: c.userName ?? c.user.toLowerCase(), name: c.userName ?? c.user.toLowerCase(), team_id: teamId },
    api_app_id: 'A0FAKEAPP1',
    token: 'fake-verification-token',
    container: { type: 'message', message_ts: c.messageTs, channel_id: c.channel, is_ephemeral: c.ephemeral ?? false },
    trigger_id: `${Math.floor(nowSec)}.1.fake`,
    team: { id: teamId, domain: DEFAULT_BOT.team },
    enterprise: null,
    is_enterprise_install: false,
    channel: { id: c.channel, name: c.channelName ?? c.channel.toLowerCase() },
    message: { type: 'message', ts: c.messageTs, text: c.message?.text ?? '', ...(c.message?.blocks ? { blocks: c.message.blocks } : {}) },
    state: { values: {} },
    response_url: c.responseUrl ?? 'https://hooks.slack.com/actions/T0FAKE0001/1/fake',
    actions: [
      c.selectedOption
        ? {
            type: 'overflow',
            action_id: c.actionId,
            block_id: blockId,
            selected_option: { text: { type: 'plain_text', text: c.selectedOption.text, emoji: true }, value: c.selectedOption.value },
            action_ts: actionTs,
          }
        : {
            type: 'button',
            action_id: c.actionId,
            block_id: blockId,
            text: { type: 'plain_text', text: c.text ?? c.actionId, emoji: true },
            value: c.value,
            action_ts: actionTs,
          },
    ],
  };
}

async function postSigned(url: string, secret: string, body: string, opts: SendOptions): Promise<SendResult> {
  const ts = opts.timestampSec ?? Math.floor(Date.now() / 1000);
  const sig = signSlackRequest(secret, body, ts);
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      ...sig,
      ...(opts.signature !== undefined ? { 'x-slack-signature': opts.signature } : {}),
    },
    body,
  });
  return { status: res.status, body: await res.text(), headers: res.headers };
}

/**
 * POSTs a signed slash command (form-urlencoded) to a bot's HTTP receiver, e.g. `http://127.0.0.1:3000/slack/events`.
 * A wrong `secret` (or `opts.signature`) makes Bolt answer 401.
 */
export function sendSlashCommand(url: string, secret: string, fields: SlashCommandFields, opts: SendOptions = {}): Promise<SendResult> {
  return postSigned(url, secret, new URLSearchParams(slashCommandBody(fields)).toString(), opts);
}

/**
 * POSTs a signed interaction (`payload=<JSON>`, form-urlencoded) to a bot's HTTP receiver. `payload` is a full
 * payload object, e.g. from {@link blockActionPayload}.
 */
export function sendBlockAction(url: string, secret: string, payload: Record<string, unknown>, opts: SendOptions = {}): Promise<SendResult> {
  return postSigned(url, secret, new URLSearchParams({ payload: JSON.stringify(payload) }).toString(), opts);
}

/** Input of {@link appHomeOpenedBody}. */
export interface AppHomeOpened {
  user: string;
  /** `home` (the Home tab) or `messages` (the Messages tab); default `home`. */
  tab?: 'home' | 'messages';
  /** The app's DM channel with the user (default `D` + the user id without its first letter). */
  channel?: string;
  teamId?: string;
  /** Event id (default a fresh one); Slack retries carry the same id. */
  eventId?: string;
}

let eventSeq = 0;

/**
 * An Events API `event_callback` body carrying an `app_home_opened` event (docs.slack.dev/reference/events/app_home_opened;
 * envelope fields per docs.slack.dev/apis/events-api), at `nowSec` (epoch seconds). Send it over HTTP with
 * {@link sendEvent} or in a Socket Mode `events_api` envelope (`eventsApiEnvelope` of the tests' fakes).
 */
export function appHomeOpenedBody(e: AppHomeOpened, nowSec = Date.now() / 1000): Record<string, unknown> {
  const teamId = e.teamId ?? DEFAULT_BOT.teamId;
  const eventTs = nowSec.toFixed(6);
  return {
    token: 'fake-verification-token',
    team_id: teamId,
    api_app_id: 'A0FAKEAPP1',
    event: { type: 'app_home_opened', user: e.user, channel: e.channel ?? `D${e.user.slice(1)}`, tab: e.tab ?? 'home', event_ts: eventTs },
    type: 'event_callback',
    event_id: e.eventId ?? `Ev${Math.floor(nowSec)}${String(++eventSeq).padStart(4, '0')}`,
    event_time: Math.floor(nowSec),
    authorizations: [{ enterprise_id: null, team_id: teamId, user_id: DEFAULT_BOT.userId, is_bot: true, is_enterprise_install: false }],
    is_ext_shared_channel: false,
  };
}

/**
 * POSTs a signed Events API request (`content-type: application/json`, the body as JSON) to a bot's HTTP receiver,
 * as Slack delivers events to the Request URL.
 */
export async function sendEvent(url: string, secret: string, body: Record<string, unknown>, opts: SendOptions = {}): Promise<SendResult> {
  const text = JSON.stringify(body);
  const sig = signSlackRequest(secret, text, opts.timestampSec ?? Math.floor(Date.now() / 1000));
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...sig, ...(opts.signature !== undefined ? { 'x-slack-signature': opts.signature } : {}) }, body: text });
  return { status: res.status, body: await res.text(), headers: res.headers };
}
