/**
 * Every common way audit events leave CloudWatch is read, and a file without one
 * readable audit event is an error, never a silent miss. One small input per kind.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createReadStats, readTokenUses, type ReadOptions } from '../../src/sources/reader.js';
import { detectFormat } from '../../src/audit/formats.js';
import { parseInsightsTimestamp, tokenUseFromInsightsRow } from '../../src/audit/insights-rows.js';
import type { ReadNotice, ReadStats, TokenUse } from '../../src/audit/types.js';
import { InputError } from '../../src/errors.js';

const SA = 'system:serviceaccount:kube-system:edge-router';

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'tw-formats-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

let n = 0;
async function file(content: string | Buffer, ext = '.txt'): Promise<string> {
  const f = path.join(tmp, `f${n++}${ext}`);
  await writeFile(f, content);
  return f;
}

async function read(
  files: string[],
  opts: ReadOptions = {},
): Promise<{ uses: TokenUse[]; stats: ReadStats; notices: ReadNotice[] }> {
  const stats = createReadStats();
  const notices: ReadNotice[] = [];
  const uses: TokenUse[] = [];
  for await (const u of readTokenUses(files, stats, { ...opts, onNotice: (x) => notices.push(x) })) uses.push(u);
  return { uses, stats, notices };
}

async function readError(files: string[], opts: ReadOptions = {}): Promise<InputError> {
  try {
    await read(files, opts);
  } catch (err) {
    expect(err).toBeInstanceOf(InputError);
    return err as InputError;
  }
  throw new Error('expected an InputError');
}

/** One compact audit event with a stale-token annotation. */
function event(id: string, secs: number, time = '2022-08-24T14:25:33.000000Z'): string {
  return JSON.stringify({
    kind: 'Event',
    apiVersion: 'audit.k8s.io/v1',
    level: 'Metadata',
    auditID: id,
    stage: 'ResponseComplete',
    requestURI: '/api/v1/pods',
    verb: 'list',
    user: {
      username: SA,
      extra: { 'authentication.kubernetes.io/pod-name': ['edge-router-1'] },
    },
    sourceIPs: ['10.0.0.1'],
    userAgent: 'edge/1.0',
    responseStatus: { metadata: {}, code: 200 },
    requestReceivedTimestamp: time,
    stageTimestamp: time,
    annotations: {
      'authentication.k8s.io/stale-token': `subject: ${SA}, seconds after warning threshold: ${secs}`,
    },
  });
}

/** `aws logs get-query-results --output json` shape (AWS CLI prints results, statistics, status). */
function queryResults(rows: Array<Record<string, string>>, status = 'Complete'): string {
  return JSON.stringify(
    {
      results: rows.map((r) => Object.entries(r).map(([field, value]) => ({ field, value }))),
      statistics: { recordsMatched: rows.length, recordsScanned: 1000, bytesScanned: 100000 },
      status,
    },
    null,
    4,
  );
}

const guideRow = (i: number): Record<string, string> => ({
  '@timestamp': `2022-08-24 14:${String(25 + (i % 30)).padStart(2, '0')}:33.659`,
  subject: SA,
  elapsedtime: ` ${15329 + (i % 30) * 60}`,
});

describe('format detection', () => {
  it.each([
    [queryResults([]), 'insights-query-results'],
    ['{"status": "Running", "results": []}', 'insights-query-results'],
    ['[{"@timestamp":"2022-08-24 14:25:33.659","subject":"x","elapsedtime":" 1"}]', 'insights-json-fields'],
    [`[{"@timestamp":"2022-08-24 14:25:33.659","@message":${JSON.stringify(event('a', 1))}}]`, 'insights-json'],
    [`2022-05-10T08:16:35.058Z ${event('a', 1)}\n`, 'cw-s3-export'],
    ['@timestamp,subject,elapsedtime\n2022-08-24 14:25:33.659,x, 1\n', 'insights-csv'],
  ])('%s… → %s', (head, format) => {
    expect(detectFormat(Buffer.from(head))).toBe(format);
  });
});

