/**
 * The parallel read (src/scan/parallel.ts + worker.ts) gives exactly what the serial reader gives: same token uses
 * in the same order, same stats (files, lines, events, tokenUses, malformed, duplicates) and the same tail times,
 * over random inputs, random range sizes, random task completion orders and auditIDs repeated across files and
 * ranges. Most runs execute the tasks in-process (fast, any completion order); a few run real worker threads.
 */
import { closeSync, openSync } from 'node:fs';
import { mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createReadStats, readTokenUses } from '../../src/sources/reader.js';
import type { ReadStats, TokenUse } from '../../src/audit/types.js';
import { InputError } from '../../src/errors.js';
import { latestEventTimeOfFiles } from '../../src/scan/latest-event.js';
import {
  planParallelRead,
  readParallel,
  workerEntry,
  workerPool,
  type ParallelPlan,
  type TaskRunner,
} from '../../src/scan/parallel.js';
import { lineStart, runTask, type WorkerTask } from '../../src/scan/worker.js';

const FIX = path.join(path.dirname(new URL(import.meta.url).pathname), '../fixtures/audit');

let tmp: string;
let seq = 0;
beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'tw-parallel-prop-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});
const tmpFile = (ext: string): string => path.join(tmp, `f${seq++}${ext}`);

type Kind = 'stale' | 'legacy' | 'unauthorized' | 'none';

function event(id: string, kind: Kind, second: number): string {
  const annotations: Record<string, string> = { 'authorization.k8s.io/decision': 'allow' };
  if (kind === 'stale')
    annotations['authentication.k8s.io/stale-token'] =
      `subject: system:serviceaccount:kube-system:multus, seconds after warning threshold: ${4000 + second}`;
  if (kind === 'legacy') annotations['authentication.k8s.io/legacy-token-manual-secret'] = 'bot-token';
  const ts = new Date(Date.UTC(2022, 4, 19, 11, 0, second % 3600)).toISOString().replace('Z', '000Z');
  return JSON.stringify({
    kind: 'Event',
    apiVersion: 'audit.k8s.io/v1',
    level: 'Metadata',
    auditID: id,
    stage: 'ResponseComplete',
    verb: 'get',
    user: kind === 'unauthorized' ? {} : { username: 'system:serviceaccount:kube-system:multus' },
    sourceIPs: [`10.1.2.${second % 250}`],
    responseStatus:
      kind === 'unauthorized'
        ? { metadata: {}, message: 'Authentication failed, attempted: bearer', code: 401 }
        : { metadata: {}, code: 200 },
    requestReceivedTimestamp: ts,
    stageTimestamp: ts,
    annotations,
  });
}

/** One line of a random audit JSON-lines file: events (ids from a small pool, so repeated), junk, blanks, long lines. */
const lineArb = fc.oneof(
  { weight: 8, arbitrary: fc.record({ id: fc.integer({ min: 0, max: 30 }), kind: fc.constantFrom<Kind>('stale', 'legacy', 'unauthorized', 'none'), second: fc.nat(5000) }).map((e) => event(`id-${e.id}`, e.kind, e.second)) },
  { weight: 1, arbitrary: fc.constantFrom('', '   ', '\r', 'not json', '{"auditID":"x", broken', '{}', '{"kind":"Event"}', '\ufeff{"x":1}') },
  { weight: 1, arbitrary: fc.string({ maxLength: 30 }).filter((s) => !s.includes('\n')) },
  { weight: 1, arbitrary: fc.integer({ min: 100, max: 700 }).map((n) => `{"auditID":"long","annotations":{"authentication.k8s.io/x":"${'a'.repeat(n)}"}}`) },
);

const fileArb = fc.record({
  lines: fc.array(lineArb, { minLength: 0, maxLength: 40 }),
  crlf: fc.boolean(),
  bom: fc.boolean(),
  trailingNewline: fc.boolean(),
  gzip: fc.boolean(),
});

type FileSpec = typeof fileArb extends fc.Arbitrary<infer T> ? T : never;

async function writeSpec(spec: FileSpec): Promise<string> {
  // The first line is always an audit event, so the format is detected as audit JSON lines.
  const lines = [event('head', 'none', 0), ...spec.lines];
  let text = lines.join(spec.crlf ? '\r\n' : '\n') + (spec.trailingNewline ? '\n' : '');
  if (spec.bom) text = `\ufeff${text}`;
  const file = tmpFile(spec.gzip ? '.log.gz' : '.log');
  await writeFile(file, spec.gzip ? gzipSync(Buffer.from(text)) : text);
  return file;
}

