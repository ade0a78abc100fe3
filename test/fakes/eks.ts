/**
 * A fake Amazon EKS control-plane API on loopback, for tests. Speaks the REST JSON protocol `@aws-sdk/client-eks` uses
 * for `DescribeCluster` (`GET /clusters/<name>`, JSON body `{"cluster": {…}}`; errors with an `x-amzn-errortype`
 * header, https://docs.aws.amazon.com/eks/latest/APIReference/API_DescribeCluster.html). Request signatures are
 * accepted and ignored. Register replies per cluster name in {@link FakeEks.clusters}.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One reply of the fake: HTTP status, extra headers, JSON body. */
export interface EksReply {
  status: number;
  headers?: Record<string, string>;
  body: unknown;
}
/** A request the fake received. */
export interface EksRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
}

/** A running fake. */
export interface FakeEks {
  url: string;
  requests: EksRequest[];
  clusters: Map<string, EksReply>;
  close(): Promise<void>;
}

/** `GET /clusters/<name>` → the reply registered for that name, else ResourceNotFoundException as EKS sends it. */
export async function startFakeEks(): Promise<FakeEks> {
  const requests: EksRequest[] = [];
  const clusters = new Map<string, EksReply>();
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const path = new URL(req.url ?? '/', 'http://127.0.0.1').pathname;
      requests.push({ method: req.method ?? '', path, headers: req.headers });
      const m = /^\/clusters\/([^/]+)$/.exec(path);
      const name = m?.[1] ? decodeURIComponent(m[1]) : '';
      const reply: EksReply = (req.method === 'GET' && clusters.get(name)) || {
        status: 404,
        headers: { 'x-amzn-errortype': 'ResourceNotFoundException:http://internal.amazon.com/coral/com.amazonaws.eks/' },
        body: { message: `No cluster found for name: ${name}.` },
      };
      res.writeHead(reply.status, { 'content-type': 'application/json', ...(reply.headers ?? {}) });
      res.end(JSON.stringify(reply.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    clusters,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

