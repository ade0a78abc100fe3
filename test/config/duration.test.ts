import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { DurationError, formatDuration, parseDuration } from '../../src/config/duration.js';

describe('parseDuration', () => {
  it.each([
    ['10m', 600_000],
    ['24h', 86_400_000],
    ['30m', 1_800_000],
    ['7d', 604_800_000],
    ['2w', 1_209_600_000],
    ['1h30m', 5_400_000],
    ['1d2h3m4s5ms', 93_784_005],
    ['500ms', 500],
    ['0s', 0],
    ['90d', 7_776_000_000],
  ])('%s → %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['', '10', '-5m', '1.5h', '10 minutes', '10M', 'm', '30m1h', '1h1h', '10mins', ' 10m', '10m ', '1y', '99999999999999999999d'])(
    'rejects %j',
    (text) => {
      expect(() => parseDuration(text)).toThrow(DurationError);
    },
  );

  it('says what it accepts', () => {
    expect(() => parseDuration('10')).toThrow(
      'invalid duration "10": expected an integer with a unit (ms, s, m, h, d, w), e.g. "10m", "24h", "7d" or "1h30m"',
    );
  });
});

describe('formatDuration', () => {
  it.each([
    [600_000, '10m'],
    [5_400_000, '1h30m'],
    [86_400_000, '1d'],
    [1_209_600_000, '14d'],
    [1500, '1s500ms'],
    [0, '0s'],
  ])('%d ms → %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it('rejects negative and fractional values', () => {
    expect(() => formatDuration(-1)).toThrow(RangeError);
    expect(() => formatDuration(1.5)).toThrow(RangeError);
  });

  it('round-trips through parseDuration', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10 * 365 * 86_400_000 }), (ms) => {
        expect(parseDuration(formatDuration(ms))).toBe(ms);
      }),
    );
  });
});
