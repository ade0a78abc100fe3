/**
 * The reusable scan pipeline: read audit logs → aggregate token uses → load cluster state →
 * build findings. Used by `tokenwatch scan` and by anything else that wants the same report
 * from files (e.g. a sandbox or a test), without any terminal concerns.
 */
import { createReadStats, readTokenUses, type ReadOptions, type ReadProgress } from '../sources/reader.js';
import type { ReadNotice, TokenUse } from '../audit/types.js';
import { loadSnapshot } from '../cluster/snapshot.js';
import type { ClusterStateSource } from '../cluster/types.js';
import { TokenAggregator } from '../findings/aggregate.js';
import type { TrustedProxies } from '../core/source-address.js';
import type { Finding, ScanReport, SeverityThresholds } from '../findings/types.js';
import type { MaxTokenAge } from '../config/max-token-age.js';
import { readinessVerdict, type Readiness } from '../findings/readiness.js';
import { applyCredentialEvents, detectCredentialEvents, type ClusterEvent } from '../findings/cluster-events.js';
import { PLAUSIBLE_CLOCK_SKEW_MS, earliestEventTimeOfFiles, latestEventTimeOfFiles } from './latest-event.js';
import { DAY_MS } from '../core/units.js';

/** Progress of the read of one input file (bytes of the file on disk, compressed for `.gz`). */
export type { ReadProgress } from '../sources/reader.js';

/** Options of {@link runScan}. */
export interface ScanOptions {
  /** Input files (audit JSON lines, plain or `.gz`, or CloudWatch exports), read in order. */
  files: string[];
  /** Cluster name put on every finding (the CLI defaults it to `default`). */
  cluster: string;
  /** Path of a `kubectl get ... -A -o json` snapshot (a `v1 List`); without it findings carry no cluster state. */
  snapshot?: string;
  /** How long the API server accepts a stale token (`eks` = 90 days after warnafter). */
  maxTokenAge: MaxTokenAge;
  /** Proxies trusted to append to `X-Forwarded-For` (`src/core/source-address.ts`); default none. */
  trustedProxies?: TrustedProxies;
  /**
   * Reference time for severity and days left, epoch ms UTC. Default: the latest event time in the
   * input (so an old export reads as it did when written), else the current clock when the input
   * holds no event at all.
   */
  now?: number;
  /** Severity thresholds; default: the findings module's `DEFAULT_THRESHOLDS`. */
  thresholds?: SeverityThresholds;
  /** Called as bytes are read, per file (the reader decides how often). */
  onProgress?: (p: ReadProgress) => void;
  /** Called for each reader notice as it happens (they are also returned in {@link ScanResult.notices}). */
  onNotice?: (n: ReadNotice) => void;
  /** Stop with an InputError when one gzip file inflates past this many bytes. Default: no limit. */
  maxDecompressedBytes?: number;
  /** A JSON line or CSV record longer than this is skipped (see `ReadOptions.maxLineBytes`). Default 64 MiB. */
  maxLineBytes?: number;
  /**
   * Worker threads for reading, ≥ 1; default 1 (serial). More than 1 reads large inputs (≥ 64 MiB in all) on that
   * many `node:worker_threads` workers with identical results (see `parallel.ts`); callers should cap it at
   * `maxJobs()` (`os.availableParallelism()`), as the CLI's `--jobs` does.
   */
  jobs?: number;
  /** Minimum audit window for a `safe` readiness verdict, ms; default 7 days (`DEFAULT_READINESS_MIN_WINDOW_MS`). */
  readinessMinWindowMs?: number;
  /** The scanning host's clock (epoch ms UTC), for the plausibility of event times; default `Date.now`. */
  clock?: () => number;
}

/**
 * The latest token-use times kept to judge the default reference time ({@link plausibleLatest}): a few forged events
 * are among them, the bulk of the input is not.
 */
const LATEST_KEPT = 64;
/** A latest event time more than this after the next latest one is "implausibly far past the bulk of the input". */
export const IMPLAUSIBLE_GAP_MS = 7 * DAY_MS;

