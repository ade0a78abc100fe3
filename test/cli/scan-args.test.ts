// `scan` arguments as a first-time user types them: positional files, a prefix of a flag, a cluster name serve would
// refuse, a duration for --max-token-age, and count words in errors. Everything through the real CLI.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from './run-cli.js';

const PLAIN = 'examples/audit/kube-apiserver-audit.log';
const GZ = 'examples/audit/kube-apiserver-audit-2026-11-19T06-00-00.000.log.gz';
const NOW = '2026-11-20T00:00:00Z';

interface Doc {
  cluster: string;
  stats: { files: number; events: number };
  findings: { rejectionAt: string | null; tokens?: { warnAfter: string | null; rejectionAt: string | null }[] }[];
}

function doc(stdout: string): Doc {
  return JSON.parse(stdout) as Doc;
}

describe('scan FILE… means --audit-log FILE…', () => {
  it('one positional file reads the same as --audit-log FILE', async () => {
    const [positional, flagged] = await Promise.all([
      runCli(['scan', PLAIN, '--format', 'json', '--now', NOW]),
      runCli(['scan', '--audit-log', PLAIN, '--format', 'json', '--now', NOW]),
    ]);
    expect(positional.code).toBe(0);
    expect(positional.stderr).toBe(flagged.stderr);
    expect(positional.stdout).toBe(flagged.stdout);
    expect(doc(positional.stdout).stats.files).toBe(1);
  });

  it('several positional files are several inputs', async () => {
    const [positional, flagged] = await Promise.all([
      runCli(['scan', PLAIN, GZ, '--format', 'json', '--now', NOW]),
      runCli(['scan', '--audit-log', PLAIN, GZ, '--format', 'json', '--now', NOW]),
    ]);
    expect(positional.code).toBe(0);
    expect(doc(positional.stdout).stats.files).toBe(2);
    expect(positional.stdout).toBe(flagged.stdout);
  });

  it('a missing positional file is reported like a missing --audit-log file', async () => {
    const run = await runCli(['scan', 'examples/nope.log']);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe('tokenwatch: cannot read examples/nope.log: no such file\n');
  });

  it('no file at all still names --audit-log and the positional form', async () => {
    const run = await runCli(['scan']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^tokenwatch: required option '--audit-log <file\.\.\.>' not specified .*arguments/);
  });
});

describe('a prefix of a flag gets a suggestion', () => {
  it.concurrent.each([
    ['--audit', '--audit-log'],
    ['--auditlog', '--audit-log'],
    ['--cluster-snap', '--cluster-snapshot'],
  ])('%s → %s', async (typed, meant) => {
    const run = await runCli(['scan', typed, PLAIN]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe(`tokenwatch: unknown option '${typed}' (Did you mean ${meant}?)\n`);
  });

  it('an ambiguous prefix (--max-… names two flags) gets none', async () => {
    const run = await runCli(['scan', '--max', PLAIN]);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe("tokenwatch: unknown option '--max'\n");
  });
});

describe('--cluster names serve would refuse', () => {
  it('Prod_EKS warns on stderr, the scan runs and exits 0 with the name kept', async () => {
    const run = await runCli(['scan', PLAIN, '--cluster', 'Prod_EKS', '--format', 'json', '--now', NOW]);
    expect(run.code).toBe(0);
    expect(run.stderr).toContain('tokenwatch: warning: --cluster "Prod_EKS" is not a DNS-1123 label');
    expect(doc(run.stdout).cluster).toBe('Prod_EKS');
  });

  it('the warning leaves --fail-on exit codes alone', async () => {
    const run = await runCli(['scan', PLAIN, '--cluster', 'Prod_EKS', '--fail-on', 'critical', '--format', 'json', '--now', NOW]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('DNS-1123');
  });

  it.concurrent.each(['prod-eks', 'a', 'x'.repeat(63)])('%s is a DNS-1123 label: no warning', async (name) => {
    const run = await runCli(['scan', PLAIN, '--cluster', name, '--format', 'json', '--now', NOW]);
    expect(run.code).toBe(0);
    expect(run.stderr).not.toContain('DNS-1123');
  });

  it.concurrent.each(['x'.repeat(64), '-prod', 'prod.eks'])('%s warns', async (name) => {
    const run = await runCli(['scan', PLAIN, '--cluster', name, '--format', 'json', '--now', NOW]);
    expect(run.code).toBe(0);
    expect(run.stderr).toContain('is not a DNS-1123 label');
  });
});

describe('--max-token-age takes the config grammar', () => {
  const SECONDS_OF_DAY = 86_400;
  it('90d is 7,776,000 seconds, the same report', async () => {
    const [days, seconds] = await Promise.all([
      runCli(['scan', PLAIN, '--max-token-age', '90d', '--format', 'json', '--now', NOW]),
      runCli(['scan', PLAIN, '--max-token-age', String(90 * SECONDS_OF_DAY), '--format', 'json', '--now', NOW]),
    ]);
    expect(days.code).toBe(0);
    expect(days.stdout).toBe(seconds.stdout);
  });

  it.concurrent.each([
    ['1d', SECONDS_OF_DAY],
    ['1d12h', 1.5 * SECONDS_OF_DAY],
    ['2w', 14 * SECONDS_OF_DAY],
  ])('%s puts every token’s rejection that many seconds after its warnafter', async (value, seconds) => {
    const run = await runCli(['scan', PLAIN, '--max-token-age', value, '--format', 'json', '--now', NOW]);
    expect(run.code).toBe(0);
    // Stale bound tokens only: legacy and 401 findings carry no warnafter.
    const tokens = doc(run.stdout).findings.flatMap((f) => f.tokens ?? []).filter((t) => t.warnAfter != null);
    expect(tokens.length).toBeGreaterThan(0);
    for (const t of tokens) expect(Date.parse(t.rejectionAt ?? '') - Date.parse(t.warnAfter ?? '')).toBe(seconds * 1000);
  });

  it.concurrent.each(['1500ms', '0s', '90 days', '1.5d', '-1d'])('%s is refused naming the grammar', async (value) => {
    const run = await runCli(['scan', PLAIN, '--max-token-age', value]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain(`'${value}' is invalid`);
    expect(run.stderr).toContain('a duration such as 90d');
  });
});

describe('count words in errors', () => {
  it('a metrics file with one sample says "1 sample"', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-scan-args-'));
    const file = join(dir, 'metrics.txt');
    writeFileSync(file, '# TYPE up gauge\nup 1\n');
    const run = await runCli(['scan', '--metrics', file, '--now', NOW]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('1 sample but no serviceaccount_');
    expect(run.stderr).not.toContain('1 samples');
  });

  it('a file whose only record is no audit event says so, not "1 records"', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-scan-args-'));
    const file = join(dir, 'rows.json');
    // A Logs Insights result row without @message: one record, recognised as that shape, not an audit event.
    writeFileSync(file, JSON.stringify([{ '@timestamp': '2022-01-01 00:00:00.000', note: 'hello' }]));
    const run = await runCli(['scan', file]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`cannot read ${file}: its only record is not an audit event`);
    expect(run.stderr).not.toMatch(/\b1 records\b/);
  });
});
