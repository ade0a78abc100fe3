/**
 * Layering rules of tokenwatch (docs/design/architecture.md): data flows one way, the core does no I/O, no cycles.
 * Run by `npm run lint` (which `npm test` runs): `depcruise src --config .dependency-cruiser.cjs`.
 */
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
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
      comment: 'core/ (units), audit/, findings/ and approvals/ are the pure core: no Slack, Kubernetes, AWS or SQLite modules.',
      from: { path: '^src/(core|audit|findings|approvals)/' },
      to: { path: ['@slack/', '@kubernetes/', '@aws-sdk/', '@smithy/', 'better-sqlite3'], dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'core-does-not-reach-edges',
      severity: 'error',
      comment: 'The core never imports the edges (Slack, cluster access, store, sources, remediation, runtime wiring).',
      from: { path: '^src/(core|audit|findings|approvals)/' },
      to: { path: ['^src/(slack|store|sources|remediation|serve|poll|scheduler|leader|runtime|sandbox|cli)/', '^src/cluster/(kube|eks-auth)'] },
    },
    {
      name: 'slack-does-not-import-serve',
      severity: 'error',
      comment: 'slack/ depends on interfaces handed to it, never on the serve wiring.',
      from: { path: '^src/slack/' },
      to: { path: '^src/(serve|runtime)/' },
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
