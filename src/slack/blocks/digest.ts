/**
 * The digest of a first poll that finds many alerts for one channel (docs/slack.md "Notification queue"): one
 * message listing them, ranked by days to rejection, posted before the alerts themselves, which then follow at
 * Slack's one message per second per channel. Each line is marked posted as its alert goes out (the digest is
 * edited, at most every `DIGEST_EDIT_INTERVAL_MS`, see src/slack/drainer.ts). Pure; within 50 blocks and
 * 3,000 characters per section for any number of lines (the rest summarised as "…and N more").
 */
import type { Severity } from '../../findings/types.js';
import { SEVERITY_EMOJI } from './finding.js';
import { LIMITS } from './limits.js';
import { clip, code, count, escClip, md, plain, plural, slackDate, type KnownBlock, type SlackMessage } from './text.js';

/** One line of a digest: an alert to be posted. */
export interface DigestLine {
  groupId: string;
  cluster: string;
  /** `namespace/serviceAccount`. */
  subject: string;
  severity: Severity;
  /** The header fact of the alert ("rejected in 12 days", "requests now fail with 401"). */
  fact: string;
  /** Set once its alert is posted: where. */
  posted?: { channel: string; ts: string };
}

/** Sections of lines a digest shows at most (header, intro and the "…and N more" context take the other blocks). */
const MAX_LINE_SECTIONS = LIMITS.blocksPerMessage - 3;

function lineText(l: DigestLine): string {
  const mark = l.posted ? '✅ posted' : '⏳ to follow';
  return `${SEVERITY_EMOJI[l.severity]} ${l.severity} · *${escClip(l.cluster, 100)}* · ${code(l.subject, 300)} — ${escClip(l.fact, 200)} · ${mark}`;
}

/**
 * The digest message of `lines` (already ranked, most urgent first) for one channel, planned at `createdAt`
 * (epoch ms UTC). Lines are packed into sections of at most 3,000 characters; lines beyond 47 sections are counted
 * in a trailing "…and N more" context line.
 */
export function digestMessage(lines: readonly DigestLine[], createdAt: number): SlackMessage {
  const posted = lines.filter((l) => l.posted).length;
  const clusters = new Set(lines.map((l) => l.cluster)).size;
  const blocks: KnownBlock[] = [{ type: 'header', text: plain(`🗂️ ${plural(lines.length, 'new alert')} in ${plural(clusters, 'cluster')}`, LIMITS.headerText) }];
  blocks.push({
    type: 'section',
    text: md(
      `Found ${slackDate(createdAt)}, most urgent first. Each becomes its own alert in this channel, about one per second (Slack's rate per channel); ${count(posted)} of ${count(lines.length)} posted so far.`,
    ),
  });
  const sections: string[][] = [];
  let len = 0;
  let shown = 0;
  for (const l of lines) {
    const t = clip(lineText(l), LIMITS.sectionText);
    const cur = sections.at(-1);
    if (cur && len + 1 + t.length <= LIMITS.sectionText) {
      cur.push(t);
      len += 1 + t.length;
    } else {
      if (sections.length >= MAX_LINE_SECTIONS) break;
      sections.push([t]);
      len = t.length;
    }
    shown++;
  }
  for (const sec of sections) blocks.push({ type: 'section', text: md(sec.join('\n')) });
  if (shown < lines.length) blocks.push({ type: 'context', elements: [md(`…and ${count(lines.length - shown)} more, posted after these`)] });
  const text = `🗂️ ${lines.length} new alerts to follow (${posted} posted): ${lines
    .slice(0, 5)
    .map((l) => `[${l.cluster}] ${l.severity}: ${l.subject}`)
    .join(', ')}${lines.length > 5 ? ', …' : ''}`;
  return { text: clip(text, 3000), blocks };
}
