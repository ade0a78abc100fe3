/**
 * The `app_home_opened` event listener (Events API, bot event; docs.slack.dev/reference/events/app_home_opened):
 * when a user opens the app's Home tab (`tab: 'home'`; the Messages tab sends `tab: 'messages'`, ignored), the Home
 * view is published to that user (`../home.ts`). Bolt acknowledges events itself before the listener runs.
 */
import type { App } from '@slack/bolt';
import type { Logger } from '../../observability/logger.js';
import type { HomePublisher } from '../home.js';

/** Dependencies of the Home listener. */
export interface HomeListenerDeps {
  home: Pick<HomePublisher, 'opened'>;
  logger: Logger;
  /** Tracks work done after the event was acknowledged. */
  track<T>(p: Promise<T>): Promise<T>;
}

/** Registers `app_home_opened` on `app`. */
export function register(app: App, deps: HomeListenerDeps): void {
  app.event('app_home_opened', async ({ event }) => {
    if (event.tab !== 'home') return;
    await deps.track(deps.home.opened(event.user)).catch((err: unknown) => deps.logger.error({ err, user: event.user }, 'publishing the Home tab failed'));
  });
}
