/**
 * zod 4 schema of the `tokenwatch serve` configuration file, plus the cross-field rules and the
 * environment (secrets) checks. Every problem becomes a {@link ConfigIssue}; {@link parseConfig}
 * reports all of them at once in one {@link ConfigError}.
 *
 * Why two passes: zod skips refinements of an object when its fields already failed, so rules that
 * span fields (unique names, "exactly one of", Slack secrets per mode) are checked on the raw input by
 * {@link crossFieldIssues}, which always runs. Both lists are merged.
 */
import { ErrorCode, TokenwatchError } from '../errors.js';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import picomatch from 'picomatch';
import { validateDetailed } from 'node-cron';
import { MAX_TOKEN_AGE_EXPECTED, parseMaxTokenAge, type MaxTokenAge } from './max-token-age.js';
import { ACTION_KINDS, CLUSTER_ACTION_KINDS, APPROVAL_DEFAULTS } from '../core/actions.js';
import { DAY_MS, HOUR_MS, MINUTE_MS, SECOND_MS } from '../core/units.js';
import { isAddressOrCidr } from '../core/source-address.js';
import { DurationError, parseDuration } from './duration.js';
import { DNS1123_LABEL, DNS1123_LABEL_WORDS, NAMESPACE_PATTERN, NAMESPACE_PATTERN_WORDS } from '../core/names.js';

/** pino log levels (pino `levels.values` plus `silent`). */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;

/** One configuration problem: where (path into the file, or `env.NAME`) and what. */
export interface ConfigIssue {
  path: (string | number)[];
  message: string;
  /** 1-based line in the YAML file, when known. */
  line?: number;
}

/**
 * Thrown for an unusable configuration. `message` lists every problem (zod `prettifyError` format:
 * `✖ message` / `  → at path`), `issues` has them structured. Callers exit with {@link exitCode} (2).
 */
export class ConfigError extends TokenwatchError {
  declare readonly exitCode: number;
  constructor(
    readonly issues: ConfigIssue[],
    /** The config file, when the problem is about one. */
    readonly file?: string,
  ) {
    super(ErrorCode.ConfigInvalid, formatIssues(issues, file), { exitCode: 2 });
    this.name = 'ConfigError';
  }
}

function formatIssues(issues: ConfigIssue[], file?: string): string {
  const zodIssues: z.core.$ZodIssue[] = issues.map((i) => ({
    code: 'custom',
    path: i.path,
    message: i.line === undefined ? i.message : `${i.message} (line ${i.line})`,
    input: undefined,
  }));
  const head = `invalid configuration${file === undefined ? '' : ` in ${file}`} (${issues.length} problem${issues.length === 1 ? '' : 's'}):`;
  return `${head}\n${z.prettifyError(new z.ZodError(zodIssues))}`;
}

// ---------------------------------------------------------------------------------------------
// Field schemas

const AWS_REGION = /^[a-z]{2}(-[a-z]+)+-\d+$/;
/** Slack user ids start with U (W on Enterprise Grid), user group ids with S (api.slack.com/types/user, /usergroup). */
const SLACK_PRINCIPAL = /^[UWS][A-Z0-9]{2,}$/;
/** Channel id (C public, G private/legacy) or `#name` (lowercase, ≤ 80 chars, Slack channel naming rules). */
const SLACK_CHANNEL = /^([CG][A-Z0-9]{2,}|#[a-z0-9][a-z0-9._-]{0,79})$/;

const durationMessage = 'expected a duration string such as "10m", "24h" or "7d" (units ms, s, m, h, d, w)';

/** A duration string (`10m`) parsed to milliseconds; `min` in ms. */
function duration(min = 0) {
  return z.string({ error: durationMessage }).transform((text, ctx) => {
    try {
      const ms = parseDuration(text);
      if (ms < min) {
        ctx.addIssue({ code: 'custom', message: `must be at least ${min / 1000}s, got "${text}"`, input: text });
        return z.NEVER;
      }
      return ms;
    } catch (err) {
      if (!(err instanceof DurationError)) throw err;
      ctx.addIssue({ code: 'custom', message: durationMessage, input: text });
      return z.NEVER;
    }
  });
}

/** `eks` | `upstream` | integer seconds (number or digits) | duration string → {@link MaxTokenAge} (`parseMaxTokenAge`, the CLI's grammar too). */
const maxTokenAge = z.union([z.string(), z.number()], { error: MAX_TOKEN_AGE_EXPECTED }).transform((v, ctx): MaxTokenAge => {
  try {
    return parseMaxTokenAge(v);
  } catch (err) {
    if (!(err instanceof TokenwatchError)) throw err;
    ctx.addIssue({ code: 'custom', message: MAX_TOKEN_AGE_EXPECTED, input: v });
    return z.NEVER;
  }
});

/** node-cron 4 says "61 is a invalid expression for minute"; shown as "61 is not a valid minute value". */
function cronWords(message: string): string {
  return message.replace(/^(.*) is a invalid expression for (.*)$/, '$1 is not a valid $2 value');
}

/** Cron expression checked with node-cron 4 `validateDetailed` (the scheduler's own parser). */
const schedule = z.string().superRefine((expr, ctx) => {
  const result = validateDetailed(expr);
  if (!result.valid) {
    const why = result.errors.map((e) => cronWords(e.message)).join('; ');
    ctx.addIssue({ code: 'custom', message: `invalid cron expression "${expr}"${why ? `: ${why}` : ''}`, input: expr });
  }
});

const httpUrl = z.url({ protocol: /^https?$/, error: 'expected an http:// or https:// URL' });

/** A namespace, a prefix ending in `*`, or `*` (the approval policy's patterns, src/approvals/policy.ts). */
const namespacePattern = z.string().regex(NAMESPACE_PATTERN, `expected ${NAMESPACE_PATTERN_WORDS}`);
const slackPrincipal = z
  .string()
  .regex(SLACK_PRINCIPAL, 'expected a Slack user id (U…, W…) or user group id (S…)');

const port = z.int().min(0).max(65535);

const cloudWatchSchema = z.strictObject({
  /** AWS region, e.g. `us-east-1`; defaults to env `AWS_REGION` / `AWS_DEFAULT_REGION`. */
  region: z.string().regex(AWS_REGION, 'expected an AWS region such as us-east-1').optional(),
  /** Default `/aws/eks/<kubernetes.eks.clusterName or name>/cluster` (EKS user guide, control-plane logs). */
  logGroup: z.string().min(1).max(512).optional(),
  /** Log stream name prefix, default `kube-apiserver-audit-`. */
  streamPrefix: z.string().min(1).default('kube-apiserver-audit-'),
  /**
   * Endpoint override (e.g. a VPC endpoint). When absent the SDK's own resolution applies, including
   * env `AWS_ENDPOINT_URL_CLOUDWATCH_LOGS`.
   */
  endpoint: httpUrl.optional(),
  /** `filter` (FilterLogEvents, default) or `insights` (Logs Insights aggregation server-side). */
  mode: z.enum(['filter', 'insights']).default('filter'),
  /** Each poll re-reads this much before the cursor, for late delivery, ms. Default `10m`. */
  overlap: duration().prefault('10m'),
});

/**
 * GKE audit logs read live from Cloud Logging (src/sources/cloud-logging.ts, docs/live-mode.md#gke): one
 * `entries:list` query per project per poll for all its clusters, with Application Default Credentials.
 */
const gcpSchema = z.strictObject({
  /** Google Cloud project id holding the cluster's audit logs. */
  project: z.string().regex(/^[a-z][a-z0-9-]{4,28}[a-z0-9]$/, 'expected a Google Cloud project id such as my-project-123'),
  /** The GKE cluster's name in the logs (`resource.labels.cluster_name`). Default the cluster's `name`. */
  clusterName: z.string().regex(/^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$/, 'expected a GKE cluster name (lowercase letters, digits, hyphens)').optional(),
  /** The cluster's location (`resource.labels.location`, e.g. `us-central1`): needed only when two clusters of the project share a name. */
  location: z.string().regex(/^[a-z]+-[a-z]+\d+(-[a-z])?$/, 'expected a Google Cloud region or zone such as us-central1 or us-central1-a').optional(),
  /** API endpoint override (e.g. Private Service Connect). Default `https://logging.googleapis.com`. */
  endpoint: httpUrl.optional(),
  /** The project whose read quota the requests spend (the budget's key). Default `project`. */
  quotaProject: z.string().regex(/^[a-z][a-z0-9-]{4,28}[a-z0-9]$/, 'expected a Google Cloud project id').optional(),
  /** Each poll re-reads this much before the cursor, for late ingestion. Default `10m`. */
  overlap: duration().prefault('10m'),
  /** The window ends this long before now (entries still being ingested). Default `1m`. */
  lag: duration().prefault('1m'),
  /** Entries per request, 1 to 1,000 (the API's limit). Default 1,000. */
  pageSize: z.int().min(1).max(1000).default(1000),
});

/** AKS audit logs read from Log Analytics (src/sources/log-analytics.ts, docs/live-mode.md#aks-log-analytics). */
const azureSchema = z.strictObject({
  /** The Log Analytics workspace id (a GUID, the workspace's "Workspace ID"), not its resource id. */
  workspaceId: z.string().regex(/^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/, 'expected the workspace id, a GUID'),
  /**
   * The AKS cluster's Azure resource id, `/subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.ContainerService/managedClusters/<name>`:
   * its rows' `_ResourceId` (compared without case).
   */
  resourceId: z
    .string()
    .regex(/^\/subscriptions\/[^/]+\/resourcegroups\/[^/]+\/providers\/microsoft\.containerservice\/managedclusters\/[^/]+$/i, 'expected an AKS resource id: /subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.ContainerService/managedClusters/<name>'),
  /** `AKSAudit` (resource-specific diagnostic setting, default) or `AzureDiagnostics` (the `kube-audit` category in Azure diagnostics mode). */
  table: z.enum(['AKSAudit', 'AzureDiagnostics']).default('AKSAudit'),
  /** Logs Query API base URL. Default `https://api.loganalytics.io/v1` (Azure public cloud). */
  endpoint: z.url({ protocol: /^https$/, error: 'expected an https:// URL' }).optional(),
  /** Microsoft Entra authority host of the token exchange. Default env `AZURE_AUTHORITY_HOST`, else `https://login.microsoftonline.com`. */
  authorityHost: z.url({ protocol: /^https$/, error: 'expected an https:// URL' }).optional(),
  /** PEM CA bundle trusted for `endpoint` and `authorityHost` besides the system's (a TLS-inspecting proxy, a private endpoint). */
  caFile: z.string().min(1).optional(),
  /** How far behind now each poll's window ends, for ingestion delay (20 s to 3 min, Azure Monitor docs). At least and default `5m`. */
  lag: duration(5 * 60_000).prefault('5m'),
  /** Each poll re-reads this much before the cursor, for rows ingested later than `lag`. Default `10m`. */
  overlap: duration().prefault('10m'),
  /**
   * Whether the API server extends projected tokens (`--service-account-extend-token-expiration`). AKS turns it off on
   * clusters with the OIDC issuer enabled (`az aks show --query oidcIssuerProfile.enabled`; Azure/AKS#4373): then no
   * stale-token annotation is ever written and a client that caches its token fails with 401 an hour after its pod
   * starts. `off` makes readiness say "extension already off" and alerts say requests fail now. Default `on`.
   */
  tokenExtension: z.enum(['on', 'off']).default('on'),
});

/** Audit webhook listener (src/sources/webhook.ts, docs/live-mode.md#audit-webhook). */
const webhookSchema = z.strictObject({
  /** Listen address. Default `0.0.0.0`. */
  host: z.string().min(1).default('0.0.0.0'),
  /** HTTPS port. Default 8443. */
  port: port.default(8443),
  /** PEM server certificate file (the API server checks it against the webhook kubeconfig's `certificate-authority`). */
  certFile: z.string().min(1),
  /** PEM private key file of `certFile`. */
  keyFile: z.string().min(1),
  /** File holding the bearer token the webhook kubeconfig's user sends (trimmed). */
  tokenFile: z.string().min(1).optional(),
  /** Environment variable holding that token (instead of `tokenFile`). */
  tokenEnv: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'expected an environment variable name').optional(),
  /** PEM CA file: client certificates it signed are accepted (the kubeconfig's `client-certificate`). */
  clientCaFile: z.string().min(1).optional(),
  /** Spool file. Default `webhook-<cluster name>.spool` next to the store's database file. */
  spool: z.string().min(1).optional(),
  /** Largest request body, bytes; larger → 413. Default 16 MiB. */
  maxBodyBytes: z.int().min(1024).default(16 * 1024 * 1024),
  /** Unconsumed spool bytes past which batches are answered 429. Default 256 MiB. */
  maxSpoolBytes: z.int().min(1024).default(256 * 1024 * 1024),
  /** Request body bytes being read or stored at once (all batches of this listener); over it → 429. Default 64 MiB. */
  maxInflightBytes: z.int().min(1024).default(64 * 1024 * 1024),
  /** Most open connections to the listener; further ones are dropped. Default 256. */
  maxConnections: z.int().min(1).default(256),
});

