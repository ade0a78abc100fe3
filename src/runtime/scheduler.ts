/**
 * Runs one job per cluster on a cron schedule (node-cron 4).
 *
 * - `noOverlap`: a poll still running when its next tick comes is not started again; the skipped
 *   tick is counted (`execution:overlap`, node-cron `src/tasks/scheduled-task.ts`).
 * - A first run at {@link Scheduler.start}, spread by a random jitter so many clusters do not hit
 *   the CloudWatch quota (5 FilterLogEvents/s per account and region) at once.
 * - {@link Scheduler.stop} stops new runs and waits for running ones (SIGTERM handling).
 * - {@link Scheduler.runNow} runs a job at once (`/tokens scan <cluster>`), unless it is already running.
 * - No tick is lost without a trace. node-cron drops a tick whose timer fires later than its
 *   `missedExecutionTolerance` (1 s; a blocked event loop) and emits `execution:missed` for it
 *   (node-cron 4 `TaskEvent`, https://github.com/node-cron/node-cron). The scheduler listens: a missed tick
 *   runs at once, late ({@link SchedulerOptions.onLate}), unless the job is running; a scheduled tick that
 *   cannot run is reported to {@link SchedulerOptions.onMissed} with a {@link MissReason}.
 */
/** What {@link Scheduler.runNow} returns is what `/tokens scan` answers with, defined by the Slack context. */
import type { RunNowResult } from '../slack/context.js';
import { createTask, type ScheduledTask } from 'node-cron';

/** One scheduled job. */
export interface Job {
  /** Unique name, e.g. the cluster name. */
  name: string;
  /** Cron expression (5 or 6 fields), validated by the config. */
  schedule: string;
  /** The work. Errors are caught, reported through `onError`, and do not stop the schedule. */
  run: () => Promise<void>;
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
  /** Gate checked before each run; returns false to skip (used for leader election). Default: always run. */
  shouldRun?: () => boolean;
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
  /** Ticks skipped per job because a run was still in progress. */
  readonly overlaps = new Map<string, number>();
  /** Scheduled ticks that did not start a run, per job and reason. */
  readonly missed = new Map<string, Record<MissReason, number>>();

  constructor(private readonly opts: SchedulerOptions = {}) {}

  /** The max random delay before each run, ms (`SchedulerOptions.jitterMs`, default 10,000; `poll.jitter` in serve). */
  get jitterMs(): number {
    return this.opts.jitterMs ?? 10_000;
  }

  /** Registers and starts the jobs. Call once. */
  start(jobs: Job[]): void {
    const jitter = this.jitterMs;
    for (const job of jobs) {
      this.jobs.set(job.name, job);
      const task = createTask(job.schedule, (ctx) => this.tick(job.name, ctx.date.getTime()), {
        name: `poll:${job.name}`,
        noOverlap: false, // overlap is handled by tick() so that runNow() and the schedule share one guard
        maxRandomDelay: jitter,
      });
      // Registering the listener also stops node-cron's own "missed execution" warning: the handler logs instead.
      task.on('execution:missed', (ctx) => this.late(job.name, ctx.date.getTime()));
      this.tasks.set(job.name, task);
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

  /** Starts a job now unless it is running; resolves once it has started (not finished). */
  runNow(name: string): RunNowResult {
    if (this.stopped) return 'stopped';
    if (!this.jobs.has(name)) return 'unknown-job';
    if (this.running.has(name)) return 'busy';
    void this.tick(name);
    return 'started';
  }

  /** The promise of a job's current run, if any (tests await it). */
  current(name: string): Promise<void> | undefined {
    return this.running.get(name);
  }

  /** A tick node-cron reported as missed (its timer fired past the tolerance): run it now, late, or report it. */
  private late(name: string, dueAt: number): void {
    if (this.stopped || !this.jobs.has(name)) return;
    if (!this.running.has(name) && this.opts.shouldRun && !this.opts.shouldRun()) return; // a follower polls nothing
    const ran = !this.running.has(name);
    void this.tick(name, dueAt);
    if (ran) this.opts.onLate?.(name, { dueAt, lateMs: Math.max(0, Date.now() - dueAt) });
  }

  /** `dueAt`: when a scheduled tick was due (epoch ms); undefined for the start run and {@link runNow}. */
  private tick(name: string, dueAt?: number): Promise<void> {
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
    if (this.opts.shouldRun && !this.opts.shouldRun()) return Promise.resolve();
    const p = (async () => {
      try {
        await job.run();
      } catch (err) {
        this.opts.onError?.(name, err);
      } finally {
        this.running.delete(name);
        this.startedAt.delete(name);
      }
    })();
    this.running.set(name, p);
    this.startedAt.set(name, Date.now());
    return p;
  }

  /** Stops scheduling and waits for running jobs to finish (bounded by `timeoutMs`, default 60 s). */
  async stop(timeoutMs = 60_000): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    for (const task of this.tasks.values()) await task.destroy();
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
