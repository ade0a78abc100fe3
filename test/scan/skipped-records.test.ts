/**
 * `scan` reads on past an oversized record and a NUL-bearing line: its findings include the events after them, the
 * JSON `stats` gains the additive `oversized` and `nulLines` counts (docs/design/contracts.md), and `warnings` say
 * what was skipped; a read split across worker tasks (ranges of one file) counts and warns alike. The record limit is
 * injected (`maxLineBytes`, 64 MiB in use) so the files stay small.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReadNotice, TokenUse } from '../../src/audit/types.js';
import { jsonDocument } from '../../src/cli/commands/scan.js';
import { planParallelRead, readParallel, type TaskRunner } from '../../src/scan/parallel.js';
import { runScan } from '../../src/scan/run.js';
import { runTask } from '../../src/scan/worker.js';
import { createReadStats, readTokenUses } from '../../src/sources/reader.js';
import { auditEvent } from '../sources/events.js';

const MAX = 2048;
const T0 = Date.parse('2026-11-20T10:00:00Z');

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'tw-scan-skip-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Stale uses of multus then, after an oversized line and a zeroed block, the first stale uses of fluent-bit. */
function content(): Buffer {
  const line = (id: string, i: number, sa = 'multus') => auditEvent({ auditID: id, time: T0 + i * 1000, kind: 'stale', serviceAccount: sa, pod: `${sa}-abcde`, secondsAfterWarning: 40 * 86_400 });
  const before = Array.from({ length: 30 }, (_, i) => line(`m${i}`, i));
  const after = Array.from({ length: 30 }, (_, i) => line(`f${i}`, 100 + i, 'fluent-bit'));
  const oversized = JSON.stringify({ ...JSON.parse(line('big', 50)), requestURI: `/api?x=${'p'.repeat(MAX * 4)}` });
  return Buffer.concat([
    Buffer.from(`${before.join('\n')}\n${oversized}\n`),
    Buffer.from('{"kind":"Event","auditID":"zeroed'),
    Buffer.alloc(512),
    Buffer.from(`\n${after.join('\n')}\n`),
  ]);
}

describe('scan past skipped records', () => {
  it('findings after an oversized line and a NUL-bearing line; stats.oversized, stats.nulLines and warnings in the JSON', async () => {
    const file = path.join(dir, 'audit.log');
    await writeFile(file, content());
    const result = await runScan({ files: [file], cluster: 'c', maxTokenAge: { mode: 'eks' }, maxLineBytes: MAX });
    const doc = jsonDocument(result, 'c') as {
      findings: Array<{ serviceAccount: string }>;
      stats: Record<string, unknown>;
      warnings: ReadNotice[];
    };
    expect(doc.findings.map((f) => f.serviceAccount).sort()).toEqual(['fluent-bit', 'multus']);
    expect(doc.stats).toMatchObject({ lines: 62, events: 60, malformed: 2, oversized: 1, nulLines: 1 });
    expect(doc.warnings.map((w) => w.code)).toEqual(['oversized', 'nul-line']);
    expect(doc.warnings.every((w) => w.file === file)).toBe(true);
  });

  it('a read split into ranges (worker tasks) counts and warns as the serial read does', async () => {
    const file = path.join(dir, 'ranges.log');
    await writeFile(file, content());
    const serialStats = createReadStats();
    const serialNotices: ReadNotice[] = [];
    const serialUses: TokenUse[] = [];
    for await (const u of readTokenUses([file], serialStats, { maxLineBytes: MAX, onNotice: (n) => serialNotices.push(n) })) serialUses.push(u);

    const plan = await planParallelRead([file], { jobs: 2, minBytes: 0, partBytes: 4096, maxLineBytes: MAX, maxHitsPerMiB: Number.POSITIVE_INFINITY });
    expect(plan?.tasks.length).toBeGreaterThan(2);
    const runner: TaskRunner = { run: (task, onReply) => void runTask(task, onReply), close: async () => undefined };
    const stats = createReadStats();
    const notices: ReadNotice[] = [];
    const uses: TokenUse[] = [];
    for await (const u of readParallel(plan!, stats, { runner, onNotice: (n) => notices.push(n) }).uses) uses.push(u);
    expect(uses).toEqual(serialUses);
    expect(stats).toEqual(serialStats);
    expect(stats).toMatchObject({ oversized: 1, nulLines: 1 });
    expect(notices).toEqual(serialNotices);
  });
});
