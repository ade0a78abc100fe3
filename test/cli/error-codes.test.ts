/**
 * The CLI maps coded errors to exit codes and one-line messages from their fields (code, errno, subject, reason),
 * never from their message text.
 */
import type { Command } from 'commander';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { InputError, ErrorCode, TokenwatchError } from '../../src/errors.js';
import { cliOutcome, inputErrorMessage, runCli, UsageError } from '../../src/cli/program.js';
import { ConfigError } from '../../src/config/schema.js';
import { SourceError } from '../../src/sources/types.js';

/** A program whose `boom` command throws `err`. */
function throwing(err: unknown) {
  return (program: Command): void => {
    program.command('boom').action(() => {
      throw err;
    });
  };
}

describe('code → exit code and message', () => {
  let stderr: string[];
  beforeEach(() => {
    stderr = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      stderr.push(String(chunk));
      return true;
    });
  });
  afterEach(() => {
    vi.restoreAllMocks();
    process.exitCode = undefined;
  });

  it('a usage error exits 2 with its message on one line', async () => {
    expect(await runCli(['node', 'tokenwatch', 'boom'], [throwing(new UsageError('--a and --b\n  do not mix'))])).toBe(2);
    expect(stderr.join('')).toBe('tokenwatch: --a and --b do not mix\n');
  });

  it('an unreadable input exits 2 worded from its errno, not from its message', async () => {
    // The message mentions EACCES, the errno field says ENOENT: the field wins.
    const err = new InputError('logs/a.log', 'cannot read file (EACCES in the text only)', { errno: 'ENOENT' });
    expect(await runCli(['node', 'tokenwatch', 'boom'], [throwing(err)])).toBe(2);
    expect(stderr.join('')).toBe('tokenwatch: cannot read logs/a.log: no such file\n');
  });

  it('an errno-looking word in the reason, without an errno, is kept as the reason', () => {
    expect(inputErrorMessage(new InputError('a.log', 'mentions ENOENT but is a format problem'))).toBe(
      'cannot read a.log: mentions ENOENT but is a format problem',
    );
  });

  it('errno codes become plain words; others keep the reason', () => {
    const cases: Array<[string, string]> = [
      ['ENOENT', 'no such file'],
      ['EACCES', 'permission denied'],
      ['EPERM', 'permission denied'],
      ['EISDIR', 'is a directory'],
      ['ENOTDIR', 'a parent is not a directory'],
      ['EMFILE', 'cannot read file (EMFILE: too many open files)'],
    ];
    for (const [errno, words] of cases) {
      const err = new InputError('a.log', 'cannot read file (EMFILE: too many open files)', { errno });
      expect(inputErrorMessage(err)).toBe(`cannot read a.log: ${words}`);
    }
  });

  it('a cluster snapshot is named as one, and its own `cannot read:` lead is not repeated', () => {
    const subject = 'cluster snapshot s.json';
    expect(inputErrorMessage(new InputError('s.json', 'invalid JSON: Unexpected end', { subject }))).toBe(
      'cannot read cluster snapshot s.json: invalid JSON: Unexpected end',
    );
    expect(inputErrorMessage(new InputError('s.json', 'cannot read: EBUSY', { subject }))).toBe(
      'cannot read cluster snapshot s.json: EBUSY',
    );
    const cause = Object.assign(new Error('ENOENT: no such file or directory'), { code: 'ENOENT' });
    expect(inputErrorMessage(new InputError('s.json', 'cannot read: ENOENT: no such file or directory', { subject, cause }))).toBe(
      'cannot read cluster snapshot s.json: no such file',
    );
  });

  it('an invalid config is a user error (exit 2)', () => {
    const err = new ConfigError([{ path: ['slack', 'channel'], message: 'required' }], 'serve.yaml');
    expect(cliOutcome(err)).toEqual({ exitCode: 2, message: err.message });
  });

  it('codes the CLI does not report, and errors without a code, are rethrown as unexpected', async () => {
    const source = new SourceError('throttled', 'cloudwatch:x', 'ThrottlingException', true);
    expect(cliOutcome(source)).toBeUndefined();
    expect(cliOutcome(new Error('plain'))).toBeUndefined();
    await expect(runCli(['node', 'tokenwatch', 'boom'], [throwing(source)])).rejects.toBe(source);
    expect(stderr.join('')).toBe('');
  });

  it('an explicit exit code on a coded error is used', async () => {
    const err = new TokenwatchError(ErrorCode.Internal, 'custom', { exitCode: 3 });
    expect(await runCli(['node', 'tokenwatch', 'boom'], [throwing(err)])).toBe(3);
    expect(stderr.join('')).toBe('tokenwatch: custom\n');
  });
});
