/**
 * Kubernetes access to Amazon EKS clusters from AWS credentials, the way `aws eks get-token` does it, so one
 * tokenwatch can watch several EKS clusters (config `kubernetes: { eks: { clusterName, region } }`).
 *
 * How EKS authenticates (aws-iam-authenticator `pkg/token/token.go`, aws-cli `awscli/customizations/eks/get_token.py`):
 * the bearer token is `k8s-aws-v1.` + base64url, without padding, of a SigV4 **query-string presigned** STS URL
 * `GET https://sts.<region>.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15&X-Amz-…`, with the header
 * `x-k8s-aws-id: <cluster name>` among the signed headers (the API server's authenticator replays the URL with that
 * header and maps the returned caller identity to a Kubernetes user via access entries / `aws-auth`).
 * `X-Amz-Expires` is 60 for legacy reasons and ignored by STS: the URL is accepted for 15 minutes after `X-Amz-Date`
 * (`presignedURLExpiration`), and never past the signing credentials' own expiry.
 *
 * The API server endpoint and its CA come from EKS `DescribeCluster` (`cluster.endpoint`,
 * `cluster.certificateAuthority.data`; IAM permission `eks:DescribeCluster`).
 *
 * Auth in client-node 1.4 (`dist/config.js`): every request calls `KubeConfig.applySecurityAuthentication` →
 * `applyAuthorizationHeader`, which asks the built-in authenticators, then those added with `addAuthenticator`,
 * whether `isAuthProvider(user)`, and awaits `applyAuthentication(user, opts)` of the first that says yes. The user
 * built here carries no static `token` (it would overwrite the header) but an `authProvider` named
 * {@link EKS_AUTH_PROVIDER}, and the KubeConfig gets an authenticator that sets `Authorization: Bearer k8s-aws-v1.…`
 * from a cached token, presigning a new one one minute before the old one expires. This is the refreshable way:
 * the same KubeConfig (and every API client, Watch or informer made from it) stays valid for the life of the
 * process, while a `loadFromOptions({users:[{token}]})` KubeConfig would have to be rebuilt and every client
 * re-made every 14 minutes.
 */
import { ErrorCode, TokenwatchError, isTokenwatchError } from '../errors.js';
import { AccessDeniedException, DescribeClusterCommand, EKSClient, ResourceNotFoundException } from '@aws-sdk/client-eks';
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { KubeConfig, type User } from '@kubernetes/client-node';
import { buildQueryString, HttpRequest } from '@smithy/core/protocols';
import { Hash } from '@smithy/core/serde';
import { SignatureV4 } from '@smithy/signature-v4';
import type { AwsCredentialIdentity, AwsCredentialIdentityProvider } from '@smithy/types';

/** Prefix of EKS bearer tokens (aws-iam-authenticator `v1Prefix`). */
export const EKS_TOKEN_PREFIX = 'k8s-aws-v1.';
/** Signed header naming the cluster the token is for (aws-iam-authenticator `clusterIDHeader`). */
const CLUSTER_ID_HEADER = 'x-k8s-aws-id';
/** `X-Amz-Expires` of the presigned URL, seconds; ignored by STS (aws-iam-authenticator `requestPresignParam`). */
export const PRESIGN_EXPIRES_SECONDS = 60;
/** How long STS accepts a presigned URL after its `X-Amz-Date`, ms (aws-iam-authenticator `presignedURLExpiration`). */
export const TOKEN_LIFETIME_MS = 15 * 60_000;
/** A cached token is replaced this long before it expires, ms (aws-cli and aws-iam-authenticator both use 1 min). */
export const REFRESH_BEFORE_MS = 60_000;
/** `authProvider.name` of KubeConfig users built by {@link eksKubeConfig}. */
export const EKS_AUTH_PROVIDER = 'tokenwatch-eks';

/** An EKS bearer token. */
export interface EksToken {
  /** `k8s-aws-v1.<base64url(presigned URL), no padding>` */
  token: string;
  /** When STS stops accepting it: `X-Amz-Date` + 15 min, or the signing credentials' expiry if that is sooner. */
  expiresAt: Date;
}

