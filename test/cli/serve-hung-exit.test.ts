/**
 * `tokenwatch serve` exits after SIGTERM even while a cluster's API server holds connections open without answering
 * (accepts, never replies): the stop aborts what tokenwatch started, and a socket the peer keeps open does not keep the
 * process alive past a short grace (src/cli/commands/serve.ts). Pods get `terminationGracePeriodSeconds` to stop in.
 * While it still starts, a first signal is kept (and logged) and a second exits at once (docs/live-mode.md).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cliMain } from '../support/build.js';
import { until } from '../support/until.js';

const held: Socket[] = [];
const closers: (() => void)[] = [];
afterEach(() => {
  for (const s of held.splice(0)) s.destroy();
  for (const c of closers.splice(0)) c();
});

/** When the test sends SIGTERM: once serve says it started, or at the first connection to the API server (mid-start). */
type When = 'started' | 'connected';

describe('serve with a hung cluster API', () => {
  it('exits with 0 after SIGTERM while the hung API server still holds its connections open', { timeout: 120_000 }, () => stopWhileHung('started'));

  // A SIGTERM while serve is still starting (a rollout may stop a pod that has not finished starting) is acted on once
  // it has started: the process stops as gracefully as after a start, instead of the signal's default action.
  it('a SIGTERM at its first connection to the API server, before it has finished starting, also stops it gracefully with 0', { timeout: 120_000 }, () =>
    stopWhileHung('connected'));
});

/**
 * A TCP server on 127.0.0.1 that accepts and never answers (its sockets kept in `held`, closed after each test);
 * `onFirstConnection`, when set, is called once at the first connection.
 */
async function blackHole(): Promise<{ port: number; onFirstConnection?: () => void }> {
  const hole: { port: number; onFirstConnection?: () => void } = { port: 0 };
  const server = createServer((socket) => {
    held.push(socket);
    socket.on('error', () => {});
    const first = hole.onFirstConnection;
    hole.onFirstConnection = undefined;
    first?.();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  closers.push(() => server.close());
  hole.port = (server.address() as { port: number }).port;
  return hole;
}

/** `tokenwatch serve --config cfg` (the test bundle) with its stdout and stderr collected together, and its exit. */
function startServe(cfg: string): { child: ChildProcess; output: () => string; exited: Promise<{ code: number | null; signal: string | null }> } {
  const child = spawn(process.execPath, [cliMain(), 'serve', '--config', cfg], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<{ code: number | null; signal: string | null }>((r) => child.once('exit', (code, signal) => r({ code, signal })));
  return { child, output: () => out, exited };
}

/** Starts serve against an API server that accepts and never answers, sends SIGTERM `when` asked, checks the exit. */
async function stopWhileHung(when: When): Promise<void> {
  const hole = await blackHole();
  const port = hole.port;
  const dir = mkdtempSync(join(tmpdir(), 'tw-hung-exit-'));
  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(
    kubeconfig,
    `apiVersion: v1\nkind: Config\nclusters:\n- name: hung\n  cluster:\n    server: http://127.0.0.1:${port}\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: hung-cluster-token\ncontexts:\n- name: hung\n  context:\n    cluster: hung\n    user: u\ncurrent-context: hung\n`,
  );
  const audit = join(dir, 'audit.log');
  writeFileSync(audit, '');
  const cfg = join(dir, 'tokenwatch.yaml');
  writeFileSync(
    cfg,
    `store:\n  path: ${join(dir, 'tw.db')}\nhttp:\n  host: 127.0.0.1\n  port: 0\npoll:\n  requestTimeout: 3s\nclusters:\n  - name: hung\n    audit:\n      file:\n        path: ${audit}\n    kubernetes:\n      kubeconfig: ${kubeconfig}\n    schedule: "0 0 1 1 *"\n`,
  );
  const { child, output, exited } = startServe(cfg);
  try {
    // Started, and the watch cache has connected to the black hole (and waits for an answer that never comes); or,
    // for 'connected', the moment of that first connection, which serve makes while it starts.
    await new Promise<void>((resolve, reject) => {
      let check: NodeJS.Timeout | undefined;
      if (when === 'connected') {
        hole.onFirstConnection = () => {
          child.kill('SIGTERM');
          resolve();
        };
      } else {
        check = setInterval(() => {
          if (output().includes('tokenwatch serve started') && held.length > 0) {
            clearInterval(check);
            child.kill('SIGTERM');
            resolve();
          }
        }, 50);
      }
      void exited.then(() => {
        clearInterval(check);
        reject(new Error(`serve exited early: ${output()}`));
      });
    });
    const end = await exited;
    expect(end).toEqual({ code: 0, signal: null });
    expect(output()).toContain('"msg":"stopped"');
    // The peer never closed anything: the process ended on its own account.
    expect(held.some((s) => !s.destroyed)).toBe(true);
    expect(output()).not.toContain('hung-cluster-token');
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

// A start can wait on a store or an API server that does not answer (up to their timeouts): the first Ctrl-C or
// SIGTERM says it was received and that serve stops once started; a second one exits at once, 128 + the signal.
describe('signals while serve waits on a PostgreSQL server that never answers', () => {
  it('the first SIGINT is logged as kept, the second exits at once with 130 without starting', { timeout: 120_000 }, async () => {
    const hole = await blackHole();
    const port = hole.port;
    const dir = mkdtempSync(join(tmpdir(), 'tw-start-signal-'));
    const audit = join(dir, 'audit.log');
    writeFileSync(audit, '');
    const cfg = join(dir, 'tokenwatch.yaml');
    // connectTimeout far beyond the test: the start waits on the store until the second signal.
    writeFileSync(
      cfg,
      `store:\n  postgres:\n    host: 127.0.0.1\n    port: ${port}\n    database: tw\n    user: tw\n    sslmode: disable\n    connectTimeout: 600s\nhttp:\n  host: 127.0.0.1\n  port: 0\nslack:\n  enabled: false\nclusters:\n  - name: prod\n    audit:\n      file:\n        path: ${audit}\n    kubernetes:\n      none: true\n    schedule: "0 0 1 1 *"\n`,
    );
    const { child, output, exited } = startServe(cfg);
    try {
      await new Promise<void>((resolve, reject) => {
        hole.onFirstConnection = resolve;
        void exited.then(() => reject(new Error(`serve exited before connecting to the store: ${output()}`)));
      });
      child.kill('SIGINT');
      await until('the first signal logged as kept', () => output().includes('signal received while starting: stopping once started'));
      expect(child.exitCode).toBeNull();
      child.kill('SIGINT');
      expect(await exited).toEqual({ code: 130, signal: null });
      expect(output()).toContain('second signal while starting: exiting now');
      expect(output()).not.toContain('tokenwatch serve started');
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
});
