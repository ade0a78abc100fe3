import { describe, expect, it } from 'vitest';
import { createReadStats, tokenUseFromJson } from '../../src/sources/reader.js';
import type { TokenUse } from '../../src/audit/types.js';
import { podView, seedObjects } from '../../src/sandbox/cluster.js';
import {
  EKS_MAX_SECONDS_AFTER_WARNING,
  ISSUE_TO_WARN_AFTER_SECONDS,
  learnTemplates,
  LiveTraffic,
  loadBundle,
  shiftTimestampsDeep,
  shiftTimestampsInText,
  type ClusterView,
  type PodView,
} from '../../src/sandbox/replay.js';

const EXAMPLES = new URL('../../examples/', import.meta.url).pathname;
const bundle = loadBundle(EXAMPLES);
const REF = bundle.referenceTime;
const HOUR = 3_600_000;

/** Deterministic [0,1) source (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function ids(): () => string {
  let n = 0;
  return () => `live-${++n}`;
}

/** A mutable cluster made of the snapshot's pods and ServiceAccounts (bundle time, no shift). */
function snapshotCluster() {
  const items = seedObjects(bundle.snapshotItems);
  const pods: PodView[] = items.filter((i) => i.kind === 'Pod').map((p) => podView(p as never)!);
  const sas = new Map<string, { uid: string; createdAt: number }>();
  for (const i of items.filter((x) => x.kind === 'ServiceAccount')) {
    const m = i.metadata as { namespace: string; name: string; uid: string; creationTimestamp: string };
    sas.set(`${m.namespace}/${m.name}`, { uid: m.uid, createdAt: Date.parse(m.creationTimestamp) });
  }
  const view: ClusterView = { pods: () => pods, serviceAccount: (ns, n) => sas.get(`${ns}/${n}`) };
  return { pods, sas, view };
}

function parse(lines: string[]): TokenUse[] {
  const stats = createReadStats();
  const out = lines.map((l) => tokenUseFromJson(l, stats)).filter((u): u is TokenUse => u !== undefined);
  expect(stats.malformed).toBe(0);
  return out;
}

/** Distinct requests (auditIDs) among parsed uses. */
function requests(uses: TokenUse[]): TokenUse[] {
  const seen = new Map<string, TokenUse>();
  for (const u of uses) if (!seen.has(u.auditID)) seen.set(u.auditID, u);
  return [...seen.values()];
}

describe('timestamp shifting', () => {
  it('shifts every RFC 3339 timestamp in a line by whole seconds and keeps the fraction digits', () => {
    const line = '{"requestReceivedTimestamp":"2026-11-20T11:59:59.123456Z","stageTimestamp":"2026-11-20T12:00:00.000001Z","x":"2026-11-20"}';
    expect(shiftTimestampsInText(line, 3600)).toBe(
      '{"requestReceivedTimestamp":"2026-11-20T12:59:59.123456Z","stageTimestamp":"2026-11-20T13:00:00.000001Z","x":"2026-11-20"}',
    );
    expect(shiftTimestampsInText('truncated {"stageTimestamp":"2026-12-31T23:59:30Z', 45)).toBe('truncated {"stageTimestamp":"2027-01-01T00:00:15Z');
    expect(() => shiftTimestampsInText('x', 1.5)).toThrow(RangeError);
  });

  it('shifts timestamps inside objects, and the legacy-token-last-used date label', () => {
    const obj = {
      metadata: { creationTimestamp: '2026-08-28T09:41:16Z', labels: { 'kubernetes.io/legacy-token-last-used': '2026-11-20', other: '2026-11-20' } },
      status: { conditions: [{ lastTransitionTime: '2026-11-20T11:22:19Z' }], note: 'at 2026-11-20T11:22:19Z' },
    };
    expect(shiftTimestampsDeep(obj, 86_400 * 10 + 60)).toEqual({
      metadata: { creationTimestamp: '2026-09-07T09:42:16Z', labels: { 'kubernetes.io/legacy-token-last-used': '2026-11-30', other: '2026-11-20' } },
      status: { conditions: [{ lastTransitionTime: '2026-11-30T11:23:19Z' }], note: 'at 2026-11-20T11:22:19Z' },
    });
  });
});

