/**
 * A fixed-size estimate of how many distinct strings were seen (HyperLogLog; Flajolet, Fusy, Gandouet, Meunier,
 * "HyperLogLog: the analysis of a near-optimal cardinality estimation algorithm", 2007), used to say "and about M more
 * sources" for 401s folded beyond the per-cluster bound without remembering each source. 4,096 one-byte registers
 * (standard error ≈ 1.04/√4096 ≈ 1.6 %), serialisable as base64 so the live store can keep it in a token record.
 * Pure: no I/O.
 */

/** log2 of the number of registers. */
const P = 12;
const M = 1 << P;
/** Bias correction for m ≥ 128 (paper, figure 3). */
const ALPHA = 0.7213 / (1 + 1.079 / M);

/** 32-bit FNV-1a over UTF-16 code units, then the MurmurHash3 finaliser for avalanche. */
function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Approximate distinct counter (see module doc). */
export class DistinctCounter {
  private readonly registers: Uint8Array;

  /** @param serialized a {@link serialize} output to continue from; a malformed value starts empty. */
  constructor(serialized?: string) {
    this.registers = new Uint8Array(M);
    if (serialized) {
      const bytes = Buffer.from(serialized, 'base64');
      if (bytes.length === M) this.registers.set(bytes);
    }
  }

  /** Counts `value` (again: no change). */
  add(value: string): void {
    const h = hash32(value);
    const idx = h >>> (32 - P);
    const rest = (h << P) >>> 0;
    const rho = rest === 0 ? 32 - P + 1 : Math.clz32(rest) + 1;
    if (rho > this.registers[idx]!) this.registers[idx] = rho;
  }

  /** Adds everything `other` has seen (register-wise max). */
  merge(other: DistinctCounter): void {
    for (let i = 0; i < M; i++) if (other.registers[i]! > this.registers[i]!) this.registers[i] = other.registers[i]!;
  }

  /** Estimated number of distinct values added, rounded (exact-ish below a few hundred, ≈ ±1.6 % above). */
  estimate(): number {
    let sum = 0;
    let zeros = 0;
    for (let i = 0; i < M; i++) {
      sum += 2 ** -this.registers[i]!;
      if (this.registers[i] === 0) zeros++;
    }
    const raw = (ALPHA * M * M) / sum;
    if (raw <= 2.5 * M && zeros > 0) return Math.round(M * Math.log(M / zeros)); // linear counting
    return Math.round(raw);
  }

  /** The registers as base64 (5,464 characters). */
  serialize(): string {
    return Buffer.from(this.registers).toString('base64');
  }
}
