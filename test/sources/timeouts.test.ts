/**
 * AWS calls against a black-holed loopback server (accepts TCP connections, never answers): each HTTP attempt ends
 * after the SDK request handler's timeout, and the error names the call, never a secret. CloudWatch Logs
 * (FilterLogEvents, Logs Insights StartQuery) through CloudWatchSource; EKS DescribeCluster through
 * describeEksCluster's default client (endpoint from `AWS_ENDPOINT_URL_EKS`, the SDK's service-specific endpoint).
 */
process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] = 'true';

import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEksCluster } from '../../src/cluster/eks-auth.js';
import { CloudWatchSource } from '../../src/sources/cloudwatch.js';
import { emptyStats } from '../../src/sources/types.js';
import { drain } from './events.js';

const SECRET = 'wJalrXUtnFEMI-black-hole-secret';
const credentials = { accessKeyId: 'AKIDBLACKHOLE', secretAccessKey: SECRET };
let server: Server;
let url: string;
let accepted = 0;
const sockets = new Set<Socket>();

beforeAll(async () => {
  server = createServer((s) => {
    accepted++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise<void>((r) => server.close(() => r()));
});

function source(mode: 'filter' | 'insights'): CloudWatchSource {
  return new CloudWatchSource({
    region: 'us-east-1',
    logGroup: '/aws/eks/hung/cluster',
    streamPrefix: 'kube-apiserver-audit-',
    endpoint: url,
    credentials,
    mode,
    overlapMs: 0,
    maxAttempts: 2,
    sdkRetryDelayMs: 1,
    retry: { baseDelayMs: 1, maxDelayMs: 1, maxRetries: 0, budgetMs: 1 },
    requestTimeoutMs: 300,
  });
}

describe('AWS calls against a black hole', () => {
  it.each([
    ['filter', 'CloudWatch Logs FilterLogEvents on log group \'/aws/eks/hung/cluster\' (us-east-1) failed: ETIMEDOUT: '],
    ['insights', 'CloudWatch Logs Logs Insights query on log group \'/aws/eks/hung/cluster\' (us-east-1) failed: ETIMEDOUT: '],
  ] as const)('CloudWatch %s mode: each attempt times out; the error names the call', { timeout: 120_000 }, async (mode, text) => {
    const before = accepted;
    const src = source(mode);
    try {
      const err = (await drain(src.poll(undefined, { now: Date.now(), lookbackMs: 3_600_000, stats: emptyStats() })).catch((e: unknown) => e)) as Error;
      expect(err.message).toContain(text);
      expect(err.message).toContain('exceeded the configured 300 ms requestTimeout'); // the SDK handler's own words
      expect(err.message).not.toContain(SECRET);
      expect(accepted - before).toBe(2); // both SDK attempts connected and were cut off: a hang, not a refusal
    } finally {
      src.close();
    }
  });

  it('EKS DescribeCluster: the default client times out; the error names the cluster and the call', { timeout: 120_000 }, async () => {
    const saved = process.env['AWS_ENDPOINT_URL_EKS'];
    process.env['AWS_ENDPOINT_URL_EKS'] = url;
    try {
      const err = (await describeEksCluster({ clusterName: 'hung', region: 'us-east-1', credentials, requestTimeoutMs: 300 }).catch((e: unknown) => e)) as Error;
      expect(err.message).toMatch(/^cannot describe EKS cluster "hung" in region us-east-1 \(eks:DescribeCluster\): TimeoutError: /);
      expect(err.message).not.toContain(SECRET);
    } finally {
      if (saved === undefined) delete process.env['AWS_ENDPOINT_URL_EKS'];
      else process.env['AWS_ENDPOINT_URL_EKS'] = saved;
    }
  });
});
