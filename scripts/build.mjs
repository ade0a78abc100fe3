#!/usr/bin/env node
/**
 * `npm run build`: bundles the CLI into `dist/cli/` with esbuild, so that an installed package (and the Docker image)
 * starts fast — every module file costs a resolve, a read and a compile at each start, so fewer, larger files start
 * faster (`--version` and a one-line scan ≤ 0.1 s, docs/performance.md "Benchmark").
 *
 * - Entry points: `src/cli/main.ts` → `dist/cli/main.js` (run by bin/tokenwatch.js), `src/scan/worker.ts` →
 *   `dist/cli/worker.js` (the scan's worker threads; `parallel.ts` `workerEntry` finds it next to its own chunk) and
 *   `src/store/sqlite-worker.ts` → `dist/cli/sqlite-worker.js` (the SQLite store's thread, which owns the
 *   better-sqlite3 connection; `sqlite.ts` `sqliteWorkerEntry` finds it next to its own chunk).
 * - Code splitting: what only `serve`, `sandbox`, `probe` or `config` need lives in chunks loaded by their dynamic
 *   `import()`s, so `scan` and `--version` load neither Slack, Kubernetes, AWS nor SQLite code.
 * - Bundled: our sources and our dependencies with theirs ({@link externals}), but for a native addon and packages
 *   that load their own files by path ({@link EXTERNAL}), which stay `import`s of `node_modules`.
 * - All output is flat in `dist/cli/`, two levels below package.json, as `src/cli/*.ts` are: module-relative URLs
 *   (`../../package.json`, `../../examples/`, `./page/`) resolve the same from the sources and from the bundle.
 * - The sandbox page (`src/sandbox/page/`) is copied to `dist/cli/page/`, its `blockkit.ts` compiled to `blockkit.js`.
 *
 * Type checking is `npm run typecheck` (tsc); esbuild only strips types. Source maps are written next to the chunks,
 * positions without the sources' text (`node --enable-source-maps` shows file and line in stack traces).
 *
 * Usage: `node scripts/build.mjs [--out DIR]` — DIR (default `dist`, relative to the repository) is emptied and
 * receives `cli/`; `npm run bench` builds into `bench/data/build/dist` beside a copy of package.json.
 */
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { parseArgs } from 'node:util';
import { build, transform } from 'esbuild';

const root = new URL('../', import.meta.url);
const { values } = parseArgs({ options: { out: { type: 'string', default: 'dist' } } });
const outDir = values.out.replace(/\/+$/, '');
const out = new URL(`${outDir}/`, root);

/**
 * Packages of package.json `dependencies` kept as `import`s of `node_modules` instead of bundled:
 * - `better-sqlite3`: a native addon, found by path at run time;
 * - `pino`: its transports run in worker threads that load pino's own files by path;
 * - `google-auth-library`: loaded (a dynamic `import()`) only when a GKE source runs, so bundling it saves no start.
 */
const EXTERNAL = new Set(['better-sqlite3', 'pino', 'google-auth-library']);

/**
 * Imports the bundle may leave to `node_modules` besides {@link EXTERNAL}, none of them a dependency an install must
 * have: `esbuild` (the sandbox compiles its page's `blockkit.ts` with it only when no `blockkit.js` was built beside it,
 * never from a build), and optional native helpers that `ws` (`bufferutil`, `utf-8-validate`) and `pg` (`pg-native`)
 * `require` inside a try when installed. The build fails on any other (see the check after the build).
 */
const LEFT_TO_NODE_MODULES = new Set(['esbuild', 'bufferutil', 'utf-8-validate', 'pg-native']);

/** Our package.json `dependencies`: bundled but for {@link EXTERNAL}; devDependencies (the sandbox's `esbuild`) never. */
const DEPENDENCIES = new Set(Object.keys(JSON.parse(readFileSync(new URL('package.json', root), 'utf8')).dependencies));

const packageName = (spec) => (spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]);

