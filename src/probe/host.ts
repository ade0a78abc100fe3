/**
 * The node probe's scan of the host: find files matching the configured globs, read the ServiceAccount tokens they
 * hold (a kubeconfig's `users[].user.token`, a `tokenFile:` it points to, or a bare JWT file) and keep only their
 * claims ({@link tokenClaims}). Read-only. The token text never leaves this module: not in the report, not in an
 * error, not in a log line.
 *
 * A file that cannot be read is reported with its errno (`EACCES`, …), never as "no token": these kubeconfigs are
 * normally root-owned with mode 0600, and a probe without the right uid must say so.
 */
import { ErrorCode, TokenwatchError } from '../errors.js';
import { createHash } from 'node:crypto';
import { open, stat } from 'node:fs/promises';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { glob } from 'tinyglobby';
import { parse as parseYaml } from 'yaml';
import { tokenClaims, looksLikeJwt, type TokenClaims } from './claims.js';

/** Default globs: CNI plugin kubeconfigs (Multus thin plugin, Calico, Cilium, …) and Istio CNI's. */
export const DEFAULT_PROBE_GLOBS: readonly string[] = ['/etc/cni/net.d/**/*.kubeconfig', '/etc/cni/net.d/**/*kubeconfig*', '/var/run/istio-cni/*kubeconfig*'];

/** Largest file read, bytes (a kubeconfig is a few KiB). */
export const MAX_PROBE_FILE_BYTES = 1024 * 1024;

/** One token found (or not) in one host file. Times are ISO-8601 UTC strings. */
export interface ProbeEntry {
  /** Host path as seen on the node (without `--host-root`). */
  path: string;
  /** First 16 hex chars of sha256 of the path (never of the content). */
  pathHash: string;
  /** Last modification of the file, or null when it could not be read. */
  mtime: string | null;
  /** `token`: claims below; `no-token`: readable, no ServiceAccount token in it; `unreadable`: see `error`. */
  status: 'token' | 'no-token' | 'unreadable';
  /** errno code when `unreadable` (`EACCES`, `ENOENT`, `EFBIG`, …). */
  error?: string;
  /** Where the token was: a kubeconfig user's `token`, the file its `tokenFile` names, or the file itself. */
  via?: 'kubeconfig-token' | 'kubeconfig-tokenFile' | 'jwt-file';
  /** kubeconfig user name, when from a kubeconfig. */
  user?: string;
  /** The `tokenFile` path, when `via` is `kubeconfig-tokenFile`. */
  tokenFile?: string;
  tokenKind?: 'bound' | 'legacy';
  issuer?: string | null;
  namespace?: string;
  serviceAccount?: string;
  serviceAccountUid?: string | null;
  pod?: string | null;
  podUid?: string | null;
  node?: string | null;
  secretName?: string | null;
  issuedAt?: string | null;
  expiresAt?: string | null;
  warnAfter?: string | null;
  /** When the API server stops accepting the token: its `exp` (bound tokens); null for legacy tokens. */
  rejectionAt?: string | null;
}

/** What one probe run found on one node (the ConfigMap's `report.json`). */
export interface ProbeReport {
  /** Format version of this document. */
  version: 1;
  node: string;
  probedAt: string;
  globs: string[];
  entries: ProbeEntry[];
}

/** Options of {@link probeHost}. */
export interface ProbeHostOptions {
  node: string;
  /** Glob patterns of host paths (absolute). Default {@link DEFAULT_PROBE_GLOBS}. */
  globs?: readonly string[];
  /** Where the host filesystem is mounted (`/host` in the DaemonSet); default `/`. */
  hostRoot?: string;
  /** Probe time, epoch ms UTC. */
  now: number;
}

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** sha256 of a path, first 16 hex chars. */
export function pathHash(path: string): string {
  return createHash('sha256').update(path).digest('hex').slice(0, 16);
}

function errnoOf(err: unknown): string {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? code : 'EIO';
}

/** Reads a whole file up to {@link MAX_PROBE_FILE_BYTES}; returns its text and mtime, or the errno. */
async function readSmall(file: string): Promise<{ text: string; mtime: number } | { error: string }> {
  let fh;
  try {
    fh = await open(file, 'r');
  } catch (err) {
    return { error: errnoOf(err) };
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) return { error: 'EISDIR' };
    if (st.size > MAX_PROBE_FILE_BYTES) return { error: 'EFBIG' };
    return { text: await fh.readFile('utf8'), mtime: st.mtimeMs };
  } catch (err) {
    return { error: errnoOf(err) };
  } finally {
    await fh.close();
  }
}

