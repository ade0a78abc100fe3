/**
 * Deterministic generator of tokenwatch's bundled example data (see examples/README.md, which it also writes).
 *
 *   npx tsx examples/generate.ts [OUT_DIR]     # default: the examples/ directory itself
 *
 * Same code, same bytes: a seeded PRNG (`examples/generator/rng.ts`), a fixed reference time
 * (2026-11-20T12:00:00Z, the latest event time) and no clock or environment input. The gzip file's compressed
 * bytes depend on the zlib build; compare it after decompression.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { gzipSync } from 'node:zlib';
import { Rng } from './generator/rng.js';
import { buildCluster, REFERENCE_TIME, ROTATION_TIME } from './generator/model.js';
import { buildRequests } from './generator/traffic.js';
import { renderEvents, type RenderedEvent } from './generator/events.js';
import { snapshotJson } from './generator/snapshot.js';
import { filterLogEventsJson, insightsCsv, insightsJson } from './generator/exports.js';
import { expectInput, storyFacts, tokenFacts, type ExpectedExamples, type InputSet } from './generator/expected.js';
import { renderReadme } from './generator/readme.js';
import { HOUR, microTime } from './generator/format.js';

export type { ExpectedExamples, ExpectedFinding, ExpectedInput, ExpectedStats, ExpectedToken, TokenFacts } from './generator/expected.js';

/** Seed of the example data. Changing it changes every file. */
export const SEED = 'tokenwatch-examples-v1';

/** Files the generator writes, relative to the examples directory. */
export const EXAMPLE_FILES = {
  currentLog: 'audit/kube-apiserver-audit.log',
  rotatedLog: 'audit/kube-apiserver-audit-2026-11-19T06-00-00.000.log.gz',
  snapshot: 'cluster-snapshot.json',
  cloudwatch: 'cloudwatch/filter-log-events.json',
  insightsCsv: 'insights/stale-tokens.csv',
  insightsJson: 'insights/stale-tokens.json',
  expected: 'expected.json',
  readme: 'README.md',
} as const;

/** Time range of the Logs Insights export, ms before the reference time. */
const INSIGHTS_WINDOW = 12 * HOUR;

/** Token-use terms a prefiltering reader looks for (src/sources/terms.ts). */
const TOKEN_TERMS = ['authentication.k8s.io/stale-token', 'authentication.k8s.io/legacy-token', 'Authentication failed'];

/** Generated example data: file bytes by path (relative to the examples directory) and the expected results. */
export interface GeneratedExamples {
  /** Path → bytes. The `.gz` entry is gzip-compressed. */
  files: Map<string, Buffer>;
  expected: ExpectedExamples;
  /** Uncompressed text of the rotated log (for tests). */
  rotatedLogText: string;
}

