/**
 * The prefilter's three-needle search (src/audit/needle-search.ts): the WebAssembly SIMD search must give exactly what
 * one `Buffer.indexOf` call per needle gives, wherever the haystack lives (its own memory or a copy) and wherever the needles
 * fall (block and copy-piece boundaries, the haystack's end, partial needles, overlapping candidates).
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { COPY_BYTES, MAX_NEEDLES, MAX_NEEDLE_BYTES, READ_BUFFER_BYTES, needleSearch } from '../../src/audit/needle-search.js';
import { NEEDLE_SEARCH_WASM } from '../../src/audit/needle-search-wasm.js';
import { JsonlScanner, createReadStats } from '../../src/sources/reader.js';
import { PREFILTER_ANCHORS, PREFILTER_NEEDLES, TOKEN_USE_TERMS } from '../../src/audit/terms.js';
import { PREFILTER_NEEDLE_BUFFERS, prefilterSearch } from '../../src/audit/records.js';
import type { TokenUse } from '../../src/audit/types.js';
// @ts-expect-error -- a plain .mjs script without types
import { generate } from '../../scripts/gen-wasm.mjs';

const [A, B, C] = PREFILTER_NEEDLE_BUFFERS as [Buffer, Buffer, Buffer];
const ABC = [A, B, C];

/** The reference: the leftmost of the `Buffer.indexOf` results of the needles at or after `from`. */
function reference(h: Buffer, needles: readonly Buffer[], from: number): number {
  const hits = needles.map((n) => h.indexOf(n, from)).filter((i) => i !== -1);
  return hits.length === 0 ? -1 : Math.min(...hits);
}

/** Every hit from 0 on, as a scanner walks them (`from` = last hit + 1). */
function allHits(find: (h: Buffer, from: number) => number, h: Buffer): number[] {
  const out: number[] = [];
  for (let at = find(h, 0); at !== -1; at = find(h, at + 1)) out.push(at);
  return out;
}

/**
 * Audit-like filler with the needles' bytes in it (first and last bytes, the prefilter's anchors, prefixes, near
 * misses), so candidates are frequent.
 */
const filler = fc
  .array(fc.constantFrom('a', 'A', '/', 'd', 'h', '8', 'f', 'z', 'authentication.k8s.io', 'authentication.k8s.i0/', 'authorization.k8s.io/', 'authentication.kubernetes.io/', 'Authentication faile', 'Authentication f', 'uthentication failed', 'Unauthorize', 'Unauthoriz', 'nauthorized', 'U', 'd', '"x":1,', '\n', ' ', 'é'), {
    maxLength: 120,
  })
  .map((parts) => parts.join(''));

/** A haystack: filler with whole needles put in at random places. */
const haystack = fc
  .array(fc.tuple(filler, fc.constantFrom('', ...PREFILTER_NEEDLES)), { maxLength: 40 })
  .map((parts) => Buffer.from(parts.map(([f, n]) => f + n).join(''), 'utf8'));

