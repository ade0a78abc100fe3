/**
 * One kubeconfig file of every context (docs/performance.md "One kubeconfig file of every context"): writes one
 * kubeconfig of N contexts into a temporary folder — each context its own cluster (server, 1,400 characters of
 * `certificate-authority-data`, a relative `certificate-authority` file) and user (a 900-character token), as a fleet's
 * generated kubeconfig has — then builds every cluster's client-node `KubeConfig` as `serve` does at start
 * (src/runtime/compose.ts: one `KubeconfigFiles` for the fleet, `kubeConfigFor` per cluster, the loader dropped after
 * the last cluster) and prints:
 *
 * - the time to build them all (wall clock, `performance.now()`);
 * - the V8 heap they hold: heap used after a full GC with every config kept, minus the same before building (needs
 *   `--expose-gc`: the script runs itself again in a child process with it);
 * - the peak RSS of the process (`process.resourceUsage().maxRSS`), and its RSS before building.
 *
 * Usage: `npm run bench:kubeconfig -- [--contexts N] [--default] [--heap-mib M]`: N contexts (default 1,000);
 * `--default` names only the context, with `$KUBECONFIG` set to the file (a fleet in the default kubeconfig);
 * `--heap-mib` caps the child's V8 heap (`--max-old-space-size`). Not part of `npm test`.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { KubeconfigFiles, kubeConfigFor } from '../src/cluster/kube.js';
import { benchArgs } from './args.js';

const args = benchArgs('bench:kubeconfig', 'usage: npm run bench:kubeconfig -- [--contexts N] [--default] [--heap-mib M]', {
  contexts: { type: 'string', default: '1000' },
  default: { type: 'boolean', default: false },
  'heap-mib': { type: 'string' },
});
const { values } = args;
const n = args.whole('contexts');
const heapMiB = values['heap-mib'] === undefined ? undefined : args.whole('heap-mib');

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) {
  // Again in a child with --expose-gc (tsx's loader flags are in execArgv): the heap figure needs full collections.
  // The folder is made and removed here, so a child that runs out of memory leaves nothing behind.
  const flags = ['--expose-gc', ...(heapMiB ? [`--max-old-space-size=${heapMiB}`] : [])];
  const tmp = mkdtempSync(join(tmpdir(), 'tw-bench-kubeconfig-'));
  const child = spawnSync(process.execPath, [...process.execArgv, ...flags, ...process.argv.slice(1)], { stdio: 'inherit', env: { ...process.env, TW_BENCH_KUBECONFIG_DIR: tmp } });
  rmSync(tmp, { recursive: true, force: true });
  if (child.status !== 0) process.stdout.write(`  the run failed: ${child.signal ? `signal ${child.signal}` : `exit code ${child.status}`}\n`);
  process.exit(child.status ?? 1);
}

const MiB = 1024 * 1024;
/** A deterministic filler of `len` base64 characters (certificate data, tokens): size matters here, not content. */
const filler = (seed: number, len: number): string => Buffer.alloc(Math.ceil((len * 3) / 4), seed % 251).toString('base64').slice(0, len);

const dir = process.env['TW_BENCH_KUBECONFIG_DIR'] ?? mkdtempSync(join(tmpdir(), 'tw-bench-kubeconfig-'));
mkdirSync(join(dir, 'certs'));
const path = join(dir, 'fleet.yaml');
const clusters: string[] = [];
const users: string[] = [];
const contexts: string[] = [];
for (let i = 0; i < n; i++) {
  clusters.push(`- name: c-${i}\n  cluster:\n    server: https://cluster-${i}.example.test:6443\n    certificate-authority-data: ${filler(i, 1400)}\n    certificate-authority: certs/ca-${i}.crt`);
  users.push(`- name: u-${i}\n  user:\n    token: ${filler(i + 7, 900)}`);
  contexts.push(`- name: ctx-${i}\n  context:\n    cluster: c-${i}\n    user: u-${i}`);
}
writeFileSync(path, `apiVersion: v1\nkind: Config\nclusters:\n${clusters.join('\n')}\nusers:\n${users.join('\n')}\ncontexts:\n${contexts.join('\n')}\ncurrent-context: ctx-0\n`);
if (values.default) process.env['KUBECONFIG'] = path;

/** Every cluster's `KubeConfig`, as serve builds them at start (src/runtime/compose.ts buildClusters). */
function buildAll(): KubeConfig[] {
  const files = new KubeconfigFiles();
  const built = Array.from({ length: n }, (_, i) => kubeConfigFor(values.default ? { context: `ctx-${i}` } : { kubeconfig: path, context: `ctx-${i}` }, files));
  files.clear();
  return built;
}

const heapNow = (): number => {
  for (let i = 0; i < 3; i++) gc();
  return process.memoryUsage().heapUsed;
};
const rssBefore = process.memoryUsage().rss;
const heapBefore = heapNow();
const t0 = performance.now();
const configs = buildAll();
const seconds = (performance.now() - t0) / 1000;
const held = heapNow() - heapBefore;
// Every config is right, and kept until the heap was measured.
configs.forEach((kc, i) => {
  if (kc.getCurrentCluster()?.server !== `https://cluster-${i}.example.test:6443`) throw new Error(`cluster ${i}: wrong server`);
});
const peakRss = process.resourceUsage().maxRSS * 1024;
const fileMiB = statSync(path).size / MiB;
rmSync(dir, { recursive: true, force: true });

const load = loadavg().map((l) => l.toFixed(2)).join(' ');
process.stdout.write(
  `bench:kubeconfig — one kubeconfig of ${n} contexts (${fileMiB.toFixed(1)} MiB), ` +
    `each cluster naming its context${values.default ? ' of $KUBECONFIG' : ' and the file'}; Node ${process.version}${heapMiB ? `, heap capped at ${heapMiB} MiB` : ''}\n` +
    `  built ${n} client configs in ${seconds.toFixed(2)} s\n` +
    `  V8 heap they hold            ${(held / MiB).toFixed(1)} MiB (heap used after a full GC, minus before building)\n` +
    `  peak RSS                     ${(peakRss / MiB).toFixed(0)} MiB (process.resourceUsage().maxRSS; ${(rssBefore / MiB).toFixed(0)} MiB before building)\n` +
    `  machine: load ${load}\n`,
);
