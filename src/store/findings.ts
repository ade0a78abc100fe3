/** The findings repository: each cluster's current findings with their lifecycle (open, resolved, snoozed). */
import type { Finding, Severity } from '../findings/types.js';
import { StoreError } from './errors.js';
import type { SqlExecutor } from './sql.js';
import type { FindingChange, FindingResolution, FindingStatus, FindingStatusUpdate, StoredFinding } from './rows.js';

type FindingRow = {
  id: string;
  cluster: string;
  severity: Severity;
  status: FindingStatus;
  snoozed_until: number | null;
  resolved_at: number | null;
  resolution?: string | null;
  created_at: number;
  updated_at: number;
  finding: string;
};

function timeOf(iso: string | null): number | null {
  if (iso === null) return null;
  const t = Date.parse(iso);
  return Number.isFinite(t) ? t : null;
}

/**
 * Whether `next` carries a use of a finding resolved as quiet at `resolvedAt` that the resolution could not know: a use
 * not seen before (the request count rose) whose time lies inside the quiet-resolved period — after the last use the
 * stored finding had (the silence began there) and at or before `resolvedAt` (later uses reopen anyway).
 */
function isLateUse(old: Pick<FindingRow, 'finding'>, next: Finding, resolvedAt: number): boolean {
  let before: Pick<Finding, 'requests' | 'lastSeen'>;
  try {
    before = JSON.parse(old.finding) as Finding;
  } catch {
    return false;
  }
  const prevLast = timeOf(before.lastSeen);
  const nextLast = timeOf(next.lastSeen);
  if (prevLast === null || nextLast === null || typeof before.requests !== 'number') return false;
  return next.requests > before.requests && nextLast > prevLast && nextLast <= resolvedAt;
}

