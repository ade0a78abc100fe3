#!/usr/bin/env node
/**
 * `node scripts/knip-cached.mjs [knip arguments]` (what `npm run lint` runs for both knip passes): knip with its cache
 * (`--cache`, https://knip.dev/reference/cli#--cache), in a folder named by a digest of knip's configuration.
 *
 * Why: knip's cache is invalidated by changed and new source files, but not by every change of its configuration —
 * with a warm cache, turning `ignoreExportsUsedInFile` off in knip.json still reported 2 issues where a cold run
 * reported 273. So the cache lives in `node_modules/.cache/knip-<digest>/`, where the digest covers knip.json,
 * package.json (entries, dependencies) and tsconfig.json: any change to them starts from an empty cache. Folders of
 * other digests are removed. A cold cache costs what a run without one does (a clean clone, CI); a warm one about a
 * quarter (docs/development.md "Run-to-run spread, young-generation size and the lint caches").
 *
 * Exits with knip's exit code (1 when it reports issues), or 2 when knip cannot be started.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
/** The files whose content names the cache folder. */
const CONFIG_FILES = ['knip.json', 'package.json', 'tsconfig.json'];
const CACHE_PARENT = join(ROOT, 'node_modules', '.cache');
const PREFIX = 'knip-';

const hash = createHash('sha256');
for (const f of CONFIG_FILES) {
  const path = join(ROOT, f);
  hash.update(`${f}\0`).update(existsSync(path) ? readFileSync(path) : '').update('\0');
}
const name = `${PREFIX}${hash.digest('hex').slice(0, 16)}`;

if (existsSync(CACHE_PARENT)) {
  for (const old of readdirSync(CACHE_PARENT)) {
    if (old.startsWith(PREFIX) && old !== name) rmSync(join(CACHE_PARENT, old), { recursive: true, force: true });
  }
}

const knip = join(ROOT, 'node_modules', 'knip', 'bin', 'knip.js');
const run = spawnSync(process.execPath, [knip, '--cache', '--cache-location', join(CACHE_PARENT, name), ...process.argv.slice(2)], {
  cwd: ROOT,
  stdio: 'inherit',
});
if (run.error) {
  console.error(`knip-cached: cannot start knip (${knip}): ${run.error.message}`);
  process.exit(2);
}
process.exit(run.status ?? 2);
