#!/usr/bin/env node
/**
 * `npm run test:busy`: runs the whole vitest suite three times while a load process keeps every core busy, to prove
 * that no test depends on wall-clock timing (the suite must pass on a busy CI machine).
 *
 * Load: one child process per core (os.availableParallelism()) spinning a tight loop until this script ends.
 * Runs: `vitest run` three times in a row (typecheck is not repeated; `npm test` does it). Prints one line per run
 * with its result and duration, then a summary; exits 0 only when all three passed, 1 otherwise.
 * Options: `--runs N` (default 3); extra arguments after `--` go to vitest (e.g. a test folder).
 */
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({ options: { runs: { type: 'string', default: '3' } }, allowPositionals: true });
const runs = Number(values.runs);
if (!Number.isInteger(runs) || runs < 1) {
  console.error(`test:busy: --runs takes a whole number ≥ 1, got ${values.runs}`);
  process.exit(2);
}

const cores = availableParallelism();
const load = Array.from({ length: cores }, () =>
  spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }),
);
const stopLoad = () => {
  for (const p of load) p.kill('SIGKILL');
};
process.on('exit', stopLoad);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(130));
console.log(`test:busy: ${cores} load process(es) keep every core busy; running the suite ${runs} time(s)`);

const results = [];
for (let i = 1; i <= runs; i++) {
  const t0 = Date.now();
  const code = await new Promise((resolve) => {
    const child = spawn('npx', ['vitest', 'run', ...positionals], { stdio: 'inherit', env: { ...process.env, CI: 'true' } });
    child.on('exit', (c, sig) => resolve(sig ? 1 : (c ?? 1)));
  });
  const secs = ((Date.now() - t0) / 1000).toFixed(0);
  results.push(code === 0);
  console.log(`test:busy: run ${i}/${runs} ${code === 0 ? 'passed' : `FAILED (exit ${code})`} in ${secs} s`);
}
stopLoad();
const passed = results.filter(Boolean).length;
console.log(`test:busy: ${passed} of ${runs} runs passed under load`);
process.exit(passed === runs ? 0 : 1);
