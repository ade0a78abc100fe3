/**
 * Runs a case from `test/fixtures/cases/<slug>/` (cases from public reports: input files,
 * `cluster.json`, `expected.json`) through the same pipeline `tokenwatch scan --cluster prod --format json` runs,
 * and asserts every value of `expected.json` (the rules each case's README states; `soft` checks are
 * asserted too unless listed there).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { jsonDocument } from '../../src/cli/commands/scan.js';
import type { Finding } from '../../src/findings/types.js';
import { runScan, type ScanResult } from '../../src/scan/run.js';

export const CASES_DIR = path.join(path.dirname(new URL(import.meta.url).pathname), '../fixtures/cases');

interface ExpectedFinding {
  case: string;
  namespace: string;
  serviceAccount: string | null;
  kind?: string;
  kinds?: string[];
  requests?: number;
  rejectionAt?: string | null;
  maxSecondsAfterWarning?: number;
  severity?: string;
  severities?: string[];
  pods?: string[];
  workloads?: Array<{ kind: string; namespace: string; name: string }>;
  causeIds?: string[];
  notCause?: string;
  component?: string | null;
  soft?: string[];
}

export interface Expected {
  files: string[];
  args?: string[];
  noSnapshot?: boolean;
  findings: ExpectedFinding[];
}

/** Loads a case's expected.json. */
export function expectedOf(slug: string): Expected {
  return JSON.parse(readFileSync(path.join(CASES_DIR, slug, 'expected.json'), 'utf8')) as Expected;
}

/** Scans the case's inputs as `scan --cluster prod` would (with its cluster snapshot unless `noSnapshot`). */
export async function scanCase(slug: string): Promise<{ result: ScanResult; doc: { findings: Finding[]; stats: Record<string, unknown>; warnings: unknown[] } }> {
  const exp = expectedOf(slug);
  const dir = path.join(CASES_DIR, slug);
  const result = await runScan({
    files: exp.files.map((f) => path.join(dir, f)),
    cluster: 'prod',
    maxTokenAge: { mode: 'eks' },
    ...(exp.noSnapshot ? {} : { snapshot: path.join(dir, 'cluster.json') }),
  });
  const doc = JSON.parse(JSON.stringify(jsonDocument(result, 'prod'))) as {
    findings: Finding[];
    stats: Record<string, unknown>;
    warnings: unknown[];
  };
  return { result, doc };
}

/** Asserts every expected finding's values (check-cases.mjs rules: rejectionAt ±2 s, exact pods, …). */
export function assertExpected(slug: string, findings: Finding[]): void {
  for (const e of expectedOf(slug).findings) {
    const kinds = e.kinds ?? [e.kind];
    const f = findings.find(
      (x) => x.namespace === e.namespace && (e.serviceAccount === null || x.serviceAccount === e.serviceAccount) && kinds.includes(x.kind),
    );
    expect(f, `${e.case}: a ${kinds.join('|')} finding for ${e.namespace}/${e.serviceAccount}`).toBeDefined();
    if (!f) continue;
    if (e.requests !== undefined) expect(f.requests, `${e.case} requests`).toBe(e.requests);
    if (e.rejectionAt !== undefined) {
      if (e.rejectionAt === null) expect(f.rejectionAt).toBeNull();
      else expect(Math.abs(Date.parse(f.rejectionAt ?? '') - Date.parse(e.rejectionAt)), `${e.case} rejectionAt`).toBeLessThanOrEqual(2000);
    }
    if (e.maxSecondsAfterWarning !== undefined) expect(f.maxSecondsAfterWarning, `${e.case} maxSecondsAfterWarning`).toBe(e.maxSecondsAfterWarning);
    if (e.pods) expect([...f.pods].sort(), `${e.case} pods`).toEqual([...e.pods].sort());
    if (e.workloads) {
      for (const w of e.workloads) expect(f.workloads, `${e.case} workloads`).toContainEqual(expect.objectContaining(w));
    }
    if (e.causeIds) expect(e.causeIds, `${e.case} cause`).toContain(f.cause.id);
    if (e.notCause) expect(f.cause.id).not.toBe(e.notCause);
    if (e.component !== undefined) expect(f.cause.component, `${e.case} component`).toBe(e.component);
    const sevs = e.severities ?? (e.severity !== undefined ? [e.severity] : undefined);
    if (sevs) expect(sevs, `${e.case} severity`).toContain(f.severity);
  }
}