interface ReadResult {
  uses: TokenUse[];
  stats: ReadStats;
}

async function serial(files: string[], maxLineBytes: number): Promise<ReadResult> {
  const stats = createReadStats();
  const uses: TokenUse[] = [];
  for await (const u of readTokenUses(files, stats, { maxLineBytes })) uses.push(u);
  return { uses, stats };
}

/** Runs tasks in this thread, finishing them in the order given by `delays` (ms), not in input order. */
function inProcess(delays: number[]): TaskRunner {
  let n = 0;
  return {
    run(task: WorkerTask, onReply) {
      const delay = delays.length > 0 ? (delays[n++ % delays.length] ?? 0) : 0;
      setTimeout(() => void runTask(task, onReply), delay);
    },
    close: async () => undefined,
  };
}

/**
 * A read's outcome for comparison: its uses until the end or the error, and the error's message (e.g. a file in which
 * no record is an audit event); `read` must push uses into `uses` as it goes.
 */
async function settle(uses: TokenUse[], read: Promise<unknown>): Promise<{ uses: TokenUse[]; error?: string }> {
  try {
    await read;
    return { uses };
  } catch (err) {
    return { uses, error: (err as Error).message };
  }
}

async function serialUses(files: string[], maxLineBytes: number, uses: TokenUse[]): Promise<ReadStats> {
  const stats = createReadStats();
  for await (const u of readTokenUses(files, stats, { maxLineBytes })) uses.push(u);
  return stats;
}

async function parallelUses(plan: ParallelPlan, runner: TaskRunner, uses: TokenUse[]): Promise<void> {
  const stats = createReadStats();
  for await (const u of readParallel(plan, stats, { runner }).uses) uses.push(u);
}

async function parallel(plan: ParallelPlan, runner: TaskRunner): Promise<ReadResult & { tail: number | undefined }> {
  const stats = createReadStats();
  const uses: TokenUse[] = [];
  const read = readParallel(plan, stats, { runner });
  for await (const u of read.uses) uses.push(u);
  return { uses, stats, tail: await read.tailLatest() };
}

// 150 random cases take about 5 s of CPU; with both cores busy (npm run test:busy) the first took over 20 s of wall
// time. A generous bound: the suite must pass on a busy machine.
describe('parallel read = serial read', { timeout: 120_000 }, () => {
  it('same uses, order, stats and tails for random files, ranges, completion orders and repeated auditIDs', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fileArb, { minLength: 1, maxLength: 4 }),
        fc.integer({ min: 1, max: 900 }),
        fc.integer({ min: 2, max: 4 }),
        fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 8 }),
        fc.constantFrom(64 * 1024 * 1024, 300, 900),
        async (specs, partBytes, jobs, delays, maxLineBytes) => {
          const files = await Promise.all(specs.map(writeSpec));
          const plan = await planParallelRead(files, { jobs, maxHitsPerMiB: Number.POSITIVE_INFINITY, minBytes: 0, partBytes, maxLineBytes });
          if (plan === undefined) {
            expect(specs.length).toBe(1); // a single task (one gzip file, or one range) is left serial
            return;
          }
          // A read that fails (a file in which no record is an audit event) fails alike: the same uses first, then
          // the same error, the first failing file's in input order.
          const serialOutcome = await settle([], Promise.resolve());
          serialOutcome.error = (await settle(serialOutcome.uses, serialUses(files, maxLineBytes, serialOutcome.uses))).error;
          if (serialOutcome.error !== undefined) {
            const par: TokenUse[] = [];
            const got = await settle(par, parallelUses(plan, inProcess(delays), par));
            expect(got).toEqual(serialOutcome);
            return;
          }
          const expected = await serial(files, maxLineBytes);
          const got = await parallel(plan, inProcess(delays));
          expect(got.uses).toEqual(expected.uses);
          expect(got.stats).toEqual(expected.stats);
          const gz = files.filter((f) => plan.workerTailFiles.has(f));
          expect(got.tail).toEqual(await latestEventTimeOfFiles(gz));
        },
      ),
      { numRuns: 150 },
    );
  });

  it('with real worker threads', async () => {
    expect(workerEntry().pathname.endsWith('/src/scan/worker-tsx.mjs')).toBe(true);
    await fc.assert(
      fc.asyncProperty(
        fc.array(fileArb, { minLength: 2, maxLength: 3 }),
        fc.integer({ min: 50, max: 900 }),
        async (specs, partBytes) => {
          const files = await Promise.all(specs.map(writeSpec));
          const plan = await planParallelRead(files, { jobs: 2, maxHitsPerMiB: Number.POSITIVE_INFINITY, minBytes: 0, partBytes });
          expect(plan).toBeDefined();
          const ser: TokenUse[] = [];
          const serialOutcome = await settle(ser, serialUses(files, 64 * 1024 * 1024, ser));
          if (serialOutcome.error !== undefined) {
            const par: TokenUse[] = [];
            expect(await settle(par, parallelUses(plan!, workerPool(plan!.workers), par))).toEqual(serialOutcome);
            return;
          }
          const expected = await serial(files, 64 * 1024 * 1024);
          const got = await parallel(plan!, workerPool(plan!.workers));
          expect(got.uses).toEqual(expected.uses);
          expect(got.stats).toEqual(expected.stats);
        },
      ),
      { numRuns: 4 },
    );
  });
});

