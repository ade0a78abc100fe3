/**
 * Seeded pseudo-random numbers for the example generator: the same seed gives the same sequence on every
 * machine and Node version (pure 32-bit integer arithmetic: `xmur3` string hash → `sfc32` generator, both
 * public-domain algorithms from the PractRand family). Never use `Math.random` in the generator.
 */

/** Alphabet of Kubernetes random name suffixes (`k8s.io/apimachinery/pkg/util/rand`, `SafeEncodeString`). */
export const K8S_SUFFIX_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789';

function xmur3(str: string): () => number {
  let h = 1779033703 ^ str.length;
  for (let i = 0; i < str.length; i++) {
    h = Math.imul(h ^ str.charCodeAt(i), 3432918353);
    h = (h << 13) | (h >>> 19);
  }
  return () => {
    h = Math.imul(h ^ (h >>> 16), 2246822507);
    h = Math.imul(h ^ (h >>> 13), 3266489909);
    return (h ^= h >>> 16) >>> 0;
  };
}

/** A deterministic random stream. Streams forked by label are independent of each other's call order. */
export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  /** @param seed any string; equal seeds give equal streams. */
  constructor(readonly seed: string) {
    const h = xmur3(seed);
    this.a = h();
    this.b = h();
    this.c = h();
    this.d = h();
    for (let i = 0; i < 12; i++) this.u32();
  }

  /** Next unsigned 32-bit integer (sfc32). */
  u32(): number {
    this.a >>>= 0;
    this.b >>>= 0;
    this.c >>>= 0;
    this.d >>>= 0;
    let t = (this.a + this.b) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.d = (this.d + 1) | 0;
    t = (t + this.d) | 0;
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  /** Uniform float in [0, 1). */
  next(): number {
    return this.u32() / 4294967296;
  }

  /** Uniform integer in [lo, hi] (both inclusive). */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  /** One element of a non-empty array. */
  pick<T>(items: readonly T[]): T {
    const v = items[Math.floor(this.next() * items.length)];
    if (v === undefined) throw new Error('Rng.pick: empty array');
    return v;
  }

  /** `n` characters of `alphabet`. */
  chars(n: number, alphabet: string): string {
    let s = '';
    for (let i = 0; i < n; i++) s += alphabet[Math.floor(this.next() * alphabet.length)];
    return s;
  }

  /** Kubernetes-style random suffix (`kube-multus-ds-<5>`, `pod-template-hash`). */
  suffix(n = 5): string {
    return this.chars(n, K8S_SUFFIX_ALPHABET);
  }

  /** Lower-case hex string of `n` characters. */
  hex(n: number): string {
    return this.chars(n, '0123456789abcdef');
  }

  /** Decimal digit string of `n` characters (first digit non-zero). */
  digits(n: number): string {
    return this.chars(1, '123456789') + this.chars(n - 1, '0123456789');
  }

  /** RFC 4122 version-4 UUID, lower case. */
  uuid(): string {
    const h = this.hex(32).split('');
    h[12] = '4';
    h[16] = '89ab'[parseInt(h[16] ?? '0', 16) & 3] ?? '8';
    const s = h.join('');
    return `${s.slice(0, 8)}-${s.slice(8, 12)}-${s.slice(12, 16)}-${s.slice(16, 20)}-${s.slice(20)}`;
  }

  /** An independent stream derived from this stream's seed and `label`. */
  fork(label: string): Rng {
    return new Rng(`${this.seed}/${label}`);
  }
}
