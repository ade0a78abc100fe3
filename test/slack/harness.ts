/**
 * End-to-end harness for the Slack integration: the real `tokenwatch serve` (`composeServe`) with a file audit source
 * (a copy of the bundled Multus example log), the real Bolt app in HTTP mode on 127.0.0.1 port 0, the fake Slack Web
 * API (`src/sandbox/fakes/slack.ts`) and the fake Kubernetes API server (`src/sandbox/fakes/kubernetes.ts`) seeded with the example cluster
 * snapshot. Everything stays on loopback. The service clock runs in real time from the example's reference time
 * (2026-11-20T12:00Z) and can be moved forward with {@link Harness.advance}.
 */
import { appendFileSync, copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import {
  blockActionPayload,
  DEFAULT_BOT_TOKEN,
  sendBlockAction,
  sendSlashCommand,
  startFakeSlack,
  type FakeMessage,
  type FakeSlack,
  type SendResult,
} from '../../src/sandbox/fakes/slack.js';
import { viewSubmissionPayload } from '../fakes/slack-requests.js';
import { SocketModeServer, startApiFront } from '../fakes/slack-socket.js';
import { startFakeKube, type FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import type { KubeObject } from '../../src/sandbox/fakes/kubernetes/types.js';
import { parseConfig, type Config } from '../../src/config/index.js';
import { findingId } from '../../src/findings/build.js';
import { groupIdOf } from '../../src/findings/groups.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { composeServe } from '../../src/runtime/compose.js';
import type { ServeHandle, ServeOptions } from '../../src/runtime/serve-options.js';
import { startSlackWith, type SlackIntegration } from '../../src/runtime/build-slack.js';
import type { SlackOptions } from '../../src/slack/app.js';
import { auditEvent } from '../sources/events.js';
import type { FindingKind } from '../../src/findings/types.js';
import { ownershipWhile } from '../../src/core/ownership.js';

export const SECRET = 'fake-signing-secret-0123456789abcdef';
export const REF = Date.parse('2026-11-20T12:00:00Z');
export const OPS = 'C0OPS00001';
export const STAGING = 'C0STAGE001';
export const ELSEWHERE = 'C0RANDOM01';
export const REQUESTER = 'U0REQUEST1';
export const APPROVER = 'U0APPROVE1';
/** Approver through user group {@link ONCALL}. */
export const ONCALL_APPROVER = 'U0APPROVE2';
export const ONCALL = 'S0ONCALL01';
export const OUTSIDER = 'U0OUTSIDE1';
export const CLUSTER = 'prod-eks';

const MIN = 60_000;

/** Options of {@link startHarness}. */
export interface HarnessOptions {
  /** Extra members of the on-call user group (approvers). */
  oncall?: string[];
  /** Changes to the config after parsing (e.g. shorter settle period). */
  tweak?: (c: Config) => void;
  slack?: SlackOptions;
  /** Reuse this directory (store, audit log, kubeconfig) — to restart tokenwatch on the same data. */
  dir?: string;
  /** Reuse fakes (restart scenario). */
  fakeSlack?: FakeSlack;
  kube?: FakeKube;
  /** Time to start at (default {@link REF}). */
  start?: number;
  /**
   * Fake DaemonSet controller: ms per step and pods updated per step (default 15 ms, 2 pods); with `afterFirstProgress`
   * the rollout does not move until tokenwatch has posted a "rolling out" progress message, so its final progress is
   * always an edit (on a busy machine a fast rollout can be done at the first read, and its final progress is posted);
   * while `hold` returns true it does not move either (a test that stops tokenwatch mid-rollout).
   */
  rollout?: { stepMs?: number; podsPerStep?: number; afterFirstProgress?: boolean; hold?: () => boolean };
  /** Whether this process owns every cluster (`ServeOptions.ownership`); one that does not (false) does not poll, so its start does not wait for a first poll. */
  owner?: () => boolean;
  /** Collects the service's log lines (JSON objects) here. */
  logs?: Array<Record<string, unknown>>;
  /** Level of the collected log lines (default `info`). */
  logLevel?: string;
  /** Extra options of `composeServe` (e.g. Cloud Logging retries). */
  serveOptions?: Partial<ServeOptions>;
  /** The bot token's scopes the fake Slack reports (`x-oauth-scopes`; default the manifest's). */
  slackScopes?: string[];
}

/** A running scenario. */
export interface Harness {
  dir: string;
  slack: FakeSlack;
  kube: FakeKube;
  serve: ServeHandle;
  bot: SlackIntegration;
  metrics: Metrics;
  auditPath: string;
  /** Moves the service clock forward. */
  advance(ms: number): void;
  now(): number;
  /** One poll of a cluster through the real poller (notifier and verification included), then idle. */
  poll(cluster?: string): Promise<void>;
  /** Appends audit event lines to the prod-eks audit log. */
  appendAudit(lines: string[]): void;
  /**
   * The alert message of a ServiceAccount (one per root cause: every kind of finding of it shares it), from the fake
   * Slack. `kind` is accepted for older call sites and only checks that such a finding is stored.
   */
  alert(namespace: string, serviceAccount: string, kind?: FindingKind, cluster?: string): Promise<FakeMessage>;
  /** Sends a signed /tokens command from `channel` by `user` and waits until its work is done. */
  command(text: string, user: string, channel?: string, secret?: string): Promise<SendResult>;
  /**
   * Clicks a button (signed block_actions) and waits until its work is done. `tw_snooze_1d`, `tw_snooze_7d`,
   * `tw_details` and `tw_recreate_sa` choose that entry of the alert's overflow menu (`tw_more`) when the message
   * has no such button (see {@link OVERFLOW_LABELS}).
   */
  click(user: string, message: FakeMessage, actionId: string, opts?: { value?: string; channel?: string; wait?: boolean }): Promise<SendResult>;
  /** Submits the newest modal with `callback_id` (e.g. the Recreate confirmation) as `user`, and waits. */
  submitView(user: string, callbackId: string): Promise<SendResult>;
  /** Ephemerals for a user (newest last). */
  ephemerals(user: string): string[];
  stop(opts?: { keepFakes?: boolean }): Promise<void>;
}

/** Overflow-menu labels of the alert by the action id of the per-action button of earlier versions. */
export const OVERFLOW_LABELS: Readonly<Record<string, string>> = {
  tw_snooze_1d: 'Snooze 1 day',
  tw_snooze_7d: 'Snooze 7 days',
  tw_details: 'Details',
  tw_recreate_sa: 'Recreate ServiceAccount…',
};

type OverflowBlock = { type: string; elements?: Array<{ type?: string; action_id?: string; options?: Array<{ text: { text: string }; value: string }> }> };

/** The option labelled `label` of a message's overflow menu (`tw_more`), or undefined. */
export function overflowOption(message: Pick<FakeMessage, 'blocks'>, label: string): { text: string; value: string } | undefined {
  for (const b of (message.blocks ?? []) as OverflowBlock[]) {
    if (b.type !== 'actions') continue;
    const menu = b.elements?.find((e) => e.type === 'overflow');
    const o = menu?.options?.find((x) => x.text.text === label);
    if (o) return { text: o.text.text, value: o.value };
  }
  return undefined;
}

/** Labels of a message's overflow-menu options. */
export function overflowLabels(message: Pick<FakeMessage, 'blocks'>): string[] {
  return ((message.blocks ?? []) as OverflowBlock[])
    .filter((b) => b.type === 'actions')
    .flatMap((b) => (b.elements ?? []).filter((e) => e.type === 'overflow').flatMap((e) => (e.options ?? []).map((o) => o.text.text)));
}

/** The value of the button `actionId` in a message's blocks. */
export function buttonValue(message: Pick<FakeMessage, 'blocks'>, actionId: string): string {
  for (const b of (message.blocks ?? []) as Array<{ type: string; elements?: Array<{ action_id?: string; value?: string }> }>) {
    if (b.type !== 'actions') continue;
    const e = b.elements?.find((x) => x.action_id === actionId);
    if (e?.value !== undefined) return e.value;
  }
  throw new Error(`no button ${actionId} in message "${(message as FakeMessage).text}"`);
}

/** Action ids of a message's buttons. */
export function buttonIds(message: Pick<FakeMessage, 'blocks'>): string[] {
  return ((message.blocks ?? []) as Array<{ type: string; elements?: Array<{ action_id?: string }> }>)
    .filter((b) => b.type === 'actions')
    .flatMap((b) => (b.elements ?? []).map((e) => e.action_id ?? ''));
}

/** All text of a message's blocks (for assertions). */
export function blockText(message: Pick<FakeMessage, 'blocks'> | { blocks?: unknown[] }): string {
  return JSON.stringify(message.blocks ?? []);
}

/** A stale-token audit line of the Multus subject at `time` (epoch ms) for `pod`, `secondsAfterWarning` past warnafter. */
export function staleLine(auditID: string, time: number, pod: string, secondsAfterWarning: number): string {
  return auditEvent({ auditID, time, kind: 'stale', namespace: 'kube-system', serviceAccount: 'multus', pod, secondsAfterWarning, sourceIP: '192.168.14.201' });
}

/** The snapshot objects, for the fake API server. */
function snapshotObjects(): KubeObject[] {
  const list = JSON.parse(readFileSync('examples/cluster-snapshot.json', 'utf8')) as { items: KubeObject[] };
  return list.items;
}

/**
 * Makes the fake API server act as the DaemonSet controller: after a spec change of a DaemonSet (a rollout restart),
 * its status catches up two pods every `stepMs`. While `hold` returns true the status does not move (checked every
 * `stepMs`). As the real controller, it works on the latest generation only: a rollout of an older generation still
 * under way when the spec changes again stops, so `observedGeneration` never goes back (two rollouts held at once
 * would otherwise both resume, and the older one's last step could leave the newer generation unobserved).
 */
export function progressDaemonSets(kube: FakeKube, stepMs = 15, podsPerStep = 2, hold?: () => boolean): void {
  const latest = new Map<string, number>();
  kube.store.onWrite((e) => {
    if (e.def.kind !== 'DaemonSet' || e.type !== 'MODIFIED' || !e.previous) return;
    const gen = (e.object.metadata?.['generation'] as number | undefined) ?? 0;
    if (gen === ((e.previous.metadata?.['generation'] as number | undefined) ?? 0)) return;
    const ns = String(e.object.metadata?.['namespace']);
    const name = String(e.object.metadata?.['name']);
    const key = `${ns}/${name}`;
    latest.set(key, Math.max(gen, latest.get(key) ?? 0));
    const desired = ((e.object['status'] as Record<string, number> | undefined)?.['desiredNumberScheduled']) ?? 0;
    let updated = 0;
    const step = (): void => {
      if (latest.get(key) !== gen) return;
      if (hold?.()) {
        setTimeout(step, stepMs);
        return;
      }
      updated = Math.min(desired, updated + podsPerStep);
      kube.store.update('DaemonSet', ns, name, (o) => {
        o['status'] = { ...(o['status'] as object), observedGeneration: gen, updatedNumberScheduled: updated, numberAvailable: desired - (updated < desired ? 1 : 0), numberReady: desired - (updated < desired ? 1 : 0) };
      });
      if (updated < desired) setTimeout(step, stepMs);
    };
    setTimeout(step, stepMs);
  });
}

/**
 * The config of a serve on the examples' audit log (cluster {@link CLUSTER}, never polled on schedule) with Slack in HTTP
 * mode and its Web API at `http://127.0.0.1:<apiPort>/api/` (a port that answers nothing or hangs: an unreachable
 * Slack); the store in a fresh temporary folder whose name starts with `prefix`.
 */
export function configWithSlackAt(apiPort: number, prefix: string): Config {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  copyFileSync('examples/audit/kube-apiserver-audit.log', join(dir, 'audit.log'));
  return parseConfig(
    {
      store: { path: join(dir, 'tw.db') },
      http: { host: '127.0.0.1', port: 0 },
      slack: { enabled: true, mode: 'http', apiUrl: `http://127.0.0.1:${apiPort}/api/`, port: 0 },
      clusters: [{ name: CLUSTER, audit: { file: { path: join(dir, 'audit.log') } }, schedule: '0 0 1 1 *', slack: { channel: OPS, approvers: ['U0APPROVE1'] } }],
    },
    { SLACK_BOT_TOKEN: DEFAULT_BOT_TOKEN, SLACK_SIGNING_SECRET: SECRET },
  );
}

/** A new scenario directory with the audit logs (the Multus example for prod-eks, one line for staging-eks). */
export function prepareDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tw-slack-'));
  copyFileSync('examples/audit/kube-apiserver-audit.log', join(dir, 'audit.log'));
  writeFileSync(join(dir, 'staging-audit.log'), `${auditEvent({ auditID: 'stg-1', time: REF - 30 * MIN, kind: 'stale', namespace: 'logging', serviceAccount: 'fluent-bit', pod: 'fluent-bit-x1', secondsAfterWarning: 7_000_000 })}\n`);
  return dir;
}

/** The fake Slack (channels, on-call group) and fake Kubernetes API server (snapshot, DaemonSet controller) of a scenario. */
export async function startFakes(opts: Pick<HarnessOptions, 'oncall' | 'rollout' | 'slackScopes'> = {}): Promise<{ slack: FakeSlack; kube: FakeKube }> {
  const slack = await startFakeSlack({
    ...(opts.slackScopes ? { scopes: opts.slackScopes } : {}),
    channels: [
      { id: OPS, name: 'ops' },
      { id: STAGING, name: 'staging-alerts', botIsMember: false },
      { id: ELSEWHERE, name: 'random' },
    ],
    userGroups: { [ONCALL]: [ONCALL_APPROVER, ...(opts.oncall ?? [])] },
  });
  const kube = await startFakeKube({ objects: snapshotObjects() });
  // Held until tokenwatch has posted an in-progress message: its final progress is then always an edit of that message.
  const firstProgress = opts.rollout?.afterFirstProgress ? () => !slack.callsTo('chat.postMessage').some((c) => String(c.args['text']).includes('rolling out')) : undefined;
  const hold = opts.rollout?.hold;
  progressDaemonSets(kube, opts.rollout?.stepMs, opts.rollout?.podsPerStep, () => (firstProgress?.() ?? false) || (hold?.() ?? false));
  return { slack, kube };
}

/** Starts the scenario; see the module docstring. */
export async function startHarness(opts: HarnessOptions = {}): Promise<Harness> {
  const dir = opts.dir ?? prepareDir();
  const auditPath = join(dir, 'audit.log');
  const fakes = opts.fakeSlack && opts.kube ? undefined : await startFakes(opts);
  const slack = opts.fakeSlack ?? fakes!.slack;
  const kube = opts.kube ?? fakes!.kube;
  const kubeconfig = join(dir, 'kubeconfig.yaml');
  writeFileSync(
    kubeconfig,
    `apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: ${kube.url}
    insecure-skip-tls-verify: true
users:
- name: tokenwatch
  user:
    token: fake-token
contexts:
- name: fake
  context:
    cluster: fake
    user: tokenwatch
current-context: fake
`,
  );
  const config = parseConfig(
    {
      store: { path: join(dir, 'tw.db') },
      http: { host: '127.0.0.1', port: 0 },
      log: { level: 'silent' },
      slack: { enabled: true, mode: 'http', apiUrl: slack.apiUrl, port: 0, approvals: { expiresAfter: '30m' } },
      remediation: { rolloutTimeout: '20s', settlePeriod: '2h' },
      clusters: [
        {
          name: CLUSTER,
          audit: { file: { path: auditPath } },
          kubernetes: { kubeconfig },
          schedule: '0 0 1 1 *',
          slack: { channel: OPS, approvers: [APPROVER, ONCALL], requesters: ['*'] },
        },
        {
          name: 'staging-eks',
          audit: { file: { path: join(dir, 'staging-audit.log') } },
          kubernetes: { none: true },
          schedule: '0 0 1 1 *',
          slack: { channel: STAGING, approvers: [APPROVER] },
        },
      ],
    },
    { SLACK_BOT_TOKEN: DEFAULT_BOT_TOKEN, SLACK_SIGNING_SECRET: SECRET },
  );
  opts.tweak?.(config);
  let offset = (opts.start ?? REF) - Date.now();
  const clock = () => Date.now() + offset;
  const metrics = new Metrics();
  let bot: SlackIntegration | undefined;
  const serve = await composeServe(config, {
    logger: opts.logs
      ? createLogger({
          level: opts.logLevel ?? 'info',
          destination: new Writable({
            write(chunk: Buffer, _enc, cb) {
              for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) opts.logs!.push(JSON.parse(line) as Record<string, unknown>);
              cb();
            },
          }),
        })
      : createLogger({ level: 'silent' }),
    metrics,
    clock,
    jitterMs: 0,
    spread: false, // polls at the cron tick: tests move the clock to a tick
    ...(opts.owner ? { ownership: ownershipWhile(opts.owner) } : {}),
    ...opts.serveOptions,
    integrations: [
      async (ctx) => {
        bot = await startSlackWith(ctx, { channelIntervalMs: 0, sweepIntervalMs: 3_600_000, pickupIntervalMs: 50, rolloutPollMs: 10, host: '127.0.0.1', retryConfig: { retries: 2, factor: 1, minTimeout: 5, maxTimeout: 10 }, queueClock: clock, ...opts.slack });
        return bot;
      },
    ],
  });
  if (opts.owner?.() !== false) await serve.firstPolls;
  await bot!.idle();
  const url = bot!.eventsUrl!;
  const h: Harness = {
    dir,
    slack,
    kube,
    serve,
    bot: bot!,
    metrics,
    auditPath,
    advance: (ms) => {
      offset += ms;
    },
    now: clock,
    async poll(cluster = CLUSTER) {
      await serve.context.clusters.get(cluster)!.poller.pollOnce();
      await h.bot.idle();
    },
    appendAudit(lines) {
      appendFileSync(auditPath, lines.map((l) => `${l}\n`).join(''));
    },
    async alert(namespace, serviceAccount, kind, cluster = CLUSTER) {
      if (kind && !await serve.context.store.findings.get(findingId(cluster, namespace, serviceAccount, kind))) throw new Error(`no ${kind} finding for ${namespace}/${serviceAccount}`);
      const ref = await serve.context.store.slackRefs.getAlertRef(groupIdOf({ cluster, namespace, serviceAccount }));
      if (!ref) throw new Error(`no alert for ${namespace}/${serviceAccount}`);
      return slack.message(ref.channel, ref.ts)!;
    },
    async command(text, user, channel = OPS, secret = SECRET) {
      const res = await sendSlashCommand(url, secret, { text, user_id: user, channel_id: channel, response_url: slack.responseUrl({ channel, user }) });
      await h.bot.idle();
      return res;
    },
    async click(user, message, actionId, o = {}) {
      const channel = o.channel ?? message.channel;
      const label = OVERFLOW_LABELS[actionId];
      const option = label !== undefined && !buttonIds(message).includes(actionId) ? overflowOption(message, label) : undefined;
      if (label !== undefined && !option && o.value === undefined && !buttonIds(message).includes(actionId)) throw new Error(`no "${label}" in the overflow menu of "${message.text}"`);
      const value = o.value ?? option?.value ?? buttonValue(message, actionId);
      const payload = blockActionPayload({
        user,
        actionId: option ? 'tw_more' : actionId,
        value,
        ...(option ? { selectedOption: { text: option.text, value } } : {}),
        channel,
        messageTs: message.ts,
        responseUrl: slack.responseUrl({ channel, user, messageTs: message.ts }),
      });
      const res = await sendBlockAction(url, SECRET, payload);
      if (o.wait !== false) await h.bot.idle();
      return res;
    },
    async submitView(user, callbackId) {
      const view = slack.views().filter((v) => v.view.callback_id === callbackId).at(-1);
      if (!view) throw new Error(`no modal ${callbackId} was opened`);
      const res = await sendBlockAction(url, SECRET, viewSubmissionPayload({ user, view }));
      await h.bot.idle();
      return res;
    },
    ephemerals: (user) => slack.ephemerals({ user }).map((e) => e.text),
    async stop(o = {}) {
      await serve.stop();
      if (!o.keepFakes) {
        await slack.close();
        await kube.close();
      }
    },
  };
  return h;
}