const auditSchema = z.strictObject({
  cloudwatch: cloudWatchSchema.optional(),
  file: z.strictObject({ path: z.string().min(1) }).optional(),
  /** HTTPS listener for the API server's audit webhook backend. */
  webhook: webhookSchema.optional(),
  /** No audit log (e.g. EKS with audit logging off): only API-server token metrics and the node probe. */
  none: z.literal(true, { error: 'expected true' }).optional(),
  /** GKE: Cloud Logging `entries:list` (Cloud Audit Logs of the cluster). */
  gcp: gcpSchema.optional(),
  /** AKS audit logs in a Log Analytics workspace (src/sources/log-analytics.ts, docs/live-mode.md#aks-log-analytics). */
  azure: azureSchema.optional(),
});

const kubernetesSchema = z.strictObject({
  inCluster: z.literal(true, { error: 'expected true' }).optional(),
  kubeconfig: z.string().min(1).optional(),
  context: z.string().min(1).optional(),
  eks: z
    .strictObject({
      clusterName: z.string().regex(/^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$/, 'expected an EKS cluster name'),
      region: z.string().regex(AWS_REGION, 'expected an AWS region such as us-east-1').optional(),
    })
    .optional(),
  none: z.literal(true, { error: 'expected true' }).optional(),
  secretMetadata: z.boolean().optional(),
  /**
   * Keep a watch cache of pods, ServiceAccounts and owner workloads (list once, then watch; src/cluster/cache.ts) so
   * that polls make no Kubernetes request. Default true; `false` reads the API on every poll instead.
   */
  watch: z.boolean().optional(),
});

/** Per-cluster Slack channel and approval policy. */
const clusterSlackSchema = z.strictObject({
  /** Channel id (`C…`, `G…`) or name (`#ops`); ids survive renames. */
  channel: z.string().regex(SLACK_CHANNEL, 'expected a channel id (C…, G…) or #name'),
  /** Who may request actions: Slack user ids (`U…`, `W…`), user group ids (`S…`) or `*`. Absent = anyone (`*`). */
  requesters: z.array(z.union([z.literal('*'), slackPrincipal], { error: 'expected "*", a Slack user id (U…, W…) or user group id (S…)' })).optional(),
  /** Who may approve: user ids or user group ids. Required (non-empty) when restart/recreate actions are enabled. */
  approvers: z.array(slackPrincipal).default([]),
  /** Whether the requester may approve their own request. Default false. */
  allowSelfApproval: z.boolean().default(APPROVAL_DEFAULTS.allowSelfApproval),
  /** Namespaces (exact, prefix ending in `*`, or `*`) whose actions need `protectedApprovals` approvals. */
  protectedNamespaces: z.array(namespacePattern).optional(),
  /** Distinct approvals needed in protected namespaces, 1–10. Default 2. */
  protectedApprovals: z.int().min(1).max(10).default(APPROVAL_DEFAULTS.protectedApprovals),
  /** Actions offered, default all: `restart`, `recreate-serviceaccount`, `snooze`. */
  actions: z.array(z.enum(ACTION_KINDS)).default([...APPROVAL_DEFAULTS.actions]),
  /** Namespaces actions may touch (patterns as above): `deny` wins over `allow`; no `allow` = all namespaces. */
  namespaces: z
    .strictObject({ allow: z.array(namespacePattern).optional(), deny: z.array(namespacePattern).optional() })
    .optional(),
});

