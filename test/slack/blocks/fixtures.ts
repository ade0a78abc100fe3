/** Test fixtures for the Block Kit builders. */
import type { Finding } from '../../../src/findings/types.js';

export const NOW = Date.parse('2026-11-29T12:00:00Z');
export const HOUR = 3_600_000;

/** The Multus thin-plugin finding (docs/design/domain.md §6) as `scan` reports it. */
export function multusFinding(over: Partial<Finding> = {}): Finding {
  return {
    id: 'f3c1a9e07b2d',
    cluster: 'prod-eks',
    namespace: 'kube-system',
    serviceAccount: 'multus',
    kind: 'stale-token',
    severity: 'critical',
    requests: 1234,
    firstSeen: '2026-11-01T00:00:00.000Z',
    lastSeen: '2026-11-29T11:00:00.000Z',
    maxSecondsAfterWarning: 7_300_000,
    rejectionAt: '2026-12-04T10:00:00.000Z',
    tokens: [
      {
        pod: 'kube-multus-ds-zwh6w',
        podUid: '5b0e8c1e-1111-4c3b-9f00-000000000001',
        node: 'ip-192-168-1-10.ec2.internal',
        warnAfter: '2026-09-05T10:00:00.000Z',
        rejectionAt: '2026-12-04T10:00:00.000Z',
        requests: 1000,
        lastSeen: '2026-11-29T11:00:00.000Z',
      },
      {
        pod: 'kube-multus-ds-k2x8p',
        podUid: '5b0e8c1e-1111-4c3b-9f00-000000000002',
        node: 'ip-192-168-1-11.ec2.internal',
        warnAfter: '2026-09-20T10:00:00.000Z',
        rejectionAt: '2026-12-19T10:00:00.000Z',
        requests: 234,
        lastSeen: '2026-11-29T10:00:00.000Z',
      },
    ],
    pods: ['kube-multus-ds-zwh6w', 'kube-multus-ds-k2x8p'],
    workloads: [{ kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds' }],
    userAgents: ['multus/v0.0.0 (linux/amd64) kubernetes/$Format'],
    sourceIPs: ['192.168.1.10', '192.168.1.11'],
    cause: {
      id: 'static-token-file',
      component: 'multus-thin',
      summary: 'The Multus thin plugin copies the ServiceAccount token once into /etc/cni/net.d/multus.d/multus.kubeconfig on the host; the multus binary keeps presenting it.',
      fix: 'Move to the thick plugin (multus-daemon, v4) or run v4 thin with --cleanup-config-on-exit=true and --multus-conf-file=auto.',
      evidence: ['image 602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/multus-cni:v3.7.2-eksbuild.1', 'user agent multus/v0.0.0'],
      sources: ['aws/amazon-vpc-cni-k8s#1868', 'k8snetworkplumbingwg/multus-cni#852'],
    },
    ...over,
  };
}

/** Button ids minted like the store would: opaque, unrelated to the target. */
export function idMinter(): { buttonsFor: (a: { action: string; days?: number; workload?: unknown }) => string; minted: Map<string, unknown> } {
  let n = 0;
  const minted = new Map<string, unknown>();
  return {
    minted,
    buttonsFor: (a) => {
      const id = `btn_${String(++n).padStart(8, '0')}`;
      minted.set(id, a);
      return id;
    },
  };
}

/** All buttons in a blocks array (actions elements and section accessories). */
export function buttonsIn(blocks: unknown[]): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  for (const b of blocks as Array<Record<string, unknown>>) {
    if (b.type === 'actions') for (const e of b.elements as Array<Record<string, unknown>>) if (e.type === 'button') out.push(e);
    const acc = b.accessory as Record<string, unknown> | undefined;
    if (acc?.type === 'button') out.push(acc);
  }
  return out;
}

/** All mrkdwn/plain text in a blocks array, joined (for content assertions). */
export function allText(blocks: unknown[]): string {
  return JSON.stringify(blocks);
}
