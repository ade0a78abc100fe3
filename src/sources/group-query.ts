/**
 * One query for a group of sources, taken by each member's poll: the GKE sources of one project
 * (src/sources/cloud-logging.ts), the AKS sources of one Log Analytics workspace (src/sources/log-analytics.ts) and
 * the log groups of one fleet Insights query (src/sources/fleet-insights.ts). The first member to poll runs the query
 * for all; the others wait for it and take their part; one query runs at a time.
 */

/** A member's part of a group query's answer: the cursor it was read from and when (epoch ms, the poll's clock). */
export interface GroupResult {
  from: string | undefined;
  now: number;
}

/** The members' parts of the last group query, and the query running now. */
export class GroupQuery<R extends GroupResult> {
  /** Each member's part of the last query, by source id, until its poll takes it. */
  readonly results = new Map<string, R>();
  private inflight: Promise<void> | undefined;

  /** @param reuseMs how long (ms) a member's part stays usable by its poll */
  constructor(private readonly reuseMs: number) {}

  /**
   * The part of member `id` for a poll from `cursor` at `now` (epoch ms), removed from {@link results}. Without a
   * usable one it runs `refresh` (which fills {@link results}), or waits for the one running, then looks again; twice
   * at most. `refresh`'s own failure is the caller's to report through the results it leaves.
   * @returns undefined when no usable part came of two tries
   */
  async take(id: string, cursor: string | undefined, now: number, refresh: () => Promise<void>): Promise<R | undefined> {
    const usable = (r: R | undefined): r is R => r !== undefined && r.from === cursor && now - r.now <= this.reuseMs && r.now <= now;
    let hit = this.results.get(id);
    for (let tries = 0; !usable(hit) && tries < 2; tries++) {
      if (this.inflight) {
        await this.inflight.catch(() => undefined);
      } else {
        this.inflight = refresh().finally(() => {
          this.inflight = undefined;
        });
        await this.inflight;
      }
      hit = this.results.get(id);
    }
    if (!usable(hit)) return undefined;
    this.results.delete(id);
    return hit;
  }
}
