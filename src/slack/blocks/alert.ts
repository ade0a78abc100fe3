/**
 * The alert of one root cause: one Slack message for every signal of one ServiceAccount of one cluster (its
 * stale-token, unauthorized and legacy-token findings, with node-probe and API-server-metrics evidence), posted once
 * and edited only when something a reader sees changed (docs/slack.md "Alerts"). Pure.
 *
 * Before the buttons it fits about ten lines: a header saying the worst fact in words, one sentence of impact with the
 * signals named, four fields (workload; pods live/gone; rejection; requests) and the fix in one line. Counts are
 * bucketed ({@link bucket}) so a new use does not change the message; exact figures, the cause's explanation, sources,
 * sparkline, pod lists and finding ids are in Details. The one primary button is the fix for this cause (restart of
 * the workload, labelled with what it buys); Recreate ServiceAccount, Snooze and Details are in the overflow menu.
 */
import type { types } from '@slack/bolt';
import type { WorkloadRef } from '../../cluster/types.js';
import { objectLabel } from '../../core/actions.js';
import { DAY_MS, HOUR_MS } from '../../core/units.js';
import { isCredentialEventFinding } from '../../findings/cluster-events.js';
import { FINDING_KIND_ORDER, worstSeverity } from '../../findings/groups.js';
import type { Finding, FindingKind } from '../../findings/types.js';
import { ACTION_IDS, opaqueId } from './ids.js';
import { LIMITS } from './limits.js';
import { daysLeft, SEVERITY_EMOJI, SEVERITY_LABEL, signalIsCurrent, subjectOf, type FindingAction } from './finding.js';
import { clip, code, count, escClip, md, plain, plural, slackDate, type Button, type KnownBlock, type SlackMessage } from './text.js';

/** What each signal is called on an alert. */
export const SIGNAL_LABEL: Readonly<Record<FindingKind, string>> = {
  'stale-token': 'stale tokens',
  unauthorized: 'requests rejected with 401',
  'legacy-token': 'legacy Secret token',
  'cluster-credential': 'tokens refused across the cluster',
};

/** One overflow-menu entry: its label and the opaque id its click carries. */
export interface OverflowEntry {
  action: Exclude<FindingAction['action'], 'restart'>;
  label: string;
  id: string;
}

/**
 * One restart button: the workload, the opaque id, and the days a fresh token buys (null when unknown). `stopGap`:
 * the restart is known not to fix the cause (see {@link StopGap}), so its label says it will recur.
 */
export interface RestartEntry {
  workload: WorkloadRef;
  id: string;
  buysDays: number | null;
  stopGap?: boolean;
}

/**
 * Why a restart is known to be a stop-gap for an alert, not its fix: a restart of it was followed by a
 * `recurrence` (a token issued after it went stale again; `at` = when that was concluded, epoch ms UTC), or the
 * node probe found the ServiceAccount's token copied into a file on a node (`copied-token`: the file keeps a copy
 * that goes stale again, cause `static-token-file`).
 */
export interface StopGap {
  reason: 'recurrence' | 'copied-token';
  at?: number;
}

/**
 * The state now of a resolved alert (src/slack/notifier.ts reads it when rendering the resolved variant). Times are
 * epoch ms UTC.
 */
export interface ResolvedState {
  /** When it was resolved. */
  at: number;
  /** Why (the resolution note: verified, or quiet). */
  note: string;
  /**
   * The verified action that fixed it: what (e.g. `restart of DaemonSet logging/fluent-bit`) and when it started.
   * Absent when it resolved as quiet (nothing tokenwatch did).
   */
  fix?: { label: string; at: number };
  /**
   * The ServiceAccount's pods running now, from cluster state read at render time: `running` of them, `fresh` of
   * which started after `fix.at` (their tokens were issued after the fix). Absent when cluster state was not read.
   */
  pods?: { running: number; fresh: number };
}

