/**
 * The SQLite store of `tokenwatch serve` (better-sqlite3 13): one file, WAL mode, foreign keys on, a busy
 * timeout for concurrent connections, and versioned migrations (`src/store/migrations.ts`).
 *
 * Durability: `synchronous = FULL`, so a committed poll survives a crash or power loss; with WAL that costs
 * one fsync per transaction (a poll is one transaction).
 * Concurrency: every write transaction is `BEGIN IMMEDIATE` (takes the write lock up front, so two
 * connections never deadlock upgrading a read lock; the loser waits up to `busyTimeoutMs`).
 * Sources: SQLite docs `wal.html`, `pragma.html#pragma_synchronous`, `lang_transaction.html`;
 * better-sqlite3 `docs/api.md` (`Database#transaction`, `.immediate`).
 */
import { ErrorCode, TokenwatchError } from '../errors.js';
import type { TokenCounters, TokenMetricsSample } from '../findings/token-metrics.js';
import { mkdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import Database from 'better-sqlite3';
import type { ApprovalState, DryRunResult, Vote } from '../approvals/machine.js';
import { actionNoun, describeTarget, objectLabel } from '../core/actions.js';
import type { Finding, FindingKind, Severity, TokenRecord } from '../findings/types.js';
import { MIGRATIONS } from './migrations.js';
import type {
  ActionLogEntry,
  ActionSubject,
  ApprovalFilter,
  ClaimResult,
  ExecutionRecord,
  ApprovalUpdate,
  FindingChange,
  FindingResolution,
  FindingStatus,
  FindingStatusUpdate,
  MessageRef,
  AlertRef,
  NewActionLogEntry,
  NewApproval,
  PollCoverage,
  PollRunResult,
  PollStatus,
  PollerLockClaim,
  PollerLockHolder,
  PollerLockRow,
  Store,
  StoredApproval,
  StoredFinding,
} from './types.js';

/** Options of {@link openStore}. */
export interface StoreOptions {
  /** How long a statement waits for another connection's write lock before failing with SQLITE_BUSY, ms. Default 5000. */
  busyTimeoutMs?: number;
  /** Migration steps to apply (default: all of {@link MIGRATIONS}); tests use a prefix to build old databases. */
  migrations?: readonly string[];
}

/** Error of the store with a clear message: unusable file, unknown schema version, broken reference. */
export class StoreError extends TokenwatchError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCode.StoreFailed, message, options);
    this.name = 'StoreError';
  }
}

/** A new opaque approval id: 16 random bytes, base64url (22 characters). */
export function newApprovalId(): string {
  return randomBytes(16).toString('base64url');
}

const SEP = '\u001f';

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

// Row shapes as better-sqlite3 returns them.
interface FindingRow {
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
}
interface PollRow {
  id: number;
  cluster: string;
  source: string;
  started_at: number;
  ended_at: number | null;
  events: number;
  token_uses: number;
  error: string | null;
  stats: string;
  last_success_at?: number | null;
}
interface ApprovalRow {
  id: string;
  action: StoredApproval['action'];
  target: string;
  requester: string;
  state: ApprovalState;
  required_approvals: number;
  created_at: number;
  expires_at: number;
  updated_at: number;
  dry_run: string | null;
  error: string | null;
  message_channel: string | null;
  message_ts: string | null;
  target_key?: string | null;
  subject_key?: string | null;
  started_at?: number | null;
  execution?: string | null;
  progress_channel?: string | null;
  progress_ts?: string | null;
}
interface VoteRow {
  user: string;
  vote: Vote['vote'];
  at: number;
  reason: string | null;
}
interface ActionRow {
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
}

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

function isConstraint(err: unknown, code: string): boolean {
  return err instanceof Database.SqliteError && err.code === code;
}

/**
 * Opens (creating if needed) the store at `path` and migrates it to the current schema.
 * The file's directory is created. `:memory:` gives a private in-memory store (tests).
 * @throws {StoreError} when the file is not a SQLite database, fails SQLite's integrity check (`PRAGMA quick_check`),
 *   or its schema version is newer than this build knows
 */
export function openStore(path: string, opts: StoreOptions = {}): Store {
  const memory = path === ':memory:';
  if (!memory) {
    if (statSync(path, { throwIfNoEntry: false })?.isDirectory()) {
      throw new StoreError(`cannot open store ${path}: it is a directory; point store.path at the database file inside it (e.g. ${join(path, 'tokenwatch.db')})`);
    }
    try {
      mkdirSync(dirname(path), { recursive: true });
    } catch (err) {
      throw new StoreError(`cannot open store ${path}: cannot create its directory ${dirname(path)} (${(err as Error).message})${accessHint()}`, { cause: err });
    }
  }
  let db: Database.Database;
  try {
    db = new Database(path, { timeout: opts.busyTimeoutMs ?? 5000 });
  } catch (err) {
    throw new StoreError(`cannot open store ${path}: ${explainSqliteError(err)}${accessHint()}`, { cause: err });
  }
  try {
    if (!memory) db.pragma('journal_mode = WAL');
    db.pragma('foreign_keys = ON');
    db.pragma('synchronous = FULL');
    if (!memory) checkIntegrity(db, path);
    const version = migrate(db, path, opts.migrations ?? MIGRATIONS);
    return new SqliteStore(db, path, version);
  } catch (err) {
    db.close();
    if (err instanceof StoreError) throw err;
    if (err instanceof Database.SqliteError && (err.code === 'SQLITE_NOTADB' || err.code === 'SQLITE_CORRUPT')) {
      throw new StoreError(`cannot open store ${path}: not a tokenwatch SQLite database (${err.message})`, { cause: err });
    }
    if (err instanceof Database.SqliteError) {
      throw new StoreError(`cannot open store ${path}: ${explainSqliteError(err)}${accessHint()}`, { cause: err });
    }
    throw err;
  }
}

