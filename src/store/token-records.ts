/** The token-records repository: the aggregator's records per cluster, written only where they changed. */
import { isDeepStrictEqual } from 'node:util';
import type { TokenRecord } from '../findings/types.js';
import { StoreError } from './errors.js';
import type { SqlExecutor } from './sql.js';

/** Separator of the parts of a composite key (ASCII unit separator, in no name or id). */
export const SEP = '\u001f';

/**
 * The store key of a token record within (cluster, kind, subject), after docs/design/architecture.md "Terms" (token):
 * - stale: pod uid (else pod name) and `warnAfter` in whole minutes (floor);
 * - legacy: the Secret's namespace/name;
 * - unauthorized: the sorted source IPs, first user agent and pod.
 */
export function tokenRecordKey(r: TokenRecord): string {
  switch (r.kind) {
    case 'stale-token':
      return [r.podUid ?? r.pod ?? '', r.warnAfter === undefined ? '' : String(Math.floor(r.warnAfter / 60_000))].join(SEP);
    case 'legacy-token':
      return [r.legacySecret?.namespace ?? r.namespace, r.legacySecret?.name ?? ''].join(SEP);
    case 'unauthorized':
      // The overflow record (401s folded beyond the aggregator's bound) only samples source IPs: its own key.
      if (r.overflow) return ['(overflow)', '', ''].join(SEP);
      return [[...r.sourceIPs].sort().join(','), r.userAgents[0] ?? '', r.pod ?? ''].join(SEP);
  }
}

const UPSERT = `INSERT INTO token_records (cluster, kind, subject, token_key, namespace, service_account, last_seen, record)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (cluster, kind, subject, token_key) DO UPDATE SET
       namespace = excluded.namespace, service_account = excluded.service_account,
       last_seen = excluded.last_seen, record = excluded.record`;

/** Token records (`token_records`) over a {@link SqlExecutor}. */
export class TokenRecordRepository {
  constructor(private readonly sql: SqlExecutor) {}

  /**
   * Inserts or replaces records by {@link tokenRecordKey} (cluster, kind, subject, and pod + warnAfter minute,
   * legacy Secret, or 401 source). Note: the aggregator may re-key a record when it merges (an earlier
   * `warnAfter`, a new 401 attribution); for its full output use {@link TokenRecordRepository.replace}. One transaction.
   */
  upsert(records: readonly TokenRecord[]): Promise<void> {
    return this.sql.transaction(async (tx) => {
      // One request for all the records (src/store/sql.ts runMany).
      await tx.runMany(
        UPSERT,
        records.map((r) => [r.cluster, r.kind, r.subject, tokenRecordKey(r), r.namespace, r.serviceAccount, r.lastSeen, JSON.stringify(r)]),
      );
    });
  }

  /**
   * Makes the records of `cluster` equal to `records` (one transaction), writing only what changed: records whose
   * key is gone are deleted, new or changed ones upserted, identical ones not touched (an idle poll writes nothing).
   * Records of another cluster throw. @returns rows written (upserted + deleted).
   * @param previous the cluster's records as {@link TokenRecordRepository.list} returned them earlier in the same
   *   transaction (unmodified): compared in memory instead of reading every row again. Omit it when unsure.
   * @throws {StoreError} for a record of another cluster.
   */
  async replace(cluster: string, records: readonly TokenRecord[], previous?: readonly TokenRecord[]): Promise<{ upserted: number; deleted: number }> {
    const foreign = records.find((r) => r.cluster !== cluster);
    if (foreign !== undefined) {
      throw new StoreError(`replaceTokenRecords(${cluster}): a record belongs to cluster ${foreign.cluster}`);
    }
    return this.sql.transaction(async (tx) => {
      // Diff against what is stored: an idle poll (nothing new) rewrites no row. Keys may move (the aggregator re-keys
      // a record on an earlier warnAfter or a new 401 attribution): the old key is deleted, the new one inserted.
      type Row = { kind: string; subject: string; token_key: string; record?: string; parsed?: TokenRecord };
      const stored = new Map<string, Row>();
      if (previous !== undefined) {
        for (const r of previous) stored.set([r.kind, r.subject, tokenRecordKey(r)].join(SEP), { kind: r.kind, subject: r.subject, token_key: tokenRecordKey(r), parsed: r });
      } else {
        const rows = await tx.all<Row>('SELECT kind, subject, token_key, record FROM token_records WHERE cluster = ?', [cluster]);
        for (const row of rows) stored.set([row.kind, row.subject, row.token_key].join(SEP), row);
      }
      const changed: TokenRecord[] = [];
      for (const r of records) {
        const id = [r.kind, r.subject, tokenRecordKey(r)].join(SEP);
        const old = stored.get(id);
        // Structural comparison first (cheap); the JSON text decides when they differ only by undefined-valued keys.
        const same =
          old !== undefined &&
          (old.parsed !== undefined ? isDeepStrictEqual(old.parsed, r) || JSON.stringify(old.parsed) === JSON.stringify(r) : old.record === JSON.stringify(r));
        if (!same) changed.push(r);
        stored.delete(id);
      }
      await tx.runMany(
        'DELETE FROM token_records WHERE cluster = ? AND kind = ? AND subject = ? AND token_key = ?',
        [...stored.values()].map((row) => [cluster, row.kind, row.subject, row.token_key]),
      );
      await new TokenRecordRepository(tx).upsert(changed);
      return { upserted: changed.length, deleted: stored.size };
    });
  }

  /** All records of `cluster`, ordered by kind, subject, key. */
  async list(cluster: string): Promise<TokenRecord[]> {
    const rows = await this.sql.all<{ record: string }>('SELECT record FROM token_records WHERE cluster = ? ORDER BY kind, subject, token_key', [cluster]);
    return rows.map((row) => JSON.parse(row.record) as TokenRecord);
  }

  /** Deletes records of `cluster` whose `lastSeen` is before `lastSeenBefore`; returns how many. */
  async prune(cluster: string, lastSeenBefore: number): Promise<number> {
    return (await this.sql.run('DELETE FROM token_records WHERE cluster = ? AND last_seen < ?', [cluster, lastSeenBefore])).changes;
  }

  /** Number of stored token records of `cluster`. */
  async count(cluster: string): Promise<number> {
    return Number((await this.sql.get<{ n: number }>('SELECT count(*) AS n FROM token_records WHERE cluster = ?', [cluster]))?.n ?? 0);
  }
}
