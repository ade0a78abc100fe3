import { describe, expect, it } from 'vitest';
import { banner } from '../../src/cli/commands/sandbox.js';
import { SANDBOX_NET_CHANNEL } from '../../src/sandbox/sandbox.js';

const base = { url: 'http://127.0.0.1:8787/', speed: 60, pollEverySeconds: 10, dataDir: '/tmp/x', resumed: false };

describe('sandbox banner', () => {
  it('gives the URL and the steps to try when the Slack app runs', () => {
    const text = banner({ ...base, slack: true });
    expect(text).toContain('Channel page   http://127.0.0.1:8787/');
    expect(text).toContain('Type  /tokens status prod-eks');
    expect(text).toContain('About 60 s later'); // 3607 s of sandbox time at ×60
  });

  it('sends the reader to the channel the routing rules post the Multus alert to', () => {
    const step1 = banner({ ...base, slack: true }).split('\n').find((l) => l.includes('Multus alert'));
    expect(step1).toContain(`#${SANDBOX_NET_CHANNEL.name}`);
    expect(step1).not.toContain('#ops-prod-eks');
  });

  it('does not offer Slack steps with --no-slack', () => {
    const text = banner({ ...base, slack: false });
    expect(text).not.toContain('/tokens status');
    expect(text).toContain('the Slack app is off (--no-slack)');
  });
});
