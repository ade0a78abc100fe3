/**
 * `tokenwatch probe`: the node probe (a DaemonSet, `manifests/probe/`). Read-only on the host: finds
 * ServiceAccount tokens written to host files, keeps only their claims, and publishes them as the ConfigMap
 * `tokenwatch-probe-<node>` in its own namespace; `serve` reads those (see `src/probe/`).
 *
 * Never logs, stores or sends a token or its signature: the report carries claims only, and log lines carry counts
 * and paths.
 *
 * Exit codes: 0 (`--once` done, or a clean stop on SIGTERM), 1 when `--once` could not publish, 2 bad arguments.
 */
import { readFile } from 'node:fs/promises';
import { Option, type Command } from 'commander';
import { parseDuration } from '../../config/duration.js';
import { UsageError } from '../program.js';

interface ProbeFlags {
  node?: string;
  namespace?: string;
  glob?: string[];
  hostRoot: string;
  interval: number;
  once?: boolean;
  dryRun?: boolean;
  kubeconfig?: string;
  proofTokenFile: string;
}

/** Where the DaemonSet mounts the probe pod's projected token for serve (audience `tokenwatch-probe`). */
const DEFAULT_PROOF_TOKEN_FILE = '/var/run/secrets/tokenwatch-probe/token';

function durationFlag(v: string): number {
  try {
    return parseDuration(v);
  } catch (err) {
    throw new UsageError(`--interval: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** Adds `probe` to the program. */
export function register(program: Command): void {
  program
    .command('probe')
    .description('Node probe: find ServiceAccount tokens written to host files and publish their claims (never the token) for serve')
    .option('--node <name>', 'node name (default: env NODE_NAME, set from spec.nodeName in the DaemonSet)')
    .option('--namespace <ns>', 'namespace of the report ConfigMap (default: env POD_NAMESPACE, else tokenwatch-probe)')
    .option('--glob <pattern...>', 'absolute host path globs to search (repeatable; default: /etc/cni/net.d/**/*.kubeconfig /etc/cni/net.d/**/*kubeconfig* /var/run/istio-cni/*kubeconfig*)')
    .option('--host-root <dir>', 'where the host filesystem is mounted', '/')
    .addOption(new Option('--interval <duration>', 'time between runs (e.g. 5m, 1h)').default(5 * 60_000, '5m').argParser(durationFlag))
    .option('--once', 'run once and exit')
    .option('--dry-run', 'print the report as JSON on stdout and publish nothing (no Kubernetes access needed)')
    .option('--kubeconfig <file>', 'kubeconfig to publish with (default: the pod\'s ServiceAccount, in-cluster)')
    .option('--proof-token-file <file>', 'projected ServiceAccount token (audience tokenwatch-probe) published with the report so serve can check which node wrote it', DEFAULT_PROOF_TOKEN_FILE)
    .addHelpText(
      'after',
      `
The report (ConfigMap tokenwatch-probe-<node>, key report.json) holds per file: path, a hash of the path, mtime,
the token's owner claims (namespace, ServiceAccount, pod, node, Secret for legacy tokens), iat, warnafter and
exp (serve and scan compute the rejection date from warnafter and the cluster's maxTokenAge, at most exp); a file it cannot read is reported with its errno (EACCES), never as "no token".
With it goes the pod's projected token for the audience tokenwatch-probe (--proof-token-file): serve accepts a
report only when the API server says that token belongs to the probe pod on the node the report names.
RBAC: create and update ConfigMaps in its own namespace only (no get: one probe cannot read another's proof). Manifests: manifests/probe/ (docs/install.md).

Examples:
  tokenwatch probe --dry-run --once
  tokenwatch probe --once --host-root /host --node "$NODE_NAME"`,
    )
    .action(async (flags: ProbeFlags) => {
      const node = flags.node ?? process.env['NODE_NAME'];
      if (!node && !flags.dryRun) throw new UsageError('--node is required (or set NODE_NAME)');
      const namespace = flags.namespace ?? process.env['POD_NAMESPACE'] ?? (await import('../../probe/objects.js')).PROBE_NAMESPACE;
      const globs = flags.glob;
      if (globs) for (const g of globs) if (!g.startsWith('/')) throw new UsageError(`--glob must be an absolute host path: ${g}`);
      const { probeHost } = await import('../../probe/host.js');
      const { createLogger } = await import('../../observability/logger.js');
      const logger = createLogger({ level: process.env['LOG_LEVEL'] || 'info', destination: process.stderr });
      let kc: import('@kubernetes/client-node').KubeConfig | undefined;
      if (!flags.dryRun) {
        const { kubeConfigFor } = await import('../../cluster/kube.js');
        try {
          kc = flags.kubeconfig ? kubeConfigFor({ kubeconfig: flags.kubeconfig }) : kubeConfigFor({ inCluster: true });
        } catch (err) {
          throw new UsageError(err instanceof Error ? err.message : String(err));
        }
      }
      const { publishReport } = await import('../../probe/objects.js');

      const runOnce = async (): Promise<boolean> => {
        const report = await probeHost({ node: node ?? 'unknown', hostRoot: flags.hostRoot, now: Date.now(), ...(globs ? { globs } : {}) });
        const tokens = report.entries.filter((e) => e.status === 'token');
        const unreadable = report.entries.filter((e) => e.status === 'unreadable');
        logger.info(
          {
            node: report.node,
            files: new Set(report.entries.map((e) => e.path)).size,
            tokens: tokens.map((e) => `${e.path}: ${e.tokenKind} ${e.namespace}/${e.serviceAccount}`),
            unreadable: unreadable.map((e) => `${e.path}: ${e.error}`),
          },
          'probe run',
        );
        if (flags.dryRun) {
          process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
          return true;
        }
        let proof: string | undefined;
        try {
          proof = (await readFile(flags.proofTokenFile, 'utf8')).trim() || undefined;
        } catch (err) {
          logger.warn({ file: flags.proofTokenFile, error: (err as { code?: string }).code ?? 'EIO' }, 'no proof token: serve will refuse this report (mount the projected token, manifests/probe/daemonset.yaml)');
        }
        try {
          const how = await publishReport(kc!, report, namespace, proof);
          logger.info({ namespace, configMap: `tokenwatch-probe-${report.node}`, how }, 'probe report published');
          return true;
        } catch (err) {
          const code = (err as { code?: unknown }).code;
          logger.error({ namespace, status: typeof code === 'number' ? code : undefined, error: err instanceof Error ? err.message.split('\n')[0] : String(err) }, 'publishing the probe report failed; retrying next run');
          return false;
        }
      };

      if (flags.once || flags.dryRun) {
        if (!(await runOnce())) process.exitCode = 1;
        return;
      }
      await new Promise<void>((resolve) => {
        let timer: NodeJS.Timeout | undefined;
        let stopped = false;
        const loop = async (): Promise<void> => {
          await runOnce();
          if (!stopped) timer = setTimeout(() => void loop(), flags.interval);
        };
        const stop = (): void => {
          stopped = true;
          if (timer) clearTimeout(timer);
          resolve();
        };
        process.once('SIGTERM', stop);
        process.once('SIGINT', stop);
        void loop();
      });
    });
}
