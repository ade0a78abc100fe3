import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeKube, type FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import { statusObject, type RecordedRequest } from '../../src/sandbox/fakes/kubernetes/types.js';
import { LEADER_API_CALLS } from '../manifests/rbac-calls.js';
import { LeaderElector, decide, electionFromEnv, toLeaseRecord, type ElectorLogger, type LeaderElectorOptions } from '../../src/runtime/leader.js';
import { Scheduler } from '../../src/runtime/scheduler.js';
import { childScript } from '../support/build.js';

// Short timings so failover happens in about a second (production defaults: 15 s / 10 s / 2 s).
const LEASE_MS = 1000;
const RENEW_MS = 600;
const RETRY_MS = 100;
const NS = 'tokenwatch';
/** metav1.MicroTime wire format: RFC3339Micro, exactly 6 fractional digits (apimachinery micro_time.go). */
const MICRO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$/;

let fake: FakeKube;
const electors: LeaderElector[] = [];
const children: ChildProcess[] = [];

/**
 * Makes the fake decode Lease times as kube-apiserver does: a renewTime/acquireTime that is not RFC3339Micro is a
 * 400 BadRequest (Go time.Parse with layout `2006-01-02T15:04:05.000000Z07:00` needs all six digits).
 */
function strictMicroTime(req: RecordedRequest) {
  if (req.resource !== 'leases' || (req.method !== 'POST' && req.method !== 'PUT')) return undefined;
  const spec = ((req.body as { spec?: Record<string, unknown> } | undefined)?.spec ?? {}) as Record<string, unknown>;
  for (const field of ['renewTime', 'acquireTime']) {
    const v = spec[field];
    if (v !== undefined && v !== null && !(typeof v === 'string' && MICRO_TIME.test(v))) {
      const msg = `Lease in version "v1" cannot be handled as a Lease: parsing time ${JSON.stringify(v)} as "2006-01-02T15:04:05.000000Z07:00": cannot parse as ".000000"`;
      return { code: 400, body: statusObject(400, msg, 'BadRequest') };
    }
  }
  return undefined;
}

function elector(identity: string, extra: Partial<LeaderElectorOptions> = {}): LeaderElector {
  const e = new LeaderElector({
    kubeConfig: fake.kubeConfig({ token: identity }),
    namespace: NS,
    identity,
    leaseDurationMs: LEASE_MS,
    renewDeadlineMs: RENEW_MS,
    retryPeriodMs: RETRY_MS,
    ...extra,
  });
  electors.push(e);
  return e;
}

async function waitFor(what: string, cond: () => boolean, timeoutMs = 5000): Promise<number> {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(5);
  }
  return Date.now();
}

/** Samples isLeader() of all electors every few ms; `max` is the most that were leader at the same moment. */
function watchLeaders(list: LeaderElector[]) {
  const state = { max: 0, samples: 0 };
  const iv = setInterval(() => {
    state.samples += 1;
    state.max = Math.max(state.max, list.filter((e) => e.isLeader()).length);
  }, 3);
  return { state, stop: () => clearInterval(iv) };
}

function holder(): string | undefined {
  const lease = fake.store.get('Lease', NS, 'tokenwatch') as { spec?: { holderIdentity?: string } } | undefined;
  return lease?.spec?.holderIdentity;
}

/** GETs of the Lease made with `identity`'s token. */
function leaseReadsBy(identity: string): number {
  return fake.requestsMatching((r) => r.resource === 'leases' && r.method === 'GET' && r.headers.authorization === `Bearer ${identity}`).length;
}

function leaseWrites(): RecordedRequest[] {
  return fake.requestsMatching((r) => r.resource === 'leases' && (r.method === 'POST' || r.method === 'PUT'));
}

beforeEach(async () => {
  fake = await startFakeKube();
  fake.addReactor(strictMicroTime);
});
afterEach(async () => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  await Promise.all(electors.splice(0).map((e) => e.stop({ release: false })));
  await fake.close();
});

