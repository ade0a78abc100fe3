/** Where the plain JavaScript built by test/global-setup.ts for child processes is. */
import { join } from 'node:path';
import { inject } from 'vitest';

/** This run's build folder (test/global-setup.ts). */
function buildDir(): string {
  const dir = inject('testBuild');
  if (!dir) throw new Error('no test build: run the tests with vitest.config.ts (its globalSetup builds it)');
  return dir;
}

/** The bundled CLI, `node <this> …args` runs `tokenwatch …args` (scripts/build.mjs output). */
export function cliMain(): string {
  return join(buildDir(), 'cli', 'main.js');
}

/** A bundled test child script (test/global-setup.ts `CHILD_SCRIPTS`), e.g. `childScript('serve-child')`. */
export function childScript(name: 'serve-child' | 'child-webhook'): string {
  return join(buildDir(), 'children', `${name}.mjs`);
}
