/**
 * Bounded polls (docs/live-mode.md#bounded-polls): a window with more events than `chunkEvents` is stored in chunks,
 * the cursor moves with each chunk, a poll killed between chunks resumes after the last committed one with counts equal
 * to an uninterrupted run, and no poll ever holds more than `chunkEvents` token uses — file source and CloudWatch
 * (loopback fake, real SDK).
 */
process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] = 'true';

import { mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeCloudWatch, type FakeCloudWatch } from '../fakes/cloudwatch.js';
import { parseConfig, type ClusterConfig } from '../../src/config/index.js';
import { MAX_UNATTRIBUTED_SOURCES } from '../../src/findings/aggregate.js';
import { createLogger } from '../../src/observability/logger.js';
import { ClusterPoller } from '../../src/pipeline/poll.js';
import { CloudWatchSource, parseCloudWatchCursorDoc } from '../../src/sources/cloudwatch.js';
import { FileSource, parseFileCursor } from '../../src/sources/file.js';
import type { AuditSource } from '../../src/sources/types.js';
import { openStore, type Store } from '../../src/store/index.js';
import { auditEvent } from '../sources/events.js';

const T0 = Date.parse('2026-11-20T12:00:00Z');
const NOW = T0 + 10 * 60_000;
const quiet = createLogger({ level: 'silent' });
const CHUNK = 400;
/** Token-less 401s from this many distinct sources: more than the aggregation keeps one by one. */
const SOURCES = MAX_UNATTRIBUTED_SOURCES + 150;
const FLOOD = 2_000;
const STALE = 30;

/**
 * The flood: FLOOD token-less 401s (source i % SOURCES), with STALE stale-token requests of kube-system/multus mixed
 * in, each logged twice (RequestReceived + ResponseComplete, one auditID). Lines in time order.
 */
function floodEvents(): { time: number; line: string }[] {
  const out: { time: number; line: string }[] = [];
  for (let i = 0; i < FLOOD; i++) {
    const time = T0 + i * 100;
    const src = i % SOURCES;
    out.push({ time, line: auditEvent({ auditID: `u${i}`, time, kind: 'unauthorized', sourceIP: `10.1.${src >> 8}.${src & 255}`, userAgent: `scanner/${src}` }) });
    if (i % Math.floor(FLOOD / STALE) === 0) {
      const e = auditEvent({ auditID: `s${i}`, time, kind: 'stale', pod: 'kube-multus-ds-aaaaa', secondsAfterWarning: 7_000_000 });
      out.push({ time, line: JSON.stringify({ ...JSON.parse(e), stage: 'RequestReceived' }) }, { time, line: e });
    }
  }
  return out;
}
const EVENTS = floodEvents();
const LINES = EVENTS.map((e) => e.line);
const STALE_REQUESTS = Math.floor((FLOOD - 1) / Math.floor(FLOOD / STALE)) + 1;
const UNIQUE = FLOOD + STALE_REQUESTS;

function clusterConfig(audit: object): ClusterConfig {
  return parseConfig({ clusters: [{ name: 'prod', audit }] }, {}).clusters[0]!;
}

/** Wraps a source: after its `killAfter`-th progress commit has been stored, the poll dies (as a killed process). */
function dyingAfter(real: AuditSource, killAfter: number): AuditSource {
  return {
    id: real.id,
    async *poll(cursor, opts) {
      let n = 0;
      return yield* real.poll(cursor, {
        ...opts,
        checkpoint: async (c) => {
          await opts.checkpoint?.(c);
          if (++n === killAfter) throw new Error('killed between chunks');
        },
      });
    },
  };
}

/** Wraps a source and records, at each progress commit once stored, the store's cursor and seen count. */
function observed(real: AuditSource, store: () => Store, log: { cursor: string | undefined; seen: number }[]): AuditSource {
  return {
    id: real.id,
    async *poll(cursor, opts) {
      return yield* real.poll(cursor, {
        ...opts,
        checkpoint: async (c) => {
          await opts.checkpoint?.(c);
          log.push({ cursor: await store().polls.getCursor(real.id), seen: await store().polls.countSeen('prod') });
        },
      });
    },
  };
}

