/**
 * An audit JSON-lines log whose first line is not a whole record — the tail of an event (`tail -c 100M audit.log`, a
 * `copytruncate` rotation mid-line), the head of one (a partial write, then whole lines appended) or junk — is read
 * as audit JSON lines: the first line is counted in `stats.malformed` and skipped, as the same line later in the file
 * is ("one bad record never ends a file", docs/scan.md). Plain and gzip, serial and with worker threads, and through
 * the CLI (exit code, JSON stats, stderr). Format detection of other inputs is covered by test/audit.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { detectFormat } from '../../src/audit/formats.js';
import { jsonDocument } from '../../src/cli/commands/scan.js';
import { closePlan, planParallelRead } from '../../src/scan/parallel.js';
import { runScan } from '../../src/scan/run.js';
import { runCli } from '../cli/run-cli.js';
import { auditEvent } from '../sources/events.js';

const dir = mkdtempSync(join(tmpdir(), 'tw-cut-first-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const T0 = Date.parse('2026-11-20T10:00:00Z');
const STALE = 25;
const PLAIN = 35;

/** The whole lines: {@link STALE} stale-token uses of two ServiceAccounts among {@link PLAIN} events without a token use. */
function body(): string {
  const out: string[] = [];
  for (let i = 0; i < STALE + PLAIN; i++) {
    const stale = i < 2 * STALE && i % 2 === 0;
    const sa = i % 4 === 0 ? 'multus' : 'fluent-bit';
    out.push(
      auditEvent({
        auditID: `id-${i}`,
        time: T0 + i * 60_000,
        kind: stale ? 'stale' : 'plain',
        serviceAccount: sa,
        pod: `${sa}-abcde`,
        secondsAfterWarning: 40 * 86_400,
      }),
    );
  }
  return `${out.join('\n')}\n`;
}

/** A stale-token event that does not appear whole in the file (its auditID must not be counted). */
const CUT_EVENT = auditEvent({ auditID: 'id-cut', time: T0 - 60_000, kind: 'stale', serviceAccount: 'multus', pod: 'multus-abcde', secondsAfterWarning: 40 * 86_400 });

const FIRST_LINES = {
  /** `tail -c`: the end of an event, from its 200th character (inside a string, not at `{`). */
  'the tail of an event': CUT_EVENT.slice(200),
  /** Junk. */
  junk: 'xxxx not json',
  /** A partial write: the first 200 characters of an event, starting with `{` and cut inside it. */
  'the head of an event': CUT_EVENT.slice(0, 200),
} as const;

const clean = join(dir, 'clean.log');
writeFileSync(clean, body());

function write(name: string, first: string, gzip: boolean): string {
  const f = join(dir, `${name.replaceAll(' ', '-')}.log${gzip ? '.gz' : ''}`);
  const text = `${first}\n${body()}`;
  writeFileSync(f, gzip ? gzipSync(text) : text);
  return f;
}

function scanDoc(files: string[], parallel: boolean) {
  return runScan({
    files,
    cluster: 'c',
    maxTokenAge: { mode: 'eks' },
    ...(parallel ? { jobs: 2, parallelPlan: { minBytes: 0, partBytes: 4096, maxHitsPerMiB: Number.POSITIVE_INFINITY } } : {}),
  }).then((r) => jsonDocument(r, 'c') as { findings: unknown[]; stats: Record<string, unknown>; warnings: unknown[]; readiness: { coverage: object }; now: unknown });
}

