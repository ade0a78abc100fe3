/**
 * Reads the API server's `GET /metrics` through a client-node `KubeConfig` (its server, CA, client certificate and
 * bearer token via `applyToHTTPSOptions`, so in-cluster, kubeconfig and EKS access all work as for the other calls).
 *
 * RBAC: a non-resource URL, `nonResourceURLs: ["/metrics"]`, verb `get` (Kubernetes docs "Using RBAC
 * Authorization"), granted by the reader ClusterRole (`NON_RESOURCE_CALLS` in `test/manifests/rbac-calls.ts`, which the RBAC test checks).
 * On EKS this reaches the control plane's API-server metrics; behind its load balancer each request may reach a
 * different replica (see `token-metrics.ts`).
 */
import { ErrorCode, TokenwatchError } from '../errors.js';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest, type RequestOptions } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';

/** A source of `/metrics` text for one cluster. */
export interface MetricsScraper {
  /**
   * Returns the Prometheus text of one `/metrics` read.
   * @throws {MetricsScrapeError} on network errors, timeouts, non-200 answers (403 names the missing permission).
   */
  scrape(signal?: AbortSignal): Promise<string>;
}

/** A failed `/metrics` read; `status` is the HTTP status when there was an answer. */
export class MetricsScrapeError extends TokenwatchError {
  constructor(
    message: string,
    readonly status?: number,
    options?: { cause?: unknown },
  ) {
    super(ErrorCode.MetricsScrapeFailed, message, options);
    this.name = 'MetricsScrapeError';
  }
}

/** Options of {@link KubeMetricsScraper}. */
export interface KubeMetricsScraperOptions {
  /** Per-request timeout, ms (default 15,000). */
  timeoutMs?: number;
  /** Largest body accepted, bytes (default 32 MiB; a kube-apiserver `/metrics` is typically a few MiB). */
  maxBytes?: number;
}

/** {@link MetricsScraper} over the cluster's `KubeConfig`. */
export class KubeMetricsScraper implements MetricsScraper {
  constructor(
    private readonly kc: KubeConfig,
    private readonly opts: KubeMetricsScraperOptions = {},
  ) {}

  async scrape(signal?: AbortSignal): Promise<string> {
    const cluster = this.kc.getCurrentCluster();
    if (!cluster) throw new MetricsScrapeError('no current cluster in the kubeconfig');
    const url = new URL('/metrics', cluster.server.endsWith('/') ? cluster.server : `${cluster.server}/`);
    const options: RequestOptions = { method: 'GET', headers: { accept: 'text/plain;version=0.0.4' } };
    await this.kc.applyToHTTPSOptions(options);
    const timeoutMs = this.opts.timeoutMs ?? 15_000;
    const maxBytes = this.opts.maxBytes ?? 32 * 1024 * 1024;
    const send = url.protocol === 'http:' ? httpRequest : httpsRequest;
    return new Promise<string>((resolve, reject) => {
      const req = send(url, { ...options, signal }, (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > maxBytes) {
            req.destroy(new MetricsScrapeError(`GET /metrics: answer larger than ${maxBytes} bytes`));
            return;
          }
          chunks.push(c);
        });
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          const status = res.statusCode ?? 0;
          if (status === 200) return resolve(body);
          if (status === 403) {
            return reject(new MetricsScrapeError('GET /metrics forbidden: grant nonResourceURLs ["/metrics"] verb get (tokenwatch-reader ClusterRole)', 403));
          }
          if (status === 401) return reject(new MetricsScrapeError('GET /metrics unauthorized (401): the credentials were rejected', 401));
          reject(new MetricsScrapeError(`GET /metrics answered HTTP ${status}`, status));
        });
        res.on('error', reject);
      });
      req.setTimeout(timeoutMs, () => req.destroy(new MetricsScrapeError(`GET /metrics timed out after ${timeoutMs} ms`)));
      req.on('error', (err) => reject(err instanceof MetricsScrapeError ? err : new MetricsScrapeError(`GET /metrics failed: ${err.message}`)));
      req.end();
    });
  }
}
