/**
 * What the Bolt listeners get (a small interface handed in by the Slack integration, `../app.ts`) and the ephemeral
 * answer they share. The replay guard (`../replay.ts`) acknowledges each request before its store round trips; each
 * listener calls `ackOnce()` first (a no-op after the guard's ack) — before any Kubernetes, store or Slack write — and then
 * hands the work to the command handler or the approval flow. Slack needs the ack within 3 s (docs "Acknowledging
 * requests"); tokenwatch's target is 100 ms at p99 while a rollout runs (`bench/ack.ts`). Answers go to the user
 * ephemerally through the payload's `response_url`, or `chat.postEphemeral` when that fails.
 */
import type { RespondFn } from '@slack/bolt';
import type { Logger } from '../../observability/logger.js';
import { slackErrorCode, type SlackApi } from '../api.js';
import { wireText, type SlackMessage } from '../blocks/index.js';
import type { TokensCommand } from '../commands.js';
import type { ApprovalFlow } from '../flow.js';
import { isStoreUnavailable } from '../../store/unavailable.js';

/** Dependencies of the listeners (`register(app, deps)` of each kind). */
export interface ListenerDeps {
  command: Pick<TokensCommand, 'handle'>;
  flow: Pick<ApprovalFlow, 'onFindingButton' | 'vote' | 'rejectWithReason' | 'confirmedRecreate'>;
  api: Pick<SlackApi, 'countError' | 'ephemeral'>;
  logger: Logger;
  /** Tracks work done after the ack. */
  track<T>(p: Promise<T>): Promise<T>;
}

/** An ephemeral answer: `respond` (response_url), falling back to chat.postEphemeral. */
export function replier(deps: ListenerDeps, respond: RespondFn | undefined, channel: string | undefined, user: string, threadTs?: string): (msg: SlackMessage) => Promise<void> {
  return async (msg) => {
    if (respond) {
      try {
        await respond({ response_type: 'ephemeral', replace_original: false, text: wireText(msg.text, msg.textFormat), blocks: msg.blocks });
        return;
      } catch (err) {
        deps.api.countError('response_url', 'respond_failed');
        deps.logger.warn({ err: String(err) }, 'answering through response_url failed; trying chat.postEphemeral');
      }
    }
    if (channel === undefined) return;
    try {
      await deps.api.ephemeral(channel, user, msg, threadTs);
    } catch (err) {
      deps.logger.error({ user, channel, error: slackErrorCode(err) }, 'could not answer the user');
    }
  };
}

/**
 * The ephemeral answer when handling a request failed with `err`: "the store is unavailable" when the database
 * cannot be reached (nothing was changed; try again shortly), else `fallback` (see the logs).
 */
export function failureMessage(err: unknown, fallback: string): SlackMessage {
  const text = isStoreUnavailable(err)
    ? "⚠️ tokenwatch's store (its database) is unavailable right now, so nothing was changed. Try again in a minute."
    : `⚠️ ${fallback}`;
  return { text: text.replace(/^⚠️ /, ''), blocks: [{ type: 'section', text: { type: 'mrkdwn', text } }] };
}
