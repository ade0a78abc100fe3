/**
 * Every form of a user-less 401 a real API server writes is read by `scan`, in every input format, and a request
 * logged at `ResponseStarted` and `ResponseComplete` counts once:
 * - upstream's `"message":"Authentication failed, attempted: bearer"` (kubernetes `authn_audit.go`);
 * - `"status":"Failure","reason":"Unauthorized","code":401` and no message (k3s v1.22, k3s-io/k3s#4820);
 * - `"message":"Unauthorized"`;
 * - any of them with `user.username` `system:anonymous` (counted as user-less: the name is no authenticated subject).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { runScan } from '../../src/scan/run.js';
import { UNAUTHORIZED_STATUS, type UnauthorizedForm } from '../sources/events.js';


const dir = mkdtempSync(join(tmpdir(), 'tokenwatch-401-forms-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const SA = 'kube-system:multus';
const IP = '192.168.1.10';
const UA = 'multus/v0.0.0 (linux/amd64) kubernetes/$Format';
const DAY_S = 86_400;

const FORMS = UNAUTHORIZED_STATUS;
type Form = UnauthorizedForm;

function staleEvent(id: string, time: string, secs: number): Record<string, unknown> {
  return {
    kind: 'Event',
    apiVersion: 'audit.k8s.io/v1',
    level: 'Metadata',
    auditID: id,
    stage: 'ResponseComplete',
    requestURI: '/api/v1/namespaces/kube-system/pods',
    verb: 'list',
    user: {
      username: `system:serviceaccount:${SA}`,
      groups: ['system:serviceaccounts', 'system:authenticated'],
      extra: { 'authentication.kubernetes.io/pod-name': ['kube-multus-ds-zwh6w'] },
    },
    sourceIPs: [IP],
    userAgent: UA,
    responseStatus: { metadata: {}, code: 200 },
    requestReceivedTimestamp: time,
    stageTimestamp: time,
    annotations: {
      'authorization.k8s.io/decision': 'allow',
      'authentication.k8s.io/stale-token': `subject: system:serviceaccount:${SA}, seconds after warning threshold: ${secs}`,
    },
  };
}

/** A rejected request's audit event (no annotations: authentication failed before authorization). */
function rejected(id: string, time: string, form: Form, stage: string, user: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    kind: 'Event',
    apiVersion: 'audit.k8s.io/v1',
    level: 'Metadata',
    auditID: id,
    stage,
    requestURI: '/api/v1/namespaces/kube-system/pods',
    verb: 'list',
    user,
    sourceIPs: [IP],
    userAgent: UA,
    responseStatus: FORMS[form],
    requestReceivedTimestamp: time,
    stageTimestamp: time,
  };
}

/** Stale uses of one token (day 89 after warnAfter), then 3 rejected requests, each logged at two stages. */
function events(form: Form, user?: Record<string, unknown>): Record<string, unknown>[] {
  const out = [staleEvent('s1', '2026-11-20T10:00:00.000000Z', 89 * DAY_S), staleEvent('s2', '2026-11-20T11:00:00.000000Z', 89 * DAY_S + 3600)];
  for (const [i, t] of ['2026-11-21T12:00:00.000000Z', '2026-11-21T12:05:00.000000Z', '2026-11-21T12:10:00.000000Z'].entries()) {
    out.push(rejected(`r${i}`, t, form, 'ResponseStarted', user), rejected(`r${i}`, t, form, 'ResponseComplete', user));
  }
  return out;
}

const lines = (es: Record<string, unknown>[]) => es.map((e) => JSON.stringify(e));
const csvCell = (s: string) => `"${s.replace(/"/g, '""')}"`;

