/**
 * `tokenwatch sandbox`: the whole loop on one machine, on 127.0.0.1 only — no Slack workspace, cluster or AWS
 * account. It starts:
 * 1. the fake Slack Web API (`src/sandbox/fakes/slack.ts`) with one channel and three people (requester, approver, outsider);
 * 2. a simulated Kubernetes API: the fake API server (`src/sandbox/fakes/kubernetes.ts`) seeded from the bundled cluster
 *    snapshot, with the workload controller simulation (`controller.ts`): a rollout restart really rolls;
 * 3. the replay writer (`replay.ts`): the bundled audit logs, shifted so their reference time is the sandbox's
 *    start, then live traffic as sandbox time passes (tokens age `speed` times faster; a static-token-file pod
 *    goes stale again one sandbox hour after a restart: a recurrence);
 * 4. the real `tokenwatch serve`, built by the same builder as the CLI's (`composeServe`, `src/runtime/compose.ts`),
 *    with the fakes substituted: a file audit source on that log, the simulated cluster through a kubeconfig file,
 *    Slack in HTTP mode against the fake Web API, a short schedule and no jitter, on the sandbox clock;
 * 5. the local channel page (`server.ts`).
 *
 * State lives in `dataDir` (default `./data/sandbox`): the store (`tokenwatch.db`), the audit log, the cluster
 * objects, the Slack channel, the sandbox clock. A second run continues from it (messages keep their `ts`, so the
 * alerts are updated in place, not posted again); `reset` starts over. The sandbox writes only into a folder it
 * created or was given empty (marked by {@link DATA_DIR_MARKER}), and `reset` removes only the files it writes.
 * See docs/sandbox.md.
 */
import { ErrorCode, TokenwatchError } from '../errors.js';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, readFileSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, rmdir, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { stringify } from 'yaml';
import { parseConfig, type Config } from '../config/index.js';
import catalog from '../findings/catalog.json' with { type: 'json' };
import { createLogger, type Logger } from '../observability/logger.js';
import type { SlackIntegration } from '../runtime/build-slack.js';
import { composeServe } from '../runtime/compose.js';
import type { ServeHandle } from '../runtime/serve-options.js';
import { SimClock, StrictClock, tsToMs } from './clock.js';
import { refreshProbeObjects, SandboxApiServerMetrics, sandboxProbeProofs } from './probe-metrics.js';
import { clusterView, kubeconfigYaml, loadObjects, savedObjects, saveObjects, seedObjects, summarizeWorkloads } from './cluster.js';
import { ROLLOUT_ANNOTATION, WorkloadController } from './controller.js';
import { loadFakes, type FakeKube, type FakeMessage, type FakeSlack } from './fakes/index.js';
import { AuditLogWriter, learnTemplates, LiveTraffic, loadBundle, shiftTimestampsDeep, shiftTimestampsInText } from './replay.js';
import { startPageServer, type PageServer, type SandboxUser } from './server.js';
import { startSandboxGke } from './gke.js';
import type { SandboxCloudCluster } from './cloud-cluster.js';
import { SANDBOX_AKS_FILES, startSandboxAks } from './aks.js';

