/** `sha256Hex` (src/core/digest.ts) gives the digests `node:crypto` gave, so finding and group ids stay the same. */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/core/digest.js';

describe('sha256Hex', () => {
  it('is SHA-256: the FIPS 180-4 example "abc" and the empty string', () => {
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(sha256Hex('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  });

  it('equals createHash("sha256") of the same text as UTF-8, whatever the text (ids: unit separators, non-ASCII, lone surrogates)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 300 }), fc.string({ unit: fc.constantFrom('\u001f', '/', 'é', '\ud800', '😀', 'a') }), (a, b) => {
        const text = `${a}${b}`;
        expect(sha256Hex(text)).toBe(createHash('sha256').update(text).digest('hex'));
      }),
      { numRuns: 300 },
    );
  });
});
