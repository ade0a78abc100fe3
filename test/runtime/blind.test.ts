/**
 * Blind-log detection: an audit input that cannot see stale tokens is reported, never a green status. Unit rules of
 * the monitor, the EKS `DescribeCluster` logging setup through the real EKS client against the loopback fake, and
 * `serve` end to end (/readyz body, the metric, /tokens status data).
 */
import { appendFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EKSClient } from '@aws-sdk/client-eks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEksCluster } from '../../src/cluster/eks-auth.js';
import { parseConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { BlindLogMonitor, EksLoggingRecheck } from '../../src/runtime/blind.js';
import { composeServe } from '../../src/runtime/compose.js';
import { startFakeEks, type FakeEks } from '../fakes/eks.js';
import { createPlatformHints, type PlatformHints } from '../../src/sources/platform-hints.js';
import { auditEvent } from '../sources/events.js';
import { CLUSTER, REQUESTER, blockText, startHarness, type Harness } from '../slack/harness.js';

const T0 = Date.parse('2026-11-20T12:00:00Z');
const MIN = 60_000;

describe('BlindLogMonitor', () => {
  it('a file source is blind after silentAfter without an event, and sees again with the next one', () => {
    const m = new BlindLogMonitor({ source: 'file', silentAfterMs: 60 * MIN, startedAt: T0 });
    expect(m.state(T0 + 120 * MIN)).toEqual({ blind: false }); // no poll yet: nothing is known
    m.observePoll(T0, 3);
    m.observePoll(T0 + 30 * MIN, 0);
    expect(m.state(T0 + 59 * MIN)).toEqual({ blind: false });
    const s = m.state(T0 + 61 * MIN);
    expect(s).toMatchObject({ blind: true, reason: 'no-events-for-time' });
    expect(s.blind && s.text).toBe(
      'audit log blind: no audit event for 61 min (since 2026-11-20T12:00:00.000Z); no stale-token findings can come from it',
    );
    m.observePoll(T0 + 62 * MIN, 1);
    expect(m.state(T0 + 63 * MIN)).toEqual({ blind: false });
  });

  it('an AKS export with only kube-audit-admin records, or a GKE export without Data Access entries, is blind; the missing kind seen again clears it', () => {
    const hints = (aks: string[], gke: string[] = []): PlatformHints => ({ aksCategories: new Set(aks), gkeLogs: new Set(gke) });
    const m = new BlindLogMonitor({ source: 'file', silentAfterMs: 60 * MIN, startedAt: T0, otherSignals: true });
    m.observePoll(T0, 4);
    m.observePlatformHints(T0, hints(['kube-audit-admin']));
    const s = m.state(T0 + MIN);
    expect(s).toMatchObject({ blind: true, reason: 'aks-admin-only' });
    expect(s.blind && s.text).toBe(
      "audit log blind: only the AKS kube-audit-admin category is exported; it leaves out get and list requests, where most stale-token uses are: enable the kube-audit category in the cluster's diagnostic setting; findings now come from API-server token metrics and the node probe only",
    );
    // kube-audit records arrive (the diagnostic setting was fixed): both categories in the window, not blind.
    m.observePlatformHints(T0 + 2 * MIN, hints(['kube-audit']));
    expect(m.state(T0 + 3 * MIN)).toEqual({ blind: false });
    // An hour later only kube-audit-admin records keep coming: blind again (kube-audit left the window).
    m.observePoll(T0 + 70 * MIN, 2);
    m.observePlatformHints(T0 + 70 * MIN, hints(['kube-audit-admin']));
    expect(m.state(T0 + 71 * MIN)).toMatchObject({ blind: true, reason: 'aks-admin-only' });

    const g = new BlindLogMonitor({ source: 'file', startedAt: T0 });
    g.observePoll(T0, 3);
    g.observePlatformHints(T0, hints([], ['activity']));
    expect(g.state(T0 + MIN)).toMatchObject({ blind: true, reason: 'gke-no-data-access' });
    g.observePlatformHints(T0 + 2 * MIN, hints([], ['data_access']));
    expect(g.state(T0 + 3 * MIN)).toEqual({ blind: false });
    // A plain kube-apiserver log carries no platform marker: never blind for this reason.
    const plain = new BlindLogMonitor({ source: 'file', startedAt: T0 });
    plain.observePoll(T0, 10);
    plain.observePlatformHints(T0, createPlatformHints());
    expect(plain.state(T0 + MIN)).toEqual({ blind: false });
  });

  it('a poll refused the read of its log (SourceError.blind) is blind with the source\'s fix, from the first refusal until a poll succeeds; other failures change nothing', () => {
    const m = new BlindLogMonitor({ source: 'log-analytics', startedAt: T0, otherSignals: true });
    m.observePoll(T0, 0);
    m.observeFailedPoll(T0 + 5 * MIN, undefined); // a timeout, a 5xx: proves nothing
    expect(m.state(T0 + 5 * MIN)).toEqual({ blind: false });
    m.observeFailedPoll(T0 + 10 * MIN, 'the identity may not read workspace W: grant Log Analytics Reader');
    m.observeFailedPoll(T0 + 15 * MIN, 'the identity may not read workspace W: grant Log Analytics Reader');
    m.observeFailedPoll(T0 + 20 * MIN, undefined); // still refused as far as anyone knows
    expect(m.state(T0 + 20 * MIN)).toEqual({
      blind: true,
      reason: 'no-read-access',
      text: 'audit log blind: the identity may not read workspace W: grant Log Analytics Reader; findings now come from API-server token metrics and the node probe only',
    });
    expect(m.noReadAccessSince()).toBe(T0 + 10 * MIN);
    m.observePoll(T0 + 25 * MIN, 0);
    expect(m.state(T0 + 25 * MIN)).toEqual({ blind: false });
    expect(m.noReadAccessSince()).toBeUndefined();
  });

  it('a file source that never delivered counts from the start', () => {
    const m = new BlindLogMonitor({ source: 'file', silentAfterMs: 10 * MIN, startedAt: T0, otherSignals: true });
    m.observePoll(T0 + MIN, 0);
    const s = m.state(T0 + 10 * MIN);
    expect(s).toMatchObject({ blind: true, reason: 'no-events-for-time' });
    expect(s.blind && s.text).toContain('findings now come from API-server token metrics and the node probe only');
  });

  it('a log group is blind after silentPolls empty polls in a row', () => {
    const m = new BlindLogMonitor({ source: 'cloudwatch', silentPolls: 3, startedAt: T0 });
    m.observePoll(T0, 5);
    m.observePoll(T0 + 5 * MIN, 0);
    m.observePoll(T0 + 10 * MIN, 0);
    expect(m.state(T0 + 10 * MIN)).toEqual({ blind: false });
    m.observePoll(T0 + 15 * MIN, 0);
    const s = m.state(T0 + 15 * MIN);
    expect(s).toMatchObject({ blind: true, reason: 'no-events-for-polls' });
    expect(s.blind && s.text).toContain('no audit event in the last 3 polls');
    m.observePoll(T0 + 20 * MIN, 1);
    expect(m.state(T0 + 20 * MIN)).toEqual({ blind: false });
  });

  it('EKS with the audit log type off is blind whatever arrives; audit: none never is', () => {
    const m = new BlindLogMonitor({ source: 'cloudwatch', startedAt: T0 });
    m.setEksAuditLogging(false);
    m.observePoll(T0, 10);
    expect(m.state(T0)).toMatchObject({ blind: true, reason: 'eks-audit-log-off' });
    m.setEksAuditLogging(true);
    expect(m.state(T0)).toEqual({ blind: false });
    const none = new BlindLogMonitor({ source: 'none', silentAfterMs: 1, silentPolls: 1, startedAt: T0 });
    none.observePoll(T0, 0);
    expect(none.state(T0 + 60 * MIN)).toEqual({ blind: false });
  });
});

describe('EksLoggingRecheck', () => {
  it('reads at most once per interval, one reading for concurrent polls; a failed reading keeps the last value', async () => {
    const m = new BlindLogMonitor({ source: 'cloudwatch', startedAt: T0 });
    const answers: Array<boolean | Error> = [false, new Error('throttled'), true];
    let reads = 0;
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const errors: unknown[] = [];
    const check = new EksLoggingRecheck({
      monitor: m,
      readAt: T0,
      intervalMs: 60 * MIN,
      read: async () => {
        reads++;
        await gate;
        const a = answers.shift()!;
        if (a instanceof Error) throw a;
        return a;
      },
      onRead: (err) => errors.push(err),
    });
    await check.due(T0 + 59 * MIN);
    expect(reads).toBe(0);
    const both = Promise.all([check.due(T0 + 60 * MIN), check.due(T0 + 61 * MIN)]);
    release();
    await both;
    expect(reads).toBe(1);
    expect(m.state(T0 + 61 * MIN)).toMatchObject({ blind: true, reason: 'eks-audit-log-off' });
    await check.due(T0 + 119 * MIN);
    expect(reads).toBe(1);
    await check.due(T0 + 120 * MIN); // throttled: still blind, as last read
    expect(reads).toBe(2);
    expect(m.state(T0 + 120 * MIN)).toMatchObject({ blind: true, reason: 'eks-audit-log-off' });
    await check.due(T0 + 180 * MIN);
    expect(reads).toBe(3);
    expect(m.state(T0 + 180 * MIN)).toEqual({ blind: false });
    expect(errors.map((e) => (e instanceof Error ? e.message : e))).toEqual([undefined, 'throttled', undefined]);
    expect(() => new EksLoggingRecheck({ monitor: m, readAt: undefined, read: async () => true, intervalMs: 0 })).toThrow(RangeError);
  });

  it('reads at the first poll when it was never read (Kubernetes access failed at start)', async () => {
    const m = new BlindLogMonitor({ source: 'cloudwatch', startedAt: T0 });
    let reads = 0;
    const check = new EksLoggingRecheck({ monitor: m, readAt: undefined, read: async () => {
        reads++;
        return false;
      },
    });
    await check.due(T0);
    expect(reads).toBe(1);
    expect(m.state(T0)).toMatchObject({ blind: true, reason: 'eks-audit-log-off' });
  });
});

describe('EKS DescribeCluster logging setup', () => {
  let eks: FakeEks;
  let client: EKSClient;
  beforeAll(async () => {
    eks = await startFakeEks();
    client = new EKSClient({ region: 'us-west-2', endpoint: eks.url, credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'x' }, maxAttempts: 1 });
  });
  afterAll(async () => {
    client.destroy();
    await eks.close();
  });

  const reply = (clusterLogging: unknown) => ({
    status: 200,
    body: {
      cluster: {
        name: 'prod',
        arn: 'arn:aws:eks:us-west-2:123456789012:cluster/prod',
        endpoint: 'https://ABC.gr7.us-west-2.eks.amazonaws.com',
        status: 'ACTIVE',
        certificateAuthority: { data: Buffer.from('ca').toString('base64') },
        ...(clusterLogging === undefined ? {} : { logging: { clusterLogging } }),
      },
    },
  });

  it('reads whether the audit log type is enabled (as EKS lists enabled and disabled types)', async () => {
    eks.clusters.set('prod', reply([{ types: ['api', 'audit'], enabled: false }, { types: ['authenticator'], enabled: true }]));
    expect((await describeEksCluster({ clusterName: 'prod', region: 'us-west-2', eksClient: client })).auditLogging).toBe(false);
    eks.clusters.set('prod', reply([{ types: ['audit', 'authenticator'], enabled: true }, { types: ['api'], enabled: false }]));
    expect((await describeEksCluster({ clusterName: 'prod', region: 'us-west-2', eksClient: client })).auditLogging).toBe(true);
    eks.clusters.set('prod', reply(undefined));
    expect((await describeEksCluster({ clusterName: 'prod', region: 'us-west-2', eksClient: client })).auditLogging).toBeUndefined();
    expect(eks.requests.map((r) => `${r.method} ${r.path}`)).toEqual(Array(3).fill('GET /clusters/prod'));
  });
});

