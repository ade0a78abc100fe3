/**
 * The sandbox's local channel page and its small JSON API, on 127.0.0.1 only.
 *
 * - `GET /` the page; `GET /assets/*` its script, styles and the Block Kit renderer (`page/blockkit.ts`,
 *   compiled by `npm run build`, or transpiled at start with esbuild in a checkout without a build; nothing is downloaded).
 * - `GET /api/state?user=U…&channel=C…` one channel as the fake Slack holds it (messages with threads and edits), the
 *   ephemerals visible to that user there only, notices for that user, the sandbox clock, and the channels the page
 *   lists (the cluster's channel and those its routing rules send alerts to). Without `channel`: the first listed.
 * - `GET /api/cluster` the simulated workloads and their pods.
 * - `GET /api/events` server-sent events: `slack` (the fake Slack changed), `cluster`, `tick` (sandbox time),
 *   `notice` (a user's command failed).
 * - `POST /api/home {user}` opens the app's Home tab as that user: a signed `app_home_opened` event (Events API) to the
 *   bot, which publishes the view with `views.publish`; `GET /api/state` then carries it as `home`.
 * - `POST /api/command {user, text, channel}` a slash command, `POST /api/action {user, channel, ts, ephemeral, actionId,
 *   selected, blockId, value, text}` a button click, `POST /api/message {user, text, channel}` a plain message, each in
 *   the listed channel `channel` (default the first). Commands and clicks go
 *   to the bot's HTTP receiver as **signed Slack requests** (`src/sandbox/fakes/slack.ts` `sendSlashCommand` /
 *   `sendBlockAction`), with a `trigger_id`, a `response_url` the fake Slack serves (bound to the channel, the user
 *   and, for a message button, the message), and for clicks the `message`, `container`, `channel` and `user` Slack
 *   sends (api.slack.com/reference/interaction-payloads/block-actions-payload).
 * As Slack does, a non-empty answer to a slash command is shown to the user as an ephemeral (posted through the
 * command's `response_url`), and a failed one as "/tokens failed with the error …". The `response_url`s handed to
 * the bot are this server's `POST /response/<id>`, forwarded to the fake Slack's, so that an ephemeral answer to a
 * click in a thread is shown in that thread, as in Slack.
 *
 * POSTs with an `Origin` header other than the page's own are refused (403), so another web page cannot drive the
 * sandbox from a browser. Every request whose `Host` header is not a loopback name (`127.x.x.x`, `localhost`,
 * `[::1]`, with any port) is refused (421 Misdirected Request), which stops DNS rebinding: a page on
 * `evil.example` whose name later resolves to 127.0.0.1 still sends `Host: evil.example`.
 */
import { ErrorCode, TokenwatchError } from '../errors.js';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FakeEphemeral, FakeMessage, FakeSlack, SandboxFakes, SendResult } from './fakes/index.js';
import type { Logger } from '../observability/logger.js';

/** A person the page lets you act as. */
export interface SandboxUser {
  id: string;
  name: string;
  /** Shown next to the name, e.g. `requester`. */
  role: string;
}

/** A notice for one user (a failed command, an unknown command), epoch ms sandbox time. */
export interface Notice {
  id: number;
  user: string;
  text: string;
  at: number;
}

/**
 * Whether a `Host` header names this machine's loopback interface: `localhost`, `127.0.0.0/8` or `[::1]`, optionally
 * with a port (RFC 9110 §7.2). Anything else, or no header, is false.
 */
export function isLoopbackHost(host: string | undefined): boolean {
  if (!host) return false;
  const m = /^(\[[^\]]+\]|[^:]+)(?::(\d{1,5}))?$/.exec(host.trim().toLowerCase());
  if (!m) return false;
  const name = m[1]!;
  if (name === 'localhost' || name === '[::1]') return true;
  return /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.test(name) && name.split('.').every((p) => Number(p) <= 255);
}

