/**
 * `tokenwatch serve` with the audit webhook source, killed with SIGKILL: the real CLI in a child process (the bundle,
 * test/global-setup.ts), receiving what kube-apiserver's webhook backend sends (batched `audit.k8s.io/v1` `EventList`,
 * `application/json`, the webhook kubeconfig's bearer token, over TLS on loopback; docs/webhook/kubeconfig.yaml).
 *
 * The webhook backend treats a batch without a 2xx as not delivered and sends it again
 * (https://kubernetes.io/docs/tasks/debug/debug-cluster/audit/#webhook-backend, `--audit-webhook-initial-backoff`), so
 * the guarantee under test is: a batch answered 2xx is never lost, whatever happens after the answer; a batch received
 * but not answered (the process died between receipt and 2xx) may be stored in part or whole, and its retry is then
 * not counted twice (auditID dedupe). Each batch is the 20 requests of one ServiceAccount, so the stored finding of
 * ServiceAccount `sa-<b>` counts exactly the requests of batch b that got in: 20 once delivered, never more.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, watch, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { auditEvent } from '../sources/events.js';
import { eventList, postBatch, selfSignedCert } from '../sources/webhook-client.js';
import { cliMain } from '../support/build.js';
import { stablePort } from '../support/processes.js';

const TOKEN = 'kill-webhook-token-58e1';
const BATCHES = 12;
const PER_BATCH = 20;
const dir = mkdtempSync(join(tmpdir(), 'tw-serve-webhook-kill-'));
const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Batch b: the 20 requests of ServiceAccount `default/sa-<b>`, each from its own pod, as one EventList body. */
function batch(b: number, at: number): string {
  const events = Array.from({ length: PER_BATCH }, (_, i) =>
    auditEvent({ auditID: `b${b}-e${i}`, time: at, kind: 'stale', namespace: 'default', serviceAccount: `sa-${b}`, pod: `p-${b}-${i}`, secondsAfterWarning: 100 }),
  );
  return eventList(events);
}

interface Serve {
  child: ChildProcess;
  /** Resolves once the child logged `poll finished` this many times in all. */
  polls(n: number): Promise<void>;
  exited: Promise<void>;
}

/** Starts `tokenwatch serve --config cfg`; resolves once it logged `tokenwatch serve started` (its webhook listens). */
async function startServe(cfg: string): Promise<Serve> {
  const child = spawn(process.execPath, [cliMain(), 'serve', '--config', cfg], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LOG_LEVEL: 'info' } });
  children.push(child);
  let out = '';
  let err = '';
  const waiters: Array<() => void> = [];
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
    for (const w of waiters.splice(0)) w();
  });
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const until = (what: string, ok: () => boolean): Promise<void> =>
    new Promise((resolve, reject) => {
      const check = (): void => {
        if (ok()) resolve();
        else if (child.exitCode !== null || child.signalCode !== null) reject(new Error(`serve exited before ${what}: ${out}${err}`));
        else waiters.push(check);
      };
      child.once('exit', () => setImmediate(check));
      check();
    });
  await until('it started', () => out.includes('tokenwatch serve started'));
  return { child, exited, polls: (n) => until(`${n} polls`, () => out.split('"poll finished"').length - 1 >= n) };
}

/** SIGKILL: no handler, no cleanup, no flush. */
async function kill9(s: Serve): Promise<void> {
  s.child.kill('SIGKILL');
  await s.exited;
}

/** Requests counted per ServiceAccount in the store, `sa-<b>` → requests of its open finding. */
async function counted(db: string): Promise<Map<string, number>> {
  const store = await openStore(db);
  try {
    return new Map((await store.findings.list('prod', { status: ['open'] })).map((f) => [f.finding.serviceAccount, f.finding.requests]));
  } finally {
    await store.close();
  }
}

