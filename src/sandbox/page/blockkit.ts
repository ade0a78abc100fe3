/**
 * A small, dependency-free Block Kit renderer for the sandbox's channel page: Block Kit JSON → HTML string. Runs in
 * the browser (served transpiled as `/assets/blockkit.js`) and in Node (the tests render the bot's own builders
 * with it, so the page cannot drift from what Slack shows). Pure: no DOM, no clock (pass `now`).
 *
 * Covered (Slack reference, docs.slack.dev/reference/block-kit): blocks `header`, `section` (text, fields,
 * accessory button/image), `context` (text and image elements), `actions` (buttons with `style` and `confirm`, overflow menus;
 * URL buttons as links), `divider`, `image`, `markdown`; text objects `plain_text` (with `emoji`) and `mrkdwn`
 * ("Formatting text for app surfaces": `*bold*`, `_italic_`, `~strike~`, `` `code` ``, ```` ``` ```` blocks, `>`
 * quotes, `<url|label>`, `<@U…>`, `<#C…|name>`, `<!here>`, `<!subteam^S…>`, `<!date^epoch^format|fallback>`, the
 * `&amp;`/`&lt;`/`&gt;` escapes, emoji shortcodes). Anything else renders as a visible `bk-unknown` fallback
 * naming the type, never silently: tests assert the bot's messages contain none.
 *
 * Buttons carry what the page needs to send a `block_actions` payload: `data-action-id`, `data-block-id` (the
 * block's `block_id`, or `bk-<index>` as Slack would assign one), `data-value`, `data-text`, and the `confirm`
 * dialog as JSON in `data-confirm`.
 */

/** What the renderer needs besides the blocks. */
export interface RenderContext {
  /** Display names of user ids (`U0REQUEST` → `Riya`), for mentions. */
  users?: Readonly<Record<string, string>>;
  /** Names of channel ids, for `<#C…>` links. */
  channels?: Readonly<Record<string, string>>;
  /** Names of user groups (`S…`). */
  groups?: Readonly<Record<string, string>>;
  /** "Now" for `{ago}` and `{date_pretty}` date tokens, epoch ms. Default: render them as absolute dates. */
  now?: number;
}

/** Class of the fallback element for an unsupported block or element. */
export const UNKNOWN_CLASS = 'bk-unknown';

/** Emoji shortcodes (the common ones; Slack's full list is much longer) → characters. */
export const EMOJI: Readonly<Record<string, string>> = {
  white_check_mark: '✅',
  heavy_check_mark: '✔️',
  x: '❌',
  warning: '⚠️',
  rotating_light: '🚨',
  red_circle: '🔴',
  large_orange_circle: '🟠',
  large_blue_circle: '🔵',
  large_green_circle: '🟢',
  lock: '🔒',
  closed_lock_with_key: '🔐',
  hourglass: '⌛',
  hourglass_flowing_sand: '⏳',
  zzz: '😴',
  sleeping: '😴',
  recycle: '♻️',
  mag: '🔍',
  mag_right: '🔎',
  no_entry: '⛔',
  no_entry_sign: '🚫',
  thinking_face: '🤔',
  arrows_counterclockwise: '🔄',
  repeat: '🔁',
  tada: '🎉',
  eyes: '👀',
  wave: '👋',
  key: '🔑',
  gear: '⚙️',
  bell: '🔔',
  information_source: 'ℹ️',
  rocket: '🚀',
  fire: '🔥',
  clock1: '🕐',
  calendar: '📆',
  memo: '📝',
  link: '🔗',
  '+1': '👍',
  thumbsup: '👍',
  '-1': '👎',
  thumbsdown: '👎',
};

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** Escapes text for HTML element content and attribute values. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** Undoes Slack's three mrkdwn escapes (`&amp;`, `&lt;`, `&gt;`). */
export function decodeSlackEntities(s: string): string {
  return s.replace(/&(amp|lt|gt);/g, (_m, e: string) => (e === 'amp' ? '&' : e === 'lt' ? '<' : '>'));
}

