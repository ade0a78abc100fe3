/**
 * Which node-probe reports `serve` believes. The probe's Role can create and update every ConfigMap in its namespace
 * (RBAC `resourceNames` cannot restrict `create`), so the ConfigMap itself proves nothing; a report is accepted only
 * when all of these hold (docs/install.md, "Node probe: what serve checks"):
 *
 * 1. **The writer is the probe on the node the report names.** The report carries a `proof`: the probe pod's
 *    projected ServiceAccount token for the audience {@link PROBE_AUDIENCE}, which the kubelet requests for that pod
 *    only (https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/#bound-service-account-tokens).
 *    `serve` asks the API server about it (TokenReview with that audience,
 *    https://kubernetes.io/docs/reference/kubernetes-api/authentication-resources/token-review-v1/): it must
 *    authenticate as `system:serviceaccount:<probe namespace>:tokenwatch-probe`, and the node it names must be the
 *    report's node. The node comes from the user extra `authentication.kubernetes.io/node-name` (Kubernetes ≥ 1.30,
 *    feature `ServiceAccountTokenPodNodeInfo`), and is in every case checked against the live pod named by
 *    `authentication.kubernetes.io/pod-name`/`pod-uid`: it must exist with that uid and run on that node. Clusters
 *    without the node-name extra are covered by this pod check alone.
 * 2. **The ConfigMap is the node's**: its name is `tokenwatch-probe-<node>` ({@link probeObjectName}).
 * 3. **Names are Kubernetes names**: node and pod names DNS-1123 subdomains, namespaces DNS-1123 labels,
 *    ServiceAccount names DNS-1123 subdomains (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/).
 *    An entry with another name is dropped.
 * 4. **Claims match the live cluster**: the ServiceAccount exists (with the claimed uid, when the token names one);
 *    the token's node claim, when present, is the report's node; and the pod the token was bound to, when it still
 *    exists, has the claimed uid and runs on the report's node. A token of a pod that no longer exists is kept: that
 *    is what a file not rewritten after a restart holds (the API server already rejects such a token).
 * 5. **Caps**: at most {@link MAX_REPORT_ENTRIES} token entries per report; the rest are dropped and counted.
 *
 * Everything dropped is counted through `onDrop` (metric `tokenwatch_probe_dropped_total{what,reason}`).
 */
import type { ProbeEntry, ProbeReport } from './host.js';
import { isDns1123Label, isDns1123Subdomain } from '../core/names.js';

/** `tokenwatch-probe-<node>`, lower-cased and cut to the 253-character object-name limit. */
export function probeObjectName(node: string): string {
  return `tokenwatch-probe-${node.toLowerCase()}`.slice(0, 253).replace(/[^a-z0-9]+$/, '');
}

/** Audience of the probe's proof token (projected volume in manifests/probe/daemonset.yaml). */
export const PROBE_AUDIENCE = 'tokenwatch-probe';
/** Name of the probe's ServiceAccount (manifests/probe/serviceaccount.yaml). */
export const PROBE_SERVICE_ACCOUNT = 'tokenwatch-probe';
/** ConfigMap key holding the proof token. */
export const PROOF_KEY = 'proof';
/** Token entries kept per report; a node has a handful of CNI kubeconfigs. */
export const MAX_REPORT_ENTRIES = 64;
/** Largest `report.json` read, chars (64 entries are ~40 KiB). */
export const MAX_REPORT_CHARS = 256 * 1024;

/** Why a report or an entry was not believed. */
export type DropReason =
  | 'too-large'
  | 'unparseable'
  | 'no-proof'
  | 'proof-rejected'
  | 'wrong-identity'
  | 'wrong-node'
  | 'name-mismatch'
  | 'invalid-name'
  | 'probe-pod-not-on-node'
  | 'review-failed'
  | 'unknown-serviceaccount'
  | 'pod-not-on-node'
  | 'over-cap';

/** Counts what was dropped: a whole report, or entries of a believed one. */
export type DropCounter = (what: 'report' | 'entry', reason: DropReason, count: number) => void;

/** The identity the API server vouches for (TokenReview `status`). */
export interface ReviewedIdentity {
  authenticated: boolean;
  username?: string;
  audiences?: string[];
  extra?: Record<string, string[]>;
}

/** A live pod, as far as these checks need it. */
export interface LivePod {
  uid: string;
  nodeName: string | undefined;
}

/** Live reads the checks need (the Kubernetes API in serve, a fake in tests). */
export interface ProbeClusterView {
  /** TokenReview of `token` for {@link PROBE_AUDIENCE}. @throws on API errors */
  review(token: string): Promise<ReviewedIdentity>;
  /** The pod, or undefined when it does not exist. @throws on API errors other than 404 */
  pod(namespace: string, name: string): Promise<LivePod | undefined>;
  /** The ServiceAccount's uid, or undefined when it does not exist. @throws on API errors other than 404 */
  serviceAccountUid(namespace: string, name: string): Promise<string | undefined>;
}

/** A probe ConfigMap as listed. */
export interface ProbeConfigMap {
  name: string;
  data: Record<string, string>;
}

const first = (extra: Record<string, string[]> | undefined, key: string): string | undefined => {
  const v = extra?.[key];
  return Array.isArray(v) && typeof v[0] === 'string' ? v[0] : undefined;
};

function parseReport(raw: string): ProbeReport | undefined {
  try {
    const r = JSON.parse(raw) as ProbeReport;
    return r && typeof r === 'object' && r.version === 1 && typeof r.node === 'string' && Array.isArray(r.entries) ? r : undefined;
  } catch {
    return undefined;
  }
}

