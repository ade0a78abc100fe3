/**
 * README's commands run. Every fenced `sh` block of README.md is run with bash (`set -e -o pipefail`, from the
 * repository root), or skipped only when the block says why on a line of its own:
 *
 * - `# readme-test: skip — <reason>` (a command that needs a registry or a cluster, or runs until Ctrl-C);
 * - `# readme-test: needs <command>`: run where `<command>` is on `PATH`, skipped (saying so) where it is not.
 *
 * `tokenwatch` is on `PATH` as the CLI bundle test/global-setup.ts builds (what `npm run build` makes and the package
 * ships), and an `npm run <script>` line whose package.json script is `node bin/tokenwatch.js …` runs that script's
 * command through the same bundle (the shell expands its globs), so no block pays tsx's start-up. A block that runs
 * must exit 0 and print something. The test prints how many blocks it ran and skipped, with the reasons.
 *
 * The `npm run demo` block's output must also equal the block under "## Sample output" in docs/scan.md, line for
 * line: when the scan's output changes, paste the new output there (`npm run demo`).
 */
import { spawn } from 'node:child_process';
import { accessSync, chmodSync, constants, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cliMain } from '../support/build.js';
import { ROOT } from '../cli/run-cli.js';

/** A fenced `sh` block of a Markdown file: its 1-based opening line, its text and its `readme-test:` marker. */
interface ShBlock {
  line: number;
  text: string;
  /** The reason of a `# readme-test: skip — <reason>` line. */
  skip?: string;
  /** The command of a `# readme-test: needs <command>` line. */
  needs?: string;
  /** A `readme-test:` line that is neither form (a typo must not skip a block silently). */
  badMarker?: string;
}

const MARKER = /^#\s*readme-test:\s*(.*)$/;

