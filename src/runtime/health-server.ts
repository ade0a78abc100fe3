/**
 * Serve's health: the `/readyz` body of the health model (src/observability/health.ts; docs/live-mode.md "Health"), its
 * HTTP status, and the health/metrics HTTP listener (`/healthz`, `/readyz`, `/metrics`).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from '../config/types.js';
import { clusterAccessTexts, clusterVerdict, type Access } from '../observability/health.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { PollStatus } from '../store/index.js';
import type { BLIND_REASONS, BlindReason } from './blind.js';
import type { ClusterRuntime } from './build-cluster.js';
import type { ShardCoordinator } from './shard-coordinator.js';

/**
 * The body of `/readyz` (JSON), the health model's view (src/observability/health.ts; docs/live-mode.md "Health"):
 * - `status`: `ready` | `starting` | `stopping` | `store-unavailable`;
 * - `serves`: what this pod serves now — `slack` (an integration started: commands, buttons, alerts), `audit-webhook`
 *   (an audit webhook listener is up), `polls` (a cluster's audit source is not failing). The HTTP status is 503
 *   only while starting or stopping or when `serves` is empty, 200 otherwise ({@link readyzCode}): an unready pod
 *   leaves the Service, and the audit webhook shares it, so a Slack or store problem must not cost audit batches;
 * - `access`: per cluster, each access its poll needs (`audit`, `kubernetes`, `watchCache`, `slack`) in words:
 *   `… : ok`, or the failure with its start time (`Kubernetes API unreachable: connect ECONNREFUSED …, since 09:12
 *   UTC`), `pending`, `not used`. Scrubbed of secrets;
 * - `polls`: per cluster, `ok` | `degraded` | `pending`: `degraded` when any access of the cluster fails (a failed
 *   poll; a poll running longer than 3 × `poll.requestTimeout`; an unreachable or refusing Kubernetes API; a broken
 *   watch cache; Slack down) — a cluster whose access fails is never `ok`;
 * - `integrations`: per integration (`slack`), `ok` | `connected` | `disconnected` | `unavailable` (not reachable at
 *   start, retrying) | `failed` (could not start; `access` says why);
 * - `blind`: per cluster whose audit log cannot see stale tokens, the reason (a blind log never makes a pod unready).
 * The same states show in `/tokens status`, the Home tab and the `tokenwatch_access_failing` metric.
 */
export interface ReadinessBody {
  /**
   * `store-unavailable`: the shared store (PostgreSQL) cannot be reached; this replica polls nothing until it can, and
   * still answers Slack (saying so), so it stays in the Service (HTTP 200). Also when the SQLite store's worker thread
   * stopped (src/store/sqlite.ts): nothing is stored until a restart.
   */
  status: 'ready' | 'starting' | 'stopping' | 'store-unavailable';
  /** What the pod serves now; empty: nothing (HTTP 503). */
  serves: Array<'slack' | 'audit-webhook' | 'polls'>;
  polls: Record<string, 'ok' | 'degraded' | 'pending'>;
  /** Per cluster, per access (`audit`, `kubernetes`, `watchCache`, `slack`), its state in words. */
  access: Record<string, Record<Access, string>>;
  integrations: Record<string, string>;
  /**
   * Clusters whose audit log is blind (src/runtime/blind.ts), with the reason ({@link BLIND_REASONS}: e.g.
   * `eks-audit-log-off`, `no-read-access`, `aks-admin-only`, `no-events-for-polls`). Clusters that are not blind are absent.
   */
  blind: Record<string, BlindReason>;
  /**
   * With clusters shared out across replicas only: this replica's id; per cluster, the id of the replica that owns it
   * as last read (null: none right now; taken over within the ownership TTL); and per cluster its latest poll run in
   * the shared store, whichever replica ran it (`startedAt` ISO 8601 UTC; `status` `ok`, `degraded` (it failed) or
   * `running`), re-read every 6 heartbeats (30 s by default). A cluster another replica owns shows in `polls` from that shared run, not
   * as `pending`.
   */
  shards?: { replica: string; owners: Record<string, string | null>; lastPolls: Record<string, SharedPoll> };
}

/** A cluster's latest poll run in the shared store, as `/readyz` shows it (see {@link ReadinessBody.shards}). */
export interface SharedPoll {
  startedAt: string;
  status: 'ok' | 'degraded' | 'running';
}

