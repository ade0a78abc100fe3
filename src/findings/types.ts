/**
 * Findings: what tokenwatch reports per (cluster, namespace, serviceAccount, kind).
 *
 * The JSON shape of {@link Finding} is the `tokenwatch scan --format json` **contract**
 * (docs/design/contracts.md "--format json"): field names and meanings must not change silently.
 * Internal times are epoch milliseconds UTC; the JSON carries ISO-8601 UTC strings.
 */
import type { WorkloadRef } from '../cluster/types.js';

/** Kinds of token records: one per way a token is used (stale, legacy, refused). */
export type TokenKind = 'stale-token' | 'legacy-token' | 'unauthorized';

/**
 * Finding kinds (contract, additive): the token kinds, and `cluster-credential` — one cluster-level finding (namespace
 * and ServiceAccount `*`) when many ServiceAccounts start getting 401s at once without stale use before: the API server
 * refused valid-looking tokens (signing key changed, servers disagree on the key, clock skew; `cluster-events.ts`).
 */
export type FindingKind = TokenKind | 'cluster-credential';

/** Severities (contract), from least to most severe: the one definition of the names and their order. */
export const SEVERITIES = ['info', 'warning', 'critical'] as const;

/** Severity (contract), ordered `critical > warning > info`. */
export type Severity = (typeof SEVERITIES)[number];

/** Rank of each severity, higher = more severe (`info` 0, `warning` 1, `critical` 2). */
export const SEVERITY_RANK: Readonly<Record<Severity, number>> = { info: 0, warning: 1, critical: 2 };

/** Cause ids (contract). */
export type CauseId = 'static-token-file' | 'client-caches-token' | 'refresh-on-401' | 'legacy-secret-token' | 'unknown' | 'cluster-credential-change';


/** Severity thresholds in seconds before rejection (docs/design/architecture.md "Terms": critical < 7 d, warning < 30 d). */
export interface SeverityThresholds {
  criticalSeconds: number;
  warningSeconds: number;
}

/**
 * One token, aggregated over its uses. Identified by (cluster, subject, pod uid or name, warnAfter
 * rounded to the minute); uses whose warnAfter lies within ±60 s of an existing token's join it.
 * Times are epoch ms UTC. This is also the row the live store persists.
 */
export interface TokenRecord {
  cluster: string;
  kind: TokenKind;
  subject: string;
  namespace: string;
  serviceAccount: string;
  pod?: string;
  podUid?: string;
  node?: string;
  credentialId?: string;
  /** Stale tokens only: the token's `warnafter` point, epoch ms. */
  warnAfter?: number;
  /** Stale tokens only: when the API server will reject it, epoch ms (from MaxTokenAge). */
  rejectionAt?: number;
  requests: number;
  firstSeen: number;
  lastSeen: number;
  maxSecondsAfterWarning?: number;
  userAgents: string[];
  /**
   * Source addresses the requests are attributed to: per request the rightmost `sourceIPs` entry that is not a trusted
   * proxy (`src/core/source-address.ts`). Records stored before that rule may hold whole `sourceIPs` lists.
   */
  sourceIPs: string[];
  /**
   * `sourceIPs` entries left of the attributed address (client-settable `X-Forwarded-For` / `X-Real-Ip` values), at
   * most 20; never used to attribute, shown in Details. Absent when no request carried any.
   */
  forwardedIPs?: string[];
  /** Legacy tokens only: the Secret named by the legacy-token annotations. */
  legacySecret?: { name: string; namespace?: string; kind: string };
  /** Requests per UTC hour, keyed by the hour's epoch ms (for sparklines). */
  hourly: Record<string, number>;
  /**
   * Unauthorized records: how the 401s were attributed to this subject. Legacy-token records whose audit events named
   * only the Secret: how their ServiceAccount was found (set by `buildFindings`, shown as evidence).
   */
  attribution?: string;
  /**
   * Unattributed 401s folded beyond the per-cluster bound ({@link MAX_UNATTRIBUTED_SOURCES} in `aggregate.ts`): this one
   * record stands for `sources` (an estimate) further distinct (source IPs, user agent) pairs; `sketch` is the
   * serialised `DistinctCounter` that estimate comes from. Its `sourceIPs`/`userAgents` are only a sample.
   */
  overflow?: { sources: number; sketch: string };
}

