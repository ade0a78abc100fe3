/**
 * The release is one script (scripts/release.mjs): `npm run release:dry` runs it in CI (.ci/run) and the release
 * workflow runs the same file with --publish; the CHANGELOG has the version's section it copies into the chart;
 * docs/install.md starts with the OCI install and keeps the build-it-yourself path. (The dry run itself — helm,
 * SBOM, image node_modules — takes a minute: it runs in `.ci/run`, not in `npm test`.)
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';

const ROOT = resolve(import.meta.dirname, '../..');
const read = (f: string) => readFileSync(join(ROOT, f), 'utf8');
const pkg = JSON.parse(read('package.json')) as { version: string; scripts: Record<string, string> };

describe('release', () => {
  it('release:dry and the release workflow run the same script; CI runs release:dry', () => {
    expect(pkg.scripts['release:dry']).toBe('node scripts/release.mjs');
    const workflow = parseYaml(read('.github/workflows/release.yml')) as { on: { push: { tags: string[] } }; permissions: Record<string, string>; jobs: { release: { steps: { run?: string }[] } } };
    expect(workflow.on.push.tags).toEqual(['v*']);
    expect(workflow.permissions['id-token']).toBe('write'); // keyless signing
    const runs = workflow.jobs.release.steps.map((s) => s.run ?? '');
    expect(runs).toContain('node scripts/release.mjs --publish');
    expect(runs.filter((r) => /docker (buildx )?build|helm push|cosign/.test(r))).toEqual([]); // only inside the script
    expect(read('.ci/run')).toMatch(/\nnpm run release:dry\n/);
    const script = read('scripts/release.mjs');
    for (const step of ["'package'", "'lint', '--strict'", 'JsonStrictValidator', 'scripts/check-runtime.sh', "'buildx', 'build'", "'cosign', ['sign'", "'push', chartTgz"]) expect(script).toContain(step);
  });

  it('CHANGELOG.md states its convention and has a section for the package version', () => {
    const changelog = read('CHANGELOG.md');
    expect(changelog).toContain('Conventional Commits');
    expect(changelog).toMatch(new RegExp(`^## \\[${pkg.version.replace(/\./g, '\\.')}\\] - \\d{4}-\\d{2}-\\d{2}$`, 'm'));
    const chart = parseYaml(read('charts/tokenwatch/Chart.yaml')) as { version: string; appVersion: string };
    expect([chart.version, chart.appVersion]).toEqual([pkg.version, pkg.version]);
  });

  it('docs/install.md: the first helm install is from oci://, and the build-it-yourself path is kept', () => {
    const install = read('docs/install.md');
    const installs = [...install.matchAll(/helm install tokenwatch (\S+)/g)].map((m) => m[1]);
    expect(installs[0]).toMatch(/^oci:\/\/\$REGISTRY\/charts\/tokenwatch$/);
    expect(installs).toContain('charts/tokenwatch');
    expect(install).toContain('## 2. Build and push the image (build-it-yourself path)');
    expect(install).toContain('[release.md](release.md)');
  });

  it('one pinning policy: AWS SDK and Smithy dependencies are caret ranges; the locked @aws-sdk/client-* share one version', () => {
    const deps = (JSON.parse(read('package.json')) as { dependencies: Record<string, string> }).dependencies;
    const aws = Object.entries(deps).filter(([n]) => n.startsWith('@aws-sdk/') || n.startsWith('@smithy/'));
    expect(aws.length).toBeGreaterThan(2);
    for (const [name, range] of aws) expect(range, name).toMatch(/^\^\d+\.\d+\.\d+$/);
    const lock = JSON.parse(read('package-lock.json')) as { packages: Record<string, { version: string }> };
    const clients = Object.keys(deps).filter((n) => n.startsWith('@aws-sdk/client-'));
    expect(new Set(clients.map((n) => lock.packages[`node_modules/${n}`]!.version)).size).toBe(1);
  });
});
