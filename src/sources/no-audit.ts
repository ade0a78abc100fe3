/**
 * The audit source of a cluster configured with `audit: { none: true }` (audit logging off): it yields nothing,
 * so findings come only from API-server token metrics and the node probe (docs/design/architecture.md "Signals besides the audit log").
 */
import type { AuditSource, PollOptions } from './types.js';

/** Id of {@link NoAuditSource}; `/tokens status` shows "audit log: off" for it. */
export const NO_AUDIT_SOURCE_ID = 'none';

/** An {@link AuditSource} that has no events. */
export class NoAuditSource implements AuditSource {
  readonly id = NO_AUDIT_SOURCE_ID;

  // biome-ignore lint/correctness/useYield: a source without events; the generator only returns its cursor
  async *poll(_cursor: string | undefined, _opts: PollOptions): AsyncGenerator<string, string> {
    return '';
  }
}