/** One watched cluster. */
const clusterSchema = z.strictObject({
  /** DNS-1123 label (lowercase letters, digits, `-`, ≤ 63 chars), unique; shown in every message and command. */
  name: z.string().regex(DNS1123_LABEL, `expected ${DNS1123_LABEL_WORDS}`),
  audit: auditSchema,
  kubernetes: kubernetesSchema.prefault({ none: true }),
  /** Default `{ mode: 'eks' }` (90 days after warnAfter). */
  maxTokenAge: maxTokenAge.prefault('eks'),
  /** 5- or 6-field cron expression (node-cron 4 syntax), default `*\/5 * * * *`. */
  schedule: schedule.default('*/5 * * * *'),
  /** How far back the first poll (no cursor yet) reads, ms. Default `24h`. */
  lookback: duration(SECOND_MS).prefault('24h'),
  slack: clusterSlackSchema.optional(),
  /** When `serve` reports the audit log blind (src/runtime/blind.ts): no event for this long / this many polls. */
  blindLog: z
    .strictObject({
      /** File sources: blind after this long without an audit event, ms. Default `1h`. */
      silentAfter: duration(SECOND_MS).prefault('1h'),
      /** CloudWatch sources: blind after this many successful polls in a row without an audit event. Default 6. */
      silentPolls: z.int().min(1).default(6),
    })
    .prefault({}),
  /**
   * Proxies between clients and this cluster's API server (IP addresses or CIDR blocks) trusted to append the address
   * they saw to `X-Forwarded-For` (and to overwrite `X-Real-Ip`). Each request is attributed to the rightmost
   * `sourceIPs` entry not listed here; default none: the connection's own address (the last entry), since every other
   * entry is set by the client (docs/live-mode.md "How requests are attributed").
   */
  trustedProxies: z
    .array(z.string().refine(isAddressOrCidr, { error: 'expected an IP address or a CIDR block (e.g. 10.0.0.0/8)' }))
    .default([]),
  thresholds: z
    .strictObject({
      /** Severity `critical` when rejection is less than this many days away. Default 7. */
      criticalDays: z.number().positive().default(7),
      /** Severity `warning` when rejection is less than this many days away. Default 30. */
      warningDays: z.number().positive().default(30),
      /**
       * Accepted for older config files and ignored: 401s tied to a ServiceAccount only by source address and user agent
       * never make it `critical` unless corroborated, whatever their number (docs/live-mode.md "How requests are
       * attributed").
       */
      inferred401CriticalRequests: z.number().int().positive().default(10),
    })
    .prefault({}),
});

/** A glob of names (picomatch: `*`, `?`, `[a-z]`, `{a,b}`), as routing rules use them (src/slack/routing.ts). */
const nameGlob = z.string().min(1).max(253);
/** A Kubernetes label or annotation key (`team`, `app.kubernetes.io/part-of`), ≤ 253 + 1 + 63 chars. */
const metaKey = z.string().regex(/^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/, 'expected a Kubernetes label or annotation key such as team or app.kubernetes.io/part-of').max(317);

/** One routing rule: conditions → channel and owners (docs/slack.md "Routing", src/slack/routing.ts). */
const routeSchema = z.strictObject({
  /** Conditions, all of which must hold (an absent one holds always); a list holds when any entry matches. */
  match: z
    .strictObject({
      /** Cluster name globs. */
      clusters: z.array(nameGlob).min(1).optional(),
      /** Namespace globs (`kube-system`, `team-*`). */
      namespaces: z.array(nameGlob).min(1).optional(),
      /** Workload kinds (`DaemonSet`, `Deployment`, `StatefulSet`, …), exact. */
      kinds: z.array(z.string().regex(/^[A-Z][A-Za-z0-9]*$/, 'expected a workload kind such as DaemonSet or Deployment')).min(1).optional(),
      /** Workload name globs (with `kinds`: one workload must satisfy both). */
      workloads: z.array(nameGlob).min(1).optional(),
      /** ServiceAccount name globs. */
      serviceAccounts: z.array(nameGlob).min(1).optional(),
      /** Label key → value glob (`*`: any value), on a workload of the alert or on one of its pods. */
      labels: z.record(metaKey, nameGlob).optional(),
      /** Annotation key → value glob, as `labels`. */
      annotations: z.record(metaKey, z.string().min(1).max(1024)).optional(),
      /** Label key → value glob (`*`: any value), on the alert's namespace (needs the namespaces RBAC, docs/slack.md). */
      namespaceLabels: z.record(metaKey, nameGlob).optional(),
    })
    .prefault({}),
  /** Channel id (`C…`, `G…`) or `#name` the matching alerts go to. */
  channel: z.string().regex(SLACK_CHANNEL, 'expected a channel id (C…, G…) or #name'),
  /** Slack user group ids (`S…`) and user ids (`U…`, `W…`) mentioned on the first post and when severity rises. */
  owners: z.array(slackPrincipal).default([]),
  /** Lowest severity at which the owners are mentioned: `info` (default, always), `warning` or `critical`. */
  mentionFrom: z.enum(['info', 'warning', 'critical']).default('info'),
});

/** Top-level Slack settings (the secrets come from the environment, see {@link SlackConfig}). */
const slackSchema = z.strictObject({
  /** Default false: with false, no Slack connection is made and cluster `slack` sections are ignored. */
  enabled: z.boolean().default(false),
  /** `socket` (default; Socket Mode, no inbound port) or `http` (Events API over HTTP, signed requests). */
  mode: z.enum(['socket', 'http']).default('socket'),
  /** Slack Web API base URL, e.g. `https://slack-gov.com/api/` (GovSlack) or a loopback fake in tests. */
  apiUrl: httpUrl.transform((u) => (u.endsWith('/') ? u : `${u}/`)).optional(),
  /**
   * HTTP mode only: listen address of the receiver (`/slack/events`). Default: `http.host` (itself `0.0.0.0` by
   * default), so one setting keeps both listeners on loopback or on the pod network.
   */
  host: z.string().min(1).optional(),
  /** HTTP mode only: port of the receiver (`/slack/events`). Default 3000. */
  port: port.default(3000),
  approvals: z
    .strictObject({
      /** An approval request not decided within this time expires, ms. Default `30m`. */
      expiresAfter: duration(MINUTE_MS).prefault('30m'),
      /** Whether an open request is reminded once in its thread, mentioning the approvers who may still act. Default true. */
      reminders: z.boolean().default(true),
      /** When the reminder is due after the request, ms; less than `expiresAfter`. Default: half of `expiresAfter`. */
      remindAfter: duration(MINUTE_MS).optional(),
      /** A Slack user group (`S…`) mentioned once in the alert's thread when a request expires unanswered. Default none. */
      escalateTo: z.string().regex(/^S[A-Z0-9]{2,}$/, 'expected a Slack user group id (S…)').optional(),
      /** Whether the requester is told each outcome of their request by direct message. Default true. */
      notifyRequester: z.boolean().default(true),
    })
    .prefault({}),
  /**
   * Paging of critical alerts nobody acted on (docs/slack.md "Paging"): off unless `pagerduty` or `webhook` is given.
   * Warning and info alerts never page.
   */
  paging: z
    .strictObject({
      /** A critical alert with no approval request, snooze or Details view within this time pages, ms. Default `15m`. */
      after: duration(MINUTE_MS).prefault('15m'),
      /** PagerDuty Events API v2; the routing key comes from `PAGERDUTY_ROUTING_KEY`. */
      pagerduty: z
        .strictObject({
          /** Events API base URL (`POST <url>/v2/enqueue`). Default `https://events.pagerduty.com`. */
          url: httpUrl.default('https://events.pagerduty.com'),
        })
        .optional(),
      /** A generic JSON webhook (`POST <url>`), e.g. an incident tool's inbound integration. */
      webhook: z.strictObject({ url: httpUrl }).optional(),
    })
    .optional(),
  commands: z
    .strictObject({
      /**
       * `/tokens scan`: one poll per user and cluster within this time, ms (the reply says when the next is allowed;
       * each poll reads the audit source, e.g. CloudWatch FilterLogEvents). `0s` = no limit. Default `2m`.
       */
      scanInterval: duration().prefault('2m'),
    })
    .prefault({}),
  /**
   * Routing rules, in order: the first whose conditions all hold sends an alert to its channel and mentions its owners;
   * alerts no rule matches, and cluster-level alerts, go to the cluster's `slack.channel`. Default none.
   */
  routes: z.array(routeSchema).default([]),
});

/** TLS modes of the PostgreSQL store, as libpq names them (https://www.postgresql.org/docs/current/libpq-ssl.html#LIBPQ-SSL-PROTECTION). */
export const POSTGRES_SSL_MODES = ['disable', 'require', 'verify-ca', 'verify-full'] as const;