/**
 * Bundles every package of {@link DEPENDENCIES} but {@link EXTERNAL}, with the packages they import in turn (an
 * installed tokenwatch may have those nested under the importing package, where an `import` from `dist/` could not
 * resolve them). Every module file costs a resolve, a read and a compile at each start: `@kubernetes/client-node`'s
 * ~1,000 files (generated API classes and models) alone took 0.82 s of CPU to import from `node_modules`, bundled 0.30 s;
 * importing every chunk of the CLI (what `serve` can load) took 1.47–1.52 s with only the scan path's packages
 * bundled, 0.85–0.88 s with this rule (Node 24.22, the 2-CPU development VM, 2026-12-07, `process.cpuUsage()` around
 * the imports).
 */
const externals = {
  name: 'tokenwatch-externals',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) => {
      const name = packageName(args.path);
      if (args.path.startsWith('node:') || EXTERNAL.has(name)) return { path: args.path, external: true };
      if (DEPENDENCIES.has(name) || /[\\/]node_modules[\\/]/.test(args.importer)) return undefined;
      return { path: args.path, external: true };
    });
  },
};

rmSync(out, { recursive: true, force: true });
const result = await build({
  absWorkingDir: new URL('.', root).pathname,
  entryPoints: { main: 'src/cli/main.ts', worker: 'src/scan/worker.ts', 'sqlite-worker': 'src/store/sqlite-worker.ts' },
  outdir: `${outDir}/cli`,
  chunkNames: 'chunk-[hash]',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node22', // the oldest supported Node (package.json engines ≥ 22.19)
  sourcemap: 'linked',
  // Positions only: with the bundled packages' sources inside, the maps would be 16 of the build's 30 MB.
  sourcesContent: false,
  legalComments: 'linked',
  logLevel: 'warning',
  metafile: true,
  // Bundled CommonJS packages (commander, semver) call `require` for Node built-ins; ES modules have none.
  banner: { js: "import { createRequire as __tokenwatchCreateRequire } from 'node:module'; const require = __tokenwatchCreateRequire(import.meta.url);" },
  plugins: [externals],
});

// The sandbox page: served as files, not imported.
const pageFrom = new URL('src/sandbox/page/', root);
const pageTo = new URL('cli/page/', out);
mkdirSync(pageTo, { recursive: true });
for (const name of ['index.html', 'app.js', 'style.css']) cpSync(new URL(name, pageFrom), new URL(name, pageTo));
const blockkit = await transform(readFileSync(new URL('blockkit.ts', pageFrom), 'utf8'), {
  loader: 'ts',
  format: 'esm',
  target: 'es2020',
  sourcefile: 'blockkit.ts',
});
writeFileSync(new URL('blockkit.js', pageTo), blockkit.code);

// What the build leaves to node_modules is only what is meant to be there: a package the bundle imported from an
// installed tokenwatch's top-level node_modules could be missing there (nested under the package that needs it).
const leftExternal = new Set();
for (const o of Object.values(result.metafile.outputs)) {
  for (const i of o.imports) if (i.external && !i.path.startsWith('node:') && !isBuiltin(i.path)) leftExternal.add(packageName(i.path));
}
const unexpected = [...leftExternal].filter((p) => !EXTERNAL.has(p) && !LEFT_TO_NODE_MODULES.has(p));
if (unexpected.length > 0) {
  console.error(`build: the bundle imports ${unexpected.join(', ')} from node_modules; bundle it, or list it in EXTERNAL (scripts/build.mjs) with its reason`);
  process.exit(1);
}

const files = Object.keys(result.metafile.outputs).filter((f) => f.endsWith('.js'));
const bytes = files.reduce((n, f) => n + result.metafile.outputs[f].bytes, 0);
console.log(`build: ${outDir}/cli/ — ${files.length} files, ${(bytes / 1024).toFixed(0)} KiB of JavaScript (entry points main.js, worker.js, sqlite-worker.js)`);
