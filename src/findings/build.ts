/**
 * Builds findings (the `scan --format json` contract, docs/design/contracts.md) from token records: one finding
 * per (cluster, namespace, serviceAccount, kind), with its tokens, pods, workloads, rejection date,
 * severity and cause.
 *
 * Cluster state is optional: without it (no snapshot, API server unreachable) every finding is still
 * reported, with `clusterState` saying why pods/workloads/images are unknown.
 */
import { objectLabel } from '../core/actions.js';
import { ErrorCode, TokenwatchError } from '../errors.js';
import { sha256Hex } from '../core/digest.js';
import pLimit from 'p-limit';
import type { ClusterStateSource, PodInfo, SubjectState, WorkloadRef } from '../cluster/types.js';
import { NOT_A_SERVICE_ACCOUNT, UNATTRIBUTED } from './aggregate.js';
import { nearestWorkload } from '../cluster/convert.js';
import { type CauseCatalog, DEFAULT_CATALOG, classifyCause, podMatchesUserAgent, sameTokenPod, successorPod } from './causes.js';
import { SEVERITY_RANK, type Finding, type FindingKind, type FindingToken, type Severity, type SeverityThresholds, type TokenRecord } from './types.js';
import { DAY_SECONDS, HOUR_MS } from '../core/units.js';
import { TimeSlicer } from '../core/slice.js';

/** A token used within this long before the end of the data is "still in use" (live). */
export const LIVE_USE_WINDOW_MS = HOUR_MS;
/** At most this many user agents / source IPs are listed per finding. */
export const MAX_LISTED_VALUES = 20;
/** Cluster-state reads run at most this many at a time (live API server). */
const STATE_CONCURRENCY = 8;

/** docs/design/architecture.md "Terms" (severity): critical under 7 days to rejection, warning under 30 days. */
export const DEFAULT_THRESHOLDS: SeverityThresholds = {
  criticalSeconds: 7 * DAY_SECONDS,
  warningSeconds: 30 * DAY_SECONDS,
};

/** Note put in `clusterState` when no cluster state source was given. */
export const STATE_NOT_PROVIDED = 'cluster state not provided: pods, workloads and images unknown';

/** Orders severities: `critical` 2 > `warning` 1 > `info` 0 ({@link SEVERITY_RANK}). */
export function severityRank(s: Severity): number {
  return SEVERITY_RANK[s];
}

/**
 * The stable id of a finding: the first 16 hex chars of sha256(`cluster/namespace/serviceAccount/kind`).
 */
export function findingId(cluster: string, namespace: string, serviceAccount: string, kind: FindingKind): string {
  return sha256Hex(`${cluster}/${namespace}/${serviceAccount}/${kind}`).slice(0, 16);
}

/** Options of {@link buildFindings}. */
export interface BuildOptions {
  /** Reference time for severity (days to rejection), epoch ms UTC. */
  now: number;
  /** Default {@link DEFAULT_THRESHOLDS}. */
  thresholds?: SeverityThresholds;
  /** Cluster state; without it findings carry `clusterState: STATE_NOT_PROVIDED`. */
  state?: ClusterStateSource;
  /** Default: the built-in `catalog.json`. */
  catalog?: CauseCatalog;
  /**
   * Live mode: only 401 records last seen at or after this time (epoch ms UTC) make a ServiceAccount's findings
   * critical; older 401s leave severity to the rejection date (an unauthorized finding whose 401s stopped is
   * `warning`). Default: every 401 record counts (`scan`, where the data is one window).
   */
  unauthorizedSince?: number;
  /**
   * The cluster does not extend ServiceAccount tokens (`audit.azure.tokenExtension: off`): a client that caches its
   * first token is refused {@link UNEXTENDED_TOKEN_LIFETIME_MS} after its pod started, so 401s attributed to one pod
   * that begin then are corroborated by their timing ({@link expiryCorroboration}). Default false.
   */
  tokenExtensionOff?: boolean;
}

/**
 * Lifetime of a kubelet-requested projected token when the API server does not extend it: 3607 s
 * (`WarnOnlyBoundTokenExpirationSeconds`, kubernetes `pkg/serviceaccount/claims.go`; docs/design/domain.md §1), ms.
 */
export const UNEXTENDED_TOKEN_LIFETIME_MS = 3_607_000;
/** How long after the first token's expiry the first 401 may come and still be corroborated by the timing, ms. */
export const EXPIRY_CORROBORATION_WINDOW_MS = 15 * 60_000;

/**
 * On a cluster without token extension: 401s attributed (by source address and user agent) to one pod whose first
 * 401 came {@link UNEXTENDED_TOKEN_LIFETIME_MS} to that plus {@link EXPIRY_CORROBORATION_WINDOW_MS} after the pod
 * started — the moment the token it was given at start expired — are that pod's cached token failing. Undefined
 * when no record fits (or cluster state cannot tell the pod's start).
 */
