/**
 * Waiting for an event in tests that run real servers and child processes: polls `fn` until it returns a value other
 * than `undefined` or `false`, with a generous deadline (tests must pass on a busy machine; the deadline only turns a
 * hang into a named failure).
 * @param what what is awaited, named in the error
 * @param fn the condition; may be async
 * @param timeoutMs deadline in milliseconds of wall time (default 90 s)
 * @param everyMs pause between polls in milliseconds (default 25)
 * @returns the first value `fn` returned that is not `undefined`/`false`
 * @throws {Error} `timed out waiting for <what>` after the deadline
 */
export async function until<T>(
  what: string,
  fn: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 90_000,
  everyMs = 25,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
