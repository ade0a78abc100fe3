/**
 * Small Slack messages that the shared Block Kit builders (`src/slack/blocks/`) do not cover: acknowledgements to
 * the requester, the snooze and reopen thread replies, the "persisting" verification reply, the reply after a
 * ServiceAccount recreation (with the restart buttons of its workloads), and channel refusals. Pure, built with the
 * same length-safe text helpers, so Block Kit limits hold for any input.
 */
import { formatUtc, type Approval } from '../approvals/index.js';
import { actionNoun, objectLabel } from '../core/actions.js';
import type { ClusterEvent } from '../findings/cluster-events.js';
import type { Finding } from '../findings/types.js';
import type { RecreateResult } from '../remediation/kube-remediator.js';
import type { ConcludedOutcome } from '../remediation/verify.js';
import {
  code,
  duration,
  escapeMrkdwn,
  escClip,
  LIMITS,
  listWithin,
  md,
  plural,
  slackDate,
  subjectOf,
  type Button,
  type KnownBlock,
  type SlackMessage,
} from './blocks/index.js';

function where(f: Finding): string {
  return `${code(subjectOf(f), 300)} in *${escClip(f.cluster, 200)}*`;
}

function section(text: string, fallback: string, extra: KnownBlock[] = []): SlackMessage {
  return { text: fallback.slice(0, 3000), blocks: [{ type: 'section', text: md(text) }, ...extra] };
}

/**
 * Thread reply when an action needs a human now (e.g. a ServiceAccount was created by someone else during a
 * recreation). `text` may carry cluster-controlled values (annotations), so it is escaped; the fallback `text` too.
 */
export function alarmMessage(cluster: string, text: string): SlackMessage {
  return section(`🚨 *${escClip(cluster, 200)}*: ${escClip(text, 2800)}`, `🚨 [${escClip(cluster, 200)}] ${escClip(text, 2800)}`);
}

/** Ephemeral to the requester once the approval message is posted. */
export function requestedMessage(a: Approval, approvers: readonly string[]): SlackMessage {
  const who = approvers.length ? listWithin(approvers.slice(0, 10).map((u) => `<@${u}>`), 10, ', ', approvers.length) : 'the approvers';
  return section(
    `🔐 Your ${actionNoun(a.action)} of ${a.target.kind} ${code(`${a.target.namespace}/${a.target.name}`, 300)} is waiting for approval by ${who} in the alert's thread (${a.requiredApprovals > 1 ? `${escapeMrkdwn(a.target.namespace)} is protected: ${a.requiredApprovals} approvals from different people` : 'one approval'}). It expires ${slackDate(a.expiresAt)}; nothing changes until then.`,
    `Requested: ${actionNoun(a.action)} of ${objectLabel(a.target)}; waiting for approval until ${formatUtc(a.expiresAt)}`,
  );
}

/**
 * The one message of a cluster-level credential event (`src/findings/cluster-events.ts`), posted once in the cluster's
 * channel: many ServiceAccounts refused at once is a signing-key rotation or issuer change (clastix/kamaji#1325,
 * https://github.com/clastix/kamaji/issues/1325), not clients caching tokens; who recovered, who still fails.
 */
export function clusterEventMessage(e: ClusterEvent): SlackMessage {
  const at = Date.parse(e.at);
  const names = (list: readonly string[]) => listWithin(list.slice(0, 10).map((s) => code(s, 300)), 10, ', ', list.length);
  const lines = [
    `🔑 *Cluster-level event in ${escClip(e.cluster, 200)}*: ${plural(e.serviceAccounts, 'ServiceAccount')} across unrelated workloads started getting 401 within one minute at ${slackDate(at)}. The cluster refused their tokens at once, as when its service-account signing key rotates or its issuer changes: these are not clients that cache tokens, and their 401 alerts offer no restart.`,
    '*Check:* the API server’s `--service-account-key-file` / `--service-account-signing-key-file` and `--service-account-issuer` changes at that time, and that every API server has the new public key.',
  ];
  if (e.recovered.length) lines.push(`*Recovered on their own:* ${names(e.recovered)}`);
  if (e.stillFailing.length) lines.push(`*Still failing after the others recovered* (analysed on their own, restart offered): ${names(e.stillFailing)}`);
  return section(
    lines.join('\n'),
    `[${e.cluster}] cluster-level event: ${e.serviceAccounts} ServiceAccounts refused at once at ${formatUtc(at)} (signing-key rotation or issuer change), not clients caching tokens`,
  );
}

