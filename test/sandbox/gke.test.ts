/**
 * `tokenwatch sandbox --gke`: a second cluster, prod-gke, whose audit events tokenwatch reads through the live GKE
 * source from the loopback Cloud Logging, with credentials from the loopback metadata server (the real
 * `google-auth-library`), alerts in the same channel, and the environment restored on stop.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { groupIdOf } from '../../src/findings/groups.js';
import { auditEventToGkeEntry } from '../../src/sandbox/fakes/cloud-logging.js';
import { gkeEntryToEvent } from '../../src/audit/shapes.js';
import { SANDBOX_CHANNEL, startSandbox } from '../../src/sandbox/sandbox.js';

const FAST = { port: 0, speed: 600, pollEverySeconds: 1, stepMs: 100, rolloutPollMs: 100, channelIntervalMs: 20, tickMs: 200 } as const;

describe('sandbox --gke', () => {
  it('alerts on the Multus ServiceAccount of prod-gke from Cloud Logging entries, and restores the environment on stop', { timeout: 120_000 }, async () => {
    const before = process.env['GCE_METADATA_HOST'];
    const sb = await startSandbox({ ...FAST, dataDir: mkdtempSync(join(tmpdir(), 'tokenwatch-sandbox-gke-')), reset: true, gke: true });
    try {
      expect(sb.config.clusters.map((c) => c.name)).toEqual(['prod-eks', 'prod-gke']);
      expect('gcp' in sb.config.clusters[1]!.audit).toBe(true);
      await expect
        .poll(async () => await sb.serve.context.store.slackRefs.getAlertRef(groupIdOf({ cluster: 'prod-gke', namespace: 'kube-system', serviceAccount: 'multus' })), { timeout: 60_000, interval: 200 })
        .toMatchObject({ channel: SANDBOX_CHANNEL.id });
      expect(sb.serve.context.clusters.get('prod-gke')!.poller.health().lastSuccessAt).toBeDefined();
    } finally {
      await sb.stop();
    }
    expect(process.env['GCE_METADATA_HOST']).toBe(before);
  });

  it('turns an audit event into the GKE entry GKE would write, and back', () => {
    const event = JSON.stringify({
      kind: 'Event', apiVersion: 'audit.k8s.io/v1', auditID: 'a-1', stage: 'ResponseComplete', verb: 'list',
      user: { username: 'system:serviceaccount:kube-system:multus' }, sourceIPs: ['10.0.0.9', '192.168.14.201'], userAgent: 'multus/v0.0.0',
      objectRef: { resource: 'pods', apiVersion: 'v1' }, responseStatus: { code: 200 }, requestReceivedTimestamp: '2026-11-20T11:00:00.000000Z',
      annotations: { 'authentication.k8s.io/stale-token': 'subject: system:serviceaccount:kube-system:multus, seconds after warning threshold: 5' },
    });
    const entry = auditEventToGkeEntry(event, { project: 'p-123456', cluster: 'c' })!;
    expect(entry.logName).toBe('projects/p-123456/logs/cloudaudit.googleapis.com%2Fdata_access');
    expect(gkeEntryToEvent(entry)).toMatchObject({ auditID: 'a-1', verb: 'list', user: { username: 'system:serviceaccount:kube-system:multus' }, sourceIPs: ['192.168.14.201'], userAgent: 'multus/v0.0.0', annotations: { 'authentication.k8s.io/stale-token': expect.stringContaining('seconds after warning threshold: 5') } });
    expect(auditEventToGkeEntry(JSON.stringify({ ...JSON.parse(event), stage: 'RequestReceived' }), { project: 'p-123456', cluster: 'c' })).toBeUndefined();
    const unauthorized = auditEventToGkeEntry(JSON.stringify({ ...JSON.parse(event), user: {}, responseStatus: { code: 401 }, annotations: undefined }), { project: 'p-123456', cluster: 'c' })!;
    expect(gkeEntryToEvent(unauthorized)?.responseStatus?.code).toBe(401);
  });
});