export async function expiryCorroboration(unauthorized: readonly TokenRecord[], state: Pick<ClusterStateSource, 'getPod'> | undefined): Promise<UnauthorizedAttribution | undefined> {
  if (!state) return undefined;
  for (const u of unauthorized) {
    if (!u.pod) continue;
    const pod = await state.getPod(u.namespace, u.pod).catch(() => undefined);
    if (pod?.startTime === undefined) continue;
    const after = u.firstSeen - pod.startTime;
    if (after >= UNEXTENDED_TOKEN_LIFETIME_MS - 60_000 && after <= UNEXTENDED_TOKEN_LIFETIME_MS + EXPIRY_CORROBORATION_WINDOW_MS) {
      return {
        basis: 'corroborated',
        text: `401s attributed by source address ${u.sourceIPs[0] ?? '(none)'} and user agent ${u.userAgents[0] ?? '(none)'}, corroborated: token extension is off on this cluster and they started at ${iso(u.firstSeen)}, ${Math.round(after / 1000)} s after pod ${u.pod} started — when the token it was given at start expired (3607 s)`,
      };
    }
  }
  return undefined;
}

/**
 * Stale uses "stop where the 401s start" when the source's last stale use is at most this much after the first 401
 * (audit events of one moment arrive slightly out of order; the API server caches authentication results ~10 s).
 */
export const STALE_STOP_TOLERANCE_MS = 2 * 60_000;
/**
 * ... and at most this long before it, unless the token's rejection date had passed by the first 401 (a client that
 * is idle for a while still fails on its next request after rejection).
 */
export const STALE_STOP_GAP_MS = HOUR_MS;

/** Evidence phrase of a 401 signal tied to its ServiceAccount only by source IP and user agent (shown in the alert). */
export const IP_UA_ATTRIBUTION = 'attributed by source IP and user agent';

/**
 * Builds the findings of a set of token records (all of one scan or one live poll).
 *
 * - `rejectionAt` of a stale-token finding is the earliest `rejectionAt` over its **live** tokens.
 *   A token is live when it was used within {@link LIVE_USE_WINDOW_MS} of the end of the data
 *   (the latest `lastSeen` over all `records`), or when it is the newest token (latest `warnAfter`)
 *   of its pod and — when cluster state is available — that pod still exists (same uid when both
 *   are known). Without cluster state every newest-per-pod token is live. No live token → null, unless 401s of the
 *   same subject followed a token's stale uses: then the latest such token's `rejectionAt` (the date the 401s mean).
 * - Severity: `critical` when `rejectionAt − now < thresholds.criticalSeconds` (past included) or
 *   when 401s were attributed to the subject (this finding or another kind of the same subject; with
 *   `unauthorizedSince`, only 401s seen since then);
 *   `warning` when `< thresholds.warningSeconds`; else `info`. Exactly 7 d away is `warning`,
 *   exactly 30 d is `info`. Legacy-token findings have no rejection date: `info`, or `warning` when
 *   the Secret is invalidated (annotation `legacy-token-invalidated`, or label
 *   `kubernetes.io/legacy-token-invalid-since` in cluster state). Unattributed 401s
 *   (ServiceAccount `(unattributed)`) are `warning`: they name no subject to be critical about.
 * - A token whose pod is known to be gone at `now` is never live (see `markLive`): deleting a pod
 *   invalidates its bound tokens.
 * - `pods`: pod names in the tokens. `workloads`: for each token pod in cluster state, the nearest
 *   restartable controller (`nearestWorkload` in `src/cluster/convert.ts`: StatefulSet, Deployment via
 *   its ReplicaSet, DaemonSet; else the CronJob/Job, else the top owner), with the object above it as
 *   `owner` (e.g. an operator's custom resource); a bare pod is its own `Pod` workload; when none of
 *   them is in cluster state any more, the workloads now running as the ServiceAccount. CronJob/Job
 *   workloads add an evidence line (no restart; the next run gets a fresh token). `missingPods`: token
 *   pods absent from cluster state.
 * - Before grouping: legacy-token records that name only their Secret get its ServiceAccount
 *   (`resolveLegacySecretOwners`), and unattributed 401s may be attributed by source IP when exactly
 *   one pod on that IP matches (`attributeBySourceIP`).
 * - Sorted by severity (critical first), then `rejectionAt` ascending (null last), then id.
 *
 * @throws Error when thresholds are negative or `criticalSeconds > warningSeconds`.
 *   A failing cluster-state read never throws: the finding gets `clusterState` with the error.
 */
