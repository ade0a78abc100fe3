/** Case legacy-invalidated-401 (test/fixtures/cases/legacy-invalidated-401): one finding per ServiceAccount for invalidated legacy tokens. */
import { describe, expect, it } from 'vitest';
import { findingOf, scanCase } from './helpers.js';

describe('case legacy-invalidated-401', () => {
  it('one legacy-token finding per ServiceAccount, found from the ServiceAccount .secrets[], warning, Secret labels in evidence', async () => {
    const findings = await scanCase('legacy-invalidated-401');
    expect(findings.map((f) => `${f.kind} ${f.namespace}/${f.serviceAccount}`).sort()).toEqual([
      'legacy-token finance/ledger-sync',
      'legacy-token ops/backup-runner',
    ]);
    const backup = findingOf(findings, 'ops', 'backup-runner');
    expect(backup).toMatchObject({ requests: 3, severity: 'warning', cause: { id: 'legacy-secret-token' } });
    expect(backup.cause.evidence).toContain('Secret ops/backup-runner-token-x7k2p label kubernetes.io/legacy-token-invalid-since: 2024-05-03');
    expect(backup.cause.evidence).toContain('Secret ops/backup-runner-token-x7k2p label kubernetes.io/legacy-token-last-used: 2024-06-05');
    expect(backup.cause.evidence[0]).toBe(
      'ServiceAccount ops/backup-runner owns Secret backup-runner-token-x7k2p: ServiceAccount ops/backup-runner lists Secret backup-runner-token-x7k2p in .secrets[]',
    );
    expect(backup.cause.fix).toContain('kubectl label secret backup-runner-token-x7k2p -n ops kubernetes.io/legacy-token-invalid-since-');
    expect(backup.cause.fix).toContain('bound token');
    const ledger = findingOf(findings, 'finance', 'ledger-sync');
    expect(ledger).toMatchObject({ requests: 2, severity: 'warning', cause: { id: 'legacy-secret-token' } });
    expect(ledger.cause.evidence).toContain('Secret finance/ledger-sync-token-9qzvb label kubernetes.io/legacy-token-invalid-since: 2024-04-19');
  });

  it('without cluster state: the Secret and its namespace are named, the ServiceAccount is said to be inferred from the Secret name', async () => {
    const findings = await scanCase('legacy-invalidated-401', { noSnapshot: true });
    const backup = findingOf(findings, 'ops', 'backup-runner');
    expect(backup).toMatchObject({ requests: 3, severity: 'warning', kind: 'legacy-token' });
    expect(backup.cause.evidence[0]).toContain('inferred from the Secret name backup-runner-token-x7k2p');
    expect(backup.cause.evidence[0]).toContain('not confirmed: no cluster state');
    expect(backup.cause.evidence).toContain('Secret ops/backup-runner-token-x7k2p: labels unknown (no cluster state)');
  });
});