/** Options of {@link eksToken}. */
export interface EksTokenOptions {
  /** EKS cluster name (the value of the signed `x-k8s-aws-id` header). */
  clusterName: string;
  /** AWS region of the cluster; also the STS region (regional endpoint, as aws-iam-authenticator uses). */
  region: string;
  /** Credentials to sign with; default: the AWS SDK default chain (env, SSO, ini, IRSA web identity, Pod Identity / ECS, IMDS). */
  credentials?: AwsCredentialIdentity | AwsCredentialIdentityProvider;
  /** Signing time (`X-Amz-Date`); default now. */
  now?: Date;
  /** STS base URL; default {@link defaultStsEndpoint}(region). Real EKS only accepts `https` STS hosts of its partition. */
  stsEndpoint?: string;
}

/** Default STS endpoint of a region: `https://sts.<region>.amazonaws.com` (`.amazonaws.com.cn` for `cn-*` regions). */
export function defaultStsEndpoint(region: string): string {
  return `https://sts.${region}.amazonaws.com${region.startsWith('cn-') ? '.cn' : ''}`;
}

let defaultCredentials: AwsCredentialIdentityProvider | undefined;

/**
 * The AWS SDK default credential chain (`@aws-sdk/credential-provider-node` `defaultProvider()`), made once per
 * process: it memoizes credentials and refreshes temporary ones before they expire, so IRSA and EKS Pod Identity
 * work without re-reading their token files on every presign.
 */
export function defaultAwsCredentials(): AwsCredentialIdentityProvider {
  defaultCredentials ??= defaultProvider();
  return defaultCredentials;
}

function errorText(err: unknown): string {
  if (err instanceof Error) return err.name && err.name !== 'Error' ? `${err.name}: ${err.message}` : err.message;
  return String(err);
}

function validName(what: string, value: string): void {
  if (typeof value !== 'string' || value.trim() === '') throw new TokenwatchError(ErrorCode.KubeConfigInvalid, `EKS ${what} must be a non-empty string`);
}

/**
 * Make an EKS bearer token: presign STS `GetCallerIdentity` with SigV4 (query string, `X-Amz-Expires=60`, signed
 * headers `host;x-k8s-aws-id`) and wrap the URL as `k8s-aws-v1.` + base64url without padding — byte for byte what
 * `aws eks get-token` produces for the same credentials and time. No network call is made except what the credential
 * provider itself needs.
 *
 * @returns the token and when it expires ({@link EksToken.expiresAt}).
 * @throws Error `cannot get AWS credentials to sign an EKS token for cluster "<name>" (<region>): <why>` when the
 *   credential provider fails, or on an empty cluster name / region or an unparsable `stsEndpoint`.
 */
export async function eksToken(opts: EksTokenOptions): Promise<EksToken> {
  validName('cluster name', opts.clusterName);
  validName('region', opts.region);
  const now = opts.now ?? new Date();
  const endpoint = new URL(opts.stsEndpoint ?? defaultStsEndpoint(opts.region));
  const source = opts.credentials ?? defaultAwsCredentials();
  let creds: AwsCredentialIdentity;
  try {
    creds = typeof source === 'function' ? await source() : source;
  } catch (err) {
    throw new TokenwatchError(
      ErrorCode.EksAuthFailed,
      `cannot get AWS credentials to sign an EKS token for cluster "${opts.clusterName}" (${opts.region}): ${errorText(err)}`,
      { cause: err },
    );
  }
  const signer = new SignatureV4({
    service: 'sts',
    region: opts.region,
    credentials: creds,
    sha256: Hash.bind(null, 'sha256'),
  });
  const request = new HttpRequest({
    method: 'GET',
    protocol: endpoint.protocol,
    hostname: endpoint.hostname,
    ...(endpoint.port ? { port: Number(endpoint.port) } : {}),
    path: endpoint.pathname || '/',
    query: { Action: 'GetCallerIdentity', Version: '2011-06-15' },
    headers: { host: endpoint.host, [CLUSTER_ID_HEADER]: opts.clusterName },
  });
  const signed = await signer.presign(request, { signingDate: now, expiresIn: PRESIGN_EXPIRES_SECONDS });
  const url = `${endpoint.protocol}//${endpoint.host}${signed.path}?${buildQueryString(signed.query ?? {})}`;
  let expiresAt = now.getTime() + TOKEN_LIFETIME_MS;
  if (creds.expiration && creds.expiration.getTime() < expiresAt) expiresAt = creds.expiration.getTime();
  return { token: EKS_TOKEN_PREFIX + Buffer.from(url, 'utf8').toString('base64url'), expiresAt: new Date(expiresAt) };
}

