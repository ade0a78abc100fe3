/**
 * Runs one job per cluster on a cron schedule (node-cron 4).
 *
 * - `noOverlap`: a poll still running when its next tick comes is not started again; the skipped
 *   tick is counted (`execution:overlap`, node-cron `src/tasks/scheduled-task.ts`).
 * - A first run at {@link Scheduler.start}, spread by a random jitter so many clusters do not hit
 *   the CloudWatch quota (5 FilterLogEvents/s per account and region) at once.
 * - {@link Scheduler.stop} stops new runs and waits for running ones (SIGTERM handling).
 * - {@link Scheduler.runNow} runs a job at once (`/tokens scan <cluster>`), unless it is already running.
 */
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

/** Options of {@link Scheduler}. */
export interface SchedulerOptions {
  /** Max random delay in ms before each run (and before the first run). Default 10,000 ms; 0 in tests. */
  jitterMs?: number;
  /** Called when a tick was skipped because the previous run of that job was still going. */
  onOverlap?: (job: string) => void;
  /** Called when a run threw. */
  onError?: (job: string, err: unknown) => void;
  /** Whether to run every job once at start. Default true. */
  runAtStart?: boolean;
  /** Gate checked before each run; returns false to skip (used for leader election). Default: always run. */
  shouldRun?: () => boolean;
}

/** Result of {@link Scheduler.runNow}. */
export type RunNowResult = 'started' | 'busy' | 'unknown-job' | 'stopped';

/** Schedules jobs; see the module docstring. */
export class Scheduler {
  private readonly tasks = new Map<string, ScheduledTask>();
  private readonly running = new Map<string, Promise<void>>();
  private readonly jobs = new Map<string, Job>();
  private stopped = false;
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Ticks skipped per job because a run was still in progress. */
  readonly overlaps = new Map<string, number>();

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
      const task = createTask(job.schedule, () => this.tick(job.name), {
        name: `poll:${job.name}`,
        noOverlap: false, // overlap is handled by tick() so that runNow() and the schedule share one guard
        maxRandomDelay: jitter,
        suppressMissedWarning: true,
      });
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

  private tick(name: string): Promise<void> {
    if (this.stopped) return Promise.resolve();
    const job = this.jobs.get(name);
    if (!job) return Promise.resolve();
    if (this.running.has(name)) {
      this.overlaps.set(name, (this.overlaps.get(name) ?? 0) + 1);
      this.opts.onOverlap?.(name);
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
      }
    })();
    this.running.set(name, p);
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
