import { readFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliMain } from '../support/build.js';
import { ROOT, runCli } from './run-cli.js';

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
const SCAN_FLAGS = [
  '--audit-log',
  '--cluster',
  '--cluster-snapshot',
  '--max-token-age',
  '--format',
  '--fail-on',
  '--now',
  '--max-decompressed-bytes',
];

/** Asserts a usage error: exit 2, nothing on stdout, exactly one `tokenwatch: …` line on stderr. */
function expectUsageError(run: { code: number | null; stdout: string; stderr: string }, mentions: string[]): void {
  expect(run.code).toBe(2);
  expect(run.stdout).toBe('');
  const lines = run.stderr.split('\n');
  expect(lines).toHaveLength(2); // one line + trailing newline
  expect(lines[1]).toBe('');
  expect(lines[0]).toMatch(/^tokenwatch: /);
  for (const m of mentions) expect(lines[0]).toContain(m);
}

/**
 * The Node built-ins (as `node:name`, however the import spells them) that `file` of the CLI bundle
 * (test/global-setup.ts builds it as `npm run build` does) and the chunks it imports statically import: what every
 * `tokenwatch` start loads before its command runs.
 */
function startBuiltins(file: string, seen = new Set<string>(), builtins = new Set<string>()): Set<string> {
  if (seen.has(file)) return builtins;
  seen.add(file);
  const text = readFileSync(file, 'utf8');
  // Static imports only (`import … from "…"` and `import "…"`); `import("…")` loads on use.
  for (const [, spec] of text.matchAll(/(?:^|\n)\s*(?:import|export)\b(?:[^;()"']*?from)?\s*["']([^"']+)["']/g)) {
    if (spec!.startsWith('./')) startBuiltins(join(dirname(file), spec!), seen, builtins);
    else if (isBuiltin(spec!)) builtins.add(spec!.startsWith('node:') ? spec! : `node:${spec}`);
  }
  return builtins;
}

describe('what every start loads', () => {
  it('no node:crypto (6–10 ms per start; the ids of findings and groups hash with src/core/digest.ts), and the walk sees the bundle', () => {
    const builtins = startBuiltins(cliMain());
    expect(builtins).toContain('node:fs/promises'); // the walk reads the bundle's imports at all
    expect(builtins).not.toContain('node:crypto');
  });
});

describe('tokenwatch --help / --version', () => {
  it('prints the version of package.json', async () => {
    const run = await runCli(['--version']);
    expect(run).toEqual({ code: 0, stdout: `${pkg.version}\n`, stderr: '' });
  });

  it('prints help for the program and for every command it lists', async () => {
    const top = await runCli(['--help']);
    expect(top.code).toBe(0);
    expect(top.stdout).toMatch(/^Usage: tokenwatch /);
    const commandsSection = top.stdout.split(/^Commands:$/m)[1] ?? '';
    const commands = [...commandsSection.matchAll(/^ {2}([a-z][\w-]*)/gm)]
      .map((m) => m[1] ?? '')
      .filter((c) => c !== 'help');
    expect(commands).toContain('scan');
    const runs = await Promise.all(commands.map((c) => runCli([c, '--help'])));
    runs.forEach((run, i) => {
      expect(run.code).toBe(0);
      expect(run.stderr).toBe('');
      expect(run.stdout).toMatch(new RegExp(`^Usage: tokenwatch ${commands[i] ?? ''} `));
    });
  });

  it('scan --help documents every flag and the exit codes', async () => {
    const run = await runCli(['scan', '--help']);
    expect(run.code).toBe(0);
    for (const flag of SCAN_FLAGS) expect(run.stdout).toContain(flag);
    expect(run.stdout).toContain('Exit codes: 0 success, 1 a finding at or above --fail-on exists, 2 bad arguments or unreadable input');
    expect(run.stdout).toContain('no record is an audit event in a known format');
  });
});

describe('bad arguments exit 2 with one line naming the flag', () => {
  const file = 'examples/audit/does-not-matter.log';
  it.concurrent.each([
    ['unknown option', ['scan', '--audit-log', file, '--bogus'], ["unknown option '--bogus'"]],
    ['unknown command', ['scna'], ["unknown command 'scna'", 'scan']],
    ['missing --audit-log', ['scan'], ['--audit-log']],
    ['--audit-log without a value', ['scan', '--audit-log'], ['--audit-log']],
    ['bad --format', ['scan', '--audit-log', file, '--format', 'xml'], ['--format', "'xml'", 'table, json']],
    ['bad --fail-on', ['scan', '--audit-log', file, '--fail-on', 'high'], ['--fail-on', "'high'", 'info, warning, critical']],
    ['bad --max-token-age', ['scan', '--audit-log', file, '--max-token-age', '90 days'], ['--max-token-age', "'90 days'", 'eks, upstream']],
    ['bad --now', ['scan', '--audit-log', file, '--now', 'yesterday'], ['--now', "'yesterday'", 'ISO-8601']],
    ['--now without zone', ['scan', '--audit-log', file, '--now', '2026-11-20T12:00:00'], ['--now', 'ISO-8601']],
    ['empty --cluster', ['scan', '--audit-log', file, '--cluster', ''], ['--cluster']],
    ['bad --max-decompressed-bytes', ['scan', '--audit-log', file, '--max-decompressed-bytes', '10 parsecs'], ['--max-decompressed-bytes', 'GiB']],
    ['zero --max-decompressed-bytes', ['scan', '--audit-log', file, '--max-decompressed-bytes', '0'], ['--max-decompressed-bytes']],
  ])('%s', async (_name, args, mentions) => {
    expectUsageError(await runCli(args), mentions);
  });

  it('no command at all is a usage error too', async () => {
    const run = await runCli([]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('Usage: tokenwatch');
  });
});

describe('unreadable input exits 2 naming the file', () => {
  it('missing audit log', async () => {
    const run = await runCli(['scan', '--audit-log', 'examples/nope.log']);
    expectUsageError(run, ['examples/nope.log']);
    expect(run.stderr).toMatch(/^tokenwatch: cannot read examples\/nope\.log: /);
  });

  it('missing cluster snapshot', async () => {
    const run = await runCli(['scan', '--audit-log', 'examples/nope.log', '--cluster-snapshot', 'examples/nope-snapshot.json']);
    // The snapshot is loaded before any log is read, so it is the one named.
    expectUsageError(run, ['examples/nope-snapshot.json']);
  });
});
