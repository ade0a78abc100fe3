/**
 * Clusters shared out across replicas, end to end (docs/design/architecture.md "Clusters shared out across
 * replicas"): two or three real `tokenwatch serve` processes (the CLI bundle, test/global-setup.ts) on one PostgreSQL
 * database (the run's throwaway server, or one of this file's own for the outage test), with the loopback fakes of
 * Slack (HTTP mode, signed requests) and Kubernetes in this process and audit log files as sources.
 *
 * - concurrent Approve clicks on two replicas → exactly one PATCH, executed by the cluster's owner;
 * - kill -9 of the replica that owns the cluster mid-rollout → another replica takes it over, finishes the rollout
 *   and reports in the same Slack thread (the takeover time is measured and printed);
 * - a replica joins → the clusters rebalance, and every scheduled tick of every cluster is accounted for exactly once
 *   (polled by one replica, or recorded missed with its reason);
 * - PostgreSQL stopped and started again → `/readyz` says `store-unavailable` (still 200), nothing crashes, and the audit events
 *   written meanwhile are stored once the database is back.
 *
 * Default heartbeat (5 s) and TTL (15 s), so the figures printed are those of a default install, except in the rebalance
 * test (2 s and 6 s through `shards` in the config, to run faster).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it, onTestFailed } from 'vitest';
import type { FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import { blockActionPayload, DEFAULT_BOT_TOKEN, sendBlockAction, sendSlashCommand, type FakeSlack } from '../../src/sandbox/fakes/slack.js';
import type { ReadinessBody } from '../../src/runtime/health-server.js';
import { desiredOwner } from '../../src/runtime/shards.js';
import { APPROVER, buttonValue, ONCALL, ONCALL_APPROVER, OPS, REQUESTER, SECRET, staleLine, startFakes } from '../slack/harness.js';
import { auditEvent } from '../sources/events.js';
import { cliMain } from '../support/build.js';
import { findPostgresBin, startPostgres, type StartedPostgres } from '../support/postgres-server.js';
import { createTestDatabase, postgresServer, type TestDatabase } from '../support/postgres.js';
import { freePort } from '../support/processes.js';
import { until as untilEvent } from '../support/until.js';

const pgServer = postgresServer();
const MULTUS_PODS = ['kube-multus-ds-452jg', 'kube-multus-ds-458dh', 'kube-multus-ds-86hnh', 'kube-multus-ds-b4j4z', 'kube-multus-ds-dkvtp', 'kube-multus-ds-nw6rg', 'kube-multus-ds-svmt7'];

type Log = Record<string, unknown> & { msg?: string; time?: string; level?: string };
const timeOf = (l: Log): number => Date.parse(String(l.time));

/** One `tokenwatch serve` child. */
interface Replica {
  name: string;
  child: ChildProcess;
  logs: Log[];
  httpPort: number;
  slackUrl: string;
  exited: Promise<void>;
  /** Resolves with the first log line (this far or later) that `pred` accepts. */
  waitLog(what: string, pred: (l: Log) => boolean, timeoutMs?: number): Promise<Log>;
  readyz(): Promise<{ code: number; body: ReadinessBody }>;
}

const children: ChildProcess[] = [];
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const f of cleanups.splice(0).reverse()) await f();
});

/** Polls `cond` (an event the test waits for) every 50 ms within a generous bound. */
const until = <T>(what: string, cond: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 120_000): Promise<T> =>
  untilEvent(what, cond, timeoutMs, 50);

interface Scenario {
  dir: string;
  slack: FakeSlack;
  kube: FakeKube;
  db: { host: string; port: number; database: string; user: string };
  /** Extra clusters without Kubernetes access (file sources), for rebalancing. */
  extra: string[];
  schedule: string;
  /** `shards` in the config (heartbeat and TTL); default the config's defaults (5 s and 15 s). */
  shards?: { heartbeat: string; ttl: string };
}

