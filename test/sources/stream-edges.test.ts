/** EdgeRecorder keeps exactly the first and last bytes of a stream, whatever the chunk sizes. */
import { describe, expect, it } from 'vitest';
import { EdgeRecorder } from '../../src/sources/stream-edges.js';

describe('EdgeRecorder', () => {
  it('head and tail equal the stream\'s first and last bytes, for chunks smaller and larger than them', () => {
    let seed = 7;
    const rand = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % n;
    };
    for (let round = 0; round < 200; round++) {
      const bytes = 1 + rand(40);
      const chunks: Buffer[] = [];
      for (let i = rand(12); i > 0; i--) chunks.push(Buffer.from(Array.from({ length: rand(3 * bytes) }, () => rand(256))));
      const all = Buffer.concat(chunks);
      const r = new EdgeRecorder('-', bytes);
      for (const c of chunks) {
        r.add(c);
        c.fill(0); // the reader reuses its chunks once scanned
      }
      const e = r.take();
      expect(e.head).toEqual(all.subarray(0, bytes));
      expect(e.tail).toEqual(all.subarray(Math.max(0, all.length - bytes)));
      expect(e.total).toBe(all.length);
      expect(e.partialLast).toBe(all.length > bytes);
      expect(e.partialFirst).toBe(all.length > bytes);
      expect(e.file).toBe('-');
    }
  });
});
