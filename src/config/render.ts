/**
 * Printing a configuration safely: secret masking and the effective config as YAML
 * (what `tokenwatch config check` prints).
 */
import { stringify } from 'yaml';
import type { MaxTokenAge } from './max-token-age.js';
import { formatDuration } from './duration.js';
import { ENV } from './schema.js';
import type { AuditSourceConfig, ClusterConfig, Config } from './types.js';

/**
 * Masks a secret, keeping the Slack token type prefix and, for long values, the last 4 characters:
 * `xoxb-123…wxyz` → `xoxb-****wxyz`; a 32-character signing secret → `****` + last 4; short values → `****`.
 */
export function maskSecret(value: string): string {
  const prefix = /^(xox[a-z]-|xapp-)/.exec(value)?.[0] ?? '';
  const tail = value.length - prefix.length >= 16 ? value.slice(-4) : '';
  return `${prefix}****${tail}`;
}

/** Replaces a password in a URL's userinfo (`https://u:p@host`) by `****`. */
function maskUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password === '') return url;
    u.password = '****';
    return u.toString();
  } catch {
    return url;
  }
}

/**
 * A deep copy of `config` with every secret masked ({@link maskSecret}): the Slack bot token, app token and
 * signing secret, and passwords inside URLs. Use it whenever a config is logged or printed.
 */
export function maskConfig(config: Config): Config {
  const copy = structuredClone(config);
  if (copy.slack !== undefined) {
    const s = copy.slack;
    if (s.botToken !== undefined) s.botToken = maskSecret(s.botToken);
    if (s.appToken !== undefined) s.appToken = maskSecret(s.appToken);
    if (s.signingSecret !== undefined) s.signingSecret = maskSecret(s.signingSecret);
    if (s.apiUrl !== undefined) s.apiUrl = maskUrl(s.apiUrl);
    if (s.pagerdutyRoutingKey !== undefined) s.pagerdutyRoutingKey = maskSecret(s.pagerdutyRoutingKey);
    // A webhook URL often carries its token in the path or query: only its origin is shown.
    if (s.paging?.webhook !== undefined) s.paging.webhook.url = `${new URL(s.paging.webhook.url).origin}/[Redacted]`;
  }
  for (const c of copy.clusters) {
    if ('cloudwatch' in c.audit && c.audit.cloudwatch.endpoint !== undefined) {
      c.audit.cloudwatch.endpoint = maskUrl(c.audit.cloudwatch.endpoint);
    }
  }
  return copy;
}

function maxTokenAgeValue(m: MaxTokenAge): string | number {
  return m.mode === 'seconds' ? m.seconds : m.mode;
}

function auditValue(a: AuditSourceConfig): unknown {
  if ('file' in a) return { file: { ...a.file } };
  if ('none' in a) return { none: true };
  if ('webhook' in a) return { webhook: { ...a.webhook } }; // file paths and an env var name only, no secret
  if ('gcp' in a) return { gcp: { ...a.gcp, overlap: formatDuration(a.gcp.overlap), lag: formatDuration(a.gcp.lag) } };
  if ('azure' in a) {
    const z = a.azure;
    return { azure: { ...z, ...(z.endpoint !== undefined && { endpoint: maskUrl(z.endpoint) }), ...(z.authorityHost !== undefined && { authorityHost: maskUrl(z.authorityHost) }), lag: formatDuration(z.lag), overlap: formatDuration(z.overlap) } };
  }
  return { cloudwatch: { ...a.cloudwatch, overlap: formatDuration(a.cloudwatch.overlap) } };
}

function clusterValue(c: ClusterConfig): unknown {
  return {
    name: c.name,
    audit: auditValue(c.audit),
    kubernetes: structuredClone(c.kubernetes),
    maxTokenAge: maxTokenAgeValue(c.maxTokenAge),
    schedule: c.schedule,
    lookback: formatDuration(c.lookback),
    ...(c.slack !== undefined ? { slack: structuredClone(c.slack) } : {}),
    trustedProxies: [...(c.trustedProxies ?? [])],
    thresholds: { ...c.thresholds },
  };
}

/** `store` in the file's form: `postgres` as fields (a URL was split into them), durations as strings. */
function storeFileForm(store: Config['store']): Record<string, unknown> {
  if (store.postgres === undefined) return { path: store.path };
  const { statementTimeout, connectTimeout, queryTimeout, ...rest } = store.postgres;
  return { path: store.path, postgres: { ...rest, statementTimeout: formatDuration(statementTimeout), connectTimeout: formatDuration(connectTimeout), queryTimeout: formatDuration(queryTimeout) } };
}