/** Why SQLite could not open or write the store, in words (the SQLite message and code kept in parentheses). */
function explainSqliteError(err: unknown): string {
  const e = err as { code?: string; message?: string };
  const raw = `${e.message ?? String(err)}${e.code ? `, ${e.code}` : ''}`;
  if (e.code?.startsWith('SQLITE_READONLY')) {
    return `the file or its directory is read-only (${raw}); tokenwatch writes the file and its -wal and -shm files next to it, so both must be writable and the volume not mounted read-only`;
  }
  if (e.code?.startsWith('SQLITE_CANTOPEN')) return `SQLite cannot open or create the file (${raw}); check that the directory exists and is writable`;
  if (e.code === 'SQLITE_FULL') return `the disk is full (${raw})`;
  if (e.code === 'SQLITE_BUSY') return `the file is locked by another process (${raw})`;
  if (e.code === 'SQLITE_PERM' || e.code === 'SQLITE_AUTH') return `permission denied (${raw})`;
  if (e.code?.startsWith('SQLITE_IOERR')) return `an I/O error (${raw})`;
  return raw;
}

/** ` (running as uid N, gid M)` on POSIX: who needs the permissions. */
function accessHint(): string {
  return typeof process.getuid === 'function' ? ` (tokenwatch runs as uid ${process.getuid()}, gid ${process.getgid?.() ?? '?'})` : '';
}

/** How many of `PRAGMA quick_check`'s problem lines a refusal quotes. */
const INTEGRITY_LINES_SHOWN = 3;

/**
 * Refuses a damaged store before anything reads or writes it: `PRAGMA quick_check` (every page and index entry
 * is well formed; O(N) in the file's size, no index-content comparison; https://sqlite.org/pragma.html#pragma_quick_check).
 * Without it, a torn file (e.g. pages zeroed by a failed disk or a copy taken mid-write) opens, reports ready, and
 * fails every poll.
 * @throws {StoreError} naming the file and quoting the first problems SQLite reports
 */
function checkIntegrity(db: Database.Database, path: string): void {
  let problems: string[];
  try {
    const rows = db.pragma(`quick_check(${INTEGRITY_LINES_SHOWN})`) as Record<string, unknown>[];
    problems = rows.map((row) => String(Object.values(row)[0])).filter((line) => line !== 'ok');
  } catch (err) {
    if (!(err instanceof Database.SqliteError) || (err.code !== 'SQLITE_CORRUPT' && err.code !== 'SQLITE_NOTADB')) throw err;
    problems = [err.message];
  }
  if (problems.length === 0) return;
  throw new StoreError(
    `store ${path} is damaged: SQLite's integrity check (PRAGMA quick_check) failed: ${problems.join('; ')}. ` +
      'tokenwatch will not start on it: restore the file from a backup, or move it aside to start with an empty store',
  );
}

/** Applies the missing steps, each in its own immediate transaction with the version bump; returns the version. */
function migrate(db: Database.Database, path: string, steps: readonly string[]): number {
  const known = steps.length;
  const current = (): number => db.pragma('user_version', { simple: true }) as number;
  const found = current();
  if (found > known) {
    throw new StoreError(
      `store ${path} has schema version ${found}, newer than this tokenwatch supports (${known}); ` +
        'upgrade tokenwatch or point store.path at another file',
    );
  }
  for (let v = found; v < known; v++) {
    db.transaction(() => {
      // Another process may have migrated meanwhile: re-check under the write lock.
      if (current() !== v) return;
      db.exec(steps[v]!);
      db.pragma(`user_version = ${v + 1}`);
    }).immediate();
  }
  return current();
}

