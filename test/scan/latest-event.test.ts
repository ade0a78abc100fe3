import { describe, expect, it } from 'vitest';
import { latestEventTimeInTail } from '../../src/scan/latest-event.js';

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
