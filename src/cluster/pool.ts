/**
 * Keep-alive connection pools per cluster for every call made through a client-node 2 `KubeConfig`.
 *
 * client-node 2 sends requests with undici's `fetch` and a dispatcher it builds in `KubeConfig.applySecurityAuthentication`
 * (`dist/config.js`): whenever the cluster has TLS options (a CA, a client certificate, `skipTLSVerify`) it builds a
 * new `undici.Agent` per request (`createDispatcher` → `new Agent({connect})`), and a new Agent means a new TCP and
 * TLS connection per request. Only without TLS options does it fall back to undici's global, pooled dispatcher.
 *
 * {@link poolConnections} makes a KubeConfig reuse one dispatcher per distinct set of dispatcher options (server,
 * CA, client certificate, proxy — `createDispatcherOptions`, which client-node exposes for exactly this mapping), so
 * every API client, `Watch` and the watch cache made from that KubeConfig share one keep-alive pool (undici's Agent:
 * one connection pool per origin; idle connections close after undici's `keepAliveTimeout`, 4 s by default, or the
 * server's `Keep-Alive` hint — https://undici.nodejs.org/#/docs/api/Client.md). When the options change (a rotated
 * client certificate), a new pool is made and the previous one closed once its requests finish.
 */
import { createHash } from 'node:crypto';
import type { KubeConfig } from '@kubernetes/client-node';

/** What client-node's private `createDispatcher(cluster, agentOptions)` returns (an undici Dispatcher, or none). */
type MakeDispatcher = (cluster: unknown, agentOptions: unknown) => { close(): Promise<void> } | undefined;

/** The KubeConfig members {@link poolConnections} wraps (private in client-node's typings, present in its code). */
interface DispatcherFactory {
  createDispatcher?: MakeDispatcher;
  createDispatcherOptions(cluster: unknown, agentOptions: unknown): unknown;
}

const POOLED = Symbol('tokenwatch.pooledConnections');

/** Stable digest of dispatcher options (Buffers as base64), so equal options share one pool. */
function optionsKey(opts: unknown): string {
  const text = JSON.stringify(opts, (_k, v: unknown) => {
    if (v && typeof v === 'object' && (v as { type?: unknown }).type === 'Buffer' && Array.isArray((v as { data?: unknown }).data)) {
      return Buffer.from((v as { data: number[] }).data).toString('base64');
    }
    return v;
  });
  return createHash('sha256').update(text ?? '').digest('hex');
}

/**
 * Make every request through `kc` reuse one keep-alive connection pool (see the module doc). Idempotent; returns `kc`.
 * @throws TypeError when this client-node version builds dispatchers differently (a test pins the behaviour).
 */
export function poolConnections(kc: KubeConfig): KubeConfig {
  const f = kc as unknown as DispatcherFactory & { [POOLED]?: true };
  if (f[POOLED]) return kc;
  const original = f.createDispatcher;
  if (typeof original !== 'function' || typeof f.createDispatcherOptions !== 'function') {
    throw new TypeError('@kubernetes/client-node KubeConfig has no createDispatcher/createDispatcherOptions: cannot pool connections');
  }
  let current: { key: string; dispatcher: ReturnType<MakeDispatcher> } | undefined;
  f.createDispatcher = (cluster, agentOptions) => {
    const key = optionsKey(f.createDispatcherOptions(cluster, agentOptions));
    if (current?.key === key) return current.dispatcher;
    const previous = current?.dispatcher;
    current = { key, dispatcher: original.call(kc, cluster, agentOptions) };
    void previous?.close().catch(() => undefined); // graceful: in-flight requests finish first
    return current.dispatcher;
  };
  f[POOLED] = true;
  return kc;
}