/** The store's SQL, prepared lazily (a statement on a table of a later migration fails only when used). */
const SQL = {
  getPollerLock: 'SELECT holder, host, pid, acquired_at, heartbeat_at FROM poller_lock WHERE id = 1',
  setPollerLock: `INSERT INTO poller_lock (id, holder, host, pid, acquired_at, heartbeat_at) VALUES (1, @id, @host, @pid, @now, @now)
     ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, host = excluded.host, pid = excluded.pid,
       acquired_at = CASE WHEN poller_lock.holder = excluded.holder THEN poller_lock.acquired_at ELSE excluded.acquired_at END,
       heartbeat_at = excluded.heartbeat_at`,
  heartbeatPollerLock: 'UPDATE poller_lock SET heartbeat_at = ? WHERE id = 1 AND holder = ?',
  releasePollerLock: 'DELETE FROM poller_lock WHERE id = 1 AND holder = ?',
  getCursor: 'SELECT cursor FROM cursors WHERE source_id = ?',
  pruneSlackSeen: 'DELETE FROM slack_seen_requests WHERE expires_at <= ?',
  insertSlackSeen: 'INSERT OR IGNORE INTO slack_seen_requests (key, seen_at, expires_at) VALUES (?, ?, ?)',
  setCursor: 'INSERT INTO cursors (source_id, cursor) VALUES (?, ?) ON CONFLICT (source_id) DO UPDATE SET cursor = excluded.cursor',
  markSeen: 'INSERT OR IGNORE INTO seen (cluster, audit_id, seen_at) VALUES (?, ?, ?)',
  pruneSeen: 'DELETE FROM seen WHERE cluster = ? AND seen_at < ?',
  countSeen: 'SELECT count(*) AS n FROM seen WHERE cluster = ?',
  upsertRecord: `INSERT INTO token_records (cluster, kind, subject, token_key, namespace, service_account, last_seen, record)
     VALUES (@cluster, @kind, @subject, @key, @namespace, @serviceAccount, @lastSeen, @record)
     ON CONFLICT (cluster, kind, subject, token_key) DO UPDATE SET
       namespace = excluded.namespace, service_account = excluded.service_account,
       last_seen = excluded.last_seen, record = excluded.record`,
  deleteRecord: 'DELETE FROM token_records WHERE cluster = ? AND kind = ? AND subject = ? AND token_key = ?',
  recordKeys: 'SELECT kind, subject, token_key, record FROM token_records WHERE cluster = ?',
  countRecords: 'SELECT count(*) AS n FROM token_records WHERE cluster = ?',
  listRecords: 'SELECT record FROM token_records WHERE cluster = ? ORDER BY kind, subject, token_key',
  pruneRecords: 'DELETE FROM token_records WHERE cluster = ? AND last_seen < ?',
  getFinding: 'SELECT * FROM findings WHERE id = ?',
  insertFinding: `INSERT INTO findings (id, cluster, namespace, service_account, kind, severity, status, last_seen, rejection_at,
                           created_at, updated_at, finding)
     VALUES (@id, @cluster, @namespace, @serviceAccount, @kind, @severity, 'open', @lastSeen, @rejectionAt,
             @now, @now, @finding)`,
  updateFinding: `UPDATE findings SET severity = @severity, status = @status, snoozed_until = @snoozedUntil,
       resolved_at = @resolvedAt, resolution = @resolution, last_seen = @lastSeen, rejection_at = @rejectionAt, updated_at = @now,
       finding = @finding
     WHERE id = @id`,
  setStatus: 'UPDATE findings SET status = ?, snoozed_until = ?, resolved_at = ?, resolution = ?, updated_at = ? WHERE id = ?',
  startPoll: 'INSERT INTO poll_runs (cluster, source, started_at) VALUES (?, ?, ?)',
  finishPoll: 'UPDATE poll_runs SET ended_at = ?, events = ?, token_uses = ?, error = ?, stats = ? WHERE id = ?',
  lastPolls: `SELECT p.*, (SELECT max(s.ended_at) FROM poll_runs s
                  WHERE s.cluster = p.cluster AND s.ended_at IS NOT NULL AND s.error IS NULL) AS last_success_at
     FROM poll_runs p
     WHERE p.id = (SELECT max(q.id) FROM poll_runs q WHERE q.cluster = p.cluster)
     ORDER BY p.cluster`,
  prunePolls: 'DELETE FROM poll_runs WHERE started_at < ? AND id NOT IN (SELECT max(id) FROM poll_runs GROUP BY cluster)',
  pollCoverage: `SELECT
       (SELECT count(*) FROM poll_runs WHERE cluster = @cluster AND started_at >= @from AND ended_at IS NOT NULL AND error IS NOT NULL) AS failed,
       (SELECT count(*) FROM poll_runs WHERE cluster = @cluster AND started_at >= @from AND ended_at IS NOT NULL AND error IS NULL) AS succeeded,
       (SELECT max(started_at) FROM poll_runs WHERE cluster = @cluster AND started_at <= @from AND ended_at IS NOT NULL AND error IS NULL) AS last_before`,
  pruneActions: `DELETE FROM action_log WHERE at < ? AND (approval_id IS NULL OR approval_id NOT IN
       (SELECT id FROM approvals WHERE state IN ('requested', 'approved', 'running')))`,
  getRef: 'SELECT channel, ts, severity, hash FROM message_refs WHERE finding_id = ?',
  saveRef: `INSERT INTO message_refs (finding_id, channel, ts, severity, hash) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (finding_id) DO UPDATE SET channel = excluded.channel, ts = excluded.ts,
       severity = excluded.severity, hash = excluded.hash`,
  deleteRef: 'DELETE FROM message_refs WHERE finding_id = ?',
  getAlertRef: 'SELECT channel, ts, severity, hash, signals FROM alert_refs WHERE group_id = ?',
  saveAlertRef: `INSERT INTO alert_refs (group_id, cluster, channel, ts, severity, hash, signals) VALUES (?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (group_id) DO UPDATE SET cluster = excluded.cluster, channel = excluded.channel, ts = excluded.ts,
       severity = excluded.severity, hash = excluded.hash, signals = excluded.signals`,
  getGroupIntent: 'SELECT channel, at FROM alert_group_intents WHERE group_id = ?',
  saveGroupIntent: `INSERT INTO alert_group_intents (group_id, channel, at) VALUES (?, ?, ?)
     ON CONFLICT (group_id) DO UPDATE SET channel = excluded.channel, at = excluded.at`,
  deleteGroupIntent: 'DELETE FROM alert_group_intents WHERE group_id = ?',
  getIntent: 'SELECT channel, at FROM alert_intents WHERE finding_id = ?',
  saveIntent: `INSERT INTO alert_intents (finding_id, channel, at) VALUES (?, ?, ?)
     ON CONFLICT (finding_id) DO UPDATE SET channel = excluded.channel, at = excluded.at`,
  deleteIntent: 'DELETE FROM alert_intents WHERE finding_id = ?',
  insertApproval: `INSERT INTO approvals (id, cluster, finding_id, action, target, requester, state, required_approvals,
                            created_at, expires_at, updated_at, dry_run, error, message_channel, message_ts,
                            target_key, subject_key)
     VALUES (@id, @cluster, @findingId, @action, @target, @requester, @state, @requiredApprovals,
             @createdAt, @expiresAt, @updatedAt, @dryRun, @error, @messageChannel, @messageTs, @targetKey, @subjectKey)`,
  subjectOfFinding: 'SELECT namespace, service_account FROM findings WHERE id = ?',
  openFor: `SELECT * FROM approvals
     WHERE state IN ('requested', 'approved', 'running') AND NOT (state = 'requested' AND expires_at <= @now)
       AND (target_key = @targetKey OR (subject_key = @subjectKey AND action <> @action))
     ORDER BY created_at, id LIMIT 1`,
  staleFor: `SELECT * FROM approvals WHERE state = 'requested' AND expires_at <= @now
       AND (target_key = @targetKey OR subject_key = @subjectKey) ORDER BY created_at, id`,
  expireStale: "UPDATE approvals SET state = 'expired', updated_at = ? WHERE id = ? AND state = 'requested'",
  getApproval: 'SELECT * FROM approvals WHERE id = ?',
  votesOf: 'SELECT user, vote, at, reason FROM votes WHERE approval_id = ? ORDER BY seq',
  insertVote: `INSERT INTO votes (approval_id, user, vote, at, reason, seq)
     VALUES (?, ?, ?, ?, ?, (SELECT coalesce(max(seq), 0) + 1 FROM votes WHERE approval_id = ?))`,
  casApproval: `UPDATE approvals SET state = @to, updated_at = @at,
       error = CASE WHEN @setError THEN @error ELSE error END,
       dry_run = CASE WHEN @setDryRun THEN @dryRun ELSE dry_run END,
       message_channel = CASE WHEN @setMessage THEN @messageChannel ELSE message_channel END,
       message_ts = CASE WHEN @setMessage THEN @messageTs ELSE message_ts END,
       started_at = CASE WHEN @setStartedAt THEN @startedAt ELSE started_at END,
       execution = CASE WHEN @setExecution THEN @execution ELSE execution END,
       progress_channel = CASE WHEN @setProgress THEN @progressChannel ELSE progress_channel END,
       progress_ts = CASE WHEN @setProgress THEN @progressTs ELSE progress_ts END
     WHERE id = @id AND state = @from`,
  logAction: `INSERT INTO action_log (at, cluster, finding_id, approval_id, actor, action, target, result, detail)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  listActions: 'SELECT * FROM action_log WHERE cluster = ? ORDER BY at DESC, id DESC LIMIT ?',
  approvalActions: 'SELECT * FROM action_log WHERE approval_id = ? ORDER BY at, id',
  saveMetricSample: `INSERT INTO token_metric_samples (cluster, process_start, scraped_at, counters) VALUES (?, ?, ?, ?)
     ON CONFLICT (cluster, process_start, scraped_at) DO UPDATE SET counters = excluded.counters`,
  lastMetricSample: 'SELECT * FROM token_metric_samples WHERE cluster = ? AND process_start = ? ORDER BY scraped_at DESC LIMIT 1',
  listMetricSamples: 'SELECT * FROM token_metric_samples WHERE cluster = ? AND scraped_at >= ? ORDER BY scraped_at',
  pruneMetricSamples: 'DELETE FROM token_metric_samples WHERE cluster = ? AND scraped_at < ?',
} as const;

class SqliteStore implements Store {
  private readonly prepared = new Map<keyof typeof SQL, Database.Statement>();

  constructor(
    private readonly db: Database.Database,
    readonly path: string,
    readonly schemaVersion: number,
  ) {}

  /** The prepared statement `name` (prepared on first use), typed with its row shape `R`. */
  private st<R = unknown>(name: keyof typeof SQL): Database.Statement<unknown[], R> {
    let stmt = this.prepared.get(name);
    if (stmt === undefined) {
      stmt = this.db.prepare(SQL[name]);
      this.prepared.set(name, stmt);
    }
    return stmt as Database.Statement<unknown[], R>;
  }

  transaction<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate();
  }

  // --- poller lock

  getPollerLock(): PollerLockRow | undefined {
    const r = this.st<{ holder: string; host: string; pid: number; acquired_at: number; heartbeat_at: number }>('getPollerLock').get();
    return r === undefined ? undefined : { id: r.holder, host: r.host, pid: r.pid, acquiredAt: r.acquired_at, heartbeatAt: r.heartbeat_at };
  }

  claimPollerLock(holder: PollerLockHolder, now: number, staleAfterMs: number, isGone: (row: PollerLockRow) => boolean = () => false): PollerLockClaim {
    return this.transaction((): PollerLockClaim => {
      const current = this.getPollerLock();
      const live = current !== undefined && current.id !== holder.id && now - current.heartbeatAt < staleAfterMs && !isGone(current);
      if (live) return { acquired: false, holder: current };
      this.st('setPollerLock').run({ id: holder.id, host: holder.host, pid: holder.pid, now });
      return current === undefined || current.id === holder.id ? { acquired: true } : { acquired: true, replaced: current };
    });
  }

  heartbeatPollerLock(holderId: string, now: number): boolean {
    return this.st('heartbeatPollerLock').run(now, holderId).changes === 1;
  }

  releasePollerLock(holderId: string): void {
    this.st('releasePollerLock').run(holderId);
  }

  // --- Slack replay cache

  claimSlackRequest(keys: readonly string[], now: number, expiresAt: number): boolean {
    return this.transaction(() => {
      this.st('pruneSlackSeen').run(now);
      let fresh = true;
      for (const k of new Set(keys)) if (this.st('insertSlackSeen').run(k, now, expiresAt).changes === 0) fresh = false;
      return fresh;
    });
  }

  // --- cursors

  getCursor(sourceId: string): string | undefined {
    return this.st<{ cursor: string }>('getCursor').get(sourceId)?.cursor;
  }

  setCursor(sourceId: string, cursor: string): void {
    this.st('setCursor').run(sourceId, cursor);
  }

  // Kept in the cursors table under a key no source id can have (source ids name a source kind and its target).
  watchedSince(cluster: string): number | undefined {
    const v = this.getCursor(`\0watched-since\0${cluster}`);
    return v === undefined ? undefined : Number(v);
  }

  markWatchedSince(cluster: string, at: number): void {
    if (this.watchedSince(cluster) === undefined) this.setCursor(`\0watched-since\0${cluster}`, String(at));
  }

  // --- seen

  markSeen(cluster: string, auditIDs: readonly string[], seenAt: number): string[] {
    return this.transaction(() => {
      const fresh: string[] = [];
      for (const id of auditIDs) if (this.st('markSeen').run(cluster, id, seenAt).changes === 1) fresh.push(id);
      return fresh;
    });
  }

  pruneSeen(cluster: string, olderThan: number): number {
    return this.st('pruneSeen').run(cluster, olderThan).changes;
  }

  countSeen(cluster: string): number {
    return this.st<{ n: number }>('countSeen').get(cluster)?.n ?? 0;
  }

  // --- token records

  upsertTokenRecords(records: readonly TokenRecord[]): void {
    this.transaction(() => {
      for (const r of records) {
        this.st('upsertRecord').run({
          cluster: r.cluster,
          kind: r.kind,
          subject: r.subject,
          key: tokenRecordKey(r),
          namespace: r.namespace,
          serviceAccount: r.serviceAccount,
          lastSeen: r.lastSeen,
          record: JSON.stringify(r),
        });
      }
    });
  }

  replaceTokenRecords(cluster: string, records: readonly TokenRecord[], previous?: readonly TokenRecord[]): { upserted: number; deleted: number } {
    const foreign = records.find((r) => r.cluster !== cluster);
    if (foreign !== undefined) {
      throw new StoreError(`replaceTokenRecords(${cluster}): a record belongs to cluster ${foreign.cluster}`);
    }
    return this.transaction(() => {
      // Diff against what is stored: an idle poll (nothing new) rewrites no row. Keys may move (the aggregator re-keys
      // a record on an earlier warnAfter or a new 401 attribution): the old key is deleted, the new one inserted.
      type Row = { kind: string; subject: string; token_key: string; record?: string; parsed?: TokenRecord };
      const stored = new Map<string, Row>();
      if (previous !== undefined) {
        for (const r of previous) stored.set([r.kind, r.subject, tokenRecordKey(r)].join(SEP), { kind: r.kind, subject: r.subject, token_key: tokenRecordKey(r), parsed: r });
      } else {
        for (const row of this.st<Row>('recordKeys').iterate(cluster)) stored.set([row.kind, row.subject, row.token_key].join(SEP), row);
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
      for (const row of stored.values()) this.st('deleteRecord').run(cluster, row.kind, row.subject, row.token_key);
      this.upsertTokenRecords(changed);
      return { upserted: changed.length, deleted: stored.size };
    });
  }

  listTokenRecords(cluster: string): TokenRecord[] {
    return this.st<{ record: string }>('listRecords').all(cluster).map((row) => JSON.parse(row.record) as TokenRecord);
  }

  pruneTokenRecords(cluster: string, lastSeenBefore: number): number {
    return this.st('pruneRecords').run(cluster, lastSeenBefore).changes;
  }

  countTokenRecords(cluster: string): number {
    return this.st<{ n: number }>('countRecords').get(cluster)?.n ?? 0;
  }

  // --- findings

  saveFindings(cluster: string, findings: readonly Finding[], now: number): FindingChange[] {
    const foreign = findings.find((f) => f.cluster !== cluster);
    if (foreign !== undefined) {
      throw new StoreError(`saveFindings(${cluster}): finding ${foreign.id} belongs to cluster ${foreign.cluster}`);
    }
    return this.transaction(() =>
      findings.map((f): FindingChange => {
        const lastSeen = timeOf(f.lastSeen) ?? now;
        const columns = {
          id: f.id,
          severity: f.severity,
          lastSeen,
          rejectionAt: timeOf(f.rejectionAt),
          now,
          finding: JSON.stringify(f),
        };
        const old = this.st<FindingRow>('getFinding').get(f.id);
        if (old === undefined) {
          this.st('insertFinding').run({
            ...columns,
            cluster,
            namespace: f.namespace,
            serviceAccount: f.serviceAccount,
            kind: f.kind,
          });
          return { id: f.id, isNew: true, severity: f.severity, previousSeverity: null, status: 'open', previousStatus: null };
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
        const unchanged = old.finding === columns.finding && status === old.status && snoozedUntil === old.snoozed_until && resolvedAt === old.resolved_at;
        if (!unchanged) this.st('updateFinding').run({ ...columns, status, snoozedUntil, resolvedAt, resolution });
        return {
          id: f.id,
          isNew: false,
          severity: f.severity,
          previousSeverity: old.severity,
          status,
          previousStatus: old.status,
          ...(lateUse ? { lateUse } : {}),
        };
      }),
    );
  }

  listFindings(cluster?: string, opts: { status?: FindingStatus[] } = {}): StoredFinding[] {
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
    return this.db.prepare<unknown[], FindingRow>(sql).all(...params).map(findingOf);
  }

  getFinding(id: string): StoredFinding | undefined {
    const row = this.st<FindingRow>('getFinding').get(id);
    return row === undefined ? undefined : findingOf(row);
  }

  setFindingStatus(id: string, update: FindingStatusUpdate, at: number): boolean {
    const snoozedUntil = update.status === 'snoozed' ? update.until : null;
    const resolvedAt = update.status === 'resolved' ? at : null;
    const resolution: FindingResolution | null = update.status === 'resolved' ? (update.reason ?? null) : null;
    return this.st('setStatus').run(update.status, snoozedUntil, resolvedAt, resolution, at, id).changes === 1;
  }

  // --- poll runs

  startPollRun(cluster: string, source: string, startedAt: number): number {
    return Number(this.st('startPoll').run(cluster, source, startedAt).lastInsertRowid);
  }

  finishPollRun(id: number, result: PollRunResult): void {
    const { changes } = this.st('finishPoll').run(
      result.endedAt,
      result.events,
      result.tokenUses,
      result.error ?? null,
      JSON.stringify(result.stats ?? {}),
      id,
    );
    if (changes !== 1) throw new StoreError(`finishPollRun: no poll run with id ${id}`);
  }

  lastPollRuns(): PollStatus[] {
    return this.st<PollRow>('lastPolls').all().map((r) => ({
      id: r.id,
      cluster: r.cluster,
      source: r.source,
      startedAt: r.started_at,
      endedAt: r.ended_at,
      events: r.events,
      tokenUses: r.token_uses,
      error: r.error,
      stats: JSON.parse(r.stats) as Record<string, number>,
      lastSuccessAt: r.last_success_at ?? null,
    }));
  }

  prunePollRuns(olderThan: number): number {
    return this.st('prunePolls').run(olderThan).changes;
  }

  pollCoverage(cluster: string, from: number): PollCoverage {
    const row = this.st<{ failed: number; succeeded: number; last_before: number | null }>('pollCoverage').get({ cluster, from })!;
    return { failed: row.failed, succeeded: row.succeeded, lastSuccessAtOrBefore: row.last_before };
  }

  // --- message refs

  getMessageRef(findingId: string): MessageRef | undefined {
    const row = this.st<MessageRef>('getRef').get(findingId);
    return row === undefined ? undefined : { channel: row.channel, ts: row.ts, severity: row.severity, hash: row.hash };
  }

  saveMessageRef(findingId: string, ref: MessageRef): void {
    try {
      this.transaction(() => {
        this.st('saveRef').run(findingId, ref.channel, ref.ts, ref.severity, ref.hash);
        this.st('deleteIntent').run(findingId);
      });
    } catch (err) {
      if (isConstraint(err, 'SQLITE_CONSTRAINT_FOREIGNKEY')) {
        throw new StoreError(`saveMessageRef: finding ${findingId} is not stored (save the finding first)`, { cause: err });
      }
      throw err;
    }
  }

  deleteMessageRef(findingId: string): void {
    this.st('deleteRef').run(findingId);
  }

  getAlertRef(groupId: string): AlertRef | undefined {
    const row = this.st<MessageRef & { signals: string }>('getAlertRef').get(groupId);
    if (row === undefined) return undefined;
    let signals: FindingKind[] = [];
    try {
      const parsed = JSON.parse(row.signals) as unknown;
      if (Array.isArray(parsed)) signals = parsed.filter((k): k is FindingKind => k === 'stale-token' || k === 'legacy-token' || k === 'unauthorized');
    } catch {
      signals = [];
    }
    return { channel: row.channel, ts: row.ts, severity: row.severity, hash: row.hash, signals };
  }

  saveAlertRef(groupId: string, cluster: string, ref: AlertRef): void {
    this.transaction(() => {
      this.st('saveAlertRef').run(groupId, cluster, ref.channel, ref.ts, ref.severity, ref.hash, JSON.stringify(ref.signals));
      this.st('deleteGroupIntent').run(groupId);
    });
  }

  getGroupIntent(groupId: string): { channel: string; at: number } | undefined {
    return this.st<{ channel: string; at: number }>('getGroupIntent').get(groupId);
  }

  recordGroupIntent(groupId: string, channel: string, at: number): void {
    this.st('saveGroupIntent').run(groupId, channel, at);
  }

  getAlertIntent(findingId: string): { channel: string; at: number } | undefined {
    return this.st<{ channel: string; at: number }>('getIntent').get(findingId);
  }

  recordAlertIntent(findingId: string, channel: string, at: number): void {
    this.st('saveIntent').run(findingId, channel, at);
  }

  // --- approvals

  /** The keys of {@link claimApproval}: target and subject (see the V_ACTION_TARGETS migration). */
  private keysOf(target: NewApproval['target'], subject: ActionSubject | undefined): { targetKey: string; subjectKey: string | null } {
    const targetKey = [target.cluster, target.kind, target.namespace, target.name].join(SEP);
    let s = subject;
    if (!s && target.kind === 'ServiceAccount') s = { namespace: target.namespace, serviceAccount: target.name };
    if (!s) {
      const row = this.st<{ namespace: string; service_account: string }>('subjectOfFinding').get(target.findingId);
      if (row) s = { namespace: row.namespace, serviceAccount: row.service_account };
    }
    return { targetKey, subjectKey: s ? [target.cluster, s.namespace, s.serviceAccount].join(SEP) : null };
  }

  openApprovalFor(action: NewApproval['action'], target: NewApproval['target'], now: number, subject?: ActionSubject): StoredApproval | undefined {
    const keys = this.keysOf(target, subject);
    const row = this.st<ApprovalRow>('openFor').get({ ...keys, subjectKey: keys.subjectKey ?? '\u0000none', action, now });
    return row === undefined ? undefined : this.approvalOf(row);
  }

  claimApproval(a: NewApproval, now: number, subject?: ActionSubject): ClaimResult {
    return this.transaction((): ClaimResult => {
      const keys = this.keysOf(a.target, subject);
      const params = { ...keys, subjectKey: keys.subjectKey ?? '\u0000none', action: a.action, now };
      const expired: StoredApproval[] = [];
      for (const row of this.st<ApprovalRow>('staleFor').all(params)) {
        if (this.st('expireStale').run(now, row.id).changes !== 1) continue;
        const old = this.approvalOf(row);
        this.logAction({
          at: now,
          cluster: old.target.cluster,
          findingId: old.target.findingId,
          approvalId: old.id,
          actor: null,
          action: `${old.action}.expired`,
          target: objectLabel(old.target),
          result: 'expired',
          detail: `${actionNoun(old.action)} of ${describeTarget(old.target)} expired without a decision`,
        });
        expired.push(this.getApproval(old.id)!);
      }
      const open = this.st<ApprovalRow>('openFor').get(params);
      if (open !== undefined) return { ok: false, open: this.approvalOf(open), expired };
      return { ok: true, approval: this.createApproval(a, subject), expired };
    });
  }

  createApproval(a: NewApproval, subject?: ActionSubject): StoredApproval {
    this.transaction(() => {
      try {
        this.st('insertApproval').run({
          id: a.id,
          cluster: a.target.cluster,
          findingId: a.target.findingId,
          action: a.action,
          target: JSON.stringify(a.target),
          requester: a.requester,
          state: a.state,
          requiredApprovals: a.requiredApprovals,
          createdAt: a.createdAt,
          expiresAt: a.expiresAt,
          updatedAt: a.updatedAt,
          dryRun: a.dryRun === null ? null : JSON.stringify(a.dryRun),
          error: a.error ?? null,
          messageChannel: a.message?.channel ?? null,
          messageTs: a.message?.ts ?? null,
          ...this.keysOf(a.target, subject),
        });
      } catch (err) {
        if (isConstraint(err, 'SQLITE_CONSTRAINT_PRIMARYKEY')) {
          throw new StoreError(`createApproval: approval ${a.id} already exists`, { cause: err });
        }
        throw err;
      }
      for (const v of a.votes) this.insertVote(a.id, v);
    });
    return this.getApproval(a.id)!;
  }

  getApproval(id: string): StoredApproval | undefined {
    const row = this.st<ApprovalRow>('getApproval').get(id);
    return row === undefined ? undefined : this.approvalOf(row);
  }

  transitionApproval(id: string, from: ApprovalState, to: ApprovalState, patch: ApprovalUpdate, at: number): boolean {
    if (patch.state !== undefined && patch.state !== to) {
      throw new StoreError(`transitionApproval(${id}): patch.state ${patch.state} differs from to=${to}`);
    }
    return this.transaction(() => {
      const row = this.st<ApprovalRow>('getApproval').get(id);
      if (row === undefined || row.state !== from) return false;
      let newVotes: Vote[] = [];
      if (patch.votes !== undefined) {
        const stored = new Set(this.st<VoteRow>('votesOf').all(id).map((v) => v.user));
        const given = new Set(patch.votes.map((v) => v.user));
        // Computed from a stale read: someone else's vote landed in between.
        for (const user of stored) if (!given.has(user)) return false;
        newVotes = patch.votes.filter((v) => !stored.has(v.user));
      }
      const { changes } = this.st('casApproval').run({
        id,
        from,
        to,
        at,
        setError: 'error' in patch ? 1 : 0,
        error: patch.error ?? null,
        setDryRun: 'dryRun' in patch ? 1 : 0,
        dryRun: patch.dryRun == null ? null : JSON.stringify(patch.dryRun),
        setMessage: 'message' in patch ? 1 : 0,
        messageChannel: patch.message?.channel ?? null,
        messageTs: patch.message?.ts ?? null,
        setStartedAt: patch.startedAt !== undefined ? 1 : 0,
        startedAt: patch.startedAt ?? null,
        setExecution: patch.execution !== undefined ? 1 : 0,
        execution: patch.execution === undefined ? null : JSON.stringify(patch.execution),
        setProgress: patch.progress !== undefined ? 1 : 0,
        progressChannel: patch.progress?.channel ?? null,
        progressTs: patch.progress?.ts ?? null,
      });
      if (changes !== 1) return false;
      for (const v of newVotes) this.insertVote(id, v);
      return true;
    });
  }

  listApprovals(filter: ApprovalFilter = {}): StoredApproval[] {
    const where: string[] = [];
    const params: unknown[] = [];
    if (filter.cluster !== undefined) {
      where.push('cluster = ?');
      params.push(filter.cluster);
    }
    if (filter.states !== undefined) {
      where.push(`state IN (${filter.states.map(() => '?').join(', ') || 'NULL'})`);
      params.push(...filter.states);
    }
    if (filter.expiresAtOrBefore !== undefined) {
      where.push('expires_at <= ?');
      params.push(filter.expiresAtOrBefore);
    }
    if (filter.findingId !== undefined) {
      where.push('finding_id = ?');
      params.push(filter.findingId);
    }
    const sql = `SELECT * FROM approvals ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at, id`;
    return this.db.prepare<unknown[], ApprovalRow>(sql).all(...params).map((r) => this.approvalOf(r));
  }

  private insertVote(approvalId: string, v: Vote): void {
    this.st('insertVote').run(approvalId, v.user, v.vote, v.at, v.reason ?? null, approvalId);
  }

  private approvalOf(row: ApprovalRow): StoredApproval {
    const votes = this.st<VoteRow>('votesOf').all(row.id).map(
      (v): Vote => (v.reason === null ? { user: v.user, vote: v.vote, at: v.at } : { user: v.user, vote: v.vote, at: v.at, reason: v.reason }),
    );
    return {
      id: row.id,
      action: row.action,
      target: JSON.parse(row.target) as StoredApproval['target'],
      requester: row.requester,
      createdAt: row.created_at,
      expiresAt: row.expires_at,
      requiredApprovals: row.required_approvals,
      votes,
      state: row.state,
      dryRun: row.dry_run === null ? null : (JSON.parse(row.dry_run) as DryRunResult),
      error: row.error,
      updatedAt: row.updated_at,
      message: row.message_channel !== null && row.message_ts !== null ? { channel: row.message_channel, ts: row.message_ts } : null,
      ...(row.started_at != null ? { startedAt: row.started_at } : {}),
      ...(row.execution != null ? { execution: JSON.parse(row.execution) as ExecutionRecord } : {}),
      ...(row.progress_channel != null && row.progress_ts != null ? { progress: { channel: row.progress_channel, ts: row.progress_ts } } : {}),
    };
  }

  // --- action log

  logAction(e: NewActionLogEntry): number {
    const info = this.st('logAction').run(
      e.at,
      e.cluster,
      e.findingId ?? null,
      e.approvalId ?? null,
      e.actor,
      e.action,
      e.target,
      e.result,
      e.detail ?? null,
    );
    return Number(info.lastInsertRowid);
  }

  listActions(cluster: string, limit = 20): ActionLogEntry[] {
    return this.st<ActionRow>('listActions').all(cluster, limit).map(actionOf);
  }

  listApprovalActions(approvalId: string): ActionLogEntry[] {
    return this.st<ActionRow>('approvalActions').all(approvalId).map(actionOf);
  }

  saveTokenMetricSample(cluster: string, sample: TokenMetricsSample): void {
    if (sample.processStartAt === null) return;
    this.st('saveMetricSample').run(cluster, sample.processStartAt, sample.scrapedAt, JSON.stringify(sample.counters));
  }

  lastTokenMetricSample(cluster: string, processStartAt: number): TokenMetricsSample | undefined {
    const row = this.st<MetricSampleRow>('lastMetricSample').get(cluster, processStartAt);
    return row ? metricSampleOf(row) : undefined;
  }

  listTokenMetricSamples(cluster: string, since: number): TokenMetricsSample[] {
    return this.st<MetricSampleRow>('listMetricSamples').all(cluster, since).map(metricSampleOf);
  }

  pruneTokenMetricSamples(cluster: string, olderThan: number): number {
    return this.st('pruneMetricSamples').run(cluster, olderThan).changes;
  }

  pruneActionLog(olderThan: number): number {
    return this.st('pruneActions').run(olderThan).changes;
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}

interface MetricSampleRow {
  cluster: string;
  process_start: number;
  scraped_at: number;
  counters: string;
}

function metricSampleOf(r: MetricSampleRow): TokenMetricsSample {
  return { scrapedAt: r.scraped_at, processStartAt: r.process_start, counters: JSON.parse(r.counters) as TokenCounters };
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