/** Context of {@link alertView}. Times are epoch ms UTC. */
export interface AlertContext {
  now: number;
  /** Restart buttons, the first one primary (empty when there is no restartable workload or it is not allowed). */
  restarts: readonly RestartEntry[];
  /** Overflow menu entries (Recreate only where recreating is a fix; Snooze; Details). */
  overflow: readonly OverflowEntry[];
  /**
   * Set when no signal is live any more: the resolved variant (✅ header, the state now: pods running now and their
   * tokens, what fixed it and when; only Details in its menu).
   */
  resolved?: ResolvedState;
  /** Set when a restart is known to be a stop-gap (see {@link StopGap}); the node probe's observation is also read from the findings. */
  stopGap?: StopGap;
  snoozedUntil?: number;
  /** Pods the ServiceAccount's workloads run (desired), when known. */
  podsTotal?: number;
  /** `findings.activeWindow`, ms (see `signalIsCurrent`). */
  activeWindowMs?: number;
}

/**
 * A count rounded down to 1, 2 or 5 × 10ⁿ and shown as "n+" (`137` → `100+`, `6` → `5+`, `0` → `0`): a reader can act
 * on it, and one more use rarely changes it. Exact counts are in Details.
 */
export function bucket(n: number): string {
  if (!Number.isFinite(n) || n <= 0) return '0';
  if (n === 1) return '1';
  const p = 10 ** Math.floor(Math.log10(n));
  const step = n >= 5 * p ? 5 * p : n >= 2 * p ? 2 * p : p;
  return `${count(step)}${step === n ? '' : '+'}`;
}

/** Days of validity a fresh token buys: `rejectionAt − warnAfter` of the findings' stale tokens (whole days), or null. */
export function buysDays(members: readonly Finding[]): number | null {
  for (const f of members) {
    for (const t of f.tokens) {
      if (!t.warnAfter || !t.rejectionAt) continue;
      const d = Math.round((Date.parse(t.rejectionAt) - Date.parse(t.warnAfter)) / DAY_MS);
      if (Number.isFinite(d) && d > 0) return d;
    }
  }
  return null;
}

/** The earliest rejection time of the members, epoch ms, or null. */
function earliestRejection(members: readonly Finding[]): number | null {
  const at = members.map((f) => (f.rejectionAt ? Date.parse(f.rejectionAt) : NaN)).filter((n) => Number.isFinite(n));
  return at.length ? Math.min(...at) : null;
}

/** Header fact of an alert whose only signal is 401s tied to it by source address and user agent alone. */
export const UNCONFIRMED_401_FACT = '401s from its address, not confirmed';

/** A 401 finding attributed by source address and user agent alone (`Finding.attribution`, src/findings/build.ts). */
function isAddressOnly401(f: Finding): boolean {
  return f.kind === 'unauthorized' && f.attribution?.basis === 'address-only';
}

/**
 * The 401 finding that may say requests fail: not a cluster-level credential event, and named in its audit events or
 * corroborated — 401s tied to the ServiceAccount by address and user agent alone can be sent by anyone who can
 * connect from that address, so they never make an alert say its requests fail.
 */
function attributed401(live: readonly Finding[]): Finding | undefined {
  return live.find((f) => f.kind === 'unauthorized' && !isCredentialEventFinding(f) && !isAddressOnly401(f));
}

/**
 * The worst fact of the live signals, in words, for the header ("requests now fail with 401", "rejected in 12 days";
 * in the last day "rejected in 5 hours", then "rejected in under an hour").
 */
export function worstFact(live: readonly Finding[], now: number, activeWindowMs?: number): string {
  if (live.some(isClusterCredential)) return 'tokens refused across the cluster';
  // 401s of a cluster-level credential event (signing-key rotation, issuer change) recovered on their own: not this
  // client's fault, so they are named last (src/findings/cluster-events.ts).
  const unauth = attributed401(live);
  if (unauth && signalIsCurrent(unauth, now, activeWindowMs)) return 'requests now fail with 401';
  const rej = earliestRejection(live);
  if (rej !== null && rej <= now) return 'rejection date passed';
  if (unauth) return 'requests failed with 401';
  if (live.some(isAddressOnly401) && !live.some((f) => f.kind !== 'unauthorized')) return UNCONFIRMED_401_FACT;
  if (rej !== null) {
    const left = daysLeft({ rejectionAt: new Date(rej).toISOString() }, now) ?? 0;
    if (left >= 1) return `rejected in ${plural(left, 'day')}`;
    // The last day in hours: "rejected in 0 days" read as if it had already happened.
    const hours = Math.floor((rej - now) / HOUR_MS);
    return hours >= 1 ? `rejected in ${plural(hours, 'hour')}` : 'rejected in under an hour';
  }
  if (live.some((f) => f.kind === 'legacy-token')) return 'legacy Secret token in use';
  if (live.some((f) => f.kind === 'stale-token')) return 'stale tokens in use';
  if (live.some((f) => isCredentialEventFinding(f))) return '401s stopped with a credential change';
  return 'stale tokens in use';
}

