/**
 * The probe's Kubernetes objects: one ConfigMap per node, `tokenwatch-probe-<node>`, in the probe's own namespace,
 * key `report.json` = the {@link ProbeReport}. The probe writes it (get, then update or create — the only verbs its
 * RBAC grants); `serve` lists them (`list configmaps` in that namespace, by label).
 */
import { ErrorCode, TokenwatchError } from '../errors.js';
import { ApiException, CoreV1Api, type KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import { timeoutOptions } from '../cluster/kube.js';
import type { ProbeReport } from './host.js';

/** Default namespace of the probe DaemonSet and its ConfigMaps. */
export const PROBE_NAMESPACE = 'tokenwatch-probe';
/** Label selecting the probe's ConfigMaps. */
export const PROBE_LABEL = { key: 'app.kubernetes.io/component', value: 'tokenwatch-probe-report' } as const;
/** ConfigMap key holding the report. */
export const REPORT_KEY = 'report.json';

/** `tokenwatch-probe-<node>`, lower-cased and cut to the 253-character object-name limit. */
export function probeObjectName(node: string): string {
  return `tokenwatch-probe-${node.toLowerCase()}`.slice(0, 253).replace(/[^a-z0-9]+$/, '');
}

/** The ConfigMap for a report. */
export function probeConfigMap(report: ProbeReport, namespace: string): V1ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: probeObjectName(report.node),
      namespace,
      labels: { [PROBE_LABEL.key]: PROBE_LABEL.value, 'app.kubernetes.io/name': 'tokenwatch' },
    },
    data: { [REPORT_KEY]: JSON.stringify(report, null, 1) },
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
 * Writes the report's ConfigMap: read it, then replace it (with its resourceVersion) or create it when missing.
 * @throws the API error (403 names the verb) — the caller logs it and retries on the next run.
 */
export async function publishReport(kc: KubeConfig, report: ProbeReport, namespace: string): Promise<'created' | 'updated'> {
  const core = kc.makeApiClient(CoreV1Api);
  const body = probeConfigMap(report, namespace);
  const name = body.metadata!.name!;
  let current: V1ConfigMap | undefined;
  try {
    current = await core.readNamespacedConfigMap({ name, namespace });
  } catch (err) {
    if (status(err) !== 404) throw err;
  }
  if (current === undefined) {
    await core.createNamespacedConfigMap({ namespace, body });
    return 'created';
  }
  body.metadata!.resourceVersion = current.metadata?.resourceVersion;
  await core.replaceNamespacedConfigMap({ name, namespace, body });
  return 'updated';
}

/** Reads the probe reports of a cluster (serve side). */
export interface ProbeReportSource {
  /** @throws on API errors other than a missing namespace (→ empty). */
  read(): Promise<ProbeReport[]>;
}

/**
 * {@link ProbeReportSource} over the Kubernetes API: `list configmaps` in the probe namespace, by label. Each list
 * is aborted after `timeoutMs` (default 10,000 ms; `poll.requestTimeout` in serve), so a hung API server fails the
 * read instead of holding the poll.
 */
export class KubeProbeReports implements ProbeReportSource {
  constructor(
    private readonly kc: KubeConfig,
    private readonly namespace: string = PROBE_NAMESPACE,
    private readonly timeoutMs = 10_000,
  ) {}

  async read(): Promise<ProbeReport[]> {
    const core = this.kc.makeApiClient(CoreV1Api);
    try {
      const list = await core.listNamespacedConfigMap({ namespace: this.namespace, labelSelector: `${PROBE_LABEL.key}=${PROBE_LABEL.value}` }, timeoutOptions(this.timeoutMs));
      return list.items.map(reportOf).filter((r): r is ProbeReport => r !== undefined);
    } catch (err) {
      if (status(err) === 404) return [];
      if (status(err) === 403) throw new TokenwatchError(ErrorCode.ProbeFailed, `listing probe ConfigMaps in namespace ${this.namespace} is forbidden: grant list configmaps there (manifests/probe)`);
      if (err instanceof Error && err.name === 'TimeoutError') throw new TokenwatchError(ErrorCode.ProbeFailed, `listing probe ConfigMaps in namespace ${this.namespace} timed out after ${this.timeoutMs} ms`, { cause: err });
      throw new TokenwatchError(ErrorCode.ProbeFailed, `listing probe ConfigMaps in namespace ${this.namespace} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
  }
}

/**
 * Reads a saved `kubectl get configmaps -n tokenwatch-probe -l app.kubernetes.io/component=tokenwatch-probe-report
 * -o json` (a `v1 List`, or one ConfigMap) and returns its probe reports (other ConfigMaps are skipped). Pure.
 * @throws Error naming what is wrong when the document is neither.
 */
export function reportsFromJson(doc: unknown): ProbeReport[] {
  const o = doc as { kind?: unknown; items?: unknown; data?: Record<string, string> };
  if (o && typeof o === 'object' && Array.isArray(o.items)) {
    return (o.items as { data?: Record<string, string> }[]).map(reportOf).filter((r): r is ProbeReport => r !== undefined);
  }
  if (o && typeof o === 'object' && o.kind === 'ConfigMap') {
    const r = reportOf(o);
    return r ? [r] : [];
  }
  throw new TokenwatchError(ErrorCode.ProbeFailed, 'not a ConfigMap list (expected the output of `kubectl get configmaps -l app.kubernetes.io/component=tokenwatch-probe-report -o json`)');
}
