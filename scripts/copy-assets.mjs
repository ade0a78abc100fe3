#!/usr/bin/env node
/**
 * Part of `npm run build`: copies the files tsc does not emit into dist/, so that dist/ runs on its own (an installed
 * package has no src/): the sandbox page's index.html, app.js and style.css (tsc compiles its blockkit.ts).
 */
import { cpSync, mkdirSync } from 'node:fs';

const root = new URL('../', import.meta.url);
const from = new URL('src/sandbox/page/', root);
const to = new URL('dist/sandbox/page/', root);
mkdirSync(to, { recursive: true });
for (const name of ['index.html', 'app.js', 'style.css']) cpSync(new URL(name, from), new URL(name, to));
