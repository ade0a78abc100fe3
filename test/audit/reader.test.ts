import { mkdtemp, rm, writeFile, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createReadStats, readTokenUses, type ReadOptions } from '../../src/sources/reader.js';
import { detectFormat } from '../../src/audit/formats.js';
import type { ReadStats, TokenUse } from '../../src/audit/types.js';
import { InputError } from '../../src/errors.js';

const FIX = path.join(path.dirname(new URL(import.meta.url).pathname), '../fixtures/audit');
const fx = (name: string): string => path.join(FIX, name);

const ID = (n: number): string => `a0000000-0000-4000-8000-00000000000${n}`;
const MULTUS = 'system:serviceaccount:kube-system:multus';

async function readAll(files: string[], opts?: ReadOptions): Promise<{ uses: TokenUse[]; stats: ReadStats }> {
  const stats = createReadStats();
  const uses: TokenUse[] = [];
  for await (const u of readTokenUses(files, stats, opts)) uses.push(u);
  return { uses, stats };
}

/** Runs the read and returns the thrown error (fails the test if nothing is thrown). */
async function readError(files: string[], opts?: ReadOptions): Promise<InputError> {
  try {
    await readAll(files, opts);
  } catch (err) {
    expect(err).toBeInstanceOf(InputError);
    return err as InputError;
  }
  throw new Error('expected an InputError');
}

const brief = (u: TokenUse): string => `${u.kind} ${u.auditID.slice(-1)} ${u.subject ?? '-'}`;

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'tw-audit-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/** A compact audit event line. */
function eventLine(id: string, o: { stale?: number; legacy?: boolean; unauthorized?: boolean; pad?: number } = {}): string {
  const annotations: Record<string, string> = { 'authorization.k8s.io/decision': 'allow' };
  if (o.stale !== undefined)
    annotations['authentication.k8s.io/stale-token'] = `subject: ${MULTUS}, seconds after warning threshold: ${o.stale}`;
  if (o.legacy) annotations['authentication.k8s.io/legacy-token'] = 'system:serviceaccount:ci:deployer';
  return JSON.stringify({
    kind: 'Event',
    apiVersion: 'audit.k8s.io/v1',
    level: 'Metadata',
    auditID: id,
    stage: 'ResponseComplete',
    requestURI: '/api/v1/pods' + (o.pad ? '?x=' + 'p'.repeat(o.pad) : ''),
    verb: 'list',
    user: o.unauthorized ? {} : { username: o.legacy ? 'system:serviceaccount:ci:deployer' : MULTUS },
    sourceIPs: ['10.0.0.1'],
    responseStatus: o.unauthorized
      ? { metadata: {}, message: 'Authentication failed, attempted: bearer', code: 401 }
      : { metadata: {}, code: 200 },
    requestReceivedTimestamp: '2022-05-19T11:38:39.000000Z',
    stageTimestamp: '2022-05-19T11:38:39.000100Z',
    annotations,
  });
}