/** Signals named on the alert: one per live kind, plus the node probe when it saw the token file. */
export function signalLabels(live: readonly Finding[]): string[] {
  const out = FINDING_KIND_ORDER.filter((k) => live.some((f) => f.kind === k && !(k === 'unauthorized' && isCredentialEventFinding(f)))).map((k) => SIGNAL_LABEL[k]);
  if (live.some((f) => isCredentialEventFinding(f))) out.push('401s that stopped with a credential change');
  if (live.some((f) => f.cause.evidence.some((e) => e.startsWith('node probe')))) out.push('token file seen by the node probe');
  if (live.some((f) => (f.namespace === '*' && !isClusterCredential(f)) || f.cause.evidence.some((e) => /API.server (token )?metrics/i.test(e)))) out.push('API-server metrics');
  return out;
}

function impact(live: readonly Finding[], subject: string, cluster: string, now: number, activeWindowMs?: number): string {
  // The cluster-level 401 finding (src/findings/cluster-events.ts): the cluster's doing, not a client's.
  const clusterWide = live.find(isClusterCredential);
  if (clusterWide) return `${escClip(clusterWide.cause.summary, 400)} in *${escClip(cluster, 200)}*: nothing of these clients to restart.`;
  // A cluster-level finding from API-server metrics (namespace `*`) names no ServiceAccount: say what is known.
  if (live.every((f) => f.namespace === '*')) {
    return `API-server metrics show stale tokens in use in *${escClip(cluster, 200)}*; no audit event names the clients (exact figures in Details).`;
  }
  const who = `Clients of ServiceAccount ${code(subject, 300)} in *${escClip(cluster, 200)}*`;
  const fact = worstFact(live, now, activeWindowMs);
  const event = live.some((f) => isCredentialEventFinding(f))
    ? ' Its 401s were part of a cluster-level event (signing-key rotation or issuer change) and stopped on their own: nothing of this client to restart for them.'
    : '';
  return `${impactOf(fact, who)}${event}`;
}

function impactOf(fact: string, who: string): string {
  if (fact === 'requests now fail with 401') return `${who} are being refused by the API server now.`;
  if (fact === 'rejection date passed') return `${who} hold tokens past their rejection date.`;
  if (fact === 'requests failed with 401') return `${who} were refused by the API server; none since.`;
  if (fact.startsWith('rejected in')) return `${who} use tokens the API server will reject in *${fact.slice('rejected in '.length)}*.`;
  if (fact === 'legacy Secret token in use') return `${who} authenticate with a long-lived legacy Secret token.`;
  if (fact === '401s stopped with a credential change') return `${who} were refused while the cluster's credentials changed.`;
  if (fact === UNCONFIRMED_401_FACT) return `${who}: requests rejected with 401 came from their source address and user agent, which anyone who can connect from there can send; nothing confirms they were theirs (see below).`;
  return `${who} use stale tokens.`;
}

function workloadField(members: readonly Finding[]): string {
  if (members.some(isClusterCredential)) return '*Workload*\nnone: the API server refused the tokens, not one client';
  if (members.every((f) => f.namespace === '*')) return '*Workload*\nunknown: the metrics name no client';
  const seen = new Map<string, WorkloadRef>();
  for (const f of members) for (const w of f.workloads) seen.set(`${w.kind}/${w.namespace}/${w.name}`, w);
  const ws = [...seen.values()];
  if (!ws.length) return '*Workload*\n_none found in cluster state_';
  const first = `${escClip(ws[0]!.kind, 40)} ${code(`${ws[0]!.namespace}/${ws[0]!.name}`, 120)}`;
  return `*${ws.length === 1 ? 'Workload' : 'Workloads'}*\n${first}${ws.length > 1 ? ` +${count(ws.length - 1)} more` : ''}`;
}

