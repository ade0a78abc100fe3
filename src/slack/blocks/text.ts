/**
 * Text helpers for Block Kit builders: mrkdwn escaping, length-safe truncation, Slack date tokens,
 * durations and sparklines. Pure.
 *
 * Sources: Slack "Formatting text for app surfaces" (api.slack.com/reference/surfaces/formatting):
 * `&`, `<`, `>` must be escaped as `&amp;`, `&lt;`, `&gt;`; dates as `<!date^epochSeconds^{tokens}|fallback>`;
 * links as `<url|label>`; user mentions `<@U…>`.
 *
 * Every text object ({@link md}, {@link plain}), every escaped part ({@link escClip}, {@link code}) and the fallback
 * text ({@link wireText}) passes {@link scrubSecrets} (src/core/redact.ts, the function that scrubs the log): a JWT or a
 * `Bearer …` value inside audit text (a user agent, a request URI, a status message) shows as `[Redacted]`. It runs
 * before clipping, so a clipped token never leaves a fragment.
 */
import type { types } from '@slack/bolt';
import { scrubSecrets } from '../../core/redact.js';
import { SLACK_GROUP_ID } from '../../approvals/policy.js';

export type KnownBlock = types.KnownBlock;
export type Button = types.Button;
export type PlainTextElement = types.PlainTextElement;
export type MrkdwnElement = types.MrkdwnElement;

/**
 * What every builder returns: `text` is the notification / screen-reader fallback, always set. It is plain text
 * (no mrkdwn, no links or mentions) unless `textFormat` is `mrkdwn`: the Slack client escapes plain text once, with
 * {@link wireText}, when it is sent.
 */
export interface SlackMessage {
  text: string;
  /**
   * `mrkdwn`: `text` is already mrkdwn (mentions, links), built like block text — every user-supplied part escaped
   * with {@link escapeMrkdwn} by the builder — and sent as it is. Default `plain`.
   */
  textFormat?: 'plain' | 'mrkdwn';
  blocks: KnownBlock[];
}

/** Escapes `&`, `<`, `>` for mrkdwn (Slack formatting docs). */
export function escapeMrkdwn(s: string): string {
  return s.replace(/[&<>]/g, (c) => (c === '&' ? '&amp;' : c === '<' ? '&lt;' : '&gt;'));
}

/** Slack's limit on a message's top-level `text`, chars (https://api.slack.com/methods/chat.postMessage#truncating). */
const MESSAGE_TEXT_MAX = 40_000;

/**
 * A message's fallback `text` as it is sent to Slack (chat.postMessage, chat.update, chat.postEphemeral, a
 * `response_url`): the builder's plain text with `&`, `<`, `>` escaped by {@link escapeMrkdwn} — the same function
 * as every user-supplied part of the blocks — so a name such as `<!channel>` or `<https://evil.example|click>` from
 * an audit line or a probe report shows as text and never becomes a mention or a link. Clipped to Slack's 40,000
 * chars without splitting an entity. `format: 'mrkdwn'` (see {@link SlackMessage.textFormat}) is only clipped.
 */
export function wireText(text: string, format: 'plain' | 'mrkdwn' = 'plain'): string {
  return format === 'mrkdwn' ? clip(scrubSecrets(text), MESSAGE_TEXT_MAX) : escClip(text, MESSAGE_TEXT_MAX);
}

/**
 * Secrets redacted ({@link scrubSecrets}), escaped and clipped to `max` chars: `clip(escapeMrkdwn(scrubSecrets(s)), max)`,
 * without scrubbing or escaping more of a huge `s` than can be shown (escaping only lengthens text, so `max + 1` raw
 * chars are enough to know it must be cut; the cut is made after a token-long margin, so the token a cut would split
 * is still recognised and redacted whole).
 */
export function escClip(s: string, max: number): string {
  const head = s.length > max + SCRUB_MARGIN ? s.slice(0, max + SCRUB_MARGIN) : s;
  const scrubbed = scrubSecrets(head);
  return clip(escapeMrkdwn(scrubbed.length > max ? scrubbed.slice(0, max + 1) : scrubbed), max);
}

/**
 * Raw chars read past a clip point before redacting, so a token that straddles the cut still matches whole (a
 * ServiceAccount JWT is about 1 KB; longer ones keep at least their first 4 KiB, and a JWT needs its two dots to be shown
 * as one: its cut header alone carries no secret).
 */
