/**
 * A loopback fake of the Microsoft Entra token endpoint for workload identity (the client-credentials grant with a
 * federated client assertion, https://learn.microsoft.com/entra/identity-platform/v2-oauth2-client-creds-grant-flow#third-case-access-token-request-with-a-federated-credential),
 * over HTTPS with a caller-given certificate: `POST /{tenant}/oauth2/v2.0/token`, form body `client_id`, `scope`,
 * `grant_type=client_credentials`, `client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer`,
 * `client_assertion` → `{"token_type":"Bearer","expires_in":3599,"access_token":"…"}`; a wrong client, tenant or
 * assertion → 400/401 `{"error","error_description":"AADSTS…"}` as Entra answers. Point `AZURE_AUTHORITY_HOST` (or
 * `audit.azure.authorityHost`) at {@link FakeEntraToken.authorityHost}.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';

/** One token request the fake received (the assertion is not kept). */
export interface FakeTokenRequest {
  tenant: string;
  clientId: string;
  scope: string;
  status: number;
}

/** A running fake. */
export interface FakeEntraToken {
  /** `https://127.0.0.1:<port>` */
  authorityHost: string;
  requests: FakeTokenRequest[];
  /** Whether `token` is one this fake issued. */
  issued(token: string): boolean;
  close(): Promise<void>;
}

/** Options of {@link startFakeEntraToken}. */
export interface FakeEntraTokenOptions {
  cert: Buffer | string;
  key: Buffer | string;
  tenantId: string;
  clientId: string;
  /** The federated token (ServiceAccount token) the assertion must equal; default any non-empty assertion. */
  assertion?: string;
  /** `expires_in` of issued tokens, s. Default 3599. */
  expiresInSeconds?: number;
}

/** Starts the fake on 127.0.0.1, an ephemeral port. */
export async function startFakeEntraToken(opts: FakeEntraTokenOptions): Promise<FakeEntraToken> {
  const requests: FakeTokenRequest[] = [];
  const tokens = new Set<string>();
  const server: Server = createServer({ cert: opts.cert, key: opts.key }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const send = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
        res.end(JSON.stringify(body));
      };
      const m = /^\/([^/]+)\/oauth2\/v2\.0\/token$/.exec(req.url ?? '');
      if (req.method !== 'POST' || !m) return send(404, { error: 'not_found', error_description: `no route ${req.method} ${req.url}` });
      const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
      const tenant = decodeURIComponent(m[1]!);
      const clientId = form.get('client_id') ?? '';
      const scope = form.get('scope') ?? '';
      const fail = (status: number, error: string, description: string) => {
        requests.push({ tenant, clientId, scope, status });
        send(status, { error, error_description: description, error_codes: [Number(/AADSTS(\d+)/.exec(description)?.[1] ?? 0)] });
      };
      if (tenant !== opts.tenantId) return fail(400, 'invalid_request', `AADSTS90002: Tenant '${tenant}' not found.`);
      if (form.get('grant_type') !== 'client_credentials') return fail(400, 'unsupported_grant_type', 'AADSTS70003: The app requested an unsupported grant type.');
      if (form.get('client_assertion_type') !== 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer') return fail(400, 'invalid_request', 'AADSTS90014: The required field client_assertion_type is missing.');
      if (clientId !== opts.clientId) return fail(400, 'unauthorized_client', `AADSTS700016: Application with identifier '${clientId}' was not found in the directory.`);
      const assertion = form.get('client_assertion') ?? '';
      if (!assertion || (opts.assertion !== undefined && assertion !== opts.assertion)) {
        return fail(401, 'invalid_client', 'AADSTS700213: No matching federated identity record found for presented assertion subject.');
      }
      if (!scope.endsWith('/.default')) return fail(400, 'invalid_scope', `AADSTS1002012: The provided value for scope ${scope} is not valid.`);
      const token = `fake-entra-${randomBytes(12).toString('hex')}`;
      tokens.add(token);
      requests.push({ tenant, clientId, scope, status: 200 });
      send(200, { token_type: 'Bearer', expires_in: opts.expiresInSeconds ?? 3599, ext_expires_in: opts.expiresInSeconds ?? 3599, access_token: token });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    authorityHost: `https://127.0.0.1:${port}`,
    requests,
    issued: (t) => tokens.has(t),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
