/**
 * The loopback fakes the sandbox runs on — the fake Slack Web API (`src/sandbox/fakes/slack.ts`) and the fake Kubernetes
 * API server (`src/sandbox/fakes/kubernetes.ts`), the same ones the tests use — gathered behind one small interface so the
 * sandbox (and its tests) can swap them.
 */
import { startFakeEntraToken } from './entra-token.js';
import { startFakeKube } from './kubernetes.js';
import { aksAuditRow, startFakeLogAnalytics } from './log-analytics.js';
import { appHomeOpenedBody, blockActionPayload, sendBlockAction, sendEvent, sendSlashCommand, startFakeSlack } from './slack.js';

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
  /** The Log Analytics Logs Query API (AKS audit rows) and the Entra token endpoint of workload identity, both HTTPS. */
  startFakeLogAnalytics: typeof startFakeLogAnalytics;
  startFakeEntraToken: typeof startFakeEntraToken;
  aksAuditRow: typeof aksAuditRow;
}

/** The fakes (kept async so a caller can later load them lazily without changing its code). */
export async function loadFakes(): Promise<SandboxFakes> {
  return { startFakeSlack, startFakeKube, sendSlashCommand, sendBlockAction, blockActionPayload, sendEvent, appHomeOpenedBody, startFakeLogAnalytics, startFakeEntraToken, aksAuditRow };
}