describe('serve reports a blind audit log', () => {
  it('in /readyz (state only), the metric and the status health lines; an event clears it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-blind-'));
    const log = join(dir, 'audit.log');
    writeFileSync(log, '');
    const config = parseConfig(
      {
        store: { path: join(dir, 'tw.db') },
        http: { host: '127.0.0.1', port: 0 },
        clusters: [{ name: 'prod', audit: { file: { path: log } }, schedule: '0 0 1 1 *', blindLog: { silentAfter: '30m' } }],
      },
      {},
    );
    let now = T0;
    const metrics = new Metrics();
    const handle = await composeServe(config, { logger: createLogger({ level: 'silent' }), metrics, jitterMs: 0, clock: () => now });
    const readyz = async () => (await (await fetch(`http://127.0.0.1:${handle.port}/readyz`)).json()) as { blind: Record<string, string> };
    try {
      await handle.firstPolls;
      expect((await readyz()).blind).toEqual({});
      now = T0 + 31 * MIN;
      await handle.context.clusters.get('prod')!.poller.pollOnce();
      expect((await readyz()).blind).toEqual({ prod: 'no-events-for-time' });
      const text = await metrics.text();
      expect(text).toContain('tokenwatch_audit_log_blind{cluster="prod",reason="no-events-for-time"} 1');
      expect(text).toContain('tokenwatch_audit_log_blind{cluster="prod",reason="eks-audit-log-off"} 0');
      const b = handle.context.clusters.get('prod')!.blind.state(now);
      expect(b.blind && b.text).toContain('no audit event for 31 min');

      writeFileSync(log, `${auditEvent({ auditID: 'e1', time: now, kind: 'stale', secondsAfterWarning: 100 })}\n`);
      now += MIN;
      await handle.context.clusters.get('prod')!.poller.pollOnce();
      expect((await readyz()).blind).toEqual({});
      expect(await metrics.text()).toContain('tokenwatch_audit_log_blind{cluster="prod",reason="no-events-for-time"} 0');
    } finally {
      await handle.stop();
    }
  });
});