/** The fenced `sh` blocks of `markdown`, with their markers. */
function shBlocks(markdown: string): ShBlock[] {
  const blocks: ShBlock[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const fence = /^(`{3,})(.*)$/.exec(lines[i]!);
    if (!fence) continue;
    const close = lines.findIndex((l, j) => j > i && l.startsWith(fence[1]!) && l.trim() === fence[1]);
    const end = close < 0 ? lines.length : close;
    if (fence[2]!.trim() === 'sh') {
      const body = lines.slice(i + 1, end);
      const block: ShBlock = { line: i + 1, text: body.join('\n') };
      for (const l of body) {
        const m = MARKER.exec(l.trim());
        if (!m) continue;
        const skip = /^skip\s*[—–:-]\s*(\S.*)$/.exec(m[1]!);
        const needs = /^needs\s+([\w.-]+)\s*$/.exec(m[1]!);
        if (skip) block.skip = skip[1]!.trim();
        else if (needs) block.needs = needs[1]!;
        else block.badMarker = l.trim();
      }
      blocks.push(block);
    }
    i = end;
  }
  return blocks;
}

/** The fenced block (any language) after `heading` in `markdown`, without the fences, ending with a newline. */
function blockAfter(markdown: string, heading: string): string {
  const at = markdown.indexOf(`\n${heading}\n`);
  if (at < 0) throw new Error(`no heading "${heading}"`);
  const open = markdown.indexOf('\n```', at);
  const start = markdown.indexOf('\n', open + 1) + 1;
  const end = markdown.indexOf('\n```', start);
  return markdown.slice(start, end + 1);
}

const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
const scripts = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
const blocks = shBlocks(readme);

/** `npm run NAME [-- args]` lines whose script is `node bin/tokenwatch.js …` become `tokenwatch …` (the bundle). */
function throughBundle(text: string): string {
  return text
    .split('\n')
    .map((l) => {
      const m = /^npm run ([\w:-]+)(?:\s+--)?(\s+[^#]*)?(\s+#.*)?$/.exec(l.trim());
      const script = m ? scripts[m[1]!] : undefined;
      if (!script?.startsWith('node bin/tokenwatch.js ')) return l;
      return `tokenwatch ${script.slice('node bin/tokenwatch.js '.length)}${m![2] ?? ''}`;
    })
    .join('\n');
}

/** Whether `command` is on the PATH of this process. */
function onPath(command: string): boolean {
  return (process.env.PATH ?? '').split(delimiter).some((d) => {
    try {
      accessSync(join(d, command), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

let shimDir: string | undefined;

/** A folder with a `tokenwatch` that runs the test bundle of the CLI. */
function shims(): string {
  if (shimDir) return shimDir;
  shimDir = mkdtempSync(join(tmpdir(), 'tokenwatch-readme-'));
  const bin = join(shimDir, 'tokenwatch');
  writeFileSync(bin, `#!/bin/sh\nexec '${process.execPath}' '${cliMain()}' "$@"\n`);
  chmodSync(bin, 0o755);
  return shimDir;
}

/** Runs `text` with bash from the repository root, `tokenwatch` first on PATH; stdin closed, stdout/stderr piped. */
function runBlock(text: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${shims()}${delimiter}${process.env.PATH ?? ''}` };
    delete env.FORCE_COLOR;
    delete env.COLUMNS;
    const child = spawn('bash', ['-e', '-o', 'pipefail', '-c', throughBundle(text)], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }));
  });
}

const ran: string[] = [];
const skipped: string[] = [];

afterAll(() => {
  if (shimDir) rmSync(shimDir, { recursive: true, force: true });
  console.log(
    `README.md: ${blocks.length} sh blocks, ${ran.length} run, ${skipped.length} skipped${skipped.length ? `:\n${skipped.map((s) => `  - ${s}`).join('\n')}` : ''}`,
  );
});

describe('README sh blocks', () => {
  it('there are blocks, and every readme-test marker is a skip with a reason or a needs with a command', () => {
    expect(blocks.length).toBeGreaterThan(5);
    expect(blocks.filter((b) => b.badMarker).map((b) => `README.md:${b.line}: ${b.badMarker}`)).toEqual([]);
    // The front page's own commands are here: setup, the sandbox, the tests, the demo.
    for (const cmd of ['npm ci', 'npm run sandbox', 'npm test', 'npm run demo']) expect(blocks.some((b) => b.text.includes(cmd)), cmd).toBe(true);
  });

  it('the marker parser: skip needs a reason, needs a command; other sh blocks run', () => {
    const parsed = shBlocks(
      ['```sh', '# readme-test: skip — needs a cluster', 'kubectl get pods', '```', '```sh', '# readme-test: needs jq', 'jq .', '```', '```sh', '# readme-test: skip', 'x', '```', '```', 'not sh', '```', '```sh', 'echo hi', '```'].join('\n'),
    );
    expect(parsed.map((b) => [b.line, b.skip, b.needs, b.badMarker])).toEqual([
      [1, 'needs a cluster', undefined, undefined],
      [5, undefined, 'jq', undefined],
      [9, undefined, undefined, '# readme-test: skip'],
      [16, undefined, undefined, undefined],
    ]);
  });

  for (const block of blocks) {
    const first = block.text.split('\n').find((l) => l.trim() && !l.trim().startsWith('#')) ?? '';
    const name = `README.md:${block.line}: ${first.replace(/\s+#.*$/, '').trim().slice(0, 80)}`;
    const reason = block.skip ?? (block.needs && !onPath(block.needs) ? `${block.needs} is not installed` : undefined);
    if (reason || block.badMarker) {
      skipped.push(`${name} — ${reason ?? 'bad marker'}`);
      it.skip(`${name} (skipped: ${reason ?? 'bad marker'})`, () => {});
      continue;
    }
    it(name, { timeout: 60_000 }, async () => {
      const run = await runBlock(block.text);
      ran.push(name);
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout.trim(), 'the block prints something').not.toBe('');
      // A value the block's comment promises is never printed as jq's `null` (e.g. a finding without a rejection date).
      expect(run.stdout, 'no line ends in null').not.toMatch(/\bnull$/m);
      if (block.text.trim() === 'npm run demo') {
        // The demo script is a scan of the bundled examples; its output is docs/scan.md's "Sample output".
        expect(scripts.demo).toContain('examples/audit/*');
        expect(run.stderr).toBe('');
        const scanDoc = readFileSync(join(ROOT, 'docs/scan.md'), 'utf8');
        expect(scanDoc).toContain('`npm run demo` on the bundled examples');
        expect(run.stdout.split('\n')).toEqual(blockAfter(scanDoc, '## Sample output').split('\n'));
      }
    });
  }

  it('the demo block is run (its output is checked against docs/scan.md "Sample output")', () => {
    expect(blocks.filter((b) => b.text.trim() === 'npm run demo' && !b.skip)).toHaveLength(1);
  });
});