/** Whether the entry's names are Kubernetes names (token entries; other entries carry no names). */
function namesValid(e: ProbeEntry): boolean {
  if (e.status !== 'token') return true;
  if (!isDns1123Label(e.namespace) || !isDns1123Subdomain(e.serviceAccount)) return false;
  if (e.pod != null && !isDns1123Subdomain(e.pod)) return false;
  if (e.node != null && !isDns1123Subdomain(e.node)) return false;
  if (e.secretName != null && !isDns1123Subdomain(e.secretName)) return false;
  return true;
}

/**
 * The reports to believe, checked as the module docstring says. `probeNamespace` is where the probe runs (its
 * ServiceAccount's namespace). Never throws for a report: an API error while checking one drops it
 * (`review-failed`); the others go on.
 */
export async function verifiedReports(cms: readonly ProbeConfigMap[], probeNamespace: string, view: ProbeClusterView, onDrop: DropCounter = () => undefined): Promise<ProbeReport[]> {
  const out: ProbeReport[] = [];
  const username = `system:serviceaccount:${probeNamespace}:${PROBE_SERVICE_ACCOUNT}`;
  const saUids = new Map<string, Promise<string | undefined>>();
  for (const cm of cms) {
    const raw = cm.data['report.json'];
    if (raw === undefined) continue; // not a report
    if (raw.length > MAX_REPORT_CHARS) {
      onDrop('report', 'too-large', 1);
      continue;
    }
    const report = parseReport(raw);
    if (!report) {
      onDrop('report', 'unparseable', 1);
      continue;
    }
    if (!isDns1123Subdomain(report.node)) {
      onDrop('report', 'invalid-name', 1);
      continue;
    }
    if (cm.name !== probeObjectName(report.node)) {
      onDrop('report', 'name-mismatch', 1);
      continue;
    }
    const proof = cm.data[PROOF_KEY];
    if (!proof) {
      onDrop('report', 'no-proof', 1);
      continue;
    }
    try {
      const who = await view.review(proof.trim());
      if (!who.authenticated || !(who.audiences ?? [PROBE_AUDIENCE]).includes(PROBE_AUDIENCE)) {
        onDrop('report', 'proof-rejected', 1);
        continue;
      }
      if (who.username !== username) {
        onDrop('report', 'wrong-identity', 1);
        continue;
      }
      const claimedNode = first(who.extra, 'authentication.kubernetes.io/node-name');
      if (claimedNode !== undefined && claimedNode !== report.node) {
        onDrop('report', 'wrong-node', 1);
        continue;
      }
      const podName = first(who.extra, 'authentication.kubernetes.io/pod-name');
      const podUid = first(who.extra, 'authentication.kubernetes.io/pod-uid');
      const pod = podName ? await view.pod(probeNamespace, podName) : undefined;
      if (!pod || pod.uid !== podUid || pod.nodeName !== report.node) {
        onDrop('report', claimedNode === undefined && pod ? 'wrong-node' : 'probe-pod-not-on-node', 1);
        continue;
      }
      out.push({ ...report, entries: await checkedEntries(report, view, saUids, onDrop) });
    } catch {
      onDrop('report', 'review-failed', 1);
    }
  }
  return out;
}

/**
 * The report with the entries {@link verifiedReports} drops without asking the cluster: names that are not
 * Kubernetes names, and token entries beyond {@link MAX_REPORT_ENTRIES}. Pure.
 */
export function sanitizeReport(report: ProbeReport, onDrop: DropCounter = () => undefined): ProbeReport {
  const kept: ProbeEntry[] = [];
  let tokens = 0;
  let invalid = 0;
  let over = 0;
  for (const e of report.entries) {
    if (!e || typeof e !== 'object') continue;
    if (!namesValid(e)) invalid++;
    else if (e.status === 'token' ? tokens++ >= MAX_REPORT_ENTRIES : kept.length >= 2 * MAX_REPORT_ENTRIES) over++;
    else kept.push(e);
  }
  if (invalid) onDrop('entry', 'invalid-name', invalid);
  if (over) onDrop('entry', 'over-cap', over);
  return { ...report, entries: kept };
}

/** The entries of a believed report that pass the name, cap and live-claim checks. */
async function checkedEntries(report: ProbeReport, view: ProbeClusterView, saUids: Map<string, Promise<string | undefined>>, onDrop: DropCounter): Promise<ProbeEntry[]> {
  const kept: ProbeEntry[] = [];
  const drops = new Map<DropReason, number>();
  const drop = (r: DropReason) => drops.set(r, (drops.get(r) ?? 0) + 1);
  for (const e of sanitizeReport(report, onDrop).entries) {
    if (e.status !== 'token') {
      kept.push(e);
      continue;
    }
    if (e.node != null && e.node !== report.node) {
      drop('pod-not-on-node');
      continue;
    }
    const key = `${e.namespace}/${e.serviceAccount}`;
    if (!saUids.has(key)) saUids.set(key, view.serviceAccountUid(e.namespace!, e.serviceAccount!));
    const uid = await saUids.get(key)!;
    if (uid === undefined || (e.serviceAccountUid != null && e.serviceAccountUid !== uid)) {
      drop('unknown-serviceaccount');
      continue;
    }
    if (e.pod != null) {
      const pod = await view.pod(e.namespace!, e.pod);
      if (pod && (pod.nodeName !== report.node || (e.podUid != null && e.podUid !== pod.uid))) {
        drop('pod-not-on-node');
        continue;
      }
    }
    kept.push(e);
  }
  for (const [reason, n] of drops) onDrop('entry', reason, n);
  return kept;
}
