/**
 * Thread replies after an approved action: rollout progress (updated in place until complete or timed out)
 * and verification (resolved ✅ or recurrence ⚠️ with the cause and its fix). Pure.
 */
import type { Finding, TokenKind } from '../../findings/types.js';
import type { ActionKind, ActionTarget } from '../../approvals/machine.js';
import { actionNoun, objectLabel } from '../../core/actions.js';
import { subjectOf } from './finding.js';
import { LIMITS } from './limits.js';
import { clip, code, count, duration, escapeMrkdwn, escClip, listWithin, md, plural, progressBar, slackDate, sourceLink, type KnownBlock, type SlackMessage } from './text.js';

/**
 * Rollout status as read from the workload (docs/design/domain.md §7: a DaemonSet rollout is complete when
 * `observedGeneration >= generation`, `updatedNumberScheduled == desiredNumberScheduled` and
 * `numberAvailable == desiredNumberScheduled`). Counts are pods.
 */
export interface RolloutStatus {
  desired: number;
  updated: number;
  ready: number;
  available: number;
  done: boolean;
  timedOut: boolean;
}

/** Context of {@link progressMessage}. Times are epoch ms UTC. */
export interface ProgressContext {
  target: ActionTarget;
  now: number;
  startedAt: number;
  /** The configured rollout timeout, for the timed-out message. */
  timeoutMs?: number;
}

function where(t: ActionTarget): string {
  return `${escapeMrkdwn(t.kind)} ${code(`${t.namespace}/${t.name}`, 300)} in *${escClip(t.cluster, 200)}*`;
}

/**
 * Rollout progress: a `▰▱` bar of updated pods plus updated/ready/available of desired; ✅ when done, ⚠️ when
 * timed out (with the `kubectl rollout status` command to look further).
 */
export function progressMessage(rollout: RolloutStatus, ctx: ProgressContext): SlackMessage {
  const r = rollout;
  const t = ctx.target;
  const counts = `${count(r.updated)} of ${count(r.desired)} updated, ${count(r.ready)} ready, ${count(r.available)} available`;
  const elapsed = duration(Math.max(0, ctx.now - ctx.startedAt));
  let line: string;
  let text: string;
  if (r.done) {
    line = `✅ Rollout of ${where(t)} complete: ${counts} (took ${elapsed}).`;
    text = `✅ [${t.cluster}] rollout of ${objectLabel(t)} complete`;
  } else if (r.timedOut) {
    const limit = ctx.timeoutMs !== undefined ? ` within ${duration(ctx.timeoutMs)}` : '';
    line = `⚠️ Rollout of ${where(t)} did not complete${limit}: ${counts}. Look at it with ${code(`kubectl -n ${t.namespace} rollout status ${t.kind.toLowerCase()}/${t.name}`, 400)}.`;
    text = `⚠️ [${t.cluster}] rollout of ${objectLabel(t)} timed out (${r.updated}/${r.desired} updated)`;
  } else {
    const pct = r.desired > 0 ? Math.floor((100 * r.updated) / r.desired) : 0;
    line = `⏳ Rolling out ${where(t)}: ${counts}\n\`${progressBar(r.updated, r.desired)}\` ${pct} %`;
    text = `⏳ [${t.cluster}] rolling out ${objectLabel(t)}: ${r.updated}/${r.desired} updated`;
  }
  return {
    text: clip(text, 3000),
    blocks: [
      { type: 'section', text: md(line) },
      { type: 'context', elements: [md(`Started ${slackDate(ctx.startedAt)} · updated ${slackDate(ctx.now)} (${elapsed})`)] },
    ],
  };
}

/** The signals of an alert, in the order verification replies name them. */
const SIGNAL_KINDS: readonly TokenKind[] = ['stale-token', 'unauthorized', 'legacy-token'];
const SIGNAL_WORDS: Record<TokenKind, string> = {
  'stale-token': 'stale token use',
  unauthorized: '401 Unauthorized responses',
  'legacy-token': 'legacy Secret token use',
};

/** `a`, `a or b`, `a, b or c`. */
function orList(items: readonly string[]): string {
  return items.length <= 1 ? (items[0] ?? '') : `${items.slice(0, -1).join(', ')} or ${items.at(-1)}`;
}

/**
 * Thread reply when a later action on the same alert supersedes the verification of an earlier one still waiting for
 * its outcome: the alert is verified from the later action only, so "resolved" is said once.
 * @param earlierAt when the earlier action completed; `laterAt` when the later one did (epoch ms UTC).
 */
