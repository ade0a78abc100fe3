/**
 * Alerts: one Slack message per root cause — every finding of one ServiceAccount of one cluster (an alert group,
 * src/findings/groups.ts) — in its cluster's channel, or the channel a routing rule sends it to (src/slack/routing.ts;
 * chosen at the first post and kept in the alert ref), kept current (docs/slack.md "Alerts"). The rule's owners are
 * mentioned in the first post and in the escalation reply when severity rises, never in edits.
 *
 * A poll's findings become work items, one per group they touch ({@link Notifier.workItems}); the notification queue
 * (src/slack/drainer.ts, docs/slack.md "Notification queue") sends each at its turn ({@link Notifier.sendItem}):
 * - no message yet and a finding of it is open → one `chat.postMessage` with the final blocks (never followed by a
 *   `chat.update`, so a new alert carries no "(edited)"), and the group's ref (channel, ts, severity shown, content
 *   hash, live signals) is saved at once. A group with a ref is never posted again, across restarts too;
 * - a message exists → re-rendered; `chat.update` only when the content hash changed (something a reader sees:
 *   counts are bucketed, so a new use rarely changes it); a group whose live findings are all snoozed is not touched
 *   until the snooze ends once its alert shows just their signals (see `snoozedThrough`);
 * - severity of the live signals went up since the message was last rendered → an escalation reply in the thread;
 * - a signal started (e.g. the first 401s of a ServiceAccount with stale tokens) or stopped while others stay live →
 *   a reply in the thread saying so;
 * - every finding resolved (verified, or quiet) → the alert is updated in place to its resolved variant (✅ header,
 *   why, no buttons); seen again → a "reopened" reply, buttons back (reopened by a use delivered late into a
 *   quiet-resolved period, `FindingChange.lateUse`, the reply says it was seen late);
 * - per-kind messages of an earlier version (one alert per finding) are merged: the newest is kept and shows the
 *   group, each other one is edited once to point at it.
 * Every message names the cluster. Posts to a channel are serialized and spaced (`SlackApi`), and work on one
 * group is serialized by a per-group lock, so the queue and a button click never race to post.
 * A channel that cannot be posted to (bot not invited, archived) puts that channel's items off (the drainer); the
 * problem is logged once and shown by `/tokens status`.
 */
import { KeyedLock } from '../core/keyed-lock.js';
import { createHash } from 'node:crypto';
import type { ApprovalPolicy } from '../approvals/index.js';
import { namespaceAllowed } from '../approvals/index.js';
import type { ClusterStateSource } from '../cluster/types.js';
import { actionNoun, objectLabel } from '../core/actions.js';
import { DAY_MS, HOUR_MS } from '../core/units.js';
import { compareFindings } from '../findings/build.js';
import { FINDING_KIND_ORDER, groupFindings, groupIdOf, worstSeverity } from '../findings/groups.js';
import { SEVERITY_RANK, type Finding, type FindingKind } from '../findings/types.js';
import { isCredentialEventFinding } from '../findings/cluster-events.js';
import type { Logger } from '../observability/logger.js';
import type { AlertRef, FindingChange, MessageLocation, MessageRef, Store, StoredApproval, StoredFinding } from '../store/index.js';
import type { OutboxDigestLine, OutboxItem } from '../store/outbox.js';
import { SlackCallError, type SlackApi } from './api.js';
import {
  alertView,
  buysDays,
  escalationMessage,
  findingButtons,
  MAX_RESTART_BUTTONS,
  mergedAlertMessage,
  signalChangeMessage,
  subjectOf,
  type Button,
  type FindingAction,
  type OverflowEntry,
  renderAlert,
  type AlertView,
  type ResolvedState,
  type RestartEntry,
  type StopGap,
  type SlackMessage,
  worstFact,
} from './blocks/index.js';
import { urgencyOf, URGENCY_LAST } from './outbox.js';
import { isRestartable, type ButtonIds } from './buttons.js';
import type { ChannelMap } from './channels.js';
import { mentions, ownersMention, rulesNeedNamespaceLabels, rulesNeedState, type ObjectMeta, type Route } from './routing.js';
import { reopenedMessage } from './messages.js';

/** Slack message metadata `event_type` of an alert; its `event_payload.group_id` is the group id, `finding_id` its lead finding's. */
export const ALERT_EVENT_TYPE = 'tokenwatch_alert';
/** How far before a recorded intent the channel history is searched (clock skew with Slack), ms. */
const INTENT_LOOKBACK_MS = 10 * 60_000;

/**
 * Tolerance for a pod's `status.startTime` (set by the kubelet, its node's clock) against an action's start time
 * (tokenwatch's clock), ms: a pod started this much before the action still counts as started after it.
 */
const FRESH_POD_TOLERANCE_MS = 60_000;

/** How long the pod count of a finding's workloads is reused before asking the cluster again, ms. */
const PODS_TOTAL_TTL_MS = 30 * 60_000;

