import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_BOT_TOKEN, startFakeSlack, type FakeSlack } from '../../src/sandbox/fakes/slack.js';
import { parseConfig, type Config } from '../../src/config/index.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { startSlackWith, type SlackIntegration } from '../../src/runtime/build-slack.js';
import type { SlackContext } from '../../src/slack/context.js';
import { openStore, type Store } from '../../src/store/index.js';
import { ownershipWhile } from '../../src/core/ownership.js';

let fake: FakeSlack;
let store: Store;
beforeEach(async () => {
  fake = await startFakeSlack();
  store = await openStore(':memory:');
});
afterEach(async () => {
  await store.close();
  await fake.close();
});

function context(env: Record<string, string>, slack: Record<string, unknown> = {}): SlackContext {
  const config: Config = parseConfig(
    {
      slack: { enabled: true, mode: 'http', apiUrl: fake.apiUrl, port: 0, ...slack },
      clusters: [{ name: 'prod', audit: { file: { path: '/dev/null' } }, slack: { channel: 'C0OPS00001', approvers: ['U0APPROVE1'] } }],
    },
    env,
  );
  return {
    config,
    store,
    logger: createLogger({ level: 'silent' }),
    metrics: new Metrics(),
    clusters: new Map(),
    // No poll jobs here: what the scheduler answers for a cluster it does not run.
    runNow: () => 'unknown-job',
    clock: Date.now,
    ownership: ownershipWhile(() => true),
  };
}

describe('startSlack', () => {
  it('fails fast with a clear message when Slack rejects the bot token', async () => {
    const ctx = context({ SLACK_BOT_TOKEN: 'xoxb-not-a-known-token', SLACK_SIGNING_SECRET: 's'.repeat(32) });
    await expect(startSlackWith(ctx)).rejects.toThrow(`Slack rejected the bot token (auth.test: invalid_auth): check SLACK_BOT_TOKEN and slack.apiUrl ${fake.apiUrl}`);
    expect(fake.callsTo('auth.test')).toHaveLength(1);
  });

  it('refuses to start when Slack is disabled or a secret of the mode is missing', async () => {
    const off = context({ SLACK_BOT_TOKEN: DEFAULT_BOT_TOKEN, SLACK_SIGNING_SECRET: 's'.repeat(32) });
    off.config.slack!.enabled = false;
    await expect(startSlackWith(off)).rejects.toThrow('Slack is not enabled (slack.enabled is false)');
    const noSecret = context({ SLACK_BOT_TOKEN: DEFAULT_BOT_TOKEN, SLACK_SIGNING_SECRET: 's'.repeat(32) });
    delete noSecret.config.slack!.signingSecret;
    await expect(startSlackWith(noSecret)).rejects.toThrow('SLACK_SIGNING_SECRET is required in slack.mode http');
  });

  it('starts in HTTP mode with only auth.test at start, and stops cleanly', async () => {
    const bot = (await startSlackWith(context({ SLACK_BOT_TOKEN: DEFAULT_BOT_TOKEN, SLACK_SIGNING_SECRET: 's'.repeat(32) }), { host: '127.0.0.1' })) as SlackIntegration;
    expect(bot.name).toBe('slack');
    expect(bot.eventsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/slack\/events$/);
    expect(fake.calls.map((c) => c.method)).toEqual(['auth.test']);
    const res = await fetch(bot.eventsUrl!, { method: 'POST', body: 'payload=%7B%7D', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(res.status).toBe(401); // unsigned
    await bot.stop();
    await expect(fetch(bot.eventsUrl!, { method: 'POST', body: '' })).rejects.toThrow();
  });
});
