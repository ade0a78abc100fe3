/**
 * The probe's Kubernetes objects: one ConfigMap per node, `tokenwatch-probe-<node>`, in the probe's own namespace,
 * key `report.json` = the {@link ProbeReport}. The probe writes it (get, then update or create — the only verbs its
 * RBAC grants); `serve` lists them (`list configmaps` in that namespace, by label).
 */
import { ErrorCode, TokenwatchError } from '../errors.js';
import { ApiException, AuthenticationV1Api, CoreV1Api, type KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import { timeoutOptions } from '../cluster/kube.js';
import type { ProbeReport } from './host.js';
import { PROBE_AUDIENCE, PROOF_KEY, probeObjectName, sanitizeReport, verifiedReports, type DropCounter, type ProbeClusterView } from './verify.js';

export { probeObjectName } from './verify.js';

/** Default namespace of the probe DaemonSet and its ConfigMaps. */
export const PROBE_NAMESPACE = 'tokenwatch-probe';
/** Label selecting the probe's ConfigMaps. */
export const PROBE_LABEL = { key: 'app.kubernetes.io/component', value: 'tokenwatch-probe-report' } as const;
/** ConfigMap key holding the report. */
export const REPORT_KEY = 'report.json';

/**
 * The ConfigMap for a report. `proof` is the probe pod's projected ServiceAccount token for {@link PROBE_AUDIENCE}
 * (see `verify.ts`); without it serve refuses the report.
 */
export function probeConfigMap(report: ProbeReport, namespace: string, proof?: string): V1ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: probeObjectName(report.node),
      namespace,
      labels: { [PROBE_LABEL.key]: PROBE_LABEL.value, 'app.kubernetes.io/name': 'tokenwatch' },
    },
    data: { [REPORT_KEY]: JSON.stringify(report, null, 1), ...(proof ? { [PROOF_KEY]: proof } : {}) },
  };
}

/**
 * Parses a probe ConfigMap's report; undefined when it is not one (missing key, bad JSON, wrong version). Pure.
 */
export function reportOf(cm: { data?: Record<string, string> | undefined }): ProbeReport | undefined {
  const raw = cm.data?.[REPORT_KEY];
  if (raw === undefined) return undefined;
  try {
    const r = JSON.parse(raw) as ProbeReport;
    return r && r.version === 1 && typeof r.node === 'string' && Array.isArray(r.entries) ? r : undefined;
  } catch {
    return undefined;
  }
}

function status(err: unknown): number | undefined {
  return err instanceof ApiException ? err.code : undefined;
}

/**
 * Writes the report's ConfigMap: create it, or replace it when it exists (409), without reading it first. The probe
 * needs no `get`, so one probe cannot read another node's ConfigMap and the proof token in it. A replace without
 * `resourceVersion` is an unconditional update, which the API server allows for ConfigMaps.
 * @throws the API error (403 names the verb) — the caller logs it and retries on the next run.
 */
export async function publishReport(kc: KubeConfig, report: ProbeReport, namespace: string, proof?: string): Promise<'created' | 'updated'> {
  const core = kc.makeApiClient(CoreV1Api);
  const body = probeConfigMap(report, namespace, proof);
  const name = body.metadata!.name!;
  try {
    await core.createNamespacedConfigMap({ namespace, body });
    return 'created';
  } catch (err) {
    if (status(err) !== 409) throw err;
  }
  await core.replaceNamespacedConfigMap({ name, namespace, body });
  return 'updated';
}

/** Reads the probe reports of a cluster (serve side). */
export interface ProbeReportSource {
  /** @throws on API errors other than a missing namespace (→ empty). */
  read(): Promise<ProbeReport[]>;
}

/** {@link ProbeClusterView} over the Kubernetes API (TokenReview, get pod, get ServiceAccount), each call aborted after `timeoutMs`. */
export function kubeProbeView(kc: KubeConfig, timeoutMs = 10_000): ProbeClusterView {
  const core = kc.makeApiClient(CoreV1Api);
  const auth = kc.makeApiClient(AuthenticationV1Api);
  const orMissing = async <T>(fn: () => Promise<T>): Promise<T | undefined> => {
    try {
      return await fn();
    } catch (err) {
      if (status(err) === 404) return undefined;
      throw err;
    }
  };
  return {
    async review(token) {
      const r = await auth.createTokenReview({ body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token, audiences: [PROBE_AUDIENCE] } } }, timeoutOptions(timeoutMs));
      const st = r.status ?? {};
      return { authenticated: st.authenticated === true, ...(st.user?.username ? { username: st.user.username } : {}), ...(st.audiences ? { audiences: st.audiences } : {}), ...(st.user?.extra ? { extra: st.user.extra } : {}) };
    },
    async pod(namespace, name) {
      const p = await orMissing(() => core.readNamespacedPod({ namespace, name }, timeoutOptions(timeoutMs)));
      return p ? { uid: p.metadata?.uid ?? '', nodeName: p.spec?.nodeName } : undefined;
    },
    async serviceAccountUid(namespace, name) {
      const sa = await orMissing(() => core.readNamespacedServiceAccount({ namespace, name }, timeoutOptions(timeoutMs)));
      return sa ? (sa.metadata?.uid ?? '') : undefined;
    },
  };
}

