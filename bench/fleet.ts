/**
 * `npm run bench:fleet -- [--clusters 100,500,1000] [--cycles C] [--interval S] [--channels K] [--concurrency P] [--hung H]
 * [--heap-mib M] [--kubeconfig per-cluster|one] [--webhook-burst B] [--db-stall S]`: one `tokenwatch serve` watching N
 * loopback clusters on a compressed schedule.
 *
 * Per N, fresh processes: this process runs `serve` (the real `composeServe`, Slack in HTTP mode through
 * `startSlackWith`; with `--heap-mib`, this script runs itself again with `--max-old-space-size=M`), a child process
 * runs every fake, another the Slack client, so the fakes' CPU is measured apart:
 * - one fake Kubernetes API server per cluster (`src/sandbox/fakes/kubernetes.ts`; a kubeconfig file each, or with
 *   `--kubeconfig one` one file of every cluster's context, as fleets keep them, each cluster naming its context): 20
 *   namespaces, 200 pods — 3 DaemonSets of 10 pods, 17 Deployments of 10 pods through ReplicaSets — their
 *   ServiceAccounts;
 * - one fake CloudWatch Logs (`test/fakes/cloudwatch.ts`) with a log group per cluster and a FilterLogEvents token
 *   bucket (`tps`) at AWS's 5 requests/s scaled by the schedule's compression (`--tps`; 50/s for a 30 s interval
 *   standing for 5 minutes), the same as serve's `poll.cloudwatchTps`, holding for each cluster 4 stale-token users (the 3 DaemonSets' and one Deployment's
 *   ServiceAccounts) that use their token once per schedule interval, from 10 minutes before the start to the end;
 * - one fake Slack Web API (`src/sandbox/fakes/slack.ts`) with K alert channels the clusters share;
 * - a slash-command client sending a signed `/tokens status <cluster>` about once a second to serve's
 *   `/slack/events`, timing each HTTP answer (Bolt answers when `ack()` runs).
 *
 * Schedule: every cluster `*\/S * * * * *` (S = `--interval`, default 30 s: a 5-minute schedule compressed 10×),
 * `poll.spread` on, `poll.jitter` 0, `poll.concurrency` P (default 10), `poll.cloudwatchTps` at AWS's 5. After the first
 * polls (or 3 intervals, whichever is first), one more interval and until the Slack notification queue is empty (at
 * most 3 more intervals), C cycles (default 3) are measured, aligned to the schedule's ticks.
 * `--hung H` makes H more clusters whose Kubernetes API is a black hole (accepts, never answers), to show they change
 * nothing for the others.
 *
 * What acks do while serve is under a burst or its store stalls (the client process does both, so serve's process
 * does nothing for them but what it would do for the real thing):
 * - `--webhook-burst B`: one more cluster, `webhook-0`, reads its audit events from serve's audit webhook listener
 *   (HTTPS on loopback, a bearer token; its Kubernetes API is cluster 0's); a quarter into the window the client POSTs
 *   B `EventList` batches of 100 events (1 in 50 a stale-token use, the rest 401s), 4 at a time, as the API server's
 *   webhook backend sends them;
 * - `--db-stall S`: three quarters into the window a process of its own takes the write lock of serve's SQLite store
 *   (`BEGIN IMMEDIATE` on its database file) and holds it S seconds: a write of serve waits for it up to the store's
 *   5-s busy timeout and then fails (`SQLITE_BUSY`), and the store's other statements, run one at a time, wait
 *   behind it; failures show among serve's warnings and errors, which are counted by message over the window.
 * From each of these until 15 s after it ends, the client sends `/tokens status` every 200 ms instead of every second,
 * and those acks are printed apart; the window must hold them (checked: at least 4 × (S + 20) s with `--db-stall`).
 * The extra commands cost serve CPU: the steady CPU per poll is read from a run without these flags. serve acks a
 * command before any store round trip (src/slack/replay.ts), so these acks show whether its event loop is blocked.
 *
 * Printed per N: polls run / scheduled / missed in the window; CloudWatch FilterLogEvents requests per second (mean
 * and peak in any 1 s, one account) and throttled answers; Kubernetes requests per poll per cluster; `chat.update`
 * per cycle (and how many messages they edited, the most edits of one); peak RSS of serve's process; serve's CPU per
 * cycle; `/tokens status` ack p50/p99/max (and around a burst or a stall); the fakes' CPU per cycle; serve's warnings
 * and errors by message; and the machine's load. Run from the repository root; the npm script raises `ulimit -n` first.
 */
process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] = 'true';

import { fork, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { Writable } from 'node:stream';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Session } from 'node:inspector/promises';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { writeHeapSnapshot } from 'node:v8';
import { parseConfig } from '../src/config/index.js';
import { createLogger } from '../src/observability/logger.js';
import { Metrics } from '../src/observability/metrics.js';
import { composeServe as startServe } from '../src/runtime/compose.js';
import { DEFAULT_BOT_TOKEN, sendSlashCommand, startFakeSlack, type FakeSlack } from '../src/sandbox/fakes/slack.js';
import { startFakeKube, type FakeKube } from '../src/sandbox/fakes/kubernetes.js';
import type { Store } from '../src/store/index.js';
import { startSlackWith, type SlackIntegration } from '../src/runtime/build-slack.js';
import { startFakeCloudWatch, type FakeCloudWatch } from '../test/fakes/cloudwatch.js';
import { auditEvent } from '../test/sources/events.js';
import { eventList, postBatch, selfSignedCert } from '../test/sources/webhook-client.js';
import { formatLongTasks, longTasks, type CpuProfile } from './long-tasks.js';

const SECRET = 'bench-fleet-signing-secret-0123456789';
/** The repository root (the `--db-stall` lock holder resolves better-sqlite3 from it). */
const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** The bearer token of `--webhook-burst`'s listener. */
const WEBHOOK_TOKEN = 'bench-fleet-webhook-token';
const REQUESTER = 'U0BENCHREQ';
const PREFIX = 'kube-apiserver-audit-';
const DAEMONSETS = [
  { ns: 'kube-system', name: 'aws-node' },
  { ns: 'logging', name: 'fluent-bit' },
  { ns: 'monitoring', name: 'node-exporter' },
];
const NAMESPACES = [...new Set([...DAEMONSETS.map((d) => d.ns), ...Array.from({ length: 17 }, (_, i) => `team-${i}`)])];

