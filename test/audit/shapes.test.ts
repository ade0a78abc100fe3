/**
 * Every audit input shape a user actually holds (webhook batches, jq output, GKE, AKS, Loki, `aws logs tail`,
 * standard input) reaches the same findings as the plain JSON-lines form of the same events. The fixtures and the
 * sources of their layouts are in test/fixtures/audit/shapes/README.md.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectFormat } from '../../src/audit/formats.js';
import { createReadStats, readTokenUses } from '../../src/sources/reader.js';
import type { InputFormat, TokenUse } from '../../src/audit/types.js';
import { InputError } from '../../src/errors.js';
import { planParallelRead, readParallel } from '../../src/scan/parallel.js';
import { runScan, type ScanResult } from '../../src/scan/run.js';
import { runCli } from '../cli/run-cli.js';

const FIX = path.join(path.dirname(new URL(import.meta.url).pathname), '../fixtures/audit/shapes');
const NOW = Date.parse('2026-11-20T00:00:00Z');
const fix = (name: string): string => path.join(FIX, name);

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'tw-shapes-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

function scan(files: string[], jobs = 1): Promise<ScanResult> {
  return runScan({ files, cluster: 'prod', maxTokenAge: { mode: 'eks' }, now: NOW, jobs });
}

/** Shapes that carry the whole audit event, with the format each is detected as. */
const WHOLE: Array<[string, InputFormat]> = [
  ['webhook-batches.jsonl', 'wrapped-jsonl'],
  ['webhook-batch.json', 'json-documents'],
  ['pretty.json', 'json-documents'],
  ['array.json', 'json-documents'],
  ['concatenated.json', 'json-documents'],
  ['aws-logs-tail.txt', 'aws-logs-tail'],
  ['loki.jsonl', 'wrapped-jsonl'],
  ['aks-storage.json', 'wrapped-jsonl'],
  ['aks-event-hubs.json', 'wrapped-jsonl'],
  ['aks-log-analytics.json', 'json-documents'],
  ['aks-azure-diagnostics.json', 'json-documents'],
];

