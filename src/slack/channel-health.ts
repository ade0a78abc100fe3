/**
 * Channel health (docs/slack.md "Routing alerts to team channels"): whether the bot can post in each channel a
 * cluster's alerts may go to — its own channel and every channel its routing rules name ({@link ChannelMap.channelsOf})
 * — checked before an alert needs it: at start and on each `/tokens status`, not only after a failed post. The bot
 * must be a member of each, unless its token holds `chat:write.public` (public channels only). A problem found is
 * the channel's problem in {@link SlackApi.channelProblem}: `/tokens status` shows it ("⚠️ Alerts channel …",
 * "⚠️ Routed alerts channel …"), and the health model (src/runtime/health.ts) reports Slack as failing.
 */
import type { SlackApi } from './api.js';
import type { ChannelMap } from './channels.js';

/** See the module docstring. */
export class ChannelHealth {
  private readonly inFlight = new Map<string, Promise<void>>();

  /**
   * @param scopes the bot token's scopes as Slack reported them (`x-oauth-scopes` of `auth.test`); undefined when
   *   not reported, read as "no `chat:write.public`" (a member is needed).
   */
  constructor(
    private readonly api: Pick<SlackApi, 'checkChannel'>,
    private readonly channels: Pick<ChannelMap, 'channelsOf' | 'idOf'>,
    private readonly scopes: readonly string[] | undefined,
  ) {}

  /** Whether the token may post in public channels it is not a member of (`chat:write.public`). */
  get publicPosting(): boolean {
    return this.scopes?.includes('chat:write.public') ?? false;
  }

  /**
   * Checks every channel of the given clusters once (a check of the same channel under way is joined). A channel
   * named `#name` whose id is not known yet (learned from the first post) cannot be checked by id and is skipped.
   * Never throws.
   */
  async check(clusters: Iterable<string>): Promise<void> {
    const ids = new Set<string>();
    for (const c of clusters) for (const ch of this.channels.channelsOf(c)) ids.add(this.channels.idOf(ch));
    await Promise.all([...ids].filter((id) => !id.startsWith('#')).map((id) => this.checkOne(id)));
  }

  private checkOne(id: string): Promise<void> {
    const running = this.inFlight.get(id);
    if (running) return running;
    const p = this.api
      .checkChannel(id, this.publicPosting)
      .then(() => undefined)
      .finally(() => this.inFlight.delete(id));
    this.inFlight.set(id, p);
    return p;
  }
}
