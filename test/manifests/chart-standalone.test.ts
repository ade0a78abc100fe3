/**
 * charts/tokenwatch as a chart installed on its own (`helm install oci://…`), rendered by a real helm 3.17
 * (test/manifests/helm.ts): two releases in one namespace select only their own pods; values that render but cannot
 * run are refused by values.schema.json, naming the value; NOTES.txt says what to check next; the `helm test` pod
 * GETs /readyz and is admitted by the chart's NetworkPolicy; Chart.yaml carries Artifact Hub metadata.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { CHART, helmBinary, helmLint, helmNotes, helmTemplate, SITE_VALUES, type ChartValues } from './helm.js';
import type { K8sObject } from './kustomize.js';

const { path: helmPath, skip } = helmBinary();

type Labels = Record<string, string>;
type Obj = K8sObject & Record<string, any>;

/** A `matchLabels` selector matches labels when every pair is among them (all the chart's selectors are matchLabels). */
const matches = (selector: Labels, labels: Labels) => Object.entries(selector).every(([k, v]) => labels[k] === v);

/** Every pod selector of a render, named: Deployment, Service(s), PDB, NetworkPolicies, topology spread, DaemonSet. */
function selectors(objs: Obj[]): [string, Labels][] {
  const out: [string, Labels][] = [];
  for (const o of objs) {
    const id = `${o.kind} ${o.metadata.name}`;
    if (o.kind === 'Deployment' || o.kind === 'DaemonSet' || o.kind === 'PodDisruptionBudget') out.push([id, o.spec.selector.matchLabels]);
    if (o.kind === 'Service') out.push([id, o.spec.selector]);
    if (o.kind === 'NetworkPolicy') out.push([id, o.spec.podSelector.matchLabels]);
    for (const t of o.kind === 'Deployment' ? (o.spec.template.spec.topologySpreadConstraints ?? []) : []) out.push([`${id} topologySpread ${t.topologyKey}`, t.labelSelector.matchLabels]);
  }
  return out;
}

/** The labels of every pod a render creates (workload templates and bare pods such as the `helm test` pod). */
function podLabels(objs: Obj[]): [string, Labels][] {
  return objs.flatMap((o): [string, Labels][] =>
    o.kind === 'Pod' ? [[`Pod ${o.metadata.name}`, o.metadata.labels ?? {}]] : o.spec?.template?.metadata?.labels ? [[`${o.kind} ${o.metadata.name}`, o.spec.template.metadata.labels]] : [],
  );
}

/** helm's error for values, or '' when the render passed. */
function renderError(v: ChartValues): string {
  try {
    helmTemplate(v);
    return '';
  } catch (err) {
    return (err as Error).message;
  }
}

const PG = { url: 'postgres://tokenwatch@db.example.com/tokenwatch', passwordFrom: { file: '/etc/tokenwatch/password' } };
const cluster0 = SITE_VALUES.config.clusters[0]!;

