import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Bundles the CLI and the test child scripts once, so child processes run plain JavaScript (test/global-setup.ts).
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    pool: 'forks',
    // Vitest's default is one worker less than the cores: on 2 cores, one file at a time. Most of the slow files wait
    // (child processes, loopback servers, lease timers) rather than compute, so run one file per core.
    maxWorkers: Math.max(2, availableParallelism()),
    reporters: ['default'],
    // `npm run coverage`: V8 coverage of the product code, printed as a per-file table and a summary.
    coverage: {
      provider: 'v8',
      include: ['src/**/*.{ts,js,mjs}'],
      reporter: ['text', 'text-summary'],
    },
  },
});