/** Dependencies of the {@link Notifier}. */
export interface NotifierDeps {
  api: SlackApi;
  store: Store;
  ids: ButtonIds;
  channels: ChannelMap;
  clock: () => number;
  logger: Logger;
  policyFor(cluster: string): ApprovalPolicy | undefined;
  /** Whether tokenwatch can act on the cluster (Kubernetes access configured and working). */
  canRemediate(cluster: string): boolean;
  /** Cluster state, to count the pods of a finding's workloads (the "m" of "n of m pods"). */
  stateOf?(cluster: string): ClusterStateSource | undefined;
  /** `findings.activeWindow`, ms: a signal seen within it reads "now" on the alert. Default 1 h. */
  activeWindowMs?: number;
  /** `findings.quietPeriod`, ms, named on alerts resolved as quiet. Default 24 h. */
  quietPeriodMs?: number;
}

/** The note of a resolved group: why its last signal stopped. */
export function groupResolutionNote(stored: Pick<StoredFinding, 'resolution' | 'finding'>, quietPeriodMs = DAY_MS): string {
  if (stored.resolution === 'quiet') {
    return `no signal for ${Math.round(quietPeriodMs / HOUR_MS)} h while every poll succeeded (quiet); it reopens here if seen again`;
  }
  return 'no stale token use and no 401s after the fix for the settle period';
}

/**
 * What the actions on an alert and the cluster's state now add to its view, read by {@link Notifier.historyOf}:
 * whether a restart is known to be a stop-gap (a recurrence after one), and for a resolved alert the verified action
 * that fixed it and the pods running now.
 */
export interface AlertHistory {
  stopGap?: StopGap;
  fix?: NonNullable<ResolvedState['fix']>;
  pods?: NonNullable<ResolvedState['pods']>;
}

/** Whether an approval is about ServiceAccount `namespace/serviceAccount` (its recorded subject, or the ServiceAccount it recreated). */
function approvalIsOf(a: StoredApproval, f: Pick<Finding, 'namespace' | 'serviceAccount'>): boolean {
  const s = a.subject ?? (a.target.kind === 'ServiceAccount' ? { namespace: a.target.namespace, serviceAccount: a.target.name } : undefined);
  return s !== undefined && s.namespace === f.namespace && s.serviceAccount === f.serviceAccount;
}

/**
 * From the succeeded actions on one alert (ServiceAccount): the last concluded `recurrence` (or node-probe
 * `not-rewritten`: the token file kept its old token) not followed by a verified fix makes any further restart a
 * stop-gap; the last verified fix (`resolved`) is what fixed it. Pure.
 */
export function actionHistory(approvals: readonly StoredApproval[]): Pick<AlertHistory, 'stopGap' | 'fix'> {
  let gap: Required<StopGap> | undefined;
  let fixed: StoredApproval | undefined;
  for (const a of approvals) {
    const v = a.verification;
    if (v?.outcome === 'resolved' && (!fixed || v.at > fixed.verification!.at)) fixed = a;
    const g: Required<StopGap> | undefined =
      v?.outcome === 'recurrence' ? { reason: 'recurrence', at: v.at } : a.probeCheck?.outcome === 'not-rewritten' ? { reason: 'copied-token', at: a.probeCheck.at } : undefined;
    if (g && (!gap || g.at > gap.at || (g.at === gap.at && g.reason === 'recurrence'))) gap = g;
  }
  const out: Pick<AlertHistory, 'stopGap' | 'fix'> = {};
  if (gap && (!fixed || gap.at > fixed.verification!.at)) out.stopGap = gap;
  if (fixed) out.fix = { label: `${actionNoun(fixed.action)} of ${objectLabel(fixed.target)}`, at: fixed.startedAt ?? fixed.updatedAt };
  return out;
}

/** Live kinds of a group's findings, in {@link FINDING_KIND_ORDER}. */
function liveKinds(live: readonly StoredFinding[]): FindingKind[] {
  return FINDING_KIND_ORDER.filter((k) => live.some((m) => m.finding.kind === k));
}

/**
 * Content hash of a rendered message (16 hex chars of SHA-256). Alert refs of earlier versions stored this; an alert
 * whose stored hash equals it shows exactly the current message, so it is not edited on upgrade.
 */
export function messageHash(msg: SlackMessage): string {
  return createHash('sha256').update(JSON.stringify([msg.text, msg.blocks])).digest('hex').slice(0, 16);
}

/**
 * Hash of what a reader sees of an alert (its {@link AlertView}, src/slack/blocks/alert.ts): `v:` and 16 hex chars of
 * SHA-256. Stored in the alert ref; the alert is edited only when it changes (severity, days left, pods or workloads,
 * a count crossing a display bucket, the resolution, the buttons), not on every new use.
 */
export function visibleHash(view: AlertView): string {
  return `v:${createHash('sha256').update(JSON.stringify(view)).digest('hex').slice(0, 16)}`;
}

/** Whether two lists of signal kinds hold the same kinds (order aside). */
function sameKinds(a: readonly FindingKind[], b: readonly FindingKind[]): boolean {
  return a.length === b.length && a.every((k) => b.includes(k));
}

/**
 * Whether a group's alert is left as it is because of a snooze: its live findings are all snoozed past `now` (epoch
 * ms) and its alert shows exactly those signals (`ref.signals`). A signal that started during the snooze and has
 * stopped again is still on the alert: it is edited once more (the signal gone, "Snoozed until …" back, a "stopped"
 * reply), then left alone until the snooze ends.
 */
