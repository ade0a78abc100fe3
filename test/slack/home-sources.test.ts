/**
 * The Home tab's source line for the audit log (`sourcesOf` in src/slack/home.ts): a poll that is still running past
 * the slow bound is not a failed poll, and the line says which; a failed poll shows its error.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { sourcesOf } from '../../src/slack/home.js';
import type { SlackCluster, SlackPollHealth } from '../../src/slack/context.js';

const NOW = Date.parse('2026-11-20T12:00:00Z');
const config = parseConfig({ clusters: [{ name: 'prod-eks', audit: { file: { path: '/var/log/audit.log' } }, kubernetes: { none: true } }] }, {}).clusters[0]!;

function cluster(health: Partial<SlackPollHealth>): Pick<SlackCluster, 'config' | 'poller' | 'probe' | 'kubeError' | 'blind'> {
  return { config, poller: { health: () => ({ cluster: 'prod-eks', sourceId: 'file:/var/log/audit.log', status: 'ok', ...health }) as SlackPollHealth } };
}

describe('Home tab: the audit log source', () => {
  it('a slow poll (still running) reads as taking long, not as failed; its text does not move while it runs', () => {
    const slow = (forMs: number) => cluster({ status: 'degraded', lastSuccessAt: NOW - 60_000, runningSince: NOW - forMs, slow: { since: NOW - forMs, forMs } });
    const audit = sourcesOf(slow(45_000), NOW).find((s) => s.name === 'audit log')!;
    expect(audit).toEqual({ name: 'audit log', state: 'failing', detail: "a poll is taking long: the cluster's APIs are slow or not answering", lastSuccess: NOW - 60_000 });
    expect(sourcesOf(slow(90_000), NOW)).toEqual(sourcesOf(slow(45_000), NOW)); // the view's hash stays put
  });

  it('a failed poll shows its error; a healthy one is ok', () => {
    const failed = sourcesOf(cluster({ status: 'degraded', lastError: 'CloudWatch Logs FilterLogEvents failed: AccessDeniedException' }), NOW)[0];
    expect(failed).toEqual({ name: 'audit log', state: 'failing', detail: 'CloudWatch Logs FilterLogEvents failed: AccessDeniedException' });
    expect(sourcesOf(cluster({ status: 'ok', lastSuccessAt: NOW }), NOW)[0]).toEqual({ name: 'audit log', state: 'ok' });
  });
});
