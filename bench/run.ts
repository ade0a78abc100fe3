/**
 * `npm run bench`: checks the scan performance targets of design.md ("Performance targets"):
 * `tokenwatch scan` of a 1 GB audit log with 0.1 % stale events must run within 2× the time of
 * `grep -c -F stale-token` on the same file, ≥ 10× faster than the equivalent `jq` filter, with a
 * peak RSS ≤ 200 MB.
 *
 * Usage: `npm run bench -- [--size-mb N] [--regenerate]`
 *   --size-mb N     size of the synthetic log in MiB (default 1024)
 *   --regenerate    rewrite the log even if one of that size exists
 *
 * The log is written once to `bench/data/audit-<N>mb.jsonl` (git-ignored) and reused. Every tool
 * runs once on a warm page cache (the file is read once before timing). Not part of `npm test`.
 */
import { execFileSync, spawn } from 'node:child_process';
import { closeSync, copyFileSync, existsSync, mkdirSync, openSync, renameSync, statSync, writeSync, createReadStream } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const DATA_DIR = join(ROOT, 'bench', 'data');
const MiB = 1024 * 1024;

/** Targets from design.md. */
const TARGETS = { maxRatioToGrep: 2, minSpeedupOverJq: 10, maxRssMB: 200 };

// ---------------------------------------------------------------------------------------------
// Arguments

