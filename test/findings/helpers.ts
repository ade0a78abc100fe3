/** Test factories for the findings stage: token uses, pods and an in-memory ClusterStateSource. */
import type { TokenUse } from '../../src/audit/types.js';
import { parseImageRef } from '../../src/cluster/convert.js';
import type { ClusterStateSource, ContainerInfo, PodInfo, SubjectState, WorkloadInfo } from '../../src/cluster/types.js';

export const t = (iso: string): number => Date.parse(iso);
export const DAY = 86_400_000;

/** A stale use by `system:serviceaccount:<ns>:<sa>` from pod `pod`, `secondsAfterWarning` s past warnafter. */
export function staleUse(o: {
  ns?: string;
  sa?: string;
  pod?: string;
  podUid?: string;
  time: number;
  secondsAfterWarning: number;
  ip?: string;
  ua?: string;
  auditID?: string;
}): TokenUse {
  const ns = o.ns ?? 'kube-system';
  const sa = o.sa ?? 'multus';
  const use: TokenUse = {
    kind: 'stale',
    auditID: o.auditID ?? `a-${o.time}-${o.pod ?? ''}`,
    time: o.time,
    subject: `system:serviceaccount:${ns}:${sa}`,
    namespace: ns,
    serviceAccount: sa,
    secondsAfterWarning: o.secondsAfterWarning,
    warnAfter: o.time - o.secondsAfterWarning * 1000,
    sourceIPs: [o.ip ?? '192.168.1.10'],
    userAgent: o.ua ?? 'multus/v0.0.0 (linux/amd64) kubernetes/$Format',
  };
  if (o.pod !== undefined) use.pod = o.pod;
  if (o.podUid !== undefined) use.podUid = o.podUid;
  return use;
}

/** A 401 use (no subject). */
export function unauthorizedUse(o: { time: number; ip: string; ua?: string; auditID?: string }): TokenUse {
  const use: TokenUse = {
    kind: 'unauthorized',
    auditID: o.auditID ?? `u-${o.time}-${o.ip}`,
    time: o.time,
    sourceIPs: [o.ip],
    responseCode: 401,
  };
  if (o.ua !== undefined) use.userAgent = o.ua;
  return use;
}

export function container(image: string, o: Partial<ContainerInfo> = {}): ContainerInfo {
  const ref = parseImageRef(image);
  const c: ContainerInfo = { name: 'main', image, imageRepository: ref.repository, command: [], args: [], init: false, ...o };
  if (ref.tag !== undefined && o.imageTag === undefined) c.imageTag = ref.tag;
  return c;
}

export function pod(o: Partial<PodInfo> & { name: string }): PodInfo {
  return {
    namespace: 'kube-system',
    serviceAccount: 'multus',
    containers: [],
    hostPaths: [],
    projectedToken: true,
    ownerChain: [{ kind: 'DaemonSet', namespace: o.namespace ?? 'kube-system', name: 'kube-multus-ds' }],
    labels: {},
    ...o,
  };
}

export function subjectState(o: Partial<SubjectState> = {}): SubjectState {
  return { available: true, pods: [], workloads: [], legacySecrets: [], ...o };
}

export function workload(o: Partial<WorkloadInfo> & { name: string }): WorkloadInfo {
  return { kind: 'DaemonSet', namespace: 'kube-system', images: [], args: [], ...o };
}

/**
 * An in-memory ClusterStateSource: `subjects` keyed `ns/name`; unknown SAs get empty available state.
 * `calls` records every call, `extraPods` are pods reachable only through getPod (not running as the SA).
 */
export class MemoryState implements ClusterStateSource {
  readonly calls: string[] = [];
  constructor(
    private readonly subjects: Record<string, SubjectState>,
    private readonly extraPods: PodInfo[] = [],
  ) {}

  async describeServiceAccount(namespace: string, name: string): Promise<SubjectState> {
    this.calls.push(`describe ${namespace}/${name}`);
    return this.subjects[`${namespace}/${name}`] ?? subjectState();
  }

  async getPod(namespace: string, name: string): Promise<PodInfo | undefined> {
    this.calls.push(`getPod ${namespace}/${name}`);
    const all = [...Object.values(this.subjects).flatMap((s) => s.pods), ...this.extraPods];
    return all.find((p) => p.namespace === namespace && p.name === name);
  }
}
