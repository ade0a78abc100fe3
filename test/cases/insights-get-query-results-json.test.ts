import { describe, expect, it } from 'vitest';
import { assertExpected, scanCase } from './case.js';

describe('case insights-get-query-results-json', () => {
  it('gives the values of its expected.json', async () => {
    const { doc } = await scanCase('insights-get-query-results-json');
    assertExpected('insights-get-query-results-json', doc.findings);
    expect(doc.stats.malformed).toBe(0);
    expect(doc.warnings).toEqual([]); // a complete result, well under the 10,000-row cap
  });
});
