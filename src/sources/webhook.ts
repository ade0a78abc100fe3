/**
 * Audit webhook source: an HTTPS listener that receives the API server's audit webhook backend
 * (`--audit-webhook-config-file`, https://kubernetes.io/docs/tasks/debug/debug-cluster/audit/#webhook-backend): POSTs of
 * `audit.k8s.io/v1` `EventList` JSON (`Content-Type: application/json`), authenticated by the webhook kubeconfig's
 * user (a bearer token, or a client certificate).
 *
 * Durability (docs/live-mode.md#audit-webhook): every accepted batch is appended to a spool file (one event JSON per
 * line) and fsync'd BEFORE the 200 answer, so an event the API server saw acknowledged survives a crash. The poll reads
 * the spool with the file source's resumable cursor (`file.ts`: inode, offset, first-line hash), so a restart goes on
 * from the last committed chunk and nothing is counted twice (the poller also dedupes by auditID). Once a poll starts
 * with everything consumed, the spool is truncated to 0 (the file cursor sees the truncation and reads from 0).
 *
 * The spool is identified by more than its size: a truncation to 0 happens only when the committed cursor names the
 * spool's current inode (and its first line), so a spool replaced under the same name is never emptied by a cursor of
 * another file. It is created mode 0600 (it holds whole audit events).
 *
 * Shared store ({@link WebhookSourceOptions.batches}, used when `serve` runs as replicas on one PostgreSQL store): any
 * replica behind the webhook Service may receive a cluster's batch, and only the cluster's owner polls it. Then every
 * accepted batch is written to the store's `webhook_batches` table (its events that may hold a token use, one JSON per
 * line; the others cannot make a finding) BEFORE the 200, and the poll reads the table instead of a local spool: the
 * owner counts a batch any replica accepted at its next poll, and replacing any pod loses nothing acknowledged. A poll
 * deletes the rows it read once the chunk that holds them is committed (the ids travel in the cursor, so a crash
 * between the commit and the delete deletes them at the next poll; a re-read is deduped by auditID). Without the
 * store (503 with `Retry-After`) the batch is not acknowledged and the API server re-sends it.
 *
 * Bounds: request bodies being read or stored at once are limited to `maxInflightBytes` (by `Content-Length`, else by
 * bytes received); a batch over it is answered 429 with `Retry-After`, so memory stays bounded under a flood of
 * large batches. Connections are capped at `maxConnections` (the listener drops further sockets) and an idle
 * keep-alive connection is closed after 65 s. An event nested deeper than {@link MAX_EVENT_DEPTH} is answered 400.
 *
 * Answers: 401 without valid credentials (nothing stored), 413 for a body over `maxBodyBytes`, 400 for a body that is
 * not an `EventList` or nests too deep, 429 (with `Retry-After`) while the unconsumed spool exceeds `maxSpoolBytes` or
 * the in-flight bytes would exceed `maxInflightBytes` (the batch is shed and counted; the API server's webhook backend
 * retries, then drops), 503 (with `Retry-After`) when the shared store cannot take the batch, 405/404 for other
 * methods/paths.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { open, truncate, type FileHandle } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { dirname } from 'node:path';
import { mayHoldTokenUse } from '../audit/records.js';
import { ErrorCode, TokenwatchError } from '../errors.js';
import { FileSource, parseFileCursor, readHead, type FileCursor } from './file.js';
import { DEFAULT_CHECKPOINT_EVENTS, type AuditSource, type PollOptions } from './types.js';
import { jsonDepthExceeds } from './json-depth.js';
import { parseBatchCursor, batchCursor, type WebhookBatchStore } from './webhook-batches.js';

export type { WebhookBatchStore } from './webhook-batches.js';

/** Options of {@link WebhookSource}. */
export interface WebhookSourceOptions {
  /** The cluster's name (the source id is `webhook:<cluster>`). */
  cluster: string;
  /** Listen address. Default `0.0.0.0`. */
  host?: string;
  /** Listen port; 0 = ephemeral (tests). */
  port: number;
  /** PEM server certificate (chain). */
  cert: string | Buffer;
  /** PEM private key of {@link cert}. */
  key: string | Buffer;
  /** Accepted bearer token (the webhook kubeconfig's `users[].user.token`). */
  token?: string;
  /** PEM CA bundle: a client certificate it signed is accepted (the kubeconfig's `client-certificate`). */
  clientCa?: string | Buffer;
  /** The spool file (one event JSON per line), e.g. `<store dir>/webhook-<cluster>.spool`; its directory is created. */
  spoolPath: string;
  /** Largest request body, bytes; larger → 413. Default 16 MiB. */
  maxBodyBytes?: number;
  /** Unconsumed spool bytes past which a batch is answered 429. Default 256 MiB. */
  maxSpoolBytes?: number;
  /** Called once per batch shed with 429 (the `tokenwatch_webhook_shed_batches_total` metric). */
  onShed?: () => void;
  /**
   * The shared store's batch table: batches are written there (instead of the spool) before the 200, and polls read
   * it; see the module doc. Absent: the local spool.
   */
  batches?: WebhookBatchStore;
  /** Request body bytes being read or stored at once, across requests; a batch over it → 429. Default 64 MiB. */
  maxInflightBytes?: number;
  /** Most open connections; further sockets are dropped by the listener. Default 256. */
  maxConnections?: number;
  /** Called with a failure to store a batch in the shared store (the batch was answered 503). */
  onStoreError?: (err: unknown) => void;
  /** Epoch ms for `received_at` of stored batches. Default `Date.now`. */
  clock?: () => number;
}

