/**
 * The work the Slack integration starts after an ack, a poll or a timer tick, tracked so that `idle()` and `stop()` can
 * wait for it (`src/runtime/build-slack.ts` wires it).
 */

/** Tracks promises of work done after an ack or a poll. */
export class Tasks {
  private readonly pending = new Set<Promise<unknown>>();

  /** Tracks `p` until it settles; returns `p` itself (its rejection is the caller's to handle). */
  track<T>(p: Promise<T>): Promise<T> {
    this.pending.add(p);
    void p.then(
      () => this.pending.delete(p),
      () => this.pending.delete(p),
    );
    return p;
  }

  /**
   * Resolves when no tracked promise is pending (work tracked meanwhile included), or after `timeoutMs` (wall-clock
   * ms, default no limit), whichever comes first. Rejects never.
   */
  async idle(timeoutMs = Infinity): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.pending.size > 0 && Date.now() < deadline) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...this.pending]),
        ...(Number.isFinite(timeoutMs) ? [new Promise<void>((r) => (timer = setTimeout(r, Math.max(0, deadline - Date.now()))))] : []),
      ]);
      if (timer) clearTimeout(timer);
    }
  }
}
