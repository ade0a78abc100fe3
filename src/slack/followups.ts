/**
 * Approvals that never stall (docs/slack.md "Reminders, escalation and paging"): a scan of the approvals that decides
 * which follow-up notices are due and stores each as the intent row of the notification queue (src/store/notices.ts),
 * sent by the drainer:
 *
 * - **reminder** (`reminder:<approvalId>`): a request still `requested` at `createdAt + remindAfter` (default half
 *   its expiry) and before `expiresAt` is reminded once in its alert's thread, mentioning the approvers who may still
 *   act (user groups expanded; the requester and those who already voted left out);
 * - **escalation** (`escalation:<approvalId>`): a request that `expired` is said expired unanswered in the thread,
 *   mentioning the escalation user group (`slack.approvals.escalateTo`) once, when one is configured;
 * - **outcome** (`outcome:<approvalId>:<outcome>`): the requester gets a direct message for each outcome reached —
 *   `approved`, `rejected` (not when they withdrew it themselves), `expired`, `done`, `failed` (after approval; a dry
 *   run that fails is told at the click), and the verification's `verified`, `recurred`, `persisting`.
 *
 * The scan is derived from the stored state only, so it is idempotent: running it again (another tick, a restart, a
 * new owner of the cluster) enqueues nothing already pending or sent. Approvals created before this feature first
 * ran (a cursor in the store) get no follow-ups. Only the replica that owns a cluster scans its approvals.
 */
import { approvalsOf, type ApprovalState } from '../approvals/index.js';
import { actionNoun } from '../core/actions.js';
import type { Logger } from '../observability/logger.js';
import type { MessageLocation, StoredApproval, StorePart } from '../store/index.js';
import type { NoticeRepository } from '../store/notices.js';
import type { OutboxItem } from '../store/outbox.js';
import { duration, escapeMrkdwn, type SlackMessage } from './blocks/index.js';

/** Cursor key (store `cursors`) of the time follow-ups started: approvals created before it get none. */
export const FOLLOW_UPS_SINCE = 'slack:follow-ups-since';
/** Approvals older than this (from creation) are not scanned any more, ms. */
const HORIZON_MS = 14 * 24 * 3_600_000;

/** What the scan does, from `slack.approvals` (durations ms). */
export interface FollowUpSettings {
  reminders: boolean;
  /** Undefined: half of each request's expiry. */
  remindAfterMs?: number;
  /** A Slack user group id (`S…`). */
  escalateTo?: string;
  notifyRequester: boolean;
}

/** Dependencies of {@link FollowUps}. */
export interface FollowUpDeps {
  store: StorePart<{ approvals: 'list'; polls: 'getCursor' | 'setCursor' }>;
  notices: Pick<NoticeRepository, 'enqueue' | 'known'>;
  /** The users who may approve `a` (groups expanded, the requester left out unless self-approval is allowed). */
  approversOf(a: StoredApproval): Promise<string[]>;
  /** The thread the approval's replies go to (its alert's, else the approval message's). */
  threadOf(a: StoredApproval): Promise<MessageLocation | undefined>;
  /** Epoch ms. */
  clock: () => number;
  logger: Logger;
  settings: FollowUpSettings;
  /** Whether this replica sends the notices of `cluster`. Default all. */
  owns?: (cluster: string) => boolean;
  /** Told when notices were enqueued (wakes the drainer). */
  enqueued?: () => void;
}

/** An outcome the requester is told. */
export type RequesterOutcome = 'approved' | 'rejected' | 'expired' | 'done' | 'failed' | 'verified' | 'recurred' | 'persisting';

const VERIFICATION: Readonly<Record<string, RequesterOutcome>> = { resolved: 'verified', recurrence: 'recurred', persisting: 'persisting' };
const APPROVED_STATES: ReadonlySet<ApprovalState> = new Set(['approved', 'running', 'succeeded', 'failed']);

