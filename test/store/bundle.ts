import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';

const root = join(import.meta.dirname, '../..');

/**
 * Bundles `src/store/db.ts` to one plain ESM file for worker threads and child processes (which do not go
 * through vitest's TypeScript transform). esbuild ships with tsx. The file is written to the git-ignored
 * `test/artifacts/` inside the repository, so it resolves `better-sqlite3` and `pg` (left external: CommonJS) from node_modules.
 */
export async function bundleStore(name: string): Promise<{ url: string; cleanup: () => void }> {
  mkdirSync(join(root, 'test/artifacts'), { recursive: true });
  const file = join(root, 'test/artifacts', `${name}-${process.pid}.mjs`);
  await build({
    entryPoints: [join(root, 'src/store/db.ts')],
    bundle: true,
    format: 'esm',
    platform: 'node',
    external: ['better-sqlite3', 'pg'],
    outfile: file,
    logLevel: 'silent',
  });
  return { url: pathToFileURL(file).href, cleanup: () => rmSync(file, { force: true }) };
}
