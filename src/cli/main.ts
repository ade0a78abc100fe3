/**
 * `tokenwatch` entry point (run by bin/tokenwatch.js). Add a subcommand by creating
 * `src/cli/commands/<name>.ts` exporting `register(program)` and listing it below.
 */
import { register as config } from './commands/config.js';
import { register as probe } from './commands/probe.js';
import { register as sandbox } from './commands/sandbox.js';
import { register as scan } from './commands/scan.js';
import { register as serve } from './commands/serve.js';
import { register as store } from './commands/store.js';
import { printError, runCli, type Register } from './program.js';

const commands: Register[] = [
  scan,
  serve,
  sandbox,
  config,
  probe,
  store,
];

// A closed pipe (`tokenwatch scan … | head`) is not an error. Any other failed write of the output (a full disk, a
// device that refuses it) is: one line on stderr and exit 2, never a stack trace or the exit code 1 that means "a
// finding at or above --fail-on" (docs/design/contracts.md "Exit codes").
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  printError(`cannot write the output to stdout: ${err.code ? `${err.code}: ` : ''}${err.message.replace(/^\w+: /, '')}`);
  process.exit(2);
});
// stderr that cannot be written (`2>/dev/full`): nothing can be said, but the exit code must not read as "a finding
// at or above --fail-on" (1): 2, as for any other error; a closed pipe keeps the code the command set.
process.stderr.on('error', (err: NodeJS.ErrnoException) => {
  process.exit(err.code === 'EPIPE' ? (process.exitCode ?? 0) : 2);
});

try {
  process.exitCode = await runCli(process.argv, commands);
} catch (err) {
  printError(`internal error: ${err instanceof Error ? err.message : String(err)}`);
  if (process.env.TOKENWATCH_DEBUG && err instanceof Error) process.stderr.write(`${err.stack ?? ''}\n`);
  process.exitCode = 2;
}
