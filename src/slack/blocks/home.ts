/**
 * The App Home tab (`views.publish`, a view of type `home`): the fleet's rejection calendar. Every cluster's open
 * alerts (one per root cause: a ServiceAccount's live findings, src/findings/groups.ts) ranked by days to rejection —
 * requests failing with 401 now first, then the earliest rejection date — each linking to its alert message; the open
 * approvals with who must act; each cluster's source health (audit log, API-server metrics, node probe). Pure.
 *
 * The view is published again only when it changes (`../home.ts` compares a hash of it), so it shows nothing that
 * moves on every poll (no "last poll" time, no request counts): a poll that changes no fact leaves it as it was.
 *
 * Slack's limit: at most 100 blocks in a view (docs.slack.dev/reference/views/home-tab-views). Alerts, approvals and
 * clusters beyond their share of that budget are summarised as "…and N more … not shown".
 */
import type { ActionKind, ActionTarget } from '../../approvals/index.js';
import { actionNoun } from '../../core/actions.js';
import type { ReadinessVerdict } from '../../findings/readiness.js';
import { SEVERITY_RANK, type Finding, type Severity } from '../../findings/types.js';
import { signalLabels, worstFact } from './alert.js';
import { SEVERITY_EMOJI, signalIsCurrent, subjectOf } from './finding.js';
import { LIMITS } from './limits.js';
import { clip, code, count, escClip, linesWithin, listWithin, md, mention, plain, plural, slackDate, type KnownBlock } from './text.js';

/** One open alert of a cluster, as the Home tab lists it. */
export interface HomeAlert {
  cluster: string;
  /** Its live findings (one ServiceAccount of `cluster`), most severe first. */
  live: Finding[];
  severity: Severity;
  /** `chat.getPermalink` of its message, when posted and Slack answered. */
  permalink?: string;
  /** Id of the channel its message is in, when the routing rules sent it elsewhere than the cluster's channel. */
  channel?: string;
}

/** The state of one input of a cluster: read fine, failing, not polled yet, or not configured. */
export type HomeSourceState = 'ok' | 'failing' | 'pending' | 'off';

/** One input of a cluster (audit log, API-server metrics, node probe). */
export interface HomeSource {
  /** e.g. `audit log`, `API-server metrics`, `node probe`. */
  name: string;
  state: HomeSourceState;
  /** Why it fails, or what "off" means; plain text, escaped here. */
  detail?: string;
  /** When a failing source last worked, epoch ms UTC (stable while it fails). */
  lastSuccess?: number;
}

/** A cluster's source health. */
export interface HomeCluster {
  name: string;
  sources: HomeSource[];
  /** "Is it safe to turn token extension off?" (`src/findings/readiness.ts`): the verdict and the clients that would break. */
  readiness?: { verdict: ReadinessVerdict; clients: number };
}

/** An undecided approval and who must act on it. */
export interface HomeApproval {
  action: ActionKind;
  target: ActionTarget;
  requester: string;
  /** Approvals still needed (required − given, ≥ 1). */
  needed: number;
  /** Approvers who may still vote: not voted yet, the requester excluded. */
  waitingOn: string[];
  /** The request expires at this instant, epoch ms UTC. */
  expiresAt: number;
  /** `chat.getPermalink` of the approval message, when posted. */
  permalink?: string;
}

/** Everything the Home tab shows. */
export interface HomeInput {
  /** Epoch ms UTC: days to rejection are counted from here. */
  now: number;
  /** `findings.activeWindow`, ms: 401s seen within it read "requests now fail with 401". */
  activeWindowMs?: number;
  alerts: HomeAlert[];
  clusters: HomeCluster[];
  approvals: HomeApproval[];
}

/** A Home tab view as `views.publish` takes it. */
export interface HomeView {
  type: 'home';
  blocks: KnownBlock[];
}

/** Approvals listed at most (one block each). */
export const HOME_MAX_APPROVALS = 10;
/** Sections of cluster health lines at most (each packs as many clusters as fit in 3,000 chars, up to {@link CLUSTERS_PER_SECTION}). */
export const HOME_MAX_CLUSTER_SECTIONS = 5;
const CLUSTERS_PER_SECTION = 20;

/**
 * The sort key of an alert: `[tier, time]`. Tier 0: requests fail with 401 now; tier 1: a known rejection time (a
 * past one, or the last 401 of a ServiceAccount whose 401s stopped, sorts first); tier 2: no rejection known (legacy
 * Secret tokens, no token seen). Within a tier: earlier first, then more severe.
 */