describe('parallel read', () => {
  it('reads exports and CSV whole and dedupes across them and split files', async () => {
    const big = tmpFile('.log');
    // The fixture's events again, plus its own lines: duplicates within and across files.
    const audit = await readFile(path.join(FIX, 'audit.log'), 'utf8');
    await writeFile(big, audit + audit);
    const files = [
      big,
      path.join(FIX, 'insights.csv'),
      path.join(FIX, 'filter-log-events.json'),
      path.join(FIX, 'audit.log.gz'),
      path.join(FIX, 'insights.json'),
    ];
    const expected = await serial(files, 64 * 1024 * 1024);
    const plan = await planParallelRead(files, { jobs: 2, maxHitsPerMiB: Number.POSITIVE_INFINITY, minBytes: 0, partBytes: 97 });
    expect(plan?.tasks.map((t) => t.kind)).toContain('range');
    expect(plan?.tasks.filter((t) => t.kind === 'file').map((t) => path.basename(t.file))).toEqual([
      'insights.csv',
      'filter-log-events.json',
      'insights.json',
    ]);
    const got = await parallel(plan!, inProcess([2, 0, 1]));
    expect(got.uses).toEqual(expected.uses);
    expect(got.stats).toEqual(expected.stats);
    expect(got.stats.duplicates).toBeGreaterThan(0);
  });

  it('throws the error of the first bad file in input order, worded as the serial reader words it', async () => {
    const good = tmpFile('.log');
    await writeFile(good, `${event('a', 'stale', 1)}\n`.repeat(50));
    const files = [good, path.join(FIX, 'corrupt.log.gz'), path.join(FIX, 'unknown.txt')];
    const serialErr = await serial(files, 64 * 1024 * 1024).catch((e: unknown) => e);
    expect(serialErr).toBeInstanceOf(InputError);
    const plan = await planParallelRead(files, { jobs: 2, maxHitsPerMiB: Number.POSITIVE_INFINITY, minBytes: 0, partBytes: 500 });
    const err = await parallel(plan!, inProcess([3, 0])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InputError);
    expect((err as InputError).message).toBe((serialErr as InputError).message);
    expect((err as InputError).file).toBe(path.join(FIX, 'corrupt.log.gz'));
  });

  it('a worker thread that dies fails the read with an error naming it (no hang)', async () => {
    // As worker.ts does: says it is ready (the pool sends no task before), then dies on its first task.
    const dying = tmpFile('.mjs');
    await writeFile(
      dying,
      "import { parentPort } from 'node:worker_threads';\nparentPort.on('message', () => process.exit(3));\nparentPort.postMessage({ type: 'ready' });\n",
    );
    const f = tmpFile('.log');
    await writeFile(f, `${event('d', 'stale', 1)}\n`.repeat(100));
    const plan = await planParallelRead([f], { jobs: 2, maxHitsPerMiB: Number.POSITIVE_INFINITY, minBytes: 0, partBytes: 1000 });
    const err = await parallel(plan!, workerPool(2, new URL(`file://${dying}`), false)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toBe('scan worker failed: worker exited with code 3');
  });

  it('a worker thread that cannot start fails the read too (it is given no task before it is ready)', async () => {
    const broken = tmpFile('.mjs');
    await writeFile(broken, "throw new Error('cannot load');\n");
    const f = tmpFile('.log');
    await writeFile(f, `${event('d', 'stale', 1)}\n`.repeat(100));
    const plan = await planParallelRead([f], { jobs: 2, maxHitsPerMiB: Number.POSITIVE_INFINITY, minBytes: 0, partBytes: 1000 });
    const err = await parallel(plan!, workerPool(2, new URL(`file://${broken}`), false)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/^scan worker failed: cannot load/);
  });

  it('a worker that is not ready yet gets no task: the calling thread reads everything meanwhile', async () => {
    const silent = tmpFile('.mjs'); // never says ready
    await writeFile(silent, "import { parentPort } from 'node:worker_threads';\nparentPort.on('message', () => process.exit(4));\n");
    const f = tmpFile('.log');
    await writeFile(f, `${event('d', 'stale', 1)}\n`.repeat(100));
    const plan = await planParallelRead([f], { jobs: 2, maxHitsPerMiB: Number.POSITIVE_INFINITY, minBytes: 0, partBytes: 1000 });
    expect(plan!.tasks.length).toBeGreaterThan(2);
    const got = await parallel(plan!, workerPool(2, new URL(`file://${silent}`)));
    expect(got.stats.lines).toBe(100);
  });

  it('reads the file it planned even when the path is rotated away mid-read (one handle, as the serial reader)', async () => {
    // kube-apiserver rotates its audit log by renaming it; the ranges must not go on in the new file (found by the
    // new-user trial: 90,315 of 1,467,360 lines read, exit 0).
    const f = tmpFile('.log');
    const original = Array.from({ length: 200 }, (_, i) => event(`r${i}`, i % 10 === 0 ? 'stale' : 'none', i)).join('\n');
    await writeFile(f, `${original}\n`);
    const want = await serial([f], 64 * 1024 * 1024);
    const plan = await planParallelRead([f], { jobs: 2, maxHitsPerMiB: Number.POSITIVE_INFINITY, minBytes: 0, partBytes: 2000 });
    expect(plan!.tasks.filter((t) => t.kind === 'range').length).toBeGreaterThan(5);
    expect(plan!.handles).toHaveLength(1);
    await rename(f, `${f}.1`);
    await writeFile(f, `${event('new', 'stale', 999)}\n`);
    const got = await parallel(plan!, workerPool(2));
    expect(got.uses).toEqual(want.uses);
    expect(got.stats).toEqual(want.stats);
    expect(plan!.handles).toHaveLength(0); // closed when the read ended
  });

  it('checks every file before reading any, as the serial reader does', async () => {
    await expect(planParallelRead([path.join(FIX, 'audit.log'), path.join(FIX, 'nope.log')], { jobs: 2, minBytes: 0 })).rejects.toThrow(
      /nope\.log: cannot read file \(ENOENT/,
    );
    await expect(planParallelRead([FIX], { jobs: 2, minBytes: 0 })).rejects.toThrow(/is a directory/);
  });

  it('stays serial for one thread, small inputs, a single gzip file', async () => {
    const f = path.join(FIX, 'audit.log');
    expect(await planParallelRead([f, f], { jobs: 1, minBytes: 0 })).toBeUndefined();
    expect(await planParallelRead([f, f], { jobs: 2 })).toBeUndefined(); // under PARALLEL_MIN_BYTES
    expect(await planParallelRead([path.join(FIX, 'audit.log.gz')], { jobs: 2, minBytes: 0 })).toBeUndefined();
  });

  it('lineStart: a range starts after the first newline at or after offset - 1', async () => {
    const file = tmpFile('.log');
    await writeFile(file, 'ab\ncd\n\nef');
    const fd = openSync(file, 'r');
    try {
      const buf = Buffer.alloc(2); // smaller than the lines: the search goes on across reads
      expect([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((o) => lineStart(fd, o, buf))).toEqual([0, 3, 3, 3, 6, 6, 6, 7, 9, 9, 9]);
    } finally {
      closeSync(fd);
    }
  });
});

describe('parallel plan', () => {
  it('counts gzip files at their uncompressed size (trailer ISIZE) against the serial threshold', async () => {
    const text = `${event('z', 'stale', 1)}\n`.repeat(2000); // ~1 MB, compresses to a few KB
    const a = tmpFile('.log.gz');
    const b = tmpFile('.log.gz');
    await writeFile(a, gzipSync(Buffer.from(text)));
    await writeFile(b, gzipSync(Buffer.from(text)));
    const bytes = Buffer.byteLength(text);
    expect(await planParallelRead([a, b], { jobs: 2, maxHitsPerMiB: Number.POSITIVE_INFINITY, minBytes: 2 * bytes + 1 })).toBeUndefined();
    const plan = await planParallelRead([a, b], { jobs: 2, maxHitsPerMiB: Number.POSITIVE_INFINITY, minBytes: 2 * bytes });
    expect(plan?.tasks.map((t) => t.kind)).toEqual(['gzip', 'gzip']);
    expect([...(plan?.workerTailFiles ?? [])]).toEqual([a, b]);
  });
});