describe('aws logs get-query-results --output json', () => {
  it('reads rows with @message like any audit event, and rows of the EKS guide query', async () => {
    const f = await file(
      queryResults([
        { '@timestamp': '2022-08-24 14:25:33.000', '@message': event('m1', 100), '@ptr': 'p1' },
        { ...guideRow(0), '@ptr': 'p2' },
      ]),
      '.json',
    );
    const { uses, stats, notices } = await read([f]);
    expect(stats).toMatchObject({ files: 1, lines: 2, events: 2, tokenUses: 2, malformed: 0 });
    expect(uses.map((u) => [u.auditID, u.serviceAccount, u.secondsAfterWarning])).toEqual([
      ['m1', 'edge-router', 100],
      [`guide:${SA}|${Date.parse('2022-08-24T14:25:33.659Z')}|15329`, 'edge-router', 15329],
    ]);
    expect(notices.map((x) => x.code)).toEqual(['guide-query']);
  });

  it('the guide query as get-query-results: time, seconds after warnafter, hence warnAfter; no pod', async () => {
    const f = await file(queryResults([guideRow(0)]), '.json');
    const { uses, notices } = await read([f]);
    expect(uses).toHaveLength(1);
    const u = uses[0]!;
    expect(u.kind).toBe('stale');
    expect(new Date(u.time).toISOString()).toBe('2022-08-24T14:25:33.659Z');
    expect(u.secondsAfterWarning).toBe(15329);
    expect(new Date(u.warnAfter!).toISOString()).toBe('2022-08-24T10:10:04.659Z');
    expect(u.pod).toBeUndefined();
    expect(u.userAgent).toBeUndefined();
    expect(u.sourceIPs).toEqual([]);
    expect(notices[0]!.message).toMatch(/cannot tell pods.*user agents, source IPs/);
  });

  it('warns when the query status is not Complete (partial result) and says how to split', async () => {
    const f = await file(queryResults([guideRow(0)], 'Running'), '.json');
    const { notices } = await read([f]);
    const partial = notices.find((x) => x.code === 'partial-result');
    expect(partial?.message).toContain('"Running"');
    expect(partial?.message).toContain('split the query by time range');
  });

  it('warns when a result has exactly 10,000 rows (the per-query cap), not 9,999', async () => {
    const rows = Array.from({ length: 10_000 }, (_, i) => ({ ...guideRow(i), '@ptr': `p${i}` }));
    const capped = await read([await file(queryResults(rows), '.json')]);
    expect(capped.stats.lines).toBe(10_000);
    expect(capped.notices.map((x) => x.code)).toContain('row-cap');
    expect(capped.notices.find((x) => x.code === 'row-cap')?.message).toMatch(/10,000 rows.*truncated.*split the query/);
    const under = await read([await file(queryResults(rows.slice(1)), '.json')]);
    expect(under.notices.map((x) => x.code)).not.toContain('row-cap');
  });

  it('reads `--query results` output (the rows alone)', async () => {
    const rows = JSON.parse(queryResults([guideRow(0), guideRow(1)])).results as unknown[];
    const f = await file(JSON.stringify(rows, null, 4), '.json');
    expect(detectFormat(Buffer.from(JSON.stringify(rows, null, 4)))).toBe('insights-query-rows');
    const { uses, stats } = await read([f]);
    expect(stats).toMatchObject({ lines: 2, events: 2, tokenUses: 2 });
    expect(uses.map((u) => u.secondsAfterWarning)).toEqual([15329, 15389]);
  });

  it('reads several outputs appended to one file', async () => {
    const f = await file(
      queryResults([{ '@timestamp': '2022-08-24 14:25:33.000', '@message': event('m1', 100) }]) +
        '\n' +
        queryResults([{ '@timestamp': '2022-08-24 14:25:34.000', '@message': event('m2', 101) }]),
      '.json',
    );
    const { uses } = await read([f]);
    expect(uses.map((u) => u.auditID)).toEqual(['m1', 'm2']);
  });

  it('a truncated output keeps the rows before the break and says where reading stopped', async () => {
    const whole = queryResults([
      { '@timestamp': '2022-08-24 14:25:33.000', '@message': event('m1', 100) },
      { '@timestamp': '2022-08-24 14:25:34.000', '@message': event('m2', 101) },
    ]);
    const f = await file(whole.slice(0, whole.indexOf('m2') - 20), '.json');
    const { uses, stats, notices } = await read([f]);
    expect(uses.map((u) => u.auditID)).toEqual(['m1']);
    expect(stats).toMatchObject({ lines: 2, events: 1, malformed: 1 });
    expect(notices).toEqual([expect.objectContaining({ code: 'truncated', row: 2 })]);
  });
});