export async function buildFindings(records: TokenRecord[], opts: BuildOptions): Promise<Finding[]> {
  const thresholds = opts.thresholds ?? DEFAULT_THRESHOLDS;
  if (!(thresholds.criticalSeconds >= 0 && thresholds.warningSeconds >= thresholds.criticalSeconds)) {
    throw new TokenwatchError(
      ErrorCode.Internal,
      `invalid severity thresholds: critical ${thresholds.criticalSeconds} s, warning ${thresholds.warningSeconds} s (need 0 ≤ critical ≤ warning)`,
    );
  }
  const catalog = opts.catalog ?? DEFAULT_CATALOG;
  const dataEnd = records.length > 0 ? records.reduce((m, r) => Math.max(m, r.lastSeen), -Infinity) : opts.now;
  records = await resolveLegacySecretOwners(records, opts.state);
  records = await attributeBySourceIP(records, opts.state, catalog);

  const groups = new Map<string, TokenRecord[]>();
  const staleBySubject = new Map<string, TokenRecord[]>();
  const unauthorizedBySubject = new Map<string, TokenRecord[]>();
  const unauthorizedSubjects = new Set<string>();
  for (const r of records) {
    const key = `${r.cluster}\0${r.namespace}\0${r.serviceAccount}\0${r.kind}`;
    let g = groups.get(key);
    if (!g) groups.set(key, (g = []));
    g.push(r);
    const sk = subjectKey(r);
    if (r.kind === 'stale-token') {
      let s = staleBySubject.get(sk);
      if (!s) staleBySubject.set(sk, (s = []));
      s.push(r);
    }
    if (r.kind === 'unauthorized' && r.namespace !== UNATTRIBUTED && (opts.unauthorizedSince === undefined || r.lastSeen >= opts.unauthorizedSince)) {
      let u = unauthorizedBySubject.get(sk);
      if (!u) unauthorizedBySubject.set(sk, (u = []));
      u.push(r);
    }
  }
  // 401s raise a ServiceAccount to critical only when the events named it or their attribution is corroborated: 401s
  // carry no user, and a source address with a user agent is something any client that can connect from that address
  // can send (see `corroboration`).
  const basisOf = new Map<string, UnauthorizedAttribution>();
  for (const [sk, u] of unauthorizedBySubject) {
    let basis = attributionBasis(u, staleBySubject.get(sk) ?? []);
    if (basis.basis === 'address-only' && opts.tokenExtensionOff) basis = (await expiryCorroboration(u, opts.state)) ?? basis;
    basisOf.set(sk, basis);
    if (basis.basis !== 'address-only') unauthorizedSubjects.add(sk);
  }

  const states = new StateCache(opts.state);
  const limit = pLimit(STATE_CONCURRENCY);
  // Many groups are long synchronous work between microtasks: built in slices (src/core/slice.ts).
  const slicer = new TimeSlicer();
  const findings = await Promise.all(
    [...groups.values()].map((g) =>
      limit(async () => {
        if (slicer.due()) await slicer.yield();
        return buildOne(g, {
          now: opts.now,
          thresholds,
          catalog,
          dataEnd,
          states,
          staleOfSubject: staleBySubject.get(subjectKey(g[0]!)) ?? [],
          unauthorizedOfSubject: unauthorizedBySubject.get(subjectKey(g[0]!)) ?? [],
          has401: unauthorizedSubjects.has(subjectKey(g[0]!)),
          attribution: basisOf.get(subjectKey(g[0]!)),
        });
      }),
    ),
  );
  return findings.sort(compareFindings);
}

/** On what a ServiceAccount's 401s are attributed to it (the `Finding.attribution` extension). */
export type UnauthorizedAttribution = NonNullable<Finding['attribution']>;

/** Phrase of the {@link attributionBasis} text of 401s attributed by address alone (the alert and Details show it). */
export const ADDRESS_ONLY_ATTRIBUTION = 'by source address and user agent only, not corroborated';

/**
 * On what 401 records (of one subject) rest, after `TokenRecord.attribution`:
 * - `named`: an audit event named the subject (`DIRECT_ATTRIBUTION`, or any attribution not marked `inferred:`);
 * - `corroborated`: attributed by source address (and user agent), and the stale-token uses of the subject from the
 *   same address and user agent stop where these 401s start: none later than {@link STALE_STOP_TOLERANCE_MS}
 *   after the first 401, and the last and at most {@link STALE_STOP_GAP_MS} before it unless that token's rejection date had
 *   passed by then — the token that was in use is the one now refused;
 * - `address-only`: none of these. Anyone who can open a connection from that address (another process on the
 *   node, a hostNetwork pod) can send token-less requests with any user agent, so these never make a finding
 *   critical nor an alert say requests fail; the node probe can still corroborate them (`src/probe/findings.ts`).
 */