describe.skipIf(!helmPath)(`charts/tokenwatch installed on its own${skip ? ` (skipped: ${skip})` : ''}`, () => {
  it('two releases in one namespace (PostgreSQL store, probe on) select only their own pods', () => {
    const values: ChartValues = { values: { config: { store: { postgres: PG } }, postgres: { existingSecret: 'pg' }, probe: { enabled: true } } };
    const a = helmTemplate(values, 'blue', 'ops') as Obj[];
    const b = helmTemplate(values, 'green', 'ops') as Obj[];
    const sel = selectors(a);
    // Every kind of selector is there, so none escapes the check.
    expect(sel.map(([id]) => id.split(' ')[0])).toEqual(expect.arrayContaining(['Deployment', 'Service', 'PodDisruptionBudget', 'NetworkPolicy', 'DaemonSet']));
    expect(sel.filter(([id]) => id.includes('topologySpread'))).toHaveLength(2);
    for (const [id, s] of sel) {
      expect(s['app.kubernetes.io/instance'], id).toBe('blue');
      // Its own release: some pod matches (the selector is not empty of meaning) …
      expect(podLabels(a).some(([, l]) => matches(s, l)), `${id} selects a pod of its own release`).toBe(true);
      // … the other release: no pod at all.
      for (const [pod, l] of podLabels(b)) expect(matches(s, l), `${id} of blue selects ${pod} of green`).toBe(false);
    }
    // And symmetrically.
    for (const [id, s] of selectors(b)) for (const [pod, l] of podLabels(a)) expect(matches(s, l), `${id} of green selects ${pod} of blue`).toBe(false);
    // A check that can fail: without the instance label the Deployments would select each other's pods.
    const { 'app.kubernetes.io/instance': _drop, ...withoutInstance } = sel.find(([id]) => id.startsWith('Deployment'))![1];
    expect(podLabels(b).some(([, l]) => matches(withoutInstance, l))).toBe(true);
  });

  it.each<[string, ChartValues, RegExp[]]>([
    [
      'a PostgreSQL password file without the Secret that holds it',
      { values: { config: { store: { postgres: PG } } } },
      [/postgres\.existingSecret: String length must be greater than or equal to 1/],
    ],
    [
      'a PostgreSQL password file with an empty Secret name',
      { values: { config: { store: { postgres: PG } }, postgres: { existingSecret: '' } } },
      [/postgres\.existingSecret: String length must be greater than or equal to 1/],
    ],
    ['Slack on without the Slack Secret name', { values: { slack: { existingSecret: '' } } }, [/slack\.existingSecret: String length must be greater than or equal to 1/]],
    [
      "Slack on with values.yaml's placeholder channel",
      { values: { config: { clusters: [{ ...cluster0, slack: { ...cluster0.slack, channel: 'C0123456789' } }] } } },
      [/config\.clusters\.0\.slack\.channel: Must not validate the schema/],
    ],
    [
      "Slack on with values.yaml's placeholder approver group among others",
      { values: { config: { clusters: [cluster0, { ...cluster0, name: 'b', slack: { ...cluster0.slack, approvers: ['U0ALICE0001', 'S0123456789'] } }] } } },
      [/config\.clusters\.1\.slack\.approvers: Must not validate the schema/],
    ],
    [
      "the chart's bare defaults (Slack on, no Secret name, placeholders)",
      { bare: true },
      [/slack\.existingSecret: String length/, /config\.clusters\.0\.slack\.channel: Must not validate/, /config\.clusters\.0\.slack\.approvers: Must not validate/],
    ],
  ])('values.schema.json refuses %s, naming the value (helm template and helm lint)', (_what, v, messages) => {
    const message = renderError(v);
    expect(message).toContain("values don't meet the specifications of the schema(s)");
    for (const m of messages) expect(message).toMatch(m);
    expect(() => helmLint(v)).toThrow(messages[0]!);
  });

  it('the same values run where they can: Slack off needs neither Secret nor real IDs; the password file with its Secret; a password from the environment; an admission-policy-only install', () => {
    const slackOff = helmTemplate({ bare: true, values: { config: { slack: { enabled: false } } } }) as Obj[];
    const d = slackOff.find((o) => o.kind === 'Deployment')!;
    expect(d.spec.template.spec.containers[0].envFrom).toBeUndefined();
    expect(renderError({ values: { config: { store: { postgres: PG } }, postgres: { existingSecret: 'tokenwatch-postgres' } } })).toBe('');
    // An admission-policy-only install in a remote cluster runs no tokenwatch: no Slack Secret or IDs asked for.
    expect(renderError({ bare: true, values: { admissionPolicy: { enabled: true, remoteOnly: true, params: { groups: ['tokenwatch-writer'] } } } })).toBe('');
    expect(renderError({ values: { config: { store: { postgres: { ...PG, passwordFrom: { env: 'PGPASSWORD' } } } }, aws: { existingSecret: 'pg-env' } } })).toBe('');
  });

  it('NOTES.txt: the Secret to check (by mode), rollout and logs, helm test, blind logs, /tokens status per cluster', () => {
    const notes = helmNotes({ values: { config: { clusters: [cluster0, { ...cluster0, name: 'prod-eks' }] }, aws: { existingSecret: 'tw-aws' } } }, 'tw', 'ops');
    expect(notes).toContain('tokenwatch 0.1.0 is installed as release tw in namespace ops.');
    expect(notes).toContain('kubectl -n ops get secret tokenwatch-slack');
    expect(notes).toContain('Keys: SLACK_BOT_TOKEN, and SLACK_APP_TOKEN (Socket Mode).');
    expect(notes).toContain('kubectl -n ops get secret tw-aws');
    expect(notes).toContain('kubectl -n ops rollout status deployment/tw-tokenwatch');
    expect(notes).toContain('kubectl -n ops logs deployment/tw-tokenwatch');
    expect(notes).toContain('helm test tw -n ops');
    expect(notes).toContain('tokenwatch_audit_log_blind');
    expect(notes).toMatch(/\/tokens status my-cluster\n\s+\/tokens status prod-eks\n/);
    expect(notes).not.toContain('<no value>');

    const http = helmNotes({ set: { 'config.slack.mode': 'http' } });
    expect(http).toContain('SLACK_SIGNING_SECRET (HTTP mode)');
    const off = helmNotes({ bare: true, values: { config: { slack: { enabled: false } } } });
    expect(off).toContain('Slack is off (config.slack.enabled: false)');
    expect(off).not.toContain('get secret');
    expect(off).not.toContain('/tokens status');
    expect(off).not.toContain('<no value>');
    const pg = helmNotes({ values: { config: { store: { postgres: PG } }, postgres: { existingSecret: 'tokenwatch-postgres' } } });
    expect(pg).toContain('kubectl -n tokenwatch get secret tokenwatch-postgres');
  });

  it('the helm test pod GETs /readyz of the metrics Service and is the one extra peer the NetworkPolicy admits', () => {
    const objs = helmTemplate({}, 'tw', 'ops') as Obj[];
    const pod = objs.find((o) => o.kind === 'Pod')!;
    expect(pod.metadata.name).toBe('tw-tokenwatch-test-readyz');
    expect(pod.metadata.annotations).toMatchObject({ 'helm.sh/hook': 'test', 'helm.sh/hook-delete-policy': 'before-hook-creation,hook-succeeded' });
    const c = pod.spec.containers[0];
    expect(c.image).toBe('registry.example.com/tokenwatch:0.1.0');
    expect(c.command.slice(0, 2)).toEqual(['node', '-e']);
    expect(c.command[3]).toBe('http://tw-tokenwatch-metrics.ops.svc:8080/readyz');
    expect(pod.spec.restartPolicy).toBe('Never');
    // The Service it calls selects the server pods of this release, on the port the NetworkPolicy opens to the test pod.
    const svc = objs.find((o) => o.kind === 'Service' && o.metadata.name === 'tw-tokenwatch-metrics')!;
    expect(svc.spec.ports[0].port).toBe(8080);
    const np = objs.find((o) => o.kind === 'NetworkPolicy' && o.metadata.name === 'tw-tokenwatch')!;
    const admitting = np.spec.ingress.filter((r: { from: { podSelector?: { matchLabels: Labels } }[] }) =>
      r.from.some((p) => p.podSelector && matches(p.podSelector.matchLabels, pod.metadata.labels ?? {})),
    );
    expect(admitting).toEqual([{ from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'tokenwatch', 'app.kubernetes.io/component': 'test', 'app.kubernetes.io/instance': 'tw' } } }], ports: [{ protocol: 'TCP', port: 8080 }] }]);
    // The test pod is not a server pod: no server selector picks it.
    for (const [id, s] of selectors(objs)) if (!id.startsWith('NetworkPolicy')) expect(matches(s, pod.metadata.labels ?? {}), id).toBe(false);
  });

  it('the helm test script exits 0 on HTTP 200 and 1 on 503 or no answer (run with this Node against a loopback server)', async () => {
    const script = ((helmTemplate() as Obj[]).find((o) => o.kind === 'Pod')!.spec.containers[0].command as string[])[2]!;
    let status = 200;
    const server = createServer((_req, res) => res.writeHead(status, { 'content-type': 'application/json' }).end('{"status":"ready"}'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/readyz`;
    const run = () =>
      new Promise<{ code: number | null; out: string }>((r) => {
        execFile(process.execPath, ['-e', script, url], (err, stdout, stderr) => r({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr }));
      });
    try {
      expect(await run()).toEqual({ code: 0, out: `GET ${url}: HTTP 200 {"status":"ready"}\n` });
      status = 503;
      expect((await run()).code).toBe(1);
    } finally {
      await new Promise((r) => server.close(r));
    }
    const refused = await run();
    expect(refused.code).toBe(1);
    expect(refused.out).toContain(`GET ${url}: `);
  });

  it('Chart.yaml: Artifact Hub metadata (license, changes, images, maintainers); the image annotation names the default image', () => {
    const chart = parseYaml(readFileSync(join(CHART, 'Chart.yaml'), 'utf8')) as { maintainers: unknown[]; annotations: Record<string, string>; appVersion: string };
    expect(chart.maintainers.length).toBeGreaterThan(0);
    expect(chart.annotations['artifacthub.io/license']).toBe('Apache-2.0');
    const changes = parseYaml(chart.annotations['artifacthub.io/changes']!) as { kind: string; description: string }[];
    expect(changes.length).toBeGreaterThan(0);
    for (const c of changes) expect(['added', 'changed', 'deprecated', 'removed', 'fixed', 'security']).toContain(c.kind);
    const images = parseYaml(chart.annotations['artifacthub.io/images']!) as { name: string; image: string }[];
    const values = parseYaml(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as { image: { repository: string } };
    expect(images).toEqual([{ name: 'tokenwatch', image: `${values.image.repository}:${chart.appVersion}` }]);
  });
});

it.skipIf(!skip)(`charts/tokenwatch standalone tests (runs only to report why they were skipped)${skip ? `: ${skip}` : ''}`, () => {
  expect(skip).toBeTruthy();
});
