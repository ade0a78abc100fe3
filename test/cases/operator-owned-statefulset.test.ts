/** Case operator-owned-statefulset (test/fixtures/cases/operator-owned-statefulset): Pod → StatefulSet → custom resource names the StatefulSet. */
import { describe, expect, it } from 'vitest';
import { findingButtons } from '../../src/slack/blocks/finding.js';
import { findingOf, scanCase } from './helpers.js';

describe('case operator-owned-statefulset', () => {
  it('names the StatefulSet (custom resource as its owner), and Slack offers its restart', async () => {
    const findings = await scanCase('operator-owned-statefulset');
    const f = findingOf(findings, 'app-db', 'dbop-orders', 'stale-token');
    expect(f).toMatchObject({
      requests: 4,
      rejectionAt: '2022-05-30T11:00:07.000Z',
      severity: 'critical',
      pods: ['orders-controller-0'],
      cause: { id: 'client-caches-token' },
    });
    expect(f.workloads).toEqual([
      { kind: 'StatefulSet', namespace: 'app-db', name: 'orders-controller', owner: { kind: 'Database', namespace: 'app-db', name: 'orders' } },
    ]);
    const buttons = findingButtons(f, (a) => (a.action === 'restart' ? `btn-${a.workload.kind}-${a.workload.name}` : undefined));
    expect(buttons.map((b) => b.text.text)).toEqual(['Restart StatefulSet orders-controller']);
  });
});
