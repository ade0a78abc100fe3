/**
 * The `tokenwatch` commander program and its error handling. Subcommands live in
 * `src/cli/commands/<name>.ts`, each exporting `register(program: Command): void`; `main.ts` lists them.
 *
 * Exit codes (docs/design/contracts.md "Exit codes"): 0 success, 1 a finding at or above `--fail-on`,
 * 2 bad arguments or unreadable input. Errors are one line on stderr: `tokenwatch: <message>`.
 */
import { ErrorCode, TokenwatchError, InputError } from '../errors.js';
import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { escapeControl } from './escape.js';

/** A subcommand module's registration function. */
export type Register = (program: Command) => void;

/** Exit code for bad arguments or unreadable input (`CLI_EXIT_CODES` of `usage` and `input_unreadable` in errors.ts). */
export const EXIT_USAGE = 2;

/** An error the CLI reports as one line and exit code {@link EXIT_USAGE} (bad flag combination, etc.). */
export class UsageError extends TokenwatchError {
  override name = 'UsageError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCode.Usage, message, options);
  }
}

function packageVersion(): string {
  // src/cli/program.ts and dist/cli/program.js both sit two levels below package.json.
  const raw: unknown = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
  const version = typeof raw === 'object' && raw !== null ? (raw as { version?: unknown }).version : undefined;
  return typeof version === 'string' ? version : '0.0.0';
}

/** Turns commander's `error: …` text (possibly several lines, e.g. "(Did you mean …?)") into one line. */
export function oneLine(message: string): string {
  return message
    .replace(/^error:\s*/i, '')
    .replace(/\s*\n\s*/g, ' ')
    .trim();
}

/** Writes `tokenwatch: <message>` as one line on stderr. */
export function printError(message: string): void {
  // File names and reader messages come from outside: control characters are shown escaped, never sent raw.
  process.stderr.write(`tokenwatch: ${escapeControl(oneLine(message))}\n`);
}

/** Plain words for the errno codes an unreadable input usually has. */
const ERRNO_WORDS: Record<string, string> = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EISDIR: 'is a directory',
  ENOTDIR: 'a parent is not a directory',
};

/**
 * Message for an unreadable input, always `cannot read <subject>: <why>` (`cannot read cluster snapshot
 * <file>: <why>` for `--cluster-snapshot`), e.g. `cannot read examples/nope.log: no such file`.
 * Built from the error's fields, never its message: a common {@link InputError.errno} becomes plain words;
 * otherwise the reader's {@link InputError.reason} is kept (without its own `cannot read:` lead).
 */
export function inputErrorMessage(err: InputError): string {
  const words = err.errno === undefined ? undefined : ERRNO_WORDS[err.errno];
  if (words !== undefined) return `cannot read ${err.subject}: ${words}`;
  const why = err.reason.startsWith(CANNOT_READ) ? err.reason.slice(CANNOT_READ.length).trimStart() : err.reason;
  return `cannot read ${err.subject}: ${why}`;
}

const CANNOT_READ = 'cannot read:';

/**
 * How the CLI reports an error that reaches it: the exit code and the one-line message, or undefined when the
 * error is unexpected (a bug; the caller reports it as `internal error`). Decided by the error's
 * {@link TokenwatchError.code} and {@link TokenwatchError.exitCode} (see `CLI_EXIT_CODES` in errors.ts), never its text.
 */
export function cliOutcome(err: unknown): { exitCode: number; message: string } | undefined {
  if (!(err instanceof TokenwatchError) || err.exitCode === undefined) return undefined;
  const message = err instanceof InputError ? inputErrorMessage(err) : err.message;
  return { exitCode: err.exitCode, message };
}

/**
 * Builds the program with the given subcommands. `exitOverride()` makes commander throw instead
 * of exiting (so bad flags exit 2, not commander's 1); subcommands created with `program.command()`
 * after this call inherit it and the output configuration.
 */
export function createProgram(registrations: Register[]): Command {
  const program = new Command('tokenwatch')
    .description(
      'Find Kubernetes ServiceAccount clients that use stale bound tokens, legacy Secret tokens or get 401s, from API-server audit logs.',
    )
    .version(packageVersion(), '-V, --version', 'print the version')
    .helpOption('-h, --help', 'show help')
    .showSuggestionAfterError(true)
    .exitOverride()
    .configureOutput({
      outputError: (str) => printError(str),
    });
  program.helpCommand('help [command]', 'show help for a command');
  for (const register of registrations) register(program);
  for (const command of [program, ...program.commands]) {
    const longFlags = [...command.options, ...(command === program ? [] : program.options)]
      .filter((o) => !o.hidden && o.long !== undefined)
      .map((o) => o.long as string);
    command.configureOutput({ outputError: (str) => printError(withPrefixSuggestion(str, longFlags)) });
  }
  return program;
}

/**
 * Adds commander's `(Did you mean --audit-log?)` to an `unknown option '--audit'` error when commander found no
 * similar flag but exactly one of `longFlags` starts with the unknown one (commander 15 suggests by edit distance
 * only, at most 3 edits: `--auditlog` gets `--audit-log`, the prefix `--audit` does not). Other messages pass unchanged.
 */
export function withPrefixSuggestion(message: string, longFlags: readonly string[]): string {
  const m = /unknown option '(--[^'=]+)(?:=[^']*)?'/.exec(message);
  if (m === null || /Did you mean/.test(message)) return message;
  const flag = m[1] as string;
  const matches = longFlags.filter((f) => f.startsWith(flag) && f !== flag);
  return matches.length === 1 ? `${message.trimEnd()}\n(Did you mean ${matches[0]}?)\n` : message;
}

/**
 * Parses `argv` (as `process.argv`) and runs the chosen command.
 * @returns the exit code: the command's `process.exitCode` (0 or 1) on success, 0 for help/version,
 *   {@link EXIT_USAGE} for bad arguments or unreadable input (message already printed).
 * @throws only unexpected errors (bugs); the caller prints them.
 */
export async function runCli(argv: string[], registrations: Register[]): Promise<number> {
  const program = createProgram(registrations);
  try {
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and version exit 0; everything else (unknown option, bad value, missing command) is a usage error.
      return err.exitCode === 0 ? 0 : EXIT_USAGE;
    }
    const outcome = cliOutcome(err);
    if (outcome === undefined) throw err;
    printError(outcome.message);
    return outcome.exitCode;
  }
  const code = process.exitCode;
  return typeof code === 'number' ? code : 0;
}