describe('audit JSON lines', () => {
  it('reads the fixture: stages deduped, malformed and truncated lines counted', async () => {
    const { uses, stats } = await readAll([fx('audit.log')]);
    expect(uses.map(brief)).toEqual([
      `stale 2 ${MULTUS}`,
      'legacy 3 system:serviceaccount:ci:deployer',
      'unauthorized 4 -',
      'legacy 5 -',
    ]);
    // 9 non-blank lines: 6 events (stale twice), 3 malformed (text, broken JSON, truncated last line).
    expect(stats).toEqual({ files: 1, lines: 9, events: 6, tokenUses: 4, malformed: 3, duplicates: 1 });
    expect(uses[0]).toEqual({
      kind: 'stale',
      auditID: ID(2),
      time: 1652960319000,
      stage: 'RequestReceived',
      subject: MULTUS,
      namespace: 'kube-system',
      serviceAccount: 'multus',
      secondsAfterWarning: 1728000,
      warnAfter: 1651232319000,
      pod: 'kube-multus-ds-zwh6w',
      podUid: '3c2d1e0f-aaaa-4bbb-8ccc-dddddddddddd',
      node: 'ip-192-168-12-34.ec2.internal',
      credentialId: 'JTI=7e1b0b5e-2f1a-4c55-8d2e-3b4f5a6b7c8d',
      userAgent: 'multus/v0.0.0 (linux/amd64) kubernetes/$Format',
      sourceIPs: ['192.168.12.34'],
      verb: 'get',
      requestURI: '/api/v1/namespaces/default/pods/web-0',
    });
    expect(uses[2]).toMatchObject({ kind: 'unauthorized', time: 1660736320500, sourceIPs: ['192.168.12.34'], responseCode: 401 });
    expect(uses[3]?.legacySecret).toEqual({ name: 'old-token-abcde', namespace: 'ci', kind: 'invalidated' });
  });

  it('reads the same content gzipped (detected by magic bytes)', async () => {
    const plain = await readAll([fx('audit.log')]);
    const gz = await readAll([fx('audit.log.gz')]);
    expect(gz.uses).toEqual(plain.uses);
    expect(gz.stats).toEqual(plain.stats);
  });

  it('reads a rotated set (gz, .1, current) and counts a request split across files once', async () => {
    const { uses, stats } = await readAll([
      fx('rotated/audit-2022-05-19T11-38-00.000.log.gz'),
      fx('rotated/audit.log.1'),
      fx('rotated/audit.log'),
    ]);
    expect(uses.map(brief)).toEqual([
      `stale 2 ${MULTUS}`,
      'legacy 3 system:serviceaccount:ci:deployer',
      'unauthorized 4 -',
      'legacy 5 -',
    ]);
    expect(stats).toEqual({ files: 3, lines: 7, events: 7, tokenUses: 4, malformed: 0, duplicates: 1 });
  });

  it('dedupes across files of one call', async () => {
    const { uses, stats } = await readAll([fx('audit.log'), fx('audit.log.gz')]);
    expect(uses).toHaveLength(4);
    expect(stats).toEqual({ files: 2, lines: 18, events: 12, tokenUses: 4, malformed: 6, duplicates: 6 });
  });

  it('an empty file holds nothing', async () => {
    expect((await readAll([fx('empty.log')])).stats).toEqual({
      files: 1, lines: 0, events: 0, tokenUses: 0, malformed: 0, duplicates: 0,
    });
  });

  it('reads a multi-chunk file exactly (lines across read boundaries, recycled buffers)', async () => {
    const lines: string[] = [];
    const expected: string[] = [];
    for (let i = 0; i < 6000; i++) {
      const id = `big-${i}`;
      if (i % 97 === 0) {
        lines.push(eventLine(id, { stale: i, pad: 700 + (i % 13) }));
        expected.push(id);
      } else lines.push(eventLine(id, { pad: 900 + (i % 17) }));
    }
    const file = path.join(tmp, 'big.log');
    await writeFile(file, lines.join('\n') + '\n');
    expect((await stat(file)).size).toBeGreaterThan(6 * 1024 * 1024);
    const { uses, stats } = await readAll([file]);
    expect(uses.map((u) => u.auditID)).toEqual(expected);
    expect(uses.map((u) => u.secondsAfterWarning)).toEqual(expected.map((id) => Number(id.slice(4))));
    expect(stats).toEqual({ files: 1, lines: 6000, events: 6000, tokenUses: expected.length, malformed: 0, duplicates: 0 });
  });

  it('reads a 10 MB line', async () => {
    const file = path.join(tmp, 'ten-mb.log');
    await writeFile(file, [eventLine('n1'), eventLine('huge', { stale: 60, pad: 10 * 1024 * 1024 }), eventLine('s2', { stale: 61 })].join('\n') + '\n');
    const { uses, stats } = await readAll([file]);
    expect(uses.map((u) => [u.auditID, u.secondsAfterWarning])).toEqual([['huge', 60], ['s2', 61]]);
    expect(uses[0]?.requestURI?.length).toBe('/api/v1/pods?x='.length + 10 * 1024 * 1024);
    expect(stats).toEqual({ files: 1, lines: 3, events: 3, tokenUses: 2, malformed: 0, duplicates: 0 });
  });

  it('skips a line over maxLineBytes, within one chunk or spanning several', async () => {
    const file = path.join(tmp, 'long.log');
    await writeFile(
      file,
      [
        eventLine('a', { stale: 1 }),
        eventLine('short-but-over', { stale: 2, pad: 5000 }), // inside one read chunk
        eventLine('b', { stale: 3 }),
        eventLine('spans-chunks', { stale: 4, pad: 3 * 1024 * 1024 }), // 3 MiB: over several 1 MiB reads
        eventLine('c', { stale: 5 }),
      ].join('\n'), // no trailing newline
    );
    const { uses, stats } = await readAll([file], { maxLineBytes: 4096 });
    expect(uses.map((u) => u.auditID)).toEqual(['a', 'b', 'c']);
    expect(stats).toEqual({ files: 1, lines: 5, events: 3, tokenUses: 3, malformed: 2, duplicates: 0, oversized: 2 });
  });

  it('an over-long last line without newline is skipped too', async () => {
    const file = path.join(tmp, 'long-last.log');
    await writeFile(file, eventLine('a', { stale: 1 }) + '\n' + eventLine('z', { stale: 2, pad: 2 * 1024 * 1024 }));
    const { uses, stats } = await readAll([file], { maxLineBytes: 1024 * 1024 });
    expect(uses.map((u) => u.auditID)).toEqual(['a']);
    expect(stats).toEqual({ files: 1, lines: 2, events: 1, tokenUses: 1, malformed: 1, duplicates: 0, oversized: 1 });
  });

  it('reports progress in bytes of the file on disk (compressed for gzip), ending at the file size', async () => {
    for (const name of ['audit.log', 'audit.log.gz']) {
      const calls: Array<{ file: string; bytesRead: number; totalBytes: number }> = [];
      await readAll([fx(name)], { onProgress: (p) => calls.push(p) });
      const size = (await stat(fx(name))).size;
      expect(calls.length).toBeGreaterThanOrEqual(1);
      expect(calls.at(-1)).toEqual({ file: fx(name), bytesRead: size, totalBytes: size });
    }
  });
});

