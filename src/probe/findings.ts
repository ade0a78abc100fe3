/**
 * Findings from node-probe reports (pure; time is a parameter):
 * - a finding of the same ServiceAccount and kind from audit events gets the observed cause: `static-token-file`,
 *   with the file, node and age in its evidence, and a summary that says it was observed, not inferred;
 * - a token found only by the probe raises its own finding — before any audit event exists — at `info` unless the
 *   API-server metrics show stale use (a kubeconfig left behind by an uninstalled plugin is not a client), with the
 *   rejection date from its `warnafter` and the cluster's `maxTokenAge` (EKS: 90 days after `warnafter`), never later
 *   than the token's own `exp`.
 * Also {@link probeVerifiesRestart}: after a restart, the file was rewritten with a token issued after it.
 */
import { ADDRESS_ONLY_ATTRIBUTION, compareFindings, findingId, STALE_STOP_TOLERANCE_MS } from '../findings/build.js';
import { rejectionTime } from '../findings/token-math.js';
import type { Cause, Finding, FindingKind, FindingToken, Severity, SeverityThresholds } from '../findings/types.js';
import type { MaxTokenAge } from '../config/max-token-age.js';
import type { ProbeEntry, ProbeReport } from './host.js';
import { DAY_MS, DAY_SECONDS, HOUR_MS } from '../core/units.js';

/** A token entry with its node. */
interface Located {
  node: string;
  entry: ProbeEntry & { status: 'token'; namespace: string; serviceAccount: string };
}

const ms = (s: string | null | undefined): number | null => (s ? Date.parse(s) : null);

function age(from: number, now: number): string {
  const d = Math.floor((now - from) / DAY_MS);
  return d >= 1 ? `${d} d` : `${Math.max(0, Math.floor((now - from) / HOUR_MS))} h`;
}

/** The evidence line of one file. */
export function probeEvidence(l: Located, now: number): string {
  const e = l.entry;
  const written = ms(e.mtime);
  const parts = [`node probe: ${e.path} on node ${l.node}`];
  if (written !== null) parts.push(`file written ${age(written, now)} ago (${e.mtime})`);
  if (e.tokenKind === 'legacy') parts.push(`legacy Secret token${e.secretName ? ` (Secret ${e.secretName})` : ''}, no rejection date`);
  else {
    if (e.issuedAt) parts.push(`token issued ${e.issuedAt}`);
    if (e.warnAfter) parts.push(`warnafter ${e.warnAfter}`);
    if (e.rejectionAt) parts.push(`rejected from ${e.rejectionAt}`);
  }
  return parts.join(', ');
}

/**
 * 401s attributed to a ServiceAccount by source address and user agent alone (`Finding.attribution.basis`
 * `address-only`, src/findings/build.ts) are corroborated when the probe found a token of that ServiceAccount in a
 * file on a node whose rejection date had passed when the 401s started (within {@link STALE_STOP_TOLERANCE_MS}): the
 * token such a client presents is one the API server refuses. The finding becomes `critical` and says so.
 */
function corroborate401s(findings: Finding[], items: readonly Located[]): void {
  for (const f of findings) {
    if (f.kind !== 'unauthorized' || f.attribution?.basis !== 'address-only') continue;
    const start = Date.parse(f.firstSeen);
    const hit = items.find((l) => {
      if (l.entry.namespace !== f.namespace || l.entry.serviceAccount !== f.serviceAccount) return false;
      const rej = ms(l.entry.rejectionAt);
      return rej !== null && Number.isFinite(start) && rej <= start + STALE_STOP_TOLERANCE_MS;
    });
    if (!hit) continue;
    f.attribution = {
      basis: 'corroborated',
      text: `401s attributed by source address and user agent, corroborated by the node probe: ${hit.entry.path} on node ${hit.node} holds a token of this ServiceAccount rejected from ${hit.entry.rejectionAt}, before the 401s started (${f.firstSeen})`,
    };
    f.severity = 'critical';
    f.cause = { ...f.cause, evidence: [...f.cause.evidence.filter((e) => !e.includes(ADDRESS_ONLY_ATTRIBUTION)), f.attribution.text] };
  }
}

/** Token entries of the reports, with their node. */
function located(reports: readonly ProbeReport[]): Located[] {
  const out: Located[] = [];
  for (const r of reports) {
    for (const e of r.entries) {
      if (e.status === 'token' && e.namespace && e.serviceAccount) out.push({ node: r.node, entry: e as Located['entry'] });
    }
  }
  return out;
}

