/**
 * What the sandbox's extra clusters read from a cloud log service have in common (`--gke`: src/sandbox/gke.ts, `--aks`:
 * src/sandbox/aks.ts): each runs its own fake API server beside the EKS cluster, takes the bundle's audit events in
 * its service's own form, and makes live traffic of its own.
 */
import type { Logger } from '../observability/logger.js';
import type { FakeKube, SandboxFakes } from './fakes/index.js';
import type { LiveTrafficOptions } from './replay.js';

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
export const UPSTREAM_SECONDS_AFTER_WARNING = 31_536_000 - 3_607;