export function supersededMessage(f: Finding, earlier: ActionKind, earlierAt: number, later: ActionKind, laterAt: number): SlackMessage {
  const subject = subjectOf(f);
  const line = `↪️ *Verification superseded*: the ${actionNoun(earlier)} of ${slackDate(earlierAt)} is no longer verified on its own; the ${actionNoun(later)} of ${slackDate(laterAt)} is, for the whole alert of ${code(subject, 300)}.`;
  return {
    text: clip(`↪️ [${f.cluster}] verification of the ${actionNoun(earlier)} superseded by the ${actionNoun(later)} of ${subject}`, 3000),
    blocks: [{ type: 'section', text: md(line) }],
  };
}

/** Input of {@link verificationMessage}. Times are epoch ms UTC. */
export interface Verification {
  outcome: 'resolved' | 'recurrence';
  finding: Finding;
  action: ActionKind;
  /** When the action completed. */
  actionAt: number;
  now: number;
  /** Resolved: the quiet period that had to pass without any signal of the alert. */
  settleMs?: number;
  /**
   * Resolved: the kinds of signal of the alert that stayed quiet (its findings' kinds; default: the finding's own).
   * Every one of them is named in the reply.
   */
  signals?: readonly TokenKind[];
  /** Recurrence: stale requests seen since the action, and the last one. */
  staleRequests?: number;
  lastSeen?: number;
}

/**
 * Verification reply: ✅ resolved (no stale use for the settle period after the action) or ⚠️ recurrence
 * naming the cause and its fix. For a `static-token-file` cause the recurrence says a restart only buys one
 * more token lifetime (docs/design/domain.md §6: e.g. Multus thin plugin copies the token into a host file once).
 */
export function verificationMessage(v: Verification): SlackMessage {
  const f = v.finding;
  const subject = subjectOf(f);
  const who = `${code(subject, 300)} in *${escClip(f.cluster, 200)}*`;
  const noun = actionNoun(v.action);
  const blocks: KnownBlock[] = [];
  let text: string;
  if (v.outcome === 'resolved') {
    const quiet = duration(Math.max(0, v.now - v.actionAt));
    // Every signal of the alert that had to stay quiet, named (stale tokens, 401s, legacy token use).
    const kinds = SIGNAL_KINDS.filter((k) => (v.signals ?? [f.kind]).includes(k));
    const signal = orList(kinds.map((k) => SIGNAL_WORDS[k]));
    blocks.push({
      type: 'section',
      text: md(
        `✅ *Verified*: no ${signal} by ${who} for ${quiet} since the ${noun} (${slackDate(v.actionAt)})${
          v.settleMs !== undefined ? `, longer than the ${duration(v.settleMs)} settle period` : ''
        }. The alert is resolved.`,
      ),
    });
    text = `✅ [${f.cluster}] verified: no ${signal} by ${subject} since the ${noun}; alert resolved`;
  } else {
    const after = v.lastSeen !== undefined ? ` ${duration(Math.max(0, v.lastSeen - v.actionAt))} after the ${noun}` : ` after the ${noun}`;
    const reqs = v.staleRequests !== undefined ? ` (${plural(v.staleRequests, 'request')}${v.lastSeen !== undefined ? `, last ${slackDate(v.lastSeen)}` : ''})` : '';
    const c = f.cause;
    const staticFile =
      c.id === 'static-token-file'
        ? '\nA restart only rewrites the copied token, which buys one more token lifetime (90 days on EKS); it does not fix the cause.'
        : '';
    const body =
      `⚠️ *Recurrence*: stale token use by ${who} came back${after}${reqs}.${staticFile}\n` +
      `*Cause*${c.component ? ` (${code(c.component, 60)})` : ''}: ${escClip(c.summary, 1000)}\n*Fix:* ${escClip(c.fix, 1000)}`;
    const sources = c.sources.length ? `\n*Sources:* ${listWithin(c.sources.slice(0, 5).map(sourceLink), 5, ' · ', c.sources.length)}` : '';
    blocks.push({ type: 'section', text: md(body + clip(sources, Math.max(0, LIMITS.sectionText - body.length))) });
    text = `⚠️ [${f.cluster}] recurrence: stale token use by ${subject} came back after the ${noun}; fix: ${c.fix}`;
  }
  blocks.push({ type: 'context', elements: [md(`Finding ${code(f.id, 100)} · checked ${slackDate(v.now)}`)] });
  return { text: clip(text, 3000), blocks };
}

