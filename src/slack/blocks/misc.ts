/**
 * Smaller replies: `/tokens help`, unknown command, `/tokens history`, refusals, and the Details thread reply
 * (tokens and evidence of a finding). Pure.
 */
import { ignoredTimesText, type IgnoredEventTimes } from '../../findings/clock-skew.js';
import type { Finding, FindingToken, Severity, TokenRecord } from '../../findings/types.js';
import type { ActionKind, ActionTarget, ApprovalState } from '../../approvals/machine.js';
import { actionNoun } from '../../core/actions.js';
import { causeText, SEVERITY_EMOJI, subjectOf } from './finding.js';
import { LIMITS } from './limits.js';
import { clip, code, count, escapeMrkdwn, escClip, linesWithin, listWithin, md, mention, plain, plural, slackDate, sparkline, type KnownBlock, type SlackMessage } from './text.js';

/** The subcommands of `/tokens` with one-line descriptions (help and unknown-command replies). */
export const SUBCOMMANDS: ReadonlyArray<{ usage: string; what: string }> = [
  { usage: 'status [cluster]', what: 'last poll, source health and open findings (all clusters without a name)' },
  { usage: 'scan <cluster>', what: 'poll the audit log of a cluster now' },
  { usage: 'history <cluster>', what: 'recent actions: who requested, who approved, what happened' },
  { usage: 'help', what: 'this message' },
];

/** `/tokens help`. `clusters` = configured cluster names, listed when given. */
export function helpMessage(clusters: readonly string[] = []): SlackMessage {
  const lines = SUBCOMMANDS.map((s) => `• \`/tokens ${s.usage}\`: ${s.what}`);
  const blocks: KnownBlock[] = [
    { type: 'header', text: plain('tokenwatch: stale ServiceAccount tokens', LIMITS.headerText) },
    {
      type: 'section',
      text: md(
        `tokenwatch reads the API-server audit log, finds ServiceAccount clients that use stale or legacy tokens, and fixes them with approved restarts.\n${lines.join('\n')}`,
      ),
    },
    {
      type: 'context',
      elements: [
        md(
          'Buttons on an alert request an action; a second person on the approver list must approve it before anything changes. Requests expire if nobody decides.',
        ),
      ],
    },
  ];
  if (clusters.length) {
    blocks.push({
      type: 'context',
      elements: [md(`Clusters: ${listWithin(clusters.slice(0, 20).map((c) => code(c, 100)), 20, ', ', clusters.length)}`)],
    });
  }
  return { text: `tokenwatch help: ${SUBCOMMANDS.map((s) => `/tokens ${s.usage}`).join(', ')}`, blocks };
}

/**
 * Reply to an unknown subcommand or cluster: says what was not understood and what exists.
 * @param problem e.g. `{ kind: 'cluster', value: 'prdo' }` or `{ kind: 'subcommand', value: 'restart' }`.
 */
export function unknownCommandMessage(problem: { kind: 'cluster' | 'subcommand'; value: string }, clusters: readonly string[]): SlackMessage {
  const known =
    problem.kind === 'cluster'
      ? clusters.length
        ? `Known clusters: ${listWithin(clusters.slice(0, 20).map((c) => code(c, 100)), 20, ', ', clusters.length)}.`
        : 'No clusters are configured.'
      : `Subcommands: ${SUBCOMMANDS.map((s) => `\`${s.usage}\``).join(', ')}.`;
  const line = `🤔 Unknown ${problem.kind} ${code(problem.value, 100)}. ${known}`;
  return {
    text: clip(`Unknown ${problem.kind} "${problem.value}". ${known.replace(/`/g, '')}`, 3000),
    blocks: [{ type: 'section', text: md(line) }],
  };
}

/** An ephemeral refusal ("You requested this restart, so someone else must approve it…"). `reason` is mrkdwn. */
export function refusalMessage(reason: string): SlackMessage {
  return { text: clip(`⛔ ${reason}`, 3000), textFormat: 'mrkdwn', blocks: [{ type: 'section', text: md(`⛔ ${reason}`) }] };
}

/** One row of `/tokens history`. Times are epoch ms UTC. */
export interface HistoryEntry {
  at: number;
  action: ActionKind;
  target: ActionTarget;
  requester: string;
  approvers: string[];
  state: ApprovalState;
  /** e.g. the error of a failed action or a reject reason. */
  detail?: string;
  /** Who rejected it (state `rejected`); the requester themself means the request was withdrawn. */
  rejectedBy?: string;
}

