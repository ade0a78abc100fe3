/**
 * The polls repository: source cursors, each cluster's `watchedSince`, the auditIDs already seen, and poll runs with
 * what they covered (docs/design/architecture.md "Live mode"). Times are epoch ms UTC.
 */
import type { SqlExecutor } from './sql.js';
import { StoreError } from './errors.js';
import type { MissedPoll, PollCoverage, PollRunResult, PollStatus, PollTicks } from './rows.js';

type PollRow = {
  id: number;
  cluster: string;
  source: string;
  started_at: number;
  ended_at: number | null;
  events: number;
  token_uses: number;
  error: string | null;
  stats: string;
  last_success_at?: number | null;
};

// Kept in the cursors table under a key no source id can have (source ids name a source kind and its target).
// Not a source id (those start with their source's scheme, e.g. `cloudwatch:`); no NUL byte, which PostgreSQL text
// cannot hold (keys of earlier versions, `\0watched-since\0<cluster>`, are renamed by a migration step).
const watchedKey = (cluster: string): string => `watched-since:${cluster}`;

/**
 * Distinct auditIDs per `INSERT` of {@link PollRepository.markSeen}: 3 parameters a row, 6,000 a statement, well within
 * SQLite's 32,766 (SQLITE_MAX_VARIABLE_NUMBER, https://sqlite.org/limits.html) and PostgreSQL's 65,535.
 */
export const SEEN_BATCH_ROWS = 2000;

/** Cursors (`cursors`), seen auditIDs (`seen`) and poll runs (`poll_runs`) over a {@link SqlExecutor}. */
export class PollRepository {
  constructor(private readonly sql: SqlExecutor) {}

  /** The cursor last saved for a source, or undefined on the first poll. */
  async getCursor(sourceId: string): Promise<string | undefined> {
    return (await this.sql.get<{ cursor: string }>('SELECT cursor FROM cursors WHERE source_id = ?', [sourceId]))?.cursor;
  }

  /** Saves (replaces) a source's cursor. */
  async setCursor(sourceId: string, cursor: string): Promise<void> {
    await this.sql.run('INSERT INTO cursors (source_id, cursor) VALUES (?, ?) ON CONFLICT (source_id) DO UPDATE SET cursor = excluded.cursor', [sourceId, cursor]);
  }

  /**
   * Start of the first successful poll of a cluster (epoch ms UTC), kept for good (poll runs are pruned): where the
   * audit window of live mode's readiness verdict begins. Undefined before the first success.
   */
  async watchedSince(cluster: string): Promise<number | undefined> {
    const v = await this.getCursor(watchedKey(cluster));
    return v === undefined ? undefined : Number(v);
  }

  /**
   * Records `at` as {@link PollRepository.watchedSince} unless one is already recorded (keeps the first time recorded).
   */
  async markWatchedSince(cluster: string, at: number): Promise<void> {
    await this.sql.run('INSERT INTO cursors (source_id, cursor) VALUES (?, ?) ON CONFLICT (source_id) DO NOTHING', [watchedKey(cluster), String(at)]);
  }

  /**
   * Records auditIDs as seen at `seenAt` and returns those that were not seen before, in input order
   * (an id repeated in the input counts once). One transaction; existing rows keep their first `seenAt`.
   * One multi-row `INSERT … ON CONFLICT DO NOTHING RETURNING audit_id` per {@link SEEN_BATCH_ROWS} distinct ids (both
   * backends return only the rows inserted), so a poll of 10,000 new events is five statements, not 10,000 round trips.
   */
  markSeen(cluster: string, auditIDs: readonly string[], seenAt: number): Promise<string[]> {
    const distinct = [...new Set(auditIDs)];
    if (distinct.length === 0) return Promise.resolve([]);
    return this.sql.transaction(async (tx) => {
      const inserted = new Set<string>();
      for (let i = 0; i < distinct.length; i += SEEN_BATCH_ROWS) {
        const batch = distinct.slice(i, i + SEEN_BATCH_ROWS);
        const params: (string | number)[] = [];
        for (const id of batch) params.push(cluster, id, seenAt);
        const rows = await tx.all<{ audit_id: string }>(`INSERT INTO seen (cluster, audit_id, seen_at) VALUES ${batch.map(() => '(?, ?, ?)').join(', ')} ON CONFLICT DO NOTHING RETURNING audit_id`, params);
        for (const r of rows) inserted.add(r.audit_id);
      }
      return distinct.filter((id) => inserted.has(id));
    });
  }

  /** Forgets auditIDs of `cluster` seen before `olderThan`; returns how many. */
  async pruneSeen(cluster: string, olderThan: number): Promise<number> {
    return (await this.sql.run('DELETE FROM seen WHERE cluster = ? AND seen_at < ?', [cluster, olderThan])).changes;
  }

  /** Number of remembered auditIDs of `cluster`. */
  async countSeen(cluster: string): Promise<number> {
    return Number((await this.sql.get<{ n: number }>('SELECT count(*) AS n FROM seen WHERE cluster = ?', [cluster]))?.n ?? 0);
  }

  /**
   * Records the start of a poll; returns its id. `scheduledAt`: the cron tick it runs for (epoch ms), for a scheduled
   * poll or a take-over's catch-up of a tick; absent for the start-up poll and `/tokens scan`.
   */
  async startRun(cluster: string, source: string, startedAt: number, scheduledAt?: number): Promise<number> {
    const row = await this.sql.get<{ id: number }>('INSERT INTO poll_runs (cluster, source, started_at, scheduled_at) VALUES (?, ?, ?, ?) RETURNING id', [cluster, source, startedAt, scheduledAt ?? null]);
    return Number(row!.id);
  }

