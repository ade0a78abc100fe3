/**
 * What tokenwatch should find in the bundled examples, computed from the generator's own ground truth (the
 * requests it wrote), so tests and the README cannot drift from the data. Written to `examples/expected.json`.
 *
 * Rules (docs/design/architecture.md "Terms", docs/design/domain.md §1): a request is counted once however many stages it logged; a token is
 * (subject, pod, warnAfter); EKS rejects a token `warnAfter + 7,776,000 s`; upstream `issuedAt + 31,536,000 s`;
 * severity `critical` when rejection is < 7 days after the reference time or 401s are seen for the
 * ServiceAccount, `warning` < 30 days, else `info`; the reference time is the latest event time of the input.
 */
import { DAY, HOUR, SECOND, iso } from './format.js';
import {
  CLUSTER,
  EKS_MAX_SECONDS_AFTER_WARNING,
  UPSTREAM_EXTENSION_SECONDS,
  WARN_ONLY_SECONDS,
  saUsername,
  type ClusterModel,
  type PodModel,
} from './model.js';
import { ANN, type Req, type StoryId } from './traffic.js';
import type { RenderedEvent } from './events.js';

/** Finding kinds of the scan contract. */
export type ExpectedKind = 'stale-token' | 'legacy-token' | 'unauthorized';
/** Severities of the scan contract. */
export type ExpectedSeverity = 'info' | 'warning' | 'critical';

/** Ground truth of one stale token (all stale tokens of the logged window, in `expected.json` `tokens`). Times ISO-8601 UTC with ms. */
export interface TokenFacts {
  /** `authentication.kubernetes.io/credential-id` of the token (`JTI=<uuid>`). */
  credentialId: string;
  subject: string;
  pod: string;
  podUid: string;
  node: string;
  /** Whether the pod still exists in `cluster-snapshot.json` (false: the replaced Multus pod). */
  podInSnapshot: boolean;
  /** Token `iat`; tokenwatch infers it as `warnAfter − 3607 s`. */
  issuedAt: string;
  /** Token `kubernetes.io/warnafter`. Values inferred from events (`eventTime − secondsAfterWarning`) lie within +0…+5 s of it. */
  warnAfter: string;
  /** EKS: `warnAfter + 7,776,000 s`. */
  rejectionAt: string;
  /** Upstream (`--max-token-age upstream`): `issuedAt + 31,536,000 s`. */
  upstreamRejectionAt: string;
}

/** One stale token as tokenwatch should report it for an input (the contract's `tokens[]` plus a few checks). */
export interface ExpectedToken {
  credentialId: string;
  pod: string;
  podUid: string;
  node: string;
  podInSnapshot: boolean;
  /** Ground-truth `warnafter` (see {@link TokenFacts.warnAfter} for the tolerance of inferred values). */
  warnAfter: string;
  /** EKS rejection time. */
  rejectionAt: string;
  /** Requests with this token in the input, each counted once. */
  requests: number;
  firstSeen: string;
  lastSeen: string;
  maxSecondsAfterWarning: number;
}

/** One finding as tokenwatch should report it for an input. */
export interface ExpectedFinding {
  story: StoryId;
  cluster: string;
  namespace: string;
  serviceAccount: string;
  subject: string;
  kind: ExpectedKind;
  /** Severity at the input's reference time with `--max-token-age eks`. */
  severity: ExpectedSeverity;
  /** Requests (distinct auditIDs). */
  requests: number;
  firstSeen: string;
  lastSeen: string;
  maxSecondsAfterWarning: number | null;
  /** Earliest EKS rejection among tokens not yet rejected at the reference time (else the earliest overall); null for legacy / 401 findings. */
  rejectionAt: string | null;
  /** Earliest EKS rejection over all its tokens, already rejected ones included; null for legacy / 401 findings. */
  earliestRejectionAt: string | null;
  /** Days from the reference time to `rejectionAt`, one decimal. */
  daysLeft: number | null;
  tokens: ExpectedToken[];
  /** Pods named in the audit events (sorted). */
  pods: string[];
  /** Pods named in the audit events but absent from the snapshot. */
  missingPods: string[];
  /** Top-level workloads running as the ServiceAccount in the snapshot. */
  workloads: Array<{ kind: string; namespace: string; name: string }>;
  userAgents: string[];
  sourceIPs: string[];
  /** Catalog component the cause should name (domain.md §6), or null. */
  component: string | null;
  /** Legacy findings: the Secret named by the legacy-token annotations. */
  legacySecret?: { name: string; namespace: string; kind: 'manual' };
  /** Unauthorized findings: how the 401s were tied to the subject (inferred). */
  attribution?: string;
}

