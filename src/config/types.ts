/**
 * The validated, effective configuration of `tokenwatch serve` (defaults filled in).
 *
 * It has the shape of the YAML file (see `config.example.yaml`), with three differences:
 * durations are **milliseconds** (the file says `10m`), `maxTokenAge` is a {@link MaxTokenAge}
 * (the file says `eks`, `upstream` or seconds), and the Slack secrets from the environment
 * (`SLACK_BOT_TOKEN`, `SLACK_APP_TOKEN`, `SLACK_SIGNING_SECRET`) are added under `slack`.
 * Relative paths are kept as written; they are relative to the working directory.
 */
import type { MaxTokenAge } from '../findings/types.js';

/** pino log levels (pino `levels.values` plus `silent`). */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Remediation actions a cluster may offer in Slack. */
export const ACTIONS = ['restart', 'recreate-serviceaccount', 'snooze'] as const;
export type ActionName = (typeof ACTIONS)[number];

/** Whole configuration. */
export interface Config {
  /** SQLite store. */
  store: {
    /** Database file; its directory is created. Default `./data/tokenwatch.db`. */
    path: string;
  };
  /** HTTP listener for `/healthz`, `/readyz` and `/metrics`. */
  http: {
    /** Default `0.0.0.0`. */
    host: string;
    /** 0–65535, default 8080 (0 = any free port). */
    port: number;
  };
  log: {
    /** Default `info`; env `LOG_LEVEL` overrides the file. */
    level: LogLevel;
  };
  /** Slack integration; absent when the file has no `slack` section. */
  slack?: SlackConfig;
  /** Rollout progress and verification after an approved action. */
  remediation: {
    /** How long to follow a rollout before reporting a timeout, ms. Default `10m`. */
    rolloutTimeout: number;
    /**
     * How long a subject must stay free of stale use after a fix before its finding is resolved, ms.
     * Default `2h` (a new bound token only turns stale after about an hour, so less proves nothing).
     */
    settlePeriod: number;
  };
  /** Scheduling of polls. */
  poll: {
    /**
     * Each scheduled poll (and the first one at start) waits a random delay in [0, jitter), ms, so that many clusters
     * or replicas do not hit the CloudWatch quota (5 FilterLogEvents/s per account and region) at the same second.
     * Default `10s`; `0s` turns it off. `/tokens scan` polls at once, without jitter.
     */
    jitter: number;
  };
  /** When a finding counts as current, and when it concludes on its own. */
  findings: {
    /**
     * A finding's signal (a stale use, a 401, a legacy-token use) seen within this window before now is current: its
     * alert says "now" and 401s make the ServiceAccount's findings critical. Older signals are shown with the time they
     * were last seen. Default `1h` (also the findings stage's "still in use" window), ms.
     */
    activeWindow: number;
    /**
     * A finding whose signal has been absent this long, while every poll of its cluster over the whole period
     * succeeded, and that has no live token, is resolved as quiet (its alert is updated in place, buttons removed);
     * it reopens, same alert plus a thread reply, when the signal returns. Default `24h`, ms.
     */
    quietPeriod: number;
  };
  /**
   * How long the store keeps rows, ms; pruned after every successful poll. Poll runs are kept at least as long as
   * `findings.quietPeriod` (quiet resolution needs them), and each cluster's latest poll is always kept.
   */
  retention: {
    /**
     * Token records not seen for this long are deleted, except stale tokens whose rejection date is still ahead (they
     * can be used again and their finding escalates as the date nears). Default `7d`.
     */
    tokenRecords: number;
    /** Poll runs older than this are deleted. Default `7d`. */
    pollRuns: number;
    /** Action-log rows older than this are deleted (the audit trail of approvals and snoozes). Default `90d`. */
    actionLog: number;
  };
  /** Watched clusters, at least one, names unique. */
  clusters: ClusterConfig[];
}

/** Top-level Slack settings plus the secrets read from the environment. */
export interface SlackConfig {
  /** Default false: with false, no Slack connection is made and cluster `slack` sections are ignored. */
  enabled: boolean;
  /** `socket` (default; Socket Mode, no inbound port) or `http` (Events API over HTTP, signed requests). */
  mode: 'socket' | 'http';
  /** Slack Web API base URL, e.g. `https://slack-gov.com/api/` (GovSlack) or a loopback fake in tests. */
  apiUrl?: string;
  /**
   * HTTP mode only: listen address of the receiver (`/slack/events`). Default: `http.host` (itself `0.0.0.0` by
   * default), so one setting keeps both listeners on loopback or on the pod network.
   */
  host: string;
  /** HTTP mode only: port of the receiver (`/slack/events`). Default 3000. */
  port: number;
  approvals: {
    /** An approval request not decided within this time expires, ms. Default `30m`. */
    expiresAfter: number;
  };
  /** `SLACK_BOT_TOKEN` (xoxb-…), required when enabled. Secret. */
  botToken?: string;
  /** `SLACK_APP_TOKEN` (xapp-…, scope connections:write), required in socket mode. Secret. */
  appToken?: string;
  /** `SLACK_SIGNING_SECRET`, required in http mode. Secret. */
  signingSecret?: string;
}

