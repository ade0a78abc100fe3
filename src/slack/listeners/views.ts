/** The `view_submission` listeners: the reject-reason modal and the Recreate ServiceAccount confirmation (see `deps.ts`). */
import type { App } from '@slack/bolt';
import { RECREATE_MODAL_CALLBACK_ID, REJECT_MODAL_CALLBACK_ID, REJECT_REASON_INPUT, REJECT_REASON_MAX } from '../blocks/index.js';
import { ackOnce } from '../replay.js';
import { replier, type ListenerDeps } from './deps.js';

/** Registers the modal submission listeners on `app`. */
export function register(app: App, deps: ListenerDeps): void {
  const { logger } = deps;

  // The reject-reason modal (opened by a Reject click of an approver): close it at once, then reject.
  app.view(REJECT_MODAL_CALLBACK_ID, async ({ ack, context, body, view }) => {
    await ackOnce(ack, context);
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

  // The Recreate ServiceAccount confirmation (opened from the alert's overflow menu): close it, then request.
  app.view(RECREATE_MODAL_CALLBACK_ID, async ({ ack, context, body, view }) => {
    await ackOnce(ack, context);
    await deps.track(
      (async () => {
        try {
          await deps.flow.confirmedRecreate(body.user.id, view.private_metadata, (channel) => replier(deps, undefined, channel, body.user.id));
        } catch (err) {
          logger.error({ err, user: body.user.id }, 'recreate confirmation failed');
        }
      })(),
    );
  });
}