/** Counters of one input. */
export interface ExpectedStats {
  files: number;
  /** Non-empty lines (audit files), log events (filter-log-events) or rows (Insights). */
  lines: number;
  /** Parseable audit events (all of them, token uses or not). */
  auditEvents: number;
  /** Lines that are not a JSON object. */
  malformed: number;
  /** Malformed lines that contain a token-use term (`authentication.k8s.io/stale-token`, ...); a prefiltering reader sees only these. */
  malformedWithTokenTerm: number;
  /** Events that are token uses (stale, legacy or 401), all stages. */
  tokenUseEvents: number;
  /** Token uses counted once per auditID. */
  tokenUses: number;
  /** `tokenUseEvents − tokenUses`: stages of an already counted request. */
  duplicates: number;
}

/** Expected results for one input (one or several files scanned together). */
export interface ExpectedInput {
  description: string;
  /** Paths relative to the repository root. */
  files: string[];
  /** Latest event time (`requestReceivedTimestamp`) of the input: the default `--now`. */
  referenceTime: string;
  stats: ExpectedStats;
  findings: ExpectedFinding[];
}

/** Contents of `examples/expected.json`. */
export interface ExpectedExamples {
  cluster: string;
  referenceTime: string;
  maxTokenAge: 'eks';
  eksMaxSecondsAfterWarning: number;
  severityThresholdDays: { critical: number; warning: number };
  malformedLines: Array<{ file: string; line: number; kind: 'truncated' | 'garbage'; hasTokenTerm: boolean }>;
  inputs: Record<string, ExpectedInput>;
  /** Every stale token of the logged window. */
  tokens: TokenFacts[];
  story: {
    nodes: Array<{ label: string; name: string; ip: string; multusPod: string; multusPodStart: string }>;
    multusReplacedPod: { name: string; uid: string; node: string; deletedAt: string; replacedBy: string };
    multusRejectedToken: { node: string; pod: string; rejectedAt: string; first401: string; last401: string; count401: number };
    checkoutStuckPod: { name: string; node: string; createdAt: string };
    legacySecret: { namespace: string; name: string; lastUsedLabel: string };
  };
}

/** One input as the expected computation sees it. */
export interface InputSet {
  name: string;
  description: string;
  files: string[];
  lines: number;
  events: readonly RenderedEvent[];
  malformed: number;
  malformedWithTokenTerm: number;
}

const COMPONENT: Record<StoryId, string | null> = {
  multus: 'multus-thin',
  'flux-helm-controller': 'flux-helm-controller',
  'fluent-bit': 'fluent-bit',
  'legacy-deployer': null,
  'multus-401': 'multus-thin',
};

const msOf = (us: number): number => Math.floor(us / 1000);
const sortedUnique = (xs: Iterable<string>): string[] => [...new Set(xs)].sort();

function secondsAfterWarning(q: Req): number {
  const v = q.authn[ANN.stale];
  const m = v ? /seconds after warning threshold: (\d+)$/.exec(v) : null;
  if (!m) throw new Error(`no stale annotation on ${q.auditID}`);
  return Number(m[1]);
}

function severityOf(rejectionAt: number | null, reference: number, has401: boolean): ExpectedSeverity {
  if (has401) return 'critical';
  if (rejectionAt === null) return 'info';
  const left = rejectionAt - reference;
  if (left < 7 * DAY) return 'critical';
  if (left < 30 * DAY) return 'warning';
  return 'info';
}

