/**
 * The reader skips one bad record and reads on: a record over the record limit (`maxLineBytes`, 64 MiB in use; a few
 * KiB here, the same code path) and a line holding a NUL byte are counted (`stats.oversized`, `stats.nulLines`, both
 * also `malformed`) with a warning, in every format; a batch document (`{"records":[…]}`, an EventList) larger than the
 * limit is streamed record by record, as a JSON array is. Files are small and written to a temp dir.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RecordGate } from '../../src/audit/record-gate.js';
import type { ReadNotice, ReadStats, TokenUse } from '../../src/audit/types.js';
import { createReadStats, readTokenUses } from '../../src/sources/reader.js';
import { auditEvent } from './events.js';

const MAX = 4096;
const T0 = Date.parse('2026-11-20T10:00:00Z');

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'tw-skip-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/** Stale-token events `e1…en` as objects. */
function events(n: number, from = 1): Array<Record<string, unknown>> {
  return Array.from({ length: n }, (_, i) => JSON.parse(auditEvent({ auditID: `e${from + i}`, time: T0 + i * 1000, kind: 'stale', pod: 'kube-multus-ds-abcde' })) as Record<string, unknown>);
}

/** An audit event padded past the limit (a huge request URI). */
function oversizedEvent(id: string, bytes = MAX * 3): Record<string, unknown> {
  return { ...events(1)[0]!, auditID: id, requestURI: `/api/v1/pods?x=${'p'.repeat(bytes)}` };
}

async function read(name: string, content: string | Buffer, maxLineBytes = MAX): Promise<{ uses: TokenUse[]; stats: ReadStats; notices: ReadNotice[] }> {
  const file = path.join(tmp, name);
  await writeFile(file, content);
  const stats = createReadStats();
  const uses: TokenUse[] = [];
  const notices: ReadNotice[] = [];
  for await (const u of readTokenUses([file], stats, { maxLineBytes, onNotice: (n) => notices.push(n) })) uses.push(u);
  return { uses, stats, notices };
}

const ids = (uses: TokenUse[]): string[] => uses.map((u) => u.auditID);
const lines = (objs: Array<Record<string, unknown>>): string => objs.map((o) => JSON.stringify(o)).join('\n') + '\n';

