import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JsonlScanner, createReadStats, readTokenUses } from '../../src/sources/reader.js';
import { JsonExportScanner } from '../../src/audit/json-export-scanner.js';
import { tokenUseFromRecordText } from '../../src/audit/records.js';
import type { ReadStats, TokenUse } from '../../src/audit/types.js';
import { InputError } from '../../src/errors.js';

const FIX = path.join(path.dirname(new URL(import.meta.url).pathname), '../fixtures/audit');

let tmp: string;
let seq = 0;
beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'tw-audit-prop-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});
const tmpFile = (ext: string): string => path.join(tmp, `f${seq++}${ext}`);

type Kind = 'stale' | 'legacy' | 'unauthorized' | 'none';

function event(id: string, kind: Kind, stage: string): string {
  const annotations: Record<string, string> = { 'authorization.k8s.io/decision': 'allow' };
  if (kind === 'stale')
    annotations['authentication.k8s.io/stale-token'] =
      'subject: system:serviceaccount:kube-system:multus, seconds after warning threshold: 4000';
  if (kind === 'legacy') annotations['authentication.k8s.io/legacy-token-manual-secret'] = 'bot-token';
  return JSON.stringify({
    kind: 'Event',
    apiVersion: 'audit.k8s.io/v1',
    level: 'Metadata',
    auditID: id,
    stage,
    verb: 'get',
    user: kind === 'unauthorized' ? {} : { username: 'system:serviceaccount:kube-system:multus' },
    sourceIPs: ['10.1.2.3'],
    responseStatus:
      kind === 'unauthorized'
        ? { metadata: {}, message: 'Authentication failed, attempted: bearer', code: 401 }
        : { metadata: {}, code: 200 },
    requestReceivedTimestamp: '2022-05-19T11:38:39.000000Z',
    stageTimestamp: '2022-05-19T11:38:39.000100Z',
    annotations,
  });
}

async function readAll(files: string[], maxLineBytes?: number): Promise<{ uses: TokenUse[]; stats: ReadStats }> {
  const stats = createReadStats();
  const uses: TokenUse[] = [];
  for await (const u of readTokenUses(files, stats, maxLineBytes ? { maxLineBytes } : {})) uses.push(u);
  return { uses, stats };
}

