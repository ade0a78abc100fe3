/**
 * `tokenwatch scan --metrics FILE`: a saved `kubectl get --raw /metrics` read once, reported as totals since that
 * API-server process started and their average hourly rate as of the scan's reference time (`--now`).
 *
 * JSON: the additive top-level `metrics` field of the scan document ({@link MetricsReport}); table: the section
 * rendered by {@link renderMetricsSection}.
 */
import { open } from 'node:fs/promises';
import { InputError } from '../errors.js';
import { HOUR_SECONDS } from '../core/units.js';
import { sinceStart, TOKEN_COUNTERS, tokenMetricsFromText, TokenMetricsError, type TokenCounter } from '../findings/token-metrics.js';

/** Largest metrics file read, bytes (a kube-apiserver `/metrics` is a few MiB). */
export const MAX_METRICS_FILE_BYTES = 64 * 1024 * 1024;

/** The `metrics` field of `scan --format json` (additive to the contract). Counter keys are full metric names. */
export interface MetricsReport {
  file: string;
  /** What the figures cover: always one API-server process (the replica that answered). */
  scope: 'api-server-replica';
  /** `process_start_time_seconds` as ISO-8601 UTC, or null when the file lacks it. */
  processStart: string | null;
  /** Reference time (the scan's `now`), ISO-8601 UTC. */
  at: string;
  /** Seconds from process start to `at`, or null. */
  uptimeSeconds: number | null;
  /** Counter values since the process started, by metric name (absent: not exported by that API-server version). */
  totals: Record<string, number>;
  /** Average uses per hour since the process started, by metric name; null without a process start. */
  perHour: Record<string, number> | null;
}

async function readCapped(file: string): Promise<string> {
  let fh;
  try {
    fh = await open(file, 'r');
  } catch (err) {
    throw new InputError(file, err instanceof Error ? err.message : String(err), { cause: err });
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new InputError(file, 'not a regular file');
    if (st.size > MAX_METRICS_FILE_BYTES) throw new InputError(file, `larger than ${MAX_METRICS_FILE_BYTES} bytes; not an API-server /metrics answer`);
    return await fh.readFile('utf8');
  } catch (err) {
    if (err instanceof InputError) throw err;
    throw new InputError(file, err instanceof Error ? err.message : String(err), { cause: err });
  } finally {
    await fh.close();
  }
}

const named = (c: Partial<Record<TokenCounter, number>>): Record<string, number> =>
  Object.fromEntries((Object.keys(TOKEN_COUNTERS) as TokenCounter[]).filter((k) => c[k] !== undefined).map((k) => [TOKEN_COUNTERS[k], c[k]!]));

/**
 * Reads and evaluates a saved `/metrics` file as of `at` (epoch ms UTC).
 * @throws {InputError} when the file cannot be read, is too large, holds no `serviceaccount_*` counters, or `at` is
 *   before the process start (the message names the file and the reason).
 */
export async function metricsReportFromFile(file: string, at: number): Promise<MetricsReport> {
  const text = await readCapped(file);
  try {
    const s = sinceStart(tokenMetricsFromText(text, at), at);
    return {
      file,
      scope: 'api-server-replica',
      processStart: s.processStartAt === null ? null : new Date(s.processStartAt).toISOString(),
      at: new Date(at).toISOString(),
      uptimeSeconds: s.uptimeSeconds,
      totals: named(s.totals),
      perHour: s.perHour === null ? null : Object.fromEntries(Object.entries(named(s.perHour)).map(([k, v]) => [k, Math.round(v * 100) / 100])),
    };
  } catch (err) {
    if (err instanceof TokenMetricsError) throw new InputError(file, err.message, { cause: err });
    throw err;
  }
}

/** The table section for a {@link MetricsReport} (plain text, trailing newline). */
export function renderMetricsSection(r: MetricsReport): string {
  const lines = [`API-server token metrics from ${r.file} — one API-server replica (the one that answered), not a cluster-wide figure:`];
  if (r.processStart === null || r.uptimeSeconds === null) {
    lines.push('  process start unknown (no process_start_time_seconds): totals only, no rate');
  } else {
    lines.push(`  process started ${r.processStart.replace(/\.\d{3}Z$/, 'Z')}, ${(r.uptimeSeconds / HOUR_SECONDS).toFixed(1)} h before ${r.at.replace(/\.\d{3}Z$/, 'Z')}`);
  }
  const width = Math.max(...Object.keys(r.totals).map((k) => k.length));
  for (const [name, total] of Object.entries(r.totals)) {
    const rate = r.perHour?.[name];
    lines.push(`  ${name.padEnd(width)}  ${String(total).padStart(10)}${rate === undefined ? '' : `  ${rate.toFixed(1).padStart(9)}/h average`}`);
  }
  const stale = r.totals[TOKEN_COUNTERS.stale] ?? 0;
  if (stale > 0) lines.push('  stale tokens are in use: audit logs or the node probe (tokenwatch probe) name the clients');
  return `${lines.join('\n')}\n`;
}
