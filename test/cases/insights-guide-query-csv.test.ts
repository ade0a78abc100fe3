import { describe, expect, it } from 'vitest';
import { GUIDE_QUERY_EVIDENCE } from '../../src/scan/run.js';
import { assertExpected, scanCase } from './case.js';

describe('case insights-guide-query-csv', () => {
  it('gives the values of its expected.json', async () => {
    const { doc } = await scanCase('insights-guide-query-csv');
    assertExpected('insights-guide-query-csv', doc.findings);
    expect(doc.stats.malformed).toBe(0);
    // What such input cannot tell: said in the finding and in the warnings (stderr).
    const f = doc.findings.find((x) => x.serviceAccount === 'edge-router')!;
    expect(f.pods).toEqual([]);
    expect(f.cause.evidence).toContain(GUIDE_QUERY_EVIDENCE);
    expect(doc.warnings).toEqual([expect.objectContaining({ code: 'guide-query' })]);
  });
});