interface Args {
  clusters: number[];
  cycles: number;
  intervalS: number;
  channels: number;
  concurrency: number;
  hung: number;
  /** FilterLogEvents budget, requests/s: AWS's 5 scaled by the compression (300 s / interval), unless given. */
  tps: number;
  /** Where to write serve's CPU profile of the measured window (`<prefix>-<N>.cpuprofile`); none when empty. */
  profile: string;
  /**
   * Experiment: serve's SQLite `synchronous` setting for the run (`full`, the store's own, or `normal`), set on the
   * store's connection after the start; empty: the store's own.
   */
  sqliteSynchronous: string;
  /** Where to write a heap snapshot of serve's process after the window (`<prefix>-<N>.heapsnapshot`); none when empty. */
  heapSnapshot: string;
  /**
   * serve's V8 old-space cap, MiB (`--max-old-space-size`, as the chart sets it through NODE_OPTIONS from its memory
   * limit); 0: V8's own default (a share of the machine's memory, 4 GiB here, so collections come late).
   */
  heapMiB: number;
  /** `per-cluster`: a kubeconfig file per cluster; `one`: one file of every context (`--kubeconfig`). */
  kubeconfig: 'per-cluster' | 'one';
  /** Webhook batches of {@link BURST_BATCH_EVENTS} events POSTed a quarter into the window (`--webhook-burst`); 0: none. */
  webhookBurst: number;
  /** Seconds the store's write lock is held three quarters into the window (`--db-stall`); 0: no stall. */
  dbStallS: number;
}

/** Events per webhook batch of `--webhook-burst`. */
const BURST_BATCH_EVENTS = 100;
/** Webhook batches in flight at once during the burst. */
const BURST_CONCURRENCY = 4;
/** How often the client sends `/tokens status` around a burst or a stall, ms (else once a second). */
const FAST_COMMAND_MS = 200;
/** How long after a burst or a stall ends the client keeps sending fast, ms. */
const FAST_AFTER_MS = 15_000;

function usage(msg: string): never {
  process.stderr.write(`${msg}\nusage: npm run bench:fleet -- [--clusters 100,500,1000] [--cycles 3] [--interval 30] [--channels 10] [--concurrency 10] [--hung 0] [--tps 5·300/interval] [--profile PREFIX] [--heap-snapshot PREFIX] [--sqlite-synchronous full|normal] [--kubeconfig per-cluster|one] [--webhook-burst B] [--db-stall S]\n`);
  process.exit(2);
}

function parseArgs(argv: string[]): Args {
  const a: Args = { clusters: [20], cycles: 3, intervalS: 30, channels: 10, concurrency: 10, hung: 0, tps: 0, profile: '', heapSnapshot: '', sqliteSynchronous: '', heapMiB: 0, kubeconfig: 'per-cluster', webhookBurst: 0, dbStallS: 0 };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]!;
    const v = argv[++i];
    if (v === undefined) usage(`${k} needs a value`);
    const whole = (s: string): number => {
      const n = Number(s);
      if (!Number.isInteger(n) || n < 0) usage(`${k}: '${s}' is not a whole number`);
      return n;
    };
    if (k === '--clusters') a.clusters = v.split(',').map(whole);
    else if (k === '--cycles') a.cycles = Math.max(1, whole(v));
    else if (k === '--interval') a.intervalS = whole(v);
    else if (k === '--channels') a.channels = Math.max(1, whole(v));
    else if (k === '--concurrency') a.concurrency = Math.max(1, whole(v));
    else if (k === '--hung') a.hung = whole(v);
    else if (k === '--tps') {
      a.tps = Number(v);
      if (!(a.tps > 0)) usage(`--tps: '${v}' is not a positive number`);
    }
    else if (k === '--profile') a.profile = v;
    else if (k === '--heap-snapshot') a.heapSnapshot = v;
    else if (k === '--heap-mib') a.heapMiB = whole(v);
    else if (k === '--webhook-burst') a.webhookBurst = whole(v);
    else if (k === '--db-stall') a.dbStallS = whole(v);
    else if (k === '--kubeconfig') {
      if (v !== 'per-cluster' && v !== 'one') usage(`--kubeconfig: 'per-cluster' or 'one', not '${v}'`);
      a.kubeconfig = v;
    }
    else if (k === '--sqlite-synchronous') {
      if (v !== 'full' && v !== 'normal') usage(`--sqlite-synchronous: 'full' or 'normal', not '${v}'`);
      a.sqliteSynchronous = v;
    }
    else usage(`unknown argument ${k}`);
  }
  const m = a.intervalS / 60;
  if (!(a.intervalS > 0 && (a.intervalS < 60 ? 60 % a.intervalS === 0 : Number.isInteger(m) && 60 % m === 0))) {
    usage('--interval must divide 60 (1–30 s) or be whole minutes that divide 60 (60, 120, 180, 240, 300, 600, …)');
  }
  if (a.clusters.some((n) => n < 1)) usage('--clusters: each N must be at least 1');
  if (a.tps === 0) a.tps = (5 * 300) / a.intervalS;
  // The burst starts a quarter into the window and the stall three quarters: each, with its fast commands after it
  // (FAST_AFTER_MS and 5 s for the answers), must end inside the window for its acks to be among the window's.
  const windowS = a.cycles * a.intervalS;
  const tailS = (FAST_AFTER_MS + 5_000) / 1000;
  if (a.dbStallS > 0 && windowS < 4 * (a.dbStallS + tailS)) usage(`--db-stall ${a.dbStallS} needs a window (--cycles × --interval) of at least ${4 * (a.dbStallS + tailS)} s`);
  if (a.webhookBurst > 0 && windowS < (4 / 3) * (tailS + 10)) usage(`--webhook-burst needs a window (--cycles × --interval) of at least ${Math.ceil((4 / 3) * (tailS + 10))} s`);
  return a;
}

// ---------------------------------------------------------------------------------------------------------------
// The fakes (child process)

interface FakesJob {
  tps: number;
  clusters: number;
  hung: number;
  channels: number;
  intervalS: number;
  dir: string;
  startMs: number;
  endMs: number;
}

/** One `/tokens status` the client sends. */
interface StatusCommand {
  cluster: string;
  channel: string;
  responseUrl: string;
}

interface FakesReady {
  cloudwatchUrl: string;
  slackApiUrl: string;
  kubeconfigs: string[];
  hungKubeconfigs: string[];
  /** One kubeconfig file of every cluster's context (named as the cluster), hung ones included. */
  fleetKubeconfig: string;
  /** The client's commands, one a second from its start (response URLs of the fake Slack). */
  commands: StatusCommand[];
}

/** What the slash-command client (its own process) is told. */
interface ClientJob {
  eventsUrl: string;
  commands: StatusCommand[];
  /** The window's length, ms: the burst starts a quarter into it, the stall three quarters. */
  windowMs: number;
  /** `--webhook-burst`: serve's webhook listener, the CA of its certificate (PEM), the bearer token, the batches. */
  webhook?: { port: number; ca: string; token: string; batches: number };
  /** `--db-stall`: serve's SQLite database file and how long to hold its write lock, s. */
  stall?: { dbPath: string; seconds: number };
}