/** Thread reply when a finding is snoozed. */
export function snoozedMessage(f: Finding, user: string, until: number): SlackMessage {
  return section(
    `😴 <@${user}> snoozed ${where(f)} until ${slackDate(until)}: this alert is not updated until then. When the snooze ends it is brought up to date, with an escalation reply if it got worse.`,
    `[${f.cluster}] ${subjectOf(f)} snoozed until ${formatUtc(until)}`,
  );
}

/**
 * Thread reply when a resolved finding is seen again. `late`: reopened by a use delivered after it was resolved as quiet
 * at `resolvedAt` but dated before that (see `FindingChange.lateUse` in src/store/types.ts).
 */
export function reopenedMessage(f: Finding, resolvedAt: number | null, late = false): SlackMessage {
  if (late && resolvedAt !== null) {
    return section(
      `🔁 *Reopened*: ${where(f)} was seen late — a request at ${slackDate(Date.parse(f.lastSeen))}, before it was resolved as quiet ${slackDate(resolvedAt)}, reached tokenwatch only after that (the audit log delivered it late). The quiet period was not quiet; the alert above is current again.`,
      `[${f.cluster}] ${subjectOf(f)} reopened: a use before its quiet resolution was seen late`,
    );
  }
  const since = resolvedAt !== null ? ` after it was resolved ${slackDate(resolvedAt)}` : '';
  return section(
    `🔁 *Reopened*: ${where(f)} was seen again${since} (last request ${slackDate(Date.parse(f.lastSeen))}). The alert above is current again.`,
    `[${f.cluster}] ${subjectOf(f)} reopened: seen again after it was resolved`,
  );
}

/**
 * Verification reply for the `persisting` outcome: signals of the alert continue after the action — tokens issued
 * before it still used stale, 401s, legacy-token use (each named that `outcome.signals` lists).
 */
export function persistingMessage(f: Finding, action: Approval['action'], outcome: Extract<ConcludedOutcome, { outcome: 'persisting' }>, completedAt: number): SlackMessage {
  const noun = actionNoun(action);
  const parts = outcome.signals.map((k) =>
    k === 'unauthorized' ? '401 Unauthorized responses continue' : k === 'legacy-token' ? 'the legacy Secret token is still used' : `tokens issued before the ${noun} are still used stale`,
  );
  const what = parts.length ? parts.join('; ') : `${plural(outcome.tokens, 'token')} issued before the ${noun} ${outcome.tokens === 1 ? 'is' : 'are'} still used`;
  const c = f.cause;
  return section(
    `⚠️ *Not fixed yet*: ${what} for ${where(f)} ${duration(Math.max(0, outcome.lastSeen - completedAt))} after the ${noun} completed (last ${slackDate(outcome.lastSeen)}). Some pods may not have been replaced, or the token was copied somewhere the restart does not reach.\n*Fix:* ${escClip(c.fix, 1200)}`,
    `[${f.cluster}] ${subjectOf(f)}: not fixed yet, still in use after the ${noun}`,
  );
}

/**
 * Thread reply after a ServiceAccount recreation: old and new uid, what was kept, and buttons to restart the
 * workloads so their pods get tokens of the new ServiceAccount.
 */
