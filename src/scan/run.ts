/**
 * The reusable scan pipeline: read audit logs → aggregate token uses → load cluster state →
 * derive findings (`src/pipeline/derive.ts`, the derivation serve's poll runs too). Used by `tokenwatch scan` and by anything else that wants the same report
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
import type { ClusterEvent } from '../findings/cluster-events.js';
import type { ProbeReport } from '../probe/host.js';
import type { DeriveInput } from '../pipeline/derive.js';
import { TAIL_BYTES, earliestEventTimeInHead, earliestEventTimeOfFiles, edgeCountFrom, latestEventTimeInTail, latestEventTimeOfFiles } from './latest-event.js';
import type { StreamEdges } from '../sources/stream-edges.js';
import type { PlanOptions } from './parallel.js';
import { EventTimeDensity, MAX_SKEWED_SHARE, SKEW_GAP_MS, inconsistentTimesText, judgeEventTimes, type IgnoredEventTime } from '../findings/clock-skew.js';
import { STDIN } from '../sources/reader.js';

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
  /**
   * Overrides of the parallel read's planning (`PlanOptions` of `parallel.ts`: `minBytes`, `minPlainBytes`,
   * `partBytes`, `maxHitsPerMiB`, `onDensity`), so tests can take the parallel path with small files. Default: the planner's.
   */
  parallelPlan?: Pick<PlanOptions, 'minBytes' | 'minPlainBytes' | 'partBytes' | 'maxHitsPerMiB' | 'onDensity'>;
  /** Minimum audit window for a `safe` readiness verdict, ms; default 7 days (`DEFAULT_READINESS_MIN_WINDOW_MS`). */
  readinessMinWindowMs?: number;
  /** The scanning host's clock (epoch ms UTC), for the plausibility of event times; default `Date.now`. */
  clock?: () => number;
  /** Node-probe reports (`scan --probe-report`): applied to the findings as serve's poll applies them. */
  probeReports?: readonly ProbeReport[];
  /**
   * The API-server token metrics step (`scan --metrics`), called with the audit findings and the reference time; its
   * `showUse` raises probe-only findings above `info` (`DeriveInput.tokenMetrics`).
   */
  tokenMetrics?: DeriveInput['tokenMetrics'];
}

export type { IgnoredEventTime } from '../findings/clock-skew.js';

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
   * Latest consistent event time in the input (see `clock-skew.ts`), epoch ms UTC; undefined when none was
   * found. It ends the audit window of the readiness verdict.
   */
  latestEventTime?: number;
  /**
   * What the reader said about the inputs besides errors (partial / capped Logs Insights results, guide-query
   * input without pods, files truncated at a record, skipped NUL bytes), in the order they happened.
   */
  notices: ReadNotice[];
  /**
   * Event times left out as inconsistent (`clock-skew.ts`): they set neither the reference time nor the readiness
   * window, and their token uses make no tokens or rejection dates. Listed also when `now` was given.
   */
  ignoredEventTimes: IgnoredEventTime[];
  /** "Is it safe to turn token extension off?" for the cluster (see `src/findings/readiness.ts`). */
  readiness: Readiness;
  /** Cluster-level credential events (signing-key rotation, issuer change; `src/findings/cluster-events.ts`). */
  clusterEvents: ClusterEvent[];
}

/**
 * Collects the times of a file's first or last lines that the clock-skew rule leaves out (among those lines' own
 * times), each (file, time) once — a small file's head and tail are the same lines — and at most 10,000.
 */
function edgeSkewCollector(): { edgeSkewed: { time: number; file?: string }[]; onSkewed: (time: number, file?: string) => void } {
  const edgeSkewed: { time: number; file?: string }[] = [];
  const seen = new Set<string>();
  const onSkewed = (time: number, file?: string) => {
    const k = `${file ?? ''}\0${time}`;
    if (seen.has(k) || edgeSkewed.length >= 10_000) return;
    seen.add(k);
    edgeSkewed.push(file !== undefined ? { time, file } : { time });
  };
  return { edgeSkewed, onSkewed };
}

/**
 * Puts the input's edges into `density`: the first and last lines kept from standard input and pipes are judged as a
 * file's are (their events to `edgeTime`, their skewed times to `onSkewed`, named "standard input" for `-`); then the
 * latest of all tail times and the earliest of all head times (epoch ms UTC) go in with no weight — they bound the
 * audit window, and their events are already counted (or are lines the prefilter passes that are no token use).
 */