/** The fakes, the audit logs (fresh stale-token uses of the Multus pods; one line per extra cluster) and a kubeconfig. */
async function scenario(db: Scenario['db'], opts: { extra?: number; schedule?: string; rollout?: { stepMs: number; podsPerStep: number }; shards?: Scenario['shards'] } = {}): Promise<Scenario> {
  const dir = mkdtempSync(join(tmpdir(), 'tw-shards-e2e-'));
  const { slack, kube } = await startFakes({ oncall: [], rollout: opts.rollout ?? { stepMs: 100, podsPerStep: 1 } });
  cleanups.push(async () => {
    await slack.close().catch(() => undefined);
    await kube.close().catch(() => undefined);
  });
  const at = Date.now() - 10 * 60_000;
  writeFileSync(join(dir, 'prod.log'), MULTUS_PODS.map((p, i) => `${staleLine(`multus-${i}`, at + i * 1000, p, 7_000_000)}\n`).join(''));
  const extra = Array.from({ length: opts.extra ?? 0 }, (_, i) => `edge-${i}`);
  for (const c of extra) writeFileSync(join(dir, `${c}.log`), `${auditEvent({ auditID: `${c}-1`, time: at, kind: 'stale', namespace: 'apps', serviceAccount: `sa-${c}`, pod: `p-${c}`, secondsAfterWarning: 100 })}\n`);
  writeFileSync(
    join(dir, 'kubeconfig.yaml'),
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- name: fake',
      '  cluster:',
      `    server: ${kube.url}`,
      '    insecure-skip-tls-verify: true',
      'users:',
      '- name: tokenwatch',
      '  user:',
      '    token: fake-token',
      'contexts:',
      '- name: fake',
      '  context:',
      '    cluster: fake',
      '    user: tokenwatch',
      'current-context: fake',
      '',
    ].join('\n'),
  );
  return { dir, slack, kube, db, extra, schedule: opts.schedule ?? '0 0 1 1 *', ...(opts.shards ? { shards: opts.shards } : {}) };
}