/** The `/readyz` body now (see {@link ReadinessBody}). */
export function readinessOf(o: {
  phase: 'ready' | 'starting' | 'stopping';
  clusters: ReadonlyMap<string, ClusterRuntime>;
  /** The integrations started so far and their `/readyz` states (`integrations.ts`). */
  integrations: { running(): readonly unknown[]; states(): Record<string, string> };
  now: number;
  shards?: ShardCoordinator | undefined;
  /** With shards: each cluster's latest poll run in the shared store, as last read. */
  sharedPolls?: ReadonlyMap<string, PollStatus>;
  /** Why the store can run no statement any more (`SqlExecutor.failure`), or undefined. */
  storeFailure?: Error | undefined;
}): ReadinessBody {
  const sh = o.shards?.status();
  const lastPolls: Record<string, SharedPoll> = {};
  for (const [name, run] of o.sharedPolls ?? []) {
    if (o.clusters.has(name)) lastPolls[name] = { startedAt: new Date(run.startedAt).toISOString(), status: run.endedAt === null ? 'running' : run.error !== null ? 'degraded' : 'ok' };
  }
  const polls: ReadinessBody['polls'] = {};
  const access: ReadinessBody['access'] = {};
  let polling = false;
  for (const [name, rt] of o.clusters) {
    const shared = o.sharedPolls?.get(name);
    const a = rt.access(o.now);
    // A cluster another replica polls: its state is that replica's latest run (this replica's poller is idle for it).
    if (sh && sh.owners[name] !== sh.replica && shared) {
      polls[name] = shared.endedAt === null ? (shared.lastSuccessAt !== null ? 'ok' : 'pending') : shared.error !== null ? 'degraded' : 'ok';
      a.audit = polls[name] === 'degraded' ? { state: 'failing', problem: `: poll failed: ${shared.error ?? 'no reason recorded'}`, since: shared.startedAt } : polls[name] === 'ok' ? { state: 'ok', at: shared.startedAt } : { state: 'pending', detail: 'no poll yet' };
    } else polls[name] = rt.poller.health().status;
    // Never `ok` while an access of the cluster fails.
    if (clusterVerdict(a) === 'failing') polls[name] = 'degraded';
    access[name] = clusterAccessTexts(a, o.now);
    if (a.audit.state !== 'failing') polling = true;
  }
  const blind: ReadinessBody['blind'] = {};
  for (const [name, rt] of o.clusters) {
    const b = rt.blind.state(o.now);
    if (b.blind) blind[name] = b.reason;
  }
  // Clusters shared out across replicas: the shared store unreachable makes this replica poll nothing until it returns.
  // Or the SQLite store's worker thread stopped: nothing can be stored until a restart.
  const storeDown = sh?.error !== undefined || o.storeFailure !== undefined;
  const status = o.phase === 'ready' && storeDown ? 'store-unavailable' : o.phase;
  const serves: ReadinessBody['serves'] = [];
  if (o.integrations.running().length > 0) serves.push('slack');
  if ([...o.clusters.values()].some((rt) => rt.webhookPort !== undefined)) serves.push('audit-webhook');
  if (polling && !storeDown) serves.push('polls');
  return { status, serves, polls, access, integrations: o.integrations.states(), blind, ...(sh ? { shards: { replica: sh.replica, owners: sh.owners, lastPolls } } : {}) };
}

/** A listening health/metrics server. */
export interface HealthServer {
  /** The bound port. */
  port: number;
  /** Stops listening and drops open connections. */
  close(): Promise<void>;
}

/**
 * The HTTP status of `/readyz` for `body`: 503 while starting or stopping, and when the pod serves nothing at all
 * (`serves` empty: no Slack integration running, no audit webhook listener, no cluster whose audit source works — or
 * the store is unavailable); 200 otherwise, whatever else fails (docs/live-mode.md "Health"). Readiness decides whether
 * the Service routes requests to the pod
 * (https://kubernetes.io/docs/concepts/configuration/liveness-readiness-startup-probes/): the audit webhook shares the
 * pod's Service, so an unready pod would lose audit batches over a Slack or Kubernetes problem, and while the shared
 * database is down every replica is in the same state — 503 would take all of them out at once and Slack would get a
 * timeout instead of the answer that says the store is unavailable. What fails shows in the body, `/tokens status`
 * and the metrics instead. Liveness is `/healthz` (the process answers), which no outage fails: a restart would not
 * bring the database or the API server back.
 */
export function readyzCode(body: Pick<ReadinessBody, 'status' | 'serves'>): 200 | 503 {
  if (body.status === 'starting' || body.status === 'stopping') return 503;
  return body.serves.length > 0 ? 200 : 503;
}

/**
 * Starts the health/metrics HTTP listener on `http.host`:`http.port`: `/healthz` (200 `ok`: liveness), `/readyz` (the
 * JSON of `readiness()`, 200 or 503 by {@link readyzCode}), `/metrics`
 * (Prometheus text of `metrics.registry`).
 * @throws the listen error (e.g. `EADDRINUSE` when the port is taken)
 */
export async function startHealthServer(http: Config['http'], deps: { readiness: () => ReadinessBody; metrics: Metrics; logger: Logger }): Promise<HealthServer> {
  const { metrics, logger } = deps;
  const server: Server = createServer((req, res) => {
    const url = (req.url ?? '/').split('?')[0];
    if (url === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    } else if (url === '/readyz') {
      const body = deps.readiness();
      res.writeHead(readyzCode(body), { 'content-type': 'application/json' }).end(`${JSON.stringify(body)}\n`);
    } else if (url === '/metrics') {
      metrics.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
        (err: unknown) => {
          logger.error({ err }, 'rendering /metrics failed');
          res.writeHead(500, { 'content-type': 'text/plain' }).end('metrics unavailable (see the log)\n');
        },
      );
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try /healthz, /readyz, /metrics\n');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(http.port, http.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
    },
  };
}