describe('CloudWatch formats', () => {
  it('aws logs filter-log-events output (pretty-printed)', async () => {
    const { uses, stats } = await readAll([fx('filter-log-events.json')]);
    expect(uses.map(brief)).toEqual([`stale 2 ${MULTUS}`, 'unauthorized 4 -']);
    expect(uses[0]?.warnAfter).toBe(1651232319000);
    // 5 log events: 4 audit events (one request twice), 1 non-audit message.
    expect(stats).toEqual({ files: 1, lines: 5, events: 4, tokenUses: 2, malformed: 1, duplicates: 1 });
  });

  it('concatenated compact filter-log-events pages', async () => {
    const { uses, stats } = await readAll([fx('filter-log-events-pages.json')]);
    expect(uses.map(brief)).toEqual([`stale 2 ${MULTUS}`, 'legacy 3 system:serviceaccount:ci:deployer', 'legacy 5 -']);
    expect(stats).toEqual({ files: 1, lines: 5, events: 5, tokenUses: 3, malformed: 0, duplicates: 1 });
  });

  it('Logs Insights JSON export', async () => {
    const { uses, stats } = await readAll([fx('insights.json')]);
    expect(uses.map(brief)).toEqual([`stale 2 ${MULTUS}`, 'unauthorized 4 -']);
    // the row without @message is malformed
    expect(stats).toEqual({ files: 1, lines: 4, events: 3, tokenUses: 2, malformed: 1, duplicates: 0 });
  });

  it('Logs Insights CSV export: doubled quotes, commas and newlines inside fields', async () => {
    const { uses, stats } = await readAll([fx('insights.csv')]);
    expect(uses.map(brief)).toEqual([
      `stale 2 ${MULTUS}`,
      'legacy 3 system:serviceaccount:ci:deployer',
      'unauthorized 4 -',
    ]);
    expect(uses[1]?.legacySecret).toEqual({ name: 'deployer-token-x7k2p', namespace: 'ci', kind: 'autogenerated' });
    // 5 rows: 4 audit events, 1 row with an extra column (malformed)
    expect(stats).toEqual({ files: 1, lines: 5, events: 4, tokenUses: 3, malformed: 1, duplicates: 0 });
  });

  it('a gzipped export is detected after decompression', async () => {
    const file = path.join(tmp, 'export.json.gz');
    const { readFile } = await import('node:fs/promises');
    await writeFile(file, gzipSync(await readFile(fx('filter-log-events.json'))));
    const { uses, stats } = await readAll([file]);
    expect(uses.map(brief)).toEqual([`stale 2 ${MULTUS}`, 'unauthorized 4 -']);
    expect(stats.lines).toBe(5);
  });

  it('a truncated JSON export keeps what was read and counts one malformed record', async () => {
    const { readFile } = await import('node:fs/promises');
    const text = await readFile(fx('filter-log-events.json'), 'utf8');
    // cut inside the 4th log event: the first three (normal, stale twice) are complete
    let cut = -1;
    for (let i = 0; i < 4; i++) cut = text.indexOf('"logStreamName"', cut + 1);
    const file = path.join(tmp, 'cut.json');
    await writeFile(file, text.slice(0, cut + 5));
    const { uses, stats } = await readAll([file]);
    expect(uses.map(brief)).toEqual([`stale 2 ${MULTUS}`]);
    expect(stats).toEqual({ files: 1, lines: 4, events: 3, tokenUses: 1, malformed: 1, duplicates: 1 });
  });

  it('a CSV record over maxLineBytes (unclosed quote) ends the file with one malformed record', async () => {
    const file = path.join(tmp, 'unclosed.csv');
    const msg = (id: string, o: { stale?: number }) => '"' + eventLine(id, o).replaceAll('"', '""') + '"';
    await writeFile(
      file,
      ['@timestamp,@message', `t1,${msg('a', { stale: 1 })}`, `t2,"unclosed ${'x'.repeat(3000)}`, `t3,${msg('b', { stale: 2 })}`].join('\n') + '\n',
    );
    const { uses, stats } = await readAll([file], { maxLineBytes: 2048 });
    expect(uses.map((u) => u.auditID)).toEqual(['a']);
    expect(stats).toEqual({ files: 1, lines: 2, events: 1, tokenUses: 1, malformed: 1, duplicates: 0 });
  });
});

