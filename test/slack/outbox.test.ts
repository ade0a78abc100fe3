/**
 * The notification queue's pure scheduling (src/slack/outbox.ts) on an injected clock: Slack's rates (one post per
 * second per channel, chat.update Tier 3 at 50 per minute, Retry-After), coalescing, most-urgent-first order, the
 * digest threshold; and the digest message (src/slack/blocks/digest.ts) within Block Kit's limits.
 */
import { describe, expect, it } from 'vitest';
import { digestMessage, statusMessage, validateBlocks, type ClusterStatus, type DigestLine } from '../../src/slack/blocks/index.js';
import { DEFAULT_SLACK_RATES, digestCandidates, methodOf, nextItem, RateGate, URGENCY_LAST, urgencyOf } from '../../src/slack/outbox.js';
import { mergeOutboxItem as mergeItem, type OutboxItem } from '../../src/store/outbox.js';

const T = Date.UTC(2026, 11, 1, 12, 0, 0);
const DAY = 86_400_000;

function item(over: Partial<OutboxItem> & { key: string }): OutboxItem {
  return { kind: 'alert', cluster: 'prod', channel: 'C1', call: 'post', urgency: T + 10 * DAY, enqueuedAt: T, notBefore: 0, attempts: 0, version: 0, payload: {}, ...over };
}

/** Drains `items` with the gate as the drainer does (each item one call), jumping the clock over waits. */
function simulate(items: OutboxItem[], startAt = T): Array<{ key: string; method: string; channel: string; at: number }> {
  const clock = { t: startAt };
  const gate = new RateGate(DEFAULT_SLACK_RATES, () => clock.t);
  const pending = [...items];
  const sent: Array<{ key: string; method: string; channel: string; at: number }> = [];
  for (let guard = 0; pending.length && guard < 100_000; guard++) {
    const next = nextItem(pending, gate, clock.t);
    if ('idle' in next) break;
    if ('waitMs' in next) {
      clock.t += next.waitMs;
      continue;
    }
    const method = methodOf(next.item.call);
    gate.record(method, next.item.channel);
    sent.push({ key: next.item.key, method, channel: next.item.channel, at: clock.t });
    pending.splice(pending.indexOf(next.item), 1);
  }
  return sent;
}

describe('RateGate', () => {
  it('one chat.postMessage per second per channel; other channels are not held up', () => {
    const clock = { t: T };
    const gate = new RateGate(DEFAULT_SLACK_RATES, () => clock.t);
    expect(gate.waitMs('chat.postMessage', 'C1')).toBe(0);
    gate.record('chat.postMessage', 'C1');
    expect(gate.waitMs('chat.postMessage', 'C1')).toBe(1000);
    expect(gate.waitMs('chat.postMessage', 'C2')).toBe(0);
    clock.t += 400;
    expect(gate.waitMs('chat.postMessage', 'C1')).toBe(600);
    clock.t += 600;
    expect(gate.waitMs('chat.postMessage', 'C1')).toBe(0);
  });

  it('chat.update at Tier 3: a burst of 5, then 50 per minute', () => {
    const edits = Array.from({ length: 600 }, (_, i) => item({ key: `alert:g${i}`, call: 'edit', channel: `C${i % 7}` }));
    const sent = simulate(edits);
    expect(sent.filter((s) => s.at === T)).toHaveLength(5);
    // Any minute holds at most 50 calls after the burst (5 + 49 in the first).
    for (const s of sent) {
      const inMinute = sent.filter((x) => x.at >= s.at && x.at < s.at + 60_000).length;
      expect(inMinute).toBeLessThanOrEqual(54);
    }
    const lastAt = sent.at(-1)!.at;
    // 600 edits: 5 at once, then one per 1.2 s.
    expect(lastAt - T).toBe(595 * 1200);
  });

  it('a 429 pauses the method for Retry-After', () => {
    const clock = { t: T };
    const gate = new RateGate(DEFAULT_SLACK_RATES, () => clock.t);
    gate.pause('chat.update', 30_000);
    expect(gate.waitMs('chat.update', 'C1')).toBe(30_000);
    expect(gate.waitMs('chat.postMessage', 'C1')).toBe(0);
    gate.pause('chat.postMessage', 2_000, 'C1');
    expect(gate.waitMs('chat.postMessage', 'C1')).toBe(2_000);
    expect(gate.waitMs('chat.postMessage', 'C2')).toBe(0);
    clock.t += 30_000;
    expect(gate.waitMs('chat.update', 'C1')).toBe(0);
  });
});

