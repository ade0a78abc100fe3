/**
 * A loopback fake of Slack's Socket Mode, for tests: a WebSocket server speaking RFC 6455 (handshake; text, ping,
 * pong and close frames) and Slack's envelope protocol (`hello` on connect; envelopes with `envelope_id`, optional
 * `retry_attempt`/`retry_reason`; the client acks by echoing `envelope_id`; api.slack.com/apis/socket-mode), plus
 * a Web API front that answers `apps.connections.open` with the WebSocket URL and forwards every other method to
 * the fake Slack Web API (`src/sandbox/fakes/slack.ts`). The real Bolt `SocketModeReceiver` (@slack/socket-mode 3) connects
 * to it. Loopback only.
 */
import { ErrorCode, TokenwatchError } from '../../src/errors.js';
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { FakeSlack } from '../../src/sandbox/fakes/slack.js';

/** A minimal Socket Mode WebSocket server. */
export class SocketModeServer {
  readonly server: Server;
  readonly sockets: Socket[] = [];
  /** Messages the client sent (parsed JSON), in order. */
  readonly received: Array<Record<string, unknown>> = [];
  connections = 0;
  private listeners: Array<(m: Record<string, unknown>) => void> = [];

  constructor() {
    this.server = createServer((_req, res) => res.writeHead(404).end());
    this.server.on('upgrade', (req: IncomingMessage, socket: Socket) => {
      const key = String(req.headers['sec-websocket-key'] ?? '');
      const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
      socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
      this.connections++;
      this.sockets.push(socket);
      let buf = Buffer.alloc(0);
      socket.on('data', (chunk: Buffer) => {
        buf = Buffer.concat([buf, chunk]);
        for (;;) {
          const frame = SocketModeServer.parse(buf);
          if (!frame) break;
          buf = buf.subarray(frame.size);
          if (frame.opcode === 0x1) {
            const msg = JSON.parse(frame.payload.toString('utf8')) as Record<string, unknown>;
            this.received.push(msg);
            for (const l of this.listeners) l(msg);
          } else if (frame.opcode === 0x9) {
            socket.write(SocketModeServer.frame(0xa, frame.payload));
          } else if (frame.opcode === 0x8) {
            socket.end(SocketModeServer.frame(0x8, frame.payload));
          }
        }
      });
      socket.on('error', () => undefined);
      socket.write(SocketModeServer.frame(0x1, Buffer.from(JSON.stringify({ type: 'hello', num_connections: 1, connection_info: { app_id: 'A0FAKEAPP1' } }))));
    });
  }

  /** Parses one masked client frame (RFC 6455 §5.2), or undefined when incomplete. */
  static parse(b: Buffer): { opcode: number; payload: Buffer; size: number } | undefined {
    if (b.length < 2) return undefined;
    const opcode = b[0]! & 0x0f;
    const masked = (b[1]! & 0x80) !== 0;
    let len = b[1]! & 0x7f;
    let off = 2;
    if (len === 126) {
      if (b.length < 4) return undefined;
      len = b.readUInt16BE(2);
      off = 4;
    } else if (len === 127) {
      if (b.length < 10) return undefined;
      len = Number(b.readBigUInt64BE(2));
      off = 10;
    }
    const maskOff = off;
    if (masked) off += 4;
    if (b.length < off + len) return undefined;
    const payload = Buffer.from(b.subarray(off, off + len));
    if (masked) for (let i = 0; i < len; i++) payload[i]! ^= b[maskOff + (i % 4)]!;
    return { opcode, payload, size: off + len };
  }

  /** An unmasked server frame. */
  static frame(opcode: number, payload: Buffer): Buffer {
    const len = payload.length;
    const head = len < 126 ? Buffer.from([0x80 | opcode, len]) : len < 65536 ? Buffer.from([0x80 | opcode, 126, len >> 8, len & 0xff]) : (() => {
      const h = Buffer.alloc(10);
      h[0] = 0x80 | opcode;
      h[1] = 127;
      h.writeBigUInt64BE(BigInt(len), 2);
      return h;
    })();
    return Buffer.concat([head, payload]);
  }

  /** Sends an envelope on the latest connection and resolves with the client's ack (same envelope_id). */
  send(envelope: Record<string, unknown>, ms = 20_000): Promise<{ ack: Record<string, unknown>; elapsedMs: number }> {
    const t0 = performance.now();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new TokenwatchError(ErrorCode.Timeout, `no ack for ${String(envelope.envelope_id)}`)), ms);
      const l = (m: Record<string, unknown>) => {
        if (m.envelope_id !== envelope.envelope_id) return;
        clearTimeout(timer);
        this.listeners = this.listeners.filter((x) => x !== l);
        resolve({ ack: m, elapsedMs: performance.now() - t0 });
      };
      this.listeners.push(l);
      this.sockets.at(-1)!.write(SocketModeServer.frame(0x1, Buffer.from(JSON.stringify(envelope))));
    });
  }

  async listen(): Promise<number> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    return (this.server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

/**
 * A Web API front on 127.0.0.1 (`port`, default any free one): answers apps.connections.open with `wsUrl`, forwards
 * the rest to the fake Slack.
 */
export async function startApiFront(fake: FakeSlack, wsUrl: string, port = 0): Promise<{ url: string; opens: number; close(): Promise<void> }> {
  const state = { opens: 0 };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const method = (req.url ?? '').replace(/^\/api\//, '');
      if (method === 'apps.connections.open') {
        state.opens++;
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: true, url: wsUrl }));
        return;
      }
      fetch(`${fake.apiUrl}${method}`, { method: 'POST', headers: { 'content-type': String(req.headers['content-type'] ?? ''), authorization: String(req.headers.authorization ?? '') }, body: Buffer.concat(chunks) }).then(
        async (r) => res.writeHead(r.status, { 'content-type': 'application/json', ...(r.headers.get('retry-after') ? { 'retry-after': r.headers.get('retry-after')! } : {}) }).end(await r.text()),
        () => res.writeHead(502).end(),
      );
    });
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/`,
    get opens() {
      return state.opens;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