/** Polls `cond` every 10 ms until it holds; throws after `ms` (default 20 s). */
export async function waitFor(cond: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A {@link Harness} whose bot runs in Socket Mode, with the Socket Mode server and the Web API front it connects through. */
export interface SocketModeHarness {
  h: Harness;
  ws: SocketModeServer;
  front: Awaited<ReturnType<typeof startApiFront>>;
  fake: FakeSlack;
}

/**
 * Starts a Socket Mode server, a Slack fake with the ops channel and the on-call group, the Web API front that hands
 * out `ws://127.0.0.1:<port><linkPath>` from `apps.connections.open`, and a harness of one cluster in Socket Mode
 * (app token `xapp-1-A0FAKEAPP1-1-test`). `opts` are passed to {@link startHarness}; its `tweak` runs after the
 * Socket Mode settings. Does not wait for the connection (see {@link socketConnected}).
 */
export async function startSocketModeHarness(opts: HarnessOptions & { linkPath?: string } = {}): Promise<SocketModeHarness> {
  const ws = new SocketModeServer();
  const wsPort = await ws.listen();
  const fake = await startFakeSlack({ channels: [{ id: OPS, name: 'ops' }], userGroups: { [ONCALL]: [ONCALL_APPROVER] } });
  const front = await startApiFront(fake, `ws://127.0.0.1:${wsPort}${opts.linkPath ?? '/link'}`);
  const { linkPath: _linkPath, tweak, ...rest } = opts;
  const h = await startHarness({
    ...rest,
    fakeSlack: fake,
    tweak: (c) => {
      c.clusters.splice(1);
      c.slack!.mode = 'socket';
      c.slack!.apiUrl = front.url;
      c.slack!.appToken = 'xapp-1-A0FAKEAPP1-1-test';
      tweak?.(c);
    },
  });
  return { h, ws, front, fake };
}

/** Whether the bot reports its Socket Mode connection as open (`tokenwatch_slack_socket_connected 1`). */
export async function socketConnected(h: Harness): Promise<boolean> {
  return (await h.metrics.text()).includes('tokenwatch_slack_socket_connected 1');
}