/** Options of {@link eksTokenSource}: those of {@link eksToken}, with a clock instead of a fixed time. */
export interface EksTokenSourceOptions extends Omit<EksTokenOptions, 'now'> {
  /** Clock used both as signing time and to decide when to refresh; default `() => new Date()`. */
  now?: () => Date;
  /** Refresh this many ms before expiry; default {@link REFRESH_BEFORE_MS}. */
  refreshBeforeMs?: number;
}

/**
 * A cached token supplier for one cluster: returns the cached token until `refreshBeforeMs` before it expires, then
 * presigns a new one. Concurrent callers share one presign. If a refresh fails while the cached token is still
 * within its lifetime, the cached token is returned (and the next call tries again); otherwise the error is thrown.
 */
export function eksTokenSource(opts: EksTokenSourceOptions): () => Promise<EksToken> {
  const clock = opts.now ?? (() => new Date());
  const refreshBefore = opts.refreshBeforeMs ?? REFRESH_BEFORE_MS;
  let cached: EksToken | undefined;
  let inFlight: Promise<EksToken> | undefined;
  const tokenOpts: EksTokenOptions = { clusterName: opts.clusterName, region: opts.region };
  if (opts.credentials) tokenOpts.credentials = opts.credentials;
  if (opts.stsEndpoint) tokenOpts.stsEndpoint = opts.stsEndpoint;
  return async () => {
    const t = clock().getTime();
    if (cached && t < cached.expiresAt.getTime() - refreshBefore) return cached;
    inFlight ??= eksToken({ ...tokenOpts, now: new Date(t) })
      .then((tok) => {
        cached = tok;
        return tok;
      })
      .finally(() => {
        inFlight = undefined;
      });
    try {
      return await inFlight;
    } catch (err) {
      if (cached && clock().getTime() < cached.expiresAt.getTime()) return cached;
      throw err;
    }
  };
}

/** What {@link describeEksCluster} returns. */
export interface EksClusterInfo {
  /** Cluster ARN, when EKS returned it. */
  arn?: string;
  /** API server URL (`https://<id>.<suffix>.<region>.eks.amazonaws.com`). */
  endpoint: string;
  /** Base64-encoded PEM of the cluster CA (as in a kubeconfig's `certificate-authority-data`). */
  caData: string;
  /**
   * Whether the `audit` control-plane log type is enabled (`cluster.logging.clusterLogging`, see
   * {@link eksAuditLoggingEnabled}); undefined when EKS returned no logging setup.
   */
  auditLogging?: boolean;
}

/**
 * Whether an EKS cluster's `audit` control-plane log type is enabled, from a `DescribeCluster` response's `logging`
 * (`{clusterLogging: [{types: [...], enabled}]}`,
 * https://docs.aws.amazon.com/eks/latest/APIReference/API_DescribeCluster.html). Undefined when the response has no
 * logging setup at all. Pure.
 */
export function eksAuditLoggingEnabled(logging: unknown): boolean | undefined {
  const setups = (logging as { clusterLogging?: unknown } | null | undefined)?.clusterLogging;
  if (!Array.isArray(setups)) return undefined;
  return setups.some((s) => {
    const o = s as { types?: unknown; enabled?: unknown } | null;
    return o?.enabled === true && Array.isArray(o.types) && o.types.includes('audit');
  });
}

