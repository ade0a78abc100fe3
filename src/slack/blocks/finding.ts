/**
 * Per-finding rendering: the finding card of earlier versions (`findingMessage`, kept for the sandbox's Block Kit
 * fixtures), its buttons (`findingButtons`: the Restart buttons offered in the thread after a ServiceAccount
 * recreation), the cause text of Details, and the escalation reply posted in an alert's thread. Alerts themselves are
 * one per root cause (`alert.ts`). Pure.
 */
import type { WorkloadRef } from '../../cluster/types.js';
import { DAY_MS, HOUR_MS } from '../../core/units.js';
import { WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS } from '../../findings/token-math.js';
import type { Finding, FindingKind, Severity } from '../../findings/types.js';
import type { TargetKind } from '../../approvals/machine.js';
import { isRestartableKind, objectLabel } from '../../core/actions.js';
import { ACTION_IDS, opaqueId } from './ids.js';
import { LIMITS } from './limits.js';
import {
  clip,
  code,
  count,
  duration,
  escapeMrkdwn,
  escClip,
  linesWithin,
  listWithin,
  md,
  plain,
  plural,
  slackDate,
  sourceLink,
  sparkline,
  utcDate,
  type Button,
  type KnownBlock,
  type SlackMessage,
} from './text.js';

/** A button a finding message can offer; `buttonsFor` maps each to an opaque id, or undefined to hide it. */
export type FindingAction =
  | { action: 'restart'; workload: WorkloadRef }
  | { action: 'recreate-serviceaccount' }
  | { action: 'snooze'; days: 1 | 7 }
  | { action: 'details' };

/** Context of {@link findingMessage}. Times are epoch ms UTC. */
export interface FindingMessageContext {
  /** Reference time for ages and days left. */
  now: number;
  /** Opaque id for a button (stored server-side with its target), or undefined to leave the button out. */
  buttonsFor: (action: FindingAction) => string | undefined;
  /** When set, the resolved variant: ✅ header, no buttons. */
  resolved?: { at: number; note?: string };
  /** Alerts for this finding are muted until then. */
  snoozedUntil?: number;
  /** Requests per UTC hour keyed by the hour's epoch ms (merge of its TokenRecords' `hourly`), for the sparkline. */
  hourly?: Record<string, number>;
  /** Pods the finding's workloads run (the "m" in "n of m pods affected"), when known. */
  podsTotal?: number;
  /**
   * A signal (401s, stale or legacy use) last seen within this long before `now` is current ("now"); an older one is
   * shown with when it was last seen, ms. Default {@link DEFAULT_ACTIVE_WINDOW_MS} (`findings.activeWindow`).
   */
  activeWindowMs?: number;
}

/** Default of `findings.activeWindow`: 1 h, the findings stage's "still in use" window (LIVE_USE_WINDOW_MS). */
export const DEFAULT_ACTIVE_WINDOW_MS = HOUR_MS;

/**
 * Whether a finding's signal is current: last seen within `windowMs` (default {@link DEFAULT_ACTIVE_WINDOW_MS}) before
 * `now` (epoch ms UTC). "401s now" wording depends on it, not on the finding existing.
 */
export function signalIsCurrent(f: Pick<Finding, 'lastSeen'>, now: number, windowMs = DEFAULT_ACTIVE_WINDOW_MS): boolean {
  const last = Date.parse(f.lastSeen);
  return Number.isFinite(last) && now - last <= windowMs;
}

/** At most this many restart buttons per message (one per restartable workload). */
export const MAX_RESTART_BUTTONS = 3;

/** Severity emoji: 🔴 critical, 🟠 warning, 🔵 info. */
export const SEVERITY_EMOJI: Record<Severity, string> = { critical: '🔴', warning: '🟠', info: '🔵' };

/** Severity in words, capitalised (said beside {@link SEVERITY_EMOJI}: emoji do not render everywhere). */
export const SEVERITY_LABEL: Record<Severity, string> = { critical: 'Critical', warning: 'Warning', info: 'Info' };

