/**
 * What happens after a button click (already acknowledged): the approval-gated remediation flow and the
 * direct actions (Snooze, Details).
 *
 * Request (Restart / Recreate ServiceAccount): the button id is resolved in the store (never read from the
 * payload) → the click must come from the cluster's alert channel → requester policy (`canRequest`, user groups
 * via `usergroups.users.list`) → no other open request for the same target → server-side dry run (`dryRun=All`;
 * a failure, e.g. RBAC or a paused Deployment, is reported in the thread and stops) → the approval message in the
 * finding's thread, naming the requester, the exact target, the approvers and the expiry.
 *
 * Vote (Approve / Reject): the approval is read by its id; the pure state machine decides (`decide`: allowed
 * approver, not the requester, not expired, not decided yet); the store's compare-and-set commits it, so of ten
 * simultaneous clicks one wins and the others are told it is already decided. Quorum reached → the executor
 * (`src/remediation/executor.ts`) runs it once (`approved → running` is a second compare-and-set), with rollout
 * progress in the thread. Every refusal is an ephemeral message saying why, and an action-log row when the cluster
 * is known. A periodic sweep expires requests past `expiresAt` and edits their message.
 */
import { approvalEvent, approvalsOf, canRequest, createApproval, decide, voidApprovals, type ActionKind, type ApprovalPolicy } from '../approvals/index.js';
import { actionNoun, objectLabel } from '../core/actions.js';
import type { ClusterStateSource } from '../cluster/types.js';
import { DAY_MS } from '../core/units.js';
import type { IgnoredEventTimes } from '../findings/clock-skew.js';
import { worstSeverity } from '../findings/groups.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import {
  applyEffects,
  claimRequest,
  commitEvent,
  executeApproval,
  resendPendingProgress,
  type ExecutorDeps,
  type PreflightRecord,
  type Remediator,
} from '../remediation/executor.js';
import type { Preflight, RecreateResult, RolloutProgress } from '../remediation/kube-remediator.js';
import { newApprovalId, type MessageLocation, type NewActionLogEntry, type Store, type StoredApproval } from '../store/index.js';
import { SlackCallError, type SlackApi } from './api.js';
import {
  approvalRequestMessage,
  detailsMessage,
  mergeHourly,
  progressMessage,
  recreateConfirmModal,
  refusalMessage,
  refusalText,
  rejectReasonModal,
  type FindingAction,
  type SlackMessage,
  type TargetFacts,
} from './blocks/index.js';
import type { ButtonIds, ResolvedButton } from './buttons.js';
import type { ChannelMap, ChannelRef } from './channels.js';
import type { Directory } from './directory.js';
import { alarmMessage, noteMessage, recreatedMessage, requestedMessage, snoozedMessage, wrongChannelText } from './messages.js';
import type { Notifier } from './notifier.js';

/** An approval picked up by the cluster's owner must be at least this old in its state, ms (see `pickUp`). */
export const PICKUP_GRACE_MS = 1000;

/** Refusal rows are written to the action log in batches, at most this long after the click, ms. */
export const REFUSAL_FLUSH_MS = 200;

/** The dry run as the flow stores it: the executor's record plus the facts shown to approvers. */
export interface StoredDryRun extends PreflightRecord {
  facts?: TargetFacts;
}

/** Who clicked, where, and how to answer them privately. */
export interface Clicker {
  user: string;
  /** The channel the click came from (undefined outside a channel). */
  channel: ChannelRef | undefined;
  /** An ephemeral answer to the clicking user. */
  reply(msg: SlackMessage): Promise<void>;
  /** The interaction's `trigger_id` (to open a modal), when it has one. */
  triggerId?: string;
}

/**
 * The {@link Clicker} of a submitted modal, and the modal's `private_metadata` as the flow put it there (a JSON object
 * with the `channel` of the click and the id it concerns; `{}` when it does not parse, which the checks then refuse).
 */
function modalClicker(user: string, privateMetadata: string, reply: (channel: string | undefined) => Clicker['reply']): { c: Clicker; meta: Record<string, unknown> } {
  let meta: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(privateMetadata);
    if (parsed !== null && typeof parsed === 'object') meta = parsed as Record<string, unknown>;
  } catch {
    // refused by the caller's checks (no such id)
  }
  const channel = typeof meta.channel === 'string' ? meta.channel : undefined;
  return { c: { user, channel: channel ? { id: channel } : undefined, reply: reply(channel) }, meta };
}