/** Options of {@link describeEksCluster}. */
export interface DescribeEksClusterOptions {
  clusterName: string;
  region: string;
  /** Client to use (tests point one at a loopback fake with `endpoint`); default a new `EKSClient({region, credentials})`, destroyed after. */
  eksClient?: EKSClient;
  credentials?: AwsCredentialIdentity | AwsCredentialIdentityProvider;
  /** Aborts the request (e.g. `AbortSignal.timeout(ms)`); an aborted request throws as any other failure does. */
  abortSignal?: AbortSignal;
}

const PERMISSION = 'eks:DescribeCluster';

/**
 * Read a cluster's API endpoint and CA with EKS `DescribeCluster` (`GET /clusters/<name>`).
 *
 * @throws Error naming the cluster, the region and the IAM permission `eks:DescribeCluster` when EKS answers
 *   `AccessDeniedException` or `ResourceNotFoundException`; an Error `cannot describe EKS cluster …: <why>` for any
 *   other failure (credentials, network, throttling after the SDK's retries); and an Error when the cluster has no
 *   endpoint or CA yet (e.g. status `CREATING`).
 */
export async function describeEksCluster(opts: DescribeEksClusterOptions): Promise<EksClusterInfo> {
  const { clusterName, region } = opts;
  validName('cluster name', clusterName);
  validName('region', region);
  const client = opts.eksClient ?? new EKSClient({ region, credentials: opts.credentials ?? defaultAwsCredentials() });
  const where = `EKS cluster "${clusterName}" in region ${region}`;
  try {
    const out = await client.send(new DescribeClusterCommand({ name: clusterName }), opts.abortSignal ? { abortSignal: opts.abortSignal } : {});
    const c = out.cluster;
    const endpoint = c?.endpoint;
    const caData = c?.certificateAuthority?.data;
    if (!endpoint || !caData) {
      throw new TokenwatchError(
        ErrorCode.EksAuthFailed,
        `${where} has no API server ${!endpoint ? 'endpoint' : 'certificate authority'} yet (status ${c?.status ?? 'unknown'})`,
      );
    }
    const auditLogging = eksAuditLoggingEnabled(c.logging);
    return { ...(c.arn ? { arn: c.arn } : {}), endpoint, caData, ...(auditLogging !== undefined ? { auditLogging } : {}) };
  } catch (err) {
    if (err instanceof AccessDeniedException || (err instanceof Error && err.name === 'AccessDeniedException')) {
      throw new TokenwatchError(
        ErrorCode.EksAuthFailed,
        `cannot read ${where}: access denied (${err.message}); the AWS identity needs IAM permission ${PERMISSION} ` +
          `on arn:aws:eks:${region}:<account>:cluster/${clusterName}`,
        { cause: err },
      );
    }
    if (err instanceof ResourceNotFoundException || (err instanceof Error && err.name === 'ResourceNotFoundException')) {
      throw new TokenwatchError(
        ErrorCode.EksAuthFailed,
        `${where} not found (${err.message}); check kubernetes.eks.clusterName and region ` +
          `(tokenwatch calls ${PERMISSION} on it)`,
        { cause: err },
      );
    }
    if (isTokenwatchError(err, ErrorCode.EksAuthFailed)) throw err; // ours, from the try above
    throw new TokenwatchError(ErrorCode.EksAuthFailed, `cannot describe ${where} (${PERMISSION}): ${errorText(err)}`, { cause: err });
  } finally {
    if (!opts.eksClient) client.destroy();
  }
}

