/**
 * A hung Kubernetes API server — a loopback server that accepts TCP connections and never answers — fails every read
 * of a poll after its timeout instead of holding the poll: cluster state (client-node), the probe ConfigMap list and
 * the API server's `/metrics`.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeClusterState } from '../../src/cluster/kube.js';
import { KubeMetricsScraper } from '../../src/sources/apiserver-metrics.js';
import { KubeProbeReports } from '../../src/probe/objects.js';

let server: Server;
const sockets = new Set<Socket>();
let kc: KubeConfig;

beforeAll(async () => {
  server = createServer((s) => {
    sockets.add(s); // read nothing back, write nothing: a black hole
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'hung', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'hung-token-value' }],
    contexts: [{ name: 'hung', cluster: 'hung', user: 'u' }],
    currentContext: 'hung',
  });
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise<void>((r) => server.close(() => r()));
});

describe('a black-holed API server', () => {
  it('cluster state reads fail with a timeout naming the call', async () => {
    const state = new KubeClusterState(kc, { timeoutMs: 300 });
    await expect(state.getPod('default', 'web-1')).rejects.toThrow('request timed out after 300 ms (get pods in namespace default)');
    expect(sockets.size).toBeGreaterThan(0); // the connection was accepted: a hang, not a refusal
  });

  it('the probe ConfigMap list fails with a timeout, without the token', async () => {
    const err = await new KubeProbeReports(kc, 'tokenwatch-probe', undefined, 300).read().then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err?.message).toBe('listing probe ConfigMaps in namespace tokenwatch-probe timed out after 300 ms');
    expect(String(err?.message)).not.toContain('hung-token-value');
  });

  it('the /metrics scrape fails with a timeout', async () => {
    await expect(new KubeMetricsScraper(kc, { timeoutMs: 300 }).scrape()).rejects.toThrow('GET /metrics timed out after 300 ms');
  });
});
