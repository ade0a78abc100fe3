/**
 * The `rate_buckets` table (migration "rate buckets"): the state of the request budgets of outside quotas
 * (src/core/token-bucket.ts), one row per bucket key, so that every replica on one PostgreSQL store takes its tokens
 * from the same bucket (docs/live-mode.md "Shared budgets"). Portable SQL (both backends); serve uses it with
 * PostgreSQL only (with SQLite there is one replica and the buckets stay in process).
 */
import type { BucketState, BucketStateStore } from '../core/token-bucket.js';
import type { SqlExecutor } from './sql.js';

interface BucketRow extends Record<string, unknown> {
  tokens: number;
  updated_at: number;
  rate: number;
  last_throttle_at: number | null;
}

/**
 * {@link BucketStateStore} on the store's SQL executor: each update is one transaction holding the key's lock
 * (`SqlExecutor.lock`: a PostgreSQL advisory lock; SQLite's write lock), so of concurrent updates of one key from any
 * replica each sees the one before. Errors are the executor's `StoreError`s.
 */
export class SqlBucketStateStore implements BucketStateStore {
  constructor(private readonly sql: SqlExecutor) {}

  update<T>(key: string, fn: (state: BucketState | undefined) => { state: BucketState; result: T }): Promise<T> {
    return this.sql.transaction(async (tx) => {
      await tx.lock(`rate-bucket:${key}`);
      const row = await tx.get<BucketRow>('SELECT tokens, updated_at, rate, last_throttle_at FROM rate_buckets WHERE key = ?', [key]);
      const before: BucketState | undefined = row
        ? { tokens: Number(row.tokens), updatedAt: Number(row.updated_at), rate: Number(row.rate), ...(row.last_throttle_at !== null && { lastThrottleAt: Number(row.last_throttle_at) }) }
        : undefined;
      const { state, result } = fn(before);
      await tx.run(
        'INSERT INTO rate_buckets (key, tokens, updated_at, rate, last_throttle_at) VALUES (?, ?, ?, ?, ?) ' +
          'ON CONFLICT (key) DO UPDATE SET tokens = excluded.tokens, updated_at = excluded.updated_at, rate = excluded.rate, last_throttle_at = excluded.last_throttle_at',
        [key, state.tokens, state.updatedAt, state.rate, state.lastThrottleAt ?? null],
      );
      return result;
    });
  }
}