/** Generates every example file in memory. Pure: no clock, no I/O. */
export function generateExamples(): GeneratedExamples {
  const rng = new Rng(SEED);
  const model = buildCluster(rng);
  const reqs = buildRequests(model, rng);
  const events = renderEvents(reqs, REFERENCE_TIME * 1000);
  const rotated = events.filter((e) => e.stageUs < ROTATION_TIME * 1000);
  const current = events.filter((e) => e.stageUs >= ROTATION_TIME * 1000);

  // ---- malformed lines in the current log: one event cut short, one line that is not JSON at all.
  const currentLines = current.map((e) => e.line);
  const truncIdx = current.findIndex(
    (e) => e.stage === 'RequestReceived' && e.req.signal?.kind === 'stale' && e.req.signal.story === 'multus' && e.req.signal.token.pod.node.label === 'C',
  );
  const truncated = current[truncIdx];
  if (!truncated) throw new Error('no event to truncate');
  const cut = truncated.line.indexOf('"subject: ') + 25;
  currentLines[truncIdx] = truncated.line.slice(0, cut);
  const first401 = current.findIndex((e) => e.req.signal?.kind === 'unauthorized');
  const at401 = current[first401];
  if (!at401) throw new Error('no 401 event');
  const klogTime = microTime(at401.stageUs + 210);
  const garbage = `E${klogTime.slice(5, 7)}${klogTime.slice(8, 10)} ${klogTime.slice(11, 26)}      11 authentication.go:73] "Unable to authenticate the request" err="[invalid bearer token, service account token has expired]"`;
  currentLines.splice(first401 + 1, 0, garbage);
  const currentText = currentLines.join('\n') + '\n';
  const rotatedText = rotated.map((e) => e.line).join('\n') + '\n';
  const malformedLines: ExpectedExamples['malformedLines'] = [
    { file: `examples/${EXAMPLE_FILES.currentLog}`, line: truncIdx + 1 + (truncIdx > first401 ? 1 : 0), kind: 'truncated', hasTokenTerm: true },
    { file: `examples/${EXAMPLE_FILES.currentLog}`, line: first401 + 2, kind: 'garbage', hasTokenTerm: TOKEN_TERMS.some((t) => garbage.includes(t)) },
  ].sort((a, b) => a.line - b.line) as ExpectedExamples['malformedLines'];
  const currentParsed = current.filter((_, i) => i !== truncIdx);

  // ---- CloudWatch: the Multus stale-token events since the rotation; Insights: every stale event of the last 12 h.
  const multusStale = events.filter(
    (e) => e.req.signal?.kind === 'stale' && e.req.signal.story === 'multus' && e.stageUs >= ROTATION_TIME * 1000,
  );
  const insights = events.filter((e) => e.req.signal?.kind === 'stale' && e.stageUs >= (REFERENCE_TIME - INSIGHTS_WINDOW) * 1000);

  const files = new Map<string, Buffer>();
  files.set(EXAMPLE_FILES.currentLog, Buffer.from(currentText));
  files.set(EXAMPLE_FILES.rotatedLog, gzipSync(Buffer.from(rotatedText), { level: 9 }));
  files.set(EXAMPLE_FILES.snapshot, Buffer.from(snapshotJson(model, rng)));
  files.set(EXAMPLE_FILES.cloudwatch, Buffer.from(filterLogEventsJson(multusStale, rng)));
  files.set(EXAMPLE_FILES.insightsCsv, Buffer.from(insightsCsv(insights)));
  files.set(EXAMPLE_FILES.insightsJson, Buffer.from(insightsJson(insights)));

  const p = (f: string): string => `examples/${f}`;
  const sets: InputSet[] = [
    {
      name: 'audit-all',
      description: 'Both audit log files together (what `npm run demo` scans)',
      files: [p(EXAMPLE_FILES.rotatedLog), p(EXAMPLE_FILES.currentLog)],
      lines: rotated.length + currentLines.length,
      events: [...rotated, ...currentParsed],
      malformed: 2,
      malformedWithTokenTerm: malformedLines.filter((m) => m.hasTokenTerm).length,
    },
    {
      name: 'audit-current',
      description: 'The current audit log file alone',
      files: [p(EXAMPLE_FILES.currentLog)],
      lines: currentLines.length,
      events: currentParsed,
      malformed: 2,
      malformedWithTokenTerm: malformedLines.filter((m) => m.hasTokenTerm).length,
    },
    {
      name: 'audit-rotated',
      description: 'The rotated (gzip) audit log file alone',
      files: [p(EXAMPLE_FILES.rotatedLog)],
      lines: rotated.length,
      events: rotated,
      malformed: 0,
      malformedWithTokenTerm: 0,
    },
    {
      name: 'cloudwatch',
      description: '`aws logs filter-log-events` output: the Multus stale-token events since the log rotation (2026-11-19T06:00Z)',
      files: [p(EXAMPLE_FILES.cloudwatch)],
      lines: multusStale.length,
      events: multusStale,
      malformed: 0,
      malformedWithTokenTerm: 0,
    },
    {
      name: 'insights-csv',
      description: 'Logs Insights CSV export: every stale-token event of the last 12 hours (insights/stale-tokens.json holds the same rows)',
      files: [p(EXAMPLE_FILES.insightsCsv)],
      lines: insights.length,
      events: insights,
      malformed: 0,
      malformedWithTokenTerm: 0,
    },
  ];
  const expected: ExpectedExamples = {
    cluster: 'prod-eks',
    referenceTime: new Date(REFERENCE_TIME).toISOString(),
    maxTokenAge: 'eks',
    eksMaxSecondsAfterWarning: 7_776_000,
    severityThresholdDays: { critical: 7, warning: 30 },
    malformedLines,
    inputs: Object.fromEntries(sets.map((s) => [s.name, expectInput(model, s)])),
    tokens: tokenFacts(model, reqs),
    story: storyFacts(model, reqs),
  };
  files.set(EXAMPLE_FILES.expected, Buffer.from(JSON.stringify(expected, null, 2) + '\n'));
  files.set(EXAMPLE_FILES.readme, Buffer.from(renderReadme(expected, model, files, { current: currentLines.length, rotated: rotated.length, events })));
  return { files, expected, rotatedLogText: rotatedText };
}

/** Events of the whole window (for callers that want the ground truth). */
export type { RenderedEvent };

/**
 * Writes every example file under `outDir` (directories created as needed).
 * @returns the paths written, relative to `outDir`.
 */
export async function writeExamples(outDir: string): Promise<string[]> {
  const { files } = generateExamples();
  for (const [rel, bytes] of files) {
    const path = join(outDir, rel);
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, bytes);
  }
  return [...files.keys()];
}

/** The examples directory (where this file lives). */
export const EXAMPLES_DIR = dirname(fileURLToPath(import.meta.url));

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const out = process.argv[2] ?? EXAMPLES_DIR;
  const written = await writeExamples(out);
  for (const f of written) console.log(join(out, f));
}
