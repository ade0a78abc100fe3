/**
 * The CLI's flag parsers (src/cli/options.ts) in-process: what each accepts, what it returns and that a bad value is
 * refused with commander's `InvalidArgumentError` saying what is expected (`parseNow` is tested in format.test.ts,
 * `parseJobs` in jobs.test.ts). The CLI's own handling of these errors (the flag named, one line, exit 2) is tested
 * through the real CLI in args.test.ts and scan-args.test.ts.
 */
import { InvalidArgumentError } from 'commander';
import { describe, expect, it } from 'vitest';
import { parseByteSize, parseClusterName, parseMaxTokenAgeFlag } from '../../src/cli/options.js';

describe('parseByteSize (--max-decompressed-bytes)', () => {
  it('reads binary units as powers of 1024 and decimal ones as powers of 1000, case-insensitively', () => {
    expect(parseByteSize('1073741824')).toBe(1_073_741_824);
    expect(parseByteSize('20GiB')).toBe(20 * 1024 ** 3);
    expect(parseByteSize('20g')).toBe(20 * 1024 ** 3);
    expect(parseByteSize('500MB')).toBe(500_000_000);
    expect(parseByteSize('3 kib')).toBe(3072);
    expect(parseByteSize('3kb')).toBe(3000);
    expect(parseByteSize('2T')).toBe(2 * 1024 ** 4);
    expect(parseByteSize('2TB')).toBe(2_000_000_000_000);
    expect(parseByteSize(' 7b ')).toBe(7);
  });

  it('rounds a fraction of a unit down to whole bytes', () => {
    expect(parseByteSize('1.5G')).toBe(1_610_612_736);
    expect(parseByteSize('1.0009K')).toBe(1024);
  });

  it.each([['0'], ['0.4'], ['-1'], ['1e3'], ['10 parsecs'], ['GiB'], [''], ['9999999T']])('refuses %j', (value) => {
    expect(() => parseByteSize(value)).toThrow(InvalidArgumentError);
    expect(() => parseByteSize(value)).toThrow('Expected a positive size in bytes, e.g. 20GiB, 500MB or 1073741824.');
  });
});

describe('parseClusterName (--cluster)', () => {
  it('takes any name without whitespace as it is', () => {
    expect(parseClusterName('prod-eks')).toBe('prod-eks');
    expect(parseClusterName('arn:aws:eks:eu-west-1:123456789012:cluster/prod')).toBe('arn:aws:eks:eu-west-1:123456789012:cluster/prod');
  });

  it.each([[''], ['prod eks'], [' prod'], ['prod\t']])('refuses %j', (value) => {
    expect(() => parseClusterName(value)).toThrow(new InvalidArgumentError('Expected a non-empty name without spaces.'));
  });
});

describe('parseMaxTokenAgeFlag (--max-token-age)', () => {
  it('takes the config grammar: eks, upstream, seconds or a duration', () => {
    expect(parseMaxTokenAgeFlag('eks')).toEqual({ mode: 'eks' });
    expect(parseMaxTokenAgeFlag(' Upstream ')).toEqual({ mode: 'upstream' });
    expect(parseMaxTokenAgeFlag('7776000')).toEqual({ mode: 'seconds', seconds: 7_776_000 });
    expect(parseMaxTokenAgeFlag('90d')).toEqual({ mode: 'seconds', seconds: 7_776_000 });
    expect(parseMaxTokenAgeFlag('1d12h')).toEqual({ mode: 'seconds', seconds: 129_600 });
  });

  it.each([['0'], ['-5'], ['1.5'], ['1500ms'], ['90 days'], ['']])('refuses %j in commander’s words, not the config’s', (value) => {
    expect(() => parseMaxTokenAgeFlag(value)).toThrow(InvalidArgumentError);
    expect(() => parseMaxTokenAgeFlag(value)).toThrow('Expected eks, upstream, a positive whole number of seconds or a duration such as 90d.');
  });
});
