/**
 * Layering rules of tokenwatch (docs/design/architecture.md "Stage rules"): data flows one way, each stage imports only
 * the shared modules and the stages before it in IMPORT_ORDER, the pure core does no I/O, no cycles.
 * Run by `npm run lint` (which `npm test` runs): `depcruise src --config .dependency-cruiser.cjs`.
 */

/** Shared by every stage; they import only each other (and `core/` imports nothing of tokenwatch). */
const SHARED = ['core', 'config', 'observability'];
/**
 * The stages (folders of src/) in the order their imports allow: each may import the shared modules, `errors.ts` and
 * the stages before it, never one after it. Data flows sources → audit → findings → store → slack → approvals →
 * remediation → verify, with cluster state read beside it; imports differ from that where a stage calls a pure one:
 * sources call audit's parsers, the store keeps the approval machine's states, Slack's listeners call the machine and
 * the executor. `pipeline/` composes the stages into the poll (read → parse → derive findings → store → notify → verify)
 * and holds the one derivation of findings that `scan` shares. A folder of src/ that is in neither list fails
 * `every-folder-has-a-place`.
 */
const IMPORT_ORDER = ['cluster', 'audit', 'sources', 'findings', 'probe', 'approvals', 'store', 'remediation', 'slack', 'pipeline', 'runtime', 'scan', 'sandbox', 'cli'];
const LATER = (i) => IMPORT_ORDER.slice(i + 1);

/** One rule per stage: it imports no stage after it. */
const stageRules = IMPORT_ORDER.slice(0, -1).map((stage, i) => ({
  name: `stage-${stage}`,
  severity: 'error',
  comment: `src/${stage}/ imports only the shared modules and the stages before it (${IMPORT_ORDER.slice(0, i).join(', ') || 'none'}); not ${LATER(i).join(', ')}.`,
  from: { path: `^src/${stage}/` },
  to: { path: `^src/(${LATER(i).join('|')})/` },
}));

/** The pure core: it computes, never opens a file, a socket or a process. */
const PURE_CORE = '^src/(core|audit|findings|approvals|slack/blocks)/|^src/errors\\.ts$';
const NODE_IO = '^(node:)?(fs|fs/promises|zlib|net|http|https|http2|tls|dgram|child_process|worker_threads)$';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    ...stageRules,
    {
      name: 'shared-imports-only-shared',
      severity: 'error',
      comment: 'core/, config/, observability/ and errors.ts are shared by every stage: they import no stage.',
      from: { path: `^src/(${SHARED.join('|')})/|^src/errors\\.ts$` },
      to: { path: `^src/(${IMPORT_ORDER.join('|')})/` },
    },
    {
      name: 'every-folder-has-a-place',
      severity: 'error',
      comment: 'Every folder of src/ is a stage of IMPORT_ORDER or a shared one; place a new folder there first.',
      from: { path: '^src/', pathNot: `^src/(${[...SHARED, ...IMPORT_ORDER].join('|')})/|^src/errors\\.ts$` },
      to: {},
    },
    {
      name: 'core-is-a-leaf',
      severity: 'error',
      comment: 'core/ (units, names, actions) imports nothing of tokenwatch, so every module can use it.',
      from: { path: '^src/core/' },
      to: { path: '^src/', pathNot: '^src/core/' },
    },
    {
      name: 'pure-core-does-no-io',
      severity: 'error',
      comment: 'The pure core (core/, audit/, findings/, approvals/, slack/blocks/, errors.ts) reads no file and opens no socket or process: file reading lives in sources/.',
      from: { path: PURE_CORE },
      to: { dependencyTypes: ['core'], path: NODE_IO },
    },
    {
      name: 'pure-core-hashes-without-node-crypto',
      severity: 'error',
      comment:
        "The pure core hashes ids with src/core/digest.ts (@noble/hashes), not node:crypto: cli/format.ts (every start) and scan import findings/, and loading node:crypto cost each tokenwatch start 6-10 ms (docs/performance.md \"No node:crypto at start-up\").",
      from: { path: PURE_CORE },
      to: { dependencyTypes: ['core'], path: '^(node:)?crypto$' },
    },
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Import cycles hide the flow of data; break them with a small interface in the lower stage.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'core-stays-pure',
      severity: 'error',
      comment: 'core/, audit/, findings/, approvals/ and slack/blocks/ are the pure core: no Slack, Kubernetes, AWS or SQLite modules.',
      from: { path: PURE_CORE },
      to: { path: ['@slack/', '@kubernetes/', '@aws-sdk/', '@smithy/', 'better-sqlite3'], dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'core-does-not-reach-edges',
      severity: 'error',
      comment: 'The core never imports the edges (Slack, cluster access, store, sources, remediation, runtime wiring).',
      from: { path: PURE_CORE },
      to: { path: ['^src/(slack|store|sources|remediation|pipeline|runtime|sandbox|cli|scan|probe)/', '^src/cluster/(kube|eks-auth)'], pathNot: '^src/slack/blocks/' },
    },
    {
      name: 'runtime-builds-the-verifier',
      severity: 'error',
      comment: 'The composition root (src/runtime/) builds the verifier; slack/ only reports its conclusions (types only).',
      from: { path: '^src/slack/' },
      to: { path: '^src/remediation/verify\\.ts$', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'product-does-not-import-tests',
      severity: 'error',
      comment: 'Product code never imports test code.',
      from: { path: '^src/' },
      to: { path: '^(test|bench)/' },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'], extensions: ['.ts', '.js', '.json'] },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