/** Host, port, database and user of a `postgres://user@host:port/database` URL; problems as messages. */
export function parsePostgresUrl(url: string): { host: string; port: number; database: string; user: string } | { problems: string[] } {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return { problems: ['expected a URL such as postgres://tokenwatch@db.example.com:5432/tokenwatch'] };
  }
  const problems: string[] = [];
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') problems.push(`expected the postgres:// or postgresql:// scheme, got ${u.protocol}//`);
  if (u.password !== '') problems.push('must not carry a password (the config file holds no secrets): use store.postgres.passwordFrom');
  if (u.search !== '' || u.hash !== '') problems.push('must not carry parameters: give TLS and pool settings as store.postgres fields (sslmode, caFile, poolSize, …)');
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
  if (host === '') problems.push('needs a host');
  if (u.username === '') problems.push('needs a user (postgres://USER@host/database)');
  const database = decodeURIComponent(u.pathname.replace(/^\//, ''));
  if (database === '' || database.includes('/')) problems.push('needs one database name as its path (postgres://user@host/DATABASE)');
  if (problems.length > 0) return { problems };
  return { host, port: u.port === '' ? 5432 : Number(u.port), database, user: decodeURIComponent(u.username) };
}

/**
 * `store.postgres`: where the PostgreSQL store is, as a URL or as fields (exclusive; {@link crossFieldIssues} checks
 * the combinations), normalised to host/port/database/user. The password never comes from this file: it is read
 * from `passwordFrom` (an environment variable or a file, e.g. a mounted Secret) for every new connection.
 */
const postgresSchema = z
  .strictObject({
    /** `postgres://user@host:port/database` (no password, no parameters). Exclusive with host/port/database/user. */
    url: z
      .string()
      .min(1)
      .superRefine((url, ctx) => {
        const r = parsePostgresUrl(url);
        if ('problems' in r) for (const message of r.problems) ctx.addIssue({ code: 'custom', message, input: url });
      })
      .optional(),
    host: z.string().min(1).optional(),
    /** Default 5432. */
    port: z.int().min(1).max(65535).optional(),
    database: z.string().min(1).optional(),
    user: z.string().min(1).optional(),
    /** Exactly one of `env` (a variable name) or `file` (one trailing newline dropped); read for every new connection. */
    passwordFrom: z
      .strictObject({
        env: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { message: 'expected an environment variable name' }).optional(),
        file: z.string().min(1).optional(),
      })
      .optional(),
    /** Default `verify-full` (certificate chain and host name checked). */
    sslmode: z.enum(POSTGRES_SSL_MODES).default('verify-full'),
    /** PEM file of the CAs that sign the server certificate (verify-ca, verify-full); default: Node's CA store. */
    caFile: z.string().min(1).optional(),
    /** Most connections per replica. Default 10. */
    poolSize: z.int().min(1).max(100).default(10),
    /** Server-side limit of one statement (`statement_timeout`). Default `30s`. */
    statementTimeout: duration(100).prefault('30s'),
    /** How long opening a connection or waiting for a free one may take. Default `10s`. */
    connectTimeout: duration(100).prefault('10s'),
    /**
     * Client-side limit of one statement: past it the connection is dropped (a black-holed one never answers, and
     * the server-side `statementTimeout` cannot fire for it). Default `statementTimeout` + 5 s.
     */
    queryTimeout: duration(100).optional(),
  })
  .transform((p) => {
    const at = p.url !== undefined ? parsePostgresUrl(p.url) : undefined;
    const where = at !== undefined && !('problems' in at) ? at : { host: p.host ?? '', port: p.port ?? 5432, database: p.database ?? '', user: p.user ?? '' };
    const passwordFrom: { env: string } | { file: string } | undefined =
      p.passwordFrom?.env !== undefined ? { env: p.passwordFrom.env } : p.passwordFrom?.file !== undefined ? { file: p.passwordFrom.file } : undefined;
    return {
      ...where,
      ...(passwordFrom !== undefined ? { passwordFrom } : {}),
      sslmode: p.sslmode,
      ...(p.caFile !== undefined ? { caFile: p.caFile } : {}),
      poolSize: p.poolSize,
      /** ms */
      statementTimeout: p.statementTimeout,
      /** ms */
      connectTimeout: p.connectTimeout,
      /** ms */
      queryTimeout: p.queryTimeout ?? p.statementTimeout + 5_000,
    };
  });

