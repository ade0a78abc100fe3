/**
 * `tokenwatch sandbox [--port 8787] [--speed N] [--reset] [--data-dir ./data/sandbox] [--poll-every SECONDS] [--gke] [--aks]`:
 * the whole loop on one machine (see `src/sandbox/sandbox.ts` and docs/sandbox.md): a local Slack channel page, a
 * simulated cluster, replayed audit logs, the real `serve` pipeline. Runs until Ctrl-C / SIGTERM, then saves its
 * state and stops everything.
 *
 * Exit codes: 0 after a clean stop, 2 for bad flags, 1 when it cannot start (port taken, examples missing).
 */
import { relative } from 'node:path';
import { InvalidArgumentError, Option, type Command } from 'commander';

function positiveNumber(min: number, max: number, what: string) {
  return (v: string): number => {
    const n = Number(v);
    if (!Number.isFinite(n) || n < min || n > max) throw new InvalidArgumentError(`${what} must be a number from ${min} to ${max}`);
    return n;
  };
}

function wholeNumber(min: number, max: number, what: string) {
  return (v: string): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min || n > max) throw new InvalidArgumentError(`${what} must be a whole number from ${min} to ${max}`);
    return n;
  };
}

/** The console text shown once the sandbox runs. */
export function banner(o: { url: string; speed: number; pollEverySeconds: number; dataDir: string; resumed: boolean; slack: boolean }): string {
  const rel = relative(process.cwd(), o.dataDir);
  const dir = rel === '' ? '.' : rel.startsWith('..') ? o.dataDir : rel;
  const perMinute = o.speed >= 60 ? `${+(o.speed / 60).toFixed(1)} sandbox hour${o.speed === 60 ? '' : 's'} per minute` : `${o.speed}× real time`;
  const recurrenceIn = Math.max(1, Math.round(3607 / o.speed));
  return [
    '',
    `tokenwatch sandbox is running${o.resumed ? ' (continuing the previous run)' : ''}: no Slack workspace, cluster or AWS account needed.`,
    '',
    `  Channel page   ${o.url}`,
    `  Cluster        prod-eks (simulated from examples/cluster-snapshot.json), audit log replayed from examples/audit`,
    `  Time           ×${o.speed}: ${perMinute}; tokenwatch polls every ${o.pollEverySeconds} s`,
    '',
    ...(o.slack
      ? [
          'Try:',
          '  1. Open the page: it opens in #net-alerts at the Multus alert (🔴 Critical · prod-eks · kube-system/multus).',
          '  2. Type  /tokens status prod-eks  in the message box.',
          '  3. As Riya (requester), click "Restart DaemonSet kube-multus-ds" and confirm.',
          '  4. Switch to Ahmed (approver) and click Approve in the thread, then to Mei (approver): kube-system is',
          '     protected, so it needs 2 approvals. Then the pods roll one by one.',
          `  5. About ${recurrenceIn < 120 ? `${recurrenceIn} s` : `${Math.round(recurrenceIn / 60)} min`} later the new pods' copied token turns stale: a recurrence reply names the real fix.`,
          '  Also try approving as Riya or Olu (outsider): the two-person rule refuses.',
        ]
      : ['Note: the Slack app is off (--no-slack): the page shows the channel and the replayed cluster, nothing answers.']),
    '',
    `State: ${dir} (reused next time; --reset starts over). Log: ${dir}/sandbox.log. Stop with Ctrl-C.`,
    '',
  ].join('\n');
}

/** Adds `sandbox` to the program. */
export function register(program: Command): void {
  program
    .command('sandbox')
    .description('Run the whole loop locally: a Slack-like channel page, a simulated cluster and replayed audit logs, with the real serve pipeline')
    .option('--port <port>', 'port of the channel page on 127.0.0.1 (0 = any free port)', wholeNumber(0, 65535, '--port'), 8787)
    .option('--speed <factor>', 'how much faster sandbox time runs than real time (tokens age faster)', positiveNumber(1, 100_000, '--speed'), 60)
    .option('--poll-every <seconds>', 'how often tokenwatch polls the audit log, in real seconds', wholeNumber(1, 59, '--poll-every'), 10)
    .option('--data-dir <dir>', 'where the sandbox keeps its state (store, audit log, cluster, channel)', './data/sandbox')
    .option('--reset', 'start over: remove the saved sandbox state first')
    .option('--no-slack', 'do not start the tokenwatch Slack app (the page shows the channel only)')
    .option('--gke', 'also run a GKE cluster, prod-gke, whose audit logs tokenwatch reads from a loopback Cloud Logging (docs/sandbox.md)')
    .option('--aks', 'also run an AKS cluster, prod-aks, whose audit logs tokenwatch reads from a loopback Log Analytics workspace (docs/sandbox.md)')
    .addOption(new Option('--log-level <level>', 'level of the sandbox log file').choices(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'))
    .addHelpText('after', '\nEverything listens on 127.0.0.1 only. Details: docs/sandbox.md')
    .action(async (opts: { port: number; speed: number; pollEvery: number; dataDir: string; reset?: boolean; slack: boolean; gke?: boolean; aks?: boolean; logLevel: string }) => {
      const { startSandbox } = await import('../../sandbox/sandbox.js');
      let handle;
      try {
        handle = await startSandbox({
          port: opts.port,
          speed: opts.speed,
          pollEverySeconds: opts.pollEvery,
          dataDir: opts.dataDir,
          reset: opts.reset === true,
          slack: opts.slack,
          gke: opts.gke === true,
          aks: opts.aks === true,
          logLevel: opts.logLevel,
        });
      } catch (err) {
        const e = err as NodeJS.ErrnoException;
        const why = e.code === 'EADDRINUSE' ? `port ${opts.port} is in use: pass --port <another> (or --port 0 for any free port)` : e.message;
        process.stderr.write(`tokenwatch: the sandbox could not start: ${why}\n`);
        // Parts started before the failure (fake servers, timers) would keep the process alive: exit now.
        process.exit(2);
      }
      process.stdout.write(banner({ url: handle.url, speed: handle.speed, pollEverySeconds: handle.pollEverySeconds, dataDir: handle.dataDir, resumed: handle.resumed, slack: opts.slack }));
      await new Promise<void>((resolve) => {
        const onSignal = () => {
          process.off('SIGINT', onSignal);
          process.off('SIGTERM', onSignal);
          process.stdout.write('\nStopping the sandbox (state is saved)…\n');
          void handle.stop().then(resolve, (err: unknown) => {
            process.stderr.write(`tokenwatch: stopping the sandbox failed: ${err instanceof Error ? err.message : String(err)}\n`);
            process.exitCode = 1;
            resolve();
          });
        };
        process.on('SIGINT', onSignal);
        process.on('SIGTERM', onSignal);
      });
    });
}