describe('prefilter needles', () => {
  it('cover every term of the one list (a record the CloudWatch filter and Insights select passes the prefilter) and hold no quote or backslash', () => {
    for (const t of TOKEN_USE_TERMS) expect(PREFILTER_NEEDLES.some((n) => t.includes(n)), t).toBe(true);
    for (const n of PREFILTER_NEEDLES) expect(n).not.toMatch(/["\\]/);
    expect(PREFILTER_NEEDLES.length).toBeLessThanOrEqual(MAX_NEEDLES);
  });
});

describe('needleSearch', () => {
  it('runs the WebAssembly SIMD search on this Node (the fallback is for --jitless)', () => {
    expect(needleSearch(ABC).simd).toBe(true);
    expect(needleSearch(ABC, { wasm: false }).simd).toBe(false);
    expect(needleSearch(ABC, { wasm: false }).claimReadBuffer()).toBeUndefined();
  });

  /** The default anchors (first and last bytes) and the prefilter's own (`PREFILTER_ANCHORS`). */
  const searches = () => [
    ['first and last bytes', needleSearch(ABC)],
    ['prefilter anchors', prefilterSearch()],
  ] as const;

  it.each([0, 1])('finds the leftmost of any needle, from any offset, as one Buffer.indexOf call per needle does (copied haystacks; search %i)', (which) => {
    const simd = searches()[which]![1];
    const fallback = needleSearch(ABC, { wasm: false });
    fc.assert(
      fc.property(haystack, fc.nat(), (h, f) => {
        const from = h.length === 0 ? 0 : f % (h.length + 2);
        const want = reference(h, ABC, from);
        expect(simd.indexOf(h, from)).toBe(want);
        expect(fallback.indexOf(h, from)).toBe(want);
        expect(allHits(simd.indexOf, h)).toEqual(allHits((x, i) => reference(x, ABC, i), h));
      }),
      { numRuns: 400 },
    );
  });

  it('is made once per thread and needle pair; its read buffer is held by one reader at a time', () => {
    const search = needleSearch(ABC);
    expect(needleSearch([Buffer.from(A), Buffer.from(B), Buffer.from(C)])).toBe(search);
    expect(needleSearch([B, A, C])).not.toBe(search);
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

  it.each([0, 1])('gives the same results on haystacks read into its own memory (read buffer, no copy), at any offset and length (search %i)', (which) => {
    const search = searches()[which]![1];
    const mem = search.claimReadBuffer()!;
    expect(mem.length).toBe(READ_BUFFER_BYTES);
    fc.assert(
      fc.property(haystack, fc.nat(64), (h, offset) => {
        const len = Math.min(h.length, mem.length - offset);
        h.copy(mem, offset, 0, len);
        // Bytes after the haystack that would complete a needle must not be matched.
        mem.fill('d', offset + len, Math.min(mem.length, offset + len + 80));
        const view = mem.subarray(offset, offset + len);
        expect(allHits(search.indexOf, view)).toEqual(allHits((x, i) => reference(x, ABC, i), Buffer.from(view)));
      }),
      { numRuns: 300 },
    );
    search.releaseReadBuffer(mem);
  });

  it('finds needles across the 256 KiB pieces a copied haystack is searched in, and at its very end', () => {
    const search = needleSearch(ABC);
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
        fc.array(fc.uint8Array({ minLength: 1, maxLength: MAX_NEEDLE_BYTES }), { minLength: 1, maxLength: MAX_NEEDLES }),
        fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 400 }),
        fc.array(fc.tuple(fc.nat(), fc.nat()), { minLength: MAX_NEEDLES, maxLength: MAX_NEEDLES }),
        (raw, picks, anchorPicks) => {
          const ns = raw.map((x) => Buffer.from(x));
          const h = Buffer.concat(
            picks.map((p) => {
              const n = ns[p % ns.length]!;
              return p < 3 ? n : p === 3 ? n.subarray(0, n.length >> 1) : Buffer.from([n[0]!, 7]);
            }),
          );
          const want = allHits((x, i) => reference(x, ns, i), h);
          expect(allHits(needleSearch(ns).indexOf, h)).toEqual(want);
          // Any two bytes of each needle as its anchors (the same one twice too): the same hits.
          const anchors = ns.map((n, k): [number, number] => [anchorPicks[k]![0] % n.length, anchorPicks[k]![1] % n.length]);
          expect(allHits(needleSearch(ns, { anchors }).indexOf, h)).toEqual(want);
        },
      ),
      { numRuns: 300 },
    );
    expect(() => needleSearch([])).toThrow(RangeError);
    expect(() => needleSearch([A, B, C, A])).toThrow(RangeError);
    expect(() => needleSearch([Buffer.alloc(0), B])).toThrow(RangeError);
    expect(() => needleSearch([A, Buffer.alloc(MAX_NEEDLE_BYTES + 1, 'a')])).toThrow(RangeError);
    expect(() => needleSearch([A, B], { anchors: [[0, 1]] })).toThrow(RangeError); // one pair per needle
    expect(() => needleSearch([A], { anchors: [[0, A.length]] })).toThrow(RangeError); // outside the needle
    expect(() => needleSearch([A], { anchors: [[-1, 0]] })).toThrow(RangeError);
  });

  it('the prefilter anchors lie inside their needles and are not the bytes every audit event holds at that distance', () => {
    expect(PREFILTER_ANCHORS.length).toBe(PREFILTER_NEEDLES.length);
    const anchored = (text: string, k: number): boolean => {
      const [x, y] = PREFILTER_ANCHORS[k]!;
      const n = PREFILTER_NEEDLES[k]!;
      return text.length > y && text[x] === n[x] && text[y] === n[y];
    };
    for (const [k, n] of PREFILTER_NEEDLES.entries()) expect(anchored(n, k)).toBe(true);
    // The keys and values of an ordinary EKS event (bench/run.ts's synthetic lines, examples/audit/) make no candidate.
    for (const common of ['authorization.k8s.io/decision', 'authorization.k8s.io/reason', 'authentication.kubernetes.io/pod-name', 'audit.k8s.io/v1']) {
      for (let at = 0; at < common.length; at++) {
        for (const k of PREFILTER_NEEDLES.keys()) expect(anchored(common.slice(at), k), `${common} at ${at}`).toBe(false);
      }
    }
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
    prefilterSearch().releaseReadBuffer(held);
  });

  it('the committed module is what scripts/gen-wasm.mjs makes of needle-search.wat (run `npm run gen:wasm` after editing it)', async () => {
    const wat = readFileSync(new URL('../../src/audit/needle-search.wat', import.meta.url), 'utf8');
    const generated: string = await generate(wat);
    expect(generated).toContain(`'${NEEDLE_SEARCH_WASM}'`);
  });
});