/**
 * The config in the file's own form (durations as strings such as `10m`, `maxTokenAge` as `eks`/seconds),
 * without the environment secrets. Feeding it back to `parseConfig` with the same env gives the same config.
 */
export function toFileForm(config: Config): Record<string, unknown> {
  const out: Record<string, unknown> = {
    store: storeFileForm(config.store),
    shards: { heartbeat: formatDuration(config.shards.heartbeat), ttl: formatDuration(config.shards.ttl) },
    http: { ...config.http },
    log: { ...config.log },
  };
  if (config.slack !== undefined) {
    const s = config.slack;
    out.slack = {
      enabled: s.enabled,
      mode: s.mode,
      ...(s.apiUrl !== undefined ? { apiUrl: s.apiUrl } : {}),
      host: s.host,
      port: s.port,
      approvals: {
        expiresAfter: formatDuration(s.approvals.expiresAfter),
        reminders: s.approvals.reminders,
        ...(s.approvals.remindAfter !== undefined ? { remindAfter: formatDuration(s.approvals.remindAfter) } : {}),
        ...(s.approvals.escalateTo !== undefined ? { escalateTo: s.approvals.escalateTo } : {}),
        notifyRequester: s.approvals.notifyRequester,
      },
      ...(s.paging !== undefined
        ? { paging: { after: formatDuration(s.paging.after), ...(s.paging.pagerduty ? { pagerduty: { ...s.paging.pagerduty } } : {}), ...(s.paging.webhook ? { webhook: { ...s.paging.webhook } } : {}) } }
        : {}),
      commands: { scanInterval: formatDuration(s.commands.scanInterval) },
      ...(s.routes !== undefined ? { routes: structuredClone(s.routes) } : {}),
    };
  }
  out.remediation = {
    rolloutTimeout: formatDuration(config.remediation.rolloutTimeout),
    settlePeriod: formatDuration(config.remediation.settlePeriod),
  };
  out.poll = {
    jitter: formatDuration(config.poll.jitter),
    chunkEvents: config.poll.chunkEvents,
    requestTimeout: formatDuration(config.poll.requestTimeout),
    spread: config.poll.spread,
    concurrency: config.poll.concurrency,
    cloudwatchTps: { ...config.poll.cloudwatchTps },
    cloudwatchFleetInsights: { ...config.poll.cloudwatchFleetInsights, reuse: formatDuration(config.poll.cloudwatchFleetInsights.reuse) },
    gcpLogging: { ...config.poll.gcpLogging, reuse: formatDuration(config.poll.gcpLogging.reuse) },
    logAnalytics: { ...config.poll.logAnalytics, reuse: formatDuration(config.poll.logAnalytics.reuse), timeout: formatDuration(config.poll.logAnalytics.timeout) },
  };
  out.findings = {
    activeWindow: formatDuration(config.findings.activeWindow),
    quietPeriod: formatDuration(config.findings.quietPeriod),
    readinessMinWindow: formatDuration(config.findings.readinessMinWindow),
  };
  out.retention = {
    tokenRecords: formatDuration(config.retention.tokenRecords),
    pollRuns: formatDuration(config.retention.pollRuns),
    actionLog: formatDuration(config.retention.actionLog),
  };
  out.clusters = config.clusters.map(clusterValue);
  return out;
}

/**
 * The effective configuration as YAML, secrets masked: the file form ({@link toFileForm}) followed by a
 * comment block listing the Slack secrets read from the environment (masked, or `(not set)`).
 * Never contains an unmasked secret.
 */
export function renderEffectiveConfig(config: Config): string {
  const masked = maskConfig(config);
  let text = '# tokenwatch effective configuration (defaults filled in, secrets masked)\n';
  text += stringify(toFileForm(masked), { lineWidth: 0 });
  if (masked.slack !== undefined) {
    const s = masked.slack;
    text += '# secrets from the environment:\n';
    text += `#   ${ENV.botToken}: ${s.botToken ?? '(not set)'}\n`;
    text += `#   ${ENV.appToken}: ${s.appToken ?? '(not set)'}\n`;
    text += `#   ${ENV.signingSecret}: ${s.signingSecret ?? '(not set)'}\n`;
    if (s.paging?.pagerduty !== undefined) text += `#   ${ENV.pagerdutyRoutingKey}: ${s.pagerdutyRoutingKey ?? '(not set)'}\n`;
  }
  return text;
}