/** The simulated cluster's name (the examples' cluster). */
export const SANDBOX_CLUSTER = 'prod-eks';
/** The cluster's alert channel: alerts no routing rule sends elsewhere. */
export const SANDBOX_CHANNEL = { id: 'C0OPSPROD1', name: 'ops-prod-eks' } as const;
/** The network team's channel: the routing rule for kube-system DaemonSets (Multus) sends its alerts here. */
export const SANDBOX_NET_CHANNEL = { id: 'C0NETALERT', name: 'net-alerts' } as const;
/** The platform team's channel: the routing rule for flux-system (Flux) sends its alerts here. */
export const SANDBOX_PLATFORM_CHANNEL = { id: 'C0PLATFORM', name: 'platform' } as const;
/** The network on-call user group the kube-system rule mentions (`<!subteam^…>`). */
export const SANDBOX_NET_ONCALL = { id: 'S0NETONCAL', handle: 'network-oncall' } as const;
/** The channels the page lists, the one it opens at first: the routed teams' channels, then the cluster's. */
const PAGE_CHANNELS = [
  { ...SANDBOX_NET_CHANNEL, topic: `network team · kube-system DaemonSets of ${SANDBOX_CLUSTER} · mentions @${SANDBOX_NET_ONCALL.handle}` },
  { ...SANDBOX_PLATFORM_CHANNEL, topic: `platform team · flux-system of ${SANDBOX_CLUSTER}` },
  { ...SANDBOX_CHANNEL, topic: `${SANDBOX_CLUSTER}'s channel · every other alert of ${SANDBOX_CLUSTER}` },
];
/** The people of the sandbox: who may request and approve is set in its config (requesters, approvers). */
export const SANDBOX_USERS: readonly SandboxUser[] = [
  { id: 'U0REQUEST', name: 'Riya', role: 'requester' },
  { id: 'U0APPROVE', name: 'Ahmed', role: 'approver' },
  { id: 'U0APPROVB', name: 'Mei', role: 'approver' },
  { id: 'U0OUTSIDE', name: 'Olu', role: 'outsider' },
];
/** The fake workspace and bot. */
export const SANDBOX_TEAM = { id: 'T0SANDBOX1', domain: 'tokenwatch-sandbox' } as const;
export const SANDBOX_BOT = { userId: 'U0TOKENWAT', botId: 'B0TOKENWAT', name: 'tokenwatch' } as const;
/** The bot token the fake Slack accepts (not a secret: the fake is on loopback). */
export const SANDBOX_BOT_TOKEN = 'xoxb-sandbox-0000000000-tokenwatch';

