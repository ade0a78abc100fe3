/** The Slack replay cache repository: request keys already handled, shared by every replica (src/slack/replay.ts). */
import type { SqlExecutor } from './sql.js';

/** Slack request keys (`slack_seen_requests`) over a {@link SqlExecutor}. */
export class ReplayRepository {
  constructor(private readonly sql: SqlExecutor) {}

  /**
   * Claims Slack request keys (replay cache, see src/slack/replay.ts) atomically across replicas: deletes expired
   * keys (`expires_at <= now`), then inserts each key with `expiresAt`.
   * @param keys one request's keys (e.g. its envelope id and trigger id); all are recorded
   * @param now epoch ms; @param expiresAt epoch ms
   * @returns true when none of the keys was present (the request is new), false when any was (a replay)
   */
  claim(keys: readonly string[], now: number, expiresAt: number): Promise<boolean> {
    return this.sql.transaction(async (tx) => {
      await tx.run('DELETE FROM slack_seen_requests WHERE expires_at <= ?', [now]);
      let fresh = true;
      // In sorted order: two replicas claiming the same keys in different orders would otherwise deadlock on
      // PostgreSQL (each waiting on the other's uncommitted row).
      for (const k of [...new Set(keys)].sort()) {
        const { changes } = await tx.run('INSERT INTO slack_seen_requests (key, seen_at, expires_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING', [k, now, expiresAt]);
        if (changes === 0) fresh = false;
      }
      return fresh;
    });
  }
}
