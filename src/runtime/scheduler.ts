/**
 * Runs one job per cluster on a cron schedule (node-cron 4).
 *
 * - `noOverlap`: a poll still running when its next tick comes is not started again; the skipped
 *   tick is counted (`execution:overlap`, node-cron `src/tasks/scheduled-task.ts`).
 * - A first run at {@link Scheduler.start}, spread by a random jitter so many clusters do not hit
 *   the CloudWatch quota (5 FilterLogEvents/s per account and region) at once.
 * - Spread by design ({@link SchedulerOptions.spread}): each job runs at a stable offset after its cron tick, a hash of its
 *   name mapped into the schedule's interval (the shortest gap between its next runs), so N clusters on one schedule
 *   start their polls evenly over the interval instead of all at the tick; the random jitter comes on top.
 * - Bounded concurrency ({@link SchedulerOptions.concurrency}, `p-limit`): at most that many runs at once; the others
 *   wait in a queue (a job waiting there counts as running for the overlap guard).
 * - Every run gets an `AbortSignal`; {@link Scheduler.stop} stops new runs, aborts running ones (SIGTERM handling:
 *   shutdown does not wait out a slow cluster) and waits for them to settle.
 * - {@link Scheduler.runNow} runs a job at once (`/tokens scan <cluster>`), unless it is already running.
 * - No tick is lost without a trace. node-cron drops a tick whose timer fires later than its
 *   `missedExecutionTolerance` (1 s; a blocked event loop) and emits `execution:missed` for it
 *   (node-cron 4 `TaskEvent`, https://github.com/node-cron/node-cron). The scheduler listens: a missed tick
 *   runs at once, late ({@link SchedulerOptions.onLate}), unless the job is running; a scheduled tick that
 *   cannot run is reported to {@link SchedulerOptions.onMissed} with a {@link MissReason}.
 */
import { createHash } from 'node:crypto';
import { ErrorCode, TokenwatchError } from '../errors.js';
/** What {@link Scheduler.runNow} returns is what `/tokens scan` answers with, defined by the Slack context. */
import type { RunNowResult } from '../slack/context.js';
import { createTask, type ScheduledTask } from 'node-cron';
import pLimit, { type LimitFunction } from 'p-limit';

/** One scheduled job. */
export interface Job {
  /** Unique name, e.g. the cluster name. */
  name: string;
  /** Cron expression (5 or 6 fields), validated by the config. */
  schedule: string;
  /**
   * The work. Errors are caught, reported through `onError`, and do not stop the schedule. `signal` aborts when the
   * scheduler stops (the run should end promptly, e.g. pass it to its requests). `tick`: the cron tick this run is
   * for (epoch ms, node-cron's scheduled time, before the spread offset): set for scheduled and late runs and for a
   * {@link Scheduler.runNow} given one; undefined for the start-up run and a plain `runNow`.
   */
  run: (signal: AbortSignal, tick?: number) => Promise<void>;
}

/**
 * Why a scheduled tick did not start a run:
 * - `overlap`: the job's previous run, started before this tick was due, was still going;
 * - `coalesced`: a run that started at or after this tick was due (a late run for an earlier missed tick,
 *   or the on-time run of the same timer beat) was still going, so this tick was folded into it. A poll
 *   reads from its stored cursor, so a coalesced tick delays audit events but loses none.
 */
export type MissReason = 'overlap' | 'coalesced';

/** A scheduled tick that did not start a run. */
export interface MissedTick {
  /** When the tick was due, epoch ms UTC. */
  dueAt: number;
  reason: MissReason;
}

/** Options of {@link Scheduler}. */
export interface SchedulerOptions {
  /** Max random delay in ms before each run (and before the first run). Default 10,000 ms; 0 in tests. */
  jitterMs?: number;
  /** Called when a tick was skipped because the previous run of that job was still going. */
  onOverlap?: (job: string) => void;
  /** Called for every scheduled tick that did not start a run (see {@link MissReason}). */
  onMissed?: (job: string, tick: MissedTick) => void;
  /** Called when a tick that node-cron reported as missed (its timer fired late) ran late; `lateMs` past its due time. */
  onLate?: (job: string, tick: { dueAt: number; lateMs: number }) => void;
  /** Called when a run threw. */
  onError?: (job: string, err: unknown) => void;
  /** Whether to run every job once at start. Default true. */
  runAtStart?: boolean;
  /**
   * Gate checked before each run of `job`; returns false to skip (`Ownership.owns`: this process holds the store's
   * poller lock, or owns the cluster shared out across replicas). Default: always run.
   */
  shouldRun?: (job: string) => boolean;
  /**
   * Whether scheduled runs start at the job's stable offset within its interval ({@link spreadOffsetMs}) after the
   * cron tick. Default false (runs at the tick); serve turns it on (`poll.spread`).
   */
  spread?: boolean;
  /** Most runs at once, across all jobs (`poll.concurrency` in serve). Default: no limit. */
  concurrency?: number;
}