function snoozedThrough(live: readonly StoredFinding[], now: number, ref: AlertRef): boolean {
  return live.length > 0 && live.every((m) => m.status === 'snoozed' && m.snoozedUntil !== null && m.snoozedUntil > now) && sameKinds(liveKinds(live), ref.signals);
}

/** Whether the alert stored with `storedHash` already shows `view` (rendered as `msg`): same visible state, or an earlier version's hash of the same message. */
function showsAlready(storedHash: string, view: AlertView, msg: SlackMessage): boolean {
  return storedHash === visibleHash(view) || (!storedHash.startsWith('v:') && storedHash === messageHash(msg));
}

/** See the module docstring. */
export class Notifier {
  private readonly locks = new KeyedLock();
  private readonly podsTotal = new Map<string, { value: number | undefined; at: number }>();

  constructor(private readonly deps: NotifierDeps) {}

  /** Runs `fn` after every earlier task for the same key (finding id) has finished. */
  withLock<T>(key: string, fn: () => Promise<T>): Promise<T> {
    return this.locks.run(key, fn);
  }

  /**
   * Like {@link withLock} for a message edit that renders the latest state when it runs: requests made while an
   * earlier one still waits its turn join it, so a burst of changes to one message is one `chat.update`.
   */
  withLatest(key: string, fn: () => Promise<void>): Promise<void> {
    return this.locks.runLatest(key, fn);
  }

  /**
   * The button ids of a finding, limited to what the cluster's policy allows: restart and recreate only with
   * Kubernetes access and when the action and namespace are allowed; snooze when allowed; Details always.
   */
  buttonsFor(f: Finding): (a: FindingAction) => string | undefined {
    const policy = this.deps.policyFor(f.cluster);
    const act = this.deps.canRemediate(f.cluster);
    return (a) => {
      if (a.action === 'details') return this.deps.ids.idFor(f.id, a);
      if (!policy) return undefined;
      if (a.action === 'snooze') return policy.actions.includes('snooze') ? this.deps.ids.idFor(f.id, a) : undefined;
      if (!act || !policy.actions.includes(a.action)) return undefined;
      if (a.action === 'recreate-serviceaccount' && f.kind === 'unauthorized') return undefined;
      // 401s of a cluster-level credential event (signing-key rotation) that recovered: nothing of this client to restart.
      if (a.action === 'restart' && isCredentialEventFinding(f)) return undefined;
      // A cluster-level finding from API-server metrics (namespace `*`) names no ServiceAccount to act on.
      if (a.action === 'recreate-serviceaccount' && f.namespace === '*') return undefined;
      const ns = a.action === 'restart' ? a.workload.namespace : f.namespace;
      return namespaceAllowed(ns, policy) ? this.deps.ids.idFor(f.id, a) : undefined;
    };
  }

  /** Restart buttons only (offered after a ServiceAccount recreation). */
  restartButtons(f: Finding): Button[] {
    const ids = this.buttonsFor(f);
    return findingButtons(f, (a) => (a.action === 'restart' ? ids(a) : undefined));
  }

  /** Where the alert of a finding's group is, if posted (a per-kind message of an earlier version until merged). */
  async messageOf(findingId: string): Promise<MessageLocation | undefined> {
    const stored = await this.deps.store.findings.get(findingId);
    const ref = (stored ? await this.deps.store.slackRefs.getAlertRef(groupIdOf(stored.finding)) : undefined) ?? await this.deps.store.slackRefs.getMessageRef(findingId);
    return ref ? { channel: ref.channel, ts: ref.ts } : undefined;
  }

  /** Where the alert of a group is, if posted. */
  async messageOfGroup(groupId: string): Promise<MessageLocation | undefined> {
    const ref = await this.deps.store.slackRefs.getAlertRef(groupId);
    return ref ? { channel: ref.channel, ts: ref.ts } : undefined;
  }

  /**
   * Whether recreating the ServiceAccount is a fix for the group's live findings: a legacy Secret token (leaked or
   * long-lived) must be revoked, which a new ServiceAccount UID does; never for a token in a static file on a node (the
   * file keeps the revoked token) and never for a cluster-level finding.
   */
  recreateOffered(live: readonly Finding[]): boolean {
    if (live.some((f) => f.namespace === '*' || f.cause.id === 'static-token-file')) return false;
    return live.some((f) => f.kind === 'legacy-token' || f.cause.id === 'legacy-secret-token');
  }

  /**
   * Renders a group's alert from its stored findings (resolved variant when none is live): the restart buttons of
   * its restartable workloads (first primary), and the overflow menu (Recreate where it is a fix, Snooze, Details),
   * each limited by the cluster's policy ({@link buttonsFor}).
   */
  renderGroup(members: readonly StoredFinding[], now: number): SlackMessage {
    return renderAlert(this.viewGroup(members, now));
  }