function withClaims(base: ProbeEntry, c: TokenClaims): ProbeEntry {
  return {
    ...base,
    status: 'token',
    tokenKind: c.kind,
    issuer: c.issuer,
    namespace: c.namespace,
    serviceAccount: c.serviceAccount,
    serviceAccountUid: c.serviceAccountUid,
    pod: c.pod,
    podUid: c.podUid,
    node: c.node,
    secretName: c.secretName,
    issuedAt: iso(c.issuedAt),
    expiresAt: iso(c.expiresAt),
    warnAfter: iso(c.warnAfter),
    rejectionAt: c.kind === 'bound' ? iso(c.expiresAt) : null,
  };
}

/** The entries of one matched file. */
async function probeFile(hostRoot: string, path: string): Promise<ProbeEntry[]> {
  const base: ProbeEntry = { path, pathHash: pathHash(path), mtime: null, status: 'no-token' };
  const read = await readSmall(join(hostRoot, path));
  if ('error' in read) return [{ ...base, status: 'unreadable', error: read.error }];
  base.mtime = new Date(read.mtime).toISOString();
  const text = read.text.trim();
  if (looksLikeJwt(text)) {
    const c = tokenClaims(text);
    return [c ? withClaims({ ...base, via: 'jwt-file' }, c) : base];
  }
  let doc: unknown;
  try {
    doc = parseYaml(read.text);
  } catch {
    return [base]; // not YAML: no token (the parser's message could quote the content, so it is dropped)
  }
  const users = (doc as { users?: unknown })?.users;
  if (!Array.isArray(users)) return [base];
  const out: ProbeEntry[] = [];
  for (const u of users as { name?: unknown; user?: { token?: unknown; tokenFile?: unknown } }[]) {
    const name = typeof u?.name === 'string' ? u.name : undefined;
    const entry: ProbeEntry = { ...base, ...(name !== undefined ? { user: name } : {}) };
    const token = u?.user?.token;
    const tokenFile = u?.user?.tokenFile;
    if (typeof token === 'string') {
      const c = tokenClaims(token);
      if (c) out.push(withClaims({ ...entry, via: 'kubeconfig-token' }, c));
    } else if (typeof tokenFile === 'string' && tokenFile !== '') {
      const hostPath = isAbsolute(tokenFile) ? tokenFile : resolve(dirname(path), tokenFile);
      const t = await readSmall(join(hostRoot, hostPath));
      if ('error' in t) out.push({ ...entry, via: 'kubeconfig-tokenFile', tokenFile: hostPath, status: 'unreadable', error: t.error });
      else {
        const c = tokenClaims(t.text);
        if (c) out.push(withClaims({ ...entry, via: 'kubeconfig-tokenFile', tokenFile: hostPath, mtime: new Date(t.mtime).toISOString() }, c));
      }
    }
  }
  return out.length ? out : [base];
}

/**
 * Scans the host once. Never throws for a file (unreadable files become `unreadable` entries); throws only when a
 * glob pattern is not absolute.
 */
export async function probeHost(o: ProbeHostOptions): Promise<ProbeReport> {
  const globs = [...(o.globs ?? DEFAULT_PROBE_GLOBS)];
  for (const g of globs) if (!g.startsWith('/')) throw new TokenwatchError(ErrorCode.ProbeFailed, `probe glob must be an absolute host path: ${g}`);
  const hostRoot = o.hostRoot ?? '/';
  const matches = await glob(
    globs.map((g) => g.slice(1)),
    { cwd: hostRoot, dot: true, onlyFiles: true, followSymbolicLinks: false, expandDirectories: false },
  );
  const paths = [...new Set(matches.map((m) => `/${m}`))].sort();
  const entries: ProbeEntry[] = [];
  for (const p of paths) {
    // A match may vanish between listing and reading; stat first so that is ENOENT, not a crash.
    try {
      await stat(join(hostRoot, p));
    } catch (err) {
      entries.push({ path: p, pathHash: pathHash(p), mtime: null, status: 'unreadable', error: errnoOf(err) });
      continue;
    }
    entries.push(...(await probeFile(hostRoot, p)));
  }
  return { version: 1, node: o.node, probedAt: new Date(o.now).toISOString(), globs, entries };
}
