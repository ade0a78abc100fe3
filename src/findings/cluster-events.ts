/**
 * Cluster-level credential events: many ServiceAccounts whose requests start failing with 401 in the same minute, across
 * unrelated workloads, is not many clients caching tokens — it is the cluster refusing every token at once, after its
 * service-account signing key rotated or its issuer changed (clastix/kamaji#1325,
 * https://github.com/clastix/kamaji/issues/1325). Pods recover on their own as the kubelet fetches new tokens.
 *
 * Such an event is reported once per cluster (the `clusterEvents` key of the `scan` JSON, additive), and the 401
 * findings of the ServiceAccounts that recovered get cause `unknown` with the event as evidence instead of "the client
 * caches its token", at `warning`. A ServiceAccount that keeps failing after the others recovered keeps its own
 * analysis. Pure: no I/O.
 */
import { MINUTE_MS } from '../core/units.js';
import { UNATTRIBUTED } from './aggregate.js';
import type { Finding } from './types.js';

/** At least this many ServiceAccounts … */
export const CREDENTIAL_EVENT_MIN_SOURCES = 5;
/** … in at least this many namespaces (unrelated workloads) … */
const MIN_NAMESPACES = 2;
/** … whose first 401 lies within this window make a credential event. */
const ONSET_WINDOW_MS = MINUTE_MS;
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
  /** ServiceAccounts whose first 401 lies in the onset minute. */
  serviceAccounts: number;
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
 * `unauthorized` finding's first 401 falls within one minute, when it has at least
 * {@link CREDENTIAL_EVENT_MIN_SOURCES} of them in at least two namespaces. At most one event per cluster. Unattributed
 * 401s are not counted (they name no workload).
 */
export function detectCredentialEvents(findings: readonly Finding[]): ClusterEvent[] {
  const byCluster = new Map<string, Source[]>();
  for (const f of findings) {
    if (f.kind !== 'unauthorized' || f.namespace === UNATTRIBUTED) continue;
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
    if (best.length < CREDENTIAL_EVENT_MIN_SOURCES || namespaces.size < MIN_NAMESPACES) continue;
    const onset = best[0]!.first;
    const isRecovered = (s: Source) => s.last <= onset + RECOVERY_MS;
    const recoveredEnd = best.filter(isRecovered).reduce((t, s) => Math.max(t, s.last), onset);
    const recovered = best.filter(isRecovered).map((s) => s.serviceAccount).sort();
    const stillFailing = best.filter((s) => !isRecovered(s) && s.last > recoveredEnd).map((s) => s.serviceAccount).sort();
    const at = new Date(onset).toISOString();
    events.push({
      kind: 'credential-change',
      cluster,
      at,
      summary: `${best.length} ServiceAccounts in ${namespaces.size} namespaces started getting 401 within one minute at ${at}: the cluster refused tokens across unrelated workloads at once, as when its service-account signing key rotates or its issuer changes, not clients that cache tokens${stillFailing.length > 0 ? `; still failing after the others recovered: ${stillFailing.join(', ')}` : ''}`,
      serviceAccounts: best.length,
      recovered,
      stillFailing,
    });
  }
  return events;
}

/** The cause summary {@link applyCredentialEvents} gives the 401 findings of recovered ServiceAccounts. */
const EVENT_CAUSE_SUMMARY =
  'These 401s are part of a cluster-level event: many ServiceAccounts were refused at once and recovered on their own, as when the service-account signing key rotates or the issuer changes. Nothing points at this client.';

/**
 * Whether `f` is the 401 finding of a ServiceAccount that recovered from a cluster-level credential event (as
 * {@link applyCredentialEvents} marks it): nothing of this client to restart.
 */
export function isCredentialEventFinding(f: Pick<Finding, 'kind' | 'cause'>): boolean {
  return f.kind === 'unauthorized' && f.cause.id === 'unknown' && f.cause.summary === EVENT_CAUSE_SUMMARY;
}

/**
 * The findings with the events applied: each `unauthorized` finding of a ServiceAccount that recovered gets cause
 * `unknown` (no component, no "caches its token"), the event as evidence, and severity `warning`. Other findings are
 * returned as they are. Returns new finding objects for the changed ones.
 */
export function applyCredentialEvents(findings: readonly Finding[], events: readonly ClusterEvent[]): Finding[] {
  if (events.length === 0) return [...findings];
  return findings.map((f) => {
    const e = events.find((x) => x.cluster === f.cluster && x.recovered.includes(`${f.namespace}/${f.serviceAccount}`));
    if (!e || f.kind !== 'unauthorized') return f;
    return {
      ...f,
      severity: 'warning',
      cause: {
        id: 'unknown',
        component: null,
        summary: EVENT_CAUSE_SUMMARY,
        fix: 'Nothing to restart for this client: check the API server’s --service-account-key-file / --service-account-signing-key-file and --service-account-issuer changes at that time, and that every API server has the new public key. If this ServiceAccount fails again later, it is analysed on its own.',
        evidence: [e.summary, `this ServiceAccount's 401s stopped within ${RECOVERY_MS / MINUTE_MS} minutes of the event's onset`, ...f.cause.evidence.filter((x) => x.startsWith('inferred:'))],
        sources: ['https://github.com/clastix/kamaji/issues/1325', 'https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/'],
      },
    };
  });
}