/** One host file of {@link ProbeCheckMessage}. */
export interface ProbeCheckFile {
  path: string;
  node: string;
  /** Issue time of the token the file holds now (ISO-8601), or null. */
  issuedAt: string | null;
  /** The token was issued after the action started. */
  rewritten: boolean;
}

/** Input of {@link probeCheckMessage}. Times are epoch ms UTC. */
export interface ProbeCheckMessage {
  outcome: 'rewritten' | 'not-rewritten';
  finding: Finding;
  action: ActionKind;
  /** When the action started (a token issued from then on counts as a rewrite). */
  startedAt: number;
  now: number;
  files: readonly ProbeCheckFile[];
  /** Nodes that held the file before the action and have not reported since it completed. */
  silent?: readonly string[];
  /** When the action completed (the rollout finished); reports from then on count. Absent: said without a time. */
  completedAt?: number;
}

/**
 * The node probe's verification reply: the token file on the node was rewritten with a token issued after
 * the restart (🔎, naming file, node and the token's `iat`), or it was NOT rewritten (⚠️: the component that writes it
 * does not rewrite it on start, e.g. the Multus thin plugin v4 without `--cleanup-config-on-exit=true` and
 * `--multus-conf-file=auto`). It stands beside the audit-based verification, which still follows.
 */
export function probeCheckMessage(v: ProbeCheckMessage): SlackMessage {
  const f = v.finding;
  const subject = subjectOf(f);
  const noun = actionNoun(v.action);
  const issued = (x: ProbeCheckFile) => (x.issuedAt ? slackDate(Date.parse(x.issuedAt)) : 'an unknown time');
  const line = (x: ProbeCheckFile) =>
    `• ${code(x.path, 300)} on node ${code(x.node, 200)}: ${x.rewritten ? 'rewritten, token issued' : '*not rewritten*, still a token issued'} ${issued(x)}`;
  const files = listWithin(v.files.map(line), 10, '\n');
  // Only reports made after the action completed count (a report during a rollout may still see an old pod's file).
  const since = v.completedAt !== undefined ? `the ${noun} completed (${slackDate(v.completedAt)})` : `the ${noun} completed`;
  const silent = v.silent?.length ? `\nNo probe report since ${since} from node(s) ${listWithin(v.silent.map((n) => code(n, 200)), 10)}.` : '';
  const first = v.files.find((x) => (v.outcome === 'rewritten' ? x.rewritten : !x.rewritten)) ?? v.files[0];
  const where = first ? ` (${first.path} on node ${first.node}${first.issuedAt ? `, token issued ${first.issuedAt}` : ''}${v.files.length > 1 ? `, +${v.files.length - 1} more` : ''})` : '';
  let body: string;
  let text: string;
  if (v.outcome === 'rewritten') {
    const period =
      f.cause.id === 'static-token-file'
        ? ' The new token is a copy too: it goes stale the same way after its period unless the cause is fixed.'
        : '';
    body = `🔎 *Node probe*: the token file of ${code(subject, 300)} was rewritten after the ${noun} (${slackDate(v.startedAt)}).${period}\n${files}${silent}`;
    text = `🔎 [${f.cluster}] node probe: token file rewritten after the ${noun}${where}`;
  } else {
    const multus = (f.cause.component ?? '').startsWith('multus')
      ? ' The Multus thin plugin writes this kubeconfig from its entrypoint; without `--cleanup-config-on-exit=true` and `--multus-conf-file=auto` in the DaemonSet\'s args it may keep the old one. The thick plugin (multus-daemon) has no such file.'
      : ' Whatever writes it (CNI plugin, node agent) did not rewrite it on start; the client keeps presenting the old token until the API server rejects it.';
    body = `⚠️ *Node probe*: the token file of ${code(subject, 300)} was *NOT rewritten* after the ${noun} (${slackDate(v.startedAt)}).${multus}\n${files}${silent}`;
    text = `⚠️ [${f.cluster}] node probe: token file NOT rewritten after the ${noun}${where}`;
  }
  return {
    text: clip(text, 3000),
    blocks: [
      { type: 'section', text: md(clip(body, LIMITS.sectionText)) },
      { type: 'context', elements: [md(`Finding ${code(f.id, 100)} · node probe checked ${slackDate(v.now)} · the audit-based verification follows separately`)] },
    ],
  };
}
