import { appendFileSync, mkdtempSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { startFakeCloudWatch, type FakeCloudWatch } from '../fakes/cloudwatch.js';
import { parseConfig, type ClusterConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { ClusterPoller } from '../../src/pipeline/poll.js';
import { CloudWatchSource } from '../../src/sources/cloudwatch.js';
import { FileSource } from '../../src/sources/file.js';
import type { AuditSource } from '../../src/sources/types.js';
import { openStore, type Store } from '../../src/store/index.js';
import type { TokenRecord } from '../../src/findings/types.js';
import { auditEvent } from '../sources/events.js';
import { approval, staleRecord } from '../store/helpers.js';

const T0 = Date.parse('2026-11-20T12:00:00Z');
const quiet = createLogger({ level: 'silent' });

function clusterConfig(name: string, audit: object): ClusterConfig {
  return parseConfig({ clusters: [{ name, audit }] }, {}).clusters[0]!;
}

/** Two stages (RequestReceived + ResponseComplete) of one request: same auditID, counted once. */
function staleRequest(auditID: string, time: number, pod = 'kube-multus-ds-aaaaa', secs = 7_000_000): string {
  const e = auditEvent({ auditID, time, kind: 'stale', pod, secondsAfterWarning: secs + Math.round((time - T0) / 1000), sourceIP: '192.168.1.10', userAgent: 'multus/v0.0.0 (linux/amd64) kubernetes/$Format' });
  const received = JSON.stringify({ ...JSON.parse(e), stage: 'RequestReceived' });
  return `${received}\n${e}\n`;
}

let dir: string;
let store: Store;
beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tw-poll-'));
  store = await openStore(join(dir, 'tw.db'));
});
afterEach(async () => await store.close());

describe('ClusterPoller with a file source', () => {
  it('counts each request once, keeps counts across polls, and a poll with nothing new adds nothing', async () => {
    const log = join(dir, 'audit.log');
    writeFileSync(log, staleRequest('a1', T0) + staleRequest('a2', T0 + 60_000) + '{"kind":"Event","auditID":"n1","user":{"username":"system:node:x"}}\n');
    const cluster = clusterConfig('prod', { file: { path: log } });
    const metrics = new Metrics();
    const poller = new ClusterPoller({ cluster, source: new FileSource({ path: log }), store, logger: quiet, metrics, clock: () => T0 + 120_000 });
    const first = await poller.pollOnce();
    expect(first.error).toBeUndefined();
    expect(first.newUses).toBe(2);
    expect(first.duplicates).toBe(2); // the RequestReceived stages
    expect(first.findings).toHaveLength(1);
    expect(first.findings[0]).toMatchObject({ cluster: 'prod', namespace: 'kube-system', serviceAccount: 'multus', kind: 'stale-token', requests: 2 });
    expect(first.changes[0]).toMatchObject({ isNew: true });

    const second = await poller.pollOnce();
    expect(second.newUses).toBe(0);
    expect(second.findings[0]!.requests).toBe(2);
    expect(second.changes[0]).toMatchObject({ isNew: false });

    appendFileSync(log, staleRequest('a3', T0 + 90_000));
    const third = await poller.pollOnce();
    expect(third.newUses).toBe(1);
    expect(third.findings[0]!.requests).toBe(3);
    expect(await store.findings.list('prod')).toHaveLength(1);
    expect(poller.health()).toMatchObject({ status: 'ok', lastSuccessAt: T0 + 120_000 });
    expect(await metrics.text()).toContain('tokenwatch_token_uses_total{cluster="prod",kind="stale"} 3');
  });

  it('the open-findings gauge counts the findings the poll left open: not a snoozed one, again once its snooze ends', async () => {
    const log = join(dir, 'audit.log');
    writeFileSync(log, staleRequest('g1', T0) + staleRequest('g2', T0 + 1000, 'fluent-bit-x1'));
    const cluster = clusterConfig('prod', { file: { path: log } });
    const metrics = new Metrics();
    const now = { t: T0 + 120_000 };
    const poller = new ClusterPoller({ cluster, source: new FileSource({ path: log }), store, logger: quiet, metrics, clock: () => now.t });
    const gauge = async () => (await metrics.text()).split('\n').filter((l) => l.startsWith('tokenwatch_open_findings{cluster="prod"') && !l.endsWith(' 0'));
    const first = await poller.pollOnce();
    expect(first.findings).toHaveLength(1);
    const [only] = await gauge();
    expect(only).toMatch(/ 1$/);
    await store.findings.setStatus(first.findings[0]!.id, { status: 'snoozed', until: T0 + 3_600_000 }, now.t);
    now.t += 60_000;
    await poller.pollOnce();
    expect(await gauge()).toEqual([]);
    now.t = T0 + 3_600_000 + 60_000;
    await poller.pollOnce();
    expect(await gauge()).toEqual([only]);
  });

  it('a poll that dies mid-way stores nothing and moves no cursor; the next poll counts every auditID exactly once', async () => {
    const log = join(dir, 'audit.log');
    writeFileSync(log, staleRequest('b1', T0) + staleRequest('b2', T0 + 1000) + staleRequest('b3', T0 + 2000));
    const cluster = clusterConfig('prod', { file: { path: log } });
    const real = new FileSource({ path: log });
    // A source that dies after two records, as a process killed mid-poll would.
    const dying: AuditSource = {
      id: real.id,
      async *poll(cursor, opts) {
        let n = 0;
        const gen = real.poll(cursor, opts);
        try {
          for (let r = await gen.next(); !r.done; r = await gen.next()) {
            yield r.value;
            if (++n === 2) throw new Error('killed');
          }
        } finally {
          await gen.return(''); // the file source closes its FileHandle (Node 26 fails a process that leaves it to GC)
        }
        return '';
      },
    };
    const broken = await new ClusterPoller({ cluster, source: dying, store, logger: quiet, clock: () => T0 + 5000 }).pollOnce();
    expect(broken.error).toBe('killed');
    expect(openDescriptorsOf(log)).toEqual([]);
    expect(await store.polls.getCursor(real.id)).toBeUndefined();
    expect(await store.tokenRecords.list('prod')).toEqual([]);

    // "restart": reopen the store, new poller
    await store.close();
    store = await openStore(join(dir, 'tw.db'));
    const poller = new ClusterPoller({ cluster, source: new FileSource({ path: log }), store, logger: quiet, clock: () => T0 + 6000 });
    await poller.restored; // the last run's health is read from the (asynchronous) store
    expect(poller.health()).toMatchObject({ status: 'degraded', lastError: 'killed' });
    const ok = await poller.pollOnce();
    expect(ok.newUses).toBe(3);
    expect(ok.findings[0]!.requests).toBe(3);
    expect((await poller.pollOnce()).findings[0]!.requests).toBe(3);
  });
});

