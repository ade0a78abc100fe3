import { describe, expect, it } from 'vitest';
import { runCli } from '../cli/run-cli.js';

const FILE = 'test/fixtures/metrics/apiserver-metrics.txt';

describe('tokenwatch scan --metrics', () => {
  it('reports totals since the API-server process started and their average rate as of --now (JSON, additive field)', async () => {
    const run = await runCli(['scan', '--metrics', FILE, '--now', '2026-11-20T12:00:00Z', '--format', 'json']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const doc = JSON.parse(run.stdout) as Record<string, unknown>;
    expect(Object.keys(doc)).toEqual(['findings', 'groups', 'stats', 'now', 'cluster', 'warnings', 'ignoredEventTimes', 'readiness', 'clusterEvents', 'metrics']);
    expect(doc['metrics']).toMatchObject({
      file: FILE,
      scope: 'api-server-replica',
      processStart: '2026-11-20T06:00:00.250Z',
      at: '2026-11-20T12:00:00.000Z',
      uptimeSeconds: 21599.75,
      totals: { serviceaccount_stale_tokens_total: 252, serviceaccount_invalid_legacy_auto_token_uses_total: 2 },
      perHour: { serviceaccount_stale_tokens_total: 42, serviceaccount_legacy_tokens_total: 2 },
    });
  });

  it('prints a table section that says the figure is per replica', async () => {
    const run = await runCli(['scan', '--metrics', FILE, '--now', '2026-11-20T12:00:00Z']);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`API-server token metrics from ${FILE} — one API-server replica (the one that answered), not a cluster-wide figure:`);
    expect(run.stdout).toMatch(/serviceaccount_stale_tokens_total\s+252\s+42\.0\/h average/);
    // No audit input, so no finding: the headline must not read as "nothing found" above 252 stale uses.
    expect(run.stdout.split('\n')[0]).toBe('no stale, legacy or unauthorized token use found in 0 events, but the API-server metrics below count stale tokens in use');
  });

  it('exits 2 naming the file when it is not API-server metrics, or --now is before the process start; and needs an input', async () => {
    const bad = await runCli(['scan', '--metrics', 'README.md']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^tokenwatch: cannot read README\.md: not Prometheus text \(\d+ unreadable lines, first at line \d+\)\n$/);
    const early = await runCli(['scan', '--metrics', FILE, '--now', '2026-11-20T05:00:00Z']);
    expect(early.code).toBe(2);
    expect(early.stderr).toBe(`tokenwatch: cannot read ${FILE}: reference time 2026-11-20T05:00:00.000Z is before the API-server process started (2026-11-20T06:00:00.250Z)\n`);
    const none = await runCli(['scan']);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('--audit-log');
    expect(none.stdout).toBe('');
  });
});