describe('reader properties', () => {
  const validLine = event('valid-1', 'stale', 'ResponseComplete') + '\n';

  it('never throws on arbitrary bytes after a valid event line (InputError only for binary heads, or when no record is readable)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.uint8Array({ maxLength: 4000 }),
          // text-like bytes with JSON punctuation and needles, more likely to reach the parser
          fc
            .array(
              fc.oneof(
                fc.constantFrom('{', '}', '"', ':', ',', '\n', '\r', ' ', '\\', 'authentication.k8s.io/stale-token', 'Authentication failed', '"auditID":"x"'),
                fc.string({ maxLength: 20 }),
              ),
              { maxLength: 200 },
            )
            .map((parts) => new Uint8Array(Buffer.from(parts.join('')))),
        ),
        fc.integer({ min: 64, max: 1 << 20 }),
        async (bytes, maxLineBytes) => {
          const file = tmpFile('.log');
          const content = Buffer.concat([Buffer.from(validLine), Buffer.from(bytes)]);
          await writeFile(file, content);
          const binaryHead = content.subarray(0, 64 * 1024).includes(0);
          try {
            const { uses, stats } = await readAll([file], maxLineBytes);
            // NUL bytes after the valid first line: the lines holding them are skipped (counted), the file is read.
            if (binaryHead) expect((stats.nulLines ?? 0) + (stats.oversized ?? 0)).toBeGreaterThan(0);
            expect(stats.lines).toBe(stats.events + stats.malformed);
            expect(stats.tokenUses).toBe(uses.length);
            expect(new Set(uses.map((u) => u.auditID)).size).toBe(uses.length);
            if (maxLineBytes >= validLine.length) expect(uses[0]?.auditID).toBe('valid-1');
          } catch (err) {
            expect(err).toBeInstanceOf(InputError);
            // A head with binary data, or a file in which not one record is an audit event (here: only when the
            // valid first line is over maxLineBytes) — never every line malformed and no error.
            const noEvent = /(none of its \d+ records is|its only record is not) an audit event/.test((err as Error).message);
            expect(binaryHead || (noEvent && maxLineBytes < validLine.length)).toBe(true);
          }
        },
      ),
      { numRuns: 150 },
    );
  });

  it('JsonlScanner gives the same result whatever the chunking', async () => {
    const content = await readFile(path.join(FIX, 'audit.log'));
    const whole = createReadStats();
    const wholeOut: TokenUse[] = [];
    const s0 = new JsonlScanner(whole, wholeOut);
    s0.push(content);
    s0.end();
    await fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: content.length }), { maxLength: 40 }), (cuts) => {
        const points = [0, ...cuts.sort((a, b) => a - b), content.length];
        const stats = createReadStats();
        const out: TokenUse[] = [];
        const s = new JsonlScanner(stats, out);
        for (let i = 1; i < points.length; i++) s.push(Buffer.from(content.subarray(points[i - 1], points[i])));
        s.end();
        expect(stats).toEqual(whole);
        expect(out).toEqual(wholeOut);
      }),
      { numRuns: 200 },
    );
  });

  it('never yields an auditID twice, and yields every request with a token signal', async () => {
    const ev = fc.record({
      id: fc.integer({ min: 0, max: 7 }),
      kind: fc.constantFrom<Kind>('stale', 'legacy', 'unauthorized', 'none'),
      stage: fc.constantFrom('RequestReceived', 'ResponseStarted', 'ResponseComplete'),
    });
    const file = fc.record({
      format: fc.constantFrom('jsonl', 'jsonl.gz', 'filter-log-events', 'insights-csv'),
      events: fc.array(ev, { maxLength: 12 }),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(file, { minLength: 1, maxLength: 3 }), async (files) => {
        const paths: string[] = [];
        const kindOf = new Map<string, Kind>(); // one kind per request id, as in a real log
        let tokenEvents = 0;
        for (const f of files) {
          const lines = f.events.map((e) => {
            const id = `req-${e.id}`;
            if (!kindOf.has(id)) kindOf.set(id, e.kind);
            const kind = kindOf.get(id)!;
            if (kind !== 'none') tokenEvents++;
            return event(id, kind, e.stage);
          });
          const p = tmpFile('.' + f.format);
          if (f.format === 'jsonl') await writeFile(p, lines.join('\n') + '\n');
          else if (f.format === 'jsonl.gz') await writeFile(p, gzipSync(lines.join('\n') + '\n'));
          else if (f.format === 'filter-log-events')
            await writeFile(p, JSON.stringify({ events: lines.map((message, i) => ({ logStreamName: 's', timestamp: i, message, ingestionTime: i, eventId: String(i) })), searchedLogStreams: [] }, null, 2));
          else await writeFile(p, ['@timestamp,@message', ...lines.map((m) => `t,"${m.replaceAll('"', '""')}"`)].join('\n') + '\n');
          paths.push(p);
        }
        const { uses, stats } = await readAll(paths);
        const ids = uses.map((u) => u.auditID);
        expect(new Set(ids).size).toBe(ids.length);
        const expected = [...kindOf].filter(([, k]) => k !== 'none').map(([id]) => id);
        expect(new Set(ids)).toEqual(new Set(expected));
        expect(stats.tokenUses + stats.duplicates).toBe(tokenEvents);
        expect(stats.malformed).toBe(0);
        for (const u of uses) expect(u.kind).toBe(kindOf.get(u.auditID));
      }),
      { numRuns: 60 },
    );
  });
});

