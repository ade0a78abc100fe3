/**
 * `npm run bench`: checks the scan performance goals (docs/design/architecture.md "Performance targets"), side by side in one
 * run, `--runs` rounds (default 5) with the tools alternating, on a warm page cache; each figure is the median of the
 * rounds with their min–max, each ratio the median of the rounds' own ratios (a round's tools ran back to back, under
 * about the same load) with its min–max:
 * 1. 1 GiB of plain audit JSON lines (0.1 % stale events): `tokenwatch scan` ≤ 1.0× `grep -c -F stale-token`;
 * 2. the same events in 16 rotated `.gz` files: scan ≤ 1.2× `zcat … | grep -c -F stale-token`;
 * 3. scan ≥ 20× faster than the `jq` select on the plain file;
 * 4. peak RSS ≤ 150 MB at the default `--jobs` (and the MB each worker adds);
 * 5. CLI start-up (compiled): `tokenwatch --version` and a scan of a one-line file each ≤ 0.1 s;
 * 6. dense input (a plain log with 30 % stale events): the default `--jobs` ≤ 1.1× `--jobs 1` in time and ≤ 1.3× in
 *    peak RSS (the default never loses to one thread);
 * plus, for information: a 1 MiB file scan, the serial (`--jobs 1`) scan against grep (the per-core scanner's
 * distance from 1.0×), scan against `grep -c -F` given the prefilter's three needles (`PREFILTER_NEEDLES`,
 * src/audit/terms.ts: the search scan makes, where goal 1 gives grep one needle), and a check that `--jobs 1` and
 * the default print the same JSON.
 *
 * Timings are printed as median (min–max) of the rounds, the min being the best of N; ratios as the median of the
 * rounds' own ratios and the best-of-N ratio (best of one tool over best of the other). The load average
 * (`/proc/loadavg`) is printed at the start and the end; when the 1-minute load at the start or during the rounds is
 * at least the number of cores, the machine is too busy to judge: a missed timing goal then reads BUSY, not MISS.
 *
 * Usage: `npm run bench -- [--size-mb N] [--dense-mb N] [--gz-files N] [--runs N] [--data-dir DIR] [--clean]
 *         [--regenerate] [--flood-events N | --no-flood]`
 *   --size-mb N        size of the synthetic log in MiB (default 1024; also TOKENWATCH_BENCH_SIZE_MB)
 *   --dense-mb N       size of the dense (30 % stale) log in MiB (default 256)
 *   --gz-files N       rotated .gz files the same log is split into (default 16)
 *   --runs N           timed rounds, each tool once per round (default 5; median and min–max printed)
 *   --data-dir DIR     where the inputs are written (default bench/data; e.g. a directory under /tmp)
 *   --clean            delete the inputs written to the data directory at the end
 *   --regenerate       rewrite the inputs even if they exist
 *   --flood-events N   events of the 401-flood benchmark run afterwards (bench/flood.ts `--events`; default 1,000,000)
 *   --no-flood         do not run the 401-flood benchmark afterwards
 *
 * Inputs are written once under the data directory (`bench/data/` is git-ignored) and reused; the compiled CLI is
 * always built into `bench/data/build` (it resolves its dependencies from the repository). Not part of `npm test`.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import {
  closeSync,
  copyFileSync,
  createReadStream,
  createWriteStream,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { createGzip } from 'node:zlib';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { PLAIN_PARALLEL_MIN_BYTES } from '../src/scan/parallel.js';
import { PREFILTER_NEEDLES } from '../src/audit/terms.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const DATA_DIR = join(ROOT, 'bench', 'data');
const MiB = 1024 * 1024;

/** The goals of docs/design/architecture.md "Performance targets". */
const TARGETS = {
  maxRatioToGrep: 1.0,
  maxRatioToZcatGrep: 1.2,
  minSpeedupOverJq: 20,
  maxRssMB: 150,
  maxStartupSeconds: 0.1,
  /** Dense input: default `--jobs` time / `--jobs 1` time. */
  maxDenseTimeRatio: 1.1,
  /** Dense input: default `--jobs` peak RSS / `--jobs 1` peak RSS. */
  maxDenseRssRatio: 1.3,
};

// ---------------------------------------------------------------------------------------------
// Arguments

interface Args {
  sizeMB: number;
  denseMB: number;
  dataDir: string;
  clean: boolean;
  gzFiles: number;
  runs: number;
  regenerate: boolean;
  /** `--flood-events N`: passed to bench/flood.ts as `--events N`; `--no-flood` skips it. */
  floodEvents?: number;
  flood: boolean;
}

const USAGE =
  'usage: npm run bench -- [--size-mb N] [--dense-mb N] [--gz-files N] [--runs N] [--data-dir DIR] [--clean] [--regenerate] [--flood-events N | --no-flood]';

function positiveInt(flag: string, raw: string | undefined): number {
  // Digits only: Number() would also take '1e3', '0x40' and ' 5 '.
  const v = raw !== undefined && /^[0-9]+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(v) || v <= 0) fail(`${flag} needs a positive whole number (got '${raw ?? ''}')`);
  return v;
}

function parseArgs(argv: string[], env: NodeJS.ProcessEnv): Args {
  const fromEnv = env['TOKENWATCH_BENCH_SIZE_MB'];
  const args: Args = {
    sizeMB: fromEnv ? positiveInt('TOKENWATCH_BENCH_SIZE_MB', fromEnv) : 1024,
    denseMB: 256,
    dataDir: DATA_DIR,
    clean: false,
    gzFiles: 16,
    runs: 5,
    regenerate: false,
    flood: true,
  };
  for (let i = 0; i < argv.length; i++) {
    const raw = argv[i] ?? '';
    const eq = raw.indexOf('=');
    const a = raw.startsWith('--') && eq !== -1 ? raw.slice(0, eq) : raw;
    const value = (): string | undefined => (eq !== -1 && raw.startsWith('--') ? raw.slice(eq + 1) : argv[++i]);
    if (a === '--size-mb') args.sizeMB = positiveInt(a, value());
    else if (a === '--dense-mb') args.denseMB = positiveInt(a, value());
    else if (a === '--data-dir') {
      const dir = value();
      if (!dir) fail(`--data-dir needs a directory (${USAGE})`);
      args.dataDir = resolve(dir);
    } else if (a === '--clean') args.clean = true;
    else if (a === '--gz-files') args.gzFiles = positiveInt(a, value());
    else if (a === '--runs') args.runs = positiveInt(a, value());
    else if (a === '--regenerate') args.regenerate = true;
    else if (a === '--flood-events') args.floodEvents = positiveInt(a, value());
    else if (a === '--no-flood') args.flood = false;
    else if (a === '--help' || a === '-h') {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    } else fail(`unknown argument '${raw}' (${USAGE})`);
  }
  if (!args.flood && args.floodEvents !== undefined) fail(`--flood-events and --no-flood exclude each other (${USAGE})`);
  return args;
}