function rankKey(a: HomeAlert, now: number, activeWindowMs?: number): [number, number] {
  const unauth = a.live.filter((f) => f.kind === 'unauthorized');
  if (unauth.some((f) => signalIsCurrent(f, now, activeWindowMs))) return [0, 0];
  const times = a.live.map((f) => (f.rejectionAt ? Date.parse(f.rejectionAt) : NaN)).filter((n) => Number.isFinite(n));
  for (const f of unauth) {
    const t = Date.parse(f.lastSeen);
    if (Number.isFinite(t)) times.push(t);
  }
  if (times.length) return [1, Math.min(...times)];
  return [2, 0];
}

/**
 * Alerts in Home order: 401s now first, then by days to rejection (earliest first), then those without a rejection
 * date; ties by severity (worst first), cluster and subject. Does not modify `alerts`.
 */
export function rankAlerts(alerts: readonly HomeAlert[], now: number, activeWindowMs?: number): HomeAlert[] {
  const keyed = alerts.map((a) => ({ a, k: rankKey(a, now, activeWindowMs) }));
  keyed.sort(
    (x, y) =>
      x.k[0] - y.k[0] ||
      x.k[1] - y.k[1] ||
      SEVERITY_RANK[y.a.severity] - SEVERITY_RANK[x.a.severity] ||
      x.a.cluster.localeCompare(y.a.cluster) ||
      subjectOf(x.a.live[0]!).localeCompare(subjectOf(y.a.live[0]!)),
  );
  return keyed.map((x) => x.a);
}

function alertLine(a: HomeAlert, now: number, activeWindowMs?: number): string {
  const lead = a.live[0]!;
  const subject = lead.namespace === '*' ? 'API-server metrics (cluster-wide)' : subjectOf(lead);
  const label = a.permalink ? `<${a.permalink}|${escClip(subject, 300)}>` : code(subject, 300);
  const where = a.channel ? ` · in <#${escClip(a.channel, 40)}>` : '';
  return `${SEVERITY_EMOJI[a.severity]} ${a.severity} · *${escClip(a.cluster, 200)}* · ${label} — *${worstFact(a.live, now, activeWindowMs)}* · ${signalLabels(a.live).join(' · ')}${where}`;
}

const SOURCE_EMOJI: Record<HomeSourceState, string> = { ok: '✅', failing: '❌', pending: '⏳', off: '➖' };

function clusterLine(c: HomeCluster): string {
  const parts = c.sources.map((s) => {
    const why = s.state === 'failing' && s.detail ? `: ${escClip(s.detail, 200)}` : s.state === 'off' && s.detail ? ` (${escClip(s.detail, 100)})` : '';
    const since = s.state === 'failing' && s.lastSuccess ? ` since ${slackDate(s.lastSuccess)}` : '';
    return `${SOURCE_EMOJI[s.state]} ${escClip(s.name, 100)}${why}${since}`;
  });
  if (c.readiness) parts.push(readinessPart(c.readiness));
  return `*${escClip(c.name, 200)}* · ${parts.join(' · ')}`;
}

/** The readiness verdict in a few words; `/tokens status <cluster>` gives the window, coverage and clients. */
function readinessPart(r: { verdict: ReadinessVerdict; clients: number }): string {
  if (r.verdict === 'safe') return '✅ token extension off: safe';
  if (r.verdict === 'not-safe') return `❌ token extension off: not safe, ${plural(r.clients, 'client')} would break`;
  if (r.verdict === 'extension-already-off') return '⚠️ token extension already off: clients that cache tokens fail with 401 now';
  return '❔ token extension off: unknown';
}

function approvalLine(p: HomeApproval): string {
  const target = `${p.target.namespace}/${p.target.name}`;
  const label = p.permalink ? `<${p.permalink}|${escClip(target, 300)}>` : code(target, 300);
  const who = p.waitingOn.length ? `waiting on ${listWithin(p.waitingOn.map(mention), 10)}` : '*nobody left who may approve*';
  return `⏳ *${escClip(p.target.cluster, 200)}* · ${actionNoun(p.action)} of ${p.target.kind} ${label} — requested by ${mention(p.requester)}; ${plural(p.needed, 'more approval')} needed, ${who} · expires ${slackDate(p.expiresAt)}`;
}

/** Cluster health lines packed into sections of at most 3,000 chars and {@link CLUSTERS_PER_SECTION} lines. */
function packLines(lines: readonly string[], maxSections: number): { sections: string[]; shown: number } {
  const sections: string[] = [];
  let cur: string[] = [];
  let len = 0;
  let shown = 0;
  for (const l of lines) {
    const line = clip(l, LIMITS.sectionText);
    if (cur.length && (cur.length >= CLUSTERS_PER_SECTION || len + 1 + line.length > LIMITS.sectionText)) {
      sections.push(cur.join('\n'));
      cur = [];
      len = 0;
      if (sections.length >= maxSections) break;
    }
    cur.push(line);
    len += (cur.length > 1 ? 1 : 0) + line.length;
    shown++;
  }
  if (cur.length && sections.length < maxSections) sections.push(cur.join('\n'));
  else if (cur.length) shown -= cur.length;
  return { sections, shown };
}