/** Schema of the YAML file (secrets are not allowed in it; they come from the environment). */
export const fileSchema = z.strictObject({
  /** SQLite store. */
  store: z
    .strictObject({
      /**
       * Database file; its directory is created. Default `./data/tokenwatch.db`. Not `:memory:` (a restart would
       * forget every finding, approval and cursor) and not a directory (`loadConfig` also checks the file system).
       */
      path: z
        .string()
        .min(1)
        .refine((p) => p !== ':memory:', {
          message: 'an in-memory store forgets every finding, approval and cursor at restart; give a file path (e.g. ./data/tokenwatch.db)',
        })
        .refine((p) => !/[/\\]$/.test(p), { message: 'names a directory (ends with a slash); give the database file inside it (e.g. ./data/tokenwatch.db)' })
        .default('./data/tokenwatch.db'),
      /**
       * PostgreSQL instead of the SQLite file (several replicas on different nodes share it; docs/install.md
       * "Availability"). `path` is then unused by the store.
       */
      postgres: postgresSchema.optional(),
    })
    .prefault({}),
  /**
   * Clusters shared out across replicas (with `store.postgres` only; docs/design/architecture.md "Clusters shared out
   * across replicas"): how often each replica refreshes its heartbeat and renews its clusters, and how long a replica
   * or a cluster's ownership lives without one (ms). A `kill -9`'d replica's clusters are taken over within TTL +
   * heartbeat of its last renewal. The TTL must be at least twice the heartbeat, so one late heartbeat does not hand
   * a cluster over.
   */
  shards: z
    .strictObject({
      /** Default `5s`, at least `1s`. */
      heartbeat: duration(SECOND_MS).prefault('5s'),
      /** Default `15s`; at least twice `heartbeat`. */
      ttl: duration(SECOND_MS).prefault('15s'),
    })
    .superRefine((v, ctx) => {
      if (v.ttl < 2 * v.heartbeat) {
        ctx.addIssue({ code: 'custom', path: ['ttl'], message: `must be at least twice shards.heartbeat (${v.heartbeat / 1000}s), got ${v.ttl / 1000}s: one late heartbeat would hand the clusters over`, input: v.ttl });
      }
    })
    .prefault({}),
  /** HTTP listener for `/healthz`, `/readyz` and `/metrics`. */
  http: z
    .strictObject({
      /** Default `0.0.0.0`. */
      host: z.string().min(1).default('0.0.0.0'),
      /** 0–65535, default 8080 (0 = any free port). */
      port: port.default(8080),
    })
    .prefault({}),
  log: z
    .strictObject({
      /** Default `info`; env `LOG_LEVEL` overrides the file. */
      level: z.enum(LOG_LEVELS).default('info'),
    })
    .prefault({}),
  /** Slack integration; absent when the file has no `slack` section. */
  slack: slackSchema.optional(),
  /** Rollout progress and verification after an approved action. */
  remediation: z
    .strictObject({
      /** How long to follow a rollout before reporting a timeout, ms. Default `10m`. */
      rolloutTimeout: duration(SECOND_MS).prefault('10m'),
      /**
       * How long a subject must stay free of stale use after a fix before its finding is resolved, ms.
       * Default `2h` (a new bound token only turns stale after about an hour, so less proves nothing).
       */
      settlePeriod: duration(MINUTE_MS).prefault('2h'),
    })
    .prefault({}),
  /** Scheduling of polls. */
  poll: z
    .strictObject({
      /**
       * Each scheduled poll (and the first one at start) waits a random delay in [0, jitter), ms, so that many clusters
       * or replicas do not hit the CloudWatch quota (5 FilterLogEvents/s per account and region) at the same second.
       * Default `10s`; `0s` turns it off. `/tokens scan` polls at once, without jitter.
       */
      jitter: duration().prefault('10s'),
      /**
       * Token uses a poll holds in memory before it stores them, and the most audit events between two progress commits
       * of the source (its cursor moves with them): a poll's memory is bounded by this, not by how many events its
       * window holds (a 401 flood), and a restart goes on after the last committed chunk (docs/live-mode.md#bounded-polls).
       * CloudWatch pages then hold at most this many events. Default `10000` (one full FilterLogEvents page); 100 to 1,000,000.
       */
      chunkEvents: z.number().int().min(100).max(1_000_000).prefault(10_000),
      /**
       * Longest wait for one request of a poll, ms: Kubernetes API reads (cluster state, probe ConfigMaps, the API
       * server's `/metrics`), each CloudWatch Logs HTTP attempt, and EKS DescribeCluster at start. A hung server
       * (accepts the connection, never answers) fails that read and marks the poll degraded instead of holding it;
       * a poll running longer than 3 × this shows degraded while it runs. Default `10s`; at least `1s`.
       */
      requestTimeout: duration(SECOND_MS).prefault('10s'),
      /**
       * Whether each cluster's scheduled polls start at a stable offset after the cron tick (a hash of the cluster's
       * name mapped into the schedule's interval), so that many clusters on one schedule poll evenly over the interval
       * instead of all at the tick. `jitter` is added on top. Default `true`.
       */
      spread: z.boolean().prefault(true),
      /** Most polls running at once across all clusters; the others wait in a queue. Default `10`; 1 to 1,000. */
      concurrency: z.number().int().min(1).max(1_000).prefault(10),
      /**
       * CloudWatch Logs requests per second per AWS account and Region, shared by every cluster this deployment polls
       * there (each SDK attempt counts; the rate halves on `ThrottlingException` and recovers). AWS quotas: 5 TPS for
       * FilterLogEvents, StartQuery and GetQueryResults
       * (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/cloudwatch_limits_cwl.html). Lower them when other
       * tools share the account's quota.
       */
      cloudwatchTps: z
        .strictObject({
          filterLogEvents: z.number().positive().max(1_000).prefault(5),
          startQuery: z.number().positive().max(1_000).prefault(5),
          getQueryResults: z.number().positive().max(1_000).prefault(5),
        })
        .prefault({}),
      /**
       * Fleet Logs Insights mode (src/sources/fleet-insights.ts, docs/live-mode.md#fleet-insights-mode): clusters with
       * `audit.cloudwatch.mode: insights` in one Region (and endpoint and stream prefix) are read by one Logs Insights
       * query over up to 50 log groups (StartQuery's limit) per poll interval instead of one query each. Off by default.
       */
      cloudwatchFleetInsights: z
        .strictObject({
          enabled: z.boolean().prefault(false),
          /** Log groups per query, 1 to 50 (https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_StartQuery.html). Default 50. */
          maxLogGroupsPerQuery: z.number().int().min(1).max(50).prefault(50),
          /**
           * Fleet queries running at once. The account's quota is 30 concurrent Logs Insights queries, dashboards
           * included (same reference): leave them room. Default 10.
           */
          maxConcurrentQueries: z.number().int().min(1).max(30).prefault(10),
          /** A cluster's poll reuses rows another cluster's poll fetched this recently (about the poll interval). Default `5m`. */
          reuse: duration().prefault('5m'),
        })
        .prefault({}),
      /**
       * GKE clusters read from Cloud Logging (`audit.gcp`, src/sources/cloud-logging.ts): the read budget per quota
       * project, shared by every cluster of this deployment and, with PostgreSQL, every replica. Cloud Logging allows
       * 60 (in some projects 120) read requests per minute per project (https://cloud.google.com/logging/quotas); the
       * rate halves on 429 RESOURCE_EXHAUSTED and recovers.
       */
      gcpLogging: z
        .strictObject({
          /** Read requests per minute per quota project. Default 60. */
          readsPerMinute: z.number().positive().max(60_000).prefault(60),
          /** A cluster's poll reuses entries another cluster's poll of its project fetched this recently (about the poll interval). Default `5m`. */
          reuse: duration().prefault('5m'),
        })
        .prefault({}),
      /**
       * Log Analytics (clusters with `audit.azure`, src/sources/log-analytics.ts): one query per workspace per poll for
       * all its clusters. Query API limits per identity: 200 requests per 30 s, 5 running at once
       * (https://learn.microsoft.com/azure/azure-monitor/service-limits#log-analytics-workspaces). The budget is shared
       * by every replica through the store (PostgreSQL) and halves on a 429.
       */
      logAnalytics: z
        .strictObject({
          /** Queries per second per identity. Default `5` (200 per 30 s is 6.7). */
          queriesPerSecond: z.number().positive().max(6.6).prefault(5),
          /** Queries running at once from this replica. Default `5` (the API's per-identity limit). */
          maxConcurrentQueries: z.number().int().min(1).max(5).prefault(5),
          /** A cluster's poll reuses rows another cluster's poll fetched this recently (about the poll interval). Default `5m`. */
          reuse: duration().prefault('5m'),
          /** Longest wait for the whole query of a poll, 429 waits included, before the poll fails (its window is read again). Default `5m`. */
          timeout: duration(1000).prefault('5m'),
        })
        .prefault({}),
    })
    .prefault({}),
  /** When a finding counts as current, and when it concludes on its own. */
  findings: z
    .strictObject({
      /**
       * A finding's signal (a stale use, a 401, a legacy-token use) seen within this window before now is current: its
       * alert says "now" and 401s make the ServiceAccount's findings critical. Older signals are shown with the time they
       * were last seen. Default `1h` (also the findings stage's "still in use" window), ms.
       */
      activeWindow: duration(MINUTE_MS).prefault('1h'),
      /**
       * A finding whose signal has been absent this long, while every poll of its cluster over the whole period
       * succeeded, and that has no live token, is resolved as quiet (its alert is updated in place, buttons removed);
       * it reopens, same alert plus a thread reply, when the signal returns. Default `24h`, ms.
       */
      quietPeriod: duration(MINUTE_MS).prefault('24h'),
      /**
       * Shortest audit window (from the first successful poll) for a "safe" verdict on turning token extension off
       * (`/tokens status`): shorter windows read "unknown", as clients that refresh a cached token only daily or weekly
       * may not have shown up yet. Default `7d`, ms.
       */
      readinessMinWindow: duration(MINUTE_MS).prefault('7d'),
    })
    .prefault({}),
  /**
   * How long the store keeps rows, ms; pruned after every successful poll. Poll runs are kept at least as long as
   * `findings.quietPeriod` (quiet resolution needs them), and each cluster's latest poll is always kept.
   */
  retention: z
    .strictObject({
      /**
       * Token records not seen for this long are deleted, except stale tokens whose rejection date is still ahead (they
       * can be used again and their finding escalates as the date nears). Default `7d`.
       */
      tokenRecords: duration(HOUR_MS).prefault('7d'),
      /** Poll runs older than this are deleted. Default `7d`. */
      pollRuns: duration(HOUR_MS).prefault('7d'),
      /** Action-log rows older than this are deleted (the audit trail of approvals and snoozes). Default `90d`. */
      actionLog: duration(DAY_MS).prefault('90d'),
    })
    .prefault({}),
  /** Watched clusters, at least one, names unique. */
  clusters: z.array(clusterSchema).min(1, 'at least one cluster is required'),
});

/** The file as zod outputs it, before defaults that depend on other fields or the environment. */
export type FileConfig = z.output<typeof fileSchema>;

// ---------------------------------------------------------------------------------------------
// The effective configuration: the type zod infers for the file (above), with the one-of sections narrowed to the
// forms the cross-field rules guarantee, env-dependent defaults filled in and the Slack secrets added.

type FileCluster = FileConfig['clusters'][number];
type FileCloudWatch = NonNullable<FileCluster['audit']['cloudwatch']>;
type FileKubernetes = FileCluster['kubernetes'];
type SecretMetadata = Pick<FileKubernetes, 'secretMetadata' | 'watch'>;

/** CloudWatch Logs audit source (EKS control-plane audit logs), region and log group filled in. */
export type CloudWatchAuditConfig = Omit<FileCloudWatch, 'region' | 'logGroup'> & {
  /** AWS region, e.g. `us-east-1` (from the file, else env `AWS_REGION` / `AWS_DEFAULT_REGION`). */
  region: string;
  /** Log group; default `/aws/eks/<kubernetes.eks.clusterName or name>/cluster` (EKS user guide, control-plane logs). */
  logGroup: string;
};

/** An audit log file followed across rotation. */
export type FileAuditConfig = NonNullable<FileCluster['audit']['file']>;

/** The audit webhook listener; `spool` filled in. */
export type WebhookAuditConfig = Omit<NonNullable<FileCluster['audit']['webhook']>, 'spool'> & {
  /** Spool file path (default `webhook-<cluster>.spool` next to the store's database file). */
  spool: string;
};

/**
 * Where a cluster's audit events come from: exactly one key. `{ none: true }`: no audit log (findings then come
 * only from API-server token metrics and the node probe; docs/design/architecture.md "Signals besides the audit log").
 */
export type AuditSourceConfig = { cloudwatch: CloudWatchAuditConfig } | { file: FileAuditConfig } | { webhook: WebhookAuditConfig } | { gcp: GcpAuditConfig } | { none: true } | { azure: AzureAuditConfig };

/** GKE audit logs from Cloud Logging; `clusterName` filled in (default the cluster's name). */
export type GcpAuditConfig = Omit<NonNullable<FileCluster['audit']['gcp']>, 'clusterName'> & { clusterName: string };

/** AKS audit logs in a Log Analytics workspace. */
export type AzureAuditConfig = NonNullable<FileCluster['audit']['azure']>;