/** Token as printed in the `scan` JSON (contract). */
export interface FindingToken {
  pod: string | null;
  podUid: string | null;
  node: string | null;
  warnAfter: string | null;
  rejectionAt: string | null;
  requests: number;
  lastSeen: string;
}

/** Cause of a finding (contract). */
export interface Cause {
  id: CauseId;
  /** Catalog id of the component (e.g. `multus-thin`), or null when none matched. */
  component: string | null;
  summary: string;
  fix: string;
  /** Human-readable facts that led to this cause (inferred attributions say so). */
  evidence: string[];
  /** Public issues or docs backing the cause. */
  sources: string[];
}

/** One finding as printed by `scan --format json` (contract). */
export interface Finding {
  /** Stable hash of cluster/namespace/serviceAccount/kind. */
  id: string;
  cluster: string;
  namespace: string;
  serviceAccount: string;
  kind: FindingKind;
  severity: Severity;
  requests: number;
  firstSeen: string;
  lastSeen: string;
  maxSecondsAfterWarning: number | null;
  rejectionAt: string | null;
  tokens: FindingToken[];
  pods: string[];
  workloads: WorkloadRef[];
  userAgents: string[];
  sourceIPs: string[];
  cause: Cause;
  /** Extension (not in the original contract, additive): pods named in audit events but absent from cluster state. */
  missingPods?: string[];
  /** Extension (additive): why cluster state is missing, e.g. `cluster state unavailable`. */
  clusterState?: string;
  /**
   * Extension (additive), unauthorized findings of a ServiceAccount: on what the 401s' attribution to it rests —
   * `named` (the audit events named it), `corroborated` (by address, confirmed by the stale uses stopping where the
   * 401s start, or by the node probe's token file) or `address-only` (never critical; the alert says so). `text`
   * says it in words.
   */
  attribution?: { basis: 'named' | 'corroborated' | 'address-only'; text: string };
  /**
   * Extension (additive): `sourceIPs` entries left of the attributed address in the audit events (client-settable
   * `X-Forwarded-For` / `X-Real-Ip` values), at most 20; never used to attribute, shown in Details.
   */
  forwardedIPs?: string[];
}

/**
 * One alert group in the `scan --format json` document (extension, additive): the findings of one ServiceAccount of
 * one cluster, one root cause (src/findings/groups.ts `FindingGroupJson`; docs/design/contracts.md "--format json").
 */
export interface ScanGroup {
  /** Stable hash of cluster/namespace/serviceAccount (`g` + 15 hex chars). */
  id: string;
  cluster: string;
  namespace: string;
  serviceAccount: string;
  /** The worst severity of its findings. */
  severity: Severity;
  /** Kinds of its findings: `unauthorized`, then `stale-token`, then `legacy-token`. */
  kinds: FindingKind[];
  /** Ids of its findings (each a `findings[].id` of the same document), most severe first. */
  findings: string[];
}

/** The `scan --format json` document (contract). */
export interface ScanReport {
  findings: Finding[];
  /**
   * Extension (additive): the findings grouped by ServiceAccount, one entry per alert (what the table's rows and the
   * Slack alerts show); every finding id is in exactly one group. Absent only in documents built by other code.
   */
  groups?: ScanGroup[];
  /** `auditIdConflicts`: extension (additive, only when non-zero), uses kept despite a repeated auditID and stage. */
  stats: { files: number; lines: number; events: number; tokenUses: number; malformed: number; duplicates: number; auditIdConflicts?: number };
}
