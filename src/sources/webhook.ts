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
 * Answers: 401 without valid credentials (nothing stored), 413 for a body over `maxBodyBytes`, 400 for a body that is
 * not an `EventList`, 429 (with `Retry-After`) while the unconsumed spool exceeds `maxSpoolBytes` (the batch is shed
 * and counted; the API server's webhook backend retries, then drops), 405/404 for other methods/paths.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { open, truncate, type FileHandle } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { dirname } from 'node:path';
import { ErrorCode, TokenwatchError } from '../errors.js';
import { FileSource, parseFileCursor } from './file.js';
import type { AuditSource, PollOptions } from './types.js';

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
}

/** Default {@link WebhookSourceOptions.maxBodyBytes}: 16 MiB. */
export const DEFAULT_WEBHOOK_MAX_BODY_BYTES = 16 * 1024 * 1024;
/** Default {@link WebhookSourceOptions.maxSpoolBytes}: 256 MiB. */
export const DEFAULT_WEBHOOK_MAX_SPOOL_BYTES = 256 * 1024 * 1024;

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

  constructor(private readonly opts: WebhookSourceOptions) {
    if (!opts.token && !opts.clientCa) throw new TokenwatchError(ErrorCode.Internal, 'WebhookSource: a bearer token or a client CA is required');
    this.id = `webhook:${opts.cluster}`;
    this.file = new FileSource({ path: opts.spoolPath });
    this.tokenHash = opts.token ? sha256(opts.token) : undefined;
    this.maxBody = opts.maxBodyBytes ?? DEFAULT_WEBHOOK_MAX_BODY_BYTES;
    this.maxSpool = opts.maxSpoolBytes ?? DEFAULT_WEBHOOK_MAX_SPOOL_BYTES;
    mkdirSync(dirname(opts.spoolPath), { recursive: true });
  }

  /** Starts the HTTPS listener; resolves with the bound port. @throws when the port cannot be bound or TLS is invalid. */
  async start(): Promise<number> {
    this.size = await repairSpool(this.opts.spoolPath);
    const server = createServer(
      {
        cert: this.opts.cert,
        key: this.opts.key,
        ...(this.opts.clientCa ? { ca: this.opts.clientCa, requestCert: true, rejectUnauthorized: false } : {}),
      },
      (req, res) => void this.handle(req, res),
    );
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
      res.writeHead(status, { 'content-type': 'application/json', ...headers, ...(status >= 400 ? { connection: 'close' } : {}) });
      res.end(JSON.stringify({ message }));
    };
    try {
      if (req.method !== 'POST') throw new HttpError(405, 'only POST');
      if (!this.authorized(req)) throw new HttpError(401, 'unauthorized');
      const declared = Number(req.headers['content-length'] ?? 0);
      if (declared > this.maxBody) throw new HttpError(413, `body over ${this.maxBody} bytes`);
      const body = await this.readBody(req);
      const lines = eventLines(body);
      if (this.size - this.consumed > this.maxSpool) {
        this.shed++;
        this.opts.onShed?.();
        throw new HttpError(429, 'spool full: audit events not yet consumed');
      }
      await this.append(lines);
      this.accepted += lines.length;
      answer(200, 'ok');
    } catch (err) {
      if (err instanceof HttpError) answer(err.status, err.message, err.status === 429 ? { 'retry-after': '5' } : {});
      else answer(500, 'spool write failed');
      if (!(err instanceof HttpError) || err.status === 413) req.resume();
    }
  }

  private readBody(req: IncomingMessage): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const parts: Buffer[] = [];
      let n = 0;
      req.on('data', (c: Buffer) => {
        n += c.length;
        if (n > this.maxBody) {
          req.removeAllListeners('data');
          req.resume();
          reject(new HttpError(413, `body over ${this.maxBody} bytes`));
          return;
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
      const fh = await open(this.opts.spoolPath, 'a');
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

  /** {@inheritDoc AuditSource.poll} Reads the spool from the committed cursor; see the module doc. */
  async *poll(cursor: string | undefined, opts: PollOptions): AsyncGenerator<string, string> {
    if (cursor) {
      const pos = parseCursorPos(cursor);
      if (pos !== undefined) this.consumed = pos;
      if (pos !== undefined && pos > 0 && pos === this.size) await this.truncateIfConsumed(pos);
    }
    const checkpoint = opts.checkpoint;
    const wrapped: PollOptions = {
      ...opts,
      lookbackMs: Number.POSITIVE_INFINITY,
      ...(checkpoint
        ? {
            checkpoint: async (c: string) => {
              await checkpoint(c);
              const pos = parseCursorPos(c);
              if (pos !== undefined) this.consumed = pos;
            },
          }
        : {}),
    };
    const next = yield* this.file.poll(cursor, wrapped);
    const pos = parseCursorPos(next);
    if (pos !== undefined) this.consumed = pos; // stored by the caller right after; a crash before re-reads (dedupe)
    return next;
  }

  private truncateIfConsumed(pos: number): Promise<void> {
    const run = this.tail.then(async () => {
      if (this.size !== pos) return; // a batch arrived meanwhile: keep it, truncate on a later poll
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
  fh = await open(path, 'a+'); // created empty when absent, so a poll before the first batch finds the file
  await fh.close();
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

function parseCursorPos(cursor: string): number | undefined {
  try {
    return parseFileCursor(cursor).pos;
  } catch {
    return undefined;
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
  if (!v || typeof v !== 'object' || list.kind !== 'EventList' || !Array.isArray(list.items)) throw new HttpError(400, 'expected an audit.k8s.io EventList');
  const out: string[] = [];
  for (const item of list.items) if (item && typeof item === 'object') out.push(`${JSON.stringify(item)}\n`);
  return out;
}
