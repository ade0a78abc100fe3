/**
 * What every GKE cluster of a deployment shares of Cloud Logging (src/sources/cloud-logging.ts): one query per
 * project per poll, and one read budget per quota project (`poll.gcpLogging.readsPerMinute`) — in the store's
 * `rate_buckets` with replicas (PostgreSQL), the mechanism of the shared CloudWatch budget (serve.ts
 * `sharedCloudWatch`), so that all replicas together stay within the project's read quota.
 */
import type { Config } from '../config/index.js';
import type { BucketStateStore } from '../core/token-bucket.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { CloudLoggingRegistry, type CloudLoggingRegistryOptions } from '../sources/cloud-logging.js';
import { budgetStoreError } from './budgets.js';

/**
 * The deployment's {@link CloudLoggingRegistry}, counting 429s in `metrics` (`tokenwatch_gcp_logging_throttled_total`,
 * `tokenwatch_gcp_logging_budget_rate`). With `shared`, the budget lives in the store on the wall clock (epoch ms).
 * `extra` adds source options the config does not carry (tests: credentials, fast retries).
 */
export function sharedGcpLogging(config: Config, metrics: Metrics, shared?: { buckets: BucketStateStore; logger: Logger }, extra: Partial<CloudLoggingRegistryOptions> = {}): CloudLoggingRegistry {
  return new CloudLoggingRegistry({
    readsPerMinute: config.poll.gcpLogging.readsPerMinute,
    reuseMs: config.poll.gcpLogging.reuse,
    requestTimeoutMs: config.poll.requestTimeout,
    ...(shared && { store: shared.buckets, clock: Date.now, onStoreError: budgetStoreError('gcp-logging', metrics, shared.logger) }),
    onThrottle: (project, rate) => {
      metrics.gcpLoggingThrottled.inc({ project });
      metrics.gcpLoggingRate.set({ project }, rate);
    },
    ...extra,
  });
}