function fail(message: string): never {
  process.stderr.write(`bench: ${message}\n`);
  process.exit(2);
}

// ---------------------------------------------------------------------------------------------
// Synthetic audit log

/** ServiceAccounts whose pods send stale tokens in the synthetic log, with their pods and token age at the start. */
const STALE_SUBJECTS = [
  { ns: 'kube-system', sa: 'multus', pod: 'kube-multus-ds', ua: 'multus/v0.0.0 (linux/amd64) kubernetes/$Format', pods: 6, ageDays: 86 },
  { ns: 'logging', sa: 'fluent-bit', pod: 'fluent-bit', ua: 'Fluent-Bit', pods: 8, ageDays: 40 },
  { ns: 'flux-system', sa: 'helm-controller', pod: 'helm-controller-7d9c8b5f6', ua: 'helm-controller/v0.21.0 (linux/amd64) kubernetes/abc1234', pods: 1, ageDays: 70 },
  { ns: 'istio-system', sa: 'kiali', pod: 'kiali-5c7b9d8f4', ua: 'kiali/v1.45.0 (linux/amd64) kubernetes/$Format', pods: 2, ageDays: 15 },
  { ns: 'monitoring', sa: 'nri-kubernetes', pod: 'nri-kubernetes', ua: 'Go-http-client/1.1', pods: 4, ageDays: 92 },
] as const;

/** Fresh-token traffic: typical controllers and agents. */
const FRESH_SUBJECTS = [
  { ns: 'kube-system', sa: 'aws-node', ua: 'aws-node/v1.18.0 (linux/amd64) kubernetes/$Format', resource: 'pods' },
  { ns: 'kube-system', sa: 'coredns', ua: 'coredns/v1.11.1 (linux/amd64) kubernetes/$Format', resource: 'endpointslices' },
  { ns: 'kube-system', sa: 'kube-proxy', ua: 'kube-proxy/v1.31.2 (linux/amd64) kubernetes/5864a46', resource: 'services' },
  { ns: 'cert-manager', sa: 'cert-manager', ua: 'cert-manager/v1.15.0 (linux/amd64) kubernetes/$Format', resource: 'certificates' },
  { ns: 'argocd', sa: 'argocd-application-controller', ua: 'argocd-application-controller/v2.12.3 (linux/amd64) kubernetes/$Format', resource: 'applications' },
  { ns: 'karpenter', sa: 'karpenter', ua: 'karpenter/v1.0.1 (linux/amd64) kubernetes/$Format', resource: 'nodeclaims' },
] as const;
/** Pods per fresh subject. */
const FRESH_PODS = 16;

const VERBS = ['get', 'list', 'watch', 'update', 'patch'] as const;
const START_MS = Date.parse('2026-11-20T00:00:00Z');
/** One event every 40 ms of log time: a 1 GiB log covers about 12 hours. */
const STEP_MS = 40;
/** Share of stale-token events in the main synthetic log: one in 1000 (0.1 %). */
const SPARSE_STALE_SHARE = 0.001;
/** Share of stale-token events in the dense synthetic log (a cluster deep in trouble): 30 %. */
const DENSE_STALE_SHARE = 0.3;

function hex(n: number, width: number): string {
  return (n >>> 0).toString(16).padStart(width, '0').slice(-width);
}

/** Deterministic UUID-shaped id from two numbers. */
function uuid(i: number, salt: number): string {
  const a = hex(Math.imul(i ^ salt, 2654435761), 8);
  return `${a}-${hex(i >>> 16, 4)}-4${hex(i, 3)}-8${hex(salt, 3)}-${hex(i, 12)}`;
}

/**
 * The parts of an audit event line that stay fixed for one pod: everything before the auditID,
 * and the user/source/object parts. Only the auditID, verb, timestamps and (for stale uses) the
 * seconds after warning change per line, so a line is a handful of string concatenations.
 */
interface PodTemplate {
  /** From `"user"` to the end of `"responseStatus"`, with a trailing comma. */
  middle: string;
  /** The authorization annotations (always present), without braces. */
  authz: string;
  /** For stale pods: annotation prefix up to the seconds value. */
  stalePrefix?: string;
  /** For stale pods: the token's warnafter point, epoch ms. */
  warnAfter?: number;
}

function podTemplate(ns: string, sa: string, pod: string, ua: string, resource: string, n: number, stale?: { warnAfter: number }): PodTemplate {
  const podUid = uuid(n * 7919 + sa.length, 17);
  const node = `ip-192-168-${(n * 37) & 255}-${(n * 101) & 255}.us-west-2.compute.internal`;
  const middle =
    `"requestURI":"/api/v1/namespaces/${ns}/${resource}?limit=500&resourceVersion=0",` +
    `"user":{"username":"system:serviceaccount:${ns}:${sa}","uid":"${uuid(sa.length * 31, 99)}",` +
    `"groups":["system:serviceaccounts","system:serviceaccounts:${ns}","system:authenticated"],` +
    `"extra":{"authentication.kubernetes.io/credential-id":["JTI=${uuid(n, 5)}"],` +
    `"authentication.kubernetes.io/node-name":["${node}"],"authentication.kubernetes.io/node-uid":["${uuid(n, 7)}"],` +
    `"authentication.kubernetes.io/pod-name":["${pod}"],"authentication.kubernetes.io/pod-uid":["${podUid}"]}},` +
    `"sourceIPs":["192.168.${(n * 37) & 255}.${(n * 101) & 255}"],"userAgent":"${ua}",` +
    `"objectRef":{"resource":"${resource}","namespace":"${ns}","apiVersion":"v1"},` +
    `"responseStatus":{"metadata":{},"code":200},`;
  const authz = `"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":"RBAC: allowed by ClusterRoleBinding \\"${sa}\\" of ClusterRole \\"${sa}\\" to ServiceAccount \\"${sa}/${ns}\\""`;
  const t: PodTemplate = { middle, authz };
  if (stale) {
    t.stalePrefix = `,"authentication.k8s.io/stale-token":"subject: system:serviceaccount:${ns}:${sa}, seconds after warning threshold: `;
    t.warnAfter = stale.warnAfter;
  }
  return t;
}

