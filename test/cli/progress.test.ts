import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { PROGRESS_MIN_BYTES, shouldShowProgress, startProgress, totalInputBytes } from '../../src/cli/progress.js';

const dir = mkdtempSync(join(tmpdir(), 'tokenwatch-progress-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('progress bar', () => {
  it('shows only on a TTY and only above 50 MiB', () => {
    expect(PROGRESS_MIN_BYTES).toBe(50 * 1024 * 1024);
    expect(shouldShowProgress(true, PROGRESS_MIN_BYTES + 1)).toBe(true);
    expect(shouldShowProgress(true, PROGRESS_MIN_BYTES)).toBe(false);
    expect(shouldShowProgress(false, 10 * PROGRESS_MIN_BYTES)).toBe(false);
    expect(shouldShowProgress(undefined, 10 * PROGRESS_MIN_BYTES)).toBe(false);
  });

  it('sums the sizes of the files that exist', () => {
    const a = join(dir, 'a.log');
    const b = join(dir, 'b.log');
    writeFileSync(a, 'x'.repeat(10));
    writeFileSync(b, 'y'.repeat(32));
    expect(totalInputBytes([a, b, join(dir, 'missing.log')])).toBe(42);
  });

  it('writes nothing to a stream that is not a TTY', () => {
    const stream = new PassThrough() as unknown as NodeJS.WriteStream;
    const written: Buffer[] = [];
    (stream as unknown as PassThrough).on('data', (c: Buffer) => written.push(c));
    const a = join(dir, 'a.log');
    writeFileSync(a, 'x'.repeat(10));
    expect(startProgress([a], stream)).toBeUndefined();
    expect(written).toEqual([]);
  });
});
