/**
 * Live audit sources: {@link createAuditSource} builds the one a cluster's config names.
 */
import type { AuditSourceConfig } from '../config/types.js';
import { CloudWatchSource, type CloudWatchSourceOptions } from './cloudwatch.js';
import { FileSource } from './file.js';
import type { AuditSource } from './types.js';
import { WebhookSource } from './webhook.js';
import { readFileSync } from 'node:fs';
import { ErrorCode, TokenwatchError } from '../errors.js';
import { NoAuditSource } from './no-audit.js';

export type { AuditSource } from './types.js';

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
  /** Environment for the webhook's `tokenEnv`. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
}

/**
 * Builds the audit source of one cluster's `audit` config. `extra` passes CloudWatch options the config does not
 * carry (a shared client, retry settings, tests' fast backoff).
 */
export function createAuditSource(cfg: AuditSourceConfig, extra: AuditSourceExtra = {}): ClosableAuditSource {
  if ('file' in cfg) return new FileSource({ path: cfg.file.path });
  if ('webhook' in cfg) return createWebhookSource(cfg.webhook, extra);
  if ('none' in cfg) return new NoAuditSource();
  const cw = cfg.cloudwatch;
  return new CloudWatchSource({
    region: cw.region,
    logGroup: cw.logGroup,
    streamPrefix: cw.streamPrefix,
    ...(cw.endpoint !== undefined && { endpoint: cw.endpoint }),
    mode: cw.mode,
    overlapMs: cw.overlap,
    ...cloudWatchExtra(extra),
  });
}

function cloudWatchExtra(extra: AuditSourceExtra): Partial<CloudWatchSourceOptions> {
  const { cluster: _c, onShed: _o, env: _e, ...rest } = extra;
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
    ...(extra.onShed ? { onShed: extra.onShed } : {}),
  });
}
