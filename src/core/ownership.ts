/**
 * Which clusters may this process poll and act on (run approved actions, send Slack alerts)? One question, two
 * answers built by `composeServe` (`src/runtime/compose.ts`):
 * - the SQLite store, single-replica by design: the process that holds the store's poller lock
 *   (`src/runtime/poller-lock.ts`) owns every cluster while it holds it;
 * - the PostgreSQL store: clusters shared out across replicas, each owned by one replica at a time
 *   (`src/runtime/shard-coordinator.ts`), as Argo CD's application controller sees sharding as one cluster filter.
 */
export interface Ownership {
  /** Whether this process polls `cluster` and executes its approved actions now. */
  owns(cluster: string): boolean;
  /** Whether this process owns any cluster now (it then sends the Slack outbox and picks up scan requests). */
  ownsAny(): boolean;
}

/** An {@link Ownership} that owns every cluster while `held()` says so. */
export function ownershipWhile(held: () => boolean): Ownership {
  return { owns: () => held(), ownsAny: () => held() };
}