let dir: string;
let store: Store;
beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tw-bounded-'));
  store = await openStore(join(dir, 'tw.db'));
});
afterEach(async () => await store.close());

/** Requests per kind in the stored token records. */
async function requestsByKind(s: Store): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const r of await s.tokenRecords.list('prod')) out[r.kind] = (out[r.kind] ?? 0) + r.requests;
  return out;
}

/** An uninterrupted poll of the same data into a store of its own: the reference a resumed run must equal. */
async function uninterrupted(cluster: ClusterConfig, source: AuditSource): Promise<Store> {
  const ref = await openStore(join(dir, 'reference.db'));
  const out = await new ClusterPoller({ cluster, source, store: ref, logger: quiet, clock: () => NOW, chunkEvents: CHUNK }).pollOnce();
  expect(out.error).toBeUndefined();
  expect(out.newUses).toBe(UNIQUE);
  return ref;
}

describe('bounded polls, file source', () => {
  const setup = () => {
    const log = join(dir, 'audit.log');
    writeFileSync(log, `${LINES.join('\n')}\n`);
    return { log, cluster: clusterConfig({ file: { path: log } }) };
  };

  it('a window with more events than a chunk is committed chunk by chunk; the cursor moves with what was stored', async () => {
    const { log, cluster } = setup();
    const commits: { cursor: string | undefined; seen: number }[] = [];
    const out = await new ClusterPoller({ cluster, source: observed(new FileSource({ path: log }), () => store, commits), store, logger: quiet, clock: () => NOW, chunkEvents: CHUNK }).pollOnce();
    expect(out.error).toBeUndefined();
    expect(out.records).toBe(LINES.length);
    expect(out.newUses).toBe(UNIQUE);
    expect(out.duplicates).toBe(STALE_REQUESTS); // the RequestReceived stages, some of them in another chunk
    // One commit per CHUNK lines read, plus the last one with the rest and the window's end.
    expect(commits).toHaveLength(Math.floor(LINES.length / CHUNK));
    expect(out.commits).toBe(commits.length + 1);
    expect(out.maxHeld).toBe(CHUNK);
    commits.forEach((c, k) => {
      const lineEnd = LINES.slice(0, (k + 1) * CHUNK).reduce((n, l) => n + Buffer.byteLength(l) + 1, 0);
      expect(parseFileCursor(c.cursor!).pos).toBe(lineEnd);
      const ids = new Set(LINES.slice(0, (k + 1) * CHUNK).map((l) => (JSON.parse(l) as { auditID: string }).auditID));
      expect(c.seen).toBe(ids.size);
    });
    expect(parseFileCursor((await store.polls.getCursor(`file:${log}`))!).pos).toBe(statSync(log).size);
    expect(await requestsByKind(store)).toEqual({ unauthorized: FLOOD, 'stale-token': STALE_REQUESTS });
    // The aggregation stays bounded as before: the top sources one by one plus one overflow record.
    expect((await store.tokenRecords.list('prod')).filter((r) => r.kind === 'unauthorized')).toHaveLength(MAX_UNATTRIBUTED_SOURCES + 1);
  });

  it('a poll killed between chunks resumes after the last committed chunk: counts equal an uninterrupted run', async () => {
    const { log, cluster } = setup();
    const broken = await new ClusterPoller({ cluster, source: dyingAfter(new FileSource({ path: log }), 3), store, logger: quiet, clock: () => NOW, chunkEvents: CHUNK }).pollOnce();
    expect(broken.error).toBe('killed between chunks');
    expect(broken.commits).toBe(3);
    expect(parseFileCursor((await store.polls.getCursor(`file:${log}`))!).pos).toBe(LINES.slice(0, 3 * CHUNK).reduce((n, l) => n + Buffer.byteLength(l) + 1, 0));

    // restart: reopen the store, a new poller
    await store.close();
    store = await openStore(join(dir, 'tw.db'));
    const resumed = await new ClusterPoller({ cluster, source: new FileSource({ path: log }), store, logger: quiet, clock: () => NOW, chunkEvents: CHUNK }).pollOnce();
    expect(resumed.error).toBeUndefined();
    expect(resumed.records).toBe(LINES.length - 3 * CHUNK); // only what was not committed is read again
    expect(broken.newUses + resumed.newUses).toBe(UNIQUE);

    const ref = await uninterrupted(cluster, new FileSource({ path: log }));
    expect(await requestsByKind(store)).toEqual({ unauthorized: FLOOD, 'stale-token': STALE_REQUESTS });
    expect(await requestsByKind(store)).toEqual(await requestsByKind(ref));
    expect(await store.polls.countSeen('prod')).toBe(await ref.polls.countSeen('prod'));
    const findings = async (s: Store) => (await s.findings.list('prod')).map((f) => [f.finding.kind, f.finding.namespace, f.finding.serviceAccount, f.finding.requests]);
    expect(await findings(store)).toEqual(await findings(ref));
    await ref.close();
  });

  it('a source that hands out no checkpoints still holds at most one chunk; its cursor moves only at the end', async () => {
    const { log, cluster } = setup();
    const real = new FileSource({ path: log });
    const noCheckpoints: AuditSource = { id: real.id, poll: (cursor, opts) => real.poll(cursor, { ...opts, checkpoint: undefined }) };
    const out = await new ClusterPoller({ cluster, source: noCheckpoints, store, logger: quiet, clock: () => NOW, chunkEvents: CHUNK }).pollOnce();
    expect(out.error).toBeUndefined();
    expect(out.maxHeld).toBe(CHUNK);
    expect(out.commits).toBe(Math.ceil(LINES.length / CHUNK));
    expect(out.newUses).toBe(UNIQUE);
    expect(await requestsByKind(store)).toEqual({ unauthorized: FLOOD, 'stale-token': STALE_REQUESTS });
  });
});

