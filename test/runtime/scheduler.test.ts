import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { Scheduler } from '../../src/runtime/scheduler.js';

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
