import { describe, expect, it } from 'vitest';
import { assertExpected, scanCase } from './case.js';

describe('case insights-guide-query-csv', () => {
  it('gives the values of its expected.json', async () => {
    const { doc } = await scanCase('insights-guide-query-csv');
    assertExpected('insights-guide-query-csv', doc.findings);
    expect(doc.stats.malformed).toBe(0);
  });
});