describe('decide (client-go tryAcquireOrRenew)', () => {
  const base = { leaseDurationSeconds: 15, leaseTransitions: 3 };
  it('renews its own lease, acquires a released or expired one, waits for a valid one', () => {
    expect(decide({ ...base, holderIdentity: 'a' }, 0, 'a', 1_000_000)).toEqual({ action: 'renew', transitions: 3 });
    expect(decide({ ...base, holderIdentity: '' }, 1000, 'a', 1000)).toEqual({ action: 'acquire', transitions: 4 });
    expect(decide({ ...base, holderIdentity: 'b' }, 1000, 'a', 15_999)).toEqual({ action: 'wait', holder: 'b', expiresAt: 16_000 });
    expect(decide({ ...base, holderIdentity: 'b' }, 1000, 'a', 16_000)).toEqual({ action: 'acquire', transitions: 4 });
  });

  it('reads MicroTime strings with 6 fractional digits', () => {
    const rec = toLeaseRecord({
      metadata: { resourceVersion: '7' },
      spec: { holderIdentity: 'a', leaseDurationSeconds: 15, renewTime: '2026-11-20T12:00:00.123000Z' as unknown as Date, leaseTransitions: 2 },
    });
    expect(rec).toEqual({ holderIdentity: 'a', leaseDurationSeconds: 15, renewTime: Date.UTC(2026, 10, 20, 12, 0, 0, 123), leaseTransitions: 2, resourceVersion: '7' });
  });
});

describe('options', () => {
  it('rejects durations that would let two leaders overlap', () => {
    expect(() => elector('a', { renewDeadlineMs: 1000 })).toThrow(
      new RangeError('leader election: need leaseDuration > renewDeadline > retryPeriod > 0 (got 1000 ms, 1000 ms, 100 ms)'),
    );
    expect(() => elector('a', { leaseDurationMs: 900, renewDeadlineMs: 500 })).toThrow(
      new RangeError('leader election: leaseDuration must be at least 1000 ms (the Lease stores whole seconds)'),
    );
  });

  it('electionFromEnv reads the Downward API variables', () => {
    expect(electionFromEnv({ POD_NAME: 'tokenwatch-7d9-abcde', POD_NAMESPACE: 'tokenwatch' })).toEqual({
      identity: 'tokenwatch-7d9-abcde',
      namespace: 'tokenwatch',
      leaseName: 'tokenwatch',
    });
    expect(electionFromEnv({ POD_NAME: 'p', POD_NAMESPACE: 'ns', TOKENWATCH_LEASE_NAME: 'tw-prod' })).toEqual({ identity: 'p', namespace: 'ns', leaseName: 'tw-prod' });
    expect(electionFromEnv({ POD_NAME: 'p' })).toBeUndefined();
  });
});