/** The outcomes `a` has reached, in the order they happen. */
export function outcomesOf(a: StoredApproval): RequesterOutcome[] {
  const out: RequesterOutcome[] = [];
  const quorum = approvalsOf(a).length >= a.requiredApprovals;
  if (APPROVED_STATES.has(a.state) && quorum) out.push('approved');
  if (a.state === 'rejected') {
    const last = [...a.votes].reverse().find((v) => v.vote === 'reject');
    if (last && last.user !== a.requester) out.push('rejected');
  }
  if (a.state === 'expired') out.push('expired');
  if (a.state === 'succeeded') out.push('done');
  if (a.state === 'failed' && quorum) out.push('failed');
  const v = a.verification ? VERIFICATION[a.verification.outcome] : undefined;
  if (v) out.push(v);
  return out;
}

/**
 * A one-section message whose notification text is the same mrkdwn (mentions and `<!subteam^…>` notify from the
 * text too; every user- or cluster-supplied part is escaped by the builders below).
 */
function noteMessage(text: string): SlackMessage {
  const clipped = text.slice(0, 3000);
  return { text: clipped, textFormat: 'mrkdwn', blocks: [{ type: 'section', text: { type: 'mrkdwn', text: clipped } }] };
}

/** Whole minutes up (a reminder never says less time is left than there is). */
const minutesUp = (ms: number) => duration(Math.ceil(Math.max(0, ms) / 60_000) * 60_000);

const target = (a: StoredApproval) => `${a.target.kind} \`${escapeMrkdwn(a.target.namespace)}/${escapeMrkdwn(a.target.name)}\` in *${escapeMrkdwn(a.target.cluster)}*`;

/** The reminder in the thread: who may still act, and until when. */
export function reminderMessage(a: StoredApproval, pending: readonly string[], now: number): SlackMessage {
  const n = approvalsOf(a).length;
  const who = pending.length > 0 ? `${pending.map((u) => `<@${u}>`).join(' ')}: you can approve or reject it.` : 'Nobody else may approve it: it expires unless the requester withdraws it.';
  return noteMessage(
    `⏰ *Reminder:* the ${actionNoun(a.action)} of ${target(a)} requested by <@${a.requester}> still waits for approval (${n} of ${a.requiredApprovals}); it expires in ${minutesUp(a.expiresAt - now)}. ${who}`,
  );
}

/** The escalation in the thread: the request expired unanswered, and the escalation group when there is one. */
export function escalationNotice(a: StoredApproval, escalateTo: string | undefined): SlackMessage {
  const n = approvalsOf(a).length;
  const to = escalateTo ? ` <!subteam^${escalateTo}>: nobody acted on this alert's fix in time; please review it.` : '';
  return noteMessage(
    `⌛ *Expired unanswered:* the ${actionNoun(a.action)} of ${target(a)} requested by <@${a.requester}> got ${n} of ${a.requiredApprovals} approvals in ${duration(a.expiresAt - a.createdAt)} and expired; nothing was changed.${to}`,
  );
}

/** The direct message telling the requester one outcome of their request. */
export function outcomeMessage(a: StoredApproval, o: RequesterOutcome, thread: MessageLocation | undefined): SlackMessage {
  const what = `Your ${actionNoun(a.action)} request for ${target(a)}`;
  const by = (vote: 'approve' | 'reject') => [...new Set(a.votes.filter((v) => v.vote === vote).map((v) => `<@${v.user}>`))].join(', ');
  const reason = [...a.votes].reverse().find((v) => v.vote === 'reject')?.reason;
  const where = thread ? ' Details are in the alert’s thread.' : '';
  switch (o) {
    case 'approved':
      return noteMessage(`✅ ${what} was approved by ${by('approve')}; tokenwatch runs it now.${where}`);
    case 'rejected':
      return noteMessage(`🚫 ${what} was rejected by ${by('reject')}${reason ? `: “${escapeMrkdwn(reason)}”` : ''}. Nothing was changed.${where}`);
    case 'expired':
      return noteMessage(`⌛ ${what} expired after ${duration(a.expiresAt - a.createdAt)} with ${approvalsOf(a).length} of ${a.requiredApprovals} approvals. Nothing was changed; request it again if it is still needed.${where}`);
    case 'done':
      return noteMessage(`✅ ${what} is done. tokenwatch now verifies that the stale tokens stop, and tells you the result.${where}`);
    case 'failed':
      return noteMessage(`⚠️ ${what} failed: ${escapeMrkdwn(a.error ?? 'unknown error')}.${where}`);
    case 'verified':
      return noteMessage(`✅ Verified: after ${what.charAt(0).toLowerCase()}${what.slice(1)}, no signal of the alert came back; the alert is resolved.${where}`);
    case 'recurred':
      return noteMessage(`⚠️ Recurred: after ${what.charAt(0).toLowerCase()}${what.slice(1)}, a token issued after it was used stale again; the restart only bought time. The alert names the real fix.${where}`);
    case 'persisting':
      return noteMessage(`⚠️ Not fixed yet: after ${what.charAt(0).toLowerCase()}${what.slice(1)}, the alert’s signals continue.${where}`);
  }
}

