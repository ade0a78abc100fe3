/**
 * Requests with a bad signature, through the real Bolt HTTPReceiver: every one is refused (401) and counted in
 * `tokenwatch_slack_rejected_requests_total{reason="signature"}`, but the log gets one line per minute, and the next
 * line says how many were left out.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { sendSlashCommand } from '../../src/sandbox/fakes/slack.js';
import { OPS, REQUESTER, startHarness, type Harness } from './harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

const BAD = 2_000;

describe('bad-signature requests', () => {
  it(`${BAD} requests: ${BAD} refusals counted, one log line; a minute later one more line with the number left out`, async () => {
    const logs: Array<Record<string, unknown>> = [];
    let offset = 0;
    h = await startHarness({ logs, slack: { wallClock: () => Date.now() + offset } });
    const url = h.bot.eventsUrl!;
    const statuses: number[] = [];
    for (let i = 0; i < BAD; i += 25) {
      const batch = Array.from({ length: Math.min(25, BAD - i) }, () => sendSlashCommand(url, 'not-the-signing-secret', { text: 'help', user_id: REQUESTER, channel_id: OPS }));
      statuses.push(...(await Promise.all(batch)).map((r) => r.status));
    }
    expect(statuses).toEqual(Array(BAD).fill(401));
    const refusedLines = () => logs.filter((l) => String(l['msg']).startsWith('Failed to parse and verify the request data'));
    expect(refusedLines()).toHaveLength(1);
    expect(refusedLines()[0]).toMatchObject({ level: 'warn', reason: 'signature', suppressedSinceLastLine: 0 });
    const metric = async () => /tokenwatch_slack_rejected_requests_total\{reason="signature"\} (\d+)/.exec(await h!.metrics.text())?.[1];
    expect(await metric()).toBe(String(BAD));

    offset += 61_000;
    expect((await sendSlashCommand(url, 'not-the-signing-secret', { text: 'help', user_id: REQUESTER, channel_id: OPS })).status).toBe(401);
    expect(refusedLines()).toHaveLength(2);
    expect(refusedLines()[1]).toMatchObject({ reason: 'signature', suppressedSinceLastLine: BAD - 1 });
    expect(await metric()).toBe(String(BAD + 1));

    // A correctly signed request is still handled.
    expect((await h.command('help', REQUESTER)).status).toBe(200);
  }, 120_000);
});