/** Every input format `scan` reads raw audit events from, built from the same events. */
const FORMATS: Record<string, (es: Record<string, unknown>[]) => { name: string; data: string | Buffer }> = {
  'audit-jsonl': (es) => ({ name: 'audit.log', data: `${lines(es).join('\n')}\n` }),
  'audit-jsonl gzip': (es) => ({ name: 'audit.log.gz', data: gzipSync(`${lines(es).join('\n')}\n`) }),
  'json array (pretty, jq -s .)': (es) => ({ name: 'events.json', data: JSON.stringify(es, null, 2) }),
  'webhook EventList batches': (es) => ({ name: 'batches.jsonl', data: `${JSON.stringify({ kind: 'EventList', apiVersion: 'audit.k8s.io/v1', metadata: {}, items: es })}\n` }),
  'aws logs filter-log-events': (es) => ({
    name: 'fle.json',
    data: JSON.stringify(
      { events: lines(es).map((m, i) => ({ logStreamName: 'kube-apiserver-audit-0f1e', timestamp: 1_763_700_000_000 + i, message: m, ingestionTime: 1_763_700_000_500, eventId: `e${i}` })) },
      null,
      4,
    ),
  }),
  'CloudWatch export to S3': (es) => ({ name: '000000', data: `${lines(es).map((l, i) => `2026-11-21T12:00:0${i % 10}.000Z ${l}`).join('\n')}\n` }),
  'aws logs tail': (es) => ({ name: 'tail.txt', data: `${lines(es).map((l) => `2026-11-21T12:00:00.000000+00:00 kube-apiserver-audit-0f1e ${l}`).join('\n')}\n` }),
  'Logs Insights CSV (@timestamp, @message)': (es) => ({
    name: 'insights.csv',
    data: `@timestamp,@message\n${lines(es).map((l) => `2026-11-21 12:00:00.000,${csvCell(l)}`).join('\n')}\n`,
  }),
  'Logs Insights JSON (@timestamp, @message)': (es) => ({ name: 'insights.json', data: JSON.stringify(lines(es).map((l) => ({ '@timestamp': '2026-11-21 12:00:00.000', '@message': l })), null, 2) }),
  'AKS Event Hubs records': (es) => ({ name: 'aks.json', data: JSON.stringify({ records: lines(es).map((l) => ({ category: 'kube-audit', operationName: 'Microsoft.ContainerService/managedClusters/diagnosticLogs/Read', properties: { log: l } })) }) }),
  'Loki lines': (es) => ({ name: 'loki.jsonl', data: `${lines(es).map((l) => JSON.stringify({ labels: { job: 'kube-audit' }, line: l })).join('\n')}\n` }),
};

let n = 0;
async function scanOf(format: string, es: Record<string, unknown>[]) {
  const { name, data } = FORMATS[format]!(es);
  const path = join(dir, `${n++}-${name}`);
  writeFileSync(path, data);
  return runScan({ files: [path], cluster: 'test', maxTokenAge: { mode: 'eks' } });
}

describe('scan reads every form of a user-less 401 in every input format, each request once', () => {
  for (const form of Object.keys(FORMS) as Form[]) {
    for (const format of Object.keys(FORMATS)) {
      it(`${form} in ${format}`, async () => {
        const r = await scanOf(format, events(form));
        const f = r.report.findings.find((x) => x.kind === 'unauthorized');
        expect(f, JSON.stringify(r.report.findings.map((x) => [x.kind, x.serviceAccount]))).toBeDefined();
        // Attributed to the stale subject seen from the same address, and 3 requests (not 6: one per auditID).
        expect(`${f!.namespace}:${f!.serviceAccount}`).toBe(SA);
        expect(f!.requests).toBe(3);
        expect(r.report.stats.tokenUses).toBe(5); // 2 stale + 3 rejected
        expect(r.report.stats.duplicates).toBe(3); // the second stage of each rejected request
      });
    }
  }

  it('a 401 whose user is system:anonymous counts as user-less; a 401 naming a ServiceAccount is not an unauthorized use', async () => {
    const anon = await scanOf('audit-jsonl', events('reasonOnly', { username: 'system:anonymous', groups: ['system:unauthenticated'] }));
    expect(anon.report.findings.find((x) => x.kind === 'unauthorized')?.requests).toBe(3);
    const named = await scanOf('audit-jsonl', events('reasonOnly', { username: 'system:serviceaccount:kube-system:other' }));
    expect(named.report.findings.find((x) => x.kind === 'unauthorized')).toBeUndefined();
  });
});
