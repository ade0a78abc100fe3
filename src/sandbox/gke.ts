/**
 * The sandbox's GKE cluster (`tokenwatch sandbox --gke`): a second simulated cluster, `prod-gke`, whose audit events
 * reach tokenwatch the way a GKE cluster's do — as Cloud Audit Logs entries read from the loopback Cloud Logging
 * `entries:list` (src/sandbox/fakes/cloud-logging.ts) with Application Default Credentials from the loopback GCE
 * metadata server (`gce-metadata.ts`), through the real `google-auth-library` and the live GKE source
 * (src/sources/cloud-logging.ts). Its API server is its own fake, seeded like the EKS one, with its own workload
 * controller and its own live traffic, so a restart there is seen there only.
 *
 * The process environment points `google-auth-library` at the metadata fake while the sandbox runs
 * (`GCE_METADATA_HOST`, `METADATA_SERVER_DETECTION=assume-present`; `GOOGLE_APPLICATION_CREDENTIALS` unset) and is
 * restored on stop. The Cloud Logging fake holds its entries in memory: a resumed sandbox reads only new traffic.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { clusterView, kubeconfigYaml } from './cluster.js';
import { WorkloadController } from './controller.js';
import { auditEventToGkeEntry } from './fakes/cloud-logging.js';
import { LiveTraffic } from './replay.js';
import { UPSTREAM_SECONDS_AFTER_WARNING, type SandboxCloudCluster, type SandboxCloudClusterOptions } from './cloud-cluster.js';

/** The GKE cluster's name in tokenwatch and in its logs, and its project. */
export const SANDBOX_GKE = { cluster: 'prod-gke', project: 'tokenwatch-sandbox' } as const;

const ENV_KEYS = ['GCE_METADATA_HOST', 'METADATA_SERVER_DETECTION', 'GOOGLE_APPLICATION_CREDENTIALS'] as const;

/** Starts the GKE cluster's fakes; `slack` is the `slack` section its config entry gets (the EKS cluster's). */
export async function startSandboxGke(o: SandboxCloudClusterOptions): Promise<SandboxCloudCluster> {
  const metadata = await o.fakes.startFakeGceMetadata({ projectId: SANDBOX_GKE.project });
  const logging = await o.fakes.startFakeCloudLogging({ now: o.clock });
  const kube = await o.fakes.startFakeKube({ objects: o.objects });
  const saved = Object.fromEntries(ENV_KEYS.map((k) => [k, process.env[k]]));
  Object.assign(process.env, metadata.env);
  delete process.env['GOOGLE_APPLICATION_CREDENTIALS'];
  const kubeconfig = join(o.dataDir, 'kubeconfig-gke');
  await writeFile(kubeconfig, kubeconfigYaml(kube.url, SANDBOX_GKE.cluster), 'utf8');
  const controller = new WorkloadController({ store: kube.store, clock: o.clock, stepMs: o.stepMs, onError: (err, w) => o.logger.error({ err, workload: w }, 'sandbox controller (prod-gke): rollout stopped') });
  controller.start();
  // GKE keeps the upstream token lifetime: rejected one year after issue, not 90 days after warnafter as on EKS.
  const live = new LiveTraffic({ templates: o.templates, cluster: clusterView(kube.store), staticTokenSubjects: o.staticTokenSubjects, maxSecondsAfterWarning: UPSTREAM_SECONDS_AFTER_WARNING });
  const ingest = (lines: readonly string[]): void => {
    logging.add(lines.map((l) => auditEventToGkeEntry(l, { project: SANDBOX_GKE.project, cluster: SANDBOX_GKE.cluster })).filter((e) => e !== undefined));
  };
  return {
    kube,
    kubeconfig,
    clusterConfig: {
      name: SANDBOX_GKE.cluster,
      audit: { gcp: { project: SANDBOX_GKE.project, endpoint: logging.url } },
      kubernetes: { kubeconfig },
      maxTokenAge: 'upstream',
      schedule: o.schedule,
      lookback: '72h',
      slack: o.slack,
    },
    ingest,
    tick: (now) => ingest(live.tick(now).lines),
    async stop() {
      controller.stop();
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
      await Promise.all([kube.close(), logging.close(), metadata.close()]);
    },
  };
}
