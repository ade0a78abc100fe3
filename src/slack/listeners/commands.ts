/** The `/tokens` slash-command listener: acks, then answers through `TokensCommand.handle` (`../commands.ts`) (see `deps.ts`). */
import type { App } from '@slack/bolt';
import type { ChannelRef } from '../channels.js';
import { ackOnce } from '../replay.js';
import { failureMessage, replier, type ListenerDeps } from './deps.js';

/** Registers `/tokens` on `app`. */
export function register(app: App, deps: ListenerDeps): void {
  const { logger } = deps;

  app.command('/tokens', async ({ ack, context, command, respond }) => {
    await ackOnce(ack, context);
    await deps.track(
      (async () => {
        const channel: ChannelRef = { id: command.channel_id, name: command.channel_name };
        const reply = replier(deps, respond, command.channel_id, command.user_id);
        try {
          await reply(await deps.command.handle(command.text ?? '', command.user_id, channel));
        } catch (err) {
          logger.error({ err }, '/tokens failed');
          await reply(failureMessage(err, 'tokenwatch could not answer this command; see its logs.'));
        }
      })(),
    );
  });
}
