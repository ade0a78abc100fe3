/**
 * A lock per key: tasks with the same key run one after another, in call order; tasks with different keys run
 * concurrently. A failed task does not stop the next one. Keys of finished chains are forgotten, so the map holds
 * only keys with work pending. In-process only (one replica); across replicas the store decides.
 */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<unknown>>();
  /** Per key: the {@link runLatest} task waiting for its turn (not started yet). */
  private readonly waiting = new Map<string, Promise<void>>();

  /**
   * Runs `fn` after every earlier task of `key` has settled.
   * @returns what `fn` returns; rejects with what `fn` throws.
   */
  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => undefined);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return next;
  }

  /**
   * Like {@link run}, for work that reads the latest state when it starts (re-rendering a message from the store):
   * while an earlier `runLatest` task of `key` still waits for its turn, `fn` is dropped and that task's promise is
   * returned, so a burst of requests while one runs becomes one more run, not one per request.
   * @returns resolves when the task that does this request's work has finished; rejects with what it throws.
   */
  runLatest(key: string, fn: () => Promise<void>): Promise<void> {
    const pending = this.waiting.get(key);
    if (pending) return pending;
    const task: Promise<void> = this.run(key, () => {
      if (this.waiting.get(key) === task) this.waiting.delete(key);
      return fn();
    });
    this.waiting.set(key, task);
    return task;
  }
}
