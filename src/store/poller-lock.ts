/** The poller lock repository: one polling process per store (see the V_POLLER_LOCK migration). */
import type { SqlExecutor } from './sql.js';
import type { PollerLockClaim, PollerLockHolder, PollerLockRow } from './rows.js';

type LockRow = { holder: string; host: string; pid: number; acquired_at: number; heartbeat_at: number };

const GET = 'SELECT holder, host, pid, acquired_at, heartbeat_at FROM poller_lock WHERE id = 1';
const SET = `INSERT INTO poller_lock (id, holder, host, pid, acquired_at, heartbeat_at) VALUES (1, ?, ?, ?, ?, ?)
     ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, host = excluded.host, pid = excluded.pid,
       acquired_at = CASE WHEN poller_lock.holder = excluded.holder THEN poller_lock.acquired_at ELSE excluded.acquired_at END,
       heartbeat_at = excluded.heartbeat_at`;

/** The poller lock's row (`poller_lock`, a single row with id 1) over a {@link SqlExecutor}. */
export class PollerLockRepository {
  constructor(private readonly sql: SqlExecutor) {}

  /** The lock's row, if anyone holds it. */
  async get(): Promise<PollerLockRow | undefined> {
    const r = await this.sql.get<LockRow>(GET);
    return r === undefined ? undefined : { id: r.holder, host: r.host, pid: r.pid, acquiredAt: r.acquired_at, heartbeatAt: r.heartbeat_at };
  }

  /**
   * Takes the store's poller lock for `holder` in one write transaction, unless another holder refreshed it
   * within `staleAfterMs` before `now` and `isGone(row)` is false (e.g. same host, a pid that no longer runs).
   * Re-claiming one's own lock refreshes it.
   * @param now epoch ms; @param staleAfterMs ms without a heartbeat after which the lock is free
   */
  claim(holder: PollerLockHolder, now: number, staleAfterMs: number, isGone: (row: PollerLockRow) => boolean = () => false): Promise<PollerLockClaim> {
    return this.sql.transaction(async (tx): Promise<PollerLockClaim> => {
      const current = await new PollerLockRepository(tx).get();
      const live = current !== undefined && current.id !== holder.id && now - current.heartbeatAt < staleAfterMs && !isGone(current);
      if (live) return { acquired: false, holder: current };
      await tx.run(SET, [holder.id, holder.host, holder.pid, now, now]);
      return current === undefined || current.id === holder.id ? { acquired: true } : { acquired: true, replaced: current };
    });
  }

  /**
   * Refreshes the holder's heartbeat to `now`; false when the lock is no longer this holder's (taken over as stale).
   */
  async heartbeat(holderId: string, now: number): Promise<boolean> {
    return (await this.sql.run('UPDATE poller_lock SET heartbeat_at = ? WHERE id = 1 AND holder = ?', [now, holderId])).changes === 1;
  }

  /** Releases the lock if `holderId` holds it (idempotent). */
  async release(holderId: string): Promise<void> {
    await this.sql.run('DELETE FROM poller_lock WHERE id = 1 AND holder = ?', [holderId]);
  }
}