/** Workloads the page's cluster panel shows (the examples' findings). */
const PANEL_WORKLOADS = [
  { kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds' },
  { kind: 'DaemonSet', namespace: 'logging', name: 'fluent-bit' },
  { kind: 'Deployment', namespace: 'flux-system', name: 'helm-controller' },
];

/**
 * Files the sandbox writes in its data directory, relative to it: what `reset` removes, and nothing else (the
 * `audit` folder goes too only when it is left empty). Temporary `.tmp` siblings of the JSON files are included.
 */
const DATA_FILES = [
  'tokenwatch.db',
  'tokenwatch.db-wal',
  'tokenwatch.db-shm',
  'audit/kube-apiserver-audit.log',
  'cluster.json',
  'cluster.json.tmp',
  'slack.json',
  'slack.json.tmp',
  'sandbox.json',
  'sandbox.json.tmp',
  'kubeconfig',
  'kubeconfig-gke',
  ...SANDBOX_AKS_FILES,
  'tokenwatch.yaml',
  'sandbox.log',
];

/** The marker file: the sandbox writes only into a data directory holding it (one it created, or was given empty). */
export const DATA_DIR_MARKER = '.tokenwatch-sandbox';
const MARKER_TEXT =
  'This folder holds the state of `tokenwatch sandbox` (it created it, or was given it empty).\n' +
  '`tokenwatch sandbox --reset` removes only the files the sandbox writes here; anything else you put here stays.\n';

/** Options of {@link startSandbox}. */
export interface SandboxOptions {
  /** Page port on 127.0.0.1 (0 = any free port). Default 8787. */
  port?: number;
  /** Sandbox ms per wall-clock ms, ≥ 1. Default 60 (one sandbox hour per minute). */
  speed?: number;
  /** State directory. Default `./data/sandbox`. */
  dataDir?: string;
  /** Start over: remove the sandbox's files in `dataDir` first. */
  reset?: boolean;
  /** Poll interval of `serve`, wall-clock seconds (1–59). Default 10. */
  pollEverySeconds?: number;
  /** Bundled examples. Default `examples/` of this repository. */
  examplesDir?: string;
  /** Log level of the sandbox log (`dataDir/sandbox.log`). Default `info`. */
  logLevel?: string;
  /** Where logs go (default the sandbox log file). */
  logDestination?: NodeJS.WritableStream;
  /** Wall-clock ms per replaced pod during a rollout. Default 1200. */
  stepMs?: number;
  /** Wall-clock ms between two writes of live audit traffic. Default 1000. */
  tickMs?: number;
  /** Slack app tuning: min ms between posts to the channel (default 300), rollout progress reads (default 1000). */
  channelIntervalMs?: number;
  rolloutPollMs?: number;
  /** Start the tokenwatch Slack app (default true). Without it the page shows the channel but nothing answers. */
  slack?: boolean;
  /** Also run a GKE cluster, `prod-gke`, read from the loopback Cloud Logging (`gke.ts`). Default false. */
  gke?: boolean;
  /** Also run an AKS cluster, `prod-aks`, read from the loopback Log Analytics workspace (`aks.ts`). Default false. */
  aks?: boolean;
}

/** A running sandbox. */
export interface SandboxHandle {
  /** The channel page, `http://127.0.0.1:<port>/`. */
  url: string;
  port: number;
  dataDir: string;
  auditLog: string;
  kubeconfig: string;
  /** Whether this run continued from saved state (no reset, state found). */
  resumed: boolean;
  speed: number;
  pollEverySeconds: number;
  clock: SimClock;
  config: Config;
  slack: FakeSlack;
  kube: FakeKube;
  /** With `gke`: the GKE cluster's fake API server. */
  gkeKube?: FakeKube;
  /** With `aks`: the AKS cluster's fake API server. */
  aksKube?: FakeKube;
  serve: ServeHandle;
  /** The tokenwatch Slack app, when started. */
  app?: SlackIntegration;
  controller: WorkloadController;
  page: PageServer;
  logger: Logger;
  /** Writes one round of live audit traffic now (also runs every `tickMs`). */
  tick(): Promise<void>;
  /** Saves state and stops everything; idempotent. */
  stop(): Promise<void>;
}

/** What `sandbox.json` holds. */
interface SavedState {
  version: 1;
  /** Seconds the bundled examples are shifted by (examples' reference time → sandbox start). */
  shiftSec: number;
  /** Sandbox time when last saved, epoch ms. */
  simNow: number;
  startedAt: number;
}

/** ServiceAccounts (`namespace/name`) of cause `static-token-file` in the cause catalog (e.g. `kube-system/multus`). */
export function staticTokenSubjects(): Set<string> {
  const out = new Set<string>();
  const entries = (catalog as { entries?: Array<{ cause?: string; match?: { serviceAccounts?: Array<{ namespace?: string; name: string }> } }> }).entries ?? [];
  for (const e of entries) {
    if (e.cause !== 'static-token-file') continue;
    for (const sa of e.match?.serviceAccounts ?? []) if (sa.namespace) out.add(`${sa.namespace}/${sa.name}`);
  }
  return out;
}

/** The sandbox's `tokenwatch serve` configuration file (as YAML would hold it). Durations scale with `speed`. */
export function sandboxConfigFile(o: { dataDir: string; auditLog: string; kubeconfig: string; speed: number; pollEverySeconds: number; apiUrl: string }): Record<string, unknown> {
  const scaled = (realMinutes: number) => `${Math.ceil(realMinutes * 60 * o.speed)}s`;
  return {
    store: { path: join(o.dataDir, 'tokenwatch.db') },
    http: { host: '127.0.0.1', port: 0 },
    log: { level: 'info' },
    slack: {
      enabled: true,
      mode: 'http',
      apiUrl: o.apiUrl,
      port: 0,
      // Sandbox time runs `speed` times faster: keep 30 real minutes to decide.
      // A request left open for 2 real minutes is reminded in its thread (docs/sandbox.md step 5).
      approvals: { expiresAfter: scaled(30), remindAfter: scaled(2) },
      // Team routing (docs/slack.md "Routing alerts to team channels"): the Multus DaemonSet's alert goes to the
      // network team's channel, mentioning its on-call group once; Flux's to the platform team's; the rest stays in
      // the cluster's channel. Only prod-eks: a cluster added with --gke keeps all its alerts in its own channel.
      routes: [
        {
          match: { clusters: [SANDBOX_CLUSTER], namespaces: ['kube-system'], kinds: ['DaemonSet'] },
          channel: SANDBOX_NET_CHANNEL.id,
          owners: [SANDBOX_NET_ONCALL.id],
        },
        { match: { clusters: [SANDBOX_CLUSTER], namespaces: ['flux-system'] }, channel: SANDBOX_PLATFORM_CHANNEL.id },
      ],
    },
    // Rollouts take seconds of wall-clock time: allow 10 real minutes. A new token turns stale one (sandbox) hour
    // after issue, so the settle period stays 2 sandbox hours.
    remediation: { rolloutTimeout: scaled(10), settlePeriod: '2h' },
    clusters: [
      {
        name: SANDBOX_CLUSTER,
        audit: { file: { path: o.auditLog } },
        kubernetes: { kubeconfig: o.kubeconfig },
        maxTokenAge: 'eks',
        schedule: `*/${o.pollEverySeconds} * * * * *`,
        lookback: '72h',
        slack: {
          channel: SANDBOX_CHANNEL.id,
          requesters: ['U0REQUEST', 'U0APPROVE'],
          approvers: ['U0APPROVE', 'U0APPROVB', 'U0REQUEST'],
          allowSelfApproval: false,
          // As the chart and the kustomize base ship it: kube-system (the Multus restart) needs two approvers.
          protectedNamespaces: ['kube-system'],
          protectedApprovals: 2,
        },
      },
    ],
  };
}

/** Starts the sandbox; see the module docstring. @throws when a port is taken or the examples cannot be read. */
export async function startSandbox(opts: SandboxOptions = {}): Promise<SandboxHandle> {
  const speed = opts.speed ?? 60;
  const pollEverySeconds = opts.pollEverySeconds ?? 10;
  if (!Number.isInteger(pollEverySeconds) || pollEverySeconds < 1 || pollEverySeconds > 59) throw new RangeError('pollEverySeconds must be a whole number from 1 to 59');
  const dataDir = resolve(opts.dataDir ?? './data/sandbox');
  const examplesDir = opts.examplesDir ?? new URL('../../examples/', import.meta.url).pathname;
  const statePath = join(dataDir, 'sandbox.json');
  const auditLog = join(dataDir, 'audit', 'kube-apiserver-audit.log');
  const kubeconfig = join(dataDir, 'kubeconfig');

  // Refuse before touching any state: a folder the sandbox did not create, another sandbox on it, a taken page port.
  await claimDataDir(dataDir);
  const releaseLock = await lockDataDir(dataDir);
  try {
    if (opts.port !== undefined && opts.port !== 0) await assertPortFree(opts.port);
  } catch (err) {
    await releaseLock();
    throw err;
  }
  if (opts.reset) await removeSandboxFiles(dataDir);
  await mkdir(join(dataDir, 'audit'), { recursive: true });
  const logger = createLogger({ level: opts.logLevel ?? 'info', destination: opts.logDestination ?? createWriteStream(join(dataDir, 'sandbox.log'), { flags: 'a' }), base: { sandbox: true } });

  const fakes = await loadFakes();
  const { startFakeSlack, startFakeKube } = fakes;
  const bundle = loadBundle(examplesDir);
  let saved: SavedState | undefined;
  if (existsSync(statePath) && existsSync(auditLog)) {
    try {
      const v = JSON.parse(readFileSync(statePath, 'utf8')) as Partial<SavedState>;
      if (v.version === 1 && typeof v.shiftSec === 'number' && typeof v.simNow === 'number') saved = v as SavedState;
    } catch (err) {
      logger.warn({ err }, 'sandbox.json unreadable: starting over');
    }
  }
  const resumed = saved !== undefined;
  const realStart = Math.floor(Date.now() / 1000) * 1000;
  const shiftSec = saved?.shiftSec ?? Math.round((realStart - bundle.referenceTime) / 1000);
  const clock = new SimClock({ start: saved?.simNow ?? realStart, speed });
  const state: SavedState = { version: 1, shiftSec, simNow: clock.now(), startedAt: saved?.startedAt ?? realStart };
  const saveState = async () => {
    state.simNow = clock.now();
    await writeFile(`${statePath}.tmp`, JSON.stringify(state), 'utf8');
    await rename(`${statePath}.tmp`, statePath);
  };

  // 1. Fake Slack, on a strictly increasing sandbox clock so saved messages can be restored under their ts.
  const slackClock = new StrictClock(clock.fn);
  const slack = await startFakeSlack({
    tokens: { [SANDBOX_BOT_TOKEN]: { teamId: SANDBOX_TEAM.id, team: SANDBOX_TEAM.domain, userId: SANDBOX_BOT.userId, user: SANDBOX_BOT.name, botId: SANDBOX_BOT.botId } },
    channels: PAGE_CHANNELS.map((c) => ({ id: c.id, name: c.name, members: SANDBOX_USERS.map((u) => u.id) })),
    userGroups: { [SANDBOX_NET_ONCALL.id]: ['U0APPROVB'] },
    users: [...SANDBOX_USERS.map((u) => ({ id: u.id, name: u.name.toLowerCase(), realName: `${u.name} (${u.role})` })), { id: SANDBOX_BOT.userId, name: SANDBOX_BOT.name, isBot: true }],
    autoCreateChannels: false,
    now: slackClock.fn,
  });
  const slackPath = join(dataDir, 'slack.json');
  if (resumed) await restoreSlack(slack, slackClock, slackPath, logger);

  // 2. Simulated cluster.
  let objects: Record<string, unknown>[] | undefined;
  try {
    objects = resumed ? loadObjects(join(dataDir, 'cluster.json')) : undefined;
  } catch (err) {
    logger.warn({ err }, 'cluster.json unreadable: seeding the cluster from the snapshot again');
  }
  const kube = await startFakeKube({ objects: objects ?? shiftTimestampsDeep(seedObjects(bundle.snapshotItems), shiftSec) });
  await writeFile(kubeconfig, kubeconfigYaml(kube.url, SANDBOX_CLUSTER), 'utf8');
  const controller = new WorkloadController({
    store: kube.store,
    clock: clock.fn,
    stepMs: opts.stepMs ?? 1200,
    onError: (err, w) => logger.error({ err, workload: w }, 'sandbox controller: rollout stopped'),
  });
  controller.start();

  // 3. Audit log: the shifted bundle (first run), then live traffic.
  const shiftedLines = bundle.lines.map((l) => shiftTimestampsInText(l, shiftSec));
  const writer = new AuditLogWriter(auditLog);
  if (!resumed) {
    await rm(auditLog, { force: true });
    await writer.append(shiftedLines);
  }
  const templates = learnTemplates(shiftedLines);
  const live = new LiveTraffic({ templates, cluster: clusterView(kube.store), staticTokenSubjects: staticTokenSubjects() });
  // API-server token metrics and node-probe objects, fed by the same simulated traffic and pods.
  const apiMetrics = new SandboxApiServerMetrics(clock.now()); // a fresh API-server process per sandbox start
  kube.setMetrics(() => apiMetrics.text());
  const proofFor = sandboxProbeProofs(kube, () => clock.now());
  const tick = async () => {
    const { lines, uses } = live.tick(clock.now());
    apiMetrics.observe(uses);
    refreshProbeObjects(kube.store, templates, staticTokenSubjects(), clock.now(), proofFor);
    await writer.append(lines);
  };
  // 3b. With --gke: a GKE cluster read from the loopback Cloud Logging, fed the same bundle and its own live traffic.
  const file = sandboxConfigFile({ dataDir, auditLog, kubeconfig, speed, pollEverySeconds, apiUrl: slack.apiUrl });
  const eksCluster = (file['clusters'] as Array<Record<string, unknown>>)[0]!;
  // 3c. With --aks: an AKS cluster read from the loopback Log Analytics workspace, fed alike.
  const second = { fakes, dataDir, clock: clock.fn, stepMs: opts.stepMs ?? 1200, templates, staticTokenSubjects: staticTokenSubjects(), schedule: String(eksCluster['schedule']), slack: eksCluster['slack'] as Record<string, unknown>, logger };
  const gke: SandboxCloudCluster | undefined = opts.gke ? await startSandboxGke({ ...second, objects: shiftTimestampsDeep(seedObjects(bundle.snapshotItems), shiftSec) }) : undefined;
  if (gke) {
    (file['clusters'] as unknown[]).push(gke.clusterConfig);
    file['poll'] = { gcpLogging: { readsPerMinute: 600 } };
    if (!resumed) gke.ingest(shiftedLines);
  }
  const aks: SandboxCloudCluster | undefined = opts.aks ? await startSandboxAks({ ...second, objects: shiftTimestampsDeep(seedObjects(bundle.snapshotItems), shiftSec) }) : undefined;
  if (aks) {
    (file['clusters'] as unknown[]).push(aks.clusterConfig);
    if (!resumed) aks.ingest(shiftedLines);
  }
  const tickClouds = () => {
    gke?.tick(clock.now());
    aks?.tick(clock.now());
  };
  tickClouds();
  await tick();

  // 4. tokenwatch serve, with Slack in HTTP mode against the fake.
  const signingSecret = randomBytes(24).toString('hex');
  await writeFile(join(dataDir, 'tokenwatch.yaml'), `# The configuration the sandbox runs tokenwatch serve with (written at each start; secrets come from the environment).\n${stringify(file)}`, 'utf8');
  const config = parseConfig(file, { SLACK_BOT_TOKEN: SANDBOX_BOT_TOKEN, SLACK_SIGNING_SECRET: signingSecret });
  const wantSlack = opts.slack ?? true;
  const serve = await composeServe(config, {
    logger,
    clock: clock.fn,
    jitterMs: 0,
    spread: false, // one cluster, polled at each tick of its (short) schedule
    // "Slow" is real time: at ×speed a poll of a few hundred real ms would otherwise read as minutes.
    slowPollAfterMs: 3 * config.poll.requestTimeout * speed,
    ...(wantSlack ? { slack: { host: '127.0.0.1', channelIntervalMs: opts.channelIntervalMs ?? 300, rolloutPollMs: opts.rolloutPollMs ?? 1000 } } : { integrations: [] }),
  });
  const app: SlackIntegration | undefined = serve.slack();

  // 5. The page.
  let page: PageServer;
  try {
    page = await startPageServer({
      port: opts.port ?? 8787,
      slack,
      requests: fakes,
      channel: SANDBOX_CHANNEL,
      channels: PAGE_CHANNELS,
      groups: { [SANDBOX_NET_ONCALL.id]: SANDBOX_NET_ONCALL.handle },
      users: [...SANDBOX_USERS],
      bot: { id: SANDBOX_BOT.userId, name: SANDBOX_BOT.name },
      team: SANDBOX_TEAM,
      signingSecret,
      eventsUrl: () => serve.slack()?.eventsUrl,
      clock: clock.fn,
      speed,
      info: { cluster: SANDBOX_CLUSTER, speed, pollEverySeconds, dataDir, auditLog, kubeconfig, resumed },
      cluster: () => ({ now: clock.now(), workloads: summarizeWorkloads(kube.store, PANEL_WORKLOADS, ROLLOUT_ANNOTATION) }),
      onClusterChange: (l) => kube.store.onWrite(() => l()),
      logger,
    });
  } catch (err) {
    await serve.stop();
    controller.stop();
    await Promise.all([kube.close(), slack.close(), gke?.stop(), aks?.stop()]);
    throw err;
  }

  // Persistence: the sandbox clock every few seconds; cluster objects and the channel shortly after they change.
  const debounce = (fn: () => Promise<void>, ms: number) => {
    let t: NodeJS.Timeout | undefined;
    let running: Promise<void> = Promise.resolve();
    const run = () => {
      t = undefined;
      running = running.then(fn).catch((err: unknown) => logger.warn({ err }, 'sandbox: saving state failed'));
    };
    return {
      schedule: () => {
        if (!t) t = setTimeout(run, ms);
      },
      flush: async () => {
        if (t) {
          clearTimeout(t);
          run();
        }
        await running;
      },
    };
  };
  const saveCluster = debounce(() => saveObjects(join(dataDir, 'cluster.json'), savedObjects(kube.store)), 1000);
  const saveSlack = debounce(() => saveSlackState(slack, slackPath), 1000);
  const offKube = kube.store.onWrite(() => saveCluster.schedule());
  const offSlack = slack.on('change', (c) => {
    if (c.type === 'message' || c.type === 'update' || c.type === 'delete') saveSlack.schedule();
  });
  saveCluster.schedule();
  saveSlack.schedule();
  await saveState();
  const tickTimer = setInterval(() => {
    tickClouds();
    void tick().catch((err: unknown) => logger.error({ err }, 'sandbox: writing live audit traffic failed'));
  }, opts.tickMs ?? 1000);
  const stateTimer = setInterval(() => void saveState().catch(() => undefined), 5000);
  logger.info({ url: page.url, dataDir, speed, resumed }, 'sandbox started');

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      clearInterval(tickTimer);
      clearInterval(stateTimer);
      await page.close();
      await serve.stop(); // stops the Slack app too; waits for running polls (the controller still runs meanwhile)
      controller.stop();
      offKube();
      offSlack();
      await writer.flush();
      await saveCluster.flush();
      await saveObjects(join(dataDir, 'cluster.json'), savedObjects(kube.store));
      // One last save of the channel, queued behind a debounced one that may be writing now (same .tmp file).
      saveSlack.schedule();
      await saveSlack.flush();
      await saveState();
      await Promise.all([kube.close(), slack.close(), gke?.stop(), aks?.stop()]);
      await releaseLock();
      logger.info('sandbox stopped');
    })());

  return {
    url: page.url,
    port: page.port,
    dataDir,
    auditLog,
    kubeconfig,
    resumed,
    speed,
    pollEverySeconds,
    clock,
    config,
    slack,
    kube,
    ...(gke ? { gkeKube: gke.kube } : {}),
    ...(aks ? { aksKube: aks.kube } : {}),
    serve,
    ...(app ? { app } : {}),
    controller,
    page,
    logger,
    tick,
    stop,
  };
}

