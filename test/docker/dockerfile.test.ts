/**
 * The container image, checked without a Docker engine: the Dockerfile's stages and runtime user, the build context
 * that `.dockerignore` lets through (Docker's own matching rules), and the runtime file list (`npm pack`). The full
 * build + clean `npm ci --omit=dev` + entrypoint run is `scripts/check-runtime.sh` (minutes, not part of npm test).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');

interface Instruction {
  op: string;
  args: string;
}
interface Stage {
  from: string;
  name?: string;
  instructions: Instruction[];
}

/**
 * Parses a Dockerfile into stages (line continuations joined, comments dropped, `ARG` defaults — or `buildArgs`, as
 * `docker build --build-arg` gives them — substituted in FROM with Docker's `${VAR}` and `${VAR:+word}` forms).
 */
function parseDockerfile(text: string, buildArgs: Record<string, string> = {}): { args: Record<string, string>; stages: Stage[] } {
  const lines = text.replace(/\\\n/g, ' ').split('\n');
  const args: Record<string, string> = {};
  const stages: Stage[] = [];
  for (const raw of lines) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const m = /^(\w+)\s+(.*)$/.exec(line);
    if (!m) throw new Error(`unparsable Dockerfile line: ${line}`);
    const op = m[1]!.toUpperCase();
    const rest = m[2]!.replace(/\s+/g, ' ');
    if (op === 'ARG' && stages.length === 0) {
      const [k, v] = rest.split('=');
      args[k!] = buildArgs[k!] ?? v ?? '';
      continue;
    }
    if (op === 'FROM') {
      const fm = /^(\S+)(?: AS (\S+))?$/i.exec(rest);
      const image = fm![1]!.replace(/\$\{(\w+)(?::\+([^}]*))?\}/g, (_, k: string, word?: string) => (word === undefined ? (args[k] ?? '') : args[k] ? word : ''));
      stages.push({ from: image, ...(fm![2] ? { name: fm![2] } : {}), instructions: [] });
      continue;
    }
    stages.at(-1)!.instructions.push({ op, args: rest });
  }
  return { args, stages };
}

/** A `.dockerignore` matcher with Docker's rules (moby/patternmatcher): last match wins, a match on a parent dir counts, `**`, `!`. */
function dockerignore(text: string): (path: string) => boolean {
  const rules = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => {
      const negated = l.startsWith('!');
      const pattern = (negated ? l.slice(1) : l).replace(/^\/+/, '').replace(/\/+$/, '');
      let re = '';
      for (let i = 0; i < pattern.length; i++) {
        const c = pattern[i]!;
        if (c === '*' && pattern[i + 1] === '*') {
          i++;
          if (pattern[i + 1] === '/') {
            i++;
            re += '(?:.*/)?';
          } else re += '.*';
        } else if (c === '*') re += '[^/]*';
        else if (c === '?') re += '[^/]';
        else re += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
      }
      return { negated, re: new RegExp(`^${re}$`) };
    });
  return (path: string) => {
    const parts = path.split('/');
    const candidates = parts.map((_, i) => parts.slice(0, i + 1).join('/'));
    let excluded = false;
    for (const r of rules) if (candidates.some((c) => r.re.test(c))) excluded = !r.negated;
    return excluded;
  };
}

