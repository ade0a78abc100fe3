/**
 * Every text that reaches Slack is escaped the same way (`&`, `<`, `>`; https://api.slack.com/reference/surfaces/formatting#escaping),
 * the fallback `text` included: a forged audit line (empty `user`, a stale-token annotation naming a namespace
 * `<!channel>` and a ServiceAccount `<https://evil.example|click>`) goes through the real poller, notifier, Bolt's
 * WebClient and the Slack fake; what the fake received never carries the raw mention or link.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { escapeMrkdwn, wireText } from '../../src/slack/blocks/text.js';
import { auditEvent } from '../sources/events.js';
import { OPS, startHarness, type Harness } from './harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

const NS = '<!channel>';
const SA = '<https://evil.example|click>';

/** A stale-token event with an empty `user` whose annotation names `system:serviceaccount:<!channel>:<https://…|click>`. */
function forgedLine(time: number): string {
  const e = JSON.parse(auditEvent({ auditID: 'forged-1', time, kind: 'stale', secondsAfterWarning: 40 * 86_400 })) as Record<string, unknown> & { annotations: Record<string, string> };
  e['user'] = {};
  e.annotations['authentication.k8s.io/stale-token'] = `subject: system:serviceaccount:${NS}:${SA}, seconds after warning threshold: ${40 * 86_400}`;
  return JSON.stringify(e);
}

describe('fallback text escaping', () => {
  it('wireText escapes with escapeMrkdwn and clips to 40,000 chars without splitting an entity', () => {
    expect(wireText(`[prod] used by ${NS}/${SA} & more`)).toBe(`[prod] used by ${escapeMrkdwn(NS)}/${escapeMrkdwn(SA)} &amp; more`);
    expect(wireText(`[prod] used by ${NS}/${SA}`)).toBe('[prod] used by &lt;!channel&gt;/&lt;https://evil.example|click&gt;');
    const long = wireText('<'.repeat(20_000));
    expect(long.length).toBeLessThanOrEqual(40_000);
    expect(long).toMatch(/^(&lt;)+…$/);
  });

  it('a forged audit line with <!channel> and a link as names: neither reaches Slack raw, in text or blocks', async () => {
    h = await startHarness();
    const before = h.slack.calls.length;
    h.appendAudit([forgedLine(h.now() - 60_000)]);
    await h.poll();
    const sent = h.slack.calls.slice(before).filter((c) => ['chat.postMessage', 'chat.update', 'chat.postEphemeral'].includes(c.method));
    const posted = sent.filter((c) => JSON.stringify(c.args).includes('evil.example'));
    expect(posted.length).toBeGreaterThan(0); // the alert about the forged names was posted …
    for (const c of sent) {
      const text = String(c.args['text']);
      expect(text).not.toContain('<!channel>');
      expect(text).not.toContain('<https://evil.example');
      expect(JSON.stringify(c.args['blocks'] ?? '')).not.toContain('<!channel>');
      expect(JSON.stringify(c.args['blocks'] ?? '')).not.toContain('<https://evil.example');
    }
    // … with the names escaped, as text.
    const alert = h.slack.messages(OPS).find((m) => m.text.includes('evil.example'))!;
    expect(alert.text).toContain(`${escapeMrkdwn(NS)}/${escapeMrkdwn(SA)}`);
  });
});
