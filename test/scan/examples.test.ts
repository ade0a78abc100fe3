/**
 * runScan over every input of the bundled examples (audit JSON lines plain and gzip, `filter-log-events`
 * output, Logs Insights CSV), checked against `examples/expected.json` (written by the examples generator).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { Finding } from '../../src/findings/types.js';
import { runScan } from '../../src/scan/run.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

interface ExpectedInput {
  files: string[];
  referenceTime: string;
  stats: { files: number; lines: number; auditEvents: number; malformed: number; tokenUses: number; duplicates: number };
  findings: {
    kind: Finding['kind'];
    namespace: string;
    serviceAccount: string;
    severity: Finding['severity'];
    requests: number;
    rejectionAt: string | null;
    workloads: Finding['workloads'];
  }[];
}
const expected = JSON.parse(readFileSync(`${ROOT}examples/expected.json`, 'utf8')) as {
  cluster: string;
  inputs: Record<string, ExpectedInput>;
};

describe.each(Object.entries(expected.inputs))('examples input %s', (_name, input) => {
  it('matches expected.json (reference time, stats, findings)', async () => {
    const result = await runScan({
      files: input.files.map((f) => `${ROOT}${f}`),
      cluster: expected.cluster,
      snapshot: `${ROOT}examples/cluster-snapshot.json`,
      maxTokenAge: { mode: 'eks' },
    });
    expect(result.nowSource).toBe('latest-event');
    expect(result.now).toBe(Date.parse(input.referenceTime));
    expect(result.report.stats).toEqual({
      files: input.stats.files,
      lines: input.stats.lines,
      events: input.stats.auditEvents,
      tokenUses: input.stats.tokenUses,
      malformed: input.stats.malformed,
      duplicates: input.stats.duplicates,
    });
    const summary = (f: ExpectedInput['findings'][number] | Finding) => ({
      kind: f.kind,
      namespace: f.namespace,
      serviceAccount: f.serviceAccount,
      severity: f.severity,
      requests: f.requests,
      rejectionAt: f.rejectionAt === null ? null : Date.parse(f.rejectionAt),
      workloads: f.workloads,
    });
    expect(result.report.findings.map(summary)).toEqual(input.findings.map(summary));
  });
});