export function attributionBasis(unauthorized: readonly TokenRecord[], stale: readonly TokenRecord[]): UnauthorizedAttribution {
  if (unauthorized.some((r) => !r.attribution?.startsWith('inferred:'))) {
    return { basis: 'named', text: '401s attributed because their audit events named this ServiceAccount' };
  }
  for (const u of unauthorized) {
    const ua = u.userAgents[0];
    const sameSource = stale.filter(
      (s) => s.sourceIPs.some((ip) => u.sourceIPs.includes(ip)) && (ua === undefined || s.userAgents.length === 0 || s.userAgents.includes(ua)),
    );
    // A stale token still accepted from that source after the 401s began: the 401s are not that client's.
    if (sameSource.some((s) => s.lastSeen > u.firstSeen + STALE_STOP_TOLERANCE_MS)) continue;
    for (const s of sameSource) {
      const stoppedAtStart = s.lastSeen <= u.firstSeen + STALE_STOP_TOLERANCE_MS;
      const close = u.firstSeen - s.lastSeen <= STALE_STOP_GAP_MS || (s.rejectionAt !== undefined && s.rejectionAt <= u.firstSeen + STALE_STOP_TOLERANCE_MS);
      if (stoppedAtStart && close) {
        return {
          basis: 'corroborated',
          text: `401s attributed by source address ${u.sourceIPs[0] ?? '(none)'} and user agent ${ua ?? '(none)'}, corroborated: the stale-token uses from there${s.pod ? ` (pod ${s.pod})` : ''} stopped at ${iso(s.lastSeen)}, where the 401s started (${iso(u.firstSeen)})`,
        };
      }
    }
  }
  const first = unauthorized[0];
  const where = first ? ` (source address ${first.sourceIPs[0] ?? '(none)'}, user agent ${first.userAgents[0] ?? '(none)'})` : '';
  return {
    basis: 'address-only',
    text: `401s attributed ${ADDRESS_ONLY_ATTRIBUTION}${where}: anyone who can connect from that address can send token-less requests with that user agent; the stale-token uses from there did not stop where the 401s started, and neither the node probe nor API-server metrics confirm them, so they do not make this critical`,
  };
}

