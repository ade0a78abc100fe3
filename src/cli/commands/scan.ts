/**
 * `tokenwatch scan`: one offline pass over audit-log files, printing findings as a table or as
 * the JSON contract (docs/design/contracts.md "--format json").
 *
 * JSON output is the contract's `{findings, stats}` plus additive fields: top-level `now` (the ISO-8601 UTC
 * reference time used for severity and days left), `cluster` (the cluster name given with `--cluster`, `default`
 * when absent) and `warnings` (reader notices, also printed on stderr), and `stats.truncated` (files that could not
 * be read to their end, with the record where reading stopped).
 */
import { InvalidArgumentError, Option, type Command } from 'commander';
import type { Severity } from '../../findings/types.js';
import type { MaxTokenAge } from '../../config/max-token-age.js';
import type { ScanResult } from '../../scan/run.js';
import type { MetricsReport } from '../metrics-report.js';
import type { ReadNotice } from '../../audit/types.js';
import { atOrAbove, DEFAULT_WIDTH, isoSeconds, outputWidth, renderScanTable, shouldUseColor } from '../format.js';
import { availableParallelism } from 'node:os';
import { parseByteSize, parseClusterName, parseJobs, parseMaxTokenAgeFlag, parseNow } from '../options.js';
import { escapeControl } from '../escape.js';
import { UsageError } from '../program.js';
import { DNS1123_LABEL, DNS1123_LABEL_WORDS } from '../../core/names.js';
import { parseDuration } from '../../config/duration.js';
import { isAddressOrCidr, parseTrustedProxies } from '../../core/source-address.js';

/** Collects `--trusted-proxy` values; an entry that is neither an address nor a CIDR block is a usage error. */
function collectTrustedProxy(value: string, previous: string[] | undefined): string[] {
  if (!isAddressOrCidr(value)) throw new InvalidArgumentError(`expected an IP address or a CIDR block (e.g. 10.0.0.0/8), got ${JSON.stringify(value)}`);
  return [...(previous ?? []), value];
}

/** Cluster name used when `--cluster` is not given. */
export const DEFAULT_CLUSTER = 'default';

/** Parsed `scan` options, as commander hands them to the action. */
interface ScanFlags {
  auditLog?: string[];
  /** `--metrics FILE`. */
  metrics?: string;
  /** `--probe-report FILE`. */
  probeReport?: string;
  cluster: string;
  clusterSnapshot?: string;
  maxTokenAge: MaxTokenAge;
  format: 'table' | 'json';
  /** `--wide`: the full table instead of one fitted to the terminal. */
  wide?: boolean;
  failOn?: Severity;
  now?: number;
  /** `--trusted-proxy ADDR|CIDR`, repeatable. */
  trustedProxy?: string[];
  maxDecompressedBytes?: number;
  jobs?: number;
  readinessMinWindow?: number;
}

/**
 * The `scan --format json` document: the contract plus the additive `now`, `cluster` and `warnings`
 * (`[{file, code, message, row?}]`, see `ReadNotice`) fields, `stats.truncated` (`[{file, row, message}]`:
 * files not read past data record `row`, 1-based), `ignoredEventTimes` (`[{time, reason, until?, count?, source?}]`:
 * event times left out as inconsistent by the rule of `src/findings/clock-skew.ts`), `readiness` (the token-extension verdict, `Readiness` in
 * `src/findings/readiness.ts`) and `clusterEvents` (`ClusterEvent[]` of `src/findings/cluster-events.ts`: signing-key
 * rotations and issuer changes, once per cluster) and `groups` (`ScanGroup[]` of `src/findings/types.ts`: the
 * findings grouped per ServiceAccount, one entry per alert, each naming its `findings[].id`s).
 */
export function jsonDocument(result: ScanResult, cluster: string): object {
  const truncated = result.notices
    .filter((n) => n.code === 'truncated')
    .map((n) => ({ file: n.file, row: n.row ?? null, message: n.message }));
  return {
    findings: result.report.findings,
    groups: result.report.groups ?? [],
    stats: { ...result.report.stats, truncated },
    now: isoSeconds(result.now),
    cluster,
    warnings: result.notices,
    ignoredEventTimes: result.ignoredEventTimes,
    readiness: result.readiness,
    clusterEvents: result.clusterEvents,
  };
}

/**
 * The warning for a `--cluster` name that `serve` would refuse (its config requires a DNS-1123 label), or undefined.
 * `scan` only warns: refusing would turn runs that exit 0 today into exit 2.
 */
export function clusterNameWarning(name: string): string | undefined {
  if (DNS1123_LABEL.test(name)) return undefined;
  return `--cluster ${JSON.stringify(name)} is not ${DNS1123_LABEL_WORDS}; scan accepts it, but serve's config (clusters[].name) would refuse it`;
}

