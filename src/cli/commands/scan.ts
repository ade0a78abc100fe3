/**
 * `tokenwatch scan`: one offline pass over audit-log files, printing findings as a table or as
 * the JSON contract (shared/docs/design.md, "tokenwatch scan output (contract)").
 *
 * JSON output is the contract's `{findings, stats}` plus two additive top-level fields:
 * `now` (the ISO-8601 UTC reference time used for severity and days left) and `cluster`
 * (the cluster name given with `--cluster`, `default` when absent).
 */
import { Option, type Command } from 'commander';
import type { MaxTokenAge, Severity } from '../../findings/types.js';
import type { ScanResult } from '../../scan/run.js';
import { atOrAbove, isoSeconds, renderScanTable, shouldUseColor } from '../format.js';
import { availableParallelism } from 'node:os';
import { parseClusterName, parseJobs, parseMaxTokenAgeFlag, parseNow } from '../options.js';

/** Cluster name used when `--cluster` is not given. */
export const DEFAULT_CLUSTER = 'default';

/** Parsed `scan` options, as commander hands them to the action. */
interface ScanFlags {
  auditLog: string[];
  cluster: string;
  clusterSnapshot?: string;
  maxTokenAge: MaxTokenAge;
  format: 'table' | 'json';
  failOn?: Severity;
  now?: number;
  jobs?: number;
}

/** The `scan --format json` document: the contract plus the additive `now` and `cluster` fields. */
export function jsonDocument(result: ScanResult, cluster: string): object {
  return { findings: result.report.findings, stats: result.report.stats, now: isoSeconds(result.now), cluster };
}

/** Registers `tokenwatch scan` on the program. */
export function register(program: Command): void {
  program
    .command('scan')
    .description('Scan API-server audit logs for stale, legacy and unauthorized ServiceAccount token use.')
    .requiredOption(
      '--audit-log <file...>',
      'audit log files: JSON lines (plain or .gz), `aws logs filter-log-events` output, Logs Insights export (JSON or CSV); repeatable',
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
        'when the API server rejects a stale token: eks (90 d after warnafter), upstream (1 year after issue) or SECONDS after warnafter',
      )
        .default({ mode: 'eks' } satisfies MaxTokenAge, 'eks')
        .argParser(parseMaxTokenAgeFlag),
    )
    .addOption(new Option('--format <format>', 'output format').choices(['table', 'json']).default('table'))
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
        '--jobs <n>',
        `worker threads for inputs of 16 MiB or more: plain JSON-lines files are split, .gz files and exports are read whole, one per thread; capped at the available CPUs (default: ${availableParallelism()}, the available CPUs)`,
      ).argParser((v) => parseJobs(v)),
    )
    .addHelpText(
      'after',
      `
Exit codes: 0 success, 1 a finding at or above --fail-on exists, 2 bad arguments or unreadable input.

Examples:
  tokenwatch scan --audit-log /var/log/kubernetes/audit.log*
  tokenwatch scan --audit-log events.json --cluster prod-eks --cluster-snapshot state.json --fail-on warning
  tokenwatch scan --audit-log audit.log.gz --format json --now 2026-11-20T12:00:00Z`,
    )
    .action(async (flags: ScanFlags) => {
      // Loaded on use, so `--help` and argument errors stay fast (the pipeline pulls in zod, the catalog, …).
      const { runScan } = await import('../../scan/run.js');
      // cli-progress only for a terminal: pipes and CI logs never show a bar.
      const progress = process.stderr.isTTY
        ? (await import('../progress.js')).startProgress(flags.auditLog, process.stderr)
        : undefined;
      let result: ScanResult;
      try {
        result = await runScan({
          files: flags.auditLog,
          cluster: flags.cluster,
          maxTokenAge: flags.maxTokenAge,
          ...(flags.clusterSnapshot !== undefined ? { snapshot: flags.clusterSnapshot } : {}),
          ...(flags.now !== undefined ? { now: flags.now } : {}),
          ...(progress ? { onProgress: progress.onProgress } : {}),
          jobs: flags.jobs ?? availableParallelism(),
        });
      } finally {
        progress?.stop();
      }

      if (flags.format === 'json') {
        process.stdout.write(`${JSON.stringify(jsonDocument(result, flags.cluster), null, 2)}\n`);
      } else {
        process.stdout.write(
          renderScanTable(result.report, {
            now: result.now,
            nowSource: result.nowSource,
            color: shouldUseColor(process.stdout, process.env),
          }),
        );
      }

      const failOn = flags.failOn;
      if (failOn !== undefined && result.report.findings.some((f) => atOrAbove(f.severity, failOn))) {
        process.exitCode = 1;
      }
    });
}