describe('oversized records: skipped, counted, read on', () => {
  it('audit JSON lines: the lines after an oversized one are read; stats.oversized and a warning say so', async () => {
    const [a, b, c] = events(3);
    const { uses, stats, notices } = await read('big-line.jsonl', lines([a!, oversizedEvent('big'), b!, oversizedEvent('big2', MAX * 300), c!]));
    expect(ids(uses)).toEqual(['e1', 'e2', 'e3']);
    expect(stats).toMatchObject({ lines: 5, events: 3, malformed: 2, oversized: 2 });
    expect(stats.nulLines).toBeUndefined();
    expect(notices.map((n) => [n.code, n.message])).toEqual([
      [
        'oversized',
        `${path.join(tmp, 'big-line.jsonl')}: skipped 2 records longer than 4 KiB (the record limit) and read on; no audit event is that long: check that the file holds only the audit log (counted in stats.oversized and stats.malformed)`,
      ],
    ]);
  });

  it('a JSON array (pretty-printed): the records after an oversized one are read, not the end of the file', async () => {
    const [a, b, c] = events(3);
    const { uses, stats, notices } = await read('big-array.json', JSON.stringify([a, oversizedEvent('big'), b, 'x'.repeat(MAX * 2), c], null, 2));
    expect(ids(uses)).toEqual(['e1', 'e2', 'e3']);
    expect(stats).toMatchObject({ lines: 5, events: 3, malformed: 2, oversized: 2 });
    expect(notices.map((n) => n.code)).toEqual(['oversized']);
  });

  it('an EventList document (pretty-printed): its items after an oversized one are read', async () => {
    const [a, b] = events(2);
    const doc = { kind: 'EventList', apiVersion: 'audit.k8s.io/v1', metadata: {}, items: [a, oversizedEvent('big'), b] };
    const { uses, stats } = await read('big-item.json', JSON.stringify(doc, null, 2));
    expect(ids(uses)).toEqual(['e1', 'e2']);
    expect(stats).toMatchObject({ lines: 3, events: 2, malformed: 1, oversized: 1 });
  });

  it('get-query-results output: the rows after an oversized one are read', async () => {
    const row = (e: Record<string, unknown>) => [
      { field: '@timestamp', value: '2026-11-20 10:00:00.000' },
      { field: '@message', value: JSON.stringify(e) },
    ];
    const [a, b] = events(2);
    const doc = { results: [row(a!), row(oversizedEvent('big')), row(b!)], statistics: {}, status: 'Complete' };
    const { uses, stats } = await read('big-row.json', JSON.stringify(doc, null, 2));
    expect(ids(uses)).toEqual(['e1', 'e2']);
    expect(stats).toMatchObject({ lines: 3, events: 2, malformed: 1, oversized: 1 });
  });

  it('filter-log-events output: an oversized message is counted oversized and the events after it read', async () => {
    const [a, b] = events(2);
    const ev = (e: Record<string, unknown>, i: number) => ({ logStreamName: 's', timestamp: T0 + i, message: JSON.stringify(e), ingestionTime: T0, eventId: String(i) });
    const doc = { events: [ev(a!, 1), ev(oversizedEvent('big'), 2), ev(b!, 3)], searchedLogStreams: [] };
    const { uses, stats } = await read('big-message.json', JSON.stringify(doc));
    expect(ids(uses)).toEqual(['e1', 'e2']);
    expect(stats).toMatchObject({ lines: 3, events: 2, malformed: 1, oversized: 1 });
  });
});

describe('large batch documents stream like arrays', () => {
  it('a compact {"records":[…]} document over the limit is read record by record (was: "not an audit event")', async () => {
    const items = events(40).map((e) => ({ category: 'kube-audit', properties: { log: JSON.stringify(e) } }));
    const doc = JSON.stringify({ records: items });
    expect(doc.length).toBeGreaterThan(MAX * 4);
    const { uses, stats, notices } = await read('records.json', doc + '\n');
    expect(ids(uses)).toEqual(Array.from({ length: 40 }, (_, i) => `e${i + 1}`));
    expect(stats).toMatchObject({ lines: 40, events: 40, malformed: 0 });
    expect(notices).toEqual([]);
  });

  it('compact EventList lines over the limit (audit webhook batches), one with an oversized item, between short ones', async () => {
    const batch = (from: number, extra: Array<Record<string, unknown>> = []) =>
      JSON.stringify({ kind: 'EventList', apiVersion: 'audit.k8s.io/v1', metadata: {}, items: [...events(20, from), ...extra] });
    const small = JSON.stringify({ kind: 'EventList', apiVersion: 'audit.k8s.io/v1', metadata: {}, items: events(1, 100) });
    const content = [batch(1), small, batch(21, [oversizedEvent('big')]), batch(41)].join('\n') + '\n';
    const { uses, stats, notices } = await read('batches.jsonl', content);
    expect(ids(uses)).toEqual([...Array.from({ length: 20 }, (_, i) => `e${i + 1}`), 'e100', ...Array.from({ length: 40 }, (_, i) => `e${i + 21}`)]);
    expect(stats).toMatchObject({ lines: 62, events: 61, malformed: 1, oversized: 1 });
    expect(notices.map((n) => n.code)).toEqual(['oversized']);
  });

  it('the same batch lines are read alike with the default limit (the streaming path only changes what is too long)', async () => {
    const content = JSON.stringify({ kind: 'EventList', apiVersion: 'audit.k8s.io/v1', metadata: {}, items: events(40) }) + '\n';
    const big = await read('batch-streamed.jsonl', content);
    const whole = await read('batch-whole.jsonl', content, 64 * 1024 * 1024);
    expect(ids(big.uses)).toEqual(ids(whole.uses));
    expect(big.uses).toEqual(whole.uses);
    expect(big.stats).toEqual(whole.stats);
  });

  it('a long batch line cut short counts the records read and one malformed record, then the next lines are read', async () => {
    const cut = JSON.stringify({ kind: 'EventList', items: events(20) }).slice(0, -200);
    const after = JSON.stringify(events(1, 50)[0]);
    const { uses, stats } = await read('cut-batch.jsonl', `${JSON.stringify({ kind: 'EventList', items: events(1, 60) })}\n${cut}\n${after}\n`);
    expect(ids(uses)).toEqual(['e60', ...Array.from({ length: 19 }, (_, i) => `e${i + 1}`), 'e50']);
    expect(stats).toMatchObject({ malformed: 1, events: 21 });
    expect(stats.lines).toBe(stats.events + stats.malformed);
  });
});