describe('two replicas against the fake API server', () => {
  it('elect exactly one leader, the Lease names it, times are MicroTime, and the calls are LEADER_API_CALLS', async () => {
    const a = elector('replica-a');
    const b = elector('replica-b');
    const seen = watchLeaders([a, b]);
    a.start();
    b.start();
    await waitFor('a leader', () => a.isLeader() || b.isLeader());
    await sleep(LEASE_MS * 1.5); // several renewals and follower attempts
    seen.stop();
    expect(seen.state.max).toBe(1);
    const leader = a.isLeader() ? a : b;
    const follower = leader === a ? b : a;
    expect(follower.isLeader()).toBe(false);
    expect(holder()).toBe(leader.identity);
    expect(follower.status()).toEqual({ identity: follower.identity, leader: false, holder: leader.identity });
    expect(leader.status()).toEqual({ identity: leader.identity, leader: true, holder: leader.identity });
    const lease = fake.store.get('Lease', NS, 'tokenwatch') as { spec: Record<string, unknown> };
    expect(lease.spec['leaseDurationSeconds']).toBe(1);
    expect(lease.spec['leaseTransitions']).toBe(0);

    await leader.stop(); // releases: one more read and write
    const writes = leaseWrites();
    expect(writes.length).toBeGreaterThan(5);
    for (const w of writes) {
      const spec = (w.body as { spec: Record<string, unknown> }).spec;
      expect(spec['renewTime'], `${w.method} ${w.path}`).toMatch(MICRO_TIME);
      expect(spec['acquireTime'], `${w.method} ${w.path}`).toMatch(MICRO_TIME);
    }
    const made = new Set(fake.requests.filter((r) => r.resource === 'leases').map((r) => `${r.verb} ${r.resource} ${r.group}`));
    expect([...made].sort()).toEqual(LEADER_API_CALLS.map((c) => `${c.verb} ${c.resource} ${c.apiGroup}`).sort());
    expect(new Set(fake.requests.map((r) => r.namespace))).toEqual(new Set([NS]));
  });

  it('graceful stop: the lease is kept while in-flight work drains, then released; the follower takes over at once and only one scheduler ever runs', async () => {
    const runs: { who: string; start: number; end?: number }[] = [];
    let finishInFlight: () => void = () => undefined;
    const inFlight = new Promise<void>((r) => (finishInFlight = r));
    const schedulers = new Map<string, Scheduler>();
    const replica = (id: string) => {
      const el = elector(id, { beforeRelease: () => schedulers.get(id)!.stop(30_000) });
      const s = new Scheduler({ jitterMs: 0, runAtStart: false, shouldRun: () => el.isLeader() });
      s.start([
        {
          name: 'poll',
          schedule: '0 0 1 1 *',
          run: async () => {
            const run: { who: string; start: number; end?: number } = { who: id, start: Date.now() };
            runs.push(run);
            if (id === 'replica-a') await inFlight; // A's first poll is still running when SIGTERM comes
            else await sleep(10);
            run.end = Date.now();
          },
        },
      ]);
      schedulers.set(id, s);
      return el;
    };
    const a = replica('replica-a');
    a.start();
    await waitFor('A leader', () => a.isLeader());
    const b = replica('replica-b');
    b.start();
    const seen = watchLeaders([a, b]);
    const tick = setInterval(() => {
      for (const s of schedulers.values()) s.runNow('poll');
    }, 20);
    try {
      await waitFor('A polling', () => runs.length === 1);
      const stopped = a.stop();
      expect(a.isLeader()).toBe(false); // no new work from the moment stop() is called
      await sleep(LEASE_MS * 1.5); // longer than the lease: only renewals during the drain keep B out
      expect(b.isLeader()).toBe(false);
      expect(holder()).toBe('replica-a');
      expect(runs.map((r) => r.who)).toEqual(['replica-a']);

      const released = Date.now();
      finishInFlight();
      await stopped;
      const takeover = await waitFor('B leader', () => b.isLeader());
      expect(takeover - released).toBeLessThan(LEASE_MS); // about one follower retry, well within a lease duration
      await waitFor('B polling', () => runs.some((r) => r.who === 'replica-b' && r.end !== undefined));
    } finally {
      clearInterval(tick);
      seen.stop();
    }
    expect(seen.state.max).toBe(1);
    const firstB = runs.findIndex((r) => r.who === 'replica-b');
    expect(runs.slice(0, firstB).map((r) => r.who)).toEqual(['replica-a']);
    expect(runs.slice(firstB).every((r) => r.who === 'replica-b')).toBe(true);
    expect(runs[0]!.end).toBeLessThanOrEqual(runs[firstB]!.start); // no double execution
    const lease = fake.store.get('Lease', NS, 'tokenwatch') as { spec: Record<string, unknown> };
    expect(lease.spec['holderIdentity']).toBe('replica-b');
    expect(lease.spec['leaseTransitions']).toBe(1);
    const release = leaseWrites().find((w) => (w.body as { spec: { holderIdentity?: string } }).spec.holderIdentity === '');
    expect((release!.body as { spec: Record<string, unknown> }).spec['leaseDurationSeconds']).toBe(1);
  });

  it('crash: a leader process killed with SIGKILL (no release) is replaced once its lease expires', async () => {
    const child = spawn(process.execPath, [childScript('child-elector'), fake.url, 'replica-a', String(LEASE_MS), String(RENEW_MS), String(RETRY_MS)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.push(child);
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    await waitFor('child leader', () => out.includes('leader replica-a'), 45_000); // a start is slow on a busy machine
    const b = elector('replica-b');
    b.start();
    await sleep(LEASE_MS * 1.5);
    expect(b.isLeader()).toBe(false);
    expect(b.status().holder).toBe('replica-a');

    child.kill('SIGKILL');
    const killed = Date.now();
    const readsBefore = leaseReadsBy('replica-b');
    const takeover = await waitFor('B leader', () => b.isLeader());
    // B waits for the lease to expire as it observed it (≥ lease − one renew period): a busy machine can only make
    // that later, so the lower bound is safe to assert on wall-clock time.
    expect(takeover - killed).toBeGreaterThanOrEqual(LEASE_MS - 2 * RETRY_MS);
    // ... then takes it at its first look after expiry: one write (no failed attempt), and no more reads than one
    // per retry period over the lease (timers that fire late on a busy machine make fewer reads, never more).
    expect(leaseWrites().filter((w) => w.headers.authorization === 'Bearer replica-b')).toHaveLength(1);
    expect(leaseReadsBy('replica-b') - readsBefore).toBeLessThanOrEqual(Math.ceil(LEASE_MS / RETRY_MS) + 2);
    expect(holder()).toBe('replica-b');
    expect(leaseWrites().filter((w) => w.headers.authorization === 'Bearer replica-a').length).toBeGreaterThan(3);
  }, 60_000);

  it('a leader cut off from the API server steps down at its renew deadline, before the follower takes over', async () => {
    const a = elector('replica-a');
    a.start();
    await waitFor('A leader', () => a.isLeader());
    const b = elector('replica-b');
    b.start();
    const stoppedReasons: string[] = [];
    a.on('stopped', (why) => stoppedReasons.push(why));
    const seen = watchLeaders([a, b]);
    await sleep(300);
    fake.addReactor((req) => (req.headers.authorization === 'Bearer replica-a' ? { code: 503, body: statusObject(503, 'partitioned') } : undefined));
    const cut = Date.now();
    const aOut = await waitFor('A steps down', () => !a.isLeader());
    const bIn = await waitFor('B leader', () => b.isLeader());
    seen.stop();
    expect(seen.state.max).toBe(1);
    // isLeader() turns false at the renew deadline, before the follower can take the lease (the renew deadline is
    // shorter than the lease): never two leaders. Order, not wall-clock bounds, so a busy machine cannot fail it.
    expect(aOut).toBeLessThanOrEqual(bIn);
    expect(bIn - cut).toBeGreaterThanOrEqual(LEASE_MS - 2 * RETRY_MS); // B waited for the lease to expire
    await waitFor('stopped event', () => stoppedReasons.length > 0);
    expect(stoppedReasons).toEqual([`could not renew for ${RENEW_MS} ms`]);
    expect(a.status().lastError).toBe('leader election on lease tokenwatch/tokenwatch: HTTP 503: partitioned');
  });

  it('a forbidden verb gives one clear log line naming the RBAC rule, and no leadership', async () => {
    await fake.close();
    fake = await startFakeKube({ rbac: [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get'] }] });
    const lines: string[] = [];
    const logger: ElectorLogger = { info: () => undefined, warn: (_o, msg) => lines.push(msg) };
    const a = elector('replica-a', { logger });
    a.start();
    await waitFor('three attempts', () => fake.requestsMatching({ verb: 'create' }).length >= 3);
    const expected =
      'leader election on lease tokenwatch/tokenwatch: forbidden: leases.coordination.k8s.io is forbidden: User "system:serviceaccount:tokenwatch:tokenwatch" cannot create resource "leases" in API group "coordination.k8s.io" in the namespace "tokenwatch" (RBAC rule needed in namespace tokenwatch: apiGroups ["coordination.k8s.io"], resources ["leases"], verbs ["get","create","update"])';
    expect(lines).toEqual([expected]);
    expect(a.status()).toEqual({ identity: 'replica-a', leader: false, holder: '', lastError: expected });
  });

  it('stop() of a follower does not touch the lease; stop({release:false}) leaves it to expire', async () => {
    const a = elector('replica-a');
    a.start();
    await waitFor('A leader', () => a.isLeader());
    const b = elector('replica-b');
    b.start();
    await sleep(3 * RETRY_MS);
    const before = leaseWrites().filter((w) => w.headers.authorization === 'Bearer replica-b').length;
    await b.stop();
    expect(leaseWrites().filter((w) => w.headers.authorization === 'Bearer replica-b').length).toBe(before);
    expect(before).toBe(0);
    await a.stop({ release: false });
    expect(holder()).toBe('replica-a');
    expect(() => a.start()).toThrow('leader election: start() after stop()');
  });
});
