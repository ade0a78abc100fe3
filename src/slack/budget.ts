/**
 * Slack's Web API rates as one budget per workspace across replicas: with the PostgreSQL store, every replica takes a
 * token of the same bucket (src/core/token-bucket.ts on the store's `rate_buckets`, src/store/rate-buckets.ts) before
 * each call of a method with a per-minute limit, and before each `chat.postMessage` to a channel, so two replicas
 * together stay within, e.g., `chat.update`'s Tier 3 (50 per minute per app and workspace) and one post per second
 * per channel (https://docs.slack.dev/apis/web-api/rate-limits). The notification queue's {@link RateGate}
 * (src/slack/outbox.ts) still orders this replica's own work; the budget is what the replicas share.
 */
import { type BucketStateStore, TokenBucketLimiter } from '../core/token-bucket.js';
import type { SlackRates } from './outbox.js';

/** Options of {@link slackBudget}. */
export interface SlackBudgetOptions {
  /** The workspace (team) id `auth.test` answered; buckets are per workspace. */
  team: string;
  /** The rates the buckets hold (per-minute limits per method with their burst; the per-channel post interval). */
  rates: SlackRates;
  /** Where the buckets live (the store's `rate_buckets`). */
  store: BucketStateStore;
  /** Clock every replica shares, epoch ms. Default `Date.now`. */
  clock?: () => number;
  /** Told when the store failed and a call took a token of this replica's own bucket. */
  onStoreError?: (key: string, err: unknown) => void;
}

/** The bucket key of a call: `slack/<team>/<method>`, or `slack/<team>/chat.postMessage/<channel>` for a post. */
function keyOf(team: string, method: string, channel: string | undefined): string {
  return method === 'chat.postMessage' && channel !== undefined ? `slack/${team}/${method}/${channel}` : `slack/${team}/${method}`;
}

/**
 * The shared Slack budget as the `budget` hook of `SlackApi`: resolves when a call of `method` (to `channel`) may be
 * made. Calls of methods without a per-minute limit (and posts without a channel) pass at once.
 */
export function slackBudget(opts: SlackBudgetOptions): (method: string, channel: string | undefined) => Promise<void> {
  const prefix = `slack/${opts.team}/`;
  const limiter = new TokenBucketLimiter({
    limitsOf: (key) => {
      const rest = key.slice(prefix.length);
      const slash = rest.indexOf('/');
      if (slash >= 0) return rest.slice(0, slash) === 'chat.postMessage' ? { rate: 1000 / opts.rates.postIntervalMs, burst: 1 } : undefined;
      const per = opts.rates.perMinute[rest];
      return per !== undefined && per > 0 ? { rate: per / 60, burst: Math.max(1, opts.rates.burst) } : undefined;
    },
    store: opts.store,
    clock: opts.clock ?? Date.now,
    ...(opts.onStoreError !== undefined && { onStoreError: opts.onStoreError }),
  });
  return (method, channel) => limiter.acquire(keyOf(opts.team, method, channel));
}