const KIND_LABEL: Record<FindingKind, string> = {
  'stale-token': 'Stale token',
  'legacy-token': 'Legacy Secret token',
  unauthorized: '401 Unauthorized',
  'cluster-credential': 'Cluster-level 401s',
};

/** Seconds between a bound token's issue and its `warnafter` (the findings stage's constant, with its source). */
const WARN_AFTER_SECONDS = WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS;

const isRestartable = (w: WorkloadRef): w is WorkloadRef & { kind: TargetKind } => isRestartableKind(w.kind);

/** `kube-system/multus`. */
export function subjectOf(f: Pick<Finding, 'namespace' | 'serviceAccount'>): string {
  return `${f.namespace}/${f.serviceAccount}`;
}

/** Days left until `rejectionAt` (floor; negative when past), or null. */
export function daysLeft(f: Pick<Finding, 'rejectionAt'>, now: number): number | null {
  if (!f.rejectionAt) return null;
  const at = Date.parse(f.rejectionAt);
  return Number.isNaN(at) ? null : Math.floor((at - now) / DAY_MS);
}

/** Age of the oldest token (now − issue, issue ≈ warnAfter − 3607 s; docs/design/domain.md §1), in ms, or null. */
export function oldestTokenAgeMs(f: Pick<Finding, 'tokens' | 'maxSecondsAfterWarning' | 'lastSeen'>, now: number): number | null {
  const warns = f.tokens.map((t) => (t.warnAfter ? Date.parse(t.warnAfter) : NaN)).filter((n) => !Number.isNaN(n));
  if (warns.length) return now - (Math.min(...warns) - WARN_AFTER_SECONDS * 1000);
  if (f.maxSecondsAfterWarning !== null) return (f.maxSecondsAfterWarning + WARN_AFTER_SECONDS) * 1000;
  return null;
}

function rejectionLine(f: Finding, now: number): string | undefined {
  const left = daysLeft(f, now);
  if (left === null || !f.rejectionAt) return undefined;
  const at = Date.parse(f.rejectionAt);
  if (at <= now) return `${slackDate(at)} (*passed*: requests with this token now fail with 401)`;
  return `${slackDate(at)} (*${plural(left, 'day')} left*)`;
}

function fallbackText(f: Finding, ctx: FindingMessageContext): string {
  const head = ctx.resolved
    ? `✅ [${f.cluster}] resolved: ${KIND_LABEL[f.kind].toLowerCase()} used by ${subjectOf(f)}`
    : `${SEVERITY_EMOJI[f.severity]} [${f.cluster}] ${f.severity}: ${KIND_LABEL[f.kind].toLowerCase()} used by ${subjectOf(f)}`;
  const left = daysLeft(f, ctx.now);
  const tail =
    ctx.resolved || left === null || !f.rejectionAt
      ? ''
      : left < 0
        ? ` — rejection date ${utcDate(Date.parse(f.rejectionAt))} has passed`
        : ` — rejected by the API server on ${utcDate(Date.parse(f.rejectionAt))} (${plural(left, 'day')} left)`;
  return clip(`${head}${tail}`, 3000);
}

/**
 * The Block Kit buttons of a finding: one `Restart <Kind> <name>` per restartable workload (DaemonSet,
 * Deployment, StatefulSet; at most {@link MAX_RESTART_BUTTONS}), `Recreate ServiceAccount`, `Snooze 1d`,
 * `Snooze 7d`, `Details`. Restart and recreate carry a `confirm` dialog and `style: danger`. Each button's
 * `value` is the opaque id from `buttonsFor`; buttons it returns undefined for are left out.
 * @throws TypeError when `buttonsFor` returns something that is not an opaque id (see ids.ts).
 */