describe('serve with the audit webhook, killed with SIGKILL', () => {
  it('loses no acknowledged batch (killed after 2xx, and between receipt and 2xx) and counts no retried batch twice', async () => {
    const cert = selfSignedCert(dir);
    // Bound by four serve processes in turn: outside the ephemeral range, so nothing else takes it in between.
    const port = await stablePort();
    mkdirSync(join(dir, 'data'));
    writeFileSync(join(dir, 'token'), `${TOKEN}\n`);
    const db = join(dir, 'data', 'tw.db');
    const spool = join(dir, 'data', 'webhook-prod.spool');
    const cfg = join(dir, 'tokenwatch.yaml');
    // Polls at start only (the schedule is once a year): what each restart's first poll finds is what survived.
    writeFileSync(
      cfg,
      [
        'store:',
        `  path: ${db}`,
        'http:',
        '  host: 127.0.0.1',
        '  port: 0',
        'poll:',
        '  jitter: 0s',
        'clusters:',
        '  - name: prod',
        '    schedule: "0 0 1 1 *"',
        '    audit:',
        '      webhook:',
        '        host: 127.0.0.1',
        `        port: ${port}`,
        `        certFile: ${cert.certFile}`,
        `        keyFile: ${cert.keyFile}`,
        `        tokenFile: ${join(dir, 'token')}`,
        '',
      ].join('\n'),
    );
    const at = Date.now() - 60_000;
    const send = (b: number) => postBatch({ port, ca: cert.cert, token: TOKEN, body: batch(b, at) });
    const acked = new Set<number>();

    // 1. Batches 0-3 answered 200, then SIGKILL: after the 2xx, before any poll read them.
    const first = await startServe(cfg);
    await first.polls(1); // the start-up poll, of an empty spool
    for (const b of [0, 1, 2, 3]) {
      expect((await send(b)).status).toBe(200);
      acked.add(b);
    }
    await kill9(first);
    const afterFirst = statSync(spool).size;
    expect(afterFirst).toBeGreaterThan(0);

    // 2. Batches 4-11 sent at once; SIGKILL as soon as the fourth of them is in the spool file (each batch is one
    // append, then an fsync, then the answer): the process dies after receiving it and before (or just after) its 2xx,
    // with more batches received or in flight. Whatever got a 200 before the kill is acknowledged, the rest is not.
    const second = await startServe(cfg);
    await second.polls(1); // reads batches 0-3
    const base = statSync(spool).size;
    const perBatch = afterFirst / 4; // batches 4-9 are as long as 0-3, 10 and 11 about 1 % longer
    const watcher = watch(spool, () => {
      if (existsSync(spool) && statSync(spool).size > base + 3.5 * perBatch) second.child.kill('SIGKILL');
    });
    const inflight = [4, 5, 6, 7, 8, 9, 10, 11].map((b) =>
      send(b).then(
        (r) => {
          if (r.status === 200) acked.add(b);
        },
        () => undefined, // the connection died with the process: not acknowledged
      ),
    );
    await Promise.all(inflight);
    await second.exited;
    watcher.close();
    expect(second.child.signalCode).toBe('SIGKILL');
    expect(statSync(spool).size).toBeGreaterThan(base); // received (part of) a batch before dying

    // 3. Restarted: every acknowledged batch is counted whole, nothing more than once, before any retry.
    const third = await startServe(cfg);
    await third.polls(1);
    const beforeRetry = await counted(db);
    for (let b = 0; b < BATCHES; b++) {
      const n = beforeRetry.get(`sa-${b}`) ?? 0;
      if (acked.has(b)) expect(n, `acknowledged batch ${b}`).toBe(PER_BATCH);
      else expect(n, `unacknowledged batch ${b}`).toBeLessThanOrEqual(PER_BATCH); // none, part or all of it got in
    }

    // 4. The API server sends again what it got no 2xx for; stopped cleanly and started once more, serve counts
    // each request exactly once: nothing lost, nothing twice.
    const retried = Array.from({ length: BATCHES }, (_, b) => b).filter((b) => !acked.has(b));
    for (const b of retried) expect((await send(b)).status).toBe(200);
    third.child.kill('SIGTERM');
    await third.exited;
    const fourth = await startServe(cfg);
    await fourth.polls(1);
    fourth.child.kill('SIGTERM');
    await fourth.exited;
    const final = await counted(db);
    expect([...final.keys()].sort()).toEqual(Array.from({ length: BATCHES }, (_, b) => `sa-${b}`).sort());
    for (const [sa, n] of final) expect(n, sa).toBe(PER_BATCH);
  }, 120_000);
});
