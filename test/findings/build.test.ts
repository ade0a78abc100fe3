import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { TokenUse } from '../../src/audit/types.js';
import type { ClusterStateSource, PodInfo, SubjectState } from '../../src/cluster/types.js';
import { TokenAggregator, UNATTRIBUTED } from '../../src/findings/aggregate.js';
import { SnapshotClusterState } from '../../src/cluster/snapshot.js';
import {
  DEFAULT_THRESHOLDS,
  STATE_NOT_PROVIDED,
  buildFindings,
  findingId,
  severityRank,
} from '../../src/findings/build.js';
import type { Finding, TokenRecord } from '../../src/findings/types.js';
import { DAY, MemoryState, container, pod, staleUse, subjectState, t, unauthorizedUse, workload } from './helpers.js';

const NOW = t('2022-07-21T15:00:00Z');
const W = t('2022-04-29T11:38:39Z');
const MULTUS_UA = 'multus/v0.0.0 (linux/amd64) kubernetes/$Format';
const EKS_MULTUS_V3 = '602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/multus-cni:v3.7.2-eksbuild.1';

function records(uses: TokenUse[]): TokenRecord[] {
  const agg = new TokenAggregator({ cluster: 'prod', maxTokenAge: { mode: 'eks' } });
  for (const u of uses) agg.add(u);
  return agg.records();
}

/** A stale use at `time` of a token whose warnAfter is `warnAfter`. */
function staleAt(o: { ns?: string; sa?: string; pod?: string; podUid?: string; warnAfter: number; time: number; ip?: string; ua?: string }): TokenUse {
  return staleUse({ ...o, secondsAfterWarning: Math.round((o.time - o.warnAfter) / 1000) });
}

/** A stale token of SA `sa` in namespace `apps` rejected (EKS) exactly at `rejectionAt`. */
function rejectingAt(sa: string, rejectionAt: number): TokenUse {
  return staleAt({ ns: 'apps', sa, pod: `${sa}-pod`, warnAfter: rejectionAt - 7_776_000_000, time: NOW - 60_000, ua: `${sa}/v1`, ip: `10.0.0.${sa.length}` });
}

const byName = (fs: Finding[]) => Object.fromEntries(fs.map((f) => [`${f.namespace}/${f.serviceAccount}/${f.kind}`, f]));