describe('input shapes', () => {
  it.each(WHOLE)('%s is detected as %s and gives the findings of the same events as JSON lines', async (name, format) => {
    expect(detectFormat(await readFile(fix(name)))).toBe(format);
    const plain = await scan([fix('events.jsonl')]);
    const shaped = await scan([fix(name)]);
    // The events: a stale report-bot token (pod claims), a legacy ci/deployer token, a 401 from report-bot's IP.
    expect(plain.report.findings.map((f) => [f.kind, f.namespace, f.serviceAccount]).sort()).toEqual([
      ['legacy-token', 'ci', 'deployer'],
      ['stale-token', 'default', 'report-bot'],
      ['unauthorized', 'default', 'report-bot'],
    ]);
    expect(shaped.report.findings).toEqual(plain.report.findings);
    expect(shaped.report.stats.tokenUses).toBe(3);
    expect(shaped.report.stats.malformed).toBe(0);
    expect(shaped.notices).toEqual([]);
  });

  it('reads the shapes gzipped, and dedupes one request across shapes by auditID', async () => {
    const gz = path.join(tmp, 'batches.gz');
    await writeFile(gz, gzipSync(await readFile(fix('webhook-batches.jsonl'))));
    const r = await scan([fix('events.jsonl'), gz, fix('aks-storage.json'), fix('loki.jsonl')]);
    expect(r.report.stats.tokenUses).toBe(3);
    expect(r.report.stats.duplicates).toBe(9);
    expect(r.report.findings).toEqual((await scan([fix('events.jsonl')])).report.findings);
  });

  it('reads GKE Cloud Audit Logs (gcloud array and Cloud Storage lines) on the fields they carry', async () => {
    for (const name of ['gke-gcloud.json', 'gke-storage.json']) {
      expect(detectFormat(await readFile(fix(name)))).toBe(name === 'gke-gcloud.json' ? 'json-documents' : 'wrapped-jsonl');
      const r = await scan([fix(name)]);
      const stale = r.report.findings.find((f) => f.kind === 'stale-token');
      const legacy = r.report.findings.find((f) => f.kind === 'legacy-token');
      expect(r.report.findings).toHaveLength(2); // GKE logs no entry for the 401
      expect(stale).toMatchObject({
        namespace: 'default',
        serviceAccount: 'report-bot',
        requests: 1,
        maxSecondsAfterWarning: 86400,
        firstSeen: '2026-11-19T10:00:01.000Z',
        userAgents: ['report-bot/1.4.0 (linux/amd64) kubernetes/$Format'],
        sourceIPs: ['10.0.3.44'],
        pods: [],
      });
      expect(legacy).toMatchObject({ namespace: 'ci', serviceAccount: 'deployer', sourceIPs: ['10.0.5.9'] });
      // The finding says what GKE does not carry, as the guide-query rows do.
      expect(stale?.cause.evidence.some((e) => e.includes('GKE') && e.includes('pod claims'))).toBe(true);
      expect(r.notices.map((n) => n.code)).toEqual(['gke-fields']);
    }
    // GKE sets the Kubernetes auditID as operation.id: the same requests from a JSON-lines file count once.
    const both = await scan([fix('events.jsonl'), fix('gke-storage.json')]);
    expect(both.report.stats.duplicates).toBe(2);
  });

  it('dedupes GKE entries without an operation id by their own insertId', async () => {
    const entry = JSON.parse((await readFile(fix('gke-storage.json'), 'utf8')).split('\n')[1]!) as Record<string, unknown>;
    delete entry.operation;
    const f = path.join(tmp, 'gke-no-op.json');
    await writeFile(f, `${JSON.stringify(entry)}\n${JSON.stringify(entry)}\n${JSON.stringify({ ...entry, insertId: 'other@a1' })}\n`);
    const r = await scan([f]);
    expect(r.report.stats.tokenUses).toBe(2);
    expect(r.report.stats.duplicates).toBe(1);
  });

  it('a file of no known shape is exit-2 material naming its first record’s keys and the command that unwraps it', async () => {
    const err = await scan([fix('fluent-bit.jsonl')]).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(InputError);
    const msg = (err as InputError).message;
    expect(msg).toContain('fluent-bit.jsonl');
    expect(msg).toContain('keys date, log, stream');
    expect(msg).toContain("jq -c '.log | fromjson' FILE");
    expect(msg).not.toContain('report-bot'); // keys, never values
  });

  it('pretty-printed JSON of no known shape names its keys too', async () => {
    const f = path.join(tmp, 'pretty-other.json');
    await writeFile(f, JSON.stringify({ hits: { total: 1 }, took: 3 }, null, 2));
    await expect(scan([f])).rejects.toThrow(/pretty-printed JSON: an object with keys hits, took/);
  });

  it('a Kubernetes object list (kubectl get -o json, compact or pretty and longer than the 64 KiB head) is named, with the flags that take one', async () => {
    // The repository's cluster snapshot: pretty-printed, kubectl's key order (apiVersion, items, …, kind last), ~90 KB.
    const big = await scan(['examples/cluster-snapshot.json']).then(() => undefined, (e: unknown) => e);
    expect(big).toBeInstanceOf(InputError);
    expect((big as InputError).message).toContain('its first record is pretty-printed JSON longer than 64 KiB');
    expect((big as InputError).message).toContain('a cluster snapshot goes to `--cluster-snapshot`, probe-report ConfigMaps to `--probe-report`');
    const f = path.join(tmp, 'pods.json');
    await writeFile(f, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [{ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' } }] }));
    await expect(scan([f])).rejects.toThrow(/keys apiVersion, kind, items\); it looks like a Kubernetes object list \(`kubectl get … -o json`\), not an audit log/);
  });

  it('warns with the count when most records of a file are not audit events', async () => {
    const lines = (await readFile(fix('events.jsonl'), 'utf8')).trim().split('\n');
    const f = path.join(tmp, 'mostly-noise.jsonl');
    await writeFile(f, [lines[1], 'I1119 10:00:00 noise', 'not json', '{"cut short', lines[0]].join('\n'));
    const r = await scan([f]);
    expect(r.report.stats).toMatchObject({ lines: 5, events: 2, malformed: 3, tokenUses: 1 });
    expect(r.notices).toHaveLength(1);
    expect(r.notices[0]).toMatchObject({ code: 'mostly-not-events' });
    expect(r.notices[0]!.message).toContain('only 2 of its 5 records are audit events; 3 were skipped');
  });

  it('says when an export is blind to reads: AKS kube-audit-admin only, GKE Admin Activity only', async () => {
    const aks = await scan([fix('aks-admin-only.json')]);
    expect(aks.notices.filter((n) => n.code === 'blind-log').map((n) => n.message)).toEqual([
      expect.stringContaining('only the AKS kube-audit-admin category is exported'),
    ]);
    const gke = await scan([fix('gke-admin-activity-only.json')]);
    expect(gke.notices.filter((n) => n.code === 'blind-log').map((n) => n.message)).toEqual([
      expect.stringContaining('no Data Access entries'),
    ]);
    // With kube-audit (all verbs) or Data Access entries, no such warning.
    expect((await scan([fix('aks-storage.json'), fix('gke-storage.json')])).notices.map((n) => n.code)).toEqual(['gke-fields']);
  });

  it('the parallel reader gives the same token uses and stats as the serial one over all shapes', async () => {
    const files = [...WHOLE.map(([n]) => fix(n)), fix('gke-gcloud.json'), fix('events.jsonl')];
    const serialStats = createReadStats();
    const serial: TokenUse[] = [];
    for await (const u of readTokenUses(files, serialStats)) serial.push(u);
    const plan = await planParallelRead(files, { jobs: 4, minBytes: 0, partBytes: 1024, maxHitsPerMiB: Number.POSITIVE_INFINITY }); // dense fixtures: forced onto workers
    expect(plan).toBeDefined();
    const stats = createReadStats();
    const uses: TokenUse[] = [];
    for await (const u of readParallel(plan!, stats, {}).uses) uses.push(u);
    expect(uses).toEqual(serial);
    expect(stats).toEqual(serialStats);
  });
});

describe('--audit-log - (standard input)', () => {
  const args = ['scan', '--format', 'json', '--now', '2026-11-20T00:00:00Z', '--cluster', 'prod'];

  it('reads any shape from a pipe, plain or gzip, as it reads the file', async () => {
    const fromFile = await runCli([...args, '--audit-log', fix('events.jsonl')], {}, { input: Buffer.alloc(0) });
    expect(fromFile.stderr).toBe('');
    const expected = JSON.parse(fromFile.stdout) as { findings: unknown };
    for (const input of [await readFile(fix('pretty.json')), gzipSync(await readFile(fix('loki.jsonl')))]) {
      const r = await runCli([...args, '--audit-log', '-'], {}, { input });
      expect(r.stderr).toBe('');
      expect((JSON.parse(r.stdout) as { findings: unknown }).findings).toEqual(expected.findings);
    }
  });

  it('refuses standard input twice', async () => {
    const r = await runCli([...args, '--audit-log', '-', '-'], {}, { input: Buffer.alloc(0) });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('standard input can be read only once');
  });
});
