import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

/**
 * Test files that run in workers shared with other files (`isolate: false`): each worker imports the product's modules
 * (the Slack, Kubernetes and AWS clients above all) once for all the files it runs, instead of once per file as the
 * isolated default does. These files start no child process and leave no module state behind that another file
 * reads; each passed in a shared worker beside the others (docs/development.md "Timings"). Every other file, and any
 * new one, stays isolated: add a file here only once it passes in a `--no-isolate` run together with this list.
 */
const SHARED_WORKER_FILES = [
  'test/approvals/{machine,no-slack-syntax,policy}.test.ts',
  'test/audit/{annotations,input-formats,needle-search,reader.property,reader,shapes.property,token-use}.test.ts',
  'test/cases/{cw-s3-export-timestamp-prefix,insights-get-query-results-json,insights-guide-query-csv,legacy-invalidated-401,operator-owned-statefulset,restarted-before-scan}.test.ts',
  'test/cli/{format,progress,sandbox-banner}.test.ts',
  'test/cluster/{convert,snapshot}.test.ts',
  'test/config/{config,duration,follow-ups-config,gcp,policy}.test.ts',
  'test/core/{keyed-lock,redact,source-address}.test.ts',
  'test/docker/release.test.ts',
  'test/docs/{links,project-layout}.test.ts',
  'test/errors/errors.test.ts',
  'test/examples/examples.test.ts',
  'test/fakes/cloudwatch.test.ts',
  'test/findings/{aggregate,attribution,build,catalog-claims,cause-outranking,causes}.test.ts',
  'test/findings/{cluster-events,expiry-corroboration,fault-kinds,flood,groups,token-math}.test.ts',
  'test/manifests/{approval-defaults,chart-schema,writer-buttons}.test.ts',
  'test/observability/{health,logger}.test.ts',
  'test/probe/findings.test.ts',
  'test/remediation/verify.test.ts',
  'test/runtime/{ip-attribution-serve,missed-polls,poll-slices,scheduler,serve-shards,serve-webhook}.test.ts',
  'test/runtime/{shards,unrecorded-ticks,watch-cache-failing,watch-cache-serve}.test.ts',
  'test/sandbox/{blockkit,data-dir,replay}.test.ts',
  'test/scan/{examples,latest-event,parallel.default,parallel.run,readiness,run,skipped-records,unauthorized-forms}.test.ts',
  'test/slack/blocks/*.test.ts',
  'test/slack/{alert-history,buttons,conclude,edit-coalescing,fallback-escape,followups-outcomes,forged-mention,home-debounce}.test.ts',
  'test/slack/{home-sources,late-use,listeners/listeners,one-action-per-target,outbox,overflow-confirm,permalink-cache,recreate}.test.ts',
  'test/slack/{redaction,routing,status-readiness,vote-recheck,warm,webhook-status}.test.ts',
  'test/sources/{file,forged-source-webhook,inflated,skip-and-read-on}.test.ts',
  'test/store/{claim,methods,outbox,replicas,sqlite-worker,sqlite}.test.ts',
];

export default defineConfig({
  test: {
    // Bundles the CLI and the test child scripts once, so child processes run plain JavaScript (test/global-setup.ts).
    globalSetup: ['test/global-setup.ts'],
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
      { extends: true, test: { name: 'isolated', include: ['test/**/*.test.ts'], exclude: SHARED_WORKER_FILES } },
      { extends: true, test: { name: 'shared', include: SHARED_WORKER_FILES, isolate: false } },
    ],
    // `npm run coverage`: V8 coverage of the product code, printed as a per-file table and a summary.
    coverage: {
      provider: 'v8',
      include: ['src/**/*.{ts,js,mjs}'],
      reporter: ['text', 'text-summary'],
    },
  },
});