  /**
   * What the store's actions and (for a resolved alert) the cluster's state now add to a group's view (see
   * {@link AlertHistory}). Cluster state that cannot be read leaves the pods out (the view says so).
   * @param succeeded the cluster's succeeded approvals, when the caller has read them already (one read for many groups)
   */
  async historyOf(members: readonly StoredFinding[], succeeded?: readonly StoredApproval[]): Promise<AlertHistory> {
    const any = members[0]?.finding;
    if (!any) return {};
    const approvals = (succeeded ?? (await this.succeededApprovals(any.cluster))).filter((a) => approvalIsOf(a, any));
    const out: AlertHistory = actionHistory(approvals);
    if (members.some((m) => m.status !== 'resolved')) return out;
    const state = this.deps.stateOf?.(any.cluster);
    if (!state || any.namespace === '*') return out;
    try {
      const s = await state.describeServiceAccount(any.namespace, any.serviceAccount);
      if (s.available) {
        const since = out.fix?.at;
        const fresh = since === undefined ? 0 : s.pods.filter((p) => p.startTime !== undefined && p.startTime >= since - FRESH_POD_TOLERANCE_MS).length;
        out.pods = { running: s.pods.length, fresh };
      }
    } catch (err) {
      this.deps.logger.debug({ err, cluster: any.cluster }, 'could not read the pods of a resolved alert');
    }
    return out;
  }

  /** The succeeded approvals of `cluster` (what {@link historyOf} reads of the store). */
  private succeededApprovals(cluster: string): Promise<StoredApproval[]> {
    return this.deps.store.approvals.list({ cluster, states: ['succeeded'] });
  }

  /**
   * Whether sending an `edit` item for a posted group now would do nothing ({@link notifyGroup}'s own test, made
   * before the item is queued): its live findings are all snoozed and its alert shows just their signals, or the
   * alert's ref already shows the group's view (same {@link visibleHash}), severity and live signals, so there is no
   * edit, escalation or signal reply to send.
   * A ref of an earlier version (a message hash, not a view hash) is never taken as unchanged here.
   */
  private async unchangedNow(ref: AlertRef, members: readonly StoredFinding[], succeeded: readonly StoredApproval[]): Promise<boolean> {
    const now = this.deps.clock();
    const live = members.filter((m) => m.status !== 'resolved');
    if (snoozedThrough(live, now, ref)) return true;
    if (!ref.hash.startsWith('v:')) return false;
    const severity = live.length ? worstSeverity(live.map((m) => m.finding)) : ref.severity;
    if (severity !== ref.severity || !sameKinds(liveKinds(live), ref.signals)) return false;
    await this.refreshPodCounts(members[0]!.finding.cluster, members.map((m) => m.finding));
    return visibleHash(this.viewGroup(members, now, await this.historyOf(members, succeeded))) === ref.hash;
  }

  /** {@link viewGroup} with its {@link historyOf}. */
  async viewGroupNow(members: readonly StoredFinding[], now: number): Promise<AlertView> {
    return this.viewGroup(members, now, await this.historyOf(members));
  }

  /**
   * What a reader sees of a group's alert ({@link renderGroup} lays it out; its {@link visibleHash} decides edits).
   * `history`: what {@link historyOf} read (none: no stop-gap known, a resolved alert without its state now).
   */
  viewGroup(members: readonly StoredFinding[], now: number, history: AlertHistory = {}): AlertView {
    const sorted = [...members].sort((a, b) => compareFindings(a.finding, b.finding));
    const live = sorted.filter((m) => m.status !== 'resolved');
    const liveF = live.map((m) => m.finding);
    const lead = (live[0] ?? sorted[0])!.finding;
    const restarts: RestartEntry[] = [];
    const buys = buysDays(sorted.map((m) => m.finding));
    const seen = new Set<string>();
    for (const f of liveF) {
      const ids = this.buttonsFor(f);
      for (const w of f.workloads.filter(isRestartable)) {
        const key = `${w.kind}/${w.namespace}/${w.name}`;
        if (seen.has(key) || restarts.length >= MAX_RESTART_BUTTONS) continue;
        const id = ids({ action: 'restart', workload: w });
        if (id === undefined) continue;
        seen.add(key);
        restarts.push({ workload: w, id, buysDays: buys });
      }
    }
    const overflow: OverflowEntry[] = [];
    if (this.recreateOffered(liveF)) {
      const target = liveF.find((f) => f.kind !== 'unauthorized');
      const id = target ? this.buttonsFor(target)({ action: 'recreate-serviceaccount' }) : undefined;
      if (id !== undefined) overflow.push({ action: 'recreate-serviceaccount', label: 'Recreate ServiceAccount…', id });
    }
    if (!live.length) {
      // A resolved alert keeps Details: the pods seen before the fix, exact figures and tokens are there.
      const details = this.buttonsFor(lead)({ action: 'details' });
      if (details !== undefined) overflow.push({ action: 'details', label: 'Details', id: details });
    }
    if (live.length) {
      const ids = this.buttonsFor(lead);
      for (const days of [1, 7] as const) {
        const id = ids({ action: 'snooze', days });
        if (id !== undefined) overflow.push({ action: 'snooze', label: days === 1 ? 'Snooze 1 day' : 'Snooze 7 days', id });
      }
      const details = ids({ action: 'details' });
      if (details !== undefined) overflow.push({ action: 'details', label: 'Details', id: details });
    }
    let resolved: ResolvedState | undefined;
    if (!live.length) {
      const last = [...sorted].sort((a, b) => (b.resolvedAt ?? 0) - (a.resolvedAt ?? 0))[0]!;
      resolved = { at: last.resolvedAt ?? now, note: groupResolutionNote(last, this.deps.quietPeriodMs) };
      // The fix that resolved it: only when it resolved by verification (a quiet resolution is not the action's doing).
      if (history.fix && last.resolution === 'verified') resolved.fix = history.fix;
      if (history.pods) resolved.pods = history.pods;
    }
    const open = live.filter((m) => m.status === 'open');
    const snoozes = live.map((m) => m.snoozedUntil).filter((u): u is number => u !== null && u > now);
    const podsTotal = this.podsTotal.get(groupIdOf(lead))?.value;
    return alertView(
      sorted.map((m) => m.finding),
      liveF,
      {
        now,
        restarts,
        overflow,
        ...(resolved ? { resolved } : {}),
        ...(history.stopGap ? { stopGap: history.stopGap } : {}),
        ...(open.length === 0 && snoozes.length ? { snoozedUntil: Math.min(...snoozes) } : {}),
        ...(podsTotal !== undefined ? { podsTotal } : {}),
        ...(this.deps.activeWindowMs !== undefined ? { activeWindowMs: this.deps.activeWindowMs } : {}),
      },
    );
  }

