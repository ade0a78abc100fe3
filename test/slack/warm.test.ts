/**
 * The start-up warm-up of the Slack request paths (src/slack/warm.ts): through the real Bolt HTTPReceiver it runs
 * every step, sends nothing a user sees, leaves the secret out of the logs and leaves the replay guard working; a
 * failing step is left out without failing the start.
 */
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observability/logger.js';
import type { ClusterStatus } from '../../src/slack/blocks/index.js';
import { warmSlack } from '../../src/slack/warm.js';
import { CLUSTER, OPS, REQUESTER, SECRET, startHarness, type Harness } from './harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

describe('Slack warm-up at start', () => {
  it('runs every step over the real receiver, shows users nothing, logs no secret; the first command after it is answered', async () => {
    const logs: Array<Record<string, unknown>> = [];
    h = await startHarness({ logs, logLevel: 'debug' });
    expect(h.bot.warmUp.done).toEqual(['replay-guard', 'status', 'http']);
    expect(logs.some((l) => l['msg'] === 'Slack request paths warmed up')).toBe(true);
    // Nothing reached a user: no ephemeral, no response_url answer, no refused request.
    expect(h.slack.ephemerals()).toEqual([]);
    expect(await h.metrics.text()).not.toMatch(/tokenwatch_slack_rejected_requests_total\{[^}]*\} [1-9]/);
    expect(JSON.stringify(logs)).not.toContain(SECRET);
    // The first real command is acked and answered as usual, and a replay of it is still refused.
    const res = await h.command(`status ${CLUSTER}`, REQUESTER, OPS);
    expect(res.status).toBe(200);
    expect(h.ephemerals(REQUESTER).some((t) => t.includes(CLUSTER))).toBe(true);
  }, 120_000);

  it('a failing step is logged at debug and left out; the others run and it never throws', async () => {
    const logs: Array<Record<string, unknown>> = [];
    const logger = createLogger({
      level: 'debug',
      destination: new Writable({
        write(chunk: Buffer, _enc, cb) {
          for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) logs.push(JSON.parse(line) as Record<string, unknown>);
          cb();
        },
      }),
    });
    let statuses = 0;
    const result = await warmSlack({
      store: {
        replay: {
          claim: () => {
            throw new Error('store is read-only');
          },
        },
      },
      command: {
        clusterStatus: async (name: string): Promise<ClusterStatus> => {
          statuses++;
          return { name, lastPoll: null, health: [], alertsBySeverity: { critical: 0, warning: 0, info: 0 }, alerts: [] };
        },
      },
      cluster: 'prod',
      clock: () => Date.parse('2026-11-20T12:00:00Z'),
      logger,
    });
    expect(result.done).toEqual(['status']);
    expect(statuses).toBe(1);
    expect(logs.find((l) => l['step'] === 'replay-guard')).toMatchObject({ level: 'debug', msg: expect.stringContaining('warm-up step failed') });
  });
});