/** Live and gone pods of the members: live = seen in audit events and in cluster state; gone = absent from it. */
export function podCounts(members: readonly Finding[]): { live: number; gone: number } {
  const gone = new Set(members.flatMap((f) => f.missingPods ?? []));
  const all = new Set(members.flatMap((f) => f.pods));
  let live = 0;
  for (const p of all) if (!gone.has(p)) live++;
  return { live, gone: [...gone].filter((p) => all.has(p)).length };
}

function podsField(members: readonly Finding[], podsTotal: number | undefined): string {
  // 401s carry no pod claim (the token was rejected before it was read): say so rather than "0 live".
  if (members.every((f) => (f.kind === 'unauthorized' || f.kind === 'cluster-credential') && f.pods.length === 0)) return '*Pods*\nunknown: rejected requests name no pod';
  const { live, gone } = podCounts(members);
  const liveText = podsTotal !== undefined ? `${count(Math.min(live, podsTotal))} of ${count(podsTotal)} live` : `${count(live)} live`;
  return `*Pods*\n${liveText}${gone ? ` · ${count(gone)} gone` : ''}`;
}

/**
 * The Pods field of a resolved alert: the ServiceAccount's pods running now and their tokens — "6 with fresh tokens"
 * when every one started after the fix; the pods seen with stale tokens before (gone now) are only in Details.
 */
function podsNowField(r: ResolvedState | undefined): string {
  const p = r?.pods;
  if (!p) return '*Pods now*\nunknown: cluster state not read';
  if (p.running === 0) return '*Pods now*\nnone running';
  if (!r?.fix) return `*Pods now*\n${plural(p.running, 'pod')} running; no stale token use in the quiet period`;
  const older = p.running - p.fresh;
  const fresh = p.fresh ? `${plural(p.fresh, 'pod')} with fresh tokens` : '';
  const rest = older ? `${count(older)} started before the fix, no stale token use since` : '';
  return `*Pods now*\n${[fresh, rest].filter(Boolean).join(' · ')}`;
}

/** The Fixed field of a resolved alert: what fixed it and when, or that it went quiet with nothing done by tokenwatch. */
function fixedField(members: readonly Finding[], r: ResolvedState | undefined): string {
  if (r?.fix) return `*Fixed*\n${escClip(r.fix.label, 200)}, ${slackDate(r.fix.at, '{date_short_pretty} {time}')}`;
  const last = Math.max(...members.map((f) => Date.parse(f.lastSeen)).filter((n) => Number.isFinite(n)));
  return `*Fixed*\nno action by tokenwatch; quiet${Number.isFinite(last) ? ` since ${slackDate(shownTime(last), '{date_short_pretty}')}` : ''}`;
}

/** The Before field of a resolved alert: the requests seen before it resolved (bucketed), and the last one. */
function beforeField(members: readonly Finding[]): string {
  return requestsField(members, Number.POSITIVE_INFINITY).replace('*Requests*', '*Before*');
}

function rejectionField(live: readonly Finding[], now: number, activeWindowMs?: number): string {
  const unauth = attributed401(live) ?? live.find(isClusterCredential);
  if (unauth && signalIsCurrent(unauth, now, activeWindowMs)) return '*Rejection*\n*Now*: requests fail with 401';
  const rej = earliestRejection(live);
  if (rej !== null) return `*Rejection*\n${slackDate(shownTime(rej), '{date_short_pretty}')} (${rej <= now ? '*passed*' : `*${plural(daysLeft({ rejectionAt: new Date(rej).toISOString() }, now) ?? 0, 'day')} left*`})`;
  if (unauth) return `*Rejection*\n401s until ${slackDate(shownTime(Date.parse(unauth.lastSeen)), '{date_short_pretty}')}; none since`;
  if (live.some((f) => f.kind === 'legacy-token')) return '*Rejection*\nnone: a legacy Secret token does not expire';
  if (live.some((f) => isCredentialEventFinding(f))) return '*Rejection*\n401s stopped with the cluster-level event';
  if (live.some(isAddressOnly401)) return '*Rejection*\nunknown: the 401s are not confirmed to be its requests';
  return '*Rejection*\nunknown: no token of it was seen';
}

