/**
 * Microsoft Entra workload identity: the client-credentials token exchange with a federated token (the projected
 * ServiceAccount token the AKS workload-identity webhook mounts), as `@azure/identity`'s `WorkloadIdentityCredential`
 * does, in one small module instead of that package (34 MB with MSAL; docs/live-mode.md#aks-log-analytics says what
 * it would add).
 *
 * The exchange (https://learn.microsoft.com/entra/identity-platform/v2-oauth2-client-creds-grant-flow#third-case-access-token-request-with-a-federated-credential):
 * `POST {authorityHost}/{tenantId}/oauth2/v2.0/token`, form body `client_id`, `scope`, `grant_type=client_credentials`,
 * `client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer`, `client_assertion=<the file's
 * token>`; answer `{"access_token","expires_in"(s),"token_type":"Bearer"}`, or `{"error","error_description"}` (an
 * `AADSTS…` code) with 400/401. The webhook sets `AZURE_CLIENT_ID`, `AZURE_TENANT_ID`, `AZURE_FEDERATED_TOKEN_FILE` and
 * `AZURE_AUTHORITY_HOST` in the pod (https://azure.github.io/azure-workload-identity/docs/topics/service-account-labels-and-annotations.html).
 *
 * The token file is read again for every exchange (the kubelet rotates it). Tokens are cached until 5 minutes before
 * they expire. Neither the federated token nor an access token ever appears in an error message.
 */
import { readFile } from 'node:fs/promises';
import { rootCertificates } from 'node:tls';
import { Agent, fetch } from 'undici';
import { ErrorCode, TokenwatchError } from '../errors.js';

/** The access token shape `@azure/core-auth`'s `TokenCredential.getToken` returns. */
export interface AccessToken {
  token: string;
  /** epoch ms */
  expiresOnTimestamp: number;
}

/** Settings of {@link WorkloadIdentityCredential}. */
export interface WorkloadIdentitySettings {
  clientId: string;
  tenantId: string;
  /** The federated (projected ServiceAccount) token file. */
  tokenFile: string;
  /** Default `https://login.microsoftonline.com`. */
  authorityHost?: string;
  /** Extra PEM CA certificates trusted besides the system's. */
  ca?: Buffer;
  /** Clock, epoch ms. Default `Date.now`. */
  clock?: () => number;
  /** Per exchange, ms. Default 30,000. */
  timeoutMs?: number;
}

/** Default Entra authority host (Azure public cloud). */
export const DEFAULT_AUTHORITY_HOST = 'https://login.microsoftonline.com';

/** Refresh this long before a token expires, ms. */
const REFRESH_BEFORE_MS = 5 * 60_000;

/**
 * The workload identity settings of the environment (`AZURE_CLIENT_ID`, `AZURE_TENANT_ID`, `AZURE_FEDERATED_TOKEN_FILE`,
 * `AZURE_AUTHORITY_HOST`), or the names of the missing variables.
 */
export function workloadIdentityFromEnv(env: NodeJS.ProcessEnv): { settings: WorkloadIdentitySettings; missing: [] } | { missing: string[] } {
  const names = ['AZURE_CLIENT_ID', 'AZURE_TENANT_ID', 'AZURE_FEDERATED_TOKEN_FILE'] as const;
  const missing = names.filter((n) => !env[n]);
  if (missing.length > 0) return { missing };
  return {
    settings: {
      clientId: env.AZURE_CLIENT_ID!,
      tenantId: env.AZURE_TENANT_ID!,
      tokenFile: env.AZURE_FEDERATED_TOKEN_FILE!,
      ...(env.AZURE_AUTHORITY_HOST ? { authorityHost: env.AZURE_AUTHORITY_HOST } : {}),
    },
    missing: [],
  };
}

/** A `TokenCredential` (`@azure/core-auth`) backed by the workload identity exchange; see the module docstring. */
export class WorkloadIdentityCredential {
  private readonly cache = new Map<string, AccessToken>();
  private readonly dispatcher: Agent | undefined;
  private readonly clock: () => number;

  constructor(private readonly s: WorkloadIdentitySettings) {
    this.dispatcher = s.ca ? new Agent({ connect: { ca: [...rootCertificates, s.ca.toString('utf8')] } }) : undefined;
    this.clock = s.clock ?? Date.now;
  }

  /**
   * An access token for `scopes` (one scope, e.g. `https://api.loganalytics.io/.default`).
   * @throws TokenwatchError (`source_failed`) naming the authority's error code and description when the exchange fails
   */
  async getToken(scopes: string | string[]): Promise<AccessToken> {
    const scope = Array.isArray(scopes) ? scopes.join(' ') : scopes;
    const hit = this.cache.get(scope);
    if (hit && hit.expiresOnTimestamp - REFRESH_BEFORE_MS > this.clock()) return hit;
    let assertion: string;
    try {
      assertion = (await readFile(this.s.tokenFile, 'utf8')).trim();
    } catch (err) {
      throw new TokenwatchError(ErrorCode.SourceFailed, `workload identity: cannot read the federated token file ${this.s.tokenFile}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, { cause: err });
    }
    const host = (this.s.authorityHost ?? DEFAULT_AUTHORITY_HOST).replace(/\/+$/, '');
    const url = `${host}/${encodeURIComponent(this.s.tenantId)}/oauth2/v2.0/token`;
    const body = new URLSearchParams({
      client_id: this.s.clientId,
      scope,
      grant_type: 'client_credentials',
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
      client_assertion: assertion,
    });
    let res;
    try {
      res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: body.toString(),
        signal: AbortSignal.timeout(this.s.timeoutMs ?? 30_000),
        ...(this.dispatcher ? { dispatcher: this.dispatcher } : {}),
      });
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new TokenwatchError(ErrorCode.SourceFailed, `workload identity: token request to ${host} failed: ${cause?.code ?? cause?.message ?? (err as Error).message}`, { cause: err });
    }
    const text = await res.text();
    let json: Record<string, unknown> = {};
    try {
      json = JSON.parse(text) as Record<string, unknown>;
    } catch {
      // not JSON: reported by status below
    }
    if (!res.ok || typeof json.access_token !== 'string') {
      const code = typeof json.error === 'string' ? json.error : `HTTP ${res.status}`;
      const desc = typeof json.error_description === 'string' ? `: ${json.error_description.split(/\r?\n/)[0]}` : '';
      throw new TokenwatchError(ErrorCode.SourceFailed, `workload identity: ${host} refused the token exchange for client ${this.s.clientId} (${code})${desc}; check the federated credential of the managed identity or app (issuer, subject system:serviceaccount:<namespace>:<name>, audience api://AzureADTokenExchange)`);
    }
    const expiresIn = Number(json.expires_in);
    const token: AccessToken = { token: json.access_token, expiresOnTimestamp: this.clock() + (Number.isFinite(expiresIn) && expiresIn > 0 ? expiresIn : 3600) * 1000 };
    this.cache.set(scope, token);
    return token;
  }

  /** Closes the dispatcher's sockets (only one this credential made for `ca`). */
  close(): void {
    void this.dispatcher?.close();
  }
}
