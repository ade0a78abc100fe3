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
import { auditEvent, type EventSpec } from '../sources/events.js';

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
    // The API server keeps writing audit events (none with a token annotation): the log is not blind, so the answer
    // rests on audit data; a log with no event at all stays "unknown" (it is blind).
    writeFileSync(quiet, `${auditEvent({ auditID: 'legacy-1', time: h.now() - 60_000, kind: 'legacy', namespace: 'ci', serviceAccount: 'jenkins' })}\n`);
    await h.poll('staging-eks');
    await h.command('status staging-eks', REQUESTER, STAGING);
    const line = readinessLine(h, STAGING)!;
    expect(line).toMatch(/safe: no stale token use in 8 days of audit data/);
    expect(line).toMatch(/; \d+ successful polls?/);
  });

  for (const [name, skew] of [['2 days', 2 * DAY], ['8 days', 8 * DAY]] as const) {
    it(`10 token uses stamped ${name} ahead of the host clock: left out of the records (no phantom token), readiness unknown, status names them`, async () => {
      const log = join(mkdtempSync(join(tmpdir(), 'tw-skew-')), 'audit.log');
      writeFileSync(log, '');
      h = await startHarness({ tweak: (c) => void (c.clusters[1]!.audit = { file: { path: log } }) });
      h.advance(8 * DAY);
      const now = h.now();
      // An hour of normal events (legacy-token uses of one client), then 10 stale uses of a node whose clock runs ahead.
      const normal: EventSpec[] = Array.from({ length: 60 }, (_, i) => ({ auditID: `n${i}`, time: now - 3_600_000 + i * 60_000, kind: 'legacy', namespace: 'ci', serviceAccount: 'jenkins' }));
      const skewed: EventSpec[] = Array.from({ length: 10 }, (_, i) => ({ auditID: `k${i}`, time: now - 600_000 + i * 1000 + skew, kind: 'stale', namespace: 'logging', serviceAccount: 'fluent-bit', pod: 'fluent-bit-x1', secondsAfterWarning: 80 * 86_400 }));
      writeFileSync(log, `${[...normal, ...skewed].map(auditEvent).join('\n')}\n`);
      await h.poll('staging-eks');
      await h.command('status staging-eks', REQUESTER, STAGING);
      const e = h.slack.ephemerals({ user: REQUESTER }).filter((m) => m.channel === STAGING).at(-1)!;
      const text = blockText(e);
      expect(readinessLine(h, STAGING)).toContain('unknown: audit timestamps inconsistent: 10 token uses stamped');
      expect(text).toContain(`audit timestamps inconsistent: 10 token uses stamped ${new Date(skewed[0]!.time).toISOString()} to ${new Date(skewed[9]!.time).toISOString()} left out of the last poll`);
      // No stale-token finding (and so no rejection date) from the skewed uses; the legacy client is there.
      expect(text).not.toContain('fluent-bit');
      expect(text).toContain('jenkins');
    });
  }

  it('Details of an alert names the token uses its cluster\'s last poll left out for a skewed timestamp, with their audit source', async () => {
    const log = join(mkdtempSync(join(tmpdir(), 'tw-skew-')), 'audit.log');
    writeFileSync(log, '');
    h = await startHarness({ tweak: (c) => void (c.clusters[0]!.audit = { file: { path: log } }) });
    h.advance(8 * DAY);
    const now = h.now();
    // prod-eks reads this log instead of the Multus example. An hour of stale uses of one client 80 days past its warning (an alert), then 10 uses stamped 2 days ahead.
    const normal: EventSpec[] = Array.from({ length: 60 }, (_, i) => ({ auditID: `n${i}`, time: now - 3_600_000 + i * 60_000, kind: 'stale', namespace: 'monitoring', serviceAccount: 'exporter', pod: 'exporter-0', secondsAfterWarning: 80 * 86_400 }));
    const skewed: EventSpec[] = Array.from({ length: 10 }, (_, i) => ({ auditID: `k${i}`, time: now - 600_000 + i * 1000 + 2 * DAY, kind: 'stale', namespace: 'logging', serviceAccount: 'fluent-bit', pod: 'fluent-bit-x1', secondsAfterWarning: 80 * 86_400 }));
    writeFileSync(log, `${[...normal, ...skewed].map(auditEvent).join('\n')}\n`);
    await h.poll('prod-eks');
    const alert = await h.alert('monitoring', 'exporter');
    await h.click(REQUESTER, alert, 'tw_details', { channel: OPS });
    const details = h.slack.thread(OPS, alert.ts).map(blockText).join('\n');
    expect(details).toContain('🔎 Details · prod-eks · monitoring/exporter');
    expect(details).toContain(
      `⚠️ Audit timestamps inconsistent: 10 token uses stamped ${new Date(skewed[0]!.time).toISOString()} to ${new Date(skewed[9]!.time).toISOString()} left out of the last poll (`,
    );
    expect(details).toContain(log);
    expect(details).not.toContain('fluent-bit-x1');
  });
});
