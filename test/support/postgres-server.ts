/**
 * A throwaway PostgreSQL server for one `vitest run` (started by test/global-setup.ts): `initdb` into a temporary
 * directory, `pg_ctl start` on a free loopback port with the Unix socket inside that directory, stopped and removed at
 * teardown. As root the server runs as uid/gid 65534 (PostgreSQL refuses to run as root); otherwise as the current user.
 *
 * - Authentication (pg_hba.conf): the superuser `postgres` is trusted on the socket and on 127.0.0.1 (tests create a
 *   database per file with it); every other role needs a password (scram-sha-256), so a test can check that the
 *   password is sent and re-read.
 * - TLS: when `openssl` is on PATH, a CA and a server certificate for `localhost` / `127.0.0.1` are made and `ssl = on`;
 *   plain TCP is still accepted, so `sslmode: disable` works too. Without openssl `caFile` is undefined and the TLS
 *   tests skip.
 * - Durability is switched off (`fsync`, `synchronous_commit`, `full_page_writes`): the data is thrown away anyway.
 * - Binaries: `/usr/lib/postgresql/<major>/bin` (Debian's `postgresql` package; the newest major), else `initdb` on
 *   PATH. Missing binaries are a skip outside CI and a failure in CI ({@link postgresRequired}).
 *
 * A directory left by a run that was killed (its server possibly still running) is stopped and removed by the next run.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { processAlive as alive, stablePort } from './processes.js';

/** What tests are given (via `inject('postgres')`): a running server, or why there is none. */
export type PostgresServerInfo =
  | { available: true; host: string; port: number; socketDir: string; superuser: string; caFile: string | undefined }
  | { available: false; reason: string };

/** Whether this run must have PostgreSQL: `CI` or `TOKENWATCH_REQUIRE_POSTGRES` set (not empty, not `0`/`false`). */
export function postgresRequired(env: NodeJS.ProcessEnv = process.env): boolean {
  const on = (v: string | undefined) => v !== undefined && v !== '' && v !== '0' && v.toLowerCase() !== 'false';
  return on(env.CI) || on(env.TOKENWATCH_REQUIRE_POSTGRES);
}

/** The directory of `initdb`, `pg_ctl` and `postgres`, or undefined. */
export function findPostgresBin(): string | undefined {
  const base = '/usr/lib/postgresql';
  if (existsSync(base)) {
    const majors = readdirSync(base)
      .filter((d) => /^\d+$/.test(d) && existsSync(join(base, d, 'bin', 'initdb')))
      .sort((a, b) => Number(b) - Number(a));
    if (majors[0] !== undefined) return join(base, majors[0], 'bin');
  }
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir !== '' && existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl'))) return dir;
  }
  return undefined;
}

const PREFIX = 'tokenwatch-pg-';
const SUPERUSER = 'postgres';

/** Runs a command as the server's user (uid 65534 when we are root). */
function asServerUser(cmd: string, args: string[], opts: { cwd?: string } = {}): string {
  const root = typeof process.getuid === 'function' && process.getuid() === 0;
  const [file, argv] = root ? ['setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', cmd, ...args]] : [cmd, args];
  return execFileSync(file, argv, { stdio: 'pipe', encoding: 'utf8', cwd: opts.cwd ?? tmpdir(), env: { ...process.env, LC_ALL: 'C' } });
}

function chownToServer(path: string): void {
  if (typeof process.getuid === 'function' && process.getuid() === 0) chownSync(path, 65534, 65534);
}