/** Options of {@link startPageServer}. */
export interface PageServerOptions {
  /** Port on 127.0.0.1 (0 = any free port). */
  port: number;
  slack: FakeSlack;
  /** How requests are signed and sent to the bot (`src/sandbox/fakes/slack.ts`). */
  requests: Pick<SandboxFakes, 'sendSlashCommand' | 'sendBlockAction' | 'blockActionPayload'> & Partial<Pick<SandboxFakes, 'sendEvent' | 'appHomeOpenedBody'>>;
  /** The channel the page opens at when `channels` is not given. */
  channel: { id: string; name: string };
  /**
   * The channels the page lists, the one it opens at first (default `[channel]`); `topic` is the header's line,
   * e.g. "network team · kube-system DaemonSets of prod-eks".
   */
  channels?: Array<{ id: string; name: string; topic?: string }>;
  /** User-group handles by id (`S…` → `network-oncall`), for the page to show `<!subteam^S…>` as `@network-oncall`. */
  groups?: Record<string, string>;
  users: SandboxUser[];
  bot: { id: string; name: string };
  team: { id: string; domain: string };
  signingSecret: string;
  /** The bot's HTTP receiver (`…/slack/events`), when Slack runs. */
  eventsUrl: () => string | undefined;
  /** Sandbox time, epoch ms. */
  clock: () => number;
  speed: number;
  /** What the page shows in its header and sidebar. */
  info: Record<string, unknown>;
  /** The cluster panel's data. */
  cluster: () => unknown;
  /** Subscribe to cluster changes; returns an unsubscribe function. */
  onClusterChange: (listener: () => void) => () => void;
  /** Directory of index.html, app.js, style.css, blockkit.ts. Default: `page/` next to this module. */
  pageDir?: string;
  logger: Logger;
}

/** The running page server. */
export interface PageServer {
  url: string;
  port: number;
  /** Notices shown so far. */
  notices: Notice[];
  close(): Promise<void>;
}

/** A JSON body field as a string, or undefined. */
function field(body: Record<string, unknown>, key: string): string | undefined {
  const v = body[key];
  return typeof v === 'string' ? v : undefined;
}

/** A Slack-shaped `trigger_id` (`<digits>.<digits>.<hex>`); single-use and short-lived in real Slack. */
export function triggerId(nowMs = Date.now()): string {
  return `${Math.floor(nowMs / 1000)}${Math.floor(Math.random() * 1000)}.${Math.floor(Math.random() * 1e9)}.${randomBytes(16).toString('hex')}`;
}

function messageJson(m: FakeMessage): Record<string, unknown> {
  return {
    ts: m.ts,
    user: m.user,
    ...(m.botId ? { botId: m.botId } : {}),
    text: m.text,
    ...(m.blocks ? { blocks: m.blocks } : {}),
    ...(m.threadTs ? { threadTs: m.threadTs } : {}),
    edited: m.edits.length > 0,
    replies: m.replies.filter((r) => !r.deleted).map(messageJson),
  };
}

function ephemeralJson(e: FakeEphemeral, placedIn: ReadonlyMap<string, string>): Record<string, unknown> {
  const threadTs = e.threadTs ?? placedIn.get(e.messageTs);
  return { ts: e.messageTs, text: e.text, ...(e.blocks ? { blocks: e.blocks } : {}), ...(threadTs ? { threadTs } : {}), via: e.via };
}

/**
 * The page's static assets, keyed by URL path. `pageDir` is `page/` next to this module: `src/sandbox/page/` in a
 * checkout (run through tsx), `dist/cli/page/` in a build or an installed package (the bundle's chunks all sit in
 * `dist/cli/`), where `npm run build` compiled `blockkit.ts` to `blockkit.js` and copied the other files
 * (scripts/build.mjs). Only a checkout without a build
 * transpiles `blockkit.ts` at start, with esbuild — a devDependency that tsx brings, never needed in a package.
 * @throws when a file is missing, or when only `blockkit.ts` exists and esbuild is not installed
 */
