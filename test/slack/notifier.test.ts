/**
 * The Notifier against the fake Slack Web API, driven directly with findings (store + saveFindings), for the cases
 * the bundled example does not produce: first 401s of a subject, a resolved finding seen again, an alert deleted in
 * Slack, a channel configured by name, and buttons limited by the policy.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { webApi } from '@slack/bolt';
import { DEFAULT_BOT_TOKEN, startFakeSlack, type FakeSlack } from '../../src/sandbox/fakes/slack.js';
import { parseConfig, type Config } from '../../src/config/index.js';
import { approvalPolicyFor } from '../../src/approvals/from-config.js';
import type { Finding } from '../../src/findings/types.js';
import { createLogger } from '../../src/observability/logger.js';
import { SlackApi } from '../../src/slack/api.js';
import { ButtonIds } from '../../src/slack/buttons.js';
import { ChannelMap } from '../../src/slack/channels.js';
import { messageHash, Notifier } from '../../src/slack/notifier.js';
import { openStore, type Store } from '../../src/store/index.js';
import { finding } from '../store/helpers.js';
import { buttonIds } from './harness.js';

const T = Date.UTC(2026, 10, 20, 12, 0, 0);
const HOUR = 3_600_000;

let fake: FakeSlack;
let store: Store;

function setup(slack: Record<string, unknown> = {}, canRemediate = true): { notifier: Notifier; config: Config; channels: ChannelMap; now: { t: number } } {
  const config = parseConfig(
    {
      slack: { enabled: true, mode: 'http' },
      clusters: [{ name: 'prod', audit: { file: { path: '/dev/null' } }, slack: { channel: '#ops', approvers: ['U0APPROVE1'], ...slack } }],
    },
    { SLACK_BOT_TOKEN: DEFAULT_BOT_TOKEN, SLACK_SIGNING_SECRET: 'x'.repeat(32) },
  );
  const logger = createLogger({ level: 'silent' });
  const channels = new ChannelMap(config);
  const api = new SlackApi({ client: new webApi.WebClient(DEFAULT_BOT_TOKEN, { slackApiUrl: fake.apiUrl, retryConfig: { retries: 0 } }), logger, channelIntervalMs: 0 });
  const now = { t: T };
  const notifier = new Notifier({
    api,
    store,
    ids: new ButtonIds(DEFAULT_BOT_TOKEN, store),
    channels,
    clock: () => now.t,
    logger,
    policyFor: (c) => approvalPolicyFor(config.clusters.find((x) => x.name === c)!, config),
    canRemediate: () => canRemediate,
  });
  return { notifier, config, channels, now };
}

async function poll(n: Notifier, findings: Finding[], at: number): Promise<void> {
  const changes = store.saveFindings('prod', findings, at);
  await n.onFindings('prod', findings, changes);
}

beforeEach(async () => {
  fake = await startFakeSlack({ channels: [{ id: 'C0OPS00001', name: 'ops' }] });
  store = openStore(':memory:');
});
afterEach(async () => {
  store.close();
  await fake.close();
});

const stale = finding({ id: 'f-stale', cluster: 'prod', severity: 'warning' });
const unauthorized = finding({ id: 'f-401', cluster: 'prod', kind: 'unauthorized', severity: 'critical', rejectionAt: null, maxSecondsAfterWarning: null, tokens: [] });

describe('Notifier', () => {
  it('posts to a channel configured by #name and learns its id for channel checks', async () => {
    const { notifier, channels } = setup();
    await poll(notifier, [stale], T);
    expect(fake.messages('C0OPS00001').map((m) => m.text)).toEqual([expect.stringContaining('[prod] warning: stale token used by kube-system/multus')]);
    expect(store.getMessageRef('f-stale')).toMatchObject({ channel: 'C0OPS00001', severity: 'warning' });
    expect(channels.allows('prod', { id: 'C0OPS00001', name: 'privategroup' })).toBe(true);
    expect(channels.allows('prod', { id: 'C0OTHER001', name: 'other' })).toBe(false);
  });

  it('first 401s of a subject with an existing stale-token alert: own alert plus a reply in the stale alert thread', async () => {
    const { notifier } = setup();
    await poll(notifier, [stale], T);
    await poll(notifier, [unauthorized, stale], T + HOUR);
    const [s, u] = [store.getMessageRef('f-stale')!, store.getMessageRef('f-401')!];
    expect(fake.messages('C0OPS00001').map((m) => m.ts)).toEqual([s.ts, u.ts]);
    expect(fake.thread('C0OPS00001', s.ts).map((m) => m.text)).toEqual(['[prod] kube-system/multus: first 401 Unauthorized responses']);
  });

  it('no first-401 reply when both findings are new in the same poll', async () => {
    const { notifier } = setup();
    await poll(notifier, [unauthorized, stale], T);
    expect(fake.messages('C0OPS00001')).toHaveLength(2);
    expect(fake.thread('C0OPS00001', store.getMessageRef('f-stale')!.ts)).toEqual([]);
  });

  it('a resolved finding seen again is reopened in its thread, with buttons back', async () => {
    const { notifier } = setup();
    await poll(notifier, [stale], T);
    store.setFindingStatus('f-stale', { status: 'resolved' }, T + HOUR);
    await notifier.refresh('f-stale');
    const ts = store.getMessageRef('f-stale')!.ts;
    expect(fake.message('C0OPS00001', ts)!.text).toBe('✅ [prod] resolved: stale token used by kube-system/multus');
    expect(buttonIds(fake.message('C0OPS00001', ts)!)).toEqual([]);
    await poll(notifier, [{ ...stale, lastSeen: new Date(T + 2 * HOUR).toISOString() }], T + 2 * HOUR);
    expect(store.getFinding('f-stale')!.status).toBe('open');
    expect(fake.thread('C0OPS00001', ts).map((m) => m.text)).toEqual(['[prod] kube-system/multus reopened: seen again after it was resolved']);
    expect(buttonIds(fake.message('C0OPS00001', ts)!)).toContain('tw_restart');
    expect(fake.messages('C0OPS00001')).toHaveLength(1);
  });

  it('an alert deleted in Slack is posted anew, and the ref follows', async () => {
    const { notifier } = setup();
    await poll(notifier, [stale], T);
    const first = store.getMessageRef('f-stale')!;
    fake.failNext('chat.update', 'message_not_found');
    await poll(notifier, [{ ...stale, requests: 99 }], T + HOUR);
    const second = store.getMessageRef('f-stale')!;
    expect(second.ts).not.toBe(first.ts);
    expect(fake.messages('C0OPS00001').map((m) => m.ts)).toEqual([first.ts, second.ts]);
    expect(second.hash).toBe(messageHash({ text: fake.message('C0OPS00001', second.ts)!.text, blocks: fake.message('C0OPS00001', second.ts)!.blocks as never }));
  });

  it('buttons follow the policy and Kubernetes access', async () => {
    const onlySnooze = setup({ actions: ['snooze'] });
    await poll(onlySnooze.notifier, [stale], T);
    expect(buttonIds(fake.messages('C0OPS00001')[0]!)).toEqual(['tw_snooze_1d', 'tw_snooze_7d', 'tw_details']);
  });

  it('no restart or recreate buttons in a denied namespace or without Kubernetes access', async () => {
    const denied = setup({ namespaces: { deny: ['kube-*'] } });
    await poll(denied.notifier, [stale], T);
    expect(buttonIds(fake.messages('C0OPS00001')[0]!)).toEqual(['tw_snooze_1d', 'tw_snooze_7d', 'tw_details']);
    const noKube = setup({}, false);
    expect(noKube.notifier.restartButtons(stale)).toEqual([]);
  });
});