  /**
   * The notification work of one poll's findings of `cluster`, for the queue (docs/slack.md "Notification queue"):
   * one item per group the findings touch that has a message or an open finding — `post` when it has no message yet,
   * else `edit` — keyed `alert:<groupId>`, ranked by `urgencyOf` its live findings, with the findings this poll
   * reopened. A posted group whose alert already shows what it would show now gets no item (most groups on most
   * polls: no queue write, send or delete for them); the drainer's {@link sendItem} checks again at send time. Reads
   * the store and the cluster's state (pod counts); makes no Slack call. Empty when the cluster has no channel.
   * @param extraGroups ids of groups to include although no finding of `findings` is in them (resolved as quiet).
   */
  async workItems(cluster: string, findings: readonly Finding[], changes: readonly FindingChange[], now: number, extraGroups: readonly string[] = []): Promise<OutboxItem[]> {
    const channel = this.deps.channels.channelOf(cluster);
    if (channel === undefined) return [];
    const { store } = this.deps;
    const stored = await store.findings.list(cluster);
    const refs = await store.slackRefs.alertRefsOf(cluster);
    const byId = new Map(changes.map((c) => [c.id, c]));
    const ids = [...new Set([...groupFindings([...findings].sort(compareFindings)).map((g) => g.id), ...extraGroups])];
    const items: OutboxItem[] = [];
    let succeeded: StoredApproval[] | undefined;
    for (const gid of ids) {
      const members = stored.filter((m) => groupIdOf(m.finding) === gid);
      if (members.length === 0) continue;
      const live = members.filter((m) => m.status !== 'resolved');
      const ref = refs.get(gid);
      let posted = ref !== undefined;
      for (const m of members) if (!posted && (await store.slackRefs.getMessageRef(m.id)) !== undefined) posted = true;
      if (!posted && !members.some((m) => m.status === 'open')) continue;
      // An alert stays in the channel of its first post (its ref); a new one goes where the routing rules say.
      const lead = [...members].sort((a, b) => compareFindings(a.finding, b.finding))[0]!.finding;
      const target = ref?.channel ?? (posted ? channel : ((await this.routeFor(lead))?.channel ?? channel));
      const reopened = members.flatMap((m) => {
        const c = byId.get(m.id);
        return c?.previousStatus === 'resolved' && c.status === 'open' ? [{ findingId: m.id, late: c.lateUse !== undefined, resolvedAt: c.lateUse?.resolvedAt ?? null }] : [];
      });
      if (ref && reopened.length === 0 && (await this.unchangedNow(ref, members, (succeeded ??= await this.succeededApprovals(cluster))))) continue;
      items.push({
        key: `alert:${gid}`,
        kind: 'alert',
        cluster,
        channel: target,
        call: posted ? 'edit' : 'post',
        urgency: live.length ? urgencyOf(live.map((m) => m.finding)) : URGENCY_LAST,
        enqueuedAt: now,
        notBefore: 0,
        attempts: 0,
        version: 0,
        payload: reopened.length ? { reopened } : {},
      });
    }
    return items;
  }

  /**
   * Sends one queued alert item ({@link workItems}): under the group's lock, posts, edits (only on a visible change)
   * and replies exactly as a poll's notification did. Groups whose findings are gone are skipped.
   * @returns where the group's alert is afterwards (undefined when it has none: nothing open to post).
   * @throws SlackCallError (the drainer backs off and tries again)
   */
  async sendItem(item: OutboxItem): Promise<MessageLocation | undefined> {
    const gid = item.key.slice('alert:'.length);
    const members = (await this.deps.store.findings.list(item.cluster)).filter((m) => groupIdOf(m.finding) === gid);
    if (members.length > 0) {
      const byId = new Map<string, FindingChange>();
      for (const r of item.payload.reopened ?? []) {
        const m = members.find((x) => x.id === r.findingId);
        if (!m) continue;
        const change: FindingChange = { id: m.id, isNew: false, severity: m.finding.severity, previousSeverity: m.finding.severity, status: 'open', previousStatus: 'resolved' };
        if (r.late && r.resolvedAt !== null) change.lateUse = { resolvedAt: r.resolvedAt };
        byId.set(m.id, change);
      }
      await this.refreshPodCounts(item.cluster, members.map((m) => m.finding));
      return await this.withLock(gid, () => this.notifyGroup(item.channel, gid, members, byId));
    }
    return this.messageOfGroup(gid);
  }

