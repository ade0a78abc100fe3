/**
 * Cluster-level credential events: many ServiceAccounts whose requests start failing with 401 within minutes of each
 * other, none of which presented a stale token before, is not many clients caching tokens — it is the API server
 * refusing valid-looking tokens: its service-account signing key rotated or its issuer changed (clastix/kamaji#1325,
 * https://github.com/clastix/kamaji/issues/1325), API servers disagree on the key (k3s HA servers with different
 * keys), or a control-plane node's clock is skewed (kubernetes/kubernetes#124022). Real events start over about a
 * minute and may never stop.
 *
 * Rule: at least {@link CREDENTIAL_EVENT_MIN_SOURCES} (5) ServiceAccounts, in any namespaces, whose first 401s fall
 * within {@link ONSET_WINDOW_MS} (5 minutes), none with a stale-token use in the {@link STALE_LOOKBACK_MS} (24 h)
 * before its first 401 of a token due for rejection by then (ServiceAccounts that reach day 90 together — all pods
 * restarted by one node upgrade 90 days earlier — show such stale uses first and keep their client causes). The 401s need not stop. Their ServiceAccounts are the
 * attributed 401 findings (the same address rule as every other 401 attribution, `aggregate.ts`).
 *
 * Such an event is reported once per cluster (the `clusterEvents` key of the `scan` JSON, additive) and as one
 * critical finding of kind `cluster-credential` (namespace and ServiceAccount `*`, no workloads: no Restart button);
 * the 401 findings of its ServiceAccounts get cause `unknown` with the event as evidence instead of "the client caches
 * its token", at `warning`. When some of them recovered (401s stopped within 15 minutes), one that keeps failing after
 * the others recovered keeps its own analysis. Pure: no I/O.
 */
import { findingId } from './build.js';
import { HOUR_MS, MINUTE_MS } from '../core/units.js';
import { UNATTRIBUTED } from './aggregate.js';
import type { Finding } from './types.js';

/** At least this many ServiceAccounts … */
export const CREDENTIAL_EVENT_MIN_SOURCES = 5;
/** … whose first 401 lies within this window … */
export const ONSET_WINDOW_MS = 5 * MINUTE_MS;
/** … and none of which presented a stale token in this long before its first 401, make a credential event. */
export const STALE_LOOKBACK_MS = 24 * HOUR_MS;
/**
 * A stale use counts against the event only when its token was due for rejection by the ServiceAccount's first 401
 * (plus this much: `warnAfter` is known to the minute and the limit's end to the hour): a token hours into its 90 days
 * cannot explain a 401, and its use is what attributes the 401s to the ServiceAccount (`aggregate.ts`).
 */
const REJECTION_TOLERANCE_MS = HOUR_MS;
/** A source recovered when its last 401 is within this long of the event's onset. */
export const RECOVERY_MS = 15 * MINUTE_MS;

/** One cluster-level credential event (contract, additive: the `clusterEvents[]` entries of the `scan` JSON). */
export interface ClusterEvent {
  kind: 'credential-change';
  cluster: string;
  /** Onset: the first 401 of the event, ISO-8601 UTC. */
  at: string;
  /** One line for people. */
  summary: string;
  /** ServiceAccounts whose first 401 lies in the onset window. */
  serviceAccounts: number;
  /** Additive: the ServiceAccounts (`namespace/name`) whose 401s the event explains (all but `stillFailing`). */
  members?: string[];
  /** Additive: id of the event's `cluster-credential` finding. */
  findingId?: string;
  /** ServiceAccounts (`namespace/name`) among them that recovered (401s stopped within 15 minutes). */
  recovered: string[];
  /** ServiceAccounts among them still failing after the others recovered: analysed on their own. */
  stillFailing: string[];
}

interface Source {
  serviceAccount: string;
  namespace: string;
  first: number;
  last: number;
}

/**
 * The credential events of the findings (one scan or poll): per cluster, the largest set of ServiceAccounts whose
 * `unauthorized` finding's first 401 falls within {@link ONSET_WINDOW_MS} and that have no stale-token use in the
 * {@link STALE_LOOKBACK_MS} before it, when it has at least {@link CREDENTIAL_EVENT_MIN_SOURCES} of them. At most one
 * event per cluster. Unattributed 401s are not counted (they name no workload).
 */