describe('serve follows an AKS export', () => {
  it('only kube-audit-admin records: blind in /readyz, the metric and the status text; kube-audit records clear it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-blind-aks-'));
    const log = join(dir, 'PT1H.json');
    // The storage-account archive shape, one record per line (test/fixtures/audit/shapes/README.md cites its source).
    writeFileSync(log, readFileSync('test/fixtures/audit/shapes/aks-admin-only.json'));
    const config = parseConfig(
      { store: { path: join(dir, 'tw.db') }, http: { host: '127.0.0.1', port: 0 }, clusters: [{ name: 'aks-prod', audit: { file: { path: log } }, schedule: '0 0 1 1 *' }] },
      {},
    );
    let now = Date.parse('2026-11-19T10:30:00Z');
    const metrics = new Metrics();
    const handle = await composeServe(config, { logger: createLogger({ level: 'silent' }), metrics, jitterMs: 0, clock: () => now });
    const readyz = async () => (await (await fetch(`http://127.0.0.1:${handle.port}/readyz`)).json()) as { blind: Record<string, string> };
    try {
      await handle.firstPolls;
      expect((await readyz()).blind).toEqual({ 'aks-prod': 'aks-admin-only' });
      expect(await metrics.text()).toContain('tokenwatch_audit_log_blind{cluster="aks-prod",reason="aks-admin-only"} 1');
      const b = handle.context.clusters.get('aks-prod')!.blind.state(now);
      expect(b.blind && b.text).toContain('only the AKS kube-audit-admin category is exported');

      // The kube-audit category switched on: its records (every verb) arrive too.
      appendFileSync(log, readFileSync('test/fixtures/audit/shapes/aks-storage.json'));
      now += 60_000;
      await handle.context.clusters.get('aks-prod')!.poller.pollOnce();
      expect((await readyz()).blind).toEqual({});
      expect(await metrics.text()).toContain('tokenwatch_audit_log_blind{cluster="aks-prod",reason="aks-admin-only"} 0');
    } finally {
      await handle.stop();
    }
  });
});

