/**
 * `/tokens status [cluster]` reply (ephemeral): last poll and health per source, Slack channel problems, open alerts
 * by severity, and one line per alert (one per root cause: a ServiceAccount's findings) linking to it. No buttons:
 * actions happen on the alert. Pure; stays within 50 blocks for any number of clusters and alerts.
 */
import type { Finding, Severity } from '../../findings/types.js';
import { signalLabels, worstFact } from './alert.js';
import { SEVERITY_EMOJI, subjectOf } from './finding.js';
import { LIMITS } from './limits.js';
import { clip, code, count, escClip, linesWithin, md, plain, plural, slackDate, type KnownBlock, type SlackMessage } from './text.js';

/** Health of one input of a cluster (audit source, Kubernetes API, …). Times are epoch ms UTC. */
export interface SourceHealth {
  /** e.g. `audit: cloudwatch /aws/eks/prod/cluster`, `kubernetes API`. */
  name: string;
  ok: boolean;
  /** Last error or remark, shown when not ok. */
  detail?: string;
  lastSuccess?: number | null;
}

/** One open alert as `/tokens status` lists it. */
export interface StatusAlert {
  /** Its live findings (one ServiceAccount), most severe first. */
  live: Finding[];
  severity: Severity;
  /** `chat.getPermalink` of its message, when posted and Slack answered. */
  permalink?: string;
  /** Id of the channel its message is in, when the routing rules sent it elsewhere than the cluster's channel. */
  channel?: string;
}

/** One cluster as `/tokens status` shows it. */
export interface ClusterStatus {
  name: string;
  /** Last completed poll, epoch ms UTC, or null when none yet. */
  lastPoll: number | null;
  health: SourceHealth[];
  /** Open alerts (groups) by their severity (the worst of their live findings). */
  alertsBySeverity: Record<Severity, number>;
  /** The cluster's alert channel; `error` is the Slack error seen when posting (e.g. `not_in_channel`). */
  channel?: { id: string; error?: string };
  /** Channels the routing rules send this cluster's alerts to that Slack refuses (`error` as for `channel`). */
  routedProblems?: Array<{ id: string; error: string }>;
  /** Open alerts to list, most urgent first. */
  alerts?: StatusAlert[];
  /** Extra lines under the health lines, e.g. the API-server token metrics line; plain text, escaped here. */
  notes?: string[];
}

/** Findings listed per cluster: 10 for one cluster, 5 each for several (then limited by the 50-block budget). */
const PER_CLUSTER = { single: 10, multi: 5 } as const;
const MAX_CLUSTERS = 10;

const CHANNEL_ERRORS: Record<string, string> = {
  not_in_channel: 'the bot is not in this channel; invite it with `/invite @tokenwatch`',
  channel_not_found: 'channel not found (wrong id, or a private channel the bot was not invited to)',
  is_archived: 'the channel is archived',
};

function severityCounts(s: Record<Severity, number>): string {
  return `${SEVERITY_EMOJI.critical} ${count(s.critical)} critical · ${SEVERITY_EMOJI.warning} ${count(s.warning)} warning · ${SEVERITY_EMOJI.info} ${count(s.info)} info`;
}

function alertLine(a: StatusAlert, now: number, activeWindowMs?: number): string {
  const lead = a.live[0]!;
  const label = a.permalink ? `<${a.permalink}|${escClip(subjectOf(lead), 300)}>` : code(subjectOf(lead), 300);
  const where = a.channel ? ` · in <#${escClip(a.channel, 40)}>` : '';
  return `${SEVERITY_EMOJI[a.severity]} ${a.severity} · ${label} — ${worstFact(a.live, now, activeWindowMs)} · ${signalLabels(a.live).join(' · ')}${where}`;
}

/**
 * The status reply for one or more clusters. With one cluster the header names it; with several, each gets
 * a section. Findings beyond the per-cluster limit or the block budget are summarised as "…and N more".
 */
