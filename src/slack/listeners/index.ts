/**
 * Bolt listener registration, one `register(app, deps)` per kind (as in the Bolt TypeScript starter template):
 * slash commands, block actions (buttons), views (modals). Message builders live in `../blocks/`.
 */
import type { App } from '@slack/bolt';
import { register as registerActions } from './actions.js';
import { register as registerCommands } from './commands.js';
import type { ListenerDeps } from './deps.js';
import { register as registerViews } from './views.js';

export type { ListenerDeps } from './deps.js';

/** Registers `/tokens`, the button listeners and the modal listeners on `app`. */
export function registerListeners(app: App, deps: ListenerDeps): void {
  registerCommands(app, deps);
  registerActions(app, deps);
  registerViews(app, deps);
}
