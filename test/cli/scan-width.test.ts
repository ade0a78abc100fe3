// The default scan table fits the output width; --wide keeps the full table. Through the real CLI.
import { describe, expect, it } from 'vitest';
import { runCli } from './run-cli.js';

const DEMO = [
  'scan',
  'examples/audit/kube-apiserver-audit-2026-11-19T06-00-00.000.log.gz',
  'examples/audit/kube-apiserver-audit.log',
  '--cluster',
  'prod-eks',
  '--cluster-snapshot',
  'examples/cluster-snapshot.json',
];

/** Widths in characters (code points: the box drawing is one column each). */
const widths = (out: string): number[] => out.split('\n').map((l) => [...l].length);

describe('scan table width', () => {
  it.concurrent.each([
    ['not a terminal: 80', {}, 80],
    ['COLUMNS=120', { COLUMNS: '120' }, 120],
  ])('%s: no line is longer, pods and fixes are listed under the table', async (_name, env, width) => {
    const run = await runCli(DEMO, env);
    expect(run.code).toBe(0);
    expect(Math.max(...widths(run.stdout))).toBeLessThanOrEqual(width);
    expect(run.stdout).toContain('   pods: kube-multus-ds-458dh');
    expect(run.stdout).toMatch(/^ {3}fix: Move to the Multus thick plugin/m);
    // The 401 finding of kube-system/multus is critical because of its 15 401s, and says so.
    expect(run.stdout).toContain('(401s)');
    expect(run.stdout).toContain('critical: the API server answered 401 Unauthorized to 15 requests');
  });

  it('--wide keeps the full table, wider than 120 columns, with pods and cause in columns', async () => {
    const run = await runCli([...DEMO, '--wide'], { COLUMNS: '80' });
    expect(run.code).toBe(0);
    expect(Math.max(...widths(run.stdout))).toBeGreaterThan(120);
    const header = run.stdout.split('\n').slice(0, 3).join('\n');
    for (const h of ['cluster', 'workload(s)', 'pods', 'cause']) expect(header).toContain(h);
    expect(run.stdout).toContain('(401s)');
  });
});
