/**
 * A mention is built only from the config (`slack.routes[].owners`), never from audit-log text: forged audit lines whose
 * user agent and names carry `<!subteam^S123>`, `<!channel>`, `<!here>`, `@here` and a user mention go through the
 * real poller, notifier (routing and owner mentions on), Bolt's WebClient and the Slack fake; the only mention Slack
 * receives is the configured owner group's.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { auditEvent } from '../sources/events.js';
import { OPS, startHarness, type Harness } from './harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

const OWNERS = 'S0NETONCAL';
const FORGED_UA = 'kubectl/v1.30 <!subteam^S123> <!channel> <!here> @here <@U0OUTSIDE1> <!subteam^S0NETONCAL>';

/** A stale-token event with an empty `user` whose annotation names ServiceAccount `subject` in namespace `ns`. */
function forgedName(auditID: string, time: number, ns: string, sa: string): string {
  const e = JSON.parse(auditEvent({ auditID, time, kind: 'stale', secondsAfterWarning: 40 * 86_400, userAgent: FORGED_UA })) as Record<string, unknown> & { annotations: Record<string, string> };
  e['user'] = {};
  e.annotations['authentication.k8s.io/stale-token'] = `subject: system:serviceaccount:${ns}:${sa}, seconds after warning threshold: ${40 * 86_400}`;
  return JSON.stringify(e);
}

describe('forged mentions', () => {
  it('user agents and names with <!subteam^…>, <!channel>, @here cannot create a mention; only the configured owners are mentioned', async () => {
    h = await startHarness({
      tweak: (c) => {
        // Every namespaced alert routes to the ops channel and mentions the owners: the mention path runs for the forged alerts.
        c.slack!.routes = [{ match: { namespaces: ['*'] }, channel: OPS, owners: [OWNERS], mentionFrom: 'info' }];
      },
    });
    const before = h.slack.calls.length;
    const t = h.now() - 60_000;
    h.appendAudit([
      auditEvent({ auditID: 'ua-1', time: t, kind: 'stale', namespace: 'shop', serviceAccount: 'forged-ua', pod: 'forged-ua-1', secondsAfterWarning: 40 * 86_400, userAgent: FORGED_UA }),
      forgedName('name-1', t, '<!subteam^S123>', '<!channel>'),
      forgedName('name-2', t, '@here', '<!here>'),
    ]);
    await h.poll();
    const sent = () => h!.slack.calls.slice(before).filter((c) => ['chat.postMessage', 'chat.update', 'chat.postEphemeral'].includes(c.method));
    const wire = sent().map((c) => JSON.stringify([c.args['text'], c.args['blocks'] ?? null]));
    // The forged text did reach Slack, escaped (so this test would see a raw one) …
    expect(wire.some((w) => w.includes('&lt;!subteam^S123&gt;'))).toBe(true);
    expect(wire.some((w) => w.includes('&lt;!channel&gt;'))).toBe(true);
    // … and the new alerts mention the configured owners.
    expect(wire.some((w) => w.includes(`<!subteam^${OWNERS}>`))).toBe(true);
    for (const c of sent()) {
      const w = JSON.stringify([c.args['text'], c.args['blocks'] ?? null]);
      for (const raw of ['<!subteam^S123>', '<!channel>', '<!here>', '<!everyone>', '<@U0OUTSIDE1>']) expect(w).not.toContain(raw);
      // Every mention on the wire is the configured group's, in the owners line built from the config.
      expect(w.match(/<!subteam\^[^>]*>|<@[^>]*>|<!(channel|here|everyone)[^>]*>/g) ?? []).toEqual((w.match(/🔔 Owners: <!subteam\^S0NETONCAL>/g) ?? []).map(() => `<!subteam^${OWNERS}>`));
      // Plain `@here` stays text: no link_names or parse=full that would turn it into a mention.
      expect(c.args['link_names']).toBeFalsy();
      expect(c.args['parse']).not.toBe('full');
    }
  });
});