/** Default {@link WebhookSourceOptions.maxBodyBytes}: 16 MiB. */
export const DEFAULT_WEBHOOK_MAX_BODY_BYTES = 16 * 1024 * 1024;
/** Default {@link WebhookSourceOptions.maxSpoolBytes}: 256 MiB. */
export const DEFAULT_WEBHOOK_MAX_SPOOL_BYTES = 256 * 1024 * 1024;
/**
 * Default {@link WebhookSourceOptions.maxInflightBytes}: 64 MiB — four batches at the 16 MiB body limit, or some sixty
 * of the webhook backend's default batches (400 events of about 1–3 KiB at `Metadata` level) arriving together;
 * sized in docs/live-mode.md#audit-webhook.
 */
export const DEFAULT_WEBHOOK_MAX_INFLIGHT_BYTES = 64 * 1024 * 1024;
/** Default {@link WebhookSourceOptions.maxConnections}. */
export const DEFAULT_WEBHOOK_MAX_CONNECTIONS = 256;
/** Deepest nesting of objects and arrays an audit event may have (the `EventList` adds two levels above it); deeper → 400. */
export const MAX_EVENT_DEPTH = 200;
/** Seconds a refused batch is told to wait (`Retry-After`). */
const RETRY_AFTER_S = '5';
/** Largest sum of row sizes one read of the shared batch table fetches, bytes. */
const READ_BYTES = 8 * 1024 * 1024;
/** Most batch rows the cursor of a poll names (a checkpoint comes at the latest after this many). */
const CURSOR_ROWS = 500;

/** What {@link WebhookSource.status} reports (shown in `/tokens status`). */
export interface WebhookStatus {
  /** Batches answered 429 since start. */
  shedBatches: number;
  /** Events accepted (stored) since start. */
  acceptedEvents: number;
  /** Spool bytes not yet committed by a poll. */
  unconsumedBytes: number;
}

function sha256(s: string | Buffer): Buffer {
  return createHash('sha256').update(s).digest();
}

/** A request the listener refuses: `status` is the HTTP status it answers with, `message` the answer's text. */
class HttpError extends TokenwatchError {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(ErrorCode.ValueInvalid, message);
    this.name = 'HttpError';
  }
}

/** The audit webhook listener and its spool. See the module doc. */
export class WebhookSource implements AuditSource {
  readonly id: string;
  private readonly file: FileSource;
  private readonly tokenHash: Buffer | undefined;
  private readonly maxBody: number;
  private readonly maxSpool: number;
  private server: Server | undefined;
  /** Serialises spool appends and truncation. */
  private tail: Promise<void> = Promise.resolve();
  /** Spool size after the last append, bytes. */
  private size = 0;
  /** Offset known committed by the poller, bytes. */
  private consumed = 0;
  private shed = 0;
  private accepted = 0;
  /** Body bytes reserved by requests being read or stored now. */
  private inflight = 0;
  private readonly maxInflight: number;