export function detectCredentialEvents(findings: readonly Finding[]): ClusterEvent[] {
  const byCluster = new Map<string, Source[]>();
  const staleOf = new Map<string, Finding[]>();
  for (const f of findings) {
    if (f.kind !== 'stale-token') continue;
    const k = `${f.cluster}/${f.namespace}/${f.serviceAccount}`;
    staleOf.set(k, [...(staleOf.get(k) ?? []), f]);
  }
  for (const f of findings) {
    if (f.kind !== 'unauthorized' || f.namespace === UNATTRIBUTED) continue;
    // A client that presented a stale token until shortly before its 401s, a token due for rejection by then, is
    // reaching its own token's limit (day 90 on EKS): its 401s are its own.
    const first = Date.parse(f.firstSeen);
    const ownLimit = (staleOf.get(`${f.cluster}/${f.namespace}/${f.serviceAccount}`) ?? []).some(
      (s) => Date.parse(s.lastSeen) >= first - STALE_LOOKBACK_MS && s.rejectionAt !== null && Date.parse(s.rejectionAt) <= first + REJECTION_TOLERANCE_MS,
    );
    if (ownLimit) continue;
    let list = byCluster.get(f.cluster);
    if (!list) byCluster.set(f.cluster, (list = []));
    list.push({ serviceAccount: `${f.namespace}/${f.serviceAccount}`, namespace: f.namespace, first: Date.parse(f.firstSeen), last: Date.parse(f.lastSeen) });
  }
  const events: ClusterEvent[] = [];
  for (const [cluster, list] of byCluster) {
    const sources = list.sort((a, b) => a.first - b.first);
    let best: Source[] = [];
    for (let i = 0, j = 0; i < sources.length; i++) {
      while (sources[i]!.first - sources[j]!.first > ONSET_WINDOW_MS) j++;
      if (i - j + 1 > best.length) best = sources.slice(j, i + 1);
    }
    const namespaces = new Set(best.map((s) => s.namespace));
    if (best.length < CREDENTIAL_EVENT_MIN_SOURCES) continue;
    const onset = best[0]!.first;
    const isRecovered = (s: Source) => s.last <= onset + RECOVERY_MS;
    const recoveredEnd = best.filter(isRecovered).reduce((t, s) => Math.max(t, s.last), onset);
    const recovered = best.filter(isRecovered).map((s) => s.serviceAccount).sort();
    // "Still failing after the others recovered" needs others that recovered: with none, the 401s simply go on.
    const stillFailing = recovered.length === 0 ? [] : best.filter((s) => !isRecovered(s) && s.last > recoveredEnd).map((s) => s.serviceAccount).sort();
    const members = best.map((s) => s.serviceAccount).filter((sa) => !stillFailing.includes(sa)).sort();
    const at = new Date(onset).toISOString();
    const spread = Math.max(1, Math.ceil((best[best.length - 1]!.first - onset) / MINUTE_MS));
    events.push({
      kind: 'credential-change',
      cluster,
      at,
      summary: `${best.length} ServiceAccounts in ${namespaces.size} namespace${namespaces.size === 1 ? '' : 's'} started getting 401 within ${spread} minute${spread === 1 ? '' : 's'} at ${at}, none after stale token use: the API server refused valid-looking tokens across workloads at once, as when its service-account signing key rotates or its issuer changes, API servers disagree on the key, or a control-plane clock is skewed — not clients that cache tokens${stillFailing.length > 0 ? `; still failing after the others recovered: ${stillFailing.join(', ')}` : ''}`,
      serviceAccounts: best.length,
      recovered,
      stillFailing,
      members,
      findingId: clusterFindingId(cluster),
    });
  }
  return events;
}

/** The cause summary {@link applyCredentialEvents} gives the 401 findings of the event's ServiceAccounts. */
const EVENT_CAUSE_SUMMARY =
  'These 401s are part of a cluster-level event: many ServiceAccounts were refused at once without stale token use before, as when the service-account signing key changes, API servers disagree on it or a control-plane clock is skewed. Nothing points at this client.';

/** Namespace and ServiceAccount of the cluster-level finding. */
export const CLUSTER_WIDE = '*';

/** Id of the `cluster-credential` finding of `cluster`: {@link findingId} with {@link CLUSTER_WIDE} for its subject. */
function clusterFindingId(cluster: string): string {
  return findingId(cluster, CLUSTER_WIDE, CLUSTER_WIDE, 'cluster-credential');
}

const FIX =
  'Nothing to restart for these clients: check the API server’s --service-account-key-file / --service-account-signing-key-file and --service-account-issuer changes at that time, that every API server has the same keys (HA servers that disagree refuse each other’s tokens), and the control-plane nodes’ clocks (NTP).';

