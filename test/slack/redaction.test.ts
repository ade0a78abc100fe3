/**
 * Token-like strings in audit text never reach Slack: an audit event whose user agent carries a JWT and a `Bearer …`
 * value goes through the real poller, notifier, Bolt app and WebClient to the loopback Slack fake; the alert, its
 * Details reply (which lists every user agent) and every fallback text show `[Redacted]` in their place. The
 * redaction is the one that scrubs the log (src/core/redact.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { code, escClip, md, wireText } from '../../src/slack/blocks/text.js';
import { auditEvent } from '../sources/events.js';
import { ONCALL_APPROVER, OPS, startHarness, type Harness } from './harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

/** A fake ServiceAccount-token-shaped JWT (header, payload, signature; not a real credential). */
const JWT =
  'eyJhbGciOiJSUzI1NiIsImtpZCI6ImZha2Uta2V5In0.eyJpc3MiOiJodHRwczovL29pZGMuZWtzLmV4YW1wbGUiLCJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6a3ViZS1zeXN0ZW06bXVsdHVzIn0.ZmFrZS1zaWduYXR1cmUtbm90LXJlYWwtMDEyMzQ1Njc4OQ';
const SIGNATURE = 'ZmFrZS1zaWduYXR1cmUtbm90LXJlYWwtMDEyMzQ1Njc4OQ';
const PAYLOAD = 'eyJpc3MiOiJodHRwczovL29pZGMuZWtzLmV4YW1wbGUi';
const BEARER_VALUE = 'k8s-aws-v1.c2VjcmV0LXByZXNpZ25lZC11cmw';
const UA = `multus/v4.1.0 (linux/amd64) kubernetes/$Format debug-token=${JWT} auth=bearer ${BEARER_VALUE}`;

describe('Slack text redaction', () => {
  it('redacts JWTs and bearer values in escaped parts, code spans, text objects and fallback text, also when clipped', () => {
    expect(code(UA, 150)).not.toContain(SIGNATURE);
    expect(code(UA, 150)).toContain('[Redacted]');
    // A clip point inside the JWT's payload: the token is still recognised whole, no fragment of it is shown.
    const cut = UA.indexOf(JWT) + 60;
    expect(escClip(UA, cut)).not.toContain(PAYLOAD.slice(0, 20));
    expect(code(UA, cut)).not.toContain(PAYLOAD.slice(0, 20));
    expect(md(`*User agent* ${UA}`).text).not.toMatch(/ZmFrZS1z|k8s-aws-v1\.c2Vj/);
    expect(wireText(UA)).toBe('multus/v4.1.0 (linux/amd64) kubernetes/$Format debug-token=[Redacted] auth=bearer [Redacted]');
    expect(wireText(`Bearer ${BEARER_VALUE}`, 'mrkdwn')).toBe('Bearer [Redacted]');
    // Prose that merely names the scheme is left alone.
    expect(escClip('keeps a bearer or OAuth token of its own; Basic auth', 200)).toBe('keeps a bearer or OAuth token of its own; Basic auth');
  });

  it('a JWT and a bearer value inside an audit event’s user agent never reach the fake Slack, alert or Details', async () => {
    h = await startHarness();
    const before = h.slack.calls.length;
    h.appendAudit([auditEvent({ auditID: 'ua-jwt-1', time: h.now() - 60_000, kind: 'stale', pod: 'kube-multus-ds-b4j4z', secondsAfterWarning: 40 * 86_400, userAgent: UA })]);
    await h.poll();
    const multus = await h.alert('kube-system', 'multus');
    await h.click(ONCALL_APPROVER, multus, 'tw_details');

    const thread = h.slack.thread(OPS, multus.ts);
    const details = thread.map((m) => JSON.stringify(m.blocks)).join('\n');
    // The Details reply lists the new user agent (so the test looks where the token would have been) …
    expect(details).toContain('multus/v4.1.0 (linux/amd64) kubernetes/$Format debug-token=[Redacted] auth=bearer [Redacted]');
    // … and nothing sent to Slack since the event was read carries the token or the bearer value.
    const sent = h.slack.calls.slice(before);
    expect(sent.some((c) => c.method === 'chat.postMessage' && JSON.stringify(c.args).includes('Details'))).toBe(true);
    for (const c of sent) {
      const wire = JSON.stringify(c.args);
      expect(wire).not.toContain(SIGNATURE);
      expect(wire).not.toContain(PAYLOAD);
      expect(wire).not.toContain(BEARER_VALUE);
    }
  });
});