/** Starts `tokenwatch serve` as replica `name`; resolves once it logged `tokenwatch serve started`. */
async function startReplica(s: Scenario, name: string): Promise<Replica> {
  const [httpPort, slackPort] = [await freePort(), await freePort()];
  const cfg = join(s.dir, `${name}.yaml`);
  const cluster = (c: string, kube: boolean) => [
    `  - name: ${c}`,
    `    schedule: "${s.schedule}"`,
    '    audit:',
    '      file:',
    `        path: ${join(s.dir, c === 'prod-eks' ? 'prod.log' : `${c}.log`)}`,
    ...(kube ? ['    kubernetes:', `      kubeconfig: ${join(s.dir, 'kubeconfig.yaml')}`] : ['    kubernetes:', '      none: true']),
    '    slack:',
    `      channel: ${OPS}`,
    `      approvers: [${APPROVER}, ${ONCALL}]`,
    '      requesters: ["*"]',
  ];
  writeFileSync(
    cfg,
    [
      'store:',
      `  path: ${join(s.dir, `${name}-unused.db`)}`,
      '  postgres:',
      `    host: ${s.db.host}`,
      `    port: ${s.db.port}`,
      `    database: ${s.db.database}`,
      `    user: ${s.db.user}`,
      '    sslmode: disable',
      '    connectTimeout: 2s',
      ...(s.shards ? ['shards:', `  heartbeat: ${s.shards.heartbeat}`, `  ttl: ${s.shards.ttl}`] : []),
      'http:',
      '  host: 127.0.0.1',
      `  port: ${httpPort}`,
      'poll:',
      '  jitter: 0s',
      '  spread: false',
      'slack:',
      '  enabled: true',
      '  mode: http',
      `  apiUrl: ${s.slack.apiUrl}`,
      '  host: 127.0.0.1',
      `  port: ${slackPort}`,
      'remediation:',
      '  rolloutTimeout: 150s',
      'clusters:',
      ...cluster('prod-eks', true),
      ...s.extra.flatMap((c) => cluster(c, false)),
      '',
    ].join('\n'),
  );
  const child = spawn(process.execPath, [cliMain(), 'serve', '--config', cfg], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'info', POD_NAME: name, SLACK_BOT_TOKEN: DEFAULT_BOT_TOKEN, SLACK_SIGNING_SECRET: SECRET },
  });
  children.push(child);
  const logs: Log[] = [];
  let partial = '';
  let err = '';
  const waiters = new Set<() => void>();
  child.stdout!.on('data', (d: Buffer) => {
    partial += d.toString();
    const lines = partial.split('\n');
    partial = lines.pop()!;
    for (const line of lines) {
      try {
        logs.push(JSON.parse(line) as Log);
      } catch {
        // not a log line
      }
    }
    for (const w of [...waiters]) w();
  });
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const waitLog = (what: string, pred: (l: Log) => boolean, timeoutMs = 150_000): Promise<Log> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(new Error(`${name}: timed out waiting for ${what}`));
      }, timeoutMs);
      const check = (): void => {
        const hit = logs.find(pred);
        if (hit) {
          clearTimeout(timer);
          waiters.delete(check);
          resolve(hit);
        } else if (child.exitCode !== null || child.signalCode !== null) {
          clearTimeout(timer);
          waiters.delete(check);
          reject(new Error(`${name} exited before ${what}: ${err}`));
        }
      };
      waiters.add(check);
      child.once('exit', () => setImmediate(check));
      check();
    });
  onTestFailed(() => {
    // What the replica said, for the failure report (warnings and errors, and the last lines).
    const notable = logs.filter((l) => l.level === 'warn' || l.level === 'error').slice(-20);
    console.error(`--- ${name}: ${notable.length} warnings/errors (last 20), then the last 15 lines\n${[...notable, ...logs.slice(-15)].map((l) => JSON.stringify(l).slice(0, 600)).join('\n')}\n${err.slice(-2000)}`);
  });
  await waitLog('its start', (l) => l.msg === 'tokenwatch serve started');
  const readyz = async () => {
    const res = await fetch(`http://127.0.0.1:${httpPort}/readyz`);
    return { code: res.status, body: (await res.json()) as ReadinessBody };
  };
  return { name, child, logs, httpPort, slackUrl: `http://127.0.0.1:${slackPort}/slack/events`, exited, waitLog, readyz };
}

async function kill9(r: Replica): Promise<number> {
  r.child.kill('SIGKILL');
  const at = Date.now();
  await r.exited;
  return at;
}

/** The replica id (`<name>-<suffix>`) that owns `cluster` according to `r`'s `/readyz`. */
async function ownerOf(r: Replica, cluster: string): Promise<string | null> {
  return (await r.readyz()).body.shards?.owners[cluster] ?? null;
}
const replicaNamed = (rs: readonly Replica[], id: string | null): Replica | undefined => rs.find((r) => id?.startsWith(`${r.name}-`));

/**
 * Waits until every replica's `/readyz` shows `cluster` owned by its rendezvous owner over all of them (the shares have
 * settled after the starts); returns that replica.
 */
async function settledOwner(rs: readonly Replica[], cluster: string): Promise<Replica> {
  const ids = await Promise.all(rs.map(async (r) => (await r.readyz()).body.shards!.replica));
  const want = desiredOwner(cluster, ids)!;
  await until(`${cluster} owned by ${want} on every replica`, async () => (await Promise.all(rs.map((r) => ownerOf(r, cluster)))).every((o) => o === want));
  return replicaNamed(rs, want)!;
}

/** The Multus alert in the fake Slack channel. */
function multusAlert(slack: FakeSlack) {
  return slack.messages(OPS).find((m) => m.text.includes('kube-system/multus') && (m.blocks ?? []).length > 0);
}