function findingOf(row: FindingRow): StoredFinding {
  return {
    id: row.id,
    cluster: row.cluster,
    finding: JSON.parse(row.finding) as Finding,
    severity: row.severity,
    status: row.status,
    snoozedUntil: row.snoozed_until,
    resolvedAt: row.resolved_at,
    resolution: row.status === 'resolved' && (row.resolution === 'verified' || row.resolution === 'quiet') ? row.resolution : null,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

const INSERT = `INSERT INTO findings (id, cluster, namespace, service_account, kind, severity, status, last_seen, rejection_at,
                           created_at, updated_at, finding)
     VALUES (?, ?, ?, ?, ?, ?, 'open', ?, ?, ?, ?, ?)`;
const UPDATE = `UPDATE findings SET severity = ?, status = ?, snoozed_until = ?, resolved_at = ?, resolution = ?, last_seen = ?,
       rejection_at = ?, updated_at = ?, finding = ?
     WHERE id = ?`;

/** Most ids one read of {@link readRows} names (SQLite allows 32,766 parameters, PostgreSQL 65,535). */
const READ_CHUNK = 512;

/**
 * The stored rows of `ids`, by id, in reads of at most {@link READ_CHUNK} ids each. A chunk's `IN` list is padded to a
 * power of two by repeating its last id, so that few distinct statement texts are prepared (and cached).
 */
async function readRows(tx: SqlExecutor, ids: readonly string[]): Promise<Map<string, FindingRow>> {
  const rows = new Map<string, FindingRow>();
  for (let from = 0; from < ids.length; from += READ_CHUNK) {
    const chunk = ids.slice(from, from + READ_CHUNK);
    let size = 1;
    while (size < chunk.length) size *= 2;
    const params = [...chunk, ...Array.from({ length: size - chunk.length }, () => chunk[chunk.length - 1]!)];
    for (const row of await tx.all<FindingRow>(`SELECT * FROM findings WHERE id IN (${params.map(() => '?').join(', ')})`, params)) rows.set(row.id, row);
  }
  return rows;
}

/** Findings (`findings`) over a {@link SqlExecutor}; times are epoch ms UTC. */
export class FindingRepository {
  constructor(private readonly sql: SqlExecutor) {}

  /**
   * Saves the current findings of `cluster` (insert or update) as of `now`; a finding identical to the stored one
   * (same JSON, same status) is not written. New findings are `open`.
   * A `resolved` finding whose `lastSeen` is after its `resolvedAt` is reopened (a recurrence); one resolved as
   * `quiet` is also reopened by a late use (see {@link FindingChange.lateUse}); a `snoozed`
   * finding whose `snoozedUntil` ≤ `now` is reopened. Findings of the cluster not in `findings` are left as
   * they are. One transaction.
   * @throws {StoreError} when a finding belongs to another cluster.
   */
  async save(cluster: string, findings: readonly Finding[], now: number): Promise<FindingChange[]> {
    const foreign = findings.find((f) => f.cluster !== cluster);
    if (foreign !== undefined) {
      throw new StoreError(`saveFindings(${cluster}): finding ${foreign.id} belongs to cluster ${foreign.cluster}`);
    }
    return this.sql.transaction(async (tx) => {
      // Few requests, not one or two per finding: the stored rows in one read (per READ_CHUNK ids), the writes in one
      // runMany each (src/store/sql.ts). `rows` holds what is stored as the loop goes (an id given twice sees its
      // first write, as one statement after the other would).
      const rows = await readRows(tx, [...new Set(findings.map((f) => f.id))]);
      const inserts: unknown[][] = [];
      const updates: unknown[][] = [];
      const changes: FindingChange[] = [];
      for (const f of findings) {
        const lastSeen = timeOf(f.lastSeen) ?? now;
        const rejectionAt = timeOf(f.rejectionAt);
        const json = JSON.stringify(f);
        const old = rows.get(f.id);
        if (old === undefined) {
          inserts.push([f.id, cluster, f.namespace, f.serviceAccount, f.kind, f.severity, lastSeen, rejectionAt, now, now, json]);
          rows.set(f.id, { id: f.id, cluster, severity: f.severity, status: 'open', snoozed_until: null, resolved_at: null, resolution: null, created_at: now, updated_at: now, finding: json });
          changes.push({ id: f.id, isNew: true, severity: f.severity, previousSeverity: null, status: 'open', previousStatus: null });
          continue;
        }
        if (old.cluster !== cluster) {
          throw new StoreError(`saveFindings(${cluster}): finding id ${f.id} is stored for cluster ${old.cluster}`);
        }
        let status = old.status;
        let snoozedUntil = old.snoozed_until;
        let resolvedAt = old.resolved_at;
        let resolution = old.resolution ?? null;
        let lateUse: FindingChange['lateUse'];
        if (status === 'resolved' && resolvedAt !== null && lastSeen > resolvedAt) {
          status = 'open';
          resolvedAt = null;
          resolution = null;
        } else if (status === 'resolved' && resolvedAt !== null && resolution === 'quiet' && isLateUse(old, f, resolvedAt)) {
          // The quiet period the resolution relied on was not quiet: a use inside it arrived after the resolution.
          lateUse = { resolvedAt };
          status = 'open';
          resolvedAt = null;
          resolution = null;
        } else if (status === 'snoozed' && snoozedUntil !== null && snoozedUntil <= now) {
          status = 'open';
          snoozedUntil = null;
        }
        // Write only what changed: an idle poll re-saves every finding unchanged.
        const unchanged = old.finding === json && status === old.status && snoozedUntil === old.snoozed_until && resolvedAt === old.resolved_at;
        if (!unchanged) {
          updates.push([f.severity, status, snoozedUntil, resolvedAt, resolution, lastSeen, rejectionAt, now, json, f.id]);
          rows.set(f.id, { ...old, severity: f.severity, status, snoozed_until: snoozedUntil, resolved_at: resolvedAt, resolution, updated_at: now, finding: json });
        }
        changes.push({
          id: f.id,
          isNew: false,
          severity: f.severity,
          previousSeverity: old.severity,
          status,
          previousStatus: old.status,
          ...(lateUse ? { lateUse } : {}),
        });
      }
      // Inserts first: an id given twice is inserted by its first occurrence and updated by a later one.
      await tx.runMany(INSERT, inserts);
      await tx.runMany(UPDATE, updates);
      return changes;
    });
  }

  /**
   * Findings (of one cluster, or all), by severity (critical first), then `rejectionAt` (soonest first, none last), then id.
   */
  async list(cluster?: string, opts: { status?: FindingStatus[] } = {}): Promise<StoredFinding[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (cluster !== undefined) {
      where.push('cluster = ?');
      params.push(cluster);
    }
    if (opts.status !== undefined) {
      where.push(`status IN (${opts.status.map(() => '?').join(', ') || 'NULL'})`);
      params.push(...opts.status);
    }
    const sql =
      `SELECT * FROM findings ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ` +
      `ORDER BY CASE severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, ` +
      'rejection_at IS NULL, rejection_at, id';
    return (await this.sql.all<FindingRow>(sql, params)).map(findingOf);
  }

  /** The finding `id`, if stored. */
  async get(id: string): Promise<StoredFinding | undefined> {
    const row = await this.sql.get<FindingRow>('SELECT * FROM findings WHERE id = ?', [id]);
    return row === undefined ? undefined : findingOf(row);
  }

  /** Sets a finding's status at `at`; false when there is no such finding. */
  async setStatus(id: string, update: FindingStatusUpdate, at: number): Promise<boolean> {
    const snoozedUntil = update.status === 'snoozed' ? update.until : null;
    const resolvedAt = update.status === 'resolved' ? at : null;
    const resolution: FindingResolution | null = update.status === 'resolved' ? (update.reason ?? null) : null;
    const { changes } = await this.sql.run('UPDATE findings SET status = ?, snoozed_until = ?, resolved_at = ?, resolution = ?, updated_at = ? WHERE id = ?', [
      update.status,
      snoozedUntil,
      resolvedAt,
      resolution,
      at,
      id,
    ]);
    return changes === 1;
  }
}
