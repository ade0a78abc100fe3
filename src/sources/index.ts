/**
 * Live audit sources: {@link createAuditSource} builds the one a cluster's config names.
 */
import type { AuditSourceConfig } from '../config/types.js';
import { CloudWatchClients, CloudWatchSource, type CloudWatchSourceOptions } from './cloudwatch.js';
import { FileSource } from './file.js';
import type { AuditSource } from './types.js';
import { WebhookSource, type WebhookBatchStore } from './webhook.js';
import { readFileSync } from 'node:fs';
import { ErrorCode, TokenwatchError } from '../errors.js';
import { NoAuditSource } from './no-audit.js';
import { FleetInsightsMembers, FleetInsightsSource, type FleetInsightsOptions } from './fleet-insights.js';
import { CloudLoggingRegistry } from './cloud-logging.js';

export type { AuditSource } from './types.js';
export { CloudWatchClients };

/**
 * An audit source that may hold resources (the CloudWatch SDK client's sockets) or a listener to start (the audit
 * webhook: `start` resolves with the bound port).
 */
export type ClosableAuditSource = AuditSource & { close?(): void; start?(): Promise<number> };

/** Extra wiring of {@link createAuditSource} that the config does not carry. */
export interface AuditSourceExtra extends Partial<CloudWatchSourceOptions> {
  /** The cluster's name (webhook source id and spool). */
  cluster?: string;
  /** Called per audit webhook batch shed with 429. */
  onShed?: () => void;
  /** The shared store's webhook batch table (replicas on one store): the webhook source writes and reads batches there, not in its spool. */
  webhookBatches?: WebhookBatchStore;
  /** Called with a failure to store a webhook batch in {@link webhookBatches} (answered 503). */
  onWebhookStoreError?: (err: unknown) => void;
  /** Environment for the webhook's `tokenEnv`. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Fleet Logs Insights mode: insights-mode clusters are read through it when it is enabled (one per deployment). */
  fleetInsights?: FleetInsightsRegistry;
  /** CloudWatch Logs clients shared by the clusters of a deployment (one per Region and endpoint); else one per source. */
  clients?: CloudWatchClients;
  /** The deployment's Cloud Logging reads (GKE): one query per project, one read budget per quota project; else one of its own. */
  gcpLogging?: CloudLoggingRegistry;
}

/** Settings of {@link FleetInsightsRegistry} (config `poll.cloudwatchFleetInsights`). */
export interface FleetInsightsSettings {
  enabled: boolean;
  maxLogGroupsPerQuery: number;
  maxConcurrentQueries: number;
  /** ms */
  reuse: number;
}

/**
 * The deployment's fleet Logs Insights queries (src/sources/fleet-insights.ts): one {@link FleetInsightsSource} per
 * (Region, endpoint, stream prefix, overlap) — clusters that one query can read together —, built with the first such
 * cluster's CloudWatch options (shared budget, timeouts).
 */
export class FleetInsightsRegistry {
  private readonly fleets = new Map<string, FleetInsightsMembers>();

  /** `onQuery`: told of every completed fleet query (metrics of bytes scanned). */
  constructor(
    readonly settings: FleetInsightsSettings,
    private readonly onQuery?: FleetInsightsOptions['onQuery'],
  ) {}

  /**
   * The fleet-backed source of one insights-mode cluster.
   * @throws TokenwatchError (`config_invalid`) when another cluster already reads its log group
   */
  source(cw: Extract<AuditSourceConfig, { cloudwatch: unknown }>['cloudwatch'], extra: Partial<CloudWatchSourceOptions>): ClosableAuditSource {
    const key = JSON.stringify([cw.region, cw.endpoint ?? null, cw.streamPrefix, cw.overlap]);
    let members = this.fleets.get(key);
    if (!members) {
      const fleet = new FleetInsightsSource({
        region: cw.region,
        streamPrefix: cw.streamPrefix,
        overlapMs: cw.overlap,
        maxLogGroupsPerQuery: this.settings.maxLogGroupsPerQuery,
        maxConcurrentQueries: this.settings.maxConcurrentQueries,
        ...(this.onQuery !== undefined && { onQuery: this.onQuery }),
        ...(cw.endpoint !== undefined && { endpoint: cw.endpoint }),
        ...(extra.client !== undefined && { client: extra.client }),
        ...(extra.credentials !== undefined && { credentials: extra.credentials }),
        ...(extra.maxAttempts !== undefined && { maxAttempts: extra.maxAttempts }),
        ...(extra.requestTimeoutMs !== undefined && { requestTimeoutMs: extra.requestTimeoutMs }),
        ...(extra.rateLimiter !== undefined && { rateLimiter: extra.rateLimiter }),
        ...(extra.retry !== undefined && { retry: extra.retry }),
        ...(extra.insights?.pollIntervalMs !== undefined && { pollIntervalMs: extra.insights.pollIntervalMs }),
      });
      members = new FleetInsightsMembers(fleet, { reuseMs: this.settings.reuse });
      this.fleets.set(key, members);
    }
    return members.add(`cloudwatch:${cw.region}:${cw.logGroup}`, cw.logGroup);
  }
}

