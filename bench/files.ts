/**
 * Many-files benchmark: `tokenwatch scan` memory must not grow with the number of input files.
 *
 * Writes (once, then reuses) N plain audit JSON-lines files of about S KB each under `bench/data/files-<N>x<S>k/`
 * (git-ignored; every request has its own auditID, 0.1 % carry the stale-token annotation) and, optionally, the same
 * count of small `.gz` files; then runs the compiled CLI (`bench/data/build`, as `npm run bench` builds it, or
 * `bin/tokenwatch.js` when absent) over all of them, with and without `--now`, and prints each run's wall time and
 * peak RSS (`/usr/bin/time -v`, or `process.resourceUsage().maxRSS` of a child when absent).
 *
 * Usage: `npm run bench:files -- [--files N] [--size-kb S] [--gz N]` (defaults 10,000 files of 300 KB, 2,000 .gz).
 * Not part of `npm test`. Reference figures from the attack round before the fix: 10,000 × 300 KB → 2.8 GB RSS
 * (104 MB with `--now`), 2,000 .gz → 942 MB.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { benchArgs } from './args.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const DATA_DIR = join(ROOT, 'bench', 'data');

const args = benchArgs('bench:files', 'usage: npm run bench:files -- [--files N] [--size-kb S] [--gz N]', {
  files: { type: 'string', default: '10000' },
  'size-kb': { type: 'string', default: '300' },
  gz: { type: 'string', default: '2000' },
});
const count = args.whole('files', 0);
const sizeKb = args.whole('size-kb');
const gzCount = args.whole('gz', 0);
if (count + gzCount === 0) args.fail('--files and --gz are both 0: nothing to scan');

const T0 = Date.parse('2026-11-20T00:00:00Z');

/**
 * One audit event line; every 1000th request carries the stale-token annotation of one long-lived token (the same
 * `warnafter` in every file, as a month of rotated logs of one stale client has), so what grows with the number of
 * files is the reading, not the findings.
 */
function line(file: number, i: number): string {
  const ms = file * 60_000 + i * 10;
  const t = new Date(T0 + ms).toISOString().replace('Z', '000Z');
  const stale = i % 1000 === 7;
  const annotations = stale
    ? `,"annotations":{"authentication.k8s.io/stale-token":"subject: system:serviceaccount:kube-system:multus, seconds after warning threshold: ${86_400 + Math.floor(ms / 1000)}"}`
    : ',"annotations":{"authorization.k8s.io/decision":"allow"}';
  const user = stale ? 'system:serviceaccount:kube-system:multus' : 'system:serviceaccount:kube-system:coredns';
  return (
    `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"f${file}-${i}","stage":"ResponseComplete",` +
    `"requestURI":"/api/v1/pods?limit=500","verb":"list","user":{"username":"${user}","groups":["system:serviceaccounts"]},` +
    `"sourceIPs":["10.0.${file % 250}.${i % 250}"],"userAgent":"client/v1.0 (linux/amd64)","responseStatus":{"code":200},` +
    `"requestReceivedTimestamp":"${t}","stageTimestamp":"${t}"${annotations}}\n`
  );
}

function fileText(file: number, bytes: number): string {
  const parts: string[] = [];
  let size = 0;
  for (let i = 0; size < bytes; i++) {
    const l = line(file, i);
    parts.push(l);
    size += l.length;
  }
  return parts.join('');
}

function ensureFiles(dir: string, n: number, bytes: number, gzip: boolean): string[] {
  if (!existsSync(join(dir, '.complete'))) {
    rmSync(dir, { recursive: true, force: true });
    const tmp = `${dir}.tmp`;
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { recursive: true });
    process.stdout.write(`writing ${n} ${gzip ? '.gz' : 'plain'} files of ~${Math.round(bytes / 1024)} KB under ${dir} …\n`);
    for (let f = 0; f < n; f++) {
      const text = fileText(f, bytes);
      const name = `audit-${String(f).padStart(5, '0')}.log${gzip ? '.gz' : ''}`;
      writeFileSync(join(tmp, name), gzip ? gzipSync(text) : text);
    }
    writeFileSync(join(tmp, '.complete'), '');
    renameSync(tmp, dir);
  }
  return readdirSync(dir)
    .filter((f) => f.startsWith('audit-'))
    .sort()
    .map((f) => join(dir, f));
}

function cli(): string[] {
  const built = join(DATA_DIR, 'build', 'dist', 'cli', 'main.js');
  return existsSync(built) ? [built] : [join(ROOT, 'bin', 'tokenwatch.js')];
}

interface Run {
  seconds: number;
  rssMB: number | undefined;
  code: number | null;
  stderr: string;
}

function run(files: string[], extra: string[]): Run {
  const args = [...cli(), 'scan', '--format', 'json', '--cluster', 'bench', ...extra, '--audit-log', ...files];
  const t0 = performance.now();
  const timeV = existsSync('/usr/bin/time');
  const r = timeV
    ? spawnSync('/usr/bin/time', ['-v', process.execPath, ...args], { encoding: 'utf8', maxBuffer: 1 << 30 })
    : spawnSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 1 << 30 });
  const seconds = (performance.now() - t0) / 1000;
  const kb = timeV ? /Maximum resident set size \(kbytes\): (\d+)/.exec(r.stderr)?.[1] : undefined;
  return { seconds, rssMB: kb ? Number(kb) / 1024 : undefined, code: r.status, stderr: r.stderr };
}

function report(what: string, r: Run): string {
  const rss = r.rssMB === undefined ? 'RSS n/a (no /usr/bin/time)' : `peak RSS ${r.rssMB.toFixed(0)} MB`;
  const status = r.code === 0 ? '' : `  (exit ${r.code}: ${r.stderr.trim().split('\n').find((l) => l.startsWith('tokenwatch:')) ?? ''})`;
  return `  ${what.padEnd(44)} ${r.seconds.toFixed(1).padStart(6)} s  ${rss}${status}`;
}

const lines: string[] = [];
if (count > 0) {
  const files = ensureFiles(join(DATA_DIR, `files-${count}x${sizeKb}k-one-token`), count, sizeKb * 1024, false);
  const few = files.slice(0, Math.max(1, Math.floor(count / 10)));
  lines.push(`${count} plain files of ~${sizeKb} KB (${((count * sizeKb) / 1024 / 1024).toFixed(1)} GiB):`);
  lines.push(report(`${few.length} files (a tenth), default reference time`, run(few, [])));
  lines.push(report(`${files.length} files, default reference time`, run(files, [])));
  lines.push(report(`${files.length} files, --now`, run(files, ['--now', '2026-11-30T00:00:00Z'])));
  lines.push(report(`${files.length} files, --now --jobs 1`, run(files, ['--now', '2026-11-30T00:00:00Z', '--jobs', '1'])));
}
if (gzCount > 0) {
  const gz = ensureFiles(join(DATA_DIR, `files-${gzCount}x30k-gz-one-token`), gzCount, 30 * 1024, true);
  lines.push(`${gzCount} .gz files of ~30 KB uncompressed:`);
  lines.push(report(`${gz.length} .gz files, default reference time`, run(gz, [])));
}
process.stdout.write(`${lines.join('\n')}\n`);