/**
 * The stable offset of job `name` within an interval of `intervalMs`: the first 32 bits of SHA-256 of the name, as a
 * fraction of 2^32, times the interval (ms, in [0, intervalMs)). Names hash evenly, so N jobs spread about evenly.
 */
export function spreadOffsetMs(name: string, intervalMs: number): number {
  if (!(intervalMs > 0)) return 0;
  const h = createHash('sha256').update(name).digest().readUInt32BE(0);
  return Math.floor((h / 2 ** 32) * intervalMs);
}

/** The shortest gap between the next runs of a node-cron task, ms (its interval; 0 when it cannot tell). */
function intervalOf(task: ScheduledTask): number {
  const runs = task.getNextRuns(4).map((d) => d.getTime());
  let min = Infinity;
  for (let i = 1; i < runs.length; i++) min = Math.min(min, runs[i]! - runs[i - 1]!);
  return Number.isFinite(min) ? min : 0;
}

/** Schedules jobs; see the module docstring. */
export class Scheduler {
  private readonly tasks = new Map<string, ScheduledTask>();
  private readonly running = new Map<string, Promise<void>>();
  /** When each running job's run started, epoch ms (node-cron's clock: `Date`). */
  private readonly startedAt = new Map<string, number>();
  private readonly jobs = new Map<string, Job>();
  private stopped = false;
  private readonly timers = new Set<NodeJS.Timeout>();
  /** The abort controller of each running (or queued) run. */
  private readonly controllers = new Map<string, AbortController>();
  /** Each job's offset after its cron tick, ms (0 without `spread`). */
  private readonly offsets = new Map<string, number>();
  private readonly limit: LimitFunction | undefined;
  /** Ticks skipped per job because a run was still in progress. */
  readonly overlaps = new Map<string, number>();
  /** Scheduled ticks that did not start a run, per job and reason. */
  readonly missed = new Map<string, Record<MissReason, number>>();

  constructor(private readonly opts: SchedulerOptions = {}) {
    const c = opts.concurrency;
    this.limit = c !== undefined && Number.isFinite(c) && c > 0 ? pLimit({ concurrency: Math.floor(c), rejectOnClear: true }) : undefined;
  }

  /** A job's offset after its cron tick, ms (see {@link SchedulerOptions.spread}); 0 for an unknown job. */
  offsetOf(name: string): number {
    return this.offsets.get(name) ?? 0;
  }

  /** Runs waiting for a concurrency slot now (0 without a limit). */
  get queued(): number {
    return this.limit?.pendingCount ?? 0;
  }

  /** The max random delay before each run, ms (`SchedulerOptions.jitterMs`, default 10,000; `poll.jitter` in serve). */
  get jitterMs(): number {
    return this.opts.jitterMs ?? 10_000;
  }

  /** Registers and starts the jobs. Call once. */
  start(jobs: Job[]): void {
    const jitter = this.jitterMs;
    for (const job of jobs) {
      this.jobs.set(job.name, job);
      const task = createTask(job.schedule, (ctx) => this.scheduled(job.name, ctx.date.getTime()), {
        name: `poll:${job.name}`,
        noOverlap: false, // overlap is handled by tick() so that runNow() and the schedule share one guard
        maxRandomDelay: jitter,
      });
      // Registering the listener also stops node-cron's own "missed execution" warning: the handler logs instead.
      task.on('execution:missed', (ctx) => this.late(job.name, ctx.date.getTime()));
      this.tasks.set(job.name, task);
      this.offsets.set(job.name, this.opts.spread ? spreadOffsetMs(job.name, intervalOf(task)) : 0);
      void task.start();
      if (this.opts.runAtStart ?? true) {
        const t = setTimeout(() => {
          this.timers.delete(t);
          void this.tick(job.name);
        }, jitter > 0 ? Math.floor(Math.random() * jitter) : 0);
        this.timers.add(t);
      }
    }
  }

  /** Whether a job is running now. */
  isBusy(name: string): boolean {
    return this.running.has(name);
  }

  /**
   * Starts a job now unless it is running (`tick`: the cron tick it runs for, e.g. a tick a take-over catches up;
   * passed to {@link Job.run}, not counted as missed when busy); returns at once.
   */
  runNow(name: string, tick?: number): RunNowResult {
    if (this.stopped) return 'stopped';
    if (!this.jobs.has(name)) return 'unknown-job';
    if (this.running.has(name)) return 'busy';
    void this.tick(name, undefined, tick);
    return 'started';
  }

  /**
   * The job's latest cron tick whose run is due by now (its spread offset past), epoch ms; undefined for an unknown job
   * or a schedule without a regular interval.
   */
  previousTick(name: string): number | undefined {
    const due = this.previousDue(name);
    return due === undefined ? undefined : due - (this.offsets.get(name) ?? 0);
  }

