/**
 * The poll pipeline: one poll of one cluster, in the order data flows (docs/design/architecture.md "Stage rules"),
 * each step a named method below that calls its stage:
 *
 * 1. {@link ClusterPoller.readAndStoreUses}: read the audit source (`src/sources/`) → parse audit events into token
 *    uses (`src/audit/`) → drop the auditIDs already seen → aggregate into token records (`src/findings/aggregate.ts`)
 *    → store them with the cursor, a chunk at a time (`src/store/`);
 * 2. {@link ClusterPoller.derive}: derive findings with cluster state, API-server token metrics and node-probe reports
 *    ({@link deriveFindings}, the same derivation `tokenwatch scan` runs);
 * 3. {@link ClusterPoller.storeFindings}: save the findings, resolve quiet ones, apply retention, finish the poll run;
 * 4. {@link ClusterPoller.notifyAndVerify}: notify (Slack alerts, `PollerDeps.notify`), then verify approved actions
 *    (`src/remediation/verify.ts`, `PollerDeps.verify`).
 *
 * Restart safety: the new token uses, the auditIDs marked seen, the merged token records and the
 * source cursor are written in ONE store transaction per chunk. A crash before it commits loses nothing (the
 * cursor did not move, the next poll re-reads); a crash after it double-counts nothing (the auditIDs
 * are marked seen, and the source's overlap window re-reads are dropped by `markSeen`).
 *
 * Bounded memory (docs/live-mode.md#bounded-polls): a poll holds at most `chunkEvents` token uses. The source hands out
 * a resumable cursor at least every `chunkEvents` events (`PollOptions.checkpoint`); the poller then commits what it
 * holds with that cursor, so a window of a million 401s is stored in chunks, its cursor moves with what was aggregated,
 * and a restart goes on after the last committed chunk. A source without checkpoints gets its chunks committed
 * without a cursor (safe: re-read auditIDs are dropped as seen). The aggregation itself is bounded (top sources plus one
 * overflow record, `findings/aggregate.ts`). Logs Insights aggregates carry no auditID: they are held and stored with
 * the final cursor in one transaction (bounded by `insights.limit` rows).
 *
 * Findings are rebuilt from all token records of the cluster on every poll (with cluster state when
 * configured), so severity follows the clock even when nothing new arrives. Only records that changed are written
 * (an idle poll writes no token record), and 401s count toward severity only while they are recent
 * (`activeWindowMs`).
 *
 * After each successful poll:
 * - retention: token records not seen for `retention.tokenRecordsMs` are dropped (stale tokens are kept until their
 *   rejection date passes), poll runs and action-log rows older
 *   than their retention are deleted (poll runs are kept at least as long as the quiet period);
 * - quiet resolution: an open or snoozed finding whose signal has been absent for `quietPeriodMs`, while every
 *   recorded poll of the cluster over that period succeeded (and one succeeded at or before its start), and that has
 *   no live token (a stale-token finding with a `rejectionAt` still has one), is resolved with reason `quiet` and an
 *   action-log row `finding.quiet`; its id is returned in {@link PollOutcome.concluded}. A broken source never
 *   resolves anything: any failed poll in the period blocks it. When the signal returns, `saveFindings` reopens it.
 */