describe('early stop', () => {
  it.each(['audit.log', 'audit.log.gz', 'filter-log-events.json', 'insights.json', 'insights.csv'])(
    'breaking out after the first use of %s closes the file',
    async (name) => {
      const { readdir } = await import('node:fs/promises');
      const before = (await readdir('/proc/self/fd')).length;
      const stats = createReadStats();
      let first: TokenUse | undefined;
      for await (const u of readTokenUses([fx(name)], stats)) {
        first = u;
        break;
      }
      expect(first?.auditID).toBe(ID(2));
      await new Promise((r) => setTimeout(r, 20));
      expect((await readdir('/proc/self/fd')).length).toBe(before);
    },
  );
});

describe('empty input', () => {
  it('reads as no events, with one `empty` notice naming the file (an empty plain or gzip file, whitespace only)', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'tw-empty-'));
    try {
      const files = [path.join(dir, 'empty.log'), path.join(dir, 'empty.log.gz'), path.join(dir, 'blank.log')];
      await writeFile(files[0]!, '');
      await writeFile(files[1]!, gzipSync(Buffer.alloc(0)));
      await writeFile(files[2]!, '\n  \n');
      const notices: { file: string; code: string; message: string }[] = [];
      const { uses, stats } = await readAll(files, { onNotice: (n) => notices.push(n) });
      expect(uses).toEqual([]);
      expect(stats).toMatchObject({ files: 3, events: 0 });
      expect(notices).toEqual(files.map((f) => ({ file: f, code: 'empty', message: `${f}: empty: no record to read (exit code unchanged)` })));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('input errors name the file', () => {
  it.each([
    ['missing file', 'does-not-exist.log', /cannot read file.*ENOENT/],
    ['unknown format', 'unknown.txt', /unknown input format \(unknown content\)/],
    ['binary file', 'binary.bin', /unknown input format \(binary data\)/],
    ['corrupt gzip', 'corrupt.log.gz', /corrupt or truncated gzip data/],
    ['truncated gzip', 'truncated.log.gz', /corrupt or truncated gzip data/],
  ])('%s', async (_what, name, pattern) => {
    const err = await readError([fx(name)]);
    expect(err.file).toBe(fx(name));
    expect(err.message.startsWith(fx(name) + ': ')).toBe(true);
    expect(err.message).toMatch(pattern);
  });

  it('a directory', async () => {
    const err = await readError([FIX]);
    expect(err.file).toBe(FIX);
    expect(err.message).toMatch(/is a directory/);
  });

  it('a missing file fails before any file is read', async () => {
    const stats = createReadStats();
    const got: TokenUse[] = [];
    await expect(
      (async () => {
        for await (const u of readTokenUses([fx('audit.log'), fx('nope.log')], stats)) got.push(u);
      })(),
    ).rejects.toThrow(InputError);
    expect(got).toEqual([]);
    expect(stats.files).toBe(0);
  });
});

describe('detectFormat', () => {
  const b = (s: string) => Buffer.from(s);
  it.each([
    ['{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"x"}\n', 'audit-jsonl'],
    ['\ufeff{"auditID":"x"}', 'audit-jsonl'],
    ['{\n    "events": [\n        {\n', 'filter-log-events'],
    ['{"events":[],"searchedLogStreams":[]}', 'filter-log-events'],
    ['  [\n  {\n    "@timestamp": "2022-05-19 11:38:39.000",', 'insights-json'],
    ['[]', 'insights-json'],
    ['@timestamp,@message\n2022,"{}"\n', 'insights-csv'],
    ['"@timestamp","@message","@logStream"\r\n', 'insights-csv'],
  ])('%j → %s', (head, format) => {
    expect(detectFormat(b(head))).toBe(format);
  });

  it.each([
    ['empty', ''],
    ['plain text', 'hello world\n'],
    ['JSON without audit markers', '{"level":"info","msg":"hi"}\n'],
    ['array of numbers', '[1,2,3]'],
    ['CSV without @message', '@timestamp,msg\n'],
    ['NUL bytes', '{"auditID":"x"}\u0000\u0000'],
  ])('%s → undefined', (_what, head) => {
    expect(detectFormat(b(head))).toBeUndefined();
  });

  it('gzip bytes are not a format (the reader decompresses first)', () => {
    expect(detectFormat(gzipSync(b('{"auditID":"x"}\n')))).toBeUndefined();
  });
});