describe('NUL-bearing lines: skipped, counted, read on', () => {
  it('a line with NUL bytes near the start (in the format-detection head) no longer refuses the file', async () => {
    const [a, b, c] = events(3);
    const zeroed = Buffer.concat([Buffer.from(JSON.stringify(a) + '\n'), Buffer.from(JSON.stringify(b).slice(0, 100)), Buffer.alloc(300), Buffer.from('\n' + JSON.stringify(c) + '\n')]);
    const { uses, stats, notices } = await read('nul.jsonl', zeroed);
    expect(ids(uses)).toEqual(['e1', 'e3']);
    expect(stats).toMatchObject({ lines: 3, events: 2, malformed: 1, nulLines: 1 });
    expect(notices.map((n) => [n.code, n.message])).toEqual([
      ['nul-line', `${path.join(tmp, 'nul.jsonl')}: skipped 1 line holding NUL bytes (a zeroed block, e.g. from a crash while writing) and read on (counted in stats.nulLines and stats.malformed)`],
    ]);
  });

  it('a NUL byte inside an otherwise valid event line later in the file (past the head) is counted too', async () => {
    const many = events(400);
    const text = lines(many);
    const at = text.indexOf('"e300"');
    const buf = Buffer.from(text);
    buf[at + 2] = 0; // inside the auditID string of e300
    const { uses, stats } = await read('nul-late.jsonl', buf, 64 * 1024 * 1024);
    expect(uses).toHaveLength(399);
    expect(ids(uses)).not.toContain('e300');
    expect(stats).toMatchObject({ lines: 400, events: 399, malformed: 1, nulLines: 1 });
  });

  it('binary data is still refused as binary', async () => {
    const bin = Buffer.alloc(2048);
    for (let i = 0; i < bin.length; i++) bin[i] = (i * 37) % 256;
    await expect(read('bin.dat', bin)).rejects.toThrow(/binary data/);
  });
});

describe('RecordGate', () => {
  it('passes structure at once and each record whole, whatever the chunking; an oversized record becomes null', () => {
    const doc = Buffer.from('{"kind":"EventList","metadata":{"a":[1,2]},"items":[{"s":"a\\"}]{"},  "str", {"x":"' + 'y'.repeat(100) + '"}, [1,{"b":2}] ]}');
    for (const step of [1, 3, 7, doc.length]) {
      const out: Buffer[] = [];
      let oversized = 0;
      const gate = new RecordGate(2, 50, (b) => out.push(Buffer.from(b)), () => oversized++);
      for (let i = 0; i < doc.length; i += step) gate.push(doc.subarray(i, i + step));
      gate.end();
      expect(JSON.parse(Buffer.concat(out).toString())).toEqual({ kind: 'EventList', metadata: { a: [1, 2] }, items: [{ s: 'a"}]{' }, 'str', null, [1, { b: 2 }]] });
      expect(oversized).toBe(1);
    }
  });
});