const STATE_EMOJI: Record<ApprovalState, string> = {
  requested: '🔐',
  approved: '✅',
  running: '⏳',
  succeeded: '✅',
  failed: '❌',
  rejected: '❌',
  expired: '⌛',
};

/** `/tokens history <cluster>`: most recent first as given; long histories are split over sections and cut with "…and N more". */
export function historyMessage(cluster: string, entries: readonly HistoryEntry[], _ctx: { now: number }): SlackMessage {
  const blocks: KnownBlock[] = [{ type: 'header', text: plain(`History · ${cluster}`, LIMITS.headerText) }];
  if (entries.length === 0) {
    blocks.push({ type: 'section', text: md(`No actions yet in *${escClip(cluster, 200)}*.`) });
    return { text: `tokenwatch history for ${cluster}: no actions yet`, blocks };
  }
  const shown = entries.slice(0, 100);
  const lines = shown.map((e) => {
    const approved = e.approvers.length ? `, approved by ${listWithin(e.approvers.slice(0, 3).map(mention), 3, ', ', e.approvers.length)}` : '';
    const detail = e.detail ? `: ${escClip(e.detail, 300)}` : '';
    const withdrawn = e.state === 'rejected' && e.rejectedBy !== undefined && e.rejectedBy === e.requester;
    const state = withdrawn
      ? '*withdrawn* by the requester'
      : e.state === 'rejected' && e.rejectedBy !== undefined
        ? `*rejected* by ${mention(e.rejectedBy)}`
        : `*${e.state}*`;
    return `${withdrawn ? '↩️' : STATE_EMOJI[e.state]} ${slackDate(e.at)} *${actionNoun(e.action)}* ${escapeMrkdwn(e.target.kind)} ${code(`${e.target.namespace}/${e.target.name}`, 200)} by ${mention(e.requester)}${approved} · ${state}${detail}`;
  });
  // Up to 5 sections of whole lines; the rest is summarised.
  let i = 0;
  for (let s = 0; s < 5 && i < lines.length; s++) {
    let chunk = '';
    while (i < lines.length) {
      const next = chunk ? `${chunk}\n${lines[i]}` : lines[i]!;
      if (next.length > LIMITS.sectionText - 40) break;
      chunk = next;
      i++;
    }
    if (!chunk) {
      chunk = clip(lines[i]!, LIMITS.sectionText);
      i++;
    }
    blocks.push({ type: 'section', text: md(chunk) });
  }
  if (entries.length > i) blocks.push({ type: 'context', elements: [md(`…and ${count(entries.length - i)} more`)] });
  return { text: `tokenwatch history for ${cluster}: ${plural(entries.length, 'action')}`, blocks };
}

type AnyToken = TokenRecord | FindingToken;

interface TokenRow {
  pod: string | null;
  node: string | null;
  warnAfter: number | null;
  rejectionAt: number | null;
  requests: number;
  lastSeen: number;
}

function toRow(t: AnyToken): TokenRow {
  if (typeof t.lastSeen === 'number') {
    const r = t as TokenRecord;
    return { pod: r.pod ?? null, node: r.node ?? null, warnAfter: r.warnAfter ?? null, rejectionAt: r.rejectionAt ?? null, requests: r.requests, lastSeen: r.lastSeen };
  }
  const f = t as FindingToken;
  const ms = (s: string | null) => (s ? Date.parse(s) : null);
  return { pod: f.pod, node: f.node, warnAfter: ms(f.warnAfter), rejectionAt: ms(f.rejectionAt), requests: f.requests, lastSeen: Date.parse(f.lastSeen) };
}

/** `🟠 warning`, or `🟠 alert warning (this signal: info)` when the alert's severity differs from the finding's. */
function severityOfAlert(own: Severity, alert: Severity | undefined): string {
  const sev = alert ?? own;
  return sev === own ? `${SEVERITY_EMOJI[sev]} ${sev}` : `${SEVERITY_EMOJI[sev]} alert ${sev} (this signal: ${own})`;
}

/**
 * The Details thread reply: every token (pod, node, warnAfter, rejection, requests, last seen), the cause
 * evidence, source IPs, user agents and pods missing from cluster state. `tokens` defaults to `finding.tokens`;
 * the live store's TokenRecords may be passed instead. `ctx.ignoredEventTimes`: the token uses the
 * cluster's last poll left out for a timestamp past the host clock plus 24 h (`src/findings/clock-skew.ts`), one line
 * naming them and their audit source. `ctx.alertSeverity`: the severity of the alert this finding is a
 * signal of (its worst live finding's); the severity shown is the alert's, with this signal's own beside it when it
 * differs, so Details never shows a colour the alert does not.
 */