describe('buildFindings: contract shape', () => {
  it('one stale-token finding with tokens, pods, workloads, cause and ISO times', async () => {
    const uses = [
      staleAt({ pod: 'kube-multus-ds-zwh6w', podUid: 'u1', warnAfter: W, time: t('2022-07-21T14:00:00Z') }),
      staleAt({ pod: 'kube-multus-ds-zwh6w', podUid: 'u1', warnAfter: W, time: t('2022-07-21T14:30:00Z') }),
    ].map((u) => ({ ...u, node: 'ip-192-168-1-10.ec2.internal' }));
    const state = new MemoryState({
      'kube-system/multus': subjectState({
        pods: [pod({ name: 'kube-multus-ds-zwh6w', uid: 'u1', startTime: W - 3_617_000, containers: [container(EKS_MULTUS_V3)], hostPaths: ['/etc/cni/net.d'] })],
        workloads: [workload({ name: 'kube-multus-ds', images: [EKS_MULTUS_V3] })],
      }),
    });
    const [f, ...rest] = await buildFindings(records(uses), { now: NOW, state });
    expect(rest).toEqual([]);
    const { cause, ...shape } = f!;
    expect(shape).toEqual({
      id: createHash('sha256').update('prod/kube-system/multus/stale-token').digest('hex').slice(0, 16),
      cluster: 'prod',
      namespace: 'kube-system',
      serviceAccount: 'multus',
      kind: 'stale-token',
      severity: 'critical',
      requests: 2,
      firstSeen: '2022-07-21T14:00:00.000Z',
      lastSeen: '2022-07-21T14:30:00.000Z',
      maxSecondsAfterWarning: 7_181_481,
      rejectionAt: '2022-07-28T11:38:39.000Z',
      tokens: [
        {
          pod: 'kube-multus-ds-zwh6w',
          podUid: 'u1',
          node: 'ip-192-168-1-10.ec2.internal',
          warnAfter: '2022-04-29T11:38:39.000Z',
          rejectionAt: '2022-07-28T11:38:39.000Z',
          requests: 2,
          lastSeen: '2022-07-21T14:30:00.000Z',
        },
      ],
      pods: ['kube-multus-ds-zwh6w'],
      workloads: [{ kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds' }],
      userAgents: [MULTUS_UA],
      sourceIPs: ['192.168.1.10'],
    });
    expect(cause).toMatchObject({ id: 'static-token-file', component: 'multus-thin' });
    expect(cause.evidence[0]).toBe(`image ${EKS_MULTUS_V3} (thin plugin < v4)`);
    expect(state.calls).toEqual(['describe kube-system/multus']);
  });

  it('legacy and unattributed findings use nulls where the contract says', async () => {
    const fs = await buildFindings(
      records([
        { kind: 'legacy', auditID: 'l', time: NOW, subject: 'system:serviceaccount:ci:deployer', sourceIPs: ['10.1.2.3'], legacySecret: { name: 'deployer-token-abc', kind: 'manual' } },
        unauthorizedUse({ time: NOW, ip: '10.9.9.9', ua: 'curl/8.0' }),
      ]),
      { now: NOW },
    );
    const m = byName(fs);
    expect(m['ci/deployer/legacy-token']).toMatchObject({
      severity: 'info',
      maxSecondsAfterWarning: null,
      rejectionAt: null,
      tokens: [{ pod: null, podUid: null, node: null, warnAfter: null, rejectionAt: null, requests: 1, lastSeen: '2022-07-21T15:00:00.000Z' }],
      pods: [],
      workloads: [],
      clusterState: STATE_NOT_PROVIDED,
      cause: { id: 'legacy-secret-token' },
    });
    const u = m[`${UNATTRIBUTED}/${UNATTRIBUTED}/unauthorized`]!;
    expect(u).toMatchObject({ severity: 'warning', rejectionAt: null, sourceIPs: ['10.9.9.9'], cause: { id: 'unknown' } });
    expect(u.clusterState).toBeUndefined();
  });
});

describe('buildFindings: id', () => {
  it('is stable for the same input and differs by kind', async () => {
    const uses = [rejectingAt('a', NOW + 20 * DAY)];
    const [a1] = await buildFindings(records(uses), { now: NOW });
    const [a2] = await buildFindings(records(uses), { now: NOW + DAY });
    expect(a1!.id).toMatch(/^[0-9a-f]{16}$/);
    expect(a2!.id).toBe(a1!.id);
    expect(findingId('prod', 'apps', 'a', 'stale-token')).toBe(a1!.id);
    expect(findingId('prod', 'apps', 'a', 'unauthorized')).not.toBe(a1!.id);
    expect(findingId('prod', 'apps', 'a', 'legacy-token')).not.toBe(a1!.id);
    expect(findingId('other', 'apps', 'a', 'stale-token')).not.toBe(a1!.id);
  });
});

describe('buildFindings: severity', () => {
  it('critical under 7 days or past, warning under 30 days, info from 30 days; exact boundaries', async () => {
    const fs = await buildFindings(
      records([
        rejectingAt('past', NOW - DAY),
        rejectingAt('crit', NOW + 7 * DAY - 1000),
        rejectingAt('seven', NOW + 7 * DAY),
        rejectingAt('warn', NOW + 30 * DAY - 1000),
        rejectingAt('thirty', NOW + 30 * DAY),
      ]),
      { now: NOW },
    );
    const m = byName(fs);
    expect(m['apps/past/stale-token']!.severity).toBe('critical');
    expect(m['apps/crit/stale-token']!.severity).toBe('critical');
    expect(m['apps/seven/stale-token']!.severity).toBe('warning');
    expect(m['apps/warn/stale-token']!.severity).toBe('warning');
    expect(m['apps/thirty/stale-token']!.severity).toBe('info');
    expect(DEFAULT_THRESHOLDS).toEqual({ criticalSeconds: 604_800, warningSeconds: 2_592_000 });
  });

  it('thresholds are configurable and checked', async () => {
    const recs = records([rejectingAt('x', NOW + 10 * DAY)]);
    const [f] = await buildFindings(recs, { now: NOW, thresholds: { criticalSeconds: 14 * 86_400, warningSeconds: 60 * 86_400 } });
    expect(f!.severity).toBe('critical');
    await expect(buildFindings(recs, { now: NOW, thresholds: { criticalSeconds: 10, warningSeconds: 5 } })).rejects.toThrow(
      'invalid severity thresholds: critical 10 s, warning 5 s',
    );
  });

  it('401s attributed to a subject make its findings critical', async () => {
    const fs = await buildFindings(
      records([
        staleAt({ pod: 'kube-multus-ds-zwh6w', warnAfter: NOW - 50 * DAY, time: NOW - 3_600_000 }),
        unauthorizedUse({ time: NOW, ip: '192.168.1.10', ua: MULTUS_UA }),
      ]),
      { now: NOW },
    );
    const m = byName(fs);
    expect(m['kube-system/multus/stale-token']!.severity).toBe('critical');
    expect(m['kube-system/multus/unauthorized']!.severity).toBe('critical');
    expect(m['kube-system/multus/unauthorized']!.cause.evidence).toContain(
      `inferred: same source IP 192.168.1.10 and user agent ${MULTUS_UA} as stale uses of system:serviceaccount:kube-system:multus`,
    );
  });

  it('legacy: info, warning when the Secret is invalidated', async () => {
    const legacy = (sa: string, kind: 'autogenerated' | 'invalidated'): TokenUse => ({
      kind: 'legacy', auditID: sa, time: NOW, subject: `system:serviceaccount:ci:${sa}`, sourceIPs: [], legacySecret: { name: `${sa}-token`, kind },
    });
    const m = byName(await buildFindings(records([legacy('a', 'autogenerated'), legacy('b', 'invalidated')]), { now: NOW }));
    expect(m['ci/a/legacy-token']!.severity).toBe('info');
    expect(m['ci/b/legacy-token']!.severity).toBe('warning');
    const state = new MemoryState({
      'ci/a': subjectState({ legacySecrets: [{ namespace: 'ci', name: 'a-token', serviceAccount: 'a', invalidSince: '2022-07-01' }] }),
    });
    const withState = byName(await buildFindings(records([legacy('a', 'autogenerated')]), { now: NOW, state }));
    expect(withState['ci/a/legacy-token']!.severity).toBe('warning');
  });

  it('severityRank orders critical > warning > info', () => {
    expect([severityRank('critical'), severityRank('warning'), severityRank('info')]).toEqual([2, 1, 0]);
  });
});

describe('buildFindings: sort order', () => {
  it('severity desc, then rejectionAt asc (null last), then id', async () => {
    const fs = await buildFindings(
      records([
        rejectingAt('info', NOW + 60 * DAY),
        rejectingAt('warn', NOW + 20 * DAY),
        rejectingAt('crit-late', NOW + 5 * DAY),
        rejectingAt('crit-early', NOW + 2 * DAY),
        rejectingAt('info2', NOW + 60 * DAY),
        unauthorizedUse({ time: NOW, ip: '10.0.0.4', ua: 'warn/v1' }), // attributed to apps/warn → critical, no rejectionAt
      ]),
      { now: NOW },
    );
    // Same severity and rejectionAt: ordered by id.
    const infoNames = ['info', 'info2'].sort((a, b) =>
      findingId('prod', 'apps', a, 'stale-token') < findingId('prod', 'apps', b, 'stale-token') ? -1 : 1,
    );
    expect(fs.map((f) => `${f.serviceAccount}/${f.kind}`)).toEqual([
      'crit-early/stale-token',
      'crit-late/stale-token',
      'warn/stale-token',
      'warn/unauthorized',
      ...infoNames.map((n) => `${n}/stale-token`),
    ]);
    expect(fs.map((f) => f.severity)).toEqual(['critical', 'critical', 'critical', 'critical', 'info', 'info']);
  });
});

describe('buildFindings: live tokens, pods and cluster state', () => {
  const oldW = NOW - 85 * DAY; // rejected in 5 days
  const newW = NOW - 40 * DAY; // rejected in 50 days

  it('rejectionAt uses the newest token of a running pod; a superseded, unused token is not live', async () => {
    const uses = [
      staleAt({ ns: 'apps', sa: 'x', pod: 'x-1', warnAfter: oldW, time: NOW - 10 * DAY }),
      staleAt({ ns: 'apps', sa: 'x', pod: 'x-1', warnAfter: newW, time: NOW - 60_000 }),
    ];
    const state = new MemoryState({ 'apps/x': subjectState({ pods: [pod({ name: 'x-1', namespace: 'apps', serviceAccount: 'x' })] }) });
    const [f] = await buildFindings(records(uses), { now: NOW, state });
    expect(f!.rejectionAt).toBe(new Date(newW + 7_776_000_000).toISOString());
    expect(f!.severity).toBe('info');
    expect(f!.tokens.map((tk) => tk.warnAfter)).toEqual([new Date(oldW).toISOString(), new Date(newW).toISOString()]);
  });

  it('a token of a gone pod counts only while it is still used within the last hour of data', async () => {
    const base = [staleAt({ ns: 'apps', sa: 'x', pod: 'x-2', warnAfter: newW, time: NOW - 60_000 })];
    const state = new MemoryState({ 'apps/x': subjectState({ pods: [pod({ name: 'x-2', namespace: 'apps', serviceAccount: 'x' })] }) });

    const idle = [...base, staleAt({ ns: 'apps', sa: 'x', pod: 'x-gone', warnAfter: oldW, time: NOW - 2 * 3_600_000 })];
    const [f1] = await buildFindings(records(idle), { now: NOW, state });
    expect(f1!.rejectionAt).toBe(new Date(newW + 7_776_000_000).toISOString());
    expect(f1!.missingPods).toEqual(['x-gone']);
    expect(f1!.pods).toEqual(['x-2', 'x-gone']);

    const used = [...base, staleAt({ ns: 'apps', sa: 'x', pod: 'x-gone', warnAfter: oldW, time: NOW - 30 * 60_000 })];
    const [f2] = await buildFindings(records(used), { now: NOW, state });
    expect(f2!.rejectionAt).toBe(new Date(oldW + 7_776_000_000).toISOString());
    expect(f2!.severity).toBe('critical');

    // Without cluster state the newest token of every pod is live.
    const [f3] = await buildFindings(records(idle), { now: NOW });
    expect(f3!.rejectionAt).toBe(new Date(oldW + 7_776_000_000).toISOString());
    expect(f3!.missingPods).toBeUndefined();
    expect(f3!.clusterState).toBe(STATE_NOT_PROVIDED);
  });

  it('a pod absent from the ServiceAccount listing but found by getPod is not missing', async () => {
    const done = pod({ name: 'job-1', namespace: 'apps', serviceAccount: 'x', phase: 'Succeeded', ownerChain: [{ kind: 'Job', namespace: 'apps', name: 'job' }] });
    const state = new MemoryState({ 'apps/x': subjectState({ serviceAccount: { namespace: 'apps', name: 'x', labels: {}, annotations: {}, imagePullSecrets: [], secrets: [] } }) }, [done]);
    const [f] = await buildFindings(records([staleAt({ ns: 'apps', sa: 'x', pod: 'job-1', warnAfter: newW, time: NOW })]), { now: NOW, state });
    expect(f!.missingPods).toBeUndefined();
    expect(f!.workloads).toEqual([{ kind: 'Job', namespace: 'apps', name: 'job' }]);
    expect(state.calls).toEqual(['describe apps/x', 'getPod apps/job-1']);
  });

  it('workloads: top-level owners of token pods; the ServiceAccount workloads when all token pods are gone', async () => {
    const running = pod({
      name: 'web-7d9c-abcde',
      namespace: 'apps',
      serviceAccount: 'web',
      ownerChain: [{ kind: 'ReplicaSet', namespace: 'apps', name: 'web-7d9c' }, { kind: 'Deployment', namespace: 'apps', name: 'web' }],
    });
    const bare = pod({ name: 'debug', namespace: 'apps', serviceAccount: 'web', ownerChain: [] });
    const state = new MemoryState({
      'apps/web': subjectState({ pods: [running, bare], workloads: [workload({ kind: 'Deployment', namespace: 'apps', name: 'web' })] }),
    });
    const [f] = await buildFindings(
      records([
        staleAt({ ns: 'apps', sa: 'web', pod: 'web-7d9c-abcde', warnAfter: newW, time: NOW }),
        staleAt({ ns: 'apps', sa: 'web', pod: 'debug', warnAfter: newW, time: NOW }),
      ]),
      { now: NOW, state },
    );
    expect(f!.workloads).toEqual([
      { kind: 'Deployment', namespace: 'apps', name: 'web' },
      { kind: 'Pod', namespace: 'apps', name: 'debug' },
    ]);

    const gone = await buildFindings(records([staleAt({ ns: 'apps', sa: 'web', pod: 'web-old', warnAfter: newW, time: NOW })]), { now: NOW, state });
    expect(gone[0]!.workloads).toEqual([{ kind: 'Deployment', namespace: 'apps', name: 'web' }]);
    expect(gone[0]!.missingPods).toEqual(['web-old']);
  });

  it('unavailable or failing cluster state never drops a finding', async () => {
    const recs = records([staleAt({ ns: 'apps', sa: 'x', pod: 'x-1', warnAfter: newW, time: NOW, ua: 'x/v0.0.0' })]);
    const down = new MemoryState({ 'apps/x': { available: false, error: 'cluster state unavailable: connect ECONNREFUSED 127.0.0.1:6443', pods: [], workloads: [], legacySecrets: [] } });
    const [f1] = await buildFindings(recs, { now: NOW, state: down });
    expect(f1).toMatchObject({ serviceAccount: 'x', pods: ['x-1'], workloads: [], clusterState: 'cluster state unavailable: connect ECONNREFUSED 127.0.0.1:6443' });
    expect(f1!.missingPods).toBeUndefined();
    expect(f1!.rejectionAt).toBe(new Date(newW + 7_776_000_000).toISOString());

    const throwing: ClusterStateSource = {
      describeServiceAccount: async (): Promise<SubjectState> => {
        throw new Error('boom');
      },
      getPod: async (): Promise<PodInfo | undefined> => undefined,
    };
    const [f2] = await buildFindings(recs, { now: NOW, state: throwing });
    expect(f2!.clusterState).toBe('cluster state unavailable: boom');
    expect(f2!.cause.id).toBe('client-caches-token');

    const empty = new MemoryState({});
    const [f3] = await buildFindings(recs, { now: NOW, state: empty });
    expect(f3!.clusterState).toBe('ServiceAccount apps/x not found in cluster state');
    expect(f3!.missingPods).toEqual(['x-1']);
  });

  it('reads each ServiceAccount once for all its kinds and builds nothing from no records', async () => {
    const state = new MemoryState({});
    await buildFindings(
      records([
        staleAt({ pod: 'kube-multus-ds-zwh6w', warnAfter: newW, time: NOW - 60_000 }),
        unauthorizedUse({ time: NOW, ip: '192.168.1.10', ua: MULTUS_UA }),
      ]),
      { now: NOW, state },
    );
    expect(state.calls.filter((c) => c.startsWith('describe'))).toEqual(['describe kube-system/multus']);
    expect(await buildFindings([], { now: NOW, state })).toEqual([]);
  });
});

describe('a stale token followed by 401s from the same source', () => {
  it('keeps the rejection date its stale uses gave, though its pod is gone from cluster state', async () => {
    const at = t;
    const D = DAY;
    const warnAfter = at('2026-08-01T00:00:00Z');
    const agg = new TokenAggregator({ cluster: 'rke2', maxTokenAge: { mode: 'eks' } });
    // Day 89 of the token: stale uses from the pod's address; then, from day 90, 401s from the same address.
    for (let i = 0; i < 5; i++) {
      const time = warnAfter + 89 * D + i * 3_600_000;
      agg.add(staleUse({ time, secondsAfterWarning: (time - warnAfter) / 1000, pod: 'kube-multus-ds-old', ip: '10.42.0.7' }));
    }
    for (let i = 0; i < 5; i++) agg.add(unauthorizedUse({ time: warnAfter + 90 * D + 3 * D + i * 60_000, ip: '10.42.0.7', ua: 'multus/v0.0.0 (linux/amd64) kubernetes/$Format' }));
    // Cluster state: the ServiceAccount's DaemonSet pod has been replaced (the old pod is gone).
    const state = SnapshotClusterState.fromList({
      kind: 'List',
      apiVersion: 'v1',
      items: [
        { kind: 'ServiceAccount', apiVersion: 'v1', metadata: { namespace: 'kube-system', name: 'multus', uid: 'sa-uid' } },
        { kind: 'Pod', apiVersion: 'v1', metadata: { namespace: 'kube-system', name: 'kube-multus-ds-new', uid: 'new-uid' }, spec: { serviceAccountName: 'multus', containers: [{ name: 'kube-multus', image: 'rancher/hardened-multus-cni:v4.1.4-build20250108' }] }, status: { phase: 'Running', startTime: '2026-10-01T00:00:00Z', podIP: '10.42.0.8', hostIP: '10.0.0.2' } },
      ],
    });
    const findings = await buildFindings(agg.records(), { now: warnAfter + 94 * D, state });
    const stale = findings.find((f) => f.kind === 'stale-token')!;
    expect(stale.rejectionAt).toBe(new Date(warnAfter + 90 * D).toISOString());
    expect(findings.find((f) => f.kind === 'unauthorized')).toMatchObject({ namespace: 'kube-system', serviceAccount: 'multus' });
  });
});