/** CloudWatch Logs audit source (EKS control-plane audit logs). */
export interface CloudWatchAuditConfig {
  /** AWS region, e.g. `us-east-1`; defaults to env `AWS_REGION` / `AWS_DEFAULT_REGION`. */
  region: string;
  /** Default `/aws/eks/<kubernetes.eks.clusterName or name>/cluster` (EKS user guide, control-plane logs). */
  logGroup: string;
  /** Log stream name prefix, default `kube-apiserver-audit-`. */
  streamPrefix: string;
  /**
   * Endpoint override (e.g. a VPC endpoint). When absent the SDK's own resolution applies, including
   * env `AWS_ENDPOINT_URL_CLOUDWATCH_LOGS`.
   */
  endpoint?: string;
  /** `filter` (FilterLogEvents, default) or `insights` (Logs Insights aggregation server-side). */
  mode: 'filter' | 'insights';
  /** Each poll re-reads this much before the cursor, for late delivery, ms. Default `10m`. */
  overlap: number;
}

/** An audit log file followed across rotation. */
export interface FileAuditConfig {
  path: string;
}

/**
 * Where a cluster's audit events come from: exactly one key. `{ none: true }`: no audit log (findings then come
 * only from API-server token metrics and the node probe; issue 13).
 */
export type AuditSourceConfig = { cloudwatch: CloudWatchAuditConfig } | { file: FileAuditConfig } | { none: true };

/**
 * How tokenwatch reaches a cluster's API server: exactly one form. Narrow with `'inCluster' in k`,
 * `'eks' in k`, `'none' in k`; otherwise it is the kubeconfig form.
 * - `{ inCluster: true }`: the pod's ServiceAccount (client-node `loadFromCluster`);
 * - `{ kubeconfig?, context? }`: a kubeconfig file (default `$KUBECONFIG` / `~/.kube/config`) and context;
 * - `{ eks: { clusterName, region } }`: endpoint from EKS DescribeCluster, token from AWS credentials
 *   (as `aws eks get-token` does);
 * - `{ none: true }` (default): no cluster state; findings carry `clusterState: "cluster state unavailable"`-style notes.
 *
 * `secretMetadata: true` (any form but `none`; default off) also lists the metadata of legacy token Secrets, which
 * needs the opt-in `tokenwatch-secret-metadata` RBAC (docs/install.md "Secret metadata").
 */
export type KubernetesAccessConfig =
  | { inCluster: true; secretMetadata?: boolean }
  | { kubeconfig?: string; context?: string; secretMetadata?: boolean }
  | { eks: { clusterName: string; region: string }; secretMetadata?: boolean }
  | { none: true };

/** Per-cluster Slack channel and approval policy. */
export interface ClusterSlackConfig {
  /** Channel id (`C…`, `G…`) or name (`#ops`); ids survive renames. */
  channel: string;
  /** Who may request actions: Slack user ids (`U…`, `W…`), user group ids (`S…`) or `*`. Absent = anyone (`*`). */
  requesters?: string[];
  /** Who may approve: user ids or user group ids. Required (non-empty) when restart/recreate actions are enabled. */
  approvers: string[];
  /** Whether the requester may approve their own request. Default false. */
  allowSelfApproval: boolean;
  /** Namespaces (exact, prefix ending in `*`, or `*`) whose actions need {@link protectedApprovals} approvals. */
  protectedNamespaces?: string[];
  /** Distinct approvals needed in protected namespaces, 1–10. Default 2. */
  protectedApprovals: number;
  /** Actions offered, default all: `restart`, `recreate-serviceaccount`, `snooze`. */
  actions: ActionName[];
  /** Namespaces actions may touch (patterns as above): `deny` wins over `allow`; no `allow` = all namespaces. */
  namespaces?: { allow?: string[]; deny?: string[] };
}

/** One watched cluster. */
export interface ClusterConfig {
  /** DNS-1123 label (lowercase letters, digits, `-`, ≤ 63 chars), unique; shown in every message and command. */
  name: string;
  audit: AuditSourceConfig;
  kubernetes: KubernetesAccessConfig;
  /** Default `{ mode: 'eks' }` (90 days after warnAfter). */
  maxTokenAge: MaxTokenAge;
  /** 5- or 6-field cron expression (node-cron 4 syntax), default `*\/5 * * * *`. */
  schedule: string;
  /** How far back the first poll (no cursor yet) reads, ms. Default `24h`. */
  lookback: number;
  slack?: ClusterSlackConfig;
  thresholds: {
    /** Severity `critical` when rejection is less than this many days away. Default 7. */
    criticalDays: number;
    /** Severity `warning` when rejection is less than this many days away. Default 30. */
    warningDays: number;
  };
}