/**
 * {@link ProbeReportSource} over the Kubernetes API: `list configmaps` in the probe namespace, by label; only the
 * reports `verify.ts` believes are returned, and what it drops is counted through `onDrop`. Each call is aborted
 * after `timeoutMs` (default 10,000 ms; `poll.requestTimeout` in serve), so a hung API server fails the read instead
 * of holding the poll.
 */
export class KubeProbeReports implements ProbeReportSource {
  constructor(
    private readonly kc: KubeConfig,
    private readonly namespace: string = PROBE_NAMESPACE,
    private readonly onDrop?: DropCounter,
    private readonly timeoutMs = 10_000,
  ) {}

  async read(): Promise<ProbeReport[]> {
    const core = this.kc.makeApiClient(CoreV1Api);
    let items: V1ConfigMap[];
    try {
      const list = await core.listNamespacedConfigMap({ namespace: this.namespace, labelSelector: `${PROBE_LABEL.key}=${PROBE_LABEL.value}` }, timeoutOptions(this.timeoutMs));
      items = list.items;
    } catch (err) {
      if (status(err) === 404) return [];
      if (status(err) === 403) throw new TokenwatchError(ErrorCode.ProbeFailed, `listing probe ConfigMaps in namespace ${this.namespace} is forbidden: grant list configmaps there (manifests/probe)`);
      if (err instanceof Error && err.name === 'TimeoutError') throw new TokenwatchError(ErrorCode.ProbeFailed, `listing probe ConfigMaps in namespace ${this.namespace} timed out after ${this.timeoutMs} ms`, { cause: err });
      throw new TokenwatchError(ErrorCode.ProbeFailed, `listing probe ConfigMaps in namespace ${this.namespace} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    const cms = items.map((cm) => ({ name: cm.metadata?.name ?? '', data: cm.data ?? {} }));
    return verifiedReports(cms, this.namespace, kubeProbeView(this.kc, this.timeoutMs), this.onDrop);
  }
}

/**
 * Reads a saved `kubectl get configmaps -n tokenwatch-probe -l app.kubernetes.io/component=tokenwatch-probe-report
 * -o json` (a `v1 List`, or one ConfigMap) and returns its probe reports (other ConfigMaps are skipped), with
 * entries whose names are not Kubernetes names dropped and at most `MAX_REPORT_ENTRIES` token entries per report
 * ({@link sanitizeReport}; a saved file is the operator's own, so the writer and live checks of serve do not apply).
 * Pure.
 * @throws Error naming what is wrong when the document is neither.
 */
export function reportsFromJson(doc: unknown): ProbeReport[] {
  const o = doc as { kind?: unknown; items?: unknown; data?: Record<string, string> };
  if (o && typeof o === 'object' && Array.isArray(o.items)) {
    // A list of something else (a cluster snapshot, `kubectl get pods -o json`) is not an empty probe report: say so.
    const other = (o.items as { kind?: unknown }[]).find((i) => !i || typeof i !== 'object' || (i.kind !== undefined && i.kind !== 'ConfigMap'));
    if (other !== undefined) {
      const kind = other && typeof other === 'object' && typeof other.kind === 'string' ? other.kind.slice(0, 60) : typeof other;
      throw new TokenwatchError(ErrorCode.ProbeFailed, `not a ConfigMap list: it holds a ${JSON.stringify(kind)} item (expected the output of \`kubectl get configmaps -l app.kubernetes.io/component=tokenwatch-probe-report -o json\`; a cluster snapshot goes to --cluster-snapshot)`);
    }
    return (o.items as { data?: Record<string, string> }[])
      .map(reportOf)
      .filter((r): r is ProbeReport => r !== undefined)
      .map((r) => sanitizeReport(r));
  }
  if (o && typeof o === 'object' && o.kind === 'ConfigMap') {
    const r = reportOf(o);
    return r ? [sanitizeReport(r)] : [];
  }
  throw new TokenwatchError(ErrorCode.ProbeFailed, 'not a ConfigMap list (expected the output of `kubectl get configmaps -l app.kubernetes.io/component=tokenwatch-probe-report -o json`)');
}