export function findingButtons(f: Finding, buttonsFor: FindingMessageContext['buttonsFor']): Button[] {
  const buttons: Button[] = [];
  const restartable = f.workloads.filter(isRestartable);
  restartable.slice(0, MAX_RESTART_BUTTONS).forEach((w, i) => {
    const id = buttonsFor({ action: 'restart', workload: w });
    if (id === undefined) return;
    buttons.push({
      type: 'button',
      action_id: i === 0 ? ACTION_IDS.restart : `${ACTION_IDS.restart}:${i}`,
      text: plain(`Restart ${w.kind} ${w.name}`, LIMITS.buttonText),
      value: opaqueId(id),
      style: 'danger',
      confirm: {
        title: plain(`Restart ${w.kind}?`, LIMITS.confirmTitle),
        text: plain(
          `Ask for approval to restart ${objectLabel(w)} in ${f.cluster}. Its pods are replaced and get fresh tokens. Nothing changes until an approver agrees.`,
          LIMITS.confirmText,
        ),
        confirm: plain('Request restart', LIMITS.confirmButton),
        deny: plain('Cancel', LIMITS.confirmButton),
        style: 'danger',
      },
    });
  });
  const recreate = buttonsFor({ action: 'recreate-serviceaccount' });
  if (recreate !== undefined) {
    buttons.push({
      type: 'button',
      action_id: ACTION_IDS.recreateServiceAccount,
      text: plain('Recreate ServiceAccount', LIMITS.buttonText),
      value: opaqueId(recreate),
      style: 'danger',
      confirm: {
        title: plain('Recreate ServiceAccount?', LIMITS.confirmTitle),
        text: plain(
          `Ask for approval to delete and recreate ServiceAccount ${subjectOf(f)} in ${f.cluster}. Its new UID invalidates every token issued for it; labels, annotations and imagePullSecrets are kept. Its pods need a restart afterwards.`,
          LIMITS.confirmText,
        ),
        confirm: plain('Request recreate', LIMITS.confirmButton),
        deny: plain('Cancel', LIMITS.confirmButton),
        style: 'danger',
      },
    });
  }
  for (const days of [1, 7] as const) {
    const id = buttonsFor({ action: 'snooze', days });
    if (id !== undefined) {
      buttons.push({
        type: 'button',
        action_id: days === 1 ? ACTION_IDS.snooze1d : ACTION_IDS.snooze7d,
        text: plain(`Snooze ${days}d`, LIMITS.buttonText),
        value: opaqueId(id),
      });
    }
  }
  const details = buttonsFor({ action: 'details' });
  if (details !== undefined) {
    buttons.push({ type: 'button', action_id: ACTION_IDS.details, text: plain('Details', LIMITS.buttonText), value: opaqueId(details) });
  }
  return buttons;
}