/** Dependencies of the {@link ApprovalFlow}. */
export interface FlowDeps {
  store: Store;
  api: SlackApi;
  notifier: Notifier;
  directory: Directory;
  channels: ChannelMap;
  ids: ButtonIds;
  clock: () => number;
  logger: Logger;
  metrics?: Metrics;
  policyFor(cluster: string): ApprovalPolicy | undefined;
  remediatorFor(cluster: string): Remediator | undefined;
  /** Why a cluster cannot be acted on (Kubernetes access missing or broken), for the refusal. */
  remediationProblem(cluster: string): string;
  stateOf(cluster: string): ClusterStateSource | undefined;
  /** `config.remediation.rolloutTimeout`, ms. */
  rolloutTimeoutMs: number;
  /** Interval between rollout progress reads, ms. */
  rolloutPollMs: number;
  /** First wait before retrying the final progress edit, ms (see `ExecutorDeps.progressRetryMs`). */
  progressRetryMs?: number;
  /** Tracks background work (so `idle()` and `stop()` can wait for it). */
  track<T>(p: Promise<T>): Promise<T>;
  /** Aborted when Slack stops: running rollouts are left `running` and resumed at the next start. */
  signal?: AbortSignal;
  /**
   * Whether this replica owns `cluster` (`Ownership.owns`: only the cluster's owner executes its approved actions;
   * any replica takes clicks and commits votes in the shared store). Default: always.
   */
  owns?: (cluster: string) => boolean;
  /**
   * Token uses the cluster's last successful poll left out as stamped later than the host clock plus 24 h
   * (`src/findings/clock-skew.ts`), for the Details reply; undefined when none (or not known on this replica).
   */
  ignoredEventTimesOf?: (cluster: string) => IgnoredEventTimes | undefined;
  /**
   * Told when someone acts on an alert (an approval request stored, a snooze, a Details view), with a finding of it:
   * paging (src/slack/paging.ts) leaves that alert alone. Errors are logged.
   */
  onActed?: (f: { cluster: string; namespace: string; serviceAccount: string }) => Promise<void>;
}

/** Action-id families of the finding buttons, to check that a button's id fits the button. */
export type ButtonFamily = FindingAction['action'];

/**
 * The actions the alert's overflow menu offers (`tw_more`): Details and Snooze need no confirmation, Recreate
 * ServiceAccount opens its confirm modal. A restart is a button with a Slack `confirm` dialog and is never started from
 * the menu, whatever id an overflow choice carries.
 */
const OVERFLOW_ACTIONS: ReadonlySet<ButtonFamily> = new Set<ButtonFamily>(['details', 'snooze', 'recreate-serviceaccount']);

/** See the module docstring. */
export class ApprovalFlow {
  private readonly approverCache = new Map<string, string[]>();
  private readonly lastDetails = new Map<string, number>();
  /** Approvals this process is executing or following now, with their cluster. */
  private readonly executing = new Map<string, string>();
  /** Ended restarts whose final progress Slack has not accepted yet (re-sent at each {@link pickUp}). */
  private readonly progressPending = new Set<string>();
  /** Whether the first pickUp has read {@link progressPending} from the store (so they survive a restart). */
  private progressScanned = false;
  private refusals: NewActionLogEntry[] = [];
  private refusalTimer: NodeJS.Timeout | undefined;
  readonly executor: ExecutorDeps;

  /**
   * Writes the buffered refusal rows of the action log in one transaction. Refusals change nothing, so they are
   * batched (one fsync per {@link REFUSAL_FLUSH_MS} instead of one per click) to keep the event loop free for acks
   * when many clicks arrive at once. Called by a timer and on stop.
   */
  async flushRefusals(): Promise<void> {
    if (this.refusalTimer) clearTimeout(this.refusalTimer);
    this.refusalTimer = undefined;
    const rows = this.refusals;
    this.refusals = [];
    if (rows.length === 0) return;
    try {
      await this.deps.store.transaction(async (tx) => {
        for (const r of rows) await tx.actions.log(r);
      });
    } catch (err) {
      this.deps.logger.error({ err, rows: rows.length }, 'could not write refusals to the action log');
    }
  }

  constructor(private readonly deps: FlowDeps) {
    this.executor = {
      store: deps.store,
      remediatorFor: deps.remediatorFor,
      policyFor: deps.policyFor,
      clock: deps.clock,
      rolloutTimeoutMs: deps.rolloutTimeoutMs,
      pollIntervalMs: deps.rolloutPollMs,
      ...(deps.progressRetryMs !== undefined ? { progressRetryMs: deps.progressRetryMs } : {}),
      logger: deps.logger,
      ...(deps.metrics ? { metrics: deps.metrics } : {}),
      ...(deps.signal ? { signal: deps.signal } : {}),
      ...(deps.owns ? { owns: deps.owns } : {}),
      hooks: {
        onApprovalChanged: (a) => this.updateApprovalMessage(a),
        onProgress: (a, p, startedAt) => this.showProgress(a, p, startedAt),
        onProgressPending: async (a) => void this.progressPending.add(a.id),
        onRecreated: (a, r) => this.showRecreated(a, r),
        onAlarm: (a, text) => this.alarm(a, text),
      },
    };
  }

  // ---- finding buttons ---------------------------------------------------------------------------------------

