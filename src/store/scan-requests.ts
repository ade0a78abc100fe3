/**
 * The scan-request repository: `/tokens scan <cluster>` answered by a replica that does not poll the cluster leaves a
 * request here for the replica that does (the cluster's owner), which takes it on its next pick-up
 * tick and polls at once (docs/design/architecture.md "How `serve` is put together, and one click's path").
 */
import type { SqlExecutor } from './sql.js';

/** Pending "scan now" requests (`scan_requests`, one row per cluster) over a {@link SqlExecutor}; times epoch ms UTC. */
export class ScanRequestRepository {
  constructor(private readonly sql: SqlExecutor) {}

  /** Records a request to poll `cluster` now, made at `at`; a request already pending keeps its earlier time. */
  async request(cluster: string, at: number): Promise<void> {
    await this.sql.run('INSERT INTO scan_requests (cluster, requested_at) VALUES (?, ?) ON CONFLICT (cluster) DO NOTHING', [cluster, at]);
  }

  /**
   * The clusters with a pending request, oldest request first: one query whatever the number of clusters, so that a
   * replica's pick-up tick (every 2 s) reads the usually empty table once instead of trying a take per cluster.
   */
  async pending(): Promise<string[]> {
    const rows = await this.sql.all<{ cluster: string }>('SELECT cluster FROM scan_requests ORDER BY requested_at, cluster');
    return rows.map((r) => r.cluster);
  }

  /**
   * Takes the pending request of `cluster`, if any: deletes it and returns when it was made (epoch ms), else
   * undefined. Of concurrent takers (other replicas included) exactly one gets it.
   */
  async take(cluster: string): Promise<number | undefined> {
    const row = await this.sql.get<{ requested_at: number }>('DELETE FROM scan_requests WHERE cluster = ? RETURNING requested_at', [cluster]);
    return row === undefined ? undefined : Number(row.requested_at);
  }
}
