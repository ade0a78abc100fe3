/**
 * The prefilter's two-needle search (src/audit/needle-search.ts): the WebAssembly SIMD search must give exactly what
 * two `Buffer.indexOf` calls give, wherever the haystack lives (its own memory or a copy) and wherever the needles
 * fall (block and copy-piece boundaries, the haystack's end, partial needles, overlapping candidates).
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { COPY_BYTES, MAX_NEEDLE_BYTES, READ_BUFFER_BYTES, needleSearch } from '../../src/audit/needle-search.js';
import { NEEDLE_SEARCH_WASM } from '../../src/audit/needle-search-wasm.js';
import { JsonlScanner, createReadStats } from '../../src/sources/reader.js';
import { TOKEN_ANNOTATION_NEEDLE, UNAUTHORIZED_NEEDLE } from '../../src/audit/records.js';
import type { TokenUse } from '../../src/audit/types.js';
// @ts-expect-error -- a plain .mjs script without types
import { generate } from '../../scripts/gen-wasm.mjs';

const A = Buffer.from(TOKEN_ANNOTATION_NEEDLE, 'latin1');
const B = Buffer.from(UNAUTHORIZED_NEEDLE, 'latin1');

/** The reference: the leftmost of the two `Buffer.indexOf` results at or after `from`. */
function reference(h: Buffer, a: Buffer, b: Buffer, from: number): number {
  const hits = [h.indexOf(a, from), h.indexOf(b, from)].filter((i) => i !== -1);
  return hits.length === 0 ? -1 : Math.min(...hits);
}

/** Every hit from 0 on, as a scanner walks them (`from` = last hit + 1). */
function allHits(find: (h: Buffer, from: number) => number, h: Buffer): number[] {
  const out: number[] = [];
  for (let at = find(h, 0); at !== -1; at = find(h, at + 1)) out.push(at);
  return out;
}

/** Audit-like filler with the needles' bytes in it (first and last bytes, prefixes), so candidates are frequent. */
const filler = fc
  .array(fc.constantFrom('a', 'A', '/', 'd', 'authentication.k8s.io', 'Authentication faile', 'uthentication failed', '"x":1,', '\n', ' ', 'é'), {
    maxLength: 120,
  })
  .map((parts) => parts.join(''));

/** A haystack: filler with whole needles put in at random places. */
const haystack = fc
  .array(fc.tuple(filler, fc.constantFrom('', TOKEN_ANNOTATION_NEEDLE, UNAUTHORIZED_NEEDLE)), { maxLength: 40 })
  .map((parts) => Buffer.from(parts.map(([f, n]) => f + n).join(''), 'utf8'));

