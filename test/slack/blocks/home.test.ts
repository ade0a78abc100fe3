/**
 * The Home tab view (src/slack/blocks/home.ts): ranking by days to rejection, and Slack's 100-block view limit for
 * any fleet size and hostile names (every view checked with `validateHomeView`).
 */
import { describe, expect, it } from 'vitest';
import { homeView, rankAlerts, type HomeAlert, type HomeApproval, type HomeCluster } from '../../../src/slack/blocks/home.js';
import { LIMITS, validateHomeView } from '../../../src/slack/blocks/limits.js';
import { HOUR, multusFinding, NOW } from './fixtures.js';

const DAY = 24 * HOUR;

function staleAlert(cluster: string, ns: string, sa: string, rejectionInDays: number): HomeAlert {
  const rejectionAt = new Date(NOW + rejectionInDays * DAY + HOUR).toISOString();
  return { cluster, severity: rejectionInDays < 7 ? 'critical' : 'info', live: [multusFinding({ cluster, namespace: ns, serviceAccount: sa, rejectionAt, severity: 'info', tokens: [] })] };
}

const unauthorizedNow: HomeAlert = {
  cluster: 'prod-eks',
  severity: 'critical',
  live: [multusFinding({ kind: 'unauthorized', rejectionAt: null, lastSeen: new Date(NOW - 60_000).toISOString() }), multusFinding({ rejectionAt: new Date(NOW + 30 * DAY).toISOString() })],
};

const clusters = (n: number, name = (i: number) => `c-${i}`): HomeCluster[] =>
  Array.from({ length: n }, (_, i) => ({ name: name(i), sources: [{ name: 'audit log', state: i % 7 === 0 ? 'failing' : 'ok', detail: 'AccessDeniedException' }, { name: 'API-server metrics', state: 'ok' }, { name: 'node probe', state: 'off' }] }));

describe('Home view', () => {
  it('ranks 401s now first, then by days to rejection, then alerts without a rejection date', () => {
    const legacy: HomeAlert = { cluster: 'a', severity: 'info', live: [multusFinding({ cluster: 'a', namespace: 'ci', serviceAccount: 'deployer', kind: 'legacy-token', rejectionAt: null })] };
    const in44 = staleAlert('prod-eks', 'flux-system', 'helm-controller', 44);
    const in8 = staleAlert('staging-eks', 'logging', 'fluent-bit', 8);
    const passed = staleAlert('dev', 'x', 'y', -3);
    const ranked = rankAlerts([legacy, in44, unauthorizedNow, in8, passed], NOW);
    expect(ranked).toEqual([unauthorizedNow, passed, in8, in44, legacy]);
    const v = homeView({ now: NOW, alerts: [legacy, in44, unauthorizedNow, in8, passed], clusters: clusters(3), approvals: [] });
    const lines = v.blocks.filter((b) => b.type === 'section').map((b) => (b as { text: { text: string } }).text.text);
    expect(lines[0]).toContain('requests now fail with 401');
    expect(lines[1]).toContain('rejection date passed');
    expect(lines[2]).toContain('rejected in 8 days');
    expect(lines[3]).toContain('rejected in 44 days');
    expect(lines[4]).toContain('legacy Secret token in use');
    expect(validateHomeView(v)).toEqual([]);
  });

  it('stays within 100 blocks for 1,000 clusters, 500 alerts and 30 approvals with hostile names, counting what is not shown', () => {
    const long = (i: number) => `${'x'.repeat(300)}*_~<@U0>&${i}`;
    const alerts = Array.from({ length: 500 }, (_, i) => staleAlert(long(i % 1000), long(i), long(i), i % 90));
    const approvals: HomeApproval[] = Array.from({ length: 30 }, (_, i) => ({
      action: 'restart',
      target: { cluster: long(i), kind: 'DaemonSet', namespace: long(i), name: long(i), findingId: 'f' },
      requester: 'U0REQUEST1',
      needed: 2,
      waitingOn: Array.from({ length: 40 }, (_, j) => `U0APPR${String(j).padStart(4, '0')}`),
      expiresAt: NOW + i * 60_000,
      permalink: `https://x.slack.com/archives/C1/p${i}`,
    }));
    const v = homeView({ now: NOW, alerts, clusters: clusters(1000, long), approvals });
    expect(v.blocks.length).toBeLessThanOrEqual(LIMITS.viewBlocks);
    expect(validateHomeView(v)).toEqual([]);
    const ctx = v.blocks.filter((b) => b.type === 'context').map((b) => JSON.stringify(b));
    const shownAlerts = v.blocks.filter((b) => b.type === 'section' && (b as { text: { text: string } }).text.text.includes('rejected in')).length;
    expect(ctx.some((t) => t.includes(`…and ${500 - shownAlerts} more alerts not shown`))).toBe(true);
    expect(ctx.some((t) => t.includes('…and 20 more open approvals not shown'))).toBe(true);
    expect(ctx.some((t) => /more clusters not shown/.test(t))).toBe(true);
    // Hostile text is escaped, not interpreted as a mention.
    expect(JSON.stringify(v)).not.toContain('<@U0>');
  });

  it('says per cluster whether turning token extension off is safe, in words that do not move with the window', () => {
    const ok = [{ name: 'audit log', state: 'ok' }] as HomeCluster['sources'];
    const v = homeView({
      now: NOW,
      alerts: [],
      approvals: [],
      clusters: [
        { name: 'prod-eks', sources: ok, readiness: { verdict: 'not-safe', clients: 3 } },
        { name: 'dev-eks', sources: ok, readiness: { verdict: 'safe', clients: 0 } },
        { name: 'new-eks', sources: ok, readiness: { verdict: 'unknown', clients: 0 } },
        { name: 'one-eks', sources: ok, readiness: { verdict: 'not-safe', clients: 1 } },
      ],
    });
    const text = JSON.stringify(v);
    expect(text).toContain('*prod-eks* · ✅ audit log · ❌ token extension off: not safe, 3 clients would break');
    expect(text).toContain('*dev-eks* · ✅ audit log · ✅ token extension off: safe');
    expect(text).toContain('*new-eks* · ✅ audit log · ❔ token extension off: unknown');
    expect(text).toContain('*one-eks* · ✅ audit log · ❌ token extension off: not safe, 1 client would break');
    expect(validateHomeView(v)).toEqual([]);
  });

  it('says so when there is nothing to show', () => {
    const v = homeView({ now: NOW, alerts: [], clusters: [], approvals: [] });
    const text = JSON.stringify(v);
    expect(text).toContain('No open alerts');
    expect(text).toContain('No approval is waiting for a vote.');
    expect(text).toContain('No cluster is configured.');
    expect(validateHomeView(v)).toEqual([]);
  });
});
