/**
 * A loopback Google Compute Engine metadata server: what `google-auth-library`'s Application Default Credentials read
 * on GKE (Workload Identity) and GCE — the project id and an OAuth access token of the default service account — so
 * the real library runs against it. Point the library at it with the environment variables `gcp-metadata` reads
 * (https://github.com/googleapis/gcp-metadata#environment-variables): `GCE_METADATA_HOST=127.0.0.1:<port>` and
 * `METADATA_SERVER_DETECTION=assume-present` (skips the detection ping), as {@link FakeGceMetadata.env} gives them.
 *
 * Protocol (https://cloud.google.com/compute/docs/metadata/querying-metadata): requests must carry
 * `Metadata-Flavor: Google` (else 403), answers carry it too; paths under `/computeMetadata/v1/`:
 * `project/project-id` (text), `instance/service-accounts/default/token` (JSON `{access_token, expires_in,
 * token_type}`), `instance/service-accounts/default/email`, `universe/universe-domain`; anything else 404.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Options of {@link startFakeGceMetadata}. */
export interface FakeGceMetadataOptions {
  /** The project id answered. Default `tokenwatch-fake`. */
  projectId?: string;
  /** The access token answered (the Cloud Logging fake accepts it). Default `ya29.fake-token`. */
  accessToken?: string;
  /** Token lifetime answered, s. Default 3,599. */
  expiresIn?: number;
}

/** A running fake metadata server. */
export interface FakeGceMetadata {
  /** `127.0.0.1:<port>`, the value of `GCE_METADATA_HOST`. */
  host: string;
  /** The environment variables that point `google-auth-library` here. */
  env: { GCE_METADATA_HOST: string; METADATA_SERVER_DETECTION: 'assume-present' };
  /** Access tokens handed out so far. */
  tokensIssued(): number;
  close(): Promise<void>;
}

/** Starts the fake on 127.0.0.1 (port `port`, default any free one). */
export async function startFakeGceMetadata(opts: FakeGceMetadataOptions = {}, port = 0): Promise<FakeGceMetadata> {
  const projectId = opts.projectId ?? 'tokenwatch-fake';
  const accessToken = opts.accessToken ?? 'ya29.fake-token';
  let issued = 0;
  const server: Server = createServer((req, res) => {
    res.setHeader('Metadata-Flavor', 'Google');
    if (req.headers['metadata-flavor'] !== 'Google') {
      res.writeHead(403, { 'content-type': 'text/plain' }).end('Missing Metadata-Flavor:Google header.');
      return;
    }
    const path = new URL(req.url ?? '/', 'http://metadata').pathname.replace(/^\/computeMetadata\/v1\//, '');
    const text = (body: string): void => void res.writeHead(200, { 'content-type': 'application/text' }).end(body);
    switch (path) {
      case 'project/project-id':
        return text(projectId);
      case 'instance/service-accounts/default/email':
        return text(`tokenwatch@${projectId}.iam.gserviceaccount.com`);
      case 'universe/universe-domain':
        return text('googleapis.com');
      case 'instance/service-accounts/default/token':
        issued++;
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ access_token: accessToken, expires_in: opts.expiresIn ?? 3599, token_type: 'Bearer' }));
        return;
      default:
        res.writeHead(404, { 'content-type': 'text/plain' }).end('Not Found');
    }
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    host,
    env: { GCE_METADATA_HOST: host, METADATA_SERVER_DETECTION: 'assume-present' },
    tokensIssued: () => issued,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