  /**
   * The job's cron ticks `t` with `from < t < to` (epoch ms, ascending), from node-cron's own matcher (`task.match`)
   * stepped by the pattern's resolution (a second for 6-field patterns, else a minute); at most the last `max`
   * (default 1,000). Empty for an unknown job.
   */
  ticksBetween(name: string, from: number, to: number, max = 1000): number[] {
    const task = this.tasks.get(name);
    const job = this.jobs.get(name);
    if (!task || !job || !(to > from)) return [];
    const step = job.schedule.trim().split(/\s+/).length >= 6 ? 1000 : 60_000;
    const out: number[] = [];
    // Walk back from the last step before `to`, at most 100,000 steps (a day of seconds; 69 days of minutes).
    for (let t = Math.ceil(to / step) * step - step, n = 0; t > from && n < 100_000 && out.length < max; t -= step, n++) {
      if (t < to && task.match(new Date(t))) out.push(t);
    }
    return out.reverse();
  }

  /**
   * Aborts the job's running (or queued) run, if any, with `reason` (a cluster this replica no longer owns: its
   * commits would be refused anyway). Returns whether one was running.
   */
  abort(name: string, reason: Error): boolean {
    const c = this.controllers.get(name);
    if (!c) return false;
    c.abort(reason);
    return true;
  }

  /**
   * When the job's latest scheduled run was due, epoch ms (node-cron's clock, `Date`): its next cron tick minus its
   * interval, plus its spread offset. Undefined for an unknown job or a schedule without a regular interval.
   */
  previousDue(name: string): number | undefined {
    const task = this.tasks.get(name);
    if (!task) return undefined;
    const interval = intervalOf(task);
    const next = task.getNextRun()?.getTime();
    if (!(interval > 0) || next === undefined) return undefined;
    const due = next - interval + (this.offsets.get(name) ?? 0);
    return due > Date.now() ? due - interval : due;
  }

  /** The promise of a job's current run, if any (tests await it). */
  current(name: string): Promise<void> | undefined {
    return this.running.get(name);
  }

  /** A cron tick: runs the job at its offset after the tick (at once without `spread`). */
  private scheduled(name: string, dueAt: number): Promise<void> | undefined {
    const offset = this.offsets.get(name) ?? 0;
    if (offset <= 0) return this.tick(name, dueAt);
    const t = setTimeout(() => {
      this.timers.delete(t);
      void this.tick(name, dueAt);
    }, offset);
    this.timers.add(t);
    return undefined;
  }

  /** A tick node-cron reported as missed (its timer fired past the tolerance): run it now, late, or report it. */
  private late(name: string, dueAt: number): void {
    if (this.stopped || !this.jobs.has(name)) return;
    if (!this.running.has(name) && this.opts.shouldRun && !this.opts.shouldRun(name)) return; // a follower polls nothing
    const ran = !this.running.has(name);
    void this.tick(name, dueAt);
    if (ran) this.opts.onLate?.(name, { dueAt, lateMs: Math.max(0, Date.now() - dueAt) });
  }

  /**
   * `dueAt`: when a scheduled tick was due (epoch ms); undefined for the start run and {@link runNow}. `forTick`: the
   * tick a {@link runNow} runs for. The run gets `dueAt ?? forTick`.
   */
  private tick(name: string, dueAt?: number, forTick?: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    const job = this.jobs.get(name);
    if (!job) return Promise.resolve();
    if (this.running.has(name)) {
      this.overlaps.set(name, (this.overlaps.get(name) ?? 0) + 1);
      this.opts.onOverlap?.(name);
      if (dueAt !== undefined) {
        const reason: MissReason = (this.startedAt.get(name) ?? 0) >= dueAt ? 'coalesced' : 'overlap';
        const counts = this.missed.get(name) ?? { overlap: 0, coalesced: 0 };
        counts[reason]++;
        this.missed.set(name, counts);
        this.opts.onMissed?.(name, { dueAt, reason });
      }
      return Promise.resolve();
    }
    if (this.opts.shouldRun && !this.opts.shouldRun(name)) return Promise.resolve();
    const controller = new AbortController();
    const body = async (): Promise<void> => {
      if (controller.signal.aborted) return; // stopped while it waited for a slot
      await job.run(controller.signal, dueAt ?? forTick);
    };
    const p = (async () => {
      try {
        await (this.limit ? this.limit(body) : body());
      } catch (err) {
        if (!controller.signal.aborted) this.opts.onError?.(name, err);
      } finally {
        this.running.delete(name);
        this.startedAt.delete(name);
        this.controllers.delete(name);
      }
    })();
    this.controllers.set(name, controller);
    this.running.set(name, p);
    this.startedAt.set(name, Date.now());
    return p;
  }

  /**
   * Stops scheduling, aborts running jobs (their `signal`; queued ones never start) and waits for them to settle
   * (bounded by `timeoutMs`, default 60 s).
   */
  async stop(timeoutMs = 60_000): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    for (const task of this.tasks.values()) await task.destroy();
    for (const c of this.controllers.values()) c.abort(new TokenwatchError(ErrorCode.Aborted, 'the scheduler is stopping (shutdown)'));
    this.limit?.clearQueue();
    const pending = [...this.running.values()];
    if (pending.length === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled(pending),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      }),
    ]);
    if (timer) clearTimeout(timer);
  }
}