/** `--readiness-min-window`: a duration (`7d`, `36h`, `90m`; `parseDuration` of the config module). */
function parseReadinessWindow(value: string): number {
  try {
    return parseDuration(value);
  } catch (e) {
    throw new UsageError(`--readiness-min-window: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/** Registers `tokenwatch scan` on the program. */
export function register(program: Command): void {
  program
    .command('scan')
    .description('Scan API-server audit logs for stale, legacy and unauthorized ServiceAccount token use.')
    .argument('[file...]', 'audit log files, the same as --audit-log FILE... (as grep and jq take them)')
    .option(
      '--audit-log <file...>',
      'audit log files (plain or .gz; `-` for standard input): JSON lines, webhook batches (EventList), pretty/array/concatenated JSON, CloudWatch export to S3, `aws logs tail` text, `aws logs filter-log-events` or `get-query-results` JSON, Logs Insights export (JSON or CSV), GKE Cloud Audit Logs, AKS kube-audit records, Loki `logcli --output=jsonl`; repeatable (required unless --metrics or --probe-report is given)',
    )
    .option(
      '--probe-report <file>',
      'node-probe reports (`kubectl get configmaps -n tokenwatch-probe -l app.kubernetes.io/component=tokenwatch-probe-report -o json`): token files on nodes become observed causes and findings',
    )
    .option(
      '--metrics <file>',
      'saved API-server metrics (`kubectl get --raw /metrics > FILE`): token-use totals since that API-server process started and their average rate as of --now',
    )
    .addOption(
      new Option('--cluster <name>', 'cluster name put on findings').default(DEFAULT_CLUSTER).argParser(parseClusterName),
    )
    .option(
      '--cluster-snapshot <file>',
      'output of `kubectl get pods,daemonsets,deployments,statefulsets,replicasets,jobs,cronjobs,serviceaccounts,secrets -A -o json`, to name workloads and causes',
    )
    .addOption(
      new Option(
        '--max-token-age <limit>',
        'when the API server rejects a stale token: eks (90 d after warnafter), upstream (1 year after issue), SECONDS or a duration such as 90d after warnafter (as maxTokenAge in the config)',
      )
        .default({ mode: 'eks' } satisfies MaxTokenAge, 'eks')
        .argParser(parseMaxTokenAgeFlag),
    )
    .addOption(new Option('--format <format>', 'output format').choices(['table', 'json']).default('table'))
    .option(
      '--wide',
      `the full table (pods, token age, cause in columns; as wide as its cells) instead of one fitted to the terminal (COLUMNS or ${DEFAULT_WIDTH} columns when not a terminal)`,
    )
    .addOption(
      new Option('--fail-on <severity>', 'exit 1 when a finding at or above this severity exists').choices([
        'info',
        'warning',
        'critical',
      ]),
    )
    .addOption(
      new Option(
        '--now <iso>',
        'reference time for severity and days left, ISO-8601 with zone (default: latest event time in the input)',
      ).argParser(parseNow),
    )
    .addOption(
      new Option(
        '--trusted-proxy <address|cidr>',
        'a proxy in front of the API server trusted to append the address it saw to X-Forwarded-For; repeatable. Requests are attributed to the rightmost sourceIPs entry not listed (default: the connection\'s own address, the last entry)',
      ).argParser(collectTrustedProxy),
    )
    .addOption(
      new Option(
        '--readiness-min-window <duration>',
        'shortest audit window for a "safe" token-extension readiness verdict, e.g. 7d, 36h (default: 7d)',
      ).argParser(parseReadinessWindow),
    )
    .addOption(
      new Option(
        '--max-decompressed-bytes <size>',
        'stop with an error when one gzip input inflates past this size (e.g. 20GiB; default: no limit)',
      ).argParser(parseByteSize),
    )
    .addOption(
      new Option(
        '--jobs <n>',
        `worker threads for inputs of 64 MiB or more (.gz counted uncompressed; plain JSON-lines files alone: 1.5 GiB or more): plain JSON-lines files are split, .gz files and exports are read whole, one per thread; dense input (many token uses) is read by one thread, which is faster there; capped at the available CPUs (default: ${availableParallelism()}, the available CPUs, or 1 when other work keeps them all busy as the scan starts)`,
      ).argParser((v) => parseJobs(v)),
    )
    .addHelpText(
      'after',
      `
Exit codes: 0 success, 1 a finding at or above --fail-on exists, 2 bad arguments or unreadable input
(including a file in which no record is an audit event in a known format).
Warnings (partial or 10,000-row Logs Insights results, guide-query input without pods, truncated files)
go to stderr as "tokenwatch: warning: …" and to the JSON "warnings" field.

Examples:
  tokenwatch scan /var/log/kubernetes/audit.log*
  tokenwatch scan --audit-log /var/log/kubernetes/audit.log*
  tokenwatch scan --audit-log events.json --cluster prod-eks --cluster-snapshot state.json --fail-on warning
  tokenwatch scan --audit-log audit.log.gz --format json --now 2026-11-20T12:00:00Z
  kubectl get --raw /metrics > metrics.txt && tokenwatch scan --metrics metrics.txt --now "$(date -u +%FT%TZ)"`,
    )
    .action(async (files: string[], flags: ScanFlags) => {
      // Loaded on use, so `--help` and argument errors stay fast (the pipeline pulls in zod, the catalog, …).
      const auditLog = [...(flags.auditLog ?? []), ...files];
      if (auditLog.length === 0 && flags.metrics === undefined && flags.probeReport === undefined) {
        throw new UsageError(
          "required option '--audit-log <file...>' not specified (or give the files as arguments, --metrics <file> or --probe-report <file>)",
        );
      }
      const clusterWarning = clusterNameWarning(flags.cluster);
      if (clusterWarning !== undefined) process.stderr.write(`tokenwatch: warning: ${escapeControl(clusterWarning)}\n`);
      const { runScan } = await import('../../scan/run.js');
      // cli-progress only for a terminal: pipes and CI logs never show a bar (and never load it).
      const progress = process.stderr.isTTY
        ? (await import('../progress.js')).startProgress(auditLog, process.stderr)
        : undefined;
      let result: ScanResult;
      const notices: ReadNotice[] = [];
      // Loaded only with --metrics / --probe-report (a plain scan's start-up need not pay for them).
      const metricsModule = flags.metrics !== undefined ? await import('../metrics-report.js') : undefined;
      let metrics: MetricsReport | undefined;
      const probeReports = flags.probeReport !== undefined ? await (await import('../../probe/scan-input.js')).probeReportsFromFile(flags.probeReport) : undefined;
      try {
        result = await runScan({
          files: auditLog,
          cluster: flags.cluster,
          maxTokenAge: flags.maxTokenAge,
          ...(flags.trustedProxy?.length ? { trustedProxies: parseTrustedProxies(flags.trustedProxy) } : {}),
          ...(flags.clusterSnapshot !== undefined ? { snapshot: flags.clusterSnapshot } : {}),
          ...(flags.now !== undefined ? { now: flags.now } : {}),
          ...(progress ? { onProgress: progress.onProgress } : {}),
          ...(flags.maxDecompressedBytes !== undefined ? { maxDecompressedBytes: flags.maxDecompressedBytes } : {}),
          onNotice: (n) => notices.push(n),
          jobs: flags.jobs ?? (await import('../../scan/parallel.js')).defaultJobs(),
          ...(flags.readinessMinWindow !== undefined ? { readinessMinWindowMs: flags.readinessMinWindow } : {}),
          ...(probeReports ? { probeReports } : {}),
          ...(flags.metrics !== undefined && metricsModule
            ? {
                // The same step as serve's token metrics (src/pipeline/derive.ts), from a file: it adds no finding.
                tokenMetrics: async (_auditFindings, now) => {
                  metrics = await metricsModule.metricsReportFromFile(flags.metrics as string, now);
                  return { findings: [], showUse: (metrics.totals['serviceaccount_stale_tokens_total'] ?? 0) > 0 };
                },
              }
            : {}),
        });
      } finally {
        progress?.stop();
        // After the bar is gone (also when the read failed: what was seen before the error is worth saying).
        for (const n of notices) process.stderr.write(`tokenwatch: warning: ${escapeControl(n.message)}\n`);
      }
      for (const t of result.ignoredEventTimes) {
        const what = t.until !== undefined ? `${t.count ?? 'several'} event times ${t.time} to ${t.until}` : `event time ${t.time}`;
        process.stderr.write(`tokenwatch: warning: ${what}${t.source ? ` (${escapeControl(t.source)})` : ''} left out of the reference time, the readiness window and the findings: ${escapeControl(t.reason)}\n`);
      }

      if (flags.format === 'json') {
        const doc = { ...jsonDocument(result, flags.cluster), ...(metrics ? { metrics } : {}) };
        process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
      } else {
        process.stdout.write(
          renderScanTable(result.report, {
            now: result.now,
            nowSource: result.nowSource,
            color: shouldUseColor(process.stdout, process.env),
            readiness: result.readiness,
            ignoredEventTimes: result.ignoredEventTimes,
            metricsShowUse: (metrics?.totals['serviceaccount_stale_tokens_total'] ?? 0) > 0,
            ...(flags.wide === true ? {} : { width: outputWidth(process.stdout, process.env) }),
          }),
        );
        for (const e of result.clusterEvents) process.stdout.write(`cluster event (${e.kind}): ${escapeControl(e.summary)}\n`);
        if (metrics && metricsModule) process.stdout.write(`\n${metricsModule.renderMetricsSection(metrics)}`);
      }

      const failOn = flags.failOn;
      if (failOn !== undefined && result.report.findings.some((f) => atOrAbove(f.severity, failOn))) {
        process.exitCode = 1;
      }
    });
}
