/**
 * The verifier's conclusions (`src/remediation/verify.ts`) as replies in their alert's thread: resolved, recurrence or
 * persisting, superseded by a later action, and the node probe's check of a restart. Each reply waits for its alert's
 * queued work (`alertSent`), so it replies under an alert that already shows the poll's findings
 * (docs/design/architecture.md "How serve is put together").
 */
import { resolvedSignals } from '../remediation/signals.js';
import type { ProbeCheckReport, SupersededReport, VerificationReport, VerifierDeps } from '../remediation/verify.js';
import { probeCheckMessage, supersededMessage, verificationMessage } from './blocks/index.js';
import { persistingMessage } from './messages.js';
import type { Notifier } from './notifier.js';

/** What {@link verificationReplies} posts through and waits for. */
export interface VerificationRepliesDeps {
  /** Replies in an alert's thread and refreshes the alert. */
  notifier: Pick<Notifier, 'reply' | 'refresh'>;
  /** Resolves once the alert of `finding` has no queued work left (the reply needs the alert). */
  alertSent(finding: { cluster: string; namespace: string; serviceAccount: string }): Promise<void>;
  /** Called when a verification concludes, before its reply (the requester's follow-up is due). */
  onConcluded(): void;
}

/**
 * The verifier's reporter (`VerifierDeps.report`, `reportProbe`, `reportSuperseded`) replying in Slack threads.
 * Each rejects when Slack refuses the reply (the verifier logs it).
 */
export function verificationReplies(deps: VerificationRepliesDeps): Pick<VerifierDeps, 'report' | 'reportProbe' | 'reportSuperseded'> {
  const { notifier, alertSent } = deps;
  const report = async (r: VerificationReport): Promise<void> => {
    deps.onConcluded(); // the requester is told the verification's outcome
    const f = r.finding.finding;
    const o = r.outcome;
    await alertSent(f);
    if (o.outcome === 'resolved') {
      await notifier.refresh(f.id);
      await notifier.reply(f, verificationMessage({ outcome: 'resolved', finding: f, action: r.approval.action, actionAt: r.completedAt, now: r.now, settleMs: r.settleMs, signals: resolvedSignals(r) }));
    } else if (o.outcome === 'recurrence') {
      await notifier.reply(f, verificationMessage({ outcome: 'recurrence', finding: f, action: r.approval.action, actionAt: r.completedAt, now: r.now, staleRequests: o.requests, lastSeen: o.lastSeen }));
      // The restart is a stop-gap now: the alert's headline fix becomes the cause's, its Restart says it will recur.
      await notifier.refresh(f.id);
    } else {
      await notifier.reply(f, persistingMessage(f, r.approval.action, o, r.completedAt));
    }
  };
  const reportSuperseded = async (r: SupersededReport): Promise<void> => {
    await alertSent(r.finding.finding);
    await notifier.reply(r.finding.finding, supersededMessage(r.finding.finding, r.approval.action, r.approval.updatedAt, r.by.action, r.by.updatedAt));
  };
  // The node probe's check of a restart: the token file rewritten with a token issued after it, or not.
  const reportProbe = async (r: ProbeCheckReport): Promise<void> => {
    const o = r.outcome;
    await alertSent(r.finding.finding);
    await notifier.reply(r.finding.finding, probeCheckMessage({ outcome: o.outcome, finding: r.finding.finding, action: r.approval.action, startedAt: r.startedAt, completedAt: r.completedAt, now: r.now, files: o.files, silent: o.silent }));
    // A file not rewritten keeps a token that goes stale again: the alert says the restart is a stop-gap.
    if (o.outcome === 'not-rewritten') await notifier.refresh(r.finding.finding.id);
  };
  return { report, reportProbe, reportSuperseded };
}
