/**
 * The audit webhook's shared batch table as the webhook source sees it (src/sources/webhook.ts, "Shared store"):
 * an interface the store implements (src/store/webhook-batches.ts), and the cursor of a poll that reads it.
 */
import { ErrorCode, TokenwatchError } from '../errors.js';

/** One stored batch's size, as listed by {@link WebhookBatchStore.heads}. */
export interface WebhookBatchHead {
  /** Row id, increasing in insertion order (not in commit order). */
  id: number;
  /** Bytes of its `events` text. */
  bytes: number;
}

/** One stored batch. */
export interface WebhookBatchRow {
  id: number;
  /** Audit event JSON texts, each ending in `\n`. */
  events: string;
}

/** Where accepted webhook batches wait for their cluster's owner to poll them. Every method throws a `StoreError` when the store fails. */
export interface WebhookBatchStore {
  /** Stores one batch of `cluster` (`events`: `count` JSON lines, each ending in `\n`; `receivedAt` epoch ms); durable once it resolves. */
  add(cluster: string, events: string, count: number, receivedAt: number): Promise<void>;
  /** Up to `limit` batches of `cluster` with an id above `afterId`, in id order: id and size only. */
  heads(cluster: string, afterId: number, limit: number): Promise<WebhookBatchHead[]>;
  /** The batches of `cluster` with these ids (those still stored), in id order. */
  read(cluster: string, ids: readonly number[]): Promise<WebhookBatchRow[]>;
  /** Deletes the batches of `cluster` with these ids (absent ones are ignored). */
  remove(cluster: string, ids: readonly number[]): Promise<void>;
}

/** The cursor of a poll of the batch table: the ids of the rows read since the last delete (`{"v":1,"batches":[…]}`). */
export function batchCursor(ids: readonly number[]): string {
  return JSON.stringify({ v: 1, batches: ids });
}

/**
 * The row ids a {@link batchCursor} names. A cursor of another shape (the spool's file cursor, left by a deployment
 * that had no shared store) names none.
 * @throws {TokenwatchError} `CursorInvalid` for a batch cursor whose ids are not integers
 */
export function parseBatchCursor(cursor: string): number[] {
  let v: unknown;
  try {
    v = JSON.parse(cursor);
  } catch {
    return [];
  }
  const ids = (v as { batches?: unknown } | null)?.batches;
  if (ids === undefined) return [];
  if (!Array.isArray(ids) || !ids.every((n) => Number.isSafeInteger(n))) throw new TokenwatchError(ErrorCode.CursorInvalid, `not a webhook batch cursor: ${cursor.slice(0, 100)}`);
  return ids as number[];
}
