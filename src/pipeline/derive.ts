/**
 * The one derivation of findings, shared by `tokenwatch scan` (`src/scan/run.ts`, `src/cli/commands/scan.ts`), the
 * poll of `tokenwatch serve` (`src/pipeline/poll.ts`) and so the sandbox: the same token records, cluster state,
 * API-server token metrics and node-probe reports give the same findings whichever command reads them.
 *
 * The steps, in order:
 * 1. findings from the token records with cluster state and the severity thresholds (`src/findings/build.ts`);
 * 2. cluster-level credential events (a signing-key rotation, API servers that disagree on the key, a skewed clock;
 *    `src/findings/cluster-events.ts`): many ServiceAccounts refused within minutes of each other is the cluster's
 *    doing, so they lose the client cause, with inconsistent event times ({@link DeriveInput.clockSkew}) as evidence;
 * 3. the API-server token metrics step, when given (serve: the scrape compared with the last one; scan: a metrics
 *    file): its cluster-level findings are added and it says whether the metrics show stale use now;
 * 4. the node-probe reports, when given (`src/probe/findings.ts`): tokens found in files on nodes annotate or add
 *    findings.
 *
 * Findings come back in {@link compareFindings} order.
 */
import { untilAborted } from '../core/abort.js';
import type { ClusterStateSource } from '../cluster/types.js';
import type { MaxTokenAge } from '../config/max-token-age.js';
import { buildFindings, compareFindings } from '../findings/build.js';
import { applyCredentialEvents, detectCredentialEvents, noteClockSkew, type ClusterEvent } from '../findings/cluster-events.js';
import type { Finding, SeverityThresholds, TokenRecord } from '../findings/types.js';
import { applyProbeReports } from '../probe/findings.js';
import type { ProbeReport } from '../probe/host.js';

/** What the API-server token metrics step of {@link deriveFindings} returns. */
export interface TokenMetricsStepResult {
  /** Cluster-level findings the metrics justify (added to the audit findings). */
  findings: Finding[];
  /** Whether the metrics show stale-token use right now (raises probe-only findings above `info`). */
  showUse: boolean;
  /** Why the metrics could not be read, when they could not (the step then returns no findings). */
  error?: string;
}

/** Input of {@link deriveFindings}. Times are epoch ms UTC. */
export interface DeriveInput {
  /** Cluster name put on the findings. */
  cluster: string;
  /** All token records of the cluster (audit-derived, `src/findings/aggregate.ts`). */
  records: TokenRecord[];
  /** Reference time for severity and days to rejection. */
  now: number;
  /** Live mode: 401s last seen before this time no longer make a finding critical (`BuildOptions.unauthorizedSince`). */
  unauthorizedSince?: number;
  /** The cluster does not extend tokens (`BuildOptions.tokenExtensionOff`). */
  tokenExtensionOff?: boolean;
  /** Cluster state; without it findings carry `clusterState: STATE_NOT_PROVIDED`. */
  state?: ClusterStateSource;
  /** Severity thresholds; default `DEFAULT_THRESHOLDS` (`src/findings/build.ts`). */
  thresholds?: SeverityThresholds;
  /** When the API server rejects a stale token (the cluster's `maxTokenAge`); used for probe-found tokens. */
  maxTokenAge?: MaxTokenAge;
  /**
   * The API-server token metrics step: given the audit findings (an increase they explain raises nothing) and `now`.
   * It should not throw for an unreadable scrape (return `error` instead); a throw fails the derivation.
   */
  tokenMetrics?: (auditFindings: readonly Finding[], now: number) => Promise<TokenMetricsStepResult>;
  /** Node-probe reports (`src/probe/`), already read; absent: no probe step. */
  probeReports?: readonly ProbeReport[];
  /** Called with how many probe-only findings the per-poll cap left out (only when > 0). */
  onProbeOverflow?: (count: number) => void;
  /**
   * Event times left out as inconsistent (`src/findings/clock-skew.ts`), in words: added as evidence to a cluster-level
   * credential finding, whose 401s a skewed control-plane clock explains. Absent: none were left out.
   */
  clockSkew?: string;
  /** Aborts the wait for cluster-state reads (they end on their own timeouts; serve's shutdown does not wait). */
  signal?: AbortSignal;
}

/** Output of {@link deriveFindings}. */
export interface DerivedFindings {
  /** In {@link compareFindings} order. */
  findings: Finding[];
  /** Cluster-level credential events detected in the findings, already applied to them. */
  clusterEvents: ClusterEvent[];
  /** The token metrics step's error, when it could not read the metrics. */
  metricsError?: string;
}

/** Derives the findings of one cluster; see the module docstring. Rejects with the signal's reason when aborted. */
export async function deriveFindings(input: DeriveInput): Promise<DerivedFindings> {
  const { now } = input;
  const built = await untilAborted(
    buildFindings(input.records, {
      now,
      ...(input.unauthorizedSince !== undefined ? { unauthorizedSince: input.unauthorizedSince } : {}),
      ...(input.tokenExtensionOff ? { tokenExtensionOff: true } : {}),
      ...(input.state ? { state: input.state } : {}),
      ...(input.thresholds ? { thresholds: input.thresholds } : {}),
    }),
    input.signal,
  );
  const clusterEvents = detectCredentialEvents(built);
  let findings = noteClockSkew(applyCredentialEvents(built, clusterEvents), input.clockSkew).sort(compareFindings);
  let metricsShowUse = false;
  let metricsError: string | undefined;
  if (input.tokenMetrics) {
    const m = await input.tokenMetrics(findings, now);
    metricsShowUse = m.showUse;
    metricsError = m.error;
    if (m.findings.length) findings = [...findings, ...m.findings].sort(compareFindings);
  }
  if (input.probeReports) {
    findings = applyProbeReports({
      cluster: input.cluster,
      reports: input.probeReports,
      findings,
      now,
      metricsShowUse,
      ...(input.thresholds ? { thresholds: input.thresholds } : {}),
      ...(input.maxTokenAge ? { maxTokenAge: input.maxTokenAge } : {}),
      ...(input.onProbeOverflow ? { onOverflow: input.onProbeOverflow } : {}),
    });
  }
  return { findings, clusterEvents, ...(metricsError !== undefined ? { metricsError } : {}) };
}