/**
 * How tokenwatch reaches a cluster's API server: exactly one form. Narrow with `'inCluster' in k`,
 * `'eks' in k`, `'none' in k`; otherwise it is the kubeconfig form.
 * - `{ inCluster: true }`: the pod's ServiceAccount (client-node `loadFromCluster`);
 * - `{ kubeconfig?, context? }`: a kubeconfig file (default `$KUBECONFIG` / `~/.kube/config`) and context;
 * - `{ eks: { clusterName, region } }`: endpoint from EKS DescribeCluster, token from AWS credentials
 *   (as `aws eks get-token` does); the region comes from the environment when the file has none;
 * - `{ none: true }` (default): no cluster state; findings carry `clusterState: "cluster state unavailable"`-style notes.
 *
 * `secretMetadata: true` (any form but `none`; default off) also lists the metadata of legacy token Secrets, which
 * needs the opt-in `tokenwatch-secret-metadata` RBAC (docs/install.md "Secret metadata"). `watch: false` (any form
 * but `none`; absent = on) turns the watch cache off: every poll reads the API directly.
 */
export type KubernetesAccessConfig =
  | ({ inCluster: true } & SecretMetadata)
  | (Pick<FileKubernetes, 'kubeconfig' | 'context'> & SecretMetadata)
  | ({ eks: Required<NonNullable<FileKubernetes['eks']>> } & SecretMetadata)
  | { none: true };

/** Per-cluster Slack channel and approval policy. */
export type ClusterSlackConfig = NonNullable<FileCluster['slack']>;

/** One watched cluster. */
export type ClusterConfig = Omit<FileCluster, 'audit' | 'kubernetes' | 'slack' | 'blindLog' | 'trustedProxies'> & {
  audit: AuditSourceConfig;
  /** Trusted proxies (addresses, CIDR blocks); absent = none (see the file schema's `trustedProxies`). */
  trustedProxies?: string[];
  /** Blind-log thresholds (default `{ silentAfter: 1h, silentPolls: 6 }` when absent). */
  blindLog?: FileCluster['blindLog'];
  kubernetes: KubernetesAccessConfig;
  slack?: ClusterSlackConfig;
};

/** One routing rule of `slack.routes` (src/slack/routing.ts). */
export type SlackRoute = z.output<typeof routeSchema>;

/** Top-level Slack settings plus the secrets read from the environment. */
export type SlackConfig = Omit<NonNullable<FileConfig['slack']>, 'host' | 'routes'> & {
  /** Routing rules in order (absent = none: every alert goes to its cluster's channel). */
  routes?: SlackRoute[];
  /** HTTP mode only: listen address of the receiver (`/slack/events`); `http.host` when the file has none. */
  host: string;
  /** `SLACK_BOT_TOKEN` (xoxb-…), required when enabled. Secret. */
  botToken?: string;
  /** `SLACK_APP_TOKEN` (xapp-…, scope connections:write), required in socket mode. Secret. */
  appToken?: string;
  /** `SLACK_SIGNING_SECRET`, required in http mode. Secret. */
  signingSecret?: string;
  /** `PAGERDUTY_ROUTING_KEY`, required with `paging.pagerduty`. Secret. */
  pagerdutyRoutingKey?: string;
};

/**
 * The validated, effective configuration of `tokenwatch serve` (defaults filled in).
 *
 * It has the shape of the YAML file (see `config.example.yaml`), with three differences:
 * durations are **milliseconds** (the file says `10m`), `maxTokenAge` is a {@link MaxTokenAge}
 * (the file says `eks`, `upstream` or seconds), and the Slack secrets from the environment
 * (`SLACK_BOT_TOKEN`, `SLACK_APP_TOKEN`, `SLACK_SIGNING_SECRET`) are added under `slack`.
 * Relative paths are kept as written; they are relative to the working directory.
 */
export type Config = Omit<FileConfig, 'slack' | 'clusters'> & {
  /** Slack integration; absent when the file has no `slack` section. */
  slack?: SlackConfig;
  /** Watched clusters, at least one, names unique. */
  clusters: ClusterConfig[];
};

/** Secret and override variables read from the environment. */
export const ENV = {
  botToken: 'SLACK_BOT_TOKEN',
  appToken: 'SLACK_APP_TOKEN',
  signingSecret: 'SLACK_SIGNING_SECRET',
  pagerdutyRoutingKey: 'PAGERDUTY_ROUTING_KEY',
  logLevel: 'LOG_LEVEL',
  region: 'AWS_REGION',
  defaultRegion: 'AWS_DEFAULT_REGION',
  configPath: 'TOKENWATCH_CONFIG',
} as const;

// ---------------------------------------------------------------------------------------------
// Cross-field and environment rules (on the raw input, always run)

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Environment value, with empty strings treated as unset (as t3-env's `emptyStringAsUndefined`). */
function envValue(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v === '' ? undefined : v;
}

/** `store.postgres` rules across fields: url or host/database/user, one password source (and its variable set), caFile only where it is used. */
function postgresIssues(raw: Record<string, unknown>, env: NodeJS.ProcessEnv): ConfigIssue[] {
  const pg = isRecord(raw.store) && isRecord(raw.store.postgres) ? raw.store.postgres : undefined;
  if (pg === undefined) return [];
  const at = (...rest: string[]) => ['store', 'postgres', ...rest];
  const issues: ConfigIssue[] = [];
  const fields = ['host', 'port', 'database', 'user'].filter((k) => pg[k] !== undefined);
  if (pg.url !== undefined && fields.length > 0) {
    issues.push({ path: at('url'), message: `url and ${fields.join('/')} are exclusive: give the server either as a URL or as fields` });
  } else if (pg.url === undefined) {
    if (fields.length === 0) issues.push({ path: at(), message: 'needs url, or host, database and user' });
    else for (const k of ['host', 'database', 'user']) if (pg[k] === undefined) issues.push({ path: at(k), message: 'required (or give url instead)' });
  }
  const pf = pg.passwordFrom;
  if (isRecord(pf)) {
    if ((pf.env === undefined) === (pf.file === undefined)) issues.push({ path: at('passwordFrom'), message: 'expected exactly one of env, file' });
    else if (typeof pf.env === 'string' && envValue(env, pf.env) === undefined) issues.push({ path: ['env', pf.env], message: 'required by store.postgres.passwordFrom.env (the PostgreSQL password)' });
  }
  const mode = pg.sslmode ?? 'verify-full';
  if (pg.caFile !== undefined && (mode === 'disable' || mode === 'require')) {
    issues.push({ path: at('caFile'), message: `is used only with sslmode verify-ca or verify-full (sslmode is ${String(mode)}, which checks no certificate)` });
  }
  return issues;
}

/** `slack.approvals.remindAfter` before `expiresAfter`; `slack.paging.pagerduty` needs its routing key. */
function followUpIssues(slack: Record<string, unknown>, env: NodeJS.ProcessEnv): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const approvals = isRecord(slack.approvals) ? slack.approvals : {};
  const ms = (v: unknown): number | undefined => {
    if (typeof v !== 'string') return undefined;
    try {
      return parseDuration(v);
    } catch {
      return undefined;
    }
  };
  const remind = ms(approvals.remindAfter);
  const expires = ms(approvals.expiresAfter ?? '30m');
  if (remind !== undefined && expires !== undefined && remind >= expires) {
    issues.push({ path: ['slack', 'approvals', 'remindAfter'], message: `must be less than expiresAfter (${String(approvals.expiresAfter ?? '30m')}): a request is reminded before it expires` });
  }
  const paging = isRecord(slack.paging) ? slack.paging : undefined;
  if (paging !== undefined) {
    if (paging.pagerduty === undefined && paging.webhook === undefined) issues.push({ path: ['slack', 'paging'], message: 'needs pagerduty or webhook (where to page)' });
    if (paging.pagerduty !== undefined) {
      const key = envValue(env, ENV.pagerdutyRoutingKey);
      if (key === undefined) issues.push({ path: ['env', ENV.pagerdutyRoutingKey], message: 'required by slack.paging.pagerduty (the integration key of a PagerDuty Events API v2 service)' });
      else if (!/^[A-Za-z0-9]{32}$/.test(key)) issues.push({ path: ['env', ENV.pagerdutyRoutingKey], message: 'expected the 32-character integration key of a PagerDuty Events API v2 integration' });
    }
  }
  return issues;
}

