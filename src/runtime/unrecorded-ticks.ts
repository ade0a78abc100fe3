/**
 * Scheduled ticks whose poll failed while the store was unavailable, and ticks the scheduler missed whose missed
 * record could not be written then: neither a finished poll run nor a missed record exists for them. Kept in memory (at most {@link MAX_UNRECORDED} ticks, oldest dropped first, with a
 * log line) and written as missed records (reason `store-unavailable`) once the store answers again — unless a
 * replica accounted for the tick meanwhile — so every tick is accounted for (docs/live-mode.md "Store outages").
 * A process that dies before the store returns loses its list: the next owner's tick check then records those ticks
 * as `unowned` (src/runtime/compose.ts `checkTicks`).
 */
import type { Logger } from '../observability/logger.js';
import type { StorePart } from '../store/types.js';

/** Most ticks kept for a later record (a week of per-minute ticks of one cluster, or a day of 7 clusters'). */
export const MAX_UNRECORDED = 10_000;

/** What {@link UnrecordedTicks} needs. */
export interface UnrecordedTicksDeps {
  store: StorePart<{ polls: 'ticks' | 'recordMissed' }>;
  logger: Logger;
  /** This replica's id for the records (clusters shared out across replicas), if any. */
  replica: () => string | undefined;
  /** The service clock for `recordedAt`, epoch ms. */
  clock: () => number;
  /** How often to try writing the ticks kept while some are, ms. */
  retryMs: number;
  /** Told of each tick written as missed (the poller's health). */
  onRecorded?: (cluster: string, tick: number) => void;
}

/** See the module docstring. */
export class UnrecordedTicks {
  /** Per cluster, the ticks kept (epoch ms), oldest first. */
  private readonly ticks = new Map<string, number[]>();
  /** The reason each kept tick is recorded with, by `cluster\u001ftick`. */
  private readonly reasons = new Map<string, string>();
  private count = 0;
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<number> | undefined;

  constructor(private readonly deps: UnrecordedTicksDeps) {}

  /** Ticks kept now. */
  get size(): number {
    return this.count;
  }

  /**
   * Keeps `tick` of `cluster` and starts the retries: a scheduled poll that failed with the store unavailable
   * (`reason` `store-unavailable`, the default), or a tick the scheduler missed (`overlap`, `coalesced`) whose record
   * could not be written then.
   */
  add(cluster: string, tick: number, reason = 'store-unavailable'): void {
    const list = this.ticks.get(cluster) ?? [];
    if (list.includes(tick)) return;
    this.reasons.set(`${cluster}\u001f${tick}`, reason);
    list.push(tick);
    this.ticks.set(cluster, list);
    this.count++;
    if (this.count > MAX_UNRECORDED) this.dropOldest();
    this.timer ??= setInterval(() => void this.flush(), this.deps.retryMs);
    this.timer.unref();
  }

  private dropOldest(): void {
    let oldest: [string, number] | undefined;
    for (const [cluster, list] of this.ticks) if (list.length > 0 && (oldest === undefined || list[0]! < oldest[1])) oldest = [cluster, list[0]!];
    if (!oldest) return;
    this.remove(oldest[0], oldest[1]);
    this.deps.logger.warn({ cluster: oldest[0], dueAt: new Date(oldest[1]).toISOString(), kept: MAX_UNRECORDED }, 'too many scheduled polls kept for a record while the store is unavailable: the oldest is dropped (a replica records it as unowned at its next tick check)');
  }

  private remove(cluster: string, tick: number): void {
    const list = this.ticks.get(cluster);
    const i = list?.indexOf(tick) ?? -1;
    if (!list || i < 0) return;
    list.splice(i, 1);
    this.reasons.delete(`${cluster}\u001f${tick}`);
    this.count--;
    if (list.length === 0) this.ticks.delete(cluster);
  }

  /**
   * Writes the ticks kept as missed records (`store-unavailable`), skipping any a replica accounted for meanwhile
   * (`Store.polls.ticks`). Stops at the first store error and keeps the rest for the next try. Never throws.
   * @returns how many missed records were written
   */
  flush(): Promise<number> {
    this.flushing ??= this.flushOnce().finally(() => {
      this.flushing = undefined;
      if (this.count === 0 && this.timer) {
        clearInterval(this.timer);
        this.timer = undefined;
      }
    });
    return this.flushing;
  }

  private async flushOnce(): Promise<number> {
    let written = 0;
    try {
      for (const [cluster, list] of [...this.ticks]) {
        const seen = await this.deps.store.polls.ticks(cluster, list[0]!);
        const accounted = new Set([...seen.polled, ...seen.missed.map((m) => m.scheduledAt)]);
        for (const tick of [...list]) {
          const replica = this.deps.replica();
          const reason = this.reasons.get(`${cluster}\u001f${tick}`) ?? 'store-unavailable';
          if (!accounted.has(tick) && (await this.deps.store.polls.recordMissed({ cluster, scheduledAt: tick, reason, ...(replica ? { replica } : {}), recordedAt: this.deps.clock() }))) {
            written++;
            this.deps.onRecorded?.(cluster, tick);
            this.deps.logger.warn({ cluster, dueAt: new Date(tick).toISOString(), reason }, 'scheduled poll recorded as missed after the store came back (the store was unavailable when it was missed)');
          }
          this.remove(cluster, tick);
        }
      }
    } catch (err) {
      this.deps.logger.debug({ err, kept: this.count }, 'the store is still unavailable: scheduled polls kept for a record later');
    }
    return written;
  }

  /** Stops the retries (serve stopping); ticks still kept are not written. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
