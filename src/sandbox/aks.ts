/**
 * The sandbox's AKS cluster (`tokenwatch sandbox --aks`): a simulated cluster, `prod-aks`, whose audit events reach
 * tokenwatch the way an AKS cluster's do — as `AKSAudit` rows of a Log Analytics workspace, read through the real
 * `@azure/monitor-query-logs` client from the loopback Logs Query API fake (src/sandbox/fakes/log-analytics.ts) with
 * a workload identity token from the loopback Entra token endpoint (`entra-token.ts`), by the live AKS source
 * (src/sources/log-analytics.ts, `audit.azure`). Both fakes serve HTTPS with a certificate made at start
 * (`fakes/tls.ts`), trusted through `audit.azure.caFile`. Its API server is its own fake, seeded like the EKS one,
 * with its own workload controller and its own live traffic, so a restart there is seen there only.
 *
 * The process environment holds the workload identity the AKS webhook would inject (`AZURE_CLIENT_ID`,
 * `AZURE_TENANT_ID`, `AZURE_FEDERATED_TOKEN_FILE`, `AZURE_AUTHORITY_HOST`) while the sandbox runs, and is restored on
 * stop. The workspace fake holds its rows in memory: a resumed sandbox reads only new traffic there. Rows are visible
 * when added, so the source's 5-minute lag (sandbox time) is all the delay they see.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { SandboxFakes } from './fakes/index.js';
import type { FakeLogRow } from './fakes/log-analytics.js';
import { loopbackCert } from './fakes/tls.js';
import { startCloudCluster, type SandboxCloudCluster, type SandboxCloudClusterOptions } from './cloud-cluster.js';

/** The AKS cluster's name in tokenwatch, its resource id, its workspace and workload identity (made-up ids). */
export const SANDBOX_AKS = {
  cluster: 'prod-aks',
  resourceId: '/subscriptions/00000000-0000-0000-0000-00000000a5e5/resourceGroups/rg-sandbox/providers/Microsoft.ContainerService/managedClusters/prod-aks',
  workspaceId: '5a4d0b0e-0000-4000-8000-00000000a5e5',
  tenantId: '7e4a17c5-0000-4000-8000-00000000a5e5',
  clientId: 'c11e47d0-0000-4000-8000-00000000a5e5',
} as const;

/** The data-directory files of the AKS cluster (removed by `--reset`). */
export const SANDBOX_AKS_FILES = ['kubeconfig-aks', 'aks-ca.pem', 'aks-federated-token'] as const;

/** `AKSAudit` rows of audit event lines (the malformed lines of the bundle are left out, as the workspace would not hold them). */
function rowsOf(fakes: SandboxFakes, lines: readonly string[]): FakeLogRow[] {
  return lines.flatMap((l) => {
    try {
      return [fakes.aksAuditRow(JSON.parse(l) as Record<string, unknown>, SANDBOX_AKS.resourceId)];
    } catch {
      return [];
    }
  });
}

/** Starts the AKS cluster's fakes; `slack` is the `slack` section its config entry gets (the EKS cluster's). */
export async function startSandboxAks(o: SandboxCloudClusterOptions): Promise<SandboxCloudCluster> {
  const tls = loopbackCert();
  const caFile = join(o.dataDir, 'aks-ca.pem');
  const tokenFile = join(o.dataDir, 'aks-federated-token');
  // The projected ServiceAccount token the AKS webhook would mount (not a secret: the Entra fake is on loopback).
  const federated = 'sandbox.federated.serviceaccount-token';
  await writeFile(caFile, tls.cert, 'utf8');
  await writeFile(tokenFile, federated, 'utf8');
  const entra = await o.fakes.startFakeEntraToken({ cert: tls.cert, key: tls.key, tenantId: SANDBOX_AKS.tenantId, clientId: SANDBOX_AKS.clientId, assertion: federated });
  const workspace = await o.fakes.startFakeLogAnalytics({ cert: tls.cert, key: tls.key, acceptToken: (t) => entra.issued(t) });
  return startCloudCluster(o, {
    name: SANDBOX_AKS.cluster,
    kubeconfigFile: 'kubeconfig-aks',
    audit: { azure: { workspaceId: SANDBOX_AKS.workspaceId, resourceId: SANDBOX_AKS.resourceId, endpoint: workspace.endpoint, authorityHost: entra.authorityHost, caFile } },
    // The workload identity webhook's variables, as AKS sets them in the pod.
    env: { AZURE_CLIENT_ID: SANDBOX_AKS.clientId, AZURE_TENANT_ID: SANDBOX_AKS.tenantId, AZURE_FEDERATED_TOKEN_FILE: tokenFile, AZURE_AUTHORITY_HOST: entra.authorityHost },
    ingest: (lines) => workspace.add(SANDBOX_AKS.workspaceId, rowsOf(o.fakes, lines)),
    fakes: [workspace, entra],
  });
}