/** Replaces `:shortcode:` with its emoji (unknown shortcodes stay as written). */
export function emojify(s: string): string {
  return s.replace(/:([a-z0-9_+-]+):/g, (m, name: string) => EMOJI[name] ?? m);
}

const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

function ordinal(n: number): string {
  const s = n % 100 >= 11 && n % 100 <= 13 ? 'th' : (['th', 'st', 'nd', 'rd'][n % 10] ?? 'th');
  return `${n}${s}`;
}

function ago(ms: number, now: number): string {
  const d = Math.round((now - ms) / 1000);
  const abs = Math.abs(d);
  const unit = (n: number, u: string) => `${n} ${u}${n === 1 ? '' : 's'}`;
  let text: string;
  if (abs < 60) text = unit(abs, 'second');
  else if (abs < 3600) text = unit(Math.floor(abs / 60), 'minute');
  else if (abs < 86_400) text = unit(Math.floor(abs / 3600), 'hour');
  else if (abs < 30 * 86_400) text = unit(Math.floor(abs / 86_400), 'day');
  else if (abs < 365 * 86_400) text = unit(Math.floor(abs / (30 * 86_400)), 'month');
  else text = unit(Math.floor(abs / (365 * 86_400)), 'year');
  return d >= 0 ? `${text} ago` : `in ${text}`;
}

/**
 * Formats a Slack date token (`<!date^epochSeconds^format|fallback>`) in UTC. Tokens: `{date_num}`, `{date}`,
 * `{date_short}`, `{date_long}`, their `_pretty` forms (today / yesterday / tomorrow when `now` is given), `{time}`,
 * `{time_secs}`, `{ago}` (needs `now`; otherwise an absolute date). Unknown tokens stay as written.
 */
export function formatSlackDate(epochSec: number, format: string, now?: number): string {
  const ms = epochSec * 1000;
  const d = new Date(ms);
  const y = d.getUTCFullYear();
  const mo = d.getUTCMonth();
  const day = d.getUTCDate();
  const pad = (n: number) => String(n).padStart(2, '0');
  const dateNum = `${y}-${pad(mo + 1)}-${pad(day)}`;
  const dateLong = `${DAYS[d.getUTCDay()]}, ${MONTHS[mo]} ${ordinal(day)}, ${y}`;
  const date = `${MONTHS[mo]} ${ordinal(day)}, ${y}`;
  const dateShort = `${MONTHS[mo]!.slice(0, 3)} ${day}, ${y}`;
  const pretty = (fallback: string): string => {
    if (now === undefined) return fallback;
    const dayOf = (t: number) => Math.floor(t / 86_400_000);
    const diff = dayOf(ms) - dayOf(now);
    return diff === 0 ? 'Today' : diff === -1 ? 'Yesterday' : diff === 1 ? 'Tomorrow' : fallback;
  };
  const values: Record<string, string> = {
    date_num: dateNum,
    date: date,
    date_short: dateShort,
    date_long: dateLong,
    date_pretty: pretty(date),
    date_short_pretty: pretty(dateShort),
    date_long_pretty: pretty(dateLong),
    time: `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}`,
    time_secs: `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`,
    ago: now === undefined ? `${dateShort} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}` : ago(ms, now),
  };
  return format.replace(/\{([a-z_]+)\}/g, (m, t: string) => values[t] ?? m);
}

