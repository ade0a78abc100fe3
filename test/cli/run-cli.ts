/**
 * Runs the real `tokenwatch` CLI as a child process: the bundle that test/global-setup.ts builds once per run (what
 * `npm run build` makes and the package ships), or with `{ sources: true }` `node bin/tokenwatch.js …` from the
 * repository, which in a checkout without `dist/` runs the TypeScript sources through tsx (~0.5 s of CPU more per start).
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { cliMain } from '../support/build.js';

/** Repository root. */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Options of {@link runCli}. */
export interface RunCliOptions {
  /** Run `bin/tokenwatch.js` (the TypeScript sources through tsx when there is no `dist/`) instead of the test bundle. */
  sources?: boolean;
  /** Written to the CLI's standard input through a pipe, then closed (default: no standard input). */
  input?: Buffer;
}

/**
 * Runs `tokenwatch ...args` (the test bundle, see the module doc) from the repository root with `FORCE_COLOR` unset
 * and stdout/stderr as pipes (so not TTYs); standard input is `opts.input` through a pipe, or none. Resolves with the
 * exit code and the full output.
 */
export function runCli(args: string[], env: NodeJS.ProcessEnv = {}, opts: RunCliOptions = {}): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
    delete childEnv.FORCE_COLOR;
    // The table fits COLUMNS when stdout is not a terminal: only a test that asks for a width gets one.
    if (env.COLUMNS === undefined) delete childEnv.COLUMNS;
    const child = spawn(process.execPath, [opts.sources ? 'bin/tokenwatch.js' : cliMain(), ...args], {
      cwd: ROOT,
      env: childEnv,
      stdio: [opts.input ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    });
    if (opts.input) child.stdin?.end(opts.input);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout?.on('data', (b: Buffer) => out.push(b));
    child.stderr?.on('data', (b: Buffer) => err.push(b));
    child.on('error', reject);
    child.on('close', (code) =>
      resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }),
    );
  });
}
