/**
 * bin/tokenwatch.js in a checkout: it runs dist/ when there is a build, and says so on stderr when a source file is
 * newer than that build (a developer would otherwise run stale code without a word; found by the new-user trial).
 * Run on a copy of the script in a temporary layout whose dist/cli/main.js only prints a word.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
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
});
