/**
 * Vitest global setup: builds, once per `vitest run`, the plain JavaScript that tests run in child processes, so no
 * child pays tsx's TypeScript transform at its start (on a 2-core machine a tsx start of the CLI costs ~0.5 s of CPU,
 * the bundle ~0.1 s; `serve` more).
 *
 * - The CLI, as `npm run build` bundles it (scripts/build.mjs, the same code split and externals) — also what the
 *   published package and the Docker image run, so the child-process tests test what ships;
 * - the test's own child scripts ({@link CHILD_SCRIPTS}), bundled with esbuild (our sources and the packages they import
 *   inlined, but for {@link CHILD_EXTERNAL}), with the SQLite store's worker entry beside them
 *   (`children/sqlite-worker.mjs`).
 *
 * Both go to `<repo>/.test-build-<pid>/` (git-ignored; one level below the repository, as `dist/` is, so module-relative
 * URLs such as `../../package.json` resolve as from the sources), named by this process so two runs in one checkout
 * never rebuild under each other, removed at teardown; a folder left by a run that was killed is removed by the next.
 * Tests find it with `inject('testBuild')` (test/support/build.ts). In watch mode it is rebuilt before each rerun.
 *
 * It also starts one throwaway PostgreSQL server for the run (test/support/postgres-server.ts), stopped and removed at
 * teardown; tests create a database each with test/support/postgres.ts (`inject('postgres')`).
 *
 * Then it points `TMPDIR` (so `os.tmpdir()` in the test workers and their child processes) at a folder of the run
 * ({@link runScratch}), removed at teardown with every temporary file the tests made.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import type { TestProject } from 'vitest/node';
import { type PostgresServerInfo, startPostgres } from './support/postgres-server.js';
import { processAlive as alive } from './support/processes.js';

const ROOT = join(import.meta.dirname, '..');
const PREFIX = '.test-build-';

/** Test child scripts run as plain JavaScript: source (relative to the repository) → bundled name in `children/`. */
export const CHILD_SCRIPTS = {
  'serve-child': 'test/slack/serve-child.ts',
  'child-webhook': 'test/sources/fixtures/child-webhook.ts',
} as const;

/** Packages the child scripts import from node_modules rather than bundle: native addons, files loaded by path. */
const CHILD_EXTERNAL = ['better-sqlite3', 'pino', 'google-auth-library', 'esbuild'] as const;

declare module 'vitest' {
  export interface ProvidedContext {
    /** Absolute path of this run's build folder: `cli/main.js` (the CLI) and `children/<name>.mjs`. */
    testBuild: string;
    /** The run's PostgreSQL server, or why there is none (test/support/postgres-server.ts). */
    postgres: PostgresServerInfo;
  }
}

async function buildAll(dir: string): Promise<void> {
  // scripts/build.mjs empties its --out folder first; it prints one summary line, kept out of the test output.
  execFileSync(process.execPath, [join(ROOT, 'scripts', 'build.mjs'), '--out', dir.slice(ROOT.length + 1)], { cwd: ROOT, stdio: 'pipe' });
  await build({
    absWorkingDir: ROOT,
    // The SQLite store's worker thread is an entry point of its own, beside the scripts (src/store/sqlite.ts).
    entryPoints: { ...Object.fromEntries(Object.entries(CHILD_SCRIPTS).map(([name, src]) => [name, src])), 'sqlite-worker': 'src/store/sqlite-worker.ts' },
    outdir: join(dir, 'children'),
    outExtension: { '.js': '.mjs' },
    bundle: true,
    // Packages bundled too, as the CLI bundles them (scripts/build.mjs): from node_modules, a child's start cost ~1.3 s of
    // CPU importing Kubernetes, Slack and AWS clients file by file, bundled ~0.7 s. External: native addons and packages
    // that load their own files by path.
    external: [...CHILD_EXTERNAL],
    banner: { js: "import { createRequire as __testCreateRequire } from 'node:module'; const require = __testCreateRequire(import.meta.url);" },
    format: 'esm',
    platform: 'node',
    target: 'node22',
    sourcemap: 'linked',
    logLevel: 'warning',
  });
}

/**
 * Removes the folders in `parent` named `<prefix><pid>` or `<prefix><pid>-…` of earlier runs whose vitest process
 * (`pid`) is gone (a run that was killed leaves its folders behind).
 */
function removeLeftovers(parent: string, prefix: string): void {
  for (const name of readdirSync(parent)) {
    const pid = name.startsWith(prefix) ? Number(name.slice(prefix.length).split('-')[0]) : Number.NaN;
    if (Number.isInteger(pid) && pid !== process.pid && !alive(pid)) rmSync(join(parent, name), { recursive: true, force: true });
  }
}

const SCRATCH_PREFIX = 'tokenwatch-test-';

/**
 * A folder of this run in the system's temporary folder (`os.tmpdir()`: `TMPDIR`, else `/tmp`), mode 1777 as `/tmp`
 * is (the tests that run a command as another user — PostgreSQL, the probe, a read-only store — reach their files).
 * `TMPDIR` points at it for the test workers and their child processes, and teardown removes it with everything in it:
 * the tests' temporary folders, including those a failed or killed test left behind (before, runs left thousands of
 * `tw-*` folders in `/tmp`). Folders of earlier runs whose vitest process is gone are removed first.
 */
function runScratch(): string {
  const parent = tmpdir();
  removeLeftovers(parent, SCRATCH_PREFIX);
  const dir = mkdtempSync(join(parent, `${SCRATCH_PREFIX}${process.pid}-`));
  chmodSync(dir, 0o1777);
  return dir;
}

export default async function setup(project: TestProject): Promise<() => void> {
  removeLeftovers(ROOT, PREFIX);
  const dir = join(ROOT, `${PREFIX}${process.pid}`);
  const [, postgres] = await Promise.all([buildAll(dir), startPostgres()]);
  project.provide('testBuild', dir);
  project.provide('postgres', postgres.info);
  project.onTestsRerun(() => buildAll(dir));
  // After PostgreSQL's start: its folder stays where earlier runs' leftovers are looked for (postgres-server.ts).
  const scratch = runScratch();
  process.env['TMPDIR'] = scratch;
  return () => {
    rmSync(dir, { recursive: true, force: true });
    postgres.stop();
    rmSync(scratch, { recursive: true, force: true });
  };
}
