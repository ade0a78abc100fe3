#!/usr/bin/env node
// Entry point of the `tokenwatch` command. Runs the compiled CLI in dist/ — what an installed package (and the Docker
// image) contains, since `npm pack` builds it (prepack). In a checkout without a build it runs the TypeScript sources
// through tsx, a devDependency that `npm ci` installs.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const compiled = new URL('../dist/cli/main.js', import.meta.url);
if (existsSync(fileURLToPath(compiled))) {
  await import(compiled.href);
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
