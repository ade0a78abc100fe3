/**
 * docs/scan.md documents every flag `tokenwatch scan` takes: each long flag of the command (as commander registers it)
 * is in the synopsis and has a row in the flag table.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { register } from '../../src/cli/commands/scan.js';
import { createProgram } from '../../src/cli/program.js';
import { ROOT } from '../cli/run-cli.js';

describe('docs/scan.md', () => {
  const doc = readFileSync(join(ROOT, 'docs/scan.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Synopsis and flags'), doc.indexOf('\n## ', doc.indexOf('## Synopsis and flags') + 1));
  const synopsis = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
  const rows = section.split('\n').filter((l) => l.startsWith('| `--'));
  const flags = (createProgram([register]).commands.find((c) => c.name() === 'scan')?.options ?? [])
    .map((o) => o.long)
    .filter((f): f is string => f !== undefined && f !== '--help');

  it('has the synopsis and the flag table', () => {
    expect(synopsis).toContain('tokenwatch scan');
    expect(flags.length).toBeGreaterThan(10);
  });

  it('every flag of `tokenwatch scan` is in the synopsis and has a row', () => {
    const row = (f: string): boolean => rows.some((r) => r.startsWith(`| \`${f}\``) || r.startsWith(`| \`${f} `));
    expect(flags.filter((f) => !new RegExp(`${f}(?![\\w-])`).test(synopsis))).toEqual([]);
    expect(flags.filter((f) => !row(f))).toEqual([]);
  });
});
