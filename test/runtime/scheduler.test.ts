import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Scheduler, spreadOffsetMs } from '../../src/runtime/scheduler.js';

let sched: Scheduler | undefined;
afterEach(async () => {
  await sched?.stop(1000);
  sched = undefined;
});

describe('Scheduler', () => {
  it('runs each job once at start, before the first cron tick', async () => {
    const runs: string[] = [];
    sched = new Scheduler({ jitterMs: 0 });
    sched.start([
      { name: 'a', schedule: '0 0 1 1 *', run: async () => void runs.push('a') },
      { name: 'b', schedule: '0 0 1 1 *', run: async () => void runs.push('b') },
    ]);
    await sleep(50);
    expect(runs.sort()).toEqual(['a', 'b']);
  });

  it('skips and counts a tick while the previous run is still going, and runNow says busy', async () => {
    let active = 0;
    let maxActive = 0;
    const overlapped: string[] = [];
    sched = new Scheduler({ jitterMs: 0, onOverlap: (j) => overlapped.push(j) });
    sched.start([
      {
        name: 'slow',
        schedule: '* * * * * *', // every second
        run: async () => {
          active++;
          maxActive = Math.max(maxActive, active);
          await sleep(2300);
          active--;
        },
      },
    ]);
    await sleep(100);
    expect(sched.isBusy('slow')).toBe(true);
    expect(sched.runNow('slow')).toBe('busy');
    await sleep(2100);
    expect(maxActive).toBe(1);
    expect(sched.overlaps.get('slow') ?? 0).toBeGreaterThanOrEqual(2); // two or three ticks fell inside the 2.3 s run (plus the runNow)
    expect(overlapped.length).toBe(sched.overlaps.get('slow'));
  });

  it('stop() waits for the running job and starts no new one', async () => {
    let finished = 0;
    let started = 0;
    sched = new Scheduler({ jitterMs: 0 });
    sched.start([{ name: 'x', schedule: '* * * * * *', run: async () => { started++; await sleep(300); finished++; } }]);
    await sleep(50);
    await sched.stop();
    expect(finished).toBe(started);
    const before = started;
    await sleep(1200);
    expect(started).toBe(before);
    expect(sched.runNow('x')).toBe('stopped');
  });

  it('reports errors and keeps the schedule alive; shouldRun gates runs', async () => {
    const errors: unknown[] = [];
    let gate = false;
    let runs = 0;
    sched = new Scheduler({ jitterMs: 0, runAtStart: false, onError: (_j, e) => errors.push(e), shouldRun: () => gate });
    sched.start([{ name: 'e', schedule: '0 0 1 1 *', run: async () => { runs++; throw new Error('boom'); } }]);
    expect(sched.runNow('e')).toBe('started');
    await sleep(20);
    expect(runs).toBe(0); // gate closed: a follower does not poll
    gate = true;
    sched.runNow('e');
    await sched.current('e');
    expect(runs).toBe(1);
    expect(errors.map((e) => (e as Error).message)).toEqual(['boom']);
    expect(sched.runNow('nope')).toBe('unknown-job');
  });
});

