/**
 * Cooperative time slicing: long synchronous work on the event loop (a poll's audit records, the findings of many
 * token records) runs in slices of at most about {@link DEFAULT_SLICE_MS} and lets the event loop run between them,
 * so a Slack request that arrives meanwhile is acknowledged after one slice, not after the whole task
 * (docs/design/architecture.md "Performance targets": every ack within 100 ms at p99).
 *
 * A promise continuation (`await` of a resolved promise, an async generator's next value) runs as a microtask: before
 * the event loop reads any socket. Only a macrotask lets it: {@link TimeSlicer.yield} waits for `setImmediate`, which
 * runs after the I/O callbacks that are ready (Node.js event loop phases: poll, then check,
 * https://nodejs.org/en/learn/asynchronous-work/event-loop-timers-and-nexttick), and costs nothing else (no timer
 * clamping as `setTimeout(0)` has).
 *
 * Use: `const slicer = new TimeSlicer(); for (…) { …; if (slicer.due()) await slicer.yield(); }` — `due()` reads the
 * clock only every {@link TimeSlicerOptions.checkEvery} calls, so it is cheap in a tight loop.
 */
import { setImmediate as immediate } from 'node:timers/promises';

/** The default slice, ms: short against the 100 ms ack target, long against the cost of one yield (a few µs). */
export const DEFAULT_SLICE_MS = 10;

/** Options of {@link TimeSlicer}. */
export interface TimeSlicerOptions {
  /** Longest slice, ms (default {@link DEFAULT_SLICE_MS}). */
  sliceMs?: number;
  /** The clock `due()` reads, ms (default `performance.now`: monotonic). */
  now?: () => number;
  /** Read the clock only every this many `due()` calls (default 16; 1 reads it every time). */
  checkEvery?: number;
}

/** Resolves after the event loop has run its ready I/O callbacks once (`setImmediate`). */
export function yieldToEventLoop(): Promise<void> {
  return immediate();
}

/** Tells a long loop when its slice is used up, and yields to the event loop; see the module docstring. */
export class TimeSlicer {
  private readonly sliceMs: number;
  private readonly now: () => number;
  private readonly checkEvery: number;
  private sliceStart: number;
  private calls = 0;
  /** How many times {@link yield} has let the event loop run (tests, diagnostics). */
  yields = 0;

  constructor(opts: TimeSlicerOptions = {}) {
    this.sliceMs = Math.max(0, opts.sliceMs ?? DEFAULT_SLICE_MS);
    this.now = opts.now ?? (() => performance.now());
    this.checkEvery = Math.max(1, Math.floor(opts.checkEvery ?? 16));
    this.sliceStart = this.now();
  }

  /** Whether the current slice has run for `sliceMs` or longer (the clock is read every `checkEvery` calls). */
  due(): boolean {
    if (++this.calls < this.checkEvery) return false;
    this.calls = 0;
    return this.now() - this.sliceStart >= this.sliceMs;
  }

  /** Lets the event loop run ({@link yieldToEventLoop}), then starts a new slice. */
  async yield(): Promise<void> {
    await yieldToEventLoop();
    this.yields++;
    this.calls = 0;
    this.sliceStart = this.now();
  }

  /** {@link yield} when {@link due}; otherwise nothing (no await needed: returns undefined). */
  maybeYield(): Promise<void> | undefined {
    return this.due() ? this.yield() : undefined;
  }
}
