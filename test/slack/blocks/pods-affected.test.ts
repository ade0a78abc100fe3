import { describe, expect, it } from 'vitest';
import { findingFields } from '../../../src/slack/blocks/finding.js';
import { NOW, multusFinding } from './fixtures.js';

const podsField = (fields: string[]) => fields.find((f) => f.startsWith('*Pods affected*'))!.split('\n')[1];

describe('Pods affected field', () => {
  it('counts running affected pods against the running total, with pods gone from cluster state apart (never 7 of 6)', () => {
    const pods = ['a', 'b', 'c', 'd', 'e', 'f', 'gone-1'];
    const f = multusFinding({ pods, missingPods: ['gone-1'] });
    expect(podsField(findingFields(f, { now: NOW, podsTotal: 6 }))).toBe('6 of 6 (+1 gone)');
    expect(podsField(findingFields(multusFinding({ pods: ['a', 'b'], missingPods: [] }), { now: NOW, podsTotal: 4 }))).toBe('2 of 4');
    expect(podsField(findingFields(multusFinding({ pods: ['a', 'b'] }), { now: NOW }))).toBe('2');
  });
});

describe('lead text of a critical finding whose rejection is far away', () => {
  it('says the severity comes from 401s, so the card does not contradict itself', async () => {
    const { findingMessage } = await import('../../../src/slack/blocks/finding.js');
    const far = new Date(NOW + 89 * 86_400_000).toISOString();
    const f = multusFinding({ severity: 'critical', rejectionAt: far });
    const lead = (findingMessage(f, { now: NOW, buttonsFor: () => undefined }).blocks[1] as { text: { text: string } }).text.text;
    expect(lead).toContain('will reject it in *89 days*');
    expect(lead).toContain('*critical* because requests from this ServiceAccount are already rejected with 401');
    const warn = multusFinding({ severity: 'warning', rejectionAt: new Date(NOW + 20 * 86_400_000).toISOString() });
    expect((findingMessage(warn, { now: NOW, buttonsFor: () => undefined }).blocks[1] as { text: { text: string } }).text.text).not.toContain('because requests');
  });
});

describe('pod names in Pods affected', () => {
  it('lists running pods before pods gone from cluster state', () => {
    const f = multusFinding({ pods: ['a-gone', 'b-gone', 'c-run', 'd-run'], missingPods: ['a-gone', 'b-gone'] });
    const names = findingFields(f, { now: NOW, podsTotal: 2 }).find((x) => x.startsWith('*Pods affected*'))!.split('\n')[2]!;
    expect(names.indexOf('c-run')).toBeLessThan(names.indexOf('a-gone'));
    expect(names.startsWith('`c-run`')).toBe(true);
  });
});
