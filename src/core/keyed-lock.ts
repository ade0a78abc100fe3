/**
 * A lock per key: tasks with the same key run one after another, in call order; tasks with different keys run
 * concurrently. A failed task does not stop the next one. Keys of finished chains are forgotten, so the map holds
 * only keys with work pending. In-process only (one replica); across replicas the store decides.
 */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<unknown>>();

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
}
