import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { TimeSlicer, yieldToEventLoop } from '../../src/core/slice.js';

describe('TimeSlicer', () => {
  it('a loop of awaits on resolved promises never lets a timer run; one that yields through the slicer does', async () => {
    let fired = false;
    const timer = setTimeout(() => {
      fired = true;
    }, 0);
    // Microtasks only: the timer cannot fire in between, however long the loop.
    for (let i = 0; i < 10_000; i++) await Promise.resolve();
    const firedDuringMicrotasks = fired;
    // The same loop, sliced: every 5th clock reading starts a new slice (an injected clock that counts its readings).
    let ticks = 0;
    const slicer = new TimeSlicer({ sliceMs: 5, now: () => ticks++, checkEvery: 1 });
    let iterations = 0;
    while (!fired && iterations < 1_000_000) {
      iterations++;
      await Promise.resolve();
      if (slicer.due()) await slicer.yield();
    }
    clearTimeout(timer);
    expect(firedDuringMicrotasks).toBe(false);
    expect(fired).toBe(true);
    expect(slicer.yields).toBeGreaterThan(0);
  });

  it('a long sliced task lets a loopback HTTP request be answered while it runs', async () => {
    const server = createServer((_req, res) => res.end('ok'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      let answered = false;
      const request = fetch(url)
        .then((r) => r.text())
        .then((text) => {
          answered = text === 'ok';
        });
      // The task runs until the answer has come (the server and the client share this event loop), yielding as the
      // slicer says; it gives up after many slices, which fails the test.
      const slicer = new TimeSlicer({ sliceMs: 1 });
      let slices = 0;
      while (!answered && slices < 100_000) {
        let x = 0;
        for (let i = 0; i < 1_000; i++) x += Math.sqrt(i);
        expect(x).toBeGreaterThan(0);
        if (slicer.due()) {
          await slicer.yield();
          slices++;
        }
      }
      await request;
      expect(answered).toBe(true);
      expect(slices).toBeLessThan(100_000);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('reads the clock only every checkEvery calls and is due once the slice is used up', async () => {
    let readings = 0;
    let t = 0;
    const slicer = new TimeSlicer({ sliceMs: 10, checkEvery: 4, now: () => {
        readings++;
        return t;
      },
    });
    const start = readings; // the constructor read it once
    t = 50;
    expect([slicer.due(), slicer.due(), slicer.due()]).toEqual([false, false, false]);
    expect(readings - start).toBe(0);
    expect(slicer.due()).toBe(true); // the 4th call reads the clock: 50 ms into the slice
    expect(readings - start).toBe(1);
    await slicer.yield(); // a new slice starts at t = 50
    for (let i = 0; i < 3; i++) expect(slicer.maybeYield()).toBeUndefined();
    expect(slicer.due()).toBe(false); // the 4th call reads the clock: still t = 50, 0 ms into the new slice
    t = 60;
    for (let i = 0; i < 3; i++) expect(slicer.maybeYield()).toBeUndefined();
    const y = slicer.maybeYield();
    expect(y).toBeInstanceOf(Promise);
    await y;
    expect(slicer.yields).toBe(2);
  });

  it('yieldToEventLoop runs after an I/O-phase immediate scheduled before it', async () => {
    const order: string[] = [];
    setImmediate(() => order.push('immediate'));
    await yieldToEventLoop();
    order.push('after yield');
    expect(order).toEqual(['immediate', 'after yield']);
  });
});
