/**
 * Alerts: one Slack message per finding in its cluster's channel, kept current.
 *
 * After every successful poll ({@link Notifier.onFindings}), per finding (most urgent first):
 * - no message yet and the finding is open → `chat.postMessage`, and the message ref (channel, ts, severity shown,
 *   content hash) is saved at once. A finding with a ref is never posted again, across restarts too;
 * - a message exists → re-rendered; `chat.update` only when the content hash changed (counts, days left, sparkline,
 *   resolved); a snoozed finding is not touched until the snooze ends;
 * - severity went up since the message was last rendered (warning → critical) → an escalation reply in the thread;
 * - a new `unauthorized` finding for a subject whose stale-token alert already exists → a "first 401s" reply there;
 * - a resolved finding seen again (store status `resolved` → `open`) → a "reopened" reply, buttons back; reopened by a
 *   use delivered late into a quiet-resolved period (`FindingChange.lateUse`) → the reply says it was seen late;
 * - a finding resolved (verified, or quiet: no signal for `findings.quietPeriod`) → the alert is updated in place to
 *   its resolved variant (✅ header, why, no buttons).
 * Every message names the cluster. Posts to a channel are serialized and spaced (`SlackApi`), and work on one
 * finding is serialized by a per-finding lock, so two polls or a poll and a button click never race to post.
 * A channel that cannot be posted to (bot not invited, archived) stops the round for that cluster; the problem is
 * logged once and shown by `/tokens status`.
 */
import { createHash } from 'node:crypto';
import type { ApprovalPolicy } from '../approvals/index.js';
import { namespaceAllowed } from '../approvals/index.js';
import type { ClusterStateSource } from '../cluster/types.js';
import { DAY_MS, HOUR_MS } from '../core/units.js';
import { isCredentialEventFinding } from '../findings/cluster-events.js';
import { SEVERITY_RANK, type Finding, type TokenRecord } from '../findings/types.js';
import type { Logger } from '../observability/logger.js';
import type { FindingChange, MessageLocation, Store, StoredFinding } from '../store/index.js';
import { SlackCallError, type SlackApi } from './api.js';
import {
  escalationMessage,
  findingButtons,
  findingMessage,
  mergeHourly,
  type Button,
  type FindingAction,
  type SlackMessage,
} from './blocks/index.js';
import type { ButtonIds } from './buttons.js';
import type { ChannelMap } from './channels.js';
import { reopenedMessage } from './messages.js';

/** Slack message metadata `event_type` of an alert; its `event_payload.finding_id` is the finding id. */
export const ALERT_EVENT_TYPE = 'tokenwatch_alert';
/** How far before a recorded intent the channel history is searched (clock skew with Slack), ms. */
const INTENT_LOOKBACK_MS = 10 * 60_000;

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

/** The note of a resolved alert, by why it was resolved. */
export function resolutionNote(stored: Pick<StoredFinding, 'resolution' | 'finding'>, quietPeriodMs = DAY_MS): string {
  const signal = stored.finding.kind === 'unauthorized' ? '401 responses' : stored.finding.kind === 'legacy-token' ? 'legacy-token use' : 'stale token use';
  if (stored.resolution === 'quiet') {
    return `no ${signal} for ${Math.round(quietPeriodMs / HOUR_MS)} h while every poll succeeded (quiet); it reopens here if seen again`;
  }
  return `no ${signal} after the fix for the settle period`;
}

/** Content hash of a rendered message (16 hex chars of SHA-256). */
export function messageHash(msg: SlackMessage): string {
  return createHash('sha256').update(JSON.stringify([msg.text, msg.blocks])).digest('hex').slice(0, 16);
}

/** See the module docstring. */
export class Notifier {
  private readonly locks = new Map<string, Promise<unknown>>();
  private readonly podsTotal = new Map<string, { value: number | undefined; at: number }>();

  constructor(private readonly deps: NotifierDeps) {}