function click(slack: FakeSlack, url: string, user: string, m: { ts: string; blocks?: unknown[] | undefined }, id: string) {
  return sendBlockAction(url, SECRET, blockActionPayload({ user, actionId: id, value: buttonValue(m as { blocks: unknown[] }, id), channel: OPS, messageTs: m.ts, responseUrl: slack.responseUrl({ channel: OPS, user, messageTs: m.ts }) }));
}

const realPatches = (k: FakeKube) => k.requestsMatching({ method: 'PATCH', resource: 'daemonsets' }).filter((r) => !r.dryRun);

async function database(): Promise<TestDatabase> {
  const d = await createTestDatabase();
  cleanups.push(() => d.drop());
  return d;
}
const dbOf = (d: TestDatabase) => ({ host: d.options.host, port: d.options.port ?? 5432, database: d.name, user: d.options.user });

/** Requests a restart of the Multus DaemonSet on `via`; resolves with the alert and the approval message. */
async function requestRestart(s: Scenario, via: Replica) {
  const alert = await until('the multus alert', () => multusAlert(s.slack));
  await click(s.slack, via.slackUrl, REQUESTER, alert, 'tw_restart');
  const approval = await until('the approval message', () => s.slack.thread(OPS, alert.ts).find((m) => m.text.includes('approval needed') && (m.blocks ?? []).length > 0));
  return { alert, approval };
}