/** Acks of the commands sent around a burst or a stall, and what the client saw of the event itself. */
interface EventAcks {
  /** Ack times of the commands sent from the event's start until {@link FAST_AFTER_MS} after its end, ms. */
  times: number[];
  /** Commands of that span that got no 200 (an error or another status). */
  unanswered: number;
  /** How long the event took, s: the burst's POSTs, or the lock held (from the holder's taking it to its release). */
  seconds: number;
  /** Burst: HTTP statuses of the batches (e.g. `{ '200': 50 }`, `0` for no answer in 30 s); stall: empty. */
  statuses: Record<string, number>;
  /** Why the event failed (the lock holder could not take or release the lock), when it did. */
  error?: string;
}

/** What the client reports after the window. */
interface ClientReport {
  times: number[];
  cpuMs: number;
  burst?: EventAcks;
  stall?: EventAcks;
}

interface WindowStats {
  cpuMs: number;
  filterLogEvents: number;
  throttled: number;
  peakPerSecond: number;
  kubeRequests: number;
  chatUpdates: number;
  chatPosts: number;
  /** Distinct messages (channel and ts) those `chat.update` calls edited, and the most edits of one of them. */
  chatUpdatedMessages: number;
  chatMostEdits: number;
  /** The first words of the most edited message's last text (what kind of message it is). */
  chatMostEditedText: string;
}

const clusterName = (i: number): string => `c${String(i).padStart(4, '0')}`;
/** The `--webhook-burst` cluster's name. */
const WEBHOOK_CLUSTER = 'webhook-0';
const channelId = (i: number): string => `C0FLEET${String(i).padStart(3, '0')}`;

function clusterObjects(): object[] {
  const objects: object[] = [];
  const meta = (ns: string, name: string, extra: Record<string, unknown> = {}) => ({ name, namespace: ns, uid: `${ns}-${name}`, ...extra });
  for (const ns of NAMESPACES) objects.push({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  const pod = (ns: string, name: string, sa: string, owner: { kind: string; name: string; apiVersion: string }) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: meta(ns, name, { ownerReferences: [{ ...owner, controller: true, uid: `${ns}-${owner.name}` }], creationTimestamp: '2026-10-01T00:00:00Z' }),
    spec: { serviceAccountName: sa, nodeName: `node-${name.length % 10}`, containers: [{ name: 'main', image: 'registry.example/app:1' }] },
    status: { phase: 'Running', startTime: '2026-10-01T00:00:00Z' },
  });
  for (const d of DAEMONSETS) {
    objects.push({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta(d.ns, d.name) });
    objects.push({
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: meta(d.ns, d.name, { generation: 1 }),
      spec: { selector: { matchLabels: { app: d.name } }, template: { metadata: { labels: { app: d.name } }, spec: { serviceAccountName: d.name, containers: [{ name: 'main', image: 'registry.example/ds:1' }] } } },
      status: { desiredNumberScheduled: 10, numberReady: 10, numberAvailable: 10, updatedNumberScheduled: 10, observedGeneration: 1 },
    });
    for (let p = 0; p < 10; p++) objects.push(pod(d.ns, `${d.name}-p${p}`, d.name, { kind: 'DaemonSet', name: d.name, apiVersion: 'apps/v1' }));
  }
  for (let i = 0; i < 17; i++) {
    const ns = `team-${i}`;
    const name = `app-${i}`;
    const rs = `${name}-5d9f8c7b6`;
    objects.push({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta(ns, name) });
    objects.push({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: meta(ns, name, { generation: 1 }),
      spec: { replicas: 10, selector: { matchLabels: { app: name } }, template: { metadata: { labels: { app: name } }, spec: { serviceAccountName: name, containers: [{ name: 'main', image: 'registry.example/app:1' }] } } },
      status: { replicas: 10, readyReplicas: 10, availableReplicas: 10, updatedReplicas: 10, observedGeneration: 1 },
    });
    objects.push({
      apiVersion: 'apps/v1',
      kind: 'ReplicaSet',
      metadata: meta(ns, rs, { ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name, controller: true, uid: `${ns}-${name}` }] }),
      spec: { replicas: 10, selector: { matchLabels: { app: name } } },
      status: { replicas: 10 },
    });
    for (let p = 0; p < 10; p++) objects.push(pod(ns, `${rs}-p${p}`, name, { kind: 'ReplicaSet', name: rs, apiVersion: 'apps/v1' }));
  }
  return objects;
}

/** The 4 stale-token users of a cluster: each DaemonSet's first pod, and the first pod of `app-0`. */
const STALE_USERS = [...DAEMONSETS.map((d) => ({ ns: d.ns, sa: d.name, pod: `${d.name}-p0` })), { ns: 'team-0', sa: 'app-0', pod: 'app-0-5d9f8c7b6-p0' }];

/** One kubeconfig of every `[name, url]`: a cluster, a user and a context per entry, each named `name`. */
function fleetKubeconfigText(entries: ReadonlyArray<readonly [string, string]>): string {
  const clusters = entries.map(([name, url]) => `- name: ${name}\n  cluster:\n    server: ${url}\n    insecure-skip-tls-verify: true`);
  const users = entries.map(([name]) => `- name: ${name}\n  user:\n    token: bench-token-${name}`);
  const contexts = entries.map(([name]) => `- name: ${name}\n  context:\n    cluster: ${name}\n    user: ${name}`);
  return `apiVersion: v1\nkind: Config\nclusters:\n${clusters.join('\n')}\nusers:\n${users.join('\n')}\ncontexts:\n${contexts.join('\n')}\n`;
}

function kubeconfigText(url: string, name: string): string {
  return `apiVersion: v1
kind: Config
clusters:
- name: ${name}
  cluster:
    server: ${url}
    insecure-skip-tls-verify: true
users:
- name: tokenwatch
  user:
    token: bench-token-${name}
contexts:
- name: ${name}
  context:
    cluster: ${name}
    user: tokenwatch
current-context: ${name}
`;
}

/**
 * Sets `PRAGMA synchronous` on the SQLite connection of serve's store, through its executor (the statement runs in the
 * store's worker thread; `--sqlite-synchronous` is an experiment, not a setting).
 * @throws when the store is not SQLite
 */
async function setSynchronous(store: Store, value: string): Promise<void> {
  if (store.sql.dialect !== 'sqlite') throw new Error('--sqlite-synchronous: the store is not SQLite');
  await store.sql.run(`PRAGMA synchronous = ${value.toUpperCase()}`);
  const now = await store.sql.get<{ synchronous: number }>('PRAGMA synchronous');
  process.stdout.write(`  (experiment) serve's SQLite connection now has synchronous = ${String(now?.synchronous)} (0 off, 1 normal, 2 full)\n`);
}