describe('Logs Insights console exports of the EKS guide query', () => {
  it('CSV: one stale use per row', async () => {
    const rows = [0, 1, 2].map(guideRow).map((r) => `${r['@timestamp']},${r.subject},${r.elapsedtime}`);
    const f = await file(`@timestamp,subject,elapsedtime\n${rows.join('\n')}\n`, '.csv');
    const { uses, stats, notices } = await read([f]);
    expect(stats).toMatchObject({ lines: 3, events: 3, tokenUses: 3, malformed: 0 });
    expect(uses.map((u) => u.secondsAfterWarning)).toEqual([15329, 15389, 15449]);
    expect(notices.map((x) => x.code)).toEqual(['guide-query']);
  });

  it('the CSV and the JSON of the same query count each row once', async () => {
    const csv = await file(`@timestamp,subject,elapsedtime\n${[0, 1].map(guideRow).map((r) => `${r['@timestamp']},${r.subject},${r.elapsedtime}`).join('\n')}\n`, '.csv');
    const json = await file(JSON.stringify([0, 1].map(guideRow)), '.json');
    const { stats } = await read([csv, json]);
    expect(stats).toMatchObject({ files: 2, lines: 4, tokenUses: 2, duplicates: 2 });
  });

  it('JSON: one stale use per row', async () => {
    const f = await file(JSON.stringify([0, 1].map(guideRow), null, 2), '.json');
    const { uses, stats } = await read([f]);
    expect(stats).toMatchObject({ lines: 2, events: 2, tokenUses: 2, malformed: 0 });
    expect(uses.every((u) => u.namespace === 'kube-system' && u.serviceAccount === 'edge-router')).toBe(true);
  });

  it('console JSON export with @message and exactly 10,000 rows warns that it is capped', async () => {
    const msg = JSON.stringify('{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"x"}');
    const rows = Array.from({ length: 10_000 }, () => `{"@timestamp":"2022-08-24 14:25:33.000","@message":${msg}}`);
    const { notices, stats } = await read([await file(`[${rows.join(',\n')}]`, '.json')]);
    expect(stats).toMatchObject({ lines: 10_000, events: 10_000 });
    expect(notices.map((x) => x.code)).toEqual(['row-cap']);
  });

  it('CSV with exactly 10,000 rows warns that the export is capped', async () => {
    const lines = Array.from({ length: 10_000 }, (_, i) => `2022-08-24 14:25:${String(i % 60).padStart(2, '0')}.${String(i % 1000).padStart(3, '0')},${SA}, ${15000 + i}`);
    const f = await file(`@timestamp,subject,elapsedtime\n${lines.join('\n')}\n`, '.csv');
    const { notices, stats } = await read([f]);
    expect(stats.lines).toBe(10_000);
    expect(notices.map((x) => x.code)).toContain('row-cap');
  });

  it('the per-subject `stats` variant (no @timestamp) is an error that says to drop `stats`', async () => {
    const f = await file(`subject,count(*),max(elapsedtime)\n${SA},4, 17130\n`, '.csv');
    const err = await readError([f]);
    expect(err.message).toContain('its only record is not an audit event');
    expect(err.message).toContain('no @timestamp');
  });
});