describe('a first line that is not a whole record, before audit JSON lines', () => {
  it('the lines are what the test says: the first line does not parse, the rest are events', () => {
    expect(FIRST_LINES['the tail of an event'][0]).not.toBe('{');
    expect(FIRST_LINES['the head of an event'][0]).toBe('{');
    for (const first of Object.values(FIRST_LINES)) expect(() => JSON.parse(first)).toThrow();
  });

  for (const [name, first] of Object.entries(FIRST_LINES)) {
    it(`${name}: detected as audit JSON lines`, () => {
      expect(detectFormat(Buffer.from(`${first}\n${body()}`))).toBe('audit-jsonl');
      // A head cut inside the lines after the first (a large file) is detected alike.
      expect(detectFormat(Buffer.from(`${first}\n${body()}`).subarray(0, 2000), false)).toBe('audit-jsonl');
    });

    for (const gzip of [false, true]) {
      for (const parallel of [false, true]) {
        it(`${name}, ${gzip ? 'gzip' : 'plain'}, ${parallel ? 'worker threads' : 'serial'}: counted malformed, the rest read`, async () => {
          const f = write(`${name}-${gzip}-${parallel}`, first, gzip);
          if (parallel && !gzip) {
            // The plain file is split into ranges, so the first range's first line is the bad one.
            const plan = await planParallelRead([f], { jobs: 2, minBytes: 0, partBytes: 4096, maxHitsPerMiB: Number.POSITIVE_INFINITY });
            expect(plan?.tasks.filter((t) => t.kind === 'range').length).toBeGreaterThan(1);
            if (plan) await closePlan(plan);
          }
          const expected = await scanDoc([clean], false);
          const doc = await scanDoc([f], parallel);
          expect(expected.stats).toMatchObject({ lines: STALE + PLAIN, events: STALE + PLAIN, tokenUses: STALE, malformed: 0 });
          expect(doc.stats).toEqual({ ...expected.stats, lines: STALE + PLAIN + 1, malformed: 1 });
          expect(doc.findings).toEqual(expected.findings);
          expect(doc.warnings).toEqual([]);
          // The reference time and the audit window are those of the whole lines; coverage counts lines read, the bad
          // one too (`stats.lines`, docs/scan.md "Is it safe to turn token extension off?").
          expect(doc.now).toEqual(expected.now);
          expect(doc.readiness).toEqual({ ...expected.readiness, coverage: { ...expected.readiness.coverage, events: STALE + PLAIN + 1 } });
        });
      }
    }
  }

  it('a cut first line starting with `[` is read alike; a first line that opens a document still is one', () => {
    const e = (n: number) => auditEvent({ auditID: `e${n}`, time: T0 + n, kind: 'stale', serviceAccount: 'multus', pod: 'multus-abcde', secondsAfterWarning: 100 });
    const cut = CUT_EVENT.slice(CUT_EVENT.indexOf('["'));
    expect(cut[0]).toBe('[');
    expect(detectFormat(Buffer.from(`${cut}\n${e(1)}\n${e(2)}\n`))).toBe('audit-jsonl');
    // Documents whose first line is not a whole record but whose inner lines may be events: still documents.
    expect(detectFormat(Buffer.from(`${e(1)}${e(2)}\n${e(3)}\n${e(4)}\n`))).toBe('json-documents'); // concatenated
    expect(detectFormat(Buffer.from(`[\n${e(1)}\n]\n`))).toBe('json-documents'); // a JSON array, one event a line
    expect(detectFormat(Buffer.from(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[\n${e(1)}\n]}\n`))).toBe('json-documents');
    expect(detectFormat(Buffer.from(`${JSON.stringify(JSON.parse(e(1)), null, 2)}\n`))).toBe('json-documents'); // `jq .`
  });

  it('the CLI: exit code and findings of the whole lines, malformed: 1, at most one line on stderr', async () => {
    const expected = await runCli(['scan', '--audit-log', clean, '--format', 'json']);
    expect(expected.code).not.toBe(2);
    const want = JSON.parse(expected.stdout) as { findings: unknown[]; stats: Record<string, unknown> };
    for (const [name, first] of Object.entries(FIRST_LINES)) {
      for (const gzip of [false, true]) {
        const f = write(`cli-${name}-${gzip}`, first, gzip);
        const run = await runCli(['scan', '--audit-log', f, '--format', 'json']);
        expect({ name, gzip, code: run.code }).toEqual({ name, gzip, code: expected.code });
        expect(run.stderr.trim().split('\n').filter((l) => l !== '').length).toBeLessThanOrEqual(1);
        const doc = JSON.parse(run.stdout) as typeof want;
        expect(doc.stats).toEqual({ ...want.stats, lines: STALE + PLAIN + 1, malformed: 1 });
        expect(doc.stats.tokenUses).toBe(STALE);
        expect(doc.findings).toEqual(want.findings);
      }
    }
  });
});