function requestsField(members: readonly Finding[], now: number, activeWindowMs?: number): string {
  const parts: string[] = [];
  for (const k of FINDING_KIND_ORDER) {
    const n = members.filter((f) => f.kind === k).reduce((a, f) => a + f.requests, 0);
    if (!members.some((f) => f.kind === k)) continue;
    parts.push(k === 'unauthorized' || k === 'cluster-credential' ? `${bucket(n)} rejected` : k === 'stale-token' ? `${bucket(n)} with stale tokens` : `${bucket(n)} with the legacy token`);
  }
  const current = members.some((f) => signalIsCurrent(f, now, activeWindowMs));
  const last = Math.max(...members.map((f) => Date.parse(f.lastSeen)).filter((n) => Number.isFinite(n)));
  const when = current ? 'still coming in' : Number.isFinite(last) ? `last ${slackDate(shownTime(last), '{date_short_pretty}')}` : '';
  return `*Requests*\n${parts.join(' · ')}${when ? `\n${when}` : ''}`;
}

/** The cluster-level 401 finding of a credential event (kind `cluster-credential`, namespace `*`). */
function isClusterCredential(f: Pick<Finding, 'kind'>): boolean {
  return f.kind === 'cluster-credential';
}

/** The first sentence of a text (up to `max` chars). */
function firstSentence(s: string, max: number): string {
  const m = /^(.+?[.!?])(\s|$)/s.exec(s.trim());
  return clip(m ? m[1]! : s.trim(), max);
}

/**
 * The label of a restart button: "Restart DaemonSet kube-multus-ds — buys 90 days" (≤ 75 chars); for a stop-gap
 * ({@link StopGap}) "Restart DaemonSet kube-multus-ds — buys 90 days, will recur".
 */
export function restartLabel(r: Pick<RestartEntry, 'workload' | 'buysDays' | 'stopGap'>): string {
  const recur = r.stopGap ? ', will recur' : '';
  const tail = r.buysDays !== null ? ` — buys ${plural(r.buysDays, 'day')}${recur}` : r.stopGap ? ' — stop-gap, will recur' : '';
  const head = `Restart ${r.workload.kind} `;
  return `${head}${clip(r.workload.name, LIMITS.buttonText - head.length - tail.length)}${tail}`;
}

/** The finding whose cause names the alert's fix: a copied token file's, else the stale tokens', else the first. */
function causeFinding(live: readonly Finding[]): Finding | undefined {
  return live.find((f) => f.cause.id === 'static-token-file') ?? live.find((f) => f.kind === 'stale-token' && f.cause.id !== 'unknown') ?? live[0];
}

/** Whether the node probe observed the ServiceAccount's token in a file on a node (cause `static-token-file`, probe evidence). */
export function probeSawCopiedToken(live: readonly Finding[]): boolean {
  return live.some((f) => f.cause.id === 'static-token-file' && f.cause.evidence.some((e) => e.startsWith('node probe')));
}

/** Why the restart is a stop-gap, in words, for the fix line. */
function stopGapWhy(g: StopGap): string {
  return g.reason === 'recurrence'
    ? `the stale tokens came back after a restart${g.at !== undefined ? ` (recurrence ${slackDate(g.at, '{date_short_pretty}')})` : ''}`
    : 'the node probe found its token copied into a file on the node, which goes stale again';
}