/**
 * Rules spanning several fields, checked on the raw (unvalidated) input so they are reported together
 * with the field errors:
 * - `audit` has exactly one of `cloudwatch`, `file`; `kubernetes` exactly one form;
 * - a CloudWatch source (and an `eks` access) has a region, from the file or `AWS_REGION`/`AWS_DEFAULT_REGION`;
 * - cluster names are unique;
 * - a cluster `slack` section needs a top-level `slack` section; `slack.enabled` needs at least one;
 * - `thresholds.criticalDays` < `warningDays`;
 * - restart/recreate actions need approvers; two-approval namespaces need two possible approvers;
 * - with `slack.enabled`: `SLACK_BOT_TOKEN` (xoxb-) always, plus `SLACK_APP_TOKEN` (xapp-) in socket mode or
 *   `SLACK_SIGNING_SECRET` in http mode (bolt-js `App` constructor requirements);
 * - `LOG_LEVEL`, when set, is a pino level;
 * - a routing rule's `match.clusters` matches at least one cluster with a `slack` section.
 * Messages never contain secret values.
 */
export function crossFieldIssues(raw: unknown, env: NodeJS.ProcessEnv): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  if (!isRecord(raw)) return issues;
  const slack = isRecord(raw.slack) ? raw.slack : undefined;
  const clusters = Array.isArray(raw.clusters) ? (raw.clusters as unknown[]) : [];
  const envRegion = envValue(env, ENV.region) ?? envValue(env, ENV.defaultRegion);

  issues.push(...postgresIssues(raw, env));

  const firstIndexByName = new Map<string, number>();
  /** `project/location/clusterName` of each `audit.gcp` → its first cluster index. */
  const firstGkeCluster = new Map<string, number>();
  let clustersWithSlack = 0;
  clusters.forEach((c, i) => {
    if (!isRecord(c)) return;
    const at = (...rest: (string | number)[]) => ['clusters', i, ...rest];

    if (typeof c.name === 'string') {
      const first = firstIndexByName.get(c.name);
      if (first === undefined) firstIndexByName.set(c.name, i);
      else issues.push({ path: at('name'), message: `duplicate cluster name "${c.name}" (also clusters[${first}])` });
    }

    if (isRecord(c.audit)) {
      const audit = c.audit;
      const forms = ['cloudwatch', 'file', 'webhook', 'gcp', 'none', 'azure'].filter((k) => audit[k] !== undefined);
      if (forms.length !== 1) {
        issues.push({ path: at('audit'), message: `expected exactly one of cloudwatch, file, webhook, gcp, none, azure (got ${forms.length === 0 ? 'none' : forms.join(', ')})` });
      }
      const wh = audit.webhook;
      if (isRecord(wh) && wh.tokenFile === undefined && wh.tokenEnv === undefined && wh.clientCaFile === undefined) {
        issues.push({ path: at('audit', 'webhook'), message: 'needs client authentication: tokenFile, tokenEnv or clientCaFile' });
      }
      if (isRecord(wh) && wh.tokenFile !== undefined && wh.tokenEnv !== undefined) {
        issues.push({ path: at('audit', 'webhook'), message: 'tokenFile and tokenEnv are exclusive' });
      }
      const gcp = audit.gcp;
      if (isRecord(gcp) && typeof gcp.project === 'string') {
        const gkeName = typeof gcp.clusterName === 'string' ? gcp.clusterName : c.name;
        const key = `${gcp.project}/${typeof gcp.location === 'string' ? gcp.location : '*'}/${String(gkeName)}`;
        const first = firstGkeCluster.get(key);
        if (first !== undefined) issues.push({ path: at('audit', 'gcp'), message: `GKE cluster "${String(gkeName)}" of project ${gcp.project} is already read by clusters[${first}]` });
        else firstGkeCluster.set(key, i);
      }
      const cw = c.audit.cloudwatch;
      if (isRecord(cw) && cw.region === undefined && envRegion === undefined) {
        issues.push({ path: at('audit', 'cloudwatch', 'region'), message: 'required (or set AWS_REGION)' });
      }
    }

    if (isRecord(c.kubernetes)) {
      const k = c.kubernetes;
      const forms: string[] = [];
      if (k.inCluster !== undefined) forms.push('inCluster');
      if (k.kubeconfig !== undefined || k.context !== undefined) forms.push('kubeconfig/context');
      if (k.eks !== undefined) forms.push('eks');
      if (k.none !== undefined) forms.push('none');
      if (forms.length !== 1) {
        issues.push({
          path: at('kubernetes'),
          message: `expected exactly one of inCluster, kubeconfig/context, eks, none (got ${forms.length === 0 ? 'none' : forms.join(', ')})`,
        });
      }
      if (k.none !== undefined && k.secretMetadata === true) {
        issues.push({ path: at('kubernetes', 'secretMetadata'), message: 'needs cluster access (inCluster, kubeconfig/context or eks), not none' });
      }
      if (k.none !== undefined && k.watch !== undefined) {
        issues.push({ path: at('kubernetes', 'watch'), message: 'needs cluster access (inCluster, kubeconfig/context or eks), not none' });
      }
      if (isRecord(k.eks) && k.eks.region === undefined && envRegion === undefined) {
        issues.push({ path: at('kubernetes', 'eks', 'region'), message: 'required (or set AWS_REGION)' });
      }
    }

    if (isRecord(c.thresholds)) {
      const crit = c.thresholds.criticalDays ?? 7;
      const warn = c.thresholds.warningDays ?? 30;
      if (typeof crit === 'number' && typeof warn === 'number' && crit >= warn) {
        issues.push({ path: at('thresholds'), message: `criticalDays (${crit}) must be less than warningDays (${warn})` });
      }
    }

    if (isRecord(c.slack)) {
      clustersWithSlack++;
      if (slack === undefined) {
        issues.push({ path: at('slack'), message: 'a cluster slack section needs a top-level slack section (enabled, mode)' });
      }
      const actions: unknown[] = Array.isArray(c.slack.actions) ? c.slack.actions : [...APPROVAL_DEFAULTS.actions];
      const approvers = Array.isArray(c.slack.approvers) ? c.slack.approvers : [];
      if (approvers.length === 0 && actions.some((a) => (CLUSTER_ACTION_KINDS as readonly unknown[]).includes(a))) {
        issues.push({
          path: at('slack', 'approvers'),
          message: 'required (at least one approver) when actions include restart or recreate-serviceaccount',
        });
      }
      const protectedNs = c.slack.protectedNamespaces;
      const needed = typeof c.slack.protectedApprovals === 'number' ? c.slack.protectedApprovals : APPROVAL_DEFAULTS.protectedApprovals;
      const onlyUsers = approvers.every((a) => typeof a === 'string' && !a.startsWith('S'));
      if (Array.isArray(protectedNs) && protectedNs.length > 0 && onlyUsers && new Set(approvers).size < needed) {
        issues.push({
          path: at('slack', 'protectedNamespaces'),
          message: `protected namespaces need ${needed} approvals, but fewer than ${needed} approvers are configured`,
        });
      }
    }
  });

  // A routing rule limited to clusters must name at least one cluster that has a Slack channel (a typo routes nothing).
  if (slack !== undefined && Array.isArray(slack.routes)) {
    const slackClusters = clusters.filter((c): c is Record<string, unknown> => isRecord(c) && isRecord(c.slack) && typeof c.name === 'string').map((c) => c.name as string);
    slack.routes.forEach((r: unknown, i: number) => {
      const globs = isRecord(r) && isRecord(r.match) && Array.isArray(r.match.clusters) ? r.match.clusters.filter((g): g is string => typeof g === 'string') : undefined;
      if (globs && globs.length > 0 && !slackClusters.some((n) => globs.some((g) => picomatch.isMatch(n, g, { dot: true, nonegate: true })))) {
        issues.push({ path: ['slack', 'routes', i, 'match', 'clusters'], message: `matches no cluster with a slack section (${slackClusters.join(', ') || 'none'})` });
      }
    });
  }

  if (slack !== undefined && slack.enabled === true) {
    if (clustersWithSlack === 0 && clusters.length > 0) {
      issues.push({ path: ['slack', 'enabled'], message: 'slack is enabled but no cluster has a slack section (channel, approvers)' });
    }
    const mode = slack.mode ?? 'socket';
    const bot = envValue(env, ENV.botToken);
    if (bot === undefined) issues.push({ path: ['env', ENV.botToken], message: 'required when slack.enabled is true' });
    else if (!bot.startsWith('xoxb-')) issues.push({ path: ['env', ENV.botToken], message: 'must be a bot token starting with "xoxb-"' });
    if (mode === 'socket') {
      const app = envValue(env, ENV.appToken);
      if (app === undefined) issues.push({ path: ['env', ENV.appToken], message: 'required when slack.mode is socket' });
      else if (!app.startsWith('xapp-')) issues.push({ path: ['env', ENV.appToken], message: 'must be an app-level token starting with "xapp-"' });
    } else if (mode === 'http') {
      const secret = envValue(env, ENV.signingSecret);
      if (secret === undefined) issues.push({ path: ['env', ENV.signingSecret], message: 'required when slack.mode is http' });
      else if (secret.length < 16) issues.push({ path: ['env', ENV.signingSecret], message: 'too short to be a Slack signing secret' });
    }
  }
  if (slack !== undefined) issues.push(...followUpIssues(slack, env));

  const level = envValue(env, ENV.logLevel);
  if (level !== undefined && !(LOG_LEVELS as readonly string[]).includes(level)) {
    issues.push({ path: ['env', ENV.logLevel], message: `expected one of ${LOG_LEVELS.join(', ')}` });
  }
  return issues;
}