  /**
   * A click on a finding button (`family` from its action_id; `'any'` for an overflow-menu option, whose value says
   * which action it is) carrying the opaque id `id`. Resolves the id in the store and dispatches to request / snooze /
   * details. An overflow option carrying a restart's id is refused (see `OVERFLOW_ACTIONS`): the menu has no confirm step. Recreate ServiceAccount first checks that recreating is a fix for the alert's cause (refused with the
   * reason otherwise: a forged or stale click changes nothing), then opens the confirm modal saying what breaks; its
   * submission comes back with `confirmed` (see {@link confirmedRecreate}).
   */
  async onFindingButton(c: Clicker, family: ButtonFamily | 'any', id: string, days?: 1 | 7, confirmed = false): Promise<void> {
    const btn = await this.deps.ids.resolve(id);
    if (!btn || (family !== 'any' && (btn.action.action !== family || (btn.action.action === 'snooze' && btn.action.days !== days)))) {
      this.deps.logger.warn({ user: c.user, family, valueLength: id.length }, 'refused a button click with an unknown or tampered value');
      await c.reply(refusalMessage('This button is not valid any more (unknown or altered value), so nothing was done. Use the buttons on the current alert, or `/tokens status`.'));
      return;
    }
    if (family === 'any' && !OVERFLOW_ACTIONS.has(btn.action.action)) {
      // A restart id sent as an overflow option (a crafted payload): the menu has no confirm step, the button has one.
      this.deps.logger.warn({ user: c.user, action: btn.action.action }, 'refused an overflow-menu choice carrying the id of an action that needs its confirm step');
      return await this.refuse(
        c,
        btn,
        'A restart is requested only from the alert’s Restart button, which asks for confirmation first; the ⋯ menu has no such step, so nothing was requested. Use the Restart button on the alert.',
      );
    }
    const cluster = btn.finding.cluster;
    if (!c.channel || !this.deps.channels.allows(cluster, c.channel)) {
      await this.refuse(c, btn, wrongChannelText(cluster, this.deps.channels.channelOf(cluster) ? this.deps.channels.mention(cluster) : undefined));
      return;
    }
    switch (btn.action.action) {
      case 'details':
        return await this.details(c, btn);
      case 'snooze':
        return await this.snooze(c, btn, btn.action.days);
      case 'recreate-serviceaccount': {
        // Checked at the click and again at the modal's submission: the alert's signals may have changed between.
        const notAFix = await this.recreateRefusal(btn);
        if (notAFix) return await this.refuse(c, btn, notAFix);
        if (!confirmed) return await this.confirmRecreate(c, btn);
        return await this.deps.notifier.withLock(`request:${objectLabel(btn.target)}@${btn.target.cluster}`, async () => await this.request(c, btn, 'recreate-serviceaccount'));
      }
      default:
        // One request at a time per target in this process (the store arbitrates between processes).
        return await this.deps.notifier.withLock(`request:${objectLabel(btn.target)}@${btn.target.cluster}`, async () => await this.request(c, btn, btn.action.action as ActionKind));
    }
  }

  /**
   * Why recreating the button's ServiceAccount is not a fix for its alert's live signals (a forged or stale Recreate
   * click is refused with it), or undefined when it is (see `Notifier.recreateOffered`).
   */
  private async recreateRefusal(btn: ResolvedButton): Promise<string | undefined> {
    const live = (await this.deps.notifier.membersOf(btn.finding.finding)).filter((m) => m.status !== 'resolved').map((m) => m.finding);
    if (this.deps.notifier.recreateOffered(live.length ? live : [btn.finding.finding])) return undefined;
    const why = live.some((f) => f.cause.id === 'static-token-file')
      ? 'its token is read from a file on the node, which would keep the revoked token'
      : 'no leaked or legacy Secret token has to be revoked, and every pod of it would lose its token until restarted';
    return `Recreating ServiceAccount \`${btn.target.namespace}/${btn.target.name}\` is not a fix for this alert (${why}), so nothing was requested. Use the alert’s Restart button.`;
  }

  /**
   * Recreate ServiceAccount chosen (and offered): the confirm modal (views.open) saying what breaks. Without a
   * `trigger_id` (no modal possible) it is refused.
   */
  private async confirmRecreate(c: Clicker, btn: ResolvedButton): Promise<void> {
    if (!c.triggerId || !c.channel) return this.refuse(c, btn, 'Recreate ServiceAccount needs a confirmation dialog, which Slack did not allow here; choose it again from the alert’s ⋯ menu.');
    const pods = await this.podsOf(btn);
    try {
      await this.deps.api.openView(c.triggerId, recreateConfirmModal(btn.finding.finding, JSON.stringify({ id: btn.id, channel: c.channel.id }), pods));
    } catch (err) {
      this.deps.logger.warn({ err, finding: btn.finding.id }, 'could not open the recreate confirmation');
      await c.reply(refusalMessage('The confirmation dialog could not be opened, so nothing was requested. Try again from the alert’s ⋯ menu.'));
    }
  }