  /** The digest line of a group (src/slack/blocks/digest.ts): cluster, subject, worst severity and header fact of its live findings. */
  async digestLine(cluster: string, groupId: string, now: number): Promise<OutboxDigestLine | undefined> {
    const members = (await this.deps.store.findings.list(cluster)).filter((m) => groupIdOf(m.finding) === groupId);
    const live = members.filter((m) => m.status !== 'resolved').map((m) => m.finding).sort(compareFindings);
    const lead = live[0];
    if (!lead) return undefined;
    return { groupId, cluster, subject: subjectOf(lead), severity: worstSeverity(live), fact: worstFact(live, now, this.deps.activeWindowMs) };
  }

  /** The stored findings of the group of `f` (all statuses), most severe first. */
  async membersOf(f: Pick<Finding, 'cluster' | 'namespace' | 'serviceAccount'>): Promise<StoredFinding[]> {
    return (await this.deps.store
      .findings.list(f.cluster))
      .filter((s) => s.finding.namespace === f.namespace && s.finding.serviceAccount === f.serviceAccount)
      .sort((a, b) => compareFindings(a.finding, b.finding));
  }

  /** Posts or edits a group's alert (see {@link sendItem}); returns where the alert is afterwards (undefined: none). */
  private async notifyGroup(channel: string, gid: string, members: StoredFinding[], byId: ReadonlyMap<string, FindingChange>): Promise<MessageLocation | undefined> {
    const { store, api, clock } = this.deps;
    const now = clock();
    members = [...members].sort((a, b) => compareFindings(a.finding, b.finding));
    const live = members.filter((m) => m.status !== 'resolved');
    const open = members.filter((m) => m.status === 'open');
    const lead = (live[0] ?? members[0])!.finding;
    const ref = await store.slackRefs.getAlertRef(gid);
    if (!ref) {
      const legacy: { id: string; ref: MessageRef }[] = [];
      for (const m of members) {
        const r = await store.slackRefs.getMessageRef(m.id);
        if (r) legacy.push({ id: m.id, ref: r });
      }
      if (legacy.length) return await this.mergeLegacy(gid, members, legacy, now);
      if (open.length === 0) return undefined;
      const view = await this.viewGroupNow(members, now);
      const msg = renderAlert(view);
      // A process that died between chat.postMessage and saving the ref left an intent: find that message by its
      // metadata (the group id) and adopt it instead of posting the alert twice (docs/slack.md, "Crash safety").
      const intent = await store.slackRefs.getGroupIntent(gid);
      const at = this.deps.channels.idOf(intent?.channel ?? channel);
      if (intent) {
        const ts = await api.findByMetadata(at, ALERT_EVENT_TYPE, 'group_id', gid, intent.at - INTENT_LOOKBACK_MS).catch((err: unknown) => {
          this.deps.logger.warn({ err, group: gid }, 'could not look for an alert posted before a restart (channels:history / groups:history scope?); posting it');
          return undefined;
        });
        if (ts !== undefined) {
          this.deps.logger.info({ group: gid, channel: at, ts }, 'found the alert posted before a restart; updating it instead of posting again');
          await api.update(at, ts, msg);
          await store.slackRefs.saveAlertRef(gid, lead.cluster, { channel: at, ts, severity: worstSeverity(live.map((m) => m.finding)), hash: visibleHash(view), signals: liveKinds(live) });
          return { channel: at, ts };
        }
      }
      await store.slackRefs.recordGroupIntent(gid, at, now);
      // The owners of the route are mentioned in the first post only (edits render without the mention).
      const route = await this.routeFor(lead);
      const severityNow = worstSeverity(live.map((m) => m.finding));
      const first = route && this.deps.channels.matches(route.channel, { id: at }) && mentions(route, severityNow) ? withOwnersMention(msg, route) : msg;
      // The final blocks go in the first chat.postMessage: no chat.update right after, so no "(edited)" on a new alert.
      const posted = await api.post(channel, first, undefined, { event_type: ALERT_EVENT_TYPE, event_payload: { group_id: gid, finding_id: lead.id } });
      this.deps.channels.learn(channel, posted.channel);
      await store.slackRefs.saveAlertRef(gid, lead.cluster, { channel: posted.channel, ts: posted.ts, severity: worstSeverity(live.map((m) => m.finding)), hash: visibleHash(view), signals: liveKinds(live) });
      return { channel: posted.channel, ts: posted.ts };
    }
    if (snoozedThrough(live, now, ref)) return { channel: ref.channel, ts: ref.ts };
    const view = await this.viewGroupNow(members, now);
    const msg = renderAlert(view);
    const hash = visibleHash(view);
    let at = { channel: ref.channel, ts: ref.ts };
    if (!showsAlready(ref.hash, view, msg)) at = await this.updateOrRepost(at, msg, channel);
    const severity = live.length ? worstSeverity(live.map((m) => m.finding)) : ref.severity;
    const kinds = liveKinds(live);
    if (open.length && SEVERITY_RANK[severity] > SEVERITY_RANK[ref.severity]) {
      // Owners are mentioned again when severity rises to their rule's mentionFrom or above, if the rule that matches
      // now routes to the alert's channel (a rules change does not move an alert, nor page the new rule's owners there).
      const route = await this.routeFor(lead);
      const escalation = escalationMessage(lead, { type: 'severity', from: ref.severity, to: severity }, { now });
      const mention = route && this.deps.channels.matches(route.channel, { id: at.channel }) && mentions(route, severity);
      await api.post(at.channel, mention ? withOwnersMention(escalation, route) : escalation, at.ts);
    }
    const reopened = members.find((m) => byId.get(m.id)?.previousStatus === 'resolved' && byId.get(m.id)?.status === 'open');
    if (reopened && ref.signals.length === 0) {
      const late = byId.get(reopened.id)?.lateUse;
      await api.post(at.channel, reopenedMessage(reopened.finding, late?.resolvedAt ?? null, late !== undefined), at.ts);
    } else if (live.length) {
      const started = kinds.filter((k) => !ref.signals.includes(k));
      const stopped = ref.signals.filter((k) => !kinds.includes(k));
      if (started.length || stopped.length) {
        const requests: Partial<Record<FindingKind, number>> = {};
        for (const k of started) requests[k] = live.filter((m) => m.finding.kind === k).reduce((a, m) => a + m.finding.requests, 0);
        await api.post(at.channel, signalChangeMessage(lead.cluster, subjectOf(lead), { started, stopped }, { requests }), at.ts);
      }
    }
    // Nothing to record when the alert is where it was and shows what it showed (most polls): no write transaction.
    const unchanged = at.channel === ref.channel && at.ts === ref.ts && severity === ref.severity && hash === ref.hash && sameKinds(kinds, ref.signals);
    if (!unchanged) await store.slackRefs.saveAlertRef(gid, lead.cluster, { ...at, severity, hash, signals: kinds });
    return at;
  }

