/** The action-log repository: who did what to which target, when, with what result (append-only but for retention). */
import type { SqlExecutor } from './sql.js';
import type { ActionLogEntry, NewActionLogEntry } from './rows.js';

type ActionRow = {
  id: number;
  at: number;
  cluster: string;
  finding_id: string | null;
  approval_id: string | null;
  actor: string | null;
  action: string;
  target: string;
  result: string;
  detail: string | null;
};

function actionOf(r: ActionRow): ActionLogEntry {
  return {
    id: r.id,
    at: r.at,
    cluster: r.cluster,
    findingId: r.finding_id,
    approvalId: r.approval_id,
    actor: r.actor,
    action: r.action,
    target: r.target,
    result: r.result,
    detail: r.detail,
  };
}

/** The action log (`action_log`) over a {@link SqlExecutor}; times are epoch ms UTC. */
export class ActionLogRepository {
  constructor(private readonly sql: SqlExecutor) {}

  /**
   * Appends an action-log row; returns its id.
   */
  async log(e: NewActionLogEntry): Promise<number> {
    const row = await this.sql.get<{ id: number }>(
      `INSERT INTO action_log (at, cluster, finding_id, approval_id, actor, action, target, result, detail)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
      [e.at, e.cluster, e.findingId ?? null, e.approvalId ?? null, e.actor, e.action, e.target, e.result, e.detail ?? null],
    );
    return Number(row!.id);
  }

  /** The latest `limit` rows of `cluster`, newest first. */
  async list(cluster: string, limit = 20): Promise<ActionLogEntry[]> {
    return (await this.sql.all<ActionRow>('SELECT * FROM action_log WHERE cluster = ? ORDER BY at DESC, id DESC LIMIT ?', [cluster, limit])).map(actionOf);
  }

  /** All rows of one approval, oldest first. */
  async ofApproval(approvalId: string): Promise<ActionLogEntry[]> {
    return (await this.sql.all<ActionRow>('SELECT * FROM action_log WHERE approval_id = ? ORDER BY at, id', [approvalId])).map(actionOf);
  }

  /**
   * Deletes action-log rows older than `olderThan` (retention; the log is otherwise append-only). Rows of approvals
   * still open (requested, approved, running) are kept. Returns how many were deleted.
   */
  async prune(olderThan: number): Promise<number> {
    const { changes } = await this.sql.run(
      `DELETE FROM action_log WHERE at < ? AND (approval_id IS NULL OR approval_id NOT IN
         (SELECT id FROM approvals WHERE state IN ('requested', 'approved', 'running')))`,
      [olderThan],
    );
    return changes;
  }
}