/** Sort order of findings: severity desc, rejectionAt asc (null last), id. */
export function compareFindings(a: Finding, b: Finding): number {
  const s = severityRank(b.severity) - severityRank(a.severity);
  if (s !== 0) return s;
  if (a.rejectionAt !== b.rejectionAt) {
    if (a.rejectionAt === null) return 1;
    if (b.rejectionAt === null) return -1;
    return a.rejectionAt < b.rejectionAt ? -1 : 1;
  }
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

interface OneContext {
  now: number;
  thresholds: SeverityThresholds;
  catalog: CauseCatalog;
  dataEnd: number;
  states: StateCache;
  staleOfSubject: TokenRecord[];
  unauthorizedOfSubject: TokenRecord[];
  has401: boolean;
  /** On what the subject's 401s (since `unauthorizedSince`) are attributed to it; absent without any. */
  attribution?: UnauthorizedAttribution | undefined;
}

/** What cluster state says about one finding's ServiceAccount and token pods. */
interface StateView {
  /** Subject state when it was read and available. */
  subject?: SubjectState;
  /** Why state is missing (the `clusterState` note). */
  note?: string;
  /** Token pod key (uid, else name) → the pod in cluster state, or null when absent. */
  pods: Map<string, PodInfo | null>;
  /** The state is the cluster as it is now (live API), so an absent pod is gone at the reference time. */
  current?: boolean;
}

async function buildOne(group: TokenRecord[], ctx: OneContext): Promise<Finding> {
  const first = group[0]!;
  const { cluster, namespace, serviceAccount, kind } = first;
  const view = await ctx.states.view(namespace, serviceAccount, kind === 'stale-token' ? group : []);

  const tokens = group.map((r) => ({ r, live: false }));
  if (kind === 'stale-token') markLive(tokens, view, ctx.dataEnd, ctx.now);

  let rejectionAt: number | null = null;
  for (const t of tokens) {
    if (t.live && t.r.rejectionAt !== undefined && (rejectionAt === null || t.r.rejectionAt < rejectionAt)) {
      rejectionAt = t.r.rejectionAt;
    }
  }
  // No live token, but the subject's 401s from the same source came after a token's stale uses: that token is the one
  // being refused, and its rejection date is what the 401s mean (the token is not live because its pod is gone or its
  // uses stopped when the API server began refusing it). Keep the date of the latest such token.
  if (kind === 'stale-token' && rejectionAt === null && ctx.unauthorizedOfSubject.length > 0) {
    const first401 = Math.min(...ctx.unauthorizedOfSubject.map((r) => r.firstSeen));
    for (const { r } of tokens) {
      if (r.rejectionAt !== undefined && r.lastSeen <= first401 && (rejectionAt === null || r.rejectionAt > rejectionAt)) rejectionAt = r.rejectionAt;
    }
  }

  const severity = severityOf(kind, group, rejectionAt, view, ctx);
  const podNames = [...new Set(group.map((r) => r.pod).filter((p): p is string => p !== undefined))].sort();
  const missingPods = view.subject
    ? [...new Set(group.filter((r) => podKey(r) !== undefined && view.pods.get(podKey(r)!) === null).map((r) => r.pod ?? r.podUid!))].sort()
    : [];

  const causeRecords = kind === 'unauthorized' ? [...group, ...ctx.staleOfSubject] : group;
  const cause = classifyCause(
    {
      kind,
      records: causeRecords,
      now: ctx.now,
      dataEnd: ctx.dataEnd,
      ...(view.subject ? { state: view.subject } : {}),
      ...(kind === 'stale-token' ? { unauthorized: ctx.unauthorizedOfSubject } : {}),
    },
    ctx.catalog,
  );
  const workloads = workloadsOf(group, view);
  const scheduled = scheduledWorkloadNote(workloads);
  if (scheduled) cause.evidence.push(scheduled);
  if (ctx.attribution?.basis === 'address-only' && kind === 'unauthorized') cause.evidence.push(ctx.attribution.text);

  const maxSaw = group.reduce<number | null>(
    (m, r) => (r.maxSecondsAfterWarning === undefined ? m : Math.max(m ?? 0, r.maxSecondsAfterWarning)),
    null,
  );
  const finding: Finding = {
    id: findingId(cluster, namespace, serviceAccount, kind),
    cluster,
    namespace,
    serviceAccount,
    kind,
    severity,
    requests: group.reduce((n, r) => n + r.requests, 0),
    firstSeen: iso(group.reduce((m, r) => Math.min(m, r.firstSeen), Infinity)),
    lastSeen: iso(group.reduce((m, r) => Math.max(m, r.lastSeen), -Infinity)),
    maxSecondsAfterWarning: maxSaw,
    rejectionAt: rejectionAt === null ? null : iso(rejectionAt),
    tokens: tokens.map((t) => findingToken(t.r)).sort(compareTokens),
    pods: podNames,
    workloads,
    userAgents: listed(group.flatMap((r) => r.userAgents)),
    sourceIPs: listed(group.flatMap((r) => r.sourceIPs)),
    cause,
  };
  if (missingPods.length > 0) finding.missingPods = missingPods;
  const forwarded = listed(group.flatMap((r) => r.forwardedIPs ?? []));
  if (forwarded.length > 0) finding.forwardedIPs = forwarded;
  if (kind === 'unauthorized' && ctx.attribution && namespace !== UNATTRIBUTED) finding.attribution = { ...ctx.attribution };
  if (view.note !== undefined) finding.clusterState = view.note;
  return finding;
}

/**
 * Marks the live tokens of a stale-token finding (see {@link buildFindings}). A token whose pod is known to be gone
 * at the reference time `now` is never live: deleting a pod invalidates its bound tokens. A pod is known gone when it
 * is absent from cluster state and its successor (`successorPod`: the pod of the same name, e.g. a StatefulSet pod,
 * else a newer pod of the same Deployment/DaemonSet) started at or before `now`, or when the state source reads the cluster as it is now ({@link ClusterStateSource.readsCurrentState}).
 */
function markLive(tokens: { r: TokenRecord; live: boolean }[], view: StateView, dataEnd: number, now: number): void {
  const newest = new Map<string, TokenRecord>();
  for (const { r } of tokens) {
    const k = podKey(r) ?? '';
    const cur = newest.get(k);
    if (!cur || (r.warnAfter ?? -Infinity) > (cur.warnAfter ?? -Infinity)) newest.set(k, r);
  }
  for (const t of tokens) {
    const recent = t.r.lastSeen >= dataEnd - LIVE_USE_WINDOW_MS;
    const isNewest = newest.get(podKey(t.r) ?? '') === t.r;
    const podExists = view.subject ? (podKey(t.r) !== undefined && !!view.pods.get(podKey(t.r)!)) : true;
    t.live = (recent || (isNewest && podExists)) && !podGoneAt(t.r, view, now);
  }
}

/** Whether the token's pod is known to be gone at `now` (see {@link markLive}). */
function podGoneAt(r: TokenRecord, view: StateView, now: number): boolean {
  const k = podKey(r);
  if (!view.subject || k === undefined || view.pods.get(k) !== null) return false;
  if (view.current) return true;
  const successor = successorPod(r, view.subject.pods);
  return successor?.startTime !== undefined && successor.startTime <= now;
}

function severityOf(
  kind: FindingKind,
  group: TokenRecord[],
  rejectionAt: number | null,
  view: StateView,
  ctx: OneContext,
): Severity {
  if (ctx.has401) return 'critical';
  if (kind === 'unauthorized') return 'warning'; // unattributed: attributed 401s set has401
  if (kind === 'legacy-token') {
    const invalidated = group.some((r) => {
      if (r.legacySecret?.kind === 'invalidated') return true;
      const s = r.legacySecret;
      const ns = s?.namespace ?? r.namespace;
      return !!s && !!view.subject?.legacySecrets.some((x) => x.name === s.name && x.namespace === ns && x.invalidSince);
    });
    return invalidated ? 'warning' : 'info';
  }
  if (rejectionAt === null) return 'info';
  const left = rejectionAt - ctx.now;
  if (left < ctx.thresholds.criticalSeconds * 1000) return 'critical';
  if (left < ctx.thresholds.warningSeconds * 1000) return 'warning';
  return 'info';
}

function workloadsOf(group: TokenRecord[], view: StateView): WorkloadRef[] {
  if (!view.subject) return [];
  const refs = new Map<string, WorkloadRef>();
  const add = (w: WorkloadRef, owner?: WorkloadRef) => {
    const ref: WorkloadRef = { kind: w.kind, namespace: w.namespace, name: w.name };
    if (owner) ref.owner = { kind: owner.kind, namespace: owner.namespace, name: owner.name };
    refs.set(`${w.kind}/${w.namespace}/${w.name}`, ref);
  };
  for (const r of group) {
    const k = podKey(r);
    const pod = k !== undefined ? view.pods.get(k) : undefined;
    if (!pod) continue;
    const near = nearestWorkload(pod.ownerChain);
    if (near) add(near.workload, near.owner);
    else add({ kind: 'Pod', namespace: pod.namespace, name: pod.name });
  }
  if (refs.size === 0) for (const w of view.subject.workloads) add(w, w.owner);
  return [...refs.values()].sort((a, b) => cmp(`${a.kind}/${a.namespace}/${a.name}`, `${b.kind}/${b.namespace}/${b.name}`));
}

/** What a finding whose pods a CronJob (or a bare Job) runs should say: no restart, the next run gets a fresh token. */
function scheduledWorkloadNote(workloads: WorkloadRef[]): string | undefined {
  const scheduled = workloads.filter((w) => w.kind === 'CronJob' || w.kind === 'Job');
  if (scheduled.length === 0) return undefined;
  const names = scheduled.map((w) => objectLabel(w)).join(', ');
  return `${names} runs these pods: there is nothing to restart, each run's pod gets a fresh token, so the next run is clean (a run that lasts longer than an hour must still re-read its token file)`;
}

/** Reads each ServiceAccount's state once and resolves token pods (describe, then `getPod`). */
class StateCache {
  private readonly subjects = new Map<string, Promise<SubjectState>>();

  constructor(private readonly source: ClusterStateSource | undefined) {}

  async view(namespace: string, serviceAccount: string, staleRecords: TokenRecord[]): Promise<StateView> {
    const pods = new Map<string, PodInfo | null>();
    if (namespace === UNATTRIBUTED) return { pods };
    if (!this.source) return { note: STATE_NOT_PROVIDED, pods };
    const state = await this.subject(namespace, serviceAccount);
    if (!state.available) return { note: state.error ?? 'cluster state unavailable', pods };

    for (const r of staleRecords) {
      const k = podKey(r);
      if (k === undefined || pods.has(k)) continue;
      const found = state.pods.find((p) => sameTokenPod(r, p));
      if (found) {
        pods.set(k, found);
        continue;
      }
      let pod: PodInfo | undefined;
      if (r.pod !== undefined) {
        try {
          pod = await this.source.getPod(namespace, r.pod);
        } catch {
          continue; // unknown, not gone: a failed read must not make its tokens dead
        }
      }
      pods.set(k, pod && sameTokenPod(r, pod) ? pod : null);
    }
    const view: StateView = { subject: state, pods };
    if (this.source.readsCurrentState === true) view.current = true;
    if (!state.serviceAccount && state.pods.length === 0) {
      view.note = `ServiceAccount ${namespace}/${serviceAccount} not found in cluster state`;
    } else if (state.error) {
      view.note = state.error;
    }
    return view;
  }

  private subject(namespace: string, name: string): Promise<SubjectState> {
    const key = `${namespace}\0${name}`;
    let p = this.subjects.get(key);
    if (!p) {
      p = this.source!.describeServiceAccount(namespace, name).catch(
        (e: unknown): SubjectState => ({
          available: false,
          error: `cluster state unavailable: ${e instanceof Error ? e.message : String(e)}`,
          pods: [],
          workloads: [],
          legacySecrets: [],
        }),
      );
      this.subjects.set(key, p);
    }
    return p;
  }
}

/**
 * Gives legacy-token records whose audit events named only the Secret (`authentication.k8s.io/legacy-token-invalidated:
 * <secret>/<namespace>`, Kubernetes 1.29+: the request is rejected and carries no user) their ServiceAccount, so each
 * ServiceAccount gets its own finding instead of one `(not a ServiceAccount)` finding for all:
 * - from cluster state ({@link ClusterStateSource.legacySecretOwner}: the ServiceAccount whose `.secrets[]` lists the
 *   Secret, or the Secret's `kubernetes.io/service-account.name` annotation);
 * - else from the auto-generated Secret name `<serviceAccount>-token-<xxxxx>` (kubernetes `tokens_controller.go`),
 *   said to be inferred and unconfirmed;
 * - else the Secret's namespace with ServiceAccount `(secret <name>)` (Kubernetes names cannot contain parentheses).
 * Returns new records; the input is not changed. The attribution is kept in `attribution` (shown as evidence).
 */
async function resolveLegacySecretOwners(records: TokenRecord[], state: ClusterStateSource | undefined): Promise<TokenRecord[]> {
  const cache = new Map<string, Promise<{ serviceAccount: string; via: string } | undefined>>();
  const out: TokenRecord[] = [];
  for (const r of records) {
    const s = r.legacySecret;
    if (r.kind !== 'legacy-token' || r.namespace !== NOT_A_SERVICE_ACCOUNT || !s?.namespace) {
      out.push(r);
      continue;
    }
    const ns = s.namespace;
    const key = `${ns}/${s.name}`;
    let p = cache.get(key);
    if (!p) {
      p = state?.legacySecretOwner
        ? state.legacySecretOwner(ns, s.name).catch(() => undefined)
        : Promise.resolve(undefined);
      cache.set(key, p);
    }
    const owner = await p;
    const guess = AUTOGENERATED_SECRET.exec(s.name)?.[1];
    const c: TokenRecord = { ...r, legacySecret: { ...s }, userAgents: [...r.userAgents], sourceIPs: [...r.sourceIPs], hourly: { ...r.hourly } };
    c.namespace = ns;
    if (owner) {
      c.serviceAccount = owner.serviceAccount;
      c.attribution = `ServiceAccount ${ns}/${owner.serviceAccount} owns Secret ${s.name}: ${owner.via}`;
    } else if (guess !== undefined) {
      c.serviceAccount = guess;
      c.attribution = `ServiceAccount ${ns}/${guess} inferred from the Secret name ${s.name} (auto-generated legacy token Secrets are named <serviceaccount>-token-<5 characters>); not confirmed: ${state ? 'no ServiceAccount in cluster state lists the Secret' : 'no cluster state'}`;
    } else {
      c.serviceAccount = `(secret ${s.name})`;
      c.attribution = `the audit events name only Secret ${ns}/${s.name}; its ServiceAccount is unknown (${state ? 'not found in cluster state' : 'no cluster state'})`;
    }
    c.subject = `system:serviceaccount:${ns}:${c.serviceAccount}`;
    out.push(c);
  }
  return out;
}

/** At most this many candidate pods are named in an ambiguous source-IP attribution. */
const MAX_IP_CANDIDATES = 5;

/**
 * Attributes unattributed 401 records (ServiceAccount `(unattributed)`) by source IP when cluster state can list the
 * pods on an IP ({@link ClusterStateSource.podsByIP}). Every hostNetwork pod on a node reports the node's IP, so an IP
 * alone names no client: a record is attributed only when exactly one pod running on that IP by the record's last
 * use matches its user agent or a catalog entry ({@link podMatchesUserAgent}); the attribution then says it was made
 * by source IP. Otherwise the candidate pods are listed and the match is called ambiguous. Returns new records.
 */
async function attributeBySourceIP(
  records: TokenRecord[],
  state: ClusterStateSource | undefined,
  catalog: CauseCatalog,
): Promise<TokenRecord[]> {
  if (!state?.podsByIP) return records;
  const byIp = new Map<string, Promise<PodInfo[] | undefined>>();
  // The pods on the IP during the record's 401s: a live source with an IP history names the pod of that time.
  const podsOn = (ip: string, r: TokenRecord) => {
    const key = `${ip}\0${r.firstSeen}\0${r.lastSeen}`;
    let p = byIp.get(key);
    if (!p) {
      p = state.podsByIP!(ip, { from: r.firstSeen, to: r.lastSeen }).catch(() => undefined);
      byIp.set(key, p);
    }
    return p;
  };
  const out: TokenRecord[] = [];
  for (const r of records) {
    if (r.kind !== 'unauthorized' || r.namespace !== UNATTRIBUTED || r.sourceIPs.length === 0 || r.overflow) {
      out.push(r);
      continue;
    }
    const ua = r.userAgents[0];
    const candidates: PodInfo[] = [];
    let ip: string | undefined;
    for (const x of r.sourceIPs.slice(0, 3)) {
      const pods = (await podsOn(x, r)) ?? [];
      const running = pods.filter((p) => (p.phase === undefined || p.phase === 'Running') && (p.startTime === undefined || p.startTime <= r.lastSeen));
      if (running.length > 0) {
        ip = x;
        candidates.push(...running);
        break;
      }
    }
    if (ip === undefined || candidates.length === 0) {
      out.push(r);
      continue;
    }
    const matches = ua === undefined ? [] : candidates.map((p) => ({ p, why: podMatchesUserAgent(p, ua, catalog) })).filter((m) => m.why !== undefined);
    const c: TokenRecord = { ...r, userAgents: [...r.userAgents], sourceIPs: [...r.sourceIPs], hourly: { ...r.hourly } };
    const only = candidates.length === 1 ? candidates[0]! : undefined;
    if (only && only.hostNetwork !== true && only.startTime !== undefined && only.startTime <= r.firstSeen) {
      // A pod IP (not a node's) held by exactly one pod for the whole time of the 401s: whatever the user agent says
      // (`Java/17`, `OpenAPI-Generator/31.0.0/python`), the requests came from that pod.
      c.namespace = only.namespace;
      c.serviceAccount = only.serviceAccount;
      c.subject = `system:serviceaccount:${only.namespace}:${only.serviceAccount}`;
      c.pod = only.name;
      c.attribution = `inferred: attributed by source IP ${ip}, the pod IP of exactly one pod, ${only.namespace}/${only.name} (ServiceAccount ${only.serviceAccount}, not hostNetwork), running since ${iso(only.startTime)} through the 401s (${iso(r.firstSeen)} to ${iso(r.lastSeen)})${continuityNote(c, only, records)}`;
    } else if (matches.length === 1) {
      const { p, why } = matches[0]!;
      c.namespace = p.namespace;
      c.serviceAccount = p.serviceAccount;
      c.subject = `system:serviceaccount:${p.namespace}:${p.serviceAccount}`;
      c.pod = p.name;
      c.attribution = `inferred: ${IP_UA_ATTRIBUTION} (source IP ${ip}): of the ${candidates.length} pod${candidates.length === 1 ? '' : 's'} running on that IP, only ${p.namespace}/${p.name} (ServiceAccount ${p.serviceAccount}) matches user agent ${ua} (${why})`;
    } else {
      const names = candidates.map((p) => `${p.namespace}/${p.name}`).sort();
      const listed = `${names.slice(0, MAX_IP_CANDIDATES).join(', ')}${names.length > MAX_IP_CANDIDATES ? ` and ${names.length - MAX_IP_CANDIDATES} more` : ''}`;
      c.attribution = `${r.attribution ?? 'unattributed'}; ambiguous by source IP ${ip}: ${
        matches.length > 1 ? `${matches.length} pods there match user agent ${ua ?? '(none)'}` : `no pod there matches user agent ${ua ?? '(none)'}`
      }; candidate pods: ${listed}`;
    }
    out.push(c);
  }
  return out;
}

/**
 * Continuity across a pod replacement: when earlier pods of the same workload (pod names with the workload's name
 * plus `-` in front), running as the same ServiceAccount, made stale uses with the user agent of these 401s, say so —
 * the client that kept its token is still the one failing now. Empty when there is no such stale use.
 */
function continuityNote(r: TokenRecord, pod: PodInfo, records: readonly TokenRecord[]): string {
  const ua = r.userAgents[0];
  const w = nearestWorkload(pod.ownerChain)?.workload;
  if (ua === undefined || !w) return '';
  const earlier = records.filter(
    (s) => s.kind === 'stale-token' && s.subject === r.subject && s.pod !== undefined && s.pod !== pod.name && s.pod.startsWith(`${w.name}-`) && s.userAgents.includes(ua),
  );
  if (earlier.length === 0) return '';
  const pods = [...new Set(earlier.map((s) => s.pod!))].sort().slice(0, 3);
  return `; the same user agent ${ua} made stale uses from earlier pod${pods.length === 1 ? '' : 's'} ${pods.join(', ')} of ${objectLabel(w)}: the client that kept its token goes on failing after the pod was replaced`;
}

/** Auto-generated legacy token Secret name: `<serviceAccount>-token-<5 random chars>` (kubernetes `tokens_controller.go`). */
const AUTOGENERATED_SECRET = /^(.+)-token-[a-z0-9]{5}$/;

function findingToken(r: TokenRecord): FindingToken {
  return {
    pod: r.pod ?? null,
    podUid: r.podUid ?? null,
    node: r.node ?? null,
    warnAfter: r.warnAfter === undefined ? null : iso(r.warnAfter),
    rejectionAt: r.rejectionAt === undefined ? null : iso(r.rejectionAt),
    requests: r.requests,
    lastSeen: iso(r.lastSeen),
  };
}

function compareTokens(a: FindingToken, b: FindingToken): number {
  if (a.rejectionAt !== b.rejectionAt) {
    if (a.rejectionAt === null) return 1;
    if (b.rejectionAt === null) return -1;
    return cmp(a.rejectionAt, b.rejectionAt);
  }
  return cmp(a.pod ?? '', b.pod ?? '') || cmp(a.lastSeen, b.lastSeen);
}

function podKey(r: TokenRecord): string | undefined {
  return r.podUid ?? r.pod;
}

function subjectKey(r: TokenRecord): string {
  return `${r.cluster}\0${r.namespace}\0${r.serviceAccount}`;
}

function listed(values: string[]): string[] {
  return [...new Set(values)].sort().slice(0, MAX_LISTED_VALUES);
}

function iso(t: number): string {
  return new Date(t).toISOString();
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