/** The gap rule of {@link plausibleLatest} applies only with at least this many earlier times (a sparse input has none). */
const GAP_RULE_MIN_BULK = 10;

/** An event time left out of the default reference time, and why. */
export interface IgnoredEventTime {
  /** ISO-8601 UTC. */
  time: string;
  reason: string;
}

/**
 * The latest plausible time of `times` (any order): times after `ceiling` (the clock plus a day) are dropped, then,
 * from the latest down while at least 10 earlier times remain, a time more than {@link IMPLAUSIBLE_GAP_MS} after the
 * next one (the bulk of the input ends before it). Returns the time (undefined when none is left) and the times ignored, with their reason. Pure.
 */
export function plausibleLatest(times: readonly number[], ceiling: number): { latest?: number; ignored: IgnoredEventTime[] } {
  const sorted = [...times].sort((a, b) => b - a);
  const ignored: IgnoredEventTime[] = [];
  let i = 0;
  for (; i < sorted.length && sorted[i]! > ceiling; i++) {
    ignored.push({ time: new Date(sorted[i]!).toISOString(), reason: `later than the scanning host's clock plus ${PLAUSIBLE_CLOCK_SKEW_MS / 3_600_000} h` });
  }
  // The gap rule needs a bulk to compare with: at least GAP_RULE_MIN_BULK other times.
  for (; sorted.length - i - 1 >= GAP_RULE_MIN_BULK && sorted[i]! - sorted[i + 1]! > IMPLAUSIBLE_GAP_MS; i++) {
    ignored.push({
      time: new Date(sorted[i]!).toISOString(),
      reason: `more than ${IMPLAUSIBLE_GAP_MS / DAY_MS} days after every other event (next: ${new Date(sorted[i + 1]!).toISOString()})`,
    });
  }
  return i < sorted.length ? { latest: sorted[i]!, ignored } : { ignored };
}

/** Evidence line added to findings built only from EKS guide-query rows (no `@message`). */
export const GUIDE_QUERY_EVIDENCE =
  'built from EKS guide query rows (subject, elapsedtime) without @message: the input cannot tell pods, user ' +
  'agents or source IPs, so the cause is a guess from the ServiceAccount alone; rerun the query with ' +
  '`fields @timestamp, @message` (or use filter-log-events) to see which pods and clients use the token';

/**
 * A stale-token finding with no pod, user agent or source IP at all can only come from guide-query rows (every
 * audit event of a token use names its source IP): say in its evidence what such input cannot tell.
 */
function noteGuideQueryLimits(f: Finding): void {
  if (f.kind !== 'stale-token' || f.pods.length > 0 || f.userAgents.length > 0 || f.sourceIPs.length > 0) return;
  if (!f.cause.evidence.includes(GUIDE_QUERY_EVIDENCE)) f.cause.evidence.push(GUIDE_QUERY_EVIDENCE);
}

const GKE_EVIDENCE =
  'read from GKE Cloud Audit Logs, whose entries carry no pod claims (user.extra): the pods and workloads using the ' +
  'token cannot be told from them; the node probe or the API server\'s own audit log file can';

/** A finding with no pod read from GKE entries: say in its evidence that GKE does not carry the pod claims. */
function noteGkeLimits(f: Finding): void {
  if (f.pods.length > 0 || f.cause.evidence.includes(GKE_EVIDENCE)) return;
  f.cause.evidence.push(GKE_EVIDENCE);
}

/** Where the reference time of a scan came from. */
export type NowSource = 'option' | 'latest-event' | 'clock';

