/**
 * `tokenwatch sandbox --aks`: a cluster, prod-aks, whose audit events tokenwatch reads through the live AKS source —
 * the real `@azure/monitor-query-logs` client against the loopback Log Analytics fake and the workload identity
 * exchange against the loopback Entra token fake, both over HTTPS with the certificate the sandbox made — with
 * alerts in the same channel, and the environment restored on stop.
 */
import { X509Certificate } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { groupIdOf } from '../../src/findings/groups.js';
import { SANDBOX_AKS } from '../../src/sandbox/aks.js';
import { loopbackCert } from '../../src/sandbox/fakes/tls.js';
import { SANDBOX_CHANNEL, startSandbox } from '../../src/sandbox/sandbox.js';

const FAST = { port: 0, speed: 600, pollEverySeconds: 1, stepMs: 100, rolloutPollMs: 100, channelIntervalMs: 20, tickMs: 200 } as const;

describe('sandbox --aks', () => {
  it('alerts on the Multus ServiceAccount of prod-aks from AKSAudit rows of the loopback workspace, beside prod-eks and prod-gke, and restores the environment on stop', { timeout: 120_000 }, async () => {
    const before = process.env['AZURE_CLIENT_ID'];
    const sb = await startSandbox({ ...FAST, dataDir: mkdtempSync(join(tmpdir(), 'tokenwatch-sandbox-aks-')), reset: true, gke: true, aks: true });
    try {
      expect(sb.config.clusters.map((c) => c.name)).toEqual(['prod-eks', 'prod-gke', 'prod-aks']);
      const audit = sb.config.clusters[2]!.audit;
      expect('azure' in audit && audit.azure).toMatchObject({ workspaceId: SANDBOX_AKS.workspaceId, resourceId: SANDBOX_AKS.resourceId, table: 'AKSAudit' });
      expect(process.env['AZURE_CLIENT_ID']).toBe(SANDBOX_AKS.clientId);
      await expect
        .poll(async () => await sb.serve.context.store.slackRefs.getAlertRef(groupIdOf({ cluster: 'prod-aks', namespace: 'kube-system', serviceAccount: 'multus' })), { timeout: 60_000, interval: 200 })
        .toMatchObject({ channel: SANDBOX_CHANNEL.id });
      const rt = sb.serve.context.clusters.get('prod-aks')!;
      expect(rt.poller.health().lastSuccessAt).toBeDefined();
      expect(rt.source.id).toBe(`azure:${SANDBOX_AKS.workspaceId}:${SANDBOX_AKS.resourceId.toLowerCase()}`);
      expect(rt.blind.state(sb.clock.now())).toEqual({ blind: false });
      expect(sb.aksKube).toBeDefined();
    } finally {
      await sb.stop();
    }
    expect(process.env['AZURE_CLIENT_ID']).toBe(before);
  });

  it('makes a self-signed certificate for 127.0.0.1 that verifies itself', () => {
    const now = Date.parse('2026-12-06T00:00:00Z');
    const c = new X509Certificate(loopbackCert({ now, days: 30 }).cert);
    expect(c.subject).toBe('CN=127.0.0.1');
    expect(c.subjectAltName).toBe('IP Address:127.0.0.1');
    expect(c.ca).toBe(true);
    expect(c.verify(c.publicKey)).toBe(true);
    expect(c.checkIP('127.0.0.1')).toBe('127.0.0.1');
    expect(Date.parse(c.validFrom)).toBe(now - 86_400_000);
    expect(Date.parse(c.validTo)).toBe(now + 30 * 86_400_000);
  });

  it('every certificate it makes parses: the random serial is a minimal DER INTEGER (a leading zero byte was refused about 1 in 128 times)', () => {
    const refused: string[] = [];
    for (let i = 0; i < 1000; i++) {
      try {
        new X509Certificate(loopbackCert({ now: Date.now(), days: 1 }).cert);
      } catch (err) {
        refused.push((err as Error).message);
      }
    }
    expect(refused).toEqual([]);
  });
});