  /** Runs `fn` after every earlier task for the same key (finding id) has finished. */
  withLock<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(key) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => undefined);
    this.locks.set(key, tail);
    void tail.then(() => {
      if (this.locks.get(key) === tail) this.locks.delete(key);
    });
    return next;
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

  /** Renders a stored finding as its alert (resolved variant for resolved findings). */
  render(stored: StoredFinding, records: readonly TokenRecord[], now: number): SlackMessage {
    const f = stored.finding;
    const mine = records.filter((r) => r.kind === f.kind && r.namespace === f.namespace && r.serviceAccount === f.serviceAccount);
    const podsTotal = this.podsTotal.get(f.id)?.value;
    return findingMessage(f, {
      now,
      buttonsFor: this.buttonsFor(f),
      ...(stored.status === 'resolved' ? { resolved: { at: stored.resolvedAt ?? now, note: resolutionNote(stored, this.deps.quietPeriodMs) } } : {}),
      ...(this.deps.activeWindowMs !== undefined ? { activeWindowMs: this.deps.activeWindowMs } : {}),
      ...(stored.status === 'snoozed' && stored.snoozedUntil !== null ? { snoozedUntil: stored.snoozedUntil } : {}),
      ...(mine.length ? { hourly: mergeHourly(mine.map((r) => r.hourly)) } : {}),
      ...(podsTotal !== undefined ? { podsTotal } : {}),
    });
  }

  /** Where a finding's alert is, if posted. */
  messageOf(findingId: string): MessageLocation | undefined {
    const ref = this.deps.store.getMessageRef(findingId);
    return ref ? { channel: ref.channel, ts: ref.ts } : undefined;
  }

  /**
   * Handles one poll's findings of `cluster` (see the module docstring). Never throws for Slack failures: they
   * are logged and counted; the next poll tries again.
   */
  async onFindings(cluster: string, findings: readonly Finding[], changes: readonly FindingChange[]): Promise<void> {
    const channel = this.deps.channels.channelOf(cluster);
    if (channel === undefined) return;
    const { store, logger } = this.deps;
    const byId = new Map(changes.map((c) => [c.id, c]));
    const records = store.listTokenRecords(cluster);
    await this.refreshPodCounts(cluster, findings);
    const postedBefore = new Set(findings.filter((f) => store.getMessageRef(f.id) !== undefined).map((f) => f.id));
    for (const f of findings) {
      try {
        await this.withLock(f.id, () => this.notifyOne(channel, f, byId.get(f.id), records));
      } catch (err) {
        if (err instanceof SlackCallError && this.deps.api.channelProblem(channel)) {
          logger.warn({ cluster, channel, error: err.slackError }, 'alerts for this cluster are paused until the channel problem is fixed');
          return;
        }
        logger.error({ err, cluster, finding: f.id }, 'could not post or update the alert of a finding');
      }
    }
    // First 401s of a subject whose stale-token alert already existed: say so in that alert's thread.
    for (const f of findings) {
      if (f.kind !== 'unauthorized' || byId.get(f.id)?.isNew !== true) continue;
      const stale = findings.find((s) => s.kind === 'stale-token' && s.namespace === f.namespace && s.serviceAccount === f.serviceAccount);
      if (!stale || !postedBefore.has(stale.id)) continue;
      const ref = store.getMessageRef(stale.id);
      if (!ref) continue;
      try {
        await this.deps.api.post(ref.channel, escalationMessage(stale, { type: 'first-401', requests: f.requests }, { now: this.deps.clock() }), ref.ts);
      } catch (err) {
        logger.error({ err, cluster, finding: stale.id }, 'could not post the first-401 reply');
      }
    }
  }

  private async notifyOne(channel: string, f: Finding, change: FindingChange | undefined, records: readonly TokenRecord[]): Promise<void> {
    const { store, api, clock } = this.deps;
    const stored = store.getFinding(f.id);
    if (!stored) return;
    const now = clock();
    const ref = store.getMessageRef(f.id);
    if (!ref) {
      if (stored.status !== 'open') return;
      const msg = this.render(stored, records, now);
      // A process that died between chat.postMessage and saving the ref left an intent: find that message by its
      // metadata (the finding id) and adopt it instead of posting the alert twice (issue #10 §3).
      const intent = store.getAlertIntent(f.id);
      if (intent) {
        const ts = await api
          .findByMetadata(this.deps.channels.channelIdOf(f.cluster) ?? intent.channel, ALERT_EVENT_TYPE, 'finding_id', f.id, intent.at - INTENT_LOOKBACK_MS)
          .catch((err: unknown) => {
            this.deps.logger.warn({ err, finding: f.id }, 'could not look for an alert posted before a restart (channels:history / groups:history scope?); posting it');
            return undefined;
          });
        if (ts !== undefined) {
          this.deps.logger.info({ finding: f.id, channel: intent.channel, ts }, 'found the alert posted before a restart; updating it instead of posting again');
          const at = this.deps.channels.channelIdOf(f.cluster) ?? intent.channel;
          await api.update(at, ts, msg);
          store.saveMessageRef(f.id, { channel: at, ts, severity: f.severity, hash: messageHash(msg) });
          return;
        }
      }
      store.recordAlertIntent(f.id, this.deps.channels.channelIdOf(f.cluster) ?? channel, now);
      const posted = await api.post(channel, msg, undefined, { event_type: ALERT_EVENT_TYPE, event_payload: { finding_id: f.id } });
      this.deps.channels.learn(channel, posted.channel);
      store.saveMessageRef(f.id, { channel: posted.channel, ts: posted.ts, severity: f.severity, hash: messageHash(msg) });
      return;
    }
    if (stored.status === 'snoozed' && stored.snoozedUntil !== null && stored.snoozedUntil > now) return;
    const msg = this.render(stored, records, now);
    const hash = messageHash(msg);
    let at = { channel: ref.channel, ts: ref.ts };
    if (hash !== ref.hash) at = await this.updateOrRepost(at, msg, channel);
    if (stored.status === 'open' && SEVERITY_RANK[f.severity] > SEVERITY_RANK[ref.severity]) {
      await api.post(at.channel, escalationMessage(f, { type: 'severity', from: ref.severity, to: f.severity }, { now }), at.ts);
    }
    if (change?.previousStatus === 'resolved' && change.status === 'open') {
      await api.post(at.channel, reopenedMessage(f, change.lateUse?.resolvedAt ?? null, change.lateUse !== undefined), at.ts);
    }
    store.saveMessageRef(f.id, { ...at, severity: f.severity, hash });
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
   * Re-renders one finding's alert now (after a snooze, a resolution, a recreated ServiceAccount) and updates it
   * when its content changed. No-op for a finding without a message.
   */
  async refresh(findingId: string): Promise<void> {
    await this.withLock(findingId, async () => {
      const { store } = this.deps;
      const stored = store.getFinding(findingId);
      const ref = store.getMessageRef(findingId);
      if (!stored || !ref) return;
      const msg = this.render(stored, store.listTokenRecords(stored.cluster), this.deps.clock());
      const hash = messageHash(msg);
      if (hash === ref.hash) return;
      const at = await this.updateOrRepost({ channel: ref.channel, ts: ref.ts }, msg, ref.channel);
      store.saveMessageRef(findingId, { ...at, severity: ref.severity, hash });
    });
  }

  /** Posts a reply in a finding's thread (top level in the cluster channel when it has no alert). */
  async reply(f: Finding, msg: SlackMessage): Promise<MessageLocation | undefined> {
    const ref = this.deps.store.getMessageRef(f.id);
    const channel = ref?.channel ?? this.deps.channels.channelOf(f.cluster);
    if (channel === undefined) return undefined;
    const posted = await this.deps.api.post(channel, msg, ref?.ts);
    return { channel: posted.channel, ts: posted.ts };
  }

  private async refreshPodCounts(cluster: string, findings: readonly Finding[]): Promise<void> {
    const state = this.deps.stateOf?.(cluster);
    if (!state) return;
    const now = Date.now();
    for (const f of findings) {
      if (f.workloads.length === 0) continue;
      const hit = this.podsTotal.get(f.id);
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
      this.podsTotal.set(f.id, { value, at: now });
    }
  }
}