/** Stops and removes servers of earlier runs whose vitest process is gone. */
function removeStale(bin: string): void {
  for (const name of readdirSync(tmpdir())) {
    const m = /^tokenwatch-pg-(\d+)-/.exec(name);
    if (m === null || alive(Number(m[1]))) continue;
    const dir = join(tmpdir(), name);
    try {
      if (existsSync(join(dir, 'data', 'postmaster.pid'))) asServerUser(join(bin, 'pg_ctl'), ['stop', '-D', join(dir, 'data'), '-m', 'immediate', '-w']);
    } catch {
      // Not running any more.
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Makes a CA and a server certificate signed by it (for localhost and 127.0.0.1) in `dir`; false without openssl. */
function makeCertificates(dir: string): boolean {
  const openssl = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  try {
    openssl(['version']);
  } catch {
    return false;
  }
  openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=tokenwatch test CA', '-keyout', 'ca.key', '-out', 'ca.crt']);
  openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', 'server.key', '-out', 'server.csr']);
  writeFileSync(join(dir, 'server.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n');
  openssl(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', 'server.ext', '-out', 'server.crt']);
  return true;
}

/** A started server and how to stop it. */
export interface StartedPostgres {
  info: PostgresServerInfo;
  stop: () => void;
}

/**
 * Starts the server, or says why not. @throws when the binaries are missing and {@link postgresRequired}, or when a
 * present server fails to start (its log is quoted)
 */
export async function startPostgres(): Promise<StartedPostgres> {
  const bin = findPostgresBin();
  if (bin === undefined) {
    const reason = 'PostgreSQL binaries not found (/usr/lib/postgresql/*/bin/initdb or initdb on PATH); install Debian\'s "postgresql" package';
    if (postgresRequired()) throw new Error(`${reason}: CI (CI / TOKENWATCH_REQUIRE_POSTGRES set) needs them for the PostgreSQL store tests`);
    return { info: { available: false, reason }, stop: () => {} };
  }
  removeStale(bin);
  const dir = mkdtempSync(join(tmpdir(), `${PREFIX}${process.pid}-`));
  chmodSync(dir, 0o755);
  chownToServer(dir);
  const data = join(dir, 'data');
  const log = join(dir, 'server.log');
  try {
    asServerUser(join(bin, 'initdb'), ['-D', data, '-U', SUPERUSER, '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C']);
    writeFileSync(
      join(data, 'pg_hba.conf'),
      [`local all ${SUPERUSER} trust`, `host all ${SUPERUSER} 127.0.0.1/32 trust`, 'local all all scram-sha-256', 'host all all 127.0.0.1/32 scram-sha-256', ''].join('\n'),
    );
    const tls = makeCertificates(dir);
    const settings = [
      'listen_addresses = \'127.0.0.1\'',
      `unix_socket_directories = '${dir}'`,
      'fsync = off',
      'synchronous_commit = off',
      'full_page_writes = off',
      'max_connections = 300',
      'shared_buffers = 32MB',
      "password_encryption = 'scram-sha-256'",
      ...(tls ? ["ssl = on", `ssl_cert_file = '${join(dir, 'server.crt')}'`, `ssl_key_file = '${join(dir, 'server.key')}'`] : []),
    ];
    writeFileSync(join(data, 'postgresql.auto.conf'), `${settings.join('\n')}\n`);
    for (const f of ['pg_hba.conf', 'postgresql.auto.conf']) chownToServer(join(data, f));
    if (tls) {
      for (const f of ['server.key', 'server.crt', 'ca.crt']) chownToServer(join(dir, f));
      chmodSync(join(dir, 'server.key'), 0o600);
      chmodSync(join(dir, 'ca.crt'), 0o644);
    }
    writeFileSync(log, '');
    chownToServer(log);
    let port = 0;
    for (let attempt = 1; ; attempt++) {
      // Outside the ephemeral range: a test stops and starts this server again on the same port.
      port = await stablePort();
      try {
        asServerUser(join(bin, 'pg_ctl'), ['start', '-D', data, '-l', log, '-w', '-t', '120', '-o', `-p ${port}`]);
        break;
      } catch (err) {
        if (attempt >= 3) throw err;
      }
    }
    const stop = () => {
      try {
        asServerUser(join(bin, 'pg_ctl'), ['stop', '-D', data, '-m', 'immediate', '-w']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    };
    return { info: { available: true, host: '127.0.0.1', port, socketDir: dir, superuser: SUPERUSER, caFile: tls ? join(dir, 'ca.crt') : undefined }, stop };
  } catch (err) {
    const tail = existsSync(log) ? readFileSync(log, 'utf8').split('\n').slice(-15).join('\n') : '';
    const out = (err as { stderr?: string }).stderr ?? '';
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`could not start the test PostgreSQL server: ${(err as Error).message}\n${out}\n${tail}`);
  }
}
