/** The `/metrics` text of the fake Kubernetes API server (`src/sandbox/fakes/kubernetes.ts`). */


/** Counters of {@link apiServerMetricsText}, named as in kubernetes `pkg/serviceaccount/metrics.go` (short keys). */
export interface FakeTokenCounters {
  stale?: number;
  valid?: number;
  legacy?: number;
  legacyAuto?: number;
  legacyManual?: number;
  invalidLegacyAuto?: number;
}

/** Formats a float as Go's `strconv.FormatFloat(v, 'g', -1, 64)` does for large values (`1.7645184e+09`). */
function goFloat(v: number): string {
  if (Number.isInteger(v) && Math.abs(v) < 1e6) return String(v);
  const [m, e] = v.toExponential().split('e');
  const exp = Number(e);
  return `${m}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
}

/**
 * Realistic kube-apiserver `/metrics` text: HELP/TYPE lines as client_golang writes them, the `serviceaccount_*`
 * counters (label-less ALPHA counters), `process_start_time_seconds` (epoch seconds, Go float format) and a few
 * unrelated families with labels and a histogram, so parsers meet the real shape.
 * @param o.processStart the API-server process start, epoch ms.
 */
export function apiServerMetricsText(o: { processStart: number; counters?: FakeTokenCounters; requests?: number }): string {
  const c = o.counters ?? {};
  const counter = (name: string, help: string, v: number | undefined): string =>
    v === undefined ? '' : `# HELP ${name} [ALPHA] ${help}\n# TYPE ${name} counter\n${name} ${v}\n`;
  const req = o.requests ?? 1234;
  return [
    '# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.',
    '# TYPE apiserver_request_total counter',
    `apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="LIST",version="v1"} ${req}`,
    'apiserver_request_total{code="201",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 98765',
    '# HELP apiserver_request_duration_seconds [STABLE] Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.',
    '# TYPE apiserver_request_duration_seconds histogram',
    'apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="LIST",version="v1",le="0.005"} 12',
    'apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="LIST",version="v1",le="+Inf"} 40',
    'apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="LIST",version="v1"} 1.2345e-01',
    'apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="LIST",version="v1"} 40',
    '# HELP process_start_time_seconds [ALPHA] Start time of the process since unix epoch in seconds.',
    '# TYPE process_start_time_seconds gauge',
    `process_start_time_seconds ${goFloat(o.processStart / 1000)}`,
    '',
  ].join('\n') +
    counter('serviceaccount_invalid_legacy_auto_token_uses_total', 'Cumulative invalid auto-generated legacy tokens used', c.invalidLegacyAuto) +
    counter('serviceaccount_legacy_auto_token_uses_total', 'Cumulative auto-generated legacy tokens used', c.legacyAuto) +
    counter('serviceaccount_legacy_manual_token_uses_total', 'Cumulative manually created legacy tokens used', c.legacyManual) +
    counter('serviceaccount_legacy_tokens_total', 'Cumulative legacy service account tokens used', c.legacy ?? 0) +
    counter('serviceaccount_stale_tokens_total', 'Cumulative stale projected service account tokens used', c.stale ?? 0) +
    counter('serviceaccount_valid_tokens_total', 'Cumulative valid projected service account tokens used', c.valid ?? 0);
}
