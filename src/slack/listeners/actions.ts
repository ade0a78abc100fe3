/**
 * Bolt listeners: `/tokens` and the `block_actions` of tokenwatch's buttons. Each listener calls `ack()` first —
 * before any Kubernetes, store-heavy or Slack write — and then hands the work to the command handler or the
 * approval flow. Slack needs the ack within 3 s (docs "Acknowledging requests"); tokenwatch's target is 100 ms at
 * p99 while a rollout runs (`bench/ack.ts`). Answers go to the user ephemerally through the payload's
 * `response_url`, or `chat.postEphemeral` when that fails.
 */
import type { App, BlockButtonAction, RespondFn } from '@slack/bolt';
import type { Logger } from '../../observability/logger.js';
import { slackErrorCode, type SlackApi } from '../api.js';
import { ACTION_IDS, REJECT_MODAL_CALLBACK_ID, REJECT_REASON_INPUT, REJECT_REASON_MAX, RESTART_ACTION_ID_PATTERN, type SlackMessage } from '../blocks/index.js';
import type { ChannelRef } from '../channels.js';
import type { TokensCommand } from '../commands.js';
import type { ApprovalFlow, Clicker } from '../flow.js';

/** Dependencies of {@link registerListeners}. */
export interface ListenerDeps {
  command: TokensCommand;
  flow: ApprovalFlow;
  api: SlackApi;
  logger: Logger;
  /** Tracks work done after the ack. */
  track<T>(p: Promise<T>): Promise<T>;
}

/** An ephemeral answer: `respond` (response_url), falling back to chat.postEphemeral. */
function replier(deps: ListenerDeps, respond: RespondFn | undefined, channel: string | undefined, user: string, threadTs?: string): (msg: SlackMessage) => Promise<void> {
  return async (msg) => {
    if (respond) {
      try {
        await respond({ response_type: 'ephemeral', replace_original: false, text: msg.text, blocks: msg.blocks });
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

/** Registers `/tokens` and the button listeners on `app`. */
export function registerListeners(app: App, deps: ListenerDeps): void {
  const { logger } = deps;

  app.command('/tokens', async ({ ack, command, respond }) => {
    await ack();
    await deps.track(
      (async () => {
        const channel: ChannelRef = { id: command.channel_id, name: command.channel_name };
        const reply = replier(deps, respond, command.channel_id, command.user_id);
        try {
          await reply(deps.command.handle(command.text ?? '', command.user_id, channel));
        } catch (err) {
          logger.error({ err }, '/tokens failed');
          await reply({ text: 'tokenwatch could not answer this command; see its logs.', blocks: [{ type: 'section', text: { type: 'mrkdwn', text: '⚠️ tokenwatch could not answer this command; see its logs.' } }] });
        }
      })(),
    );
  });

  const button = (handler: (c: Clicker, value: string, actionId: string) => Promise<void>) =>
    async ({ ack, body, action, respond }: { ack: () => Promise<void>; body: BlockButtonAction; action: BlockButtonAction['actions'][number]; respond: RespondFn }) => {
      await ack();
      await deps.track(
        (async () => {
          const channel = body.channel ? { id: body.channel.id, name: body.channel.name } : body.container?.channel_id ? { id: String(body.container.channel_id) } : undefined;
          const threadTs = typeof body.message?.thread_ts === 'string' ? body.message.thread_ts : undefined;
          const c: Clicker = {
            user: body.user.id,
            channel,
            reply: replier(deps, respond, channel?.id, body.user.id, threadTs),
            ...(typeof body.trigger_id === 'string' ? { triggerId: body.trigger_id } : {}),
          };
          try {
            await handler(c, typeof action.value === 'string' ? action.value : '', action.action_id);
          } catch (err) {
            logger.error({ err, actionId: action.action_id, user: body.user.id }, 'button handling failed');
            await c.reply({ text: '⚠️ tokenwatch could not complete this; see its logs.', blocks: [{ type: 'section', text: { type: 'mrkdwn', text: '⚠️ tokenwatch could not complete this; see its logs.' } }] });
          }
        })(),
      );
    };

  app.action<BlockButtonAction>(RESTART_ACTION_ID_PATTERN, button((c, v) => deps.flow.onFindingButton(c, 'restart', v)));
  app.action<BlockButtonAction>(ACTION_IDS.recreateServiceAccount, button((c, v) => deps.flow.onFindingButton(c, 'recreate-serviceaccount', v)));
  app.action<BlockButtonAction>(ACTION_IDS.snooze1d, button((c, v) => deps.flow.onFindingButton(c, 'snooze', v, 1)));
  app.action<BlockButtonAction>(ACTION_IDS.snooze7d, button((c, v) => deps.flow.onFindingButton(c, 'snooze', v, 7)));
  app.action<BlockButtonAction>(ACTION_IDS.details, button((c, v) => deps.flow.onFindingButton(c, 'details', v)));
  app.action<BlockButtonAction>(ACTION_IDS.approve, button((c, v) => deps.flow.vote(c, v, 'approve')));
  app.action<BlockButtonAction>(ACTION_IDS.reject, button((c, v) => deps.flow.vote(c, v, 'reject')));

  // The reject-reason modal (opened by a Reject click of an approver): close it at once, then reject.
  app.view(REJECT_MODAL_CALLBACK_ID, async ({ ack, body, view }) => {
    await ack();
    const input = view.state.values[REJECT_REASON_INPUT]?.[REJECT_REASON_INPUT];
    const reason = (typeof input?.value === 'string' ? input.value : '').slice(0, REJECT_REASON_MAX);
    await deps.track(
      (async () => {
        try {
          await deps.flow.rejectWithReason(body.user.id, view.private_metadata, reason, (channel) => replier(deps, undefined, channel, body.user.id));
        } catch (err) {
          logger.error({ err, user: body.user.id }, 'reject with reason failed');
        }
      })(),
    );
  });
}