describe('CloudWatch Logs export to S3 (`<timestamp> <event JSON>` lines)', () => {
  const content = [
    `2022-05-10T08:16:35.058Z ${event('s1', 54387, '2022-05-10T08:16:34.208000Z')}`,
    `2022-05-10T08:20:00.850Z {"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"other","stage":"ResponseComplete"}`,
    `2022-05-10T08:21:00.000Z ${event('s2', 54593, '2022-05-10T08:19:59.000000Z')}`,
    '',
  ].join('\n');

  it('uncompressed', async () => {
    const { uses, stats } = await read([await file(content, '')]);
    expect(stats).toMatchObject({ lines: 3, events: 3, tokenUses: 2, malformed: 0 });
    expect(uses.map((u) => u.auditID)).toEqual(['s1', 's2']);
  });

  it('an export of the whole log group: lines of other streams are counted malformed', async () => {
    const mixed = `2022-05-10T08:16:30.000Z I0510 08:16:30.000000 11 controller.go:611] quota admission added\n${content}`;
    const { uses, stats } = await read([await file(mixed, '')]);
    expect(uses.map((u) => u.auditID)).toEqual(['s1', 's2']);
    expect(stats).toMatchObject({ lines: 4, events: 3, malformed: 1 });
  });

  it('gzip (the objects S3 holds)', async () => {
    const { uses } = await read([await file(gzipSync(content), '.gz')]);
    expect(uses.map((u) => u.auditID)).toEqual(['s1', 's2']);
  });
});

describe('a file without one readable audit event is an error (exit 2), not a silent miss', () => {
  it('JSON array rows with neither @message nor the guide fields', async () => {
    const f = await file(JSON.stringify([{ '@timestamp': '2022-01-01 00:00:00.000', level: 'x' }, { foo: 1 }]), '.json');
    const err = await readError([f]);
    expect(err.file).toBe(f);
    expect(err.message).toContain(`${f}: none of its 2 records is an audit event`);
    expect(err.message).toContain('get-query-results');
    expect(err.message).toContain('create-export-task');
  });

  it('a CSV export whose messages are not audit events', async () => {
    const f = await file('@timestamp,@message\n2022-01-01 00:00:00.000,hello\n2022-01-01 00:00:01.000,world\n', '.csv');
    expect((await readError([f])).message).toContain('none of its 2 records is an audit event');
  });

  it('a file with at least one readable event keeps counting malformed lines', async () => {
    const f = await file(`${event('ok', 1)}\nnot json\n{"broken":\n`, '.log');
    const { stats } = await read([f]);
    expect(stats).toMatchObject({ lines: 3, events: 1, tokenUses: 1, malformed: 2 });
  });
});

describe('hostile heads', () => {
  it('skips a leading NUL block (the hole copytruncate leaves) and says so', async () => {
    const f = await file(Buffer.concat([Buffer.alloc(200_000), Buffer.from(`${event('after-hole', 5)}\n`)]), '.log');
    const { uses, notices } = await read([f]);
    expect(uses.map((u) => u.auditID)).toEqual(['after-hole']);
    expect(notices).toEqual([expect.objectContaining({ code: 'leading-nul', message: expect.stringContaining('200000 NUL bytes') })]);
  });

  it('a gzip file whose inflated data starts with NULs too', async () => {
    const f = await file(gzipSync(Buffer.concat([Buffer.alloc(70_000), Buffer.from(`${event('gz-hole', 5)}\n`)])), '.gz');
    expect((await read([f])).uses.map((u) => u.auditID)).toEqual(['gz-hole']);
  });

  it.each([
    ['UTF-16LE with BOM', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(`${event('x', 1)}\n`, 'utf16le')]), 'UTF-16LE'],
    ['UTF-16LE without BOM', Buffer.from(`${event('x', 1)}\n`, 'utf16le'), 'UTF-16LE'],
    ['UTF-16BE with BOM', Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from(`${event('x', 1)}\n`, 'utf16le').swap16()]), 'UTF-16BE'],
  ])('%s is named as such, with how to convert it', async (_name, content, enc) => {
    const err = await readError([await file(content, '.log')]);
    expect(err.message).toContain(`${enc} text`);
    expect(err.message).toContain(`iconv -f ${enc} -t UTF-8`);
    expect(err.message).not.toContain('binary');
  });

  it('a CSV export with one oversized record says the file was truncated at that row', async () => {
    const ok = (i: number): string => `2022-08-24 14:25:3${i}.000,"${event(`c${i}`, i).replace(/"/g, '""')}"`;
    const huge = `2022-08-24 14:25:39.000,"${'x'.repeat(5000)}`; // unclosed quote swallowing the rest
    const f = await file(`@timestamp,@message\n${ok(1)}\n${ok(2)}\n${huge}\n${ok(3)}\n`, '.csv');
    const { uses, stats, notices } = await read([f], { maxLineBytes: 4096 });
    expect(uses.map((u) => u.auditID)).toEqual(['c1', 'c2']);
    expect(stats).toMatchObject({ lines: 3, events: 2, malformed: 1 });
    expect(notices).toEqual([
      expect.objectContaining({ code: 'truncated', row: 3, message: expect.stringContaining('truncated there: rows after 2 were not read') }),
    ]);
  });

  it('--max-decompressed-bytes stops a gzip file that inflates past the limit, naming it', async () => {
    const f = await file(gzipSync(Buffer.from(`${event('bomb', 1)}\n`.repeat(8000))), '.gz'); // ~4.6 MB inflated
    const err = await readError([f], { maxDecompressedBytes: 1024 * 1024 });
    expect(err.file).toBe(f);
    expect(err.message).toContain('inflates to more than 1048576 bytes (--max-decompressed-bytes)');
  });
});

