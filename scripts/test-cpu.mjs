#!/usr/bin/env node
/**
 * `npm run test:cpu [-- [--top N] [vitest arguments]]`: runs vitest once (the whole suite, or the files and options
 * given after `--`, passed to vitest as they are) and prints where its CPU time goes, per test file, to compare
 * changes to the suite's cost (docs/development.md "Timings").
 *
 * How: vitest runs with `TOKENWATCH_TEST_CPU` naming a scratch file, so the setup file `test/support/cpu-probe.ts`
 * appends each test file's CPU seconds (its worker's own, and its child processes') from `/proc/self/stat` (Linux).
 * The total is this script's children's user + system CPU once vitest has ended (fields cutime and cstime of
 * `/proc/self/stat`, in clock ticks of 1/100 s: vitest, its workers and every process they waited for), as
 * `/usr/bin/time` would report it. Prints: wall time, total CPU, the load average at start and end, the sums per
 * kind (test workers, child processes, the rest: vitest's main process and global setup), tests passed and failed,
 * and the `--top` files (default 25) by CPU. Exits with vitest's exit code.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';

// `--top N` is this script's; every other argument goes to vitest as given (files, `--maxWorkers=3`, …).
const args = process.argv.slice(2);
const forVitest = [];
let topArg = '25';
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--top') topArg = args[++i] ?? '';
  else if (args[i].startsWith('--top=')) topArg = args[i].slice('--top='.length);
  else forVitest.push(args[i]);
}
const top = Number(topArg);
if (!Number.isInteger(top) || top < 0) {
  console.error(`test:cpu: --top takes a whole number ≥ 0, got ${topArg}`);
  process.exit(2);
}
if (process.platform !== 'linux') {
  console.error('test:cpu: reads /proc/self/stat, so it runs on Linux only');
  process.exit(2);
}

/** cutime + cstime of this process (its waited-for descendants' CPU), in seconds. */
const childrenCpu = () => {
  const f = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
  return (Number(f[16 - 3]) + Number(f[17 - 3])) / 100;
};

const dir = mkdtempSync(join(tmpdir(), 'tokenwatch-test-cpu-'));
const perFile = join(dir, 'files.jsonl');
const report = join(dir, 'vitest.json');
const load0 = loadavg()[0];
const t0 = Date.now();
const cpu0 = childrenCpu();
const vitest = spawn(process.execPath, ['node_modules/vitest/vitest.mjs', 'run', '--reporter=dot', '--reporter=json', `--outputFile.json=${report}`, ...forVitest], {
  stdio: 'inherit',
  env: { ...process.env, TOKENWATCH_TEST_CPU: perFile },
});
const code = await new Promise((r) => vitest.once('exit', (c, sig) => r(c ?? (sig ? 1 : 0))));
const wall = (Date.now() - t0) / 1000;
const cpu = childrenCpu() - cpu0;
const load1 = loadavg()[0];

let rows = [];
try {
  rows = readFileSync(perFile, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
} catch {
  console.error('test:cpu: no per-file figures were written (did vitest run any file?)');
}
let tests = '';
try {
  const j = JSON.parse(readFileSync(report, 'utf8'));
  tests = `${j.numPassedTests} passed, ${j.numFailedTests} failed, ${j.numPendingTests + j.numTodoTests} skipped`;
} catch {
  tests = 'no JSON report';
}
rmSync(dir, { recursive: true, force: true });

const sum = (k) => rows.reduce((s, r) => s + r[k], 0);
const self = sum('self');
const kids = sum('children');
const s1 = (n) => n.toFixed(1);
console.log(`\ntest:cpu: ${rows.length} files, ${tests}`);
console.log(`test:cpu: wall ${s1(wall)} s, CPU ${s1(cpu)} s (user + sys of vitest and every process it waited for), load average ${load0.toFixed(2)} → ${load1.toFixed(2)}`);
console.log(`test:cpu: test files ${s1(self)} s in their workers, ${s1(kids)} s in their child processes; the rest (vitest itself, global setup, worker starts) ${s1(cpu - self - kids)} s`);
if (top > 0) {
  console.log(`test:cpu: the ${Math.min(top, rows.length)} costliest files (CPU s: worker + children, wall s):`);
  for (const r of [...rows].sort((a, b) => b.self + b.children - (a.self + a.children)).slice(0, top)) {
    console.log(`  ${s1(r.self + r.children).padStart(6)}  (${s1(r.self)} + ${s1(r.children)})  wall ${s1(r.wall).padStart(6)}  ${r.file}`);
  }
}
process.exit(code);
