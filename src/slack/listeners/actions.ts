/**
 * The `block_actions` listeners of tokenwatch's buttons (restart, approve, reject), of the alert's overflow menu
 * (recreate, snooze, details) and of the per-action buttons of earlier alert versions: each acks, then hands the click
 * to the approval flow (see `deps.ts`).
 */
import type { App, BlockAction, BlockButtonAction, BlockOverflowAction, RespondFn } from '@slack/bolt';
import { ACTION_IDS, RESTART_ACTION_ID_PATTERN } from '../blocks/index.js';
import type { Clicker } from '../flow.js';
import { ackOnce } from '../replay.js';
import { failureMessage, replier, type ListenerDeps } from './deps.js';

/** Registers the button listeners on `app`. */
export function register(app: App, deps: ListenerDeps): void {
  const { logger } = deps;

  const button = (handler: (c: Clicker, value: string, actionId: string) => Promise<void>) =>
    async ({ ack, context, body, action, respond }: { ack: () => Promise<void>; context: Record<string, unknown>; body: BlockAction; action: BlockButtonAction['actions'][number] | BlockOverflowAction['actions'][number]; respond: RespondFn }) => {
      await ackOnce(ack, context);
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
            // A button carries its opaque id in `value`; an overflow option in `selected_option.value`.
            const value = action.type === 'overflow' ? action.selected_option?.value : action.value;
            await handler(c, typeof value === 'string' ? value : '', action.action_id);
          } catch (err) {
            logger.error({ err, actionId: action.action_id, user: body.user.id }, 'button handling failed');
            await c.reply(failureMessage(err, 'tokenwatch could not complete this; see its logs.'));
          }
        })(),
      );
    };

  app.action<BlockButtonAction>(RESTART_ACTION_ID_PATTERN, button((c, v) => deps.flow.onFindingButton(c, 'restart', v)));
  app.action<BlockButtonAction>(ACTION_IDS.recreateServiceAccount, button((c, v) => deps.flow.onFindingButton(c, 'recreate-serviceaccount', v)));
  app.action<BlockButtonAction>(ACTION_IDS.snooze1d, button((c, v) => deps.flow.onFindingButton(c, 'snooze', v, 1)));
  app.action<BlockButtonAction>(ACTION_IDS.snooze7d, button((c, v) => deps.flow.onFindingButton(c, 'snooze', v, 7)));
  app.action<BlockButtonAction>(ACTION_IDS.details, button((c, v) => deps.flow.onFindingButton(c, 'details', v)));
  // The alert's overflow menu (Recreate ServiceAccount…, Snooze, Details): the option's opaque id says which.
  app.action<BlockOverflowAction>(ACTION_IDS.more, button((c, v) => deps.flow.onFindingButton(c, 'any', v)));
  app.action<BlockButtonAction>(ACTION_IDS.approve, button((c, v) => deps.flow.vote(c, v, 'approve')));
  app.action<BlockButtonAction>(ACTION_IDS.reject, button((c, v) => deps.flow.vote(c, v, 'reject')));
}
