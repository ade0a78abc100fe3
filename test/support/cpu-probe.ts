/**
 * A vitest setup file (every test file's; `vitest.config.ts`) that does nothing unless `npm run test:cpu`
 * (scripts/test-cpu.mjs) sets `TOKENWATCH_TEST_CPU`: then after each test file it appends one JSON line to the file
 * that variable names, with the CPU seconds the file cost, read from `/proc/self/stat` (Linux; proc(5): utime,
 * stime, cutime, cstime in clock ticks, 100 per second):
 * `{ file, pid, self, children, wall, selfTotal }` — `self` the worker's own user + system CPU from this setup file's
 * start (that is, the test file's imports and tests) to its end, `children` that of the child processes it started
 * and waited for (a `serve` or CLI child, helm, Chromium), `wall` seconds, `selfTotal` the worker's CPU since it
 * started (in an isolated worker, the file's whole cost including the worker's own start).
 */
import { appendFileSync, readFileSync } from 'node:fs';
import { afterAll, expect } from 'vitest';

const out = process.env['TOKENWATCH_TEST_CPU'];
/** utime, stime, cutime, cstime of this process in clock ticks (fields 14-17 of /proc/self/stat). */
const ticks = (): number[] => {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  return [14, 15, 16, 17].map((n) => Number(fields[n - 3]));
};
const start = out ? ticks() : [];
const t0 = Date.now();
afterAll(() => {
  if (!out) return;
  const end = ticks();
  const file = (expect.getState().testPath ?? '?').slice(process.cwd().length + 1);
  const d = (i: number) => (end[i]! - start[i]!) / 100;
  appendFileSync(out, `${JSON.stringify({ file, pid: process.pid, self: d(0) + d(1), children: d(2) + d(3), wall: (Date.now() - t0) / 1000, selfTotal: (end[0]! + end[1]!) / 100 })}\n`);
});
