/**
 * `scan --probe-report FILE` reading the saved ConfigMaps in process (src/probe/scan-input.ts): what it returns for a
 * saved list, and that every way a file can be wrong is an InputError naming the file and saying what is wrong.
 * test/probe/scan-probe.test.ts runs the same through the CLI.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { InputError } from '../../src/errors.js';
import type { ProbeReport } from '../../src/probe/host.js';
import { PROBE_NAMESPACE, probeConfigMap } from '../../src/probe/objects.js';
import { probeReportsFromFile } from '../../src/probe/scan-input.js';

const dir = mkdtempSync(join(tmpdir(), 'tw-probe-input-'));
const file = (name: string, text: string): string => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

/** Rejects with an InputError for `path`; resolves with its reason. */
async function reasonOf(path: string): Promise<string> {
  const err = await probeReportsFromFile(path).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(InputError);
  expect((err as InputError).file).toBe(path);
  expect((err as InputError).message).toContain(path);
  return (err as InputError).reason;
}

describe('probe reports from a saved ConfigMap list', () => {
  it('returns the report of each probe ConfigMap and leaves other ConfigMaps out', async () => {
    const report: ProbeReport = { version: 1, node: 'ip-10-0-1-5.ec2.internal', probedAt: '2026-11-20T12:00:00.000Z', globs: ['/etc/cni/net.d/**/*.kubeconfig'], entries: [] };
    const list = { apiVersion: 'v1', kind: 'List', items: [probeConfigMap(report, PROBE_NAMESPACE), { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'other' }, data: { x: '1' } }] };
    const reports = await probeReportsFromFile(file('list.json', JSON.stringify(list)));
    expect(reports).toEqual([report]);
  });

  it('a missing file, text that is not JSON and JSON that is not a ConfigMap list are input errors naming the file', async () => {
    expect(await reasonOf(join(dir, 'missing.json'))).toMatch(/ENOENT|no such file/);
    expect(await reasonOf(file('text.json', 'kind: List\n'))).toBe('not JSON');
    expect(await reasonOf(file('pod.json', '{"kind":"Pod"}'))).toContain('not a ConfigMap list');
  });
});