  constructor(private readonly opts: WebhookSourceOptions) {
    if (!opts.token && !opts.clientCa) throw new TokenwatchError(ErrorCode.Internal, 'WebhookSource: a bearer token or a client CA is required');
    this.id = `webhook:${opts.cluster}`;
    this.file = new FileSource({ path: opts.spoolPath });
    this.tokenHash = opts.token ? sha256(opts.token) : undefined;
    this.maxBody = opts.maxBodyBytes ?? DEFAULT_WEBHOOK_MAX_BODY_BYTES;
    this.maxSpool = opts.maxSpoolBytes ?? DEFAULT_WEBHOOK_MAX_SPOOL_BYTES;
    this.maxInflight = opts.maxInflightBytes ?? DEFAULT_WEBHOOK_MAX_INFLIGHT_BYTES;
    if (!opts.batches) mkdirSync(dirname(opts.spoolPath), { recursive: true });
  }

  /** Starts the HTTPS listener; resolves with the bound port. @throws when the port cannot be bound or TLS is invalid. */
  async start(): Promise<number> {
    if (!this.opts.batches) this.size = await repairSpool(this.opts.spoolPath);
    const server = createServer(
      {
        cert: this.opts.cert,
        key: this.opts.key,
        ...(this.opts.clientCa ? { ca: this.opts.clientCa, requestCert: true, rejectUnauthorized: false } : {}),
      },
      (req, res) => void this.handle(req, res),
    );
    server.maxConnections = this.opts.maxConnections ?? DEFAULT_WEBHOOK_MAX_CONNECTIONS;
    // An idle keep-alive connection is closed after 65 s; a request must arrive whole within 120 s.
    server.keepAliveTimeout = 65_000;
    server.headersTimeout = 30_000;
    server.requestTimeout = 120_000;
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.opts.port, this.opts.host ?? '0.0.0.0', () => {
        server.off('error', reject);
        resolve();
      });
    });
    return (server.address() as AddressInfo).port;
  }

  /** Stops the listener (in-flight requests are cut). */
  close(): void {
    this.server?.close();
    this.server?.closeAllConnections();
  }

  /** Counters for `/tokens status`. */
  webhookStatus(): WebhookStatus {
    return { shedBatches: this.shed, acceptedEvents: this.accepted, unconsumedBytes: Math.max(0, this.size - this.consumed) };
  }

  private authorized(req: IncomingMessage): boolean {
    const sock = req.socket as TLSSocket;
    if (this.opts.clientCa && sock.authorized) return true;
    if (!this.tokenHash) return false;
    const m = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
    // Equal-length hashes, compared in constant time: neither the token nor its length leaks through timing.
    return !!m && timingSafeEqual(sha256(m[1] ?? ''), this.tokenHash);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const answer = (status: number, message: string, headers: Record<string, string> = {}): void => {
      if (res.headersSent) return;
      // A refused body is drained (req.resume) on a connection kept open for 429/503, so a client still sending gets
      // the answer rather than a reset; other refusals close the connection.
      res.writeHead(status, { 'content-type': 'application/json', ...headers, ...(status >= 400 && status !== 429 && status !== 503 ? { connection: 'close' } : {}) });
      res.end(JSON.stringify({ message }));
    };
    let reserved = 0;
    const reserve = (n: number): void => {
      if (this.inflight + n > this.maxInflight && !(this.inflight === 0 && reserved === 0)) {
        throw new HttpError(429, `over ${this.maxInflight} bytes of audit batches in flight`);
      }
      this.inflight += n;
      reserved += n;
    };
    try {
      if (req.method !== 'POST') throw new HttpError(405, 'only POST');
      if (!this.authorized(req)) throw new HttpError(401, 'unauthorized');
      const declared = Number(req.headers['content-length'] ?? 0);
      if (declared > this.maxBody) throw new HttpError(413, `body over ${this.maxBody} bytes`);
      if (declared > 0) reserve(declared);
      const body = await this.readBody(req, declared > 0 ? undefined : reserve);
      const lines = eventLines(body);
      if (this.opts.batches) {
        await this.store(lines);
      } else {
        if (this.size - this.consumed > this.maxSpool) throw new HttpError(429, 'spool full: audit events not yet consumed');
        await this.append(lines);
      }
      this.accepted += lines.length;
      answer(200, 'ok');
    } catch (err) {
      if (err instanceof HttpError && err.status === 429) {
        this.shed++;
        this.opts.onShed?.();
      }
      if (err instanceof HttpError) answer(err.status, err.message, err.status === 429 || err.status === 503 ? { 'retry-after': RETRY_AFTER_S } : {});
      else answer(500, 'spool write failed');
      if (!(err instanceof HttpError) || err.status === 413 || err.status === 429 || err.status === 503) req.resume();
    } finally {
      this.inflight -= reserved;
    }
  }

  /** Writes the batch's lines that may hold a token use to the shared store. @throws {HttpError} 503 when it fails. */
  private async store(lines: string[]): Promise<void> {
    const kept = lines.filter((l) => mayHoldTokenUse(l));
    if (kept.length === 0) return;
    try {
      await this.opts.batches!.add(this.opts.cluster, kept.join(''), kept.length, (this.opts.clock ?? Date.now)());
    } catch (err) {
      this.opts.onStoreError?.(err);
      throw new HttpError(503, 'the store cannot take the batch now');
    }
  }

  /** Reads the body; `reserve` (a body without `Content-Length`) is called with each chunk's size and may throw. */
  private readBody(req: IncomingMessage, reserve?: (n: number) => void): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const parts: Buffer[] = [];
      let n = 0;
      const stop = (err: unknown): void => {
        req.removeAllListeners('data');
        req.resume();
        reject(err);
      };
      req.on('data', (c: Buffer) => {
        n += c.length;
        if (n > this.maxBody) return stop(new HttpError(413, `body over ${this.maxBody} bytes`));
        try {
          reserve?.(c.length);
        } catch (err) {
          return stop(err);
        }
        parts.push(c);
      });
      req.on('end', () => resolve(Buffer.concat(parts)));
      req.on('error', reject);
    });
  }

  /** Appends the lines and fsyncs, serialised with other appends and truncation. */
  private append(lines: string[]): Promise<void> {
    if (lines.length === 0) return Promise.resolve();
    const data = Buffer.from(lines.join(''), 'utf8');
    const run = this.tail.then(async () => {
      const fh = await open(this.opts.spoolPath, 'a', 0o600);
      try {
        await fh.write(data);
        await fh.sync();
      } finally {
        await fh.close();
      }
      this.size += data.length;
    });
    this.tail = run.catch(() => undefined);
    return run;
  }

  /** {@inheritDoc AuditSource.poll} Reads the spool (or the shared store's batches) from the committed cursor; see the module doc. */
  poll(cursor: string | undefined, opts: PollOptions): AsyncGenerator<string, string> {
    return this.opts.batches ? this.pollStore(this.opts.batches, cursor, opts) : this.pollSpool(cursor, opts);
  }

  private async *pollSpool(cursor: string | undefined, opts: PollOptions): AsyncGenerator<string, string> {
    if (cursor) {
      const c = parseCursor(cursor);
      if (c !== undefined) this.consumed = c.pos;
      if (c !== undefined && c.pos > 0 && c.pos === this.size) await this.truncateIfConsumed(c);
    }
    const checkpoint = opts.checkpoint;
    const wrapped: PollOptions = {
      ...opts,
      lookbackMs: Number.POSITIVE_INFINITY,
      ...(checkpoint
        ? {
            checkpoint: async (c: string) => {
              await checkpoint(c);
              const pos = parseCursor(c)?.pos;
              if (pos !== undefined) this.consumed = pos;
            },
          }
        : {}),
    };
    const next = yield* this.file.poll(cursor, wrapped);
    const pos = parseCursor(next)?.pos;
    if (pos !== undefined) this.consumed = pos; // stored by the caller right after; a crash before re-reads (dedupe)
    return next;
  }

  /**
   * Reads the cluster's rows of the shared batch table, oldest first, in reads of at most {@link READ_BYTES}; deletes
   * the rows a committed cursor names (see the module doc). Checkpoints after `checkpointEvents` lines or
   * {@link CURSOR_ROWS} rows, at row boundaries.
   */
  private async *pollStore(batches: WebhookBatchStore, cursor: string | undefined, opts: PollOptions): AsyncGenerator<string, string> {
    const cluster = this.opts.cluster;
    const committed = cursor === undefined ? [] : parseBatchCursor(cursor);
    if (committed.length > 0) await batches.remove(cluster, committed);
    const every = opts.checkpointEvents ?? DEFAULT_CHECKPOINT_EVENTS;
    let pending: number[] = [];
    let lines = 0;
    let after = 0;
    for (;;) {
      opts.signal?.throwIfAborted();
      const heads = await batches.heads(cluster, after, 1000);
      opts.stats.requests++;
      if (heads.length === 0) break;
      for (let i = 0; i < heads.length; ) {
        const group: number[] = [];
        let bytes = 0;
        while (i < heads.length && (group.length === 0 || bytes + heads[i]!.bytes <= READ_BYTES)) {
          group.push(heads[i]!.id);
          bytes += heads[i]!.bytes;
          i++;
        }
        const rows = await batches.read(cluster, group);
        opts.stats.requests++;
        for (const row of rows) {
          opts.stats.bytes += Buffer.byteLength(row.events);
          for (const line of row.events.split('\n')) {
            if (line === '') continue;
            opts.stats.records++;
            lines++;
            yield line;
          }
          pending.push(row.id);
          if (opts.checkpoint && (lines >= every || pending.length >= CURSOR_ROWS)) {
            await opts.checkpoint(batchCursor(pending));
            await batches.remove(cluster, pending);
            pending = [];
            lines = 0;
          }
        }
        after = group[group.length - 1]!;
      }
    }
    return batchCursor(pending);
  }

  /**
   * Empties the spool once the committed cursor `c` has read all of it — only when `c` names this very file (inode and
   * first line), never on equal sizes alone.
   */
  private truncateIfConsumed(c: FileCursor): Promise<void> {
    const run = this.tail.then(async () => {
      if (this.size !== c.pos) return; // a batch arrived meanwhile: keep it, truncate on a later poll
      if (!(await sameFile(this.opts.spoolPath, c))) return;
      await truncate(this.opts.spoolPath, 0);
      this.size = 0;
      this.consumed = 0;
    });
    this.tail = run.catch(() => undefined);
    return run;
  }
}

