/** "401 floods": unattributed 401s stay bounded in records, evidence and the live store's reload path. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_UNATTRIBUTED_SOURCES, TokenAggregator, UNATTRIBUTED } from '../../src/findings/aggregate.js';
import { buildFindings } from '../../src/findings/build.js';
import { MAX_EVIDENCE_LINES } from '../../src/findings/causes.js';
import { DistinctCounter } from '../../src/findings/distinct.js';
import { openStore } from '../../src/store/index.js';
import { staleUse, t, unauthorizedUse } from './helpers.js';

const T0 = t('2026-11-01T00:00:00Z');
const ip = (i: number) => `10.${(i >>> 16) & 255}.${(i >>> 8) & 255}.${i & 255}`;
const opts = { cluster: 'prod', maxTokenAge: { mode: 'eks' as const } };

describe('401 floods', () => {
  it('20,000 distinct sources → the top sources one by one plus one overflow record with the rest', async () => {
    const agg = new TokenAggregator(opts);
    // source 0 is heavy (50 requests), a stale client shares source 19999's IP and user agent
    for (let k = 0; k < 50; k++) agg.add(unauthorizedUse({ time: T0 + k, ip: ip(0), ua: 'heavy/1', auditID: `h${k}` }));
    agg.add(staleUse({ ns: 'ns', sa: 'cni', pod: 'cni-0', time: T0, secondsAfterWarning: 100, ip: ip(19_999), ua: 'flood/19999' }));
    for (let i = 1; i < 20_000; i++) agg.add(unauthorizedUse({ time: T0 + i, ip: ip(i), ua: `flood/${i}` }));
    const records = agg.records();
    const u = records.filter((r) => r.kind === 'unauthorized');
    expect(u.length).toBeLessThanOrEqual(MAX_UNATTRIBUTED_SOURCES + 2);
    expect(u.reduce((n, r) => n + r.requests, 0)).toBe(50 + 19_999);
    expect(u.some((r) => r.sourceIPs.includes(ip(0)) && r.requests === 50)).toBe(true);
    const attributed = u.find((r) => r.sourceIPs[0] === ip(19_999));
    expect(attributed?.serviceAccount).toBe('cni'); // kept for attribution although it has one request
    const overflow = u.find((r) => r.overflow)!;
    expect(overflow.namespace).toBe(UNATTRIBUTED);
    expect(Math.abs(overflow.overflow!.sources - (20_000 - u.length + 1)) / 20_000).toBeLessThan(0.05);
    expect(overflow.sourceIPs.length).toBeLessThanOrEqual(20);

    const findings = await buildFindings(records, { now: T0 + 20_000 });
    const f = findings.find((x) => x.namespace === UNATTRIBUTED)!;
    expect(f.requests).toBe(50 + 19_998);
    expect(f.cause.evidence.length).toBeLessThanOrEqual(MAX_EVIDENCE_LINES);
    expect(f.cause.evidence[0]).toMatch(/^unattributed: about \d+ more sources \(source IP and user agent\) with \d+ requests, beyond the 100 with the most requests/);
    expect(f.cause.evidence).toContainEqual(expect.stringMatching(/^… and \d+ more sources attributed the same way$/));
  });

  it('the live path (records reloaded from the store each poll) stays bounded and keeps counting', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-flood-'));
    try {
      const store = await openStore(join(dir, 's.db'));
      for (let p = 0; p < 5; p++) {
        const agg = TokenAggregator.from(opts, await store.tokenRecords.list('prod'));
        for (let i = p * 1_000; i < (p + 1) * 1_000; i++) agg.add(unauthorizedUse({ time: T0 + i, ip: ip(i), ua: `f/${i}` }));
        await store.tokenRecords.replace('prod', agg.records());
      }
      const records = await store.tokenRecords.list('prod');
      expect(records.length).toBe(MAX_UNATTRIBUTED_SOURCES + 1);
      expect(records.reduce((n, r) => n + r.requests, 0)).toBe(5_000);
      const overflow = records.find((r) => r.overflow)!;
      expect(Math.abs(overflow.overflow!.sources - 4_900) / 4_900).toBeLessThan(0.05);
      await store.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('DistinctCounter: counts small sets exactly enough, merges, and survives serialisation', () => {
    const a = new DistinctCounter();
    const b = new DistinctCounter();
    for (let i = 0; i < 300; i++) a.add(`k${i}`);
    for (let i = 200; i < 600; i++) b.add(`k${i}`);
    expect(Math.abs(a.estimate() - 300)).toBeLessThanOrEqual(3);
    const c = new DistinctCounter(a.serialize());
    c.merge(b);
    expect(Math.abs(c.estimate() - 600) / 600).toBeLessThan(0.03);
    expect(new DistinctCounter('not base64 of the right size').estimate()).toBe(0);
  });
});