export function statusMessage(
  clusters: readonly ClusterStatus[],
  ctx: { now: number; activeWindowMs?: number; backlog?: { depth: number; oldestEnqueuedAt: number | null } },
): SlackMessage {
  const shown = clusters.slice(0, MAX_CLUSTERS);
  const single = clusters.length === 1;
  const header = single ? `Tokenwatch status · ${shown[0]!.name}` : `Tokenwatch status · ${plural(clusters.length, 'cluster')}`;
  const blocks: KnownBlock[] = [{ type: 'header', text: plain(header, LIMITS.headerText) }];
  if (clusters.length === 0) {
    blocks.push({ type: 'section', text: md('No clusters are configured. Add one under `clusters:` in the tokenwatch config.') });
    return { text: 'Tokenwatch status: no clusters configured', blocks };
  }
  const backlog = ctx.backlog && ctx.backlog.depth > 0 ? ctx.backlog : undefined;
  if (backlog) {
    const age = backlog.oldestEnqueuedAt === null ? '' : `, the oldest queued ${slackDate(backlog.oldestEnqueuedAt, '{ago}')}`;
    blocks.push({
      type: 'context',
      elements: [md(`📬 Slack backlog: ${plural(backlog.depth, 'alert update')} waiting${age}; they go out at Slack's rates, most urgent first`, LIMITS.contextText)],
    });
  }
  // Block budget: header [+ backlog] + per cluster (section [+ divider]) + one trailing note; an alert line takes 1 block.
  const fixed = blocks.length + shown.length * 2 + 1;
  let findingBudget = Math.max(0, LIMITS.blocksPerMessage - fixed);
  const perCluster = single ? PER_CLUSTER.single : PER_CLUSTER.multi;
  const textParts: string[] = [];

  shown.forEach((c, i) => {
    const listed = (c.alerts ?? []).slice(0, Math.min(perCluster, findingBudget));
    findingBudget -= listed.length;
    const total = c.alerts?.length ?? 0;
    const lines: string[] = [];
    lines.push(`*${escClip(c.name, 200)}* · last poll ${c.lastPoll === null ? '_none yet_' : `${slackDate(c.lastPoll)} (${slackDate(c.lastPoll, '{ago}')})`}`);
    lines.push(severityCounts(c.alertsBySeverity));
    for (const h of c.health) {
      const since = h.lastSuccess ? ` · last success ${slackDate(h.lastSuccess)}` : '';
      lines.push(`${h.ok ? '✅' : '❌'} ${escClip(h.name, 600)}${!h.ok && h.detail ? `: ${escClip(h.detail, 400)}` : ''}${since}`);
    }
    for (const n of c.notes ?? []) lines.push(`📈 ${escClip(n, 600)}`);
    if (c.channel?.error) {
      const why = CHANNEL_ERRORS[c.channel.error] ?? `Slack error \`${escClip(c.channel.error, 100)}\``;
      lines.push(`⚠️ Alerts channel <#${escClip(c.channel.id, 40)}>: ${why}`);
    }
    for (const r of c.routedProblems ?? []) {
      const why = CHANNEL_ERRORS[r.error] ?? `Slack error \`${escClip(r.error, 100)}\``;
      lines.push(`⚠️ Routed alerts channel ${r.id.startsWith('#') ? escClip(r.id, 81) : `<#${escClip(r.id, 40)}>`}: ${why}`);
    }
    if (total > listed.length) lines.push(`…and ${count(total - listed.length)} more alerts not listed here`);
    blocks.push({ type: 'section', text: md(linesWithin(lines, LIMITS.sectionText)) });
    for (const a of listed) blocks.push({ type: 'section', text: md(clip(alertLine(a, ctx.now, ctx.activeWindowMs), LIMITS.sectionText)) });
    if (i < shown.length - 1) blocks.push({ type: 'divider' });
    const s = c.alertsBySeverity;
    textParts.push(`${c.name}: ${s.critical} critical, ${s.warning} warning, ${s.info} info`);
  });
  if (clusters.length > shown.length) {
    blocks.push({
      type: 'context',
      elements: [md(`…and ${count(clusters.length - shown.length)} more clusters: ask for one with \`/tokens status <cluster>\``)],
    });
  }
  return { text: clip(`Tokenwatch status — ${textParts.join('; ')}${backlog ? `; Slack backlog: ${backlog.depth}` : ''}`, 3000), blocks };
}
