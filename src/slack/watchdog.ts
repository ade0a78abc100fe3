/**
 * Socket Mode connection state and a watchdog for a silent socket.
 *
 * `@slack/socket-mode` 3 reconnects by itself: it pings the server and closes a connection whose pongs stop
 * (`clientPingTimeout`), and reconnects on close. Users still report sockets that stay down or silent after a
 * disconnect (slackapi/bolt-js#1906, node-slack-sdk#1652: `slack_socket_mode_no_reply_received_error`, no events for
 * hours). The watchdog follows the client's state events (`connecting`, `connected`, `reconnecting`,
 * `disconnecting`, `disconnected`) and the WebSocket's `close` (emitted at once when the socket closes; 3.1.0
 * emits `reconnecting` only after its reconnect delay, 5 s or more later), sets `tokenwatch_slack_socket_connected`,
 * and when the socket has not been
 * connected for `staleMs` it restarts it (`disconnect()` then `start()`), logging why.
 */
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';

/** The part of `SocketModeClient` the watchdog needs. */
export interface SocketLike {
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  /** The client's current WebSocket; a `close` of an old socket while a new one is active is ignored. */
  websocket?: { isActive(): boolean } | null;
  start(): Promise<unknown>;
  disconnect(): Promise<void>;
}

/** Options of {@link SocketWatchdog}. */
export interface WatchdogOptions {
  logger: Logger;
  metrics?: Metrics;
  /** How often to check, ms (default 30,000). */
  intervalMs?: number;
  /** Restart when not connected for this long, ms (default 120,000). */
  staleMs?: number;
  /** Wall clock, epoch ms. */
  now?: () => number;
}

const DOWN_STATES = ['close', 'connecting', 'reconnecting', 'disconnecting', 'disconnected'];

/** See the module docstring. */
export class SocketWatchdog {
  private connected = false;
  private since: number;
  private restarting = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly now: () => number;
  /** Restarts done by the watchdog. */
  restarts = 0;

  constructor(
    private readonly client: SocketLike,
    private readonly opts: WatchdogOptions,
  ) {
    this.now = opts.now ?? Date.now;
    this.since = this.now();
    opts.metrics?.socketConnected.set(0);
    client.on('connected', () => {
      if (!this.connected) opts.logger.info({ downMs: this.now() - this.since }, 'Slack Socket Mode connected');
      this.connected = true;
      this.since = this.now();
      opts.metrics?.socketConnected.set(1);
    });
    for (const state of DOWN_STATES) {
      client.on(state, () => {
        if (state === 'close' && client.websocket?.isActive()) return;
        if (this.connected) {
          opts.logger.warn({ state }, 'Slack Socket Mode connection lost; the client reconnects');
          this.since = this.now();
        }
        this.connected = false;
        opts.metrics?.socketConnected.set(0);
      });
    }
  }

  /** Whether the socket is connected now. */
  get isConnected(): boolean {
    return this.connected;
  }

  /** Starts periodic checks (timer unref'd). */
  start(): void {
    this.timer ??= setInterval(() => void this.check(), this.opts.intervalMs ?? 30_000);
    this.timer.unref();
  }

  /** Stops the checks. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * One check: restarts the socket when it has been down for `staleMs` and no restart is in progress.
   * @returns whether a restart was started.
   */
  check(): boolean {
    const down = this.now() - this.since;
    if (this.connected || this.restarting || down < (this.opts.staleMs ?? 120_000)) return false;
    this.restarting = true;
    this.restarts++;
    this.opts.logger.warn({ downMs: down }, 'Slack Socket Mode has not been connected for too long; restarting the socket (bolt-js#1906)');
    this.since = this.now();
    void (async () => {
      try {
        await this.client.disconnect();
        await this.client.start();
      } catch (err) {
        this.opts.logger.error({ err }, 'restarting the Slack Socket Mode connection failed; retrying at the next check');
      } finally {
        this.restarting = false;
        this.since = this.now();
      }
    })();
    return true;
  }
}