import { untilAborted } from '../core/abort.js';
import { isStoreUnavailable } from '../store/unavailable.js';
import type { ReadStats, TokenUse } from '../audit/types.js';
import { createReadStats } from '../sources/reader.js';
import { tokenUsesFromWrappedText } from '../audit/records.js';
import type { ClusterStateSource } from '../cluster/types.js';
import type { ClusterConfig } from '../config/types.js';
import { parseTrustedProxies } from '../core/source-address.js';
import { TokenAggregator } from '../findings/aggregate.js';
import { SEVERITIES, type Finding, type TokenRecord } from '../findings/types.js';
import { DAY_MS, DAY_SECONDS, HOUR_MS } from '../core/units.js';
import { scrubSecrets, type Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { aggregateToTokenUses, isTokenUseAggregateText, parseTokenUseAggregate } from '../sources/insights.js';
import { DEFAULT_CHECKPOINT_EVENTS, emptyStats, SourceError, type AuditSource, type SourceStats } from '../sources/types.js';
import { createPlatformHints, type PlatformHints } from '../sources/platform-hints.js';
import type { FindingChange, Store } from '../store/index.js';
import type { ProbeReportSource } from '../probe/objects.js';
import type { ProbeReport } from '../probe/host.js';
import type { ClusterEvent } from '../findings/cluster-events.js';
import type { SampleComparison } from '../findings/token-metrics.js';
import type { SlackPollHealth } from '../slack/context.js';
import { TimeSlicer } from '../core/slice.js';
import { HOST_CLOCK_MARGIN_MS, ignoredTimesText, noteIgnoredTime, type IgnoredEventTimes } from '../findings/clock-skew.js';
import { deriveFindings, type DerivedFindings, type TokenMetricsStepResult } from './derive.js';

/** A Kubernetes read's timeout, as its error text says it (see where {@link ClusterPoller.recordSuccess} uses it). */
const TIMED_OUT = /\btimed out after \d+ ms\b/;

/** Health of a cluster's last poll, for `/tokens status` and `/readyz` (the fields Slack shows, plus which ones). */
export interface PollHealth extends SlackPollHealth {
  cluster: string;
  sourceId: string;
}

/** Result of {@link ClusterPoller.pollOnce}. Times are epoch ms UTC. */
export interface PollOutcome {
  cluster: string;
  startedAt: number;
  endedAt: number;
  /** Records the source yielded. */
  records: number;
  /** Token uses that were new (auditID not seen before). */
  newUses: number;
  /** Token uses dropped as already seen (overlap window re-reads, replays). */
  duplicates: number;
  malformed: number;
  source: SourceStats;
  findings: Finding[];
  /** Per finding: new or not, severity and status before and after this poll (from the store). */
  changes: FindingChange[];
  /** Findings resolved as quiet by this poll (see the module docstring); their `changes` entry says `resolved`. */
  concluded: string[];
  /**
   * Cluster-level credential events seen in the cluster's findings (a signing-key rotation or issuer change:
   * `src/findings/cluster-events.ts`), already applied to `findings`. Detected again on every poll while their
   * records are kept; announcing one once is the caller's job.
   */
  clusterEvents: ClusterEvent[];
  /** Rows deleted by retention in this poll. */
  pruned: { tokenRecords: number; pollRuns: number; actionLog: number };
  /** Token-record rows written by this poll (upserted + deleted): 0 for an idle poll. */
  recordsWritten: number;
  /** Store transactions that committed what was read (chunks; the last one also moves the cursor to the window's end). */
  commits: number;
  /** Most token uses held in memory at once, uncommitted: at most {@link PollerDeps.chunkEvents} except in Logs Insights mode. */
  maxHeld: number;
  /**
   * Token uses left out because their event time is later than the host clock plus 24 h (rule 1 of
   * `src/findings/clock-skew.ts`: a wrong clock on a control-plane node): they make no token, request or rejection date.
   */
  ignoredEventTimes?: IgnoredEventTimes;
  /** Why the poll failed; the cursor stayed at the last committed chunk (where the poll started if none was). */
  error?: string;
  /**
   * Set when the poll failed because the store (database) could not be reached: its poll run may be recorded
   * unfinished or not at all (serve keeps its tick for a missed record once the store answers: src/runtime/unrecorded-ticks.ts).
   */
  storeUnavailable?: true;
}

/** Retention of store rows, ms (see `Config.retention`). */
export interface RetentionMs {
  tokenRecordsMs: number;
  pollRunsMs: number;
  actionLogMs: number;
}

/** Defaults of {@link PollerDeps}: `Config` defaults (findings.activeWindow 1 h, quietPeriod 24 h, retention 7 d / 7 d / 90 d, poll.chunkEvents 10,000). */
export const POLLER_DEFAULTS = {
  chunkEvents: DEFAULT_CHECKPOINT_EVENTS,
  activeWindowMs: HOUR_MS,
  quietPeriodMs: DAY_MS,
  retention: { tokenRecordsMs: 7 * DAY_MS, pollRunsMs: 7 * DAY_MS, actionLogMs: 90 * DAY_MS } satisfies RetentionMs,
} as const;

/** Dependencies of a {@link ClusterPoller}. */
export interface PollerDeps {
  cluster: ClusterConfig;
  source: AuditSource;
  store: Store;
  /**
   * Fencing (clusters shared out across replicas, src/runtime/shard-coordinator.ts): called first inside the
   * transactions that start the poll run, commit each chunk (records, seen auditIDs, cursor) and save the findings;
   * it throws to refuse the commit when this replica no longer owns the cluster at the epoch the poll started with,
   * so the transaction rolls back and the poll fails. Default: none.
   */
  fence?: (tx: Store) => Promise<void>;
  /** Cluster state; undefined when the cluster is configured with `kubernetes: { none: true }`. */
  state?: ClusterStateSource;
  logger: Logger;
  metrics?: Metrics;
  /** Clock, epoch ms. Default `Date.now`. */
  clock?: () => number;
  /** How long seen auditIDs are kept, ms: at least the source's overlap window. Default 2 h. */
  seenRetentionMs?: number;
  /** API-server token metrics (`src/runtime/token-metrics-monitor.ts`); absent without Kubernetes access. */
  tokenMetrics?: TokenMetricsSource;
  /** Node-probe reports; absent without Kubernetes access. */
  probe?: ProbeReportSource;
  /** 401s seen within this window count as current (severity critical), ms. Default 1 h. */
  activeWindowMs?: number;
  /** Quiet period before a finding with no signal is resolved, ms. Default 24 h. */
  quietPeriodMs?: number;
  /** Store retention. Default {@link POLLER_DEFAULTS}.retention. */
  retention?: RetentionMs;
  /**
   * Told of every successful poll and the records it read, and of every failed one with the source's `blind` reason
   * when it has one (`SourceError.blind`: the read of the audit log was refused) — blind-log detection, src/runtime/blind.ts.
   */
  blind?: { observePoll(at: number, records: number): void; observePlatformHints?(at: number, hints: PlatformHints): void; observeFailedPoll?(at: number, blind: string | undefined): void };
  /**
   * Awaited at the start of every poll, before the source is read, with the poll's start (epoch ms UTC): `serve`'s
   * re-reading of the EKS audit logging setup (`EksLoggingRecheck`, src/runtime/blind.ts). Must not throw (a
   * rejection is logged and the poll goes on).
   */
  beforePoll?: (at: number) => Promise<void>;
  /**
   * Token uses a poll holds before it commits them, and the most events between two progress commits of the source
   * (`poll.chunkEvents`, see the module doc). Default {@link POLLER_DEFAULTS}.chunkEvents.
   */
  chunkEvents?: number;
  /**
   * A poll running longer than this, ms, makes {@link ClusterPoller.health} say `degraded` (slow: the cluster's APIs
   * are slow or not answering) until it ends. Default 30,000 (serve: 3 × `poll.requestTimeout`).
   */
  slowAfterMs?: number;
  /**
   * Step "notify": called after each successful poll with the fresh findings (serve: the blind-log gauge and the
   * Slack alerts). A rejection is logged; the verify step runs anyway.
   */
  notify?: (findings: Finding[], outcome: PollOutcome) => Promise<void>;
  /**
   * Step "verify": called after {@link notify} (serve: the verifier concludes the cluster's approved actions and replies
   * under alerts that already show this poll's findings). A rejection is logged.
   */
  verify?: (outcome: PollOutcome) => Promise<void>;
  /**
   * Called after every poll that was not aborted, whatever its outcome, before {@link ClusterPoller.pollOnce} resolves
   * (serve: the health model's check of the Kubernetes API, src/runtime/health.ts). Must not throw (a rejection is logged).
   */
  after?: (outcome: PollOutcome) => Promise<void>;
}

/** The API-server token metrics of a cluster, compared with the last scrape (`TokenMetricsMonitor`). */
export interface TokenMetricsSource {
  /**
   * Scrapes and compares; returns the cluster-level findings an increase justifies (`auditFindings`: this poll's
   * audit-derived findings, an increase they explain raises nothing). Reports an unreadable scrape in `error`.
   */
  poll(
    auditFindings: readonly Finding[],
    now: number,
    signal?: AbortSignal,
  ): Promise<{ findings: Finding[]; error?: string; comparison?: SampleComparison }>;
}

/** What one running poll carries from step to step. Times are epoch ms UTC. */
interface PollRun {
  startedAt: number;
  scheduledAt: number | undefined;
  signal: AbortSignal | undefined;
  /** The poll run's id in the store, once started. */
  runId?: number;
  log: Logger;
  outcome: PollOutcome;
  sourceStats: SourceStats;
  readStats: ReadStats;
}

/** Polls one cluster; see the module docstring. */
export class ClusterPoller {
  private healthState: PollHealth;
  private readonly clock: () => number;
  /** Whether a poll of this instance has compared all token records with the store (see pollOnce). */
  private recordsCompared = false;
  /** Whether this process has recorded the cluster's `watchedSince` (kept from the first time on: src/store/polls.ts). */
  private watchedMarked = false;
  /** When the running poll started, epoch ms; undefined when none runs. */
  private runningSince: number | undefined;

  constructor(private readonly deps: PollerDeps) {
    this.clock = deps.clock ?? Date.now;
    this.healthState = { cluster: deps.cluster.name, sourceId: deps.source.id, status: 'pending' };
    this.restored = this.restore();
  }

  /**
   * Resolves once the health of the last recorded poll (of an earlier process) is restored from the store; until
   * then {@link health} shows `pending`. A poll waits for it. Never rejects (a store failure is logged).
   */
  readonly restored: Promise<void>;

  private async restore(): Promise<void> {
    const { store, cluster } = this.deps;
    try {
      const [last] = await store.polls.lastRuns(cluster.name);
      // A poll of this process that already ended has the newer word.
      if (!last || this.healthState.lastPollAt !== undefined) return;
      this.healthState.lastPollAt = last.startedAt;
      if (last.error) {
        this.healthState.status = 'degraded';
        this.healthState.lastError = last.error;
        this.healthState.failingSince = last.startedAt;
      }
    } catch (err) {
      this.deps.logger.warn({ err, cluster: cluster.name }, 'could not read the last poll run from the store');
    }
  }

  get name(): string {
    return this.deps.cluster.name;
  }

  /** Records a scheduled poll that did not run (`dueAt` epoch ms UTC; reason from the scheduler), for {@link health}. */
  recordMissed(dueAt: number, reason: string): void {
    this.healthState.missed = { count: (this.healthState.missed?.count ?? 0) + 1, lastDueAt: dueAt, lastReason: reason };
  }

  /**
   * Health after the last poll, and of the running one: a poll running longer than `slowAfterMs` makes the status
   * `degraded` with `slow` set (how long it has run), whatever the last poll did — a hung cluster never shows healthy.
   */
  health(): PollHealth {
    const h: PollHealth = { ...this.healthState };
    if (this.runningSince !== undefined) {
      const forMs = Math.max(0, this.clock() - this.runningSince);
      h.runningSince = this.runningSince;
      if (forMs > (this.deps.slowAfterMs ?? 30_000)) {
        h.status = 'degraded';
        h.slow = { since: this.runningSince, forMs };
      }
    }
    return h;
  }

  /**
   * Runs one poll; see {@link pollOnce0} and the module docstring. An aborted poll (`signal`: serve is stopping) is left unfinished in the store,
   * as a crash would leave it (the cursor stayed at the last committed chunk), not recorded as a failure: the next poll
   * reads on, and a shutdown does not hold up quiet resolution. `scheduledAt`: the cron tick this poll runs for (epoch
   * ms), recorded with its poll run (`Store.polls.startRun`); absent for the start-up poll and `/tokens scan`.
   */
  async pollOnce(signal?: AbortSignal, opts: { scheduledAt?: number | undefined } = {}): Promise<PollOutcome> {
    this.runningSince = this.clock();
    let outcome: PollOutcome;
    try {
      outcome = await this.pollOnce0(signal, opts.scheduledAt);
    } finally {
      this.runningSince = undefined;
    }
    if (this.deps.after && !signal?.aborted) {
      try {
        await this.deps.after(outcome);
      } catch (err) {
        this.deps.logger.warn({ err, cluster: this.deps.cluster.name }, 'after-poll check failed');
      }
    }
    return outcome;
  }

  /**
   * Runs one poll. Never throws for source or cluster-state failures: they are logged, recorded in the
   * poll run, reflected in {@link health} (`degraded`) and returned in `error`; the cursor stays at the last
   * committed chunk (see the module doc, "Bounded memory").
   */
  private async pollOnce0(signal: AbortSignal | undefined, scheduledAt: number | undefined): Promise<PollOutcome> {
    await this.restored;
    const run = this.beginRun(signal, scheduledAt);
    if (this.deps.beforePoll) {
      try {
        await this.deps.beforePoll(run.startedAt);
      } catch (err) {
        run.log.warn({ err }, 'before-poll check failed; polling anyway');
      }
    }
    const timer = this.deps.metrics?.pollDuration.startTimer({ cluster: this.deps.cluster.name });
    try {
      const runId = await this.startRun(run);
      const records = await this.readAndStoreUses(run);
      const now = this.clock();
      const derived = await this.derive(run, records, now);
      await this.storeFindings(run, runId, derived.findings, now);
      this.recordSuccess(run, derived);
      await this.notifyAndVerify(run);
      return run.outcome;
    } catch (err) {
      return await this.recordFailure(run, err);
    } finally {
      timer?.();
    }
  }

  /** A fresh {@link PollRun}: an empty outcome starting now. */
  private beginRun(signal: AbortSignal | undefined, scheduledAt: number | undefined): PollRun {
    const { cluster } = this.deps;
    const startedAt = this.clock();
    const sourceStats: SourceStats = { ...emptyStats(), platformHints: createPlatformHints() };
    return {
      startedAt,
      scheduledAt,
      signal,
      log: this.deps.logger.child({ cluster: cluster.name }),
      sourceStats,
      readStats: createReadStats(),
      outcome: {
        cluster: cluster.name,
        startedAt,
        endedAt: startedAt,
        records: 0,
        newUses: 0,
        duplicates: 0,
        malformed: 0,
        source: sourceStats,
        findings: [],
        changes: [],
        concluded: [],
        clusterEvents: [],
        pruned: { tokenRecords: 0, pollRuns: 0, actionLog: 0 },
        recordsWritten: 0,
        commits: 0,
        maxHeld: 0,
      },
    };
  }

  /** Records the poll run in the store (fenced). A full disk or a read-only store fails here already: a failed poll. */
  private async startRun(run: PollRun): Promise<number> {
    const { store, cluster, source, fence } = this.deps;
    const runId = fence
      ? await store.transaction(async (tx) => {
          await fence(tx);
          return await tx.polls.startRun(cluster.name, source.id, run.startedAt, run.scheduledAt);
        })
      : await store.polls.startRun(cluster.name, source.id, run.startedAt, run.scheduledAt);
    run.runId = runId;
    run.log = run.log.child({ pollId: runId });
    return runId;
  }

  /**
   * Steps "read sources → parse → store": reads the source from its cursor, parses each record into token uses, drops
   * the auditIDs already seen and aggregates the rest into the cluster's token records, committed a chunk at a time
   * with the cursor (see the module doc, "Restart safety" and "Bounded memory"). Returns all token records of the
   * cluster as stored at the end.
   */
  private async readAndStoreUses(run: PollRun): Promise<TokenRecord[]> {
    const { cluster, source, store, metrics } = this.deps;
    const { outcome, readStats, signal } = run;
    const cursor = await store.polls.getCursor(source.id);
    const chunkEvents = Math.max(1, this.deps.chunkEvents ?? POLLER_DEFAULTS.chunkEvents);
    /** Token uses read and not yet committed: at most `chunkEvents` (see the module doc, "Bounded memory"). */
    const pending: TokenUse[] = [];
    /** Logs Insights aggregates carry no auditID: they are stored with the poll's final cursor, in one transaction. */
    let holdAll = false;
    const commits = this.chunkCommitter(run, pending);
    const push = (u: TokenUse): void => {
      pending.push(u);
      if (pending.length > outcome.maxHeld) outcome.maxHeld = pending.length;
    };
    // A promise only when the chunk is full (the hot path stays synchronous).
    const ceiling = this.clock() + HOST_CLOCK_MARGIN_MS;
    const hold = (u: TokenUse): Promise<void> | undefined => {
      if (u.time > ceiling) {
        outcome.ignoredEventTimes = noteIgnoredTime(outcome.ignoredEventTimes, u.time, source.id);
        return undefined;
      }
      // Full: commit what is held without moving the cursor (safe: a re-read drops these auditIDs as seen).
      if (!holdAll && pending.length >= chunkEvents) return commits.commit(undefined, false).then(() => push(u));
      push(u);
      return undefined;
    };
    const gen = source.poll(cursor, {
      now: run.startedAt,
      lookbackMs: cluster.lookback,
      signal,
      stats: run.sourceStats,
      checkpointEvents: chunkEvents,
      checkpoint: async (c) => {
        if (!holdAll) await commits.commit(c, false);
      },
    });
    const unwrapped: TokenUse[] = []; // the uses of one record (an EventList line carries many)
    // Reading a big window is long synchronous work between awaits that are only microtasks: it runs in slices,
    // letting the event loop answer Slack between them (src/core/slice.ts).
    const slicer = new TimeSlicer();
    let next = await gen.next();
    try {
      while (!next.done) {
        if (slicer.due()) await slicer.yield();
        const text = next.value;
        outcome.records++;
        if (isTokenUseAggregateText(text)) {
          holdAll = true;
          try {
            for (const u of aggregateToTokenUses(parseTokenUseAggregate(text))) await hold(u);
          } catch {
            readStats.malformed++;
          }
        } else {
          // An event, or a record of another shape (EventList, GKE entry, AKS record, Loki line: src/audit/shapes.ts).
          unwrapped.length = 0;
          tokenUsesFromWrappedText(text, readStats, unwrapped);
          for (const u of unwrapped) {
            const full = hold(u);
            if (full) await full;
          }
        }
        next = await gen.next();
      }
    } catch (err) {
      // A failure here (a chunk commit that throws: the store) leaves the source suspended mid-read: end it, so it
      // closes what it holds open (the file source's FileHandle; Node 26 fails the process for a handle closed by
      // garbage collection), then report the poll's failure as usual.
      await gen.return(undefined as never).catch(() => undefined);
      throw err;
    }
    outcome.malformed = readStats.malformed;
    const records = await commits.commit(next.value, true);
    metrics?.auditEvents.inc({ cluster: cluster.name }, outcome.records);
    return records;
  }

  /**
   * The commit of one chunk, in ONE store transaction (fenced): the seen auditIDs, the merged token records and, when
   * given, the cursor (see the module doc, "Restart safety"). `pending` is emptied; `final` also applies retention to
   * the token records and the seen auditIDs. Returns the token records as stored.
   */
  private chunkCommitter(run: PollRun, pending: TokenUse[]): { commit(cursorAfter: string | undefined, final: boolean): Promise<TokenRecord[]> } {
    const { cluster, source, store, metrics, fence } = this.deps;
    const { outcome, startedAt } = run;
    const retention = this.deps.retention ?? POLLER_DEFAULTS.retention;
    let agg: TokenAggregator | undefined;
    /** The token records as stored now (read once, then what the last commit wrote): the diff base. */
    let stored: TokenRecord[] = [];
    const keepSince = startedAt - retention.tokenRecordsMs;
    const commit = async (cursorAfter: string | undefined, final: boolean): Promise<TokenRecord[]> =>
      await store.transaction(async (tx) => {
        await fence?.(tx);
        if (!agg) {
          stored = await tx.tokenRecords.list(cluster.name); // the aggregator clones them: unmodified for the diff below
          agg = TokenAggregator.from({ cluster: cluster.name, maxTokenAge: cluster.maxTokenAge, trustedProxies: parseTrustedProxies(cluster.trustedProxies ?? []) }, stored);
        }
        const unique = new Map<string, TokenUse>();
        for (const u of pending) if (!unique.has(u.auditID)) unique.set(u.auditID, u);
        const fresh = new Set(await tx.polls.markSeen(cluster.name, [...unique.keys()], startedAt));
        let added = 0;
        for (const u of unique.values()) {
          if (fresh.has(u.auditID)) {
            agg.add(u);
            added++;
            metrics?.tokenUses.inc({ cluster: cluster.name, kind: u.kind }, u.weight ?? 1);
          }
        }
        outcome.newUses += added;
        outcome.duplicates += pending.length - added;
        pending.length = 0;
        // Retention: records not seen for tokenRecordsMs are left out, so the replace below deletes them — except stale
        // tokens whose rejection date is still ahead: they can be used again any time and their finding escalates
        // as the date nears (bounded: EKS rejects 90 days after warnAfter).
        const all: TokenRecord[] = agg.records();
        const merged = all.filter((r) => r.lastSeen >= keepSince || (r.rejectionAt !== undefined && r.rejectionAt > startedAt));
        const pruned = all.length - merged.length;
        // Keys may move (401 re-attribution), so replace, not upsert; only changed rows are written. With no new use
        // and nothing to prune the aggregator's output is what it wrote last time (same records, same config): skip
        // even the comparison — after this process's first poll, which compares everything once (config changes).
        if (added > 0 || (final && (pruned > 0 || !this.recordsCompared))) {
          const written = await tx.tokenRecords.replace(cluster.name, merged, stored);
          outcome.recordsWritten += written.upserted + written.deleted;
          stored = merged;
          this.recordsCompared = true;
        }
        if (cursorAfter !== undefined) await tx.polls.setCursor(source.id, cursorAfter);
        if (final) {
          outcome.pruned.tokenRecords = pruned;
          await tx.polls.pruneSeen(cluster.name, startedAt - (this.deps.seenRetentionMs ?? 2 * HOUR_MS));
        }
        outcome.commits++;
        return merged;
      });
    return { commit };
  }

  /**
   * Step "derive findings": reads the node-probe reports (a failure is logged and kept in `probeError`, the poll goes
   * on) and derives the findings with cluster state and token metrics ({@link deriveFindings}).
   */
  private async derive(run: PollRun, records: TokenRecord[], now: number): Promise<DerivedFindings & { probeError?: string }> {
    const { cluster, metrics } = this.deps;
    const thresholds = { criticalSeconds: cluster.thresholds.criticalDays * DAY_SECONDS, warningSeconds: cluster.thresholds.warningDays * DAY_SECONDS };
    const probe = await this.readProbeReports(run);
    const tokenMetrics = this.deps.tokenMetrics;
    const derived = await deriveFindings({
      cluster: cluster.name,
      records,
      now,
      unauthorizedSince: now - (this.deps.activeWindowMs ?? POLLER_DEFAULTS.activeWindowMs),
      ...('azure' in cluster.audit && cluster.audit.azure.tokenExtension === 'off' ? { tokenExtensionOff: true } : {}),
      ...(this.deps.state ? { state: this.deps.state } : {}),
      thresholds,
      maxTokenAge: cluster.maxTokenAge,
      ...(tokenMetrics
        ? {
            tokenMetrics: async (auditFindings: readonly Finding[], at: number): Promise<TokenMetricsStepResult> => {
              const m = await tokenMetrics.poll(auditFindings, at, run.signal);
              const showUse = m.comparison?.kind === 'increase' && (m.comparison.deltas.stale ?? 0) > 0;
              return { findings: m.findings, showUse, ...(m.error !== undefined ? { error: m.error } : {}) };
            },
          }
        : {}),
      ...(probe.reports ? { probeReports: probe.reports } : {}),
      ...(run.outcome.ignoredEventTimes ? { clockSkew: ignoredTimesText(run.outcome.ignoredEventTimes) } : {}),
      onProbeOverflow: (n) => metrics?.probeDropped.inc({ cluster: cluster.name, what: 'finding', reason: 'over-cap' }, n),
      ...(run.signal ? { signal: run.signal } : {}),
    });
    // Many ServiceAccounts refused in the same minute across namespaces is the cluster's doing (a key rotation), not
    // many clients caching tokens: the recovered ones lose that cause (src/findings/cluster-events.ts).
    run.outcome.clusterEvents = derived.clusterEvents;
    return { ...derived, ...(probe.error !== undefined ? { probeError: probe.error } : {}) };
  }

  /** The node-probe reports of the cluster; a read failure (not an abort) is logged and returned as `error`. */
  private async readProbeReports(run: PollRun): Promise<{ reports?: readonly ProbeReport[]; error?: string }> {
    if (!this.deps.probe) return {};
    try {
      return { reports: await untilAborted(this.deps.probe.read(), run.signal) };
    } catch (err) {
      if (run.signal?.aborted) throw err;
      const error = err instanceof Error ? err.message : String(err);
      run.log.warn({ error }, 'node-probe reports unavailable');
      return { error };
    }
  }

  /**
   * Step "store": saves the findings (fenced), resolves quiet ones, applies retention, updates the gauges and
   * finishes the poll run.
   */
  private async storeFindings(run: PollRun, runId: number, findings: Finding[], now: number): Promise<void> {
    const { store, cluster, fence } = this.deps;
    const { outcome } = run;
    const retention = this.deps.retention ?? POLLER_DEFAULTS.retention;
    const quietMs = this.deps.quietPeriodMs ?? POLLER_DEFAULTS.quietPeriodMs;
    outcome.changes = fence
      ? await store.transaction(async (tx) => {
          await fence(tx);
          return await tx.findings.save(cluster.name, findings, now);
        })
      : await store.findings.save(cluster.name, findings, now);
    outcome.findings = findings;
    outcome.concluded = await this.concludeQuiet(now, quietMs);
    for (const c of outcome.changes) if (outcome.concluded.includes(c.id)) c.status = 'resolved';
    outcome.pruned.pollRuns = await store.polls.pruneRuns(now - Math.max(retention.pollRunsMs, quietMs + HOUR_MS));
    outcome.pruned.actionLog = await store.actions.prune(now - retention.actionLogMs);
    // Gauges count open findings only: resolved (verified, quiet) and snoozed ones are not "open". Their status is
    // the one the save (and the quiet resolution just above) left, with no read of the store.
    const open = new Set(outcome.changes.filter((c) => c.status === 'open').map((c) => c.id));
    this.updateGauges(findings.filter((f) => open.has(f.id)), now);
    outcome.endedAt = this.clock();
    await store.polls.finishRun(runId, { endedAt: outcome.endedAt, events: outcome.records, tokenUses: outcome.newUses });
    this.deps.blind?.observePoll(run.startedAt, outcome.records);
    if (run.sourceStats.platformHints) this.deps.blind?.observePlatformHints?.(run.startedAt, run.sourceStats.platformHints);
    // Start of the readiness verdict's window: recorded once for good (the first time stays), so once per process.
    if (!this.watchedMarked) {
      await store.polls.markWatchedSince(cluster.name, run.startedAt);
      this.watchedMarked = true;
    }
  }

  /** Health, metrics and the log line of a successful poll. */
  private recordSuccess(run: PollRun, derived: DerivedFindings & { probeError?: string }): void {
    const { cluster, metrics } = this.deps;
    const { outcome, sourceStats, startedAt } = run;
    const { findings, metricsError, probeError } = derived;
    const stateProblem = findings.find((f) => f.clusterState && !('none' in cluster.kubernetes))?.clusterState;
    // A Kubernetes read that timed out (a slow or hung API server) leaves the poll's findings without that read: the
    // cluster shows degraded, not healthy. The three timeout texts: src/cluster/kube.ts, src/probe/objects.ts,
    // src/sources/apiserver-metrics.ts ("… timed out after <n> ms …").
    const hung = [stateProblem, probeError, metricsError].find((e) => e !== undefined && TIMED_OUT.test(e));
    this.healthState = {
      ...this.healthState,
      status: hung ? 'degraded' : 'ok',
      lastPollAt: startedAt,
      lastSuccessAt: startedAt,
      lastError: hung ? `Kubernetes API not answering: ${hung}` : undefined,
      failingSince: undefined,
      stateError: stateProblem,
      metricsError,
      probeError,
      clusterEvents: outcome.clusterEvents,
      ignoredEventTimes: outcome.ignoredEventTimes,
      lastPollCost: { requests: sourceStats.requests, bytes: sourceStats.bytes, ...(sourceStats.insights ? { insights: { ...sourceStats.insights } } : {}) },
    };
    if (sourceStats.insights) metrics?.pollInsightsBytes.set({ cluster: cluster.name }, sourceStats.insights.bytesScanned);
    metrics?.polls.inc({ cluster: cluster.name, outcome: 'ok' });
    metrics?.pollFailing.set({ cluster: cluster.name }, hung ? 1 : 0);
    metrics?.pollLastSuccess.set({ cluster: cluster.name }, startedAt / 1000);
    run.log.info(
      {
        records: outcome.records,
        newUses: outcome.newUses,
        duplicates: outcome.duplicates,
        malformed: outcome.malformed,
        requests: sourceStats.requests,
        findings: findings.length,
        recordsWritten: outcome.recordsWritten,
        ...(outcome.concluded.length ? { concludedQuiet: outcome.concluded.length } : {}),
        ...(outcome.pruned.tokenRecords + outcome.pruned.pollRuns + outcome.pruned.actionLog > 0 ? { pruned: outcome.pruned } : {}),
      },
      'poll finished',
    );
  }

  /** Steps "notify" then "verify" ({@link PollerDeps.notify}, {@link PollerDeps.verify}); a failure of either is logged. */
  private async notifyAndVerify(run: PollRun): Promise<void> {
    if (this.deps.notify) {
      try {
        await this.deps.notify(run.outcome.findings, run.outcome);
      } catch (err) {
        run.log.error({ err }, 'notifying findings failed');
      }
    }
    if (this.deps.verify) {
      try {
        await this.deps.verify(run.outcome);
      } catch (err) {
        run.log.error({ err }, 'verification after the poll failed');
      }
    }
  }

  /**
   * A failed or aborted poll: an aborted one (serve stopping) is returned as it stands; a failed one marks the cluster
   * degraded and is recorded in its poll run. The cursor stays at the last committed chunk.
   */
  private async recordFailure(run: PollRun, err: unknown): Promise<PollOutcome> {
    const { cluster, store, metrics } = this.deps;
    const { outcome, log, signal } = run;
    // Scrubbed: this text reaches `/tokens status` (Slack) and the store.
    const unavailable = isStoreUnavailable(err);
    const message = unavailable ? 'store unavailable: the database cannot be reached' : scrubSecrets(err instanceof Error ? err.message : String(err));
    outcome.error = message;
    outcome.endedAt = this.clock();
    if (signal?.aborted) {
      log.info({ reason: scrubSecrets(String((signal.reason as Error | undefined)?.message ?? signal.reason)) }, 'poll aborted; the next poll reads on from the last committed chunk');
      return outcome;
    }
    if (unavailable) outcome.storeUnavailable = true;
    this.deps.blind?.observeFailedPoll?.(run.startedAt, err instanceof SourceError ? err.blind : undefined);
    // Health and metrics first: recording the failed run needs the store, which may be what failed (disk full).
    const failingSince = this.healthState.lastError !== undefined ? (this.healthState.failingSince ?? run.startedAt) : run.startedAt;
    this.healthState = { ...this.healthState, status: 'degraded', lastPollAt: run.startedAt, lastError: message, failingSince };
    metrics?.polls.inc({ cluster: cluster.name, outcome: 'error' });
    metrics?.pollFailing.set({ cluster: cluster.name }, 1);
    log.error(
      { err, code: err instanceof SourceError ? err.awsCode : (err as { code?: string }).code },
      unavailable ? 'poll failed: the store (database) is unavailable; cluster marked degraded, cursor kept at the last committed chunk' : 'poll failed; cluster marked degraded, cursor kept at the last committed chunk',
    );
    if (run.runId !== undefined) {
      try {
        await store.polls.finishRun(run.runId, { endedAt: outcome.endedAt, events: outcome.records, tokenUses: outcome.newUses, error: message });
      } catch (err2) {
        log.error({ err: err2 }, 'could not record the failed poll in the store');
      }
    }
    return outcome;
  }

  /**
   * Quiet resolution (module docstring): resolves every open or snoozed finding of the cluster whose signal has been
   * absent for `quietMs` while the cluster's polls succeeded over the whole period. Returns the ids resolved.
   */
  private async concludeQuiet(now: number, quietMs: number): Promise<string[]> {
    const { store, cluster } = this.deps;
    const from = now - quietMs;
    const coverage = await store.polls.coverage(cluster.name, from);
    // A broken source never resolves anything: one failed poll in the period, or no successful poll before it, and
    // the absence of a signal proves nothing.
    if (coverage.failed > 0 || coverage.lastSuccessAtOrBefore === null) return [];
    const resolved: string[] = [];
    for (const s of await store.findings.list(cluster.name, { status: ['open', 'snoozed'] })) {
      const f = s.finding;
      const lastSeen = Date.parse(f.lastSeen);
      if (!Number.isFinite(lastSeen) || lastSeen > from) continue;
      if (f.kind === 'stale-token' && f.rejectionAt !== null) continue; // a live token: it may be used any time
      if (!await store.findings.setStatus(f.id, { status: 'resolved', reason: 'quiet' }, now)) continue;
      await store.actions.log({
        at: now,
        cluster: cluster.name,
        findingId: f.id,
        actor: null,
        action: 'finding.quiet',
        target: `ServiceAccount ${f.namespace}/${f.serviceAccount}`,
        result: 'resolved',
        detail: `no ${f.kind} signal since ${f.lastSeen} (${Math.round(quietMs / HOUR_MS)} h quiet period) while every poll succeeded`,
      });
      resolved.push(f.id);
    }
    if (resolved.length) this.deps.logger.info({ cluster: cluster.name, findings: resolved }, 'findings resolved as quiet');
    return resolved;
  }

  private updateGauges(findings: Finding[], now: number): void {
    const m = this.deps.metrics;
    if (!m) return;
    const name = this.deps.cluster.name;
    for (const sev of SEVERITIES) m.openFindings.set({ cluster: name, severity: sev }, findings.filter((f) => f.severity === sev).length);
    const rej = findings.map((f) => (f.rejectionAt ? Date.parse(f.rejectionAt) : NaN)).filter((t) => Number.isFinite(t));
    if (rej.length) m.daysToRejection.set({ cluster: name }, (Math.min(...rej) - now) / DAY_MS);
    else m.daysToRejection.remove({ cluster: name });
  }
}
