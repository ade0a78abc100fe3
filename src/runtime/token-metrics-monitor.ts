/**
 * Live API-server token metrics for one cluster: on each poll, read `/metrics`, compare with the previous scrape of
 * the same API-server process from the store, store the scrape, and return the cluster-level findings the increase
 * justifies (see `token-metrics.ts`). Called by the poller after the audit-derived findings are built.
 */
import { DAY_MS } from '../core/units.js';
import type { Finding } from '../findings/types.js';
import type { Logger } from '../observability/logger.js';
import type { Store } from '../store/index.js';
import type { MetricsScraper } from '../sources/apiserver-metrics.js';
import { REPLICA_WINDOW_MS, compareSamples, metricsFindings, tokenMetricsFromText, type SampleComparison, type TokenMetricsSample } from '../findings/token-metrics.js';

/** How long scrapes are kept, ms (7 days): enough for the status line's 24 h window and long poll gaps. */
export const METRIC_SAMPLE_RETENTION_MS = 7 * DAY_MS;


/** Result of one {@link TokenMetricsMonitor.poll}. */
export interface TokenMetricsPoll {
  sample?: TokenMetricsSample;
  comparison?: SampleComparison;
  /** Cluster-level findings to save with the poll's other findings. */
  findings: Finding[];
  /** Why the scrape failed or was unusable (the poll itself still succeeds). */
  error?: string;
}

/** Dependencies of a {@link TokenMetricsMonitor}. */
export interface TokenMetricsMonitorDeps {
  cluster: string;
  scraper: MetricsScraper;
  store: Store;
  logger: Logger;
}

/** See the module docstring. */
export class TokenMetricsMonitor {
  private lastErrorText: string | undefined;

  constructor(private readonly deps: TokenMetricsMonitorDeps) {}

  /** Error of the last scrape, if it failed. */
  get lastError(): string | undefined {
    return this.lastErrorText;
  }

  /**
   * Scrapes once and evaluates. Never throws: failures come back in `error` (and are logged at warn).
   * @param auditFindings this poll's audit-derived findings (an increase they explain raises nothing).
   * @param now the poll's time, epoch ms UTC (the scrape's time).
   */
  async poll(auditFindings: readonly Finding[], now: number, signal?: AbortSignal): Promise<TokenMetricsPoll> {
    const { cluster, scraper, store, logger } = this.deps;
    let sample: TokenMetricsSample;
    try {
      sample = tokenMetricsFromText(await scraper.scrape(signal), now);
    } catch (err) {
      const error = err instanceof Error ? err.message : String(err);
      this.lastErrorText = error;
      logger.warn({ cluster, error }, 'API-server token metrics unavailable');
      return { findings: [], error };
    }
    this.lastErrorText = undefined;
    const previous = sample.processStartAt !== null ? await store.metricSamples.last(cluster, sample.processStartAt) : undefined;
    const comparison = compareSamples(previous, sample);
    const replicas = new Set((await store.metricSamples.list(cluster, now - REPLICA_WINDOW_MS)).map((s) => s.processStartAt));
    if (sample.processStartAt !== null) replicas.add(sample.processStartAt);
    const findings = metricsFindings({ cluster, sample, comparison, auditFindings, replicasSeen: replicas.size });
    await store.transaction(async (tx) => {
      await tx.metricSamples.save(cluster, sample);
      await tx.metricSamples.prune(cluster, now - METRIC_SAMPLE_RETENTION_MS);
    });
    if (comparison.kind === 'reset') logger.info({ cluster, processStartAt: sample.processStartAt }, 'API-server token counters went down: treated as a reset, no rate');
    return { sample, comparison, findings };
  }
}