/** The finding kind a probe token stands for, or undefined when it says nothing yet (a bound token before warnafter). */
function kindOf(e: ProbeEntry, now: number): FindingKind | undefined {
  if (e.tokenKind === 'legacy') return 'legacy-token';
  const warn = ms(e.warnAfter);
  return warn !== null && warn <= now ? 'stale-token' : undefined;
}

/** Options of {@link applyProbeReports}. */
export interface ProbeFindingOptions {
  cluster: string;
  reports: readonly ProbeReport[];
  /** This poll's findings (audit and metrics). */
  findings: readonly Finding[];
  now: number;
  /** Whether API-server metrics show stale use right now (raises probe-only findings above `info`). */
  metricsShowUse: boolean;
  thresholds?: SeverityThresholds;
  /**
   * When the API server rejects a stale token (the cluster's `maxTokenAge`, `scan --max-token-age`). A bound token's
   * `exp` is its real expiry only upstream (issue + 1 year); EKS rejects 90 days after `warnafter` (EKS user guide,
   * service accounts; docs/design/domain.md §1). Default: the token's `exp`.
   */
  maxTokenAge?: MaxTokenAge;
  /**
   * Most findings the probe alone may raise in one poll (default {@link MAX_PROBE_FINDINGS_PER_POLL}); those with
   * the nearest rejection date are kept. Audit findings it annotates are not counted.
   */
  maxNewFindings?: number;
  /** Called with how many probe-only findings the cap left out (only when > 0). */
  onOverflow?: (count: number) => void;
}

/** Default of {@link ProbeFindingOptions.maxNewFindings}. */
export const MAX_PROBE_FINDINGS_PER_POLL = 20;

/** The entry with `rejectionAt` = min(`exp`, `warnafter` + maxTokenAge), as ISO-8601 UTC. */
function withRejection(l: Located, maxTokenAge: MaxTokenAge | undefined): Located {
  const warn = ms(l.entry.warnAfter);
  if (maxTokenAge === undefined || warn === null || l.entry.tokenKind === 'legacy') return l;
  const exp = ms(l.entry.rejectionAt);
  const byAge = rejectionTime(warn, maxTokenAge);
  const at = exp === null ? byAge : Math.min(exp, byAge);
  return { node: l.node, entry: { ...l.entry, rejectionAt: new Date(at).toISOString() } };
}

function observedCause(prev: Cause | undefined, lines: string[]): Cause {
  const summary = 'Observed, not inferred: the node probe found this ServiceAccount\'s token in a file on the node; a client that reads a token copied into a file keeps using it after rotation.';
  return {
    id: 'static-token-file',
    component: prev?.component ?? null,
    summary: prev?.id === 'static-token-file' ? `${summary} ${prev.summary}` : summary,
    fix:
      prev?.id === 'static-token-file'
        ? prev.fix
        : 'Find the component that writes this file (CNI plugin, node agent) and move it to a projected token read at use time; a rollout restart of it rewrites the file with a fresh token but only buys one more period. A file left behind by an uninstalled plugin can be deleted.',
    evidence: [...lines, ...(prev?.evidence ?? [])],
    sources: [...new Set([...(prev?.sources ?? []), 'tokenwatch node probe (manifests/probe)'])],
  };
}

function severityFor(rejectionAt: number | null, now: number, t: SeverityThresholds): Severity {
  if (rejectionAt === null) return 'warning';
  const left = (rejectionAt - now) / 1000;
  return left < t.criticalSeconds ? 'critical' : left < t.warningSeconds ? 'warning' : 'info';
}

/**
 * The poll's findings with the probe's facts applied (see the module docstring). Audit findings keep their counts;
 * probe-only findings have `requests: 0`. Returns a new array; inputs are not modified.
 */
