#!/usr/bin/env node
// Entry point of the `tokenwatch` command. Runs the compiled CLI when `npm run build` produced dist/,
// otherwise the TypeScript sources through tsx (a runtime dependency), so a plain `npm ci` is enough.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const compiled = new URL('../dist/cli/main.js', import.meta.url);
if (existsSync(fileURLToPath(compiled))) {
  await import(compiled.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import(new URL('../src/cli/main.ts', import.meta.url).href);
}
