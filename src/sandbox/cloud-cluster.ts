/**
 * What the sandbox's extra clusters read from a cloud log service have in common (`--gke`: src/sandbox/gke.ts, `--aks`:
 * src/sandbox/aks.ts): each runs its own fake API server beside the EKS cluster, takes the bundle's audit events in
 * its service's own form, and makes live traffic of its own.
 */
import type { Logger } from '../observability/logger.js';
import type { FakeKube, SandboxFakes } from './fakes/index.js';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { clusterView, kubeconfigYaml } from './cluster.js';
import { WorkloadController } from './controller.js';
import { LiveTraffic, type LiveTrafficOptions } from './replay.js';

/** A running sandbox cluster whose audit events a cloud log service holds. */
export interface SandboxCloudCluster {
  kube: FakeKube;
  /** Its kubeconfig file. */
  kubeconfig: string;
  /** The `clusters[]` entry of the config (audit from the cloud log service, the fake API server). */
  clusterConfig: Record<string, unknown>;
  /** Feeds audit event lines to the log service, in its form. */
  ingest(lines: readonly string[]): void;
  /** One round of its own live traffic at `now` (sandbox ms). */
  tick(now: number): void;
  stop(): Promise<void>;
}

/** What starting one takes; `slack` is the `slack` section its config entry gets (the EKS cluster's). */
export interface SandboxCloudClusterOptions {
  fakes: SandboxFakes;
  dataDir: string;
  objects: Record<string, unknown>[];
  clock: () => number;
  stepMs: number;
  templates: LiveTrafficOptions['templates'];
  staticTokenSubjects: Set<string>;
  schedule: string;
  slack: Record<string, unknown>;
  logger: Logger;
}

/**
 * Upstream's rejection point in seconds after `warnafter`: one year after issue, issue = warnafter − 3,607 s
 * (docs: domain facts §1). GKE and AKS keep the upstream lifetime, not EKS's 90 days after `warnafter`.
 */
const UPSTREAM_SECONDS_AFTER_WARNING = 31_536_000 - 3_607;

/** What one cloud cluster brings to {@link startCloudCluster}: its name, log source, environment and fakes. */
export interface CloudClusterParts {
  /** The cluster's name in tokenwatch (and in its controller's log lines). */
  name: string;
  /** The kubeconfig file's name in the data directory. */
  kubeconfigFile: string;
  /** The `audit` section of its config entry (the live source that reads its log service's fake). */
  audit: Record<string, unknown>;
  /** Environment variables set while it runs (`undefined`: unset); each is restored on stop. */
  env: Record<string, string | undefined>;
  /** Feeds audit event lines to its log service's fake, in that service's form. */
  ingest(lines: readonly string[]): void;
  /** Its log service's fakes, closed on stop. */
  fakes: ReadonlyArray<{ close(): Promise<void> }>;
}

/**
 * Starts what every cloud cluster has once its log service's fakes run: the environment set, its own fake API server
 * (seeded with `o.objects`) and kubeconfig, rollouts, and live traffic with the upstream token lifetime. `stop()` stops
 * the rollouts, restores the environment and closes the API server and `parts.fakes`.
 * @throws when the kubeconfig cannot be written or the API server cannot listen
 */
export async function startCloudCluster(o: SandboxCloudClusterOptions, parts: CloudClusterParts): Promise<SandboxCloudCluster> {
  const saved = Object.fromEntries(Object.keys(parts.env).map((k) => [k, process.env[k]]));
  const setEnv = (env: Record<string, string | undefined>) => {
    for (const [k, v] of Object.entries(env)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
  setEnv(parts.env);
  const kube = await o.fakes.startFakeKube({ objects: o.objects });
  const kubeconfig = join(o.dataDir, parts.kubeconfigFile);
  await writeFile(kubeconfig, kubeconfigYaml(kube.url, parts.name), 'utf8');
  const controller = new WorkloadController({ store: kube.store, clock: o.clock, stepMs: o.stepMs, onError: (err, w) => o.logger.error({ err, workload: w }, `sandbox controller (${parts.name}): rollout stopped`) });
  controller.start();
  const live = new LiveTraffic({ templates: o.templates, cluster: clusterView(kube.store), staticTokenSubjects: o.staticTokenSubjects, maxSecondsAfterWarning: UPSTREAM_SECONDS_AFTER_WARNING });
  return {
    kube,
    kubeconfig,
    clusterConfig: { name: parts.name, audit: parts.audit, kubernetes: { kubeconfig }, maxTokenAge: 'upstream', schedule: o.schedule, lookback: '72h', slack: o.slack },
    ingest: parts.ingest,
    tick: (now) => parts.ingest(live.tick(now).lines),
    async stop() {
      controller.stop();
      setEnv(saved);
      await Promise.all([kube.close(), ...parts.fakes.map((f) => f.close())]);
    },
  };
}
