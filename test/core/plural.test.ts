/** `groupedNumber` prints what `toLocaleString('en-US')` prints, without loading `Intl` for whole numbers. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { countOf, groupedNumber } from '../../src/core/plural.js';

describe('groupedNumber', () => {
  it('groups whole numbers as en-US does', () => {
    for (const n of [0, 1, 12, 123, 1234, 12_345, 123_456, 1_234_567, 999_999, 1_000_000, -1, -1234, -1_000_000, Number.MAX_SAFE_INTEGER]) {
      expect(groupedNumber(n)).toBe(n.toLocaleString('en-US'));
    }
    expect(groupedNumber(759_487)).toBe('759,487');
  });

  it('equals toLocaleString for any safe integer', () => {
    fc.assert(fc.property(fc.maxSafeInteger(), (n) => groupedNumber(n) === n.toLocaleString('en-US')));
  });

  it('hands other numbers to toLocaleString', () => {
    for (const n of [1.5, 1234.5678, -0.25, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 60, -0]) expect(groupedNumber(n)).toBe(n.toLocaleString('en-US'));
  });

  it('countOf: the number and the noun', () => {
    expect(countOf(1, 'line')).toBe('1 line');
    expect(countOf(1234, 'line')).toBe('1,234 lines');
    expect(countOf(2, 'child', 'children')).toBe('2 children');
  });
});
