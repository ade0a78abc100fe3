/**
 * A loopback fake of the PagerDuty Events API v2 (`POST /v2/enqueue`), and a generic JSON webhook receiver, for
 * tests and the sandbox. Both listen on 127.0.0.1, port 0.
 *
 * PagerDuty, as documented (https://developer.pagerduty.com/docs/events-api-v2-overview,
 * https://developer.pagerduty.com/docs/events-api-v2/trigger-events/,
 * https://developer.pagerduty.com/docs/events-api-v2/resolve-events/):
 * - the body is JSON with `routing_key` (32 characters; an unknown one is refused here with 400 `invalid event`, as a
 *   key of no integration is by PagerDuty), `event_action` `trigger` | `acknowledge` | `resolve`, `dedup_key`
 *   (required for acknowledge/resolve, at most 255 characters); a trigger needs `payload.summary` (≤ 1024),
 *   `payload.source` and `payload.severity` (`critical` | `error` | `warning` | `info`);
 * - an accepted event answers `202 {"status":"success","message":"Event processed","dedup_key":…}`; an invalid one
 *   `400 {"status":"invalid event","message":"Event object is invalid","errors":[…]}`;
 * - **de-duplication**: a trigger whose `dedup_key` names an open (triggered) alert is folded into it, not a new
 *   alert; a resolve closes the alert; a resolve of no open alert is accepted and changes nothing.
 * {@link FakePagerDuty.failNext} makes the next requests answer an HTTP status (429, 500) instead.
 *
 * The webhook receiver accepts any JSON `POST` with 202 and keeps it, its `Idempotency-Key` header included.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One event as the fake received it (accepted or not). */
export interface FakePagerDutyEvent {
  body: Record<string, unknown>;
  /** The HTTP status it was answered with. */
  status: number;
  at: number;
}

/** An alert of the fake: opened by a trigger, closed by a resolve. */
export interface FakePagerDutyAlert {
  dedupKey: string;
  summary: string;
  severity: string;
  source: string;
  status: 'triggered' | 'resolved';
  /** Triggers folded into it (the first included). */
  triggers: number;
}

/** The running PagerDuty fake. */
export interface FakePagerDuty {
  /** Base URL, e.g. `http://127.0.0.1:41234` (configure `slack.paging.pagerduty.url` with it). */
  url: string;
  /** Every request, in order. */
  events: FakePagerDutyEvent[];
  /** Alerts by dedup key, in order of creation (a key triggered again after its resolve opens another). */
  alerts(): FakePagerDutyAlert[];
  /** The next `times` requests answer `status` (e.g. 429, 500) and change nothing. */
  failNext(status: number, times?: number): void;
  /** Called with each request as it arrives, before it is answered (a test may kill a process then). */
  onEvent(fn: (e: FakePagerDutyEvent) => void): void;
  close(): Promise<void>;
}

/** A routing key the fake accepts (any 32 alphanumerics given in `routingKeys`). */
export const FAKE_ROUTING_KEY = 'R0UT1NGKEYF0RTHEFAKEPAGERDUTY000';

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const SEVERITIES = new Set(['critical', 'error', 'warning', 'info']);