function fixLine(live: readonly Finding[], ctx: AlertContext, stopGap: StopGap | undefined): string {
  const r = ctx.restarts[0];
  const cause = causeFinding(live);
  if (r && stopGap && cause) {
    // The restart only buys another token lifetime: the headline fix is the cause's; the restart is named as a stop-gap.
    const buys = r.buysDays !== null ? `fresh tokens for ${plural(r.buysDays, 'day')}, then it recurs` : 'fresh tokens for one more token lifetime, then it recurs';
    return (
      `*Fix:* ${escClip(firstSentence(cause.cause.fix, 400), 500)}\n` +
      `*Stop-gap:* restart ${escClip(r.workload.kind, 40)} ${code(`${r.workload.namespace}/${r.workload.name}`, 120)}: ${buys} (${stopGapWhy(stopGap)}). Nothing changes until an approver agrees.`
    );
  }
  if (r) {
    return `*Fix:* restart ${escClip(r.workload.kind, 40)} ${code(`${r.workload.namespace}/${r.workload.name}`, 120)}: its pods get fresh tokens${r.buysDays !== null ? `, valid for ${plural(r.buysDays, 'day')}` : ''}. Nothing changes until an approver agrees.`;
  }
  const lead = live[0];
  return `*Fix:* ${lead ? escClip(firstSentence(lead.cause.fix, 400), 500) : 'none needed'}`;
}

/** The overflow menu of an alert (Recreate, Snooze, Details), or undefined without entries. No `confirm` on it. */
function overflowMenu(entries: readonly OverflowEntry[]): types.Overflow | undefined {
  const options = entries.slice(0, LIMITS.overflowOptions).map((e) => ({ text: plain(e.label, LIMITS.optionText), value: opaqueId(e.id) }));
  return options.length ? { type: 'overflow', action_id: ACTION_IDS.more, options } : undefined;
}

/** The restart buttons: the first `style: primary`, each with a confirm dialog (a button, not an overflow option). */
export function restartButtons(cluster: string, restarts: readonly RestartEntry[]): Button[] {
  const gap = (r: RestartEntry) => (r.stopGap ? ' A stop-gap: the cause stays, so the stale tokens come back.' : '');
  return restarts.map((r, i) => ({
    type: 'button',
    action_id: i === 0 ? ACTION_IDS.restart : `${ACTION_IDS.restart}:${i}`,
    text: plain(restartLabel(r), LIMITS.buttonText),
    value: opaqueId(r.id),
    ...(i === 0 ? { style: 'primary' as const } : {}),
    confirm: {
      title: plain(`Restart ${r.workload.kind}?`, LIMITS.confirmTitle),
      text: plain(
        `Ask for approval to restart ${objectLabel(r.workload)} in ${cluster}. Its pods are replaced and get fresh tokens.${gap(r)} Nothing changes until an approver agrees.`,
        LIMITS.confirmText,
      ),
      confirm: plain('Request restart', LIMITS.confirmButton),
      deny: plain('Cancel', LIMITS.confirmButton),
    },
  }));
}

/**
 * What a reader sees of an alert: every value its blocks show, already worded (header, text, lead sentence, the four
 * fields, the fix line, the context lines, the buttons). {@link alertView} computes it and {@link renderAlert} only
 * lays it out, so two alerts with equal views render to equal messages: the notifier stores a hash of the view and
 * edits the message only when it changes (docs/slack.md "Alerts"). Times a new use moves (the rejection time, the
 * last use) are floored to {@link SHOWN_TIME_STEP_MS} first, which never changes the date a reader sees.
 */
export interface AlertView {
  cluster: string;
  resolved: boolean;
  header: string;
  /** The notification text (`text` of chat.postMessage). */
  text: string;
  lead: string;
  /** Workload, Pods, Rejection, Requests (mrkdwn). */
  fields: [string, string, string, string];
  /** The fix line (absent on the resolved variant). */
  fix?: string;
  context: string[];
  restarts: RestartEntry[];
  overflow: OverflowEntry[];
}

/**
 * Step to which the times an alert shows are floored, ms (15 min): a new use moves the earliest rejection or the
 * last use by seconds, which must not edit the alert; Slack renders these as dates in the reader's time zone, and
 * every time zone's midnight falls on a 15-minute boundary of UTC, so the date shown never changes by it.
 */
export const SHOWN_TIME_STEP_MS = 15 * 60_000;

function shownTime(ms: number): number {
  return Math.floor(ms / SHOWN_TIME_STEP_MS) * SHOWN_TIME_STEP_MS;
}

/**
 * The visible state of the alert of one group (see {@link AlertView}). `members` are all its findings (most severe
 * first); `live` the ones not resolved. With no live member (or `ctx.resolved`) it is the resolved variant.
 * @throws TypeError when `members` is empty.
 */
