import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StoreError } from '../../src/store/errors.js';
import { tokenRecordKey } from '../../src/store/token-records.js';
import type { Store } from '../../src/store/types.js';
import { PollRepository, SEEN_BATCH_ROWS } from '../../src/store/polls.js';
import type { SqlExecutor } from '../../src/store/sql.js';
import { storeBackends } from './backends.js';
import { approval, DAY, finding, HOUR, MIN, staleRecord, T0 } from './helpers.js';
import { ApprovalRepository } from '../../src/store/approvals.js';

/** `sql`, counting the statements run through it (and its transactions). */
function countingSql(inner: SqlExecutor): { sql: SqlExecutor; statements: () => number } {
  let n = 0;
  const count = <T>(p: Promise<T>): Promise<T> => {
    n++;
    return p;
  };
  const wrap = (ex: SqlExecutor): SqlExecutor => ({
    dialect: ex.dialect,
    all: (q, p) => count(ex.all(q, p)),
    get: (q, p) => count(ex.get(q, p)),
    run: (q, p) => count(ex.run(q, p)),
    runMany: (q, rows) => count(ex.runMany(q, rows)),
    transaction: (fn) => ex.transaction((tx) => fn(wrap(tx))),
    lock: (k) => ex.lock(k),
    close: () => ex.close(),
  });
  return { sql: wrap(inner), statements: () => n };
}

