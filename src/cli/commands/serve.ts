/**
 * `tokenwatch serve [--config FILE]`: runs the live service (built by `src/runtime/compose.ts`) until SIGTERM/SIGINT.
 *
 * Exit codes: 0 after a clean stop, 2 for an invalid configuration (every problem listed on stderr, including each
 * referenced file that cannot be read and each named environment variable that is unset, per cluster: the checks of
 * `config check --runtime`), 1 when start-up fails otherwise (store cannot be opened, port taken).
 */
import { constants as osConstants } from 'node:os';
import { CommanderError, type Command } from 'commander';
import { TokenwatchError } from '../../errors.js';
import type { Logger } from '../../observability/logger.js';

/** How long a stopped serve waits for its event loop to empty before it exits anyway, ms. */
const EXIT_GRACE_MS = 2_000;

/** Adds `serve` to the program. */
export function register(program: Command): void {
  program
    .command('serve')
    .description('Watch the configured clusters on a schedule, keep findings in the store, post them to Slack when enabled')
    .option('--config <file>', 'config file (default: env TOKENWATCH_CONFIG); see config.example.yaml')
    .addHelpText(
      'after',
      [
        '',
        'Environment variables read (secrets only here, never in the config file; see .env.example):',
        '  TOKENWATCH_CONFIG      config file when --config is not given',
        '  LOG_LEVEL              overrides log.level (trace, debug, info, warn, error, fatal, silent)',
        '  SLACK_BOT_TOKEN        bot token, starts with xoxb- (required when slack.enabled)',
        '  SLACK_APP_TOKEN        app-level token with connections:write, starts with xapp- (slack.mode socket)',
        '  SLACK_SIGNING_SECRET   signing secret (slack.mode http); checked to be at least 16 characters',
        '                         (Slack\'s are 32 hex characters); requests are verified with it (HMAC-SHA256)',
        '  PAGERDUTY_ROUTING_KEY  integration key of a PagerDuty Events API v2 integration (slack.paging.pagerduty)',
        '  AWS_REGION, AWS_DEFAULT_REGION',
        '                         region of clusters without cloudwatch.region / kubernetes.eks.region',
        '  AWS_PROFILE, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_WEB_IDENTITY_TOKEN_FILE, ...',
        '                         AWS credentials, by the SDK\'s default chain (IRSA, Pod Identity, instance role)',
        '  AWS_ENDPOINT_URL_CLOUDWATCH_LOGS',
        '                         CloudWatch Logs endpoint override (a cluster\'s audit.cloudwatch.endpoint wins)',
        '  GOOGLE_APPLICATION_CREDENTIALS',
        '                         Google credential file (workload identity federation config or service-account key)',
        '                         for clusters with audit.gcp; unset on GKE: Workload Identity (the metadata server)',
        '  KUBECONFIG             kubeconfig of clusters with kubernetes.kubeconfig unset',
        '  POD_NAME (in a pod)    with a PostgreSQL store, the base of this replica\'s id when clusters are shared out',
        '',
        'At start, serve checks every file the config references (kubeconfig, webhook certFile/keyFile/tokenFile,',
        'store.postgres.passwordFrom.file, ...) and every environment variable it names (tokenEnv, ...), as',
        '`tokenwatch config check --runtime` does, and exits 2 naming every problem with its cluster.',
        'Endpoints: /healthz, /readyz and /metrics on http.host:http.port (default 0.0.0.0:8080); /readyz shows per cluster',
        'the state of each access (audit source, Kubernetes API, watch cache, Slack) and is 503 only while the pod serves nothing.',
        'Stop with SIGTERM or Ctrl-C: running polls are aborted (the next start reads on from their last committed chunk), approvals in progress are left to resume.',
        'Try it on the bundled examples: tokenwatch serve --config examples/serve.yaml',
      ].join('\n'),
    )
    .action(async (opts: { config?: string }, cmd: Command) => {
      const env = process.env;
      // SIGTERM/SIGINT from here on stop the service gracefully: one arriving while it starts (loading its modules and
      // config, connecting to its store; its "started" line is written before composeServe returns; a rollout may stop
      // a pod that is still starting) is kept, logged, and acted on once it has started, instead of the signal's
      // default action ending the process mid-start. A second one while it still starts (a start can wait on a store
      // or an API server that does not answer, up to their timeouts) exits at once with 128 + the signal's number, as
      // a shell reports a process ended by that signal.
      let early: NodeJS.Signals | undefined;
      let startLogger: Logger | undefined;
      const keptMessage = 'signal received while starting: stopping once started (send it again to exit now)';
      const onEarlySignal = (sig: NodeJS.Signals) => {
        if (early === undefined) {
          early = sig;
          startLogger?.info({ signal: sig }, keptMessage);
          return;
        }
        const why = 'second signal while starting: exiting now, without a graceful stop';
        if (startLogger) startLogger.warn({ signal: sig }, why);
        else process.stderr.write(`tokenwatch: ${why} (${sig})\n`);
        process.exit(128 + (osConstants.signals[sig] ?? 0));
      };
      process.on('SIGTERM', onEarlySignal);
      process.on('SIGINT', onEarlySignal);
      // Loaded on use, like everything below: other commands (scan) should not pay for zod schemas, YAML and cron.
      const { ConfigError } = await import('../../config/schema.js');
      const { loadConfig, resolveConfigPath } = await import('../../config/load.js');
      let config;
      try {
        // With the runtime checks: every missing file and unset variable, per cluster, at once (exit 2).
        config = loadConfig(resolveConfigPath(opts.config, env), env, { runtime: true });
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        // One problem per line, as `config check` prints them (commander's error output folds lines).
        const writeErr = cmd.configureOutput().writeErr ?? ((s: string) => process.stderr.write(s));
        writeErr(`tokenwatch: ${err.message}\n`);
        throw new CommanderError(err.exitCode, 'tokenwatch.configInvalid', err.message);
      }
      // Loaded on use: the service pulls in the Kubernetes, AWS and Slack SDKs, which `--help` and `scan` do not need.
      const { createLogger } = await import('../../observability/logger.js');
      const { composeServe } = await import('../../runtime/compose.js');
      const level = env.LOG_LEVEL && env.LOG_LEVEL !== '' ? env.LOG_LEVEL : config.log.level;
      const logger = createLogger({ level });
      const { Metrics } = await import('../../observability/metrics.js');
      const metrics = new Metrics({ defaultMetrics: true });
      // A signal kept before the logger existed is logged now.
      startLogger = logger;
      if (early) logger.info({ signal: early }, keptMessage);
      // The runtime (src/runtime/compose.ts) builds everything, cluster ownership included.
      let service;
      try {
        service = await composeServe(config, { env, logger, metrics });
      } catch (err) {
        const e = err as NodeJS.ErrnoException;
        const why =
          e.code === 'EADDRINUSE'
            ? `http.port ${config.http.port} on ${config.http.host} is in use: set another http.port in the config`
            : e.message;
        // A known refusal (a coded TokenwatchError: another poller holds the store, an unreadable store, …) is logged
        // with its code and reason only; a stack trace is kept for what tokenwatch did not foresee.
        if (err instanceof TokenwatchError) logger.fatal({ code: err.code, reason: why }, 'tokenwatch serve could not start');
        else logger.fatal({ err }, 'tokenwatch serve could not start');
        process.stderr.write(`tokenwatch: serve could not start: ${why}\n`);
        // Parts started before the failure (SDK clients, timers) must not keep the process alive.
        process.exit(1);
      }
      await new Promise<void>((resolve) => {
        const onSignal = (sig: NodeJS.Signals) => {
          logger.info({ signal: sig }, 'signal received');
          process.off('SIGTERM', onSignal);
          process.off('SIGINT', onSignal);
          // Running polls are aborted (their committed chunks stay); approvals in progress resume in the next process;
          // only then is the Lease released.
          void service.stop().then(() => {
            // Everything tokenwatch started is stopped; a socket a hung peer keeps open (an API server that accepted
            // the connection and never answers) must not keep the process alive past its grace period: exit once
            // the loop has had a moment to end by itself. The logger writes synchronously, so nothing is lost.
            setTimeout(() => process.exit(process.exitCode ?? 0), EXIT_GRACE_MS).unref();
            resolve();
          });
        };
        process.on('SIGTERM', onSignal);
        process.on('SIGINT', onSignal);
        process.off('SIGTERM', onEarlySignal);
        process.off('SIGINT', onEarlySignal);
        if (early) onSignal(early);
      });
    });
}