/** A node-cron schedule every `s` seconds (`--interval`): `*\/s * * * * *` below a minute, else `0 *\/m * * * *`. */
function cronOf(s: number): string {
  if (s < 60) return `*/${s} * * * * *`;
  return s === 60 ? '0 * * * * *' : `0 */${s / 60} * * * *`;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function runFakes(job: FakesJob): Promise<void> {
  const cw: FakeCloudWatch = await startFakeCloudWatch({ tps: { FilterLogEvents: job.tps } });
  const channels = Array.from({ length: job.channels }, (_, i) => ({ id: channelId(i), name: `alerts-${i}` }));
  const slack: FakeSlack = await startFakeSlack({ channels });
  const kubes: FakeKube[] = [];
  const kubeconfigs: string[] = [];
  const fleet: Array<[string, string]> = [];
  const objects = clusterObjects();
  for (let i = 0; i < job.clusters; i++) {
    const kube = await startFakeKube({ objects: structuredClone(objects) });
    kubes.push(kube);
    const path = join(job.dir, `kubeconfig-${i}.yaml`);
    writeFileSync(path, kubeconfigText(kube.url, clusterName(i)));
    kubeconfigs.push(path);
    fleet.push([clusterName(i), kube.url]);
    const group = `/aws/eks/${clusterName(i)}/cluster`;
    const events = [];
    for (let t = job.startMs - 10 * 60_000, k = 0; t <= job.endMs; t += job.intervalS * 1000, k++) {
      for (const [u, s] of STALE_USERS.entries()) {
        const time = t + u * 1000 + (i % 1000);
        events.push({ timestamp: time, ingestionTime: time, message: auditEvent({ auditID: `${clusterName(i)}-${u}-${k}`, time, kind: 'stale', namespace: s.ns, serviceAccount: s.sa, pod: s.pod, secondsAfterWarning: 7_000_000 }) });
      }
    }
    cw.putEvents(group, `${PREFIX}0`, events);
  }
  // Black-holed API servers for --hung.
  const sockets = new Set<Socket>();
  const hungKubeconfigs: string[] = [];
  const holes: ReturnType<typeof createServer>[] = [];
  for (let i = 0; i < job.hung; i++) {
    const hole = createServer((s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((r) => hole.listen(0, '127.0.0.1', r));
    holes.push(hole);
    const path = join(job.dir, `kubeconfig-hung-${i}.yaml`);
    writeFileSync(path, kubeconfigText(`http://127.0.0.1:${(hole.address() as { port: number }).port}`, `hung-${i}`));
    hungKubeconfigs.push(path);
    fleet.push([`hung-${i}`, `http://127.0.0.1:${(hole.address() as { port: number }).port}`]);
    cw.createLogGroup(`/aws/eks/hung-${i}/cluster`);
  }
  // One command a second for the whole run, and some to spare.
  const commands: StatusCommand[] = Array.from({ length: Math.ceil((job.endMs - job.startMs) / 1000) + 600 }, (_, k) => {
    const channel = channelId(k % job.clusters % job.channels);
    return { cluster: clusterName(k % job.clusters), channel, responseUrl: slack.responseUrl({ channel, user: REQUESTER }) };
  });
  const fleetKubeconfig = join(job.dir, 'kubeconfig-fleet.yaml');
  writeFileSync(fleetKubeconfig, fleetKubeconfigText(fleet));
  process.send!({ ready: { cloudwatchUrl: cw.url, slackApiUrl: slack.apiUrl, kubeconfigs, hungKubeconfigs, fleetKubeconfig, commands } satisfies FakesReady });

  let window: { cpu: NodeJS.CpuUsage; t0: number; cw: number; kube: number; updates: number; posts: number } | undefined;
  const kubeCount = (): number => kubes.reduce((n, k) => n + k.requests.length, 0);
  // Keep the fakes' request logs from growing without bound: count, then drop (the counts are what is reported).
  let kubeDropped = 0;
  const trim = setInterval(() => {
    for (const k of kubes) {
      kubeDropped += k.requests.length;
      k.requests.length = 0;
    }
  }, 5_000);
  process.on('message', (m: { windowStart?: true; windowEnd?: true; stop?: true }) => {
    if (m.windowStart) {
      window = { cpu: process.cpuUsage(), t0: performance.now(), cw: cw.requests.length, kube: kubeDropped + kubeCount(), updates: slack.callsTo('chat.update').length, posts: slack.callsTo('chat.postMessage').length };
    }
    if (m.windowEnd && window) {
      const cpu = process.cpuUsage(window.cpu);
      const t1 = performance.now();
      const reqs = cw.requests.slice(window.cw).filter((r) => r.op === 'FilterLogEvents' && r.receivedAt >= window!.t0 && r.receivedAt <= t1);
      const at = reqs.map((r) => r.receivedAt).sort((a, b) => a - b);
      let peak = 0;
      for (let i = 0, j = 0; i < at.length; i++) {
        while (at[i]! - at[j]! >= 1000) j++;
        peak = Math.max(peak, i - j + 1);
      }
      const edits = new Map<string, { n: number; text: string }>();
      for (const c of slack.callsTo('chat.update').slice(window.updates)) {
        const key = `${String(c.args['channel'])} ${String(c.args['ts'])}`;
        const e = edits.get(key) ?? { n: 0, text: '' };
        e.n++;
        e.text = String(c.args['text'] ?? '').slice(0, 80);
        edits.set(key, e);
      }
      const most = [...edits.values()].sort((x, y) => y.n - x.n)[0];
      const stats: WindowStats = {
        cpuMs: (cpu.user + cpu.system) / 1000,
        filterLogEvents: reqs.length,
        throttled: reqs.filter((r) => r.error === 'ThrottlingException').length,
        peakPerSecond: peak,
        kubeRequests: kubeDropped + kubeCount() - window.kube,
        chatUpdates: slack.callsTo('chat.update').length - window.updates,
        chatPosts: slack.callsTo('chat.postMessage').length - window.posts,
        chatUpdatedMessages: edits.size,
        chatMostEdits: most?.n ?? 0,
        chatMostEditedText: most?.text ?? '',
      };
      process.send!({ stats });
      window = undefined;
    }
    if (m.stop) {
      clearInterval(trim);
      for (const s of sockets) s.destroy();
      for (const h of holes) h.close();
      void Promise.all([cw.close(), slack.close(), ...kubes.map((x) => x.close())]).finally(() => process.exit(0));
    }
  });
}

/**
 * The slash-command client (its own process, as Slack is elsewhere: neither serve's nor the fakes' event loop delays
 * its timing): one signed `/tokens status <cluster>` a second (every {@link FAST_COMMAND_MS} around a burst or a
 * stall); the time from sending to the HTTP answer (Bolt answers when `ack()` runs) of each answered command sent
 * inside the window, ms, and the CPU it used. With `job.webhook` / `job.stall` it also makes the burst and the stall.
 */
function runClient(job: ClientJob): void {
  let k = 0;
  let window: { acks: number[]; cpu: NodeJS.CpuUsage } | undefined;
  /** Events whose fast span is running: each gets the commands sent meanwhile. */
  const spans = new Set<{ acks: EventAcks; until: number }>();
  const send = (): void => {
    const c = job.commands[k++ % job.commands.length]!;
    const t0 = performance.now();
    const w = window;
    const inSpans = [...spans].filter((sp) => t0 <= sp.until);
    void sendSlashCommand(job.eventsUrl, SECRET, { text: `status ${c.cluster}`, user_id: REQUESTER, channel_id: c.channel, response_url: c.responseUrl }).then(
      (res) => {
        const ms = performance.now() - t0;
        if (res.status === 200) w?.acks.push(ms);
        for (const sp of inSpans) {
          if (res.status === 200) sp.acks.times.push(ms);
          else sp.acks.unanswered++;
        }
      },
      () => {
        for (const sp of inSpans) sp.acks.unanswered++;
      },
    );
  };
  let timer = setInterval(send, 1_000);
  const setRate = (ms: number): void => {
    clearInterval(timer);
    timer = setInterval(send, ms);
  };
  /** Events still sending fast: the rate goes back to one a second when none is. */
  let fast = 0;
  /**
   * Runs `event` with fast commands from its start until FAST_AFTER_MS after it ends, then waits for the last answers.
   * `event` returns how long it lasted, s, or nothing for the time it took; a failure is kept in `error`, never thrown.
   */
  const around = async (event: (acks: EventAcks) => Promise<number | undefined>): Promise<EventAcks> => {
    const acks: EventAcks = { times: [], unanswered: 0, seconds: 0, statuses: {} };
    const span = { acks, until: Number.POSITIVE_INFINITY };
    spans.add(span);
    fast++;
    setRate(FAST_COMMAND_MS);
    try {
      const t0 = performance.now();
      const lasted = await event(acks).catch((err: unknown) => {
        acks.error = err instanceof Error ? err.message : String(err);
      });
      acks.seconds = typeof lasted === 'number' ? lasted : (performance.now() - t0) / 1000;
      span.until = performance.now() + FAST_AFTER_MS;
      await new Promise((r) => setTimeout(r, FAST_AFTER_MS));
    } finally {
      if (--fast === 0) setRate(1_000);
    }
    await new Promise((r) => setTimeout(r, 5_000)); // the last commands' answers
    spans.delete(span);
    return acks;
  };
  const burst = (w: NonNullable<ClientJob['webhook']>) =>
    around(async (acks) => {
      let next = 0;
      const ca = Buffer.from(w.ca);
      const t = Date.now();
      await Promise.all(
        Array.from({ length: BURST_CONCURRENCY }, async () => {
          while (next < w.batches) {
            const b = next++;
            const events = Array.from({ length: BURST_BATCH_EVENTS }, (_, i) =>
              auditEvent({ auditID: `burst-${b}-${i}`, time: t, kind: i % 50 === 0 ? 'stale' : 'unauthorized', pod: 'burst-p0', secondsAfterWarning: 100 }),
            );
            let timer: NodeJS.Timeout | undefined;
            const post = postBatch({ port: w.port, ca, token: w.token, body: eventList(events) }).catch(() => ({ status: 0 }));
            const res = await Promise.race([post, new Promise<{ status: number }>((r) => (timer = setTimeout(() => r({ status: 0 }), 30_000)))]);
            clearTimeout(timer);
            acks.statuses[String(res.status)] = (acks.statuses[String(res.status)] ?? 0) + 1;
          }
        }),
      );
      return undefined; // it lasted as long as it took
    });
  const stall = (st: NonNullable<ClientJob['stall']>) =>
    around(
      () =>
        new Promise<number>((resolveHeld, rejectHeld) => {
          // A process of its own holds the write lock; this one's event loop keeps sending commands meanwhile. It
          // prints a line when it has the lock and another when it has released it: the time between is the stall.
          const holder = spawn(process.execPath, ['-e', LOCK_HOLDER, st.dbPath, String(st.seconds * 1000)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
          const marks: number[] = [];
          holder.stdout.on('data', (d: Buffer) => {
            for (const _ of d.toString().matchAll(/\n/g)) marks.push(performance.now());
          });
          holder.once('error', rejectHeld);
          holder.once('exit', (code) =>
            code === 0 && marks.length >= 2 ? resolveHeld((marks[1]! - marks[0]!) / 1000) : rejectHeld(new Error(`the lock holder exited with ${code}`)),
          );
        }),
    );
  const reports: { burst?: Promise<EventAcks>; stall?: Promise<EventAcks> } = {};
  process.on('message', (m: { windowStart?: true; windowEnd?: true; stop?: true }) => {
    if (m.windowStart) {
      window = { acks: [], cpu: process.cpuUsage() };
      const w = job.webhook;
      const st = job.stall;
      if (w) reports.burst = new Promise((r) => setTimeout(() => r(burst(w)), job.windowMs / 4));
      if (st) reports.stall = new Promise((r) => setTimeout(() => r(stall(st)), (job.windowMs * 3) / 4));
    }
    if (m.windowEnd && window) {
      const w = window;
      window = undefined;
      // The last commands of the window may still be on their way: give them a few seconds.
      setTimeout(() => {
        void (async () => {
          const cpu = process.cpuUsage(w.cpu);
          const report: ClientReport = { times: w.acks, cpuMs: (cpu.user + cpu.system) / 1000 };
          if (reports.burst) report.burst = await reports.burst;
          if (reports.stall) report.stall = await reports.stall;
          process.send!({ acks: report });
        })();
      }, 5_000);
    }
    if (m.stop) {
      clearInterval(timer);
      process.exit(0);
    }
  });
}

/**
 * The `--db-stall` lock holder, run as `node -e LOCK_HOLDER <database file> <ms>` from the repository root: takes the
 * SQLite write lock (`BEGIN IMMEDIATE`, waiting up to 5 s for serve's own) and releases it `ms` later.
 */
const LOCK_HOLDER = `
const Database = require('better-sqlite3');
const db = new Database(process.argv[1], { timeout: 5000 });
db.exec('BEGIN IMMEDIATE');
process.stdout.write('locked\\n');
setTimeout(() => { db.exec('COMMIT'); process.stdout.write('released\\n'); db.close(); }, Number(process.argv[2]));
`;

// ---------------------------------------------------------------------------------------------------------------
// serve (this process), one N

interface RunResult {
  n: number;
  scheduled: number;
  ran: number;
  failed: number;
  missed: number;
  late: number;
  stats: WindowStats;
  /** `/tokens status` ack times of the window, ms, the client's CPU, ms, and the acks around a burst or a stall. */
  acks: ClientReport;
  windowS: number;
  serveCpuMs: number;
  peakRssMiB: number;
  firstPollsS: number;
  /** Slack notification items still queued when the window began (0 unless the warm-up's did not drain in time). */
  queuedAtWindow: number;
  /** When the queue was empty (or the wait for it gave up), s after `startServe` was called. */
  queueEmptyS: number;
  /** When the Slack integration had started, s after `startServe` was called. */
  slackStartedS: number;
  hungStatus: string[];
  /** serve's event-loop delay over the window (`monitorEventLoopDelay`, 10 ms resolution), ms. */
  eventLoop: { p50: number; p99: number; max: number; over50: number };
  /** Peak V8 heap used in serve's process, MiB. */
  peakHeapMiB: number;
  /** At the window's RSS peak: RSS, V8's committed heap, the part of it in use, and `external`, MiB. */
  windowMemoryMiB: { rss: number; heapTotal: number; heapUsed: number; external: number };
  /** Long tasks in serve's profile of the window (with `--profile`). */
  longTasks?: string[];
  /** serve's warning and error log lines of the window by `<level> <message>`, most first. */
  logs: [string, number][];
}

/**
 * A log destination for serve that counts warning and error lines by level and message while `counting` is set
 * (serve's logger is at level `warn`; nothing is printed).
 */
function countingLog(): { stream: NodeJS.WritableStream; counts: Map<string, number>; counting: boolean } {
  const c = { counts: new Map<string, number>(), counting: false } as { stream: NodeJS.WritableStream; counts: Map<string, number>; counting: boolean };
  c.stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      if (c.counting) {
        for (const line of chunk.toString().split('\n')) {
          if (!line) continue;
          let rec: { level?: string; msg?: string } = {};
          try {
            rec = JSON.parse(line) as typeof rec;
          } catch {
            rec = { msg: `(not JSON) ${line.slice(0, 60)}` };
          }
          const key = `${rec.level ?? '?'} ${rec.msg ?? ''}`;
          c.counts.set(key, (c.counts.get(key) ?? 0) + 1);
        }
      }
      done();
    },
  });
  return c;
}

function counterSum(text: string, name: string, filter: (labels: string) => boolean = () => true): number {
  let sum = 0;
  for (const m of text.matchAll(new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`, 'gm'))) if (filter(m[1]!)) sum += Number(m[2]);
  return sum;
}

async function runOne(n: number, a: Args): Promise<RunResult> {
  const dir = mkdtempSync(join(tmpdir(), 'tw-fleet-'));
  const intervalMs = a.intervalS * 1000;
  const startMs = Date.now();
  // Warm-up ≤ 3 intervals, then the window, then slack.
  const endMs = startMs + (a.cycles + 6) * intervalMs;
  const spawnPart = (role: '--fakes' | '--client'): ChildProcess => fork(fileURLToPath(import.meta.url), [role], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const child = spawnPart('--fakes');
  const from = <T>(proc: ChildProcess, key: string): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const on = (m: Record<string, unknown>) => {
        if (key in m) {
          proc.off('message', on);
          resolve(m[key] as T);
        }
      };
      proc.on('message', on);
      proc.once('exit', (code) => reject(new Error(`${proc === child ? 'fakes' : 'client'} exited with ${code}`)));
    });
  const fromChild = <T>(key: string): Promise<T> => from<T>(child, key);
  const readyP = fromChild<FakesReady>('ready');
  child.send({ tps: a.tps, clusters: n, hung: a.hung, channels: a.channels, intervalS: a.intervalS, dir, startMs, endMs } satisfies FakesJob);
  const ready = await readyP;
  const clusters = [
    ...ready.kubeconfigs.map((kubeconfig, i) => ({ name: clusterName(i), kubeconfig, channel: channelId(i % a.channels) })),
    ...ready.hungKubeconfigs.map((kubeconfig, i) => ({ name: `hung-${i}`, kubeconfig, channel: channelId(i % a.channels) })),
  ];
  // --webhook-burst: one more cluster whose audit events come through serve's webhook listener (Kubernetes: cluster 0's).
  const cert = a.webhookBurst > 0 ? selfSignedCert(dir) : undefined;
  if (cert) writeFileSync(join(dir, 'webhook-token'), WEBHOOK_TOKEN);
  const auditOf = (name: string) =>
    cert && name === WEBHOOK_CLUSTER
      ? { webhook: { host: '127.0.0.1', port: 0, certFile: cert.certFile, keyFile: cert.keyFile, tokenFile: join(dir, 'webhook-token') } }
      : { cloudwatch: { region: 'us-east-1', logGroup: `/aws/eks/${name}/cluster`, endpoint: ready.cloudwatchUrl } };
  if (cert) clusters.push({ name: WEBHOOK_CLUSTER, kubeconfig: ready.kubeconfigs[0]!, channel: channelId(0) });
  const config = parseConfig(
    {
      store: { path: join(dir, 'tw.db') },
      http: { host: '127.0.0.1', port: 0 },
      log: { level: 'silent' },
      slack: { enabled: true, mode: 'http', apiUrl: ready.slackApiUrl, port: 0 },
      poll: { jitter: '0s', spread: true, concurrency: a.concurrency, requestTimeout: '5s', cloudwatchTps: { filterLogEvents: a.tps } },
      clusters: clusters.map((c) => ({
        name: c.name,
        audit: auditOf(c.name),
        kubernetes:
          a.kubeconfig === 'one'
            ? { kubeconfig: ready.fleetKubeconfig, context: c.name === WEBHOOK_CLUSTER ? clusterName(0) : c.name }
            : { kubeconfig: c.kubeconfig },
        schedule: cronOf(a.intervalS),
        lookback: '15m',
        slack: { channel: c.channel, approvers: ['U0BENCHAPP'], requesters: ['*'] },
      })),
    },
    { SLACK_BOT_TOKEN: DEFAULT_BOT_TOKEN, SLACK_SIGNING_SECRET: SECRET, AWS_ACCESS_KEY_ID: 'AKIDFLEET', AWS_SECRET_ACCESS_KEY: 'fleet' },
  );
  process.env['AWS_ACCESS_KEY_ID'] = 'AKIDFLEET';
  process.env['AWS_SECRET_ACCESS_KEY'] = 'fleet-bench-secret';
  const metrics = new Metrics();
  let bot: SlackIntegration | undefined;
  let peakRss = process.memoryUsage.rss();
  let peakHeap = 0;
  // The same peaks from the window's start on (steady state, without the first lists and first polls) and the
  // breakdown at the window's RSS peak: V8's committed heap, and memory outside it (`external`: Buffers, SQLite's
  // and undici's native allocations that V8 is told about).
  let inWindow = false;
  const windowPeak = { rss: 0, heapTotal: 0, heapUsed: 0, external: 0 };
  let ticks = 0;
  const rssTimer = setInterval(() => {
    const rss = process.memoryUsage.rss();
    peakRss = Math.max(peakRss, rss);
    if (inWindow && rss > windowPeak.rss) {
      const m = process.memoryUsage();
      Object.assign(windowPeak, { rss, heapTotal: m.heapTotal, heapUsed: m.heapUsed, external: m.external });
    }
    if (++ticks % 8 === 0) peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
  }, 250);
  // serve's warnings and errors in the window, counted by level and message (a stalled store's failed writes among them).
  const logCounter = countingLog();
  const t0 = performance.now();
  // Clusters whose poll has been alerted on (the Slack integration's afterPoll has run).
  const firstDone = new Set<string>();
  const serve = await startServe(config, {
    logger: createLogger({ level: 'warn', destination: logCounter.stream }),
    metrics,
    // At start a thousand clusters' watch caches list at once: a Slack start that timed out is retried soon.
    integrationRetryMs: 1_000,
    integrations: [
      async (ctx) => {
        const started = await startSlackWith(ctx, { host: '127.0.0.1' });
        const alert = started.afterPoll;
        bot = {
          ...started,
          afterPoll: async (rt, findings, outcome) => {
            await alert?.(rt, findings, outcome);
            firstDone.add(rt.config.name);
          },
        };
        return bot;
      },
    ],
  });
  await serve.integrationStarted('slack');
  const slackStartedS = (performance.now() - t0) / 1000;
  if (a.sqliteSynchronous) await setSynchronous(serve.context.store, a.sqliteSynchronous);
  const client = spawnPart('--client');
  const webhookPort = serve.context.clusters.get(WEBHOOK_CLUSTER)?.webhookPort;
  if (cert && webhookPort === undefined) throw new Error(`--webhook-burst: serve did not start the webhook listener of ${WEBHOOK_CLUSTER}`);
  client.send({
    eventsUrl: bot!.eventsUrl!,
    commands: ready.commands,
    windowMs: a.cycles * intervalMs,
    ...(cert && webhookPort !== undefined ? { webhook: { port: webhookPort, ca: cert.cert.toString('utf8'), token: WEBHOOK_TOKEN, batches: a.webhookBurst } } : {}),
    ...(a.dbStallS > 0 ? { stall: { dbPath: join(dir, 'tw.db'), seconds: a.dbStallS } } : {}),
  } satisfies ClientJob);
  const healthy = [...serve.context.clusters.keys()].filter((c) => !c.startsWith('hung-'));
  // Warm-up: the first polls of the healthy clusters (their alerts posted), at most 3 intervals.
  const warmUntil = performance.now() + 3 * intervalMs;
  while (healthy.some((c) => !firstDone.has(c)) && performance.now() < warmUntil) await new Promise((r) => setTimeout(r, 200));
  const firstPollsS = (performance.now() - t0) / 1000;
  // One more interval for the backlog of the warm-up to drain, and more (at most 3 intervals) until the Slack
  // notification queue is empty: the warm-up's alerts still queued would be sent, and counted, in the window.
  await new Promise((r) => setTimeout(r, intervalMs));
  const queueDepth = async (): Promise<number> => (await metrics.slackQueueDepth.get()).values[0]?.value ?? 0;
  const drainUntil = performance.now() + 3 * intervalMs;
  while ((await queueDepth()) > 0 && performance.now() < drainUntil) await new Promise((r) => setTimeout(r, 1000));
  const queuedAtWindow = await queueDepth();
  const queueEmptyS = (performance.now() - t0) / 1000;
  // Then align the window to a tick boundary.
  await new Promise((r) => setTimeout(r, intervalMs - (Date.now() % intervalMs) + 5));
  const before = await metrics.text();
  const cpu0 = process.cpuUsage();
  const w0 = performance.now();
  const statsP = fromChild<WindowStats>('stats');
  const eld = monitorEventLoopDelay({ resolution: 10 });
  // Delays over 50 ms, counted apart from the histogram: how often a task held the loop that long.
  let over50 = 0;
  let expected = performance.now() + 10;
  const lag = setInterval(() => {
    const now = performance.now();
    if (now - expected > 50) over50++;
    expected = now + 10;
  }, 10);
  let session: Session | undefined;
  if (a.profile) {
    session = new Session();
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 1000 });
    await session.post('Profiler.start');
  }
  eld.enable();
  inWindow = true;
  logCounter.counting = true;
  child.send({ windowStart: true });
  client.send({ windowStart: true });
  const acksP = from<RunResult['acks']>(client, 'acks');
  await new Promise((r) => setTimeout(r, a.cycles * intervalMs));
  child.send({ windowEnd: true });
  client.send({ windowEnd: true });
  eld.disable();
  logCounter.counting = false;
  clearInterval(lag);
  const cpu = process.cpuUsage(cpu0);
  const windowS = (performance.now() - w0) / 1000;
  let longTaskLines: string[] | undefined;
  if (session) {
    const { profile } = (await session.post('Profiler.stop')) as unknown as { profile: CpuProfile };
    session.disconnect();
    const file = resolve(`${a.profile}-${n}.cpuprofile`);
    writeFileSync(file, JSON.stringify(profile));
    longTaskLines = [`serve's CPU profile of the window: ${file}`, ...formatLongTasks(longTasks(profile))];
  }
  const after = await metrics.text();
  const stats = await statsP;
  const acks = await acksP;
  const onlyHealthy = (labels: string) => !labels.includes('cluster="hung-');
  const delta = (name: string, filter: (l: string) => boolean) => counterSum(after, name, filter) - counterSum(before, name, filter);
  // Read before a heap snapshot, which itself needs hundreds of MiB.
  const maxRss = Math.max(peakRss, process.resourceUsage().maxRSS * 1024);
  if (a.heapSnapshot) writeHeapSnapshot(resolve(`${a.heapSnapshot}-${n}.heapsnapshot`));
  const hungStatus = [...serve.context.clusters.keys()].filter((c) => c.startsWith('hung-')).map((c) => `${c}: ${serve.readiness().polls[c]}`);
  clearInterval(rssTimer);
  const result: RunResult = {
    n,
    scheduled: healthy.length * a.cycles,
    ran: delta('tokenwatch_polls_total', (l) => onlyHealthy(l) && !l.includes('skipped-overlap')),
    failed: delta('tokenwatch_polls_total', (l) => onlyHealthy(l) && l.includes('outcome="error"')),
    missed: delta('tokenwatch_polls_missed_total', onlyHealthy),
    late: delta('tokenwatch_polls_late_total', onlyHealthy),
    stats,
    acks,
    windowS,
    serveCpuMs: (cpu.user + cpu.system) / 1000,
    peakRssMiB: maxRss / 1048576,
    windowMemoryMiB: {
      rss: windowPeak.rss / 1048576,
      heapTotal: windowPeak.heapTotal / 1048576,
      heapUsed: windowPeak.heapUsed / 1048576,
      external: windowPeak.external / 1048576,
    },
    firstPollsS,
    queuedAtWindow,
    queueEmptyS,
    slackStartedS,
    hungStatus,
    eventLoop: { p50: eld.percentile(50) / 1e6, p99: eld.percentile(99) / 1e6, max: eld.max / 1e6, over50 },
    peakHeapMiB: peakHeap / 1048576,
    logs: [...logCounter.counts.entries()].sort((x, y) => y[1] - x[1]),
    ...(longTaskLines ? { longTasks: longTaskLines } : {}),
  };
  client.send({ stop: true });
  await serve.stop();
  child.send({ stop: true });
  await new Promise<void>((r) => (child.exitCode !== null ? r() : child.once('exit', () => r())));
  rmSync(dir, { recursive: true, force: true });
  return result;
}

function report(r: RunResult, a: Args): void {
  const line = (s: string) => process.stdout.write(`${s}\n`);
  const s = r.stats;
  const polls = Math.max(1, r.ran);
  line(`N = ${r.n} clusters${a.hung ? ` (+ ${a.hung} hung)` : ''}, schedule every ${a.intervalS} s (\`${cronOf(a.intervalS)}\`: 5 minutes compressed ${(300 / a.intervalS).toFixed(2).replace(/\.?0+$/, '')}×), ${a.cycles} cycles measured (${r.windowS.toFixed(0)} s), poll.concurrency ${a.concurrency}, ${a.channels} channels${a.heapMiB ? `, serve's heap capped at ${a.heapMiB} MiB` : ''}${a.kubeconfig === 'one' ? ', one kubeconfig file of every context' : ''}${a.webhookBurst ? `, + 1 webhook cluster (${WEBHOOK_CLUSTER})` : ''}`);
  line(`  Slack started after      ${r.slackStartedS.toFixed(1)} s; first polls done after ${r.firstPollsS.toFixed(1)} s; Slack queue ${r.queuedAtWindow === 0 ? `empty after ${r.queueEmptyS.toFixed(1)} s` : `still ${r.queuedAtWindow} items at the window's start (their sends are in its figures)`}`);
  line(`  polls run / scheduled / missed   ${r.ran} / ${r.scheduled} / ${r.missed}   (failed ${r.failed}, late ${r.late})`);
  line(`  CloudWatch FilterLogEvents       ${(s.filterLogEvents / r.windowS).toFixed(2)} req/s mean, ${s.peakPerSecond} peak in 1 s (one account; budget ${a.tps}/s = AWS's 5/s × the compression), ${s.throttled} throttled`);
  line(`  Kubernetes requests per poll     ${(s.kubeRequests / polls).toFixed(1)} per cluster`);
  line(`  chat.update per cycle            ${(s.chatUpdates / a.cycles).toFixed(1)}   (chat.postMessage ${(s.chatPosts / a.cycles).toFixed(1)})${s.chatUpdates ? `; ${s.chatUpdatedMessages} messages edited, at most ${s.chatMostEdits} times (${JSON.stringify(s.chatMostEditedText)})` : ''}`);
  line(`  peak RSS (serve)                 ${r.peakRssMiB.toFixed(0)} MiB from the start (V8 heap used ≤ ${r.peakHeapMiB.toFixed(0)} MiB)`);
  const w = r.windowMemoryMiB;
  line(`    in the window                  ${w.rss.toFixed(0)} MiB: V8 heap ${w.heapTotal.toFixed(0)} MiB committed (${w.heapUsed.toFixed(0)} used), external ${w.external.toFixed(0)} MiB, the rest ${(w.rss - w.heapTotal - w.external).toFixed(0)} MiB (code, stacks, native)`);
  line(`  CPU per cycle                    serve ${(r.serveCpuMs / a.cycles / 1000).toFixed(2)} s, fakes ${(s.cpuMs / a.cycles / 1000).toFixed(2)} s, client ${(r.acks.cpuMs / a.cycles / 1000).toFixed(2)} s (of ${a.intervalS * cpus().length} CPU-s)`);
  /** `p50 … ms, p99 … ms, max … ms (N commands` of ack times, ms. */
  const ackSummary = (times: number[]): string => {
    const t = [...times].sort((x, y) => x - y);
    return `p50 ${percentile(t, 50).toFixed(1)} ms, p99 ${percentile(t, 99).toFixed(1)} ms, max ${(t.at(-1) ?? Number.NaN).toFixed(1)} ms (${t.length} commands`;
  };
  line(`  /tokens status ack               ${ackSummary(r.acks.times)})`);
  const around = (what: string, e: EventAcks): void => {
    line(`    ${what} ${ackSummary(e.times)}, ${e.unanswered} unanswered)${e.error ? `; FAILED: ${e.error}` : ''}`);
  };
  if (r.acks.burst) {
    const st = Object.entries(r.acks.burst.statuses).map(([code, n]) => `${n} × ${code === '0' ? 'no answer' : `HTTP ${code}`}`).join(', ');
    around(`around the webhook burst (${a.webhookBurst} batches × ${BURST_BATCH_EVENTS} events in ${r.acks.burst.seconds.toFixed(1)} s: ${st})`, r.acks.burst);
  }
  if (r.acks.stall) around(`around the database stall (write lock held ${r.acks.stall.seconds.toFixed(1)} s)`, r.acks.stall);
  line(`  event-loop delay (serve)         p50 ${r.eventLoop.p50.toFixed(1)} ms, p99 ${r.eventLoop.p99.toFixed(1)} ms, max ${r.eventLoop.max.toFixed(1)} ms; ${r.eventLoop.over50} delays > 50 ms`);
  const logTotal = r.logs.reduce((n, [, k]) => n + k, 0);
  line(`  serve's warnings and errors      ${logTotal} in the window${logTotal ? `: ${r.logs.slice(0, 4).map(([m, k]) => `${k} × ${JSON.stringify(m.slice(0, 90))}`).join(', ')}` : ''}`);
  if (r.hungStatus.length) line(`  hung clusters (/readyz)          ${r.hungStatus.join(', ')}`);
  line(`  machine: ${cpus().length} CPUs, load ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  for (const l of r.longTasks ?? []) line(`  ${l}`);
}

async function main(): Promise<void> {
  const a = parseArgs(process.argv.slice(2));
  if (a.heapMiB > 0 && process.env['BENCH_FLEET_HEAP_MIB'] !== String(a.heapMiB)) {
    // The cap is a V8 start flag: run this script again with it (the fakes and the client keep their own defaults).
    const again = spawn(process.execPath, [`--max-old-space-size=${a.heapMiB}`, '--import', 'tsx', fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
      stdio: 'inherit',
      env: { ...process.env, BENCH_FLEET_HEAP_MIB: String(a.heapMiB) },
    });
    const code = await new Promise<number>((r) => again.once('exit', (c, sig) => r(c ?? (sig ? 1 : 0))));
    process.exit(code);
  }
  for (const n of a.clusters) report(await runOne(n, a), a);
}

if (process.argv.includes('--client') || process.argv.includes('--fakes')) {
  // A child ends with its parent (serve's process), also when that one failed.
  process.once('disconnect', () => process.exit(0));
}
if (process.argv.includes('--client')) {
  process.once('message', (job) => runClient(job as ClientJob));
} else if (process.argv.includes('--fakes')) {
  process.once('message', (job) => {
    runFakes(job as FakesJob).catch((err: unknown) => {
      process.stderr.write(`bench/fleet fakes failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    });
  });
} else {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`bench/fleet failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    },
  );
}
