/**
 * The Slack message refs repository: where each alert (per finding, and per alert group) was posted, and the intents
 * written before posting so a restart looks a message up instead of posting it twice (docs/slack.md "Alerts").
 */
import type { FindingKind } from '../findings/types.js';
import { isForeignKeyViolation, StoreError } from './errors.js';
import type { SqlExecutor } from './sql.js';
import type { AlertRef, MessageRef } from './rows.js';

type RefRow = { channel: string; ts: string; severity: MessageRef['severity']; hash: string };
type IntentRow = { channel: string; at: number };

/** Message refs (`message_refs`, `alert_refs`) and alert intents (`alert_intents`, `alert_group_intents`) over a {@link SqlExecutor}. */
export class SlackRefRepository {
  constructor(private readonly sql: SqlExecutor) {}

  /** The Slack message of a finding's (per-kind, pre-grouping) alert, if posted. */
  async getMessageRef(findingId: string): Promise<MessageRef | undefined> {
    const row = await this.sql.get<RefRow>('SELECT channel, ts, severity, hash FROM message_refs WHERE finding_id = ?', [findingId]);
    return row === undefined ? undefined : { channel: row.channel, ts: row.ts, severity: row.severity, hash: row.hash };
  }

  /**
   * Saves (replaces) a finding's message ref and clears its intent, in one transaction.
   * @throws {StoreError} when the finding is not stored.
   */
  async saveMessageRef(findingId: string, ref: MessageRef): Promise<void> {
    try {
      await this.sql.transaction(async (tx) => {
        await tx.run(
          `INSERT INTO message_refs (finding_id, channel, ts, severity, hash) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (finding_id) DO UPDATE SET channel = excluded.channel, ts = excluded.ts,
             severity = excluded.severity, hash = excluded.hash`,
          [findingId, ref.channel, ref.ts, ref.severity, ref.hash],
        );
        await tx.run('DELETE FROM alert_intents WHERE finding_id = ?', [findingId]);
      });
    } catch (err) {
      if (isForeignKeyViolation(err)) {
        throw new StoreError(`saveMessageRef: finding ${findingId} is not stored (save the finding first)`, { cause: err });
      }
      throw err;
    }
  }

  /** Deletes a finding's (per-kind, pre-grouping) message ref; no-op when there is none. */
  async deleteMessageRef(findingId: string): Promise<void> {
    await this.sql.run('DELETE FROM message_refs WHERE finding_id = ?', [findingId]);
  }

  /** The message of an alert group (id from `groupIdOf`, src/findings/groups.ts), if posted. */
  async getAlertRef(groupId: string): Promise<AlertRef | undefined> {
    const row = await this.sql.get<AlertRefRow>('SELECT channel, ts, severity, hash, signals FROM alert_refs WHERE group_id = ?', [groupId]);
    return row === undefined ? undefined : alertRefOf(row);
  }

  /**
   * The messages of every posted alert group of `cluster`, by group id: one query (index `alert_refs_by_cluster`)
   * where a poll's notification work would otherwise read each group's ref apart.
   */
  async alertRefsOf(cluster: string): Promise<Map<string, AlertRef>> {
    const rows = await this.sql.all<AlertRefRow & { group_id: string }>('SELECT group_id, channel, ts, severity, hash, signals FROM alert_refs WHERE cluster = ?', [cluster]);
    return new Map(rows.map((r) => [r.group_id, alertRefOf(r)]));
  }

  /**
   * Saves (replaces) an alert group's message ref and clears its intent, in one transaction.
   */
  saveAlertRef(groupId: string, cluster: string, ref: AlertRef): Promise<void> {
    return this.sql.transaction(async (tx) => {
      await tx.run(
        `INSERT INTO alert_refs (group_id, cluster, channel, ts, severity, hash, signals) VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (group_id) DO UPDATE SET cluster = excluded.cluster, channel = excluded.channel, ts = excluded.ts,
           severity = excluded.severity, hash = excluded.hash, signals = excluded.signals`,
        [groupId, cluster, ref.channel, ref.ts, ref.severity, ref.hash, JSON.stringify(ref.signals)],
      );
      await tx.run('DELETE FROM alert_group_intents WHERE group_id = ?', [groupId]);
    });
  }

  /** The pending alert intent of a group (see {@link SlackRefRepository.recordGroupIntent}). */
  async getGroupIntent(groupId: string): Promise<{ channel: string; at: number } | undefined> {
    const row = await this.sql.get<IntentRow>('SELECT channel, at FROM alert_group_intents WHERE group_id = ?', [groupId]);
    return row === undefined ? undefined : { channel: row.channel, at: row.at };
  }

  /**
   * Records that a group's alert is about to be posted (as {@link SlackRefRepository.recordAlertIntent}, per group).
   */
  async recordGroupIntent(groupId: string, channel: string, at: number): Promise<void> {
    await this.sql.run(
      `INSERT INTO alert_group_intents (group_id, channel, at) VALUES (?, ?, ?)
       ON CONFLICT (group_id) DO UPDATE SET channel = excluded.channel, at = excluded.at`,
      [groupId, channel, at],
    );
  }

  /** The pending alert intent of a finding (see {@link SlackRefRepository.recordAlertIntent}). */
  async getAlertIntent(findingId: string): Promise<{ channel: string; at: number } | undefined> {
    const row = await this.sql.get<IntentRow>('SELECT channel, at FROM alert_intents WHERE finding_id = ?', [findingId]);
    return row === undefined ? undefined : { channel: row.channel, at: row.at };
  }

  /**
   * Records that the alert of a finding is about to be posted to `channel` at `at` (epoch ms), before
   * chat.postMessage; {@link SlackRefRepository.saveMessageRef} clears it. An intent without a ref after a restart
   * means the post may have happened: look the message up (by its metadata) before posting again.
   */
  async recordAlertIntent(findingId: string, channel: string, at: number): Promise<void> {
    await this.sql.run(
      `INSERT INTO alert_intents (finding_id, channel, at) VALUES (?, ?, ?)
       ON CONFLICT (finding_id) DO UPDATE SET channel = excluded.channel, at = excluded.at`,
      [findingId, channel, at],
    );
  }
}

/** An `alert_refs` row as read. */
type AlertRefRow = RefRow & { signals: string };

/** An {@link AlertRef} from its row; a `signals` column that is not a JSON list of known kinds reads as none. */
function alertRefOf(row: AlertRefRow): AlertRef {
  let signals: FindingKind[] = [];
  try {
    const parsed = JSON.parse(row.signals) as unknown;
    if (Array.isArray(parsed)) signals = parsed.filter((k): k is FindingKind => k === 'stale-token' || k === 'legacy-token' || k === 'unauthorized' || k === 'cluster-credential');
  } catch {
    signals = [];
  }
  return { channel: row.channel, ts: row.ts, severity: row.severity, hash: row.hash, signals };
}