describe('queue order and coalescing', () => {
  it('most urgent first (401s now, then the earliest rejection, then undated), oldest first among equals', () => {
    const f = (kind: string, rejectionAt: string | null, firstSeen = new Date(T).toISOString()) => ({ kind, rejectionAt, firstSeen });
    const in3 = urgencyOf([f('stale-token', new Date(T + 3 * DAY).toISOString())]);
    const in30 = urgencyOf([f('stale-token', new Date(T + 30 * DAY).toISOString()), f('legacy-token', null)]);
    const refused = urgencyOf([f('unauthorized', null), f('stale-token', new Date(T + 90 * DAY).toISOString())]);
    expect(refused).toBeLessThan(in3);
    expect(in3).toBeLessThan(in30);
    expect(urgencyOf([f('legacy-token', null)])).toBe(URGENCY_LAST);
    expect(urgencyOf([])).toBe(URGENCY_LAST);
    const items = [
      item({ key: 'alert:late', urgency: in30 }),
      item({ key: 'alert:none', urgency: URGENCY_LAST }),
      item({ key: 'alert:soon-new', urgency: in3, enqueuedAt: T + 1 }),
      item({ key: 'alert:soon-old', urgency: in3, enqueuedAt: T }),
      item({ key: 'alert:401', urgency: refused }),
    ];
    expect(simulate(items).map((s) => s.key)).toEqual(['alert:401', 'alert:soon-old', 'alert:soon-new', 'alert:late', 'alert:none']);
  });

  it('a channel at its post rate does not hold up another channel; a waiting item waits until notBefore', () => {
    const items = [
      item({ key: 'alert:a1', channel: 'CA', urgency: 1 }),
      item({ key: 'alert:a2', channel: 'CA', urgency: 2 }),
      item({ key: 'alert:b1', channel: 'CB', urgency: 3 }),
      item({ key: 'alert:later', channel: 'CC', urgency: 0, notBefore: T + 5_000 }),
    ];
    const sent = simulate(items);
    expect(sent.map((s) => [s.key, s.at - T])).toEqual([
      ['alert:a1', 0],
      ['alert:b1', 0],
      ['alert:a2', 1000],
      ['alert:later', 5000],
    ]);
    const gate = new RateGate(DEFAULT_SLACK_RATES, () => T);
    expect(nextItem([], gate, T)).toEqual({ idle: true });
    expect(nextItem([item({ key: 'x', notBefore: T + 700 })], gate, T)).toEqual({ waitMs: 700 });
  });

  it('coalesces pending edits of one alert into one item: oldest enqueue time, newest facts, backoff kept, version bumped', () => {
    const first = item({ key: 'alert:g', call: 'edit', urgency: T + 9 * DAY, enqueuedAt: T, notBefore: T + 10_000, attempts: 2, payload: { reopened: [{ findingId: 'f1', late: false, resolvedAt: null }] } });
    const second = item({ key: 'alert:g', call: 'edit', urgency: T + 8 * DAY, enqueuedAt: T + 300_000, payload: { reopened: [{ findingId: 'f2', late: true, resolvedAt: T - DAY }] } });
    const m = mergeItem(first, second);
    expect(m).toMatchObject({ key: 'alert:g', urgency: T + 8 * DAY, enqueuedAt: T, notBefore: T + 10_000, attempts: 2, version: 1 });
    expect(m.payload.reopened?.map((r) => r.findingId)).toEqual(['f1', 'f2']);
    expect(mergeItem(m, second).payload.reopened).toHaveLength(2);
  });

  it('asks for a digest only when more than the threshold of new alerts wait for one channel, most urgent first', () => {
    const posts = Array.from({ length: 12 }, (_, i) => item({ key: `alert:g${i}`, urgency: T + (12 - i) * DAY }));
    const other = [item({ key: 'alert:edit', call: 'edit' }), item({ key: 'alert:elsewhere', channel: 'C2' })];
    expect(digestCandidates([...posts, ...other], 'C1', 10, new Set()).map((i) => i.key)).toEqual(posts.map((p) => p.key).reverse());
    expect(digestCandidates([...posts, ...other], 'C1', 12, new Set())).toEqual([]);
    // Alerts already listed by a digest are not listed again.
    expect(digestCandidates(posts, 'C1', 10, new Set(posts.slice(0, 5).map((p) => p.key)))).toEqual([]);
  });
});

