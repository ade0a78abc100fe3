import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';

const root = join(import.meta.dirname, '../..');

/**
 * Bundles `src/store/db.ts` to one plain ESM file for worker threads and child processes (which do not go
 * through vitest's TypeScript transform), with the SQLite store's worker thread as an entry point of its own beside
 * it (`sqlite-worker.mjs`, which src/store/sqlite.ts looks for there). esbuild ships with tsx. The files are written
 * to a folder of their own in the git-ignored `test/artifacts/` inside the repository, so they resolve
 * `better-sqlite3` and `pg` (left external: CommonJS) from node_modules.
 */
export async function bundleStore(name: string): Promise<{ url: string; cleanup: () => void }> {
  const dir = join(root, 'test/artifacts', `${name}-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  await build({
    entryPoints: { store: join(root, 'src/store/db.ts'), 'sqlite-worker': join(root, 'src/store/sqlite-worker.ts') },
    bundle: true,
    format: 'esm',
    platform: 'node',
    external: ['better-sqlite3', 'pg'],
    outdir: dir,
    outExtension: { '.js': '.mjs' },
    logLevel: 'silent',
  });
  return { url: pathToFileURL(join(dir, 'store.mjs')).href, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}