/** See the module docstring. */
export class FollowUps {
  private running: Promise<number> | undefined;

  constructor(private readonly deps: FollowUpDeps) {}

  /** Runs one scan (one at a time: a call during a scan waits for it). @returns how many notices it enqueued. */
  scan(): Promise<number> {
    this.running ??= this.scan0().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async scan0(): Promise<number> {
    const { store, clock, settings } = this.deps;
    const now = clock();
    let since = Number(await store.polls.getCursor(FOLLOW_UPS_SINCE));
    if (!Number.isFinite(since) || since <= 0) {
      since = now;
      await store.polls.setCursor(FOLLOW_UPS_SINCE, String(now));
    }
    const from = Math.max(since, now - HORIZON_MS);
    let added = 0;
    for (const a of await store.approvals.list({ createdAtOrAfter: from })) {
      if (this.deps.owns?.(a.target.cluster) === false) continue;
      try {
        if (a.state === 'requested' && settings.reminders) added += await this.remind(a, now);
        if (a.state === 'expired') added += await this.escalate(a, now);
        if (settings.notifyRequester) for (const o of outcomesOf(a)) added += await this.tell(a, o, now);
      } catch (err) {
        this.deps.logger.warn({ err, approval: a.id }, 'could not store a follow-up of an approval; trying again at the next scan');
      }
    }
    if (added > 0) this.deps.enqueued?.();
    return added;
  }

  private async add(item: Omit<OutboxItem, 'kind' | 'call' | 'notBefore' | 'attempts' | 'version'>): Promise<number> {
    return (await this.deps.notices.enqueue({ ...item, kind: 'notice', call: 'post', notBefore: 0, attempts: 0, version: 0 })) ? 1 : 0;
  }

  private async remind(a: StoredApproval, now: number): Promise<number> {
    const life = a.expiresAt - a.createdAt;
    const after = this.deps.settings.remindAfterMs ?? Math.floor(life / 2);
    if (after >= life || now < a.createdAt + after || now >= a.expiresAt) return 0;
    const key = `reminder:${a.id}`;
    if (await this.deps.notices.known(key)) return 0;
    const thread = await this.deps.threadOf(a);
    if (!thread) return 0;
    const voted = new Set(a.votes.map((v) => v.user));
    const pending = (await this.deps.approversOf(a)).filter((u) => !voted.has(u));
    return this.add({ key, cluster: a.target.cluster, channel: thread.channel, urgency: now, enqueuedAt: now, payload: { notice: { to: 'thread', threadTs: thread.ts, message: reminderMessage(a, pending, now) } } });
  }

  private async escalate(a: StoredApproval, now: number): Promise<number> {
    const key = `escalation:${a.id}`;
    if (await this.deps.notices.known(key)) return 0;
    const thread = await this.deps.threadOf(a);
    if (!thread) return 0;
    return this.add({ key, cluster: a.target.cluster, channel: thread.channel, urgency: now, enqueuedAt: now, payload: { notice: { to: 'thread', threadTs: thread.ts, message: escalationNotice(a, this.deps.settings.escalateTo) } } });
  }

  private async tell(a: StoredApproval, o: RequesterOutcome, now: number): Promise<number> {
    const key = `outcome:${a.id}:${o}`;
    if (await this.deps.notices.known(key)) return 0;
    const thread = await this.deps.threadOf(a);
    // In the order they happen (the queue sends by urgency first): approved before done before verified.
    const step = ['approved', 'rejected', 'expired', 'done', 'failed', 'verified', 'recurred', 'persisting'].indexOf(o);
    return this.add({ key, cluster: a.target.cluster, channel: a.requester, urgency: now + step, enqueuedAt: now, payload: { notice: { to: 'dm', message: outcomeMessage(a, o, thread) } } });
  }
}