describe('digestMessage', () => {
  const line = (i: number, over: Partial<DigestLine> = {}): DigestLine => ({
    groupId: `g${i}`,
    cluster: `cluster-${i % 40}`,
    subject: `kube-system/agent-${i}`,
    severity: i % 3 === 0 ? 'critical' : 'warning',
    fact: `rejected in ${i} days`,
    ...over,
  });

  it('lists the alerts in the given order, marking the posted ones', () => {
    const m = digestMessage([line(1, { posted: { channel: 'C1', ts: '1.1' } }), line(2), line(3)], T);
    expect(validateBlocks(m.blocks)).toEqual([]);
    const body = JSON.stringify(m.blocks);
    expect(body).toContain('3 new alerts in 3 clusters');
    expect(body).toContain('1 of 3 posted so far');
    const lines = (m.blocks[2] as { text: { text: string } }).text.text.split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/cluster-1.*agent-1.*rejected in 1 day.*✅ posted$/);
    expect(lines[1]).toMatch(/agent-2.*⏳ to follow$/);
    expect(m.text).toContain('[cluster-1] warning: kube-system/agent-1');
  });

  it('stays within 50 blocks and 3,000 characters per section for any number of lines, the rest as "and N more"', () => {
    for (const n of [11, 200, 5_000]) {
      const lines = Array.from({ length: n }, (_, i) => line(i, { subject: `kube-system/${'x'.repeat(i % 200)}-${i}` }));
      const m = digestMessage(lines, T);
      expect(validateBlocks(m.blocks)).toEqual([]);
      expect(m.blocks.length).toBeLessThanOrEqual(50);
      const shown = m.blocks.filter((b) => b.type === 'section').slice(1).flatMap((b) => (b as { text: { text: string } }).text.text.split('\n')).length;
      const more = JSON.stringify(m.blocks).match(/…and ([\d,]+) more/);
      expect(shown + (more ? Number(more[1]!.replace(/,/g, '')) : 0)).toBe(n);
      if (n === 5_000) expect(more).not.toBeNull();
    }
  });
});

describe('/tokens status backlog line', () => {
  const cluster: ClusterStatus = { name: 'prod', lastPoll: T, health: [], alertsBySeverity: { critical: 0, warning: 1, info: 0 } };
  it('shows the queue when it is not empty, and nothing when it is', () => {
    const m = statusMessage([cluster], { now: T, backlog: { depth: 42, oldestEnqueuedAt: T - 120_000 } });
    expect(validateBlocks(m.blocks)).toEqual([]);
    expect(JSON.stringify(m.blocks)).toContain('📬 Slack backlog: 42 alert updates waiting, the oldest queued <!date^');
    expect(m.text).toContain('Slack backlog: 42');
    const empty = statusMessage([cluster], { now: T, backlog: { depth: 0, oldestEnqueuedAt: null } });
    expect(JSON.stringify(empty.blocks)).not.toContain('backlog');
    expect(JSON.stringify(statusMessage([cluster], { now: T }).blocks)).not.toContain('backlog');
  });
});