/** The one critical `cluster-credential` finding of event `e`, from the 401 findings of its members. */
function clusterFinding(e: ClusterEvent, findings: readonly Finding[]): Finding {
  const members = findings.filter((f) => f.kind === 'unauthorized' && f.cluster === e.cluster && (e.members ?? e.recovered).includes(`${f.namespace}/${f.serviceAccount}`));
  const uniq = (xs: string[]) => [...new Set(xs)].sort();
  // ISO-8601 UTC strings of one format order as their times do.
  const times = [e.at, ...members.flatMap((f) => [f.firstSeen, f.lastSeen])].sort();
  const first = times[0]!;
  const last = times[times.length - 1]!;
  return {
    id: e.findingId ?? clusterFindingId(e.cluster),
    cluster: e.cluster,
    namespace: CLUSTER_WIDE,
    serviceAccount: CLUSTER_WIDE,
    kind: 'cluster-credential',
    severity: 'critical',
    requests: members.reduce((n, f) => n + f.requests, 0),
    firstSeen: first,
    lastSeen: last,
    maxSecondsAfterWarning: null,
    rejectionAt: null,
    tokens: [],
    pods: [],
    workloads: [],
    userAgents: uniq(members.flatMap((f) => f.userAgents)),
    sourceIPs: uniq(members.flatMap((f) => f.sourceIPs)),
    cause: {
      id: 'cluster-credential-change',
      component: null,
      summary: `API server refused valid-looking tokens from ${e.serviceAccounts} ServiceAccounts: signing key changed / servers disagree / clock skew`,
      fix: FIX,
      evidence: [
        e.summary,
        `ServiceAccounts: ${(e.members ?? e.recovered).join(', ')}`,
        'inferred: 401 events name no user; each was attributed to its ServiceAccount by source address and user agent',
      ],
      sources: ['https://github.com/clastix/kamaji/issues/1325', 'https://github.com/kubernetes/kubernetes/issues/124022', 'https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/'],
    },
  };
}

/**
 * Whether `f` is the 401 finding of a ServiceAccount that recovered from a cluster-level credential event (as
 * {@link applyCredentialEvents} marks it): nothing of this client to restart.
 */
export function isCredentialEventFinding(f: Pick<Finding, 'kind' | 'cause'>): boolean {
  return f.kind === 'unauthorized' && f.cause.id === 'unknown' && f.cause.summary === EVENT_CAUSE_SUMMARY;
}

/**
 * The findings with the events applied: each `unauthorized` finding of a ServiceAccount of an event (its `members`)
 * gets cause `unknown` (no component, no "caches its token"), the event as evidence, and severity `warning`; each event
 * adds its one critical `cluster-credential` finding. Other findings are returned as they are. Returns new finding
 * objects for the changed ones.
 */
export function applyCredentialEvents(findings: readonly Finding[], events: readonly ClusterEvent[]): Finding[] {
  if (events.length === 0) return [...findings];
  const out = findings.map((f): Finding => {
    const e = events.find((x) => x.cluster === f.cluster && (x.members ?? x.recovered).includes(`${f.namespace}/${f.serviceAccount}`));
    if (!e || f.kind !== 'unauthorized') return f;
    return {
      ...f,
      severity: 'warning',
      cause: {
        id: 'unknown',
        component: null,
        summary: EVENT_CAUSE_SUMMARY,
        fix: `${FIX} If this ServiceAccount fails again later, it is analysed on its own.`,
        evidence: [
          e.summary,
          e.recovered.includes(`${f.namespace}/${f.serviceAccount}`)
            ? `this ServiceAccount's 401s stopped within ${RECOVERY_MS / MINUTE_MS} minutes of the event's onset`
            : 'this ServiceAccount had no stale token use before its 401s began with the others',
          ...f.cause.evidence.filter((x) => x.startsWith('inferred:')),
        ],
        sources: ['https://github.com/clastix/kamaji/issues/1325', 'https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/'],
      },
    };
  });
  for (const e of events) out.push(clusterFinding(e, findings));
  return out;
}

/**
 * Adds to each `cluster-credential` finding the evidence that event times were left out as inconsistent in the same
 * input or poll (`clock-skew.ts`): a control-plane clock off by days refuses tokens as "not yet valid" or "expired",
 * so a skewed clock is the likely cause among the three. `skew` is the one-line description of what was left out.
 * Returns new finding objects for the changed ones.
 */
export function noteClockSkew(findings: readonly Finding[], skew: string | undefined): Finding[] {
  if (skew === undefined) return [...findings];
  return findings.map((f) =>
    f.kind === 'cluster-credential'
      ? { ...f, cause: { ...f.cause, evidence: [...f.cause.evidence, `audit timestamps inconsistent in the same data: ${skew} — a control-plane clock off by that much refuses valid tokens: check NTP on the control-plane nodes`] } }
      : f,
  );
}