describe('bounded polls, CloudWatch (loopback fake, real SDK)', () => {
  let cw: FakeCloudWatch;
  const GROUP = '/aws/eks/prod/cluster';
  beforeEach(async () => {
    cw = await startFakeCloudWatch({ now: () => NOW });
    cw.putEvents(GROUP, 'kube-apiserver-audit-0a1b', EVENTS.map((e) => ({ timestamp: e.time, message: e.line, ingestionTime: T0 })));
  });
  const sources: CloudWatchSource[] = [];
  afterEach(async () => {
    for (const s of sources.splice(0)) s.close();
    await cw.close();
  });
  const source = () => {
    const s = new CloudWatchSource({ region: 'us-east-1', logGroup: GROUP, streamPrefix: 'kube-apiserver-audit-', endpoint: cw.url, credentials: { accessKeyId: 'x', secretAccessKey: 'x' }, sdkRetryDelayMs: 1, retry: { baseDelayMs: 1, maxDelayMs: 5, budgetMs: 200 } });
    sources.push(s);
    return s;
  };
  const cluster = () => clusterConfig({ cloudwatch: { region: 'us-east-1', logGroup: GROUP } });

  it('pages hold at most one chunk; each page is committed with a cursor that resumes at the next page', async () => {
    const commits: { cursor: string | undefined; seen: number }[] = [];
    const out = await new ClusterPoller({ cluster: cluster(), source: observed(source(), () => store, commits), store, logger: quiet, clock: () => NOW, chunkEvents: CHUNK }).pollOnce();
    expect(out.error).toBeUndefined();
    expect(out.newUses).toBe(UNIQUE);
    const requests = cw.requestsOf('FilterLogEvents');
    expect(requests.every((r) => r.body['limit'] === CHUNK)).toBe(true);
    expect(requests).toHaveLength(Math.ceil(LINES.length / CHUNK));
    expect(out.maxHeld).toBe(CHUNK);
    expect(commits).toHaveLength(requests.length - 1); // between pages; the last page ends the window
    commits.forEach((c, k) => {
      const doc = parseCloudWatchCursorDoc(c.cursor);
      expect(doc.resume).toEqual({ start: NOW - cluster().lookback, end: NOW, nextToken: (requests[k + 1]!.body['nextToken'] as string) });
      expect(c.seen).toBe(new Set(LINES.slice(0, (k + 1) * CHUNK).map((l) => (JSON.parse(l) as { auditID: string }).auditID)).size);
    });
    expect(parseCloudWatchCursorDoc(await store.polls.getCursor(`cloudwatch:us-east-1:${GROUP}`))).toEqual({ until: NOW });
  });

  it('a poll killed between pages resumes at the next page of the same window: counts equal an uninterrupted run', async () => {
    const broken = await new ClusterPoller({ cluster: cluster(), source: dyingAfter(source(), 2), store, logger: quiet, clock: () => NOW, chunkEvents: CHUNK }).pollOnce();
    expect(broken.error).toBe('killed between chunks');
    const tokenAtKill = cw.requestsOf('FilterLogEvents')[1]!.response as { nextToken: string };
    await store.close();
    store = await openStore(join(dir, 'tw.db'));
    const before = cw.requestsOf('FilterLogEvents').length;
    // The restart comes later: the resumed poll reads the rest of the old window, not a new one.
    const resumed = await new ClusterPoller({ cluster: cluster(), source: source(), store, logger: quiet, clock: () => NOW + 60_000, chunkEvents: CHUNK }).pollOnce();
    expect(resumed.error).toBeUndefined();
    const first = cw.requestsOf('FilterLogEvents')[before]!.body;
    expect(first).toMatchObject({ startTime: NOW - cluster().lookback, endTime: NOW, nextToken: tokenAtKill.nextToken });
    expect(resumed.records).toBe(LINES.length - 2 * CHUNK);
    expect(resumed.duplicates).toBe(STALE_REQUESTS - broken.duplicates);
    expect(parseCloudWatchCursorDoc(await store.polls.getCursor(`cloudwatch:us-east-1:${GROUP}`))).toEqual({ until: NOW });

    const ref = await uninterrupted(cluster(), source());
    expect(await requestsByKind(store)).toEqual({ unauthorized: FLOOD, 'stale-token': STALE_REQUESTS });
    expect(await requestsByKind(store)).toEqual(await requestsByKind(ref));
    expect(await store.polls.countSeen('prod')).toBe(await ref.polls.countSeen('prod'));
    await ref.close();
  });

  it('a stored page token CloudWatch refuses makes the window start over; what was stored is not counted twice', async () => {
    const broken = await new ClusterPoller({ cluster: cluster(), source: dyingAfter(source(), 1), store, logger: quiet, clock: () => NOW, chunkEvents: CHUNK }).pollOnce();
    expect(broken.error).toBe('killed between chunks');
    const id = `cloudwatch:us-east-1:${GROUP}`;
    const doc = parseCloudWatchCursorDoc(await store.polls.getCursor(id));
    await store.polls.setCursor(id, JSON.stringify({ v: 1, until: doc.until, resume: { ...doc.resume, nextToken: 'expired-token' } }));
    const resumed = await new ClusterPoller({ cluster: cluster(), source: source(), store, logger: quiet, clock: () => NOW, chunkEvents: CHUNK }).pollOnce();
    expect(resumed.error).toBeUndefined();
    expect(resumed.records).toBe(LINES.length);
    expect(broken.newUses + resumed.newUses).toBe(UNIQUE);
    expect(await requestsByKind(store)).toEqual({ unauthorized: FLOOD, 'stale-token': STALE_REQUESTS });
  });
});