describe('Scheduler: spread, concurrency, abort', () => {
  async function until(cond: () => boolean): Promise<void> {
    while (!cond()) await sleep(10);
  }

  it('gives each job a stable offset within its schedule interval, spread about evenly over it', () => {
    const five = 5 * 60_000;
    expect(spreadOffsetMs('prod-eks', five)).toBe(spreadOffsetMs('prod-eks', five)); // stable across calls (and restarts)
    const offsets = Array.from({ length: 1000 }, (_, i) => spreadOffsetMs(`cluster-${i}`, five));
    expect(Math.min(...offsets)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...offsets)).toBeLessThan(five);
    // 1,000 clusters in ten 30 s slots: about 100 each (binomial, sd ≈ 9.5; ±40 is over 4 sd).
    const slots = new Array<number>(10).fill(0);
    for (const o of offsets) slots[Math.floor(o / 30_000)]!++;
    for (const n of slots) {
      expect(n).toBeGreaterThan(60);
      expect(n).toBeLessThan(140);
    }
    expect(spreadOffsetMs('x', 0)).toBe(0);
  });

  it('derives the interval from the cron schedule: a minute for "* * * * *", five for "*/5 * * * *"', () => {
    sched = new Scheduler({ jitterMs: 0, runAtStart: false, spread: true });
    sched.start([
      { name: 'a', schedule: '* * * * *', run: async () => undefined },
      { name: 'b', schedule: '*/5 * * * *', run: async () => undefined },
    ]);
    expect(sched.offsetOf('a')).toBe(spreadOffsetMs('a', 60_000));
    expect(sched.offsetOf('b')).toBe(spreadOffsetMs('b', 300_000));
    const plain = new Scheduler({ jitterMs: 0, runAtStart: false });
    plain.start([{ name: 'a', schedule: '* * * * *', run: async () => undefined }]);
    expect(plain.offsetOf('a')).toBe(0); // without spread: at the tick
    return plain.stop(100);
  });

  it('lists the cron ticks between two times (node-cron\'s matcher), and the latest tick due by now', () => {
    sched = new Scheduler({ jitterMs: 0, runAtStart: false });
    sched.start([
      { name: 's', schedule: '*/15 * * * * *', run: async () => undefined },
      { name: 'm', schedule: '*/5 * * * *', run: async () => undefined },
    ]);
    const base = Date.UTC(2026, 11, 2, 10, 0, 0); // a whole hour: a tick of both
    expect(sched.ticksBetween('s', base, base + 60_000)).toEqual([base + 15_000, base + 30_000, base + 45_000]); // both ends excluded
    expect(sched.ticksBetween('s', base - 1, base + 1)).toEqual([base]);
    expect(sched.ticksBetween('m', base - 1, base + 11 * 60_000)).toEqual([base, base + 5 * 60_000, base + 10 * 60_000]);
    expect(sched.ticksBetween('s', base, base + 3_600_000, 2)).toEqual([base + 3_600_000 - 30_000, base + 3_600_000 - 15_000]); // the last `max`
    expect(sched.ticksBetween('s', base, base)).toEqual([]);
    expect(sched.ticksBetween('nope', base, base + 60_000)).toEqual([]);
    const now = Date.now();
    const tick = sched.previousTick('s')!;
    expect(tick % 15_000).toBe(0);
    expect(tick).toBeLessThanOrEqual(Date.now());
    expect(tick).toBeGreaterThan(now - 15_000 - 1000); // the latest one (1 s for a second that turned meanwhile)
    expect(sched.previousTick('nope')).toBeUndefined();
  });

  it('passes the tick to the run: the cron tick for a scheduled run, the given one for runNow, none at start', async () => {
    const got: (number | undefined)[] = [];
    sched = new Scheduler({ jitterMs: 0 });
    sched.start([{ name: 'j', schedule: '* * * * * *', run: async (_signal, tick) => void got.push(tick) }]);
    await vi.waitFor(() => expect(got.length).toBeGreaterThanOrEqual(2), { timeout: 30_000, interval: 20 });
    expect(got[0]).toBeUndefined(); // the start-up run
    expect(got[1]! % 1000).toBe(0);
    await vi.waitFor(() => expect(sched!.runNow('j', 1234)).toBe('started'), { timeout: 30_000, interval: 5 });
    await vi.waitFor(() => expect(got).toContain(1234), { timeout: 30_000, interval: 20 });
  });

  it('runs at most `concurrency` jobs at once; the others queue and run as slots free up', async () => {
    let active = 0;
    let maxActive = 0;
    const ran: string[] = [];
    const releases: (() => void)[] = [];
    sched = new Scheduler({ jitterMs: 0, concurrency: 2 });
    sched.start(
      ['a', 'b', 'c', 'd', 'e'].map((name) => ({
        name,
        schedule: '0 0 1 1 *',
        run: () => {
          active++;
          maxActive = Math.max(maxActive, active);
          ran.push(name);
          return new Promise<void>((r) =>
            releases.push(() => {
              active--;
              r();
            }),
          );
        },
      })),
    );
    await until(() => ran.length === 2);
    expect(sched.queued).toBe(3);
    expect(sched.isBusy('e')).toBe(true); // queued counts as running: its next tick would be a missed overlap
    while (ran.length < 5 || releases.length > 0) {
      releases.shift()?.();
      await sleep(10);
    }
    expect(maxActive).toBe(2);
    expect(ran.sort()).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('stop() aborts running jobs through their signal and starts no queued one', async () => {
    const reasons: string[] = [];
    const started: string[] = [];
    const errors: unknown[] = [];
    sched = new Scheduler({ jitterMs: 0, concurrency: 1, onError: (_j, e) => errors.push(e) });
    sched.start(
      ['hung', 'queued'].map((name) => ({
        name,
        schedule: '0 0 1 1 *',
        run: (signal: AbortSignal) => {
          started.push(name);
          // A hung cluster: never answers; only the abort ends it.
          return new Promise<void>((_r, reject) =>
            signal.addEventListener('abort', () => {
              reasons.push((signal.reason as Error).message);
              reject(signal.reason);
            }),
          );
        },
      })),
    );
    await until(() => started.length === 1);
    await sched.stop(); // would wait 60 s for a job that ignored the signal
    expect(reasons).toEqual(['the scheduler is stopping (shutdown)']);
    expect(started).toHaveLength(1);
    expect(sched.isBusy('hung') || sched.isBusy('queued')).toBe(false);
    expect(errors).toEqual([]); // an aborted run is not an error
    sched = undefined;
  });
});

describe('Scheduler: missed ticks (node-cron execution:missed, on a fake clock)', () => {
  // Only `Date` is faked: node-cron's heartbeat timer stays real (≤ 1 s on a per-second schedule) and reads the
  // fake clock when it fires, so moving the clock forward stands for an event loop blocked that long.
  // (Not vi.waitFor: under fake timers it advances the fake clock.)
  const at = (hms: string): number => Date.parse(`2026-12-01T10:00:${hms}Z`);
  async function until(cond: () => boolean): Promise<void> {
    while (!cond()) await sleep(20);
  }
  afterEach(() => {
    vi.useRealTimers();
  });

  it('runs a tick whose timer fired late, once; the other ticks of that beat are coalesced, a later one overlaps', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: at('00.000') });
    const runs: number[] = [];
    const late: { dueAt: number; lateMs: number }[] = [];
    const missed: { job: string; dueAt: number; reason: string }[] = [];
    const releases: (() => void)[] = [];
    sched = new Scheduler({
      jitterMs: 0,
      runAtStart: false,
      onLate: (_j, t) => late.push(t),
      onMissed: (job, t) => missed.push({ job, ...t }),
    });
    sched.start([
      {
        name: 'c1',
        schedule: '* * * * * *',
        run: () => {
          runs.push(Date.now());
          return new Promise<void>((r) => releases.push(r));
        },
      },
    ]);
    // Blocked from :00 to :03.5: the :01 and :02 ticks are past node-cron's 1 s tolerance, :03 is on time.
    vi.setSystemTime(at('03.500'));
    await until(() => missed.length >= 2);
    expect(runs).toEqual([at('03.500')]); // one late run at once, not three
    expect(late).toEqual([{ dueAt: at('01.000'), lateMs: 2500 }]);
    expect(missed).toEqual([
      { job: 'c1', dueAt: at('02.000'), reason: 'coalesced' },
      { job: 'c1', dueAt: at('03.000'), reason: 'coalesced' },
    ]);
    // :04 comes on time while the run started at :03.5 (before :04 was due) is still going.
    vi.setSystemTime(at('04.200'));
    await until(() => missed.length >= 3);
    expect(missed[2]).toEqual({ job: 'c1', dueAt: at('04.000'), reason: 'overlap' });
    expect(sched.missed.get('c1')).toEqual({ coalesced: 2, overlap: 1 });
    releases.shift()!();
    await sched.current('c1');
    vi.setSystemTime(at('05.000'));
    await until(() => runs.length >= 2);
    expect(runs[1]).toBe(at('05.000')); // on time again
    expect(late).toHaveLength(1);
    expect(missed).toHaveLength(3);
    const stopping = sched.stop(1000);
    releases.shift()!();
    await stopping;
    sched = undefined;
  });

  it('a follower (shouldRun false) neither runs nor reports missed ticks', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: at('00.000') });
    const events: string[] = [];
    let beats = 0;
    sched = new Scheduler({ jitterMs: 0, runAtStart: false, shouldRun: () => {
        beats++;
        return false;
      }, onLate: () => events.push('late'), onMissed: () => events.push('missed') });
    let runs = 0;
    sched.start([{ name: 'c', schedule: '* * * * * *', run: async () => void runs++ }]);
    vi.setSystemTime(at('03.500'));
    await until(() => beats >= 3); // :01, :02 missed and :03 asked the gate
    expect(runs).toBe(0);
    expect(events).toEqual([]);
  });
});