/** The mrkdwn fields of a finding (≤ 10, each ≤ 2000 chars). */
export function findingFields(f: Finding, ctx: Pick<FindingMessageContext, 'now' | 'podsTotal' | 'activeWindowMs'>): string[] {
  const fields: string[] = [];
  const workloads = f.workloads.map(
    (w) =>
      `${escapeMrkdwn(w.kind)} ${code(`${w.namespace}/${w.name}`, 120)}${w.owner ? ` (owned by ${escapeMrkdwn(w.owner.kind)} ${code(w.owner.name, 80)})` : ''}`,
  );
  fields.push(`*${f.workloads.length === 1 ? 'Workload' : 'Workloads'}*\n${workloads.length ? linesWithin(workloads, 1900) : '_none found in cluster state_'}`);
  const n = f.pods.length;
  // "n of m": n counts affected pods still running, m the ServiceAccount's running pods; pods gone from cluster
  // state (their tokens still seen in the audit log) are counted apart, so n never exceeds m.
  const gone = Math.min(n, f.missingPods?.length ?? 0);
  const ofM = ctx.podsTotal !== undefined ? `${count(n - gone)} of ${count(ctx.podsTotal)}${gone ? ` (+${count(gone)} gone)` : ''}` : count(n);
  const goneSet = new Set(f.missingPods ?? []);
  const runningFirst = [...f.pods.filter((p) => !goneSet.has(p)), ...f.pods.filter((p) => goneSet.has(p))];
  const podNames = n ? `\n${listWithin(runningFirst.slice(0, 3).map((p) => code(p, 80)), 3, ', ', n)}` : '';
  fields.push(`*Pods affected*\n${ofM}${podNames}`);
  const age = oldestTokenAgeMs(f, ctx.now);
  if (age !== null && f.kind === 'stale-token') fields.push(`*Oldest token age*\n${duration(age)}`);
  const rej = rejectionLine(f, ctx.now);
  if (rej) fields.push(`*Rejection*\n${rej}`);
  else if (f.kind === 'unauthorized') {
    fields.push(
      signalIsCurrent(f, ctx.now, ctx.activeWindowMs)
        ? '*Rejection*\n*Now*: requests already fail with 401'
        : `*Rejection*\nRequests failed with 401 until ${slackDate(Date.parse(f.lastSeen))}; none since`,
    );
  }
  fields.push(
    `*Requests*\n${count(f.requests)} · first ${slackDate(Date.parse(f.firstSeen))} · last ${slackDate(Date.parse(f.lastSeen))}`,
  );
  if (f.userAgents.length) {
    fields.push(`*User agent${f.userAgents.length > 1 ? 's' : ''}*\n${listWithin(f.userAgents.slice(0, 2).map((u) => code(u, 150)), 2, '\n', f.userAgents.length)}`);
  }
  return fields.map((t) => clip(t, LIMITS.sectionFieldText));
}

/** The cause section text: summary, fix and source links (≤ 3000 chars). */
export function causeText(f: Finding): string {
  const c = f.cause;
  const comp = c.component ? ` (${code(c.component, 60)})` : '';
  const sources = c.sources.length ? `\n*Sources:* ${listWithin(c.sources.slice(0, 5).map(sourceLink), 5, ' · ', c.sources.length)}` : '';
  const text = `*Cause*${comp}: ${escClip(c.summary, 1200)}\n*Fix:* ${escClip(c.fix, 1200)}`;
  return clip(text + clip(sources, LIMITS.sectionText - text.length - 1), LIMITS.sectionText);
}

/**
 * The card of one finding, as alerts looked before they were one per root cause (`alertView` and `renderAlert` in alert.ts): header (severity emoji, cluster, `namespace/serviceAccount`), a summary with
 * fields (workloads, pods affected n of m, oldest token age, rejection date and days left, requests and
 * first/last seen, user agents), the cause with its fix and sources, a requests-per-hour sparkline
 * (`▁▂▃▄▅▆▇█`, last 24 h), and the buttons. The resolved variant (`ctx.resolved`) has a ✅ header and no
 * buttons. All Block Kit limits hold for any input (long lists end in "…and N more").
 * @internal No alert uses it any more; kept for the sandbox's Block Kit fixtures and the builder tests (exempt from
 *   the production knip pass).
 */
