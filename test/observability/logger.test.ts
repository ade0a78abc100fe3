import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, maskUrl, scrubSecrets, scrubValue } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { SECRET_CORES, SECRET_SAMPLES } from './secrets.js';

function capture() {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      cb();
    },
  });
  return { lines, destination };
}

describe('logger', () => {
  it('redacts secret fields and tokens inside messages', () => {
    const { lines, destination } = capture();
    const log = createLogger({ destination });
    const bot = 'xoxb-1111-2222-abcdefghijkl';
    const jwt = 'eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJpc3MiOiJrdWJlcm5ldGVzIn0.c2lnbmF0dXJl';
    log.info({ config: { slack: { botToken: bot, channel: '#ops' } }, headers: { authorization: `Bearer ${jwt}` } }, `posting with ${bot}`);
    log.error({ err: new Error(`request failed with token ${jwt}`) }, 'failed');
    const text = lines.join('\n');
    expect(text).not.toContain(bot);
    expect(text).not.toContain(jwt);
    const first = JSON.parse(lines[0]!);
    expect(first.config.slack.botToken).toBe('[Redacted]');
    expect(first.config.slack.channel).toBe('#ops');
    expect(first.msg).toBe('posting with [Redacted]');
    expect(first.level).toBe('info');
    expect(JSON.parse(lines[1]!).err.message).toBe('request failed with token [Redacted]');
  });

  it('scrubSecrets leaves ordinary text alone', () => {
    expect(scrubSecrets('subject: system:serviceaccount:kube-system:multus')).toBe('subject: system:serviceaccount:kube-system:multus');
    expect(scrubSecrets('app token xapp-1-A0-123-abc here')).toBe('app token [Redacted] here');
  });
});

describe('logger scrubs every string field', () => {
  for (const [kind, secret] of Object.entries(SECRET_SAMPLES)) {
    it(`${kind}: msg, err, err: String(e), nested fields, headers.Authorization, arrays, causes, child bindings`, () => {
      const { lines, destination } = capture();
      const log = createLogger({ destination });
      const e = new Error(`call failed: ${secret}`, { cause: new Error(`inner ${secret}`) });
      (e as Error & { data?: unknown }).data = { response: { detail: secret } };
      log.info(`message with ${secret}`);
      log.error({ err: e }, 'err field');
      log.error({ err: String(e) }, 'err as a string');
      log.error(e, 'error as first argument');
      log.warn({ headers: { Authorization: secret, 'X-Other': `x ${secret}` } }, 'capital A');
      log.warn({ request: { headers: { AUTHORIZATION: 'opaque-credential-value' } } }, 'nested capital');
      log.info({ command: `status ${secret}`, list: [secret, { deep: { deeper: [secret] } }], url: secret }, 'fields');
      log.child({ component: 'x', endpoint: secret }).info('child binding');
      log.info({ n: 3, ok: true, nothing: null }, 'plain values survive');
      const text = lines.join('\n');
      expect(text).not.toContain(SECRET_CORES[kind]);
      expect(text).not.toContain('opaque-credential-value');
      expect(lines).toHaveLength(9);
      for (const l of lines) JSON.parse(l);
      const errLine = JSON.parse(lines[1]!) as { err: { message: string; type: string; stack: string } };
      expect(errLine.err.type).toBe('Error');
      expect(errLine.err.message).toContain('call failed: ');
      expect(JSON.parse(lines[3]!).err.message).toContain('call failed: ');
      expect(JSON.parse(lines[8]!)).toMatchObject({ n: 3, ok: true, nothing: null, msg: 'plain values survive' });
    });
  }

  it('masks URL userinfo and keeps the rest of the URL', () => {
    expect(maskUrl('https://bot:hunter2@proxy.example.com:8443/api/')).toBe('https://[Redacted]@proxy.example.com:8443/api/');
    expect(maskUrl('https://slack-gov.com/api/')).toBe('https://slack-gov.com/api/');
    expect(scrubSecrets('fetch http://u:p@10.0.0.1:3128/x failed')).toBe('fetch http://[Redacted]@10.0.0.1:3128/x failed');
    expect(scrubSecrets('https://s3.amazonaws.com/b/k?X-Amz-Credential=AK%2F1&X-Amz-Signature=abc123')).toBe('https://s3.amazonaws.com/b/k?X-Amz-Credential=[Redacted]&X-Amz-Signature=[Redacted]');
  });

  it('survives cycles and deep objects', () => {
    const a: Record<string, unknown> = { name: 'a' };
    a.self = a;
    expect(scrubValue(a)).toEqual({ name: 'a', self: '[Circular]' });
    let deep: Record<string, unknown> = { v: 'xoxb-1-2-abc' };
    for (let i = 0; i < 20; i++) deep = { d: deep };
    expect(JSON.stringify(scrubValue(deep))).toContain('[Truncated]');
  });
});

describe('metrics', () => {
  it('exposes counters in the Prometheus text format with labels', async () => {
    const m = new Metrics();
    m.polls.inc({ cluster: 'prod', outcome: 'ok' });
    m.polls.inc({ cluster: 'prod', outcome: 'ok' });
    m.daysToRejection.set({ cluster: 'prod' }, 6.5);
    const text = await m.text();
    expect(text).toContain('tokenwatch_polls_total{cluster="prod",outcome="ok"} 2');
    expect(text).toContain('tokenwatch_days_to_nearest_rejection{cluster="prod"} 6.5');
  });
});