/**
 * The Home tab view: header, alerts ranked by days to rejection (one section each, linked to the alert message),
 * open approvals with who must act, and the clusters' source health (clusters with a failing source first). Never
 * more than {@link LIMITS.viewBlocks} blocks: what does not fit is counted in "…and N more … not shown".
 */
export function homeView(input: HomeInput): HomeView {
  const { now, activeWindowMs } = input;
  const alerts = rankAlerts(input.alerts, now, activeWindowMs);
  const approvals = [...input.approvals].sort((a, b) => a.expiresAt - b.expiresAt || a.target.cluster.localeCompare(b.target.cluster));
  const failing = (c: HomeCluster) => c.sources.some((s) => s.state === 'failing');
  const clusters = [...input.clusters].sort((a, b) => Number(failing(b)) - Number(failing(a)) || a.name.localeCompare(b.name));

  const bySeverity: Record<Severity, number> = { critical: 0, warning: 0, info: 0 };
  for (const a of alerts) bySeverity[a.severity]++;
  const clustersWithAlerts = new Set(alerts.map((a) => a.cluster)).size;
  const failingClusters = clusters.filter(failing).length;

  // Fixed blocks: header, summary, and per part (alerts, approvals, sources) a header and a possible "more" line,
  // plus two dividers.
  const health = packLines(clusters.map(clusterLine), HOME_MAX_CLUSTER_SECTIONS);
  const approvalsShown = approvals.slice(0, HOME_MAX_APPROVALS);
  const fixed = 2 + 3 * 2 + 2;
  const alertBudget = Math.max(0, LIMITS.viewBlocks - fixed - Math.max(1, approvalsShown.length) - Math.max(1, health.sections.length));
  const alertsShown = alerts.slice(0, alertBudget);

  const blocks: KnownBlock[] = [];
  blocks.push({ type: 'header', text: plain('Tokenwatch · rejection calendar', LIMITS.headerText) });
  const summary = alerts.length
    ? `${SEVERITY_EMOJI.critical} ${count(bySeverity.critical)} critical · ${SEVERITY_EMOJI.warning} ${count(bySeverity.warning)} warning · ${SEVERITY_EMOJI.info} ${count(bySeverity.info)} info — ${plural(alerts.length, 'open alert')} in ${plural(clustersWithAlerts, 'cluster')} of ${count(clusters.length)}`
    : `No open alerts in ${plural(clusters.length, 'cluster')}.`;
  blocks.push({ type: 'context', elements: [md(`${summary}${failingClusters ? ` · ❌ ${plural(failingClusters, 'cluster')} with a failing source` : ''}`)] });

  blocks.push({ type: 'header', text: plain('Alerts by days to rejection', LIMITS.headerText) });
  if (alerts.length === 0) blocks.push({ type: 'section', text: md('✅ No open alerts: no client holds a token the API server rejects or will reject.') });
  for (const a of alertsShown) blocks.push({ type: 'section', text: md(clip(alertLine(a, now, activeWindowMs), LIMITS.sectionText)) });
  if (alerts.length > alertsShown.length) {
    const rest = alerts.slice(alertsShown.length);
    const crit = rest.filter((a) => a.severity === 'critical').length;
    blocks.push({ type: 'context', elements: [md(`…and ${count(rest.length)} more alerts not shown${crit ? ` (${count(crit)} critical)` : ''}: ask for a cluster's with \`/tokens status <cluster>\` in its channel`)] });
  }

  blocks.push({ type: 'divider' });
  blocks.push({ type: 'header', text: plain('Open approvals', LIMITS.headerText) });
  if (approvals.length === 0) blocks.push({ type: 'section', text: md('No approval is waiting for a vote.') });
  for (const p of approvalsShown) blocks.push({ type: 'section', text: md(clip(approvalLine(p), LIMITS.sectionText)) });
  if (approvals.length > approvalsShown.length) blocks.push({ type: 'context', elements: [md(`…and ${count(approvals.length - approvalsShown.length)} more open approvals not shown`)] });

  blocks.push({ type: 'divider' });
  blocks.push({ type: 'header', text: plain('Sources', LIMITS.headerText) });
  if (clusters.length === 0) blocks.push({ type: 'section', text: md('No cluster is configured.') });
  for (const s of health.sections) blocks.push({ type: 'section', text: md(linesWithin(s.split('\n'), LIMITS.sectionText)) });
  if (clusters.length > health.shown) blocks.push({ type: 'context', elements: [md(`…and ${count(clusters.length - health.shown)} more clusters not shown (all listed ones with a failing source come first)`)] });

  return { type: 'home', blocks };
}