  /**
   * Upgrade from one alert per finding: the newest per-kind message of the group is kept and shows the group; every
   * other one is edited once to point at it; the per-finding refs are deleted so they are never edited again.
   */
  private async mergeLegacy(gid: string, members: StoredFinding[], legacy: Array<{ id: string; ref: MessageRef }>, now: number): Promise<MessageLocation> {
    const { store, api, logger } = this.deps;
    const live = members.filter((m) => m.status !== 'resolved');
    const lead = (live[0] ?? members[0])!.finding;
    const sorted = [...legacy].sort((a, b) => Number(b.ref.ts) - Number(a.ref.ts));
    const keep = sorted[0]!;
    const view = await this.viewGroupNow(members, now);
    const at = await this.updateOrRepost({ channel: keep.ref.channel, ts: keep.ref.ts }, renderAlert(view), keep.ref.channel);
    await store.slackRefs.saveAlertRef(gid, lead.cluster, { ...at, severity: live.length ? worstSeverity(live.map((m) => m.finding)) : keep.ref.severity, hash: visibleHash(view), signals: liveKinds(live) });
    let link: string | undefined;
    if (sorted.length > 1) link = await api.permalink(at.channel, at.ts).catch(() => undefined);
    for (const old of sorted.slice(1)) {
      try {
        await api.update(old.ref.channel, old.ref.ts, mergedAlertMessage(lead.cluster, subjectOf(lead), link));
      } catch (err) {
        logger.warn({ err, finding: old.id }, 'could not point an older per-kind alert at its merged alert');
      }
    }
    for (const l of legacy) await store.slackRefs.deleteMessageRef(l.id);
    logger.info({ group: gid, kept: keep.ref.ts, merged: sorted.length - 1 }, 'merged per-kind alerts into one alert');
    return at;
  }

  /** chat.update; when the message was deleted by someone (`message_not_found`), posts it anew. */
  private async updateOrRepost(at: MessageLocation, msg: SlackMessage, channel: string): Promise<MessageLocation> {
    try {
      await this.deps.api.update(at.channel, at.ts, msg);
      return at;
    } catch (err) {
      if (err instanceof SlackCallError && err.slackError === 'message_not_found') {
        this.deps.logger.warn({ channel: at.channel, ts: at.ts }, 'the alert message was deleted in Slack; posting it again');
        const posted = await this.deps.api.post(channel, msg);
        return { channel: posted.channel, ts: posted.ts };
      }
      throw err;
    }
  }

  /**
   * Re-renders the alert of a finding's group now (after a snooze, a resolution, a recreated ServiceAccount) and
   * updates it when its content changed. No-op for a group without a message.
   */
  async refresh(findingId: string): Promise<void> {
    const stored = await this.deps.store.findings.get(findingId);
    if (!stored) return;
    const gid = groupIdOf(stored.finding);
    // Rendered from the store when it runs: refreshes queued behind it join it (one edit for a burst of changes).
    await this.withLatest(gid, async () => {
      const { store } = this.deps;
      const ref = await store.slackRefs.getAlertRef(gid);
      if (!ref) return;
      const members = await this.membersOf(stored.finding);
      const view = await this.viewGroupNow(members, this.deps.clock());
      const msg = renderAlert(view);
      const hash = visibleHash(view);
      if (showsAlready(ref.hash, view, msg)) {
        if (hash !== ref.hash) await store.slackRefs.saveAlertRef(gid, stored.cluster, { ...ref, hash });
        return;
      }
      const at = await this.updateOrRepost({ channel: ref.channel, ts: ref.ts }, msg, ref.channel);
      await store.slackRefs.saveAlertRef(gid, stored.cluster, { ...ref, ...at, hash, signals: liveKinds(members.filter((m) => m.status !== 'resolved')) });
    });
  }