describe('needleSearch', () => {
  it('runs the WebAssembly SIMD search on this Node (the fallback is for --jitless)', () => {
    expect(needleSearch(A, B).simd).toBe(true);
    expect(needleSearch(A, B, { wasm: false }).simd).toBe(false);
    expect(needleSearch(A, B, { wasm: false }).claimReadBuffer()).toBeUndefined();
  });

  it('finds the leftmost of either needle, from any offset, as two Buffer.indexOf calls do (copied haystacks)', () => {
    const simd = needleSearch(A, B);
    const fallback = needleSearch(A, B, { wasm: false });
    fc.assert(
      fc.property(haystack, fc.nat(), (h, f) => {
        const from = h.length === 0 ? 0 : f % (h.length + 2);
        const want = reference(h, A, B, from);
        expect(simd.indexOf(h, from)).toBe(want);
        expect(fallback.indexOf(h, from)).toBe(want);
        expect(allHits(simd.indexOf, h)).toEqual(allHits((x, i) => reference(x, A, B, i), h));
      }),
      { numRuns: 400 },
    );
  });

  it('is made once per thread and needle pair; its read buffer is held by one reader at a time', () => {
    const search = needleSearch(A, B);
    expect(needleSearch(Buffer.from(A), Buffer.from(B))).toBe(search);
    expect(needleSearch(B, A)).not.toBe(search);
    const held = search.claimReadBuffer();
    expect(held?.length).toBe(READ_BUFFER_BYTES);
    expect(search.claimReadBuffer()).toBeUndefined();
    search.releaseReadBuffer(Buffer.alloc(10)); // not the buffer: still held
    expect(search.claimReadBuffer()).toBeUndefined();
    search.releaseReadBuffer(held);
    const again = search.claimReadBuffer();
    expect(again).toBe(held);
    search.releaseReadBuffer(again);
  });

  it('gives the same results on haystacks read into its own memory (read buffer, no copy), at any offset and length', () => {
    const search = needleSearch(A, B);
    const mem = search.claimReadBuffer()!;
    expect(mem.length).toBe(READ_BUFFER_BYTES);
    fc.assert(
      fc.property(haystack, fc.nat(64), (h, offset) => {
        const len = Math.min(h.length, mem.length - offset);
        h.copy(mem, offset, 0, len);
        // Bytes after the haystack that would complete a needle must not be matched.
        mem.fill('d', offset + len, Math.min(mem.length, offset + len + 80));
        const view = mem.subarray(offset, offset + len);
        expect(allHits(search.indexOf, view)).toEqual(allHits((x, i) => reference(x, A, B, i), Buffer.from(view)));
      }),
      { numRuns: 300 },
    );
    search.releaseReadBuffer(mem);
  });

  it('finds needles across the 256 KiB pieces a copied haystack is searched in, and at its very end', () => {
    const search = needleSearch(A, B);
    const size = COPY_BYTES * 3 + 100;
    for (const at of [0, 15, 16, 31, 32, COPY_BYTES - A.length, COPY_BYTES - 10, COPY_BYTES - 1, COPY_BYTES, 2 * COPY_BYTES - 30, size - A.length]) {
      const h = Buffer.alloc(size, 'x');
      A.copy(h, at);
      expect(search.indexOf(h, 0)).toBe(at);
      expect(search.indexOf(h, at + 1)).toBe(-1);
    }
    // A needle cut off by the haystack's end is not a match.
    const cut = Buffer.concat([Buffer.alloc(1000, 'x'), B.subarray(0, B.length - 1)]);
    expect(search.indexOf(cut, 0)).toBe(-1);
  });

  it('works with any needles of 1–64 bytes, and refuses others', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 1, maxLength: MAX_NEEDLE_BYTES }),
        fc.uint8Array({ minLength: 1, maxLength: MAX_NEEDLE_BYTES }),
        fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 400 }),
        (a, b, picks) => {
          const na = Buffer.from(a);
          const nb = Buffer.from(b);
          const h = Buffer.concat(picks.map((p) => (p === 0 ? na : p === 1 ? nb : p === 2 ? na.subarray(0, na.length >> 1) : Buffer.from([a[0]!, 7]))));
          const search = needleSearch(na, nb);
          expect(allHits(search.indexOf, h)).toEqual(allHits((x, i) => reference(x, na, nb, i), h));
        },
      ),
      { numRuns: 300 },
    );
    expect(() => needleSearch(Buffer.alloc(0), B)).toThrow(RangeError);
    expect(() => needleSearch(A, Buffer.alloc(MAX_NEEDLE_BYTES + 1, 'a'))).toThrow(RangeError);
  });

  it('JsonlScanner: one scanner at a time reads into the search memory, and scans the same either way', () => {
    const line = (id: string, annotation: string) =>
      `${JSON.stringify({ kind: 'Event', apiVersion: 'audit.k8s.io/v1', auditID: id, stage: 'ResponseComplete', verb: 'get', user: { username: 'system:serviceaccount:kube-system:multus' }, requestReceivedTimestamp: '2022-05-19T11:38:39.000000Z', stageTimestamp: '2022-05-19T11:38:39.000100Z', annotations: { [annotation]: 'subject: system:serviceaccount:kube-system:multus, seconds after warning threshold: 4000' } })}\n`;
    const input = Buffer.from(line('a', 'authentication.k8s.io/stale-token') + line('b', 'authorization.k8s.io/reason') + 'not json\n');
    const scan = (into: Buffer | undefined, scanner: JsonlScanner, uses: TokenUse[]) => {
      const buf = into ?? Buffer.alloc(input.length);
      input.copy(buf);
      scanner.push(buf.subarray(0, input.length));
      scanner.end();
      return uses.map((u) => u.auditID);
    };
    const s1 = { stats: createReadStats(), uses: [] as TokenUse[] };
    const first = new JsonlScanner(s1.stats, s1.uses);
    const s2 = { stats: createReadStats(), uses: [] as TokenUse[] };
    const second = new JsonlScanner(s2.stats, s2.uses);
    const held = first.claimReadBuffer();
    expect(held).toBeDefined();
    expect(second.claimReadBuffer()).toBeUndefined(); // held by the first
    expect(scan(held, first, s1.uses)).toEqual(['a']);
    expect(scan(undefined, second, s2.uses)).toEqual(['a']);
    expect(s1.stats).toEqual(s2.stats);
    expect(s1.stats).toMatchObject({ lines: 3, events: 2, malformed: 1 });
    // end() gave it back; release() too (a reader that stops early).
    const third = new JsonlScanner(createReadStats(), []);
    expect(third.claimReadBuffer()).toBe(held);
    third.release();
    expect(new JsonlScanner(createReadStats(), []).claimReadBuffer()).toBe(held);
    needleSearch(A, B).releaseReadBuffer(held);
  });

  it('the committed module is what scripts/gen-wasm.mjs makes of needle-search.wat (run `npm run gen:wasm` after editing it)', async () => {
    const wat = readFileSync(new URL('../../src/audit/needle-search.wat', import.meta.url), 'utf8');
    const generated: string = await generate(wat);
    expect(generated).toContain(`'${NEEDLE_SEARCH_WASM}'`);
  });
});