const SCRUB_MARGIN = 4096;

/** Inline code span of user text: escaped, backticks and newlines neutralised, clipped to `max` chars. */
export function code(s: string, max = 200): string {
  return `\`${escClip((s.length > max + SCRUB_MARGIN ? s.slice(0, max + SCRUB_MARGIN) : s).replace(/`/g, "'").replace(/[\r\n]+/g, ' '), max)}\``;
}

/**
 * Cuts `s` to at most `max` UTF-16 units, ending in `…` when cut. Never splits an `&…;` entity, a
 * surrogate pair, or an unclosed `<…>` (link, mention, date) of mrkdwn.
 */
export function clip(s: string, max: number): string {
  if (s.length <= max) return s;
  if (max <= 1) return '…'.slice(0, Math.max(0, max));
  let cut = s.slice(0, max - 1);
  const lastOpen = cut.lastIndexOf('<');
  if (lastOpen > cut.lastIndexOf('>')) cut = cut.slice(0, lastOpen);
  cut = cut.replace(/&[a-zA-Z0-9#]*$/, '');
  if (/[\uD800-\uDBFF]$/.test(cut)) cut = cut.slice(0, -1);
  return `${cut}…`;
}

/**
 * A `plain_text` object, clipped to `max` (never empty: Slack rejects empty text). `&`, `<`, `>` are escaped with
 * {@link escapeMrkdwn} like every other text sent to Slack (Slack decodes exactly these three entities for display:
 * https://api.slack.com/reference/surfaces/formatting#escaping); pass raw text.
 */
export function plain(text: string, max: number): PlainTextElement {
  const t = escClip(text.replace(/\s+/g, ' ').trim(), max);
  return { type: 'plain_text', text: t === '' ? '-' : t, emoji: true };
}

/** A `mrkdwn` object, secrets redacted ({@link scrubSecrets}), clipped to `max`. The caller escapes user-supplied parts. */
export function md(text: string, max = 3000): MrkdwnElement {
  const t = clip(scrubSecrets(text), max);
  return { type: 'mrkdwn', text: t === '' ? ' ' : t };
}

/**
 * Joins lines with `\n` within `max` chars. Lines that do not fit are replaced by `more(n)` (e.g.
 * `…and 12 more`), so the result always says how much it left out. Each line is clipped on its own first.
 */
export function linesWithin(lines: readonly string[], max: number, more: (n: number) => string = (n) => `…and ${n} more`): string {
  const all = lines.map((l) => clip(l, max));
  const full = all.join('\n');
  if (full.length <= max) return full;
  const out: string[] = [];
  let len = 0;
  for (let i = 0; i < all.length; i++) {
    const line = all[i]!;
    const tail = more(all.length - i - 1);
    const add = (out.length ? 1 : 0) + line.length;
    // keep room for the "…and N more" line after this one (unless this is the last line)
    const reserve = i === all.length - 1 ? 0 : 1 + tail.length;
    if (len + add + reserve > max) {
      const note = more(all.length - i);
      return out.length ? `${out.join('\n')}\n${note}` : clip(note, max);
    }
    out.push(line);
    len += add;
  }
  return out.join('\n');
}

/**
 * The first `limit` of `items` joined by `sep`, then `…and N more` where N = `total` − shown. Pass a pre-sliced
 * `items` with the real `total` to avoid formatting thousands of entries.
 */
export function listWithin(items: readonly string[], limit: number, sep = ', ', total = items.length): string {
  const shown = items.slice(0, limit);
  if (total <= shown.length) return shown.join(sep);
  const more = `…and ${count(total - shown.length)} more`;
  return shown.length ? `${shown.join(sep)}${sep}${more}` : more;
}

/** `2026-11-29 14:05 UTC`. */
export function utc(ms: number): string {
  const iso = new Date(ms).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
}

/** `2026-11-29`. */
export function utcDate(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/**
 * A Slack date token shown in the reader's time zone, e.g. `<!date^1764425100^{date_short_pretty} {time}|2026-11-29 14:05 UTC>`.
 * `format` uses Slack's tokens (`{date_short_pretty}`, `{time}`, `{ago}`…).
 */
export function slackDate(ms: number, format = '{date_short_pretty} {time}'): string {
  return `<!date^${Math.floor(ms / 1000)}^${format}|${utc(ms)}>`;
}

/** A mrkdwn link with escaped label; URLs containing `|`, `<`, `>` or spaces are shown as text instead. */
export function link(url: string, label: string): string {
  if (!/^https?:\/\/[^\s<>|]+$/.test(url)) return escapeMrkdwn(label);
  return `<${url}|${escapeMrkdwn(label).replace(/\|/g, '¦')}>`;
}

/**
 * A cause source as mrkdwn: `owner/repo#123` → GitHub issue link; `http(s)://…` → link labelled by host
 * and path; anything else → escaped text.
 */
export function sourceLink(source: string): string {
  const gh = /^([\w.-]+\/[\w.-]+)#(\d+)$/.exec(source.trim());
  if (gh) return link(`https://github.com/${gh[1]}/issues/${gh[2]}`, source.trim());
  if (/^https?:\/\//.test(source)) {
    const label = source.replace(/^https?:\/\//, '').replace(/\/$/, '');
    return link(source, clip(label, 80));
  }
  return escapeMrkdwn(source);
}

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** `89 d 3 h`, `5 h 12 min`, `42 min`, `30 s` (two largest units, floor). Negative values get a `-`. */
export function duration(ms: number): string {
  if (ms < 0) return `-${duration(-ms)}`;
  if (ms >= DAY) {
    const d = Math.floor(ms / DAY);
    const h = Math.floor((ms % DAY) / HOUR);
    return h ? `${d} d ${h} h` : `${d} d`;
  }
  if (ms >= HOUR) {
    const h = Math.floor(ms / HOUR);
    const m = Math.floor((ms % HOUR) / MINUTE);
    return m ? `${h} h ${m} min` : `${h} h`;
  }
  if (ms >= MINUTE) return `${Math.floor(ms / MINUTE)} min`;
  return `${Math.floor(ms / 1000)} s`;
}

/** `1,234` (en-US grouping, locale-independent). */
export function count(n: number): string {
  return String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** `1 pod`, `3 pods`. */
export function plural(n: number, one: string, many = `${one}s`): string {
  return `${count(n)} ${n === 1 ? one : many}`;
}

export const SPARK_CHARS = '▁▂▃▄▅▆▇█';

/**
 * Text sparkline of requests per UTC hour over the `hours` hours ending with the hour containing `endMs`.
 * `hourly` is keyed by the hour's start in epoch ms (as in `TokenRecord.hourly`). A zero hour is `▁`, any
 * non-zero hour is `▂`…`█`, scaled linearly to the maximum: level = 1 + round(6 · n / max).
 * @returns the line plus its maximum and total, for the caption.
 */
export function sparkline(hourly: Readonly<Record<string, number>>, endMs: number, hours = 24): { line: string; max: number; total: number } {
  const end = Math.floor(endMs / HOUR) * HOUR;
  const values: number[] = [];
  for (let i = hours - 1; i >= 0; i--) values.push(Math.max(0, hourly[String(end - i * HOUR)] ?? 0));
  const max = Math.max(0, ...values);
  const total = values.reduce((a, b) => a + b, 0);
  const line = values.map((v) => SPARK_CHARS[v === 0 || max === 0 ? 0 : 1 + Math.round((6 * v) / max)]!).join('');
  return { line, max, total };
}

/** Merges several `hourly` maps (e.g. of a finding's tokens) by summing counts per hour. */
export function mergeHourly(maps: ReadonlyArray<Readonly<Record<string, number>>>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of maps) for (const [k, v] of Object.entries(m)) out[k] = (out[k] ?? 0) + v;
  return out;
}

/** Text progress bar `▰▰▰▱▱▱▱▱▱▱` of `done/total` with `width` cells. */
export function progressBar(done: number, total: number, width = 10): string {
  const filled = total <= 0 ? 0 : Math.min(width, Math.max(0, Math.round((done / total) * width)));
  return '▰'.repeat(filled) + '▱'.repeat(width - filled);
}

/** Slack mention for a user (`<@U…>`) or user group (`<!subteam^S…>`), per api.slack.com formatting docs. */
export function mention(id: string): string {
  return SLACK_GROUP_ID.test(id) ? `<!subteam^${id}>` : `<@${id}>`;
}
