/** Alert groups: one per ServiceAccount of a cluster, worst severity, kinds in order, stable ids. */
import { describe, expect, it } from 'vitest';
import { groupFindings, groupIdOf, groupsJson, worstSeverity } from '../../src/findings/groups.js';
import { multusFinding } from '../slack/blocks/fixtures.js';

describe('groupFindings', () => {
  const stale = multusFinding({ id: 'f-stale', severity: 'warning' });
  const unauth = multusFinding({ id: 'f-401', kind: 'unauthorized', severity: 'critical', rejectionAt: null, tokens: [] });
  const other = multusFinding({ id: 'f-fb', namespace: 'logging', serviceAccount: 'fluent-bit', severity: 'info' });
  const otherCluster = multusFinding({ id: 'f-stg', cluster: 'staging-eks', severity: 'warning' });

  it('puts the findings of one ServiceAccount of one cluster in one group, in input order, with the worst severity', () => {
    const groups = groupFindings([stale, other, unauth, otherCluster]);
    expect(groups.map((g) => [g.cluster, `${g.namespace}/${g.serviceAccount}`, g.severity, g.findings])).toEqual([
      ['prod-eks', 'kube-system/multus', 'critical', ['f-stale', 'f-401']],
      ['prod-eks', 'logging/fluent-bit', 'info', ['f-fb']],
      ['staging-eks', 'kube-system/multus', 'warning', ['f-stg']],
    ]);
    // The failing signal is named first whatever the order of the findings.
    expect(groups[0]!.kinds).toEqual(['unauthorized', 'stale-token']);
    expect(groups[0]!.members).toEqual([stale, unauth]);
  });

  it('ids are stable per (cluster, namespace, serviceAccount), differ between them, and are not finding ids', () => {
    expect(groupIdOf(stale)).toBe(groupIdOf(unauth));
    expect(groupIdOf(stale)).not.toBe(groupIdOf(otherCluster));
    expect(groupIdOf(stale)).not.toBe(groupIdOf(other));
    expect(groupIdOf(stale)).toMatch(/^g[0-9a-f]{15}$/);
    // A name containing the separator of another split cannot collide.
    expect(groupIdOf({ cluster: 'a/b', namespace: 'c', serviceAccount: 'd' })).not.toBe(groupIdOf({ cluster: 'a', namespace: 'b/c', serviceAccount: 'd' }));
  });

  it('JSON form references finding ids and carries no members', () => {
    const json = groupsJson(groupFindings([stale, unauth]));
    expect(json).toEqual([{ id: groupIdOf(stale), cluster: 'prod-eks', namespace: 'kube-system', serviceAccount: 'multus', severity: 'critical', kinds: ['unauthorized', 'stale-token'], findings: ['f-stale', 'f-401'] }]);
  });

  it('worstSeverity of nothing is info', () => {
    expect(worstSeverity([])).toBe('info');
    expect(worstSeverity([{ severity: 'warning' }, { severity: 'info' }])).toBe('warning');
  });
});