export function applyProbeReports(o: ProbeFindingOptions): Finding[] {
  const t = o.thresholds ?? { criticalSeconds: 7 * DAY_SECONDS, warningSeconds: 30 * DAY_SECONDS };
  const groups = new Map<string, { namespace: string; serviceAccount: string; kind: FindingKind; items: Located[] }>();
  for (const l of located(o.reports).map((x) => withRejection(x, o.maxTokenAge))) {
    const kind = kindOf(l.entry, o.now);
    if (kind === undefined) continue;
    const k = `${l.entry.namespace}/${l.entry.serviceAccount}/${kind}`;
    const g = groups.get(k) ?? { namespace: l.entry.namespace, serviceAccount: l.entry.serviceAccount, kind, items: [] };
    g.items.push(l);
    groups.set(k, g);
  }
  const out = o.findings.map((f) => ({ ...f }));
  const probeOnly: Finding[] = [];
  for (const g of groups.values()) {
    const lines = g.items.map((l) => probeEvidence(l, o.now));
    const existing = out.find((f) => f.namespace === g.namespace && f.serviceAccount === g.serviceAccount && f.kind === g.kind);
    if (existing) {
      existing.cause = observedCause(existing.cause, lines);
      continue;
    }
    const rejections = g.items.map((l) => ms(l.entry.rejectionAt)).filter((x): x is number => x !== null);
    const rejectionAt = rejections.length ? Math.min(...rejections) : null;
    const times = g.items.map((l) => ms(l.entry.mtime) ?? o.now);
    const severity: Severity = o.metricsShowUse ? severityFor(rejectionAt, o.now, t) : 'info';
    const tokens: FindingToken[] = g.items.map((l) => ({
      pod: l.entry.pod ?? null,
      podUid: l.entry.podUid ?? null,
      node: l.entry.node ?? l.node,
      warnAfter: l.entry.warnAfter ?? null,
      rejectionAt: l.entry.rejectionAt ?? null,
      requests: 0,
      lastSeen: l.entry.mtime ?? new Date(o.now).toISOString(),
    }));
    const warn = g.items.map((l) => ms(l.entry.warnAfter)).filter((x): x is number => x !== null);
    probeOnly.push({
      id: findingId(o.cluster, g.namespace, g.serviceAccount, g.kind),
      cluster: o.cluster,
      namespace: g.namespace,
      serviceAccount: g.serviceAccount,
      kind: g.kind,
      severity,
      requests: 0,
      firstSeen: new Date(Math.min(...times)).toISOString(),
      lastSeen: new Date(Math.max(...times)).toISOString(),
      maxSecondsAfterWarning: warn.length ? Math.round((o.now - Math.min(...warn)) / 1000) : null,
      rejectionAt: rejectionAt === null ? null : new Date(rejectionAt).toISOString(),
      tokens,
      pods: [...new Set(g.items.map((l) => l.entry.pod).filter((p): p is string => !!p))],
      workloads: [],
      userAgents: [],
      sourceIPs: [],
      cause: observedCause(undefined, [
        ...lines,
        o.metricsShowUse
          ? 'API-server metrics show stale tokens in use; no audit event names the client'
          : 'no use seen yet (no audit event, no rise in API-server metrics): the file may be left over from an uninstalled plugin',
      ]),
    });
  }
  corroborate401s(out, located(o.reports).map((x) => withRejection(x, o.maxTokenAge)));
  const cap = Math.max(0, o.maxNewFindings ?? MAX_PROBE_FINDINGS_PER_POLL);
  if (probeOnly.length > cap) {
    probeOnly.sort((a, b) => (a.rejectionAt ?? '9999').localeCompare(b.rejectionAt ?? '9999') || a.id.localeCompare(b.id));
    o.onOverflow?.(probeOnly.length - cap);
  }
  out.push(...probeOnly.slice(0, cap));
  return out.sort(compareFindings);
}

/** Result of {@link probeVerifiesRestart}. */
export interface ProbeRestartCheck {
  /** True when every file holding a token of the subject now holds one issued after the restart. */
  verified: boolean;
  /** Evidence lines, one per file. */
  evidence: string[];
  /** Files still holding a token issued before the restart. */
  stale: string[];
  /** Each file of the subject: where, its token's issue time (ISO-8601, or null) and whether it was rewritten. */
  files: ProbeRestartFile[];
}

/** One file of {@link ProbeRestartCheck}. */
export interface ProbeRestartFile {
  path: string;
  node: string;
  issuedAt: string | null;
  /** The token it holds was issued at or after the restart. */
  rewritten: boolean;
}

/**
 * Verifies a restart by the probe: the files that held the subject's token were rewritten with a token issued
 * after `restartedAt` (epoch ms). Not verified when no file of the subject is reported.
 */
export function probeVerifiesRestart(reports: readonly ProbeReport[], subject: { namespace: string; serviceAccount: string }, restartedAt: number, now: number): ProbeRestartCheck {
  const mine = located(reports).filter((l) => l.entry.namespace === subject.namespace && l.entry.serviceAccount === subject.serviceAccount);
  const stale = mine.filter((l) => (ms(l.entry.issuedAt) ?? 0) < restartedAt);
  return {
    verified: mine.length > 0 && stale.length === 0,
    evidence: mine.map((l) => probeEvidence(l, now)),
    stale: stale.map((l) => `${l.entry.path} on node ${l.node}`),
    files: mine.map((l) => ({ path: l.entry.path, node: l.node, issuedAt: l.entry.issuedAt ?? null, rewritten: !stale.includes(l) })),
  };
}