/**
 * Cuts a torn last line (a crash during an append, never acknowledged) so the next append starts on a line of its
 * own; creates the spool when absent; returns its size.
 */
async function repairSpool(path: string): Promise<number> {
  let fh: FileHandle;
  fh = await open(path, 'a+', 0o600); // created empty when absent, so a poll before the first batch finds the file
  try {
    await fh.chmod(0o600); // it holds whole audit events; an older spool may have been created 0644
  } finally {
    await fh.close();
  }
  fh = await open(path, 'r+');
  try {
    const size = (await fh.stat()).size;
    const buf = Buffer.alloc(64 * 1024);
    let end = size;
    while (end > 0) {
      const from = Math.max(0, end - buf.length);
      const { bytesRead } = await fh.read(buf, 0, end - from, from);
      const nl = buf.subarray(0, bytesRead).lastIndexOf(0x0a);
      if (nl >= 0) {
        end = from + nl + 1;
        break;
      }
      end = from;
    }
    if (end < size) {
      await fh.truncate(end);
      await fh.sync();
    }
    return end;
  } finally {
    await fh.close();
  }
}

function parseCursor(cursor: string): FileCursor | undefined {
  try {
    return parseFileCursor(cursor);
  } catch {
    return undefined;
  }
}

/** Whether the file at `path` is the one cursor `c` read: same inode, and the same first line. */
async function sameFile(path: string, c: FileCursor): Promise<boolean> {
  let fh: FileHandle;
  try {
    fh = await open(path, 'r');
  } catch {
    return false;
  }
  try {
    const st = await fh.stat();
    if (st.ino !== c.ino) return false;
    return (await readHead(fh, st.size)) === c.head;
  } finally {
    await fh.close();
  }
}

/**
 * The spool lines of one webhook body: each `items[]` entry of an `audit.k8s.io/v1` `EventList` as one JSON line.
 * @throws {HttpError} 400 when the body is not an EventList.
 */
function eventLines(body: Buffer): string[] {
  let v: unknown;
  try {
    v = JSON.parse(body.toString('utf8'));
  } catch {
    throw new HttpError(400, 'body is not JSON');
  }
  const list = v as { kind?: unknown; items?: unknown };
  // JSON.stringify below recurses: a very deep item would overflow the stack (a 500).
  if (jsonDepthExceeds(body, MAX_EVENT_DEPTH + 2)) throw new HttpError(400, `an audit event nests deeper than ${MAX_EVENT_DEPTH} levels`);
  if (!v || typeof v !== 'object' || list.kind !== 'EventList' || !Array.isArray(list.items)) throw new HttpError(400, 'expected an audit.k8s.io EventList');
  const out: string[] = [];
  for (const item of list.items) if (item && typeof item === 'object') out.push(`${JSON.stringify(item)}\n`);
  return out;
}
