import { describe, expect, it } from 'vitest';
import { banner } from '../../src/cli/commands/sandbox.js';

const base = { url: 'http://127.0.0.1:8787/', speed: 60, pollEverySeconds: 10, dataDir: '/tmp/x', resumed: false };

describe('sandbox banner', () => {
  it('gives the URL and the steps to try when the Slack app runs', () => {
    const text = banner({ ...base, slack: true });
    expect(text).toContain('Channel page   http://127.0.0.1:8787/');
    expect(text).toContain('Type  /tokens status prod-eks');
    expect(text).toContain('About 60 s later'); // 3607 s of sandbox time at ×60
  });

  it('does not offer Slack steps with --no-slack', () => {
    const text = banner({ ...base, slack: false });
    expect(text).not.toContain('/tokens status');
    expect(text).toContain('the Slack app is off (--no-slack)');
  });
});