interface Args {
  sizeMB: number;
  regenerate: boolean;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { sizeMB: 1024, regenerate: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--size-mb') {
      const v = Number(argv[++i]);
      if (!Number.isInteger(v) || v <= 0) fail(`--size-mb needs a positive whole number of MiB (got '${argv[i] ?? ''}')`);
      args.sizeMB = v;
    } else if (a?.startsWith('--size-mb=')) {
      const v = Number(a.slice('--size-mb='.length));
      if (!Number.isInteger(v) || v <= 0) fail(`--size-mb needs a positive whole number of MiB (got '${a}')`);
      args.sizeMB = v;
    } else if (a === '--regenerate') {
      args.regenerate = true;
    } else if (a === '--help' || a === '-h') {
      process.stdout.write('usage: npm run bench -- [--size-mb N] [--regenerate]\n');
      process.exit(0);
    } else {
      fail(`unknown argument '${a ?? ''}' (usage: npm run bench -- [--size-mb N] [--regenerate])`);
    }
  }
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
/** One event in 1000 is stale (0.1 %). */
const STALE_EVERY = 1000;

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
function generate(sizeMB: number, regenerate: boolean): Generated {
  mkdirSync(DATA_DIR, { recursive: true });
  const file = join(DATA_DIR, `audit-${sizeMB}mb.jsonl`);
  const target = sizeMB * MiB;
  if (!regenerate && existsSync(file) && statSync(file).size >= target) {
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
    for (let i = 0; written + chunk.length < target; i++) {
      const t = START_MS + i * STEP_MS;
      const sec = Math.floor(t / 1000);
      if (sec !== second) {
        second = sec;
        isoSecond = new Date(sec * 1000).toISOString().slice(0, 19);
      }
      const micro = String((t % 1000) * 1000 + ((i * 7919) % 1000)).padStart(6, '0');
      const isStale = i % STALE_EVERY === STALE_EVERY - 1;
      const tpl = isStale ? stale[Math.floor(i / STALE_EVERY) % stale.length] : fresh[i % fresh.length];
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

// ---------------------------------------------------------------------------------------------
// Measuring

interface Run {
  seconds: number;
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Spawns a command, captures output (stdout optionally discarded), measures wall time. */
function timed(cmd: string, args: string[], keepStdout: boolean): Promise<Run> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(cmd, args, { cwd: ROOT, stdio: ['ignore', keepStdout ? 'pipe' : 'ignore', 'pipe'] });
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

/** Reads the file once so every timed tool starts from a warm page cache. */
function warmCache(file: string): Promise<void> {
  return new Promise((resolve, reject) => {
    createReadStream(file, { highWaterMark: 4 * MiB })
      .on('data', () => undefined)
      .on('end', resolve)
      .on('error', reject);
  });
}

interface ScanMeasure {
  seconds: number;
  rssMB: number;
  rssHow: string;
  tokenUses: number;
  findings: number;
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
 * Compiles the CLI (tsconfig.build.json) into `bench/data/build/dist` with a copy of package.json beside it, so the
 * benchmark times the JavaScript a production install runs — not tsx transpiling at start-up — without leaving a
 * `dist/` that `bin/tokenwatch.js` would prefer over the sources afterwards.
 * @returns the path of the compiled `cli/main.js`, relative to the repository root.
 */
function buildCli(): string {
  const out = join(DATA_DIR, 'build');
  execFileSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', join(out, 'dist')], { cwd: ROOT, stdio: 'inherit' });
  copyFileSync(join(ROOT, 'package.json'), join(out, 'package.json'));
  return relative(ROOT, join(out, 'dist', 'cli', 'main.js'));
}

let CLI = 'bin/tokenwatch.js';
/** Runs of grep and of scan; the fastest of each is reported (peak RSS: the largest). */
const RUNS = 3;

async function measureScan(file: string): Promise<ScanMeasure> {
  const cli = [CLI, 'scan', '--format', 'json', '--cluster', 'bench', '--audit-log', relative(ROOT, file)];
  if (existsSync('/usr/bin/time')) {
    const r = await timed('/usr/bin/time', ['-v', process.execPath, ...cli], true);
    if (r.code !== 0) throw new Error(`scan exited ${r.code}: ${r.stderr.trim().split('\n')[0] ?? ''}`);
    const rss = parseTimeV(r.stderr);
    if (rss !== undefined) {
      return { seconds: r.seconds, rssMB: rss, rssHow: '/usr/bin/time -v', ...summary(r.stdout) };
    }
  }
  // Fallback: time the CLI, then take the peak RSS of a child that runs runScan in-process.
  const r = await timed(process.execPath, cli, true);
  if (r.code !== 0) throw new Error(`scan exited ${r.code}: ${r.stderr.trim().split('\n')[0] ?? ''}`);
  const child = await timed(process.execPath, ['--import', 'tsx', 'bench/scan-rss.ts', file], true);
  if (child.code !== 0) throw new Error(`bench/scan-rss.ts exited ${child.code}: ${child.stderr.trim()}`);
  const rssKB = Number(child.stdout.trim());
  return { seconds: r.seconds, rssMB: rssKB / 1024, rssHow: 'process.resourceUsage().maxRSS', ...summary(r.stdout) };
}

function verdict(ok: boolean): string {
  return ok ? 'PASS' : 'MISS';
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const gen = generate(args.sizeMB, args.regenerate);
  const sizeMB = gen.bytes / MiB;
  const rel = relative(ROOT, gen.file);
  process.stdout.write(
    gen.reused
      ? `input: ${rel} (${sizeMB.toFixed(0)} MiB, reused; --regenerate to rewrite)\n`
      : `input: ${rel} (${sizeMB.toFixed(0)} MiB, written in ${gen.seconds.toFixed(1)} s)\n`,
  );
  process.stdout.write('compiling the CLI (tsc -p tsconfig.build.json) into bench/data/build …\n');
  CLI = buildCli();
  await warmCache(gen.file);

  // Best of three for grep and scan, alternating: on a shared machine the minimum is the least disturbed run.
  let grep = await timed('grep', ['-c', '-F', 'stale-token', gen.file], true);
  let scan = await measureScan(gen.file);
  for (let i = 1; i < RUNS; i++) {
    const g = await timed('grep', ['-c', '-F', 'stale-token', gen.file], true);
    if (g.seconds < grep.seconds) grep = g;
    const sc = await measureScan(gen.file);
    if (sc.seconds < scan.seconds) scan = { ...sc, rssMB: Math.max(sc.rssMB, scan.rssMB) };
    else scan = { ...scan, rssMB: Math.max(sc.rssMB, scan.rssMB) };
  }
  if (grep.code !== 0 && grep.code !== 1) throw new Error(`grep failed: ${grep.stderr.trim()}`);
  const grepCount = Number(grep.stdout.trim());

  // Process start-up (Node + tsx + imports), included in the scan time above.
  const startup = await timed(process.execPath, [CLI, '--version'], false);

  let jqSeconds: number | undefined;
  const hasJq = await commandExists('jq');
  if (hasJq) {
    const jq = await timed('jq', ['-c', 'select(.annotations["authentication.k8s.io/stale-token"])', gen.file], false);
    if (jq.code !== 0) throw new Error(`jq failed: ${jq.stderr.trim()}`);
    jqSeconds = jq.seconds;
  }

  const rate = (s: number): string => `${(sizeMB / s).toFixed(0)} MiB/s`;
  const load = loadavg()[0] ?? 0;
  const lines = [
    `machine: ${cpus().length} CPUs, load average ${load.toFixed(1)}${load > cpus().length ? ' (busy: timings are not representative)' : ''}`,
    '',
    `tokenwatch scan   ${scan.seconds.toFixed(2)} s  (${rate(scan.seconds)}; best of ${RUNS}, grep too), peak RSS ${scan.rssMB.toFixed(0)} MB (${scan.rssHow}), ${scan.tokenUses} token uses, ${scan.findings} findings`,
    `  of which start-up ${startup.seconds.toFixed(2)} s (time of \`tokenwatch --version\`)`,
    `grep -c -F        ${grep.seconds.toFixed(2)} s  (${rate(grep.seconds)}), ${grepCount} matching lines`,
    jqSeconds === undefined
      ? 'jq                not installed: skipped (not installed by the bench)'
      : `jq select(...)    ${jqSeconds.toFixed(2)} s  (${rate(jqSeconds)})`,
    '',
  ];
  if (scan.tokenUses !== grepCount) {
    lines.push(`WARNING: scan counted ${scan.tokenUses} token uses but grep found ${grepCount} stale-token lines`, '');
  }
  const toGrep = scan.seconds / grep.seconds;
  lines.push(
    `${verdict(toGrep <= TARGETS.maxRatioToGrep)}  scan / grep = ${toGrep.toFixed(2)}× (target ≤ ${TARGETS.maxRatioToGrep}×)`,
  );
  if (jqSeconds !== undefined) {
    const speedup = jqSeconds / scan.seconds;
    lines.push(
      `${verdict(speedup >= TARGETS.minSpeedupOverJq)}  jq / scan = ${speedup.toFixed(1)}× faster (target ≥ ${TARGETS.minSpeedupOverJq}×)`,
    );
  } else {
    lines.push(`SKIP  jq / scan: jq not installed`);
  }
  lines.push(
    `${verdict(scan.rssMB <= TARGETS.maxRssMB)}  peak RSS = ${scan.rssMB.toFixed(0)} MB (target ≤ ${TARGETS.maxRssMB} MB)`,
    '',
  );
  process.stdout.write(lines.join('\n'));
}

main().catch((err: unknown) => {
  process.stderr.write(`bench: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(2);
});
