import { availableParallelism, loadavg } from 'node:os';
import { defineConfig } from 'vitest/config';

/**
 * Test files that run isolated (`isolate: true`, a fresh worker process and module graph per file). Every other file
 * runs in a worker shared with other files (`isolate: false`): each of the workers imports the product's modules (the
 * Slack, Kubernetes and AWS clients above all, about 3-4 s of CPU) once for all the files it runs, instead of once per
 * file (docs/development.md "Timings"). Files in a shared worker run one after another, so a file that changes
 * process-wide state (`process.env`, spies on `process`) and restores it in its hooks is safe there, as are files
 * that start child processes and stop them. A file is listed here, with its reason, when it cannot restore what it
 * changes or when it was seen to fail beside others.
 */
const ISOLATED_FILES = [
  // Replaces process.stderr.write, through which the worker also reports, and sets process.exitCode, which the
  // worker's own exit reads, while the CLI's error handling runs.
  'test/cli/error-codes.test.ts',
];

export default defineConfig({
  test: {
    // Bundles the CLI and the test child scripts once, so child processes run plain JavaScript (test/global-setup.ts).
    globalSetup: ['test/global-setup.ts'],
    // cpu-probe: records each file's CPU seconds when `npm run test:cpu` (scripts/test-cpu.mjs) sets
    // TOKENWATCH_TEST_CPU, nothing otherwise. sqlite-thread: keeps the SQLite worker thread up across tests.
    setupFiles: ['test/support/cpu-probe.ts', 'test/support/sqlite-thread.ts'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    pool: 'forks',
    // Vitest's default is one worker less than the cores: on 2 cores, one file at a time. Most of the slow files wait
    // (child processes, loopback servers, lease timers, scheduled ticks) rather than compute, so run one file more
    // than the cores: on 2 cores, 3 files at once took the suite from 6 min 22 s to 5 min 11 s of wall time at
    // 30 s more CPU (docs/development.md "Timings"). On a machine already busy at the start (a load average of at
    // least the cores, as on a shared CI host), one file per core: more at once would only lengthen each wait.
    maxWorkers: loadavg()[0]! >= availableParallelism() ? availableParallelism() : availableParallelism() + 1,
    reporters: ['default'],
    // Two projects that differ only in isolation; both inherit everything above (`extends: true`), and the global
    // setup runs once for the run, not once per project.
    projects: [
      { extends: true, test: { name: 'shared', include: ['test/**/*.test.ts'], exclude: ISOLATED_FILES, isolate: false } },
      { extends: true, test: { name: 'isolated', include: ISOLATED_FILES } },
    ],
    // `npm run coverage`: V8 coverage of the product code, printed as a per-file table and a summary.
    coverage: {
      provider: 'v8',
      include: ['src/**/*.{ts,js,mjs}'],
      reporter: ['text', 'text-summary'],
    },
  },
});
