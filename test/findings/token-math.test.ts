import { describe, expect, it } from 'vitest';
import { issuedTime, rejectionTime, warnAfterTime } from '../../src/findings/token-math.js';
import type { MaxTokenAge } from '../../src/config/max-token-age.js';
import { parseMaxTokenAge } from '../../src/config/max-token-age.js';

const iso = (ms: number) => new Date(ms).toISOString();
const EVENT = Date.parse('2022-05-19T11:38:39Z');

/** The times of the token seen in one stale-token event, as aggregation computes them from the three functions. */
function tokenTimes(eventTimeMs: number, secondsAfterWarning: number, maxTokenAge: MaxTokenAge) {
  const warnAfter = warnAfterTime(eventTimeMs, secondsAfterWarning);
  return { warnAfter, issuedAt: issuedTime(warnAfter), rejectionAt: rejectionTime(warnAfter, maxTokenAge) };
}

describe('parseMaxTokenAge', () => {
  it('accepts eks, upstream and positive whole seconds', () => {
    expect(parseMaxTokenAge('eks')).toEqual({ mode: 'eks' });
    expect(parseMaxTokenAge(' EKS ')).toEqual({ mode: 'eks' });
    expect(parseMaxTokenAge('upstream')).toEqual({ mode: 'upstream' });
    expect(parseMaxTokenAge('7776000')).toEqual({ mode: 'seconds', seconds: 7_776_000 });
    expect(parseMaxTokenAge('1')).toEqual({ mode: 'seconds', seconds: 1 });
    expect(parseMaxTokenAge(86_400)).toEqual({ mode: 'seconds', seconds: 86_400 });
  });

  it('accepts the config duration grammar, in whole seconds', () => {
    expect(parseMaxTokenAge('90d')).toEqual({ mode: 'seconds', seconds: 90 * 86_400 });
    expect(parseMaxTokenAge('1d12h')).toEqual({ mode: 'seconds', seconds: 36 * 3600 });
    expect(parseMaxTokenAge('2000ms')).toEqual({ mode: 'seconds', seconds: 2 });
  });

  it.each(['0', '-5', '1.5', '1500ms', '0d', '90 d', '', 'aws', '99999999999999999999'])('rejects %j naming the value', (bad) => {
    expect(() => parseMaxTokenAge(bad)).toThrow(`invalid max token age ${JSON.stringify(bad)}`);
  });
});

describe('tokenTimes', () => {
  it('EKS: warnAfter = event − s, rejection 90 days after warnAfter (docs/design/domain.md §1 example)', () => {
    const r = tokenTimes(EVENT, 1_728_000, { mode: 'eks' });
    expect(iso(r.warnAfter)).toBe('2022-04-29T11:38:39.000Z');
    expect(iso(r.issuedAt)).toBe('2022-04-29T10:38:32.000Z');
    expect(iso(r.rejectionAt)).toBe('2022-07-28T11:38:39.000Z');
  });

  it('upstream: rejection one year (31,536,000 s) after issue = warnAfter − 3607 s', () => {
    const r = tokenTimes(EVENT, 1_728_000, { mode: 'upstream' });
    expect(iso(r.warnAfter)).toBe('2022-04-29T11:38:39.000Z');
    expect(iso(r.rejectionAt)).toBe('2023-04-29T10:38:32.000Z');
  });

  it('custom seconds: rejection N s after warnAfter', () => {
    const r = tokenTimes(EVENT, 1_728_000, { mode: 'seconds', seconds: 86_400 });
    expect(iso(r.rejectionAt)).toBe('2022-04-30T11:38:39.000Z');
    expect(rejectionTime(0, { mode: 'seconds', seconds: 5 })).toBe(5000);
  });

  it('truncates the event time to whole seconds, as the API server does (nowTime.Unix() − warnafter)', () => {
    const r = tokenTimes(Date.parse('2022-05-19T11:38:39.750123Z'), 1_728_000, { mode: 'eks' });
    expect(iso(r.warnAfter)).toBe('2022-04-29T11:38:39.000Z');
    expect(warnAfterTime(Date.parse('2022-05-19T11:38:39.999Z'), 1)).toBe(Date.parse('2022-05-19T11:38:38Z'));
  });

  it('zero seconds after warning: warnAfter is the event time', () => {
    const r = tokenTimes(EVENT, 0, { mode: 'eks' });
    expect(r.warnAfter).toBe(EVENT);
    expect(r.rejectionAt - r.warnAfter).toBe(7_776_000_000);
  });
});