describe('credential templates from the bundled examples', () => {
  const templates = learnTemplates(bundle.lines);

  it('finds one template per stale token (pod, warnafter) and per legacy subject', () => {
    expect(templates.map((t) => `${t.kind} ${t.serviceAccount} ${t.pod ?? '-'}`)).toEqual([
      'legacy deployer -',
      'stale helm-controller helm-controller-zzvh4jwxc-v78tn',
      'stale multus kube-multus-ds-nw6rg',
      'stale multus kube-multus-ds-458dh',
      'stale multus kube-multus-ds-svmt7',
      'stale multus kube-multus-ds-86hnh',
      'stale multus kube-multus-ds-dkvtp',
      'stale multus kube-multus-ds-b4j4z',
      'stale fluent-bit fluent-bit-tt9cz',
      'stale fluent-bit fluent-bit-wh4bn',
      'stale fluent-bit fluent-bit-4cxzd',
      'stale fluent-bit fluent-bit-w4zzl',
      'stale fluent-bit fluent-bit-79tpp',
      'stale fluent-bit fluent-bit-rz6zj',
    ]);
    const a = templates.find((t) => t.pod === 'kube-multus-ds-b4j4z')!;
    // examples/README.md, story 1: node A's token has warnafter 2026-08-28T10:41:25Z.
    expect(Math.floor(a.warnAfter! / 1000) * 1000).toBe(Date.parse('2026-08-28T10:41:25Z'));
    expect(a.node).toBe('ip-192-168-14-201.us-west-2.compute.internal');
    expect(a.serviceAccountUid).toBe('ddafca3d-b6e7-4fb1-9382-006efea63e09');
    for (const t of templates) {
      expect(t.intervalMs).toBeGreaterThanOrEqual(10 * 60_000);
      expect(t.intervalMs).toBeLessThanOrEqual(30 * 60_000);
    }
  });
});