export async function loadPageAssets(pageDir: string): Promise<Map<string, { type: string; body: string }>> {
  const assets = new Map<string, { type: string; body: string }>();
  const read = (name: string) => readFileSync(join(pageDir, name), 'utf8');
  assets.set('/', { type: 'text/html; charset=utf-8', body: read('index.html') });
  assets.set('/assets/app.js', { type: 'text/javascript; charset=utf-8', body: read('app.js') });
  assets.set('/assets/style.css', { type: 'text/css; charset=utf-8', body: read('style.css') });
  let blockkit: string;
  if (existsSync(join(pageDir, 'blockkit.js'))) {
    blockkit = read('blockkit.js');
  } else {
    const { transformSync } = await import('esbuild');
    blockkit = transformSync(read('blockkit.ts'), { loader: 'ts', format: 'esm', target: 'es2020', sourcefile: 'blockkit.ts' }).code;
  }
  assets.set('/assets/blockkit.js', { type: 'text/javascript; charset=utf-8', body: blockkit });
  return assets;
}

/** Starts the page server; see the module docstring. @throws when the port is taken (EADDRINUSE). */
export async function startPageServer(opts: PageServerOptions): Promise<PageServer> {
  const assets = await loadPageAssets(opts.pageDir ?? fileURLToPath(new URL('./page/', import.meta.url)));

  const log = opts.logger.child({ component: 'sandbox-page' });
  const { sendSlashCommand, sendBlockAction, blockActionPayload } = opts.requests;
  const users = new Map(opts.users.map((u) => [u.id, u]));
  const listed = opts.channels?.length ? opts.channels : [opts.channel];
  /** The listed channel with id (or name) `id`, else the first (an unknown id never reaches the fake Slack). */
  const channelOf = (id: string | null | undefined) => listed.find((c) => c.id === id || c.name === id) ?? listed[0]!;
  // response_urls handed to the bot go through this server, so that an ephemeral answer to a click in a thread is
  // shown in that thread, as Slack shows it (the fake Slack keeps ephemerals per channel only).
  const responseProxies = new Map<string, { url: string; user: string; threadTs?: string }>();
  const placedIn = new Map<string, string>();
  let baseUrl = '';
  const notices: Notice[] = [];
  let noticeSeq = 0;
  const streams = new Set<ServerResponse>();

  const broadcast = (event: string, data: unknown): void => {
    const text = `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
    for (const s of streams) s.write(text);
  };
  const offSlack = opts.slack.on('change', (c) => {
    if (c.type === 'call') return;
    if (c.type === 'ephemeral') broadcast('slack', { type: c.type, user: c.ephemeral.user, ts: c.ephemeral.messageTs });
    else if (c.type === 'home') broadcast('slack', { type: c.type, user: c.home.user });
    else broadcast('slack', { type: c.type, channel: c.message.channel, ts: c.message.ts, threadTs: c.message.threadTs ?? null });
  });
  let clusterTimer: NodeJS.Timeout | undefined;
  const offCluster = opts.onClusterChange(() => {
    if (clusterTimer) return;
    clusterTimer = setTimeout(() => {
      clusterTimer = undefined;
      broadcast('cluster', {});
    }, 150);
  });
  const ticker = setInterval(() => broadcast('tick', { now: opts.clock() }), 1000);

  const notify = (user: string, text: string): void => {
    const n: Notice = { id: ++noticeSeq, user, text, at: opts.clock() };
    notices.push(n);
    if (notices.length > 200) notices.shift();
    broadcast('notice', { user });
  };

  const send = (res: ServerResponse, status: number, body: unknown): void => {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' }).end(text);
  };

  const readJson = (req: IncomingMessage): Promise<Record<string, unknown>> =>
    new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (c: Buffer) => {
        size += c.length;
        if (size > 256 * 1024) {
          reject(new TokenwatchError(ErrorCode.SandboxFailed, 'request body too large'));
          req.destroy();
        } else chunks.push(c);
      });
      req.on('end', () => {
        try {
          const v: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
          resolve(typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {});
        } catch (err) {
          reject(err);
        }
      });
      req.on('error', reject);
    });

  const state = (user: string | undefined, channelId: string | null) => {
    const channel = channelOf(channelId);
    return {
    now: opts.clock(),
    speed: opts.speed,
    info: opts.info,
    bot: opts.bot,
    channel,
    channels: listed.map((c) => ({ ...c, alerts: opts.slack.messages(c.id).filter((m) => !m.threadTs && m.botId && !m.deleted).length })),
    users: opts.users,
    groups: opts.groups ?? {},
    slackReady: opts.eventsUrl() !== undefined,
    messages: opts.slack.messages(channel.id).map(messageJson),
    ephemerals: user ? opts.slack.ephemerals({ user, channel: channel.id }).map((e) => ephemeralJson(e, placedIn)) : [],
    notices: user ? notices.filter((n) => n.user === user).slice(-20) : [],
    home: user ? (opts.slack.homeView(user)?.view ?? null) : null,
    };
  };

  /** Posts the bot's immediate answer to a slash command where Slack shows it (the command's response_url). */
  const showCommandAnswer = async (result: SendResult, responseUrl: string, user: string, command: string): Promise<void> => {
    if (result.status !== 200) {
      notify(user, `${command} failed with the error "${result.status === 404 ? 'dispatch_failed' : `http_${result.status}`}"`);
      return;
    }
    const body = result.body.trim();
    if (!body) return;
    let payload: Record<string, unknown>;
    try {
      const v: unknown = JSON.parse(body);
      payload = typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : { text: String(v) };
    } catch {
      payload = { text: body };
    }
    const r = await fetch(responseUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(payload) });
    if (!r.ok) log.warn({ status: r.status }, 'could not show the answer to a slash command');
  };

  /** A response_url for the bot: the fake Slack's, behind this server's `/response/<id>`. */
  const responseUrl = (target: { channel: string; user: string; messageTs?: string }, threadTs?: string): string => {
    const id = randomBytes(12).toString('base64url');
    responseProxies.set(id, { url: opts.slack.responseUrl(target), user: target.user, ...(threadTs ? { threadTs } : {}) });
    if (responseProxies.size > 5000) responseProxies.delete(responseProxies.keys().next().value!);
    return `${baseUrl}response/${id}`;
  };

  /** Forwards a response_url POST to the fake Slack; ephemerals it creates are placed in the clicked message's thread. */
  const forwardResponse = async (id: string, req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const p = responseProxies.get(id);
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    if (!p) return send(res, 404, { ok: false, error: 'expired_url' });
    const before = new Set(opts.slack.ephemerals({ user: p.user }).map((e) => e.messageTs));
    const r = await fetch(p.url, { method: 'POST', headers: { 'content-type': req.headers['content-type'] ?? 'application/json' }, body: Buffer.concat(chunks) });
    const text = await r.text();
    if (p.threadTs) {
      let placed = false;
      for (const e of opts.slack.ephemerals({ user: p.user })) {
        if (!before.has(e.messageTs) && e.via === 'response_url' && !e.threadTs) {
          placedIn.set(e.messageTs, p.threadTs);
          placed = true;
        }
      }
      if (placed) broadcast('slack', { type: 'ephemeral', user: p.user });
    }
    res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'application/json' }).end(text);
  };

  const handleCommand = async (body: Record<string, unknown>): Promise<{ status: number; body: unknown }> => {
    const user = users.get(field(body, 'user') ?? '');
    const text = (field(body, 'text') ?? '').trim();
    if (!user) return { status: 400, body: { ok: false, error: 'unknown user' } };
    const m = /^(\/[\w-]+)(?:\s+([\s\S]*))?$/.exec(text);
    if (!m) return { status: 400, body: { ok: false, error: 'not a slash command' } };
    const command = m[1]!;
    if (command !== '/tokens') {
      notify(user.id, `${command} is not a valid command. In this sandbox, \`/tokens\` is the only one (try \`/tokens help\`).`);
      return { status: 200, body: { ok: false, error: 'unknown_command' } };
    }
    const eventsUrl = opts.eventsUrl();
    if (!eventsUrl) {
      notify(user.id, `${command} failed: the tokenwatch Slack app is not running in this sandbox.`);
      return { status: 200, body: { ok: false, error: 'no_app' } };
    }
    const where = channelOf(field(body, 'channel'));
    const commandResponseUrl = responseUrl({ channel: where.id, user: user.id });
    const result = await sendSlashCommand(eventsUrl, opts.signingSecret, {
      command,
      text: m[2]?.trim() ?? '',
      user_id: user.id,
      user_name: user.name.toLowerCase(),
      channel_id: where.id,
      channel_name: where.name,
      team_id: opts.team.id,
      team_domain: opts.team.domain,
      response_url: commandResponseUrl,
      trigger_id: triggerId(),
    });
    await showCommandAnswer(result, commandResponseUrl, user.id, command);
    return { status: 200, body: { ok: result.status === 200, status: result.status } };
  };

  const handleAction = async (body: Record<string, unknown>): Promise<{ status: number; body: unknown }> => {
    const user = users.get(field(body, 'user') ?? '');
    const ts = field(body, 'ts');
    const actionId = field(body, 'actionId');
    if (!user || !ts || !actionId) return { status: 400, body: { ok: false, error: 'user, ts and actionId are required' } };
    const ephemeral = body.ephemeral === true;
    const where = channelOf(field(body, 'channel'));
    const channel = where.id;
    let message: { text: string; blocks?: unknown[]; threadTs?: string; user?: string; botId?: string } | undefined;
    if (ephemeral) {
      const e = opts.slack.ephemerals({ user: user.id, channel }).find((x) => x.messageTs === ts);
      if (e) message = { text: e.text, ...(e.blocks ? { blocks: e.blocks } : {}), ...(e.threadTs ? { threadTs: e.threadTs } : {}) };
    } else {
      const m = opts.slack.message(channel, ts);
      if (m && !m.deleted) message = { text: m.text, ...(m.blocks ? { blocks: m.blocks } : {}), ...(m.threadTs ? { threadTs: m.threadTs } : {}), user: m.user, ...(m.botId ? { botId: m.botId } : {}) };
    }
    if (!message) return { status: 404, body: { ok: false, error: 'message_not_found' } };
    const eventsUrl = opts.eventsUrl();
    if (!eventsUrl) {
      notify(user.id, 'The tokenwatch Slack app is not running in this sandbox, so buttons do nothing.');
      return { status: 200, body: { ok: false, error: 'no_app' } };
    }
    // An ephemeral's response_url cannot replace it in the fake Slack; it answers with a new ephemeral instead.
    const actionResponseUrl = responseUrl({ channel, user: user.id, ...(ephemeral ? {} : { messageTs: ts }) }, message.threadTs);
    const nowSec = Date.now() / 1000;
    const payload = blockActionPayload(
      {
        user: user.id,
        userName: user.name.toLowerCase(),
        actionId,
        value: field(body, 'value') ?? '',
        // An overflow-menu option: sent as `selected_option` (its label and value), as Slack does.
        ...(body.selected === true ? { selectedOption: { text: field(body, 'text') ?? '', value: field(body, 'value') ?? '' } } : {}),
        ...(field(body, 'blockId') ? { blockId: field(body, 'blockId')! } : {}),
        ...(field(body, 'text') ? { text: field(body, 'text')! } : {}),
        channel,
        channelName: where.name,
        messageTs: ts,
        message: { text: message.text, ...(message.blocks ? { blocks: message.blocks } : {}) },
        teamId: opts.team.id,
        responseUrl: actionResponseUrl,
        ephemeral,
      },
      nowSec,
    );
    // What Slack adds beyond the helper's defaults: a real trigger_id, the thread of a reply, the poster of the message.
    payload.trigger_id = triggerId();
    payload.team = { id: opts.team.id, domain: opts.team.domain };
    const container = payload.container as Record<string, unknown>;
    if (message.threadTs) container.thread_ts = message.threadTs;
    if (ephemeral) delete payload.message;
    else {
      payload.message = {
        type: 'message',
        ...(message.botId ? { subtype: 'bot_message', bot_id: message.botId } : {}),
        user: message.user,
        ts,
        text: message.text,
        team: opts.team.id,
        ...(message.blocks ? { blocks: message.blocks } : {}),
        ...(message.threadTs ? { thread_ts: message.threadTs } : {}),
      };
    }
    const result = await sendBlockAction(eventsUrl, opts.signingSecret, payload);
    if (result.status !== 200) notify(user.id, `tokenwatch did not take the click (HTTP ${result.status}). Is the app still running?`);
    return { status: 200, body: { ok: result.status === 200, status: result.status } };
  };

  const server: Server = createServer((req, res) => {
    if (!isLoopbackHost(req.headers.host)) {
      log.warn({ host: String(req.headers.host ?? '').slice(0, 100) }, 'sandbox request with a non-loopback Host header refused (DNS rebinding?)');
      return send(res, 421, { ok: false, error: 'the sandbox answers only to 127.0.0.1, localhost or [::1] in the Host header' });
    }
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const path = url.pathname;
    const fail = (err: unknown) => {
      log.error({ err, path }, 'sandbox page request failed');
      if (!res.headersSent) send(res, 500, { ok: false, error: err instanceof Error ? err.message : String(err) });
    };
    if (req.method === 'GET') {
      const asset = assets.get(path);
      if (asset) {
        res.writeHead(200, { 'content-type': asset.type, 'cache-control': 'no-cache' }).end(asset.body);
        return;
      }
      if (path === '/api/state') return send(res, 200, state(url.searchParams.get('user') ?? undefined, url.searchParams.get('channel')));
      if (path === '/api/cluster') return send(res, 200, opts.cluster());
      if (path === '/api/events') {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive' });
        res.write(`retry: 1000\nevent: hello\ndata: ${JSON.stringify({ now: opts.clock() })}\n\n`);
        streams.add(res);
        req.on('close', () => streams.delete(res));
        return;
      }
      if (path === '/favicon.ico') {
        res.writeHead(204).end();
        return;
      }
      return send(res, 404, { ok: false, error: 'not found' });
    }
    const proxied = /^\/response\/([A-Za-z0-9_-]+)$/.exec(path);
    if (req.method === 'POST' && proxied) {
      forwardResponse(proxied[1]!, req, res).catch(fail);
      return;
    }
    if (req.method === 'POST') {
      const origin = req.headers.origin;
      if (origin !== undefined && origin !== `http://${req.headers.host ?? ''}`) return send(res, 403, { ok: false, error: 'cross-origin request refused' });
      const handler = path === '/api/command' ? handleCommand : path === '/api/action' ? handleAction : path === '/api/message' ? handleMessage : path === '/api/home' ? handleHome : undefined;
      if (!handler) return send(res, 404, { ok: false, error: 'not found' });
      readJson(req)
        .then(handler)
        .then((r) => send(res, r.status, r.body), fail);
      return;
    }
    send(res, 405, { ok: false, error: 'method not allowed' });
  });

  /** `POST /api/home`: the user opened the Home tab; Slack sends `app_home_opened` (signed, Events API) to the bot. */
  async function handleHome(body: Record<string, unknown>): Promise<{ status: number; body: unknown }> {
    const user = users.get(field(body, 'user') ?? '');
    if (!user) return { status: 400, body: { ok: false, error: 'unknown user' } };
    const eventsUrl = opts.eventsUrl();
    const { sendEvent, appHomeOpenedBody } = opts.requests;
    if (!eventsUrl || !sendEvent || !appHomeOpenedBody) return { status: 200, body: { ok: false, error: 'the tokenwatch Slack app is not running' } };
    const result = await sendEvent(eventsUrl, opts.signingSecret, appHomeOpenedBody({ user: user.id, teamId: opts.team.id }, opts.clock() / 1000));
    return { status: 200, body: { ok: result.status === 200, status: result.status } };
  }

  async function handleMessage(body: Record<string, unknown>): Promise<{ status: number; body: unknown }> {
    const user = users.get(field(body, 'user') ?? '');
    const text = (field(body, 'text') ?? '').trim();
    if (!user || !text) return { status: 400, body: { ok: false, error: 'user and text are required' } };
    const m = opts.slack.postAsUser(channelOf(field(body, 'channel')).id, user.id, text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;'));
    return { status: 200, body: { ok: true, ts: m.ts } };
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  baseUrl = `http://127.0.0.1:${port}/`;

  return {
    url: `http://127.0.0.1:${port}/`,
    port,
    notices,
    close: async () => {
      clearInterval(ticker);
      if (clusterTimer) clearTimeout(clusterTimer);
      offSlack();
      offCluster();
      for (const s of streams) s.end();
      streams.clear();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