/**
 * Builds the audit source of one cluster's `audit` config. `extra` passes CloudWatch options the config does not
 * carry (a shared client, retry settings, tests' fast backoff).
 */
export function createAuditSource(cfg: AuditSourceConfig, extra: AuditSourceExtra = {}): ClosableAuditSource {
  if ('file' in cfg) return new FileSource({ path: cfg.file.path });
  if ('webhook' in cfg) return createWebhookSource(cfg.webhook, extra);
  if ('none' in cfg) return new NoAuditSource();
  if ('gcp' in cfg) return (extra.gcpLogging ?? new CloudLoggingRegistry({ readsPerMinute: 60 })).source(cfg.gcp);
  if ('azure' in cfg) {
    // Loaded lazily by serve (src/runtime/log-analytics.ts), never through this synchronous builder.
    throw new TokenwatchError(ErrorCode.Internal, 'audit.azure sources are built by serve (src/runtime/log-analytics.ts)');
  }
  const cw = cfg.cloudwatch;
  if (cw.mode === 'insights' && extra.fleetInsights?.settings.enabled) return extra.fleetInsights.source(cw, cloudWatchExtra(extra));
  return new CloudWatchSource({
    region: cw.region,
    logGroup: cw.logGroup,
    streamPrefix: cw.streamPrefix,
    ...(cw.endpoint !== undefined && { endpoint: cw.endpoint }),
    mode: cw.mode,
    overlapMs: cw.overlap,
    ...cloudWatchExtra(extra),
    ...(extra.clients && !extra.client ? { client: extra.clients.get(cw.region, cw.endpoint) } : {}),
  });
}

function cloudWatchExtra(extra: AuditSourceExtra): Partial<CloudWatchSourceOptions> {
  const { cluster: _c, onShed: _o, env: _e, fleetInsights: _f, clients: _s, gcpLogging: _g, ...rest } = extra;
  return rest;
}

/**
 * The audit webhook source of a config: reads the TLS files and the token (file or env) now.
 * @throws {TokenwatchError} `config_invalid` when a file cannot be read or the token env var is empty.
 */
function createWebhookSource(w: Extract<AuditSourceConfig, { webhook: unknown }>['webhook'], extra: AuditSourceExtra): WebhookSource {
  const read = (what: string, path: string): Buffer => {
    try {
      return readFileSync(path);
    } catch (err) {
      throw new TokenwatchError(ErrorCode.ConfigInvalid, `audit.webhook.${what}: cannot read ${path}: ${(err as Error).message}`, { cause: err });
    }
  };
  let token: string | undefined;
  if (w.tokenFile !== undefined) {
    token = read('tokenFile', w.tokenFile).toString('utf8').trim();
    if (!token) throw new TokenwatchError(ErrorCode.ConfigInvalid, `audit.webhook.tokenFile: ${w.tokenFile} is empty`);
  } else if (w.tokenEnv !== undefined) {
    token = (extra.env ?? process.env)[w.tokenEnv]?.trim();
    if (!token) throw new TokenwatchError(ErrorCode.ConfigInvalid, `audit.webhook.tokenEnv: environment variable ${w.tokenEnv} is not set`);
  }
  return new WebhookSource({
    cluster: extra.cluster ?? 'default',
    host: w.host,
    port: w.port,
    cert: read('certFile', w.certFile),
    key: read('keyFile', w.keyFile),
    ...(token !== undefined ? { token } : {}),
    ...(w.clientCaFile !== undefined ? { clientCa: read('clientCaFile', w.clientCaFile) } : {}),
    spoolPath: w.spool,
    maxBodyBytes: w.maxBodyBytes,
    maxSpoolBytes: w.maxSpoolBytes,
    maxInflightBytes: w.maxInflightBytes,
    maxConnections: w.maxConnections,
    ...(extra.onShed ? { onShed: extra.onShed } : {}),
    ...(extra.webhookBatches ? { batches: extra.webhookBatches } : {}),
    ...(extra.onWebhookStoreError ? { onStoreError: extra.onWebhookStoreError } : {}),
  });
}
