/**
 * README's "Sample output" is what `npm run demo` prints today: the `demo` script of package.json (a `tokenwatch scan`
 * of the bundled examples) is run as written — its shell glob expanded as a shell would, in sorted order — and its
 * stdout must equal the block under README's "### Sample output" heading, line for line. When the scan's output
 * changes, paste the new output into README (`npm run demo`).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, runCli } from '../cli/run-cli.js';

/** The first fenced block after `heading` in README.md, without the fences. */
function blockAfter(readme: string, heading: string): string {
  const at = readme.indexOf(`\n${heading}\n`);
  if (at < 0) throw new Error(`README.md has no heading "${heading}"`);
  const open = readme.indexOf('\n```', at);
  const start = readme.indexOf('\n', open + 1) + 1;
  const end = readme.indexOf('\n```', start);
  return readme.slice(start, end + 1);
}

/** Splits a command line on spaces and expands `dir/*` as a shell would (sorted names, relative to the root). */
function argv(command: string): string[] {
  return command.split(/\s+/).flatMap((word) => {
    if (!word.endsWith('/*')) return [word];
    const dir = word.slice(0, -2);
    return readdirSync(join(ROOT, dir)).sort().map((f) => `${dir}/${f}`);
  });
}

describe('README samples', () => {
  it('"Sample output" is the output of `npm run demo`', async () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    expect(readme).toContain('`npm run demo` on the bundled examples');
    const demo = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts.demo!;
    const words = argv(demo);
    expect(words.slice(0, 3)).toEqual(['node', 'bin/tokenwatch.js', 'scan']);
    expect(words).toContain('examples/audit/kube-apiserver-audit.log');
    const run = await runCli(words.slice(2));
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout.split('\n')).toEqual(blockAfter(readme, '### Sample output').split('\n'));
  });
});