export function findingMessage(f: Finding, ctx: FindingMessageContext): SlackMessage {
  const blocks: KnownBlock[] = [];
  const subject = subjectOf(f);
  const header = ctx.resolved
    ? `✅ Resolved · ${f.cluster} · ${subject}`
    : `${SEVERITY_EMOJI[f.severity]} ${SEVERITY_LABEL[f.severity]} · ${f.cluster} · ${subject}`;
  blocks.push({ type: 'header', text: plain(header, LIMITS.headerText) });

  const left = daysLeft(f, ctx.now);
  let lead = `*${KIND_LABEL[f.kind]}* used by ServiceAccount ${code(subject, 300)} in *${escClip(f.cluster, 200)}*`;
  if (ctx.resolved) {
    lead = `✅ *Resolved* ${slackDate(ctx.resolved.at)}${ctx.resolved.note ? `: ${escClip(ctx.resolved.note, 1000)}` : ''}\n${lead}`;
  } else if (left !== null && left >= 0) {
    lead += `: the API server will reject it in *${plural(left, 'day')}*`;
    // Critical although rejection is further away: the findings stage makes every finding of a ServiceAccount
    // critical once 401s are attributed to it (src/findings/build.ts). Say so, or the card contradicts itself.
    if (f.severity === 'critical' && f.kind !== 'unauthorized' && left >= 7) lead += ` — *critical* because requests from this ServiceAccount are already rejected with 401 (see its Unauthorized alert)`;
  } else if (left !== null) {
    lead += ': its rejection date has *passed*';
  } else if (f.kind === 'unauthorized') {
    lead += signalIsCurrent(f, ctx.now, ctx.activeWindowMs)
      ? ': requests are already *rejected with 401*'
      : `: requests were *rejected with 401*, the last one ${slackDate(Date.parse(f.lastSeen))} (${duration(Math.max(0, ctx.now - Date.parse(f.lastSeen)))} ago), none since`;
  }
  blocks.push({
    type: 'section',
    text: md(`${lead}.`),
    fields: findingFields(f, ctx).map((t) => md(t, LIMITS.sectionFieldText)),
  });
  blocks.push({ type: 'section', text: md(causeText(f)) });

  const context: string[] = [];
  if (ctx.hourly) {
    const s = sparkline(ctx.hourly, ctx.now);
    context.push(`Requests per hour, last 24 h: \`${s.line}\` (max ${count(s.max)}/h, ${count(s.total)} total)`);
  }
  if (ctx.snoozedUntil !== undefined && ctx.snoozedUntil > ctx.now && !ctx.resolved) {
    context.push(`😴 Snoozed until ${slackDate(ctx.snoozedUntil)}`);
  }
  const missing = f.missingPods ?? [];
  if (missing.length) {
    context.push(`Pods not in cluster state: ${listWithin(missing.slice(0, 3).map((p) => code(p, 80)), 3, ', ', missing.length)}`);
  }
  if (f.clusterState) context.push(`⚠️ ${escClip(f.clusterState, 500)}`);
  const restartable = f.workloads.filter(isRestartable);
  if (!ctx.resolved && restartable.length > MAX_RESTART_BUTTONS) {
    context.push(`…and ${restartable.length - MAX_RESTART_BUTTONS} more workloads without a button here (see Details)`);
  }
  context.push(`Finding ${code(f.id, 100)}`);
  blocks.push({ type: 'context', elements: context.slice(0, LIMITS.contextElements).map((t) => md(t, LIMITS.contextText)) });

  if (!ctx.resolved) {
    const buttons = findingButtons(f, ctx.buttonsFor);
    if (buttons.length) blocks.push({ type: 'actions', block_id: 'tw_finding_actions', elements: buttons });
  }
  return { text: fallbackText(f, ctx), blocks };
}

/** What changed to warrant a thread reply on a finding's message. */
export type Escalation = { type: 'severity'; from: Severity; to: Severity } | { type: 'first-401'; requests: number };

/** Thread reply for an escalation (warning → critical, first 401s). */
export function escalationMessage(f: Finding, e: Escalation, ctx: { now: number }): SlackMessage {
  const subject = subjectOf(f);
  const rej = rejectionLine(f, ctx.now);
  const line =
    e.type === 'severity'
      ? `${SEVERITY_EMOJI[e.to]} Escalated from *${e.from}* to *${e.to}*: ${code(subject, 300)} in *${escClip(f.cluster, 200)}*${rej ? `, rejection ${rej}` : ''}.`
      : `🚫 First *401 Unauthorized* responses for ${code(subject, 300)} in *${escClip(f.cluster, 200)}* (${plural(e.requests, 'request')}): its clients are already being rejected.`;
  const text =
    e.type === 'severity'
      ? `[${f.cluster}] ${subject} escalated from ${e.from} to ${e.to}`
      : `[${f.cluster}] ${subject}: first 401 Unauthorized responses`;
  return { text: clip(text, 3000), blocks: [{ type: 'section', text: md(line) }] };
}
