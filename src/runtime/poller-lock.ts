/**
 * One poller per SQLite store (docs/design/architecture.md "Live mode"): the ownership of a SQLite deployment, which is
 * single-replica by design (`src/core/ownership.ts`). Two `serve` processes on one store would both poll and post
 * every alert twice; the second one refuses to start instead.
 *
 * The lock is a row in the store (so it follows the file wherever it is mounted) with a heartbeat: the holder
 * refreshes it every `heartbeatMs`; a lock whose heartbeat is older than `staleAfterMs` is free (its holder was
 * killed, or its host lost the volume). A lock left by a process on this host that no longer runs (or that had
 * this process's pid: a restarted container is pid 1 again) is free at once, so a crash-restart does not wait.
 * With a PostgreSQL store replicas share the clusters out (`shard-coordinator.ts`) and this lock is not used.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { ErrorCode, TokenwatchError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { PollerLockRow, Store } from '../store/index.js';

/** Default: a lock without a heartbeat for 60 s is free. */
export const POLLER_LOCK_STALE_MS = 60_000;

/** Refused: another live process polls the store. The message names the store file and the holder. */
export class PollerLockError extends TokenwatchError {
  constructor(
    message: string,
    /** The other holder, as the store records it. */
    readonly holder: PollerLockRow,
  ) {
    super(ErrorCode.StoreFailed, message);
    this.name = 'PollerLockError';
  }
}

/** Options of {@link acquirePollerLock}. */
export interface PollerLockOptions {
  store: Store;
  /** Epoch ms (UTC). */
  clock: () => number;
  logger: Logger;
  /** A lock whose heartbeat is this old (ms) is free. Default {@link POLLER_LOCK_STALE_MS}. */
  staleAfterMs?: number;
  /** How often the holder refreshes its heartbeat, ms. Default a quarter of `staleAfterMs`. */
  heartbeatMs?: number;
  /** This process's host name and pid (tests). Default `os.hostname()`, `process.pid`. */
  host?: string;
  pid?: number;
  /** Whether a pid runs on this host (tests). Default: `process.kill(pid, 0)` does not fail with ESRCH. */
  isRunning?: (pid: number) => boolean;
  /** Called once when a heartbeat finds the lock taken over (this process was stalled past `staleAfterMs`). */
  onLost?: (by: PollerLockRow | undefined) => void;
}

/** A held lock: {@link PollerLock.held} gates polling; {@link PollerLock.release} on shutdown. */
export interface PollerLock {
  /** True until the lock is released or found taken over. */
  held(): boolean;
  /** Refreshes the heartbeat now (the timer calls it every `heartbeatMs`); false once the lock is lost. Never rejects. */
  beat(): Promise<boolean>;
  /** Stops the heartbeat and deletes the lock row if still ours; idempotent. Never rejects (a failure is logged). */
  release(): Promise<void>;
}

function pidRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it runs, as another user.
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

const iso = (ms: number): string => new Date(ms).toISOString();

/**
 * Takes the store's poller lock or refuses.
 * @throws {PollerLockError} when another live process holds it: the message names the store file, the holder's
 *   host and pid, when it took the lock and when it last refreshed it, and what to do
 */
export async function acquirePollerLock(opts: PollerLockOptions): Promise<PollerLock> {
  const { store, clock, logger } = opts;
  const staleAfterMs = opts.staleAfterMs ?? POLLER_LOCK_STALE_MS;
  const heartbeatMs = opts.heartbeatMs ?? Math.max(1000, Math.floor(staleAfterMs / 4));
  const me = { id: randomBytes(12).toString('base64url'), host: opts.host ?? hostname(), pid: opts.pid ?? process.pid };
  const isRunning = opts.isRunning ?? pidRuns;
  const isGone = (row: PollerLockRow): boolean => row.host === me.host && (row.pid === me.pid || !isRunning(row.pid));

  const now = clock();
  const claim = await store.pollerLock.claim(me, now, staleAfterMs, isGone);
  if (!claim.acquired) {
    const h = claim.holder;
    throw new PollerLockError(
      `another tokenwatch process polls the store ${store.path}: pid ${h.pid} on host ${h.host}, holding it since ${iso(h.acquiredAt)}, ` +
        `last heartbeat ${iso(h.heartbeatAt)} (${Math.max(0, Math.round((now - h.heartbeatAt) / 1000))} s ago). ` +
        'Two pollers on one SQLite store post every alert twice, so this one does not start. Stop the other process, ' +
        'give this one its own store.path, or run several replicas on a PostgreSQL store (store.postgres), which shares the clusters out; ' +
        `the lock is free once its heartbeat is ${Math.round(staleAfterMs / 1000)} s old`,
      h,
    );
  }
  if (claim.replaced) {
    const r = claim.replaced;
    logger.warn(
      { store: store.path, previousHost: r.host, previousPid: r.pid, previousHeartbeat: iso(r.heartbeatAt) },
      `took over the store's poller lock from pid ${r.pid} on host ${r.host} (last heartbeat ${iso(r.heartbeatAt)}: stale, or that process is gone)`,
    );
  }

  let held = true;
  let timer: NodeJS.Timeout | undefined;
  const stopTimer = (): void => {
    if (timer !== undefined) clearInterval(timer);
    timer = undefined;
  };
  const beat = async (): Promise<boolean> => {
    if (!held) return false;
    let still: boolean;
    try {
      still = await store.pollerLock.heartbeat(me.id, clock());
    } catch (err) {
      // A busy or briefly failing store: keep polling, try again at the next beat (the lock goes stale only later).
      logger.warn({ err, store: store.path }, 'refreshing the poller lock failed; retrying at the next heartbeat');
      return true;
    }
    if (still) return true;
    held = false;
    stopTimer();
    const by = await store.pollerLock.get().catch(() => undefined);
    logger.error(
      { store: store.path, ...(by ? { holderHost: by.host, holderPid: by.pid } : {}) },
      `lost the store's poller lock${by ? ` to pid ${by.pid} on host ${by.host}` : ''} (no heartbeat for ${Math.round(staleAfterMs / 1000)} s): this process stops polling`,
    );
    opts.onLost?.(by);
    return false;
  };
  timer = setInterval(() => void beat(), heartbeatMs);
  timer.unref();
  return {
    held: () => held,
    beat,
    release: async () => {
      stopTimer();
      if (!held) return;
      held = false;
      try {
        await store.pollerLock.release(me.id);
      } catch (err) {
        logger.warn({ err, store: store.path }, 'releasing the poller lock failed; it goes stale on its own');
      }
    },
  };
}