export function recreatedMessage(f: Finding, result: RecreateResult, restartButtons: Button[]): SlackMessage {
  const kept: string[] = [];
  if (result.preserved.labels) kept.push(plural(result.preserved.labels, 'label'));
  if (result.preserved.annotations.length) kept.push(`annotations ${listWithin(result.preserved.annotations.slice(0, 5).map((a) => code(a, 100)), 5, ', ', result.preserved.annotations.length)}`);
  if (result.preserved.imagePullSecrets) kept.push(plural(result.preserved.imagePullSecrets, 'imagePullSecret'));
  if (result.preserved.ownerReferences) kept.push(plural(result.preserved.ownerReferences, 'ownerReference'));
  if (result.preserved.automountServiceAccountToken !== undefined) kept.push(`automountServiceAccountToken: ${result.preserved.automountServiceAccountToken}`);
  const lines = [
    `♻️ ServiceAccount ${where(f)} recreated: uid ${code(result.oldUid ?? '?', 60)} → ${code(result.newUid ?? '?', 60)}. Every token issued for the old uid is now invalid.`,
    kept.length ? `Kept: ${kept.join(', ')}.` : 'It had no labels, annotations or imagePullSecrets to keep.',
    restartButtons.length
      ? 'Restart its workloads so their pods get tokens of the new ServiceAccount (each restart needs approval):'
      : 'Restart the pods that use it so they get tokens of the new ServiceAccount.',
  ];
  const extra: KnownBlock[] = restartButtons.length ? [{ type: 'actions', block_id: 'tw_recreated_actions', elements: restartButtons.slice(0, LIMITS.actionsElements) }] : [];
  return section(lines.join('\n'), `[${f.cluster}] ServiceAccount ${subjectOf(f)} recreated`, extra);
}

/** Refusal for a command or button about a cluster from a channel that is not the cluster's alert channel. */
export function wrongChannelText(cluster: string, channelMention: string | undefined): string {
  return channelMention
    ? `Cluster *${escClip(cluster, 100)}* reports to ${channelMention}; ask there. Each channel only reaches its own clusters.`
    : `Cluster *${escClip(cluster, 100)}* has no Slack channel configured, so it cannot be used from Slack.`;
}

/** `/tokens scan` answers. */
export function scanMessage(cluster: string, result: 'started' | 'busy' | 'unknown-job' | 'stopped', channelMention: string): SlackMessage {
  const c = `*${escClip(cluster, 100)}*`;
  switch (result) {
    case 'started':
      return section(`🔄 Polling ${c} now. New or changed findings appear in ${channelMention} in a moment.`, `Polling ${cluster} now`);
    case 'busy':
      return section(`⏳ A poll of ${c} is already running; its results appear in ${channelMention} when it ends.`, `A poll of ${cluster} is already running`);
    case 'stopped':
      return section(`tokenwatch is shutting down; ${c} is not polled any more.`, 'tokenwatch is shutting down');
    case 'unknown-job':
      return section(`${c} is not scheduled in this tokenwatch (does this replica own it?).`, `${cluster} is not scheduled here`);
  }
}

/**
 * `/tokens scan` refused by the per-user, per-cluster limit: when the last one was, and when the next is allowed
 * (a Slack date, shown in the reader's time zone; UTC in the fallback text).
 */
export function scanLimitedMessage(cluster: string, last: number, next: number, now: number): SlackMessage {
  const c = `*${escClip(cluster, 100)}*`;
  const wait = duration(Math.max(1000, next - now));
  return section(
    `⏱️ You asked for a poll of ${c} at ${slackDate(last, '{time_secs}')}; the next one you can ask for is at ${slackDate(next, '{time_secs}')} (in ${wait}). Scheduled polls go on meanwhile, and \`/tokens status ${escClip(cluster, 100)}\` shows the latest.`,
    `You can ask for the next poll of ${cluster} at ${formatUtc(next)} (in ${wait})`,
  );
}

/** A short ephemeral confirmation (e.g. after a vote below quorum). */
export function noteMessage(text: string): SlackMessage {
  return section(text, text.replace(/[*_`]/g, '').replace(/<[^>|]*\|([^>]*)>/g, '$1'));
}