  /** Posts a reply in a finding's alert thread (top level in the cluster channel when it has no alert). */
  async reply(f: Finding, msg: SlackMessage): Promise<MessageLocation | undefined> {
    const ref = await this.messageOf(f.id);
    const channel = ref?.channel ?? this.deps.channels.channelOf(f.cluster);
    if (channel === undefined) return undefined;
    const posted = await this.deps.api.post(channel, msg, ref?.ts);
    return { channel: posted.channel, ts: posted.ts };
  }

  /**
   * The route of a new alert led by `lead` (src/slack/routing.ts): its namespace, ServiceAccount and workloads, plus
   * the labels/annotations of its workloads and pods from cluster state when a rule needs them (unreadable state:
   * rules on labels do not match). Undefined when the cluster has no channel.
   */
  async routeFor(lead: Finding): Promise<Route | undefined> {
    const { channels } = this.deps;
    let workloads: Array<{ kind: string; name: string } & ObjectMeta> = lead.workloads.map((w) => ({ kind: w.kind, name: w.name }));
    let pods: ObjectMeta[] = [];
    const state = lead.namespace !== '*' && rulesNeedState(channels.routes) ? this.deps.stateOf?.(lead.cluster) : undefined;
    if (state) {
      try {
        const s = await state.describeServiceAccount(lead.namespace, lead.serviceAccount);
        if (s.available) {
          pods = s.pods.map((p) => ({ labels: p.labels, ...(p.annotations ? { annotations: p.annotations } : {}) }));
          const known = new Map(s.workloads.map((w) => [`${w.kind}/${w.name}`, w]));
          workloads = [...new Map([...workloads, ...s.workloads].map((w) => [`${w.kind}/${w.name}`, w])).values()].map((w) => {
            const info = known.get(`${w.kind}/${w.name}`);
            return { kind: w.kind, name: w.name, ...(info?.labels ? { labels: info.labels } : {}), ...(info?.annotations ? { annotations: info.annotations } : {}) };
          });
        }
      } catch (err) {
        this.deps.logger.warn({ err, cluster: lead.cluster }, 'could not read cluster state for the routing rules; rules on labels and annotations do not match this alert');
      }
    }
    const namespaceLabels = state && rulesNeedNamespaceLabels(channels.routes) ? await this.namespaceLabelsFor(state, lead) : undefined;
    return channels.routeOf({ cluster: lead.cluster, namespace: lead.namespace, serviceAccount: lead.serviceAccount, workloads, pods, ...(namespaceLabels ? { namespaceLabels } : {}) });
  }

  /** The namespace labels the rules name of `lead`'s namespace; undefined (logged: rules on them do not match) when unreadable. */
  private async namespaceLabelsFor(state: ClusterStateSource, lead: Finding): Promise<Readonly<Record<string, string>> | undefined> {
    const ns = state.namespaceLabels ? await state.namespaceLabels(lead.namespace) : { available: false as const, error: 'this cluster state source does not read namespaces' };
    if (ns.available) return ns.labels;
    this.deps.logger.warn({ cluster: lead.cluster, namespace: lead.namespace, reason: ns.error }, `could not read the labels of namespace ${lead.namespace} for the routing rules (${ns.error}); rules on namespace labels do not match this alert`);
    return undefined;
  }

  private async refreshPodCounts(cluster: string, findings: readonly Finding[]): Promise<void> {
    const state = this.deps.stateOf?.(cluster);
    if (!state) return;
    const now = Date.now();
    for (const f of findings) {
      if (f.workloads.length === 0) continue;
      const gid = groupIdOf(f);
      const hit = this.podsTotal.get(gid);
      if (hit && now - hit.at < PODS_TOTAL_TTL_MS) continue;
      let value: number | undefined;
      try {
        const s = await state.describeServiceAccount(f.namespace, f.serviceAccount);
        if (s.available) {
          const desired = s.workloads.map((w) => w.desired);
          value = desired.length && desired.every((d) => d !== undefined) ? desired.reduce<number>((a, b) => a + (b ?? 0), 0) : s.pods.length || undefined;
        }
      } catch {
        value = undefined;
      }
      this.podsTotal.set(gid, { value, at: now });
    }
  }
}

/**
 * `msg` with a context block mentioning the route's owners (`<!subteam^S…>`, `<@U…>`), built only from the configured
 * ids ({@link ownersMention}); the fallback text is unchanged (escaped plain text).
 */
export function withOwnersMention(msg: SlackMessage, route: Pick<Route, 'owners'>): SlackMessage {
  const who = ownersMention(route.owners);
  if (!who) return msg;
  return { ...msg, blocks: [...msg.blocks, { type: 'context', elements: [{ type: 'mrkdwn', text: `🔔 Owners: ${who}` }] }] };
}
