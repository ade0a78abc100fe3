import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Approval } from '../../src/approvals/machine.js';
import type { Finding, TokenRecord } from '../../src/findings/types.js';

/** A fresh directory for a test database. */
export function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'tw-store-'));
}

export const T0 = Date.UTC(2026, 10, 1, 12, 0, 0);
export const MIN = 60_000;
export const HOUR = 3_600_000;
export const DAY = 86_400_000;

/** A stale-token record of pod `pod` whose warnAfter is `warnAfter`. */
export function staleRecord(over: Partial<TokenRecord> = {}): TokenRecord {
  return {
    cluster: 'prod',
    kind: 'stale-token',
    subject: 'system:serviceaccount:kube-system:multus',
    namespace: 'kube-system',
    serviceAccount: 'multus',
    pod: 'kube-multus-ds-zwh6w',
    podUid: '7d3c1f7e-0000-4000-8000-000000000001',
    node: 'ip-192-168-1-10.ec2.internal',
    credentialId: 'JTI=0b0c',
    warnAfter: T0 - 20 * DAY,
    rejectionAt: T0 + 70 * DAY,
    requests: 5,
    firstSeen: T0 - 2 * HOUR,
    lastSeen: T0 - HOUR,
    maxSecondsAfterWarning: 1_728_000,
    userAgents: ['multus/v0.0.0 (linux/amd64) kubernetes/$Format'],
    sourceIPs: ['192.168.1.10'],
    hourly: { [String(T0 - 2 * HOUR)]: 3, [String(T0 - HOUR)]: 2 },
    ...over,
  };
}

/** A finding as `scan --format json` prints it. */
export function finding(over: Partial<Finding> = {}): Finding {
  return {
    id: 'f-multus',
    cluster: 'prod',
    namespace: 'kube-system',
    serviceAccount: 'multus',
    kind: 'stale-token',
    severity: 'warning',
    requests: 5,
    firstSeen: new Date(T0 - 2 * HOUR).toISOString(),
    lastSeen: new Date(T0 - HOUR).toISOString(),
    maxSecondsAfterWarning: 1_728_000,
    rejectionAt: new Date(T0 + 20 * DAY).toISOString(),
    tokens: [
      {
        pod: 'kube-multus-ds-zwh6w',
        podUid: '7d3c1f7e-0000-4000-8000-000000000001',
        node: 'ip-192-168-1-10.ec2.internal',
        warnAfter: new Date(T0 - 70 * DAY).toISOString(),
        rejectionAt: new Date(T0 + 20 * DAY).toISOString(),
        requests: 5,
        lastSeen: new Date(T0 - HOUR).toISOString(),
      },
    ],
    pods: ['kube-multus-ds-zwh6w'],
    workloads: [{ kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds' }],
    userAgents: ['multus/v0.0.0 (linux/amd64) kubernetes/$Format'],
    sourceIPs: ['192.168.1.10'],
    cause: {
      id: 'static-token-file',
      component: 'multus-thin',
      summary: 'thin plugin reads a token copied to a file on the host',
      fix: 'use the thick plugin',
      evidence: ['hostPath /etc/cni/net.d'],
      sources: ['https://github.com/k8snetworkplumbingwg/multus-cni/issues/1140'],
    },
    ...over,
  };
}

/** An approval in state `requested`, as the state machine's createApproval returns it. */
export function approval(over: Partial<Approval> = {}): Approval {
  return {
    id: 'appr-1',
    action: 'restart',
    target: { cluster: 'prod', kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds', findingId: 'f-multus' },
    requester: 'U0REQ',
    createdAt: T0,
    expiresAt: T0 + 30 * MIN,
    requiredApprovals: 1,
    votes: [],
    state: 'requested',
    dryRun: { ok: true, message: 'dry run ok', at: T0 },
    error: null,
    updatedAt: T0,
    ...over,
  };
}