export function alertView(members: readonly Finding[], live: readonly Finding[], ctx: AlertContext): AlertView {
  const any = members[0];
  if (!any) throw new TypeError('alertView: a group has at least one finding');
  const subject = subjectOf(any);
  const resolved = ctx.resolved !== undefined || live.length === 0;
  const shown = resolved ? members : live;
  const severity = worstSeverity(shown);
  const fact = worstFact(shown, ctx.now, ctx.activeWindowMs);
  // Severity in words beside its colour: emoji do not render everywhere (screen readers, plain-text notifications).
  const header = resolved ? `✅ Resolved · ${any.cluster} · ${subject}` : `${SEVERITY_EMOJI[severity]} ${SEVERITY_LABEL[severity]} · ${any.cluster} · ${subject} — ${fact}`;
  const stopGap: StopGap | undefined = ctx.stopGap ?? (probeSawCopiedToken(shown) ? { reason: 'copied-token' } : undefined);
  const restarts = stopGap ? ctx.restarts.map((r) => ({ ...r, stopGap: true })) : [...ctx.restarts];
  const signals = signalLabels(shown).join(' · ');
  const lead = resolved
    ? `✅ *Resolved* ${slackDate(ctx.resolved?.at ?? ctx.now)}${ctx.resolved?.note ? `: ${escClip(ctx.resolved.note, 800)}` : ''}.\n*Signals:* ${signals}`
    : `${impact(shown, subject, any.cluster, ctx.now, ctx.activeWindowMs)}\n*Signals:* ${signals}`;
  const context: string[] = [];
  if (!resolved && ctx.snoozedUntil !== undefined && ctx.snoozedUntil > ctx.now) context.push(`😴 Snoozed until ${slackDate(ctx.snoozedUntil)}`);
  // On what the 401s' attribution rests (named, corroborated, or address only), so a reader can weigh it.
  const basis = shown.find((f) => f.kind === 'unauthorized' && f.attribution)?.attribution;
  if (basis) context.push(`${basis.basis === 'address-only' ? '⚠️' : '🔎'} ${escClip(basis.text, 600)}`);
  const state = shown.find((f) => f.clusterState)?.clusterState;
  if (state) context.push(`⚠️ ${escClip(state, 300)}`);
  const text = resolved ? `✅ [${any.cluster}] resolved: ${subject} (${signals})` : `${SEVERITY_EMOJI[severity]} [${any.cluster}] ${severity}: ${subject} — ${fact} (${signals})`;
  return {
    cluster: any.cluster,
    resolved,
    header,
    text: clip(text, 3000),
    lead: clip(lead, LIMITS.sectionText),
    fields: resolved
      ? [workloadField(shown), podsNowField(ctx.resolved), fixedField(shown, ctx.resolved), beforeField(shown)]
      : [workloadField(shown), podsField(shown, ctx.podsTotal), rejectionField(shown, ctx.now, ctx.activeWindowMs), requestsField(shown, ctx.now, ctx.activeWindowMs)],
    ...(resolved ? {} : { fix: fixLine(shown, { ...ctx, restarts }, stopGap) }),
    context,
    restarts: resolved ? [] : restarts,
    // A resolved alert keeps Details (its old pods, exact figures, tokens); nothing else can be done on it.
    overflow: resolved ? ctx.overflow.filter((e) => e.action === 'details') : [...ctx.overflow],
  };
}

/** The Block Kit message of an {@link AlertView}. All Block Kit limits hold for any view {@link alertView} returns. */
export function renderAlert(view: AlertView): SlackMessage {
  const blocks: KnownBlock[] = [{ type: 'header', text: plain(view.header, LIMITS.headerText) }];
  blocks.push({
    type: 'section',
    text: md(clip(view.lead, LIMITS.sectionText)),
    fields: view.fields.map((t) => md(clip(t, LIMITS.sectionFieldText), LIMITS.sectionFieldText)),
  });
  if (view.fix !== undefined) blocks.push({ type: 'section', text: md(clip(view.fix, LIMITS.sectionText)) });
  if (view.context.length) blocks.push({ type: 'context', elements: view.context.map((t) => md(t, LIMITS.contextText)) });
  const elements: Array<Button | types.Overflow> = view.resolved ? [] : [...restartButtons(view.cluster, view.restarts)];
  const menu = overflowMenu(view.overflow);
  if (menu) elements.push(menu);
  if (elements.length) blocks.push({ type: 'actions', block_id: 'tw_alert_actions', elements });
  return { text: view.text, blocks };
}