describe('JsonExportScanner matches a JSON.parse reference', () => {
  type Layout = 'filter-log-events' | 'insights-json';

  /** Reference: parse the whole document, then apply the per-record rules of records.ts. */
  function reference(docs: unknown[], layout: Layout): { stats: ReadStats; uses: TokenUse[] } {
    const stats = createReadStats();
    const uses: TokenUse[] = [];
    const key = layout === 'filter-log-events' ? 'message' : '@message';
    for (const doc of docs) {
      const records = layout === 'filter-log-events' ? (doc as { events?: unknown }).events : doc;
      if (!Array.isArray(records)) continue;
      for (const r of records) {
        stats.lines++;
        const msg = typeof r === 'object' && r !== null && !Array.isArray(r) ? (r as Record<string, unknown>)[key] : undefined;
        if (typeof msg !== 'string') {
          stats.malformed++;
          continue;
        }
        const use = tokenUseFromRecordText(msg, stats);
        if (use) uses.push(use);
      }
    }
    return { stats, uses };
  }

  const message = fc.oneof(
    fc.constantFrom<Kind>('stale', 'legacy', 'unauthorized', 'none').chain((k) =>
      fc.integer({ min: 0, max: 5 }).map((n) => event(`m-${k}-${n}`, k, 'ResponseComplete')),
    ),
    fc.string({ unit: 'binary', maxLength: 30 }),
    fc.constantFrom(
      '{"auditID":"x","annotations":{"authentication.k8s.io/stale-token":"garbage"}}',
      'Authentication failed, attempted: bearer — plain text',
      ' \n{"auditID":"ws","verb":"get"}\t ',
      '{"truncated',
      '',
    ),
  );
  const record = fc.oneof(
    { weight: 6, arbitrary: fc.tuple(message, fc.boolean()).map(([m, deep]) => ({ logStreamName: 's', timestamp: 1, message: m, '@message': m, ...(deep ? { nested: { message: 'x', list: [{ message: 1 }] } } : {}), eventId: 'e' })) },
    { weight: 1, arbitrary: fc.constantFrom<unknown>(1, 'str', null, [1, { message: 'x' }], { other: 1 }, { message: 5, '@message': { a: 1 } }) },
  );
  const layout = fc.constantFrom<Layout>('filter-log-events', 'insights-json');

  it('same stats and token uses for any document and chunking', async () => {
    await fc.assert(
      fc.property(
        layout,
        fc.array(fc.array(record, { maxLength: 8 }), { minLength: 1, maxLength: 3 }),
        fc.constantFrom(0, 2, 4),
        // random cut points, or tiny fixed-size chunks (1–7 bytes: escapes and keys split everywhere)
        fc.oneof(fc.array(fc.nat(), { maxLength: 12 }), fc.integer({ min: 1, max: 7 })),
        (lay, pages, indent, chunking) => {
          const docs = lay === 'filter-log-events' ? pages.map((events, i) => ({ events, searchedLogStreams: [], ...(i % 2 ? { nextToken: 't' } : {}) })) : pages;
          const text = (lay === 'insights-json' ? [docs[0]] : docs).map((d) => JSON.stringify(d, null, indent)).join('\n');
          const bytes = Buffer.from(text);
          const expected = reference(lay === 'insights-json' ? [docs[0]] : docs, lay);
          const stats = createReadStats();
          const out: TokenUse[] = [];
          const scanner = new JsonExportScanner(lay, stats, out);
          const cuts = Array.isArray(chunking)
            ? chunking.map((c) => c % (bytes.length + 1))
            : Array.from({ length: Math.floor(bytes.length / chunking) }, (_, k) => (k + 1) * chunking);
          const points = [0, ...cuts.sort((a, b) => a - b), bytes.length];
          for (let i = 1; i < points.length; i++) scanner.push(Buffer.from(bytes.subarray(points[i - 1], points[i])));
          scanner.end();
          expect(scanner.failed).toBe(false);
          expect(stats).toEqual(expected.stats);
          expect(out).toEqual(expected.uses);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('a broken document counts exactly one extra malformed record and never throws', async () => {
    await fc.assert(
      fc.property(layout, fc.array(record, { maxLength: 6 }), fc.nat(), (lay, events, cutAt) => {
        const doc = lay === 'filter-log-events' ? { events } : events;
        const text = JSON.stringify(doc, null, 2);
        const cut = 1 + (cutAt % (text.length - 1)); // strictly inside the document
        const stats = createReadStats();
        const scanner = new JsonExportScanner(lay, stats, []);
        scanner.push(Buffer.from(text.slice(0, cut)));
        scanner.end();
        expect(scanner.failed).toBe(true);
        expect(stats.lines).toBe(stats.events + stats.malformed);
        expect(stats.lines).toBeLessThanOrEqual(events.length + 1);
      }),
      { numRuns: 200 },
    );
  });
});