function addEdgeBounds(
  density: EventTimeDensity,
  tailTimes: (number | undefined)[],
  headTimes: (number | undefined)[],
  streamEdges: readonly StreamEdges[],
  onSkewed: (time: number, file?: string) => void,
  edgeTime: (time: number) => void,
): void {
  for (const e of streamEdges) {
    const skewed = (t: number): void => onSkewed(t, e.file === STDIN ? 'standard input' : e.file);
    headTimes.push(earliestEventTimeInHead(e.head, e.partialLast, skewed, undefined, edgeTime));
    tailTimes.push(latestEventTimeInTail(e.tail, e.partialFirst, undefined, skewed, { from: edgeCountFrom(e.total, e.tail.length), sink: edgeTime }));
  }
  const tailLatest = tailTimes.reduce<number | undefined>((a, t) => (t !== undefined && (a === undefined || t > a) ? t : a), undefined);
  const headEarliest = headTimes.reduce<number | undefined>((a, t) => (t !== undefined && (a === undefined || t < a) ? t : a), undefined);
  if (tailLatest !== undefined) density.add(tailLatest, 0);
  if (headEarliest !== undefined) density.add(headEarliest, 0);
}

/** The reference time (epoch ms UTC) and where it came from: `--now`, else the latest consistent event time, else the clock. */
function referenceTime(given: number | undefined, latest: number | undefined): { now: number; nowSource: NowSource } {
  if (given !== undefined) return { now: given, nowSource: 'option' };
  if (latest !== undefined) return { now: latest, nowSource: 'latest-event' };
  return { now: Date.now(), nowSource: 'clock' };
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
          ...opts.parallelPlan,
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
  const { edgeSkewed, onSkewed } = edgeSkewCollector();
  // Event times per hour (memory: one entry per distinct hour), judged by the clock-skew rule after the read: every
  // token use, every other event of each file's first and last lines and event times sampled across the middle of
  // every file (docs/clock-skew.md), so that the bulk of the input is its events, not only its token uses.
  const density = new EventTimeDensity();
  const edgeTime = (t: number): void => density.add(t);
  const tails = latestEventTimeOfFiles(tailFiles, abort.signal, onSkewed, edgeTime);
  const heads = earliestEventTimeOfFiles(opts.files, onSkewed, edgeTime);
  const notices: ReadNotice[] = [];
  // Standard input and pipes cannot be read twice: the reader keeps their first and last lines as it reads them.
  const streamEdges: StreamEdges[] = [];
  const readOpts: ReadOptions = {
    streamEdges: { bytes: TAIL_BYTES, onEdges: (e) => streamEdges.push(e) },
    // Event times sampled across the middle of every audit JSON-lines input, each standing for the events around it.
    onTimeSample: (t, weight) => density.addSample(t, weight),
    onNotice: (n) => {
      notices.push(n);
      opts.onNotice?.(n);
    },
    ...(opts.onProgress ? { onProgress: opts.onProgress } : {}),
    ...(opts.maxDecompressedBytes !== undefined ? { maxDecompressedBytes: opts.maxDecompressedBytes } : {}),
    ...(opts.maxLineBytes !== undefined ? { maxLineBytes: opts.maxLineBytes } : {}),
  };
  let workerTails: ((edge: (time: number) => void) => Promise<number | undefined>) | undefined;
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
  const findingsModule = import('../pipeline/derive.js');
  findingsModule.catch(() => undefined); // awaited below
  const clock = opts.clock ?? Date.now;
  const useDensity = new EventTimeDensity(); // token uses only: do any of them need leaving out?
  try {
    for await (const use of uses) {
      density.add(use.time);
      useDensity.add(use.time);
      aggregator.add(use);
    }
  } catch (err) {
    abort.abort();
    await tails; // never rejects; returns promptly once aborted
    throw err;
  }
  addEdgeBounds(density, [await tails, await workerTails?.(edgeTime)], [await heads], streamEdges, onSkewed, edgeTime);
  const judged = judgeEventTimes(density, clock());
  const latest = judged.latest;
  const earliest = judged.earliest;
  let ignoredEventTimes = [...judged.ignored, ...edgeSkewedEntries(edgeSkewed.filter((t) => !judged.inconsistent(t.time)))];
  let usesAggregator = aggregator;
  if (ignoredEventTimes.length > 0 && useDensity.sorted().some((b) => judged.inconsistent(b.min) || judged.inconsistent(b.max))) {
    const again = await withoutInconsistentUses(opts, aggregator, judged.inconsistent, ignoredEventTimes);
    usesAggregator = again.aggregator;
    ignoredEventTimes = again.ignored;
  }

  const { now, nowSource } = referenceTime(opts.now, latest);

  const { deriveFindings } = await findingsModule;
  const { findings, clusterEvents } = await deriveFindings({
    cluster: opts.cluster,
    records: usesAggregator.records(),
    now,
    maxTokenAge: opts.maxTokenAge,
    ...(opts.thresholds ? { thresholds: opts.thresholds } : {}),
    ...(state ? { state } : {}),
    ...(opts.tokenMetrics ? { tokenMetrics: opts.tokenMetrics } : {}),
    ...(opts.probeReports ? { probeReports: opts.probeReports } : {}),
    ...(ignoredEventTimes.length > 0 ? { clockSkew: inconsistentTimesText(ignoredEventTimes) } : {}),
  });
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
      ...(ignoredEventTimes.length > 0 ? { inconsistentTimes: inconsistentTimesText(ignoredEventTimes) } : {}),
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
      ...(stats.oversized ? { oversized: stats.oversized } : {}),
      ...(stats.nulLines ? { nulLines: stats.nulLines } : {}),
    },
  };
  return {
    report,
    now,
    nowSource,
    notices,
    ignoredEventTimes,
    readiness,
    clusterEvents,
    ...(latest !== undefined ? { latestEventTime: latest } : {}),
  };
}

