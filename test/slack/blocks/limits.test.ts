import { describe, expect, it } from 'vitest';
import { validateBlocks } from '../../../src/slack/blocks/limits.js';
import { validateMessage } from './validate.js';

const pt = (text: string) => ({ type: 'plain_text', text });
const mk = (text: string) => ({ type: 'mrkdwn', text });
const button = (over: Record<string, unknown> = {}) => ({ type: 'button', action_id: 'a', text: pt('Go'), value: 'v', ...over });

describe('validateBlocks', () => {
  it('accepts a valid message', () => {
    expect(
      validateBlocks([
        { type: 'header', text: pt('h') },
        { type: 'section', text: mk('x'.repeat(3000)), fields: Array.from({ length: 10 }, () => mk('y'.repeat(2000))) },
        { type: 'context', elements: Array.from({ length: 10 }, () => mk('c')) },
        { type: 'divider' },
        {
          type: 'actions',
          block_id: 'b'.repeat(255),
          elements: [
            button({
              action_id: 'x'.repeat(255),
              text: pt('t'.repeat(75)),
              value: 'v'.repeat(2000),
              style: 'danger',
              confirm: { title: pt('t'.repeat(100)), text: pt('t'.repeat(300)), confirm: pt('c'.repeat(30)), deny: pt('d'.repeat(30)), style: 'danger' },
            }),
          ],
        },
        { type: 'image', image_url: 'https://example.com/a.png', alt_text: 'a' },
      ]),
    ).toEqual([]);
  });

  it('lists every violation with a JSON pointer', () => {
    const blocks = [
      { type: 'header', text: pt('h'.repeat(151)) },
      { type: 'section', text: mk('x'.repeat(3001)), fields: Array.from({ length: 11 }, (_, i) => mk(i === 0 ? 'y'.repeat(2001) : 'y')) },
      { type: 'context', elements: Array.from({ length: 11 }, () => mk('c')) },
      {
        type: 'actions',
        block_id: 'b'.repeat(256),
        elements: [
          button({
            action_id: 'x'.repeat(256),
            text: pt('t'.repeat(76)),
            value: 'v'.repeat(2001),
            style: 'red',
            confirm: { title: pt('t'.repeat(101)), text: pt('t'.repeat(301)), confirm: pt('c'.repeat(31)), deny: pt('') },
          }),
          button({ action_id: 'dup' }),
          button({ action_id: 'dup' }),
        ],
      },
      { type: 'header', text: mk('mrkdwn not allowed') },
      { type: 'section' },
      { type: 'divider', block_id: 'same' },
      { type: 'divider', block_id: 'same' },
    ];
    expect(validateBlocks(blocks)).toEqual([
      '/blocks/0/text/text: 151 chars > 150',
      '/blocks/1/text/text: 3001 chars > 3000',
      '/blocks/1/fields: 11 fields > 10',
      '/blocks/1/fields/0/text: 2001 chars > 2000',
      '/blocks/2/elements: 11 elements > 10',
      '/blocks/3/block_id: 256 chars > 255',
      '/blocks/3/elements/0/action_id: 256 chars > 255',
      '/blocks/3/elements/0/text/text: 76 chars > 75',
      '/blocks/3/elements/0/value: 2001 chars > 2000',
      '/blocks/3/elements/0/style: must be primary or danger',
      '/blocks/3/elements/0/confirm/title/text: 101 chars > 100',
      '/blocks/3/elements/0/confirm/text/text: 301 chars > 300',
      '/blocks/3/elements/0/confirm/confirm/text: 31 chars > 30',
      '/blocks/3/elements/0/confirm/deny/text: must be a non-empty string',
      '/blocks/3/elements/2/action_id: duplicate "dup" in this block',
      '/blocks/4/text: must be a text object of type plain_text',
      '/blocks/5: section needs text or fields',
      '/blocks/7/block_id: duplicate "same"',
    ]);
  });

  it('limits a message to 50 blocks and 25 actions elements', () => {
    expect(validateBlocks(Array.from({ length: 51 }, () => ({ type: 'divider' })))).toEqual(['/blocks: 51 blocks > 50']);
    expect(
      validateBlocks([{ type: 'actions', elements: Array.from({ length: 26 }, (_, i) => button({ action_id: `a${i}` })) }]),
    ).toEqual(['/blocks/0/elements: 26 elements > 25']);
  });

  it('rejects non-arrays and empty text', () => {
    expect(validateBlocks('[]')).toEqual(['/blocks: must be an array']);
    expect(validateBlocks([{ type: 'section', text: mk('') }])).toEqual(['/blocks/0/text/text: must be a non-empty string']);
  });

  it('validateMessage requires the fallback text', () => {
    expect(validateMessage({ blocks: [] })).toEqual(['/text: fallback text is required']);
    expect(validateMessage({ text: ' ', blocks: [] })).toEqual(['/text: fallback text is required']);
    expect(validateMessage({ text: 'hi', blocks: [{ type: 'divider' }] })).toEqual([]);
  });
});