describe('insights row helpers', () => {
  it('parses Logs Insights timestamps (UTC without zone), ISO with zone, epoch ms', () => {
    expect(parseInsightsTimestamp('2022-08-24 14:25:33.659')).toBe(Date.parse('2022-08-24T14:25:33.659Z'));
    expect(parseInsightsTimestamp('2022-08-24T16:25:33.659+02:00')).toBe(Date.parse('2022-08-24T14:25:33.659Z'));
    expect(parseInsightsTimestamp('1661351133659')).toBe(1661351133659);
    expect(parseInsightsTimestamp('2022-08-24 14:25:33.659 +0000')).toBe(Date.parse('2022-08-24T14:25:33.659Z'));
    expect(parseInsightsTimestamp('2022-08-24 14:25:33.659 UTC')).toBe(Date.parse('2022-08-24T14:25:33.659Z'));
    expect(parseInsightsTimestamp('yesterday')).toBeUndefined();
  });

  it('a guide row with a bad elapsedtime is malformed', () => {
    const stats = createReadStats();
    expect(tokenUseFromInsightsRow({ '@timestamp': '2022-08-24 14:25:33.659', subject: SA, elapsedtime: 'soon' }, stats)).toBeUndefined();
    expect(stats).toMatchObject({ events: 0, malformed: 1 });
  });
});

describe('S3 export lines in pieces', () => {
  it('JsonlScanner with timestampPrefix gives the same result at every cut point', async () => {
    const { JsonlScanner } = await import('../../src/audit/jsonl-scanner.js');
    const content = Buffer.from(
      [`2022-05-10T08:16:35.058Z ${event('s1', 7)}`, `2022-05-10T08:16:36.058Z\t${event('s2', 8)}`, 'x'].join('\n'),
    );
    const whole = createReadStats();
    const wholeOut: TokenUse[] = [];
    const s0 = new JsonlScanner(whole, wholeOut, undefined, true);
    s0.push(content);
    s0.end();
    expect(wholeOut.map((u) => u.auditID)).toEqual(['s1', 's2']);
    for (let cut = 1; cut < content.length; cut += 7) {
      const stats = createReadStats();
      const out: TokenUse[] = [];
      const s = new JsonlScanner(stats, out, undefined, true);
      s.push(content.subarray(0, cut));
      s.push(content.subarray(cut));
      s.end();
      expect(out.map((u) => u.auditID)).toEqual(['s1', 's2']);
      expect(stats).toEqual(whole);
    }
  });

  it('the default reference time reads prefixed tails', async () => {
    const { latestEventTimeInTail } = await import('../../src/scan/latest-event.js');
    const tail = Buffer.from(`2022-05-10T08:16:35.058Z ${event('s1', 7, '2022-05-10T08:16:34.208000Z')}\n`);
    expect(latestEventTimeInTail(tail, false)).toBe(Date.parse('2022-05-10T08:16:34.208Z'));
  });
});