/** Options of {@link eksKubeConfig}. */
export interface EksKubeConfigOptions {
  clusterName: string;
  region: string;
  /** EKS client for `DescribeCluster` (default: a new one for `region` with `credentials`). */
  eksClient?: EKSClient;
  /** Credentials for tokens and the default EKS client; default the SDK default chain ({@link defaultAwsCredentials}). */
  credentials?: AwsCredentialIdentity | AwsCredentialIdentityProvider;
  /** API server URL to use instead of `cluster.endpoint` (e.g. a tunnel); the CA from DescribeCluster still applies. */
  endpointOverride?: string;
  /** Called with what `DescribeCluster` returned (e.g. for its audit logging setup), before the config is built. */
  onClusterInfo?: (info: EksClusterInfo) => void;
  /** Clock for token signing and refresh; default `() => new Date()`. */
  now?: () => Date;
  /** STS base URL for tokens; default {@link defaultStsEndpoint}(region). */
  stsEndpoint?: string;
  /**
   * Tests only: accept an `http://` API server (client-node then needs `skipTLSVerify`). Without it an `http://`
   * endpoint is an error; `https://` endpoints always verify TLS against the cluster CA.
   */
  insecureHttpForTests?: boolean;
}

type Authenticator = Parameters<KubeConfig['addAuthenticator']>[0];

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null;
}

/**
 * Build a client-node 1.4 `KubeConfig` for an EKS cluster: server and CA from `DescribeCluster`, and a user whose
 * bearer token is presigned from AWS credentials and refreshed one minute before it expires (see the module doc).
 * Context name = cluster name = user name = the cluster ARN (as `aws eks update-kubeconfig` names them), or
 * `eks:<region>:<clusterName>` when EKS gave no ARN; no namespace is set.
 *
 * @throws what {@link describeEksCluster} throws; Error when the endpoint is not `https://` (unless
 *   {@link EksKubeConfigOptions.insecureHttpForTests}) or is not a URL. Token errors surface later, on the request
 *   that needed the token, as a client-node request error.
 */
export async function eksKubeConfig(opts: EksKubeConfigOptions): Promise<KubeConfig> {
  const { clusterName, region } = opts;
  const info = await describeEksCluster(opts);
  opts.onClusterInfo?.(info);
  const server = opts.endpointOverride ?? info.endpoint;
  let protocol: string;
  try {
    protocol = new URL(server).protocol;
  } catch {
    throw new TokenwatchError(ErrorCode.EksAuthFailed, `EKS cluster "${clusterName}" in region ${region}: API server endpoint is not a URL: ${server}`);
  }
  if (protocol !== 'https:' && !(protocol === 'http:' && opts.insecureHttpForTests)) {
    throw new TokenwatchError(ErrorCode.EksAuthFailed, `EKS cluster "${clusterName}" in region ${region}: API server endpoint must be https, got ${server}`);
  }
  const tokens = eksTokenSource({
    clusterName,
    region,
    ...(opts.credentials ? { credentials: opts.credentials } : {}),
    ...(opts.now ? { now: opts.now } : {}),
    ...(opts.stsEndpoint ? { stsEndpoint: opts.stsEndpoint } : {}),
  });
  const authenticator: Authenticator = {
    isAuthProvider(user: User): boolean {
      const p: unknown = user.authProvider;
      return (
        isRecord(p) &&
        p['name'] === EKS_AUTH_PROVIDER &&
        isRecord(p['config']) &&
        p['config']['clusterName'] === clusterName &&
        p['config']['region'] === region
      );
    },
    async applyAuthentication(_user, reqOpts): Promise<void> {
      const { token } = await tokens();
      const headers = (reqOpts.headers ??= {});
      headers['Authorization'] = `Bearer ${token}`;
    },
  };
  const name = info.arn ?? `eks:${region}:${clusterName}`;
  const kc = new KubeConfig();
  kc.addAuthenticator(authenticator);
  kc.loadFromOptions({
    clusters: [{ name, server, caData: info.caData, skipTLSVerify: protocol === 'http:' }],
    users: [{ name, authProvider: { name: EKS_AUTH_PROVIDER, config: { clusterName, region } } }],
    contexts: [{ name, cluster: name, user: name }],
    currentContext: name,
  });
  return kc;
}
