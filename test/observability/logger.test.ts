import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, scrubSecrets } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';

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