/** Renders one `<…>` token of mrkdwn (its inside, without the angle brackets) to HTML. */
function specialToken(inner: string, ctx: RenderContext): string {
  const [target = '', ...rest] = inner.split('|');
  const label = rest.length ? decodeSlackEntities(rest.join('|')) : undefined;
  if (target.startsWith('@')) {
    const id = target.slice(1);
    const name = ctx.users?.[id] ?? label ?? id;
    return `<span class="bk-mention" data-user="${escapeHtml(id)}">@${escapeHtml(name)}</span>`;
  }
  if (target.startsWith('#')) {
    const id = target.slice(1);
    const name = label ?? ctx.channels?.[id] ?? id;
    return `<span class="bk-channel">#${escapeHtml(name)}</span>`;
  }
  if (target.startsWith('!date^')) {
    const parts = target.split('^');
    const sec = Number(parts[1]);
    const format = parts[2] ?? '{date}';
    const fallback = label ?? '';
    if (!Number.isFinite(sec)) return escapeHtml(fallback);
    const iso = new Date(sec * 1000).toISOString();
    return `<time class="bk-date" datetime="${iso}" title="${escapeHtml(fallback || iso)}">${escapeHtml(formatSlackDate(sec, decodeSlackEntities(format), ctx.now))}</time>`;
  }
  if (target.startsWith('!subteam^')) {
    const id = target.slice('!subteam^'.length);
    const name = label ?? (ctx.groups?.[id] !== undefined ? `@${ctx.groups[id]}` : `@${id}`);
    return `<span class="bk-mention">${escapeHtml(name.startsWith('@') ? name : `@${name}`)}</span>`;
  }
  if (target.startsWith('!')) {
    const word = target.slice(1);
    return `<span class="bk-mention">@${escapeHtml(label ?? word)}</span>`;
  }
  const url = decodeSlackEntities(target);
  if (/^(https?:\/\/|mailto:)/i.test(url)) {
    return `<a class="bk-link" href="${escapeHtml(url)}" target="_blank" rel="noopener noreferrer">${escapeHtml(label ?? url)}</a>`;
  }
  return escapeHtml(`<${decodeSlackEntities(inner)}>`);
}

/** Placeholders for already-rendered pieces (private-use characters cannot occur in the builders' text). */
const PH_OPEN = '\uE000';
const PH_CLOSE = '\uE001';

/**
 * Renders Slack mrkdwn to HTML. Order: code blocks and inline code (literal), `<…>` tokens, then HTML escaping,
 * emoji, `*bold*` / `_italic_` / `~strike~` (delimiters at word boundaries, as Slack requires), `>` quotes and
 * line breaks.
 */