/** The synthetic log: path, size in bytes, whether it was reused, generation time in seconds. */
interface Generated {
  file: string;
  bytes: number;
  reused: boolean;
  seconds: number;
}

/**
 * Writes (or reuses) a synthetic JSON-lines audit log of about `sizeMB` MiB: 99.9 % fresh-token
 * requests from a few controllers, 0.1 % stale-token requests from {@link STALE_SUBJECTS} (each
 * pod with one token, whose `warnafter` lies `ageDays` before the log starts). Lines are built from
 * per-pod templates and written in 16 MiB chunks with synchronous writes to a temporary file renamed
 * at the end, so an interrupted run never leaves a partial file that would be reused.
 */
export function generate(
  sizeMB: number,
  regenerate: boolean,
  maxLines = Number.POSITIVE_INFINITY,
  name = `audit-${sizeMB}mb.jsonl`,
  staleShare = SPARSE_STALE_SHARE,
  dataDir = DATA_DIR,
): Generated {
  mkdirSync(dataDir, { recursive: true });
  const file = join(dataDir, name);
  const target = sizeMB * MiB;
  if (!regenerate && existsSync(file) && (statSync(file).size >= target || maxLines !== Number.POSITIVE_INFINITY)) {
    return { file, bytes: statSync(file).size, reused: true, seconds: 0 };
  }
  const started = performance.now();

  const fresh: PodTemplate[] = [];
  let n = 0;
  for (let p = 0; p < FRESH_PODS; p++) {
    for (const s of FRESH_SUBJECTS) {
      fresh.push(podTemplate(s.ns, s.sa, `${s.sa}-${hex(p * 40503 + 11, 5)}`, s.ua, s.resource, n++));
    }
  }
  const stale: PodTemplate[] = [];
  const maxPods = Math.max(...STALE_SUBJECTS.map((s) => s.pods));
  for (let p = 0; p < maxPods; p++) {
    for (const s of STALE_SUBJECTS) {
      if (p >= s.pods) continue;
      const warnAfter = START_MS - s.ageDays * 86_400_000 + p * 3_600_000;
      stale.push(podTemplate(s.ns, s.sa, `${s.pod}-${hex(p * 40503 + 11, 5)}`, s.ua, 'pods', n++, { warnAfter }));
    }
  }

  const tmp = `${file}.tmp-${process.pid}`;
  const fd = openSync(tmp, 'w');
  let written = 0;
  let chunk = '';
  const CHUNK = 16 * MiB;
  let second = -1;
  let isoSecond = '';
  try {
    for (let i = 0; written + chunk.length < target && i < maxLines; i++) {
      const t = START_MS + i * STEP_MS;
      const sec = Math.floor(t / 1000);
      if (sec !== second) {
        second = sec;
        isoSecond = new Date(sec * 1000).toISOString().slice(0, 19);
      }
      const micro = String((t % 1000) * 1000 + ((i * 7919) % 1000)).padStart(6, '0');
      // Line i is stale when the running count of stale lines (i + 1) × share steps up: evenly spread, 1 in 1000 at 0.1 %.
      const isStale = Math.floor((i + 1) * staleShare) > Math.floor(i * staleShare);
      const tpl = isStale ? stale[Math.floor(i * staleShare) % stale.length] : fresh[i % fresh.length];
      if (!tpl) throw new Error('no template');
      const annotations =
        tpl.stalePrefix !== undefined && tpl.warnAfter !== undefined
          ? `${tpl.authz}${tpl.stalePrefix}${Math.floor((t - tpl.warnAfter) / 1000)}"`
          : tpl.authz;
      chunk +=
        `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"${uuid(i, 3)}",` +
        `"stage":"ResponseComplete","verb":"${VERBS[i % VERBS.length] ?? 'get'}",${tpl.middle}` +
        `"requestReceivedTimestamp":"${isoSecond}.${micro}Z","stageTimestamp":"${isoSecond}.${micro}Z",` +
        `"annotations":{${annotations}}}\n`;
      if (chunk.length >= CHUNK) {
        writeSync(fd, chunk);
        written += chunk.length; // ASCII only: characters = bytes
        chunk = '';
      }
    }
    if (chunk.length > 0) {
      writeSync(fd, chunk);
      written += chunk.length;
    }
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
  return { file, bytes: written, reused: false, seconds: (performance.now() - started) / 1000 };
}

/**
 * Splits the plain log into `count` rotated gzip files (at line boundaries, in order, named like the API server's
 * rotated backups `audit-2026-11-20T03-00-00.000.log.gz`) under `bench/data/rotated-<N>mb-<count>/`, written to a
 * temporary directory renamed at the end; reused when present.
 */
async function generateRotated(plain: string, sizeMB: number, count: number, regenerate: boolean, dataDir = DATA_DIR): Promise<string[]> {
  const dir = join(dataDir, `rotated-${sizeMB}mb-${count}`);
  const names = Array.from({ length: count }, (_, i) => {
    const t = new Date(START_MS + i * 3_600_000).toISOString().replace(/:/g, '-');
    return `audit-${t}.log.gz`;
  });
  if (!regenerate && existsSync(dir) && names.every((n) => existsSync(join(dir, n)))) return names.map((n) => join(dir, n));
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  const size = statSync(plain).size;
  const fd = openSync(plain, 'r');
  const cuts = [0];
  try {
    const buf = Buffer.alloc(64 * 1024);
    for (let i = 1; i < count; i++) {
      let pos = Math.floor((size * i) / count);
      for (;;) {
        const n = readSync(fd, buf, 0, buf.length, pos);
        const nl = n === 0 ? -1 : buf.subarray(0, n).indexOf(0x0a);
        if (n === 0) break;
        if (nl !== -1) {
          pos += nl + 1;
          break;
        }
        pos += n;
      }
      cuts.push(Math.min(pos, size));
    }
  } finally {
    closeSync(fd);
  }
  cuts.push(size);
  for (let i = 0; i < count; i++) {
    const [start, end] = [cuts[i] ?? 0, cuts[i + 1] ?? size];
    const source = end > start ? createReadStream(plain, { start, end: end - 1 }) : Readable.from([]);
    await pipeline(source, createGzip(), createWriteStream(join(tmp, names[i] ?? `part-${i}.log.gz`)));
  }
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  return names.map((n) => join(dir, n));
}

// ---------------------------------------------------------------------------------------------
// Measuring

/** `/proc/loadavg`'s three load averages (`os.loadavg()` where there is no /proc), as `cat /proc/loadavg` prints them. */
function readLoadavg(): string {
  try {
    return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  } catch {
    return loadavg()
      .map((l) => l.toFixed(2))
      .join(' ');
  }
}

interface Run {
  seconds: number;
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Spawns a command, captures output (stdout optionally discarded), measures wall time. */
function timed(cmd: string, args: string[], keepStdout: boolean, env: NodeJS.ProcessEnv = process.env): Promise<Run> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(cmd, args, { cwd: ROOT, env, stdio: ['ignore', keepStdout ? 'pipe' : 'ignore', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout?.on('data', (b: Buffer) => out.push(b));
    child.stderr?.on('data', (b: Buffer) => err.push(b));
    child.on('error', reject);
    child.on('close', (code) =>
      resolve({
        seconds: (performance.now() - started) / 1000,
        code,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
      }),
    );
  });
}

async function commandExists(cmd: string): Promise<boolean> {
  try {
    const r = await timed('sh', ['-c', `command -v ${cmd}`], true);
    return r.code === 0;
  } catch {
    return false;
  }
}

/** Reads the files once so every timed tool starts from a warm page cache. */
async function warmCache(files: string[]): Promise<void> {
  for (const file of files) {
    await new Promise<void>((resolve, reject) => {
      createReadStream(file, { highWaterMark: 4 * MiB })
        .on('data', () => undefined)
        .on('end', resolve)
        .on('error', reject);
    });
  }
}

interface ScanMeasure {
  seconds: number;
  rssMB: number;
  rssHow: string;
  /** CPU time (user + system, all threads), seconds; undefined without `/usr/bin/time`. */
  cpu?: number;
  tokenUses: number;
  findings: number;
  /** The JSON document printed, for the identity check. */
  stdout: string;
}

/** Parses `/usr/bin/time -v` output for the CPU time (user + system) of the child, in seconds. */
function parseCpu(stderr: string): number | undefined {
  const u = /User time \(seconds\):\s*([\d.]+)/.exec(stderr)?.[1];
  const s = /System time \(seconds\):\s*([\d.]+)/.exec(stderr)?.[1];
  return u !== undefined && s !== undefined ? Number(u) + Number(s) : undefined;
}

/**
 * Wall time and (with `/usr/bin/time`) CPU time of a short command, best of `n`: on a busy machine the CPU time
 * of a single-threaded start-up is close to what its wall time would be on a quiet one.
 */
async function startup(args: string[], n: number, env: NodeJS.ProcessEnv = process.env): Promise<{ seconds: number; cpu?: number }> {
  let wall = Number.POSITIVE_INFINITY;
  let cpu: number | undefined;
  const hasTime = existsSync('/usr/bin/time');
  for (let i = 0; i < n; i++) {
    const r = hasTime
      ? await timed('/usr/bin/time', ['-v', process.execPath, ...args], false, env)
      : await timed(process.execPath, args, false, env);
    if (r.code !== 0) throw new Error(`${args.join(' ')} exited ${r.code}: ${r.stderr.trim().split('\n')[0] ?? ''}`);
    wall = Math.min(wall, r.seconds);
    const c = hasTime ? parseCpu(r.stderr) : undefined;
    if (c !== undefined) cpu = Math.min(cpu ?? c, c);
  }
  return { seconds: wall, ...(cpu !== undefined ? { cpu } : {}) };
}

/** Parses `/usr/bin/time -v` output for the peak RSS of the child, in MB (kbytes / 1024). */
function parseTimeV(stderr: string): number | undefined {
  const m = /Maximum resident set size \(kbytes\):\s*(\d+)/.exec(stderr);
  return m?.[1] ? Number(m[1]) / 1024 : undefined;
}

function summary(stdout: string): { tokenUses: number; findings: number } {
  const doc: unknown = JSON.parse(stdout);
  if (typeof doc !== 'object' || doc === null) throw new Error('scan printed no JSON object');
  const d = doc as { findings?: unknown; stats?: { tokenUses?: unknown } };
  return {
    findings: Array.isArray(d.findings) ? d.findings.length : -1,
    tokenUses: typeof d.stats?.tokenUses === 'number' ? d.stats.tokenUses : -1,
  };
}

/**
 * Builds the CLI as `npm run build` does (scripts/build.mjs, the esbuild bundle) into `bench/data/build/dist` with a
 * copy of package.json beside it, so the benchmark times the JavaScript a production install runs — not tsx
 * transpiling at start-up — without leaving a `dist/` that `bin/tokenwatch.js` would prefer over the sources afterwards.
 * @returns the path of the compiled `cli/main.js`, relative to the repository root.
 */
function buildCli(): string {
  const out = join(DATA_DIR, 'build');
  rmSync(join(out, 'dist'), { recursive: true, force: true });
  execFileSync(process.execPath, [join(ROOT, 'scripts', 'build.mjs'), '--out', relative(ROOT, join(out, 'dist'))], { cwd: ROOT, stdio: 'inherit' });
  copyFileSync(join(ROOT, 'package.json'), join(out, 'package.json'));
  return relative(ROOT, join(out, 'dist', 'cli', 'main.js'));
}

let CLI = 'bin/tokenwatch.js';

/** One `tokenwatch scan --format json` of `files`, with its peak RSS (threads included: they share the process). */
async function measureScan(files: string[], jobs?: number): Promise<ScanMeasure> {
  const cli = [CLI, 'scan', '--format', 'json', '--cluster', 'bench', ...(jobs ? ['--jobs', String(jobs)] : []), '--audit-log', ...files.map((f) => relative(ROOT, f))];
  if (existsSync('/usr/bin/time')) {
    const r = await timed('/usr/bin/time', ['-v', process.execPath, ...cli], true);
    if (r.code !== 0) throw new Error(`scan exited ${r.code}: ${r.stderr.trim().split('\n')[0] ?? ''}`);
    const rss = parseTimeV(r.stderr);
    if (rss !== undefined) {
      const cpu = parseCpu(r.stderr);
      return { seconds: r.seconds, rssMB: rss, rssHow: '/usr/bin/time -v', stdout: r.stdout, ...(cpu !== undefined ? { cpu } : {}), ...summary(r.stdout) };
    }
  }
  // Fallback: time the CLI, then take the peak RSS of a child that runs runScan in-process.
  const r = await timed(process.execPath, cli, true);
  if (r.code !== 0) throw new Error(`scan exited ${r.code}: ${r.stderr.trim().split('\n')[0] ?? ''}`);
  const child = await timed(process.execPath, ['--import', 'tsx', 'bench/scan-rss.ts', String(jobs ?? availableParallelism()), ...files], true);
  if (child.code !== 0) throw new Error(`bench/scan-rss.ts exited ${child.code}: ${child.stderr.trim()}`);
  const rssKB = Number(child.stdout.trim());
  return { seconds: r.seconds, rssMB: rssKB / 1024, rssHow: 'process.resourceUsage().maxRSS', stdout: r.stdout, ...summary(r.stdout) };
}

/** Median and range of some measurements (the median of an even count is the mean of the two middle values). */
interface Spread {
  median: number;
  min: number;
  max: number;
}

function spread(xs: readonly number[]): Spread {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) throw new Error('no runs');
  const mid = Math.floor(s.length / 2);
  const median = s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
  return { median, min: s[0]!, max: s[s.length - 1]! };
}

/** `0.53 s (0.45–0.63)`: the median and the range. */
function seconds(x: Spread, digits = 2): string {
  return `${x.median.toFixed(digits)} s (${x.min.toFixed(digits)}–${x.max.toFixed(digits)})`;
}

/** `0.79× (0.70–0.85×)`: the median ratio and the range. */
function ratio(x: Spread): string {
  return `${x.median.toFixed(2)}× (${x.min.toFixed(2)}–${x.max.toFixed(2)}×)`;
}

/** The run at the median (the lower middle of an even count), with the largest peak RSS of all runs. */
function medianScan(runs: readonly ScanMeasure[]): ScanMeasure {
  const sorted = [...runs].sort((a, b) => a.seconds - b.seconds);
  const mid = sorted[Math.floor((sorted.length - 1) / 2)];
  if (!mid) throw new Error('no runs');
  return { ...mid, rssMB: Math.max(...runs.map((r) => r.rssMB)) };
}

/** Keeps the faster run, and the larger peak RSS of the two. */
function best(a: ScanMeasure | undefined, b: ScanMeasure): ScanMeasure {
  if (!a) return b;
  const faster = b.seconds < a.seconds ? b : a;
  return { ...faster, rssMB: Math.max(a.rssMB, b.rssMB) };
}

function verdict(ok: boolean): string {
  return ok ? 'PASS' : 'MISS';
}

/** The scan JSON, normalised (the whole document must match: findings, stats, now, cluster). */
function comparable(stdout: string): string {
  return JSON.stringify(JSON.parse(stdout));
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2), process.env);
  const RUNS = args.runs;
  const jobs = availableParallelism();
  const cores = cpus().length;
  const loadAtStart = readLoadavg();
  process.stdout.write(`load average at start: ${loadAtStart} (${cores} cores)\n`);
  const gen = generate(args.sizeMB, args.regenerate, Number.POSITIVE_INFINITY, `audit-${args.sizeMB}mb.jsonl`, SPARSE_STALE_SHARE, args.dataDir);
  const sizeMB = gen.bytes / MiB;
  const rel = relative(ROOT, gen.file);
  process.stdout.write(
    gen.reused
      ? `input: ${rel} (${sizeMB.toFixed(0)} MiB, reused; --regenerate to rewrite)\n`
      : `input: ${rel} (${sizeMB.toFixed(0)} MiB, written in ${gen.seconds.toFixed(1)} s)\n`,
  );
  const gzStarted = performance.now();
  const gzFiles = await generateRotated(gen.file, args.sizeMB, args.gzFiles, args.regenerate || !gen.reused, args.dataDir);
  const gzBytes = gzFiles.reduce((n, f) => n + statSync(f).size, 0);
  process.stdout.write(
    `input: ${relative(ROOT, dirname(gzFiles[0] ?? DATA_DIR))}/ (${gzFiles.length} rotated .gz, ${(gzBytes / MiB).toFixed(0)} MiB compressed; ${((performance.now() - gzStarted) / 1000).toFixed(1)} s)\n`,
  );
  const denseGen = generate(args.denseMB, args.regenerate, Number.POSITIVE_INFINITY, `audit-dense-${args.denseMB}mb.jsonl`, DENSE_STALE_SHARE, args.dataDir);
  process.stdout.write(
    `input: ${relative(ROOT, denseGen.file)} (${(denseGen.bytes / MiB).toFixed(0)} MiB, ${DENSE_STALE_SHARE * 100} % stale events${denseGen.reused ? ', reused' : ''})\n`,
  );
  const small = generate(1, args.regenerate, Number.POSITIVE_INFINITY, 'audit-1mb.jsonl', SPARSE_STALE_SHARE, args.dataDir);
  const oneLine = generate(1, args.regenerate, 1, 'one-line.jsonl', SPARSE_STALE_SHARE, args.dataDir);
  process.stdout.write('building the CLI (scripts/build.mjs) into bench/data/build …\n');
  CLI = buildCli();
  await warmCache([gen.file, ...gzFiles, small.file, denseGen.file]);

  const grepArgs = ['-c', '-F', 'stale-token'];
  // The same search as scan's prefilter: any of its needles (for information beside the goal's one needle).
  const grepNeedleArgs = ['-c', '-F', ...PREFILTER_NEEDLES.flatMap((n) => ['-e', n])];
  const zcatGrep = `zcat ${gzFiles.map((f) => `'${relative(ROOT, f)}'`).join(' ')} | grep -c -F stale-token`;
  // RUNS rounds, tools alternating; medians and ranges, ratios per round (on a shared machine the load changes
  // between rounds more than within one).
  const grepRuns: Run[] = [];
  const grepNeedleRuns: Run[] = [];
  const scanRuns: ScanMeasure[] = [];
  const serialRuns: ScanMeasure[] = [];
  const zgrepRuns: Run[] = [];
  const gzScanRuns: ScanMeasure[] = [];
  const denseRuns: ScanMeasure[] = [];
  const denseSerialRuns: ScanMeasure[] = [];
  const loads: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    loads.push(loadavg()[0] ?? 0);
    grepRuns.push(await timed('grep', [...grepArgs, gen.file], true));
    scanRuns.push(await measureScan([gen.file]));
    grepNeedleRuns.push(await timed('grep', [...grepNeedleArgs, gen.file], true));
    serialRuns.push(await measureScan([gen.file], 1));
    zgrepRuns.push(await timed('sh', ['-c', zcatGrep], true));
    gzScanRuns.push(await measureScan(gzFiles));
    // Dense: the two in alternating order, so neither always runs right after the other's page-cache / CPU state.
    if (i % 2 === 0) {
      denseRuns.push(await measureScan([denseGen.file]));
      denseSerialRuns.push(await measureScan([denseGen.file], 1));
    } else {
      denseSerialRuns.push(await measureScan([denseGen.file], 1));
      denseRuns.push(await measureScan([denseGen.file]));
    }
  }
  const gzSerial = await measureScan(gzFiles, 1); // once: for the identity check and the serial RSS
  const grep = grepRuns[0];
  const zgrep = zgrepRuns[0];
  const grepNeedle = grepNeedleRuns[0];
  const scan = medianScan(scanRuns);
  const serial = medianScan(serialRuns);
  const gzScan = medianScan(gzScanRuns);
  if (!grep || !zgrep || !grepNeedle) throw new Error('no runs');
  const t = {
    grep: spread(grepRuns.map((r) => r.seconds)),
    grepNeedles: spread(grepNeedleRuns.map((r) => r.seconds)),
    scan: spread(scanRuns.map((r) => r.seconds)),
    serial: spread(serialRuns.map((r) => r.seconds)),
    zgrep: spread(zgrepRuns.map((r) => r.seconds)),
    gzScan: spread(gzScanRuns.map((r) => r.seconds)),
    dense: spread(denseRuns.map((r) => r.seconds)),
    denseSerial: spread(denseSerialRuns.map((r) => r.seconds)),
  };
  const rss = {
    dense: spread(denseRuns.map((r) => r.rssMB)),
    denseSerial: spread(denseSerialRuns.map((r) => r.rssMB)),
  };
  const perRound = (a: readonly { seconds: number }[], b: readonly { seconds: number }[]) => spread(a.map((x, i) => x.seconds / b[i]!.seconds));
  const r = {
    toGrep: perRound(scanRuns, grepRuns),
    serialToGrep: perRound(serialRuns, grepRuns),
    toGrepNeedles: perRound(scanRuns, grepNeedleRuns),
    toZgrep: perRound(gzScanRuns, zgrepRuns),
    denseTime: perRound(denseRuns, denseSerialRuns),
    denseRss: spread(denseRuns.map((x, i) => x.rssMB / denseSerialRuns[i]!.rssMB)),
    sparseTime: perRound(scanRuns, serialRuns),
    sparseRss: spread(scanRuns.map((x, i) => x.rssMB / serialRuns[i]!.rssMB)),
  };
  /** Best of N: the fastest run of one tool over the fastest of the other. */
  const bestRatio = (a: Spread, b: Spread): number => a.min / b.min;
  for (const g of [...grepRuns, ...grepNeedleRuns, ...zgrepRuns]) if (g.code !== 0 && g.code !== 1) throw new Error(`grep failed: ${g.stderr.trim()}`);
  const grepCount = Number(grep.stdout.trim());
  const grepNeedleCount = Number(grepNeedle.stdout.trim());
  const zgrepCount = Number(zgrep.stdout.trim());

  // Start-up (compiled): best of 5 each. NODE_EXTRA_CA_CERTS makes Node parse that CA bundle while it starts, before
  // any of our code runs (50 ms here with the Debian bundle): when it is set, start-up is also measured without it.
  const startupSet = async (env: NodeJS.ProcessEnv) => ({
    version: await startup([CLI, '--version'], 5, env),
    oneScan: await startup([CLI, 'scan', '--format', 'json', '--audit-log', relative(ROOT, oneLine.file)], 5, env),
    bare: await startup(['-e', '0'], 5, env),
  });
  const { version, oneScan, bare } = await startupSet(process.env);
  const extraCa = process.env['NODE_EXTRA_CA_CERTS'];
  const { NODE_EXTRA_CA_CERTS: _omitted, ...envWithoutCa } = process.env;
  const withoutCa = extraCa ? await startupSet(envWithoutCa) : undefined;
  let smallScan: ScanMeasure | undefined;
  for (let i = 0; i < RUNS; i++) smallScan = best(smallScan, await measureScan([small.file]));
  if (!smallScan) throw new Error('no runs');
  const cpuNote = (r: { cpu?: number }): string => (r.cpu === undefined ? '' : `, CPU ${r.cpu.toFixed(3)} s`);

  let jqSeconds: number | undefined;
  const hasJq = await commandExists('jq');
  if (hasJq) {
    const jq = await timed('jq', ['-c', 'select(.annotations["authentication.k8s.io/stale-token"])', gen.file], false);
    if (jq.code !== 0) throw new Error(`jq failed: ${jq.stderr.trim()}`);
    jqSeconds = jq.seconds;
  }

  const rate = (s: number): string => `${(sizeMB / s).toFixed(0)} MiB/s`;
  loads.push(loadavg()[0] ?? 0);
  const load = Math.max(...loads);
  const loadRange = spread(loads);
  const loadAtEnd = readLoadavg();
  // Too busy to judge: other work held every core when the bench started or while it ran (1-minute load ≥ cores).
  const busy = (loadavg()[0] ?? 0) >= cores || load >= cores || Number(loadAtStart.split(' ')[0]) >= cores;
  /** A timing goal's verdict: a miss on a busy machine is BUSY (not judged), not MISS. */
  const timedVerdict = (ok: boolean): string => (ok ? 'PASS' : busy ? 'BUSY' : 'MISS');
  const dense = medianScan(denseRuns);
  const denseSerial = medianScan(denseSerialRuns);
  // The calling thread reads too: --jobs N starts N - 1 worker threads.
  const perWorker = jobs > 1 ? (scan.rssMB - serial.rssMB) / (jobs - 1) : undefined;
  const lines = [
    `machine: ${cores} CPUs (${jobs} available); /proc/loadavg at start ${loadAtStart}, at end ${loadAtEnd}; 1-minute load ${loadRange.min.toFixed(1)}–${loadRange.max.toFixed(1)} during the rounds`,
    busy
      ? `BUSY: the 1-minute load average reached ${Math.max(load, Number(loadAtStart.split(' ')[0])).toFixed(1)} ≥ ${cores} cores: the machine was too busy to judge timings (a missed timing goal reads BUSY)`
      : 'quiet: the 1-minute load average stayed below the number of cores',
    `median (min–max) of ${RUNS} rounds, tools alternating; ratios are the median (min–max) of each round's ratio; default --jobs ${jobs} (1 when other work fills every CPU as a scan starts)`,
    '',
    `plain ${sizeMB.toFixed(0)} MiB JSON lines:`,
    `  tokenwatch scan            ${seconds(t.scan)}  (${rate(t.scan.median)}${cpuNote(scan)}), peak RSS ${scan.rssMB.toFixed(0)} MB (${scan.rssHow}), ${scan.tokenUses} token uses, ${scan.findings} findings`,
    `  tokenwatch scan --jobs 1   ${seconds(t.serial)}  (${rate(t.serial.median)}${cpuNote(serial)}), peak RSS ${serial.rssMB.toFixed(0)} MB`,
    `  grep -c -F stale-token     ${seconds(t.grep)}  (${rate(t.grep.median)}), ${grepCount} matching lines`,
    `  grep -c -F, ${PREFILTER_NEEDLES.length} needles      ${seconds(t.grepNeedles)}  (${rate(t.grepNeedles.median)}), ${grepNeedleCount} matching lines (${PREFILTER_NEEDLES.map((n) => `-e '${n}'`).join(' ')})`,
    jqSeconds === undefined
      ? '  jq                         not installed: skipped (not installed by the bench)'
      : `  jq select(...)             ${jqSeconds.toFixed(2)} s  (${rate(jqSeconds)})`,
    `${gzFiles.length} rotated .gz (${sizeMB.toFixed(0)} MiB uncompressed, ${(gzBytes / MiB).toFixed(0)} MiB on disk):`,
    `  tokenwatch scan            ${seconds(t.gzScan)}  (${rate(t.gzScan.median)}${cpuNote(gzScan)}), peak RSS ${gzScan.rssMB.toFixed(0)} MB, ${gzScan.tokenUses} token uses`,
    `  tokenwatch scan --jobs 1   ${gzSerial.seconds.toFixed(2)} s  (1 run${cpuNote(gzSerial)}), peak RSS ${gzSerial.rssMB.toFixed(0)} MB`,
    `  zcat … | grep -c -F        ${seconds(t.zgrep)}  (${rate(t.zgrep.median)}), ${zgrepCount} matching lines`,
    'start-up (compiled CLI, best of 5):',
    `  tokenwatch --version       ${version.seconds.toFixed(3)} s${cpuNote(version)}  (node -e 0: ${bare.seconds.toFixed(3)} s${cpuNote(bare)})`,
    `  scan of a one-line file    ${oneScan.seconds.toFixed(3)} s${cpuNote(oneScan)}`,
    ...(withoutCa
      ? [
          `  without NODE_EXTRA_CA_CERTS (set here to ${extraCa}):`,
          `  tokenwatch --version       ${withoutCa.version.seconds.toFixed(3)} s${cpuNote(withoutCa.version)}  (node -e 0: ${withoutCa.bare.seconds.toFixed(3)} s${cpuNote(withoutCa.bare)})`,
          `  scan of a one-line file    ${withoutCa.oneScan.seconds.toFixed(3)} s${cpuNote(withoutCa.oneScan)}`,
        ]
      : []),
    `  scan of a 1 MiB file       ${smallScan.seconds.toFixed(3)} s  (stays on one thread), peak RSS ${smallScan.rssMB.toFixed(0)} MB`,
    `dense ${(denseGen.bytes / MiB).toFixed(0)} MiB JSON lines (${DENSE_STALE_SHARE * 100} % stale events):`,
    `  tokenwatch scan            ${seconds(t.dense)}  (${cpuNote(dense).slice(2) || 'no CPU time'}), peak RSS ${rss.dense.median.toFixed(0)} MB (${rss.dense.min.toFixed(0)}–${rss.dense.max.toFixed(0)}), ${dense.tokenUses} token uses`,
    `  tokenwatch scan --jobs 1   ${seconds(t.denseSerial)}  (${cpuNote(denseSerial).slice(2) || 'no CPU time'}), peak RSS ${rss.denseSerial.median.toFixed(0)} MB (${rss.denseSerial.min.toFixed(0)}–${rss.denseSerial.max.toFixed(0)})`,
    '',
  ];
  if (scan.tokenUses !== grepCount) {
    lines.push(`WARNING: scan counted ${scan.tokenUses} token uses but grep found ${grepCount} stale-token lines`, '');
  }
  // Every stale-token line holds `authentication.k8s.io/`, one of the prefilter's needles: fewer lines means they drifted.
  if (grepNeedleCount < grepCount) {
    lines.push(`WARNING: grep found ${grepNeedleCount} lines with the prefilter's needles but ${grepCount} stale-token lines`, '');
  }
  if (gzScan.tokenUses !== zgrepCount) {
    lines.push(`WARNING: .gz scan counted ${gzScan.tokenUses} token uses but zcat | grep found ${zgrepCount} stale-token lines`, '');
  }
  const toGrep = r.toGrep.median;
  const toZgrep = r.toZgrep.median;
  const maxRss = Math.max(scan.rssMB, gzScan.rssMB);
  const same =
    comparable(scan.stdout) === comparable(serial.stdout) &&
    comparable(gzScan.stdout) === comparable(gzSerial.stdout) &&
    comparable(dense.stdout) === comparable(denseSerial.stdout);
  const denseTime = r.denseTime.median;
  const denseRssRatio = r.denseRss.median;
  lines.push(
    `${timedVerdict(toGrep <= TARGETS.maxRatioToGrep)}  plain: scan / grep = ${ratio(r.toGrep)} median of rounds, ${bestRatio(t.scan, t.grep).toFixed(2)}× best of ${RUNS} ` +
      `(goal ≤ ${TARGETS.maxRatioToGrep.toFixed(1)}×; serial scan / grep = ${ratio(r.serialToGrep)}; start-up ${oneScan.seconds.toFixed(2)} s of ${t.scan.median.toFixed(2)} s)`,
    `INFO  plain: scan / grep with the prefilter's ${PREFILTER_NEEDLES.length} needles = ${ratio(r.toGrepNeedles)} median of rounds, ${bestRatio(t.scan, t.grepNeedles).toFixed(2)}× best of ${RUNS} (the same search as scan's prefilter; the goal on the line above gives grep one needle)`,
    `${timedVerdict(toZgrep <= TARGETS.maxRatioToZcatGrep)}  ${gzFiles.length} × .gz: scan / (zcat | grep) = ${ratio(r.toZgrep)} median of rounds, ${bestRatio(t.gzScan, t.zgrep).toFixed(2)}× best of ${RUNS} (goal ≤ ${TARGETS.maxRatioToZcatGrep}×)`,
    `${timedVerdict(denseTime <= TARGETS.maxDenseTimeRatio)}  dense: default / --jobs 1 time = ${ratio(r.denseTime)} median of rounds, ${bestRatio(t.dense, t.denseSerial).toFixed(2)}× best of ${RUNS} (goal ≤ ${TARGETS.maxDenseTimeRatio}×)`,
    `${verdict(denseRssRatio <= TARGETS.maxDenseRssRatio)}  dense: default / --jobs 1 peak RSS = ${ratio(r.denseRss)} median of rounds (goal ≤ ${TARGETS.maxDenseRssRatio}×)`,
    `${timedVerdict(r.sparseTime.median <= TARGETS.maxDenseTimeRatio)}  plain (sparse): default / --jobs 1 time = ${ratio(r.sparseTime)} median of rounds, ${bestRatio(t.scan, t.serial).toFixed(2)}× best of ${RUNS} (the same goal ≤ ${TARGETS.maxDenseTimeRatio}×: never slower than one thread)`,
    `${verdict(r.sparseRss.median <= TARGETS.maxDenseRssRatio)}  plain (sparse): default / --jobs 1 peak RSS = ${ratio(r.sparseRss)} median of rounds (goal ≤ ${TARGETS.maxDenseRssRatio}×)`,
    `INFO  ${gzFiles.length} × .gz: default / --jobs 1 time = ${(t.gzScan.median / gzSerial.seconds).toFixed(2)}× (median of ${RUNS} over 1 run), peak RSS ${(gzScan.rssMB / gzSerial.rssMB).toFixed(2)}×`,
  );
  if (jqSeconds !== undefined) {
    const speedup = jqSeconds / t.scan.median;
    lines.push(`${timedVerdict(speedup >= TARGETS.minSpeedupOverJq)}  jq / scan = ${speedup.toFixed(1)}× faster (goal ≥ ${TARGETS.minSpeedupOverJq}×)`);
  } else {
    lines.push('SKIP  jq / scan: jq not installed');
  }
  lines.push(
    `${verdict(maxRss <= TARGETS.maxRssMB)}  peak RSS = ${maxRss.toFixed(0)} MB at --jobs ${jobs} (goal ≤ ${TARGETS.maxRssMB} MB)` +
      (perWorker === undefined
        ? ''
        : perWorker < 1
          ? `; plain: ${scan.rssMB.toFixed(0)} MB, no more than at --jobs 1 (plain JSON lines alone take workers from ${PLAIN_PARALLEL_MIN_BYTES / 2 ** 30} GiB, and without --jobs a scan that starts while other work fills every CPU stays on one thread)`
          : `; ${perWorker.toFixed(0)} MB per worker thread (plain: ${serial.rssMB.toFixed(0)} MB at --jobs 1, ${scan.rssMB.toFixed(0)} MB at --jobs ${jobs})`),
    `${timedVerdict(version.seconds <= TARGETS.maxStartupSeconds && oneScan.seconds <= TARGETS.maxStartupSeconds)}  start-up: --version ${version.seconds.toFixed(3)} s, one-line scan ${oneScan.seconds.toFixed(3)} s (goal ≤ ${TARGETS.maxStartupSeconds} s each, wall time)` +
      (load > cores && version.cpu !== undefined && oneScan.cpu !== undefined
        ? `; busy machine: CPU time ${version.cpu.toFixed(3)} s and ${oneScan.cpu.toFixed(3)} s`
        : '') +
      `; tokenwatch's own share: ${(version.seconds - bare.seconds).toFixed(3)} s and ${(oneScan.seconds - bare.seconds).toFixed(3)} s over node -e 0 (${bare.seconds.toFixed(3)} s)`,
    ...(withoutCa
      ? [
          `${timedVerdict(withoutCa.version.seconds <= TARGETS.maxStartupSeconds && withoutCa.oneScan.seconds <= TARGETS.maxStartupSeconds)}  start-up without ` +
            `NODE_EXTRA_CA_CERTS: --version ${withoutCa.version.seconds.toFixed(3)} s, one-line scan ${withoutCa.oneScan.seconds.toFixed(3)} s ` +
            `(node -e 0 takes ${bare.seconds.toFixed(3)} s with it, ${withoutCa.bare.seconds.toFixed(3)} s without: Node parses the CA bundle at start)`,
        ]
      : []),
    `${verdict(same)}  identical JSON output: --jobs 1 and --jobs ${jobs}, plain, .gz and dense`,
    '',
  );
  process.stdout.write(lines.join('\n'));
  if (args.clean) {
    for (const f of [gen.file, denseGen.file, small.file, oneLine.file]) rmSync(f, { force: true });
    rmSync(dirname(gzFiles[0] ?? join(args.dataDir, 'none', 'x')), { recursive: true, force: true });
    process.stdout.write(`removed the inputs from ${relative(ROOT, args.dataDir) || '.'}\n`);
  }

  // Then the 401-flood benchmark (bench/flood.ts), as its own process (its peak RSS must be its own).
  if (args.flood) {
    process.stdout.write('\n');
    const flood = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'bench', 'flood.ts'), ...(args.floodEvents ? ['--events', String(args.floodEvents)] : [])], {
      cwd: ROOT,
      stdio: 'inherit',
    });
    if (flood.status !== 0) process.exitCode = flood.status ?? 1;
  }
}

// Run as a script (`npm run bench`); imported (e.g. for `generate`), it does nothing.
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((err: unknown) => {
    process.stderr.write(`bench: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(2);
  });
}