/** Starts the PagerDuty Events API v2 fake; see the module docstring. `routingKeys` default [{@link FAKE_ROUTING_KEY}]. */
export async function startFakePagerDuty(opts: { routingKeys?: string[]; now?: () => number } = {}): Promise<FakePagerDuty> {
  const keys = new Set(opts.routingKeys ?? [FAKE_ROUTING_KEY]);
  const now = opts.now ?? Date.now;
  const events: FakePagerDutyEvent[] = [];
  const alerts: FakePagerDutyAlert[] = [];
  const failures: number[] = [];
  const listeners: Array<(e: FakePagerDutyEvent) => void> = [];
  const server = createServer((req, res) => {
    void (async () => {
      if (req.method !== 'POST' || req.url !== '/v2/enqueue') return send(res, 404, { status: 'not found' });
      const raw = await readJson(req);
      const body = (typeof raw === 'object' && raw !== null && !Array.isArray(raw) ? raw : {}) as Record<string, unknown>;
      const e: FakePagerDutyEvent = { body, status: 0, at: now() };
      events.push(e);
      for (const l of listeners) l(e);
      const failure = failures.shift();
      if (failure !== undefined) {
        e.status = failure;
        return send(res, failure, failure === 429 ? { status: 'throttle event', message: 'Requests for this service are arriving too quickly.' } : { status: 'error' });
      }
      const errors: string[] = [];
      const action = body.event_action;
      const dedup = body.dedup_key;
      const payload = (body.payload ?? {}) as Record<string, unknown>;
      if (raw === undefined) errors.push('Event object is not valid JSON');
      if (typeof body.routing_key !== 'string' || !keys.has(body.routing_key)) errors.push("'routing_key' is invalid");
      if (action !== 'trigger' && action !== 'acknowledge' && action !== 'resolve') errors.push("'event_action' is invalid");
      if (dedup !== undefined && (typeof dedup !== 'string' || dedup.length > 255)) errors.push("'dedup_key' is invalid");
      if (action !== 'trigger' && typeof dedup !== 'string') errors.push("'dedup_key' is required for acknowledge and resolve");
      if (action === 'trigger') {
        if (typeof payload.summary !== 'string' || payload.summary.length === 0 || payload.summary.length > 1024) errors.push("'payload.summary' is invalid");
        if (typeof payload.source !== 'string' || payload.source.length === 0) errors.push("'payload.source' is missing");
        if (typeof payload.severity !== 'string' || !SEVERITIES.has(payload.severity)) errors.push("'payload.severity' is invalid");
      }
      if (errors.length > 0) {
        e.status = 400;
        return send(res, 400, { status: 'invalid event', message: 'Event object is invalid', errors });
      }
      const key = typeof dedup === 'string' ? dedup : `fake-${events.length}`;
      const open = alerts.find((a) => a.dedupKey === key && a.status === 'triggered');
      if (action === 'trigger') {
        if (open) open.triggers++;
        else alerts.push({ dedupKey: key, summary: String(payload.summary), severity: String(payload.severity), source: String(payload.source), status: 'triggered', triggers: 1 });
      } else if (action === 'resolve' && open) {
        open.status = 'resolved';
      }
      e.status = 202;
      send(res, 202, { status: 'success', message: 'Event processed', dedup_key: key });
    })();
  });
  const url = await listen(server);
  return {
    url,
    events,
    alerts: () => alerts.map((a) => ({ ...a })),
    failNext(status, times = 1) {
      for (let i = 0; i < times; i++) failures.push(status);
    },
    onEvent(fn) {
      listeners.push(fn);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** One request the webhook receiver got. */
export interface FakeWebhookRequest {
  body: unknown;
  idempotencyKey: string | undefined;
  at: number;
}

/** The running webhook receiver. */
export interface FakeWebhook {
  /** Where to POST, e.g. `http://127.0.0.1:41235/hook`. */
  url: string;
  requests: FakeWebhookRequest[];
  close(): Promise<void>;
}

/** Starts a generic JSON webhook receiver on `/hook`: every JSON POST is kept and answered 202. */
export async function startFakeWebhook(opts: { now?: () => number } = {}): Promise<FakeWebhook> {
  const now = opts.now ?? Date.now;
  const requests: FakeWebhookRequest[] = [];
  const server = createServer((req, res) => {
    void (async () => {
      if (req.method !== 'POST' || req.url !== '/hook') return send(res, 404, { error: 'not found' });
      const body = await readJson(req);
      if (body === undefined) return send(res, 400, { error: 'expected JSON' });
      const key = req.headers['idempotency-key'];
      requests.push({ body, idempotencyKey: typeof key === 'string' ? key : undefined, at: now() });
      send(res, 202, { accepted: true });
    })();
  });
  const base = await listen(server);
  return { url: `${base}/hook`, requests, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