/** Saves the channel's messages (current versions, threads included; ephemerals are not kept, as in Slack). */
async function saveSlackState(slack: FakeSlack, path: string): Promise<void> {
  const channels = slack.snapshot().channels.map((c) => ({ id: c.id, messages: c.messages }));
  await writeFile(`${path}.tmp`, JSON.stringify({ version: 1, channels }), 'utf8');
  await rename(`${path}.tmp`, path);
}

/**
 * Re-creates saved messages in a fresh fake Slack under their original `ts` (the clock is pinned to each message's
 * time while it is posted through the Web API), so the store's message references stay valid.
 */
async function restoreSlack(slack: FakeSlack, clock: StrictClock, path: string, logger: Logger): Promise<void> {
  let saved: { channels?: Array<{ id: string; messages: FakeMessage[] }> };
  try {
    saved = JSON.parse(readFileSync(path, 'utf8')) as typeof saved;
  } catch {
    return;
  }
  // A direct-message channel (`D…`) exists in a fresh fake Slack only once the bot opens it, as in Slack
  // (`conversations.open`): reopened here before its messages are posted again.
  for (const c of saved.channels ?? []) {
    if (!/^D[A-Z0-9]+$/.test(c.id) || c.messages.length === 0) continue;
    const res = await fetch(`${slack.apiUrl}conversations.open`, {
      method: 'POST',
      headers: { authorization: `Bearer ${SANDBOX_BOT_TOKEN}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ users: `U${c.id.slice(1)}` }).toString(),
    });
    const body = (await res.json()) as { ok?: boolean; channel?: { id?: string }; error?: string };
    if (!body.ok || body.channel?.id !== c.id) logger.warn({ error: body.error, channel: c.id }, 'sandbox: a saved direct-message channel could not be reopened');
  }
  const all = (saved.channels ?? []).flatMap((c) => c.messages.flatMap((m) => [m, ...(m.replies ?? [])]));
  all.sort((a, b) => tsToMs(a.ts) - tsToMs(b.ts) || a.ts.localeCompare(b.ts));
  let mismatches = 0;
  try {
    for (const m of all) {
      clock.pin(tsToMs(m.ts));
      let ts: string | undefined;
      if (m.botId) {
        const form = new URLSearchParams({ channel: m.channel, text: m.text, ...(m.blocks ? { blocks: JSON.stringify(m.blocks) } : {}), ...(m.threadTs ? { thread_ts: m.threadTs } : {}) });
        const res = await fetch(`${slack.apiUrl}chat.postMessage`, {
          method: 'POST',
          headers: { authorization: `Bearer ${SANDBOX_BOT_TOKEN}`, 'content-type': 'application/x-www-form-urlencoded' },
          body: form.toString(),
        });
        const body = (await res.json()) as { ok?: boolean; ts?: string; error?: string };
        ts = body.ts;
        if (!body.ok) logger.warn({ error: body.error, ts: m.ts }, 'sandbox: a saved message could not be restored');
      } else if (!m.threadTs) {
        ts = slack.postAsUser(m.channel, m.user, m.text).ts;
      }
      if (ts !== undefined && ts !== m.ts) mismatches++;
    }
  } finally {
    clock.unpin();
  }
  if (mismatches) logger.warn({ mismatches }, 'sandbox: some restored messages got a new ts; their alerts may be posted again');
  logger.info({ messages: all.length }, 'sandbox: channel restored');
}

/** Whether `dir` holds the state of a sandbox from before the marker file: `sandbox.json` and only sandbox files. */
function isUnmarkedSandboxDir(dir: string, entries: string[]): boolean {
  if (!entries.includes('sandbox.json')) return false;
  const own = new Set([...DATA_FILES.map((f) => f.split('/')[0]!), 'sandbox.lock']);
  if (!entries.every((e) => own.has(e))) return false;
  try {
    const v = JSON.parse(readFileSync(join(dir, 'sandbox.json'), 'utf8')) as { version?: unknown; shiftSec?: unknown };
    return v.version === 1 && typeof v.shiftSec === 'number';
  } catch {
    return false;
  }
}

/**
 * Makes sure the sandbox may write into `dataDir`: creates it (with the {@link DATA_DIR_MARKER} file) when it does
 * not exist, marks it when it is empty (or holds only an earlier sandbox's state), and accepts it when marked.
 * @throws {TokenwatchError} (`sandbox_failed`) for a path that is not a directory, or a non-empty directory
 *   without the marker (an operator's folder with a real `tokenwatch.yaml`, kubeconfig or audit logs): nothing
 *   in it is read, written or removed
 */
export async function claimDataDir(dataDir: string): Promise<void> {
  let entries: string[] | undefined;
  try {
    entries = await readdir(dataDir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTDIR') throw new TokenwatchError(ErrorCode.SandboxFailed, `--data-dir ${dataDir} is a file, not a folder: pass a new or empty folder`);
    if (code !== 'ENOENT') throw err;
  }
  if (entries?.includes(DATA_DIR_MARKER)) return;
  if (entries !== undefined && entries.length > 0 && !isUnmarkedSandboxDir(dataDir, entries)) {
    const shown = entries.sort().slice(0, 5).join(', ');
    throw new TokenwatchError(
      ErrorCode.SandboxFailed,
      `--data-dir ${dataDir} is not empty and was not created by the sandbox (it holds ${shown}${entries.length > 5 ? `, … ${entries.length} entries` : ''}); ` +
        `the sandbox writes only into a folder it created (marked by ${DATA_DIR_MARKER}), so nothing in it was touched. ` +
        'Pass --data-dir with a new or empty folder (default ./data/sandbox)',
    );
  }
  await mkdir(dataDir, { recursive: true });
  await writeFile(join(dataDir, DATA_DIR_MARKER), MARKER_TEXT, { flag: 'w' });
}

/** `--reset`: removes the files the sandbox writes ({@link DATA_FILES}), and `audit/` only if that leaves it empty. */
async function removeSandboxFiles(dataDir: string): Promise<void> {
  for (const f of DATA_FILES) await rm(join(dataDir, f), { force: true });
  try {
    await rmdir(join(dataDir, 'audit'));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT' && code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err;
  }
}

/**
 * Takes `<dataDir>/sandbox.lock` (holding this process's pid) so two sandboxes never share one state folder.
 * A lock left by a process that no longer runs is taken over.
 * @throws Error naming the running sandbox's pid when the folder is in use.
 * @returns a function releasing the lock.
 */
export async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  const lock = join(dataDir, 'sandbox.lock');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      await writeFile(lock, String(process.pid), { flag: 'wx' });
      let released = false;
      return async () => {
        if (released) return;
        released = true;
        await rm(lock, { force: true });
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const pid = Number((await readFile(lock, 'utf8').catch(() => '')).trim());
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && isRunning(pid)) {
        throw new TokenwatchError(ErrorCode.SandboxFailed, `a sandbox is already running on ${dataDir} (pid ${pid}): stop it first, or pass --data-dir <another folder>`);
      }
      await rm(lock, { force: true }); // stale: its process is gone
    }
  }
  throw new TokenwatchError(ErrorCode.SandboxFailed, `cannot lock ${dataDir}`);
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Fails with EADDRINUSE when `port` on 127.0.0.1 is taken (checked before any state is touched). */
async function assertPortFree(port: number): Promise<void> {
  await new Promise<void>((resolvePort, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolvePort()));
  });
}