export function detailsMessage(
  finding: Finding,
  tokens: readonly AnyToken[] = finding.tokens,
  ctx: { now: number; hourly?: Record<string, number>; alertSeverity?: Severity; ignoredEventTimes?: IgnoredEventTimes } = { now: 0 },
): SlackMessage {
  const f = finding;
  const blocks: KnownBlock[] = [
    { type: 'header', text: plain(`🔎 Details · ${f.cluster} · ${subjectOf(f)} · ${f.kind}`, LIMITS.headerText) },
    { type: 'section', text: md(causeText(f)) },
  ];
  if (ctx.hourly) {
    const s = sparkline(ctx.hourly, ctx.now);
    blocks.push({ type: 'context', elements: [md(`Requests per hour, last 24 h: \`${s.line}\` (max ${count(s.max)}/h, ${count(s.total)} total; ${plural(f.requests, 'request')} in all)`)] });
  }
  const rows = tokens.map(toRow).sort((a, b) => b.lastSeen - a.lastSeen);
  const tokenLines = rows.slice(0, 200).map((r) => {
    const parts = [r.pod ? code(r.pod, 100) : '_no pod (legacy or unattributed)_'];
    if (r.node) parts.push(`on ${code(r.node, 100)}`);
    if (r.warnAfter !== null) parts.push(`stale since ${slackDate(r.warnAfter)}`);
    if (r.rejectionAt !== null) parts.push(`rejected from ${slackDate(r.rejectionAt)}`);
    parts.push(`${plural(r.requests, 'request')}, last ${slackDate(r.lastSeen)}`);
    return `• ${parts.join(' · ')}`;
  });
  blocks.push({
    type: 'section',
    text: md(
      `*${plural(rows.length, 'token')}*\n${tokenLines.length ? linesWithin(tokenLines, LIMITS.sectionText - 40, (n) => `…and ${count(n + (rows.length - tokenLines.length))} more`) : '_none_'}`,
    ),
  });
  const evidence = f.cause.evidence.map((e) => `• ${escClip(e, 500)}`);
  blocks.push({
    type: 'section',
    text: md(`*Evidence* (cause ${code(f.cause.id, 40)})\n${evidence.length ? linesWithin(evidence, LIMITS.sectionText - 60) : '_none recorded_'}`),
  });
  const fields: string[] = [
    `*Source IPs*\n${f.sourceIPs.length ? listWithin(f.sourceIPs.slice(0, 20).map((ip) => code(ip, 60)), 20, ', ', f.sourceIPs.length) : '_none_'}`,
    `*User agents*\n${f.userAgents.length ? listWithin(f.userAgents.slice(0, 10).map((u) => code(u, 150)), 10, '\n', f.userAgents.length) : '_none_'}`,
    `*Pods*\n${f.pods.length ? listWithin(f.pods.slice(0, 30).map((p) => code(p, 80)), 30, ', ', f.pods.length) : '_none_'}`,
  ];
  if (f.forwardedIPs?.length) {
    // Client-set X-Forwarded-For / X-Real-Ip values: shown so a forgery is visible, never used to attribute.
    fields.push(
      `*Forwarded-for entries (client-set, ignored)*\n${listWithin(f.forwardedIPs.slice(0, 20).map((ip) => code(ip, 60)), 20, ', ', f.forwardedIPs.length)}`,
    );
  }
  if (f.missingPods?.length) {
    fields.push(`*Not in cluster state*\n${listWithin(f.missingPods.slice(0, 30).map((p) => code(p, 80)), 30, ', ', f.missingPods.length)}`);
  }
  blocks.push({ type: 'section', fields: fields.map((t) => md(clip(t, LIMITS.sectionFieldText), LIMITS.sectionFieldText)) });
  if (ctx.ignoredEventTimes) {
    // Left out of this cluster's last poll: not in the counts, dates or rejection estimates above.
    blocks.push({ type: 'context', elements: [md(`⚠️ Audit timestamps inconsistent: ${escClip(ignoredTimesText(ctx.ignoredEventTimes), 600)}`)] });
  }
  blocks.push({
    type: 'context',
    elements: [md(`${severityOfAlert(f.severity, ctx.alertSeverity)} · ${f.kind} · finding ${code(f.id, 100)}${f.clusterState ? ` · ⚠️ ${escClip(f.clusterState, 300)}` : ''}`)],
  });
  return { text: clip(`Details for ${subjectOf(f)} in ${f.cluster} (${ctx.alertSeverity ?? f.severity}): ${plural(rows.length, 'token')}, ${plural(f.requests, 'request')}`, 3000), blocks };
}