describe('live traffic', () => {
  const templates = learnTemplates(bundle.lines);
  const staticSubjects = new Set(['kube-system/multus']);

  it('keeps using the templates whose pods exist, turns rejected tokens into 401s, and starts the copied token of a replacement Multus pod one hour after it started', () => {
    const { view } = snapshotCluster();
    const live = new LiveTraffic({ templates, cluster: view, staticTokenSubjects: staticSubjects, random: rng(1), newId: ids() });
    expect(live.tick(REF).lines).toEqual([]);
    const { lines, uses } = live.tick(REF + HOUR);
    const parsed = parse(lines);
    const reqs = requests(parsed);
    expect(reqs).toHaveLength(uses.length);
    // Two stages per accepted request, one ResponseStarted event per 401.
    expect(lines).toHaveLength(uses.filter((u) => u.kind !== 'unauthorized').length * 2 + uses.filter((u) => u.kind === 'unauthorized').length);
    const byPod = (pod: string) => uses.filter((u) => u.pod === pod);
    for (const pod of ['kube-multus-ds-b4j4z', 'kube-multus-ds-dkvtp', 'kube-multus-ds-458dh', 'kube-multus-ds-nw6rg', 'fluent-bit-4cxzd', 'helm-controller-zzvh4jwxc-v78tn']) {
      expect(byPod(pod).length, pod).toBeGreaterThan(0);
      expect(byPod(pod).every((u) => u.kind === 'stale')).toBe(true);
    }
    // Node F's old pod is gone: its token is no longer used.
    expect(byPod('kube-multus-ds-86hnh')).toEqual([]);
    // Node E's token is past the EKS limit: 401s with an empty user, from node E.
    const e = byPod('kube-multus-ds-svmt7');
    expect(e.length).toBeGreaterThan(0);
    expect(e.every((u) => u.kind === 'unauthorized')).toBe(true);
    const e401 = reqs.filter((u) => u.kind === 'unauthorized');
    expect(e401.length).toBe(e.length);
    expect(new Set(e401.flatMap((u) => u.sourceIPs))).toEqual(new Set(['192.168.90.44']));
    expect(e401.every((u) => u.subject === undefined && u.responseCode === 401)).toBe(true);
    // The legacy Secret token keeps being used.
    expect(uses.filter((u) => u.kind === 'legacy').length).toBeGreaterThan(0);
    expect(reqs.filter((u) => u.kind === 'legacy').every((u) => u.subject === 'system:serviceaccount:ci:deployer')).toBe(true);

    // Stale uses keep their token's warnafter: seconds after warning grow with time.
    const b4 = templates.find((t) => t.pod === 'kube-multus-ds-b4j4z')!;
    for (const u of reqs.filter((x) => x.pod === 'kube-multus-ds-b4j4z')) {
      expect(Math.floor(u.warnAfter! / 1000)).toBe(Math.floor(b4.warnAfter! / 1000));
      expect(u.secondsAfterWarning).toBe(Math.floor(u.time / 1000) - Math.floor(b4.warnAfter! / 1000));
      expect(u.secondsAfterWarning!).toBeLessThanOrEqual(EKS_MAX_SECONDS_AFTER_WARNING);
    }

    // Node F's replacement pod (started 2026-11-20T11:22:19Z) copied its token once: stale from warnafter on.
    const f = reqs.filter((u) => u.pod === 'kube-multus-ds-452jg');
    expect(f.length).toBeGreaterThan(0);
    const issued = Date.parse('2026-11-20T11:22:19Z') + 1000;
    for (const u of f) {
      expect(u.kind).toBe('stale');
      expect(Math.floor(u.warnAfter! / 1000)).toBe((issued + ISSUE_TO_WARN_AFTER_SECONDS * 1000) / 1000);
      expect(u.sourceIPs).toEqual(['192.168.23.87']);
      expect(u.node).toBe('ip-192-168-23-87.us-west-2.compute.internal');
      expect(u.time).toBeGreaterThanOrEqual(issued + ISSUE_TO_WARN_AFTER_SECONDS * 1000);
    }
  });

  it('after a restart, new pods are quiet; only the static-token-file pod goes stale again, one hour after it started', () => {
    const { pods, view } = snapshotCluster();
    const live = new LiveTraffic({ templates, cluster: view, staticTokenSubjects: staticSubjects, random: rng(2), newId: ids() });
    live.tick(REF);
    live.tick(REF + HOUR);
    const T = REF + HOUR + 60_000;
    const replace = (name: string, newName: string): void => {
      const i = pods.findIndex((p) => p.name === name);
      const old = pods[i]!;
      pods.splice(i, 1, { ...old, name: newName, uid: `uid-${newName}`, startedAt: T });
    };
    replace('kube-multus-ds-b4j4z', 'kube-multus-ds-new01');
    replace('fluent-bit-4cxzd', 'fluent-bit-new01');
    replace('helm-controller-zzvh4jwxc-v78tn', 'helm-controller-abc-new01');
    // Up to just before the new token's warnafter: nothing from the new pods, nothing from the replaced ones.
    const before = live.tick(T + ISSUE_TO_WARN_AFTER_SECONDS * 1000).uses;
    for (const pod of ['kube-multus-ds-new01', 'fluent-bit-new01', 'helm-controller-abc-new01', 'kube-multus-ds-b4j4z', 'fluent-bit-4cxzd', 'helm-controller-zzvh4jwxc-v78tn']) {
      expect(before.filter((u) => u.pod === pod), pod).toEqual([]);
    }
    const after = live.tick(T + 3 * HOUR);
    const reqs = requests(parse(after.lines));
    const multus = reqs.filter((u) => u.pod === 'kube-multus-ds-new01');
    expect(multus.length).toBeGreaterThan(0);
    const warnAfter = T + 1000 + ISSUE_TO_WARN_AFTER_SECONDS * 1000;
    for (const u of multus) {
      expect(u.kind).toBe('stale');
      expect(u.podUid).toBe('uid-kube-multus-ds-new01');
      expect(u.secondsAfterWarning).toBe(Math.floor(u.time / 1000) - Math.floor(warnAfter / 1000));
      expect(u.sourceIPs).toEqual(['192.168.14.201']);
    }
    expect(after.uses.filter((u) => u.pod === 'fluent-bit-new01' || u.pod === 'helm-controller-abc-new01')).toEqual([]);
  });

  it('a Multus thick image does not copy its token', () => {
    const { pods, view } = snapshotCluster();
    const live = new LiveTraffic({ templates, cluster: view, staticTokenSubjects: staticSubjects, random: rng(3), newId: ids() });
    live.tick(REF);
    const i = pods.findIndex((p) => p.name === 'kube-multus-ds-b4j4z');
    pods.splice(i, 1, { ...pods[i]!, name: 'kube-multus-ds-thick', uid: 'uid-thick', startedAt: REF, images: ['602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/multus-cni:v4.0.2-eksbuild.1_thick'] });
    expect(live.tick(REF + 5 * HOUR).uses.filter((u) => u.pod === 'kube-multus-ds-thick')).toEqual([]);
  });

  it('tokens of a recreated ServiceAccount are rejected: 401s instead of stale or legacy uses', () => {
    const { sas, view } = snapshotCluster();
    const live = new LiveTraffic({ templates, cluster: view, staticTokenSubjects: staticSubjects, random: rng(4), newId: ids() });
    live.tick(REF);
    sas.set('logging/fluent-bit', { uid: 'new-uid', createdAt: REF });
    sas.set('ci/deployer', { uid: 'new-uid-2', createdAt: REF });
    const { uses, lines } = live.tick(REF + 2 * HOUR);
    const fb = uses.filter((u) => u.subject === 'system:serviceaccount:logging:fluent-bit');
    expect(fb.length).toBeGreaterThan(0);
    expect(fb.every((u) => u.kind === 'unauthorized')).toBe(true);
    const ci = uses.filter((u) => u.subject === 'system:serviceaccount:ci:deployer');
    expect(ci.length).toBeGreaterThan(0);
    expect(ci.every((u) => u.kind === 'unauthorized')).toBe(true);
    const reqs = requests(parse(lines));
    expect(reqs.filter((u) => u.kind === 'unauthorized' && u.sourceIPs[0] === '203.0.113.45').length).toBe(ci.length);
  });

  it('does not write a backlog after a pause, and stays deterministic for a seed', () => {
    const run = () => {
      const { view } = snapshotCluster();
      const live = new LiveTraffic({ templates, cluster: view, staticTokenSubjects: staticSubjects, random: rng(5), newId: ids() });
      live.tick(REF);
      live.tick(REF + HOUR);
      return live.tick(REF + 30 * 24 * HOUR);
    };
    const a = run();
    const b = run();
    expect(a.lines).toEqual(b.lines);
    // 15 credentials, at most a couple of uses each after the pause.
    expect(a.uses.length).toBeLessThanOrEqual(2 * 15);
    expect(a.uses.every((u) => u.at > REF + 30 * 24 * HOUR - 2 * 30 * 60_000)).toBe(true);
  });
});
