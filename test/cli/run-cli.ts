/** Runs the real `tokenwatch` CLI (`node bin/tokenwatch.js …`) as a child process. */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** Repository root. */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `node bin/tokenwatch.js ...args` from the repository root with `NO_COLOR` unset and
 * stdout/stderr as pipes (so not TTYs). Resolves with the exit code and the full output.
 */
export function runCli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
    delete childEnv.FORCE_COLOR;
    // The table fits COLUMNS when stdout is not a terminal: only a test that asks for a width gets one.
    if (env.COLUMNS === undefined) delete childEnv.COLUMNS;
    const child = spawn(process.execPath, ['bin/tokenwatch.js', ...args], {
      cwd: ROOT,
      env: childEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', reject);
    child.on('close', (code) =>
      resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }),
    );
  });
}
