/**
 * `/tokens scan` across replicas: the command may reach a replica that does not poll the cluster (clusters shared out
 * across replicas). It then leaves a request in the shared store (`src/store/scan-requests.ts`) for the replica that
 * owns the cluster, which takes it at its next pick-up tick and polls at once (docs/slack.md).
 */
import type { Logger } from '../observability/logger.js';
import type { Store } from '../store/index.js';
import type { RunNowResult, SlackContext } from './context.js';

/** What {@link ScanRequests} reads of the runtime. */
export type ScanRequestsDeps = Pick<SlackContext, 'clusters' | 'ownership' | 'runNow' | 'clock'> & { store: Pick<Store, 'scanRequests'>; logger: Logger };

/** Starts `/tokens scan` polls here or through the store (see the module doc). */
export class ScanRequests {
  constructor(private readonly deps: ScanRequestsDeps) {}

  /**
   * Polls `cluster` now when this replica owns it; else records the request for its owner (`started`), or answers
   * `unknown-job` for a cluster this service does not watch.
   * @throws when the request cannot be stored
   */
  async runNow(cluster: string): Promise<RunNowResult> {
    const { ownership, clusters, store, clock } = this.deps;
    if (ownership.owns(cluster)) return this.deps.runNow(cluster);
    if (!clusters.has(cluster)) return 'unknown-job';
    await store.scanRequests.request(cluster, clock());
    return 'started';
  }

  /**
   * Takes the requests left for the clusters this replica owns and polls each of them now. One store query when none
   * is pending, whatever the number of clusters; a take per pending request of an owned cluster (requests for
   * clusters this replica does not own or watch stay for their owner).
   * @throws when the store cannot be read
   */
  async pickUp(): Promise<void> {
    const { ownership, clusters, store, logger } = this.deps;
    for (const cluster of await store.scanRequests.pending()) {
      if (!clusters.has(cluster) || !ownership.owns(cluster)) continue;
      const requestedAt = await store.scanRequests.take(cluster);
      if (requestedAt === undefined) continue;
      logger.info({ cluster, requestedAt: new Date(requestedAt).toISOString() }, '/tokens scan requested on another replica: polling now');
      this.deps.runNow(cluster);
    }
  }
}
