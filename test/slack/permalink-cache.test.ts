/**
 * `/tokens status` links each alert with `chat.getPermalink`, asked once per message (src/slack/api.ts
 * `SlackApi.permalink`): through `tokenwatch serve`, the real Bolt app and the loopback fake Slack, three status
 * commands ask Slack once per alert message, and every answer still links every alert.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { REQUESTER, startHarness, type Harness } from './harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

describe('permalinks of /tokens status', () => {
  it('chat.getPermalink is called once per alert message across repeated status commands', { timeout: 60_000 }, async () => {
    h = await startHarness();
    const links = () => [...JSON.stringify(h!.slack.ephemerals({ user: REQUESTER }).at(-1)!.blocks).matchAll(/<(https?:[^|>]+)\|/g)].map((m) => m[1]);
    const before = h.slack.callsTo('chat.getPermalink').length;
    await h.command('status prod-eks', REQUESTER);
    const first = links();
    const asked = h.slack.callsTo('chat.getPermalink').slice(before);
    // One call per alert message, no message asked twice.
    const messages = asked.map((c) => `${String(c.args.channel)}/${String(c.args.message_ts)}`);
    expect(messages.length).toBeGreaterThan(1);
    expect(new Set(messages).size).toBe(messages.length);
    expect(first.length).toBe(messages.length);

    await h.command('status prod-eks', REQUESTER);
    await h.command('status prod-eks', REQUESTER);
    expect(h.slack.callsTo('chat.getPermalink').length - before).toBe(messages.length);
    expect(links()).toEqual(first);
  });
});
