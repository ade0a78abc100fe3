/** The API-server token metrics repository: one row per `/metrics` scrape (see the V_APISERVER_TOKEN_METRICS migration). */
import type { TokenCounters, TokenMetricsSample } from '../findings/token-metrics.js';
import type { SqlExecutor } from './sql.js';

type MetricSampleRow = { cluster: string; process_start: number; scraped_at: number; counters: string };

function sampleOf(r: MetricSampleRow): TokenMetricsSample {
  return { scrapedAt: r.scraped_at, processStartAt: r.process_start, counters: JSON.parse(r.counters) as TokenCounters };
}

/** Token metric scrapes (`token_metric_samples`) over a {@link SqlExecutor}; times are epoch ms UTC. */
export class MetricSampleRepository {
  constructor(private readonly sql: SqlExecutor) {}

  /** Stores one scrape; a sample without a known process start is not stored (no rate can use it). */
  async save(cluster: string, sample: TokenMetricsSample): Promise<void> {
    if (sample.processStartAt === null) return;
    await this.sql.run(
      `INSERT INTO token_metric_samples (cluster, process_start, scraped_at, counters) VALUES (?, ?, ?, ?)
       ON CONFLICT (cluster, process_start, scraped_at) DO UPDATE SET counters = excluded.counters`,
      [cluster, sample.processStartAt, sample.scrapedAt, JSON.stringify(sample.counters)],
    );
  }

  /** The latest stored scrape of `cluster` from the API-server process started at `processStartAt` (epoch ms). */
  async last(cluster: string, processStartAt: number): Promise<TokenMetricsSample | undefined> {
    const row = await this.sql.get<MetricSampleRow>(
      'SELECT * FROM token_metric_samples WHERE cluster = ? AND process_start = ? ORDER BY scraped_at DESC LIMIT 1',
      [cluster, processStartAt],
    );
    return row ? sampleOf(row) : undefined;
  }

  /** Scrapes of `cluster` taken at or after `since` (epoch ms), oldest first. */
  async list(cluster: string, since: number): Promise<TokenMetricsSample[]> {
    const rows = await this.sql.all<MetricSampleRow>('SELECT * FROM token_metric_samples WHERE cluster = ? AND scraped_at >= ? ORDER BY scraped_at', [cluster, since]);
    return rows.map(sampleOf);
  }

  /** Deletes scrapes of `cluster` older than `olderThan` (epoch ms); returns how many. */
  async prune(cluster: string, olderThan: number): Promise<number> {
    return (await this.sql.run('DELETE FROM token_metric_samples WHERE cluster = ? AND scraped_at < ?', [cluster, olderThan])).changes;
  }
}