describe.skipIf(!pgServer.available)('replicas sharing clusters on PostgreSQL', () => {
  it('two approvers clicking Approve on two replicas in the same millisecond: one approval, exactly one PATCH, run by the owner', { timeout: 180_000 }, async () => {
    const s = await scenario(dbOf(await database()));
    const a = await startReplica(s, 'tw-a');
    const b = await startReplica(s, 'tw-b');
    const owner = await settledOwner([a, b], 'prod-eks');
    const { approval } = await requestRestart(s, a);
    await Promise.all([click(s.slack, a.slackUrl, APPROVER, approval, 'tw_approve'), click(s.slack, b.slackUrl, ONCALL_APPROVER, approval, 'tw_approve')]);
    await until('Done', () => s.slack.message(OPS, approval.ts)?.text.startsWith('✅ Done [prod-eks]: restart of DaemonSet kube-system/kube-multus-ds'));
    expect(realPatches(s.kube)).toHaveLength(1);
    const sent = [a, b].filter((r) => r.logs.some((l) => l.msg === 'rollout restart patch sent'));
    expect(sent.map((r) => r.name)).toEqual([owner.name]);
  });

  it('kill -9 of the replica that owns the cluster mid-rollout: another takes it over and finishes the rollout in the same thread', { timeout: 180_000 }, async () => {
    const s = await scenario(dbOf(await database()), { rollout: { stepMs: 1500, podsPerStep: 1 } });
    const rs = [await startReplica(s, 'tw-a'), await startReplica(s, 'tw-b'), await startReplica(s, 'tw-c')];
    const owner = await settledOwner(rs, 'prod-eks');
    const others = rs.filter((r) => r !== owner);
    const { alert, approval } = await requestRestart(s, others[0]!);
    let killedAt: Promise<number> | undefined;
    s.slack.on('change', (c) => {
      if (!killedAt && c.type === 'update' && c.message.text.startsWith('⏳ [prod-eks] rolling out')) killedAt = kill9(owner);
    });
    await click(s.slack, others[1]!.slackUrl, APPROVER, approval, 'tw_approve'); // clicked on a replica that does not own it
    const killed = await until('the owner killed mid-rollout', () => killedAt);
    const took = await Promise.any(others.map((r) => r.waitLog('taking prod-eks over', (l) => l.msg?.startsWith('took cluster prod-eks over') === true).then((l) => ({ r, l }))));
    await until('Done', () => s.slack.message(OPS, approval.ts)?.text.startsWith('✅ Done [prod-eks]'), 150_000);
    const doneAt = Date.now();
    const takeoverMs = timeOf(took.l) - killed;
    // Printed for docs/install.md ("Availability"): the default heartbeat (5 s) and TTL (15 s).
    console.log(`[shards e2e] kill -9 of the owner: prod-eks taken over by ${took.r.name} ${(takeoverMs / 1000).toFixed(1)} s later; the rollout finished ${((doneAt - killed) / 1000).toFixed(1)} s after the kill`);
    expect(takeoverMs).toBeLessThanOrEqual(30_000);
    expect(realPatches(s.kube)).toHaveLength(1);
    const progress = s.slack.thread(OPS, alert.ts).filter((m) => m.text.includes('rollout of DaemonSet') || m.text.includes('rolling out'));
    expect(progress.map((m) => m.text)).toEqual(['✅ [prod-eks] rollout of DaemonSet kube-system/kube-multus-ds complete']);
  });

  // Every scheduled tick of every cluster is accounted for exactly once across the replicas — polled by one of them
  // (a poll run keyed by cluster and tick) or recorded missed with its reason — whatever the load: a busy machine may
  // miss ticks (recorded, not lost), but a tick polled twice, or neither polled nor recorded, fails the test.
  it('replicas join and one leaves: the clusters rebalance, and every tick of every cluster is polled by one replica or recorded missed, never both, never twice', { timeout: 480_000 }, async () => {
    const d = await database();
    // Shorter than the defaults, to run faster: a tick every 10 s, heartbeat 2 s, TTL 6 s (shards in the config).
    const INTERVAL = 10_000;
    const s = await scenario(dbOf(d), { extra: 5, schedule: '*/10 * * * * *', shards: { heartbeat: '2s', ttl: '6s' } });
    const all = ['prod-eks', ...s.extra];
    const client = new pg.Client({ host: d.options.host, port: d.options.port, user: d.options.user, database: d.name });
    await client.connect();
    cleanups.push(() => client.end());
    /** Per cluster and tick (epoch ms): what the store says of it, `polled` (one per poll run) or `missed:<reason>`. */
    const accounting = async (from: number) => {
      const runs = (await client.query<{ cluster: string; t: string; ended: boolean }>('SELECT cluster, scheduled_at AS t, ended_at IS NOT NULL AS ended FROM poll_runs WHERE scheduled_at >= $1', [from])).rows;
      const missed = (await client.query<{ cluster: string; t: string; reason: string }>('SELECT cluster, scheduled_at AS t, reason FROM missed_polls WHERE scheduled_at >= $1', [from])).rows;
      const out = new Map<string, string[]>();
      const add = (cluster: string, t: string, what: string) => out.set(`${cluster}@${t}`, [...(out.get(`${cluster}@${t}`) ?? []), what]);
      for (const r of runs) add(r.cluster, r.t, r.ended ? 'polled' : 'unfinished');
      for (const m of missed) add(m.cluster, m.t, `missed:${m.reason}`);
      return out;
    };
    const a = await startReplica(s, 'tw-a');
    await until('a polling every cluster on schedule', async () => (await client.query('SELECT DISTINCT cluster FROM poll_runs WHERE scheduled_at IS NOT NULL AND ended_at IS NOT NULL')).rowCount === all.length, 240_000);
    const joinedAt = Date.now();
    // Rendezvous hashing over random replica ids gives a joining replica no cluster at all in (1/2)^6 ≈ 1.6 % of runs
    // for b and (2/3)^6 ≈ 9 % for c: then it leaves and a new one (a new id) joins, until one has a share by design.
    const startWithShare = async (name: string, others: Replica[]): Promise<Replica> => {
      for (let attempt = 1; ; attempt++) {
        const candidate = await startReplica(s, name);
        const ids = await Promise.all([...others, candidate].map(async (r) => (await r.readyz()).body.shards!.replica));
        if (all.some((cl) => desiredOwner(cl, ids) === ids.at(-1))) return candidate;
        if (attempt >= 8) throw new Error(`rendezvous gave ${name} no cluster in 8 tries`);
        candidate.child.kill('SIGTERM');
        await candidate.exited;
      }
    };
    const b = await startWithShare('tw-b', [a]);
    const owners = await until('b owning a share', async () => {
      const o = (await b.readyz()).body.shards?.owners ?? {};
      return Object.values(o).some((id) => id?.startsWith('tw-b-')) && Object.values(o).every((id) => id !== null) ? o : undefined;
    }, 240_000);
    const c = await startWithShare('tw-c', [a, b]);
    const cOwned = await until('c owning its share', async () => {
      const o = (await c.readyz()).body.shards?.owners ?? {};
      const mine = Object.keys(o).filter((cl) => o[cl]?.startsWith('tw-c-'));
      return mine.length > 0 ? mine : undefined;
    }, 240_000);
    // c polls its share on schedule, then leaves (SIGTERM: it hands its clusters over; the others take them while
    // running, so their catch-up decides whether the latest tick still needs a poll).
    const cSince = Date.now();
    await until('c polling its share on schedule', async () => (await client.query('SELECT 1 FROM poll_runs WHERE cluster = ANY($1) AND scheduled_at IS NOT NULL AND ended_at IS NOT NULL AND started_at > $2', [cOwned, cSince])).rowCount! > 0, 240_000);
    const leftAt = Date.now();
    c.child.kill('SIGTERM');
    await c.exited;
    const ownersAfterLeave = await until('c\'s clusters taken by a and b', async () => {
      const o = (await a.readyz()).body.shards?.owners ?? {};
      return Object.values(o).every((id) => id !== null && !id.startsWith('tw-c-')) ? o : undefined;
    }, 240_000);
    const handOverMs = Date.now() - leftAt;
    // Two more ticks; then every cluster's ticks up to that one must be accounted for (a tick nobody could poll is
    // recorded at the cluster's next poll, so wait for a tick after it to be accounted for too).
    const first = Math.ceil(joinedAt / INTERVAL) * INTERVAL;
    const last = Math.ceil(Date.now() / INTERVAL) * INTERVAL + 2 * INTERVAL;
    await until(
      'every cluster accounted for past the last tick',
      async () => {
        const acc = await accounting(last + INTERVAL);
        return all.every((cl) => [...acc.keys()].some((k) => k.startsWith(`${cl}@`) && acc.get(k)!.some((w) => w === 'polled' || w.startsWith('missed:'))));
      },
      300_000,
    );
    const acc = await accounting(first);
    const ownersNow = ownersAfterLeave;
    const byReplica = new Set(Object.values(ownersNow).map((id) => id?.replace(/-[0-9a-f]{6}$/, '')));
    const ticks = Array.from({ length: (last - first) / INTERVAL + 1 }, (_, i) => first + i * INTERVAL);
    const seen = all.flatMap((cl) => ticks.map((t) => ({ cluster: cl, tick: new Date(t).toISOString(), what: acc.get(`${cl}@${t}`) ?? [] })));
    const missed = seen.filter((x) => x.what.some((w) => w.startsWith('missed:')));
    const aborted = seen.filter((x) => x.what.includes('unfinished'));
    console.log(
      `[shards e2e] rebalance: owners after b joined ${JSON.stringify(owners)}; c owned ${JSON.stringify(cOwned)}; after c left ${JSON.stringify(ownersNow)} (owned by a and b ${(handOverMs / 1000).toFixed(1)} s after c's SIGTERM); ` +
        `${seen.length} ticks, ${seen.length - missed.length} polled, ${missed.length} recorded missed ${JSON.stringify(missed.map((x) => `${x.cluster}@${x.tick}:${x.what.join('+')}`))}` +
        `, ${aborted.length} with a poll cut off by c's stop ${JSON.stringify(aborted.map((x) => `${x.cluster}@${x.tick}:${x.what.join('+')}`))}`,
    );
    expect([...byReplica].sort()).toEqual([...new Set([...byReplica].filter((n) => n === 'tw-a' || n === 'tw-b'))].sort());
    // Each tick exactly once: one finished poll run, or one missed record — none doubled by a hand-over, none lost. (A
    // poll c's stop cut off is left unfinished, as a crash leaves it; its tick is then polled by the new owner.)
    expect(seen.map((x) => ({ ...x, what: x.what.filter((w) => w !== 'unfinished') })).filter((x) => x.what.length !== 1)).toEqual([]);
  });

  it('PostgreSQL stopped and started again: replicas say the store is unavailable, nothing crashes, and the events of the outage are stored after', { timeout: 180_000 }, async () => {
    const server: StartedPostgres = await startPostgres();
    cleanups.push(() => server.stop());
    if (!server.info.available) throw new Error('no PostgreSQL server');
    const info = server.info;
    const bin = findPostgresBin()!;
    const data = join(info.socketDir, 'data');
    const asServerUser = (args: string[]) =>
      execFileSync(process.getuid?.() === 0 ? 'setpriv' : join(bin, 'pg_ctl'), process.getuid?.() === 0 ? ['--reuid=65534', '--regid=65534', '--clear-groups', join(bin, 'pg_ctl'), ...args] : args, { stdio: 'pipe' });
    const s = await scenario({ host: info.host, port: info.port, database: 'postgres', user: info.superuser }, { extra: 1, schedule: '*/10 * * * * *' });
    const a = await startReplica(s, 'tw-a');
    const b = await startReplica(s, 'tw-b');
    await until('both ready', async () => (await a.readyz()).code === 200 && (await b.readyz()).code === 200);

    asServerUser(['stop', '-D', data, '-m', 'fast', '-w']);
    const downAt = Date.now();
    // Still ready (200): every replica is in this state, and taking them all out of the Service would leave Slack
    // without the answer that says so.
    const unavailable = async (r: Replica) => {
      const z = await r.readyz();
      return z.body.status === 'store-unavailable' && z.code === 200;
    };
    await until('a and b say store-unavailable, still ready', async () => (await unavailable(a)) && (await unavailable(b)));
    // A Slack answer says so (and that nothing was changed), from either replica.
    await sendSlashCommand(b.slackUrl, SECRET, { text: 'status prod-eks', user_id: REQUESTER, channel_id: OPS, response_url: s.slack.responseUrl({ channel: OPS, user: REQUESTER }) });
    await until('the store-unavailable answer', () => s.slack.ephemerals({ user: REQUESTER }).some((e) => e.text.includes('store (its database) is unavailable')), 60_000);
    // Written while the database is down: must be stored once it is back.
    appendFileSync(join(s.dir, 'edge-0.log'), `${auditEvent({ auditID: 'outage-1', time: Date.now() - 1000, kind: 'stale', namespace: 'apps', serviceAccount: 'sa-during-outage', pod: 'p-outage', secondsAfterWarning: 100 })}\n`);
    await a.waitLog('the heartbeat failure logged', (l) => timeOf(l) >= downAt - 1000 && l.level === 'error' && String(l.msg).startsWith('cluster ownership heartbeat failed'));

    asServerUser(['start', '-D', data, '-l', join(info.socketDir, 'server.log'), '-w', '-t', '60', '-o', `-p ${info.port}`]);
    const upAt = Date.now();
    await until('both ready again', async () => (await a.readyz()).code === 200 && (await b.readyz()).code === 200);
    const client = new pg.Client({ host: info.host, port: info.port, user: info.superuser, database: 'postgres' });
    await client.connect();
    cleanups.push(() => client.end());
    await until('the outage event stored', async () => (await client.query("SELECT 1 FROM findings WHERE service_account = 'sa-during-outage'")).rowCount === 1, 60_000);
    console.log(`[shards e2e] PostgreSQL down ${((upAt - downAt) / 1000).toFixed(1)} s; replicas ready again ${((Date.now() - upAt) / 1000).toFixed(1)} s after it was back`);
    expect(a.child.exitCode).toBeNull();
    expect(b.child.exitCode).toBeNull();
  });
});
