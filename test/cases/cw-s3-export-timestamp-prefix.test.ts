import { describe, expect, it } from 'vitest';
import { assertExpected, scanCase } from './case.js';

describe('case cw-s3-export-timestamp-prefix', () => {
  it('gives the values of its expected.json', async () => {
    const { doc } = await scanCase('cw-s3-export-timestamp-prefix');
    assertExpected('cw-s3-export-timestamp-prefix', doc.findings);
    expect(doc.stats.malformed).toBe(0);
    expect(doc.warnings).toEqual([]); // a complete result, well under the 10,000-row cap
  });
});
