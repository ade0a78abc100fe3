import { describe, expect, it } from 'vitest';
import {
  clip,
  code,
  count,
  duration,
  escapeMrkdwn,
  escClip,
  linesWithin,
  listWithin,
  mergeHourly,
  progressBar,
  slackDate,
  sourceLink,
  sparkline,
} from '../../../src/slack/blocks/text.js';
import { HOUR, NOW } from './fixtures.js';

describe('mrkdwn text helpers', () => {
  it('escapes &, < and >', () => {
    expect(escapeMrkdwn('a & b <@U123> > c')).toBe('a &amp; b &lt;@U123&gt; &gt; c');
  });

  it('escClip escapes then clips, also for huge input', () => {
    expect(escClip('a<b', 10)).toBe('a&lt;b');
    expect(escClip('<'.repeat(100_000), 10)).toBe('&lt;&lt;…');
    expect(escClip('ab😀', 3)).toBe('ab…');
  });

  it('code spans neutralise backticks and newlines', () => {
    expect(code('ua `x`\nnext <b>')).toBe("`ua 'x' next &lt;b&gt;`");
  });

  it('clip keeps short text and cuts long text with an ellipsis within the limit', () => {
    expect(clip('abc', 3)).toBe('abc');
    expect(clip('abcdef', 4)).toBe('abc…');
  });

  it('clip never splits an entity, a surrogate pair or a <…> token', () => {
    expect(clip('ab &amp; cd', 6)).toBe('ab …');
    expect(clip('ab😀cd', 4)).toBe('ab…');
    expect(clip('see <https://example.com|link> now', 20)).toBe('see …');
  });

  it('linesWithin keeps whole lines and says how many it left out', () => {
    const lines = ['aaaa', 'bbbb', 'cccc', 'dddddddddddddddd'];
    expect(linesWithin(lines, 100)).toBe('aaaa\nbbbb\ncccc\ndddddddddddddddd');
    // 'aaaa\nbbbb' (9) + '\n…and 2 more' (12) = 21
    expect(linesWithin(lines, 21)).toBe('aaaa\nbbbb\n…and 2 more');
    expect(linesWithin(lines, 20)).toBe('aaaa\n…and 3 more');
    expect(linesWithin(lines, 5)).toBe('…and…');
  });

  it('listWithin shows the first items and counts the rest against the real total', () => {
    expect(listWithin(['a', 'b', 'c'], 2)).toBe('a, b, …and 1 more');
    expect(listWithin(['a', 'b'], 2, ', ', 500)).toBe('a, b, …and 498 more');
    expect(listWithin(['a'], 3)).toBe('a');
    expect(count(1234567)).toBe('1,234,567');
  });

  it('Slack date tokens carry a UTC fallback', () => {
    expect(slackDate(NOW)).toBe('<!date^1795953600^{date_short_pretty} {time}|2026-11-29 12:00 UTC>');
  });

  it('source links: GitHub issue refs, URLs, plain text', () => {
    expect(sourceLink('aws/amazon-vpc-cni-k8s#1868')).toBe('<https://github.com/aws/amazon-vpc-cni-k8s/issues/1868|aws/amazon-vpc-cni-k8s#1868>');
    expect(sourceLink('https://docs.aws.amazon.com/eks/latest/userguide/service-accounts.html')).toBe(
      '<https://docs.aws.amazon.com/eks/latest/userguide/service-accounts.html|docs.aws.amazon.com/eks/latest/userguide/service-accounts.html>',
    );
    expect(sourceLink('EKS user guide <service-accounts>')).toBe('EKS user guide &lt;service-accounts&gt;');
  });

  it('durations use the two largest units', () => {
    expect([30_000, 42 * 60_000, 5 * HOUR + 12 * 60_000, 89 * 24 * HOUR + 3 * HOUR, 2 * 24 * HOUR].map(duration)).toEqual([
      '30 s',
      '42 min',
      '5 h 12 min',
      '89 d 3 h',
      '2 d',
    ]);
  });

  it('progress bar', () => {
    expect(progressBar(3, 12)).toBe('▰▰▰▱▱▱▱▱▱▱');
    expect(progressBar(12, 12)).toBe('▰▰▰▰▰▰▰▰▰▰');
    expect(progressBar(0, 0)).toBe('▱▱▱▱▱▱▱▱▱▱');
  });
});

describe('sparkline', () => {
  const end = Date.parse('2026-11-29T11:30:00Z'); // inside the 11:00 hour
  const h = (iso: string): string => String(Date.parse(iso));

  it('scales non-zero hours to ▂…█ and zero hours to ▁, oldest first, ending with the current hour', () => {
    const hourly = { [h('2026-11-29T11:00:00Z')]: 40, [h('2026-11-29T10:00:00Z')]: 20, [h('2026-11-29T08:00:00Z')]: 1 };
    const s = sparkline(hourly, end, 5);
    // hours 07,08,09,10,11 → 0,1,0,20,40 → levels 0, 1+round(6/40)=1, 0, 1+3=4, 7
    expect(s).toEqual({ line: '▁▂▁▅█', max: 40, total: 61 });
  });

  it('defaults to 24 hours and ignores hours outside the window', () => {
    const s = sparkline({ [h('2026-11-27T11:00:00Z')]: 99, [h('2026-11-29T11:00:00Z')]: 3 }, end);
    expect(s.line).toBe(`${'▁'.repeat(23)}█`);
    expect(s.total).toBe(3);
  });

  it('an empty map is a flat line', () => {
    expect(sparkline({}, end, 4)).toEqual({ line: '▁▁▁▁', max: 0, total: 0 });
  });

  it('mergeHourly sums per hour', () => {
    expect(mergeHourly([{ '1': 2, '2': 3 }, { '2': 4 }])).toEqual({ '1': 2, '2': 7 });
  });
});
