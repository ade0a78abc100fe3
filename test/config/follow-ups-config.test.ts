/**
 * `slack.approvals` reminders, escalation and requester outcomes, and `slack.paging` (docs/slack.md "Reminders,
 * escalation and paging"): defaults, the cross-field and environment rules, and the routing key kept out of errors and
 * the rendered config.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, type ConfigIssue, parseConfig } from '../../src/config/schema.js';
import { renderEffectiveConfig } from '../../src/config/render.js';

const BOT = 'xoxb-1111111111-2222222222222-AbCdEfGhIjKlMnOpQrStUvWx';
const SIGNING = '8f742231b10e8888abcd99yyyzzz85a5';
const ROUTING_KEY = 'R0UT1NGKEYF0RTHEFAKEPAGERDUTY000';
const ENV = { SLACK_BOT_TOKEN: BOT, SLACK_SIGNING_SECRET: SIGNING };

function raw(slack: Record<string, unknown> = {}) {
  return {
    slack: { enabled: true, mode: 'http', ...slack },
    clusters: [{ name: 'dev', audit: { file: { path: '/var/log/audit.log' } }, slack: { channel: 'C0AAA', approvers: ['U0AAA'] } }],
  };
}

function issuesOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.issues.map((i: ConfigIssue) => `${i.path.join('.')} → ${i.message}`).sort();
  }
  throw new Error('expected a ConfigError');
}

describe('slack.approvals follow-ups', () => {
  it('remind at half the expiry, tell the requester, no escalation group, no paging by default', () => {
    const c = parseConfig(raw(), ENV);
    expect(c.slack!.approvals).toEqual({ expiresAfter: 1_800_000, reminders: true, notifyRequester: true });
    expect(c.slack!.paging).toBeUndefined();
  });

  it('takes remindAfter, escalateTo and the switches', () => {
    const c = parseConfig(raw({ approvals: { expiresAfter: '1h', remindAfter: '20m', escalateTo: 'S0ONCALL01', notifyRequester: false, reminders: false } }), ENV);
    expect(c.slack!.approvals).toEqual({ expiresAfter: 3_600_000, remindAfter: 1_200_000, escalateTo: 'S0ONCALL01', notifyRequester: false, reminders: false });
  });

  it('refuses a reminder at or after the expiry, and an escalation target that is not a user group', () => {
    expect(issuesOf(() => parseConfig(raw({ approvals: { expiresAfter: '30m', remindAfter: '30m', escalateTo: 'U0AAA' } }), ENV))).toEqual([
      'slack.approvals.escalateTo → expected a Slack user group id (S…)',
      'slack.approvals.remindAfter → must be less than expiresAfter (30m): a request is reminded before it expires',
    ]);
  });
});

describe('slack.paging', () => {
  it('PagerDuty: the default Events API URL and the routing key from PAGERDUTY_ROUTING_KEY; a webhook by URL', () => {
    const c = parseConfig(raw({ paging: { after: '10m', pagerduty: {}, webhook: { url: 'https://hooks.example.com/x?token=abc' } } }), { ...ENV, PAGERDUTY_ROUTING_KEY: ROUTING_KEY });
    expect(c.slack!.paging).toEqual({ after: 600_000, pagerduty: { url: 'https://events.pagerduty.com' }, webhook: { url: 'https://hooks.example.com/x?token=abc' } });
    expect(c.slack!.pagerdutyRoutingKey).toBe(ROUTING_KEY);
    // The rendered config masks the routing key and the webhook URL's path and query (a token often sits there).
    const text = renderEffectiveConfig(c);
    expect(text).not.toContain(ROUTING_KEY);
    expect(text).not.toContain('token=abc');
    expect(text).toContain('PAGERDUTY_ROUTING_KEY: ****');
    expect(text).toContain('url: https://hooks.example.com/[Redacted]');
  });

  it('needs a target, and the routing key (32 characters) for PagerDuty, never echoing a wrong one', () => {
    expect(issuesOf(() => parseConfig(raw({ paging: {} }), ENV))).toEqual(['slack.paging → needs pagerduty or webhook (where to page)']);
    expect(issuesOf(() => parseConfig(raw({ paging: { pagerduty: {} } }), ENV))).toEqual([
      'env.PAGERDUTY_ROUTING_KEY → required by slack.paging.pagerduty (the integration key of a PagerDuty Events API v2 service)',
    ]);
    const wrong = 'not-a-key-secret-value';
    const issues = issuesOf(() => parseConfig(raw({ paging: { pagerduty: {} } }), { ...ENV, PAGERDUTY_ROUTING_KEY: wrong }));
    expect(issues).toEqual(['env.PAGERDUTY_ROUTING_KEY → expected the 32-character integration key of a PagerDuty Events API v2 integration']);
    expect(issues.join('\n')).not.toContain(wrong);
  });
});
