/**
 * The loopback fakes the sandbox runs on — the fake Slack Web API (`src/sandbox/fakes/slack.ts`), the fake Kubernetes
 * API server (`src/sandbox/fakes/kubernetes.ts`), the paging targets (`src/sandbox/fakes/pagerduty.ts`), Cloud Logging and
 * the GCE metadata server (`cloud-logging.ts`, `gce-metadata.ts`), the same ones the tests use — gathered behind one small interface so the
 * sandbox (and its tests) can swap them.
 */
import { gkeAuditEntry, startFakeCloudLogging } from './cloud-logging.js';
import { startFakeGceMetadata } from './gce-metadata.js';
import { startFakeEntraToken } from './entra-token.js';
import { startFakeKube } from './kubernetes.js';
import { aksAuditRow, startFakeLogAnalytics } from './log-analytics.js';
import { appHomeOpenedBody, blockActionPayload, sendBlockAction, sendEvent, sendSlashCommand, startFakeSlack } from './slack.js';
import { startFakePagerDuty, startFakeWebhook } from './pagerduty.js';

export type { FakeKube } from './kubernetes.js';
export type { KubeObject, WriteEvent } from './kubernetes/types.js';
export type { ObjectStore } from './kubernetes/object-store.js';
export type { FakeEphemeral, FakeMessage, FakeSlack, SendResult } from './slack.js';

/** What the sandbox uses of the fakes. */
export interface SandboxFakes {
  startFakeSlack: typeof startFakeSlack;
  startFakeKube: typeof startFakeKube;
  sendSlashCommand: typeof sendSlashCommand;
  sendBlockAction: typeof sendBlockAction;
  blockActionPayload: typeof blockActionPayload;
  /** Signed Events API requests (the Home tab's `app_home_opened`). */
  sendEvent: typeof sendEvent;
  appHomeOpenedBody: typeof appHomeOpenedBody;
  /** Paging targets (`slack.paging`): the PagerDuty Events API v2 fake and a generic webhook receiver. */
  startFakePagerDuty: typeof startFakePagerDuty;
  startFakeWebhook: typeof startFakeWebhook;
  /** Cloud Logging `entries:list` (GKE audit logs) and the GCE metadata server its client's credentials come from. */
  startFakeCloudLogging: typeof startFakeCloudLogging;
  startFakeGceMetadata: typeof startFakeGceMetadata;
  gkeAuditEntry: typeof gkeAuditEntry;
  /** The Log Analytics Logs Query API (AKS audit rows) and the Entra token endpoint of workload identity, both HTTPS. */
  startFakeLogAnalytics: typeof startFakeLogAnalytics;
  startFakeEntraToken: typeof startFakeEntraToken;
  aksAuditRow: typeof aksAuditRow;
}

/** The fakes (kept async so a caller can later load them lazily without changing its code). */
export async function loadFakes(): Promise<SandboxFakes> {
  return { startFakeSlack, startFakeKube, sendSlashCommand, sendBlockAction, blockActionPayload, sendEvent, appHomeOpenedBody, startFakePagerDuty, startFakeWebhook, startFakeCloudLogging, startFakeGceMetadata, gkeAuditEntry, startFakeLogAnalytics, startFakeEntraToken, aksAuditRow };
}
