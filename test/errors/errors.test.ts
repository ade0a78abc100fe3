/** The coded error base (src/errors.ts) and its use by every module's error classes. */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { InputError, CLI_EXIT_CODES, ErrorCode, errnoOf, isTokenwatchError, TokenwatchError } from '../../src/errors.js';
import { UsageError } from '../../src/cli/program.js';
import { ClusterUnavailableError } from '../../src/cluster/kube.js';
import { ConfigError } from '../../src/config/schema.js';
import { DurationError, parseDuration } from '../../src/config/duration.js';
import { MetricsScrapeError } from '../../src/sources/apiserver-metrics.js';
import { TokenMetricsError } from '../../src/findings/token-metrics.js';
import { KubeCallError } from '../../src/remediation/kube-remediator.js';
import { SlackCallError } from '../../src/slack/api.js';
import { SourceError } from '../../src/sources/types.js';
import { StoreError } from '../../src/store/errors.js';

describe('TokenwatchError', () => {
  it('carries a stable code, the standard cause and the CLI exit code of its code', () => {
    const cause = new Error('underlying');
    const err = new TokenwatchError(ErrorCode.Usage, 'bad flags', { cause });
    expect(err).toBeInstanceOf(Error);
    expect(err.code).toBe('usage');
    expect(err.message).toBe('bad flags');
    expect(err.cause).toBe(cause);
    expect(err.exitCode).toBe(2);
    // A plain coded error reads like an Error in messages and logs.
    expect(err.name).toBe('Error');
    expect(String(err)).toBe('Error: bad flags');
  });

  it('has no cause property without a cause, and no exit code for codes the CLI does not report', () => {
    const err = new TokenwatchError(ErrorCode.Internal, 'broken invariant');
    expect('cause' in err).toBe(false);
    expect(err.exitCode).toBeUndefined();
  });

  it('takes an explicit exit code over the table', () => {
    expect(new TokenwatchError(ErrorCode.Internal, 'x', { exitCode: 3 }).exitCode).toBe(3);
  });

  it('error codes are unique snake_case strings', () => {
    const values = Object.values(ErrorCode);
    expect(new Set(values).size).toBe(values.length);
    for (const v of values) expect(v).toMatch(/^[a-z]+(_[a-z]+)*$/);
  });

  it('the CLI reports usage, unreadable input and invalid config as exit code 2, nothing else', () => {
    expect(CLI_EXIT_CODES).toEqual({ usage: 2, input_unreadable: 2, config_invalid: 2 });
  });
});

describe('isTokenwatchError', () => {
  it('isTokenwatchError checks the class and, if given, the code', () => {
    const err = new InputError('a.log', 'not JSON');
    expect(isTokenwatchError(err)).toBe(true);
    expect(isTokenwatchError(err, ErrorCode.InputUnreadable)).toBe(true);
    expect(isTokenwatchError(err, ErrorCode.Usage)).toBe(false);
    expect(isTokenwatchError(new Error('x'))).toBe(false);
  });

  it('errnoOf reads Node errno codes only', () => {
    expect(errnoOf(Object.assign(new Error('x'), { code: 'ENOENT' }))).toBe('ENOENT');
    expect(errnoOf(Object.assign(new Error('x'), { code: 'Z_DATA_ERROR' }))).toBeUndefined();
    expect(errnoOf(Object.assign(new Error('x'), { code: 'ERR_INVALID_ARG_TYPE' }))).toBeUndefined();
    expect(errnoOf(new TokenwatchError(ErrorCode.Internal, 'x'))).toBeUndefined();
    expect(errnoOf(undefined)).toBeUndefined();
  });
});

describe('module errors', () => {
  it('every module error class extends the base with its own code; foreign codes have their own field', () => {
    const cases: Array<[TokenwatchError, string, string]> = [
      [new ConfigError([{ path: ['x'], message: 'required' }]), 'config_invalid', 'ConfigError'],
      [new DurationError('1x'), 'duration_invalid', 'DurationError'],
      [new InputError('a.log', 'not JSON'), 'input_unreadable', 'InputError'],
      [new UsageError('bad'), 'usage', 'UsageError'],
      [new SourceError('denied', 'src', 'AccessDeniedException', false), 'source_failed', 'SourceError'],
      [new StoreError('full'), 'store_failed', 'StoreError'],
      [new KubeCallError('403', 403, 'Forbidden'), 'kube_call_failed', 'KubeCallError'],
      [new ClusterUnavailableError('down'), 'cluster_unavailable', 'ClusterUnavailableError'],
      [new SlackCallError('chat.postMessage', 'not_in_channel'), 'slack_call_failed', 'SlackCallError'],
      [new MetricsScrapeError('timeout'), 'metrics_scrape_failed', 'MetricsScrapeError'],
      [new TokenMetricsError('none'), 'token_metrics_invalid', 'TokenMetricsError'],
    ];
    for (const [err, code, name] of cases) {
      expect(err).toBeInstanceOf(TokenwatchError);
      expect(err.code).toBe(code);
      expect(err.name).toBe(name);
    }
    expect(new SourceError('denied', 'src', 'AccessDeniedException', false).awsCode).toBe('AccessDeniedException');
    expect(new SlackCallError('chat.postMessage', 'not_in_channel').slackError).toBe('not_in_channel');
    expect(() => parseDuration('soon')).toThrow(DurationError);
    expect(new ConfigError([{ path: ['x'], message: 'required' }]).exitCode).toBe(2);
  });

  it('InputError keeps the errno of its cause and names its subject', () => {
    const cause = Object.assign(new Error("ENOENT: no such file or directory, open 'x.json'"), { code: 'ENOENT' });
    const err = new InputError('x.json', 'cannot read: gone', { cause, subject: 'cluster snapshot x.json' });
    expect(err.errno).toBe('ENOENT');
    expect(err.cause).toBe(cause);
    expect(err.subject).toBe('cluster snapshot x.json');
    expect(err.reason).toBe('cannot read: gone');
    expect(err.message).toBe('cluster snapshot x.json: cannot read: gone');
    expect(new InputError('a.log', 'read failed', { errno: 'EIO' }).errno).toBe('EIO');
    expect(new InputError('a.log', 'not JSON').message).toBe('a.log: not JSON');
  });
});

describe('no bare errors in the product', () => {
  function sources(dir: string): string[] {
    return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
      const p = join(dir, e.name);
      if (e.isDirectory()) return sources(p);
      return /\.(ts|mts)$/.test(e.name) && !/\.test\.ts$/.test(e.name) ? [p] : [];
    });
  }
  const root = new URL('../../src', import.meta.url).pathname;

  it('src/ throws no `new Error(` and declares no error class outside the base', () => {
    const offenders: string[] = [];
    for (const file of sources(root)) {
      const text = readFileSync(file, 'utf8');
      text.split('\n').forEach((line, i) => {
        if (/\bnew Error\(/.test(line)) offenders.push(`${file}:${i + 1}: ${line.trim()}`);
        if (/\bextends Error\b/.test(line) && !file.endsWith('/src/errors.ts')) offenders.push(`${file}:${i + 1}: ${line.trim()}`);
      });
    }
    expect(offenders).toEqual([]);
  });
});