export function mrkdwnToHtml(text: string, ctx: RenderContext = {}): string {
  const pieces: string[] = [];
  const hold = (html: string): string => `${PH_OPEN}${pieces.push(html) - 1}${PH_CLOSE}`;
  let s = text.replace(/```([\s\S]*?)```/g, (_m, body: string) => hold(`<pre class="bk-pre">${escapeHtml(decodeSlackEntities(body.replace(/^\n/, '')))}</pre>`));
  s = s.replace(/`([^`\n]+)`/g, (_m, body: string) => hold(`<code class="bk-code">${escapeHtml(decodeSlackEntities(body))}</code>`));
  s = s.replace(/<([^<>\n]+)>/g, (_m, inner: string) => hold(specialToken(inner, ctx)));
  // A raw ">" left at a line start is a quote marker (Slack); mark it before escaping.
  const lines = s.split('\n').map((line) => {
    const q = /^>\s?(.*)$/.exec(line) ?? /^&gt;\s?(.*)$/.exec(line);
    return q ? { quote: true, body: q[1]! } : { quote: false, body: line };
  });
  const boundaryBefore = `(^|[\\s(\\[{"'“‘.,;:!?/${PH_CLOSE}-])`;
  const boundaryAfter = `(?=$|[\\s)\\]}"'”’.,;:!?/${PH_OPEN}-])`;
  const fmt = (html: string, mark: string, tag: string): string =>
    html.replace(new RegExp(`${boundaryBefore}\\${mark}([^\\s${mark}](?:[^${mark}\\n]*?[^\\s${mark}])?)\\${mark}${boundaryAfter}`, 'g'), `$1<${tag}>$2</${tag}>`);
  const rendered = lines.map(({ quote, body }) => {
    let h = escapeHtml(decodeSlackEntities(body));
    h = emojify(h);
    h = fmt(h, '*', 'strong');
    h = fmt(h, '_', 'em');
    h = fmt(h, '~', 'del');
    return { quote, h };
  });
  const out: string[] = [];
  for (let i = 0; i < rendered.length; i++) {
    const r = rendered[i]!;
    if (r.quote) {
      const q: string[] = [r.h];
      while (i + 1 < rendered.length && rendered[i + 1]!.quote) q.push(rendered[++i]!.h);
      out.push(`<blockquote class="bk-quote">${q.join('<br>')}</blockquote>`);
    } else out.push(r.h + (i < rendered.length - 1 && !rendered[i + 1]!.quote ? '<br>' : ''));
  }
  return out.join('').replace(new RegExp(`${PH_OPEN}(\\d+)${PH_CLOSE}`, 'g'), (_m, i: string) => pieces[Number(i)] ?? '');
}

/** A `plain_text` string as HTML (emoji shortcodes replaced when `emoji` is not false). */
export function plainToHtml(text: string, emoji = true): string {
  const h = escapeHtml(text);
  return emoji ? emojify(h) : h;
}

/** Renders a text object (`plain_text` or `mrkdwn`); anything else is an unknown-element fallback. */
export function renderText(t: unknown, ctx: RenderContext): string {
  if (!isObj(t)) return unknown('text', 'missing text object');
  const text = str(t.text) ?? '';
  if (t.type === 'plain_text') return plainToHtml(text, t.emoji !== false);
  if (t.type === 'mrkdwn') return mrkdwnToHtml(text, ctx);
  return unknown(String(t.type), 'text object');
}

function unknown(type: string, what: string): string {
  return `<div class="${UNKNOWN_CLASS}" data-type="${escapeHtml(type)}">Unsupported ${escapeHtml(what)}: ${escapeHtml(type)}</div>`;
}

function attr(name: string, value: string | undefined): string {
  return value === undefined ? '' : ` ${name}="${escapeHtml(value)}"`;
}

/** A button element (or a link for a URL button), with the data the page needs to send `block_actions`. */
export function renderButton(e: Json, blockId: string, ctx: RenderContext): string {
  const style = e.style === 'primary' || e.style === 'danger' ? ` bk-${e.style}` : '';
  const label = isObj(e.text) ? plainToHtml(str(e.text.text) ?? '', e.text.emoji !== false) : '';
  const labelText = isObj(e.text) ? (str(e.text.text) ?? '') : '';
  const url = str(e.url);
  if (url && /^https?:\/\//i.test(url) && e.action_id === undefined) {
    return `<a class="bk-button${style}" href="${escapeHtml(url)}" target="_blank" rel="noopener noreferrer">${label}</a>`;
  }
  let confirm: string | undefined;
  if (isObj(e.confirm)) {
    const c = e.confirm;
    const txt = (v: unknown) => (isObj(v) ? (str(v.text) ?? '') : '');
    confirm = JSON.stringify({
      title: txt(c.title),
      textHtml: renderText(c.text, ctx),
      confirm: txt(c.confirm) || 'Yes',
      deny: txt(c.deny) || 'Cancel',
      style: c.style === 'danger' || c.style === 'primary' ? c.style : undefined,
    });
  }
  return (
    `<button type="button" class="bk-button${style}"` +
    attr('data-action-id', str(e.action_id)) +
    attr('data-block-id', blockId) +
    attr('data-value', str(e.value)) +
    attr('data-text', labelText) +
    attr('data-url', url) +
    attr('data-confirm', confirm) +
    `>${label}</button>`
  );
}

function renderImage(e: Json, cls: string): string {
  const url = str(e.image_url);
  if (!url || !/^(https?:|data:image\/)/i.test(url)) return `<span class="${cls} bk-image-missing">${escapeHtml(str(e.alt_text) ?? 'image')}</span>`;
  return `<img class="${cls}" src="${escapeHtml(url)}" alt="${escapeHtml(str(e.alt_text) ?? '')}">`;
}

/**
 * An overflow menu (`⋯`): its options as small buttons under a disclosure, each sending `block_actions` with the
 * option as `selected_option` (docs.slack.dev/reference/block-kit/block-elements/overflow-menu-element).
 */
export function renderOverflow(e: Json, blockId: string): string {
  const options = Array.isArray(e.options) ? e.options.filter(isObj) : [];
  const items = options
    .map((o) => {
      const label = isObj(o.text) ? (str(o.text.text) ?? '') : '';
      return (
        `<button type="button" class="bk-button bk-overflow-option"` +
        attr('data-action-id', str(e.action_id)) +
        attr('data-block-id', blockId) +
        attr('data-value', str(o.value)) +
        attr('data-text', label) +
        ' data-selected="1"' +
        `>${plainToHtml(label, true)}</button>`
      );
    })
    .join('');
  return `<details class="bk-overflow"><summary class="bk-button" aria-label="More actions">⋯</summary><div class="bk-overflow-menu">${items}</div></details>`;
}

/** An element of a section accessory, context or actions block. */
function renderElement(e: unknown, blockId: string, ctx: RenderContext, where: 'accessory' | 'context' | 'actions'): string {
  if (!isObj(e)) return unknown('element', 'element');
  switch (e.type) {
    case 'button':
      return where === 'context' ? unknown('button', 'context element') : renderButton(e, blockId, ctx);
    case 'overflow':
      return where === 'context' ? unknown('overflow', 'context element') : renderOverflow(e, blockId);
    case 'image':
      return renderImage(e, where === 'context' ? 'bk-context-image' : 'bk-accessory-image');
    case 'plain_text':
    case 'mrkdwn':
      return where === 'context' ? `<span class="bk-context-text">${renderText(e, ctx)}</span>` : unknown(String(e.type), `${where} element`);
    default:
      return unknown(String(e.type), `${where} element`);
  }
}

/** Renders one block. `index` gives blocks without `block_id` a stable id. */
export function renderBlock(b: unknown, index: number, ctx: RenderContext): string {
  if (!isObj(b)) return unknown('block', 'block');
  const blockId = str(b.block_id) ?? `bk-${index}`;
  const open = (cls: string) => `<div class="bk-block ${cls}" data-block-id="${escapeHtml(blockId)}">`;
  switch (b.type) {
    case 'header':
      return `${open('bk-header')}${renderText(b.text, ctx)}</div>`;
    case 'section': {
      const text = b.text !== undefined ? `<div class="bk-section-text">${renderText(b.text, ctx)}</div>` : '';
      const fields = Array.isArray(b.fields) ? `<div class="bk-fields">${b.fields.map((f) => `<div class="bk-field">${renderText(f, ctx)}</div>`).join('')}</div>` : '';
      const acc = b.accessory !== undefined ? `<div class="bk-accessory">${renderElement(b.accessory, blockId, ctx, 'accessory')}</div>` : '';
      return `${open('bk-section')}<div class="bk-section-main">${text}${fields}</div>${acc}</div>`;
    }
    case 'context': {
      const els = Array.isArray(b.elements) ? b.elements.map((e) => renderElement(e, blockId, ctx, 'context')).join('') : '';
      return `${open('bk-context')}${els}</div>`;
    }
    case 'actions': {
      const els = Array.isArray(b.elements) ? b.elements.map((e) => renderElement(e, blockId, ctx, 'actions')).join('') : '';
      return `${open('bk-actions')}${els}</div>`;
    }
    case 'divider':
      return `${open('bk-divider')}<hr></div>`;
    case 'image': {
      const title = isObj(b.title) ? `<figcaption>${renderText(b.title, ctx)}</figcaption>` : '';
      return `${open('bk-image')}<figure>${title}${renderImage(b, 'bk-image-img')}</figure></div>`;
    }
    case 'markdown':
      return `${open('bk-markdown')}${mrkdwnToHtml((str(b.text) ?? '').replace(/\*\*(.+?)\*\*/g, '*$1*'), ctx)}</div>`;
    default:
      return unknown(String(b.type), 'block');
  }
}

/** Renders a `blocks` array. */
export function renderBlocks(blocks: readonly unknown[], ctx: RenderContext = {}): string {
  return blocks.map((b, i) => renderBlock(b, i, ctx)).join('');
}

/** A message's body: its blocks, or its `text` as mrkdwn when it has none (as Slack shows it). */
export function renderMessageBody(msg: { text?: string; blocks?: readonly unknown[] }, ctx: RenderContext = {}): string {
  if (msg.blocks?.length) return `<div class="bk-blocks">${renderBlocks(msg.blocks, ctx)}</div>`;
  return `<div class="bk-blocks"><div class="bk-block bk-text">${mrkdwnToHtml(msg.text ?? '', ctx)}</div></div>`;
}
