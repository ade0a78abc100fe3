/**
 * `/tokens status`: the one line answering "is it safe to turn token extension off?" per cluster, through the real
 * Bolt receiver, poller and store (fake Slack, fake Kubernetes on loopback). The window runs from the cluster's first
 * successful poll; the default minimum is 7 days (clients that refresh a cached token weekly must be seen).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { blockText, OPS, REQUESTER, STAGING, startHarness, type Harness } from './harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

const DAY = 86_400_000;
const readinessLine = (x: Harness, channel: string) => {
  const e = x.slack.ephemerals({ user: REQUESTER }).filter((m) => m.channel === channel).at(-1)!;
  return blockText(e).split('\n').find((l) => l.includes('Token extension off'));
};

describe('/tokens status: token-extension readiness', () => {
  it('not safe on a cluster whose clients present stale tokens: names how many would break', async () => {
    h = await startHarness();
    await h.command('status prod-eks', REQUESTER, OPS);
    const line = readinessLine(h, OPS);
    expect(line).toBeDefined();
    expect(line).toContain('(--service-account-extend-token-expiration=false)?');
    expect(line).toMatch(/not safe: \d+ clients? would break/);
  });

  it('unknown while the cluster has been watched for less than the minimum, safe once 7 days of polls saw no stale use', async () => {
    const quiet = join(mkdtempSync(join(tmpdir(), 'tw-quiet-')), 'audit.log');
    writeFileSync(quiet, '');
    // staging-eks reads an empty audit log: no stale use at all.
    h = await startHarness({ tweak: (c) => void (c.clusters[1]!.audit = { file: { path: quiet } }) });
    await h.poll('staging-eks');
    await h.command('status staging-eks', REQUESTER, STAGING);
    expect(readinessLine(h, STAGING)).toContain('unknown: the audit window (0 minutes) is shorter than the minimum of 7 days');
    h.advance(8 * DAY);
    await h.poll('staging-eks');
    await h.command('status staging-eks', REQUESTER, STAGING);
    const line = readinessLine(h, STAGING)!;
    expect(line).toMatch(/safe: no stale token use in 8 days of audit data/);
    expect(line).toMatch(/; \d+ successful polls?/);
  });
});
