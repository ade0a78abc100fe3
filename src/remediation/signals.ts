/**
 * What a concluded verification (`verify.ts`) speaks for, in token kinds: the Slack reply of a resolved alert names
 * each signal that stopped (docs/slack.md).
 */
import type { TokenKind } from '../findings/types.js';
import type { VerificationReport } from './verify.js';

/**
 * The token kinds a resolved verification speaks for: the kind of the report's finding and of every finding resolved
 * with it, in that order without repeats, less cluster-level credential events (no ServiceAccount's signal).
 */
export function resolvedSignals(r: Pick<VerificationReport, 'finding' | 'resolved'>): TokenKind[] {
  return [...new Set([r.finding.finding.kind, ...r.resolved.map((m) => m.finding.kind)])].filter((k): k is TokenKind => k !== 'cluster-credential');
}