/** What changed in a group between two renders, for the thread reply saying so. */
export interface SignalChange {
  started: FindingKind[];
  stopped: FindingKind[];
}

/** Thread reply for signals that started or stopped on an alert (one message for both). */
export function signalChangeMessage(cluster: string, subject: string, change: SignalChange, ctx: { requests?: Partial<Record<FindingKind, number>> } = {}): SlackMessage {
  const lines: string[] = [];
  for (const k of change.started) {
    const n = ctx.requests?.[k];
    lines.push(
      k === 'unauthorized'
        ? `🚫 New signal: *requests rejected with 401*${n !== undefined ? ` (${plural(n, 'request')})` : ''}: clients of ${code(subject, 300)} are already being refused.`
        : `➕ New signal: *${SIGNAL_LABEL[k]}*${n !== undefined ? ` (${plural(n, 'request')})` : ''}.`,
    );
  }
  for (const k of change.stopped) lines.push(`✔️ Signal stopped: *${SIGNAL_LABEL[k]}* (resolved); the alert stays open for the others.`);
  const text = `[${cluster}] ${subject}: ${[...change.started.map((k) => `${SIGNAL_LABEL[k]} started`), ...change.stopped.map((k) => `${SIGNAL_LABEL[k]} stopped`)].join(', ')}`;
  return { text: clip(text, 3000), blocks: [{ type: 'section', text: md(clip(lines.join('\n'), LIMITS.sectionText)) }] };
}

/** The edit of an older per-kind alert merged into a newer one on upgrade: a pointer, no buttons. */
export function mergedAlertMessage(cluster: string, subject: string, permalink: string | undefined): SlackMessage {
  const where = permalink ? `<${permalink}|this alert>` : 'the newer alert for it in this channel';
  return {
    text: clip(`[${cluster}] ${subject}: merged into one alert`, 3000),
    blocks: [
      { type: 'header', text: plain(`↪️ Merged · ${cluster} · ${subject}`, LIMITS.headerText) },
      { type: 'section', text: md(`Every signal of ServiceAccount ${code(subject, 300)} in *${escClip(cluster, 200)}* is now one alert: see ${where}. This message is not updated any more.`) },
    ],
  };
}

/** The `views.open` modal that confirms a Recreate ServiceAccount request, saying what breaks. */
export function recreateConfirmModal(f: Pick<Finding, 'cluster' | 'namespace' | 'serviceAccount'>, privateMetadata: string, pods?: number): Record<string, unknown> {
  const subject = subjectOf(f);
  const podsText = pods !== undefined ? `${plural(pods, 'running pod')} of it` : 'every pod using it';
  return {
    type: 'modal',
    callback_id: RECREATE_MODAL_CALLBACK_ID,
    private_metadata: clip(privateMetadata, LIMITS.viewPrivateMetadata),
    title: plain('Recreate account?', LIMITS.viewTitle),
    submit: plain('Request recreate', LIMITS.viewTitle),
    close: plain('Cancel', LIMITS.viewTitle),
    blocks: [
      {
        type: 'section',
        text: md(
          `Ask for approval to delete and recreate ServiceAccount ${code(subject, 300)} in *${escClip(f.cluster, 200)}*.\n\n*What breaks:* its new UID invalidates every token issued for it — ${podsText} loses its token and fails with 401 until restarted. The leaked or legacy Secret token is revoked; labels, annotations and imagePullSecrets are kept.\n\nNothing changes until an approver agrees.`,
        ),
      },
    ],
  };
}

/** `callback_id` of the Recreate ServiceAccount confirm modal. */
export const RECREATE_MODAL_CALLBACK_ID = 'tw_recreate_confirm';