/** Result of {@link runScan}. */
export interface ScanResult {
  /** The `scan --format json` document (contract: `{findings, stats}`, plus the additive `groups`). */
  report: ScanReport;
  /** Reference time used for severity and days left, epoch ms UTC. */
  now: number;
  /** Where {@link ScanResult.now} came from. */
  nowSource: NowSource;
  /**
   * Latest plausible event time in the input (see {@link plausibleLatest}), epoch ms UTC; undefined when none was
   * found. It ends the audit window of the readiness verdict.
   */
  latestEventTime?: number;
  /**
   * What the reader said about the inputs besides errors (partial / capped Logs Insights results, guide-query
   * input without pods, files truncated at a record, skipped NUL bytes), in the order they happened.
   */
  notices: ReadNotice[];
  /** Event times left out of the default reference time as implausible (empty when `now` was given). */
  ignoredEventTimes: IgnoredEventTime[];
  /** "Is it safe to turn token extension off?" for the cluster (see `src/findings/readiness.ts`). */
  readiness: Readiness;
  /** Cluster-level credential events (signing-key rotation, issuer change; `src/findings/cluster-events.ts`). */
  clusterEvents: ClusterEvent[];
}

/**
 * Runs the whole offline pipeline over audit-log files.
 *
 * The cluster snapshot is loaded first, so a bad snapshot fails before a long read. Token uses are
 * streamed into a {@link TokenAggregator}; memory grows with distinct tokens, not with input size.
 *
 * The default reference time is the latest event time in the input (docs/design/contracts.md "--format json"): the
 * later of the latest token use and the latest event in the last lines of each audit JSON-lines file
 * (see `latest-event.ts`; the reader's prefilter never parses the other events). Event time is
 * `requestReceivedTimestamp`, else `stageTimestamp`.
 *
 * @throws InputError (src/audit/types.ts) for a missing/unreadable input file, an unknown format,
 *   corrupt gzip, or an unreadable/invalid snapshot. Malformed lines are counted in
 *   `stats.malformed`, never thrown.
 */
