/**
 * The same audit events as CloudWatch Logs returns them on EKS (control-plane audit logging ships each event as
 * one log message to `/aws/eks/<cluster>/cluster`, streams `kube-apiserver-audit-<id>`):
 * - `aws logs filter-log-events` CLI output (pretty JSON, 4-space indent);
 * - a Logs Insights console export ("Export results" → CSV / JSON) with `@timestamp`, `@message`.
 */
import { Rng } from './rng.js';
import { SECOND, awsCliJson, csvField, insightsTime } from './format.js';
import type { RenderedEvent } from './events.js';

/** CloudWatch log event timestamp of an audit event: its `stageTimestamp`, epoch ms. */
export function cloudwatchTimestamp(e: RenderedEvent): number {
  return Math.floor(e.stageUs / 1000);
}

/** The two API-server instances' audit log streams. */
export function logStreams(rng: Rng): string[] {
  const r = rng.fork('streams');
  return [`kube-apiserver-audit-${r.hex(32)}`, `kube-apiserver-audit-${r.hex(32)}`];
}

/** Stream of a request: both stages of one request are written by the same API-server instance. */
export function streamOf(streams: readonly string[], auditID: string): string {
  const h = new Rng(`stream/${auditID}`).u32();
  return streams[h % streams.length] as string;
}

/** `aws logs filter-log-events` output for `events` (already filtered), sorted by timestamp. */
export function filterLogEventsJson(events: readonly RenderedEvent[], rng: Rng): string {
  const r = rng.fork('filter-log-events');
  const streams = logStreams(rng);
  const sorted = [...events].sort((a, b) => a.stageUs - b.stageUs);
  const out = {
    events: sorted.map((e) => {
      const timestamp = cloudwatchTimestamp(e);
      return {
        logStreamName: streamOf(streams, e.req.auditID),
        timestamp,
        message: e.line,
        ingestionTime: timestamp + r.int(18, 95) * SECOND + r.int(0, 999),
        eventId: r.digits(56),
      };
    }),
    searchedLogStreams: streams.map((logStreamName) => ({ logStreamName, searchedCompletely: true })),
  };
  return awsCliJson(out);
}

/** Rows of a Logs Insights result (`sort @timestamp desc`, the console's default order). */
function insightsRows(events: readonly RenderedEvent[]): Array<{ '@timestamp': string; '@message': string }> {
  return [...events]
    .sort((a, b) => b.stageUs - a.stageUs)
    .map((e) => ({ '@timestamp': insightsTime(cloudwatchTimestamp(e)), '@message': e.line }));
}

/** Logs Insights console CSV export: header `@timestamp,@message`, RFC 4180 quoting, `\n` line ends. */
export function insightsCsv(events: readonly RenderedEvent[]): string {
  const rows = insightsRows(events);
  return ['@timestamp,@message', ...rows.map((r) => `${csvField(r['@timestamp'])},${csvField(r['@message'])}`)].join('\n') + '\n';
}

/** Logs Insights console JSON export: an array of row objects, 2-space indent. */
export function insightsJson(events: readonly RenderedEvent[]): string {
  return JSON.stringify(insightsRows(events), null, 2) + '\n';
}