  /**
   * Records that the tick `scheduledAt` (epoch ms) of `cluster` started no poll, with the reason; false (nothing
   * written) when that tick already has a missed record (another replica recorded it).
   */
  async recordMissed(m: MissedPoll): Promise<boolean> {
    const { changes } = await this.sql.run('INSERT INTO missed_polls (cluster, scheduled_at, reason, replica, recorded_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING', [
      m.cluster,
      m.scheduledAt,
      m.reason,
      m.replica ?? null,
      m.recordedAt,
    ]);
    return changes === 1;
  }

  /** The ticks of `cluster` at or after `since` (epoch ms) that are accounted for: see {@link PollTicks}. */
  async ticks(cluster: string, since: number): Promise<PollTicks> {
    const polled = await this.sql.all<{ t: number }>('SELECT scheduled_at AS t FROM poll_runs WHERE cluster = ? AND scheduled_at >= ? AND ended_at IS NOT NULL ORDER BY scheduled_at', [cluster, since]);
    const missed = await this.sql.all<{ t: number; reason: string }>('SELECT scheduled_at AS t, reason FROM missed_polls WHERE cluster = ? AND scheduled_at >= ? ORDER BY scheduled_at', [cluster, since]);
    return { polled: polled.map((r) => Number(r.t)), missed: missed.map((r) => ({ scheduledAt: Number(r.t), reason: r.reason })) };
  }

  /**
   * Records the end of a poll.
   * @throws {StoreError} for an unknown id.
   */
  async finishRun(id: number, result: PollRunResult): Promise<void> {
    const { changes } = await this.sql.run('UPDATE poll_runs SET ended_at = ?, events = ?, token_uses = ?, error = ?, stats = ? WHERE id = ?', [
      result.endedAt,
      result.events,
      result.tokenUses,
      result.error ?? null,
      JSON.stringify(result.stats ?? {}),
      id,
    ]);
    if (changes !== 1) throw new StoreError(`finishPollRun: no poll run with id ${id}`);
  }

  /**
   * The latest poll of each cluster (the run recorded last), ordered by cluster name, with its last success time; of
   * `cluster` only when given (at most one). Index seeks per cluster (`poll_runs_by_cluster`, `poll_runs_succeeded`),
   * the clusters found by skipping through the index: the cost follows the number of clusters, not of poll runs
   * kept (at 1,000 clusters with 7 days of 5-minute polls the whole-table form took about 3 s; docs/performance.md
   * "Poll runs at fleet scale").
   */
  async lastRuns(cluster?: string): Promise<PollStatus[]> {
    const columns = `p.*, (SELECT max(s.ended_at) FROM poll_runs s
                  WHERE s.cluster = p.cluster AND s.ended_at IS NOT NULL AND s.error IS NULL) AS last_success_at`;
    const rows =
      cluster === undefined
        ? await this.sql.all<PollRow>(
            `WITH RECURSIVE clusters (name) AS (
               SELECT min(cluster) FROM poll_runs
               UNION ALL
               SELECT (SELECT min(q.cluster) FROM poll_runs q WHERE q.cluster > clusters.name) FROM clusters WHERE clusters.name IS NOT NULL
             )
             SELECT ${columns}
             FROM clusters c JOIN poll_runs p ON p.id = (SELECT max(q.id) FROM poll_runs q WHERE q.cluster = c.name)
             ORDER BY p.cluster`,
          )
        : await this.sql.all<PollRow>(`SELECT ${columns} FROM poll_runs p WHERE p.id = (SELECT max(q.id) FROM poll_runs q WHERE q.cluster = ?)`, [cluster]);
    return rows.map((r) => ({
      id: r.id,
      cluster: r.cluster,
      source: r.source,
      startedAt: r.started_at,
      endedAt: r.ended_at,
      events: r.events,
      tokenUses: r.token_uses,
      error: r.error,
      stats: JSON.parse(r.stats) as Record<string, number>,
      lastSuccessAt: r.last_success_at ?? null,
    }));
  }

  /**
   * Deletes poll runs that started before `olderThan`, keeping each cluster's latest; returns how many. Missed ticks
   * before `olderThan` go too (not counted).
   */
  async pruneRuns(olderThan: number): Promise<number> {
    await this.sql.run('DELETE FROM missed_polls WHERE scheduled_at < ?', [olderThan]);
    // Only the runs past retention are visited (index `poll_runs_by_start`), each kept when no later run of its
    // cluster exists (index `poll_runs_by_cluster`): the cost follows what is deleted, not the table's size.
    return (
      await this.sql.run('DELETE FROM poll_runs WHERE started_at < ? AND EXISTS (SELECT 1 FROM poll_runs later WHERE later.cluster = poll_runs.cluster AND later.id > poll_runs.id)', [
        olderThan,
      ])
    ).changes;
  }

  /**
   * What the polls of `cluster` did since `from` (epoch ms): see {@link PollCoverage}. Running polls are not counted.
   */
  async coverage(cluster: string, from: number): Promise<PollCoverage> {
    const row = (await this.sql.get<{ failed: number; succeeded: number; last_before: number | null }>(
      `SELECT
         (SELECT count(*) FROM poll_runs WHERE cluster = ? AND started_at >= ? AND ended_at IS NOT NULL AND error IS NOT NULL) AS failed,
         (SELECT count(*) FROM poll_runs WHERE cluster = ? AND started_at >= ? AND ended_at IS NOT NULL AND error IS NULL) AS succeeded,
         (SELECT max(started_at) FROM poll_runs WHERE cluster = ? AND started_at <= ? AND ended_at IS NOT NULL AND error IS NULL) AS last_before`,
      [cluster, from, cluster, from, cluster, from],
    ))!;
    return { failed: Number(row.failed), succeeded: Number(row.succeeded), lastSuccessAtOrBefore: row.last_before };
  }
}
