/**
 * What the request budgets shared across replicas (src/core/token-bucket.ts on the store's `rate_buckets`) report
 * when the store cannot be read: the CloudWatch Logs budget (serve.ts `sharedCloudWatch`), Cloud Logging's
 * (gcp-logging.ts) and Slack's (build-slack.ts).
 */
import type { Logger } from '../observability/logger.js';
import { LogRateLimit } from '../observability/log-limit.js';
import type { Metrics } from '../observability/metrics.js';

/**
 * The `onStoreError` of a shared budget: counts the call in `tokenwatch_rate_budget_store_errors_total` and logs at
 * most one line a minute (with how many were left out), without the error's statement data.
 */
export function budgetStoreError(budget: 'cloudwatch' | 'slack' | 'gcp-logging' | 'log-analytics', metrics: Metrics, logger: Logger): (key: string, err: unknown) => void {
  const limit = new LogRateLimit(60_000);
  return (key, err) => {
    metrics.rateBudgetStoreErrors.inc({ budget });
    const left = limit.take();
    if (left !== undefined) logger.warn({ budget, key, error: (err as Error).message, leftOut: left }, `the shared ${budget} request budget could not be read from the store: this replica uses its own until the store answers`);
  };
}