/** Pods present in the snapshot. */
function livePods(model: ClusterModel): Map<string, PodModel> {
  return new Map(model.pods.filter((p) => p.deletedAt === undefined).map((p) => [`${p.namespace}/${p.name}`, p]));
}

function workloadsOf(model: ClusterModel, namespace: string, sa: string): Array<{ kind: string; namespace: string; name: string }> {
  const out = new Map<string, { kind: string; namespace: string; name: string }>();
  for (const p of livePods(model).values()) {
    if (p.sa.namespace !== namespace || p.sa.name !== sa) continue;
    const top = p.owner.kind === 'ReplicaSet' && p.owner.owner ? p.owner.owner : p.owner;
    out.set(`${top.kind}/${top.name}`, { kind: top.kind, namespace: top.namespace, name: top.name });
  }
  return [...out.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
}

/** Expected findings and stats for one input. */
export function expectInput(model: ClusterModel, input: InputSet): ExpectedInput {
  const live = livePods(model);
  const reference = input.events.reduce((m, e) => Math.max(m, msOf(e.req.t)), 0);
  const uses = new Map<string, Req>();
  let tokenUseEvents = 0;
  for (const e of input.events) {
    if (!e.req.signal) continue;
    tokenUseEvents++;
    uses.set(e.req.auditID, e.req);
  }
  const reqs = [...uses.values()].sort((a, b) => a.t - b.t);
  /** End of the token-use data (latest token use), epoch ms: the findings' "last hour of data" is measured from it. */
  const dataEnd = reqs.reduce((m, q) => Math.max(m, msOf(q.t)), 0);
  const findings: ExpectedFinding[] = [];

  // 401s are attributed by (sourceIP, userAgent) to the subject seen with stale tokens from the same source.
  const staleBySource = new Map<string, Req>();
  for (const q of reqs) if (q.signal?.kind === 'stale') staleBySource.set(`${q.sourceIP} ${q.userAgent}`, q);
  const unauthorized = reqs.filter((q) => q.signal?.kind === 'unauthorized');
  const attributed401 = new Map<string, Req[]>();
  for (const q of unauthorized) {
    const src = staleBySource.get(`${q.sourceIP} ${q.userAgent}`);
    if (src?.signal?.kind !== 'stale') throw new Error(`401 ${q.auditID} cannot be attributed in ${input.name}`);
    const key = src.signal.token.pod.sa.namespace + '/' + src.signal.token.pod.sa.name;
    attributed401.set(key, [...(attributed401.get(key) ?? []), q]);
  }

  const bySubject = new Map<string, Req[]>();
  for (const q of reqs) {
    if (q.signal?.kind === 'unauthorized') continue;
    const key = `${q.signal?.kind}|${q.user.username}`;
    bySubject.set(key, [...(bySubject.get(key) ?? []), q]);
  }
  for (const [key, list] of bySubject) {
    const first = list[0] as Req;
    const signal = first.signal;
    if (!signal) continue;
    const subject = key.split('|')[1] as string;
    const [, namespace, serviceAccount] = subject.split(':').slice(1) as [string, string, string];
    const has401 = attributed401.has(`${namespace}/${serviceAccount}`);
    const base = {
      story: signal.story,
      cluster: CLUSTER,
      namespace,
      serviceAccount,
      subject,
      requests: list.length,
      firstSeen: iso(msOf(first.t)),
      lastSeen: iso(msOf((list[list.length - 1] as Req).t)),
      workloads: workloadsOf(model, namespace, serviceAccount),
      userAgents: sortedUnique(list.map((q) => q.userAgent)),
      sourceIPs: sortedUnique(list.map((q) => q.sourceIP)),
      component: COMPONENT[signal.story],
    };
    if (signal.kind === 'stale') {
      const byToken = new Map<string, Req[]>();
      for (const q of list) {
        if (q.signal?.kind !== 'stale') continue;
        const id = q.signal.token.credentialId;
        byToken.set(id, [...(byToken.get(id) ?? []), q]);
      }
      const tokens: ExpectedToken[] = [...byToken.values()].map((tl) => {
        const s = tl[0]?.signal;
        if (s?.kind !== 'stale') throw new Error('unreachable');
        const tok = s.token;
        return {
          credentialId: tok.credentialId,
          pod: tok.pod.name,
          podUid: tok.pod.uid,
          node: tok.pod.node.name,
          podInSnapshot: live.has(`${tok.pod.namespace}/${tok.pod.name}`),
          warnAfter: iso(tok.warnAfter),
          rejectionAt: iso(tok.warnAfter + EKS_MAX_SECONDS_AFTER_WARNING * SECOND),
          requests: tl.length,
          firstSeen: iso(msOf((tl[0] as Req).t)),
          lastSeen: iso(msOf((tl[tl.length - 1] as Req).t)),
          maxSecondsAfterWarning: Math.max(...tl.map(secondsAfterWarning)),
        };
      });
      tokens.sort((a, b) => (a.warnAfter < b.warnAfter ? -1 : a.warnAfter > b.warnAfter ? 1 : a.pod < b.pod ? -1 : 1));
      const rejections = tokens.map((t) => Date.parse(t.rejectionAt));
      // design.md: rejectionAt is the earliest over the finding's LIVE tokens. A token is live when it was used within
      // the last hour of the data, or when it is the newest token of its pod and that pod is still in the snapshot
      // (a pod's token keeps being presented until the pod goes, even after the API server started rejecting it).
      const newestOfPod = new Map<string, number>();
      for (const t of tokens) newestOfPod.set(t.pod, Math.max(newestOfPod.get(t.pod) ?? 0, Date.parse(t.warnAfter)));
      const liveRejections = tokens
        .filter((t) => Date.parse(t.lastSeen) >= dataEnd - HOUR || (t.podInSnapshot && Date.parse(t.warnAfter) === newestOfPod.get(t.pod)))
        .map((t) => Date.parse(t.rejectionAt));
      const rejectionAt = liveRejections.length > 0 ? Math.min(...liveRejections) : null;
      const pods = sortedUnique(tokens.map((t) => t.pod));
      findings.push({
        ...base,
        kind: 'stale-token',
        severity: severityOf(rejectionAt, reference, has401),
        maxSecondsAfterWarning: Math.max(...tokens.map((t) => t.maxSecondsAfterWarning)),
        rejectionAt: rejectionAt === null ? null : iso(rejectionAt),
        earliestRejectionAt: iso(Math.min(...rejections)),
        daysLeft: rejectionAt === null ? null : Math.round(((rejectionAt - reference) / DAY) * 10) / 10,
        tokens,
        pods,
        missingPods: pods.filter((p) => !live.has(`${namespace}/${p}`)),
      });
    } else if (signal.kind === 'legacy') {
      findings.push({
        ...base,
        kind: 'legacy-token',
        severity: severityOf(null, reference, has401),
        maxSecondsAfterWarning: null,
        rejectionAt: null,
        earliestRejectionAt: null,
        daysLeft: null,
        tokens: [],
        pods: [],
        missingPods: [],
        legacySecret: { name: first.authn[ANN.legacyManual] ?? '', namespace, kind: 'manual' },
      });
    }
  }
  for (const [key, list] of attributed401) {
    const [namespace, serviceAccount] = key.split('/') as [string, string];
    const first = list[0] as Req;
    const src = staleBySource.get(`${first.sourceIP} ${first.userAgent}`) as Req;
    findings.push({
      story: 'multus-401',
      cluster: CLUSTER,
      namespace,
      serviceAccount,
      subject: src.user.username ?? '',
      kind: 'unauthorized',
      severity: 'critical',
      requests: list.length,
      firstSeen: iso(msOf(first.t)),
      lastSeen: iso(msOf((list[list.length - 1] as Req).t)),
      maxSecondsAfterWarning: null,
      rejectionAt: null,
      earliestRejectionAt: null,
      daysLeft: null,
      tokens: [],
      pods: [],
      missingPods: [],
      workloads: workloadsOf(model, namespace, serviceAccount),
      userAgents: sortedUnique(list.map((q) => q.userAgent)),
      sourceIPs: sortedUnique(list.map((q) => q.sourceIP)),
      component: COMPONENT['multus-401'],
      attribution: `inferred: same sourceIP and userAgent as stale-token uses by ${src.user.username ?? ''}`,
    });
  }
  const rank: Record<ExpectedSeverity, number> = { critical: 0, warning: 1, info: 2 };
  findings.sort(
    (a, b) =>
      rank[a.severity] - rank[b.severity] ||
      (a.rejectionAt ?? '9999') .localeCompare(b.rejectionAt ?? '9999') ||
      a.kind.localeCompare(b.kind) ||
      a.subject.localeCompare(b.subject),
  );
  return {
    description: input.description,
    files: input.files,
    referenceTime: iso(reference),
    stats: {
      files: input.files.length,
      lines: input.lines,
      auditEvents: input.events.length,
      malformed: input.malformed,
      malformedWithTokenTerm: input.malformedWithTokenTerm,
      tokenUseEvents,
      tokenUses: uses.size,
      duplicates: tokenUseEvents - uses.size,
    },
    findings,
  };
}

/** The `story` section of expected.json: names and times the README and tests refer to. */
export function storyFacts(model: ClusterModel, reqs: readonly Req[]): ExpectedExamples['story'] {
  const r401 = reqs.filter((q) => q.signal?.kind === 'unauthorized');
  const e = model.ref.multusPod.E;
  return {
    nodes: model.nodes.map((n) => {
      const p = model.ref.multusPod[n.label];
      return { label: n.label, name: n.name, ip: n.ip, multusPod: p.name, multusPodStart: iso(p.startTime) };
    }),
    multusReplacedPod: {
      name: model.ref.multusReplacedPod.name,
      uid: model.ref.multusReplacedPod.uid,
      node: model.ref.multusReplacedPod.node.name,
      deletedAt: iso(model.multusReplacedAt),
      replacedBy: model.ref.multusPod.F.name,
    },
    multusRejectedToken: {
      node: e.node.name,
      pod: e.name,
      rejectedAt: iso(Math.floor((e.startTime + SECOND) / SECOND) * SECOND + (WARN_ONLY_SECONDS + EKS_MAX_SECONDS_AFTER_WARNING) * SECOND),
      first401: iso(msOf((r401[0] as Req).t)),
      last401: iso(msOf((r401[r401.length - 1] as Req).t)),
      count401: r401.length,
    },
    checkoutStuckPod: { name: model.ref.checkoutStuckPod.name, node: model.ref.checkoutStuckPod.node.name, createdAt: iso(model.ref.checkoutStuckPod.createdAt) },
    legacySecret: { namespace: 'ci', name: model.ref.deployerSecret.name, lastUsedLabel: '2026-11-20' },
  };
}

/** Ground truth of every stale token used in `reqs`, sorted by warnAfter then pod. */
export function tokenFacts(model: ClusterModel, reqs: readonly Req[]): TokenFacts[] {
  const live = livePods(model);
  const seen = new Map<string, TokenFacts>();
  for (const q of reqs) {
    if (q.signal?.kind !== 'stale' || seen.has(q.signal.token.credentialId)) continue;
    const tok = q.signal.token;
    seen.set(tok.credentialId, {
      credentialId: tok.credentialId,
      subject: saUsername(tok.pod.sa),
      pod: tok.pod.name,
      podUid: tok.pod.uid,
      node: tok.pod.node.name,
      podInSnapshot: live.has(`${tok.pod.namespace}/${tok.pod.name}`),
      issuedAt: iso(tok.issuedAt),
      warnAfter: iso(tok.warnAfter),
      rejectionAt: iso(tok.warnAfter + EKS_MAX_SECONDS_AFTER_WARNING * SECOND),
      upstreamRejectionAt: iso(tok.issuedAt + UPSTREAM_EXTENSION_SECONDS * SECOND),
    });
  }
  return [...seen.values()].sort((a, b) => (a.warnAfter < b.warnAfter ? -1 : a.warnAfter > b.warnAfter ? 1 : a.pod < b.pod ? -1 : 1));
}

