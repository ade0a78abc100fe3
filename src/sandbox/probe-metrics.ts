/**
 * The sandbox's simulated API-server token metrics and node-probe objects (docs/design/architecture.md "Signals besides the audit log"), so the sandbox shows both:
 * - {@link SandboxApiServerMetrics}: `/metrics` text of one API-server process started with the sandbox, whose
 *   `serviceaccount_stale_tokens_total` / `serviceaccount_legacy_tokens_total` count the simulated audit traffic;
 * - {@link refreshProbeObjects}: one `tokenwatch-probe-<node>` ConfigMap per node running a pod of a static-token-file
 *   ServiceAccount (Multus), as the node probe would publish it: the kubeconfig path, the token's claims (issued when
 *   its pod started, or at the `warnafter` learnt from the audit log minus 3607 s), never a token; with the proof
 *   serve checks ({@link sandboxProbeProofs}: a probe pod on the node and its token, answered by the fake's TokenReview).
 */
import { apiServerMetricsText } from './fakes/kubernetes/metrics.js';
import type { FakeKube } from './fakes/kubernetes.js';
import type { ObjectStore } from './fakes/kubernetes/object-store.js';
import { serveTokenReviews } from './fakes/token-review.js';
import { PROBE_AUDIENCE } from '../probe/verify.js';
import { EKS_MAX_SECONDS_AFTER_WARNING, WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS } from '../findings/token-math.js';
import { pathHash, type ProbeEntry, type ProbeReport, DEFAULT_PROBE_GLOBS } from '../probe/host.js';
import { PROBE_NAMESPACE, probeConfigMap, probeObjectName } from '../probe/objects.js';
import { podView } from './cluster.js';
import type { CredentialTemplate, LiveUse } from './replay.js';

/** Counts simulated token uses as an API server's counters would. */
export class SandboxApiServerMetrics {
  private stale = 0;
  private legacy = 0;
  private valid = 0;

  /** @param processStart epoch ms (sandbox time) the simulated API-server process started. */
  constructor(private readonly processStart: number) {}

  /** Adds one tick's uses. */
  observe(uses: readonly LiveUse[]): void {
    for (const u of uses) {
      if (u.kind === 'stale') this.stale++;
      else if (u.kind === 'legacy') this.legacy++;
    }
    this.valid += uses.length * 20; // fresh tokens vastly outnumber stale ones
  }

  /** The `/metrics` text now. */
  text(): string {
    return apiServerMetricsText({ processStart: this.processStart, counters: { stale: this.stale, legacy: this.legacy, legacyAuto: this.legacy, legacyManual: 0, invalidLegacyAuto: 0, valid: this.valid } });
  }
}

/** Where the Multus thin plugin writes its kubeconfig (Multus `deployments/multus-daemonset.yml`). */
export const MULTUS_KUBECONFIG = '/etc/cni/net.d/multus.d/multus.kubeconfig';

/**
 * The proof of each node's report, as the probe DaemonSet would publish it: a probe pod on the node (created in the
 * fake when missing) and a token bound to it for the audience `tokenwatch-probe`, answered by the fake's TokenReview.
 * The sandbox clock runs fast and a report is rewritten only when it changes, so these tokens do not expire.
 */
export function sandboxProbeProofs(kube: FakeKube, now: () => number): (node: string) => string {
  const issuer = serveTokenReviews(kube, now);
  return (node) => {
    const name = `tokenwatch-probe-${pathHash(node).slice(0, 5)}`;
    if (!kube.store.get('Pod', PROBE_NAMESPACE, name)) {
      kube.store.put({ apiVersion: 'v1', kind: 'Pod', metadata: { namespace: PROBE_NAMESPACE, name, labels: { 'app.kubernetes.io/component': 'probe' } }, spec: { nodeName: node, serviceAccountName: 'tokenwatch-probe' } });
    }
    return issuer.issue({ namespace: PROBE_NAMESPACE, pod: name, audience: PROBE_AUDIENCE, expiresAt: Number.MAX_SAFE_INTEGER });
  };
}

/** How often the real probe DaemonSet reports (`tokenwatch probe --interval`, default 5 minutes), ms. */
export const SANDBOX_PROBE_INTERVAL_MS = 5 * 60_000;

/**
 * Writes the probe ConfigMaps for the nodes of the pods of `staticTokenSubjects` (`namespace/name`), each with
 * `proofFor(node)` as its proof: when what a node reports changed, and otherwise every {@link SANDBOX_PROBE_INTERVAL_MS}
 * of sandbox time (as the real probe reports on its interval, so a restart's verification sees reports made after
 * the rollout). Returns how many objects were written.
 */
export function refreshProbeObjects(store: ObjectStore, templates: readonly CredentialTemplate[], staticTokenSubjects: ReadonlySet<string>, now: number, proofFor?: (node: string) => string): number {
  const byNode = new Map<string, ProbeEntry[]>();
  for (const p of store.list('Pod')) {
    const v = podView(p);
    if (!v?.node || !staticTokenSubjects.has(`${v.namespace}/${v.serviceAccount}`)) continue;
    const learnt = templates.find((t) => t.podUid === v.uid && t.warnAfter !== undefined);
    const issued = learnt ? learnt.warnAfter! - WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS * 1000 : v.startedAt;
    const warnAfter = issued + WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS * 1000;
    const iso = (ms: number) => new Date(ms).toISOString();
    byNode.set(v.node, [
      ...(byNode.get(v.node) ?? []),
      {
        path: MULTUS_KUBECONFIG,
        pathHash: pathHash(MULTUS_KUBECONFIG),
        mtime: iso(issued),
        status: 'token',
        via: 'kubeconfig-token',
        user: 'multus',
        tokenKind: 'bound',
        issuer: 'https://kubernetes.default.svc',
        namespace: v.namespace,
        serviceAccount: v.serviceAccount,
        serviceAccountUid: null,
        pod: v.name,
        podUid: v.uid,
        node: v.node,
        secretName: null,
        issuedAt: iso(issued),
        expiresAt: iso(warnAfter + EKS_MAX_SECONDS_AFTER_WARNING * 1000),
        warnAfter: iso(warnAfter),
        rejectionAt: iso(warnAfter + EKS_MAX_SECONDS_AFTER_WARNING * 1000),
      },
    ]);
  }
  let written = 0;
  for (const [node, entries] of byNode) {
    const report: ProbeReport = { version: 1, node, probedAt: new Date(now).toISOString(), globs: [...DEFAULT_PROBE_GLOBS], entries };
    const name = probeObjectName(node);
    const current = store.get('ConfigMap', PROBE_NAMESPACE, name) as { data?: Record<string, string> } | undefined;
    const same = (r: string | undefined) => {
      try {
        return r !== undefined && JSON.stringify((JSON.parse(r) as ProbeReport).entries) === JSON.stringify(entries);
      } catch {
        return false;
      }
    };
    const reportedAt = (r: string | undefined) => {
      try {
        return r === undefined ? Number.NaN : Date.parse((JSON.parse(r) as ProbeReport).probedAt);
      } catch {
        return Number.NaN;
      }
    };
    const raw = current?.data?.['report.json'];
    if (current && same(raw) && now - reportedAt(raw) < SANDBOX_PROBE_INTERVAL_MS) continue;
    const cm = probeConfigMap(report, PROBE_NAMESPACE, proofFor?.(node));
    if (current) store.update('ConfigMap', PROBE_NAMESPACE, name, (o) => void (o['data'] = cm.data));
    else store.put(cm);
    written++;
  }
  return written;
}