/** This process's open file descriptors on `path` (Linux /proc/self/fd). */
function openDescriptorsOf(path: string): string[] {
  return readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`) === path;
    } catch {
      return false;
    }
  });
}

describe('ClusterPoller: a chunk commit that fails mid-read', () => {
  it('ends the source, so its file is closed, and reports the poll failed', async () => {
    const log = join(dir, 'audit-commit.log');
    writeFileSync(log, Array.from({ length: 30 }, (_, i) => staleRequest(`c${i}`, T0 + i * 1000)).join(''));
    const cluster = clusterConfig('prod', { file: { path: log } });
    // A store whose chunk commits fail (a full disk): the poller's own commit throws between two records.
    // The transaction's own Store (`tx`) fails the same way.
    const failingOver = (s: Store): Store =>
      new Proxy(s, {
        get(target, prop, receiver) {
          if (prop === 'tokenRecords') {
            const failed = () => { throw new Error('SQLITE_FULL: database or disk is full'); };
            return Object.assign(Object.create(target.tokenRecords) as Store['tokenRecords'], { replace: failed });
          }
          if (prop === 'transaction') return <T>(fn: (tx: Store) => Promise<T>) => target.transaction((tx) => fn(failingOver(tx)));
          const v = Reflect.get(target, prop, receiver) as unknown;
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      });
    const failing = failingOver(store);
    // Without checkpoints (as a source that cannot resume mid-poll), so the poller's own chunk commit, between two
    // records it was handed, is what fails — not a commit inside the source.
    const real = new FileSource({ path: log });
    const noCheckpoints: AuditSource = {
      id: real.id,
      poll: (cursor, opts) => {
        const { checkpoint: _none, ...rest } = opts;
        return real.poll(cursor, rest);
      },
    };
    const result = await new ClusterPoller({ cluster, source: noCheckpoints, store: failing, logger: quiet, clock: () => T0 + 60_000, chunkEvents: 5 }).pollOnce();
    expect(result.error).toContain('SQLITE_FULL');
    expect(openDescriptorsOf(log)).toEqual([]);
  });
});

describe('ClusterPoller with CloudWatch (loopback fake, real SDK)', () => {
  let cw: FakeCloudWatch;
  let cwNow = T0 + 10 * 60_000;
  beforeEach(async () => {
    cwNow = T0 + 10 * 60_000;
    cw = await startFakeCloudWatch({ now: () => cwNow });
  });
  afterEach(async () => cw.close());

  const source = (group: string) =>
    new CloudWatchSource({ region: 'us-east-1', logGroup: group, streamPrefix: 'kube-apiserver-audit-', endpoint: cw.url, credentials: { accessKeyId: 'x', secretAccessKey: 'x' }, overlapMs: 10 * 60_000, sdkRetryDelayMs: 1, retry: { baseDelayMs: 1, maxDelayMs: 5, budgetMs: 200 } });
  const put = (group: string, auditID: string, time: number, ingestionTime?: number) =>
    cw.putEvents(group, 'kube-apiserver-audit-0a1b', staleRequest(auditID, time).trim().split('\n').map((message) => ({ timestamp: time, message, ingestionTime })));

  it('survives a restart with late events inside the overlap window: every auditID counted once, none lost', async () => {
    const g = '/aws/eks/prod/cluster';
    for (let i = 0; i < 5; i++) put(g, `c${i}`, T0 + i * 60_000);
    const cluster = clusterConfig('prod', { cloudwatch: { region: 'us-east-1', logGroup: g } });
    let now = T0 + 10 * 60_000;
    const first = await new ClusterPoller({ cluster, source: source(g), store, logger: quiet, clock: () => now }).pollOnce();
    expect(first.error).toBeUndefined();
    expect(first.newUses).toBe(5);

    // A late event (timestamp before the cursor, delivered after the poll) and a new one.
    put(g, 'late', T0 + 3 * 60_000 + 30_000, T0 + 11 * 60_000);
    put(g, 'new', T0 + 11 * 60_000);
    await store.close();
    store = await openStore(join(dir, 'tw.db'));
    now = T0 + 12 * 60_000;
    cwNow = now;
    const second = await new ClusterPoller({ cluster, source: source(g), store, logger: quiet, clock: () => now }).pollOnce();
    expect(second.error).toBeUndefined();
    expect(second.newUses).toBe(2);
    expect(second.duplicates).toBeGreaterThan(0); // overlap re-reads, dropped by auditID
    expect(second.findings[0]!.requests).toBe(7);
  });

  it('two clusters, one down: the healthy one keeps updating, the other is degraded with its cursor kept', async () => {
    const good = '/aws/eks/good/cluster';
    put(good, 'g1', T0);
    const goodPoller = new ClusterPoller({ cluster: clusterConfig('good', { cloudwatch: { region: 'us-east-1', logGroup: good } }), source: source(good), store, logger: quiet, clock: () => T0 + 60_000 });
    const badPoller = new ClusterPoller({ cluster: clusterConfig('bad', { cloudwatch: { region: 'us-east-1', logGroup: '/aws/eks/missing/cluster' } }), source: source('/aws/eks/missing/cluster'), store, logger: quiet, clock: () => T0 + 60_000 });
    const [g, b] = await Promise.all([goodPoller.pollOnce(), badPoller.pollOnce()]);
    expect(b.error).toMatch(/ResourceNotFound|does not exist/);
    expect(badPoller.health().status).toBe('degraded');
    expect(g.findings[0]!.requests).toBe(1);
    put(good, 'g2', T0 + 30_000);
    const g2 = await goodPoller.pollOnce();
    expect(g2.findings[0]!.requests).toBe(2);
    expect((await store.polls.lastRuns()).find((r) => r.cluster === 'bad')).toMatchObject({ error: expect.stringMatching(/ResourceNotFound|does not exist/) });
  });
});

describe('logs', () => {
  it('a poll logs one structured line with the poll id and counts', async () => {
    const lines: string[] = [];
    const destination = new Writable({ write(c, _e, cb) { lines.push(String(c)); cb(); } });
    const log = join(dir, 'audit.log');
    writeFileSync(log, staleRequest('d1', T0));
    await new ClusterPoller({ cluster: clusterConfig('prod', { file: { path: log } }), source: new FileSource({ path: log }), store, logger: createLogger({ destination }), clock: () => T0 }).pollOnce();
    const line = JSON.parse(lines.find((l) => l.includes('poll finished'))!);
    expect(line).toMatchObject({ cluster: 'prod', pollId: 1, newUses: 1, findings: 1 });
  });
});

describe('ClusterPoller store writes and retention', () => {
  const HOUR = 3_600_000;
  const DAY = 24 * HOUR;
  const r401 = (ip: string, lastSeen: number): TokenRecord => ({
    ...staleRecord({ cluster: 'prod' }),
    kind: 'unauthorized',
    pod: undefined,
    podUid: undefined,
    warnAfter: undefined,
    rejectionAt: undefined,
    maxSecondsAfterWarning: undefined,
    sourceIPs: [ip],
    firstSeen: lastSeen - HOUR,
    lastSeen,
    hourly: {},
  });

  it('an idle poll writes no token record; a new use writes only its record', async () => {
    const log = join(dir, 'audit.log');
    writeFileSync(log, staleRequest('a1', T0) + staleRequest('b1', T0, 'kube-multus-ds-bbb'));
    const cluster = clusterConfig('prod', { file: { path: log } });
    const poller = new ClusterPoller({ cluster, source: new FileSource({ path: log }), store, logger: quiet, clock: () => T0 + 120_000 });
    expect((await poller.pollOnce()).recordsWritten).toBe(2);
    const idle = await poller.pollOnce();
    expect(idle.error).toBeUndefined();
    expect(idle.recordsWritten).toBe(0);
    // A new process (new poller) compares every record with the store once: still nothing to write.
    const fresh = new ClusterPoller({ cluster, source: new FileSource({ path: log }), store, logger: quiet, clock: () => T0 + 180_000 });
    expect((await fresh.pollOnce()).recordsWritten).toBe(0);
    appendFileSync(log, staleRequest('a2', T0 + 60_000));
    const one = await poller.pollOnce();
    expect(one.newUses).toBe(1);
    expect(one.recordsWritten).toBe(1);
    expect(await store.tokenRecords.count('prod')).toBe(2);
  });

  it("records the cluster's watchedSince at the first successful poll only, and keeps the first time", async () => {
    const log = join(dir, 'audit.log');
    writeFileSync(log, staleRequest('a1', T0));
    const cluster = clusterConfig('prod', { file: { path: log } });
    const now = { t: T0 + 120_000 };
    const marks = vi.spyOn(store.polls, 'markWatchedSince');
    const poller = new ClusterPoller({ cluster, source: new FileSource({ path: log }), store, logger: quiet, clock: () => now.t });
    for (let i = 0; i < 3; i++) {
      expect((await poller.pollOnce()).error).toBeUndefined();
      now.t += 60_000;
    }
    expect(marks).toHaveBeenCalledTimes(1);
    expect(await store.polls.watchedSince('prod')).toBe(T0 + 120_000);
    // Another process's poller records it once too, and the first time stays.
    await new ClusterPoller({ cluster, source: new FileSource({ path: log }), store, logger: quiet, clock: () => now.t }).pollOnce();
    expect(marks).toHaveBeenCalledTimes(2);
    expect(await store.polls.watchedSince('prod')).toBe(T0 + 120_000);
  });

  it('prunes token records, poll runs and the action log by retention, keeping live stale tokens and open approvals', async () => {
    const log = join(dir, 'audit.log');
    writeFileSync(log, '');
    const now = T0 + 100 * DAY;
    const cluster = clusterConfig('prod', { file: { path: log } });
    await store.tokenRecords.upsert([
      r401('10.0.0.1', now - 8 * DAY), // older than 7 d: pruned
      r401('10.0.0.2', now - 6 * DAY), // kept
      staleRecord({ cluster: 'prod', lastSeen: now - 30 * DAY, warnAfter: now - 80 * DAY, rejectionAt: now + 10 * DAY }), // rejection ahead (EKS: warnAfter + 90 d): kept
      staleRecord({ cluster: 'prod', podUid: 'other', lastSeen: now - 30 * DAY, warnAfter: now - 91 * DAY, rejectionAt: now - DAY }), // pruned
    ]);
    for (const at of [now - 8 * DAY, now - 6 * DAY]) await store.polls.finishRun(await store.polls.startRun('prod', 'file', at), { endedAt: at + 1000, events: 0, tokenUses: 0 });
    const open = approval({ id: 'open-approval', createdAt: now - 100 * DAY, expiresAt: now + HOUR, updatedAt: now - 100 * DAY });
    await store.approvals.create(open);
    const row = async (at: number, approvalId: string | null) =>
      await store.actions.log({ at, cluster: 'prod', approvalId, actor: 'U1', action: 'snooze', target: 'x', result: 'ok' });
    await row(now - 91 * DAY, null); // pruned
    await row(now - 91 * DAY, 'open-approval'); // kept: its approval is still open
    await row(now - 89 * DAY, null); // kept
    const poller = new ClusterPoller({ cluster, source: new FileSource({ path: log }), store, logger: quiet, clock: () => now });
    const out = await poller.pollOnce();
    expect(out.error).toBeUndefined();
    expect(out.pruned).toEqual({ tokenRecords: 2, pollRuns: 1, actionLog: 1 });
    expect((await store.tokenRecords.list('prod')).map((r) => [r.kind, r.lastSeen])).toEqual([
      ['stale-token', now - 30 * DAY],
      ['unauthorized', now - 6 * DAY],
    ]);
    expect((await store.actions.list('prod')).filter((r) => r.action === 'snooze').map((r) => r.at)).toEqual([now - 89 * DAY, now - 91 * DAY]);
  });
});
