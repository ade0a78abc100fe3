import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

/**
 * Test files that run isolated (`isolate: true`, a fresh worker process and module graph per file). Every other file
 * runs in a worker shared with other files (`isolate: false`): each of the workers imports the product's modules (the
 * Slack, Kubernetes and AWS clients above all, about 3-4 s of CPU) once for all the files it runs, instead of once per
 * file (docs/development.md "Timings"). Files in a shared worker run one after another, so a file that changes
 * process-wide state (`process.env`, `process.exitCode`, spies on `process`) and restores it in its hooks is still
 * safe there; a file is listed here when the product may read that state once per process (credential chains
 * caching the environment: AWS, Google and Azure clients, the kubeconfig loader) or when it was seen to fail beside
 * others. A new file shares a worker unless it is added here, with its reason.
 */
const ISOLATED_FILES = [
  // Change the environment the cloud SDKs' credential chains and endpoints read (AWS, Google ADC, Azure workload
  // identity) or the kubeconfig loader reads (HOME, KUBECONFIG, KUBERNETES_SERVICE_HOST).
  'test/runtime/{aks-log-analytics-serve,blind,gke-serve,gke-shared-budget,shared-budgets}.test.ts',
  'test/sources/{cloud-logging,cloudwatch,timeouts}.test.ts',
  'test/cluster/{kube,kubeconfig-files}.test.ts',
  'test/store/postgres.test.ts',
  // Replace process.stderr.write and set process.exitCode while the CLI's error handling runs.
  'test/cli/error-codes.test.ts',
];

export default defineConfig({
  test: {
    // Bundles the CLI and the test child scripts once, so child processes run plain JavaScript (test/global-setup.ts).
    globalSetup: ['test/global-setup.ts'],
    // Records each file's CPU seconds when `npm run test:cpu` (scripts/test-cpu.mjs) sets TOKENWATCH_TEST_CPU; does
    // nothing otherwise.
    setupFiles: ['test/support/cpu-probe.ts'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    pool: 'forks',
    // Vitest's default is one worker less than the cores: on 2 cores, one file at a time. Most of the slow files wait
    // (child processes, loopback servers, lease timers) rather than compute, so run one file per core.
    maxWorkers: Math.max(2, availableParallelism()),
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
