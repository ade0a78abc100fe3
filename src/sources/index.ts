/**
 * Live audit sources: {@link createAuditSource} builds the one a cluster's config names.
 */
import type { AuditSourceConfig } from '../config/types.js';
import { CloudWatchSource, type CloudWatchSourceOptions } from './cloudwatch.js';
import { FileSource } from './file.js';
import type { AuditSource } from './types.js';
import { NoAuditSource } from '../metrics/no-audit.js';

export { CloudWatchSource, type CloudWatchSourceOptions } from './cloudwatch.js';
export { FileSource } from './file.js';
export type { AuditSource } from './types.js';

/** An audit source that may hold resources (the CloudWatch SDK client's sockets). */
export type ClosableAuditSource = AuditSource & { close?(): void };

/**
 * Builds the audit source of one cluster's `audit` config. `extra` passes CloudWatch options the config does not
 * carry (a shared client, retry settings, tests' fast backoff).
 */
export function createAuditSource(cfg: AuditSourceConfig, extra: Partial<CloudWatchSourceOptions> = {}): ClosableAuditSource {
  if ('file' in cfg) return new FileSource({ path: cfg.file.path });
  if ('none' in cfg) return new NoAuditSource();
  const cw = cfg.cloudwatch;
  return new CloudWatchSource({
    region: cw.region,
    logGroup: cw.logGroup,
    streamPrefix: cw.streamPrefix,
    ...(cw.endpoint !== undefined && { endpoint: cw.endpoint }),
    mode: cw.mode,
    overlapMs: cw.overlap,
    ...extra,
  });
}
