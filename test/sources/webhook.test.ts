/**
 * The audit webhook source over real TLS on loopback, driven by a client that sends what the API server's webhook
 * backend sends (batched EventList, application/json, bearer token): auth, body bound, 429 past the spool bound,
 * resumable polls, and a kill -9 between receipt and answer that loses nothing acknowledged.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { appendFile, rm } from 'node:fs/promises';
import { request } from 'node:https';
import { connect, type TLSSocket } from 'node:tls';
import { dirname } from 'node:path';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebhookSource, type WebhookSourceOptions } from '../../src/sources/webhook.js';
import { emptyStats } from '../../src/sources/types.js';
import { auditEvent, drain, type EventSpec } from './events.js';
import { eventList, postBatch, selfSignedCert, type TestCert } from './webhook-client.js';
import { childScript } from '../support/build.js';

const T = Date.parse('2026-11-29T12:00:00Z');
const TOKEN = 'webhook-token-7f3a9c';
const stale = (id: string): EventSpec => ({ auditID: id, time: T, kind: 'stale', pod: 'p1', secondsAfterWarning: 100 });
const plain = (id: string): EventSpec => ({ auditID: id, time: T, kind: 'plain' });
const ids = (items: string[]): string[] => items.map((m) => (JSON.parse(m) as { auditID: string }).auditID);
const batch = (...specs: EventSpec[]): string => eventList(specs.map(auditEvent));

let certDir: string;
let server: TestCert;
let client: TestCert;
const dirs: string[] = [];
const sources: WebhookSource[] = [];
const children: ChildProcess[] = [];

beforeAll(() => {
  certDir = mkdtempSync(join(tmpdir(), 'tw-webhook-certs-'));
  server = selfSignedCert(certDir, 'server');
  client = selfSignedCert(certDir, 'client', 'system:kube-apiserver');
});

afterEach(async () => {
  for (const s of sources.splice(0)) s.close();
  for (const c of children.splice(0)) c.kill('SIGKILL');
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

function spoolIn(): string {
  const d = mkdtempSync(join(tmpdir(), 'tw-webhook-'));
  dirs.push(d);
  return join(d, 'data', 'webhook-prod.spool');
}

async function started(o: Partial<WebhookSourceOptions> = {}): Promise<{ source: WebhookSource; port: number; spool: string }> {
  const spool = o.spoolPath ?? spoolIn();
  const source = new WebhookSource({ cluster: 'prod', host: '127.0.0.1', port: 0, cert: server.cert, key: server.key, token: TOKEN, spoolPath: spool, ...o });
  sources.push(source);
  return { source, port: await source.start(), spool };
}

const pollAll = (s: WebhookSource, cursor?: string) => drain(s.poll(cursor, { now: T, lookbackMs: 86_400_000, stats: emptyStats() }));
const spoolSize = (p: string): number => (existsSync(p) ? statSync(p).size : 0);

describe('WebhookSource', () => {
  it('stores an EventList batch sent with the bearer token, answers 200 and yields its token-use events once', async () => {
    const { source, port, spool } = await started();
    const res = await postBatch({ port, ca: server.cert, token: TOKEN, body: batch(stale('a'), plain('b'), stale('c')) });
    expect(res.status).toBe(200);
    expect(spoolSize(spool)).toBeGreaterThan(0); // on disk before the answer
    const first = await pollAll(source);
    expect(ids(first.items)).toEqual(['a', 'c']); // the plain event carries no token-use term
    expect((await pollAll(source, first.result)).items).toEqual([]);
    expect((await postBatch({ port, ca: server.cert, token: TOKEN, body: batch(stale('d')) })).status).toBe(200);
    expect(ids((await pollAll(source, first.result)).items)).toEqual(['d']);
    expect(source.webhookStatus()).toMatchObject({ acceptedEvents: 4, shedBatches: 0 });
  });

  it('answers 401 to a wrong or missing token and stores nothing', async () => {
    const { source, port, spool } = await started();
    const wrong = await postBatch({ port, ca: server.cert, token: `${TOKEN}x`, body: batch(stale('a')) });
    const none = await postBatch({ port, ca: server.cert, body: batch(stale('b')) });
    expect([wrong.status, none.status]).toEqual([401, 401]);
    expect(wrong.body).not.toContain(TOKEN);
    expect(spoolSize(spool)).toBe(0);
    expect((await pollAll(source)).items).toEqual([]);
    expect(source.webhookStatus().acceptedEvents).toBe(0);
  });

  it('accepts a client certificate signed by the configured CA instead of a token', async () => {
    const { source, port } = await started({ token: undefined, clientCa: client.cert });
    expect((await postBatch({ port, ca: server.cert, clientCert: client, body: batch(stale('m')) })).status).toBe(200);
    // the server's own certificate is not signed by the client CA
    expect((await postBatch({ port, ca: server.cert, clientCert: server, body: batch(stale('n')) })).status).toBe(401);
    expect((await postBatch({ port, ca: server.cert, token: TOKEN, body: batch(stale('o')) })).status).toBe(401); // no token configured
    expect(ids((await pollAll(source)).items)).toEqual(['m']);
  });

  it('answers 413 to a body over maxBodyBytes and 400 to a body that is not an EventList, storing nothing', async () => {
    const { source, port, spool } = await started({ maxBodyBytes: 4096 });
    const big = batch(...Array.from({ length: 20 }, (_, i) => stale(`big-${i}`)));
    expect(Buffer.byteLength(big)).toBeGreaterThan(4096);
    expect((await postBatch({ port, ca: server.cert, token: TOKEN, body: big })).status).toBe(413);
    expect((await postBatch({ port, ca: server.cert, token: TOKEN, body: auditEvent(stale('x')) })).status).toBe(400);
    expect((await postBatch({ port, ca: server.cert, token: TOKEN, body: '{"kind":"EventList","items":' })).status).toBe(400);
    expect(spoolSize(spool)).toBe(0);
    expect((await pollAll(source)).items).toEqual([]);
  });

  it('answers 429 while the unconsumed spool is over maxSpoolBytes, counts the shed batch, and accepts again once polled', async () => {
    let shed = 0;
    const { source, port, spool } = await started({ maxSpoolBytes: 1024, onShed: () => shed++ });
    const first = batch(...Array.from({ length: 5 }, (_, i) => stale(`s-${i}`)));
    expect((await postBatch({ port, ca: server.cert, token: TOKEN, body: first })).status).toBe(200);
    expect(spoolSize(spool)).toBeGreaterThan(1024);
    const refused = await postBatch({ port, ca: server.cert, token: TOKEN, body: batch(stale('late')) });
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe('5');
    expect(shed).toBe(1);
    expect(source.webhookStatus().shedBatches).toBe(1);
    const read = await pollAll(source);
    expect(ids(read.items)).toEqual(['s-0', 's-1', 's-2', 's-3', 's-4']);
    // the next poll starts with everything committed: the spool is emptied, and batches are accepted again
    expect((await pollAll(source, read.result)).items).toEqual([]);
    expect(spoolSize(spool)).toBe(0);
    expect(source.webhookStatus().unconsumedBytes).toBe(0);
    expect((await postBatch({ port, ca: server.cert, token: TOKEN, body: batch(stale('late')) })).status).toBe(200);
    expect(ids((await pollAll(source, read.result)).items)).toEqual(['late']);
  });

  it('resumes a poll from its last checkpoint after a restart, yielding every event once', async () => {
    const { source, port, spool } = await started();
    const all = Array.from({ length: 7 }, (_, i) => `r-${i}`);
    expect((await postBatch({ port, ca: server.cert, token: TOKEN, body: batch(...all.map(stale)) })).status).toBe(200);
    const committed: { cursor: string; stored: string[] }[] = [];
    const got: string[] = [];
    const gen = source.poll(undefined, {
      now: T,
      lookbackMs: 0,
      stats: emptyStats(),
      checkpointEvents: 3,
      checkpoint: (c) => void committed.push({ cursor: c, stored: [...got] }),
    });
    for (;;) {
      const r = await gen.next();
      if (r.done || committed.length === 1) break; // crash right after the first chunk commit: r.value is lost
      got.push(r.value);
    }
    await gen.return('');
    source.close();
    expect(ids(committed[0]!.stored)).toEqual(all.slice(0, 3));
    const restarted = (await started({ spoolPath: spool })).source;
    const rest = await pollAll(restarted, committed[0]!.cursor);
    expect(ids(rest.items)).toEqual(all.slice(3));
  });

  it('cuts a torn last line left by a crash during an append, so the next batch is stored whole', async () => {
    const spool = spoolIn();
    const first = await started({ spoolPath: spool });
    expect((await postBatch({ port: first.port, ca: server.cert, token: TOKEN, body: batch(stale('t-1')) })).status).toBe(200);
    first.source.close();
    await appendFile(spool, auditEvent(stale('torn')).slice(0, 40)); // never acknowledged
    const again = await started({ spoolPath: spool });
    expect((await postBatch({ port: again.port, ca: server.cert, token: TOKEN, body: batch(stale('t-2')) })).status).toBe(200);
    expect(ids((await pollAll(again.source)).items)).toEqual(['t-1', 't-2']);
  });

  it('kill -9 of the receiving process loses no acknowledged event and stores none twice', async () => {
    const spool = spoolIn();
    const child = spawn(process.execPath, [childScript('child-webhook'), spool, server.certFile, server.keyFile, TOKEN], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    const port = await new Promise<number>((resolve, reject) => {
      let out = '';
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /port (\d+)/.exec(out);
        if (m) resolve(Number(m[1]));
      });
      child.once('exit', (code) => reject(new Error(`child exited (${code}) before listening`)));
    });
    const batches = Array.from({ length: 12 }, (_, b) => Array.from({ length: 20 }, (_, i) => `k-${b}-${i}`));
    const acked: string[] = [];
    const inflight: Promise<unknown>[] = [];
    for (const [b, evs] of batches.entries()) {
      const p = postBatch({ port, ca: server.cert, token: TOKEN, body: batch(...evs.map(stale)) }).then(
        (r) => {
          if (r.status === 200) acked.push(...evs);
        },
        () => undefined, // cut by the kill: not acknowledged
      );
      inflight.push(p);
      if (b < 6) await p; // the first six answered; the rest are in flight when the process dies
      if (b === 8) child.kill('SIGKILL');
    }
    await Promise.all(inflight);
    await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r(undefined) : child.once('exit', r)));
    expect(acked.length).toBeGreaterThanOrEqual(6 * 20);

    const after = await pollAll((await started({ spoolPath: spool })).source);
    const got = ids(after.items);
    expect(new Set(got).size).toBe(got.length); // nothing twice
    for (const id of acked) expect(got).toContain(id); // nothing acknowledged lost
    const all = batches.flat();
    for (const id of got) expect(all).toContain(id);
  }, 60_000);

  it('does not empty a spool that has the committed size but is another file (inode and first line compared)', async () => {
    const spool = spoolIn();
    const first = await started({ spoolPath: spool });
    expect((await postBatch({ port: first.port, ca: server.cert, token: TOKEN, body: batch(stale('i-1')) })).status).toBe(200);
    const read = await pollAll(first.source);
    first.source.close();
    const cursorSize = statSync(spool).size;
    // The spool is replaced by another file of exactly that size (e.g. restored from elsewhere), holding another event.
    const replacement = `${spool}.new`;
    writeFileSync(replacement, readFileSync(spool, 'utf8').replace('"i-1"', '"i-2"'));
    renameSync(replacement, spool);
    expect(statSync(spool).size).toBe(cursorSize);
    const again = await started({ spoolPath: spool });
    // Equal sizes, another inode: not emptied; the new file is read from its start.
    expect(ids((await pollAll(again.source, read.result)).items)).toEqual(['i-2']);
  });

  it('creates the spool with mode 0600 and narrows an existing one to it', async () => {
    const fresh = await started();
    expect(statSync(fresh.spool).mode & 0o777).toBe(0o600);
    const spool = spoolIn();
    mkdirSync(dirname(spool), { recursive: true });
    writeFileSync(spool, '');
    chmodSync(spool, 0o644);
    await started({ spoolPath: spool });
    expect(statSync(spool).mode & 0o777).toBe(0o600);
  });

  it('answers 400 (not 500) to a batch with an event nested 5,000 deep, and stores nothing of it', async () => {
    const { source, port } = await started();
    let deep = '1';
    for (let i = 0; i < 5000; i++) deep = `{"a":${deep}}`;
    const body = `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[${auditEvent(stale('d-1'))},{"auditID":"deep","annotations":{"authentication.k8s.io/stale-token":"x"},"requestObject":${deep}}]}`;
    const res = await postBatch({ port, ca: server.cert, token: TOKEN, body });
    expect(res.status).toBe(400);
    expect(res.body).toContain('nests deeper than');
    // Brackets inside strings do not count.
    expect((await postBatch({ port, ca: server.cert, token: TOKEN, body: eventList([auditEvent(stale('d-2')).replace('"stale-token"', `"stale-token","note":"${'['.repeat(5000)}"`)]) })).status).toBe(200);
    expect(ids((await pollAll(source)).items)).toEqual(['d-2']);
  });

  it('answers 429 with Retry-After to a batch that would put in-flight bytes over maxInflightBytes, and accepts once they drain', async () => {
    let shed = 0;
    const { source, port } = await started({ maxInflightBytes: 8192, onShed: () => shed++ });
    const slowBody = Buffer.from(batch(...Array.from({ length: 4 }, (_, i) => stale(`f-${i}`))));
    expect(slowBody.length).toBeGreaterThan(2048);
    expect(slowBody.length).toBeLessThan(8192);
    // A batch whose body is still arriving holds its declared size.
    let slowResume: () => void = () => {};
    const slow = new Promise<number>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/', ca: server.cert, agent: false, headers: { 'content-type': 'application/json', 'content-length': slowBody.length, authorization: `Bearer ${TOKEN}` } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.write(slowBody.subarray(0, 100));
      slowResume = () => req.end(slowBody.subarray(100));
    });
    const big = batch(...Array.from({ length: 8 }, (_, i) => stale(`g-${i}`)));
    expect(Buffer.byteLength(big) + slowBody.length).toBeGreaterThan(8192);
    let refused: Awaited<ReturnType<typeof postBatch>> | undefined;
    // The first request's headers may not have reached the listener yet: ask until the bound is seen.
    for (let i = 0; i < 200 && refused?.status !== 429; i++) {
      refused = await postBatch({ port, ca: server.cert, token: TOKEN, body: big });
      if (refused.status === 200) throw new Error('the second batch was accepted while the first held the in-flight bytes');
      if (refused.status !== 429) throw new Error(`unexpected ${refused.status}`);
    }
    expect(refused!.status).toBe(429);
    expect(refused!.headers['retry-after']).toBe('5');
    expect(shed).toBeGreaterThanOrEqual(1);
    slowResume();
    expect(await slow).toBe(200);
    expect((await postBatch({ port, ca: server.cert, token: TOKEN, body: big })).status).toBe(200);
    expect(ids((await pollAll(source)).items)).toHaveLength(12);
  });

  it('caps open connections at maxConnections: further sockets are dropped, and served again once others close', async () => {
    const { port } = await started({ maxConnections: 2 });
    const open = (): Promise<TLSSocket | 'dropped'> =>
      new Promise((resolve) => {
        const s = connect({ host: '127.0.0.1', port, ca: server.cert }, () => resolve(s));
        s.once('error', () => resolve('dropped'));
        s.once('close', () => resolve('dropped'));
      });
    const held = [await open(), await open()];
    expect(held.every((s) => s !== 'dropped')).toBe(true);
    expect(await open()).toBe('dropped');
    for (const s of held) if (s !== 'dropped') s.destroy();
    // The listener sees the closes asynchronously: retry until a batch gets through.
    let status = 0;
    for (let i = 0; i < 200 && status !== 200; i++) status = await postBatch({ port, ca: server.cert, token: TOKEN, body: batch(stale('c-1')) }).then((r) => r.status, () => 0);
    expect(status).toBe(200);
  });
});