/** One `ignoredEventTimes` entry per file for the times of its first or last lines the clock-skew rule left out. */
function edgeSkewedEntries(times: readonly { time: number; file?: string }[]): IgnoredEventTime[] {
  const byFile = new Map<string, number[]>();
  for (const t of times) {
    const k = t.file ?? '';
    byFile.set(k, [...(byFile.get(k) ?? []), t.time]);
  }
  return [...byFile.entries()].map(([file, ts]) => {
    const from = Math.min(...ts);
    const to = Math.max(...ts);
    return {
      time: new Date(from).toISOString(),
      ...(to !== from ? { until: new Date(to).toISOString() } : {}),
      count: ts.length,
      reason: `among the file's first or last lines, more than ${SKEW_GAP_MS / 3_600_000} h apart from the rest of them and at most ${MAX_SKEWED_SHARE * 100}% as many — a wrong clock on the node that wrote them?`,
      ...(file !== '' ? { source: file } : {}),
    };
  });
}

/**
 * The aggregator of the input's token uses without those at inconsistent times (`clock-skew.ts`), and the ignored
 * ranges with the files that hold them. Files are read again, one by one (only when the rule caught times: rare); a
 * standard-input read cannot be repeated, so there the records made only of inconsistent uses (phantom tokens) are
 * dropped and the others kept as they are.
 */
async function withoutInconsistentUses(
  opts: ScanOptions,
  first: TokenAggregator,
  inconsistent: (t: number) => boolean,
  ignored: IgnoredEventTime[],
): Promise<{ aggregator: TokenAggregator; ignored: IgnoredEventTime[] }> {
  if (opts.files.includes(STDIN)) {
    const kept = first.records().filter((r) => !(inconsistent(r.firstSeen) && inconsistent(r.lastSeen)));
    return { aggregator: TokenAggregator.from({ cluster: opts.cluster, maxTokenAge: opts.maxTokenAge }, kept), ignored: ignored.map((t) => ({ ...t, source: 'standard input' })) };
  }
  const aggregator = new TokenAggregator({ cluster: opts.cluster, maxTokenAge: opts.maxTokenAge });
  const inRange = (t: IgnoredEventTime, time: number) => time >= Date.parse(t.time) && time <= Date.parse(t.until ?? t.time);
  const files = ignored.map(() => new Set<string>());
  const readOpts: ReadOptions = {
    ...(opts.maxDecompressedBytes !== undefined ? { maxDecompressedBytes: opts.maxDecompressedBytes } : {}),
    ...(opts.maxLineBytes !== undefined ? { maxLineBytes: opts.maxLineBytes } : {}),
  };
  for (const file of opts.files) {
    for await (const use of readTokenUses([file], createReadStats(), readOpts)) {
      if (!inconsistent(use.time)) {
        aggregator.add(use);
        continue;
      }
      const i = ignored.findIndex((t) => inRange(t, use.time));
      if (i !== -1) files[i]!.add(file);
    }
  }
  return {
    aggregator,
    ignored: ignored.map((t, i) => (files[i]!.size > 0 ? { ...t, source: [...files[i]!].join(', ') } : t)),
  };
}