const dockerfile = parseDockerfile(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'));
const ignored = dockerignore(readFileSync(join(ROOT, '.dockerignore'), 'utf8'));
const [build, runtime] = dockerfile.stages;
const gitFiles = execFileSync('git', ['ls-files'], { cwd: ROOT, encoding: 'utf8' }).split('\n').filter(Boolean);
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { files: string[]; bin: Record<string, string>; dependencies: Record<string, string>; scripts: Record<string, string> };

/** Sources of the COPY instructions of a stage that read the build context (no --from). */
function contextCopies(stage: Stage): string[] {
  return stage.instructions
    .filter((i) => i.op === 'COPY' && !i.args.includes('--from='))
    .flatMap((i) => {
      const parts = i.args.split(' ').filter((p) => !p.startsWith('--'));
      return parts.slice(0, -1);
    });
}

describe('Dockerfile', () => {
  it('has a build stage and a slim Node 26 runtime stage, both from ARG NODE_IMAGE', () => {
    expect(dockerfile.stages.map((s) => [s.from, s.name])).toEqual([
      ['node:26-trixie-slim', 'build'],
      ['node:26-trixie-slim', 'runtime'],
    ]);
    // The image's Node satisfies the package's engines range (Node 26 ≥ 22.19).
    const major = Number(/^node:(\d+)-/.exec(dockerfile.args.NODE_IMAGE ?? '')?.[1]);
    const engines = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).engines.node as string;
    const minMajor = Number(/^>=(\d+)\./.exec(engines)?.[1]);
    expect(minMajor).toBe(22);
    expect(major).toBeGreaterThanOrEqual(minMajor);
  });

  it('with NODE_IMAGE_DIGEST set, both stages are FROM the tag @sha256: (the base pinned); unset, the tag alone', () => {
    const digest = `sha256:${'0123456789abcdef'.repeat(4)}`;
    const pinned = parseDockerfile(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'), { NODE_IMAGE_DIGEST: digest });
    expect(pinned.stages.map((s) => s.from)).toEqual([`node:26-trixie-slim@${digest}`, `node:26-trixie-slim@${digest}`]);
    for (const s of pinned.stages) expect(s.from).toMatch(/^[a-z0-9.:/-]+@sha256:[0-9a-f]{64}$/);
    expect(dockerfile.args['NODE_IMAGE_DIGEST']).toBe(''); // no digest invented: the release workflow passes it
    expect(dockerfile.stages.every((s) => !s.from.includes('@'))).toBe(true);
  });

  it('runtime: OCI labels (title, description, licenses, version, revision, created, source, base image) from build arguments', () => {
    const labels = runtime!.instructions.filter((i) => i.op === 'LABEL').map((i) => i.args).join(' ');
    const keys = [...labels.matchAll(/(org\.opencontainers\.image\.[a-z.]+)=/g)].map((m) => m[1]);
    expect(keys).toEqual(['title', 'description', 'licenses', 'version', 'revision', 'created', 'source', 'base.name', 'base.digest'].map((k) => `org.opencontainers.image.${k}`));
    expect(labels).toContain('org.opencontainers.image.licenses="Apache-2.0"');
    const arg = (name: string) => `$${'{'}${name}}`; // a Dockerfile ${NAME} reference
    expect(labels).toContain(`org.opencontainers.image.version="${arg('VERSION')}"`);
    expect(labels).toContain(`org.opencontainers.image.base.digest="${arg('NODE_IMAGE_DIGEST')}"`);
    const declared = runtime!.instructions.filter((i) => i.op === 'ARG').map((i) => i.args.split('=')[0]);
    for (const a of ['NODE_IMAGE', 'NODE_IMAGE_DIGEST', 'VERSION', 'REVISION', 'CREATED', 'SOURCE']) expect(declared).toContain(a);
  });

  it('build: the production node_modules is pruned by scripts/prune-runtime.sh, the script check-runtime.sh (release:dry) measures', () => {
    const runs = build!.instructions.filter((i) => i.op === 'RUN').map((i) => i.args);
    const install = runs.find((r) => r.includes('npm ci --omit=dev'))!;
    expect(install.indexOf('sh /src/scripts/prune-runtime.sh /app')).toBeGreaterThan(install.indexOf('npm ci --omit=dev'));
    expect(install.indexOf("require('better-sqlite3')")).toBeGreaterThan(install.indexOf('prune-runtime.sh')); // the addon still loads after
    expect(readFileSync(join(ROOT, 'scripts/check-runtime.sh'), 'utf8')).toContain('sh "$repo/scripts/prune-runtime.sh" "$work/app"');
  });

  it('build: installs all dependencies, compiles, packs, then installs production dependencies only', () => {
    const runs = build!.instructions.filter((i) => i.op === 'RUN').map((i) => i.args);
    const order = (needle: string) => runs.findIndex((r) => r.includes(needle));
    expect(order('npm ci')).toBeGreaterThanOrEqual(0);
    expect(runs[order('npm ci')]).not.toContain('--omit=dev');
    expect(order('npm run build')).toBeGreaterThan(order('npm ci'));
    expect(order('npm pack')).toBe(order('npm run build'));
    expect(order('npm ci --omit=dev')).toBeGreaterThan(order('npm pack'));
    expect(runs.join('\n')).not.toMatch(/apt-get|python3|g\+\+|node-gyp/); // better-sqlite3 13: prebuilt, nothing compiles
    expect(runs[order('npm ci --omit=dev')]).toContain("require('better-sqlite3')"); // the addon loads
  });

  it('runtime: copies the installed app from the build stage, runs no npm or compiler, as uid 10001', () => {
    const ops = runtime!.instructions;
    expect(ops.filter((i) => i.op === 'COPY').map((i) => i.args)).toEqual(['--from=build /app /app']);
    for (const r of ops.filter((i) => i.op === 'RUN')) expect(r.args).not.toMatch(/\bnpm\b|apt-get|g\+\+/);
    const users = ops.filter((i) => i.op === 'USER');
    expect(users.map((u) => u.args)).toEqual(['10001:10001']);
    const userAt = ops.indexOf(users[0]!);
    expect(ops.slice(userAt).filter((i) => i.op === 'RUN' || i.op === 'COPY')).toEqual([]);
    const uid = Number(users[0]!.args.split(':')[0]);
    expect(Number.isInteger(uid) && uid > 0).toBe(true); // numeric, so runAsNonRoot can verify it
    expect(ops.find((i) => i.op === 'RUN' && i.args.includes('useradd'))!.args).toContain('--uid 10001 --gid 10001');
    expect(ops.find((i) => i.op === 'RUN' && i.args.includes('chown'))!.args).toContain('chown 10001:10001 /data');
  });

  it('entrypoint runs the bin script with `serve` as the default command', () => {
    const last = (op: string) => runtime!.instructions.filter((i) => i.op === op).at(-1)?.args;
    expect(JSON.parse(last('ENTRYPOINT')!)).toEqual(['node', 'bin/tokenwatch.js']);
    expect(JSON.parse(last('CMD')!)).toEqual(['serve']);
    expect(last('WORKDIR')).toBe('/app');
    expect(pkg.bin['tokenwatch']).toBe('./bin/tokenwatch.js');
    expect(last('EXPOSE')).toBe('8080');
  });

  it('bin/tokenwatch.js runs dist/cli/main.js, which `npm run build` bundles from src/cli/main.ts', () => {
    expect(readFileSync(join(ROOT, 'bin/tokenwatch.js'), 'utf8')).toContain("new URL('../dist/cli/main.js', import.meta.url)");
    expect(pkg.scripts['build']).toBe('node scripts/build.mjs');
    const build = readFileSync(join(ROOT, 'scripts/build.mjs'), 'utf8');
    expect(build).toContain("main: 'src/cli/main.ts'");
    expect(build).toContain("worker: 'src/scan/worker.ts'");
    expect(build).toContain("default: 'dist'");
    expect(build).toMatch(/outdir: `\$\{outDir\}\/cli`/);
    expect(existsSync(join(ROOT, 'src/cli/main.ts'))).toBe(true);
    expect(pkg.files).toEqual(expect.arrayContaining(['bin/', 'dist/']));
  });
});

describe('.dockerignore', () => {
  it('lets through every file the build stage copies from the context', () => {
    const sources = contextCopies(build!);
    expect(sources).toEqual(['package.json', 'package-lock.json', 'tsconfig.json', 'README.md', 'LICENSE', 'config.example.yaml', '.env.example', 'bin', 'src', 'examples', 'scripts']);
    for (const s of sources) {
      const files = gitFiles.filter((f) => f === s || f.startsWith(`${s}/`));
      expect(files.length, s).toBeGreaterThan(0);
      expect(files.filter(ignored), s).toEqual([]);
    }
  });

  it('keeps dependencies, build output, data, tests and secrets out of the context', () => {
    for (const p of [
      'node_modules/zod/package.json',
      'src/node_modules/x/index.js',
      'dist/cli/main.js',
      'data/tokenwatch.db',
      'examples/tokenwatch.db-wal',
      'src/.env',
      '.env',
      '.git/HEAD',
      'test/runtime/leader.test.ts',
      'test/artifacts/run.log',
      'coverage/index.html',
      'bench/data/audit-1g.log',
      'manifests/base/deployment.yaml',
      'Dockerfile',
    ]) {
      expect(ignored(p), p).toBe(true);
    }
    expect(ignored('src/cli/main.ts')).toBe(false);
    expect(ignored('bin/tokenwatch.js')).toBe(false);
  });

  it('the matcher follows Docker rules (last match wins, parent directories match)', () => {
    const m = dockerignore('*\n!src\nsrc/secret\n!src/secret/keep.txt\n**/*.tmp');
    expect(['a.txt', 'src/a.ts', 'src/secret/x', 'src/secret/keep.txt', 'src/b.tmp'].map(m)).toEqual([true, false, true, false, true]);
  });
});

describe('runtime file list (npm pack)', () => {
  const packed = (JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: ROOT, encoding: 'utf8' })) as { files: { path: string }[] }[])[0]!.files.map((f) => f.path);

  it('contains the entrypoint, package.json, the catalog and examples; no tests, sources or dependencies', () => {
    expect(packed).toEqual(expect.arrayContaining(['bin/tokenwatch.js', 'package.json', 'README.md', 'src/findings/catalog.json']));
    expect(packed.some((p) => p.startsWith('examples/'))).toBe(true);
    expect(packed.filter((p) => /^(test|fakes|bench|node_modules|manifests|data)\//.test(p))).toEqual([]);
    expect(packed.filter((p) => p.startsWith('src/') && p !== 'src/findings/catalog.json')).toEqual([]);
    for (const p of packed.filter((x) => !x.startsWith('dist/'))) expect(ignored(p), `${p} must be in the build context`).toBe(false);
  });

  it('production dependencies hold what the compiled CLI imports at run time', () => {
    for (const dep of ['@kubernetes/client-node', '@aws-sdk/client-cloudwatch-logs', '@slack/bolt', 'better-sqlite3', 'commander', 'pino', 'prom-client', 'yaml', 'zod']) {
      expect(pkg.dependencies[dep], dep).toBeDefined();
    }
  });
});