export async function runScan(opts: ScanOptions): Promise<ScanResult> {
  const state: ClusterStateSource | undefined =
    opts.snapshot === undefined ? undefined : await loadSnapshot(opts.snapshot);

  const stats = createReadStats();
  const aggregator = new TokenAggregator({ cluster: opts.cluster, maxTokenAge: opts.maxTokenAge, ...(opts.trustedProxies ? { trustedProxies: opts.trustedProxies } : {}) });
  const jobs = opts.jobs ?? 1;
  const plan =
    jobs > 1
      ? await (await import('./parallel.js')).planParallelRead(opts.files, {
          jobs,
          ...(opts.maxLineBytes !== undefined ? { maxLineBytes: opts.maxLineBytes } : {}),
          ...(opts.maxDecompressedBytes !== undefined ? { maxDecompressedBytes: opts.maxDecompressedBytes } : {}),
        })
      : undefined;
  // Tails are read alongside the main pass (gzip inflation runs on libuv's thread pool), a few files at a time; in a
  // parallel read the workers keep the tails of the gzip files they inflate anyway. A failed read stops them at once,
  // so the process can exit as soon as the error is reported.
  const abort = new AbortController();
  const tailFiles = plan ? opts.files.filter((f) => !plan.workerTailFiles.has(f)) : opts.files;
  // Tails and heads are read also when `now` is given: they bound the audit window of the readiness verdict.
  const tails = latestEventTimeOfFiles(tailFiles, abort.signal);
  const heads = earliestEventTimeOfFiles(opts.files);
  let latest: number | undefined;
  const notices: ReadNotice[] = [];
  const readOpts: ReadOptions = {
    onNotice: (n) => {
      notices.push(n);
      opts.onNotice?.(n);
    },
    ...(opts.onProgress ? { onProgress: opts.onProgress } : {}),
    ...(opts.maxDecompressedBytes !== undefined ? { maxDecompressedBytes: opts.maxDecompressedBytes } : {}),
    ...(opts.maxLineBytes !== undefined ? { maxLineBytes: opts.maxLineBytes } : {}),
  };
  let workerTails: (() => Promise<number | undefined>) | undefined;
  let uses: AsyncIterable<TokenUse>;
  if (plan) {
    const { readParallel } = await import('./parallel.js');
    const read = readParallel(plan, stats, readOpts);
    uses = read.uses;
    workerTails = read.tailLatest;
  } else {
    uses = readTokenUses(opts.files, stats, readOpts);
  }
  // The findings module (zod, the cause catalog: ~70 ms of CPU) loads while the inputs are read, not before.
  const findingsModule = import('../findings/build.js');
  findingsModule.catch(() => undefined); // awaited below
  const clock = opts.clock ?? Date.now;
  const ceiling = clock() + PLAUSIBLE_CLOCK_SKEW_MS;
  // The LATEST_KEPT latest distinct use times, ascending (bounded: memory does not grow with the input).
  const top: number[] = [];
  let earliest: number | undefined;
  try {
    for await (const use of uses) {
      if (earliest === undefined || use.time < earliest) earliest = use.time;
      if ((top.length < LATEST_KEPT || use.time > top[0]!) && !top.includes(use.time)) {
        top.splice(sortedIndex(top, use.time), 0, use.time);
        if (top.length > LATEST_KEPT) top.shift();
      }
      aggregator.add(use);
    }
  } catch (err) {
    abort.abort();
    await tails; // never rejects; returns promptly once aborted
    throw err;
  }
  const tailTimes = [await tails, await workerTails?.()];
  const tailLatest = tailTimes.reduce<number | undefined>(
    (a, t) => (t !== undefined && (a === undefined || t > a) ? t : a),
    undefined,
  );
  const plausible = plausibleLatest(tailLatest !== undefined ? [...top, tailLatest] : top, ceiling);
  latest = plausible.latest;
  const headEarliest = await heads;
  if (headEarliest !== undefined && (earliest === undefined || headEarliest < earliest)) earliest = headEarliest;

  let now: number;
  let nowSource: NowSource;
  if (opts.now !== undefined) {
    now = opts.now;
    nowSource = 'option';
  } else if (latest !== undefined) {
    now = latest;
    nowSource = 'latest-event';
  } else {
    now = Date.now();
    nowSource = 'clock';
  }

  const { buildFindings, compareFindings } = await findingsModule;
  const built = await buildFindings(aggregator.records(), {
    now,
    ...(opts.thresholds ? { thresholds: opts.thresholds } : {}),
    ...(state ? { state } : {}),
  });
  const clusterEvents = detectCredentialEvents(built);
  const findings = applyCredentialEvents(built, clusterEvents).sort(compareFindings);
  if (notices.some((n) => n.code === 'guide-query')) for (const f of findings) noteGuideQueryLimits(f);
  if (notices.some((n) => n.code === 'gke-fields')) for (const f of findings) noteGkeLimits(f);

  const gaps = notices
    .filter((n) => n.code === 'partial-result' || n.code === 'row-cap' || n.code === 'truncated')
    .map((n) => n.message);
  const readiness = readinessVerdict({
    cluster: opts.cluster,
    findings,
    coverage: {
      ...(earliest !== undefined ? { windowStart: earliest } : {}),
      ...(latest !== undefined ? { windowEnd: latest } : {}),
      events: stats.lines,
      gaps,
      ...(notices.some((n) => n.code === 'guide-query')
        ? { blind: 'the input holds only rows of the EKS guide query, which lists stale uses only: it cannot show a quiet window' }
        : {}),
    },
    ...(opts.readinessMinWindowMs !== undefined ? { minWindowMs: opts.readinessMinWindowMs } : {}),
  });

  const { groupFindings, groupsJson } = await import('../findings/groups.js');
  const report: ScanReport = {
    findings,
    groups: groupsJson(groupFindings(findings)),
    stats: {
      files: stats.files,
      lines: stats.lines,
      events: stats.events,
      tokenUses: stats.tokenUses,
      malformed: stats.malformed,
      duplicates: stats.duplicates,
      ...(stats.auditIdConflicts ? { auditIdConflicts: stats.auditIdConflicts } : {}),
    },
  };
  return {
    report,
    now,
    nowSource,
    notices,
    ignoredEventTimes: opts.now === undefined ? plausible.ignored : [],
    readiness,
    clusterEvents,
    ...(latest !== undefined ? { latestEventTime: latest } : {}),
  };
}

/** Where `t` goes in the ascending array `xs`. */
function sortedIndex(xs: readonly number[], t: number): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (xs[mid]! < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