  /** Running pods of the button's ServiceAccount (best effort). */
  private async podsOf(btn: ResolvedButton): Promise<number | undefined> {
    try {
      const s = await this.deps.stateOf(btn.target.cluster)?.describeServiceAccount(btn.finding.finding.namespace, btn.finding.finding.serviceAccount);
      return s?.available ? s.pods.length : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * The recreate confirm modal was submitted (`privateMetadata` as {@link confirmRecreate} put it: the opaque id and
   * the channel of the click): the request goes through every check of a click again.
   */
  async confirmedRecreate(user: string, privateMetadata: string, reply: (channel: string | undefined) => Clicker['reply']): Promise<void> {
    const { c, meta } = modalClicker(user, privateMetadata, reply);
    await this.onFindingButton(c, 'recreate-serviceaccount', typeof meta.id === 'string' ? meta.id : '', undefined, true);
  }

  private async refuse(c: Clicker, btn: Pick<ResolvedButton, 'target'> & { kind: string }, text: string, approvalId?: string): Promise<void> {
    const t = btn.target;
    this.refusals.push({
      at: this.deps.clock(),
      cluster: t.cluster,
      findingId: t.findingId,
      approvalId: approvalId ?? null,
      actor: c.user,
      action: `${btn.kind}.refused`,
      target: objectLabel(t),
      result: 'refused',
      detail: text.replace(/[*`]/g, ''),
    });
    this.refusalTimer ??= setTimeout(() => this.flushRefusals(), REFUSAL_FLUSH_MS);
    this.deps.logger.info({ user: c.user, cluster: t.cluster, target: objectLabel(t), action: btn.kind, why: text }, 'refused');
    await c.reply(refusalMessage(text));
  }

  /**
   * Refuses a request because `open` (requested / approved / running) already acts on the same target, or is the
   * other action on the same ServiceAccount; the refusal links to the open request's message.
   */
  private async refuseOpen(c: Clicker, btn: ResolvedButton, action: ActionKind, open: StoredApproval): Promise<void> {
    const t = btn.target;
    const o = open.target;
    const status = open.state === 'requested' ? 'waiting for approval' : open.state === 'approved' ? 'approved and about to run' : 'running';
    const link = await this.linkTo(open);
    const see = link ? `<${link}|See the open request>.` : 'See the alert’s thread.';
    const same = o.kind === t.kind && o.namespace === t.namespace && o.name === t.name && open.action === action;
    const text = same
      ? `A ${actionNoun(action)} of ${t.kind} \`${t.namespace}/${t.name}\` is already open (requested by <@${open.requester}>, ${status}), so nothing new was requested. ${see}`
      : `A ${actionNoun(open.action)} of ${o.kind} \`${o.namespace}/${o.name}\` is open (requested by <@${open.requester}>, ${status}), so a ${actionNoun(action)} of ${t.kind} \`${t.namespace}/${t.name}\` cannot be requested until it ends. ${see}`;
    return this.refuse(c, btn, text, open.id);
  }

  /** A permalink to an approval's message (best effort: undefined when not posted or Slack fails). */
  private async linkTo(a: StoredApproval): Promise<string | undefined> {
    if (!a.message) return undefined;
    try {
      return await this.deps.api.permalink(a.message.channel, a.message.ts);
    } catch (err) {
      this.deps.logger.warn({ err, approval: a.id }, 'could not get the permalink of an approval message');
      return undefined;
    }
  }

  /** Restart or Recreate ServiceAccount: policy, dry run, approval message. */
  private async request(c: Clicker, btn: ResolvedButton, action: ActionKind): Promise<void> {
    const { store, clock } = this.deps;
    const t = btn.target;
    const policy = this.deps.policyFor(t.cluster);
    if (!policy) return this.refuse(c, btn, `Cluster *${t.cluster}* has no approval policy (no slack section in the config), so no action can be requested.`);
    const groups = await this.deps.directory.groupsOf(c.user, policy.requesters);
    const allowed = canRequest(c.user, action, t, policy, groups);
    if (!allowed.ok) return this.refuse(c, btn, refusalText(allowed));
    const rem = this.deps.remediatorFor(t.cluster);
    if (!rem) return this.refuse(c, btn, `tokenwatch cannot act on *${t.cluster}*: ${this.deps.remediationProblem(t.cluster)}`);
    if ((await store.findings.get(t.findingId))?.status === 'resolved') {
      return this.refuse(c, btn, 'This finding is already resolved, so nothing was requested. It reopens by itself if the stale use comes back.');
    }
    const blocking = await store.approvals.openFor(action, t, clock());
    if (blocking) return this.refuseOpen(c, btn, action, blocking);

    const now = clock();
    const pre: Preflight =
      action === 'restart'
        ? await rem.preflightRestart({ kind: t.kind, namespace: t.namespace, name: t.name }, new Date(now))
        : await rem.preflightRecreateServiceAccount({ kind: 'ServiceAccount', namespace: t.namespace, name: t.name });
    const facts = await this.factsFor(btn, action);
    const dryRun: StoredDryRun = pre.ok
      ? { ok: true, message: pre.detail, at: now, ...(pre.uid ? { uid: pre.uid } : {}), ...(pre.resourceVersion ? { resourceVersion: pre.resourceVersion } : {}), ...(facts ? { facts } : {}) }
      : { ok: false, message: pre.message, at: now, ...(facts ? { facts } : {}) };
    const created = createApproval({ id: newApprovalId(), action, target: t, requester: c.user, requesterGroups: groups, dryRun }, policy, clock());
    if (!created.ok) return this.refuse(c, btn, refusalText(created));
    // The store decides: of concurrent requests for one target (other findings, other replicas), exactly one is stored.
    // Stale requests of the target expire in the same transaction, through the state machine (see claimRequest).
    const claim = await claimRequest(this.executor, created.approval, created.approval.createdAt);
    for (const e of claim.expired) {
      await this.updateApprovalMessage(e).catch((err: unknown) => this.deps.logger.warn({ err, approval: e.id }, 'could not edit an expired approval message'));
    }
    if (!claim.ok) return this.refuseOpen(c, btn, action, claim.open);
    await this.acted(btn.finding.finding);
    await applyEffects(this.executor, created.approval, created.effects, created.approval.createdAt);

    if (!pre.ok) {
      const failed = await commitEvent(this.executor, created.approval.id, approvalEvent.fail(`server-side dry run failed: ${pre.message}`));
      const a = failed.approval ?? (await store.approvals.get(created.approval.id))!;
      // The failed request blocks nothing; the requester is told below even when its message cannot be posted.
      await this.postApprovalMessage(a).catch((err: unknown) => this.deps.logger.warn({ err, approval: a.id }, 'could not post the failed approval request'));
      await c.reply(refusalMessage(`The server-side dry run of the ${actionNoun(action)} of ${t.kind} \`${t.namespace}/${t.name}\` failed, so nothing was requested or changed: ${pre.message}`));
      return;
    }
    const a = (await store.approvals.get(created.approval.id))!;
    try {
      await this.postApprovalMessage(a);
    } catch (err) {
      // Nobody could approve a request without a message: release the target at once instead of blocking it until
      // expiry, and tell the requester.
      const why = err instanceof SlackCallError ? `Slack answered ${err.slackError}` : 'Slack did not accept it';
      this.deps.logger.warn({ err, approval: a.id, target: objectLabel(t) }, 'could not post the approval request; released it');
      const failed = await commitEvent(this.executor, a.id, approvalEvent.fail(`the approval request could not be posted in Slack (${why}); nothing was changed`));
      if (!failed.ok) this.deps.logger.warn({ approval: a.id, refusal: failed.refusal.reason }, 'could not release the unposted approval request');
      await c.reply(
        refusalMessage(`Your ${actionNoun(action)} request for ${t.kind} \`${t.namespace}/${t.name}\` could not be posted in the channel (${why}), so it was withdrawn and nothing was changed. Try again in a moment.`),
      );
      return;
    }
    await c.reply(requestedMessage(a, await this.approversOf(a)));
  }

  /** Facts about the exact target shown to approvers (pods, update strategy, what a recreation keeps). Best effort. */
  private async factsFor(btn: ResolvedButton, action: ActionKind): Promise<TargetFacts | undefined> {
    const state = this.deps.stateOf(btn.target.cluster);
    if (!state) return undefined;
    try {
      const f = btn.finding.finding;
      const s = await state.describeServiceAccount(f.namespace, f.serviceAccount);
      if (!s.available) return undefined;
      if (action === 'restart') {
        const w = s.workloads.find((x) => x.kind === btn.target.kind && x.namespace === btn.target.namespace && x.name === btn.target.name);
        if (!w) return undefined;
        return { ...(w.desired !== undefined ? { desired: w.desired } : {}), ...(w.updateStrategy ? { updateStrategy: w.updateStrategy } : {}) };
      }
      const sa = s.serviceAccount;
      if (!sa) return undefined;
      const preserved = [...Object.keys(sa.annotations).filter((k) => k !== 'kubectl.kubernetes.io/last-applied-configuration'), ...(sa.imagePullSecrets.length ? ['imagePullSecrets'] : [])];
      return { preserved, note: `${s.pods.length} running pod${s.pods.length === 1 ? '' : 's'} use it and need a restart afterwards` };
    } catch {
      return undefined;
    }
  }

  private async snooze(c: Clicker, btn: ResolvedButton, days: 1 | 7): Promise<void> {
    const { store, clock } = this.deps;
    const t = btn.target;
    const policy = this.deps.policyFor(t.cluster);
    if (!policy) return this.refuse(c, btn, `Cluster *${t.cluster}* has no approval policy, so its alerts cannot be snoozed.`);
    const groups = await this.deps.directory.groupsOf(c.user, policy.requesters);
    const allowed = canRequest(c.user, 'snooze', t, policy, groups);
    if (!allowed.ok) return this.refuse(c, btn, refusalText(allowed));
    const f = await store.findings.get(t.findingId);
    if (!f) return this.refuse(c, btn, 'This finding is no longer stored.');
    if (f.status === 'resolved') return this.refuse(c, btn, 'This finding is already resolved; there is nothing to snooze.');
    const now = clock();
    const until = now + days * DAY_MS;
    // The alert is the group's: every live finding of the ServiceAccount is snoozed with it.
    for (const m of await this.deps.notifier.membersOf(f.finding)) {
      if (m.status === 'resolved') continue;
      await store.findings.setStatus(m.id, { status: 'snoozed', until }, now);
      await store.actions.log({ at: now, cluster: t.cluster, findingId: m.id, approvalId: null, actor: c.user, action: 'snooze', target: objectLabel(t), result: 'snoozed', detail: `for ${days} d, until ${new Date(until).toISOString()}` });
    }
    await this.acted(f.finding);
    await this.deps.notifier.refresh(f.id);
    await this.deps.notifier.reply(f.finding, snoozedMessage(f.finding, c.user, until));
  }

  /** Tells {@link FlowDeps.onActed} that someone acted on the alert of `f`. */
  private async acted(f: { cluster: string; namespace: string; serviceAccount: string }): Promise<void> {
    try {
      await this.deps.onActed?.(f);
    } catch (err) {
      this.deps.logger.warn({ err, cluster: f.cluster }, 'could not record that the alert was acted on; it may still page');
    }
  }

  private async details(c: Clicker, btn: ResolvedButton): Promise<void> {
    const { store, clock } = this.deps;
    const f = btn.finding.finding;
    const now = clock();
    await this.acted(f);
    const last = this.lastDetails.get(f.id);
    if (last !== undefined && now - last < 60_000 && await this.deps.notifier.messageOf(f.id)) {
      await c.reply(noteMessage('The details were posted in the alert’s thread less than a minute ago.'));
      return;
    }
    // Details of every finding of the alert's group (its signals), each with its exact counts, tokens, cause and sources.
    const records = await store.tokenRecords.list(f.cluster);
    const stored = await this.deps.notifier.membersOf(f);
    const members = stored.map((m) => m.finding);
    // The severity Details shows is the alert's (its worst live finding's), as the alert shows it.
    const live = stored.filter((m) => m.status !== 'resolved').map((m) => m.finding);
    const alertSeverity = worstSeverity(live.length ? live : members.length ? members : [f]);
    const ignoredEventTimes = this.deps.ignoredEventTimesOf?.(f.cluster);
    const msgs = (members.length ? members : [f]).map((m) => {
      const tokens = records.filter((r) => r.kind === m.kind && r.namespace === m.namespace && r.serviceAccount === m.serviceAccount);
      return detailsMessage(m, tokens.length ? tokens : m.tokens, {
        now,
        alertSeverity,
        ...(tokens.length ? { hourly: mergeHourly(tokens.map((r) => r.hourly)) } : {}),
        ...(ignoredEventTimes ? { ignoredEventTimes } : {}),
      });
    });
    if (!(await this.deps.notifier.messageOf(f.id))) {
      for (const msg of msgs) await c.reply(msg);
      return;
    }
    this.lastDetails.set(f.id, now);
    for (const msg of msgs) await this.deps.notifier.reply(f, msg);
  }

  // ---- approvals -----------------------------------------------------------------------------------------------

  /**
   * Approve or Reject on an approval message; `approvalId` is the button's value. Reject by an approver (not the
   * requester) with a `triggerId` first opens a modal asking an optional reason ({@link rejectReasonModal}); its
   * submission comes back as {@link rejectWithReason}. Reject by the requester withdraws the request at once
   * ("Withdrawn by @user") and confirms it ephemerally.
   */
  async vote(c: Clicker, approvalId: string, kind: 'approve' | 'reject', reason?: string): Promise<void> {
    const { store } = this.deps;
    const a = await store.approvals.get(approvalId);
    if (!a) {
      this.deps.logger.warn({ user: c.user, valueLength: approvalId.length }, 'refused a vote with an unknown or tampered approval id');
      await c.reply(refusalMessage('This approval request does not exist (unknown or altered button value), so nothing was done.'));
      return;
    }
    const ctx = { target: a.target, kind: a.action };
    if (!c.channel || !this.deps.channels.allows(a.target.cluster, c.channel)) {
      return this.refuse(c, ctx, wrongChannelText(a.target.cluster, this.deps.channels.channelOf(a.target.cluster) ? this.deps.channels.mention(a.target.cluster) : undefined), a.id);
    }
    const policy = this.deps.policyFor(a.target.cluster);
    const groups = policy ? await this.deps.directory.groupsOf(c.user, [...policy.approvers, ...policy.requesters]) : [];
    // Earlier approvals are re-checked against the approvers in force now (config and group membership of now).
    const voterGroups: Record<string, string[]> = {};
    if (kind === 'approve' && policy) for (const u of approvalsOf(a)) voterGroups[u] = await this.deps.directory.groupsOf(u, policy.approvers);
    const voided = kind === 'approve' && policy ? voidApprovals(a, policy, voterGroups) : [];
    const event = kind === 'approve' ? approvalEvent.approve(c.user, groups, voterGroups) : approvalEvent.reject(c.user, reason?.trim() || undefined, groups);
    if (kind === 'reject' && reason === undefined && c.user !== a.requester && c.triggerId && policy) {
      // Ask for the reason only when the reject would be accepted now; otherwise refuse below as usual.
      if (decide(a, event, policy, this.deps.clock()).ok) {
        try {
          await this.deps.api.openView(c.triggerId, rejectReasonModal(a, JSON.stringify({ approval: a.id, channel: c.channel.id })));
          return;
        } catch (err) {
          this.deps.logger.warn({ err, approval: a.id }, 'could not open the reject-reason modal; rejecting without a reason');
        }
      }
    }
    const res = await commitEvent(this.executor, a.id, event);
    if (!res.ok) {
      // Name the people who may approve as the approval message does: user groups expanded, the requester left out
      // (a group the requester belongs to must not read as "ask the requester").
      const refusal = res.refusal.detail.type === 'not-an-approver' ? { detail: { ...res.refusal.detail, approvers: await this.approversOf(a) } } : res.refusal;
      await this.refuse(c, ctx, refusalText(refusal), a.id);
      if (res.refusal.reason === 'expired' && res.approval?.state === 'requested') await this.expire(a.id);
      return;
    }
    if (voided.length > 0) await this.sayVoid(res.approval, voided);
    await this.afterCommit(res.approval, res.effects.map((e) => e.type));
    if (res.transition.next === 'rejected' && c.user === a.requester) {
      await c.reply(noteMessage(`You withdrew your request for the ${actionNoun(a.action)} of ${a.target.kind} \`${a.target.namespace}/${a.target.name}\`; nothing was changed.`));
    }
    if (res.transition.next === 'requested') {
      const n = approvalsOf(res.approval).filter((u) => !voided.includes(u)).length;
      await c.reply(noteMessage(`Your approval is recorded (${n} of ${res.approval.requiredApprovals}); it runs once ${res.approval.requiredApprovals - n} more approver${res.approval.requiredApprovals - n === 1 ? '' : 's'} agree${res.approval.requiredApprovals - n === 1 ? 's' : ''}.`));
    }
  }

  /**
   * The reject-reason modal was submitted: rejects with the (optional) reason, with the same checks as a click
   * (`privateMetadata` is what {@link vote} put in the modal: approval id and channel of the click).
   */
  async rejectWithReason(user: string, privateMetadata: string, reason: string, reply: (channel: string | undefined) => Clicker['reply']): Promise<void> {
    const { c, meta } = modalClicker(user, privateMetadata, reply);
    await this.vote(c, typeof meta.approval === 'string' ? meta.approval : '', 'reject', reason);
  }

  private async afterCommit(a: StoredApproval, effects: readonly string[]): Promise<void> {
    if (effects.includes('update-approval-message')) await this.updateApprovalMessage(a);
    if (effects.includes('execute')) {
      if (this.deps.owns?.(a.target.cluster) === false) this.deps.logger.info({ approval: a.id, cluster: a.target.cluster }, 'approved here; the replica that owns the cluster runs it');
      else void this.deps.track(this.run(a.id, a.target.cluster));
    }
  }

  /** Runs (or resumes) an approved action in the background; failures are logged. */
  private async run(id: string, cluster: string, resume = false): Promise<void> {
    if (this.executing.has(id)) return;
    this.executing.set(id, cluster);
    try {
      await executeApproval(this.executor, id, { resume });
    } catch (err) {
      this.deps.logger.error({ err, approval: id }, 'running an approved action failed');
    } finally {
      this.executing.delete(id);
    }
  }

  private async expire(id: string): Promise<void> {
    const res = await commitEvent(this.executor, id, approvalEvent.expire());
    if (res.ok) await this.updateApprovalMessage(res.approval);
  }

  /** Whether an approved action of `cluster` is being executed or followed by this process now. */
  isExecuting(cluster: string): boolean {
    for (const c of this.executing.values()) if (c === cluster) return true;
    return false;
  }

  /** Expires every `requested` approval past its `expiresAt` and edits its message. Returns how many. */
  async sweepExpired(): Promise<number> {
    const due = await this.deps.store.approvals.list({ states: ['requested'], expiresAtOrBefore: this.deps.clock() });
    for (const a of due) await this.expire(a.id);
    return due.length;
  }

  /**
   * For the clusters this replica leads (all without HA): runs approvals left `approved` (approved on another replica, or before a restart), and
   * resumes actions left `running` by a process that stopped or lost the cluster's ownership: a restart sends its PATCH unless
   * the workload's `restartedAt` annotation shows it was applied, then follows the rollout (updating the same
   * progress message); a recreation does the steps not yet done (see the executor). Called at start and periodically.
   */
  async pickUp(): Promise<void> {
    const { store } = this.deps;
    await this.resendProgress();
    const settled = this.deps.clock() - PICKUP_GRACE_MS;
    for (const a of await store.approvals.list({ states: ['approved', 'running'] })) {
      // Leave fresh transitions to the process that made them (it runs what it approved when it leads).
      if (this.executing.has(a.id) || a.updatedAt > settled || this.deps.owns?.(a.target.cluster) === false) continue;
      // `running`: resumed; the executor first establishes what was done (restart annotation, recorded steps).
      void this.deps.track(this.run(a.id, a.target.cluster, a.state === 'running'));
    }
  }

  /**
   * Sends again the final progress of ended restarts that Slack did not accept (`execution.pendingProgress`); read
   * from the store at the first call, then tracked in memory.
   */
  private resendProgress(): Promise<void> {
    // One resend at a time: overlapping ticks (the store and Slack calls now yield) would send the final edit twice.
    this.resending ??= this.resendProgress0().finally(() => {
      this.resending = undefined;
    });
    return this.resending;
  }

  private resending: Promise<void> | undefined;

  private async resendProgress0(): Promise<void> {
    if (!this.progressScanned) {
      this.progressScanned = true;
      for (const a of await this.deps.store.approvals.list({ states: ['succeeded', 'failed'] })) if (a.execution?.pendingProgress) this.progressPending.add(a.id);
    }
    for (const id of [...this.progressPending]) {
      const cluster = this.deps.owns ? (await this.deps.store.approvals.get(id))?.target.cluster : undefined;
      if (cluster !== undefined && !this.deps.owns?.(cluster)) continue; // its cluster's owner sends it
      if (await resendPendingProgress(this.executor, id)) this.progressPending.delete(id);
    }
  }

  // ---- messages ------------------------------------------------------------------------------------------------

  /** The users who may approve `a` (groups expanded; the requester left out unless self-approval is allowed). */
  async approversOf(a: StoredApproval): Promise<string[]> {
    const hit = this.approverCache.get(a.id);
    if (hit) return hit;
    const policy = this.deps.policyFor(a.target.cluster);
    if (!policy) return [];
    const all = await this.deps.directory.expand(policy.approvers);
    const out = policy.allowSelfApproval ? all : all.filter((u) => u !== a.requester);
    this.approverCache.set(a.id, out);
    return out;
  }

  /** The approval message of `a` in its current state. */
  async renderApproval(a: StoredApproval): Promise<SlackMessage> {
    const facts = (a.dryRun as StoredDryRun | null)?.facts;
    return approvalRequestMessage(a, facts, await this.approversOf(a), { now: this.deps.clock(), approveId: a.id, rejectId: a.id });
  }

  /** The thread an approval's replies go to: the finding's alert, else the approval message itself. */
  async threadOf(a: StoredApproval): Promise<MessageLocation | undefined> {
    return (await this.deps.notifier.messageOf(a.target.findingId)) ?? a.message ?? undefined;
  }

  private async postApprovalMessage(a: StoredApproval): Promise<void> {
    const msg = await this.renderApproval(a);
    const alert = await this.deps.notifier.messageOf(a.target.findingId);
    const channel = alert?.channel ?? this.deps.channels.channelOf(a.target.cluster);
    if (channel === undefined) return;
    const posted = await this.deps.api.post(channel, msg, alert?.ts);
    const loc = { channel: posted.channel, ts: posted.ts };
    if (!await this.deps.store.approvals.transition(a.id, a.state, a.state, { message: loc }, this.deps.clock())) {
      // The state moved meanwhile (e.g. expired): keep the location anyway and show the current state.
      const now = await this.deps.store.approvals.get(a.id);
      if (now) {
        await this.deps.store.approvals.transition(a.id, now.state, now.state, { message: loc }, this.deps.clock());
        await this.updateApprovalMessage((await this.deps.store.approvals.get(a.id))!);
      }
    }
  }

  /**
   * Re-renders an approval's message (votes, decision, no buttons once decided) from its state in the store at the
   * time of the update. Updates of one approval are serialized, so the last one shows the latest state; updates asked
   * for while one waits its turn join it (a burst of votes and state changes is one `chat.update` after the running one).
   */
  async updateApprovalMessage(a: StoredApproval): Promise<void> {
    await this.deps.notifier.withLatest(`approval:${a.id}`, async () => {
      const current = await this.deps.store.approvals.get(a.id) ?? a;
      if (!current.message) return;
      await this.deps.api.update(current.message.channel, current.message.ts, await this.renderApproval(current));
    });
  }

  private async showProgress(a: StoredApproval, p: RolloutProgress, startedAt: number): Promise<void> {
    const thread = await this.threadOf(a);
    if (!thread) return;
    const msg = progressMessage(
      { desired: p.desired, updated: p.updated, ready: p.ready, available: p.available, done: p.done, timedOut: p.timedOut === true },
      { target: a.target, now: this.deps.clock(), startedAt, timeoutMs: this.deps.rolloutTimeoutMs },
    );
    // The progress message's location is in the store, so a restarted process or a new owner edits the same message.
    const at = (await this.deps.store.approvals.get(a.id))?.progress;
    if (at) {
      await this.deps.api.update(at.channel, at.ts, msg);
      return;
    }
    const posted = await this.deps.api.post(thread.channel, msg, thread.ts);
    const loc = { channel: posted.channel, ts: posted.ts };
    const cur = await this.deps.store.approvals.get(a.id);
    if (cur) await this.deps.store.approvals.transition(a.id, cur.state, cur.state, { progress: loc }, this.deps.clock());
  }

  /** Says in the approval's thread that earlier approvals no longer count (their voters are no longer approvers). */
  private async sayVoid(a: StoredApproval, users: readonly string[]): Promise<void> {
    const thread = await this.threadOf(a);
    if (!thread) return;
    const who = users.map((u) => `<@${u}>`).join(', ');
    await this.deps.api.post(
      thread.channel,
      noteMessage(`The approval${users.length === 1 ? '' : 's'} by ${who} ${users.length === 1 ? 'is' : 'are'} void: no longer allowed to approve the ${actionNoun(a.action)} of ${a.target.kind} \`${a.target.namespace}/${a.target.name}\` (not among the approvers in force now). ${approvalsOf(a).filter((u) => !users.includes(u)).length} of ${a.requiredApprovals} approvals count.`),
      thread.ts,
    );
  }

  /** Posts an alarm (escaped text) in the approval's thread, where the failed approval message is too. */
  private async alarm(a: StoredApproval, text: string): Promise<void> {
    const thread = await this.threadOf(a);
    if (!thread) return;
    await this.deps.api.post(thread.channel, alarmMessage(a.target.cluster, text), thread.ts);
  }

  private async showRecreated(a: StoredApproval, r: RecreateResult): Promise<void> {
    const f = await this.deps.store.findings.get(a.target.findingId);
    const thread = await this.threadOf(a);
    if (!f || !thread) return;
    await this.deps.api.post(thread.channel, recreatedMessage(f.finding, r, this.deps.notifier.restartButtons(f.finding)), thread.ts);
  }
}
