import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { eventTimeMs, isAuditEvent } from '../../src/audit/token-use.js';
import { eventTimeUpperBounds, latestEventTimeInTail } from '../../src/scan/latest-event.js';

const line = (id: string, received: string, stage = received) =>
  JSON.stringify({ kind: 'Event', auditID: id, requestReceivedTimestamp: received, stageTimestamp: stage });

describe('latestEventTimeInTail', () => {
  it('takes the latest requestReceivedTimestamp among complete lines, not just the last line', () => {
    const tail = Buffer.from(
      [
        line('a', '2026-11-20T11:59:59.000000Z'),
        line('b', '2026-11-20T12:00:00.500000Z'),
        // a long request completing last: received earlier
        line('c', '2026-11-20T11:00:00.000000Z', '2026-11-20T12:00:01.000000Z'),
        '',
      ].join('\n'),
    );
    expect(latestEventTimeInTail(tail, false)).toBe(Date.parse('2026-11-20T12:00:00.500Z'));
  });

  it('skips the partial first line of a window, cut lines and non-events', () => {
    const tail = Buffer.from(
      [
        line('x', '2026-11-21T00:00:00.000000Z').slice(5), // starts mid-line
        line('a', '2026-11-20T10:00:00.000000Z'),
        '{"kind":"Event","auditID":"cut","requestReceivedTimestamp":"2026-11-22T00:00:00',
        'E1120 12:00:00.000000      11 authentication.go:73] not an event',
        JSON.stringify({ timestamp: 1 }),
      ].join('\n'),
    );
    expect(latestEventTimeInTail(tail, true)).toBe(Date.parse('2026-11-20T10:00:00Z'));
  });

  it('falls back to stageTimestamp and returns undefined without events', () => {
    expect(latestEventTimeInTail(Buffer.from(JSON.stringify({ auditID: 'a', stageTimestamp: '2026-11-20T10:00:00Z' })), false)).toBe(
      Date.parse('2026-11-20T10:00:00Z'),
    );
    expect(latestEventTimeInTail(Buffer.from('"@timestamp","@message"\n'), false)).toBeUndefined();
    expect(latestEventTimeInTail(Buffer.alloc(0), false)).toBeUndefined();
  });
});

/** The reference: every line parsed, front to back (what latestEventTimeInTail did before it skipped lines). */
function parseEveryLine(tail: Buffer, partialFirst: boolean): number | undefined {
  let latest: number | undefined;
  const lines = tail.toString('utf8').split('\n');
  for (let i = partialFirst ? 1 : 0; i < lines.length; i++) {
    let line = lines[i]?.trim();
    if (line && line[0] !== '{') line = /^\d{4}-\d{2}-\d{2}T\S{1,40}[ \t]+(\{.*)$/.exec(line)?.[1];
    if (line?.[0] !== '{') continue;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      continue;
    }
    if (!isAuditEvent(v)) continue;
    const t = eventTimeMs(v);
    if (t !== undefined && (latest === undefined || t > latest)) latest = t;
  }
  return latest;
}

describe('latestEventTimeInTail skips only lines that cannot hold a later time', () => {
  // Times a few seconds apart, written as the API server does (microseconds, Z) and in the other RFC 3339 forms.
  const time = fc
    .tuple(fc.integer({ min: 0, max: 20_000 }), fc.constantFrom('micro', 'plain', 'offset', 'lower', 'nano'))
    .map(([ms, form]) => {
      const iso = new Date(Date.UTC(2026, 10, 20) + ms).toISOString();
      if (form === 'micro') return iso.replace('Z', '123Z');
      if (form === 'plain') return `${iso.slice(0, 19)}Z`;
      if (form === 'offset') return `${iso.slice(0, 19)}+00:00`;
      if (form === 'lower') return iso.replace('T', 't');
      return iso.replace('Z', '123456Z');
    });
  const value = fc.oneof(time, fc.constantFrom('not a time', '', '2026-02-30T00:00:00Z'), fc.constant(7), fc.constant(null));
  /** Keys written in the ways a text search could miss or misread: spaces, escapes, nesting, as values. */
  const line = fc
    .record(
      {
        auditID: fc.constantFrom('a', 'b', ''),
        requestReceivedTimestamp: value,
        stageTimestamp: value,
        requestObject: fc.record({ requestReceivedTimestamp: value, note: fc.constantFrom('requestReceivedTimestamp', 'x\\"stageTimestamp\\":\\"2026-12-30T00:00:00Z') }, { requiredKeys: [] }),
      },
      { requiredKeys: [] },
    )
    .chain((o) =>
      fc.constantFrom(
        JSON.stringify(o),
        JSON.stringify(o, null, 0).replaceAll('":', '" : '),
        JSON.stringify(o).replaceAll('":', '"\r:\t\r'),
        JSON.stringify(o).replace('"requestReceivedTimestamp"', '"requestReceived\\u0054imestamp"'),
        JSON.stringify(o).replace('"stageTimestamp":"', '"stageTimestamp":"\\u0032'),
        `2026-11-30T00:00:00.000Z ${JSON.stringify(o)}`,
        '{"cut": ',
      ),
    );

  it('gives what parsing every line gives, for random tails (property)', () => {
    fc.assert(
      fc.property(fc.array(line, { maxLength: 30 }), fc.boolean(), (lines, partialFirst) => {
        const tail = Buffer.from(lines.join('\n'));
        expect(latestEventTimeInTail(tail, partialFirst)).toBe(parseEveryLine(tail, partialFirst));
      }),
      { numRuns: 500 },
    );
  });

  it('a key followed by CR before its colon still counts (JSON whitespace; found by the new-user trial)', () => {
    const ev = (id: string, t: string, sep: string) =>
      `{"kind":"Event","auditID":"${id}","requestReceivedTimestamp"${sep}"${t}","stageTimestamp"${sep}"${t}"}`;
    const a = ev('a', '2026-11-28T00:00:00.000000Z', '\r:');
    const b = ev('b', '2026-11-10T00:00:00.000000Z', ':');
    expect(latestEventTimeInTail(Buffer.from(`${a}\n${b}\n`), false)).toBe(Date.parse('2026-11-28T00:00:00Z'));
    expect(latestEventTimeInTail(Buffer.from(`${b}\n${a}\n`), false)).toBe(Date.parse('2026-11-28T00:00:00Z'));
  });

  it('bounds per line: the latest time string after either key, -Infinity without one, Infinity for escapes', () => {
    const lines = [
      '{"auditID":"a","requestReceivedTimestamp":"2026-11-20T10:00:00Z","stageTimestamp" : "2026-11-20T10:00:01.5Z"}',
      '{"auditID":"a","note":"requestReceivedTimestamp"}',
      '{"requestReceived\\u0054imestamp":"2026-11-20T10:00:00Z"}',
      '{"stageTimestamp":"2026-11-20T10:00:0\\u0030Z"}',
      '{"stageTimestamp":"2026-11-20T11:00:00+01:00"}',
      '{"stageTimestamp":"2026-11-20T10:00:00.999999',
    ];
    expect([...eventTimeUpperBounds(lines.join('\n'))]).toEqual([
      Date.parse('2026-11-20T10:00:01.500Z'),
      Number.NEGATIVE_INFINITY,
      Number.POSITIVE_INFINITY,
      Number.POSITIVE_INFINITY,
      Date.parse('2026-11-20T10:00:00Z'),
      Number.POSITIVE_INFINITY,
    ]);
  });
});