describe('serve re-reads the EKS audit logging setup', () => {
  const ENV = ['AWS_ENDPOINT_URL_EKS', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_PROFILE', 'AWS_MAX_ATTEMPTS'] as const;
  const saved = new Map<string, string | undefined>();
  let eks: FakeEks;
  beforeAll(async () => {
    eks = await startFakeEks();
    for (const name of ENV) saved.set(name, process.env[name]);
    // The real EKS client of `serve` (default credential chain, endpoint from the environment) against the fake.
    process.env['AWS_ENDPOINT_URL_EKS'] = eks.url;
    process.env['AWS_ACCESS_KEY_ID'] = 'AKIDEXAMPLE';
    process.env['AWS_SECRET_ACCESS_KEY'] = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
    process.env['AWS_MAX_ATTEMPTS'] = '1';
    delete process.env['AWS_SESSION_TOKEN'];
    delete process.env['AWS_PROFILE'];
  });
  afterAll(async () => {
    for (const [name, value] of saved) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    await eks.close();
  });

  /** DescribeCluster's reply with the `audit` log type enabled or not (as EKS lists the enabled and the disabled types). */
  const cluster = (audit: boolean) => ({
    status: 200,
    body: {
      cluster: {
        name: 'prod',
        arn: 'arn:aws:eks:us-west-2:123456789012:cluster/prod',
        // Nothing listens there: this test reads no Kubernetes object (an empty audit log has no finding to enrich).
        endpoint: 'https://127.0.0.1:9',
        status: 'ACTIVE',
        certificateAuthority: { data: Buffer.from('not a CA').toString('base64') },
        logging: {
          clusterLogging: [
            { types: audit ? ['api', 'audit'] : ['api'], enabled: true },
            { types: audit ? ['authenticator'] : ['audit', 'authenticator'], enabled: false },
          ],
        },
      },
    },
  });

  it('at most once an hour, before a poll: audit logging switched off later is reported in /readyz, the metric and the status line', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-blind-eks-'));
    const log = join(dir, 'audit.log');
    writeFileSync(log, `${auditEvent({ auditID: 'e0', time: T0, kind: 'plain' })}\n`);
    eks.clusters.set('prod', cluster(true));
    const config = parseConfig(
      {
        store: { path: join(dir, 'tw.db') },
        http: { host: '127.0.0.1', port: 0 },
        clusters: [{ name: 'prod', audit: { file: { path: log } }, kubernetes: { eks: { clusterName: 'prod', region: 'us-west-2' } }, schedule: '0 0 1 1 *', blindLog: { silentAfter: '1d' } }], // the 3 h here without an event are not blind by time
      },
      {},
    );
    let now = T0;
    const metrics = new Metrics();
    const handle = await composeServe(config, { logger: createLogger({ level: 'silent' }), metrics, jitterMs: 0, clock: () => now });
    const readyz = async () => (await (await fetch(`http://127.0.0.1:${handle.port}/readyz`)).json()) as { blind: Record<string, string> };
    const describes = () => eks.requests.filter((r) => r.method === 'GET' && r.path === '/clusters/prod').length;
    const gauge = async () => /tokenwatch_audit_log_blind\{cluster="prod",reason="eks-audit-log-off"\} (\d)/.exec(await metrics.text())?.[1];
    const rt = handle.context.clusters.get('prod')!;
    try {
      await handle.firstPolls;
      expect(describes()).toBe(1); // at start, to build the Kubernetes access
      expect((await readyz()).blind).toEqual({});
      expect(await gauge()).toBe('0');

      eks.clusters.set('prod', cluster(false)); // someone turns audit logging off
      now = T0 + 59 * MIN;
      await rt.poller.pollOnce();
      expect(describes()).toBe(1); // the reading from start is less than an hour old: used as is
      expect((await readyz()).blind).toEqual({});

      now = T0 + 60 * MIN;
      await rt.poller.pollOnce();
      expect(describes()).toBe(2);
      expect((await readyz()).blind).toEqual({ prod: 'eks-audit-log-off' });
      expect(await gauge()).toBe('1');
      const b = rt.blind.state(now); // what `/tokens status` shows as its ❌ health line
      expect(b.blind && b.text).toContain('the EKS cluster\'s "audit" control-plane log type is not enabled');

      now = T0 + 80 * MIN;
      await rt.poller.pollOnce();
      expect(describes()).toBe(2);

      // EKS cannot be read: the last reading stands (still blind), and it is tried again an hour later.
      eks.clusters.set('prod', { status: 500, headers: { 'x-amzn-errortype': 'ServerException' }, body: { message: 'internal error' } });
      now = T0 + 120 * MIN;
      await rt.poller.pollOnce();
      expect(describes()).toBe(3);
      expect((await readyz()).blind).toEqual({ prod: 'eks-audit-log-off' });

      eks.clusters.set('prod', cluster(true)); // switched on again
      now = T0 + 179 * MIN;
      await rt.poller.pollOnce();
      expect(describes()).toBe(3);
      now = T0 + 180 * MIN;
      await rt.poller.pollOnce();
      expect(describes()).toBe(4);
      expect((await readyz()).blind).toEqual({});
      expect(await gauge()).toBe('0');
    } finally {
      await handle.stop();
    }
  }, 60_000);
});

describe('/tokens status', () => {
  let h: Harness | undefined;
  afterAll(async () => {
    await h?.stop();
  });

  it('shows one line when the audit log is blind', async () => {
    h = await startHarness({
      tweak: (c) => {
        c.clusters[0]!.blindLog = { silentAfter: 10 * MIN, silentPolls: 6 };
      },
    });
    await h.command(`status ${CLUSTER}`, REQUESTER);
    expect(blockText(h.slack.ephemerals({ user: REQUESTER }).at(-1)!)).not.toContain('audit log blind');
    h.advance(11 * MIN);
    await h.poll();
    await h.command(`status ${CLUSTER}`, REQUESTER);
    const text = blockText(h.slack.ephemerals({ user: REQUESTER }).at(-1)!);
    expect(text).toMatch(/❌ audit log blind: no audit event for 1\d min \(since [^)]+\); findings now come from API-server token metrics and the node probe only/);
  });
});
