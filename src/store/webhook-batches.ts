/**
 * The `webhook_batches` table (migration "webhook batches"): audit webhook batches any replica accepted, waiting for
 * their cluster's owner to poll them (src/sources/webhook.ts "Shared store"). Portable SQL (both backends).
 */
import type { WebhookBatchHead, WebhookBatchRow, WebhookBatchStore } from '../sources/webhook-batches.js';
import type { SqlExecutor } from './sql.js';

const marks = (n: number): string => Array.from({ length: n }, () => '?').join(', ');
/** Most ids one statement names. */
const IDS_PER_STATEMENT = 500;

/** {@link WebhookBatchStore} on the store's SQL executor. Errors are the executor's `StoreError`s. */
export class WebhookBatches implements WebhookBatchStore {
  constructor(private readonly sql: SqlExecutor) {}

  async add(cluster: string, events: string, count: number, receivedAt: number): Promise<void> {
    await this.sql.run('INSERT INTO webhook_batches (cluster, received_at, event_count, bytes, events) VALUES (?, ?, ?, ?, ?)', [cluster, receivedAt, count, Buffer.byteLength(events), events]);
  }

  heads(cluster: string, afterId: number, limit: number): Promise<WebhookBatchHead[]> {
    return this.sql.all<WebhookBatchHead & Record<string, unknown>>('SELECT id, bytes FROM webhook_batches WHERE cluster = ? AND id > ? ORDER BY id LIMIT ?', [cluster, afterId, limit]);
  }

  async read(cluster: string, ids: readonly number[]): Promise<WebhookBatchRow[]> {
    const out: WebhookBatchRow[] = [];
    for (let i = 0; i < ids.length; i += IDS_PER_STATEMENT) {
      const part = ids.slice(i, i + IDS_PER_STATEMENT);
      out.push(...(await this.sql.all<WebhookBatchRow & Record<string, unknown>>(`SELECT id, events FROM webhook_batches WHERE cluster = ? AND id IN (${marks(part.length)}) ORDER BY id`, [cluster, ...part])));
    }
    return out;
  }

  async remove(cluster: string, ids: readonly number[]): Promise<void> {
    for (let i = 0; i < ids.length; i += IDS_PER_STATEMENT) {
      const part = ids.slice(i, i + IDS_PER_STATEMENT);
      await this.sql.run(`DELETE FROM webhook_batches WHERE cluster = ? AND id IN (${marks(part.length)})`, [cluster, ...part]);
    }
  }
}
