/**
 * The test side of the audit webhook: a self-signed certificate made with openssl, and a client that sends what the
 * API server's webhook backend sends (k8s.io/apiserver plugin/pkg/audit/webhook: a batched `audit.k8s.io/v1`
 * `EventList` POSTed as `application/json`, with the webhook kubeconfig user's bearer token), over TLS on loopback.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';

/** A self-signed certificate for 127.0.0.1 (also usable as the CA that verifies it). */
export interface TestCert {
  certFile: string;
  keyFile: string;
  cert: Buffer;
  key: Buffer;
}

/** Makes a self-signed EC certificate (and key) for `IP:127.0.0.1` in `dir`, named `<name>.crt` / `<name>.key`. */
export function selfSignedCert(dir: string, name = 'server', cn = '127.0.0.1'): TestCert {
  const certFile = join(dir, `${name}.crt`);
  const keyFile = join(dir, `${name}.key`);
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2',
    '-subj', `/CN=${cn}`, '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', keyFile, '-out', certFile,
  ], { stdio: 'ignore' });
  return { certFile, keyFile, cert: readFileSync(certFile), key: readFileSync(keyFile) };
}

/** The body the webhook backend POSTs: the batch's events as an `EventList`. */
export function eventList(eventJsons: string[]): string {
  return JSON.stringify({ kind: 'EventList', apiVersion: 'audit.k8s.io/v1', metadata: {}, items: eventJsons.map((e) => JSON.parse(e) as unknown) });
}

/** Options of {@link postBatch}. */
export interface PostOptions {
  port: number;
  /** CA that verifies the server certificate (the kubeconfig's `certificate-authority`). */
  ca: Buffer;
  token?: string;
  /** Client certificate and key (the kubeconfig's `client-certificate` / `client-key`). */
  clientCert?: { cert: Buffer; key: Buffer };
  body: string | Buffer;
}

/** POSTs one batch as the API server does; resolves with the HTTP status and body. */
export function postBatch(o: PostOptions): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const body = typeof o.body === 'string' ? Buffer.from(o.body) : o.body;
    const req = request(
      {
        host: '127.0.0.1',
        port: o.port,
        method: 'POST',
        path: '/',
        ca: o.ca,
        ...(o.clientCert ? { cert: o.clientCert.cert, key: o.clientCert.key } : {}),
        agent: false,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, */*',
          'user-agent': 'kube-apiserver/v1.34.0 (linux/amd64) kubernetes/abcdef0',
          'content-length': String(body.length),
          ...(o.token !== undefined ? { authorization: `Bearer ${o.token}` } : {}),
        },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, headers: res.headers }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
