#!/usr/bin/env node
/**
 * `npm run test:pack`: proves the published package works on its own, as the Docker image and `npm install tokenwatch`
 * use it — no TypeScript sources, no devDependencies, no run-time transform.
 *
 * 1. `npm pack` (prepack runs `npm run build`) into a temporary folder;
 * 2. unpacks it with the project's package-lock.json and runs `npm ci --offline --omit=dev` there, from the npm cache
 *    that `npm ci` filled — what the Dockerfile does (nothing compiles: better-sqlite3 ships prebuilt N-API binaries);
 * 3. runs the installed `tokenwatch`: `--version`, `scan` of the bundled examples (JSON with findings), a `scan` of two
 *    sparse `.gz` files large enough for worker threads, which must start the bundle's `worker.js` (a preloaded hook
 *    notes every `Worker`) and print what `--jobs 1` prints, `config check` of a
 *    minimal config and of the shipped `config.example.yaml` (README's command, run in the installed package), and
 *    `serve` of the example audit log on the embedded SQLite store (its connection in the bundle's `sqlite-worker.js`
 *    thread) until `/readyz` shows the first poll, and `sandbox --port 0 --no-slack` until its page answers on
 *    127.0.0.1, then stops them.
 * Prints one line per check; exits 0 when all pass, 1 otherwise. The temporary folder is removed unless `--keep`.
 */
