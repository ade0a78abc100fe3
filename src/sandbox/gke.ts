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
import { auditEventToGkeEntry } from './fakes/cloud-logging.js';
import { startCloudCluster, type SandboxCloudCluster, type SandboxCloudClusterOptions } from './cloud-cluster.js';

/** The GKE cluster's name in tokenwatch and in its logs, and its project. */
export const SANDBOX_GKE = { cluster: 'prod-gke', project: 'tokenwatch-sandbox' } as const;

/** Starts the GKE cluster's fakes; `slack` is the `slack` section its config entry gets (the EKS cluster's). */
export async function startSandboxGke(o: SandboxCloudClusterOptions): Promise<SandboxCloudCluster> {
  const metadata = await o.fakes.startFakeGceMetadata({ projectId: SANDBOX_GKE.project });
  const logging = await o.fakes.startFakeCloudLogging({ now: o.clock });
  return startCloudCluster(o, {
    name: SANDBOX_GKE.cluster,
    kubeconfigFile: 'kubeconfig-gke',
    audit: { gcp: { project: SANDBOX_GKE.project, endpoint: logging.url } },
    // Credentials from the metadata fake (Application Default Credentials), not from a key file.
    env: { ...metadata.env, GOOGLE_APPLICATION_CREDENTIALS: undefined },
    ingest: (lines) => {
      logging.add(lines.map((l) => auditEventToGkeEntry(l, { project: SANDBOX_GKE.project, cluster: SANDBOX_GKE.cluster })).filter((e) => e !== undefined));
    },
    fakes: [logging, metadata],
  });
}