// Every test runs on each backend (SQLite; PostgreSQL where the run's server is up).
describe.each(storeBackends())('store methods (%s)', (_name, backend) => {
let store: Store;
beforeEach(async () => {
  store = await backend.open();
});
afterEach(backend.cleanup);
afterAll(backend.dispose);

describe('cursors', () => {
  it('returns undefined before the first save, then the latest cursor per source', async () => {
    expect(await store.polls.getCursor('cloudwatch:us-east-1:/aws/eks/prod/cluster')).toBeUndefined();
    await store.polls.setCursor('cloudwatch:us-east-1:/aws/eks/prod/cluster', '1730462400000');
    await store.polls.setCursor('file:/var/log/audit.log', '{"ino":42,"pos":1024}');
    await store.polls.setCursor('cloudwatch:us-east-1:/aws/eks/prod/cluster', '1730462700000');
    expect(await store.polls.getCursor('cloudwatch:us-east-1:/aws/eks/prod/cluster')).toBe('1730462700000');
    expect(await store.polls.getCursor('file:/var/log/audit.log')).toBe('{"ino":42,"pos":1024}');
  });
});

describe('approvals list', () => {
  it('reads every listed approval with its votes, in vote order, in two statements however many approvals there are', async () => {
    for (let i = 0; i < 30; i++) {
      const votes = i % 3 === 0 ? [] : [{ user: `U${i}A`, vote: 'approve' as const, at: T0 + i }, { user: `U${i}B`, vote: 'reject' as const, at: T0 + i + 1, reason: `no ${i}` }];
      await store.approvals.create(approval({ id: `a${String(i).padStart(2, '0')}`, createdAt: T0 + i * MIN, votes }));
    }
    const counted = countingSql(store.sql);
    const listed = await new ApprovalRepository(counted.sql).list();
    expect(counted.statements()).toBe(2);
    expect(listed).toHaveLength(30);
    for (const a of listed) expect(a).toEqual(await store.approvals.get(a.id));
    expect(listed[1]!.votes).toEqual([{ user: 'U1A', vote: 'approve', at: T0 + 1 }, { user: 'U1B', vote: 'reject', at: T0 + 2, reason: 'no 1' }]);
    expect(listed[0]!.votes).toEqual([]);
    // Filtered, the votes are those of the approvals listed; nothing listed is one statement.
    const recent = await store.approvals.list({ createdAtOrAfter: T0 + 28 * MIN });
    expect(recent.map((a) => [a.id, a.votes.map((v) => v.user)])).toEqual([['a28', ['U28A', 'U28B']], ['a29', ['U29A', 'U29B']]]);
    const none = countingSql(store.sql);
    expect(await new ApprovalRepository(none.sql).list({ createdAtOrAfter: T0 + DAY })).toEqual([]);
    expect(none.statements()).toBe(1);
  });
});

describe('seen auditIDs', () => {
  it('markSeen returns only the ids not seen before, in input order, once each', async () => {
    expect(await store.polls.markSeen('prod', ['a', 'b', 'c'], T0)).toEqual(['a', 'b', 'c']);
    expect(await store.polls.markSeen('prod', ['c', 'd', 'a', 'e', 'd'], T0 + MIN)).toEqual(['d', 'e']);
    expect(await store.polls.markSeen('prod', [], T0)).toEqual([]);
    expect(await store.polls.countSeen('prod')).toBe(5);
  });

  it('markSeen in batches: 10,000 ids (some seen, some repeated) give the fresh ones in input order', async () => {
    const ids = Array.from({ length: 10_000 }, (_, i) => `id-${i}`);
    expect(await store.polls.markSeen('prod', ids.filter((_, i) => i % 3 === 0), T0)).toHaveLength(3334);
    const input = [...ids, 'id-1', 'id-2', 'id-10000'];
    expect(await store.polls.markSeen('prod', input, T0 + MIN)).toEqual([...ids.filter((_, i) => i % 3 !== 0), 'id-10000']);
    expect(await store.polls.countSeen('prod')).toBe(10_001);
    // A few statements, not one per id: ceil(10,001 / SEEN_BATCH_ROWS) INSERTs.
    const counted = countingSql(store.sql);
    expect(await new PollRepository(counted.sql).markSeen('prod', [...input, 'id-10001'], T0 + 2 * MIN)).toEqual(['id-10001']);
    expect(counted.statements()).toBe(Math.ceil(10_002 / SEEN_BATCH_ROWS));
  });

  it('keeps clusters apart', async () => {
    await store.polls.markSeen('prod', ['a'], T0);
    expect(await store.polls.markSeen('staging', ['a'], T0)).toEqual(['a']);
    expect(await store.polls.countSeen('staging')).toBe(1);
  });

  it('pruneSeen forgets ids first seen before the cutoff, of that cluster only', async () => {
    await store.polls.markSeen('prod', ['old1', 'old2'], T0);
    await store.polls.markSeen('prod', ['new'], T0 + 20 * MIN);
    await store.polls.markSeen('prod', ['old1'], T0 + 30 * MIN); // re-seen: keeps its first seenAt
    await store.polls.markSeen('staging', ['old1'], T0);
    expect(await store.polls.pruneSeen('prod', T0 + 10 * MIN)).toBe(2);
    expect(await store.polls.countSeen('prod')).toBe(1);
    expect(await store.polls.countSeen('staging')).toBe(1);
    expect(await store.polls.markSeen('prod', ['old1', 'new'], T0 + 40 * MIN)).toEqual(['old1']);
  });
});

describe('token records', () => {
  it('upserts by key and lists them back exactly', async () => {
    const r = staleRecord();
    await store.tokenRecords.upsert([r]);
    expect(await store.tokenRecords.list('prod')).toEqual([r]);
    const merged = { ...r, requests: 9, lastSeen: T0, hourly: { ...r.hourly, [String(T0)]: 4 } };
    await store.tokenRecords.upsert([merged]);
    expect(await store.tokenRecords.list('prod')).toEqual([merged]);
    expect(await store.tokenRecords.list('staging')).toEqual([]);
  });

  it('keys stale tokens by pod and warnAfter minute, legacy by Secret, 401s by source', async () => {
    const a = staleRecord({ warnAfter: T0 - 20 * DAY });
    const sameMinute = staleRecord({ warnAfter: T0 - 20 * DAY + 30_000, requests: 1 });
    const nextToken = staleRecord({ warnAfter: T0 - 20 * DAY + 2 * MIN });
    const otherPod = staleRecord({ podUid: 'uid-2', pod: 'kube-multus-ds-abcde' });
    expect(tokenRecordKey(a)).toBe(tokenRecordKey(sameMinute));
    expect(tokenRecordKey(a)).not.toBe(tokenRecordKey(nextToken));
    await store.tokenRecords.upsert([a, sameMinute, nextToken, otherPod]);
    expect(await store.tokenRecords.list('prod')).toHaveLength(3);

    const legacy = (name: string) =>
      staleRecord({
        kind: 'legacy-token',
        warnAfter: undefined,
        rejectionAt: undefined,
        pod: undefined,
        podUid: undefined,
        legacySecret: { name, namespace: 'kube-system', kind: 'autogenerated' },
      });
    const unauthorized = (ip: string) =>
      staleRecord({ kind: 'unauthorized', subject: '(unattributed)', warnAfter: undefined, pod: undefined, podUid: undefined, sourceIPs: [ip] });
    await store.tokenRecords.upsert([legacy('multus-token-a'), legacy('multus-token-b'), unauthorized('10.0.0.1'), unauthorized('10.0.0.2')]);
    expect(await store.tokenRecords.list('prod')).toHaveLength(7);
    expect(tokenRecordKey(legacy('multus-token-a'))).toBe('kube-system\u001fmultus-token-a');
    expect(tokenRecordKey(staleRecord({ sourceIPs: ['b', 'a'], kind: 'unauthorized' }))).toBe(
      'a,b\u001fmultus/v0.0.0 (linux/amd64) kubernetes/$Format\u001fkube-multus-ds-zwh6w',
    );
  });

  it('replaceTokenRecords replaces the whole set of one cluster', async () => {
    await store.tokenRecords.upsert([staleRecord(), staleRecord({ podUid: 'uid-2' }), staleRecord({ cluster: 'staging' })]);
    // the aggregator merged the token into an earlier warnAfter: its key changed
    const rekeyed = staleRecord({ warnAfter: T0 - 20 * DAY - 5 * MIN, requests: 6 });
    expect(await store.tokenRecords.replace('prod', [rekeyed])).toEqual({ upserted: 1, deleted: 2 });
    expect(await store.tokenRecords.list('prod')).toEqual([rekeyed]);
    // Writes only what changed: the same set again writes nothing; one changed record writes one row.
    expect(await store.tokenRecords.replace('prod', await store.tokenRecords.list('prod'))).toEqual({ upserted: 0, deleted: 0 });
    expect(await store.tokenRecords.replace('prod', [{ ...rekeyed, requests: 7 }])).toEqual({ upserted: 1, deleted: 0 });
    expect(await store.tokenRecords.replace('prod', [rekeyed])).toEqual({ upserted: 1, deleted: 0 });
    // Compared with the records listed earlier instead of the rows: same answers.
    const listed = await store.tokenRecords.list('prod');
    expect(await store.tokenRecords.replace('prod', listed.map((r) => ({ ...r })), listed)).toEqual({ upserted: 0, deleted: 0 });
    expect(await store.tokenRecords.replace('prod', [{ ...rekeyed, requests: 8 }, staleRecord({ podUid: 'uid-3' })], await store.tokenRecords.list('prod'))).toEqual({ upserted: 2, deleted: 0 });
    expect(await store.tokenRecords.replace('prod', [], await store.tokenRecords.list('prod'))).toEqual({ upserted: 0, deleted: 2 });
    expect(await store.tokenRecords.list('prod')).toEqual([]);
    await store.tokenRecords.replace('prod', [rekeyed]);
    expect(await store.tokenRecords.list('staging')).toHaveLength(1);
    await expect(store.tokenRecords.replace('prod', [staleRecord({ cluster: 'staging' })])).rejects.toThrow(
      new StoreError('replaceTokenRecords(prod): a record belongs to cluster staging'),
    );
    expect(await store.tokenRecords.list('prod')).toEqual([rekeyed]);
  });

  it('pollCoverage counts failed and successful polls since a time, and the last success at or before it', async () => {
    const run = async (at: number, error?: string) => await store.polls.finishRun(await store.polls.startRun('prod', 'file', at), { endedAt: at + 1000, events: 0, tokenUses: 0, ...(error ? { error } : {}) });
    await run(T0 - 2 * HOUR);
    await run(T0 - HOUR, 'boom');
    await run(T0 + HOUR);
    await store.polls.startRun('prod', 'file', T0 + 2 * HOUR); // still running: not counted
    expect(await store.polls.coverage('prod', T0)).toEqual({ failed: 0, succeeded: 1, lastSuccessAtOrBefore: T0 - 2 * HOUR });
    expect(await store.polls.coverage('prod', T0 - 90 * MIN)).toEqual({ failed: 1, succeeded: 1, lastSuccessAtOrBefore: T0 - 2 * HOUR });
    expect(await store.polls.coverage('prod', T0 - 3 * HOUR)).toMatchObject({ lastSuccessAtOrBefore: null });
    expect(await store.polls.coverage('staging', T0)).toEqual({ failed: 0, succeeded: 0, lastSuccessAtOrBefore: null });
  });

  it('pruneTokenRecords deletes records last seen before the cutoff', async () => {
    await store.tokenRecords.upsert([staleRecord({ lastSeen: T0 - 100 * DAY }), staleRecord({ podUid: 'uid-2', lastSeen: T0 })]);
    expect(await store.tokenRecords.prune('prod', T0 - 90 * DAY)).toBe(1);
    expect((await store.tokenRecords.list('prod')).map((r) => r.podUid)).toEqual(['uid-2']);
  });
});

describe('findings', () => {
  it('saves new findings as open and reports the change', async () => {
    const f = finding();
    expect(await store.findings.save('prod', [f], T0)).toEqual([
      { id: 'f-multus', isNew: true, severity: 'warning', previousSeverity: null, status: 'open', previousStatus: null },
    ]);
    expect(await store.findings.get('f-multus')).toEqual({
      id: 'f-multus',
      cluster: 'prod',
      finding: f,
      severity: 'warning',
      status: 'open',
      snoozedUntil: null,
      resolvedAt: null,
      resolution: null,
      createdAt: T0,
      updatedAt: T0,
    });
    expect(await store.findings.get('nope')).toBeUndefined();
  });

  it('updates in place, reporting the previous severity (escalation)', async () => {
    await store.findings.save('prod', [finding()], T0);
    const critical = finding({ severity: 'critical', requests: 50 });
    expect(await store.findings.save('prod', [critical], T0 + HOUR)).toEqual([
      { id: 'f-multus', isNew: false, severity: 'critical', previousSeverity: 'warning', status: 'open', previousStatus: 'open' },
    ]);
    const stored = (await store.findings.get('f-multus'))!;
    expect(stored.finding.requests).toBe(50);
    expect([stored.createdAt, stored.updatedAt]).toEqual([T0, T0 + HOUR]);
    // Saved again unchanged (an idle poll): not written, updatedAt kept.
    expect((await store.findings.save('prod', [critical], T0 + 2 * HOUR))[0]).toMatchObject({ isNew: false, previousSeverity: 'critical' });
    expect((await store.findings.get('f-multus'))!.updatedAt).toBe(T0 + HOUR);
  });

  it('lists by severity, then rejection date (none last), then id; filters by cluster and status', async () => {
    await store.findings.save(
      'prod',
      [
        finding({ id: 'i', severity: 'info', rejectionAt: null }),
        finding({ id: 'w-late', severity: 'warning', rejectionAt: new Date(T0 + 25 * DAY).toISOString() }),
        finding({ id: 'c', severity: 'critical', kind: 'unauthorized', rejectionAt: null }),
        finding({ id: 'w-none', severity: 'warning', rejectionAt: null }),
        finding({ id: 'w-soon', severity: 'warning', rejectionAt: new Date(T0 + 10 * DAY).toISOString() }),
      ],
      T0,
    );
    await store.findings.save('staging', [finding({ id: 's', cluster: 'staging', severity: 'critical' })], T0);
    expect((await store.findings.list('prod')).map((f) => f.id)).toEqual(['c', 'w-soon', 'w-late', 'w-none', 'i']);
    expect((await store.findings.list()).map((f) => f.id)).toEqual(['s', 'c', 'w-soon', 'w-late', 'w-none', 'i']);
    await store.findings.setStatus('w-soon', { status: 'resolved' }, T0);
    expect((await store.findings.list('prod', { status: ['open'] })).map((f) => f.id)).toEqual(['c', 'w-late', 'w-none', 'i']);
    expect((await store.findings.list(undefined, { status: ['resolved', 'snoozed'] })).map((f) => f.id)).toEqual(['w-soon']);
    expect(await store.findings.list('prod', { status: [] })).toEqual([]);
  });

  it('setFindingStatus resolves, snoozes and reopens', async () => {
    await store.findings.save('prod', [finding()], T0);
    expect(await store.findings.setStatus('f-multus', { status: 'snoozed', until: T0 + DAY }, T0 + MIN)).toBe(true);
    expect(await store.findings.get('f-multus')).toMatchObject({ status: 'snoozed', snoozedUntil: T0 + DAY, resolvedAt: null, updatedAt: T0 + MIN });
    expect(await store.findings.setStatus('f-multus', { status: 'resolved' }, T0 + 2 * MIN)).toBe(true);
    expect(await store.findings.get('f-multus')).toMatchObject({ status: 'resolved', snoozedUntil: null, resolvedAt: T0 + 2 * MIN });
    expect(await store.findings.setStatus('f-multus', { status: 'open' }, T0 + 3 * MIN)).toBe(true);
    expect(await store.findings.get('f-multus')).toMatchObject({ status: 'open', snoozedUntil: null, resolvedAt: null });
    expect(await store.findings.setStatus('nope', { status: 'open' }, T0)).toBe(false);
  });

  it('reopens a resolved finding when stale use comes back after resolution (recurrence)', async () => {
    await store.findings.save('prod', [finding()], T0);
    await store.findings.setStatus('f-multus', { status: 'resolved' }, T0 + 3 * HOUR);
    // a late event from before the resolution does not reopen it
    expect((await store.findings.save('prod', [finding({ lastSeen: new Date(T0 + 2 * HOUR).toISOString() })], T0 + 4 * HOUR))[0]).toMatchObject({
      status: 'resolved',
      previousStatus: 'resolved',
    });
    const back = finding({ lastSeen: new Date(T0 + 5 * HOUR).toISOString() });
    expect(await store.findings.save('prod', [back], T0 + 5 * HOUR)).toEqual([
      { id: 'f-multus', isNew: false, severity: 'warning', previousSeverity: 'warning', status: 'open', previousStatus: 'resolved' },
    ]);
    expect(await store.findings.get('f-multus')).toMatchObject({ status: 'open', resolvedAt: null });
  });

  it('a use delivered late, dated inside a quiet-resolved period, reopens the finding (and says so); old or known uses do not', async () => {
    // Last use T0 − 1 h; resolved as quiet 24 h later.
    await store.findings.save('prod', [finding()], T0);
    const resolvedAt = T0 - HOUR + DAY;
    await store.findings.setStatus('f-multus', { status: 'resolved', reason: 'quiet' }, resolvedAt);
    // The same findings again (no new use), or a re-dated copy with the same count: nothing changes.
    expect((await store.findings.save('prod', [finding()], resolvedAt + MIN))[0]).toMatchObject({ status: 'resolved' });
    expect((await store.findings.save('prod', [finding({ lastSeen: new Date(T0).toISOString() })], resolvedAt + MIN))[0]).toMatchObject({ status: 'resolved' });
    // A new use dated before the last use the resolution knew: not inside the quiet period, still resolved.
    expect((await store.findings.save('prod', [finding({ requests: 6, lastSeen: new Date(T0 - 2 * HOUR).toISOString() })], resolvedAt + MIN))[0]).toMatchObject({ status: 'resolved' });
    // A use 1 min before the resolution, delivered 2 min after it (requests 6 → 7): reopened, with the resolution time.
    const late = finding({ requests: 7, lastSeen: new Date(resolvedAt - MIN).toISOString() });
    expect(await store.findings.save('prod', [late], resolvedAt + 2 * MIN)).toEqual([
      { id: 'f-multus', isNew: false, severity: 'warning', previousSeverity: 'warning', status: 'open', previousStatus: 'resolved', lateUse: { resolvedAt } },
    ]);
    expect(await store.findings.get('f-multus')).toMatchObject({ status: 'open', resolvedAt: null, resolution: null, finding: { requests: 7 } });
  });

  it('a late use does not reopen a finding resolved as verified (old pods’ uses before the fix are expected)', async () => {
    await store.findings.save('prod', [finding()], T0);
    await store.findings.setStatus('f-multus', { status: 'resolved', reason: 'verified' }, T0 + 3 * HOUR);
    expect((await store.findings.save('prod', [finding({ requests: 6, lastSeen: new Date(T0 + 2 * HOUR).toISOString() })], T0 + 4 * HOUR))[0]).toMatchObject({ status: 'resolved' });
  });

  it('keeps a snooze until it ends, then reopens', async () => {
    await store.findings.save('prod', [finding()], T0);
    await store.findings.setStatus('f-multus', { status: 'snoozed', until: T0 + DAY }, T0);
    expect((await store.findings.save('prod', [finding()], T0 + DAY - 1))[0]!.status).toBe('snoozed');
    expect((await store.findings.save('prod', [finding()], T0 + DAY))[0]).toMatchObject({ status: 'open', previousStatus: 'snoozed' });
    expect((await store.findings.get('f-multus'))!.snoozedUntil).toBeNull();
  });

  it('refuses findings of another cluster, saving none of the batch', async () => {
    await expect(store.findings.save('prod', [finding({ id: 'x' }), finding({ id: 'y', cluster: 'staging' })], T0)).rejects.toThrow(
      new StoreError('saveFindings(prod): finding y belongs to cluster staging'),
    );
    expect(await store.findings.list()).toEqual([]);
    await store.findings.save('prod', [finding({ id: 'z' })], T0);
    await expect(store.findings.save('staging', [finding({ id: 'z', cluster: 'staging' })], T0)).rejects.toThrow(
      new StoreError('saveFindings(staging): finding id z is stored for cluster prod'),
    );
  });
});

describe('poll runs', () => {
  it('records polls and reports the latest per cluster with its last success', async () => {
    const p1 = await store.polls.startRun('prod', 'cw:prod', T0);
    await store.polls.finishRun(p1, { endedAt: T0 + 2000, events: 120, tokenUses: 3, stats: { requests: 2, bytes: 5000 } });
    const p2 = await store.polls.startRun('prod', 'cw:prod', T0 + 5 * MIN);
    await store.polls.finishRun(p2, { endedAt: T0 + 5 * MIN + 900, events: 0, tokenUses: 0, error: 'ThrottlingException: Rate exceeded' });
    const s1 = await store.polls.startRun('staging', 'file:/a.log', T0 + MIN);
    expect(p2).toBeGreaterThan(p1);
    expect(await store.polls.lastRuns()).toEqual([
      {
        id: p2,
        cluster: 'prod',
        source: 'cw:prod',
        startedAt: T0 + 5 * MIN,
        endedAt: T0 + 5 * MIN + 900,
        events: 0,
        tokenUses: 0,
        error: 'ThrottlingException: Rate exceeded',
        stats: {},
        lastSuccessAt: T0 + 2000,
      },
      {
        id: s1,
        cluster: 'staging',
        source: 'file:/a.log',
        startedAt: T0 + MIN,
        endedAt: null,
        events: 0,
        tokenUses: 0,
        error: null,
        stats: {},
        lastSuccessAt: null,
      },
    ]);
    // Of one cluster: the same row, alone; none for a cluster without runs.
    const all = await store.polls.lastRuns();
    expect(await store.polls.lastRuns('prod')).toEqual([all[0]]);
    expect(await store.polls.lastRuns('staging')).toEqual([all[1]]);
    expect(await store.polls.lastRuns('prod-eu')).toEqual([]);
  });

  it('lastRuns finds every cluster of many, each with its own latest run and last success', async () => {
    // Names that sort apart from their insertion order, some prefixes of others; runs interleaved across clusters.
    const names = Array.from({ length: 40 }, (_, i) => (i % 3 === 0 ? `prod-${i}` : i % 3 === 1 ? `a${39 - i}` : `prod-${i}-eu`));
    const expected = new Map<string, { id: number; startedAt: number; lastSuccessAt: number | null }>();
    for (let round = 0; round < 3; round++) {
      for (const [k, name] of names.entries()) {
        const startedAt = T0 + round * MIN + k;
        const id = await store.polls.startRun(name, 's', startedAt);
        const failed = round === 2 && k % 2 === 0;
        await store.polls.finishRun(id, { endedAt: startedAt + 500, events: 0, tokenUses: 0, ...(failed ? { error: 'x' } : {}) });
        const prev = expected.get(name);
        expected.set(name, { id, startedAt, lastSuccessAt: failed ? (prev?.lastSuccessAt ?? null) : startedAt + 500 });
      }
    }
    const all = await store.polls.lastRuns();
    expect(all.map((r) => r.cluster)).toEqual([...names].sort());
    for (const r of all) expect({ id: r.id, startedAt: r.startedAt, lastSuccessAt: r.lastSuccessAt }, r.cluster).toEqual(expected.get(r.cluster));
    expect(await store.polls.lastRuns(names[7])).toEqual(all.filter((r) => r.cluster === names[7]));
  });

  it('finishPollRun of an unknown id throws', async () => {
    await expect(store.polls.finishRun(99, { endedAt: T0, events: 0, tokenUses: 0 })).rejects.toThrow(new StoreError('finishPollRun: no poll run with id 99'));
  });

  it('pollTicks reports the finished runs by the tick they ran for and the missed ticks with their reason; a tick recorded missed once stays so', async () => {
    const T = 15_000 * Math.floor(T0 / 15_000);
    const ran = async (tick: number | undefined, at: number, finish = true) => {
      const id = await store.polls.startRun('prod', 'file', at, tick);
      if (finish) await store.polls.finishRun(id, { endedAt: at + 500, events: 0, tokenUses: 0 });
    };
    await ran(T, T + 10);
    await ran(undefined, T + 20); // the start-up poll or /tokens scan: no tick
    await ran(T + 30_000, T + 30_010, false); // still running (or its replica died): not counted
    await ran(T + 45_000, T + 45_010);
    await store.polls.startRun('staging', 'file', T + 15_010, T + 15_000);
    expect(await store.polls.recordMissed({ cluster: 'prod', scheduledAt: T + 15_000, reason: 'overlap', replica: 'tw-a-1a2b3c', recordedAt: T + 15_001 })).toBe(true);
    expect(await store.polls.recordMissed({ cluster: 'prod', scheduledAt: T + 15_000, reason: 'unowned', replica: 'tw-b-4d5e6f', recordedAt: T + 16_000 })).toBe(false);
    expect(await store.polls.recordMissed({ cluster: 'prod', scheduledAt: T + 60_000, reason: 'unowned', recordedAt: T + 75_000 })).toBe(true);
    expect(await store.polls.ticks('prod', T)).toEqual({ polled: [T, T + 45_000], missed: [{ scheduledAt: T + 15_000, reason: 'overlap' }, { scheduledAt: T + 60_000, reason: 'unowned' }] });
    expect(await store.polls.ticks('prod', T + 16_000)).toEqual({ polled: [T + 45_000], missed: [{ scheduledAt: T + 60_000, reason: 'unowned' }] });
    expect(await store.polls.ticks('other', T)).toEqual({ polled: [], missed: [] });
    // Retention drops missed ticks with the poll runs.
    await store.polls.pruneRuns(T + 50_000);
    expect((await store.polls.ticks('prod', 0)).missed).toEqual([{ scheduledAt: T + 60_000, reason: 'unowned' }]);
  });

  it('prunePollRuns keeps the latest run of each cluster', async () => {
    for (let i = 0; i < 5; i++) await store.polls.startRun('prod', 's', T0 + i * MIN);
    await store.polls.startRun('staging', 's', T0);
    expect(await store.polls.pruneRuns(T0 + 10 * MIN)).toBe(4);
    expect((await store.polls.lastRuns()).map((r) => [r.cluster, r.startedAt])).toEqual([
      ['prod', T0 + 4 * MIN],
      ['staging', T0],
    ]);
  });
});

describe('Slack message refs', () => {
  it('saves, replaces and reads a finding message ref', async () => {
    await store.findings.save('prod', [finding()], T0);
    expect(await store.slackRefs.getMessageRef('f-multus')).toBeUndefined();
    await store.slackRefs.saveMessageRef('f-multus', { channel: 'C0OPS', ts: '1730462400.000100', severity: 'warning', hash: 'h1' });
    await store.slackRefs.saveMessageRef('f-multus', { channel: 'C0OPS', ts: '1730462400.000100', severity: 'critical', hash: 'h2' });
    expect(await store.slackRefs.getMessageRef('f-multus')).toEqual({ channel: 'C0OPS', ts: '1730462400.000100', severity: 'critical', hash: 'h2' });
  });

  it("reads a cluster's alert refs in one map, each as getAlertRef reads it, and no other cluster's", async () => {
    await store.slackRefs.saveAlertRef('g-prod-1', 'prod', { channel: 'C0OPS', ts: '1.1', severity: 'warning', hash: 'v:a', signals: ['stale-token'] });
    await store.slackRefs.saveAlertRef('g-prod-2', 'prod', { channel: 'C0SEC', ts: '1.2', severity: 'critical', hash: 'v:b', signals: ['unauthorized', 'stale-token'] });
    await store.slackRefs.saveAlertRef('g-staging', 'staging', { channel: 'C0OPS', ts: '2.1', severity: 'info', hash: 'v:c', signals: [] });
    const refs = await store.slackRefs.alertRefsOf('prod');
    expect([...refs.keys()].sort()).toEqual(['g-prod-1', 'g-prod-2']);
    for (const [gid, ref] of refs) expect(ref, gid).toEqual(await store.slackRefs.getAlertRef(gid));
    expect(refs.get('g-prod-2')).toEqual({ channel: 'C0SEC', ts: '1.2', severity: 'critical', hash: 'v:b', signals: ['unauthorized', 'stale-token'] });
    expect((await store.slackRefs.alertRefsOf('eu')).size).toBe(0);
  });
});

describe('action log', () => {
  it('appends rows and lists them newest first, per cluster, with a limit', async () => {
    const base = { cluster: 'prod', actor: 'U0REQ', target: 'DaemonSet kube-system/kube-multus-ds' };
    const id1 = await store.actions.log({ ...base, at: T0, action: 'restart.requested', result: 'requested', approvalId: 'a1', findingId: 'f-multus' });
    const id2 = await store.actions.log({ ...base, at: T0 + MIN, actor: 'U0APP', action: 'restart.approved', result: 'approved', approvalId: 'a1' });
    const id3 = await store.actions.log({ ...base, at: T0 + 2 * MIN, actor: null, action: 'restart.succeeded', result: 'succeeded', approvalId: 'a1', detail: '3/3 pods updated' });
    await store.actions.log({ ...base, cluster: 'staging', at: T0, action: 'snooze', result: 'ok' });
    expect(await store.actions.list('prod', 2)).toEqual([
      { id: id3, at: T0 + 2 * MIN, cluster: 'prod', findingId: null, approvalId: 'a1', actor: null, action: 'restart.succeeded', target: base.target, result: 'succeeded', detail: '3/3 pods updated' },
      { id: id2, at: T0 + MIN, cluster: 'prod', findingId: null, approvalId: 'a1', actor: 'U0APP', action: 'restart.approved', target: base.target, result: 'approved', detail: null },
    ]);
    expect((await store.actions.list('prod')).map((a) => a.id)).toEqual([id3, id2, id1]);
    expect((await store.actions.ofApproval('a1')).map((a) => a.action)).toEqual(['restart.requested', 'restart.approved', 'restart.succeeded']);
    expect(await store.actions.list('staging')).toHaveLength(1);
  });
});
});
