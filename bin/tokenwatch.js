#!/usr/bin/env node
// Entry point of the `tokenwatch` command. Runs the bundled CLI in dist/ — what an installed package (and the Docker
// image) contains, since `npm pack` builds it (prepack). In a checkout without a build it runs the TypeScript sources
// through tsx, a devDependency that `npm ci` installs. In a checkout with a build older than a source file, it says so
// on stderr (the build still runs: `npm run build` again, or `rm -rf dist` to run the sources).
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { enginesNode, nodeVersionProblem } from './check-node.js';

// First, before anything that needs a current Node (undici, better-sqlite3 13 crashes on Node 20): an older Node is
// refused, in one line naming the Node needed and how to get it, exit 2 as for any unusable setup. `scan` alone is
// let through with that line as a warning: it opens no store and no network client, and runs on Node 20 (offline
// analysis of exported logs on whatever Node a workstation or CI image has).
{
  const problem = nodeVersionProblem(enginesNode(), process.versions.node, process.execPath);
  if (problem && process.argv[2] === 'scan') {
    process.stderr.write(`tokenwatch: warning: ${problem}\n`);
  } else if (problem) {
    process.stderr.write(`${problem}\n`);
    process.exit(2);
  }
}

const compiled = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
const sources = fileURLToPath(new URL('../src/', import.meta.url));
/** A source file changed after the build, or undefined. Best effort: never stops the CLI (dangling links, races). */
function newerSource() {
  try {
    const built = statSync(compiled).mtimeMs;
    return readdirSync(sources, { recursive: true }).find((f) => {
      // Editors leave dangling links (Emacs `.#file` locks) and delete temp files while we look: skip those.
      const st = statSync(join(sources, String(f)), { throwIfNoEntry: false });
      return st?.isFile() === true && st.mtimeMs > built;
    });
  } catch {
    return undefined;
  }
}

if (existsSync(compiled)) {
  const newer = existsSync(join(sources, 'cli', 'main.ts')) ? newerSource() : undefined;
  if (newer !== undefined) {
    // Names come from the file system: control characters are shown escaped, never sent raw.
    const name = String(newer).replace(/[\u0000-\u001f\u007f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
    process.stderr.write(
      `tokenwatch: note: src/${name} changed after the last \`npm run build\`: running the older build in dist/ ` +
        '(`npm run build` again, or `rm -rf dist` to run the sources)\n',
    );
  }
  await import(new URL('../dist/cli/main.js', import.meta.url).href);
} else {
  let register;
  try {
    ({ register } = await import('tsx/esm/api'));
  } catch {
    console.error('tokenwatch: dist/ is missing and tsx is not installed: run `npm run build` (or `npm ci` in a checkout)');
    process.exit(2);
  }
  register();
  await import(new URL('../src/cli/main.ts', import.meta.url).href);
}
