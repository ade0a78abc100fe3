/** The Slack replay cache repository: request keys already handled, shared by every replica (src/slack/replay.ts). */
import type { SqlExecutor } from './sql.js';

/** Slack request keys (`slack_seen_requests`) over a {@link SqlExecutor}. */
export class ReplayRepository {
  constructor(private readonly sql: SqlExecutor) {}

  /** See `Store.claimSlackRequest`: one write transaction; true when none of `keys` was present. Times epoch ms. */
  claim(keys: readonly string[], now: number, expiresAt: number): Promise<boolean> {
    return this.sql.transaction(async (tx) => {
      await tx.run('DELETE FROM slack_seen_requests WHERE expires_at <= ?', [now]);
      let fresh = true;
      for (const k of new Set(keys)) {
        const { changes } = await tx.run('INSERT INTO slack_seen_requests (key, seen_at, expires_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING', [k, now, expiresAt]);
        if (changes === 0) fresh = false;
      }
      return fresh;
    });
  }
}
