/**
 * Whether a store error means the database cannot be reached right now (as opposed to a statement it refused): the
 * PostgreSQL server is down, restarting, or the network to it is cut. Callers answer "store unavailable" (Slack), log
 * it as such and retry later; nothing is lost, as every write is a transaction that did not commit.
 *
 * PostgreSQL (src/store/postgres.ts `PostgresStoreError`): no SQLSTATE (connection refused, reset, timed out, pool
 * connect timeout), class 08 (connection exception) or 57P (operator intervention: admin or crash shutdown, cannot
 * connect now), https://www.postgresql.org/docs/current/errcodes-appendix.html. SQLite (a local file) only when the
 * store's worker thread stopped (`SqliteWorkerStoppedError`, src/store/sqlite-protocol.ts): then nothing can be
 * written until the process restarts.
 */
export function isStoreUnavailable(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (e.name === 'SqliteWorkerStoppedError') return true;
    if (e.name !== 'PostgresStoreError') continue;
    const state = (e as { sqlState?: unknown }).sqlState;
    if (state === undefined || (typeof state === 'string' && /^(08|57P)/.test(state))) return true;
  }
  return false;
}