import { execFileSync, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

const root = new URL('../', import.meta.url).pathname;
const keep = process.argv.includes('--keep');
const dir = mkdtempSync(join(tmpdir(), 'tokenwatch-pack-'));
const npm = (args, cwd) => execFileSync('npm', args, { cwd, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
let failed = 0;
const check = (name, ok, detail = '') => {
  console.log(`test:pack: ${ok ? 'ok  ' : 'FAIL'} ${name}${detail ? ` — ${detail}` : ''}`);
  if (!ok) failed++;
};

// prepack builds dist/ in the checkout; remove it again when it was not there, or bin/ would run that build (and
// not the sources) from then on.
const hadDist = existsSync(join(root, 'dist'));
try {
  npm(['pack', '--pack-destination', dir, '--silent'], root);
  if (!hadDist) rmSync(join(root, 'dist'), { recursive: true, force: true });
  const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'));
  check('npm pack', Boolean(tarball), tarball);
  // As the Dockerfile does: the package's own files plus the lockfile, production dependencies only.
  const app = join(dir, 'app');
  execFileSync('mkdir', ['-p', app]);
  execFileSync('tar', ['-xzf', join(dir, tarball), '-C', app, '--strip-components=1']);
  copyFileSync(join(root, 'package-lock.json'), join(app, 'package-lock.json'));
  const sources = existsSync(join(app, 'src')) ? readdirSync(join(app, 'src'), { recursive: true }).filter((f) => String(f).endsWith('.ts')) : [];
  check('package has no TypeScript sources', sources.length === 0, sources.slice(0, 3).join(', '));
  // The SQLite store's worker thread is its own entry point (scripts/build.mjs); the serve check below runs on it.
  check('package has the SQLite worker entry (dist/cli/sqlite-worker.js)', existsSync(join(app, 'dist', 'cli', 'sqlite-worker.js')));
  npm(['ci', '--offline', '--omit=dev', '--no-audit', '--no-fund'], app);
  const installed = readdirSync(join(app, 'node_modules'));
  check('installed without devDependencies', !installed.includes('tsx') && !installed.includes('esbuild') && !installed.includes('typescript'),
    ['tsx', 'esbuild', 'typescript'].filter((p) => installed.includes(p)).join(', ') || 'no tsx, esbuild, typescript');
  const bin = join(app, 'bin', 'tokenwatch.js');
  const run = (args, env = {}) => execFileSync(process.execPath, [bin, ...args], { cwd: app, encoding: 'utf8', env: { ...process.env, ...env } });

  check('tokenwatch --version', /^\d+\.\d+\.\d+/.test(run(['--version']).trim()));
  const ex = join(app, 'examples');
  const audit = readdirSync(join(ex, 'audit')).map((f) => join(ex, 'audit', f));
  const out = JSON.parse(run(['scan', '--audit-log', ...audit, '--cluster', 'prod-eks', '--cluster-snapshot', join(ex, 'cluster-snapshot.json'), '--format', 'json']));
  check('tokenwatch scan (bundled examples)', out.findings.length > 0, `${out.findings.length} findings`);

  // Over the 64 MiB parallel threshold and sparse (a stale-token event every 500 lines), in two rotated .gz files that
  // worker threads inflate one each: plain lines would need 1 GiB, and dense input is read by one thread
  // (src/scan/parallel.ts). The run with --jobs 2 preloads a hook that notes each Worker the CLI starts, so the check
  // fails when the bundle's worker.js never ran.
  const events = [];
  for (let i = 0; i < 60_000; i++) {
    const stale = i % 500 === 0;
    events.push(
      JSON.stringify({
        kind: 'Event',
        apiVersion: 'audit.k8s.io/v1',
        auditID: `id-${i}`,
        stage: 'ResponseComplete',
        verb: 'get',
        user: { username: `system:serviceaccount:kube-system:sa-${i % 3}` },
        sourceIPs: ['10.0.0.1'],
        responseStatus: { code: 200 },
        requestReceivedTimestamp: `2026-11-20T10:${String(Math.floor(i / 1000) % 60).padStart(2, '0')}:00.000000Z`,
        annotations: stale
          ? { 'authentication.k8s.io/stale-token': `subject: system:serviceaccount:kube-system:sa-${i % 3}, seconds after warning threshold: ${i}` }
          : { 'authorization.k8s.io/decision': 'allow', pad: 'x'.repeat(1100) },
      }),
    );
  }
  const gzFiles = [events.slice(0, 30_000), events.slice(30_000)].map((part, n) => {
    const file = join(dir, `audit-${n}.log.gz`);
    writeFileSync(file, gzipSync(`${part.join('\n')}\n`));
    return file;
  });
  const workersSeen = join(dir, 'workers-started.txt');
  const hook = join(dir, 'note-workers.cjs');
  writeFileSync(
    hook,
    "const wt = require('node:worker_threads');\n" +
      'const Base = wt.Worker;\n' +
      "wt.Worker = class extends Base { constructor(f, o) { super(f, o); require('node:fs').appendFileSync(process.env.TOKENWATCH_PACK_WORKERS, String(f) + '\\n'); } };\n" +
      "require('node:module').syncBuiltinESMExports();\n",
  );
  const scanGz = (jobs, env = {}) => run(['scan', '--audit-log', ...gzFiles, '--cluster', 'prod-eks', '--format', 'json', '--jobs', jobs], env);
  const serial = scanGz('1');
  const threads = scanGz('2', { NODE_OPTIONS: `--require ${hook}`, TOKENWATCH_PACK_WORKERS: workersSeen });
  const started = existsSync(workersSeen) ? readFileSync(workersSeen, 'utf8').trim().split('\n') : [];
  const parsed = JSON.parse(threads);
  check(
    'tokenwatch scan --jobs 2 (worker threads) = --jobs 1',
    threads === serial &&
      parsed.stats.lines === 60_000 &&
      parsed.stats.tokenUses > 0 &&
      // --jobs is capped at the available CPUs: on one CPU no worker starts, and that is right.
      (availableParallelism() < 2 || started.some((f) => f.endsWith(join('dist', 'cli', 'worker.js')))),
    `${parsed.stats.lines} lines, ${parsed.stats.tokenUses} token uses, ${started.length} worker thread(s) started: ${[...new Set(started.map((f) => f.split('/').slice(-3).join('/')))].join(', ') || 'none'}`,
  );

  const cfg = join(dir, 'config.yaml');
  writeFileSync(cfg, 'clusters:\n  - name: prod\n    audit:\n      file:\n        path: /var/log/kubernetes/audit.log\n');
  let cfgOut = '';
  try {
    cfgOut = run(['config', 'check', '--config', cfg]);
  } catch (e) {
    cfgOut = String(e.stdout ?? '') + String(e.stderr ?? '');
  }
  check('tokenwatch config check', cfgOut.includes('prod'), cfgOut.split('\n')[0]);

  // README's `config check --config config.example.yaml`, as written, from the installed package (Slack secrets
  // from the environment, as README shows); .env.example ships beside it.
  check('package ships config.example.yaml and .env.example', existsSync(join(app, 'config.example.yaml')) && existsSync(join(app, '.env.example')));
  let exampleOut = '';
  let exampleOk = false;
  try {
    exampleOut = run(['config', 'check', '--config', 'config.example.yaml'], { SLACK_BOT_TOKEN: 'xoxb-example', SLACK_APP_TOKEN: 'xapp-example' });
    exampleOk = true;
  } catch (e) {
    exampleOut = String(e.stdout ?? '') + String(e.stderr ?? '');
  }
  check('tokenwatch config check --config config.example.yaml', exampleOk && !exampleOut.includes('xoxb-example'), exampleOut.split('\n')[0]);

  // `tokenwatch serve` from the package: the bundled example audit log as a file source, the embedded SQLite store, an
  // ephemeral port; /readyz answers once the first poll ran, then SIGTERM stops it.
  const serveCfg = join(dir, 'serve.yaml');
  writeFileSync(
    serveCfg,
    `store:\n  path: ${join(dir, 'serve', 'tokenwatch.db')}\nhttp:\n  host: 127.0.0.1\n  port: 0\nclusters:\n  - name: prod\n    audit:\n      file:\n        path: ${join(ex, 'audit', 'kube-apiserver-audit.log')}\n    schedule: "0 0 1 1 *"\n`,
  );
  const serve = spawn(process.execPath, [bin, 'serve', '--config', serveCfg], { cwd: app, stdio: ['ignore', 'pipe', 'pipe'] });
  let serveText = '';
  const port = await new Promise((resolve) => {
    const onData = (b) => {
      serveText += b.toString();
      const m = /"port":(\d+)[^\n]*"msg":"tokenwatch serve started"/.exec(serveText);
      if (m) resolve(Number(m[1]));
    };
    serve.stdout.on('data', onData);
    serve.stderr.on('data', onData);
    serve.on('exit', () => resolve(undefined));
  });
  // /readyz is 200 once the schedule runs; the first poll's state shows in `polls` (pending, then ok).
  let body;
  for (let i = 0; port !== undefined && i < 600 && body?.polls?.prod !== 'ok'; i++) {
    const res = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
    body = res?.status === 200 ? await res.json() : undefined;
    if (body?.polls?.prod !== 'ok') await new Promise((r) => setTimeout(r, 100));
  }
  check('tokenwatch serve (file source, SQLite, /readyz)', body?.polls?.prod === 'ok', body ? JSON.stringify(body) : serveText.trim().split('\n').slice(-3).join(' | '));
  const serveStopped = new Promise((resolve) => (serve.exitCode !== null || serve.signalCode !== null ? resolve() : serve.once('exit', resolve)));
  serve.kill('SIGTERM');
  await serveStopped;

  const sandbox = spawn(process.execPath, [bin, 'sandbox', '--port', '0', '--no-slack', '--data-dir', join(dir, 'sandbox')], { cwd: app, stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  const url = await new Promise((resolve) => {
    const onData = (b) => {
      text += b.toString();
      const m = /http:\/\/127\.0\.0\.1:\d+\//.exec(text);
      if (m) resolve(m[0]);
    };
    sandbox.stdout.on('data', onData);
    sandbox.stderr.on('data', onData);
    sandbox.on('exit', () => resolve(undefined));
  });
  if (url) {
    const page = await (await fetch(url)).text();
    const js = await fetch(new URL('assets/blockkit.js', url));
    check('tokenwatch sandbox page', page.includes('<html') && js.ok, url);
  } else {
    check('tokenwatch sandbox page', false, text.trim().split('\n').slice(-3).join(' | '));
  }
  // Wait for it to stop: it still writes its store under the temporary folder while it shuts down, and removing the
  // folder meanwhile fails with ENOTEMPTY.
  const stopped = new Promise((resolve) => (sandbox.exitCode !== null || sandbox.signalCode !== null ? resolve() : sandbox.once('exit', resolve)));
  sandbox.kill('SIGTERM');
  await stopped;
} catch (e) {
  check('unexpected error', false, e instanceof Error ? e.message : String(e));
} finally {
  if (keep) console.log(`test:pack: kept ${dir}`);
  else rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
}
console.log(`test:pack: ${failed === 0 ? 'all checks passed' : `${failed} check(s) failed`}`);
process.exit(failed === 0 ? 0 : 1);
