/**
 * Command-line flags of the bench scripts that take only `--name value` flags: Node's own `parseArgs`
 * (https://nodejs.org/api/util.html#utilparseargsconfig, strict: an unknown flag, a flag without its value or a stray
 * word is an error), with what a user of a CLI expects around it — `--help`/`-h` prints the usage line and exits 0; a
 * bad argument prints `<script>: <what is wrong>` and the usage line on stderr and exits 2, never a stack trace.
 */
import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';

/** The values `parseArgs` gives for `options` (strict, no positionals). */
export type BenchValues<O extends ParseArgsOptionsConfig> = ReturnType<typeof parseArgs<{ options: O }>>['values'];

/**
 * Prints `<script>: <message>` and `usage` on stderr and exits 2 (a usage error, as the `tokenwatch` CLI's).
 * @param script the npm script's name, e.g. `bench:files`
 */
export function usageError(script: string, usage: string, message: string): never {
  process.stderr.write(`${script}: ${message}\n${usage}\n`);
  process.exit(2);
}

/** What {@link benchArgs} read: the values, and checks that end in a usage error (exit 2) naming the script. */
export interface BenchArgs<O extends ParseArgsOptionsConfig> {
  values: BenchValues<O>;
  /**
   * The value of `--<name>` as a whole number ≥ `min` (default 1); otherwise a usage error naming the flag and the
   * value (a flag without a value or default counts as missing).
   */
  whole(name: keyof O & string, min?: number): number;
  /** Prints `<script>: <message>` and the usage line on stderr and exits 2. */
  fail(message: string): never;
}

/**
 * Reads the flags in `argv` (default: this process's arguments after the script).
 * @param script the npm script's name, the prefix of error messages (`bench:files`)
 * @param usage the usage line, e.g. `usage: npm run bench:files -- [--files N] [--size-kb N] [--gz N]`
 * @param options `parseArgs` options; a default is a string, as the flag's value would be
 * @returns the values and their checks; exits 0 after printing `usage` on `--help`/`-h`, 2 on a bad argument (see the
 *   module doc)
 */
export function benchArgs<const O extends ParseArgsOptionsConfig>(
  script: string,
  usage: string,
  options: O,
  argv: string[] = process.argv.slice(2),
): BenchArgs<O> {
  const fail = (message: string): never => usageError(script, usage, message);
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${usage}\n`);
    process.exit(0);
  }
  let values: BenchValues<O>;
  try {
    values = parseArgs({ args: argv, options }).values as BenchValues<O>;
  } catch (err) {
    return fail(err instanceof Error ? err.message : String(err));
  }
  const whole = (name: keyof O & string, min = 1): number => {
    const raw = (values as Record<string, unknown>)[name];
    if (typeof raw !== 'string') return fail(`--${name} needs a value`);
    const n = /^[0-9]+$/.test(raw) ? Number(raw) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < min) fail(`--${name} takes a whole number ≥ ${min} (got '${raw}')`);
    return n;
  };
  return { values, whole, fail };
}
