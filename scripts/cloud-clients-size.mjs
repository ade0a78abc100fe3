#!/usr/bin/env node
// The disk size of the optional cloud-log clients in an installed app's node_modules: the packages reachable from
// package.json's dependencies only through the GKE and AKS sources' clients (google-auth-library,
// @azure/monitor-query-logs). Every install carries them and only GKE/AKS clusters load them, so the image-size limit
// (docs/release.md "Image size") is for everything but these clients, whose size is stated apart.
// Usage: node scripts/cloud-clients-size.mjs APP_DIR  → prints "<KiB> <packages>" (KiB as `du -sk` counts them).
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

export const CLOUD_CLIENTS = ['google-auth-library', '@azure/monitor-query-logs'];

const app = process.argv[2];
if (!app) {
  console.error('usage: node scripts/cloud-clients-size.mjs APP_DIR');
  process.exit(2);
}
const manifest = (dir) => JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));

/** Node's resolution from a package directory: its own node_modules, then each ancestor's. */
function resolve(fromDir, name) {
  for (let dir = fromDir; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return candidate;
    if (dir === app || dirname(dir) === dir) return undefined;
  }
}

/** Package directories reachable from `roots` (names resolved from the app). */
function reachable(roots) {
  const seen = new Set();
  const stack = roots.map((n) => resolve(app, n)).filter(Boolean);
  while (stack.length) {
    const dir = stack.pop();
    if (seen.has(dir)) continue;
    seen.add(dir);
    const m = manifest(dir);
    for (const dep of Object.keys({ ...m.dependencies, ...m.optionalDependencies })) {
      const d = resolve(dir, dep);
      if (d) stack.push(d);
    }
  }
  return seen;
}

const deps = Object.keys(manifest(app).dependencies ?? {});
const all = reachable(deps);
const rest = reachable(deps.filter((d) => !CLOUD_CLIENTS.includes(d)));
const only = [...all].filter((d) => !rest.has(d));
let kib = 0;
for (const dir of only) kib += Number(execFileSync('du', ['-sk', '--exclude=node_modules', dir], { encoding: 'utf8' }).split('\t')[0]);
console.log(`${kib} ${only.length}`);