// ---------------------------------------------------------------------------------------------
// Assembly

/** zod issue(s) → config issues; an unknown-keys issue becomes one issue per key, at the key's path. */
function toIssues(i: z.core.$ZodIssue): ConfigIssue[] {
  const path = i.path.map((p) => (typeof p === 'symbol' ? String(p) : p));
  if (i.code === 'unrecognized_keys') return i.keys.map((k) => ({ path: [...path, k], message: 'unknown key' }));
  if (i.code === 'invalid_type' && i.message.endsWith('received undefined')) return [{ path, message: 'required' }];
  return [{ path, message: i.message }];
}

function buildAudit(a: FileConfig['clusters'][number]['audit'], name: string, eksName: string | undefined, envRegion: string | undefined, storePath: string): AuditSourceConfig {
  if (a.webhook !== undefined) {
    const { spool, ...w } = a.webhook;
    return { webhook: { ...w, spool: spool ?? join(dirname(storePath), `webhook-${name}.spool`) } };
  }
  if (a.cloudwatch !== undefined) {
    const cw = a.cloudwatch;
    return {
      cloudwatch: {
        region: cw.region ?? envRegion ?? '',
        logGroup: cw.logGroup ?? `/aws/eks/${eksName ?? name}/cluster`,
        streamPrefix: cw.streamPrefix,
        ...(cw.endpoint !== undefined ? { endpoint: cw.endpoint } : {}),
        mode: cw.mode,
        overlap: cw.overlap,
      },
    };
  }
  if (a.gcp !== undefined) {
    const { clusterName, ...g } = a.gcp;
    return { gcp: { ...g, clusterName: clusterName ?? name } };
  }
  if (a.none === true) return { none: true };
  if (a.azure !== undefined) return { azure: { ...a.azure } };
  return { file: { path: a.file?.path ?? '' } };
}

function buildKubernetes(k: FileConfig['clusters'][number]['kubernetes'], envRegion: string | undefined): KubernetesAccessConfig {
  const opt = { ...(k.secretMetadata === true ? { secretMetadata: true } : {}), ...(k.watch === false ? { watch: false } : {}) };
  if (k.inCluster === true) return { inCluster: true, ...opt };
  if (k.eks !== undefined) return { eks: { clusterName: k.eks.clusterName, region: k.eks.region ?? envRegion ?? '' }, ...opt };
  if (k.kubeconfig !== undefined || k.context !== undefined) {
    return { ...(k.kubeconfig !== undefined ? { kubeconfig: k.kubeconfig } : {}), ...(k.context !== undefined ? { context: k.context } : {}), ...opt };
  }
  return { none: true };
}

/**
 * Validates a parsed YAML value (any JSON-like value) plus the environment and returns the effective config.
 * @param raw the file's content as plain data (e.g. `yaml.parse` output); `null`/`undefined` = empty file
 * @param env environment (injected for tests; `process.env` by default)
 * @throws {ConfigError} listing every problem found, field and cross-field alike
 */
export function parseConfig(raw: unknown, env: NodeJS.ProcessEnv = process.env): Config {
  const input = raw === null || raw === undefined ? {} : raw;
  const result = fileSchema.safeParse(input);
  const issues = [...(result.success ? [] : result.error.issues.flatMap(toIssues)), ...crossFieldIssues(input, env)];
  if (!result.success || issues.length > 0) throw new ConfigError(issues);
  return assemble(result.data, env);
}

/** Turns the validated file plus env into the effective {@link Config} (fills env- and name-dependent defaults). */
function assemble(file: FileConfig, env: NodeJS.ProcessEnv): Config {
  const envRegion = envValue(env, ENV.region) ?? envValue(env, ENV.defaultRegion);
  const clusters: ClusterConfig[] = file.clusters.map((c) => {
    const out: ClusterConfig = {
      name: c.name,
      audit: buildAudit(c.audit, c.name, c.kubernetes.eks?.clusterName, envRegion, file.store.path),
      kubernetes: buildKubernetes(c.kubernetes, envRegion),
      maxTokenAge: c.maxTokenAge,
      schedule: c.schedule,
      lookback: c.lookback,
      trustedProxies: c.trustedProxies,
      thresholds: { criticalDays: c.thresholds.criticalDays, warningDays: c.thresholds.warningDays, inferred401CriticalRequests: c.thresholds.inferred401CriticalRequests },
      blindLog: { silentAfter: c.blindLog.silentAfter, silentPolls: c.blindLog.silentPolls },
    };
    if (c.slack !== undefined) {
      const s = c.slack;
      out.slack = {
        channel: s.channel,
        ...(s.requesters !== undefined ? { requesters: s.requesters } : {}),
        approvers: s.approvers,
        allowSelfApproval: s.allowSelfApproval,
        ...(s.protectedNamespaces !== undefined ? { protectedNamespaces: s.protectedNamespaces } : {}),
        protectedApprovals: s.protectedApprovals,
        actions: s.actions,
        ...(s.namespaces !== undefined ? { namespaces: s.namespaces } : {}),
      };
    }
    return out;
  });
  let slack: SlackConfig | undefined;
  if (file.slack !== undefined) {
    const s = file.slack;
    const botToken = envValue(env, ENV.botToken);
    const appToken = envValue(env, ENV.appToken);
    const signingSecret = envValue(env, ENV.signingSecret);
    slack = {
      enabled: s.enabled,
      mode: s.mode,
      ...(s.apiUrl !== undefined ? { apiUrl: s.apiUrl } : {}),
      host: s.host ?? file.http.host,
      port: s.port,
      approvals: {
        expiresAfter: s.approvals.expiresAfter,
        reminders: s.approvals.reminders,
        ...(s.approvals.remindAfter !== undefined ? { remindAfter: s.approvals.remindAfter } : {}),
        ...(s.approvals.escalateTo !== undefined ? { escalateTo: s.approvals.escalateTo } : {}),
        notifyRequester: s.approvals.notifyRequester,
      },
      ...(s.paging !== undefined ? { paging: s.paging } : {}),
      commands: { scanInterval: s.commands.scanInterval },
      ...(s.routes.length > 0 ? { routes: s.routes } : {}),
      ...(botToken !== undefined ? { botToken } : {}),
      ...(appToken !== undefined ? { appToken } : {}),
      ...(signingSecret !== undefined ? { signingSecret } : {}),
      ...(s.paging?.pagerduty !== undefined && envValue(env, ENV.pagerdutyRoutingKey) !== undefined ? { pagerdutyRoutingKey: envValue(env, ENV.pagerdutyRoutingKey)! } : {}),
    };
  }
  const level = envValue(env, ENV.logLevel);
  return {
    store: { path: file.store.path, ...(file.store.postgres !== undefined ? { postgres: file.store.postgres } : {}) },
    shards: { heartbeat: file.shards.heartbeat, ttl: file.shards.ttl },
    http: { host: file.http.host, port: file.http.port },
    log: { level: level !== undefined ? (level as Config['log']['level']) : file.log.level },
    ...(slack !== undefined ? { slack } : {}),
    remediation: { rolloutTimeout: file.remediation.rolloutTimeout, settlePeriod: file.remediation.settlePeriod },
    poll: {
      jitter: file.poll.jitter,
      chunkEvents: file.poll.chunkEvents,
      requestTimeout: file.poll.requestTimeout,
      spread: file.poll.spread,
      concurrency: file.poll.concurrency,
      cloudwatchTps: { ...file.poll.cloudwatchTps },
      cloudwatchFleetInsights: { ...file.poll.cloudwatchFleetInsights },
      gcpLogging: { ...file.poll.gcpLogging },
      logAnalytics: { ...file.poll.logAnalytics },
    },
    findings: { activeWindow: file.findings.activeWindow, quietPeriod: file.findings.quietPeriod, readinessMinWindow: file.findings.readinessMinWindow },
    retention: { tokenRecords: file.retention.tokenRecords, pollRuns: file.retention.pollRuns, actionLog: file.retention.actionLog },
    clusters,
  };
}
